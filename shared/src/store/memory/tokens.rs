//! The in-memory store's bearer tokens ([`TokenStore`](crate::store::TokenStore)).

use super::{MemoryMetaStore, lock};
use crate::error::Result;
use crate::id::{Hash, TenantId};
use crate::store::{TokenRecord, TokenStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl TokenStore for MemoryMetaStore {
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord> {
        let rec = TokenRecord::new(hash, tenant, now);
        lock(&self.meta).tokens.insert(*hash, rec.clone());
        Ok(rec)
    }

    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>> {
        Ok(lock(&self.meta).tokens.get(hash).map(|r| r.tenant.clone()))
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let mut all: Vec<_> = lock(&self.meta).tokens.values().cloned().collect();
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(all)
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let mut m = lock(&self.meta);
        let before = m.tokens.len();
        m.tokens.retain(|_, r| r.id != id);
        Ok(m.tokens.len() != before)
    }
}
