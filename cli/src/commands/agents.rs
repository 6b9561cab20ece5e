//! `ctx context assemble|window|clear|save|history|show|restore --agent A`
//! and `ctx agent show|set|restore|processes|process-set|process-remove A`: an agent's live context (its window,
//! clear marker, saves and settings: docs/http-api.md) and its
//! working-context restore. Each prints the server's JSON answer.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use clap::Subcommand;
use ctx_core::wire::{PatchAgentRequest, PutProcessRequest, RestoreRequest, SaveId, SaveRequest};
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
    /// The context of an LLM call for the agent and a thread, in seed
    /// 001's order: system prompt, docs, thread and process status, the
    /// thread's window. Prints the JSON view, or with --conversation only
    /// the conversation's bytes in the format.
    Assemble {
        /// The agent (a principal).
        #[arg(long, value_parser = parse_principal)]
        agent: String,
        /// The thread.
        #[arg(long)]
        thread: String,
        /// The conversation's format (default: the window's, else
        /// openai-chat-v1).
        #[arg(long, value_parser = parse_format)]
        format: Option<String>,
        /// Print only the conversation, as bytes of its format.
        #[arg(long)]
        conversation: bool,
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
        /// The system prompt of its assembled context ("" clears it).
        #[arg(long, conflicts_with = "system_prompt_file")]
        system_prompt: Option<String>,
        /// The system prompt, read from a file.
        #[arg(long)]
        system_prompt_file: Option<std::path::PathBuf>,
        /// The workspace whose files are its docs ("" clears it).
        #[arg(long)]
        docs_workspace: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// The processes registered as running for the agent.
    Processes {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Register (or replace) a process running for the agent: its
    /// assembled context's status lists it until removed or expired.
    ProcessSet {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        /// The process's id (1 to 128 of A-Z a-z 0-9 . _ : -).
        process_id: String,
        /// What it is doing.
        #[arg(long)]
        description: String,
        /// When it started (RFC 3339; default now).
        #[arg(long, value_parser = crate::parse_time)]
        started_at: Option<DateTime<Utc>>,
        /// The thread it works for.
        #[arg(long)]
        thread: Option<String>,
        /// When to stop listing it (RFC 3339).
        #[arg(long, value_parser = crate::parse_time)]
        expires_at: Option<DateTime<Utc>>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Remove a registered process.
    ProcessRemove {
        /// The agent.
        #[arg(value_parser = parse_principal)]
        agent: String,
        /// The process's id.
        process_id: String,
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
        /// Rebuild even when the cache is valid.
        #[arg(long)]
        rebuild: bool,
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
        ContextCommand::Assemble {
            agent: a,
            thread,
            format,
            conversation,
            remote,
        } => {
            let c = remote
                .client()?
                .assemble_context(&agent(&a)?, &thread, format.as_deref())
                .await?;
            if !conversation {
                return print_json(&c);
            }
            let bytes = match (&c.conversation.text, &c.conversation.base64) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (None, Some(b)) => base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|e| Error::internal(format!("the server sent bad base64: {e}")))?,
                (None, None) => Vec::new(),
            };
            crate::out::write(&bytes)
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
            print_json(&remote.client()?.list_saves(&agent(&a)?).await?)
        }
        ContextCommand::Show {
            agent: a,
            save_id: id,
            remote,
        } => print_json(
            &remote
                .client()?
                .get_save(&agent(&a)?, &save_id(&id)?)
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
            print_json(&remote.client()?.get_agent(&agent(&a)?).await?)
        }
        AgentCommand::Set {
            agent: a,
            window_seconds,
            persist_working_context,
            system_prompt,
            system_prompt_file,
            docs_workspace,
            remote,
        } => {
            let system_prompt = match system_prompt_file {
                Some(f) => Some(std::fs::read_to_string(&f).map_err(|e| {
                    Error::invalid(
                        "system_prompt_file",
                        format!("cannot read {} as UTF-8 text: {e}", f.display()),
                    )
                })?),
                None => system_prompt,
            };
            print_json(
                &remote
                    .client()?
                    .patch_agent(
                        &agent(&a)?,
                        &PatchAgentRequest {
                            window_seconds,
                            persist_working_context,
                            system_prompt,
                            docs_workspace,
                        },
                    )
                    .await?,
            )
        }
        AgentCommand::Processes { agent: a, remote } => {
            print_json(&remote.client()?.list_processes(&agent(&a)?).await?)
        }
        AgentCommand::ProcessSet {
            agent: a,
            process_id,
            description,
            started_at,
            thread,
            expires_at,
            remote,
        } => print_json(
            &remote
                .client()?
                .put_process(
                    &agent(&a)?,
                    &process_id,
                    &PutProcessRequest {
                        description,
                        started_at,
                        thread_id: thread,
                        expires_at,
                    },
                )
                .await?,
        ),
        AgentCommand::ProcessRemove {
            agent: a,
            process_id,
            remote,
        } => {
            remote
                .client()?
                .delete_process(&agent(&a)?, &process_id)
                .await?;
            print_json(&serde_json::json!({ "removed": process_id }))
        }
        AgentCommand::Restore {
            agent: a,
            system_prompt,
            max_episodic,
            max_semantic,
            raw_tail_turns,
            rebuild,
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
                        rebuild,
                    },
                )
                .await?,
        ),
    }
}
