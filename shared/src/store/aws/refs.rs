//! The DynamoDB store's refs ([`Refs`](crate::store::Refs)): each ref is
//! one item on its own partition, read and moved strongly consistently
//! there; listing by prefix reads the keys-only `listing` index (so it is
//! eventually consistent) and then the refs it names.

use super::table::{self, RefItem, batch_get, from_item, key, ref_put, ref_record, s};
use super::{DynamoMetaStore, conditional, sdk_error};
use crate::error::{Error, Result};
use crate::id::{CommitId, RefName, TenantId};
use crate::store::{RefMove, RefRecord, ref_conflict};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::Refs for DynamoMetaStore {
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        let item = self
            .get_item(table::ref_pk(tenant, name), table::REF_SK.to_owned())
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
        let put = ref_put(&self.table, tenant, &mv, target, now, Some(nonce.clone()))?;
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
                    .get_item(table::ref_pk(tenant, name), table::REF_SK.to_owned())
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
            .set_key(Some(key(table::ref_pk(tenant, name), table::REF_SK)))
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

    /// The index's entries in name order, then the refs they name
    /// (BatchGetItem, strongly consistent, up to 100 at a time); a ref
    /// deleted since the index listed it is left out.
    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        /// Refs asked for per BatchGetItem.
        const BATCH: usize = 100;
        // The next page starts after `after`'s place in the index: its key
        // there (the index's and the table's), whether or not it still exists.
        // DynamoDB takes only a start key inside the prefix's range: one
        // before it starts the range, one past it leaves nothing.
        let after = match after {
            Some(a) if !a.as_str().starts_with(prefix) => {
                if a.as_str() > prefix {
                    return Ok(Vec::new());
                }
                None
            }
            a => a,
        };
        let start = after.map(|a| {
            let mut k = key(table::ref_pk(tenant, a), table::REF_SK);
            k.insert("lk".to_owned(), s(table::refs_list_key(tenant)));
            k.insert("ls".to_owned(), s(table::ref_list_sk(a)));
            k
        });
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(table::LISTING_INDEX)
            .expression_attribute_values(":lk", s(table::refs_list_key(tenant)))
            .limit(i32::try_from(limit.clamp(1, BATCH)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start);
        let q = if prefix.is_empty() {
            q.key_condition_expression("lk = :lk")
        } else {
            q.key_condition_expression("lk = :lk AND begins_with(ls, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
        };
        // The stream is lazy: no page is asked for once `limit` are read.
        let mut entries = q.into_paginator().items().send();
        let mut out = Vec::new();
        let mut done = false;
        while out.len() < limit && !done {
            let mut names = Vec::new();
            while names.len() < (limit - out.len()).min(BATCH) {
                let Some(entry) = entries
                    .try_next()
                    .await
                    .map_err(|e| sdk_error("DynamoDB Query", e))?
                else {
                    done = true;
                    break;
                };
                match entry.get("ls") {
                    Some(aws_sdk_dynamodb::types::AttributeValue::S(name)) => {
                        names.push(name.parse::<RefName>().map_err(|_| {
                            Error::internal(format!("the listing index names a ref {name:?}"))
                        })?);
                    }
                    _ => return Err(Error::internal("a listing index entry has no ls")),
                }
            }
            let wanted = names
                .iter()
                .map(|n| key(table::ref_pk(tenant, n), table::REF_SK))
                .collect();
            let mut found = std::collections::HashMap::new();
            for item in batch_get(&self.client, &self.table, wanted).await? {
                let r = ref_record(from_item::<RefItem>(item)?)?;
                found.insert(r.name.clone(), r);
            }
            out.extend(names.iter().filter_map(|n| found.remove(n)));
        }
        Ok(out)
    }
}
