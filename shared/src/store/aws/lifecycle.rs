//! The lifecycle queries of the DynamoDB [`MetaStore`](crate::store::MetaStore)
//! over the index items a checkpoint writes in its own transaction (a
//! session's commits, the session's last write, a commit's children, an
//! artifact's users; layout in [`super::table`]): each listing is one
//! paginated Query, followed by a BatchGetItem of the commits it names.
//! Deleting a commit removes its items and every index item of it in one
//! transaction.

use super::erase_tenant::{BATCH_WRITE, count};
use crate::store::References;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ReturnValue, Update};
use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use chrono::{DateTime, Utc};

use super::meta::DynamoMetaStore;
use super::retry::{Written, transact};
use super::table::{
    self, INLINE_ATTR, Item, PACKED_ATTR, Range, ZSTD_ATTR, batch_get, build, key, n, s,
};
use super::{conditional, sdk_error};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, Commits, MaterializeKey, Pin, TenantRecords};

impl DynamoMetaStore {
    /// Up to `limit` sessions of `tenant` after `after` in name order (the
    /// keys-only `listing` index, one Query page), each with its
    /// last-write item as it is now (a BatchGetItem; empty if gone).
    async fn last_writes_after(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Item)>> {
        let sessions: Vec<String> = self
            .range_after(
                Range::Listing,
                table::sessions_list_key(tenant),
                after,
                limit,
            )
            .await?
            .into_iter()
            .map(|(session, _)| session)
            .collect();
        let wanted = sessions
            .iter()
            .map(|session| {
                key(
                    table::session_commits_pk(tenant, session),
                    table::SESSION_LAST_SK,
                )
            })
            .collect();
        let mut found: HashMap<String, Item> = HashMap::new();
        for item in batch_get(self.client(), self.table(), wanted).await? {
            if let Some(AttributeValue::S(session)) = item.get("ls") {
                found.insert(session.clone(), item);
            }
        }
        Ok(sessions
            .into_iter()
            .map(|session| {
                let item = found.remove(&session).unwrap_or_default();
                (session, item)
            })
            .collect())
    }

    /// The sessions of one page of last-write items that are idle since
    /// `before` (`cut` in µs), appended to `out` up to `limit`; items of
    /// erased sessions are removed on the way.
    async fn idle_of_page(
        &self,
        tenant: &TenantId,
        page: Vec<(String, Item)>,
        before: DateTime<Utc>,
        cut: i64,
        limit: usize,
        out: &mut Vec<SessionId>,
    ) -> Result<()> {
        for (sk, item) in page {
            if out.len() >= limit {
                break;
            }
            let last: i64 = match item.get("last") {
                Some(AttributeValue::N(v)) => v.parse().unwrap_or(i64::MAX),
                _ => i64::MAX,
            };
            if last >= cut {
                continue;
            }
            let session: SessionId = sk.parse()?;
            // The item is the time of the session's last write; check the
            // session still has commits and that none is newer.
            let commits = self.session_commits(tenant, &session).await?;
            if commits.is_empty() {
                // Erased before erasures removed it: its last-write item
                // goes too.
                self.delete_last_write(tenant, session.as_str(), last)
                    .await?;
                continue;
            }
            if commits.iter().all(|c| c.created_at < before) {
                out.push(session);
            }
        }
        Ok(())
    }

    /// Deletes `session`'s last-write item if it still says `last` (µs):
    /// a write since has rewritten it, and it stays.
    async fn delete_last_write(&self, tenant: &TenantId, session: &str, last: i64) -> Result<()> {
        let deleted = self
            .client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(
                table::session_commits_pk(tenant, session),
                table::SESSION_LAST_SK,
            )))
            .condition_expression("#last = :last")
            .expression_attribute_names("#last", "last")
            .expression_attribute_values(":last", n(last))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(sdk_error("DynamoDB DeleteItem", e)),
        }
    }

    async fn set_evicted_one(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        id: CommitId,
    ) -> Result<bool> {
        let r = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(table::commit_pk(tenant, &id), table::COMMIT_SK)))
            .update_expression("SET #ev = :b REMOVE nosum")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(#ev) OR #ev <> :b)",
            )
            .expression_attribute_names("#ev", EVICTED_ATTR)
            .expression_attribute_values(":b", s(before.to_string()))
            .send()
            .await;
        // None: gone, or already marked for this `before`.
        Ok(conditional(r, "DynamoDB UpdateItem")?.is_some())
    }
}

/// The attribute of a commit's by-id item naming the compaction or
/// snapshot an eviction dropped its delta in favour of.
const EVICTED_ATTR: &str = "evicted";

/// Marker writes in flight at once during an eviction.
const EVICT_CONCURRENCY: usize = 16;

#[async_trait]
impl crate::store::Lifecycle for DynamoMetaStore {
    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<()> {
        // The session's partition holds a key per commit and the last
        // write: two rows read tell whether any commit is left.
        let rows = self
            .sort_keys(table::session_commits_pk(tenant, session.as_str()), 2)
            .await?;
        let [(sk, item)] = rows.as_slice() else {
            return Ok(());
        };
        if sk != table::SESSION_LAST_SK {
            return Ok(());
        }
        match item.get("last") {
            Some(AttributeValue::N(v)) => match v.parse() {
                Ok(last) => self.delete_last_write(tenant, session.as_str(), last).await,
                Err(_) => Ok(()),
            },
            _ => Ok(()),
        }
    }

    async fn backfill_index(&self, tenant: Option<&TenantId>) -> Result<crate::store::Backfilled> {
        self.backfill(tenant).await
    }

    async fn references(&self, tenant: &TenantId) -> Result<References> {
        let mut out = References::default();
        let mut items = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("begins_with(pk, :c) OR begins_with(pk, :m) OR begins_with(pk, :ag)")
            .projection_expression(
                "pk, c.artifact_ref, m.artifact_ref, #s.artifact_ref, #s.thread_artifacts, \
                 wc.artifact_ref",
            )
            .expression_attribute_names("#s", "s")
            .expression_attribute_values(":c", s(table::commit_pk_prefix(tenant)))
            .expression_attribute_values(":m", s(table::materialized_pk_prefix(tenant)))
            .expression_attribute_values(":ag", s(table::agent_pk_prefix(tenant)))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        while let Some(item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Scan", e))?
        {
            // A commit's delta, a cache entry's result, an agent's save
            // file and working-context snapshot.
            for (attr, cached) in [("c", false), ("m", true), ("s", false), ("wc", false)] {
                let Some(AttributeValue::M(inner)) = item.get(attr) else {
                    continue;
                };
                let into = if cached {
                    &mut out.cached
                } else {
                    &mut out.durable
                };
                let threads = match inner.get("thread_artifacts") {
                    Some(AttributeValue::L(l)) => l.as_slice(),
                    _ => &[],
                };
                for v in inner.get("artifact_ref").into_iter().chain(threads) {
                    if let AttributeValue::S(a) = v {
                        into.insert(a.parse().map_err(|_| {
                            Error::internal(format!("stored artifact ref {a:?} is malformed"))
                        })?);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        let rows = self
            .sort_keys(table::artifact_users_pk(tenant, artifact), limit)
            .await?;
        rows.into_iter()
            .map(|(sk, _)| {
                let bad = || Error::internal(format!("artifact user {sk:?} is malformed"));
                Ok(match table::parse_user_sk(&sk).ok_or_else(bad)? {
                    table::UserSk::Commit(id) => ArtifactUser::Commit(id),
                    table::UserSk::Cached(commit, stop, format) => {
                        ArtifactUser::Cached(MaterializeKey {
                            commit,
                            stop: stop.parse().map_err(|_| bad())?,
                            format: format.parse().map_err(|_| bad())?,
                        })
                    }
                })
            })
            .collect()
    }

    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        /// Last-write items read per Query.
        const PAGE: usize = 100;
        let cut = before.timestamp_micros();
        let mut out = Vec::new();
        let mut cursor: Option<String> = after.map(|s| s.as_str().to_owned());
        while out.len() < limit {
            let page = self
                .last_writes_after(tenant, cursor.as_deref(), PAGE)
                .await?;
            let Some((last_sk, _)) = page.last() else {
                break;
            };
            cursor = Some(last_sk.clone());
            let exhausted = page.len() < PAGE;
            self.idle_of_page(tenant, page, before, cut, limit, &mut out)
                .await?;
            if exhausted {
                break;
            }
        }
        Ok(out)
    }

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        let k = key(
            table::pins_pk(tenant),
            table::pin_sk(pin.kind(), pin.name()),
        );
        if pinned {
            let r = self
                .client()
                .put_item()
                .table_name(self.table())
                .set_item(Some(k))
                .condition_expression("attribute_not_exists(pk)")
                .send()
                .await;
            Ok(conditional(r, "DynamoDB PutItem")?.is_some())
        } else {
            self.delete_key(k).await
        }
    }

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        let mut pins: Vec<Pin> = self
            .sort_keys(table::pins_pk(tenant), usize::MAX)
            .await?
            .into_iter()
            .map(|(sk, _)| {
                let (kind, name) = sk
                    .split_once('#')
                    .ok_or_else(|| Error::internal(format!("pin {sk:?} is malformed")))?;
                Pin::parse(kind, name)
            })
            .collect::<Result<_>>()?;
        pins.sort();
        Ok(pins)
    }

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
        let rows = self
            .sort_keys(table::TENANTS_PK.to_owned(), usize::MAX)
            .await?;
        let mut seen: HashMap<String, ()> = HashMap::new();
        let mut out = Vec::new();
        for (sk, _) in rows {
            if seen.insert(sk.clone(), ()).is_none() {
                out.push(
                    sk.parse().map_err(|_| {
                        Error::internal(format!("the tenant registry holds {sk:?}"))
                    })?,
                );
            }
        }
        Ok(out)
    }

    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<TenantRecords> {
        let prefix = format!("T#{tenant}#");
        let mut r = TenantRecords::default();
        let found = self.tenant_keys(&prefix, limit.max(1)).await?;
        for batch in found.chunks(BATCH_WRITE) {
            self.delete_batch(batch).await?;
            for (pk, sk) in batch {
                count(&mut r, &prefix, pk, sk);
            }
        }
        if found.len() < limit.max(1) {
            // Last, so that a re-run still finds the tenant by its registry
            // entry until its items are gone.
            let old = self
                .client()
                .delete_item()
                .table_name(self.table())
                .set_key(Some(key(
                    table::TENANTS_PK.to_owned(),
                    table::tenant_sk(tenant),
                )))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB DeleteItem", e))?;
            if old.attributes.is_some_and(|a| !a.is_empty()) {
                r.other += 1;
            }
        }
        Ok(r)
    }

    async fn clear_inline(&self, tenant: &TenantId, commit: &CommitId) -> Result<bool> {
        let Some(c) = self.get_commit(tenant, commit).await? else {
            return Ok(false);
        };
        if c.inline.is_none() {
            return Ok(false);
        }
        // Both copies at once; the by-id one only while it still has the
        // bytes (a concurrent clear makes this one a no-op).
        let remove = |pk: String, sk: String, cond: &str| -> Result<TransactWriteItem> {
            let u = Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(pk, sk)))
                .update_expression("REMOVE #d, #z, #y")
                .condition_expression(cond)
                .expression_attribute_names("#d", INLINE_ATTR)
                .expression_attribute_names("#z", PACKED_ATTR)
                .expression_attribute_names("#y", ZSTD_ATTR);
            Ok(TransactWriteItem::builder()
                .update(build(u.build())?)
                .build())
        };
        let items = vec![
            remove(
                table::commit_pk(tenant, commit),
                table::COMMIT_SK.to_owned(),
                "attribute_exists(#d) OR attribute_exists(#z) OR attribute_exists(#y)",
            )?,
            remove(
                table::lineage_pk(tenant, &c.lineage),
                table::depth_sk(c.depth),
                "attribute_exists(pk)",
            )?,
        ];
        let what = format!("clearing the inline bytes of commit {commit}");
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(true),
            Written::ConditionFailed { .. } => Ok(false),
        }
    }

    /// Sets the `evicted` attribute of each commit's by-id item to `before`
    /// and removes `nosum`, its entry in the summary queue (one conditional
    /// UpdateItem per commit, a few at once). A summary cleared later sets
    /// `nosum` again; the listing and the claim skip items with `evicted`.
    async fn mark_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        let marked: Vec<bool> = stream::iter(commits.iter().copied())
            .map(|id| self.set_evicted_one(tenant, before, id))
            .buffer_unordered(EVICT_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(marked.into_iter().filter(|m| *m).count() as u64)
    }

    /// The `evicted` attribute of a commit's by-id item.
    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(
                table::commit_pk(tenant, commit),
                table::COMMIT_SK,
            )))
            .projection_expression("#ev")
            .expression_attribute_names("#ev", EVICTED_ATTR)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB GetItem", e))?;
        let Some(v) = out.item.as_ref().and_then(|i| i.get(EVICTED_ATTR)) else {
            return Ok(None);
        };
        let text = v.as_s().map_err(|_| {
            Error::internal(format!("commit {commit} holds a malformed {EVICTED_ATTR}"))
        })?;
        text.parse().map(Some).map_err(|_| {
            Error::internal(format!(
                "commit {commit} holds a malformed {EVICTED_ATTR} {text:?}"
            ))
        })
    }
}
