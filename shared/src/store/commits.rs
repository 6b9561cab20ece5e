//! Commits, their runs (lineages) and the principals' timelines: the
//! [`Commits`] concern of a [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::RefMove;
use crate::commit::{Commit, Tags};
use crate::error::Result;
use crate::id::{CommitId, Principal, SessionId, TenantId};

/// Commits, runs and timelines.
///
/// Every method is one request to the underlying store, scoped by tenant.
#[async_trait]
pub trait Commits: Send + Sync + 'static {
    /// The primitive under [`MetaStore::put_commit`](super::MetaStore::put_commit): writes a new commit,
    /// its timeline entry and the optional ref move (checked against
    /// `ref_move.expected`) as one atomic write, starting a run of its own
    /// on a fork as `put_commit` says. If a commit with the same id exists,
    /// writes nothing at all (not the ref move either) and returns the
    /// stored commit as `Existing`.
    ///
    /// # Errors
    /// `Conflict` with the current tip when a new commit's ref move is
    /// stale; `Unavailable`.
    async fn create_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit>;

    /// One commit.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>>;

    /// The commits of run `lineage` at depth `max_depth` and below, deepest
    /// first, at most `limit` of them.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>>;

    /// The newest commit of `principal` created at or before `at`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>>;

    /// Applies `patch` to a commit's summary and tags.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>>;

    /// The commits on `principal`'s timeline created after `after` (all
    /// when `None`) and at or before `until`, at most `limit` of them:
    /// the oldest when `newest_first` is false (returned oldest first),
    /// else the newest (returned newest first). One range read of the
    /// timeline (on DynamoDB a Query plus a batch read of those commits):
    /// its cost follows the range, not the length of the timeline.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>>;

    /// Every commit whose `session_id` is `session`, in no particular
    /// order. One indexed read (a session index).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>>;

    /// The commits whose parent is `parent` (its children: the next commit
    /// of its run and every fork), in no particular order.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>>;

    /// Removes a commit with everything that indexes it (its place in its
    /// run, its timeline entry, its session and summary-queue entries),
    /// atomically; false when it did not exist. Refs and cache entries are
    /// the caller's to remove first.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool>;
}

/// The outcome of [`MetaStore::put_commit`](super::MetaStore::put_commit) and [`Commits::create_commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCommit {
    /// The commit was written; this is it as stored (with its lineage).
    Created(Commit),
    /// A commit with this id already existed; this is the stored one.
    Existing(Commit),
}

impl PutCommit {
    /// The stored commit.
    pub fn commit(&self) -> &Commit {
        match self {
            PutCommit::Created(c) | PutCommit::Existing(c) => c,
        }
    }
}

/// A change to a commit's mutable metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataPatch {
    /// `Some(None)` clears the summary; `None` leaves it.
    pub summary: Option<Option<String>>,
    /// Replaces the tags when given.
    pub tags: Option<Tags>,
}
