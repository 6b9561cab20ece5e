//! The DynamoDB [`MetaStore`]: commits, timelines, refs and the
//! materialization cache in one table (layout in [`super::keys`] and
//! docs/adr/0004). Every access pattern is one request; a checkpoint is one
//! `TransactWriteItems` (commit by id + commit in its run + timeline entry +
//! optional ref move), so no reader sees half of one.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::items::{Item, Transact, build, consistent_get, from_item, key, s, to_item, transact};
use super::{DynamoBranchStore, conditional, keys, sdk_error};
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, Principal, RefName, SessionId, TenantId};
use crate::store::packed::{self, Codec};
use crate::store::{
    ArtifactUser, MaterializeKey, Materialized, MetaStore, MetadataPatch, MissingPage, Pin,
    PutCommit, RefMove, RefRecord, References, SummaryCursor, ref_conflict,
};

/// The DynamoDB [`MetaStore`] (and [`TokenStore`](crate::store::TokenStore),
/// in `super::tokens`).
#[derive(Debug, Clone)]
pub struct DynamoMetaStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

/// A commit item (by id, or in its run).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct CommitItem {
    pub(super) pk: String,
    pub(super) sk: String,
    /// The commit.
    pub(super) c: Commit,
    /// Set (to the tenant) while the commit has no summary: the key of the
    /// sparse `missing_summary` index. By-id items only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) nosum: Option<String>,
    /// `created_at` in µs: the sort key of that index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) ts: Option<i64>,
    /// Summary queue state (by-id items only): claimed until (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lease: Option<i64>,
    /// Failed summary attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tries: Option<u32>,
    /// The last summary failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) err: Option<String>,
    /// No summary retry before then (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) retry: Option<i64>,
}

/// The attribute of a commit item holding the commit's inline artifact
/// bytes ([`Commit::inline`]) as they are, binary, on both the by-id item
/// and the copy in its run (so the lineage Query returns them); absent
/// when the bytes are in S3 or packed. Kept outside `c` so that updates of
/// `c`'s fields leave it. Items written before packing existed hold their
/// bytes here.
pub(super) const INLINE_ATTR: &str = "d";

/// The attribute holding the inline bytes LZ4-packed (`store::packed`),
/// instead of [`INLINE_ATTR`], when that saves at least an eighth: an item
/// has one of the two or neither.
pub(super) const PACKED_ATTR: &str = "z";

/// The binary value of an inline-bytes attribute.
fn binary(v: AttributeValue) -> Result<bytes::Bytes> {
    match v {
        AttributeValue::B(b) => Ok(bytes::Bytes::from(b.into_inner())),
        other => Err(Error::internal(format!(
            "a commit item's inline bytes are not binary: {other:?}"
        ))),
    }
}

/// Decodes a commit item, its inline bytes (unpacked) put back into the
/// commit.
pub(super) fn commit_item(mut item: Item) -> Result<CommitItem> {
    let raw = item.remove(INLINE_ATTR).map(binary).transpose()?;
    let packed = item.remove(PACKED_ATTR).map(binary).transpose()?;
    let inline = match (raw, packed) {
        (raw, None) => raw,
        (None, Some(p)) => Some(packed::unpack(Codec::Lz4, p)?),
        (Some(_), Some(_)) => {
            return Err(Error::internal(
                "a commit item holds its inline bytes both raw and packed",
            ));
        }
    };
    let mut i: CommitItem = from_item(item)?;
    i.c.inline = inline;
    Ok(i)
}

/// The attribute that holds inline bytes as stored: packed when that
/// saves an eighth (computed once per checkpoint, for both its items).
fn inline_attr(bytes: &bytes::Bytes) -> (&'static str, AttributeValue) {
    let (codec, at_rest) = packed::pack(bytes);
    let attr = match codec {
        Codec::Raw => INLINE_ATTR,
        Codec::Lz4 => PACKED_ATTR,
    };
    (
        attr,
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(Vec::from(at_rest))),
    )
}

/// Encodes a commit item, with the commit's inline bytes as `inline`
/// stores them ([`inline_attr`] of `i.c.inline`).
fn encode_commit_item(
    i: &CommitItem,
    inline: Option<&(&'static str, AttributeValue)>,
) -> Result<Item> {
    let mut item = to_item(i)?;
    if let Some((attr, value)) = inline {
        item.insert((*attr).to_owned(), value.clone());
    }
    Ok(item)
}

impl CommitItem {
    /// The item of `commit` at (`pk`, `sk`), without queue state.
    fn new(
        pk: String,
        sk: String,
        commit: &Commit,
        nosum: Option<String>,
        ts: Option<i64>,
    ) -> Self {
        CommitItem {
            pk,
            sk,
            c: commit.clone(),
            nosum,
            ts,
            lease: None,
            tries: None,
            err: None,
            retry: None,
        }
    }
}

/// A tenant registry item.
#[derive(Debug, Serialize, Deserialize)]
struct TenantItem {
    pk: String,
    sk: String,
}

/// A ref item.
#[derive(Debug, Serialize, Deserialize)]
struct RefItem {
    pk: String,
    sk: String,
    target: CommitId,
    updated_at: i64,
    /// A nonce of the write that set the ref: when a response is lost and
    /// the retry fails its condition, finding our own nonce means the first
    /// attempt landed.
    #[serde(default)]
    w: Option<String>,
}

/// A cached materialization item.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct MaterializedItem {
    pk: String,
    sk: String,
    pub(super) m: Materialized,
}

fn ref_record(item: RefItem) -> Result<RefRecord> {
    Ok(RefRecord {
        name: item
            .sk
            .parse()
            .map_err(|_| Error::internal(format!("stored ref name {:?} is malformed", item.sk)))?,
        target: item.target,
        updated_at: micros_to_time(item.updated_at),
    })
}

impl DynamoMetaStore {
    /// A store over `table`.
    pub fn new(client: aws_sdk_dynamodb::Client, table: String) -> Self {
        DynamoMetaStore { client, table }
    }

    /// The SDK client.
    pub fn client(&self) -> &aws_sdk_dynamodb::Client {
        &self.client
    }

    /// The table.
    pub(super) fn table(&self) -> &str {
        &self.table
    }

    /// The branch store of the same table, on the same client.
    pub fn branch_store(&self) -> DynamoBranchStore {
        DynamoBranchStore::new(self.client.clone(), self.table.clone())
    }

    fn ref_put(
        &self,
        tenant: &TenantId,
        mv: &RefMove,
        target: &CommitId,
        now: DateTime<Utc>,
        nonce: Option<String>,
    ) -> Result<TransactWriteItem> {
        let item = to_item(&RefItem {
            pk: keys::refs_pk(tenant),
            sk: keys::ref_sk(&mv.name),
            target: *target,
            updated_at: now.timestamp_micros(),
            w: nonce,
        })?;
        let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
        put = match &mv.expected {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(e) => put
                .condition_expression("#target = :expected")
                .expression_attribute_names("#target", "target")
                .expression_attribute_values(":expected", s(e.to_string())),
        };
        Ok(TransactWriteItem::builder()
            .put(build(put.build())?)
            .build())
    }

    fn conditional_put(&self, item: Item) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)");
        Ok(TransactWriteItem::builder()
            .put(build(put.build())?)
            .build())
    }

    /// One transaction for commit + run slot + timeline (+ ref). Returns
    /// which condition failed, if one did: 0 commit exists (with the stored
    /// commit's item, which the write asks back), 1 slot taken, 3 ref moved.
    async fn write_checkpoint(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<Option<(usize, Option<Item>)>> {
        let by_id = CommitItem::new(
            keys::commit_pk(tenant, &commit.id),
            keys::COMMIT_SK.to_owned(),
            commit,
            commit.summary.is_none().then(|| tenant.to_string()),
            Some(commit.created_at.timestamp_micros()),
        );
        let in_run = CommitItem::new(
            keys::lineage_pk(tenant, &commit.lineage),
            keys::depth_sk(commit.depth),
            commit,
            None,
            None,
        );
        let timeline = key(
            keys::timeline_pk(tenant, &commit.principal),
            keys::timeline_sk(commit.created_at.timestamp_micros(), &commit.id),
        );
        let inline = commit.inline.as_ref().map(inline_attr);
        let by_id = Put::builder()
            .table_name(&self.table)
            .set_item(Some(encode_commit_item(&by_id, inline.as_ref())?))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let mut items = vec![
            TransactWriteItem::builder()
                .put(build(by_id.build())?)
                .build(),
            self.conditional_put(encode_commit_item(&in_run, inline.as_ref())?)?,
            TransactWriteItem::builder()
                .put(build(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(timeline))
                        .build(),
                )?)
                .build(),
        ];
        if let Some(mv) = ref_move {
            items.push(self.ref_put(tenant, mv, &commit.id, commit.created_at, None)?);
        }
        if commit.parent.is_none() {
            // A root: the tenant joins the registry (idempotent), last so
            // the indexes of the conditional items above stay as they are.
            let registry = to_item(&TenantItem {
                pk: keys::TENANTS_PK.to_owned(),
                sk: keys::tenant_sk(tenant),
            })?;
            items.push(
                TransactWriteItem::builder()
                    .put(build(
                        Put::builder()
                            .table_name(&self.table)
                            .set_item(Some(registry))
                            .build(),
                    )?)
                    .build(),
            );
        }
        // The lifecycle index items (session, children, artifact users),
        // unconditional, after every conditional item.
        items.extend(self.index_puts(tenant, commit)?);
        match transact(&self.client, items).await {
            Ok(Transact::Done) => Ok(None),
            Ok(Transact::ConditionFailed { index, old }) => Ok(Some((index, old))),
            // Cancelled for another reason (a concurrent transaction on the
            // same items): retryable.
            Ok(Transact::Cancelled(codes)) => Err(Error::unavailable(format!(
                "the checkpoint transaction was cancelled ({codes:?}); retry"
            ))),
            Err(e) => Err(sdk_error("DynamoDB TransactWriteItems", e)),
        }
    }

    async fn get_item(&self, pk: String, sk: String) -> Result<Option<Item>> {
        consistent_get(&self.client, &self.table, pk, sk).await
    }

    async fn current_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<CommitId>> {
        Ok(self.get_ref(tenant, name).await?.map(|r| r.target))
    }
}

#[async_trait]
impl MetaStore for DynamoMetaStore {
    async fn create_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit> {
        let mut stored = commit.clone();
        // At most two tries: continuing the parent's run, then (after a fork
        // was detected) a run of its own, whose slot no one else can take.
        for _ in 0..2 {
            match self.write_checkpoint(tenant, &stored, ref_move).await? {
                None => return Ok(PutCommit::Created(stored)),
                Some((0, old)) => {
                    let existing = match old {
                        Some(item) => commit_item(item)?.c,
                        // Not every DynamoDB hands the old item back.
                        None => self.get_commit(tenant, &commit.id).await?.ok_or_else(|| {
                            Error::unavailable(
                                "a commit vanished while it was being written; retry",
                            )
                        })?,
                    };
                    return Ok(PutCommit::Existing(existing));
                }
                Some((1, _)) if stored.lineage != stored.id => stored.lineage = stored.id,
                Some((3, _)) => {
                    let mv = ref_move.expect("a ref item was in the transaction");
                    let current = self.current_ref(tenant, &mv.name).await?;
                    return Err(ref_conflict(
                        &mv.name,
                        mv.expected.as_ref(),
                        current.as_ref(),
                    ));
                }
                Some((i, _)) => {
                    return Err(Error::internal(format!(
                        "checkpoint transaction item {i} failed its condition unexpectedly"
                    )));
                }
            }
        }
        Err(Error::internal("a commit's own run slot was taken"))
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        let item = self
            .get_item(keys::commit_pk(tenant, id), keys::COMMIT_SK.to_owned())
            .await?;
        item.map(|i| commit_item(i).map(|c| c.c)).transpose()
    }

    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        while out.len() < limit {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
                .expression_attribute_values(":pk", s(keys::lineage_pk(tenant, lineage)))
                .expression_attribute_values(":lo", s(keys::depth_sk(0)))
                .expression_attribute_values(":hi", s(keys::depth_sk(max_depth)))
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(i32::try_from(limit - out.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB Query", e))?;
            for item in page.items.unwrap_or_default() {
                out.push(commit_item(item)?.c);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk <= :hi")
            .expression_attribute_values(":pk", s(keys::timeline_pk(tenant, principal)))
            .expression_attribute_values(
                ":hi",
                s(keys::timeline_upper_bound(at.timestamp_micros())),
            )
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?;
        let Some(item) = out.items.unwrap_or_default().into_iter().next() else {
            return Ok(None);
        };
        let sk = match item.get("sk") {
            Some(AttributeValue::S(sk)) => sk.clone(),
            _ => return Err(Error::internal("a timeline item has no string sort key")),
        };
        keys::parse_timeline_sk(&sk)
            .map(|(_, id)| Some(id))
            .ok_or_else(|| Error::internal(format!("timeline sort key {sk:?} is malformed")))
    }

    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>> {
        let Some(mut commit) = self.get_commit(tenant, id).await? else {
            return Ok(None);
        };
        if let Some(summary) = &patch.summary {
            commit.summary = summary.clone();
        }
        if let Some(tags) = &patch.tags {
            commit.tags = tags.clone();
        }
        let summary: AttributeValue = serde_dynamo::to_attribute_value(&commit.summary)
            .map_err(|e| Error::internal(format!("cannot encode a summary: {e}")))?;
        let tags: AttributeValue = serde_dynamo::to_attribute_value(&commit.tags)
            .map_err(|e| Error::internal(format!("cannot encode tags: {e}")))?;
        let update = |pk: String, sk: String, by_id: bool| -> Result<TransactWriteItem> {
            let mut expr = "SET #c.#summary = :summary, #c.#tags = :tags".to_owned();
            let mut u = Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(pk, sk)))
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_names("#c", "c")
                .expression_attribute_names("#summary", "summary")
                .expression_attribute_names("#tags", "tags")
                .expression_attribute_values(":summary", summary.clone())
                .expression_attribute_values(":tags", tags.clone());
            if by_id {
                if commit.summary.is_some() {
                    expr.push_str(" REMOVE nosum");
                } else {
                    expr.push_str(", nosum = :tenant");
                    u = u.expression_attribute_values(":tenant", s(tenant.to_string()));
                }
            }
            Ok(TransactWriteItem::builder()
                .update(build(u.update_expression(expr).build())?)
                .build())
        };
        let items = vec![
            update(
                keys::commit_pk(tenant, id),
                keys::COMMIT_SK.to_owned(),
                true,
            )?,
            update(
                keys::lineage_pk(tenant, &commit.lineage),
                keys::depth_sk(commit.depth),
                false,
            )?,
        ];
        self.client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB TransactWriteItems", e))?;
        Ok(Some(commit))
    }

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
        crate::clock::IdSource::fill(&crate::clock::OsRandom, &mut nonce);
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
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        while out.len() < limit {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_values(":pk", s(keys::refs_pk(tenant)))
                .consistent_read(true)
                .limit(i32::try_from(limit - out.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take());
            q = if prefix.is_empty() {
                q.key_condition_expression("pk = :pk")
            } else {
                q.key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                    .expression_attribute_values(":prefix", s(prefix))
            };
            let page = q.send().await.map_err(|e| sdk_error("DynamoDB Query", e))?;
            for item in page.items.unwrap_or_default() {
                out.push(ref_record(from_item(item)?)?);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        Ok(out)
    }

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

    async fn references(&self, tenant: &TenantId) -> Result<References> {
        let mut out = References::default();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(
                    "begins_with(pk, :c) OR begins_with(pk, :m) OR begins_with(pk, :ag)",
                )
                .projection_expression(
                    "pk, c.artifact_ref, m.artifact_ref, #s.artifact_ref, #s.thread_artifacts, \
                     wc.artifact_ref",
                )
                .expression_attribute_names("#s", "s")
                .expression_attribute_values(":c", s(keys::commit_pk_prefix(tenant)))
                .expression_attribute_values(":m", s(keys::materialized_pk_prefix(tenant)))
                .expression_attribute_values(":ag", s(keys::agent_pk_prefix(tenant)))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB Scan", e))?;
            for item in page.items() {
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
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        self.query_missing(tenant, after, limit).await
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        self.claim(tenant, commit, now, until, respect_backoff)
            .await
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        self.write_machine_summary(tenant, commit, summary, by)
            .await
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        self.record_failure(tenant, commit, error, retry_at).await
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        self.registered_tenants().await
    }

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        self.query_timeline_range(tenant, principal, after, until, limit, newest_first)
            .await
    }

    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        self.read_agent(tenant, agent).await
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        self.patch_agent(tenant, agent, patch).await
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        self.insert_save(tenant, agent, save).await
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        self.query_saves(tenant, agent, limit).await
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        self.read_save(tenant, agent, id).await
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        self.commits_of_session(tenant, session).await
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
        self.children_of(tenant, parent).await
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        self.cache_entries_of(tenant, commit).await
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        self.remove_cache_entry(tenant, key).await
    }

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        self.remove_commit(tenant, commit).await
    }

    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        self.users_of(tenant, artifact, limit).await
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        self.remove_save(tenant, agent, id).await
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        self.drop_working_context(tenant, agent, artifact).await
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        self.remove_agent(tenant, agent).await
    }

    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        self.sessions_idle_since(tenant, before, after, limit).await
    }

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        self.write_pin(tenant, pin, pinned).await
    }

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        self.read_pins(tenant).await
    }

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
        self.tenants_with_commits().await
    }

    async fn erase_tenant(
        &self,
        tenant: &TenantId,
        limit: usize,
    ) -> Result<crate::store::TenantRecords> {
        self.erase_tenant_items(tenant, limit).await
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
                .update_expression("REMOVE #d, #z")
                .condition_expression(cond)
                .expression_attribute_names("#d", INLINE_ATTR)
                .expression_attribute_names("#z", PACKED_ATTR);
            Ok(TransactWriteItem::builder()
                .update(build(u.build())?)
                .build())
        };
        let items = vec![
            remove(
                keys::commit_pk(tenant, commit),
                keys::COMMIT_SK.to_owned(),
                "attribute_exists(#d) OR attribute_exists(#z)",
            )?,
            remove(
                keys::lineage_pk(tenant, &c.lineage),
                keys::depth_sk(c.depth),
                "attribute_exists(pk)",
            )?,
        ];
        match transact(&self.client, items).await {
            Ok(Transact::Done) => Ok(true),
            Ok(Transact::ConditionFailed { .. }) => Ok(false),
            Ok(Transact::Cancelled(codes)) => Err(Error::unavailable(format!(
                "clearing inline bytes was cancelled ({codes:?}); retry"
            ))),
            Err(e) => Err(sdk_error("DynamoDB TransactWriteItems", e)),
        }
    }

    async fn mark_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64> {
        self.set_evicted(tenant, before, commits).await
    }

    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
        self.eviction_of(tenant, commit).await
    }
}
