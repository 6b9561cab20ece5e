//! Artifacts in S3 under `cas/<tenant>/<2 hex>/<hash>`, written create-only
//! (`If-None-Match: *`) so concurrent writers of one artifact are safe.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;

use super::{keys, sdk_error};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};
use crate::store::{BlobStore, PresignedUpload, PutBlob};

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
}

#[async_trait]
impl BlobStore for S3BlobStore {
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        let artifact = ArtifactRef::of(&bytes);
        let size = bytes.len() as u64;
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(keys::blob_key(tenant, &artifact))
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

    async fn read(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        let result = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(keys::blob_key(tenant, artifact))
            .send()
            .await;
        match result {
            Ok(out) => {
                let body = out.body.collect().await.map_err(|e| {
                    crate::Error::unavailable(format!("reading {artifact} from S3 failed: {e}"))
                })?;
                Ok(Some(body.into_bytes()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(sdk_error("S3 GetObject", e)),
        }
    }

    async fn presign_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        size: u64,
        expires_in: std::time::Duration,
    ) -> Result<Option<PresignedUpload>> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires_in)
            .map_err(|e| crate::Error::internal(format!("bad presigning expiry: {e}")))?;
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(keys::upload_key(tenant, artifact))
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

    async fn promote_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Option<u64>> {
        let staged = keys::upload_key(tenant, artifact);
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&staged)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(sdk_error("S3 GetObject", e)),
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
        let delete = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&staged);
        if &actual != artifact.hash() {
            delete
                .send()
                .await
                .map_err(|e| sdk_error("S3 DeleteObject", e))?;
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
            .key(keys::blob_key(tenant, artifact))
            .send()
            .await
            .map_err(|e| sdk_error("S3 CopyObject", e))?;
        delete
            .send()
            .await
            .map_err(|e| sdk_error("S3 DeleteObject", e))?;
        Ok(Some(size))
    }

    async fn size(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        let result = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(keys::blob_key(tenant, artifact))
            .send()
            .await;
        match result {
            Ok(out) => Ok(Some(out.content_length().unwrap_or(0).max(0) as u64)),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
            Err(e) => Err(sdk_error("S3 HeadObject", e)),
        }
    }

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        // DeleteObject answers the same whether or not the key existed; the
        // HEAD first makes the answer (and erase counts) honest, and skips
        // the delete of an absent artifact.
        if self.size(tenant, artifact).await?.is_none() {
            return Ok(false);
        }
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(keys::blob_key(tenant, artifact))
            .send()
            .await
            .map_err(|e| sdk_error("S3 DeleteObject", e))?;
        Ok(true)
    }
}
