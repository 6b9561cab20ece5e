//! Storage: the [`BlobStore`] for artifacts, the [`MetaStore`] for
//! metadata, and the [`TokenStore`] that maps bearer tokens to tenants. The
//! fourth store, the [`BranchStore`](crate::branch::BranchStore) of context
//! folding, is defined with its records in [`crate::branch`].
//!
//! The traits are small and say nothing about policy: what to write when is
//! decided by `service`. `MetaStore` is the sum of one trait per concern
//! (below), each with a few required methods; every backend implements each
//! concern in that concern's file. Rules every backend shares are written
//! once as provided methods of `MetaStore` itself, which no backend can
//! override (e.g. [`MetaStore::put_commit`]'s retry rule over the backend's
//! [`Commits::create_commit`]). Every behaviour a backend must have is
//! written once in `conformance` and run against every backend.
//!
//! # Layout
//! The traits, one file per concern, each with its value types:
//! - this file: [`MetaStore`] (the sum, and the shared rules) and [`Stores`].
//! - `blob`: [`BlobStore`], its areas, and [`BlobStoreExt`].
//! - `commits`: [`Commits`]: commits, their runs and the timelines.
//! - `refs`: [`Refs`]: named pointers moved by compare-and-swap.
//! - `cache`: [`MaterializationCache`]: the materialization cache's entries.
//! - `summaries`: [`SummaryQueue`]: commits lacking a summary.
//! - `agents`: [`Agents`]: agents' records and saves.
//! - `lifecycle`: [`Lifecycle`]: references, pins, eviction markers, the
//!   tenant erase and reclaiming space.
//! - `tokens`: [`TokenStore`].
//!
//! The backends, each implementing every store it offers, one file per
//! concern:
//! - [`memory`]: blobs, meta, tokens and branches in maps (tests,
//!   `ctx serve --store memory`).
//! - [`local`]: artifacts as files, meta, tokens and branches in one
//!   SQLite database (the embedded default).
//! - `aws` (feature `aws`): artifacts in S3; meta, tokens and branches in one DynamoDB
//!   table.
//! - [`counting`]: a blob store wrapper that counts reads and writes.
//! - `packed`: inline deltas at rest, zstd or raw, LZ4 still read (local
//!   and aws).
//! - `conformance`: the behaviours, and `run_all` that every backend's
//!   tests call once (with the `conformance` feature or in tests).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::commit::Commit;
use crate::error::{ErrorKind, Result};
use crate::id::{CommitId, TenantId};

mod agents;
#[cfg(feature = "aws")]
pub mod aws;
mod blob;
mod cache;
mod commits;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod counting;
mod lifecycle;
#[cfg(feature = "local")]
pub mod local;
pub mod memory;
#[cfg(any(feature = "local", feature = "aws"))]
pub(crate) mod packed;
mod refs;
mod summaries;
mod tokens;

pub use agents::Agents;
pub use blob::{
    BlobArea, BlobInfo, BlobStore, BlobStoreExt, Fetched, PresignedDownload, PresignedUpload,
    PutBlob, durable_remove_refused, verify,
};
pub use cache::{MaterializationCache, MaterializeKey, Materialized, gone_commit};
pub(crate) use commits::batch_move_settled;
pub use commits::{
    BATCH_COMMIT_ACTIONS, BATCH_INLINE_BYTES, BATCH_REF_ACTIONS, BatchCommit, BatchRefMove,
    Batched, Commits, MetadataPatch, PutCommit, TRANSACTION_ACTIONS, batch_fits, check_batch,
    check_batch_size,
};
pub use lifecycle::{ArtifactUser, Backfilled, Lifecycle, Pin, References, TenantRecords};
pub use refs::{RefMove, RefRecord, Refs, ref_conflict};
pub use summaries::{
    Missing, MissingPage, SummaryCursor, SummaryQueue, SummaryState, TAG_SUMMARIZING,
    TAG_SUMMARY_BY, TAG_SUMMARY_ERROR, claim_tag,
};
pub use tokens::{TokenRecord, TokenStore, token_id};

/// Commit metadata, timelines, refs, the materialization cache, the
/// summary queue, agents and lifecycle: the sum of the concern traits, so
/// that callers hold one `Arc<dyn MetaStore>`.
///
/// Every type with all the concerns is a `MetaStore` (the blanket impl
/// below), so no backend implements it, and none can override what it
/// provides: the rules every backend shares, written once over the
/// concerns' primitives (as object_store's `ObjectStoreExt` is over
/// `ObjectStore`).
#[async_trait]
pub trait MetaStore:
    Commits + Refs + MaterializationCache + SummaryQueue + Agents + Lifecycle
{
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
    /// Provided, and cannot be overridden: the retry rule lives here
    /// once, over the backend's [`Commits::create_commit`],
    /// [`Refs::get_ref`] and [`Refs::cas_ref`].
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

    /// Writes a batch of commits and ref moves as one atomic write (see
    /// [`Commits::create_batch`], which this checks the batch for first, the
    /// same way on every backend): all of it or nothing.
    ///
    /// Retrying a batch is safe: commits that exist are returned as
    /// `Existing` and not written again, and a move whose ref already points
    /// at its target is left alone; so a batch that was written (its answer
    /// lost) succeeds again with every commit `Existing` and writes nothing,
    /// while one whose ref has moved on since answers the ref's conflict.
    ///
    /// Provided, and cannot be overridden.
    ///
    /// # Errors
    /// As [`check_batch`]; `Conflict` naming `refs[i].expected` with the
    /// current tip when a move is stale; `Unavailable`.
    async fn put_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched> {
        check_batch(commits, moves)?;
        self.create_batch(tenant, commits, moves, now).await
    }
}

impl<T> MetaStore for T where
    T: Commits + Refs + MaterializationCache + SummaryQueue + Agents + Lifecycle + ?Sized
{
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
