//! The DynamoDB store's the materialization cache ([`MaterializationCache`](crate::store::MaterializationCache)).

use super::DynamoMetaStore;
use super::retry::{Written, transact};
use super::table::{self, MaterializedItem, build, delete_item, from_item, put_item, to_item};
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};

#[async_trait]
impl crate::store::MaterializationCache for DynamoMetaStore {
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        let item = self
            .get_item(
                table::materialized_pk(tenant, &key.commit),
                table::materialized_sk(&key.stop.to_string(), &key.format),
            )
            .await?;
        item.map(|i| from_item::<MaterializedItem>(i).map(|m| m.m))
            .transpose()
    }

    /// One `TransactWriteItems`: the entry and its artifact-user item, on
    /// condition that the commit's item exists (`NotFound` if not).
    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let entry = to_item(&MaterializedItem {
            pk: table::materialized_pk(tenant, &key.commit),
            sk: table::materialized_sk(&key.stop.to_string(), &key.format),
            m: value.clone(),
        })?;
        let user = table::key(
            table::artifact_users_pk(tenant, &value.artifact_ref),
            table::user_cached_sk(&key.commit, &key.stop.to_string(), &key.format),
        );
        let commit = ConditionCheck::builder()
            .table_name(self.table())
            .set_key(Some(table::key(
                table::commit_pk(tenant, &key.commit),
                table::COMMIT_SK,
            )))
            .condition_expression("attribute_exists(pk)")
            .build();
        let items = vec![
            put_item(self.table(), entry)?,
            put_item(self.table(), user)?,
            TransactWriteItem::builder()
                .condition_check(build(commit)?)
                .build(),
        ];
        let what = format!("caching a materialization of commit {}", key.commit);
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(()),
            Written::ConditionFailed { .. } => Err(crate::store::gone_commit(&key.commit)),
        }
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        let rows = self
            .sort_keys(table::materialized_pk(tenant, commit), usize::MAX)
            .await?;
        rows.into_iter()
            .map(|(sk, item)| {
                let bad = || Error::internal(format!("cache entry {sk:?} is malformed"));
                let (stop, format) = table::parse_materialized_sk(&sk).ok_or_else(bad)?;
                let k = MaterializeKey {
                    commit: *commit,
                    stop: stop.parse().map_err(|_| bad())?,
                    format: format.parse().map_err(|_| bad())?,
                };
                let m = from_item::<MaterializedItem>(item)?.m;
                Ok((k, m))
            })
            .collect()
    }

    async fn delete_materialized(&self, tenant: &TenantId, k: &MaterializeKey) -> Result<bool> {
        let pk = table::materialized_pk(tenant, &k.commit);
        let sk = table::materialized_sk(&k.stop.to_string(), &k.format);
        let Some(item) =
            table::consistent_get(self.client(), self.table(), pk.clone(), sk.clone()).await?
        else {
            return Ok(false);
        };
        let m = from_item::<MaterializedItem>(item)?.m;
        let items = vec![
            delete_item(self.table(), table::key(pk, sk))?,
            delete_item(
                self.table(),
                table::key(
                    table::artifact_users_pk(tenant, &m.artifact_ref),
                    table::user_cached_sk(&k.commit, &k.stop.to_string(), &k.format),
                ),
            )?,
        ];
        let what = format!("deleting a materialization of commit {}", k.commit);
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(true),
            Written::ConditionFailed { index } => Err(Error::internal(format!(
                "{what}: unconditional item {index} failed a condition"
            ))),
        }
    }
}
