//! The DynamoDB [`BranchStore`] of AWS mode, in the metadata table (keys in
//! `store::aws::table`). Creation is one `TransactWriteItems` whose
//! conditional updates check and bump the session's and the tenant's
//! active counts and the session's minute window together with the record,
//! so the limits hold across concurrent Lambdas; finishing is one
//! transaction conditioned on the status being active, so a slot is
//! released exactly once.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use futures::{StreamExt as _, TryStreamExt as _};

use super::retry::{Written, transact};
use super::table::{self, Item, build, consistent_get, key, n, s};
use super::{conditional, sdk_error};
use crate::branch::memories::{MemoryId, MemoryQuery, MemoryRecord, Ranker, ScoredMemory};
use crate::branch::{
    ActiveBranch, BranchRecord, BranchStatus, BranchStore, Finish, Limit, RateLimits,
    branch_exists, branch_not_found, minute_window, not_active, over_limit,
};
use crate::clock::IdSource;
use crate::error::{Error, Result};
use crate::id::{BranchId, CommitId, SessionId, TenantId};

/// Branches in the DynamoDB metadata table.
#[derive(Clone)]
pub struct DynamoBranchStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
    /// The jitter of transaction retries.
    ids: Arc<dyn IdSource>,
}

impl std::fmt::Debug for DynamoBranchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoBranchStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

fn record_value(rec: &BranchRecord) -> Result<AttributeValue> {
    serde_dynamo::to_attribute_value(rec)
        .map_err(|e| Error::internal(format!("cannot encode branch {}: {e}", rec.id)))
}

pub(super) fn record_of(mut item: Item) -> Result<BranchRecord> {
    let r = item
        .remove("r")
        .ok_or_else(|| Error::internal("a stored branch item has no record"))?;
    serde_dynamo::from_attribute_value(r)
        .map_err(|e| Error::internal(format!("a stored branch does not decode: {e}")))
}

impl DynamoBranchStore {
    /// A store over `table`, the jitter of its retries drawn from `ids`.
    pub fn new(client: aws_sdk_dynamodb::Client, table: String, ids: Arc<dyn IdSource>) -> Self {
        DynamoBranchStore { client, table, ids }
    }

    /// The items of a session's partition (those whose sort key starts
    /// with `prefix`, if given), every page.
    async fn session_items(
        &self,
        tenant: &TenantId,
        session: &str,
        prefix: Option<&str>,
    ) -> Result<Vec<Item>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(table::session_pk(tenant, session)));
        let query = match prefix {
            Some(p) => query
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", s(p)),
            None => query.key_condition_expression("pk = :pk"),
        };
        query
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))
    }

    /// The sort keys of `items`.
    fn sort_keys(items: &[Item]) -> impl Iterator<Item = &str> {
        items
            .iter()
            .filter_map(|i| i.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str))
    }

    async fn delete(&self, pk: String, sk: String) -> Result<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB DeleteItem", e))?;
        Ok(())
    }

    async fn get(&self, pk: String, sk: &str) -> Result<Option<Item>> {
        consistent_get(&self.client, &self.table, pk, sk).await
    }

    fn update(
        &self,
        pk: String,
        sk: impl Into<String>,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
    }

    /// The error of a failed condition on an existing-or-not branch.
    async fn not_active_or_missing(&self, tenant: &TenantId, id: &BranchId) -> Error {
        match self.get_branch(tenant, id).await {
            Ok(Some(rec)) => not_active(id, rec.status),
            Ok(None) => branch_not_found(id),
            Err(e) => e,
        }
    }
}

#[async_trait]
impl BranchStore for DynamoBranchStore {
    async fn create_branch(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        limits: &RateLimits,
    ) -> Result<()> {
        let mut item = key(table::branch_pk(tenant, &rec.id), table::BRANCH_SK);
        item.insert("r".into(), record_value(rec)?);
        item.insert("status".into(), s(rec.status.as_str()));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)");
        let mut active = key(
            table::session_pk(tenant, &rec.session_id),
            table::active_sk(&rec.id),
        );
        active.insert("depth".into(), n(rec.depth));
        if let Some(p) = &rec.parent_branch {
            active.insert("parent".into(), s(p.to_string()));
        }
        let membership = Put::builder()
            .table_name(&self.table)
            .set_item(Some(active));
        let count = |pk: String, sk: &str, max: u32| {
            self.update(pk, sk)
                .update_expression("SET active = if_not_exists(active, :zero) + :one")
                .condition_expression("attribute_not_exists(active) OR active < :max")
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":max", n(max))
        };
        let session = count(
            table::session_pk(tenant, &rec.session_id),
            table::SESSION_META_SK,
            limits.active_per_session,
        )
        .update_expression("SET active = if_not_exists(active, :zero) + :one, #owner = if_not_exists(#owner, :owner)")
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":owner", s(rec.owner.clone()));
        let tenant_count = count(
            table::tenant_branches_pk(tenant),
            table::TENANT_ACTIVE_SK,
            limits.active_per_tenant,
        );
        let window = minute_window(rec.created_at);
        let window_update = self
            .update(
                table::session_pk(tenant, &rec.session_id),
                table::window_sk(window),
            )
            .update_expression("SET n = if_not_exists(n, :zero) + :one, expires_at = :ttl")
            .condition_expression("attribute_not_exists(n) OR n < :max")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":max", n(limits.creations_per_minute))
            .expression_attribute_values(":ttl", n(window + 3600));
        let member = Put::builder().table_name(&self.table).set_item(Some(key(
            table::session_pk(tenant, &rec.session_id),
            table::member_sk(&rec.id),
        )));
        let items = vec![
            TransactWriteItem::builder()
                .put(build(put.build())?)
                .build(),
            TransactWriteItem::builder()
                .put(build(membership.build())?)
                .build(),
            TransactWriteItem::builder()
                .update(build(session.build())?)
                .build(),
            TransactWriteItem::builder()
                .update(build(tenant_count.build())?)
                .build(),
            TransactWriteItem::builder()
                .update(build(window_update.build())?)
                .build(),
            // Last: the failure indexes above stay as they are.
            TransactWriteItem::builder()
                .put(build(member.build())?)
                .build(),
        ];
        let what = format!("creating branch {}", rec.id);
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(()),
            Written::ConditionFailed { index: 0 } => Err(branch_exists(&rec.id)),
            Written::ConditionFailed { index: 2 } => {
                Err(over_limit(Limit::ActivePerSession, rec, limits, None))
            }
            Written::ConditionFailed { index: 3 } => {
                Err(over_limit(Limit::ActivePerTenant, rec, limits, None))
            }
            Written::ConditionFailed { .. } => {
                Err(over_limit(Limit::CreationsPerMinute, rec, limits, None))
            }
        }
    }

    async fn get_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>> {
        self.get(table::branch_pk(tenant, id), table::BRANCH_SK)
            .await?
            .map(record_of)
            .transpose()
    }

    async fn active_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<ActiveBranch>> {
        self.session_items(tenant, session, Some(table::ACTIVE_PREFIX))
            .await?
            .into_iter()
            .map(|item| {
                let sk = item.get("sk").and_then(|v| v.as_s().ok());
                let id = sk
                    .and_then(|sk| table::parse_active_sk(sk))
                    .ok_or_else(|| {
                        Error::internal(format!("a stored active-branch key {sk:?} is malformed"))
                    })?;
                let depth = item
                    .get("depth")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(1);
                let parent_branch = item
                    .get("parent")
                    .and_then(|v| v.as_s().ok())
                    .and_then(|p| p.parse().ok());
                Ok(ActiveBranch {
                    id,
                    depth,
                    parent_branch,
                })
            })
            .collect()
    }

    async fn session_owner(&self, tenant: &TenantId, session: &str) -> Result<Option<String>> {
        Ok(self
            .get(table::session_pk(tenant, session), table::SESSION_META_SK)
            .await?
            .and_then(|i| i.get("owner").and_then(|o| o.as_s().ok()).cloned()))
    }

    async fn add_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<BranchRecord> {
        let r = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(table::branch_pk(tenant, id), table::BRANCH_SK)))
            .update_expression("SET r.tokens_used = r.tokens_used + :n")
            .condition_expression("attribute_exists(pk) AND #status = :active")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":n", n(tokens))
            .expression_attribute_values(":active", s(BranchStatus::Active.as_str()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match conditional(r, "DynamoDB UpdateItem")? {
            Some(out) => record_of(out.attributes.unwrap_or_default()),
            None => Err(self.not_active_or_missing(tenant, id).await),
        }
    }

    async fn finish_branch(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        finish: &Finish,
    ) -> Result<BranchRecord> {
        let Some(rec) = self.get_branch(tenant, id).await? else {
            return Err(branch_not_found(id));
        };
        if rec.status != BranchStatus::Active {
            return Err(not_active(id, rec.status));
        }
        let completed_at = serde_dynamo::to_attribute_value(finish.at)
            .map_err(|e| Error::internal(format!("cannot encode a time: {e}")))?;
        let reason = match &finish.reason {
            Some(r) => s(r.clone()),
            None => AttributeValue::Null(true),
        };
        let status = self
            .update(table::branch_pk(tenant, id), table::BRANCH_SK)
            .update_expression(
                "SET #status = :status, r.#status = :status, r.completed_at = :at, r.reason = :reason",
            )
            .condition_expression("#status = :active")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":status", s(finish.status.as_str()))
            .expression_attribute_values(":active", s(BranchStatus::Active.as_str()))
            .expression_attribute_values(":at", completed_at)
            .expression_attribute_values(":reason", reason);
        let release = |pk: String, sk: &str| {
            self.update(pk, sk)
                .update_expression("SET active = active - :one")
                .condition_expression("active > :zero")
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":zero", n(0))
        };
        let items = vec![
            TransactWriteItem::builder()
                .update(build(status.build())?)
                .build(),
            TransactWriteItem::builder()
                .delete(build(
                    Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key(
                            table::session_pk(tenant, &rec.session_id),
                            table::active_sk(id),
                        )))
                        .build(),
                )?)
                .build(),
            TransactWriteItem::builder()
                .update(build(
                    release(
                        table::session_pk(tenant, &rec.session_id),
                        table::SESSION_META_SK,
                    )
                    .build(),
                )?)
                .build(),
            TransactWriteItem::builder()
                .update(build(
                    release(table::tenant_branches_pk(tenant), table::TENANT_ACTIVE_SK).build(),
                )?)
                .build(),
        ];
        let what = format!("finishing branch {id}");
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => self
                .get_branch(tenant, id)
                .await?
                .ok_or_else(|| Error::internal(format!("branch {id} vanished as it finished"))),
            Written::ConditionFailed { index: 0 } => {
                Err(self.not_active_or_missing(tenant, id).await)
            }
            Written::ConditionFailed { index: i } => Err(Error::internal(format!(
                "branch {id}: an active count was already zero (item {i}); the counts are corrupt"
            ))),
        }
    }

    async fn annotate(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        timer: Option<&str>,
        return_commit: Option<&CommitId>,
    ) -> Result<()> {
        let mut sets = Vec::new();
        let mut u = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(table::branch_pk(tenant, id), table::BRANCH_SK)))
            .condition_expression("attribute_exists(pk)");
        if let Some(t) = timer {
            sets.push("r.timer = :timer");
            u = u.expression_attribute_values(":timer", s(t));
        }
        if let Some(c) = return_commit {
            sets.push("r.return_commit = :ret");
            u = u.expression_attribute_values(":ret", s(c.to_string()));
        }
        if sets.is_empty() {
            return Ok(());
        }
        match conditional(
            u.update_expression(format!("SET {}", sets.join(", ")))
                .send()
                .await,
            "DynamoDB UpdateItem",
        )? {
            Some(_) => Ok(()),
            None => Err(branch_not_found(id)),
        }
    }

    async fn all_active(&self) -> Result<Option<Vec<(TenantId, BranchId, DateTime<Utc>)>>> {
        // Deadlines live in Step Functions executions in AWS mode.
        Ok(None)
    }

    async fn session_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<BranchId>> {
        let items = self
            .session_items(tenant, session, Some(table::MEMBER_PREFIX))
            .await?;
        Self::sort_keys(&items)
            .filter_map(|sk| sk.strip_prefix(table::MEMBER_PREFIX))
            .map(|id| {
                id.parse()
                    .map_err(|_| Error::internal(format!("a stored branch id {id:?} is malformed")))
            })
            .collect()
    }

    async fn delete_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<bool> {
        let Some(rec) = self.get_branch(tenant, id).await? else {
            return Ok(false);
        };
        // The session's items first, then the record that names them.
        for sk in [table::member_sk(id), table::active_sk(id)] {
            self.delete(table::session_pk(tenant, &rec.session_id), sk)
                .await?;
        }
        // Its memory is keyed by the time it ended (`put_memory`).
        if let Some(at) = rec.completed_at {
            let memory = MemoryId::of_branch(tenant, id);
            self.delete(
                table::memory_pk(tenant),
                table::memory_sk(at.timestamp_micros(), &memory),
            )
            .await?;
        }
        self.delete(table::branch_pk(tenant, id), table::BRANCH_SK.to_owned())
            .await?;
        Ok(true)
    }

    async fn put_memory(&self, tenant: &TenantId, memory: &MemoryRecord) -> Result<()> {
        let r = serde_dynamo::to_attribute_value(memory)
            .map_err(|e| Error::internal(format!("cannot encode memory {}: {e}", memory.id)))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Item::from([
                ("pk".to_owned(), s(table::memory_pk(tenant))),
                (
                    "sk".to_owned(),
                    s(table::memory_sk(
                        memory.created_at.timestamp_micros(),
                        &memory.id,
                    )),
                ),
                ("r".to_owned(), r),
            ])))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB PutItem", e))?;
        Ok(())
    }

    async fn recent_memories(&self, tenant: &TenantId, max: usize) -> Result<Vec<MemoryRecord>> {
        // The stream is lazy: no page is asked for once `max` are read.
        let mut items = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(table::memory_pk(tenant)))
            .scan_index_forward(false)
            .limit(i32::try_from(max.clamp(1, 1000)).unwrap_or(1000))
            .into_paginator()
            .items()
            .send();
        let mut out = Vec::new();
        while out.len() < max {
            let Some(item) = items
                .try_next()
                .await
                .map_err(|e| sdk_error("DynamoDB Query", e))?
            else {
                break;
            };
            out.push(memory_of(item)?);
        }
        Ok(out)
    }

    /// Every memory of the tenant streamed past a [`Ranker`] (one Query's
    /// pages, 1 MB each), which keeps the first [`KEPT_MATCHES`] matching
    /// memories whole and of the others only their statistics and sort
    /// key; then those of the best `limit` not kept are read again by key.
    /// A search costs the read units of the tenant's memories (docs/cost.md,
    /// "Memory search"), and holds one page and the kept matches at most; a
    /// tenant with few matches costs one request per page, and no GetItem.
    async fn search_memories(
        &self,
        tenant: &TenantId,
        q: &MemoryQuery,
    ) -> Result<Vec<ScoredMemory>> {
        let mut ranker = Ranker::new(q);
        if ranker.is_empty() {
            return Ok(Vec::new());
        }
        let pk = table::memory_pk(tenant);
        let mut kept = 0;
        let mut items = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(pk.clone()))
            .into_paginator()
            .items()
            .send();
        while let Some(mut item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?
        {
            let sk = match item.remove("sk") {
                Some(AttributeValue::S(sk)) => sk,
                _ => return Err(Error::internal("a stored memory item has no sort key")),
            };
            ranker.add(memory_of(item)?, |m| {
                kept += 1;
                (sk, (kept <= KEPT_MATCHES).then_some(m))
            });
        }
        // Those not kept read again, in rank order; one erased meanwhile is
        // left out.
        let found: Vec<Option<ScoredMemory>> = futures::stream::iter(ranker.finish())
            .map(|(score, (sk, memory))| {
                let pk = pk.clone();
                async move {
                    let memory = match memory {
                        Some(m) => Some(m),
                        None => self.get(pk, &sk).await?.map(memory_of).transpose()?,
                    };
                    Ok::<_, Error>(memory.map(|memory| ScoredMemory { score, memory }))
                }
            })
            .buffered(16)
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<bool> {
        let session = session.as_str();
        let items = self.session_items(tenant, session, None).await?;
        for sk in Self::sort_keys(&items) {
            self.delete(table::session_pk(tenant, session), sk.to_owned())
                .await?;
        }
        Ok(!items.is_empty())
    }
}

/// Matching memories a search keeps whole while it ranks (about 2 KB
/// each); the best of the others are read again by key.
const KEPT_MATCHES: usize = 1000;

/// A stored memory item's record.
fn memory_of(mut item: Item) -> Result<MemoryRecord> {
    let r = item
        .remove("r")
        .ok_or_else(|| Error::internal("a stored memory item has no record"))?;
    serde_dynamo::from_attribute_value(r)
        .map_err(|e| Error::internal(format!("a stored memory does not decode: {e}")))
}
