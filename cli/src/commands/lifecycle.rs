//! `ctx session erase`, `ctx principal erase` and `ctx pin add|remove|list`:
//! erasing a session or a principal, and the pins retention respects.

use clap::Subcommand;
use ctx_core::store::Pin;
use ctx_core::wire::Erased;
use ctx_core::{Principal, Result, SessionId};

use crate::{Conn, print_json};

/// `ctx pin …`.
#[derive(Debug, Subcommand)]
pub(crate) enum PinCommand {
    /// Pin a session or a ref: retention never erases it (a ref protects
    /// the session its target belongs to).
    Add {
        /// `session` or `ref`.
        kind: String,
        /// The session id or ref name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Unpin a session or a ref.
    Remove {
        /// `session` or `ref`.
        kind: String,
        /// The session id or ref name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The tenant's pins.
    List {
        #[command(flatten)]
        conn: Conn,
    },
}

/// `ctx principal …`.
#[derive(Debug, Subcommand)]
pub(crate) enum PrincipalCommand {
    /// Erase a principal: every commit on its timeline (with its
    /// artifacts, cache entries and refs), its agent saves, working-context
    /// snapshot and agent record. Other principals' commits descending
    /// from its commits make this an error listing them, unless --cascade
    /// erases them too.
    Erase {
        /// The principal.
        principal: String,
        /// Erase the commits of other principals that descend from its
        /// commits too.
        #[arg(long)]
        cascade: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Runs `ctx principal …`.
///
/// # Errors
/// `Invalid` for a malformed principal; the server's errors (`NotFound`,
/// `Conflict` listing the descendants without `--cascade`).
pub(crate) async fn run_principal(command: PrincipalCommand) -> Result<()> {
    let PrincipalCommand::Erase {
        principal,
        cascade,
        conn,
    } = command;
    let principal: Principal = principal.parse()?;
    let e = conn.client()?.erase_principal(&principal, cascade).await?;
    if conn.json {
        return print_json(&e);
    }
    outln!("principal {principal} erased: {}", counts(&e, "principals"));
    Ok(())
}

/// What an erase removed, in words (`others`: whose commits `cascaded`
/// counts).
fn counts(e: &Erased, others: &str) -> String {
    format!(
        "{} commits ({} of other {others}), {} artifacts ({} kept: shared), {} refs, {} cache entries, {} saves, {} working contexts, {} agent records",
        e.commits,
        e.cascaded,
        e.artifacts,
        e.artifacts_shared,
        e.refs,
        e.cache,
        e.saves,
        e.working_contexts,
        e.agents
    )
}

/// Runs `ctx session erase`.
///
/// # Errors
/// `Invalid` for a malformed session id; the server's errors (`NotFound`,
/// `Conflict` listing the forks without `--cascade`).
pub(crate) async fn erase(session: &str, cascade: bool, conn: &Conn) -> Result<()> {
    let session: SessionId = session.parse()?;
    let c = conn.client()?;
    let e = c.erase_session(&session, cascade).await?;
    if conn.json {
        return print_json(&e);
    }
    outln!("session {session} erased: {}", counts(&e, "sessions"));
    Ok(())
}

/// Runs `ctx pin …`.
///
/// # Errors
/// `Invalid` for an unknown kind or a malformed name; the server's errors.
pub(crate) async fn run_pin(command: PinCommand) -> Result<()> {
    match command {
        PinCommand::Add { kind, name, conn } => set(&kind, &name, true, &conn).await,
        PinCommand::Remove { kind, name, conn } => set(&kind, &name, false, &conn).await,
        PinCommand::List { conn } => {
            let l = conn.client()?.list_pins().await?;
            if conn.json {
                return print_json(&l);
            }
            for p in l.pins {
                outln!("{}  {}", p.kind(), p.name());
            }
            Ok(())
        }
    }
}

async fn set(kind: &str, name: &str, pinned: bool, conn: &Conn) -> Result<()> {
    let pin: ctx_core::wire::Pin = Pin::parse(kind, name)?.into();
    let client = conn.client()?;
    let r = if pinned {
        client.set_pin(&pin).await?
    } else {
        client.delete_pin(&pin).await?
    };
    if conn.json {
        return print_json(&r);
    }
    let what = if pinned { "pinned" } else { "unpinned" };
    let note = if r.changed { "" } else { " (already)" };
    outln!("{} {} {what}{note}", pin.kind(), pin.name());
    Ok(())
}
