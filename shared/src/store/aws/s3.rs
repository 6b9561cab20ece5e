//! Artifacts in S3 under `cas/<tenant>/<2 hex>/<hash>` (cached results
//! under `cache/`, staged uploads under `uploads/`, both expired by
//! lifecycle rules), written create-only (`If-None-Match: *`) so
//! concurrent writers of one artifact are safe.
//!
//! The bucket is versioned (template.yaml), so a plain DeleteObject would
//! only stack a delete marker on bytes that stay as a noncurrent version
//! for the lifecycle's 30 days. Every delete here removes each version of
//! its key instead (ListObjectVersions, then DeleteObject with the
//! VersionId): what is deleted or erased is gone at once.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::sdk_error;
use super::table;
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};
use crate::store::{
    BlobArea, BlobInfo, BlobStore, BlobStoreExt, Fetched, PresignedDownload, PresignedUpload,
    PutBlob, durable_remove_refused, verify,
};

/// A GetObject's body, read whole.
async fn collect(
    out: aws_sdk_s3::operation::get_object::GetObjectOutput,
    artifact: &ArtifactRef,
) -> Result<Bytes> {
    let body = out.body.collect().await.map_err(|e| {
        crate::Error::unavailable(format!("reading {artifact} from S3 failed: {e}"))
    })?;
    Ok(body.into_bytes())
}

/// A presigned request's settings: valid for `expires_in`.
fn presigning(expires_in: std::time::Duration) -> Result<aws_sdk_s3::presigning::PresigningConfig> {
    aws_sdk_s3::presigning::PresigningConfig::expires_in(expires_in)
        .map_err(|e| crate::Error::internal(format!("bad presigning expiry: {e}")))
}

/// The S3 [`BlobStore`].
#[derive(Debug, Clone)]
pub struct S3BlobStore {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3BlobStore {
    /// A store over `bucket`.
    pub fn new(client: aws_sdk_s3::Client, bucket: String) -> Self {
        S3BlobStore { client, bucket }
    }

    /// The SDK client (for presigning and tests).
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Stores `bytes` in `area`, create-only.
    async fn put_in(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        let size = bytes.len() as u64;
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(table::area_key(tenant, area, &artifact))
            .if_none_match("*")
            .content_type("application/octet-stream")
            .body(ByteStream::from(bytes))
            .send()
            .await;
        let created = match result {
            Ok(_) => true,
            Err(e) => {
                let status = e.raw_response().map(|r| r.status().as_u16());
                // 412: the object exists. 409: a concurrent conditional write
                // of the same key is in progress; it writes the same bytes.
                if matches!(status, Some(412 | 409)) {
                    false
                } else {
                    return Err(sdk_error("S3 PutObject", e));
                }
            }
        };
        Ok(PutBlob {
            artifact,
            size,
            created,
        })
    }

    /// The object at `key`, if any: its headers, the body not yet read.
    async fn get_object(
        &self,
        key: &str,
    ) -> Result<Option<aws_sdk_s3::operation::get_object::GetObjectOutput>> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(sdk_error("S3 GetObject", e)),
        }
    }

    /// The object at `key` (holding `artifact`), if any.
    async fn read_key(&self, key: &str, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        match self.get_object(key).await? {
            Some(out) => collect(out, artifact).await.map(Some),
            None => Ok(None),
        }
    }

    /// The artifact as stored in `area`: a HeadObject.
    async fn head(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>> {
        let result = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(table::area_key(tenant, area, artifact))
            .send()
            .await;
        match result {
            Ok(out) => Ok(Some(BlobInfo {
                artifact: *artifact,
                size: out.content_length().unwrap_or(0).max(0) as u64,
                modified: out
                    .last_modified()
                    .map_or(Ok(DateTime::<Utc>::MIN_UTC), time)?,
            })),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
            Err(e) => Err(sdk_error("S3 HeadObject", e)),
        }
    }

    /// Deletes every version (and delete marker) of the artifact's key in
    /// `area`; false when it held no object. The listing that finds the
    /// versions also tells whether there was one: no HEAD first.
    async fn delete_key(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        let key = table::area_key(tenant, area, artifact);
        let (ids, objects) = self.versions(&key, usize::MAX).await?;
        for id in ids {
            self.client
                .delete_object()
                .bucket(&self.bucket)
                .key(&key)
                .set_version_id(id.version_id)
                .send()
                .await
                .map_err(|e| sdk_error("S3 DeleteObject", e))?;
        }
        Ok(objects > 0)
    }

    /// Up to `limit` versions and delete markers under `prefix`, oldest
    /// pages first, and how many of them are object versions (not delete
    /// markers); with a whole key as the prefix, only that key's (a longer
    /// key sharing the prefix is left out). An unversioned bucket lists each
    /// object once, with the version id `null`.
    async fn versions(&self, prefix: &str, limit: usize) -> Result<(Vec<ObjectIdentifier>, usize)> {
        let exact = !prefix.ends_with('/');
        let mut out = Vec::new();
        let mut objects = 0;
        // ListObjectVersions has no paginator in the SDK: its pages are
        // continued by two markers, a key and a version id.
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let page = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .max_keys(i32::try_from(limit.min(ERASE_BATCH)).unwrap_or(1000))
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| sdk_error("S3 ListObjectVersions", e))?;
            let listed = page
                .versions()
                .iter()
                .map(|v| (v.key(), v.version_id(), true))
                .chain(
                    page.delete_markers()
                        .iter()
                        .map(|m| (m.key(), m.version_id(), false)),
                );
            for (key, version, object) in listed {
                let Some(key) = key.filter(|k| !exact || *k == prefix) else {
                    continue;
                };
                let id = ObjectIdentifier::builder()
                    .key(key)
                    .set_version_id(version.map(str::to_owned))
                    .build()
                    .map_err(|e| crate::Error::internal(format!("S3 object id: {e}")))?;
                out.push(id);
                objects += usize::from(object);
                if out.len() >= limit {
                    return Ok((out, objects));
                }
            }
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
        }
        Ok((out, objects))
    }
}

/// An S3 time as UTC.
fn time(t: &aws_sdk_s3::primitives::DateTime) -> Result<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos())
        .ok_or_else(|| crate::Error::internal(format!("S3 answered an impossible time {t:?}")))
}

#[async_trait]
impl BlobStore for S3BlobStore {
    fn takes_direct_uploads(&self) -> bool {
        true
    }

    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.put_in(tenant, BlobArea::Durable, ArtifactRef::of(&bytes), bytes)
            .await
    }

    async fn read(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>> {
        for area in areas {
            if let Some(b) = self
                .read_key(&table::area_key(tenant, *area, artifact), artifact)
                .await?
            {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    async fn presign_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        size: u64,
        expires_in: std::time::Duration,
    ) -> Result<Option<PresignedUpload>> {
        let config = presigning(expires_in)?;
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(table::upload_key(tenant, artifact))
            .content_length(i64::try_from(size).unwrap_or(i64::MAX))
            .content_type("application/octet-stream")
            .presigned(config)
            .await
            .map_err(|e| sdk_error("S3 presign PutObject", e))?;
        let headers = presigned
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Ok(Some(PresignedUpload {
            url: presigned.uri().to_owned(),
            method: presigned.method().to_owned(),
            headers,
            // Filled in by the service, which owns the clock.
            expires_at: chrono::DateTime::<chrono::Utc>::MIN_UTC,
        }))
    }

    async fn fetch(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        inline_max: u64,
        expires_in: std::time::Duration,
    ) -> Result<Option<Fetched>> {
        for area in BlobArea::READABLE {
            let key = table::area_key(tenant, *area, artifact);
            let Some(out) = self.get_object(&key).await? else {
                continue;
            };
            let size = u64::try_from(out.content_length().unwrap_or(0)).unwrap_or(0);
            if size > inline_max {
                // Only the headers were read: dropping the body closes
                // the connection rather than reading bytes no one wants.
                drop(out);
                let config = presigning(expires_in)?;
                let presigned = self
                    .client
                    .get_object()
                    .bucket(&self.bucket)
                    .key(&key)
                    .presigned(config)
                    .await
                    .map_err(|e| sdk_error("S3 presign GetObject", e))?;
                return Ok(Some(Fetched::Url(PresignedDownload {
                    url: presigned.uri().to_owned(),
                    size,
                    // Filled in by the service, which owns the clock.
                    expires_at: DateTime::<Utc>::MIN_UTC,
                })));
            }
            let bytes = collect(out, artifact).await?;
            if verify(artifact, &bytes).is_ok() {
                return Ok(Some(Fetched::Bytes(bytes)));
            }
            // A copy that does not match: the full check decides which.
            return Ok(self.get(tenant, artifact).await?.map(Fetched::Bytes));
        }
        Ok(None)
    }

    async fn promote_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Option<u64>> {
        let staged = table::upload_key(tenant, artifact);
        let Some(out) = self.get_object(&staged).await? else {
            return Ok(None);
        };
        // Re-hash while streaming: the bytes are never held whole.
        let mut body = out.body;
        let mut hasher = blake3::Hasher::new();
        let mut size = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| crate::Error::unavailable(format!("reading the upload failed: {e}")))?
        {
            size += chunk.len() as u64;
            hasher.update(&chunk);
        }
        let actual = crate::Hash::from(hasher.finalize());
        if &actual != artifact.hash() {
            self.delete_key(tenant, BlobArea::Staged, artifact).await?;
            return Err(crate::Error::invalid(
                "artifact_ref",
                format!(
                    "the uploaded {size} bytes hash to art-{actual}, not {artifact}; the upload was discarded"
                ),
            ));
        }
        self.client
            .copy_object()
            .bucket(&self.bucket)
            .copy_source(format!("{}/{staged}", self.bucket))
            .key(table::blob_key(tenant, artifact))
            .send()
            .await
            .map_err(|e| sdk_error("S3 CopyObject", e))?;
        self.delete_key(tenant, BlobArea::Staged, artifact).await?;
        Ok(Some(size))
    }

    async fn stat(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>> {
        for area in areas {
            if let Some(info) = self.head(tenant, *area, artifact).await? {
                return Ok(Some(info));
            }
        }
        Ok(None)
    }

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        // Every area reads look in: a cached copy of the same bytes goes
        // too. The two keys are independent: both at once.
        let (durable, cached) = futures::try_join!(
            self.delete_key(tenant, BlobArea::Durable, artifact),
            self.delete_key(tenant, BlobArea::Cache, artifact),
        )?;
        Ok(durable || cached)
    }

    async fn put_cached_hashed(
        &self,
        tenant: &TenantId,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        self.put_in(tenant, BlobArea::Cache, artifact, bytes).await
    }

    async fn list(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        after: Option<&ArtifactRef>,
        limit: usize,
    ) -> Result<Vec<BlobInfo>> {
        let mut out = Vec::new();
        // The stream is lazy: no page is asked for once `limit` are read.
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(table::area_prefix(tenant, area))
            .set_start_after(after.map(|a| table::area_key(tenant, area, a)))
            .max_keys(i32::try_from(limit.min(1000)).unwrap_or(1000))
            .into_paginator()
            .send();
        while let Some(page) = pages
            .try_next()
            .await
            .map_err(|e| sdk_error("S3 ListObjectsV2", e))?
        {
            for o in page.contents() {
                let Some(key) = o.key() else { continue };
                // Anything under the prefix that is not an artifact's key
                // is not ours.
                let Some(artifact) = table::parse_area_key(tenant, area, key) else {
                    continue;
                };
                out.push(BlobInfo {
                    artifact,
                    size: o.size().unwrap_or(0).max(0) as u64,
                    modified: o
                        .last_modified()
                        .map_or(Ok(DateTime::<Utc>::MIN_UTC), time)?,
                });
            }
            if out.len() >= limit {
                break;
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        // A copy onto itself, with its metadata replaced, is what gives an
        // S3 object a new LastModified.
        let key = table::blob_key(tenant, artifact);
        let result = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .copy_source(format!("{}/{key}", self.bucket))
            .key(&key)
            .metadata_directive(aws_sdk_s3::types::MetadataDirective::Replace)
            .content_type("application/octet-stream")
            .send()
            .await;
        match result {
            Ok(_) => Ok(self
                .head(tenant, BlobArea::Durable, artifact)
                .await?
                .map(|i| i.size)),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(None),
            Err(e) => Err(sdk_error("S3 CopyObject", e)),
        }
    }

    async fn sweep(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
        cutoff: DateTime<Utc>,
    ) -> Result<bool> {
        match self.head(tenant, area, artifact).await? {
            // The HEAD just made found it: no second one.
            Some(info) if info.modified < cutoff => {
                self.delete_key(tenant, area, artifact).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn remove(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        if area == BlobArea::Durable {
            return Err(durable_remove_refused());
        }
        self.delete_key(tenant, area, artifact).await
    }

    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<u64> {
        let mut removed = 0u64;
        for area in BlobArea::ALL {
            // Every key under the tenant's prefix goes, artifact or not.
            let prefix = table::area_prefix(tenant, area);
            loop {
                let want = limit
                    .saturating_sub(usize::try_from(removed).unwrap_or(usize::MAX))
                    .min(ERASE_BATCH);
                if want == 0 {
                    return Ok(removed);
                }
                // Every version and delete marker: an erased byte must not
                // stay behind as a noncurrent version.
                let (ids, _) = self.versions(&prefix, want).await?;
                if ids.is_empty() {
                    break;
                }
                let n = ids.len() as u64;
                let delete = Delete::builder()
                    .set_objects(Some(ids))
                    .quiet(true)
                    .build()
                    .map_err(|e| crate::Error::internal(format!("S3 DeleteObjects: {e}")))?;
                let out = self
                    .client
                    .delete_objects()
                    .bucket(&self.bucket)
                    .delete(delete)
                    .send()
                    .await
                    .map_err(|e| sdk_error("S3 DeleteObjects", e))?;
                if let Some(e) = out.errors().first() {
                    return Err(crate::Error::unavailable(format!(
                        "S3 DeleteObjects left {} of {n} key(s), e.g. {:?}: {} {}",
                        out.errors().len(),
                        e.key().unwrap_or_default(),
                        e.code().unwrap_or_default(),
                        e.message().unwrap_or_default()
                    )));
                }
                removed += n;
            }
        }
        Ok(removed)
    }
}

/// Keys one DeleteObjects may name.
const ERASE_BATCH: usize = 1000;
