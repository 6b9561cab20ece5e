//! `ctx ref get|set|delete|list`: reading refs and moving them by compare-and-swap.

use ctx_core::Result;
use ctx_core::store::RefRecord;
use ctx_core::wire::{RefList, SetRefRequest};

use super::{ref_name, rev};
use crate::{Conn, RefCommand, print_json};

/// Runs `ctx ref …`.
///
/// # Errors
/// `Invalid` for a malformed ref name; the server's errors (`Conflict` with
/// the current tip when `--expected` is stale).
pub(crate) async fn run(command: RefCommand) -> Result<()> {
    let (conn, result): (&Conn, RefOutput) = match &command {
        RefCommand::Get { name, conn } => {
            let c = conn.client()?;
            (conn, RefOutput::One(c.get_ref(&ref_name(name)?).await?))
        }
        RefCommand::Set {
            name,
            target,
            expected,
            conn,
        } => {
            let c = conn.client()?;
            let target = rev(&c, target).await?;
            let expected = match expected {
                Some(e) => Some(rev(&c, e).await?),
                None => None,
            };
            let req = SetRefRequest { target, expected };
            (
                conn,
                RefOutput::One(c.set_ref(&ref_name(name)?, &req).await?),
            )
        }
        RefCommand::Delete {
            name,
            expected,
            conn,
        } => {
            let c = conn.client()?;
            let expected = match expected {
                Some(e) => Some(rev(&c, e).await?),
                None => None,
            };
            (
                conn,
                RefOutput::One(c.delete_ref(&ref_name(name)?, expected.as_ref()).await?),
            )
        }
        RefCommand::List {
            prefix,
            limit,
            conn,
        } => {
            let c = conn.client()?;
            (
                conn,
                RefOutput::Many(c.list_refs(prefix, Some(*limit)).await?),
            )
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
