//! Artifacts: the content-addressed [`BlobStore`], its areas and the
//! helpers every store gets ([`BlobStoreExt`]).

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{ArtifactRef, Hash, TenantId};

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

    /// The artifact's bytes as stored in the first of `areas` (in order)
    /// that holds it, unverified: callers check them with [`verify`], or
    /// use [`BlobStoreExt::get`]. [`BlobArea::READABLE`] is where a read of
    /// an artifact looks (durable, then cache); one area reads that area
    /// alone (a cached result is read without first missing in the durable
    /// area). An area the store does not have holds nothing.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn read(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>>;

    /// The artifact as stored in the first of `areas` (in order) that
    /// holds it: its size and write time. [`BlobArea::READABLE`] asks
    /// whether (and how large) it is stored at all.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be read.
    async fn stat(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>>;

    /// Deletes a durable artifact for good: removes it from the durable
    /// and the cache area both, unconditionally and durably (the local
    /// store syncs the directory). Unlike [`BlobStore::remove`] it is for
    /// the durable area, and unlike [`BlobStore::sweep`] it does not look
    /// at the artifact's age. `true` when it was stored. Idempotent:
    /// deleting an absent artifact is `Ok(false)`. Callers decide that
    /// nothing references it any more; the store does not check.
    ///
    /// # Errors
    /// `Unavailable` when the storage cannot be written.
    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool>;

    /// Whether [`BlobStore::presign_upload`] hands out URLs (S3): a server
    /// over a store that does not serves no direct uploads, and its
    /// document leaves them out.
    fn takes_direct_uploads(&self) -> bool {
        false
    }

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

    /// An artifact's bytes, re-hashed as [`BlobStoreExt::get`] does; or,
    /// on a store that hands out URLs (S3), a presigned GET of them when
    /// they are larger than `inline_max` bytes, valid for `expires_in`:
    /// such bytes never pass through this process, and whoever fetches
    /// them checks them against the reference. `None` when the store does
    /// not hold the artifact. The default reads.
    ///
    /// # Errors
    /// As [`BlobStoreExt::get`].
    async fn fetch(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        _inline_max: u64,
        _expires_in: std::time::Duration,
    ) -> Result<Option<Fetched>> {
        Ok(self.get(tenant, artifact).await?.map(Fetched::Bytes))
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
    /// on demand. [`BlobStore::read`] and [`BlobStore::stat`] over
    /// [`BlobArea::READABLE`] find cached artifacts too; a commit never names one (a checkpoint naming a
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

    /// Marks a durable artifact as just used, as writing it again would
    /// (its write time becomes now), so no collection sweeps it for a
    /// grace period; its size, or `None` when it is not stored. A
    /// checkpoint naming an uploaded artifact calls this before it writes
    /// the commit.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>>;

    /// The collector's removal by age: removes the artifact from `area`
    /// alone (any area, durable included) if it was last written (or
    /// touched) before `cutoff`; true when removed. Unlike
    /// [`BlobStore::delete`] and [`BlobStore::remove`] it is conditional:
    /// the check and the removal are atomic with respect to this store's
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

    /// Removes the artifact from one non-durable `area` ([`BlobArea::Cache`]
    /// or [`BlobArea::Staged`]) alone, unconditionally: a bad cached copy,
    /// a staged upload. False if it was not there. Unlike
    /// [`BlobStore::delete`] it never touches the durable area (nor makes
    /// the removal durable), and unlike [`BlobStore::sweep`] it does not
    /// look at the artifact's age.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

    /// Where a read of an artifact looks, in order: the durable area, then
    /// the cache (a staged upload is not readable until promoted).
    pub const READABLE: &'static [BlobArea] = &[BlobArea::Durable, BlobArea::Cache];
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

/// The refusal of [`BlobStore::remove`] for the durable area.
pub fn durable_remove_refused() -> Error {
    Error::invalid(
        "area",
        "durable artifacts are removed with delete, not remove",
    )
}

/// A presigned direct upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// What [`BlobStore::fetch`] found: the bytes, or where to GET them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The artifact's bytes, checked against its reference.
    Bytes(Bytes),
    /// A presigned URL for bytes too large to pass through the server.
    Url(PresignedDownload),
}

/// A presigned direct download: `GET` the URL with no other credentials,
/// then check the bytes against the artifact's reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresignedDownload {
    /// Where to GET the bytes (also the `Location` header of the 303).
    pub url: String,
    /// How many bytes it holds.
    pub size: u64,
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
        let Some(bytes) = self.read(tenant, BlobArea::READABLE, artifact).await? else {
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
        let Some(durable) = self.read(tenant, &[BlobArea::Durable], artifact).await? else {
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
        let Some(bytes) = self.read(tenant, &[BlobArea::Cache], artifact).await? else {
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
