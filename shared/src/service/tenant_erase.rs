//! The operator's tenant erase: every record and every stored byte of one
//! tenant, in an order that is safe to interrupt and re-run.
//!
//! # Erase order (crash safety)
//! 1. The tenant's bearer tokens are revoked, so no request of the tenant
//!    writes (or reads) anything meanwhile.
//! 2. Its metadata ([`MetaStore::erase_tenant`]): commits with every index
//!    of them, timelines, refs, pins, agents and saves, the
//!    materialization cache, the summary queue, branch records. SQLite
//!    removes it in one transaction; DynamoDB in batches of a Scan on the
//!    tenant's key prefix.
//! 3. Its bytes ([`BlobStore::erase_tenant`]): durable artifacts, cached
//!    results and staged uploads, found by the tenant's prefix.
//! 4. [`MetaStore::compact`]: SQLite gives the space back and truncates its
//!    write-ahead log, which still holds the deleted rows' images.
//!
//! Metadata goes before bytes, so no commit or cache entry is ever left
//! naming an artifact that is gone. Nothing is found through a commit:
//! every step lists by tenant, so an erase interrupted anywhere (tokens
//! gone and half the rows, or rows gone and half the files) finishes when
//! it is run again, and a run with nothing left reports zeros.

use serde::{Deserialize, Serialize};

use super::Service;
use crate::error::Result;
use crate::id::TenantId;
use crate::store::{TenantRecords, TokenStore};

/// Records removed per [`Lifecycle::erase_tenant`](crate::store::Lifecycle::erase_tenant) call.
pub const META_BATCH: usize = 1000;
/// Objects removed per [`BlobStore::erase_tenant`](crate::store::BlobStore::erase_tenant) call.
pub const BLOB_BATCH: usize = 1000;

/// What a tenant erase removed (only what was there: a re-run after a
/// finished erase reports zeros).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantErased {
    /// The tenant.
    pub tenant: TenantId,
    /// Bearer tokens revoked.
    pub tokens: u64,
    /// Metadata records removed, by kind.
    #[serde(flatten)]
    pub records: TenantRecords,
    /// Stored objects removed: artifacts, cached results, staged uploads.
    pub blobs: u64,
    /// Bytes the metadata store gave back to the filesystem.
    pub reclaimed_bytes: u64,
}

impl TenantErased {
    /// True when there was nothing of the tenant to remove.
    pub fn is_empty(&self) -> bool {
        self.tokens == 0 && self.records.total() == 0 && self.blobs == 0
    }
}

impl Service {
    /// Erases every record and every stored byte of `tenant` (see the
    /// module documentation for the order), revoking its tokens in
    /// `tokens` first when given; `progress` is called after each step and
    /// batch with the totals so far. Idempotent: run again after an
    /// interruption it finishes; after a finished erase it removes nothing.
    /// Other tenants are untouched.
    ///
    /// # Errors
    /// `Unavailable` when a store fails (run it again).
    pub async fn erase_tenant(
        &self,
        tenant: &TenantId,
        tokens: Option<&dyn TokenStore>,
        mut progress: impl FnMut(&TenantErased) + Send,
    ) -> Result<TenantErased> {
        let mut out = TenantErased {
            tenant: tenant.clone(),
            tokens: 0,
            records: TenantRecords::default(),
            blobs: 0,
            reclaimed_bytes: 0,
        };
        if let Some(tokens) = tokens {
            out.tokens = tokens.revoke_tenant(tenant).await?;
            progress(&out);
        }
        // Nothing of the tenant held in memory or stored behind (see
        // `hot`), whether the erase finishes or fails partway.
        self.hot
            .purging(tenant, async {
                loop {
                    let r = self.stores.meta.erase_tenant(tenant, META_BATCH).await?;
                    if r.total() == 0 {
                        break;
                    }
                    out.records.add(&r);
                    progress(&out);
                }
                loop {
                    let n = self.stores.blobs.erase_tenant(tenant, BLOB_BATCH).await?;
                    if n == 0 {
                        break;
                    }
                    out.blobs += n;
                    progress(&out);
                }
                Ok(())
            })
            .await?;
        out.reclaimed_bytes = self.stores.meta.reclaim_space().await?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
