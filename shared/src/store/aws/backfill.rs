//! The one-time backfill of the lifecycle index items
//! ([`Lifecycle::backfill_index`](crate::store::Lifecycle::backfill_index)):
//! commits written before the index items of issue 11, and branches
//! written before their session's `M#` member item, are invisible to an
//! erase and to retention until their items exist. One Scan of the table
//! (by-id commit items and branch records), and per record one
//! TransactWriteItems: a ConditionCheck that the record still exists, then
//! its keys-only index items as idempotent Puts. A session's last write is
//! an UpdateItem that only moves it forward.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem};

use super::branches::record_of;
use super::meta::DynamoMetaStore;
use super::retry::{Written, transact};
use super::sdk_error;
use super::table::{
    self, INLINE_ATTRS, IndexItems, Item, build, commit_item, index_items, key, put_item, s,
};
use crate::error::{Error, Result};
use crate::id::TenantId;
use crate::store::Backfilled;

impl DynamoMetaStore {
    /// [`Lifecycle::backfill_index`](crate::store::Lifecycle::backfill_index)
    /// on the table.
    pub(super) async fn backfill(&self, tenant: Option<&TenantId>) -> Result<Backfilled> {
        let mut out = Backfilled::default();
        let mut registered: HashSet<TenantId> = HashSet::new();
        let scan = self
            .client()
            .scan()
            .table_name(self.table())
            .expression_attribute_values(":c", s(table::COMMIT_SK))
            .expression_attribute_values(":b", s(table::BRANCH_SK));
        let scan = match tenant {
            Some(t) => scan
                .filter_expression("(sk = :c OR sk = :b) AND begins_with(pk, :t)")
                .expression_attribute_values(":t", s(format!("T#{t}#"))),
            None => scan.filter_expression("sk = :c OR sk = :b"),
        };
        let mut items = scan.consistent_read(true).into_paginator().items().send();
        while let Some(mut item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Scan", e))?
        {
            let (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) =
                (item.get("pk").cloned(), item.get("sk").cloned())
            else {
                continue;
            };
            let (entries, last) = if sk == table::COMMIT_SK {
                let Some((tenant, _)) = table::parse_commit_pk(&pk) else {
                    continue;
                };
                // The bytes are not needed: leave them undecoded.
                for (attr, _) in INLINE_ATTRS {
                    item.remove(attr);
                }
                let commit = commit_item(item)?.c;
                out.commits += 1;
                let IndexItems {
                    keys: entries,
                    last,
                } = index_items(&tenant, &commit);
                if commit.parent.is_none() && registered.insert(tenant.clone()) {
                    self.register(&tenant).await?;
                    out.entries += 1;
                }
                (entries, last)
            } else {
                let Some((tenant, _)) = table::parse_branch_pk(&pk) else {
                    continue;
                };
                let rec = record_of(item)?;
                out.branches += 1;
                let member = key(
                    table::session_pk(&tenant, &rec.session_id),
                    table::member_sk(&rec.id),
                );
                (vec![member], None)
            };
            let written = entries.len() as u64;
            if self.put_while_exists(&pk, &sk, entries).await? {
                out.entries += written;
                if let Some(last) = last {
                    out.entries += u64::from(self.move_last_forward(last).await?);
                }
            } else {
                out.gone += 1;
            }
        }
        Ok(out)
    }

    /// Puts `entries` in one transaction with a check that the record at
    /// `pk`/`sk` exists; false when it is gone (deleted meanwhile).
    async fn put_while_exists(&self, pk: &str, sk: &str, entries: Vec<Item>) -> Result<bool> {
        let check = ConditionCheck::builder()
            .table_name(self.table())
            .set_key(Some(key(pk.to_owned(), sk)))
            .condition_expression("attribute_exists(pk)");
        let mut items = vec![
            TransactWriteItem::builder()
                .condition_check(build(check.build())?)
                .build(),
        ];
        for entry in entries {
            items.push(put_item(self.table(), entry)?);
        }
        let what = format!("backfilling the index entries of {pk}");
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(true),
            Written::ConditionFailed { .. } => Ok(false),
        }
    }

    /// Writes a session's last write from `item` (every attribute of it,
    /// its index keys included) unless a later one is stored; true when it
    /// was written.
    async fn move_last_forward(&self, mut item: Item) -> Result<bool> {
        let (Some(pk), Some(sk)) = (item.remove("pk"), item.remove("sk")) else {
            return Err(Error::internal("a session's last-write item lacks a key"));
        };
        if !item.contains_key("last") {
            return Err(Error::internal(
                "a session's last-write item lacks its time",
            ));
        }
        let mut update = self
            .client()
            .update_item()
            .table_name(self.table())
            .key("pk", pk)
            .key("sk", sk)
            .condition_expression("attribute_not_exists(#a_last) OR #a_last < :v_last");
        let mut sets = Vec::new();
        for (name, value) in item {
            sets.push(format!("#a_{name} = :v_{name}"));
            update = update
                .expression_attribute_names(format!("#a_{name}"), name.clone())
                .expression_attribute_values(format!(":v_{name}"), value);
        }
        let r = update
            .update_expression(format!("SET {}", sets.join(", ")))
            .send()
            .await;
        Ok(super::conditional(r, "DynamoDB UpdateItem")?.is_some())
    }

    /// Puts `tenant` in the registry the scheduled batches read
    /// (idempotent).
    async fn register(&self, tenant: &TenantId) -> Result<()> {
        self.client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(key(
                table::TENANTS_PK.to_owned(),
                table::tenant_sk(tenant),
            )))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB PutItem", e))?;
        Ok(())
    }
}
