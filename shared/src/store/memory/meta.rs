//! The in-memory [`MetaStore`](crate::store::MetaStore) and
//! [`TokenStore`](crate::store::TokenStore): commits, lineages,
//! timelines, refs, the materialization cache and tokens in maps under one
//! lock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::commit::Commit;
use crate::error::Result;
use crate::id::{CommitId, Hash, Principal, RefName, TenantId};
use crate::store::{
    MaterializeKey, Materialized, Pin, RefRecord, SummaryState, TokenRecord, ref_conflict,
};

#[derive(Debug, Default)]
pub(super) struct Meta {
    pub(super) commits: HashMap<(TenantId, CommitId), Commit>,
    /// (tenant, lineage) → depth → commit id.
    pub(super) lineages: HashMap<(TenantId, CommitId), BTreeMap<u64, CommitId>>,
    /// (tenant, principal) → (µs, id).
    pub(super) timelines: HashMap<(TenantId, Principal), BTreeMap<(i64, CommitId), ()>>,
    pub(super) refs: BTreeMap<(TenantId, RefName), RefRecord>,
    pub(super) materialized: HashMap<(TenantId, MaterializeKey), Materialized>,
    /// When each cache entry was last used (µs; a new entry counts as the
    /// most recently used).
    pub(super) cache_stamps: HashMap<(TenantId, MaterializeKey), i64>,
    pub(super) tokens: BTreeMap<Hash, TokenRecord>,
    /// The summary queue state of commits that have some.
    pub(super) summary_states: HashMap<(TenantId, CommitId), SummaryState>,
    /// Agents' records.
    pub(super) agents: HashMap<(TenantId, Principal), AgentRecord>,
    /// Agents' saves by id (ids sort by time).
    pub(super) saves: HashMap<(TenantId, Principal), BTreeMap<SaveId, SaveRecord>>,
    /// What retention never erases.
    pub(super) pins: BTreeSet<(TenantId, Pin)>,
    /// Evicted commits → the `before` of their eviction.
    pub(super) evicted: HashMap<(TenantId, CommitId), CommitId>,
}

impl Meta {
    pub(super) fn check_ref(
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

    /// Writes a new commit with its run slot and timeline entry, starting
    /// a run of its own when its parent's next slot is taken (a fork);
    /// returns it as stored.
    pub(super) fn insert_commit(&mut self, tenant: &TenantId, commit: Commit) -> Commit {
        let mut stored = commit;
        let taken = self
            .lineages
            .get(&(tenant.clone(), stored.lineage))
            .is_some_and(|run| run.contains_key(&stored.depth));
        if taken {
            stored.lineage = stored.id;
        }
        self.lineages
            .entry((tenant.clone(), stored.lineage))
            .or_default()
            .insert(stored.depth, stored.id);
        self.timelines
            .entry((tenant.clone(), stored.principal.clone()))
            .or_default()
            .insert((stored.created_at.timestamp_micros(), stored.id), ());
        self.commits
            .insert((tenant.clone(), stored.id), stored.clone());
        stored
    }

    pub(super) fn set_ref(
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
    pub(super) meta: Mutex<Meta>,
}

impl MemoryMetaStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}
