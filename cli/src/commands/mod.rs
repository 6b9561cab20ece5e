//! The client commands other than branches, import/export and MCP: each
//! parses its arguments into the wire types, calls the [`Client`] and
//! prints the answer.
//!
//! - [`agents`]: `ctx context …`, `ctx agent …` (agents' live context).
//! - [`cat`]: `ctx cat`.
//! - [`checkpoint`]: `ctx checkpoint`.
//! - [`commits`]: `ctx show`, `ctx log`, `ctx update-metadata`.
//! - [`materialize`]: `ctx materialize`.
//! - [`resolve`]: `ctx resolve`.
//! - [`refs`]: `ctx ref get|set|list`.
//! - [`compact`]: `ctx compact`.
//! - [`gc`]: `ctx gc`.
//! - [`lifecycle`]: `ctx session erase`, `ctx pin add|remove|list`.
//! - [`summarize`]: `ctx summarize`.
//! - [`tenants`]: `ctx tenants erase` (on the stores, no server).
//! - [`workspace`]: `ctx workspace push|cat|ls|log`, `ctx read-context`.

use ctx_core::{BranchId, CommitId, Error, RefName, Result};
use serde::de::DeserializeOwned;

use crate::client::Client;

pub(crate) mod agents;
pub(crate) mod cat;
pub(crate) mod checkpoint;
pub(crate) mod commits;
pub(crate) mod compact;
pub(crate) mod gc;
pub(crate) mod lifecycle;
pub(crate) mod materialize;
pub(crate) mod refs;
pub(crate) mod resolve;
pub(crate) mod snapshot;
pub(crate) mod summarize;
pub(crate) mod tenants;
pub(crate) mod workspace;

/// A ctx-… id as is; anything else is a ref name, resolved to its tip.
///
/// # Errors
/// `Invalid` for a malformed id or ref name (field `id` or `name`);
/// `NotFound` for an unknown ref; the server's errors.
pub(crate) async fn rev(client: &Client, rev: &str) -> Result<CommitId> {
    if rev.starts_with("ctx-") {
        return rev.parse();
    }
    Ok(client.get_ref(&ref_name(rev)?).await?.target)
}

/// A ref name, errors naming the field `name` (as the server's do).
///
/// # Errors
/// `Invalid`.
pub(crate) fn ref_name(s: &str) -> Result<RefName> {
    s.parse().map_err(|e: Error| e.with_field("name"))
}

/// A branch id, errors naming the field `br` (as the server's do).
///
/// # Errors
/// `Invalid`.
pub(crate) fn branch_id(s: &str) -> Result<BranchId> {
    s.parse().map_err(|e: Error| e.with_field("br"))
}

/// A command-line value read as the JSON string field `field` of a
/// request: the type's own deserializer, so the error is the server's
/// (`field: message`).
///
/// # Errors
/// `Invalid` naming `field`.
pub(crate) fn wire_value<T: DeserializeOwned>(field: &str, value: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(value.to_owned()))
        .map_err(|e| Error::invalid(field, format!("{field}: {e}")))
}

#[cfg(test)]
mod tests {
    use ctx_core::{CommitType, ErrorKind};

    use super::*;

    #[test]
    fn wire_values_fail_as_the_server_does_naming_the_field() {
        let t: CommitType = wire_value("commit_type", "compaction").unwrap();
        assert_eq!(t, CommitType::Compaction);
        let e = wire_value::<CommitType>("commit_type", "bogus").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert_eq!(e.field.as_deref(), Some("commit_type"));
        assert_eq!(
            e.message,
            "commit_type: unknown variant `bogus`, expected one of `delta`, `compaction`, `snapshot`"
        );
        assert_eq!(ref_name("a b").unwrap_err().field.as_deref(), Some("name"));
        assert_eq!(branch_id("br-1").unwrap_err().field.as_deref(), Some("br"));
    }
}
