//! The DynamoDB [`TokenStore`]: token hashes in the metadata table, one
//! partition (`TOKENS`, see [`super::table`]) so that listing them is one
//! Query and a lookup by hash one GetItem.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::table::{self, consistent_get, from_item, key, s, to_item};
use super::{DynamoMetaStore, sdk_error};
use crate::clock::micros_to_time;
use crate::error::Result;
use crate::id::{Hash, TenantId};
use crate::store::{TokenRecord, TokenStore, token_id};

/// A token item.
#[derive(Debug, Serialize, Deserialize)]
struct TokenItem {
    pk: String,
    sk: String,
    /// The public id.
    id: String,
    tenant: TenantId,
    /// When it was added, in µs.
    created_at: i64,
}

impl From<TokenItem> for TokenRecord {
    fn from(t: TokenItem) -> Self {
        TokenRecord {
            id: t.id,
            tenant: t.tenant,
            created_at: micros_to_time(t.created_at),
        }
    }
}

impl DynamoMetaStore {
    /// The token items whose sort key starts with `prefix`, every page.
    async fn token_items(&self, prefix: &str) -> Result<Vec<TokenItem>> {
        let q = self
            .client()
            .query()
            .table_name(self.table())
            .expression_attribute_values(":pk", s(table::TOKENS_PK))
            .consistent_read(true);
        let q = if prefix.is_empty() {
            q.key_condition_expression("pk = :pk")
        } else {
            q.key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
        };
        let mut items = q.into_paginator().items().send();
        let mut out = Vec::new();
        while let Some(item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?
        {
            out.push(from_item(item)?);
        }
        Ok(out)
    }
}

#[async_trait]
impl TokenStore for DynamoMetaStore {
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord> {
        let item = TokenItem {
            pk: table::TOKENS_PK.to_owned(),
            sk: table::token_sk(hash),
            id: token_id(hash),
            tenant: tenant.clone(),
            created_at: now.timestamp_micros(),
        };
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(to_item(&item)?))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB PutItem", e))?;
        Ok(item.into())
    }

    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>> {
        let item = consistent_get(
            self.client(),
            self.table(),
            table::TOKENS_PK.to_owned(),
            table::token_sk(hash),
        )
        .await?;
        Ok(item
            .map(from_item::<TokenItem>)
            .transpose()?
            .map(|t| t.tenant))
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let mut all: Vec<TokenRecord> = self
            .token_items("")
            .await?
            .into_iter()
            .map(Into::into)
            .collect();
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(all)
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let Some(prefix) = table::token_id_prefix(id) else {
            return Ok(false);
        };
        let mut revoked = false;
        for t in self.token_items(prefix).await? {
            if t.id != id {
                continue;
            }
            let old = self
                .client()
                .delete_item()
                .table_name(self.table())
                .set_key(Some(key(t.pk, t.sk)))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB DeleteItem", e))?;
            revoked |= old.attributes.is_some_and(|a| !a.is_empty());
        }
        Ok(revoked)
    }
}
