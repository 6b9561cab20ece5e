//! Storage: the [`BlobStore`] for artifacts, the [`MetaStore`] for commits,
//! timelines, refs and the materialization cache, and the [`TokenStore`]
//! that maps bearer tokens to tenants. The fourth store, the
//! [`BranchStore`](crate::branch::BranchStore) of context folding, is
//! defined with its records in [`crate::branch`].
//!
//! The traits are small and say nothing about policy: what to write when is
//! decided by `service`. Rules every backend shares are written here once
//! (e.g. [`MetaStore::put_commit`]'s retry rule over the backend's
//! [`MetaStore::create_commit`]). Every behaviour a backend must have is
//! written once in `conformance` and run against every backend.
//!
//! # Layout
//! Grouped by backend; each implements every store it offers:
//! - [`memory`]: blobs, meta, tokens and branches in maps (tests,
//!   `ctx serve --store memory`).
//! - [`local`]: artifacts as files, meta, tokens and branches in one
//!   SQLite database (the embedded default).
//! - [`aws`]: artifacts in S3; meta, tokens and branches in one DynamoDB
//!   table.
//! - `packed`: inline deltas at rest, LZ4 or raw (local and aws).
//! - `conformance`: the behaviours, and `run_all` that every backend's
//!   tests call once (with the `conformance` feature or in tests).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::commit::Stop;
use crate::commit::{Commit, Tags};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::format::translate::Tier;
use crate::id::{ArtifactRef, CommitId, Hash, Principal, RefName, SessionId, TenantId};

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod counting;
#[cfg(feature = "local")]
pub mod local;
pub mod memory;
#[cfg(any(feature = "local", feature = "aws"))]
pub(crate) mod packed;

/// The result of storing an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutBlob {
    /// Its reference.
    pub artifact: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// False when the bytes were already stored.
    pub created: bool,
}

/// Content-addressed artifact storage, scoped by tenant.
///
/// Writes are create-only: an artifact's key is its hash, so a second write
/// of the same bytes stores nothing.
#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Stores `bytes` under their BLAKE3 hash, if not already there.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be written.
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob>;

    /// The stored bytes, unverified; callers use [`BlobStoreExt::get`].
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn read(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>>;

    /// The size of the artifact if it is stored.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn size(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>>;

    /// Removes the artifact (from the durable and the cache area both);
    /// `true` when it was stored. Idempotent: deleting an absent artifact
    /// is `Ok(false)`. Callers decide that nothing references it any more;
    /// the store does not check.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be written.
    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool>;

    /// A URL the caller can PUT an artifact's bytes to directly (for bodies
    /// too large for the API), or `None` when the store cannot hand one
    /// out. The bytes land in a staging area until [`BlobStore::promote_upload`].
    ///
    /// # Errors
    /// `Unavailable`.
    async fn presign_upload(
        &self,
        _tenant: &TenantId,
        _artifact: &ArtifactRef,
        _size: u64,
        _expires_in: std::time::Duration,
    ) -> Result<Option<PresignedUpload>> {
        Ok(None)
    }

    /// Moves staged bytes for `artifact` into the store after re-hashing
    /// them; `None` when nothing is staged.
    ///
    /// # Errors
    /// `Invalid` (field `artifact_ref`) when the staged bytes do not hash to
    /// `artifact` (they are discarded); `Unavailable`.
    async fn promote_upload(
        &self,
        _tenant: &TenantId,
        _artifact: &ArtifactRef,
    ) -> Result<Option<u64>> {
        Ok(None)
    }
    /// Stores `bytes` in the [`BlobArea::Cache`] area: a materialized or
    /// translated result, which may be evicted at any time and is rebuilt
    /// on demand. [`BlobStore::read`] and [`BlobStore::size`] find cached
    /// artifacts too; a commit never names one (a checkpoint naming a
    /// cached artifact copies it into the durable area first).
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be written.
    async fn put_cached(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.put_cached_hashed(tenant, ArtifactRef::of(&bytes), bytes)
            .await
    }

    /// [`BlobStore::put_cached`] of bytes whose reference the caller has
    /// already computed (`artifact` is `ArtifactRef::of(&bytes)`:
    /// materialize hashes every result as it builds it), so that no store
    /// hashes a 1 MB result again.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be written.
    async fn put_cached_hashed(
        &self,
        tenant: &TenantId,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob>;

    /// The artifact as stored in `area` (not looking in any other).
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn stat(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>>;

    /// The artifacts of `tenant` in `area` with hashes after `after`, in
    /// hash order, at most `limit` (a page; the garbage collector's
    /// listing). Empty for an area the store does not have.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be listed.
    async fn list(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        after: Option<&ArtifactRef>,
        limit: usize,
    ) -> Result<Vec<BlobInfo>>;

    /// The artifact's bytes as stored in `area` alone, unverified (callers
    /// check them with [`verify`]): a cached result is read without first
    /// missing in the durable area.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn read_in(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>>;

    /// Marks a durable artifact as just used, as writing it again would
    /// (its write time becomes now), so no collection sweeps it for a
    /// grace period; its size, or `None` when it is not stored. A
    /// checkpoint naming an uploaded artifact calls this before it writes
    /// the commit.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>>;

    /// The collector's removal: removes the artifact from `area` alone if
    /// it was last written (or touched) before `cutoff`; true when removed.
    /// The check and the removal are atomic with respect to this store's
    /// puts and touches (in this process) where the backend allows it; on
    /// S3 a HEAD precedes the delete.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn sweep(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
        cutoff: DateTime<Utc>,
    ) -> Result<bool>;

    /// Removes the artifact from a non-durable `area` ([`BlobArea::Cache`]
    /// or [`BlobArea::Staged`]) alone; false if it was not there. Durable
    /// artifacts are removed with [`BlobStore::delete`].
    ///
    /// # Errors
    /// `Invalid` for [`BlobArea::Durable`]; `Unavailable`.
    async fn remove(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<bool>;

    /// The operator's tenant erase: removes up to `limit` of `tenant`'s
    /// stored objects from every [`BlobArea`] (durable, cached and staged)
    /// and returns how many it removed; 0 once none remain, so a caller
    /// repeats it until then. Idempotent: removing what is already gone is
    /// not an error. The filesystem store also removes the tenant's (then
    /// empty) directories; S3 deletes in batches of 1,000 keys
    /// (DeleteObjects). Nothing of another tenant is touched.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<u64> {
        let mut removed = 0u64;
        for area in BlobArea::ALL {
            let left = limit.saturating_sub(usize::try_from(removed).unwrap_or(usize::MAX));
            if left == 0 {
                break;
            }
            for info in self.list(tenant, area, None, left).await? {
                let gone = match area {
                    BlobArea::Durable => self.delete(tenant, &info.artifact).await?,
                    BlobArea::Cache | BlobArea::Staged => {
                        self.remove(tenant, area, &info.artifact).await?
                    }
                };
                removed += u64::from(gone);
            }
        }
        Ok(removed)
    }
}

/// Where in a [`BlobStore`] an artifact lives: its lifecycle policy.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BlobArea {
    /// Deltas, compactions and snapshots: kept while a commit names them
    /// (S3 `cas/`, local `cas/`).
    Durable,
    /// Materialized and translated results: ephemeral, evicted by the
    /// embedded LRU budget or an S3 lifecycle rule, rebuilt on demand (S3
    /// `cache/`, local `cache/`).
    Cache,
    /// Direct uploads waiting for the checkpoint that names them (S3
    /// `uploads/`; the embedded store takes no direct uploads).
    Staged,
}

impl BlobArea {
    /// Every area, in the order the garbage collector sweeps them.
    pub const ALL: [BlobArea; 3] = [BlobArea::Durable, BlobArea::Cache, BlobArea::Staged];
}

/// One stored artifact, as a listing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobInfo {
    /// The artifact.
    pub artifact: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (or, for a durable artifact, put again):
    /// the garbage collector never sweeps one younger than its grace
    /// period.
    pub modified: DateTime<Utc>,
}

/// The refusal of [`MetaStore::put_materialized`] for a commit that is
/// not there (erased while it was materialized).
pub fn gone_commit(commit: &CommitId) -> Error {
    Error::not_found(format!("commit {commit}"))
}

/// The refusal of [`BlobStore::remove`] for the durable area.
pub fn durable_remove_refused() -> Error {
    Error::invalid(
        "area",
        "durable artifacts are removed with delete, not remove",
    )
}

/// A presigned direct upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PresignedUpload {
    /// Where to send the bytes.
    pub url: String,
    /// The method to use (`PUT`).
    pub method: String,
    /// Headers the request must carry exactly.
    pub headers: std::collections::BTreeMap<String, String>,
    /// When the URL stops working.
    pub expires_at: DateTime<Utc>,
}

/// Helpers every [`BlobStore`] gets.
#[async_trait]
pub trait BlobStoreExt: BlobStore {
    /// The artifact's bytes, re-hashed: bytes that do not match their
    /// reference are never returned. A cached copy
    /// ([`BlobArea::Cache`], not written durably) that does not match is a
    /// miss: it is removed and the durable copy, if any, is returned.
    ///
    /// # Errors
    /// `Internal` when a durable copy does not match; `Unavailable` when
    /// storage fails.
    async fn get(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        let Some(bytes) = self.read(tenant, artifact).await? else {
            return Ok(None);
        };
        if verify(artifact, &bytes).is_ok() {
            return Ok(Some(bytes));
        }
        // Which copy was bad: the cached one is dropped (a crash can leave
        // it short or garbled), the durable one is an error, unless a good
        // cached copy answers (then the bad durable copy is logged).
        if let Some(cached) = self.get_cached(tenant, artifact).await? {
            tracing::error!(
                %tenant,
                %artifact,
                "the durable copy does not match its hash; answered from the cached copy"
            );
            return Ok(Some(cached));
        }
        let Some(durable) = self.read_in(tenant, BlobArea::Durable, artifact).await? else {
            return Ok(None);
        };
        verify(artifact, &durable)?;
        Ok(Some(durable))
    }

    /// The cached result `artifact` ([`BlobArea::Cache`] alone), verified;
    /// `None` when it is missing or does not match its hash (a bad copy is
    /// removed, so the next put writes it again).
    ///
    /// # Errors
    /// `Unavailable` when storage fails.
    async fn get_cached(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        let Some(bytes) = self.read_in(tenant, BlobArea::Cache, artifact).await? else {
            return Ok(None);
        };
        if verify(artifact, &bytes).is_ok() {
            return Ok(Some(bytes));
        }
        self.remove(tenant, BlobArea::Cache, artifact).await?;
        Ok(None)
    }
}

impl<T: BlobStore + ?Sized> BlobStoreExt for T {}

/// Checks that `bytes` hash to `artifact`.
///
/// # Errors
/// `Internal` naming both hashes.
pub fn verify(artifact: &ArtifactRef, bytes: &[u8]) -> Result<()> {
    let actual = Hash::of(bytes);
    if &actual != artifact.hash() {
        return Err(Error::internal(format!(
            "artifact {artifact} failed verification: its {} stored bytes hash to art-{actual}",
            bytes.len()
        )));
    }
    Ok(())
}

/// A ref move requested together with a checkpoint (the `ref` of a
/// checkpoint request, so unknown fields are refused like any request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefMove {
    /// The ref to move to the new commit.
    #[schema(value_type = String)]
    pub name: RefName,
    /// The tip the caller believes the ref has; absent means the ref must
    /// not exist yet.
    pub expected: Option<CommitId>,
}

/// A named, mutable pointer to a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RefRecord {
    /// The ref's name.
    #[schema(value_type = String)]
    pub name: RefName,
    /// The commit it points at.
    pub target: CommitId,
    /// When it last moved.
    pub updated_at: DateTime<Utc>,
}

/// The outcome of [`MetaStore::put_commit`] and [`MetaStore::create_commit`].
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

/// The key of a materialization in the cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MaterializeKey {
    /// The commit materialized.
    pub commit: CommitId,
    /// The stop point.
    pub stop: Stop,
    /// The format produced.
    pub format: FormatId,
}

/// A cached materialization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Materialized {
    /// The artifact holding the materialized context.
    pub artifact_ref: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// Messages in it.
    pub message_count: u64,
    /// Tokens in it.
    pub token_count: u64,
    /// How it was produced.
    pub tier: Tier,
}

/// What a tenant's records name: the mark set of garbage collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Artifacts commits name ([`BlobArea::Durable`]).
    pub durable: std::collections::HashSet<ArtifactRef>,
    /// Artifacts cache entries name ([`BlobArea::Cache`]).
    pub cached: std::collections::HashSet<ArtifactRef>,
}

/// A registered bearer token (only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// A short public id for listing and revoking: `tok-` + 12 hex digits.
    pub id: String,
    /// The tenant the token acts for.
    pub tenant: TenantId,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}

impl TokenRecord {
    /// The record of the token hashing to `hash`, added for `tenant` at
    /// `now` (its public id derived from the hash).
    pub fn new(hash: &Hash, tenant: &TenantId, now: DateTime<Utc>) -> Self {
        TokenRecord {
            id: token_id(hash),
            tenant: tenant.clone(),
            created_at: now,
        }
    }
}

/// Commit metadata, timelines, refs and the materialization cache.
///
/// Every method is one request to the underlying store, scoped by tenant.
#[async_trait]
pub trait MetaStore: Send + Sync + 'static {
    /// Writes `commit`, its principal's timeline entry and, when `ref_move`
    /// is given, the ref's move to the commit: all of it or nothing.
    ///
    /// `commit.lineage` names the run the caller would continue (the
    /// parent's, or the commit's own id for a root). If the parent already
    /// has a child in that run (a fork), the store starts a new run whose
    /// lineage is the commit's own id; the returned commit says which.
    ///
    /// If a commit with the same id exists nothing is written and it is
    /// returned as `Existing`; a requested ref move is still made unless the
    /// ref already points at it.
    ///
    /// Provided, and not meant to be overridden: the retry rule lives here
    /// once, over the backend's [`MetaStore::create_commit`],
    /// [`MetaStore::get_ref`] and [`MetaStore::cas_ref`].
    ///
    /// # Errors
    /// `Conflict` with the current tip when the ref moved; `Unavailable`.
    async fn put_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit> {
        let put = self.create_commit(tenant, commit, ref_move).await?;
        if let (PutCommit::Existing(existing), Some(mv)) = (&put, ref_move) {
            settle_retried_ref_move(self, tenant, mv, &existing.id, commit.created_at).await?;
        }
        Ok(put)
    }

    /// The primitive under [`MetaStore::put_commit`]: writes a new commit,
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

    /// A ref.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>>;

    /// Points `name` at `target` if it currently points at `expected`
    /// (`None`: if it does not exist).
    ///
    /// # Errors
    /// `Conflict` carrying the current target when `expected` is stale.
    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord>;

    /// Removes `name` if it currently points at `expected`: the minimal
    /// ref deletion workspace files need (their commits and artifacts stay;
    /// erasing those is not this method's job).
    ///
    /// # Errors
    /// `Conflict` carrying the current target (absent when the ref does not
    /// exist) when `expected` is stale; `Unavailable`.
    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()>;

    /// Refs whose names start with `prefix`, by name, at most `limit`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<RefRecord>>;

    /// A cached materialization.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>>;

    /// Caches a materialization of `key.commit`, in one atomic write with
    /// a check that the commit exists: an entry is never written for a
    /// commit that is gone, so a materialize racing the erase of its
    /// commit cannot leave an entry (and the bytes it names) behind once
    /// the commit's row is deleted.
    ///
    /// # Errors
    /// `NotFound` naming the commit when the tenant has no such commit
    /// (nothing is written); `Unavailable`.
    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()>;

    /// Every artifact `tenant`'s commits and cache entries name: the mark
    /// phase of garbage collection (one scan of the tenant's records, not
    /// a request per record).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn references(&self, tenant: &TenantId) -> Result<References>;

    /// Records that a cache entry was used at `at`, for least-recently-used
    /// eviction. Callers stamp coarsely (not on every read). A store with
    /// no byte budget (DynamoDB, whose cached artifacts expire by an S3
    /// lifecycle rule) keeps no stamps.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn touch_materialized(
        &self,
        _tenant: &TenantId,
        _key: &MaterializeKey,
        _at: DateTime<Utc>,
    ) -> Result<()> {
        Ok(())
    }

    /// Drops the least recently used cache entries, of every tenant, until
    /// the cached bytes total at most `budget`, never the entry `keep`
    /// (the one just added, whose artifact its caller is about to hand
    /// out); returns the cached artifacts no remaining entry names, for the
    /// caller to remove from the [`BlobArea::Cache`] area.
    ///
    /// # Errors
    /// `Invalid` (field `CTX_CACHE_BYTES`) for a store without a budget;
    /// `Unavailable`.
    async fn evict_materialized(
        &self,
        _budget: u64,
        _keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        Err(Error::invalid(
            "CTX_CACHE_BYTES",
            "this store has no cache budget: its cached artifacts expire by lifecycle rule",
        ))
    }

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
    async fn compact(&self) -> Result<u64> {
        Ok(0)
    }

    /// Commits of `tenant` lacking a summary, oldest first (by
    /// `created_at`, then id), at most `limit`, starting after `after`;
    /// each with its [`SummaryState`]. One request to the store (the sparse
    /// index on DynamoDB, a partial index on SQLite).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage>;

    /// `commit` is the commit as listed or read (its id, and where it is
    /// stored: backends that keep copies update them all).
    ///
    /// Claims a commit for summarizing until `until`: a conditional write
    /// that succeeds only while its summary is missing, no claim unexpired
    /// at `now` holds it and (when `respect_backoff`) its retry time has
    /// passed. Sets the tag [`TAG_SUMMARIZING`]. False when not claimed
    /// (also when the commit does not exist).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool>;

    /// Writes `summary` only if the commit still has none (a summary a
    /// person wrote meanwhile is kept), tags it [`TAG_SUMMARY_BY`] `by`,
    /// and clears the claim and the failure state (and their tags). False
    /// when nothing was written.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool>;

    /// Records that summarizing failed: the error (also as the tag
    /// [`TAG_SUMMARY_ERROR`]), one more attempt, no retry before
    /// `retry_at`, the claim released. Nothing is written when the commit
    /// has a summary by now.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()>;

    /// Tenants that may have commits lacking a summary (a superset is
    /// fine: the batch asks each), for a scheduled job over all tenants.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn summary_tenants(&self) -> Result<Vec<TenantId>>;

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

    /// An agent's record (settings, clear marker, working-context cache).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>>;

    /// Sets the `Some` fields of `patch` on an agent's record (creating
    /// it), atomically, and returns the record as stored.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord>;

    /// Records a save of an agent's window (a save id is written once).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn put_save(&self, tenant: &TenantId, agent: &Principal, save: &SaveRecord)
    -> Result<()>;

    /// An agent's saves, newest first, at most `limit`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>>;

    /// One save of an agent.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>>;

    /// Removes one save's record (its file is the caller's to delete);
    /// false when there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool>;

    /// Drops an agent's working-context pointer if it still names
    /// `artifact` (a newer snapshot stored meanwhile is kept); true when it
    /// did.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool>;

    /// Removes an agent's record (settings, clear marker, working-context
    /// pointer); its saves are the caller's to remove. False when there
    /// was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool>;
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

    /// Every cached materialization of `commit` (any stop, any format).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>>;

    /// Removes a cache entry; false when there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool>;

    /// Removes a commit with everything that indexes it (its place in its
    /// run, its timeline entry, its session and summary-queue entries),
    /// atomically; false when it did not exist. Refs and cache entries are
    /// the caller's to remove first.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool>;

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
    /// then. Bearer tokens are the [`TokenStore`]'s. A store that can
    /// remove everything in one atomic step (memory, SQLite: one
    /// transaction) may remove more than `limit`; DynamoDB works in pages
    /// of a paginated Scan on the tenant's key prefix and BatchWriteItem
    /// deletes. Nothing of another tenant is touched. Run
    /// [`MetaStore::compact`] after the last call.
    ///
    /// [`BranchStore`]: crate::branch::BranchStore
    ///
    /// # Errors
    /// `Unavailable`.
    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<TenantRecords>;

    /// Drops the artifact bytes stored inline with a commit
    /// ([`Commit::inline`]), keeping the commit, its metadata and its
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
    /// replaces it; commits that do not exist are skipped. Returns how many
    /// markers were set or changed.
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
}

/// What one [`MetaStore::erase_tenant`] call removed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantRecords {
    /// Commits.
    pub commits: u64,
    /// Refs.
    pub refs: u64,
    /// Materialization cache entries.
    pub cache: u64,
    /// Agent records and saves.
    pub agents: u64,
    /// Branch records (with their per-session and per-tenant counters).
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

/// What references an artifact (see [`MetaStore::artifact_users`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactUser {
    /// A commit's delta, summary or snapshot.
    Commit(CommitId),
    /// A cached materialization.
    Cached(MaterializeKey),
}

/// What retention never erases: a session, or the session a ref's target
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
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

/// The tag a summarizer's summary carries: who wrote it (`<backend>:<model>`).
pub const TAG_SUMMARY_BY: &str = "summary_by";
/// The tag of a commit whose summary failed: the last error.
pub const TAG_SUMMARY_ERROR: &str = "summary_error";
/// The tag of a commit being summarized: until when (RFC 3339) the claim
/// holds.
pub const TAG_SUMMARIZING: &str = "summarizing";

/// The value of the [`TAG_SUMMARIZING`] tag of a claim held until `until`.
pub fn claim_tag(until: DateTime<Utc>) -> String {
    until.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Where a listing of commits lacking a summary continues: after the
/// commit created at `micros` with id `id`. Opaque to callers (written
/// `<µs>.<ctx id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SummaryCursor {
    /// The last listed commit's `created_at` in µs.
    pub micros: i64,
    /// The last listed commit's id.
    pub id: CommitId,
}

impl SummaryCursor {
    /// The cursor after `commit`.
    pub fn after(commit: &Commit) -> Self {
        SummaryCursor {
            micros: commit.created_at.timestamp_micros(),
            id: commit.id,
        }
    }
}

impl std::fmt::Display for SummaryCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.micros, self.id)
    }
}

impl std::str::FromStr for SummaryCursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "cursor",
                format!("cursor {s:?} is not one a listing handed out"),
            )
        };
        let (micros, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(SummaryCursor {
            micros: micros.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

/// Where a commit stands in the summary queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SummaryState {
    /// A summarizer holds it until then.
    pub claimed_until: Option<DateTime<Utc>>,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Not retried before then.
    pub retry_at: Option<DateTime<Utc>>,
}

impl SummaryState {
    /// Whether a batch may claim it at `now`.
    pub fn claimable(&self, now: DateTime<Utc>) -> bool {
        self.claimed_until.is_none_or(|t| t <= now) && self.retry_at.is_none_or(|t| t <= now)
    }
}

/// A commit lacking a summary, with its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The commit.
    pub commit: Commit,
    /// Its place in the queue.
    pub state: SummaryState,
}

/// A page of commits lacking a summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MissingPage {
    /// Oldest first.
    pub items: Vec<Missing>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<SummaryCursor>,
}

/// Bearer tokens, stored by hash.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// Registers the token whose BLAKE3 hash is `hash` for `tenant`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord>;

    /// The tenant of the token hashing to `hash`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>>;

    /// Every token, oldest first.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>>;

    /// Removes the token with public id `id`; false if there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn revoke_token(&self, id: &str) -> Result<bool>;

    /// Revokes every token of `tenant` (the first step of a tenant erase:
    /// nothing new is written for it after); returns how many.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn revoke_tenant(&self, tenant: &TenantId) -> Result<u64> {
        let mut revoked = 0;
        for t in self.list_tokens().await? {
            if &t.tenant == tenant && self.revoke_token(&t.id).await? {
                revoked += 1;
            }
        }
        Ok(revoked)
    }
}

/// The retry rule of a checkpoint whose commit already exists (a retry, or
/// the same checkpoint sent twice): its ref move is still made, unless the
/// ref already points at the commit.
///
/// Each step is one atomic store operation, so the outcome is the one some
/// order of the concurrent operations gives: a ref found at the commit is
/// left alone; otherwise the move is a compare-and-swap from the expected
/// tip, and a conflict because a concurrent retry moved the ref to the
/// commit first is a success too.
async fn settle_retried_ref_move<M: MetaStore + ?Sized>(
    meta: &M,
    tenant: &TenantId,
    mv: &RefMove,
    existing: &CommitId,
    at: DateTime<Utc>,
) -> Result<()> {
    let current = meta.get_ref(tenant, &mv.name).await?.map(|r| r.target);
    if current.as_ref() == Some(existing) {
        return Ok(());
    }
    match meta
        .cas_ref(tenant, &mv.name, mv.expected.as_ref(), existing, at)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind == ErrorKind::Conflict && e.current == Some(existing.to_string()) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The conflict error of a stale compare-and-swap on a ref.
///
/// Its `current` is the ref's current target (absent when the ref does not
/// exist): [`MetaStore::put_commit`]'s retry rule reads it.
pub fn ref_conflict(
    name: &RefName,
    expected: Option<&CommitId>,
    current: Option<&CommitId>,
) -> Error {
    let now = current.map_or_else(|| "does not exist".to_owned(), |c| format!("points at {c}"));
    let wanted = expected.map_or_else(
        || "expected it not to exist".to_owned(),
        |e| format!("expected {e}"),
    );
    Error::conflict(
        format!("ref {name} {now} ({wanted})"),
        current.map(ToString::to_string),
    )
    .with_field("expected")
}

/// The public id of the token hashing to `hash`.
pub fn token_id(hash: &Hash) -> String {
    format!("tok-{}", &hash.to_hex()[..12])
}

/// The stores a service runs on.
#[derive(Clone)]
pub struct Stores {
    /// Artifacts.
    pub blobs: Arc<dyn BlobStore>,
    /// Metadata.
    pub meta: Arc<dyn MetaStore>,
}

#[cfg(test)]
mod tests;
