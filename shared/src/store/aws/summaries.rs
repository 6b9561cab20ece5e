//! The summary queue on DynamoDB: commits lacking a summary are the by-id
//! items carrying `nosum` (the sparse, keys-only GSI `missing_summary`,
//! `nosum` = the tenant's shard of the commit, `ts` = created µs), listed
//! with one Query per shard and a BatchGetItem of the commits. The queue
//! state lives on the by-id item (`lease`, `tries`, `err`, `retry`); a claim,
//! a summary or a failure is one `TransactWriteItems` conditioned on the
//! by-id item and also updating the tags of the commit's copy in its run,
//! which history reads. Tenants with work come from the tenant registry
//! (`TENANTS`), written with every root commit.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use chrono::{DateTime, Utc};

use std::collections::HashMap;

use super::retry::{Written, transact, transact_once};
use super::table::{self, CommitItem, Item, batch_get, build, commit_item, key, n, s};
use super::{DynamoMetaStore, sdk_error};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{
    Missing, MissingPage, SummaryCursor, SummaryState, TAG_SUMMARIZING, TAG_SUMMARY_BY,
    TAG_SUMMARY_ERROR, claim_tag,
};

/// One update of a summary write: the by-id item (with its condition) and
/// the copy in the run.
struct Pair {
    by_id: Update,
    in_run: Update,
}

impl DynamoMetaStore {
    fn updates(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        f: impl Fn(
            aws_sdk_dynamodb::types::builders::UpdateBuilder,
            bool,
        ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder,
    ) -> Result<Pair> {
        let base = |pk: String, sk: String| {
            Update::builder()
                .table_name(self.table())
                .set_key(Some(key(pk, sk)))
                .expression_attribute_names("#c", "c")
                .expression_attribute_names("#tags", "tags")
        };
        let by_id = f(
            base(
                table::commit_pk(tenant, &commit.id),
                table::COMMIT_SK.to_owned(),
            ),
            true,
        );
        let in_run = f(
            base(
                table::lineage_pk(tenant, &commit.lineage),
                table::depth_sk(commit.depth),
            )
            .condition_expression("attribute_exists(pk)"),
            false,
        );
        Ok(Pair {
            by_id: build(by_id.build())?,
            in_run: build(in_run.build())?,
        })
    }

    /// Sends the pair: true when written, false when the by-id condition
    /// failed. Collisions with concurrent transactions are tried again
    /// under the stores' retry policy.
    async fn send_pair(&self, pair: Pair, what: &str) -> Result<bool> {
        let items = vec![
            TransactWriteItem::builder().update(pair.by_id).build(),
            TransactWriteItem::builder().update(pair.in_run).build(),
        ];
        let written = transact(&self.client, &*self.ids, what, items).await?;
        pair_written(what, written)
    }
}

/// Whether a pair was written: false when the by-id item's condition
/// failed (item 0).
///
/// # Errors
/// `Internal` when the copy in the run (item 1) is missing.
fn pair_written(what: &str, written: Written) -> Result<bool> {
    match written {
        Written::Done => Ok(true),
        Written::ConditionFailed { index: 0 } => Ok(false),
        Written::ConditionFailed { .. } => Err(Error::internal(format!(
            "{what}: the commit's copy in its run is missing"
        ))),
    }
}

/// The queue position of an index entry: its `ts` and the commit its
/// table key names.
fn position_of(k: &Item) -> Result<SummaryCursor> {
    let bad = || Error::internal(format!("the missing_summary index returned a key {k:?}"));
    let micros = match k.get("ts") {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(v)) => v.parse().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let id = match k.get("pk") {
        Some(aws_sdk_dynamodb::types::AttributeValue::S(pk)) => pk
            .rsplit_once("#C#")
            .and_then(|(_, id)| id.parse().ok())
            .ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    Ok(SummaryCursor { micros, id })
}

/// One shard's entries of a queue page: its first `limit` positions after
/// `after` in (time, id) order, and whether it holds more.
struct ShardPage {
    positions: Vec<SummaryCursor>,
    more: bool,
}

impl DynamoMetaStore {
    /// The first `limit` positions after `after` in shard `shard` of
    /// `tenant`'s queue. The index orders entries by `ts` only, so entries
    /// sharing the last one's `ts` are read too before sorting by (time,
    /// id); the stream is lazy and reads no page past that.
    async fn shard_page(
        &self,
        tenant: &TenantId,
        shard: u8,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<ShardPage> {
        let q = self
            .client()
            .query()
            .table_name(self.table())
            .index_name(table::SUMMARY_INDEX)
            .expression_attribute_values(":q", s(table::summary_queue_key(tenant, shard)))
            .scan_index_forward(true)
            .limit(i32::try_from(limit.saturating_add(1)).unwrap_or(i32::MAX));
        let q = match after {
            Some(a) => q
                .key_condition_expression("nosum = :q AND ts >= :from")
                .expression_attribute_values(":from", n(a.micros)),
            None => q.key_condition_expression("nosum = :q"),
        };
        let mut entries = q.into_paginator().items().send();
        let mut positions: Vec<SummaryCursor> = Vec::new();
        let mut more = false;
        while let Some(entry) = entries
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?
        {
            let p = position_of(&entry)?;
            if after.is_some_and(|a| p <= *a) {
                continue;
            }
            if positions.len() >= limit && positions.last().is_some_and(|l| p.micros > l.micros) {
                more = true;
                break;
            }
            positions.push(p);
        }
        positions.sort();
        if positions.len() > limit {
            positions.truncate(limit);
            more = true;
        }
        Ok(ShardPage { positions, more })
    }
}

#[async_trait]
impl crate::store::SummaryQueue for DynamoMetaStore {
    /// One Query per shard of the tenant's queue (at once), merged by
    /// (time, id), then one BatchGetItem per 100 commits for their by-id
    /// items (the index holds keys only). The cursor is the last position
    /// returned, which every shard resumes after.
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        let limit = limit.max(1);
        let shards = futures::future::try_join_all(
            (0..table::SUMMARY_SHARDS).map(|shard| self.shard_page(tenant, shard, after, limit)),
        )
        .await?;
        let mut more = shards.iter().any(|p| p.more);
        let mut positions: Vec<SummaryCursor> =
            shards.into_iter().flat_map(|p| p.positions).collect();
        positions.sort();
        if positions.len() > limit {
            positions.truncate(limit);
            more = true;
        }
        let wanted = positions
            .iter()
            .map(|p| key(table::commit_pk(tenant, &p.id), table::COMMIT_SK))
            .collect();
        let mut found: HashMap<CommitId, CommitItem> = HashMap::new();
        for item in batch_get(self.client(), self.table(), wanted).await? {
            let i = commit_item(item)?;
            found.insert(i.c.id, i);
        }
        let mut items = Vec::with_capacity(positions.len());
        for p in &positions {
            // The index is eventually consistent: a commit summarized or
            // deleted a moment ago may still be listed; its item says.
            let Some(i) = found.remove(&p.id) else {
                continue;
            };
            if i.c.summary.is_some() || i.nosum.is_none() || i.evicted.is_some() {
                continue;
            }
            items.push(Missing {
                state: SummaryState {
                    claimed_until: i.lease.map(micros_to_time),
                    attempts: i.tries.unwrap_or(0),
                    last_error: i.err,
                    retry_at: i.retry.map(micros_to_time),
                },
                commit: i.c,
            });
        }
        // One page: the cursor goes back to the caller, who asks for the next.
        let next = if more {
            positions.last().copied()
        } else {
            None
        };
        Ok(MissingPage { items, next })
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        let mut condition = "attribute_exists(nosum) AND attribute_not_exists(evicted) \
             AND (attribute_not_exists(lease) OR lease <= :now)"
            .to_owned();
        if respect_backoff {
            condition.push_str(" AND (attribute_not_exists(retry) OR retry <= :now)");
        }
        let pair = self.updates(tenant, commit, |u, by_id| {
            let u = u
                .expression_attribute_names("#claim", TAG_SUMMARIZING)
                .expression_attribute_values(":tag", s(claim_tag(until)));
            if by_id {
                u.condition_expression(condition.clone())
                    .update_expression("SET lease = :until, #c.#tags.#claim = :tag")
                    .expression_attribute_values(":now", n(now.timestamp_micros()))
                    .expression_attribute_values(":until", n(until.timestamp_micros()))
            } else {
                u.update_expression("SET #c.#tags.#claim = :tag")
            }
        })?;
        // A claim that collides with another lost the race: it is sent
        // once, outside the retry policy.
        let items = vec![
            TransactWriteItem::builder().update(pair.by_id).build(),
            TransactWriteItem::builder().update(pair.in_run).build(),
        ];
        match transact_once(&self.client, "claim", items).await? {
            Some(written) => pair_written("claim", written),
            // Another transaction on the commit: a concurrent claim.
            None => Ok(false),
        }
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        let pair = self.updates(tenant, commit, |u, by_id| {
            let u = u
                .expression_attribute_names("#summary", "summary")
                .expression_attribute_names("#by", TAG_SUMMARY_BY)
                .expression_attribute_names("#err", TAG_SUMMARY_ERROR)
                .expression_attribute_names("#claim", TAG_SUMMARIZING)
                .expression_attribute_values(":s", s(summary))
                .expression_attribute_values(":by", s(by));
            let set =
                "SET #c.#summary = :s, #c.#tags.#by = :by REMOVE #c.#tags.#err, #c.#tags.#claim";
            if by_id {
                u.condition_expression("attribute_exists(nosum)")
                    .update_expression(format!("{set}, nosum, lease, tries, err, retry"))
            } else {
                u.update_expression(set)
            }
        })?;
        self.send_pair(pair, "writing a summary").await
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        let pair = self.updates(tenant, commit, |u, by_id| {
            let u = u
                .expression_attribute_names("#err", TAG_SUMMARY_ERROR)
                .expression_attribute_names("#claim", TAG_SUMMARIZING)
                .expression_attribute_values(":e", s(error));
            if by_id {
                u.condition_expression("attribute_exists(nosum)")
                    .update_expression(
                        "SET err = :e, retry = :r, #c.#tags.#err = :e ADD tries :one \
                         REMOVE lease, #c.#tags.#claim",
                    )
                    .expression_attribute_values(":r", n(retry_at.timestamp_micros()))
                    .expression_attribute_values(":one", n(1))
            } else {
                u.update_expression("SET #c.#tags.#err = :e REMOVE #c.#tags.#claim")
            }
        })?;
        self.send_pair(pair, "recording a summary failure").await?;
        Ok(())
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        let mut out = Vec::new();
        let mut items = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(table::TENANTS_PK))
            .into_paginator()
            .items()
            .send();
        while let Some(item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?
        {
            let sk = match item.get("sk") {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(sk)) => sk.clone(),
                _ => return Err(Error::internal("a tenant registry item has no sort key")),
            };
            out.push(sk.parse().map_err(|_| {
                Error::internal(format!(
                    "the tenant registry holds a malformed tenant {sk:?}"
                ))
            })?);
        }
        Ok(out)
    }
}
