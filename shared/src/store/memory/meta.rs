//! The in-memory [`MetaStore`] and [`TokenStore`]: commits, lineages,
//! timelines, refs, the materialization cache and tokens in maps under one
//! lock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::lock;
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::commit::Commit;
use crate::error::Result;
use crate::id::{ArtifactRef, CommitId, Hash, Principal, RefName, SessionId, TenantId};
use crate::store::{
    ArtifactUser, MaterializeKey, Materialized, MetaStore, MetadataPatch, Missing, MissingPage,
    Pin, PutCommit, RefMove, RefRecord, References, SummaryCursor, SummaryState, TAG_SUMMARIZING,
    TAG_SUMMARY_BY, TAG_SUMMARY_ERROR, TenantRecords, TokenRecord, TokenStore, claim_tag,
    ref_conflict,
};

#[derive(Debug, Default)]
struct Meta {
    commits: HashMap<(TenantId, CommitId), Commit>,
    /// (tenant, lineage) → depth → commit id.
    lineages: HashMap<(TenantId, CommitId), BTreeMap<u64, CommitId>>,
    /// (tenant, principal) → (µs, id).
    timelines: HashMap<(TenantId, Principal), BTreeMap<(i64, CommitId), ()>>,
    refs: BTreeMap<(TenantId, RefName), RefRecord>,
    materialized: HashMap<(TenantId, MaterializeKey), Materialized>,
    /// When each cache entry was last used (µs; a new entry counts as the
    /// most recently used).
    cache_stamps: HashMap<(TenantId, MaterializeKey), i64>,
    tokens: BTreeMap<Hash, TokenRecord>,
    /// The summary queue state of commits that have some.
    summary_states: HashMap<(TenantId, CommitId), SummaryState>,
    /// Agents' records.
    agents: HashMap<(TenantId, Principal), AgentRecord>,
    /// Agents' saves by id (ids sort by time).
    saves: HashMap<(TenantId, Principal), BTreeMap<SaveId, SaveRecord>>,
    /// What retention never erases.
    pins: BTreeSet<(TenantId, Pin)>,
    /// Evicted commits → the `before` of their eviction.
    evicted: HashMap<(TenantId, CommitId), CommitId>,
}

impl Meta {
    fn check_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
    ) -> Result<()> {
        let current = self
            .refs
            .get(&(tenant.clone(), name.clone()))
            .map(|r| r.target);
        if current.as_ref() != expected {
            return Err(ref_conflict(name, expected, current.as_ref()));
        }
        Ok(())
    }

    fn set_ref(
        &mut self,
        tenant: &TenantId,
        name: &RefName,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> RefRecord {
        let rec = RefRecord {
            name: name.clone(),
            target: *target,
            updated_at: now,
        };
        self.refs
            .insert((tenant.clone(), name.clone()), rec.clone());
        rec
    }
}

/// Metadata, timelines, refs, cache and tokens in maps.
#[derive(Debug, Default)]
pub struct MemoryMetaStore {
    meta: Mutex<Meta>,
}

impl MemoryMetaStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl MetaStore for MemoryMetaStore {
    async fn create_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit> {
        let mut m = lock(&self.meta);
        if let Some(existing) = m.commits.get(&(tenant.clone(), commit.id)).cloned() {
            return Ok(PutCommit::Existing(existing));
        }
        if let Some(mv) = ref_move {
            m.check_ref(tenant, &mv.name, mv.expected.as_ref())?;
        }
        let mut stored = commit.clone();
        let run = m
            .lineages
            .entry((tenant.clone(), commit.lineage))
            .or_default();
        if run.contains_key(&commit.depth) {
            stored.lineage = commit.id;
        }
        m.lineages
            .entry((tenant.clone(), stored.lineage))
            .or_default()
            .insert(stored.depth, stored.id);
        m.timelines
            .entry((tenant.clone(), stored.principal.clone()))
            .or_default()
            .insert((stored.created_at.timestamp_micros(), stored.id), ());
        m.commits
            .insert((tenant.clone(), stored.id), stored.clone());
        if let Some(mv) = ref_move {
            m.set_ref(tenant, &mv.name, &stored.id, stored.created_at);
        }
        Ok(PutCommit::Created(stored))
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        Ok(lock(&self.meta)
            .commits
            .get(&(tenant.clone(), *id))
            .cloned())
    }

    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>> {
        let m = lock(&self.meta);
        let Some(run) = m.lineages.get(&(tenant.clone(), *lineage)) else {
            return Ok(Vec::new());
        };
        Ok(run
            .range(..=max_depth)
            .rev()
            .take(limit)
            .filter_map(|(_, id)| m.commits.get(&(tenant.clone(), *id)).cloned())
            .collect())
    }

    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>> {
        let m = lock(&self.meta);
        let upper = (at.timestamp_micros(), CommitId::from_bytes([0xff; 16]));
        Ok(m.timelines
            .get(&(tenant.clone(), principal.clone()))
            .and_then(|t| t.range(..=upper).next_back())
            .map(|((_, id), _)| *id))
    }

    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>> {
        let mut m = lock(&self.meta);
        let Some(c) = m.commits.get_mut(&(tenant.clone(), *id)) else {
            return Ok(None);
        };
        if let Some(s) = &patch.summary {
            c.summary = s.clone();
        }
        if let Some(t) = &patch.tags {
            c.tags = t.clone();
        }
        Ok(Some(c.clone()))
    }

    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        Ok(lock(&self.meta)
            .refs
            .get(&(tenant.clone(), name.clone()))
            .cloned())
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        let mut m = lock(&self.meta);
        m.check_ref(tenant, name, expected)?;
        Ok(m.set_ref(tenant, name, target, now))
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        let mut m = lock(&self.meta);
        m.check_ref(tenant, name, Some(expected))?;
        m.refs.remove(&(tenant.clone(), name.clone()));
        Ok(())
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        let m = lock(&self.meta);
        Ok(m.refs
            .iter()
            .filter(|((t, n), _)| t == tenant && n.as_str().starts_with(prefix))
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        Ok(lock(&self.meta)
            .materialized
            .get(&(tenant.clone(), key.clone()))
            .cloned())
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let mut meta = lock(&self.meta);
        if !meta.commits.contains_key(&(tenant.clone(), key.commit)) {
            return Err(crate::store::gone_commit(&key.commit));
        }
        let newest = meta.cache_stamps.values().copied().max().unwrap_or(0);
        let k = (tenant.clone(), key.clone());
        meta.cache_stamps.insert(k.clone(), newest);
        meta.materialized.insert(k, value.clone());
        Ok(())
    }

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

    async fn touch_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        at: DateTime<Utc>,
    ) -> Result<()> {
        if let Some(stamp) = lock(&self.meta)
            .cache_stamps
            .get_mut(&(tenant.clone(), key.clone()))
        {
            *stamp = (*stamp).max(at.timestamp_micros());
        }
        Ok(())
    }

    async fn evict_materialized(
        &self,
        budget: u64,
        keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        let keep = (keep.0.clone(), keep.1.clone());
        let mut meta = lock(&self.meta);
        let mut total: u64 = meta.materialized.values().map(|m| m.size).sum();
        if total <= budget {
            return Ok(Vec::new());
        }
        let mut by_age: Vec<_> = meta
            .cache_stamps
            .iter()
            .filter(|(k, _)| **k != keep)
            .map(|(k, s)| (*s, k.clone()))
            .collect();
        by_age.sort_by_key(|a| a.0);
        let mut dropped = Vec::new();
        for (_, k) in by_age {
            if total <= budget {
                break;
            }
            meta.cache_stamps.remove(&k);
            if let Some(m) = meta.materialized.remove(&k) {
                total = total.saturating_sub(m.size);
                dropped.push((k.0, m.artifact_ref));
            }
        }
        dropped.retain(|(t, a)| {
            !meta
                .materialized
                .iter()
                .any(|((t2, _), m)| t2 == t && &m.artifact_ref == a)
        });
        dropped.sort();
        dropped.dedup();
        Ok(dropped)
    }

    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        let m = lock(&self.meta);
        let mut missing: Vec<(SummaryCursor, &Commit)> = m
            .commits
            .iter()
            .filter(|((t, _), c)| t == tenant && c.summary.is_none())
            .map(|(_, c)| (SummaryCursor::after(c), c))
            .filter(|(k, _)| after.is_none_or(|a| k > a))
            .collect();
        missing.sort_by_key(|(k, _)| *k);
        let more = missing.len() > limit;
        missing.truncate(limit);
        let next = if more {
            missing.last().map(|(k, _)| *k)
        } else {
            None
        };
        let items = missing
            .into_iter()
            .map(|(_, c)| Missing {
                commit: c.clone(),
                state: m
                    .summary_states
                    .get(&(tenant.clone(), c.id))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        Ok(MissingPage { items, next })
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        if m.commits.get(&key).is_none_or(|c| c.summary.is_some()) {
            return Ok(false);
        }
        let state = m.summary_states.entry(key.clone()).or_default();
        if state.claimed_until.is_some_and(|t| t > now)
            || (respect_backoff && state.retry_at.is_some_and(|t| t > now))
        {
            return Ok(false);
        }
        state.claimed_until = Some(until);
        if let Some(c) = m.commits.get_mut(&key) {
            c.tags.insert(TAG_SUMMARIZING.to_owned(), claim_tag(until));
        }
        Ok(true)
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        let Some(c) = m.commits.get_mut(&key).filter(|c| c.summary.is_none()) else {
            return Ok(false);
        };
        c.summary = Some(summary.to_owned());
        c.tags.insert(TAG_SUMMARY_BY.to_owned(), by.to_owned());
        c.tags.remove(TAG_SUMMARY_ERROR);
        c.tags.remove(TAG_SUMMARIZING);
        m.summary_states.remove(&key);
        Ok(true)
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        let Some(c) = m.commits.get_mut(&key).filter(|c| c.summary.is_none()) else {
            return Ok(());
        };
        c.tags
            .insert(TAG_SUMMARY_ERROR.to_owned(), error.to_owned());
        c.tags.remove(TAG_SUMMARIZING);
        let state = m.summary_states.entry(key).or_default();
        state.claimed_until = None;
        state.attempts += 1;
        state.last_error = Some(error.to_owned());
        state.retry_at = Some(retry_at);
        Ok(())
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        let m = lock(&self.meta);
        let mut tenants: Vec<TenantId> = m
            .commits
            .iter()
            .filter(|(_, c)| c.summary.is_none())
            .map(|((t, _), _)| t.clone())
            .collect();
        tenants.sort();
        tenants.dedup();
        Ok(tenants)
    }

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        use std::ops::Bound;
        let m = lock(&self.meta);
        let Some(t) = m.timelines.get(&(tenant.clone(), principal.clone())) else {
            return Ok(Vec::new());
        };
        let lower = match after {
            Some(a) => Bound::Excluded((a.timestamp_micros(), CommitId::from_bytes([0xff; 16]))),
            None => Bound::Unbounded,
        };
        let upper = Bound::Included((until.timestamp_micros(), CommitId::from_bytes([0xff; 16])));
        if lower_above_upper(after, until) {
            return Ok(Vec::new());
        }
        let range = t.range((lower, upper)).map(|((_, id), _)| *id);
        let ids: Vec<CommitId> = if newest_first {
            range.rev().take(limit).collect()
        } else {
            range.take(limit).collect()
        };
        Ok(ids
            .iter()
            .filter_map(|id| m.commits.get(&(tenant.clone(), *id)).cloned())
            .collect())
    }

    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        Ok(lock(&self.meta)
            .agents
            .get(&(tenant.clone(), agent.clone()))
            .cloned())
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        let mut m = lock(&self.meta);
        let rec = m.agents.entry((tenant.clone(), agent.clone())).or_default();
        *rec = std::mem::take(rec).merged(patch);
        Ok(rec.clone())
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        lock(&self.meta)
            .saves
            .entry((tenant.clone(), agent.clone()))
            .or_default()
            .entry(save.save_id)
            .or_insert_with(|| save.clone());
        Ok(())
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        Ok(lock(&self.meta)
            .saves
            .get(&(tenant.clone(), agent.clone()))
            .map(|s| s.values().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        Ok(lock(&self.meta)
            .saves
            .get(&(tenant.clone(), agent.clone()))
            .and_then(|s| s.get(id))
            .cloned())
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        Ok(lock(&self.meta)
            .saves
            .get_mut(&(tenant.clone(), agent.clone()))
            .and_then(|s| s.remove(id))
            .is_some())
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        let mut m = lock(&self.meta);
        match m.agents.get_mut(&(tenant.clone(), agent.clone())) {
            Some(rec) if rec.working_context.map(|w| w.artifact_ref) == Some(*artifact) => {
                rec.working_context = None;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        Ok(lock(&self.meta)
            .agents
            .remove(&(tenant.clone(), agent.clone()))
            .is_some())
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        Ok(lock(&self.meta)
            .commits
            .iter()
            .filter(|((t, _), c)| t == tenant && c.session_id.as_deref() == Some(session.as_str()))
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
        Ok(lock(&self.meta)
            .commits
            .iter()
            .filter(|((t, _), c)| t == tenant && c.parent.as_ref() == Some(parent))
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        Ok(lock(&self.meta)
            .materialized
            .iter()
            .filter(|((t, k), _)| t == tenant && &k.commit == commit)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        let mut m = lock(&self.meta);
        let k = (tenant.clone(), key.clone());
        // Its use stamp goes with it, or eviction keeps sorting over it.
        m.cache_stamps.remove(&k);
        Ok(m.materialized.remove(&k).is_some())
    }

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        let mut m = lock(&self.meta);
        let Some(stored) = m.commits.remove(&(tenant.clone(), commit.id)) else {
            return Ok(false);
        };
        let run_key = (tenant.clone(), stored.lineage);
        if let Some(run) = m.lineages.get_mut(&run_key) {
            if run.get(&stored.depth) == Some(&stored.id) {
                run.remove(&stored.depth);
            }
            if run.is_empty() {
                m.lineages.remove(&run_key);
            }
        }
        let tl_key = (tenant.clone(), stored.principal.clone());
        if let Some(tl) = m.timelines.get_mut(&tl_key) {
            tl.remove(&(stored.created_at.timestamp_micros(), stored.id));
            if tl.is_empty() {
                m.timelines.remove(&tl_key);
            }
        }
        m.summary_states.remove(&(tenant.clone(), stored.id));
        m.evicted.remove(&(tenant.clone(), stored.id));
        Ok(true)
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
            if let (true, Some(s)) = (t == tenant, c.session_id.as_deref()) {
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

/// Whether the range (`after`, `until`] is empty (a `BTreeMap` range
/// panics on bounds in the wrong order).
fn lower_above_upper(after: Option<DateTime<Utc>>, until: DateTime<Utc>) -> bool {
    after.is_some_and(|a| a >= until)
}

#[async_trait]
impl TokenStore for MemoryMetaStore {
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord> {
        let rec = TokenRecord::new(hash, tenant, now);
        lock(&self.meta).tokens.insert(*hash, rec.clone());
        Ok(rec)
    }

    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>> {
        Ok(lock(&self.meta).tokens.get(hash).map(|r| r.tenant.clone()))
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let mut all: Vec<_> = lock(&self.meta).tokens.values().cloned().collect();
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(all)
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let mut m = lock(&self.meta);
        let before = m.tokens.len();
        m.tokens.retain(|_, r| r.id != id);
        Ok(m.tokens.len() != before)
    }
}
