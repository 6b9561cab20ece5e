//! The in-memory [`MetaStore`] and [`TokenStore`]: commits, lineages,
//! timelines, refs, the materialization cache and tokens in maps under one
//! lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::lock;
use crate::commit::Commit;
use crate::error::Result;
use crate::id::{CommitId, Hash, Principal, RefName, TenantId};
use crate::store::{
    MaterializeKey, Materialized, MetaStore, MetadataPatch, PutCommit, RefMove, RefRecord,
    TokenRecord, TokenStore, ref_conflict,
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
    tokens: BTreeMap<Hash, TokenRecord>,
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
        lock(&self.meta)
            .materialized
            .insert((tenant.clone(), key.clone()), value.clone());
        Ok(())
    }
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
