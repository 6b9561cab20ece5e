//! `ctx ref get|set|delete|list|evict`: reading refs, moving them by
//! compare-and-swap, and evicting the old deltas of their history.

use ctx_core::wire::RefRecord;
use ctx_core::wire::{EvictRequest, Evicted, RefList, SetRefRequest};
use ctx_core::{Error, ErrorKind, RefName, Result};

use super::{ref_name, rev};
use crate::{Conn, RefCommand, print_json};

/// Runs `ctx ref …`.
///
/// # Errors
/// `Invalid` for a malformed ref name; `Conflict` naming the tip for a
/// `set` or `delete` of an existing ref without `--expected` or `--force`;
/// the server's errors (`Conflict` with the current tip when `--expected`
/// is stale).
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
            force,
            conn,
        } => {
            let c = conn.client()?;
            let name = ref_name(name)?;
            let target = rev(&c, target).await?;
            let expected = match expected {
                Some(e) => Some(rev(&c, e).await?),
                // Wherever it points now (compare-and-swap on what was read).
                None if *force => match c.get_ref(&name).await {
                    Ok(r) => Some(r.target),
                    Err(e) if e.kind == ErrorKind::NotFound => None,
                    Err(e) => return Err(e),
                },
                None => None,
            };
            let creating = expected.is_none() && !*force;
            let req = SetRefRequest { target, expected };
            let set = c
                .set_ref(&name, &req)
                .await
                .map_err(|e| match e.current.clone() {
                    Some(tip) if creating && e.kind == ErrorKind::Conflict => {
                        exists(&name, &tip, "move it from there")
                    }
                    _ => e,
                })?;
            (conn, RefOutput::One(set))
        }
        RefCommand::Delete {
            name,
            expected,
            force,
            conn,
        } => {
            let c = conn.client()?;
            let name = ref_name(name)?;
            let expected = match expected {
                Some(e) => Some(rev(&c, e).await?),
                None if *force => None,
                None => {
                    let tip = c.get_ref(&name).await?.target.to_string();
                    return Err(exists(&name, &tip, "delete it at that tip"));
                }
            };
            (
                conn,
                RefOutput::One(c.delete_ref(&name, expected.as_ref()).await?),
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

/// The refusal of `ref set`/`ref delete` without `--expected` or
/// `--force` on a ref that exists: it names the tip and both ways on.
fn exists(name: &RefName, tip: &str, to: &str) -> Error {
    Error::conflict(
        format!(
            "ref {name} exists and points at {tip}; give --expected {tip} to {to} \
             (compare-and-swap), or --force to change it wherever it points"
        ),
        Some(tip.to_owned()),
    )
    .with_field("expected")
}

enum RefOutput {
    One(RefRecord),
    Many(RefList),
    Evicted(Evicted),
}
