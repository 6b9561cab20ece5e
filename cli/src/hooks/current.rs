//! `ctx current` (and the MCP tool `current_context`): the commit that is
//! an agent's context *now*, for a ticket's `context_id`. It first stores
//! what the hooks under the data directory (Claude Code's, Codex's,
//! Gemini's) have not stored yet (the lines of the turn in progress),
//! then answers the session's tip, or the principal's newest commit
//! (`GET /v1/resolve` at now).

use std::path::Path;

use clap::Args;
use ctx_core::{CommitId, Error, ErrorKind, Principal, RefName, Result};
use serde::Serialize;

use super::sync::{Flushed, Writer, flush};
use super::{Runtime, Writes};
use crate::client::Client;
use crate::commands::wire_value;
use crate::{Conn, print_json};

/// `ctx current`.
#[derive(Debug, Args)]
pub struct CurrentArgs {
    /// The session whose context to answer (a Claude Code, Codex or Gemini
    /// CLI session whose hook state is under the data directory); without
    /// it, the principal's newest commit, after storing every recorded
    /// session's pending lines.
    #[arg(long)]
    session: Option<String>,
    #[command(flatten)]
    writes: Writes,
    #[command(flatten)]
    conn: Conn,
}

/// What `ctx current` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Current {
    /// The commit to put in a ticket's `context_id`.
    pub context_id: CommitId,
    /// `session`: the session's tip; `principal`: the principal's newest
    /// commit now.
    pub by: &'static str,
    /// The session's ref, when `by` is `session`.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
    /// What was stored first, per session.
    pub flushed: Vec<Flushed>,
}

/// The context current now: `session`'s tip (after storing its pending
/// lines; the ref is read, so another writer's newer commit is the answer),
/// else `principal`'s newest commit (after storing every recorded
/// session's pending lines). Without `data` nothing is stored first.
///
/// # Errors
/// `Invalid` (`principal`); `NotFound` (`session_id`) for a session the
/// hooks under `data` never recorded, or (no `principal` field) when the
/// principal has no commit; the server's errors.
pub async fn current(
    client: &Client,
    data: Option<&Path>,
    writes: &Writes,
    session: Option<&str>,
) -> Result<Current> {
    let who: Principal = wire_value("principal", writes.principal(Runtime::ClaudeCode))?;
    let flushed = match data {
        Some(data) => {
            let w = Writer::new(client.clone(), writes, Runtime::ClaudeCode)?;
            flush(&w, data, session).await
        }
        None => Vec::new(),
    };
    let Some(session) = session else {
        let id = client.resolve(&who, None).await?.id;
        return Ok(Current {
            context_id: id,
            by: "principal",
            ref_name: None,
            flushed,
        });
    };
    let Some(name) = flushed
        .iter()
        .find(|f| f.session_id == session)
        .map(|f| f.ref_name.clone())
    else {
        // The message is a sentence of its own: not_found would append
        // "not found" to it.
        return Err(Error::new(ErrorKind::NotFound, match data {
            Some(d) => format!(
                "session {session:?}: the hooks (Claude Code, Codex, Gemini CLI) under {} never recorded it",
                d.display()
            ),
            None => format!(
                "session {session:?}: only `ctx mcp` or `ctx current` on the agent's machine know its transcript"
            ),
        })
        .with_field("session_id"));
    };
    let tip = client.get_ref(&name.parse::<RefName>()?).await?.target;
    Ok(Current {
        context_id: tip,
        by: "session",
        ref_name: Some(name),
        flushed,
    })
}

/// Runs `ctx current`: prints the `ctx-…` id (with `--json`, the whole
/// answer); warns on stderr of a session whose lines could not be stored.
///
/// # Errors
/// As [`current`].
pub async fn run_current(a: CurrentArgs) -> Result<()> {
    let client = a.conn.client()?;
    let c = current(
        &client,
        Some(&a.conn.remote.data),
        &a.writes,
        a.session.as_deref(),
    )
    .await?;
    if a.conn.json {
        return print_json(&c);
    }
    for f in &c.flushed {
        if let Some(e) = &f.error {
            eprintln!(
                "ctx current: warning: session {} still pending: {e}",
                f.session_id
            );
        }
    }
    outln!("{}", c.context_id);
    Ok(())
}
