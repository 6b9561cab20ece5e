//! The in-memory store's lifecycle ([`Lifecycle`](crate::store::Lifecycle)).

use super::{MemoryMetaStore, lock};
use crate::error::Result;
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, Pin, References, TenantRecords};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

#[async_trait]
impl crate::store::Lifecycle for MemoryMetaStore {
    async fn references(&self, tenant: &TenantId) -> Result<References> {
        let meta = lock(&self.meta);
        Ok(References {
            durable: meta
                .commits
                .iter()
                .filter(|((t, _), _)| t == tenant)
                .map(|(_, c)| c.artifact_ref)
                .chain(
                    meta.saves
                        .iter()
                        .filter(|((t, _), _)| t == tenant)
                        .flat_map(|(_, saves)| saves.values())
                        .flat_map(|s| {
                            std::iter::once(s.artifact_ref)
                                .chain(s.thread_artifacts.iter().copied())
                        }),
                )
                .chain(
                    meta.agents
                        .iter()
                        .filter(|((t, _), _)| t == tenant)
                        .filter_map(|(_, a)| a.working_context.map(|w| w.artifact_ref)),
                )
                .collect(),
            cached: meta
                .materialized
                .iter()
                .filter(|((t, _), _)| t == tenant)
                .map(|(_, m)| m.artifact_ref)
                .collect(),
        })
    }

    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        let m = lock(&self.meta);
        let commits = m
            .commits
            .iter()
            .filter(|((t, _), c)| t == tenant && &c.artifact_ref == artifact)
            .map(|((_, id), _)| ArtifactUser::Commit(*id));
        let cached = m
            .materialized
            .iter()
            .filter(|((t, _), v)| t == tenant && &v.artifact_ref == artifact)
            .map(|((_, k), _)| ArtifactUser::Cached(k.clone()));
        Ok(commits.chain(cached).take(limit).collect())
    }

    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        let m = lock(&self.meta);
        let after = after.map(SessionId::as_str);
        let mut newest: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
        for ((t, _), c) in &m.commits {
            if let (true, Some(s)) = (t == tenant, c.session_id.as_ref().map(SessionId::as_str)) {
                let e = newest.entry(s).or_insert(c.created_at);
                *e = (*e).max(c.created_at);
            }
        }
        newest
            .into_iter()
            .filter(|(s, at)| *at < before && after.is_none_or(|a| *s > a))
            .take(limit)
            .map(|(s, _)| s.parse())
            .collect()
    }

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), pin.clone());
        Ok(if pinned {
            m.pins.insert(key)
        } else {
            m.pins.remove(&key)
        })
    }

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        Ok(lock(&self.meta)
            .pins
            .iter()
            .filter(|(t, _)| t == tenant)
            .map(|(_, p)| p.clone())
            .collect())
    }

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
        let m = lock(&self.meta);
        let mut tenants: Vec<TenantId> = m.commits.keys().map(|(t, _)| t.clone()).collect();
        tenants.sort();
        tenants.dedup();
        Ok(tenants)
    }

    async fn erase_tenant(&self, tenant: &TenantId, _limit: usize) -> Result<TenantRecords> {
        // Everything at once, under the one lock.
        let mut m = lock(&self.meta);
        let mut r = TenantRecords::default();
        let before = m.commits.len();
        m.commits.retain(|(t, _), _| t != tenant);
        r.commits = (before - m.commits.len()) as u64;
        let before = m.refs.len();
        m.refs.retain(|(t, _), _| t != tenant);
        r.refs = (before - m.refs.len()) as u64;
        let before = m.materialized.len();
        m.materialized.retain(|(t, _), _| t != tenant);
        r.cache = (before - m.materialized.len()) as u64;
        m.cache_stamps.retain(|(t, _), _| t != tenant);
        m.evicted.retain(|(t, _), _| t != tenant);
        let before = m.agents.len();
        m.agents.retain(|(t, _), _| t != tenant);
        r.agents = (before - m.agents.len()) as u64;
        let saves: usize = m
            .saves
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, s)| s.len())
            .sum();
        m.saves.retain(|(t, _), _| t != tenant);
        r.agents += saves as u64;
        let entries: usize = m
            .lineages
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, l)| l.len())
            .sum::<usize>()
            + m.timelines
                .iter()
                .filter(|((t, _), _)| t == tenant)
                .map(|(_, l)| l.len())
                .sum::<usize>();
        m.lineages.retain(|(t, _), _| t != tenant);
        m.timelines.retain(|(t, _), _| t != tenant);
        let before = m.summary_states.len() + m.pins.len();
        m.summary_states.retain(|(t, _), _| t != tenant);
        m.pins.retain(|(t, _)| t != tenant);
        r.other = (entries + before - m.summary_states.len() - m.pins.len()) as u64;
        Ok(r)
    }

    async fn clear_inline(&self, tenant: &TenantId, commit: &CommitId) -> Result<bool> {
        let mut m = lock(&self.meta);
        Ok(m.commits
            .get_mut(&(tenant.clone(), *commit))
            .and_then(|c| c.inline.take())
            .is_some())
    }

    async fn mark_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64> {
        let mut m = lock(&self.meta);
        let mut changed = 0;
        for id in commits {
            let key = (tenant.clone(), *id);
            if m.commits.contains_key(&key) && m.evicted.insert(key, *before) != Some(*before) {
                changed += 1;
            }
        }
        Ok(changed)
    }

    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
        Ok(lock(&self.meta)
            .evicted
            .get(&(tenant.clone(), *commit))
            .copied())
    }
}
