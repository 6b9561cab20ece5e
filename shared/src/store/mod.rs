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
//! override (e.g. [`MetaStore::put_commit`], a batch of one over the
//! backend's [`Commits::create_batch`]). Every behaviour a backend must have is
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
use crate::error::{Error, Result};
use crate::id::TenantId;

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
    /// ref already points at it (a retried checkpoint, its answer lost).
    ///
    /// Provided, and cannot be overridden: a batch of one commit and its
    /// ref move ([`Commits::create_batch`]), so a checkpoint and a batch
    /// are written, retried and refused by one mechanism.
    ///
    /// # Errors
    /// `Conflict` with the current tip when the ref moved (field
    /// `expected`); `Unavailable`.
    async fn put_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit> {
        let one = [BatchCommit {
            commit: commit.clone(),
            parent_in_batch: None,
        }];
        let moves: Vec<BatchRefMove> = ref_move
            .map(|mv| BatchRefMove {
                name: mv.name.clone(),
                expected: mv.expected,
                target: commit.id,
            })
            .into_iter()
            .collect();
        let done = self
            .create_batch(tenant, &one, &moves, commit.created_at)
            .await
            .map_err(|e| {
                // A checkpoint's one ref move is its `expected`.
                if e.field.as_deref() == Some("refs[0].expected") {
                    e.with_field("expected")
                } else {
                    e
                }
            })?;
        done.commits
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal("a batch of one commit answered none"))
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
