//! `ctx resolve`: the newest commit of a principal at or before a time.

use chrono::{DateTime, Utc};
use ctx_core::{Error, Principal, Result};

use crate::{Conn, print_json};

/// Runs `ctx resolve --principal P [--at RFC3339]`.
///
/// # Errors
/// `Invalid` for a malformed principal or time; the server's errors.
pub(crate) async fn run(principal: &str, at: Option<&str>, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let principal: Principal = principal
        .parse()
        .map_err(|e: Error| e.with_field("principal"))?;
    let at = at.map(parse_at).transpose()?;
    let r = c.resolve(&principal, at).await?;
    if conn.json {
        print_json(&r)
    } else {
        outln!("{}", r.id);
        Ok(())
    }
}

/// An RFC 3339 time, failing as the server does for its `at` parameter.
fn parse_at(v: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| Error::invalid("at", format!("at {v:?}: {e}")))
}
