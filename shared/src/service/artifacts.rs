//! Artifacts: uploads (idempotent, size-limited), verified downloads, and
//! presigned direct uploads for large deltas (AWS mode).

use bytes::Bytes;

use super::Service;
use crate::commit::Commit;
use crate::error::{Error, ErrorKind, Result};
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::store::{ArtifactUser, BlobStoreExt, Fetched, PresignedUpload, PutBlob, verify};

/// How long a presigned upload or download URL stays valid.
const URL_TTL_SECS: u64 = 15 * 60;

/// The most users of an artifact looked at for an inline copy of it.
const INLINE_LOOKUP_USERS: usize = 16;

impl Service {
    /// Stores an artifact (idempotent).
    ///
    /// # Errors
    /// `TooLarge` over the artifact limit; `Unavailable`.
    pub async fn upload_artifact(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.limits.check_artifact_size("body", bytes.len())?;
        self.stores.blobs.put(tenant, bytes).await
    }

    /// An artifact's bytes, verified against its hash. A cached result
    /// (a materialization) whose file is gone or did not verify is rebuilt
    /// from its cache entry.
    ///
    /// # Errors
    /// `NotFound`; `Internal` when the stored bytes do not match.
    pub async fn download_artifact(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Bytes> {
        // No size is too large for the bytes: never a URL.
        match self.fetch_within(tenant, artifact, u64::MAX).await? {
            Fetched::Bytes(bytes) => Ok(bytes),
            Fetched::Url(_) => Err(Error::internal(format!(
                "the blob store handed out a URL for {artifact} when its bytes were asked for"
            ))),
        }
    }

    /// What `GET /v1/artifacts/{art}` answers: the bytes as
    /// [`Service::download_artifact`] does, or, for an artifact larger than
    /// [`Limits::download_url_bytes`](super::Limits) on a blob store that
    /// hands out URLs (S3), a presigned GET of it valid for fifteen
    /// minutes, so that its bytes never pass through the server (a Lambda
    /// answers at most 6 MB).
    ///
    /// # Errors
    /// As [`Service::download_artifact`].
    pub async fn fetch_artifact(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Fetched> {
        self.fetch_within(tenant, artifact, self.limits.download_url_bytes)
            .await
    }

    /// The artifact's bytes, or a URL when it is larger than `limit` and
    /// the blob store hands out URLs. A result held in memory (see `hot`)
    /// may not be stored yet: its bytes answer. A result rebuilt from its
    /// cache entry and larger than `limit` is stored again first, so that
    /// it can be fetched directly too.
    pub(super) async fn fetch_within(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: u64,
    ) -> Result<Fetched> {
        if let Some(bytes) = self.hot.bytes_of(tenant, artifact) {
            return Ok(Fetched::Bytes(bytes));
        }
        if let Some(f) = self.fetch_stored(tenant, artifact, limit).await? {
            return Ok(f);
        }
        let bytes = self
            .unfiled_copy(tenant, artifact)
            .await?
            .ok_or_else(|| Error::not_found(format!("artifact {artifact}")))?;
        if bytes.len() as u64 > limit {
            self.stores
                .blobs
                .put_cached_hashed(tenant, *artifact, bytes.clone())
                .await?;
            if let Some(url @ Fetched::Url(_)) = self.fetch_stored(tenant, artifact, limit).await? {
                return Ok(url);
            }
        }
        Ok(Fetched::Bytes(bytes))
    }

    /// [`BlobStore::fetch`](crate::store::BlobStore::fetch) with the
    /// service's URL lifetime and clock.
    async fn fetch_stored(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: u64,
    ) -> Result<Option<Fetched>> {
        let ttl = std::time::Duration::from_secs(URL_TTL_SECS);
        Ok(
            match self
                .stores
                .blobs
                .fetch(tenant, artifact, limit, ttl)
                .await?
            {
                Some(Fetched::Url(mut d)) => {
                    d.expires_at =
                        self.clock.now() + chrono::Duration::seconds(URL_TTL_SECS as i64);
                    Some(Fetched::Url(d))
                }
                other => other,
            },
        )
    }

    /// The bytes of `artifact` when the blob store does not have them: as
    /// stored inline with a commit naming it, or rebuilt from a cache entry
    /// naming it; `None` when neither holds them.
    async fn unfiled_copy(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>> {
        let users = self
            .stores
            .meta
            .artifact_users(tenant, artifact, INLINE_LOOKUP_USERS)
            .await?;
        if let Some(bytes) = self.inline_copy_among(tenant, artifact, &users).await? {
            return Ok(Some(bytes));
        }
        self.rebuilt_cached(tenant, artifact, &users).await
    }

    /// The bytes of `artifact` as stored inline with a commit among its
    /// `users` (verified), for readers that have only the reference; `None`
    /// when no commit holds them inline.
    ///
    /// # Errors
    /// `Internal` when the inline bytes do not match; `Unavailable`.
    async fn inline_copy_among(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        users: &[ArtifactUser],
    ) -> Result<Option<Bytes>> {
        let meta = &self.stores.meta;
        for user in users {
            let ArtifactUser::Commit(id) = user else {
                continue;
            };
            if let Some(bytes) = meta.get_commit(tenant, id).await?.and_then(|c| c.inline) {
                verify(artifact, &bytes)?;
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// A cached result named by one of the cache entries among `users`
    /// whose file is missing (evicted, or removed because it did not
    /// verify: cached results are not written durably), rebuilt by
    /// materializing that entry again; `None` when no entry rebuilds it
    /// (e.g. its deltas were evicted since).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn rebuilt_cached(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        users: &[ArtifactUser],
    ) -> Result<Option<Bytes>> {
        for user in users {
            let ArtifactUser::Cached(key) = user else {
                continue;
            };
            let rebuilt = self
                .materialize_bytes(tenant, &key.commit, key.stop, Some(key.format.clone()))
                .await;
            let (m, bytes) = match rebuilt {
                Ok(r) => r,
                Err(e) if e.kind == ErrorKind::Unavailable => return Err(e),
                // Not rebuildable any more: not found, as if evicted.
                Err(_) => continue,
            };
            if m.result.artifact_ref != *artifact {
                continue;
            }
            if let Some(bytes) = bytes {
                return Ok(Some(bytes));
            }
            // Rebuilt meanwhile by another caller: read what it stored.
            if let Some(bytes) = self.stores.blobs.get(tenant, artifact).await? {
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// The bytes of a stored commit's artifact.
    ///
    /// # Errors
    /// `Gone` when an eviction dropped it (naming what to materialize
    /// from); `Internal` when it is otherwise missing (a stored commit's
    /// bytes must exist); `Unavailable`.
    pub(crate) async fn artifact_of(&self, tenant: &TenantId, commit: &Commit) -> Result<Bytes> {
        self.artifact_at(
            tenant,
            commit.id,
            commit.artifact_ref,
            commit.inline.clone(),
        )
        .await
    }

    /// [`Service::artifact_of`] by the commit's id, artifact and inline
    /// bytes (owned, so a stream of fetches borrows nothing per commit).
    /// Inline bytes are verified and returned without touching the blob
    /// store; a commit read from somewhere that does not carry them (e.g.
    /// a record holding a copy of the commit) is looked up again when the
    /// blob store does not have its artifact.
    pub(crate) async fn artifact_at(
        &self,
        tenant: &TenantId,
        id: CommitId,
        art: ArtifactRef,
        inline: Option<Bytes>,
    ) -> Result<Bytes> {
        match self.stored_bytes(tenant, id, art, inline).await? {
            Some(bytes) => Ok(bytes),
            None => Err(self.missing_artifact(tenant, id, art).await),
        }
    }

    /// [`Service::artifact_at`], `None` when the bytes are stored nowhere.
    ///
    /// # Errors
    /// `Internal` when stored bytes do not match; `Unavailable`.
    pub(crate) async fn stored_bytes(
        &self,
        tenant: &TenantId,
        id: CommitId,
        art: ArtifactRef,
        inline: Option<Bytes>,
    ) -> Result<Option<Bytes>> {
        if let Some(bytes) = inline {
            verify(&art, &bytes)?;
            return Ok(Some(bytes));
        }
        if let Some(bytes) = self.stores.blobs.get(tenant, &art).await? {
            return Ok(Some(bytes));
        }
        let Some(bytes) = self
            .stores
            .meta
            .get_commit(tenant, &id)
            .await?
            .filter(|c| c.artifact_ref == art)
            .and_then(|c| c.inline)
        else {
            return Ok(None);
        };
        verify(&art, &bytes)?;
        Ok(Some(bytes))
    }

    /// Makes sure an artifact named by a checkpoint is stored: present, or
    /// staged by a direct upload, whose bytes are re-hashed before they are
    /// moved into place.
    pub(super) async fn ensure_artifact(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<u64> {
        let blobs = &self.stores.blobs;
        // Touched, not just looked at: young again, so no collection
        // sweeps it before the commit naming it is written.
        if let Some(size) = blobs.touch(tenant, artifact).await? {
            return Ok(size);
        }
        // A cached result (a materialization) named by a commit is made
        // durable: a commit never names an artifact eviction may remove.
        if let Some(bytes) = self.hot.bytes_of(tenant, artifact) {
            return Ok(blobs.put(tenant, bytes).await?.size);
        }
        if let Some(bytes) = blobs.get(tenant, artifact).await? {
            return Ok(blobs.put(tenant, bytes).await?.size);
        }
        if let Some(size) = self.stores.blobs.promote_upload(tenant, artifact).await? {
            return Ok(size);
        }
        // Bytes held only inline by another commit (or a cached result
        // whose file is gone, rebuilt) are copied into the blob store: the
        // new commit must not depend on that commit's row (an erase or
        // eviction of it would take them).
        if let Some(bytes) = self.unfiled_copy(tenant, artifact).await? {
            return Ok(blobs.put(tenant, bytes).await?.size);
        }
        Err(super::checkpoint::missing_artifact(artifact))
    }

    /// Whether this server serves direct uploads ([`Service::upload_url`]):
    /// only over a store that hands out URLs (S3).
    pub fn takes_direct_uploads(&self) -> bool {
        self.stores.blobs.takes_direct_uploads()
    }

    /// A URL to PUT a large artifact to directly (AWS mode), valid for
    /// fifteen minutes. Checkpointing with `artifact_ref` afterwards verifies
    /// the bytes' hash and moves them into place.
    ///
    /// # Errors
    /// `TooLarge` over the upload limit; `Invalid` when the store cannot
    /// take direct uploads (embedded mode: POST the bytes instead).
    pub async fn upload_url(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        size: u64,
    ) -> Result<PresignedUpload> {
        if size > self.limits.max_upload_bytes {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "size is {size} bytes; direct uploads take at most {} \
                     (S3's limit for one PUT; not a setting)",
                    self.limits.max_upload_bytes
                ),
            )
            .with_field("size"));
        }
        let ttl = std::time::Duration::from_secs(URL_TTL_SECS);
        let mut up = self
            .stores
            .blobs
            .presign_upload(tenant, artifact, size, ttl)
            .await?
            .ok_or_else(|| {
                Error::invalid(
                    "body",
                    "this server's storage takes no direct uploads; POST the bytes to /v1/artifacts",
                )
            })?;
        up.expires_at = self.clock.now() + chrono::Duration::seconds(URL_TTL_SECS as i64);
        Ok(up)
    }
}

#[cfg(test)]
mod tests;
