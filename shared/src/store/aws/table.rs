//! The DynamoDB table of the aws backends, in one place: every key (and
//! the bucket's S3 keys, so that every key is built and parsed in one
//! module), the items and their encoding, the writes a commit takes (its
//! items and its index entries) and the reads the stores share. Sending a
//! `TransactWriteItems` under the one retry policy is [`super::retry`]'s:
//! a checkpoint goes `commits` → here → `retry`, and nowhere else.
//!
//! # Layout
//! In order: the keys (table, indexes, bucket); attribute values and item
//! encoding (`Item`); the item types (`CommitItem`, `RefItem`, …); the
//! write builders (`commit_items`, `index_items`, `commit_deletes`, `ref_put`,
//! `ref_check`, `put_item`,
//! `delete_item`); the reads (`consistent_get`, `batch_get`, and the
//! store's `sort_keys`, `range_after`, `commits_by_id`).
//!
//! Keys are built and parsed here and nowhere else. Numbers are zero-padded
//! so that string order is numeric order; times are shifted so that
//! negative ones sort too.
//!
//! Table layout (one table, string `pk` / `sk`; see docs/adr/0004):
//!
//! | item | pk | sk |
//! |---|---|---|
//! | commit by id | `T#<tenant>#C#<ctx id>` | `C` |
//! | commit in its run | `T#<tenant>#L#<lineage id>` | `D#<depth, 20 digits>` |
//! | timeline entry | `T#<tenant>#P#<principal>` | `TS#<µs, 20 digits>#<ctx id>` |
//! | ref (`lk` = `T#<tenant>#REF`, `ls` = `<name>`: the `listing` index) | `T#<tenant>#REF#<name>` | `R` |
//! | materialization | `T#<tenant>#M#<ctx id>` | `<stop>#<format>` |
//! | branch record | `T#<tenant>#BR#<br id>` | `B` |
//! | session's branch meta (active count, owner) | `T#<tenant>#SS#<session>` | `META` |
//! | session's active branch | `T#<tenant>#SS#<session>` | `A#<br id>` |
//! | session's branch, any status (what an erase lists; older branches get theirs from `ctx tenants backfill-index`) | `T#<tenant>#SS#<session>` | `M#<br id>` |
//! | session's creation window | `T#<tenant>#SS#<session>` | `W#<minute start s, 20 digits>` |
//! | tenant's active branch count | `T#<tenant>#BRANCHES` | `ACTIVE` |
//! | memory of an ended branch (record in `r`) | `T#<tenant>#MEM` | `<µs, 20 digits>#<mem id>` |
//! | bearer token (hash → tenant) | `TOKENS` | `<64 hex of its hash>` |
//! | agent record (settings, clear, working-context pointer) | `T#<tenant>#AG#<agent>` | `A` |
//! | agent save | `T#<tenant>#AG#<agent>` | `S#<sav id>` (ids sort by time) |
//! | commit of a session | `T#<tenant>#S#<session>` | `<ctx id>` |
//! | session's last write (µs in `last`; `lk` = `T#<tenant>#SL`, `ls` = `<session>`: the `listing` index) | `T#<tenant>#S#<session>` | `LAST` |
//! | child of a commit | `T#<tenant>#K#<parent id>` | `<ctx id>` |
//! | user of an artifact | `T#<tenant>#A#<64 hex>` | `C#<ctx id>` or `M#<ctx id>#<stop>#<format>` |
//! | pin | `T#<tenant>#PIN` | `<session\|ref>#<name>` |
//!
//! Tokens are the one item kind not under a tenant's prefix: a token is
//! what finds the tenant. `TOKENS` cannot collide with a `T#` partition.
//!
//! Global secondary indexes (both keys-only):
//!
//! | index | partition key | sort key | items |
//! |---|---|---|---|
//! | `missing_summary` | `nosum` = `<tenant>#<shard, 2 digits>` | `ts` (created µs) | commits by id lacking a summary |
//! | `listing` | `lk` = `T#<tenant>#REF` or `T#<tenant>#SL` | `ls` = ref name or session | refs, sessions' last writes |
//!
//! No key takes every write of a tenant: a commit's by-id item is on its
//! own partition and lands in one of [`SUMMARY_SHARDS`] index partitions
//! of its tenant ([`summary_shard`], from its id's hash); a ref move and a
//! session's last write are on the ref's and the session's own partitions,
//! and leave the `listing` index alone, whose keys they never change (a
//! keys-only index is written only when an item's key attributes change:
//! when a ref or a session first appears, or goes).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{DynamoMetaStore, sdk_error};
use crate::agent::SaveId;
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::id::{ArtifactRef, BranchId, CommitId, Hash, Principal, RefName, TenantId};
use crate::store::packed::{self, Compression};
use crate::store::{BlobArea, Materialized, RefMove, RefRecord};

// The keys.

/// The S3 key of an artifact: `cas/<tenant>/<2 hex>/<64 hex>`.
pub fn blob_key(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    let hex = artifact.hash().to_hex();
    format!("cas/{tenant}/{}/{hex}", &hex[..2])
}

/// The S3 key where a direct upload of `artifact` is staged until it is
/// verified: `uploads/<tenant>/<64 hex>`.
pub fn upload_key(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    format!("uploads/{tenant}/{}", artifact.hash().to_hex())
}

/// Parses [`blob_key`].
pub fn parse_blob_key(key: &str) -> Option<(TenantId, ArtifactRef)> {
    let mut parts = key.strip_prefix("cas/")?.split('/');
    let (tenant, shard, hex) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || hex.get(..2) != Some(shard) {
        return None;
    }
    Some((tenant.parse().ok()?, format!("art-{hex}").parse().ok()?))
}

/// Where cached (ephemeral) artifacts live: a lifecycle rule in
/// template.yaml expires objects under it.
pub const CACHE_PREFIX: &str = "cache/";
/// Where direct uploads are staged: a lifecycle rule in template.yaml
/// expires objects under it.
pub const UPLOADS_PREFIX: &str = "uploads/";

/// The S3 key of an artifact in `area`: [`blob_key`] for durable ones,
/// `cache/<tenant>/<2 hex>/<64 hex>` for cached ones, [`upload_key`] for
/// staged ones.
pub fn area_key(tenant: &TenantId, area: BlobArea, artifact: &ArtifactRef) -> String {
    match area {
        BlobArea::Durable => blob_key(tenant, artifact),
        BlobArea::Cache => {
            let hex = artifact.hash().to_hex();
            format!("{CACHE_PREFIX}{tenant}/{}/{hex}", &hex[..2])
        }
        BlobArea::Staged => upload_key(tenant, artifact),
    }
}

/// The prefix of every key of `tenant`'s `area` (what a listing asks
/// for); keys under it sort in hash order.
pub fn area_prefix(tenant: &TenantId, area: BlobArea) -> String {
    match area {
        BlobArea::Durable => format!("cas/{tenant}/"),
        BlobArea::Cache => format!("{CACHE_PREFIX}{tenant}/"),
        BlobArea::Staged => format!("{UPLOADS_PREFIX}{tenant}/"),
    }
}

/// Parses [`area_key`] of `tenant`'s `area`.
pub fn parse_area_key(tenant: &TenantId, area: BlobArea, key: &str) -> Option<ArtifactRef> {
    let rest = key.strip_prefix(&area_prefix(tenant, area))?;
    let hex = match area {
        BlobArea::Staged => rest,
        BlobArea::Durable | BlobArea::Cache => {
            let (shard, hex) = rest.split_once('/')?;
            if hex.get(..2) != Some(shard) {
                return None;
            }
            hex
        }
    };
    let artifact: ArtifactRef = format!("art-{hex}").parse().ok()?;
    (area_key(tenant, area, &artifact) == key).then_some(artifact)
}

/// The start of every commit by-id partition of `tenant` (the collector's
/// scan filters on it).
pub fn commit_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#C#")
}

/// The start of every materialization partition of `tenant`.
pub fn materialized_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#M#")
}

/// The partition of a commit's by-id item.
pub fn commit_pk(tenant: &TenantId, id: &CommitId) -> String {
    format!("T#{tenant}#C#{id}")
}

/// Parses [`commit_pk`]: the tenant and the commit.
pub fn parse_commit_pk(pk: &str) -> Option<(TenantId, CommitId)> {
    let (tenant, id) = pk.strip_prefix("T#")?.split_once("#C#")?;
    let parsed = (tenant.parse().ok()?, id.parse().ok()?);
    (commit_pk(&parsed.0, &parsed.1) == pk).then_some(parsed)
}

/// The sort key of a by-id item.
pub const COMMIT_SK: &str = "C";

/// The partition holding a lineage run.
pub fn lineage_pk(tenant: &TenantId, lineage: &CommitId) -> String {
    format!("T#{tenant}#L#{lineage}")
}

/// The sort key of the commit at `depth` in its run.
pub fn depth_sk(depth: u64) -> String {
    format!("D#{depth:020}")
}

/// Parses [`depth_sk`].
pub fn parse_depth_sk(sk: &str) -> Option<u64> {
    let digits = sk.strip_prefix("D#")?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// The partition of a principal's timeline.
pub fn timeline_pk(tenant: &TenantId, principal: &Principal) -> String {
    format!("T#{tenant}#P#{principal}")
}

/// Maps µs since the epoch to an unsigned value with the same order.
fn order_preserving(micros: i64) -> u64 {
    (micros as u64) ^ (1 << 63)
}

/// The sort key of a timeline entry.
pub fn timeline_sk(micros: i64, id: &CommitId) -> String {
    format!("TS#{:020}#{id}", order_preserving(micros))
}

/// A sort key below every entry at or after `micros` and above every
/// entry before it (no entry's key).
pub fn timeline_lower_bound(micros: i64) -> String {
    format!("TS#{:020}#", order_preserving(micros))
}

/// The largest sort key of any entry at or before `micros`.
pub fn timeline_upper_bound(micros: i64) -> String {
    // '~' sorts after every character of a ctx id.
    format!("TS#{:020}#~", order_preserving(micros))
}

/// Parses [`timeline_sk`].
pub fn parse_timeline_sk(sk: &str) -> Option<(i64, CommitId)> {
    let rest = sk.strip_prefix("TS#")?;
    let (digits, id) = rest.split_once('#')?;
    if digits.len() != 20 {
        return None;
    }
    let shifted: u64 = digits.parse().ok()?;
    Some(((shifted ^ (1 << 63)) as i64, id.parse().ok()?))
}

/// The partition of a ref: its own, so that ref moves spread (the name is
/// the last component, so `#` in it is harmless).
pub fn ref_pk(tenant: &TenantId, name: &RefName) -> String {
    format!("T#{tenant}#REF#{name}")
}

/// The sort key of a ref item.
pub const REF_SK: &str = "R";

/// The keys-only index listing a tenant's refs and sessions: partition
/// key `lk` ([`refs_list_key`], [`sessions_list_key`]), sort key `ls`
/// (the ref's name, the session). Eventually consistent, as every index.
pub const LISTING_INDEX: &str = "listing";

/// The `lk` of every ref of `tenant` (listing by prefix is a range of `ls`).
pub fn refs_list_key(tenant: &TenantId) -> String {
    format!("T#{tenant}#REF")
}

/// The `ls` of a ref.
pub fn ref_list_sk(name: &RefName) -> String {
    name.as_str().to_owned()
}

/// The sparse, keys-only index of commits lacking a summary: partition
/// key `nosum` ([`summary_queue_key`]), sort key `ts` (created µs).
pub const SUMMARY_INDEX: &str = "missing_summary";

/// How many partitions a tenant's summary queue (the `missing_summary`
/// index) is split over.
pub const SUMMARY_SHARDS: u8 = 16;

/// The shard of commit `id` in its tenant's summary queue, below
/// [`SUMMARY_SHARDS`]: a stable function of the id (the first byte of the
/// BLAKE3 hash of its bytes), so it spreads whatever the ids look like.
pub fn summary_shard(id: &CommitId) -> u8 {
    blake3::hash(id.as_bytes()).as_bytes()[0] % SUMMARY_SHARDS
}

/// The `missing_summary` partition key (`nosum`) of `tenant`'s shard
/// `shard`: `<tenant>#<shard, 2 digits>`.
pub fn summary_queue_key(tenant: &TenantId, shard: u8) -> String {
    format!("{tenant}#{shard:02}")
}

/// The `nosum` of commit `id` of `tenant` while it lacks a summary.
pub fn summary_queue_key_of(tenant: &TenantId, id: &CommitId) -> String {
    summary_queue_key(tenant, summary_shard(id))
}

/// The partition of a commit's cached materializations.
pub fn materialized_pk(tenant: &TenantId, commit: &CommitId) -> String {
    format!("T#{tenant}#M#{commit}")
}

/// The sort key of one cached materialization.
pub fn materialized_sk(stop: &str, format: &FormatId) -> String {
    format!("{stop}#{format}")
}

/// The partition of an agent's record and saves (the agent, a principal,
/// is the last component).
pub fn agent_pk(tenant: &TenantId, agent: &Principal) -> String {
    format!("T#{tenant}#AG#{agent}")
}

/// The start of every agent partition of `tenant`.
pub fn agent_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#AG#")
}

/// The sort key of an agent's record.
pub const AGENT_SK: &str = "A";

/// The sort-key prefix of an agent's saves.
pub const SAVE_SK_PREFIX: &str = "S#";

/// The sort key of a save.
pub fn save_sk(id: &SaveId) -> String {
    format!("{SAVE_SK_PREFIX}{id}")
}

/// Parses [`save_sk`].
pub fn parse_save_sk(sk: &str) -> Option<SaveId> {
    sk.strip_prefix(SAVE_SK_PREFIX)?.parse().ok()
}

/// The partition of a branch record.
pub fn branch_pk(tenant: &TenantId, id: &BranchId) -> String {
    format!("T#{tenant}#BR#{id}")
}

/// Parses [`branch_pk`]: the tenant and the branch.
pub fn parse_branch_pk(pk: &str) -> Option<(TenantId, BranchId)> {
    let (tenant, id) = pk.strip_prefix("T#")?.split_once("#BR#")?;
    let parsed = (tenant.parse().ok()?, id.parse().ok()?);
    (branch_pk(&parsed.0, &parsed.1) == pk).then_some(parsed)
}

/// The sort key of a branch record.
pub const BRANCH_SK: &str = "B";

/// The partition of a tenant's memories (`branch::memories`).
pub fn memory_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#MEM")
}

/// The sort key of a memory: its extraction time (µs, order-preserving,
/// 20 digits, so a query newest first is a reverse scan) and its id.
pub fn memory_sk(micros: i64, id: &crate::id::MemoryId) -> String {
    format!("{:020}#{id}", order_preserving(micros))
}

/// The partition of a session's branch bookkeeping (the session id is free
/// text; `#` in it is harmless since it is the last component).
pub fn session_pk(tenant: &TenantId, session: &str) -> String {
    format!("T#{tenant}#SS#{session}")
}

/// The sort key of a session's meta item (active count, owner).
pub const SESSION_META_SK: &str = "META";

/// The sort-key prefix of a session's active-branch items.
pub const ACTIVE_PREFIX: &str = "A#";

/// The sort key of one active branch of a session.
pub fn active_sk(id: &BranchId) -> String {
    format!("{ACTIVE_PREFIX}{id}")
}

/// The sort-key prefix of a session's member items: one per branch it
/// ever had, in any status (what an erase lists).
pub const MEMBER_PREFIX: &str = "M#";

/// The sort key of one branch of a session.
pub fn member_sk(id: &BranchId) -> String {
    format!("{MEMBER_PREFIX}{id}")
}

/// Parses [`active_sk`].
pub fn parse_active_sk(sk: &str) -> Option<BranchId> {
    sk.strip_prefix(ACTIVE_PREFIX)?.parse().ok()
}

/// The sort key of a session's creation count in the minute starting at
/// `window` (seconds since the epoch).
pub fn window_sk(window: i64) -> String {
    format!("W#{:020}", order_preserving(window))
}

/// The partition of a tenant's active-branch count.
pub fn tenant_branches_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#BRANCHES")
}

/// The sort key of that count.
pub const TENANT_ACTIVE_SK: &str = "ACTIVE";

/// The partition holding every bearer token.
pub const TOKENS_PK: &str = "TOKENS";

/// The partition of the tenant registry: one item per tenant that has a
/// root commit, written with it, so a scheduled job can find every
/// tenant's summary queue (a GSI's partitions cannot be listed). Like
/// `TOKENS`, it cannot collide with a `T#` partition.
pub const TENANTS_PK: &str = "TENANTS";

/// The sort key of a tenant in the registry: its name.
pub fn tenant_sk(tenant: &TenantId) -> String {
    tenant.to_string()
}

/// The sort key of a token: its hash in hex.
pub fn token_sk(hash: &Hash) -> String {
    hash.to_hex()
}

/// Parses [`token_sk`].
pub fn parse_token_sk(sk: &str) -> Option<Hash> {
    sk.parse().ok()
}

/// The sort-key prefix of the tokens whose public id is `id`
/// (`tok-` + the first 12 hex digits of the hash, see
/// [`token_id`](crate::store::token_id)); `None` for anything else.
pub fn token_id_prefix(id: &str) -> Option<&str> {
    let hex = id.strip_prefix("tok-")?;
    (hex.len() == 12 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(hex)
}

// Attribute values, items and the plumbing the stores share.

/// A DynamoDB item.
pub(super) type Item = HashMap<String, AttributeValue>;

/// A string attribute.
pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute.
pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The primary key of an item.
pub(super) fn key(pk: String, sk: impl Into<String>) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

/// Maps an SDK builder error (a missing required field: a bug).
pub(super) fn build<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T> {
    r.map_err(|e| Error::internal(format!("cannot build a DynamoDB request: {e}")))
}

/// Encodes an item.
pub(super) fn to_item<T: Serialize>(v: &T) -> Result<Item> {
    serde_dynamo::to_item(v)
        .map_err(|e| Error::internal(format!("cannot encode a DynamoDB item: {e}")))
}

/// Decodes an item.
pub(super) fn from_item<T: for<'de> Deserialize<'de>>(item: Item) -> Result<T> {
    serde_dynamo::from_item(item)
        .map_err(|e| Error::internal(format!("a stored DynamoDB item does not decode: {e}")))
}

/// One item by key, strongly consistent.
///
/// # Errors
/// `Unavailable` when DynamoDB fails.
pub(super) async fn consistent_get(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: String,
    sk: impl Into<String>,
) -> Result<Option<Item>> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(key(pk, sk)))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| sdk_error("DynamoDB GetItem", e))?;
    Ok(out.item)
}

/// Keys one BatchGetItem may ask for.
const BATCH_GET: usize = 100;

/// The items at `keys` (strongly consistent BatchGetItems of up to 100
/// keys, unprocessed keys asked again), in no particular order; keys with
/// no item are left out.
///
/// # Errors
/// `Unavailable` when DynamoDB fails.
pub(super) async fn batch_get(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    keys: Vec<Item>,
) -> Result<Vec<Item>> {
    use aws_sdk_dynamodb::types::KeysAndAttributes;
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(BATCH_GET) {
        let mut pending = chunk.to_vec();
        while !pending.is_empty() {
            let ka = build(
                KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(true)
                    .build(),
            )?;
            let res = client
                .batch_get_item()
                .request_items(table, ka)
                .send()
                .await
                .map_err(|e| sdk_error("DynamoDB BatchGetItem", e))?;
            if let Some(mut responses) = res.responses {
                out.extend(responses.remove(table).unwrap_or_default());
            }
            if let Some(ka) = res.unprocessed_keys.and_then(|mut left| left.remove(table)) {
                pending = ka.keys;
            }
        }
    }
    Ok(out)
}

// The items.

/// A commit item (by id, or in its run).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct CommitItem {
    pub(super) pk: String,
    pub(super) sk: String,
    /// The commit.
    pub(super) c: Commit,
    /// Set while the commit has no summary, to the tenant's queue shard of
    /// the commit ([`summary_queue_key_of`]): the key of the sparse,
    /// keys-only `missing_summary` index. By-id items only.
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
    /// The compaction or snapshot an eviction dropped the commit's delta
    /// in favour of (by-id items only; written by `mark_evicted`, which
    /// also removes `nosum`: an evicted commit leaves the summary queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) evicted: Option<String>,
}

/// The attribute of a commit item holding the commit's inline artifact
/// bytes ([`Commit::inline`]) as they are, binary, on both the by-id item
/// and the copy in its run (so the lineage Query returns them); absent
/// when the bytes are in S3 or packed. Kept outside `c` so that updates of
/// `c`'s fields leave it. Items written before packing existed hold their
/// bytes here.
pub(super) const INLINE_ATTR: &str = "d";

/// The attribute holding the inline bytes LZ4-packed (`store::packed`),
/// as versions before zstd wrote them: read, no longer written.
pub(super) const PACKED_ATTR: &str = "z";

/// The attribute holding the inline bytes zstd-packed (`store::packed`),
/// instead of [`INLINE_ATTR`], when that saves at least an eighth.
pub(super) const ZSTD_ATTR: &str = "y";

/// Every attribute that may hold a commit item's inline bytes, with the
/// codec of its value: an item has one of them or none.
pub(super) const INLINE_ATTRS: [(&str, Compression); 3] = [
    (INLINE_ATTR, Compression::Raw),
    (PACKED_ATTR, Compression::Lz4),
    (ZSTD_ATTR, Compression::Zstd),
];

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
    let mut inline = None;
    for (attr, codec) in INLINE_ATTRS {
        if let Some(v) = item.remove(attr) {
            if inline.is_some() {
                return Err(Error::internal(
                    "a commit item holds its inline bytes twice, under two codecs",
                ));
            }
            inline = Some(packed::unpack(codec, binary(v)?)?);
        }
    }
    let mut i: CommitItem = from_item(item)?;
    i.c.inline = inline;
    Ok(i)
}

/// The attribute that holds inline bytes as stored: packed when that
/// saves an eighth (computed once per checkpoint, for both its items).
fn inline_attr(bytes: &bytes::Bytes) -> (&'static str, AttributeValue) {
    let (codec, at_rest) = packed::pack(bytes);
    let attr = INLINE_ATTRS
        .iter()
        .find(|(_, c)| *c == codec)
        .map_or(INLINE_ATTR, |(attr, _)| attr);
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
            evicted: None,
        }
    }
}

/// A tenant registry item.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct TenantItem {
    pub(super) pk: String,
    pub(super) sk: String,
}

/// A ref item.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RefItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) target: CommitId,
    pub(super) updated_at: i64,
    /// The `listing` index's partition key ([`refs_list_key`]): the
    /// same on every write of the ref, so a move writes no index entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lk: Option<String>,
    /// The `listing` index's sort key: the ref's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) ls: Option<String>,
    /// A nonce of the write that set the ref: when a response is lost and
    /// the retry fails its condition, finding our own nonce means the first
    /// attempt landed.
    #[serde(default)]
    pub(super) w: Option<String>,
}

/// A cached materialization item.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct MaterializedItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) m: Materialized,
}

/// The ref a ref item holds.
///
/// # Errors
/// `Internal` for a malformed stored name.
pub(super) fn ref_record(item: RefItem) -> Result<RefRecord> {
    let name = item.ls.as_deref().unwrap_or_default();
    Ok(RefRecord {
        name: name
            .parse()
            .map_err(|_| Error::internal(format!("stored ref name {name:?} is malformed")))?,
        target: item.target,
        updated_at: micros_to_time(item.updated_at),
    })
}

// The writes: every item of a commit and its index entries.

/// An unconditional put of `item`.
pub(super) fn put_item(table: &str, item: Item) -> Result<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .put(build(
            Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .build(),
        )?)
        .build())
}

/// A put of `item` on condition that no item has its key.
fn put_new_item(table: &str, item: Item) -> Result<TransactWriteItem> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)");
    Ok(TransactWriteItem::builder()
        .put(build(put.build())?)
        .build())
}

/// An unconditional delete of the item at `key` (an item's [`key`]).
pub(super) fn delete_item(table: &str, key: Item) -> Result<TransactWriteItem> {
    Ok(TransactWriteItem::builder()
        .delete(build(
            Delete::builder()
                .table_name(table)
                .set_key(Some(key))
                .build(),
        )?)
        .build())
}

/// The put of ref `mv.name` at `target`, by compare-and-swap from
/// `mv.expected` (`None`: the ref must not exist), stamped `now` and, when
/// given, with the write's `nonce` ([`RefItem::w`]).
pub(super) fn ref_put(
    table: &str,
    tenant: &TenantId,
    mv: &RefMove,
    target: &CommitId,
    now: DateTime<Utc>,
    nonce: Option<String>,
) -> Result<TransactWriteItem> {
    let item = to_item(&RefItem {
        pk: ref_pk(tenant, &mv.name),
        sk: REF_SK.to_owned(),
        target: *target,
        updated_at: now.timestamp_micros(),
        lk: Some(refs_list_key(tenant)),
        ls: Some(ref_list_sk(&mv.name)),
        w: nonce,
    })?;
    let mut put = Put::builder().table_name(table).set_item(Some(item));
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

/// A check, in a transaction, that ref `name` still points at `target`
/// (a move that finds the ref already there leaves it alone).
pub(super) fn ref_check(
    table: &str,
    tenant: &TenantId,
    name: &RefName,
    target: &CommitId,
) -> Result<TransactWriteItem> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key(ref_pk(tenant, name), REF_SK)))
        .condition_expression("#target = :target")
        .expression_attribute_names("#target", "target")
        .expression_attribute_values(":target", s(target.to_string()));
    Ok(TransactWriteItem::builder()
        .condition_check(build(check.build())?)
        .build())
}

/// The items of one new commit's write ([`commit_items`]).
pub(super) struct CommitItems {
    /// The commit by id (on condition that it does not exist, asking the
    /// old item back), its slot in its run (on condition that it is free),
    /// its timeline entry.
    pub(super) own: [TransactWriteItem; 3],
    /// The tenant registry item, for a root.
    pub(super) registry: Option<TransactWriteItem>,
    /// The lifecycle index entries: in its session, among its parent's
    /// children, among its artifact's users.
    pub(super) index: Vec<TransactWriteItem>,
    /// Its session's last-activity item, when it has a session.
    pub(super) last: Option<TransactWriteItem>,
}

#[cfg(test)]
impl CommitItems {
    /// How many actions they are.
    pub(super) fn len(&self) -> usize {
        self.own.len()
            + usize::from(self.registry.is_some())
            + self.index.len()
            + usize::from(self.last.is_some())
    }
}

/// The items that write a new `commit` of `tenant`: the one builder of a
/// commit's items, for a checkpoint and a batch alike.
pub(super) fn commit_items(table: &str, tenant: &TenantId, commit: &Commit) -> Result<CommitItems> {
    let by_id = CommitItem::new(
        commit_pk(tenant, &commit.id),
        COMMIT_SK.to_owned(),
        commit,
        commit
            .summary
            .is_none()
            .then(|| summary_queue_key_of(tenant, &commit.id)),
        Some(commit.created_at.timestamp_micros()),
    );
    let in_run = CommitItem::new(
        lineage_pk(tenant, &commit.lineage),
        depth_sk(commit.depth),
        commit,
        None,
        None,
    );
    let timeline = key(
        timeline_pk(tenant, &commit.principal),
        timeline_sk(commit.created_at.timestamp_micros(), &commit.id),
    );
    let inline = commit.inline.as_ref().map(inline_attr);
    let by_id = Put::builder()
        .table_name(table)
        .set_item(Some(encode_commit_item(&by_id, inline.as_ref())?))
        .condition_expression("attribute_not_exists(pk)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    let own = [
        TransactWriteItem::builder()
            .put(build(by_id.build())?)
            .build(),
        put_new_item(table, encode_commit_item(&in_run, inline.as_ref())?)?,
        put_item(table, timeline)?,
    ];
    // A root: the tenant joins the registry (idempotent).
    let registry = match commit.parent {
        None => Some(put_item(
            table,
            to_item(&TenantItem {
                pk: TENANTS_PK.to_owned(),
                sk: tenant_sk(tenant),
            })?,
        )?),
        Some(_) => None,
    };
    let (index, last) = index_puts(table, tenant, commit)?;
    Ok(CommitItems {
        own,
        registry,
        index,
        last,
    })
}

/// The lifecycle index items of one commit.
pub(super) struct IndexItems {
    /// Keys-only items: the commit in its session, as a child of its
    /// parent, as a user of its artifact.
    pub(super) keys: Vec<Item>,
    /// Its session's last write (`last`: the commit's time, µs), when it
    /// has a session.
    pub(super) last: Option<Item>,
}

/// The lifecycle index items of `commit` (layout above).
pub(super) fn index_items(tenant: &TenantId, commit: &Commit) -> IndexItems {
    let mut entries = Vec::new();
    let mut last = None;
    if let Some(session) = &commit.session_id {
        entries.push(key(
            session_commits_pk(tenant, session.as_str()),
            commit.id.to_string(),
        ));
        // On the session's own partition; its `listing` keys are the same
        // on every write, so rewriting it writes no index entry.
        let mut item = key(
            session_commits_pk(tenant, session.as_str()),
            SESSION_LAST_SK,
        );
        item.insert("last".into(), n(commit.created_at.timestamp_micros()));
        item.insert("lk".into(), s(sessions_list_key(tenant)));
        item.insert("ls".into(), s(session.to_string()));
        last = Some(item);
    }
    if let Some(parent) = &commit.parent {
        entries.push(key(children_pk(tenant, parent), commit.id.to_string()));
    }
    entries.push(key(
        artifact_users_pk(tenant, &commit.artifact_ref),
        user_commit_sk(&commit.id),
    ));
    IndexItems {
        keys: entries,
        last,
    }
}

/// The index items a checkpoint of `commit` writes with it: the keys-only
/// entries, and its session's last-activity item.
fn index_puts(
    table: &str,
    tenant: &TenantId,
    commit: &Commit,
) -> Result<(Vec<TransactWriteItem>, Option<TransactWriteItem>)> {
    let IndexItems {
        keys: entries,
        last,
    } = index_items(tenant, commit);
    let entries = entries
        .into_iter()
        .map(|item| put_item(table, item))
        .collect::<Result<_>>()?;
    Ok((entries, last.map(|i| put_item(table, i)).transpose()?))
}

/// The deletes that remove `commit` (as stored: its run is where it
/// is) and every index entry of it, the items [`commit_items`] wrote: its
/// by-id item first, on condition that it exists, then its slot in its
/// run, its timeline entry and its [`index_items`] entries. Its session's
/// last write stays (`Lifecycle::forget_session` removes it with the
/// session's last commit), and so does the tenant registry.
pub(super) fn commit_deletes(
    table: &str,
    tenant: &TenantId,
    commit: &Commit,
) -> Result<Vec<TransactWriteItem>> {
    let by_id = Delete::builder()
        .table_name(table)
        .set_key(Some(key(commit_pk(tenant, &commit.id), COMMIT_SK)))
        .condition_expression("attribute_exists(pk)");
    let mut items = vec![
        TransactWriteItem::builder()
            .delete(build(by_id.build())?)
            .build(),
        delete_item(
            table,
            key(lineage_pk(tenant, &commit.lineage), depth_sk(commit.depth)),
        )?,
        delete_item(
            table,
            key(
                timeline_pk(tenant, &commit.principal),
                timeline_sk(commit.created_at.timestamp_micros(), &commit.id),
            ),
        )?,
    ];
    // Keys-only items: each is its own key.
    for entry in index_items(tenant, commit).keys {
        items.push(delete_item(table, entry)?);
    }
    Ok(items)
}

// The reads.

/// Where [`DynamoMetaStore::range_after`] reads: the table by (`pk`, `sk`),
/// or the keys-only listing index by (`lk`, `ls`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Range {
    Table,
    Listing,
}

/// The commit ids an index partition's sort keys name (a session's
/// commits, a commit's children).
///
/// # Errors
/// `Internal` for a sort key that is no commit id.
pub(super) fn parse_ids(rows: Vec<(String, Item)>) -> Result<Vec<CommitId>> {
    rows.into_iter()
        .map(|(sk, _)| {
            sk.parse()
                .map_err(|_| Error::internal(format!("an index item names {sk:?}")))
        })
        .collect()
}

/// The first `limit` items `query` answers, in its order: a lazy paginated
/// Query, so no page past `limit` is asked for.
///
/// # Errors
/// As the SDK's error says when a page fails.
pub(super) async fn first_items(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    limit: usize,
) -> Result<Vec<Item>> {
    let mut items = query
        .limit(i32::try_from(limit).unwrap_or(i32::MAX))
        .into_paginator()
        .items()
        .send();
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(item) = items
            .try_next()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?
        else {
            break;
        };
        out.push(item);
    }
    Ok(out)
}

impl DynamoMetaStore {
    /// One item by key, strongly consistent ([`consistent_get`]).
    pub(super) async fn get_item(&self, pk: String, sk: String) -> Result<Option<Item>> {
        consistent_get(&self.client, &self.table, pk, sk).await
    }

    /// Every sort key of partition `pk` (paginated Query, keys only).
    pub(super) async fn sort_keys(&self, pk: String, limit: usize) -> Result<Vec<(String, Item)>> {
        self.range_after(Range::Table, pk, None, limit).await
    }

    /// Up to `limit` entries of one partition of `on` from the first range
    /// key above `after`, in order, each with its range key (a lazy
    /// paginated Query: no page past `limit` is asked for). The table is
    /// read strongly consistent; an index cannot be.
    pub(super) async fn range_after(
        &self,
        on: Range,
        hash: String,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Item)>> {
        let (hash_attr, range_attr, index) = match on {
            Range::Table => ("pk", "sk", None),
            Range::Listing => ("lk", "ls", Some(LISTING_INDEX)),
        };
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .set_index_name(index.map(str::to_owned))
            .set_consistent_read(index.is_none().then_some(true))
            .expression_attribute_values(":h", s(hash));
        let query = match after {
            Some(a) => query
                .key_condition_expression(format!("{hash_attr} = :h AND {range_attr} > :after"))
                .expression_attribute_values(":after", s(a.to_owned())),
            None => query.key_condition_expression(format!("{hash_attr} = :h")),
        };
        let items = first_items(query, limit).await?;
        Ok(items
            .into_iter()
            .filter_map(|item| match item.get(range_attr) {
                Some(AttributeValue::S(range)) => Some((range.clone(), item)),
                _ => None,
            })
            .collect())
    }

    /// The commits named, by BatchGetItem (strongly consistent), in the
    /// order of `ids`; ids with no commit are left out.
    pub(super) async fn commits_by_id(
        &self,
        tenant: &TenantId,
        ids: &[CommitId],
    ) -> Result<Vec<Commit>> {
        let wanted = ids
            .iter()
            .map(|id| key(commit_pk(tenant, id), COMMIT_SK))
            .collect();
        let mut found: HashMap<CommitId, Commit> = HashMap::with_capacity(ids.len());
        for item in batch_get(&self.client, &self.table, wanted).await? {
            let c = commit_item(item)?.c;
            found.insert(c.id, c);
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tenant() -> impl Strategy<Value = TenantId> {
        "[a-z0-9][a-z0-9_-]{0,20}".prop_map(|s| s.parse().unwrap())
    }

    proptest! {
        #[test]
        fn save_keys_round_trip_and_sort_by_time(a in -8_000_000_000_000_000_000i64..8_000_000_000_000_000_000, b in -8_000_000_000_000_000_000i64..8_000_000_000_000_000_000) {
            let (t, p): (TenantId, Principal) = ("t".parse().unwrap(), "p".parse().unwrap());
            let art = ArtifactRef::of(b"s");
            let ia = SaveId::derive(&t, &p, crate::clock::micros_to_time(a), &art);
            let ib = SaveId::derive(&t, &p, crate::clock::micros_to_time(b), &art);
            prop_assert_eq!(parse_save_sk(&save_sk(&ia)), Some(ia));
            if a < b {
                prop_assert!(save_sk(&ia) < save_sk(&ib));
            }
        }

        #[test]
        fn blob_keys_round_trip(t in tenant(), bytes in any::<[u8; 32]>()) {
            let art = ArtifactRef::from_hash(crate::Hash::from_bytes(bytes));
            let key = blob_key(&t, &art);
            prop_assert_eq!(parse_blob_key(&key), Some((t, art)));
        }

        #[test]
        fn area_keys_round_trip_and_sort_by_hash(t in tenant(), x in any::<[u8; 32]>(), y in any::<[u8; 32]>()) {
            let (a, b) = (
                ArtifactRef::from_hash(crate::Hash::from_bytes(x)),
                ArtifactRef::from_hash(crate::Hash::from_bytes(y)),
            );
            for area in BlobArea::ALL {
                let key = area_key(&t, area, &a);
                prop_assert!(key.starts_with(&area_prefix(&t, area)));
                prop_assert_eq!(parse_area_key(&t, area, &key), Some(a));
                prop_assert_eq!(key.cmp(&area_key(&t, area, &b)), a.cmp(&b));
            }
            prop_assert_eq!(area_key(&t, BlobArea::Durable, &a), blob_key(&t, &a));
        }

        #[test]
        fn depth_keys_round_trip_and_sort_numerically(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(parse_depth_sk(&depth_sk(a)), Some(a));
            prop_assert_eq!(depth_sk(a).cmp(&depth_sk(b)), a.cmp(&b));
        }

        #[test]
        fn timeline_keys_round_trip_and_sort_by_time(a in any::<i64>(), b in any::<i64>(), x in any::<[u8; 16]>(), y in any::<[u8; 16]>()) {
            let (ix, iy) = (CommitId::from_bytes(x), CommitId::from_bytes(y));
            prop_assert_eq!(parse_timeline_sk(&timeline_sk(a, &ix)), Some((a, ix)));
            prop_assert_eq!(timeline_sk(a, &ix).cmp(&timeline_sk(b, &iy)), (a, ix).cmp(&(b, iy)));
            prop_assert!(timeline_sk(a, &ix) <= timeline_upper_bound(a));
            prop_assert!(timeline_lower_bound(a) < timeline_sk(a, &ix));
            if a < b {
                prop_assert!(timeline_upper_bound(a) < timeline_sk(b, &iy));
                prop_assert!(timeline_sk(a, &ix) < timeline_lower_bound(b));
            }
        }

        #[test]
        fn token_keys_round_trip_and_ids_find_their_prefix(bytes in any::<[u8; 32]>()) {
            let hash = crate::Hash::from_bytes(bytes);
            prop_assert_eq!(parse_token_sk(&token_sk(&hash)), Some(hash));
            let id = crate::store::token_id(&hash);
            let prefix = token_id_prefix(&id).expect("a token id");
            prop_assert!(token_sk(&hash).starts_with(prefix));
        }

        #[test]
        fn branch_keys_round_trip_and_windows_sort_by_time(x in any::<[u8; 16]>(), a in any::<i64>(), b in any::<i64>()) {
            let id = BranchId::from_bytes(x);
            prop_assert_eq!(parse_active_sk(&active_sk(&id)), Some(id));
            prop_assert_eq!(window_sk(a).cmp(&window_sk(b)), a.cmp(&b));
        }
    }

    #[test]
    fn branch_keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = BranchId::from_bytes([0xcd; 16]);
        assert_eq!(
            branch_pk(&t, &id),
            "T#acme#BR#br-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
        );
        assert_eq!(session_pk(&t, "s-1"), "T#acme#SS#s-1");
        assert_eq!(active_sk(&id), "A#br-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd");
        assert_eq!(window_sk(60), "W#09223372036854775868");
        assert_eq!(tenant_branches_pk(&t), "T#acme#BRANCHES");
        assert_eq!(parse_active_sk("A#br-1"), None);
    }

    #[test]
    fn token_keys_are_pinned() {
        let hash = crate::Hash::of(b"secret");
        assert_eq!(TOKENS_PK, "TOKENS");
        assert_eq!(token_sk(&hash), hash.to_hex());
        assert_eq!(token_id_prefix("tok-0123456789ab"), Some("0123456789ab"));
        for bad in [
            "tok-",
            "tok-0123456789aB",
            "tok-0123456789abc",
            "0123456789ab",
            "",
        ] {
            assert_eq!(token_id_prefix(bad), None, "{bad:?}");
        }
    }

    /// The hot keys of issue 24 item 5 spread: 16,000 commits of one
    /// tenant fill every summary-queue shard within 10% of the mean (the
    /// binomial standard deviation is 31 of 1,000, so 10% is over 3σ),
    /// whether the ids are derived (as checkpoints make them) or
    /// sequential; and one tenant's refs and sessions each get a partition
    /// of their own, while the listing index's keys are the tenant's.
    #[test]
    fn one_tenants_hot_keys_spread_over_partitions() {
        const N: usize = 16_000;
        let t: TenantId = "acme".parse().unwrap();
        let mean = N / usize::from(SUMMARY_SHARDS);
        let tolerance = mean / 10;
        let derived: Vec<CommitId> = (0..N as i64)
            .map(|i| {
                let art = ArtifactRef::of(&i.to_le_bytes());
                CommitId::derive(&t, None, &art, 1_795_702_020_000_000 + i, "claude-code")
            })
            .collect();
        let sequential: Vec<CommitId> = (0..N as u128)
            .map(|i| CommitId::from_bytes(i.to_be_bytes()))
            .collect();
        for (what, ids) in [("derived", &derived), ("sequential", &sequential)] {
            let mut per_shard = vec![0usize; usize::from(SUMMARY_SHARDS)];
            let mut keys = std::collections::BTreeSet::new();
            for id in ids {
                per_shard[usize::from(summary_shard(id))] += 1;
                keys.insert(summary_queue_key_of(&t, id));
            }
            assert_eq!(keys.len(), usize::from(SUMMARY_SHARDS), "{what}: {keys:?}");
            for (shard, n) in per_shard.iter().enumerate() {
                assert!(
                    n.abs_diff(mean) <= tolerance,
                    "{what}: shard {shard} has {n} of {N} commits, mean {mean} ± {tolerance}: {per_shard:?}"
                );
            }
        }
        // Refs: one partition each; one listing partition key per tenant.
        let refs: Vec<RefName> = (0..N)
            .map(|i| format!("sessions/s-{i}/head").parse().unwrap())
            .collect();
        let ref_pks: std::collections::BTreeSet<String> =
            refs.iter().map(|r| ref_pk(&t, r)).collect();
        assert_eq!(ref_pks.len(), N);
        assert!(ref_pks.iter().all(|pk| pk.starts_with("T#acme#REF#")));
        // A session's hot keys (its last write, its commit entries, its
        // head ref): N sessions of one tenant, N distinct partitions each.
        let sessions: Vec<String> = (0..64).map(|i| format!("s-{i}")).collect();
        let last: std::collections::BTreeSet<String> =
            sessions.iter().map(|s| session_commits_pk(&t, s)).collect();
        assert_eq!(last.len(), sessions.len());
        let heads: std::collections::BTreeSet<String> = sessions
            .iter()
            .map(|s| ref_pk(&t, &format!("sessions/{s}").parse().unwrap()))
            .collect();
        assert_eq!(heads.len(), sessions.len());
        assert!(last.is_disjoint(&heads));
        // No per-tenant partition is left in the table's keys a checkpoint
        // writes; the listing index's keys are per tenant, written only
        // when a ref or session first appears.
        assert_eq!(refs_list_key(&t), "T#acme#REF");
        assert_eq!(sessions_list_key(&t), "T#acme#SL");
        assert!(!last.contains(&refs_list_key(&t)) && !last.contains(&sessions_list_key(&t)));
    }

    #[test]
    fn sharded_and_moved_keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = CommitId::from_bytes([0xab; 16]);
        let shard = summary_shard(&id);
        assert!(shard < SUMMARY_SHARDS);
        assert_eq!(
            shard,
            blake3::hash(&[0xab; 16]).as_bytes()[0] % SUMMARY_SHARDS
        );
        assert_eq!(summary_queue_key(&t, 7), "acme#07");
        assert_eq!(summary_queue_key_of(&t, &id), format!("acme#{shard:02}"));
        let name: RefName = "sessions/s-1/head".parse().unwrap();
        assert_eq!(ref_pk(&t, &name), "T#acme#REF#sessions/s-1/head");
        assert_eq!(
            (REF_SK, ref_list_sk(&name).as_str()),
            ("R", "sessions/s-1/head")
        );
        // A session's last write shares the session's partition with its
        // commit entries, under a sort key that is no ctx id.
        assert_eq!(session_commits_pk(&t, "s-1"), "T#acme#S#s-1");
        assert_eq!(SESSION_LAST_SK, "LAST");
        assert!(SESSION_LAST_SK.parse::<CommitId>().is_err());
    }

    #[test]
    fn keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = CommitId::from_bytes([0xab; 16]);
        assert_eq!(
            commit_pk(&t, &id),
            "T#acme#C#ctx-abababababababababababababababab"
        );
        assert_eq!(depth_sk(42), "D#00000000000000000042");
        assert_eq!((TENANTS_PK, tenant_sk(&t).as_str()), ("TENANTS", "acme"));
        assert_eq!(
            timeline_sk(0, &id),
            "TS#09223372036854775808#ctx-abababababababababababababababab"
        );
        assert_eq!(
            blob_key(&t, &ArtifactRef::of(b"hello")),
            "cas/acme/ea/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        assert_eq!(
            area_key(&t, BlobArea::Cache, &ArtifactRef::of(b"hello")),
            "cache/acme/ea/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        assert_eq!(
            area_key(&t, BlobArea::Staged, &ArtifactRef::of(b"hello")),
            "uploads/acme/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        let other: TenantId = "acme2".parse().unwrap();
        assert!(
            !area_key(&other, BlobArea::Cache, &ArtifactRef::of(b"hello"))
                .starts_with(&area_prefix(&t, BlobArea::Cache))
        );
        assert!(commit_pk(&t, &id).starts_with(&commit_pk_prefix(&t)));
        assert!(
            materialized_pk(&t, &id).starts_with(&materialized_pk_prefix(&t)),
            "{}",
            materialized_pk(&t, &id)
        );
        assert_eq!(parse_depth_sk("D#42"), None);
        assert_eq!(
            parse_blob_key(
                "cas/acme/00/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
            ),
            None
        );
    }
}

/// The partition listing a session's commits (the session id is the last
/// component, so `#` in it is harmless).
pub fn session_commits_pk(tenant: &TenantId, session: &str) -> String {
    format!("T#{tenant}#S#{session}")
}

/// The sort key of a session's last-write item, on the session's own
/// partition ([`session_commits_pk`]): not a ctx id, so it cannot collide
/// with the session's commit entries (which begin `ctx-`).
pub const SESSION_LAST_SK: &str = "LAST";

/// The `lk` of every session's last-write item of `tenant` in the
/// [`LISTING_INDEX`] (its `ls` is the session).
pub fn sessions_list_key(tenant: &TenantId) -> String {
    format!("T#{tenant}#SL")
}

/// The partition listing a commit's children.
pub fn children_pk(tenant: &TenantId, parent: &CommitId) -> String {
    format!("T#{tenant}#K#{parent}")
}

/// The partition listing an artifact's users.
pub fn artifact_users_pk(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    format!("T#{tenant}#A#{}", artifact.hash().to_hex())
}

/// The sort key of a commit using an artifact.
pub fn user_commit_sk(id: &CommitId) -> String {
    format!("C#{id}")
}

/// The sort key of a cache entry using an artifact.
pub fn user_cached_sk(commit: &CommitId, stop: &str, format: &FormatId) -> String {
    format!("M#{commit}#{stop}#{format}")
}

/// A parsed artifact-user sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserSk {
    /// A commit.
    Commit(CommitId),
    /// A cache entry: commit, stop, format.
    Cached(CommitId, String, String),
}

/// Parses [`user_commit_sk`] and [`user_cached_sk`].
pub fn parse_user_sk(sk: &str) -> Option<UserSk> {
    if let Some(id) = sk.strip_prefix("C#") {
        return Some(UserSk::Commit(id.parse().ok()?));
    }
    let mut parts = sk.strip_prefix("M#")?.splitn(3, '#');
    let (id, stop, format) = (parts.next()?, parts.next()?, parts.next()?);
    Some(UserSk::Cached(
        id.parse().ok()?,
        stop.to_owned(),
        format.to_owned(),
    ))
}

/// The partition of a tenant's pins.
pub fn pins_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#PIN")
}

/// The sort key of a pin: `<kind>#<name>`.
pub fn pin_sk(kind: &str, name: &str) -> String {
    format!("{kind}#{name}")
}

/// Parses a materialization sort key (`<stop>#<format>`).
pub fn parse_materialized_sk(sk: &str) -> Option<(&str, &str)> {
    sk.split_once('#')
}
