//! The SQLite store's bearer tokens ([`TokenStore`](crate::store::TokenStore)).

use super::{SqliteMetaStore, sql};
use crate::clock::micros_to_time;
use crate::error::{Error, Result};
use crate::id::{Hash, TenantId};
use crate::store::{TokenRecord, TokenStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

#[async_trait]
impl TokenStore for SqliteMetaStore {
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord> {
        let rec = TokenRecord::new(hash, tenant, now);
        let (hash, r) = (*hash, rec.clone());
        self.db
            .transaction(move |conn| {
                conn.execute(
                    "INSERT INTO tokens (hash, id, tenant, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        hash.to_hex(),
                        r.id,
                        r.tenant.as_str(),
                        r.created_at.timestamp_micros()
                    ],
                )
                .map_err(sql)?;
                Ok(())
            })
            .await?;
        Ok(rec)
    }

    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>> {
        let hash = *hash;
        let tenant: Option<String> = self
            .db
            .lookup(move |conn| {
                Ok(conn
                    .prepare_cached("SELECT tenant FROM tokens WHERE hash = ?1")?
                    .query_row(params![hash.to_hex()], |r| r.get(0))
                    .optional()?)
            })
            .await?;
        tenant
            .map(|t| {
                t.parse().map_err(|_| {
                    Error::internal(format!("token table holds a malformed tenant {t:?}"))
                })
            })
            .transpose()
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let rows: Vec<(String, String, i64)> = self
            .db
            .read(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, tenant, created_at FROM tokens ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(id, t, at)| {
                Ok(TokenRecord {
                    id,
                    tenant: t.parse().map_err(|_| {
                        Error::internal(format!("token table holds a malformed tenant {t:?}"))
                    })?,
                    created_at: micros_to_time(at),
                })
            })
            .collect()
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.db
            .transaction(move |conn| {
                Ok(conn
                    .execute("DELETE FROM tokens WHERE id = ?1", params![id])
                    .map_err(sql)?
                    > 0)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::SqliteMetaStore;
    use super::*;
    use crate::clock::micros_to_time;

    #[tokio::test]
    async fn data_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let t: TenantId = "t".parse().unwrap();
        let hash = Hash::of(b"tok");
        {
            let meta = SqliteMetaStore::open(dir.path()).unwrap();
            meta.add_token(&hash, &t, micros_to_time(0)).await.unwrap();
        }
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        assert_eq!(meta.tenant_for(&hash).await.unwrap(), Some(t));
    }
}
