//! The in-memory backend: the reference behaviour of every store, for tests
//! and `ctx serve --store memory`. Nothing survives the process.
//!
//! # Layout
//! - this file: [`MemoryBlobStore`], artifacts in a map.
//! - [`meta`]: [`MemoryMetaStore`], the [`MetaStore`](crate::store::MetaStore)
//!   and [`TokenStore`](crate::store::TokenStore).
//! - [`branches`]: [`MemoryBranchStore`], the
//!   [`BranchStore`](crate::branch::BranchStore).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::{BlobArea, BlobInfo, BlobStore, PutBlob, durable_remove_refused};
use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};

mod agents;
pub mod branches;
mod cache;
mod commits;
mod lifecycle;
pub mod meta;
mod refs;
mod summaries;
mod tokens;

pub use branches::MemoryBranchStore;
pub use meta::MemoryMetaStore;

/// Locks a store's maps. A panic while holding the lock leaves plain maps,
/// still consistent, so a poisoned lock is taken over.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes and write time per (tenant, area, artifact).
type BlobMap = BTreeMap<(TenantId, BlobArea, ArtifactRef), (Bytes, DateTime<Utc>)>;

/// Artifacts in a map, per [`BlobArea`], each with the time it was last
/// written (from the store's clock).
pub struct MemoryBlobStore {
    blobs: Mutex<BlobMap>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryBlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBlobStore").finish_non_exhaustive()
    }
}

impl Default for MemoryBlobStore {
    fn default() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }
}

impl MemoryBlobStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose write times come from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryBlobStore {
            blobs: Mutex::new(BTreeMap::new()),
            clock,
        }
    }

    /// Replaces an artifact's bytes without re-hashing: for tests of
    /// corruption detection.
    #[cfg(any(test, feature = "conformance"))]
    pub fn corrupt(&self, tenant: &TenantId, artifact: &ArtifactRef, bytes: Bytes) {
        let now = self.clock.now();
        lock(&self.blobs).insert((tenant.clone(), BlobArea::Durable, *artifact), (bytes, now));
    }

    fn put_in(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> PutBlob {
        let size = bytes.len() as u64;
        let now = self.clock.now();
        let mut blobs = lock(&self.blobs);
        let key = (tenant.clone(), area, artifact);
        let created = match blobs.get_mut(&key) {
            // Written again: younger, so no collection sweeps it now.
            Some((_, modified)) => {
                *modified = now;
                false
            }
            None => {
                blobs.insert(key, (bytes, now));
                true
            }
        };
        PutBlob {
            artifact,
            size,
            created,
        }
    }

    /// The bytes and write time of `artifact` in the first of `areas`
    /// holding it.
    fn find(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Option<(Bytes, DateTime<Utc>)> {
        let blobs = lock(&self.blobs);
        areas
            .iter()
            .find_map(|area| blobs.get(&(tenant.clone(), *area, *artifact)))
            .cloned()
    }
}

#[async_trait]
impl BlobStore for MemoryBlobStore {
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        Ok(self.put_in(tenant, BlobArea::Durable, ArtifactRef::of(&bytes), bytes))
    }

    async fn read(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>> {
        Ok(self.find(tenant, areas, artifact).map(|(b, _)| b))
    }

    async fn stat(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>> {
        Ok(self
            .find(tenant, areas, artifact)
            .map(|(b, modified)| BlobInfo {
                artifact: *artifact,
                size: b.len() as u64,
                modified,
            }))
    }

    async fn put_cached_hashed(
        &self,
        tenant: &TenantId,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        Ok(self.put_in(tenant, BlobArea::Cache, artifact, bytes))
    }

    async fn list(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        after: Option<&ArtifactRef>,
        limit: usize,
    ) -> Result<Vec<BlobInfo>> {
        let blobs = lock(&self.blobs);
        let mut out: Vec<BlobInfo> = blobs
            .iter()
            .filter(|((t, a, art), _)| t == tenant && *a == area && after.is_none_or(|x| art > x))
            .map(|((_, _, art), (b, modified))| BlobInfo {
                artifact: *art,
                size: b.len() as u64,
                modified: *modified,
            })
            .collect();
        out.truncate(limit);
        Ok(out)
    }

    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        let now = self.clock.now();
        Ok(lock(&self.blobs)
            .get_mut(&(tenant.clone(), BlobArea::Durable, *artifact))
            .map(|(b, modified)| {
                *modified = now;
                b.len() as u64
            }))
    }

    async fn sweep(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
        cutoff: DateTime<Utc>,
    ) -> Result<bool> {
        let mut blobs = lock(&self.blobs);
        let key = (tenant.clone(), area, *artifact);
        if blobs
            .get(&key)
            .is_some_and(|(_, modified)| *modified < cutoff)
        {
            blobs.remove(&key);
            return Ok(true);
        }
        Ok(false)
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
        Ok(lock(&self.blobs)
            .remove(&(tenant.clone(), area, *artifact))
            .is_some())
    }

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        let mut blobs = lock(&self.blobs);
        let mut removed = false;
        for area in [BlobArea::Durable, BlobArea::Cache] {
            removed |= blobs.remove(&(tenant.clone(), area, *artifact)).is_some();
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{self, Backend, Capabilities};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn memory_backend_conforms() {
        let meta = MemoryMetaStore::new();
        conformance::run_all(
            &Backend {
                blobs: &MemoryBlobStore::new(),
                meta: &meta,
                tokens: &meta,
                branches: &MemoryBranchStore::new(),
            },
            Capabilities {
                global_branch_listing: true,
                cache_budget: true,
                branches_in_meta: false,
            },
        )
        .await;
    }

    #[tokio::test]
    async fn memory_history_pages_across_lineage_runs() {
        conformance::history::history_pages_across_lineage_runs(
            std::sync::Arc::new(MemoryBlobStore::new()),
            std::sync::Arc::new(MemoryMetaStore::new()),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn memory_two_summary_batches_summarize_each_commit_once() {
        conformance::summary_batch::two_batches_summarize_each_commit_once(
            std::sync::Arc::new(MemoryBlobStore::new()),
            std::sync::Arc::new(MemoryMetaStore::new()),
        )
        .await;
    }
}
