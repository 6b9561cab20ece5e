//! The materialization cache: which artifact holds a commit materialized
//! at a stop in a format; the [`MaterializationCache`] concern of a
//! [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::commit::Stop;
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::format::translate::{Fidelity, Tier};
use crate::id::{ArtifactRef, CommitId, TenantId};

/// The entries of the materialization cache (their bytes are cached
/// artifacts of the [`BlobStore`](super::BlobStore)).
#[async_trait]
pub trait MaterializationCache: Send + Sync + 'static {
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
    /// caller to remove from the [`BlobArea::Cache`](super::BlobArea::Cache) area.
    ///
    /// # Errors
    /// `Invalid` for a store without a budget (the caller names the
    /// setting that gave one);
    /// `Unavailable`.
    async fn evict_materialized(
        &self,
        _budget: u64,
        _keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        Err(Error::new(
            ErrorKind::Invalid,
            "this store has no cache budget: its cached artifacts expire by lifecycle rule",
        ))
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// What a translation through the canonical model did not carry as it
    /// was: messages kept, converted and dropped, with the reasons. Absent
    /// when every message was carried as it was (tiers `native` and
    /// `field-level`) and for a target ctx cannot write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<Fidelity>,
}

/// The refusal of [`MaterializationCache::put_materialized`] for a commit that is
/// not there (erased while it was materialized).
pub fn gone_commit(commit: &CommitId) -> Error {
    Error::not_found(format!("commit {commit}"))
}
