//! The in-memory store's commits, their runs and the timelines ([`Commits`](crate::store::Commits)).

use super::{MemoryMetaStore, lock};
use crate::commit::Commit;
use crate::error::Result;
use crate::id::{CommitId, Principal, SessionId, TenantId};
use crate::store::commits::{batch_move_settled, continuing, timeline_micros};
use crate::store::{BatchCommit, BatchRefMove, Batched, MetadataPatch, PutCommit};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::Commits for MemoryMetaStore {
    async fn create_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched> {
        let mut m = lock(&self.meta);
        // Every check before the first write: all or nothing.
        let existing: Vec<Option<Commit>> = commits
            .iter()
            .map(|c| m.commits.get(&(tenant.clone(), c.commit.id)).cloned())
            .collect();
        let mut settled = Vec::with_capacity(moves.len());
        for (i, mv) in moves.iter().enumerate() {
            let current = m
                .refs
                .get(&(tenant.clone(), mv.name.clone()))
                .map(|r| r.target);
            settled.push(batch_move_settled(i, mv, current.as_ref())?);
        }
        let mut out: Vec<PutCommit> = Vec::with_capacity(commits.len());
        for (c, existing) in commits.iter().zip(existing) {
            if let Some(e) = existing {
                out.push(PutCommit::Existing(e));
                continue;
            }
            let commit = match c.parent_in_batch {
                Some(j) => continuing(c.commit.clone(), out[j].commit()),
                None => c.commit.clone(),
            };
            out.push(PutCommit::Created(m.insert_commit(tenant, commit)));
        }
        let refs = moves
            .iter()
            .zip(settled)
            .map(|(mv, settled)| match settled {
                true => m.refs[&(tenant.clone(), mv.name.clone())].clone(),
                false => m.set_ref(tenant, &mv.name, &mv.target, now),
            })
            .collect();
        Ok(Batched { commits: out, refs })
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

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        let Some(micros) = timeline_micros(after, until, limit) else {
            return Ok(Vec::new());
        };
        let m = lock(&self.meta);
        let Some(t) = m.timelines.get(&(tenant.clone(), principal.clone())) else {
            return Ok(Vec::new());
        };
        let first = (*micros.start(), CommitId::from_bytes([0; 16]));
        let last = (*micros.end(), CommitId::from_bytes([0xff; 16]));
        let range = t.range(first..=last).map(|((_, id), _)| *id);
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

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        Ok(lock(&self.meta)
            .commits
            .iter()
            .filter(|((t, _), c)| t == tenant && c.session_id.as_ref() == Some(session))
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
}
