//! DynamoDB plumbing the aws stores share: items, attribute values and
//! consistent reads (`TransactWriteItems` and its retry policy are
//! [`super::retry`]'s). Keys are built in [`super::keys`], not here.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::sdk_error;
use crate::error::{Error, Result};

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
