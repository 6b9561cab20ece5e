//! `ctx context window|clear|save|history|show|restore --agent A` and
//! `ctx agent show|set|restore A`: an agent's live context (its window,
//! clear marker, saves and settings: docs/http-api.md) and its
//! working-context restore. Each prints the server's JSON answer.

use clap::Subcommand;
use ctx_core::wire::{PatchAgentRequest, RestoreRequest, SaveId, SaveRequest};
use ctx_core::{Error, Principal, Result};

use crate::{Remote, parse_format, parse_principal, print_json};

/// `ctx context …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ContextCommand {
    /// The agent's live context: its messages since max(last clear, now -
    /// window), oldest first (one thread with --thread).
    Window {
        /// The agent (a principal).
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        /// Only this thread.
        #[arg(long)]
        thread: Option<String>,
        /// The format wanted (default: the newest commit's).
        #[arg(long, value_parser = parse_format)]
        format: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Start the window now, for every thread (deletes nothing).
    Clear {
        /// The agent.
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Save every thread's window as a session file with a summary (does
    /// not clear).
    Save {
        /// The agent.
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        /// What to call the save.
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// The agent's saves, newest first.
    History {
        /// The agent.
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// One save's session file (its messages included).
    Show {
        /// The agent.
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        /// The save (sav-…).
        save_id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Load a save's messages back into the window (one commit per thread,
    /// now, tagged restored_from).
    Restore {
        /// The agent.
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        /// The save (sav-…).
        save_id: String,
        #[command(flatten)]
        remote: Remote,
    },
}

/// `ctx agent …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// The agent's settings.
    Show {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Change the agent's settings.
    Set {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        /// The rolling window in seconds (1 to ten years; default 86400).
        #[arg(long, allow_negative_numbers = true)]
        window_seconds: Option<i64>,
        /// Refresh the working-context cache at turn ends and compactions.
        #[arg(long)]
        persist_working_context: Option<bool>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Restore the agent's working context: the cache when valid, else a
    /// rebuild from its memory (the reason is printed with it).
    Restore {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        /// The system prompt of a rebuild (default: the last cache's).
        #[arg(long)]
        system_prompt: Option<String>,
        /// Commit summaries in a rebuild.
        #[arg(long)]
        max_episodic: Option<usize>,
        /// Subtask results in a rebuild.
        #[arg(long)]
        max_semantic: Option<usize>,
        /// Turns of the latest chain in a rebuild.
        #[arg(long)]
        raw_tail_turns: Option<usize>,
        #[command(flatten)]
        remote: Remote,
    },
}

fn agent(s: &str) -> Result<Principal> {
    s.parse().map_err(|e: Error| e.with_field("agent"))
}

fn save_id(s: &str) -> Result<SaveId> {
    s.parse().map_err(|e: Error| e.with_field("save_id"))
}

/// Runs a `ctx context` command.
///
/// # Errors
/// `Invalid` for malformed arguments; the server's errors.
pub(crate) async fn run_context(command: ContextCommand) -> Result<()> {
    match command {
        ContextCommand::Window {
            agent: a,
            thread,
            format,
            remote,
        } => {
            let w = remote
                .client()?
                .context_window(&agent(&a)?, thread.as_deref(), format.as_deref())
                .await?;
            print_json(&w)
        }
        ContextCommand::Clear { agent: a, remote } => {
            print_json(&remote.client()?.clear_context(&agent(&a)?).await?)
        }
        ContextCommand::Save {
            agent: a,
            description,
            remote,
        } => print_json(
            &remote
                .client()?
                .save_context(&agent(&a)?, &SaveRequest { description })
                .await?,
        ),
        ContextCommand::History { agent: a, remote } => {
            print_json(&remote.client()?.context_history(&agent(&a)?).await?)
        }
        ContextCommand::Show {
            agent: a,
            save_id: id,
            remote,
        } => print_json(
            &remote
                .client()?
                .context_save_file(&agent(&a)?, &save_id(&id)?)
                .await?,
        ),
        ContextCommand::Restore {
            agent: a,
            save_id: id,
            remote,
        } => print_json(
            &remote
                .client()?
                .restore_save(&agent(&a)?, &save_id(&id)?)
                .await?,
        ),
    }
}

/// Runs a `ctx agent` command.
///
/// # Errors
/// `Invalid` for malformed arguments; the server's errors.
pub(crate) async fn run_agent(command: AgentCommand) -> Result<()> {
    match command {
        AgentCommand::Show { agent: a, remote } => {
            print_json(&remote.client()?.agent(&agent(&a)?).await?)
        }
        AgentCommand::Set {
            agent: a,
            window_seconds,
            persist_working_context,
            remote,
        } => print_json(
            &remote
                .client()?
                .patch_agent(
                    &agent(&a)?,
                    &PatchAgentRequest {
                        window_seconds,
                        persist_working_context,
                    },
                )
                .await?,
        ),
        AgentCommand::Restore {
            agent: a,
            system_prompt,
            max_episodic,
            max_semantic,
            raw_tail_turns,
            remote,
        } => print_json(
            &remote
                .client()?
                .restore_working_context(
                    &agent(&a)?,
                    &RestoreRequest {
                        system_prompt,
                        max_episodic,
                        max_semantic,
                        raw_tail_turns,
                    },
                )
                .await?,
        ),
    }
}
