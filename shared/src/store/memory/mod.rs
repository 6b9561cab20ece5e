//! The in-memory backend: the reference behaviour of every store, for tests
//! and `ctx serve --store memory`. Nothing survives the process.
//!
//! # Layout
//! - this file: [`MemoryBlobStore`], artifacts in a map.
//! - [`meta`]: [`MemoryMetaStore`], the [`MetaStore`](crate::store::MetaStore)
//!   and [`TokenStore`](crate::store::TokenStore).
//! - [`branches`]: [`MemoryBranchStore`], the
//!   [`BranchStore`](crate::branch::BranchStore).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::{BlobStore, PutBlob};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};

pub mod branches;
pub mod meta;

pub use branches::MemoryBranchStore;
pub use meta::MemoryMetaStore;

/// Locks a store's maps. A panic while holding the lock leaves plain maps,
/// still consistent, so a poisoned lock is taken over.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Artifacts in a map.
#[derive(Debug, Default)]
pub struct MemoryBlobStore {
    blobs: Mutex<HashMap<(TenantId, ArtifactRef), Bytes>>,
}

impl MemoryBlobStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces an artifact's bytes without re-hashing: for tests of
    /// corruption detection.
    #[cfg(any(test, feature = "conformance"))]
    pub fn corrupt(&self, tenant: &TenantId, artifact: &ArtifactRef, bytes: Bytes) {
        lock(&self.blobs).insert((tenant.clone(), *artifact), bytes);
    }
}

#[async_trait]
impl BlobStore for MemoryBlobStore {
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        let artifact = ArtifactRef::of(&bytes);
        let size = bytes.len() as u64;
        let mut blobs = lock(&self.blobs);
        let key = (tenant.clone(), artifact);
        let created = !blobs.contains_key(&key);
        if created {
            blobs.insert(key, bytes);
        }
        Ok(PutBlob {
            artifact,
            size,
            created,
        })
    }

    async fn read(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        Ok(lock(&self.blobs).get(&(tenant.clone(), *artifact)).cloned())
    }

    async fn size(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        Ok(lock(&self.blobs)
            .get(&(tenant.clone(), *artifact))
            .map(|b| b.len() as u64))
    }

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        Ok(lock(&self.blobs)
            .remove(&(tenant.clone(), *artifact))
            .is_some())
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
            },
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
