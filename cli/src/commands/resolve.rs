//! `ctx resolve`: the newest commit of a principal at or before a time.

use ctx_core::Result;
use ctx_core::wire::ResolveResponse;
use reqwest::Method;

use crate::client::encode;
use crate::{Conn, print_json};

/// Runs `ctx resolve --principal P [--at RFC3339]`.
///
/// # Errors
/// The server's errors.
pub(crate) async fn run(principal: &str, at: Option<&str>, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let mut path = format!("/v1/resolve?principal={}", encode(principal));
    if let Some(at) = at {
        path.push_str(&format!("&at={}", encode(at)));
    }
    let (_, r): (_, ResolveResponse) = c.json(Method::GET, &path, None).await?;
    if conn.json {
        print_json(&r)
    } else {
        println!("{}", r.id);
        Ok(())
    }
}
