//! The DynamoDB store's refs ([`Refs`](crate::store::Refs)).

use super::items::{from_item, key, s};
use super::meta::{RefItem, ref_record};
use super::{DynamoMetaStore, conditional, keys, sdk_error};
use crate::error::Result;
use crate::id::{CommitId, RefName, TenantId};
use crate::store::{RefMove, RefRecord, ref_conflict};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::Refs for DynamoMetaStore {
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        let item = self
            .get_item(keys::refs_pk(tenant), keys::ref_sk(name))
            .await?;
        item.map(|i| from_item::<RefItem>(i).and_then(ref_record))
            .transpose()
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        let mv = RefMove {
            name: name.clone(),
            expected: expected.copied(),
        };
        let mut nonce = [0u8; 16];
        self.ids.fill(&mut nonce);
        let nonce = hex::encode(nonce);
        let put = self.ref_put(tenant, &mv, target, now, Some(nonce.clone()))?;
        let put = put.put.expect("ref_put builds a put");
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(put.item))
            .set_condition_expression(put.condition_expression)
            .set_expression_attribute_names(put.expression_attribute_names)
            .set_expression_attribute_values(put.expression_attribute_values)
            .send()
            .await;
        match conditional(result, "DynamoDB PutItem")? {
            Some(_) => Ok(RefRecord {
                name: name.clone(),
                target: *target,
                updated_at: now,
            }),
            None => {
                let item = self
                    .get_item(keys::refs_pk(tenant), keys::ref_sk(name))
                    .await?;
                let item = item.map(from_item::<RefItem>).transpose()?;
                let current = match item {
                    // Our first attempt landed; its response was lost.
                    Some(i) if i.w.as_deref() == Some(nonce.as_str()) => return ref_record(i),
                    Some(i) => Some(i.target),
                    None => None,
                };
                Err(ref_conflict(name, expected, current.as_ref()))
            }
        }
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::refs_pk(tenant), keys::ref_sk(name))))
            .condition_expression("#target = :expected")
            .expression_attribute_names("#target", "target")
            .expression_attribute_values(":expected", s(expected.to_string()))
            .send()
            .await;
        match conditional(result, "DynamoDB DeleteItem")? {
            Some(_) => Ok(()),
            None => {
                let current = self.current_ref(tenant, name).await?;
                Err(ref_conflict(name, Some(expected), current.as_ref()))
            }
        }
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(keys::refs_pk(tenant)))
            .consistent_read(true)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        let q = if prefix.is_empty() {
            q.key_condition_expression("pk = :pk")
        } else {
            q.key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
        };
        // The stream is lazy: no page is asked for once `limit` are read.
        let mut items = q.into_paginator().items().send();
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(item) = items
                .try_next()
                .await
                .map_err(|e| sdk_error("DynamoDB Query", e))?
            else {
                break;
            };
            out.push(ref_record(from_item(item)?)?);
        }
        Ok(out)
    }
}
