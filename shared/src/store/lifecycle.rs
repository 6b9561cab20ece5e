//! Lifecycle: what garbage collection, retention, eviction and the
//! operator's tenant erase ask of the metadata; the [`Lifecycle`] concern
//! of a [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::MaterializeKey;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, RefName, SessionId, TenantId};

/// Garbage collection's mark set, artifact users, idle sessions, pins,
/// eviction markers, the tenant erase and reclaiming freed space.
#[async_trait]
pub trait Lifecycle: Send + Sync + 'static {
    /// Every artifact `tenant`'s commits and cache entries name: the mark
    /// phase of garbage collection (one scan of the tenant's records, not
    /// a request per record).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn references(&self, tenant: &TenantId) -> Result<References>;

    /// Up to `limit` of the commits and cache entries whose artifact is
    /// `artifact`: an artifact with no users can be deleted.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>>;

    /// Up to `limit` sessions whose newest commit was created before
    /// `before`, by session id, starting after the session `after` (a
    /// cursor: the last id of the previous page).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>>;

    /// Pins (`pinned`) or unpins `pin`; true when that changed anything.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool>;

    /// The tenant's pins, sorted.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>>;

    /// Every tenant that has commits (a superset is fine), for the
    /// scheduled retention pass over all tenants.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn commit_tenants(&self) -> Result<Vec<TenantId>>;

    /// The operator's tenant erase: removes up to `limit` of `tenant`'s
    /// records (commits with their lineage, timeline, session, child and
    /// artifact-user entries, summary queue state, refs, pins, agent
    /// records and saves, materialization cache entries, the tenant's
    /// registry entry, and the branch records of a [`BranchStore`] that
    /// shares this store's database: SQLite, DynamoDB) and says what it
    /// removed; all zero once none remain, so a caller repeats it until
    /// then. Bearer tokens are the [`TokenStore`](super::TokenStore)'s. A store that can
    /// remove everything in one atomic step (memory, SQLite: one
    /// transaction) may remove more than `limit`; DynamoDB works in pages
    /// of a paginated Scan on the tenant's key prefix and BatchWriteItem
    /// deletes. Nothing of another tenant is touched. Run
    /// [`Lifecycle::reclaim_space`] after the last call.
    ///
    /// [`BranchStore`]: crate::branch::BranchStore
    ///
    /// # Errors
    /// `Unavailable`.
    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<TenantRecords>;

    /// Drops the artifact bytes stored inline with a commit
    /// ([`Commit::inline`](crate::commit::Commit::inline)), keeping the commit, its metadata and its
    /// `artifact_ref`: afterwards the commit reads with `inline: None`
    /// everywhere (every copy of it the backend keeps). True when it had
    /// inline bytes; false when it had none or does not exist. For eviction
    /// of old deltas: the caller decides the bytes are no longer needed,
    /// the store does not check.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn clear_inline(&self, tenant: &TenantId, commit: &CommitId) -> Result<bool>;

    /// Marks the commits `commits` as evicted in favour of `before` (the
    /// compaction or snapshot to materialize from instead): their delta
    /// artifacts may be gone, their metadata stays. The marker is durable,
    /// goes with the commit when it is deleted, and a later eviction
    /// replaces it; commits that do not exist are skipped. A marked commit
    /// leaves the summary queue for good (no summarizer can read its
    /// delta): [`SummaryQueue::missing_summaries`](crate::store::SummaryQueue::missing_summaries)
    /// no longer lists it and a claim on it fails, even if its summary is
    /// cleared later. Returns how many markers were set or changed.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn mark_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64>;

    /// The `before` of the eviction that marked `commit`, or `None` when it
    /// is not evicted (or does not exist). Read only on the error path of
    /// a missing artifact.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>>;

    /// After deletes (an erase, a collection): gives the space they freed
    /// back to the filesystem and makes what they removed unrecoverable
    /// from the store's own files; returns the bytes given back. SQLite
    /// zeroes deleted rows in place (`secure_delete`), runs an incremental
    /// vacuum when enough pages are free, and checkpoints and truncates its
    /// write-ahead log, which still holds the old images. Nothing to do for
    /// stores that manage their own space and whose deletes are final.
    ///
    /// # Errors
    /// `Unavailable`, also when a reader or another checkpoint held the
    /// write-ahead log (past a wait of 10 s) so that removed bytes may
    /// remain in it until the next compaction.
    async fn reclaim_space(&self) -> Result<u64> {
        Ok(0)
    }

    /// Writes the index records erasure and retention read for every
    /// commit and branch record that lacks them (records written before
    /// those indexes existed), across the store or for `tenant` alone:
    /// a session's commits and last write, a commit's children, an
    /// artifact's users, a session's branches, the tenant registry.
    /// Idempotent, and safe beside live writes: an entry is written only
    /// while its commit or branch still exists, and a session's last write
    /// never moves back. Nothing to do for stores whose indexes are kept
    /// by the database itself (SQLite's indexes over the commit rows, the
    /// memory store's maps).
    ///
    /// # Errors
    /// `Unavailable`; a re-run finishes what an interrupted one began.
    async fn backfill_index(&self, tenant: Option<&TenantId>) -> Result<Backfilled> {
        let _ = tenant;
        Ok(Backfilled::default())
    }

    /// Removes what the store keeps of `session` apart from its commits
    /// (its last-write record) once no commit of it is left, as the last
    /// step of an erase. A write to the session since leaves the record
    /// alone. Nothing to do for stores that keep no such record (SQLite
    /// and the memory store read a session's last write off its commits).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<()> {
        let _ = (tenant, session);
        Ok(())
    }
}

/// What one [`Lifecycle::backfill_index`] pass read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backfilled {
    /// Commits read.
    pub commits: u64,
    /// Branch records read.
    pub branches: u64,
    /// Index entries written (each an idempotent put; a re-run writes them
    /// again).
    pub entries: u64,
    /// Commits or branches deleted while the pass ran, whose entries were
    /// therefore not written.
    pub gone: u64,
}

/// What a tenant's records name: the mark set of garbage collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Artifacts commits name ([`BlobArea::Durable`](super::BlobArea::Durable)).
    pub durable: std::collections::HashSet<ArtifactRef>,
    /// Artifacts cache entries name ([`BlobArea::Cache`](super::BlobArea::Cache)).
    pub cached: std::collections::HashSet<ArtifactRef>,
}

/// What one [`Lifecycle::erase_tenant`] call removed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRecords {
    /// Commits.
    pub commits: u64,
    /// Refs.
    pub refs: u64,
    /// Materialization cache entries.
    pub cache: u64,
    /// Agent records and saves.
    pub agents: u64,
    /// Branch records (with their per-session and per-tenant counters, and
    /// the memories extracted from them).
    pub branches: u64,
    /// Everything else: timeline entries, lineage and index entries,
    /// summary queue state, pins, the tenant's registry entry.
    pub other: u64,
}

impl TenantRecords {
    /// Every record counted.
    pub fn total(&self) -> u64 {
        self.commits + self.refs + self.cache + self.agents + self.branches + self.other
    }

    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &TenantRecords) {
        self.commits += o.commits;
        self.refs += o.refs;
        self.cache += o.cache;
        self.agents += o.agents;
        self.branches += o.branches;
        self.other += o.other;
    }
}

/// What references an artifact (see [`Lifecycle::artifact_users`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactUser {
    /// A commit's delta, summary or snapshot.
    Commit(CommitId),
    /// A cached materialization.
    Cached(MaterializeKey),
}

/// What retention never erases: a session, or the session a ref's target
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Pin {
    /// A session.
    Session(SessionId),
    /// A ref.
    Ref(RefName),
}

impl Pin {
    /// `session` or `ref`.
    pub fn kind(&self) -> &'static str {
        match self {
            Pin::Session(_) => "session",
            Pin::Ref(_) => "ref",
        }
    }

    /// The session id or ref name.
    pub fn name(&self) -> &str {
        match self {
            Pin::Session(s) => s.as_str(),
            Pin::Ref(r) => r.as_str(),
        }
    }

    /// The pin of `kind` (`session` or `ref`) and `name`.
    ///
    /// # Errors
    /// `Invalid` (field `kind`, or the name's field) when malformed.
    pub fn parse(kind: &str, name: &str) -> Result<Self> {
        match kind {
            "session" => Ok(Pin::Session(name.parse()?)),
            "ref" => Ok(Pin::Ref(name.parse()?)),
            other => Err(Error::invalid(
                "kind",
                format!("pin kind {other:?} is neither \"session\" nor \"ref\""),
            )),
        }
    }
}
