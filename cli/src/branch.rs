//! `ctx branch create|return|status` and `ctx session end`: context folding
//! from the command line, as clients of a running server.

use std::io::Read;

use clap::Subcommand;
use ctx_core::wire::{
    BranchCreateRequest, BranchReturnRequest, BranchStatusResponse, ReturnStatus,
};
use ctx_core::{Error, Result};

use crate::commands::{branch_id, wire_value};
use crate::{Conn, print_json};

/// `ctx branch …`.
#[derive(Debug, Subcommand)]
pub(crate) enum BranchCommand {
    /// Start an isolated branch of a session; prints its id.
    Create {
        /// The session (its chain is the ref sessions/<SESSION>).
        #[arg(long, env = "CTX_SESSION")]
        session: String,
        /// What the subtask is (at most 500 characters).
        #[arg(long)]
        description: String,
        /// The subtask's instructions (at most 10,000 characters).
        #[arg(long)]
        prompt: Option<String>,
        /// Token budget (default 8192, capped at 32768).
        #[arg(long)]
        budget: Option<u64>,
        /// Seconds until it times out (default 300, at most 600: more is
        /// refused).
        #[arg(long)]
        timeout: Option<u64>,
        /// Nest under this active branch.
        #[arg(long)]
        parent: Option<String>,
        /// Prepend the memories relevant to the description (strategies
        /// and anti-patterns of earlier branches, marked as data).
        #[arg(long)]
        inject_memories: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Return a branch: MESSAGE (or stdin with -) is scrubbed of secrets and
    /// appended to the parent's chain. With --failed ERROR the branch ends
    /// as failed and the parent gets the error (MESSAGE, if given, adds to
    /// it).
    Return {
        /// The branch (br-…).
        branch: String,
        /// The result to hand back; - reads stdin (the default without
        /// --failed).
        message: Option<String>,
        /// End the branch as failed, with this error.
        #[arg(long, value_name = "ERROR")]
        failed: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// A branch's status, or with --session every active branch of a
    /// session, deepest first.
    Status {
        /// The branch (br-…).
        #[arg(required_unless_present = "session", conflicts_with = "session")]
        branch: Option<String>,
        /// The session whose active branches to show.
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Memories of ended branches matching QUERY (any of its words), best
    /// first: strategies from completed branches, anti-patterns from
    /// failed or timed-out ones, with where each came from.
    Memories {
        /// What to look for.
        query: String,
        /// At most this many (default 10, at most 100).
        #[arg(long)]
        limit: Option<usize>,
        /// Only memories at least this confident (0 to 1).
        #[arg(long)]
        min_confidence: Option<f64>,
        /// Only this kind: strategy or anti_pattern.
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `ctx session …`.
#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// End a session: force-return its active branches.
    End {
        /// The session.
        session: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Erase a session: its commits, artifacts, cache entries and refs.
    /// Other sessions forked from it make this an error listing them,
    /// unless --cascade erases them too.
    Erase {
        /// The session.
        session: String,
        /// Erase the commits of other sessions that descend from it too.
        #[arg(long)]
        cascade: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Runs `ctx branch …`.
///
/// # Errors
/// The server's error.
pub(crate) async fn run_branch(command: BranchCommand) -> Result<()> {
    match command {
        BranchCommand::Create {
            session,
            description,
            prompt,
            budget,
            timeout,
            parent,
            inject_memories,
            conn,
        } => {
            let c = conn.client()?;
            let req = BranchCreateRequest {
                inject_memories,
                session_id: session.parse()?,
                description,
                prompt,
                budget,
                timeout_seconds: timeout,
                parent_branch: parent
                    .map(|p| wire_value("parent_branch", &p))
                    .transpose()?,
            };
            let b = c.branch_create(&req).await?;
            if conn.json {
                return print_json(&b);
            }
            outln!("{}", b.branch_id);
            eprintln!(
                "depth {}, budget {} tokens, times out in {} s; checkpoint into it with --ref {}",
                b.depth, b.budget_allocated, b.timeout_seconds, b.chain_ref
            );
            for m in &b.memories {
                eprintln!(
                    "memory {} ({}, confidence {:.2}{}, {} tokens): {}",
                    m.id,
                    m.kind,
                    m.confidence,
                    if m.untrusted { ", untrusted" } else { "" },
                    m.tokens,
                    m.title
                );
            }
            for m in &b.memories_blocked {
                eprintln!(
                    "memory {} left out: it matches {}",
                    m.id,
                    m.patterns.join(", ")
                );
            }
            Ok(())
        }
        BranchCommand::Return {
            branch,
            message,
            failed,
            conn,
        } => {
            let message = match message {
                Some(m) => m,
                None if failed.is_some() => String::new(),
                None => "-".to_owned(),
            };
            let message = if message == "-" {
                crate::say_reading_stdin("the message");
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .map_err(|e| Error::invalid("message", format!("cannot read stdin: {e}")))?;
                s
            } else {
                message
            };
            let c = conn.client()?;
            let r = c
                .branch_return(
                    &branch_id(&branch)?,
                    &BranchReturnRequest {
                        status: failed.as_ref().map(|_| ReturnStatus::Failed),
                        error: failed,
                        ..BranchReturnRequest::completed(message)
                    },
                )
                .await?;
            if conn.json {
                return print_json(&r);
            }
            outln!("{}", r.commit);
            eprintln!(
                "{} {branch}: {} tokens used, {} secrets scrubbed{}",
                if r.success { "returned" } else { "failed" },
                r.tokens_used,
                r.redactions.values().sum::<usize>(),
                if r.force_returned.is_empty() {
                    String::new()
                } else {
                    format!(", {} children force-returned", r.force_returned.len())
                }
            );
            Ok(())
        }
        BranchCommand::Memories {
            query,
            limit,
            min_confidence,
            kind,
            conn,
        } => {
            let c = conn.client()?;
            let kind = kind
                .map(|k| k.parse().map_err(|e: ctx_core::Error| e.with_field("kind")))
                .transpose()?;
            let found = c
                .memory_search(&crate::client::MemorySearchParams {
                    text: &query,
                    limit,
                    min_confidence,
                    kind,
                })
                .await?;
            if conn.json {
                return print_json(&found);
            }
            for f in &found.memories {
                let m = &f.memory;
                let p = &m.provenance;
                outln!(
                    "{} {} {:.2} {}\n  from session {} ({}), branch {}, commit {}\n  {}",
                    m.id,
                    m.kind,
                    m.confidence,
                    m.title,
                    p.session_id,
                    if p.principal.is_empty() {
                        "?"
                    } else {
                        &p.principal
                    },
                    p.branch_id,
                    p.commit,
                    m.content.replace('\n', "\n  ")
                );
            }
            if found.memories.is_empty() {
                eprintln!("no memory matches");
            }
            Ok(())
        }
        BranchCommand::Status {
            branch,
            session,
            conn,
        } => {
            let c = conn.client()?;
            let s = match (&branch, &session) {
                (Some(b), _) => c.branch_status(&branch_id(b)?).await?,
                (None, Some(s)) => c.branch_status_of_session(&s.parse()?).await?,
                (None, None) => unreachable!("clap requires one"),
            };
            if conn.json {
                return print_json(&s);
            }
            if s.branch_id.is_none() {
                outln!("{}", s.status);
                return Ok(());
            }
            let active = s.active_branches.as_deref().unwrap_or_default();
            if active.len() > 1 {
                // By session, several active: every one, deepest first.
                outln!("{} active branches, deepest first", active.len());
                for b in active {
                    outln!();
                    print_status(b);
                }
            } else {
                print_status(&s);
            }
            Ok(())
        }
    }
}

/// One branch's status as `ctx branch status` prints it.
fn print_status(s: &BranchStatusResponse) {
    if let Some(id) = s.branch_id {
        outln!("branch      {id}");
    }
    outln!("status      {}", s.status);
    if let Some(d) = s.depth {
        outln!("depth       {d}");
    }
    if let Some(p) = s.parent_branch {
        outln!("parent      {p}");
    }
    if let (Some(u), Some(t)) = (s.budget_used, s.budget_total) {
        outln!("budget      {u} / {t} tokens");
    }
    if let Some(d) = &s.description {
        outln!("description {d}");
    }
    if let Some(t) = s.created_at {
        outln!("created     {}", t.to_rfc3339());
    }
    if let Some(t) = s.completed_at {
        outln!("completed   {}", t.to_rfc3339());
    }
    if let Some(r) = &s.reason {
        outln!("reason      {r}");
    }
    if let Some(w) = &s.warning {
        outln!("warning     {w}");
    }
}

/// Runs `ctx session …`.
///
/// # Errors
/// The server's error.
pub(crate) async fn run_session(command: SessionCommand) -> Result<()> {
    match command {
        SessionCommand::End { session, conn } => {
            let c = conn.client()?;
            let e = c.session_end(&session.parse()?).await?;
            if conn.json {
                return print_json(&e);
            }
            outln!(
                "session {}: {} branches returned, {} failed",
                e.session_id,
                e.returned.len(),
                e.failed.len()
            );
            Ok(())
        }
        SessionCommand::Erase {
            session,
            cascade,
            conn,
        } => crate::commands::lifecycle::erase(&session, cascade, &conn).await,
    }
}
