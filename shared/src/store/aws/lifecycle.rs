//! The lifecycle queries of the DynamoDB [`MetaStore`](crate::store::MetaStore)
//! over the index items a checkpoint writes in its own transaction (a
//! session's commits, the session's last write, a commit's children, an
//! artifact's users; layout in [`super::keys`]): each listing is one
//! paginated Query, followed by a BatchGetItem of the commits it names.
//! Deleting a commit removes its items and every index item of it in one
//! transaction.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, TransactWriteItem,
};
use chrono::{DateTime, Utc};

use super::items::{Item, Transact, build, from_item, key, n, s, transact};
use super::meta::{DynamoMetaStore, commit_item};
use super::{conditional, keys, sdk_error};
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, MaterializeKey, Materialized, Pin};

/// Keys one BatchGetItem may ask for.
const BATCH_GET: usize = 100;

fn put_item(table: &str, item: Item) -> Result<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .put(build(
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .build(),
        )?)
        .build())
}

fn delete_item(table: &str, pk: String, sk: String) -> Result<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .delete(build(
            Delete::builder()
                .table_name(table)
                .set_key(Some(key(pk, sk)))
                .build(),
        )?)
        .build())
}

impl DynamoMetaStore {
    /// The index items a checkpoint of `commit` writes with it.
    pub(super) fn index_puts(
        &self,
        tenant: &TenantId,
        commit: &Commit,
    ) -> Result<Vec<TransactWriteItem>> {
        let table = self.table();
        let mut out = Vec::new();
        if let Some(session) = &commit.session_id {
            out.push(put_item(
                table,
                key(
                    keys::session_commits_pk(tenant, session),
                    commit.id.to_string(),
                ),
            )?);
            let mut last = key(keys::session_last_pk(tenant), session.clone());
            last.insert("last".into(), n(commit.created_at.timestamp_micros()));
            out.push(put_item(table, last)?);
        }
        if let Some(parent) = &commit.parent {
            out.push(put_item(
                table,
                key(keys::children_pk(tenant, parent), commit.id.to_string()),
            )?);
        }
        out.push(put_item(
            table,
            key(
                keys::artifact_users_pk(tenant, &commit.artifact_ref),
                keys::user_commit_sk(&commit.id),
            ),
        )?);
        Ok(out)
    }

    /// Every sort key of partition `pk` (paginated Query, keys only).
    async fn sort_keys(&self, pk: String, limit: usize) -> Result<Vec<(String, Item)>> {
        self.sort_keys_after(pk, None, limit).await
    }

    /// [`Self::sort_keys`] from the first sort key above `after`.
    async fn sort_keys_after(
        &self,
        pk: String,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Item)>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        while out.len() < limit {
            let query = self
                .client()
                .query()
                .table_name(self.table())
                .expression_attribute_values(":pk", s(pk.clone()));
            let query = match after {
                Some(a) => query
                    .key_condition_expression("pk = :pk AND sk > :after")
                    .expression_attribute_values(":after", s(a.to_owned())),
                None => query.key_condition_expression("pk = :pk"),
            };
            let page = query
                .consistent_read(true)
                .limit(i32::try_from(limit - out.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB Query", e))?;
            for item in page.items.unwrap_or_default() {
                if let Some(AttributeValue::S(sk)) = item.get("sk") {
                    out.push((sk.clone(), item));
                }
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(out)
    }

    /// The commits named, by BatchGetItem (strongly consistent), in the
    /// order of `ids`; ids with no commit are left out.
    pub(super) async fn commits_by_id(
        &self,
        tenant: &TenantId,
        ids: &[CommitId],
    ) -> Result<Vec<Commit>> {
        let mut found: std::collections::HashMap<CommitId, Commit> =
            std::collections::HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(BATCH_GET) {
            let mut pending: Vec<Item> = chunk
                .iter()
                .map(|id| key(keys::commit_pk(tenant, id), keys::COMMIT_SK))
                .collect();
            while !pending.is_empty() {
                let ka = build(
                    KeysAndAttributes::builder()
                        .set_keys(Some(std::mem::take(&mut pending)))
                        .consistent_read(true)
                        .build(),
                )?;
                let res = self
                    .client()
                    .batch_get_item()
                    .request_items(self.table(), ka)
                    .send()
                    .await
                    .map_err(|e| sdk_error("DynamoDB BatchGetItem", e))?;
                if let Some(mut responses) = res.responses {
                    for item in responses.remove(self.table()).unwrap_or_default() {
                        let c = commit_item(item)?.c;
                        found.insert(c.id, c);
                    }
                }
                if let Some(ka) = res
                    .unprocessed_keys
                    .and_then(|mut left| left.remove(self.table()))
                {
                    pending = ka.keys;
                }
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    fn parse_ids(rows: Vec<(String, Item)>) -> Result<Vec<CommitId>> {
        rows.into_iter()
            .map(|(sk, _)| {
                sk.parse()
                    .map_err(|_| Error::internal(format!("an index item names {sk:?}")))
            })
            .collect()
    }

    pub(super) async fn commits_of_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<Commit>> {
        let rows = self
            .sort_keys(
                keys::session_commits_pk(tenant, session.as_str()),
                usize::MAX,
            )
            .await?;
        self.commits_by_id(tenant, &Self::parse_ids(rows)?).await
    }

    pub(super) async fn children_of(
        &self,
        tenant: &TenantId,
        parent: &CommitId,
    ) -> Result<Vec<Commit>> {
        let rows = self
            .sort_keys(keys::children_pk(tenant, parent), usize::MAX)
            .await?;
        self.commits_by_id(tenant, &Self::parse_ids(rows)?).await
    }

    pub(super) async fn cache_entries_of(
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

    /// The cache entry write: the entry and its artifact-user item, on
    /// the condition that the commit's item exists (`NotFound` if not).
    pub(super) async fn write_cache_entry(
        &self,
        item: Item,
        key_: &MaterializeKey,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<()> {
        let user = key(
            keys::artifact_users_pk(tenant, artifact),
            keys::user_cached_sk(&key_.commit, &key_.stop.to_string(), &key_.format),
        );
        let commit = ConditionCheck::builder()
            .table_name(self.table())
            .set_key(Some(key(
                keys::commit_pk(tenant, &key_.commit),
                keys::COMMIT_SK,
            )))
            .condition_expression("attribute_exists(pk)")
            .build();
        let items = vec![
            put_item(self.table(), item)?,
            put_item(self.table(), user)?,
            TransactWriteItem::builder()
                .condition_check(build(commit)?)
                .build(),
        ];
        match transact(self.client(), items).await {
            Ok(Transact::Done) => Ok(()),
            Ok(Transact::ConditionFailed { .. }) => Err(crate::store::gone_commit(&key_.commit)),
            Ok(Transact::Cancelled(codes)) => Err(Error::unavailable(format!(
                "caching a materialization of commit {} was cancelled ({codes:?}); retry",
                key_.commit
            ))),
            Err(e) => Err(sdk_error("DynamoDB TransactWriteItems", e)),
        }
    }

    pub(super) async fn remove_cache_entry(
        &self,
        tenant: &TenantId,
        k: &MaterializeKey,
    ) -> Result<bool> {
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

    pub(super) async fn remove_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        // The stored commit says where its items are (its run may differ
        // from the caller's copy after a fork).
        let Some(c) = crate::store::MetaStore::get_commit(self, tenant, &commit.id).await? else {
            return Ok(false);
        };
        let table = self.table();
        let by_id = Delete::builder()
            .table_name(table)
            .set_key(Some(key(keys::commit_pk(tenant, &c.id), keys::COMMIT_SK)))
            .condition_expression("attribute_exists(pk)")
            .build();
        let mut items = vec![
            TransactWriteItem::builder().delete(build(by_id)?).build(),
            delete_item(
                table,
                keys::lineage_pk(tenant, &c.lineage),
                keys::depth_sk(c.depth),
            )?,
            delete_item(
                table,
                keys::timeline_pk(tenant, &c.principal),
                keys::timeline_sk(c.created_at.timestamp_micros(), &c.id),
            )?,
            delete_item(
                table,
                keys::artifact_users_pk(tenant, &c.artifact_ref),
                keys::user_commit_sk(&c.id),
            )?,
        ];
        if let Some(session) = &c.session_id {
            items.push(delete_item(
                table,
                keys::session_commits_pk(tenant, session),
                c.id.to_string(),
            )?);
        }
        if let Some(parent) = &c.parent {
            items.push(delete_item(
                table,
                keys::children_pk(tenant, parent),
                c.id.to_string(),
            )?);
        }
        match transact(self.client(), items).await {
            Ok(Transact::Done) => Ok(true),
            Ok(Transact::ConditionFailed { .. }) => Ok(false),
            Ok(Transact::Cancelled(codes)) => Err(Error::unavailable(format!(
                "deleting commit {} was cancelled ({codes:?}); retry",
                c.id
            ))),
            Err(e) => Err(sdk_error("DynamoDB TransactWriteItems", e)),
        }
    }

    pub(super) async fn users_of(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        let rows = self
            .sort_keys(keys::artifact_users_pk(tenant, artifact), limit)
            .await?;
        rows.into_iter()
            .map(|(sk, _)| {
                let bad = || Error::internal(format!("artifact user {sk:?} is malformed"));
                Ok(match keys::parse_user_sk(&sk).ok_or_else(bad)? {
                    keys::UserSk::Commit(id) => ArtifactUser::Commit(id),
                    keys::UserSk::Cached(commit, stop, format) => {
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

    pub(super) async fn sessions_idle_since(
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
                .sort_keys_after(keys::session_last_pk(tenant), cursor.as_deref(), PAGE)
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
            let commits = self.commits_of_session(tenant, &session).await?;
            if commits.is_empty() {
                // Erased: its last-write item goes too.
                self.client()
                    .delete_item()
                    .table_name(self.table())
                    .set_key(Some(key(keys::session_last_pk(tenant), sk.clone())))
                    .condition_expression("#last = :last")
                    .expression_attribute_names("#last", "last")
                    .expression_attribute_values(":last", n(last))
                    .send()
                    .await
                    .ok();
                continue;
            }
            if commits.iter().all(|c| c.created_at < before) {
                out.push(session);
            }
        }
        Ok(())
    }

    pub(super) async fn write_pin(
        &self,
        tenant: &TenantId,
        pin: &Pin,
        pinned: bool,
    ) -> Result<bool> {
        let k = key(keys::pins_pk(tenant), keys::pin_sk(pin.kind(), pin.name()));
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

    pub(super) async fn read_pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        let mut pins: Vec<Pin> = self
            .sort_keys(keys::pins_pk(tenant), usize::MAX)
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

    pub(super) async fn tenants_with_commits(&self) -> Result<Vec<TenantId>> {
        let rows = self
            .sort_keys(keys::TENANTS_PK.to_owned(), usize::MAX)
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

    /// Sets the `evicted` attribute of each commit's by-id item to `before`
    /// (one conditional UpdateItem per commit, a few at once).
    pub(super) async fn set_evicted(
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
            .set_key(Some(key(keys::commit_pk(tenant, &id), keys::COMMIT_SK)))
            .update_expression("SET #ev = :b")
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

    /// The `evicted` attribute of a commit's by-id item.
    pub(super) async fn eviction_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Option<CommitId>> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key(keys::commit_pk(tenant, commit), keys::COMMIT_SK)))
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

/// The attribute of a commit's by-id item naming the compaction or
/// snapshot an eviction dropped its delta in favour of.
const EVICTED_ATTR: &str = "evicted";

/// Marker writes in flight at once during an eviction.
const EVICT_CONCURRENCY: usize = 16;
