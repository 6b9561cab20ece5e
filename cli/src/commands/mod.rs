//! The client commands other than branches, import/export and MCP: each
//! calls the [`Client`] and prints the answer.
//!
//! - [`checkpoint`]: `ctx checkpoint`.
//! - [`commits`]: `ctx show`, `ctx log`, `ctx update-metadata`.
//! - [`materialize`]: `ctx materialize`.
//! - [`resolve`]: `ctx resolve`.
//! - [`refs`]: `ctx ref get|set|list`.

use ctx_core::Result;
use ctx_core::store::RefRecord;
use reqwest::Method;

use crate::client::{Client, encode};

pub(crate) mod checkpoint;
pub(crate) mod commits;
pub(crate) mod materialize;
pub(crate) mod refs;
pub(crate) mod resolve;

/// A ctx-… id as is; anything else is a ref name, resolved to its tip.
pub(crate) async fn rev(client: &Client, rev: &str) -> Result<String> {
    if rev.starts_with("ctx-") {
        let id: ctx_core::CommitId = rev.parse()?;
        return Ok(id.to_string());
    }
    let (_, r): (_, RefRecord) = client
        .json(Method::GET, &format!("/v1/refs/{}", encode(rev)), None)
        .await?;
    Ok(r.target.to_string())
}
