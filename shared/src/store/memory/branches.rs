//! The in-memory [`BranchStore`]: the reference behaviour, under one lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::lock;
use crate::branch::memories::{MemoryId, MemoryRecord};
use crate::branch::{
    ActiveBranch, BranchRecord, BranchStatus, BranchStore, Finish, RateLimits, branch_exists,
    branch_not_found, check_limits, minute_window, not_active,
};
use crate::error::Result;
use crate::id::{BranchId, CommitId, SessionId, TenantId};

#[derive(Debug, Default)]
struct State {
    branches: BTreeMap<(TenantId, BranchId), BranchRecord>,
    owners: HashMap<(TenantId, String), String>,
    windows: HashMap<(TenantId, String, i64), u32>,
    memories: BTreeMap<(TenantId, MemoryId), MemoryRecord>,
}

/// Branches in a map.
#[derive(Debug, Default)]
pub struct MemoryBranchStore {
    state: Mutex<State>,
}

impl MemoryBranchStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }
}

#[async_trait]
impl BranchStore for MemoryBranchStore {
    async fn create_branch(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        limits: &RateLimits,
    ) -> Result<()> {
        let mut s = self.lock();
        let key = (tenant.clone(), rec.id);
        if s.branches.contains_key(&key) {
            return Err(branch_exists(&rec.id));
        }
        let active = |f: &dyn Fn(&BranchRecord) -> bool| {
            s.branches
                .iter()
                .filter(|((t, _), b)| t == tenant && b.status == BranchStatus::Active && f(b))
                .count() as u64
        };
        let session_active = active(&|b| b.session_id == rec.session_id);
        let tenant_active = active(&|_| true);
        let wkey = (
            tenant.clone(),
            rec.session_id.clone(),
            minute_window(rec.created_at),
        );
        let window = u64::from(s.windows.get(&wkey).copied().unwrap_or(0));
        check_limits(rec, limits, session_active, tenant_active, window)?;
        *s.windows.entry(wkey).or_default() += 1;
        s.owners
            .entry((tenant.clone(), rec.session_id.clone()))
            .or_insert_with(|| rec.owner.clone());
        s.branches.insert(key, rec.clone());
        Ok(())
    }

    async fn get_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>> {
        Ok(self.lock().branches.get(&(tenant.clone(), *id)).cloned())
    }

    async fn active_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<ActiveBranch>> {
        Ok(self
            .lock()
            .branches
            .iter()
            .filter(|((t, _), b)| {
                t == tenant && b.session_id == session && b.status == BranchStatus::Active
            })
            .map(|(_, b)| ActiveBranch {
                id: b.id,
                depth: b.depth,
                parent_branch: b.parent_branch,
            })
            .collect())
    }

    async fn session_owner(&self, tenant: &TenantId, session: &str) -> Result<Option<String>> {
        Ok(self
            .lock()
            .owners
            .get(&(tenant.clone(), session.to_owned()))
            .cloned())
    }

    async fn add_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<BranchRecord> {
        let mut s = self.lock();
        let b = s
            .branches
            .get_mut(&(tenant.clone(), *id))
            .ok_or_else(|| branch_not_found(id))?;
        if b.status != BranchStatus::Active {
            return Err(not_active(id, b.status));
        }
        b.tokens_used = b.tokens_used.saturating_add(tokens);
        Ok(b.clone())
    }

    async fn finish_branch(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        finish: &Finish,
    ) -> Result<BranchRecord> {
        let mut s = self.lock();
        let b = s
            .branches
            .get_mut(&(tenant.clone(), *id))
            .ok_or_else(|| branch_not_found(id))?;
        if b.status != BranchStatus::Active {
            return Err(not_active(id, b.status));
        }
        b.status = finish.status;
        b.completed_at = Some(finish.at);
        b.reason = finish.reason.clone();
        Ok(b.clone())
    }

    async fn annotate(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        timer: Option<&str>,
        return_commit: Option<&CommitId>,
    ) -> Result<()> {
        let mut s = self.lock();
        let b = s
            .branches
            .get_mut(&(tenant.clone(), *id))
            .ok_or_else(|| branch_not_found(id))?;
        if let Some(t) = timer {
            b.timer = Some(t.to_owned());
        }
        if let Some(c) = return_commit {
            b.return_commit = Some(*c);
        }
        Ok(())
    }

    async fn all_active(&self) -> Result<Option<Vec<(TenantId, BranchId, DateTime<Utc>)>>> {
        Ok(Some(
            self.lock()
                .branches
                .iter()
                .filter(|(_, b)| b.status == BranchStatus::Active)
                .map(|((t, id), b)| (t.clone(), *id, b.deadline))
                .collect(),
        ))
    }

    async fn session_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<BranchId>> {
        Ok(self
            .lock()
            .branches
            .iter()
            .filter(|((t, _), b)| t == tenant && b.session_id == session)
            .map(|((_, id), _)| *id)
            .collect())
    }

    async fn delete_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<bool> {
        let mut s = self.lock();
        s.memories
            .remove(&(tenant.clone(), MemoryId::of_branch(tenant, id)));
        Ok(s.branches.remove(&(tenant.clone(), *id)).is_some())
    }

    async fn put_memory(&self, tenant: &TenantId, memory: &MemoryRecord) -> Result<()> {
        self.lock()
            .memories
            .insert((tenant.clone(), memory.id), memory.clone());
        Ok(())
    }

    async fn recent_memories(&self, tenant: &TenantId, max: usize) -> Result<Vec<MemoryRecord>> {
        let s = self.lock();
        let mut out: Vec<MemoryRecord> = s
            .memories
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|(_, m)| m.clone())
            .collect();
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        out.truncate(max);
        Ok(out)
    }

    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<bool> {
        let mut s = self.lock();
        let owner = s
            .owners
            .remove(&(tenant.clone(), session.to_string()))
            .is_some();
        let before = s.windows.len();
        s.windows
            .retain(|(t, sess, _), _| !(t == tenant && sess == session.as_str()));
        Ok(owner || s.windows.len() < before)
    }
}
