//! `ctx ref get|set|list`: reading refs and moving them by compare-and-swap.

use ctx_core::Result;
use ctx_core::store::RefRecord;
use ctx_core::wire::RefList;
use reqwest::Method;
use serde_json::{Value, json};

use super::rev;
use crate::client::encode;
use crate::{Conn, RefCommand, print_json};

/// Runs `ctx ref …`.
///
/// # Errors
/// The server's errors (`Conflict` with the current tip when `--expected`
/// is stale).
pub(crate) async fn run(command: RefCommand) -> Result<()> {
    let (conn, result): (&Conn, RefOutput) = match &command {
        RefCommand::Get { name, conn } => {
            let c = conn.client()?;
            let (_, r): (_, RefRecord) = c
                .json(Method::GET, &format!("/v1/refs/{}", encode(name)), None)
                .await?;
            (conn, RefOutput::One(r))
        }
        RefCommand::Set {
            name,
            target,
            expected,
            conn,
        } => {
            let c = conn.client()?;
            let target = rev(&c, target).await?;
            let mut body = json!({ "target": target });
            if let Some(e) = expected {
                body["expected"] = Value::String(rev(&c, e).await?);
            }
            let (_, r): (_, RefRecord) = c
                .json(
                    Method::PUT,
                    &format!("/v1/refs/{}", encode(name)),
                    Some(&body),
                )
                .await?;
            (conn, RefOutput::One(r))
        }
        RefCommand::List {
            prefix,
            limit,
            conn,
        } => {
            let c = conn.client()?;
            let (_, l): (_, RefList) = c
                .json(
                    Method::GET,
                    &format!("/v1/refs?prefix={}&limit={limit}", encode(prefix)),
                    None,
                )
                .await?;
            (conn, RefOutput::Many(l))
        }
    };
    match result {
        RefOutput::One(r) if conn.json => print_json(&r),
        RefOutput::Many(l) if conn.json => print_json(&l),
        RefOutput::One(r) => {
            println!("{}  {}", r.target, r.name);
            Ok(())
        }
        RefOutput::Many(l) => {
            for r in l.refs {
                println!("{}  {}", r.target, r.name);
            }
            Ok(())
        }
    }
}

enum RefOutput {
    One(RefRecord),
    Many(RefList),
}
