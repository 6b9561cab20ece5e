//! The operator's tenant erase on DynamoDB: every item of a tenant lives
//! under a partition key starting `T#<tenant>#` (layout in [`super::table`];
//! the GSIs are projections of those items and go with them), plus the
//! tenant's entry in the `TENANTS` registry. Tokens (`TOKENS`) are the
//! token store's. A paginated Scan filtered on the prefix finds the keys;
//! BatchWriteItem deletes them 25 at a time, retrying unprocessed ones
//! under the stores' retry policy ([`super::retry::POLICY`]).

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};

use super::meta::DynamoMetaStore;
use super::retry::POLICY;
use super::sdk_error;
use super::table::{self, build, key, s};
use crate::error::{Error, Result};
use crate::store::TenantRecords;

/// Deletes one BatchWriteItem may carry.
pub(super) const BATCH_WRITE: usize = 25;

/// Counts the item with partition `pk` (under `prefix`) and sort key `sk`.
pub(super) fn count(r: &mut TenantRecords, prefix: &str, pk: &str, sk: &str) {
    let rest = pk.strip_prefix(prefix).unwrap_or(pk);
    if rest.starts_with("C#") && sk == table::COMMIT_SK {
        r.commits += 1;
    } else if rest.starts_with("REF#") && sk == table::REF_SK {
        r.refs += 1;
    } else if rest.starts_with("M#") {
        r.cache += 1;
    } else if rest.starts_with("AG#") {
        r.agents += 1;
    } else if rest.starts_with("BR#")
        || rest.starts_with("SS#")
        || rest == "BRANCHES"
        || rest == "MEM"
    {
        r.branches += 1;
    } else {
        r.other += 1;
    }
}

impl DynamoMetaStore {
    /// Up to `limit` keys of `tenant`'s items (a Scan on the prefix).
    pub(super) async fn tenant_keys(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        // The stream is lazy: no page is asked for once `limit` are read.
        let mut items = self
            .client()
            .scan()
            .table_name(self.table())
            .filter_expression("begins_with(pk, :p)")
            .expression_attribute_values(":p", s(prefix))
            .projection_expression("pk, sk")
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        while let Some(item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Scan", e))?
        {
            if let (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) =
                (item.get("pk"), item.get("sk"))
            {
                out.push((pk.clone(), sk.clone()));
                if out.len() == limit {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// Deletes `batch` (at most 25 keys), retrying what DynamoDB leaves
    /// unprocessed under the retry policy; what is still left after its
    /// attempts is `Unavailable` (the re-run finishes it).
    pub(super) async fn delete_batch(&self, batch: &[(String, String)]) -> Result<()> {
        let mut pending = batch
            .iter()
            .map(|(pk, sk)| {
                Ok(WriteRequest::builder()
                    .delete_request(build(
                        DeleteRequest::builder()
                            .set_key(Some(key(pk.clone(), sk.clone())))
                            .build(),
                    )?)
                    .build())
            })
            .collect::<Result<Vec<_>>>()?;
        for attempt in 1..=POLICY.attempts {
            let out = self
                .client()
                .batch_write_item()
                .request_items(self.table(), pending)
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB BatchWriteItem", e))?;
            pending = out
                .unprocessed_items
                .and_then(|mut m| m.remove(self.table()))
                .unwrap_or_default();
            if pending.is_empty() {
                return Ok(());
            }
            if attempt < POLICY.attempts {
                // Back off before retrying the throttled rest.
                POLICY.sleep(attempt, &*self.ids).await;
            }
        }
        Err(Error::unavailable(format!(
            "DynamoDB left {} delete(s) unprocessed after {} attempts; run the erase again",
            pending.len(),
            POLICY.attempts
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TenantId;

    #[test]
    fn items_are_counted_by_their_key_shape() {
        let t: TenantId = "acme".parse().unwrap();
        let p = format!("T#{t}#");
        let mut r = TenantRecords::default();
        for (pk, sk) in [
            ("C#ctx-1", "C"),
            ("L#ctx-1", "D#00000000000000000000"),
            ("REF#sessions/a", "R"),
            ("S#s", "LAST"),
            ("M#ctx-1", "root#raw"),
            ("AG#bot", "A"),
            ("AG#bot", "S#sav-1"),
            ("BR#br-1", "B"),
            ("SS#s", "META"),
            ("BRANCHES", "ACTIVE"),
            ("P#bot", "TS#1#ctx-1"),
            ("PIN", "session#s"),
        ] {
            count(&mut r, &p, &format!("{p}{pk}"), sk);
        }
        assert_eq!(
            r,
            TenantRecords {
                commits: 1,
                refs: 1,
                cache: 1,
                agents: 2,
                branches: 3,
                other: 4,
            }
        );
    }
}
