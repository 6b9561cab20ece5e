//! Bearer tokens, stored by hash: the [`TokenStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::id::{Hash, TenantId};

/// Bearer tokens, stored by hash.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// Registers the token whose BLAKE3 hash is `hash` for `tenant`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord>;

    /// The tenant of the token hashing to `hash`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>>;

    /// Every token, oldest first.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>>;

    /// Removes the token with public id `id`; false if there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn revoke_token(&self, id: &str) -> Result<bool>;

    /// Revokes every token of `tenant` (the first step of a tenant erase:
    /// nothing new is written for it after); returns how many.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn revoke_tenant(&self, tenant: &TenantId) -> Result<u64> {
        let mut revoked = 0;
        for t in self.list_tokens().await? {
            if &t.tenant == tenant && self.revoke_token(&t.id).await? {
                revoked += 1;
            }
        }
        Ok(revoked)
    }
}

/// A registered bearer token (only its hash is stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// A short public id for listing and revoking: `tok-` + 12 hex digits.
    pub id: String,
    /// The tenant the token acts for.
    pub tenant: TenantId,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}

impl TokenRecord {
    /// The record of the token hashing to `hash`, added for `tenant` at
    /// `now` (its public id derived from the hash).
    pub fn new(hash: &Hash, tenant: &TenantId, now: DateTime<Utc>) -> Self {
        TokenRecord {
            id: token_id(hash),
            tenant: tenant.clone(),
            created_at: now,
        }
    }
}

/// The public id of the token hashing to `hash`.
pub fn token_id(hash: &Hash) -> String {
    format!("tok-{}", &hash.to_hex()[..12])
}
