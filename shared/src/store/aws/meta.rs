//! The DynamoDB [`MetaStore`]: commits, timelines, refs and the
//! materialization cache in one table (layout in [`super::keys`] and
//! docs/adr/0004). Every access pattern is one request; a checkpoint is one
//! `TransactWriteItems` (commit by id + commit in its run + timeline entry +
//! optional ref move), so no reader sees half of one.

use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;

use super::items::{Item, build, consistent_get, from_item, key, s, to_item};
use super::retry::Transact;
use super::{DynamoBranchStore, keys};
use crate::clock::{IdSource, OsRandom, micros_to_time};
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, RefName, TenantId};
use crate::store::packed::{self, Codec};
use crate::store::{Materialized, RefMove, RefRecord, Refs};

/// The DynamoDB [`MetaStore`](crate::store::MetaStore) (and [`TokenStore`](crate::store::TokenStore),
/// in `super::tokens`).
#[derive(Clone)]
pub struct DynamoMetaStore {
    pub(super) client: aws_sdk_dynamodb::Client,
    pub(super) table: String,
    /// Randomness: ref-write nonces, retry jitter.
    pub(super) ids: Arc<dyn IdSource>,
}

impl std::fmt::Debug for DynamoMetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoMetaStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// A commit item (by id, or in its run).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct CommitItem {
    pub(super) pk: String,
    pub(super) sk: String,
    /// The commit.
    pub(super) c: Commit,
    /// Set while the commit has no summary, to the tenant's queue shard of
    /// the commit ([`keys::summary_queue_key_of`]): the key of the sparse,
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
pub(super) const INLINE_ATTRS: [(&str, Codec); 3] = [
    (INLINE_ATTR, Codec::Raw),
    (PACKED_ATTR, Codec::Lz4),
    (ZSTD_ATTR, Codec::Zstd),
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
        }
    }
}

/// The items of one new commit's write ([`DynamoMetaStore::commit_items`]).
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
    /// The `listing` index's partition key ([`keys::refs_list_key`]): the
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

impl DynamoMetaStore {
    /// A store over `table`, its randomness from the OS ([`OsRandom`]).
    pub fn new(client: aws_sdk_dynamodb::Client, table: String) -> Self {
        DynamoMetaStore {
            client,
            table,
            ids: Arc::new(OsRandom),
        }
    }

    /// The same store drawing its randomness (ref-write nonces, retry
    /// jitter) from `ids`; its branch store too.
    #[must_use]
    pub fn with_ids(self, ids: Arc<dyn IdSource>) -> Self {
        DynamoMetaStore { ids, ..self }
    }

    /// The store's source of randomness.
    pub fn ids(&self) -> &Arc<dyn IdSource> {
        &self.ids
    }

    /// Sends a `TransactWriteItems` under the stores' retry policy
    /// ([`super::retry::transact`]).
    pub(super) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
    ) -> std::result::Result<Transact, SdkError<TransactWriteItemsError>> {
        super::retry::transact(&self.client, &*self.ids, items).await
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
        DynamoBranchStore::new(self.client.clone(), self.table.clone(), self.ids.clone())
    }

    pub(super) fn ref_put(
        &self,
        tenant: &TenantId,
        mv: &RefMove,
        target: &CommitId,
        now: DateTime<Utc>,
        nonce: Option<String>,
    ) -> Result<TransactWriteItem> {
        let item = to_item(&RefItem {
            pk: keys::ref_pk(tenant, &mv.name),
            sk: keys::REF_SK.to_owned(),
            target: *target,
            updated_at: now.timestamp_micros(),
            lk: Some(keys::refs_list_key(tenant)),
            ls: Some(keys::ref_list_sk(&mv.name)),
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

    /// The items that write a new `commit`: the one builder of a commit's
    /// items, for a checkpoint and a batch alike.
    pub(super) fn commit_items(&self, tenant: &TenantId, commit: &Commit) -> Result<CommitItems> {
        let by_id = CommitItem::new(
            keys::commit_pk(tenant, &commit.id),
            keys::COMMIT_SK.to_owned(),
            commit,
            commit
                .summary
                .is_none()
                .then(|| keys::summary_queue_key_of(tenant, &commit.id)),
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
        let own = [
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
        // A root: the tenant joins the registry (idempotent).
        let registry = match commit.parent {
            None => {
                let registry = to_item(&TenantItem {
                    pk: keys::TENANTS_PK.to_owned(),
                    sk: keys::tenant_sk(tenant),
                })?;
                Some(
                    TransactWriteItem::builder()
                        .put(build(
                            Put::builder()
                                .table_name(&self.table)
                                .set_item(Some(registry))
                                .build(),
                        )?)
                        .build(),
                )
            }
            Some(_) => None,
        };
        let (index, last) = self.index_puts(tenant, commit)?;
        Ok(CommitItems {
            own,
            registry,
            index,
            last,
        })
    }

    pub(super) async fn get_item(&self, pk: String, sk: String) -> Result<Option<Item>> {
        consistent_get(&self.client, &self.table, pk, sk).await
    }

    pub(super) async fn current_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
    ) -> Result<Option<CommitId>> {
        Ok(self.get_ref(tenant, name).await?.map(|r| r.target))
    }
}
