//! The DynamoDB store's the materialization cache ([`MaterializationCache`](crate::store::MaterializationCache)).

use super::items::{from_item, to_item};
use super::lifecycle::delete_item;
use super::meta::MaterializedItem;
use super::{DynamoMetaStore, keys, sdk_error};
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};
use async_trait::async_trait;

#[async_trait]
impl crate::store::MaterializationCache for DynamoMetaStore {
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        let item = self
            .get_item(
                keys::materialized_pk(tenant, &key.commit),
                keys::materialized_sk(&key.stop.to_string(), &key.format),
            )
            .await?;
        item.map(|i| from_item::<MaterializedItem>(i).map(|m| m.m))
            .transpose()
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let item = to_item(&MaterializedItem {
            pk: keys::materialized_pk(tenant, &key.commit),
            sk: keys::materialized_sk(&key.stop.to_string(), &key.format),
            m: value.clone(),
        })?;
        self.write_cache_entry(item, key, tenant, &value.artifact_ref)
            .await
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        let rows = self
            .sort_keys(keys::materialized_pk(tenant, commit), usize::MAX)
            .await?;
        rows.into_iter()
            .map(|(sk, item)| {
                let bad = || Error::internal(format!("cache entry {sk:?} is malformed"));
                let (stop, format) = keys::parse_materialized_sk(&sk).ok_or_else(bad)?;
                let k = MaterializeKey {
                    commit: *commit,
                    stop: stop.parse().map_err(|_| bad())?,
                    format: format.parse().map_err(|_| bad())?,
                };
                let m = from_item::<super::meta::MaterializedItem>(item)?.m;
                Ok((k, m))
            })
            .collect()
    }

    async fn delete_materialized(&self, tenant: &TenantId, k: &MaterializeKey) -> Result<bool> {
        let pk = keys::materialized_pk(tenant, &k.commit);
        let sk = keys::materialized_sk(&k.stop.to_string(), &k.format);
        let Some(item) =
            super::items::consistent_get(self.client(), self.table(), pk.clone(), sk.clone())
                .await?
        else {
            return Ok(false);
        };
        let m = from_item::<super::meta::MaterializedItem>(item)?.m;
        let items = vec![
            delete_item(self.table(), pk, sk)?,
            delete_item(
                self.table(),
                keys::artifact_users_pk(tenant, &m.artifact_ref),
                keys::user_cached_sk(&k.commit, &k.stop.to_string(), &k.format),
            )?,
        ];
        self.client()
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB TransactWriteItems", e))?;
        Ok(true)
    }
}
