//! `ctx checkpoint`: a delta from a file or stdin as a new commit, with an
//! optional ref move in the same write.

use std::io::Read;

use base64::Engine as _;
use ctx_core::wire::CheckpointRequest;
use ctx_core::wire::RefMove;
use ctx_core::{Error, ErrorKind, Result};

use super::{ref_name, rev, wire_value};
use crate::{CheckpointArgs, print_json};

/// Runs `ctx checkpoint`.
///
/// # Errors
/// `Invalid` for an unreadable file or a malformed argument; the server's
/// errors.
pub(crate) async fn run(a: CheckpointArgs) -> Result<()> {
    let c = a.conn.client()?;
    let mut delta = Vec::new();
    if a.file == "-" {
        crate::say_reading_stdin("the delta");
        std::io::stdin()
            .read_to_end(&mut delta)
            .map_err(|e| Error::invalid("file", format!("cannot read stdin: {e}")))?;
    } else {
        delta = std::fs::read(&a.file)
            .map_err(|e| Error::invalid("file", format!("cannot read {}: {e}", a.file)))?;
    }
    if delta.is_empty() {
        let from = if a.file == "-" {
            "stdin".to_owned()
        } else {
            a.file.clone()
        };
        return Err(Error::invalid(
            "file",
            format!("the delta from {from} is empty: there is nothing to checkpoint"),
        ));
    }
    let mut parent = match &a.parent {
        Some(p) => Some(rev(&c, p).await?),
        None => None,
    };
    let mut ref_move = None;
    if let Some(name) = &a.ref_name {
        let expected = if a.new_ref {
            None
        } else if let Some(e) = &a.expected {
            Some(rev(&c, e).await?)
        } else if parent.is_some() {
            parent
        } else {
            // Continue the ref's tip, or start it with a root commit.
            match c.get_ref(&ref_name(name)?).await {
                Ok(r) => Some(r.target),
                Err(e) if e.kind == ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            }
        };
        if parent.is_none() && !a.new_ref {
            parent = expected;
        }
        ref_move = Some((name, expected));
    }
    // Checked in the order the server checks the fields it parses.
    let checkpoint = wire_value("checkpoint", &a.trigger)?;
    let commit_type = wire_value("commit_type", &a.commit_type)?;
    let created_at = a
        .created_at
        .as_deref()
        .map(|t| wire_value("created_at", t))
        .transpose()?;
    let format = wire_value("format", &a.format)?;
    let principal = wire_value("principal", &a.principal)?;
    let ref_move = match ref_move {
        Some((name, expected)) => Some(RefMove {
            name: wire_value("ref.name", name)?,
            expected,
        }),
        None => None,
    };
    let req = CheckpointRequest {
        parent,
        commit_type,
        format,
        artifact_ref: None,
        delta: None,
        delta_base64: Some(
            base64::engine::general_purpose::STANDARD
                .encode(&delta)
                .into(),
        ),
        template: a.template,
        principal,
        machine: a.machine,
        session_id: a.session,
        checkpoint,
        ticket_id: a.ticket,
        thread_id: a.thread,
        summary: a.summary,
        message_count: a.message_count,
        token_count: a.token_count,
        created_at,
        tags: (!a.tags.is_empty()).then(|| a.tags.into_iter().collect()),
        ref_move,
    };
    // The delta goes as delta_base64; the user gave a file (or stdin).
    let done = c
        .checkpoint(&req)
        .await
        .map_err(|e| match e.field.as_deref() {
            Some("delta_base64" | "delta") => e.with_field("file"),
            _ => e,
        })?;
    for w in done.budget_warning.iter().chain(&done.warnings) {
        eprintln!("ctx: warning: {w}");
    }
    if a.conn.json {
        print_json(&done.commit)
    } else {
        let note = if done.created {
            ""
        } else {
            " (already recorded)"
        };
        outln!("{}{note}", done.commit.id);
        Ok(())
    }
}
