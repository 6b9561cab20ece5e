//! `ctx resolve`: the newest commit of a principal at or before a time.

use chrono::{DateTime, Utc};
use ctx_core::{Error, Principal, Result};

use crate::{Conn, print_json};

/// Runs `ctx resolve --principal P [--at RFC3339]` (`--at` checked by
/// [`crate::parse_time`]).
///
/// # Errors
/// `Invalid` for a malformed principal; the server's errors.
pub(crate) async fn run(principal: &str, at: Option<DateTime<Utc>>, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let principal: Principal = principal
        .parse()
        .map_err(|e: Error| e.with_field("principal"))?;
    let r = c.resolve(&principal, at).await?;
    if conn.json {
        print_json(&r)
    } else {
        outln!("{}", r.id);
        Ok(())
    }
}
