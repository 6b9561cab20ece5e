//! `ctx ref get|set|delete|list|evict`: reading refs, moving them by
//! compare-and-swap, and evicting the old deltas of their history.

use ctx_core::Result;
use ctx_core::wire::RefRecord;
use ctx_core::wire::{EvictRequest, Evicted, RefList, SetRefRequest};

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
        RefCommand::Evict {
            name,
            before,
            force,
            conn,
        } => {
            let c = conn.client()?;
            let before = rev(&c, before).await?;
            let req = EvictRequest {
                before,
                force: *force,
            };
            (
                conn,
                RefOutput::Evicted(c.evict_ref(&ref_name(name)?, &req).await?),
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
        RefOutput::Evicted(e) if conn.json => print_json(&e),
        RefOutput::Evicted(e) => {
            outln!(
                "evicted the deltas of {} commit(s) before {} ({} newly marked): \
                 {} artifact(s) deleted, {} kept (shared), {} cache entr(ies) removed",
                e.commits,
                e.before,
                e.marked,
                e.artifacts,
                e.artifacts_shared,
                e.cache
            );
            if e.summarized > 0 {
                outln!(
                    "gave {} evicted commit(s) without a summary the extractive one",
                    e.summarized
                );
            }
            if !e.kept.is_empty() {
                let kept: Vec<String> = e.kept.iter().map(ToString::to_string).collect();
                outln!(
                    "kept {} delta(s) a fork still needs: {}",
                    kept.len(),
                    kept.join(", ")
                );
            }
            Ok(())
        }
        RefOutput::One(r) => {
            outln!("{}  {}", r.target, r.name);
            Ok(())
        }
        RefOutput::Many(l) => {
            for r in l.refs {
                outln!("{}  {}", r.target, r.name);
            }
            Ok(())
        }
    }
}

enum RefOutput {
    One(RefRecord),
    Many(RefList),
    Evicted(Evicted),
}
