//! A [`BlobStore`] that counts what passes through another: the artifact
//! writes and reads a code path costs, for tests and benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::{BlobArea, BlobInfo, BlobStore, Fetched, PresignedUpload, PutBlob};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};

/// Forwards every call to `inner`, counting writes (`put`, `put_cached`)
/// and reads (`read`) and the bytes the reads return.
#[derive(Debug, Default)]
pub struct CountingBlobs<B> {
    /// The store that does the work.
    pub inner: B,
    puts: AtomicU64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

impl<B> CountingBlobs<B> {
    /// Counts the calls made to `inner`.
    pub fn new(inner: B) -> Self {
        CountingBlobs {
            inner,
            puts: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
        }
    }

    /// Artifact writes so far.
    pub fn puts(&self) -> u64 {
        self.puts.load(Ordering::SeqCst)
    }

    /// Artifact reads so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Bytes those reads returned.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes.load(Ordering::SeqCst)
    }

    fn counted_read(&self, r: &Option<Bytes>) {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.read_bytes
            .fetch_add(r.as_ref().map_or(0, |b| b.len() as u64), Ordering::SeqCst);
    }
}

#[async_trait]
impl<B: BlobStore> BlobStore for CountingBlobs<B> {
    fn takes_direct_uploads(&self) -> bool {
        self.inner.takes_direct_uploads()
    }
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.put(tenant, bytes).await
    }
    async fn read(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>> {
        let r = self.inner.read(tenant, areas, artifact).await?;
        self.counted_read(&r);
        Ok(r)
    }
    async fn stat(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>> {
        self.inner.stat(tenant, areas, artifact).await
    }
    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        self.inner.delete(tenant, artifact).await
    }
    async fn presign_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        size: u64,
        expires_in: std::time::Duration,
    ) -> Result<Option<PresignedUpload>> {
        self.inner
            .presign_upload(tenant, artifact, size, expires_in)
            .await
    }
    async fn fetch(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        inline_max: u64,
        expires_in: std::time::Duration,
    ) -> Result<Option<Fetched>> {
        let f = self
            .inner
            .fetch(tenant, artifact, inline_max, expires_in)
            .await?;
        if let Some(Fetched::Bytes(b)) = &f {
            self.counted_read(&Some(b.clone()));
        }
        Ok(f)
    }
    async fn promote_upload(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Option<u64>> {
        self.inner.promote_upload(tenant, artifact).await
    }
    async fn put_cached_hashed(
        &self,
        tenant: &TenantId,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.put_cached_hashed(tenant, artifact, bytes).await
    }
    async fn list(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        after: Option<&ArtifactRef>,
        limit: usize,
    ) -> Result<Vec<BlobInfo>> {
        self.inner.list(tenant, area, after, limit).await
    }
    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        self.inner.touch(tenant, artifact).await
    }
    async fn sweep(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
        cutoff: DateTime<Utc>,
    ) -> Result<bool> {
        self.inner.sweep(tenant, area, artifact, cutoff).await
    }
    async fn remove(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        self.inner.remove(tenant, area, artifact).await
    }
    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<u64> {
        self.inner.erase_tenant(tenant, limit).await
    }
}
