//! # ctx-cli
//!
//! The `ctx` command: `ctx serve` runs the whole API over embedded storage;
//! the other commands are clients of a running server.
//!
//! # Layout
//! - [`serve`]: starting the embedded server, token administration.
//! - [`datadir`]: the data directory's lock and existence check.
//! - [`client`]: the typed HTTP client, one method per route.
//! - `commands`: `ctx checkpoint`, `show`, `log`, `update-metadata`,
//!   `materialize`, `resolve`, `ref`, `workspace` and `read-context`.
//! - [`import`]: `ctx import claude-code|codex|gemini` and `ctx export`.
//! - [`hooks`]: `ctx hooks install|uninstall`, `ctx hook claude-code`,
//!   `ctx resume`.
//! - [`branch`]: `ctx branch create|return|status`, `ctx session end`.
//! - [`mcp`]: `ctx mcp`, the MCP server of the context-folding tools.
//! - `out`: a command's output on stdout; a reader that went away ends
//!   the command quietly, by SIGPIPE, as it ends git.
//! - this file: the command line, dispatch, exit codes, `ctx serve` and
//!   `ctx tokens`.
//!
//! Exit codes: 0 success, 1 internal error, 2 usage or invalid input,
//! 3 not found, 4 conflict, 5 unauthenticated, 6 server unreachable or
//! unavailable, 7 gone (an evicted delta: materialize from the compaction
//! the message names). A closed stdout ends a command by SIGPIPE (141 in
//! a shell), as it ends git.

#![deny(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ctx_core::{Error, ErrorKind, Result, TenantId};
use serde_json::json;

#[macro_use]
mod out;

pub mod branch;
pub mod client;
mod commands;
pub mod datadir;
pub mod hooks;
pub mod import;
pub mod mcp;
pub mod serve;

use client::Client;

/// A git for AI-agent context.
#[derive(Debug, Parser)]
#[command(name = "ctx", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct DataDir {
    /// The data directory.
    #[arg(long, env = ctx_core::config::CTX_DATA.var, default_value = ctx_core::config::DEFAULT_DATA)]
    data: PathBuf,
}

/// Where the server is and how to authenticate to it.
#[derive(Debug, Args)]
pub(crate) struct Remote {
    /// The server's base URL.
    #[arg(long, env = "CTX_SERVER", default_value = "http://127.0.0.1:7878")]
    server: String,
    /// The bearer token; read from <data>/token when not given.
    #[arg(long, env = "CTX_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Where to find the token file of a local server.
    #[arg(long, env = ctx_core::config::CTX_DATA.var, default_value = ctx_core::config::DEFAULT_DATA)]
    data: PathBuf,
}

/// [`Remote`] for a command that prints a result.
#[derive(Debug, Args)]
pub(crate) struct Conn {
    #[command(flatten)]
    remote: Remote,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API on embedded storage (filesystem + SQLite).
    Serve(serve::ServeArgs),
    /// Manage the bearer tokens of a local server.
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// Operator commands on whole tenants (on the stores, no server).
    Tenants {
        #[command(subcommand)]
        command: commands::tenants::TenantsCommand,
    },
    /// Record a checkpoint: a delta from FILE (or stdin) as a new commit.
    Checkpoint(Box<CheckpointArgs>),
    /// Show one commit (a ctx-… id or a ref name).
    Show {
        /// The commit or ref.
        rev: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Write an artifact's bytes (an art-… ref, as `show` prints) to stdout.
    Cat {
        /// The artifact ref.
        art: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// One line per commit, newest first.
    ///
    /// Stops after -n commits; when the root is not reached yet, stderr
    /// says how to go on (`ctx log <next> -n N`), and `--json` gives the
    /// same commit as `next`. `--all` goes on to the root.
    Log {
        /// The commit or ref to start from.
        rev: String,
        /// How many commits (at least 1; the server allows up to 1000);
        /// with --all, how many each request fetches.
        #[arg(short = 'n', long, default_value_t = 50,
              value_parser = parse_count)]
        max_count: u64,
        /// Every commit to the root, fetched -n at a time.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Rebuild the context at a commit, to stdout or a file.
    ///
    /// Output: the context on stdout (or in the -o file) and one line about
    /// it (artifact, size, messages, tokens, tier) on stderr; a translation
    /// adds its fidelity report there (messages kept, converted, dropped,
    /// and each change with its reason). With --json, one JSON object on
    /// stdout: the response fields (`fidelity` among them) and the context
    /// as `content` (UTF-8) or `content_base64`, or `output` (the file's
    /// path) with -o; nothing on stderr.
    Materialize {
        /// The commit or ref.
        rev: String,
        /// compaction (default), root, or a ctx-… ancestor.
        #[arg(long, value_parser = parse_stop)]
        stop: Option<String>,
        #[arg(long, value_parser = parse_format, help = known_formats(
            "The format wanted (default: the commit's); a different one is \
             translated (see the tier printed)."
        ))]
        format: Option<String>,
        /// Write the context here instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        conn: Conn,
    },
    /// The newest commit of a principal at or before a time.
    Resolve {
        /// Who (A-Z a-z 0-9 . _ - / @ : +).
        #[arg(long, env = "CTX_PRINCIPAL", value_parser = parse_principal)]
        principal: String,
        /// When: RFC 3339 (e.g. 2026-01-02T03:04:05Z), or a time ago as a
        /// whole number and a unit (90s, 30m, 2h, 1d, 1w); default now.
        #[arg(long, value_parser = parse_at)]
        at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Change a commit's summary or tags.
    UpdateMetadata {
        /// The commit or ref.
        rev: String,
        /// The new summary.
        #[arg(long, conflicts_with = "clear_summary")]
        summary: Option<String>,
        /// Remove the summary.
        #[arg(long)]
        clear_summary: bool,
        /// Replace the tags with these KEY=VALUE pairs.
        #[arg(long = "tag", value_parser = parse_tag)]
        tags: Vec<(String, String)>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Fill in missing summaries now through the server's summarizer:
    /// one commit, or a backfill of the oldest ones lacking a summary.
    Summarize {
        /// At most this many commits (default: all lacking a summary).
        #[arg(long, value_parser = parse_count, conflicts_with = "commit")]
        limit: Option<u64>,
        /// Only this commit (or ref).
        #[arg(long)]
        commit: Option<String>,
        /// Replace a summary the commit already has.
        #[arg(long, requires = "commit")]
        force: bool,
        /// Commits summarized at once.
        #[arg(long, default_value_t = 4, value_parser = parse_count)]
        concurrency: u64,
        #[command(flatten)]
        conn: Conn,
    },
    /// Re-compact: summarize the context at a commit (from its nearest
    /// compaction) into a compaction commit on top of it, so a materialize
    /// of the new commit starts at the summary (`--stop root` still reaches
    /// the original history).
    Compact {
        /// The commit (or ref) whose context to compact.
        rev: String,
        /// The summarizer: the server's configured one by default, or
        /// `extractive`.
        #[arg(long)]
        summarizer: Option<String>,
        /// Move this ref from the compacted commit to the compaction
        /// (compare-and-swap: a 409 if it points elsewhere).
        #[arg(long = "ref", value_parser = parse_ref_name)]
        ref_name: Option<ctx_core::RefName>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Snapshot commits as optimization points: the context at REV stored
    /// whole as a `snapshot` commit on top of it, so a materialize starts
    /// there (a walk to the root still reads the original deltas). With
    /// --all, every ref under --prefix whose chain has grown past
    /// --min-depth commits (or --min-bytes) since its last compaction or
    /// snapshot, each ref moved onto its snapshot by compare-and-swap.
    Snapshot {
        /// The commit (or ref) to snapshot.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        rev: Option<String>,
        /// Move this ref from REV to the snapshot (compare-and-swap).
        #[arg(long = "ref", value_parser = parse_ref_name, conflicts_with = "all")]
        ref_name: Option<ctx_core::RefName>,
        /// Every ref under --prefix past the depth or cost.
        #[arg(long)]
        all: bool,
        /// With --all: the refs whose names start with this.
        #[arg(long, default_value = "", requires = "all")]
        prefix: String,
        /// With --all: chains of at least this many commits since their
        /// last compaction or snapshot (at most 1000 are looked at).
        #[arg(long, default_value_t = 100, requires = "all",
              value_parser = parse_min_depth)]
        min_depth: u64,
        /// With --all: or whose commits since then hold this many bytes.
        #[arg(long, requires = "all")]
        min_bytes: Option<u64>,
        /// With --all: print what would be snapshotted, make nothing.
        #[arg(long, requires = "all")]
        dry_run: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Collect garbage: remove the artifacts no commit, cache entry or
    /// pending upload needs and that are older than the server's grace
    /// period (CTX_GC_GRACE_SECS, 24 h), page by page with a progress
    /// indicator on stderr. Prints one line per artifact removed (or, with
    /// --dry-run, that would be) and a total; with --json, the report.
    Gc {
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Read and move refs.
    Ref {
        #[command(subcommand)]
        command: RefCommand,
    },
    /// Erase a principal (an agent or user) for good.
    Principal {
        #[command(subcommand)]
        command: commands::lifecycle::PrincipalCommand,
    },
    /// Pin sessions and refs so retention never erases them.
    Pin {
        #[command(subcommand)]
        command: commands::lifecycle::PinCommand,
    },
    /// Import a session from another runtime as a chain of commits.
    Import {
        #[command(subcommand)]
        command: import::ImportCommand,
    },
    /// Write a chain out in a format (default: the whole history, as the
    /// original transcript for a Claude Code session).
    ///
    /// Output: as `ctx materialize`: the content on stdout (or in the -o
    /// file) and one line about it on stderr; with --json, one JSON object
    /// on stdout with the response fields and `content`, `content_base64`
    /// or `output`.
    Export(Box<import::ExportArgs>),
    /// Install, remove or check ctx's hooks in a runtime (Claude Code).
    Hooks {
        #[command(subcommand)]
        command: hooks::HooksCommand,
    },
    /// Run as a runtime's hook (installed by `ctx hooks install`): reads
    /// the hook's JSON on stdin, checkpoints, always exits 0.
    Hook {
        #[command(subcommand)]
        command: hooks::HookCommand,
    },
    /// The commit that is your context now, for a ticket's `context_id`:
    /// first stores what the Claude Code hooks have not stored yet (the
    /// turn in progress), then prints the session's tip (--session) or the
    /// principal's newest commit.
    Current(Box<hooks::CurrentArgs>),
    /// Continue a Claude Code session from any commit: writes it as a new
    /// session file for `claude --resume <id>` and prints the id.
    Resume(Box<hooks::ResumeArgs>),
    /// Context folding: run a subtask in an isolated branch.
    Branch {
        #[command(subcommand)]
        command: branch::BranchCommand,
    },
    /// Sessions: end one (force-returns its active branches).
    Session {
        #[command(subcommand)]
        command: branch::SessionCommand,
    },
    /// Serve the branch tools over the Model Context Protocol on stdio,
    /// forwarding to the server.
    Mcp {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        writes: hooks::Writes,
    },
    /// Workspace files: push a directory, cat, ls, log.
    Workspace {
        #[command(subcommand)]
        command: commands::workspace::WorkspaceCommand,
    },
    /// An agent's live context: window, clear, save, history, show,
    /// restore. Prints JSON.
    Context {
        #[command(subcommand)]
        command: commands::agents::ContextCommand,
    },
    /// An agent's settings and its working-context restore. Prints JSON.
    Agent {
        #[command(subcommand)]
        command: commands::agents::AgentCommand,
    },
    /// The first-turn context of a workspace: from the server,
    /// or with --dir from local files by the same code.
    ReadContext {
        /// The workspace (on the server).
        #[arg(required_unless_present = "dir", conflicts_with = "dir")]
        workspace: Option<String>,
        /// A local workspace directory instead of the server.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The local tastes directory (with --dir).
        #[arg(long, requires = "dir")]
        tastes: Option<PathBuf>,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Subcommand)]
enum TokensCommand {
    /// Add a token for TENANT and print it (shown only once).
    Add {
        /// The tenant the token acts for.
        tenant: String,
        #[command(flatten)]
        data: DataDir,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List tokens (ids and tenants, never the secrets).
    List {
        #[command(flatten)]
        data: DataDir,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by its id (tok-…).
    Revoke {
        /// The token id.
        id: String,
        #[command(flatten)]
        data: DataDir,
    },
}

#[derive(Debug, Subcommand)]
enum RefCommand {
    /// Where a ref points.
    Get {
        /// The ref name.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Create a ref, or move it by compare-and-swap with --expected.
    ///
    /// One rule for `ref set` and `ref delete`: without --expected neither
    /// changes an existing ref (set creates one that does not exist yet;
    /// on an existing ref both exit 4 naming its tip); --expected TIP
    /// changes it only while it points at TIP; --force changes it wherever
    /// it points.
    Set {
        /// The ref name.
        name: String,
        /// The commit (or ref) to point at.
        target: String,
        /// The commit the ref must point at now; omit to create the ref.
        #[arg(long, conflicts_with = "force")]
        expected: Option<String>,
        /// Move the ref wherever it points now (or create it).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a ref alone (its commits stay), by compare-and-swap with
    /// --expected.
    ///
    /// One rule for `ref set` and `ref delete`: without --expected neither
    /// changes an existing ref (delete exits 4 naming its tip); --expected
    /// TIP changes it only while it points at TIP; --force changes it
    /// wherever it points.
    Delete {
        /// The ref name.
        name: String,
        /// Delete only while the ref points at this commit (or ref).
        #[arg(long, conflicts_with = "force")]
        expected: Option<String>,
        /// Delete the ref wherever it points.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Drop the deltas older than a compaction or snapshot on the ref's
    /// path, keeping every commit's metadata and summary (`ctx log` still
    /// reads the whole chain; materializing across them answers "gone").
    Evict {
        /// The ref name.
        name: String,
        /// The compaction or snapshot commit (or ref) to keep history from.
        #[arg(long)]
        before: String,
        /// Evict even the deltas that no compaction made by `ctx compact`
        /// covers (behind a compaction written by hand): without it, such an
        /// eviction lists what would be lost and changes nothing.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Refs by name prefix.
    List {
        /// Only refs starting with this.
        #[arg(long, default_value = "")]
        prefix: String,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Args)]
struct CheckpointArgs {
    /// The delta: a file, or - (the default) for stdin.
    #[arg(default_value = "-")]
    file: String,
    /// Who checkpoints (A-Z a-z 0-9 . _ - / @ : +).
    #[arg(long, env = "CTX_PRINCIPAL", value_parser = parse_principal)]
    principal: String,
    /// The parent commit (or ref); omit for a root, or with --ref to use the ref's tip.
    #[arg(long)]
    parent: Option<String>,
    /// What the delta holds.
    #[arg(long = "type", default_value = "delta",
          value_parser = ["delta", "compaction", "snapshot"])]
    commit_type: String,
    #[arg(long, default_value = "raw", value_parser = parse_format, help = known_formats(
        "The delta's format; any other format id is stored as opaque bytes."
    ))]
    format: String,
    /// The context template.
    #[arg(long, env = "CTX_TEMPLATE", default_value = "default")]
    template: String,
    /// Why it checkpoints.
    #[arg(long, default_value = "explicit",
          value_parser = ["turn_boundary", "tool_call", "compaction", "session_end", "explicit", "branch_return"])]
    trigger: String,
    /// A summary of the delta.
    #[arg(long)]
    summary: Option<String>,
    /// The wrapper's session id (1 to 191 of A-Z, a-z, 0-9, '.', '_', '-'
    /// and '/').
    #[arg(long, value_parser = parse_session)]
    session: Option<ctx_core::SessionId>,
    /// The machine.
    #[arg(long)]
    machine: Option<String>,
    /// A ticket id.
    #[arg(long)]
    ticket: Option<String>,
    /// A thread id.
    #[arg(long)]
    thread: Option<String>,
    /// Messages in the delta.
    #[arg(long)]
    message_count: Option<u64>,
    /// Tokens in the delta (estimated by the server when omitted).
    #[arg(long)]
    token_count: Option<u64>,
    /// The checkpoint time (RFC 3339, e.g. 2026-01-02T03:04:05Z); send the
    /// same one to retry idempotently.
    #[arg(long, value_parser = parse_time_text)]
    created_at: Option<String>,
    /// KEY=VALUE labels.
    #[arg(long = "tag", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
    /// Move this ref to the new commit in the same write. Without --parent
    /// the ref's tip is the parent (a root if the ref does not exist).
    #[arg(long = "ref")]
    ref_name: Option<String>,
    /// The tip the ref must have (default: the parent).
    #[arg(long, requires = "ref_name")]
    expected: Option<String>,
    /// The ref must not exist yet.
    #[arg(long, requires = "ref_name", conflicts_with = "expected")]
    new_ref: bool,
    #[command(flatten)]
    conn: Conn,
}

/// A `--format` value: a format id.
pub(crate) fn parse_format(s: &str) -> Result<String, String> {
    s.parse::<ctx_core::format::FormatId>()
        .map(|_| s.to_owned())
        .map_err(|e| e.message)
}

/// A `--format` flag's help: `lead`, then every format the codecs know
/// (the registry the server uses), so the list never falls behind.
pub(crate) fn known_formats(lead: &str) -> String {
    let formats = ctx_core::format::Formats::default();
    let mut ids: Vec<&str> = formats.ids().map(|f| f.as_str()).collect();
    ids.sort_unstable();
    format!("{lead} Known: {}.", ids.join(", "))
}

/// A count of at least 1.
fn parse_min_depth(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (2..=1000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a depth: give a whole number from 2 to 1000 (a snapshot of one commit holds what it does)"
        )),
    }
}

fn parse_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a count: give a whole number, at least 1"
        )),
    }
}

/// A `--principal` value: 1 to 256 of A-Z a-z 0-9 . _ - / @ : +.
pub(crate) fn parse_principal(s: &str) -> Result<String, String> {
    s.parse::<ctx_core::Principal>()
        .map(|_| s.to_owned())
        .map_err(|e| e.message)
}

/// A ref name, as every route takes it.
pub(crate) fn parse_ref_name(s: &str) -> Result<ctx_core::RefName, String> {
    s.parse().map_err(|e: ctx_core::Error| e.message)
}

/// A session id, as every route takes it.
pub(crate) fn parse_session(s: &str) -> Result<ctx_core::SessionId, String> {
    s.parse().map_err(|e: ctx_core::Error| e.message)
}

/// A `--stop` value: compaction, root or a ctx-… id.
pub(crate) fn parse_stop(s: &str) -> Result<String, String> {
    s.parse::<ctx_core::service::Stop>()
        .map(|_| s.to_owned())
        .map_err(|e| e.message)
}

/// A time flag's value: RFC 3339.
pub(crate) fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|_| {
            format!(
                "{s:?} is not a time: give RFC 3339, a date, 'T', a time and an offset, \
                 e.g. 2026-01-02T03:04:05Z or 2026-01-02T04:04:05+01:00"
            )
        })
}

/// `--at`: RFC 3339, or a time ago (`90s`, `30m`, `2h`, `1d`, `1w`).
fn parse_at(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    use ctx_core::Clock as _;
    at_or_ago(s, ctx_core::clock::SystemClock.now())
}

/// [`parse_at`] with "now" given.
fn at_or_ago(
    s: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let unit = |c: char| match c {
        's' => Some(1),
        'm' => Some(60),
        'h' => Some(3_600),
        'd' => Some(86_400),
        'w' => Some(604_800),
        _ => None,
    };
    let ago = s.char_indices().last().and_then(|(i, c)| {
        let n: i64 = s[..i].parse().ok().filter(|n| *n >= 0)?;
        chrono::Duration::try_seconds(n.checked_mul(unit(c)?)?)
    });
    match ago {
        Some(d) => now
            .checked_sub_signed(d)
            .ok_or_else(|| format!("{s:?} is too long ago")),
        None => parse_time(s).map_err(|e| {
            format!("{e}; or a time ago: a whole number and s, m, h, d or w (90s, 30m, 2h, 1d, 1w)")
        }),
    }
}

/// A time flag's value checked as RFC 3339 and kept as written.
fn parse_time_text(s: &str) -> Result<String, String> {
    parse_time(s).map(|_| s.to_owned())
}

fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some(("", _)) => Err(format!("{s:?} has an empty key: give KEY=VALUE")),
        Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
        None => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Parses the arguments and runs the command.
pub async fn main_with(args: impl IntoIterator<Item = String>) -> ExitCode {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, wants_json(&m))));
    let (cli, json) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if json => {
            // The HTTP error body's shape, on one line.
            let body = ctx_core::wire::ErrorBody::from(&e);
            match serde_json::to_string(&body) {
                Ok(s) => eprintln!("{s}"),
                Err(_) => eprintln!("ctx: {}: {}", e.kind, e.message),
            }
            ExitCode::from(exit_code(e.kind))
        }
        Err(e) => {
            let field = e
                .field
                .as_deref()
                .map(|f| format!(" [{f}]"))
                .unwrap_or_default();
            // The server's messages usually name the current value already.
            let current = e
                .current
                .as_deref()
                .filter(|c| !e.message.contains(c))
                .map(|c| format!(" (current: {c})"))
                .unwrap_or_default();
            eprintln!("ctx: {}{field}: {}{current}", e.kind, e.message);
            ExitCode::from(exit_code(e.kind))
        }
    }
}

/// Whether the command given asked for `--json` (the innermost
/// subcommand's flag).
fn wants_json(m: &clap::ArgMatches) -> bool {
    match m.subcommand() {
        Some((_, sub)) => wants_json(sub),
        None => matches!(m.try_get_one::<bool>("json"), Ok(Some(true))),
    }
}

/// The process exit code for an error kind.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Invalid | ErrorKind::TooLarge => 2,
        ErrorKind::NotFound => 3,
        ErrorKind::Conflict => 4,
        ErrorKind::Unauthenticated => 5,
        ErrorKind::Unavailable | ErrorKind::RateLimited => 6,
        ErrorKind::Gone => 7,
        _ => 1,
    }
}

impl Conn {
    pub(crate) fn client(&self) -> Result<Client> {
        self.remote.client()
    }
}

impl Remote {
    pub(crate) fn client(&self) -> Result<Client> {
        let token = match &self.token {
            Some(t) => Some(t.clone()),
            None => read_token_file(&self.data),
        };
        let client = Client::new(&self.server, token.clone());
        if token.is_some() {
            return Ok(client.with_token_hint(
                "the server refused the token (from --token, CTX_TOKEN or the token file)",
            ));
        }
        let file = serve::token_file(&self.data);
        let shown = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
        Ok(client.with_token_hint(format!(
            "no token was sent: none was given with --token or CTX_TOKEN, and there is no token file {} ({}, relative to the current directory; --data or CTX_DATA names another data directory); run the command in the directory `ctx serve` was started in, or pass a token from `ctx tokens add TENANT --data DIR`",
            file.display(),
            shown.display()
        )))
    }
}

fn read_token_file(data: &Path) -> Option<String> {
    std::fs::read_to_string(serve::token_file(data))
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// Tells a user at a terminal that `what` is being read from stdin, so a
/// command waiting for it does not look hung.
pub(crate) fn say_reading_stdin(what: &str) {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        eprintln!("ctx: reading {what} from stdin (end it with Ctrl-D; or give a file)");
    }
}

pub(crate) fn print_json(v: &impl serde::Serialize) -> Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Error::internal(e.to_string()))?;
    outln!("{s}");
    Ok(())
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Branch { command } => branch::run_branch(command).await,
        Command::Session { command } => branch::run_session(command).await,
        Command::Mcp { remote, writes } => {
            let hooks = mcp::Hooks {
                writes,
                data: remote.data.clone(),
            };
            mcp::serve(remote.client()?, hooks).await
        }
        Command::Current(args) => hooks::run_current(*args).await,
        Command::Tokens { command } => run_tokens(command).await,
        Command::Tenants { command } => commands::tenants::run(command).await,
        Command::Checkpoint(args) => commands::checkpoint::run(*args).await,
        Command::Cat { art, remote } => commands::cat::run(&art, &remote).await,
        Command::Show { rev, conn } => commands::commits::show(&rev, &conn).await,
        Command::Log {
            rev,
            max_count,
            all,
            conn,
        } => commands::commits::log(&rev, max_count, all, &conn).await,
        Command::Gc { dry_run, conn } => commands::gc::run(dry_run, &conn).await,
        Command::Snapshot {
            rev,
            ref_name,
            all,
            prefix,
            min_depth,
            min_bytes,
            dry_run,
            conn,
        } => match rev {
            Some(r) if !all => commands::snapshot::run_one(&r, ref_name, &conn).await,
            _ => {
                let batch = commands::snapshot::Batch {
                    prefix,
                    min_depth,
                    min_bytes,
                    dry_run,
                };
                commands::snapshot::run_batch(batch, &conn).await
            }
        },
        Command::Summarize {
            limit,
            commit,
            force,
            concurrency,
            conn,
        } => {
            let concurrency = usize::try_from(concurrency).unwrap_or(usize::MAX);
            commands::summarize::run(limit, commit.as_deref(), force, concurrency, &conn).await
        }
        Command::Compact {
            rev,
            summarizer,
            ref_name,
            conn,
        } => commands::compact::run(&rev, summarizer, ref_name, &conn).await,
        Command::Materialize {
            rev,
            stop,
            format,
            output,
            conn,
        } => {
            commands::materialize::run(
                &rev,
                stop.as_deref(),
                format.as_deref(),
                output.as_ref(),
                &conn,
            )
            .await
        }
        Command::Resolve {
            principal,
            at,
            conn,
        } => commands::resolve::run(&principal, at, &conn).await,
        Command::UpdateMetadata {
            rev,
            summary,
            clear_summary,
            tags,
            conn,
        } => commands::commits::update_metadata(&rev, summary, clear_summary, tags, &conn).await,
        Command::Ref { command } => commands::refs::run(command).await,
        Command::Pin { command } => commands::lifecycle::run_pin(command).await,
        Command::Principal { command } => commands::lifecycle::run_principal(command).await,
        Command::Import { command } => import::run_import(command).await,
        Command::Export(args) => import::run_export(*args).await,
        Command::Hooks { command } => hooks::run_hooks(command).await,
        Command::Hook { command } => hooks::run_hook(command).await,
        Command::Resume(args) => hooks::run_resume(*args).await,
        Command::Workspace { command } => commands::workspace::run(command).await,
        Command::Context { command } => commands::agents::run_context(command).await,
        Command::Agent { command } => commands::agents::run_agent(command).await,
        Command::ReadContext {
            workspace,
            dir,
            tastes,
            conn,
        } => {
            commands::workspace::read_context(
                workspace.as_deref(),
                dir.as_deref(),
                tastes.as_deref(),
                &conn,
            )
            .await
        }
    }
}

async fn run_tokens(command: TokensCommand) -> Result<()> {
    let (TokensCommand::Add { data, .. }
    | TokensCommand::List { data, .. }
    | TokensCommand::Revoke { data, .. }) = &command;
    datadir::existing(&data.data)?;
    match command {
        TokensCommand::Add { tenant, data, json } => {
            let tenant: TenantId = tenant.parse()?;
            let (token, rec) = serve::add_token(&data.data, &tenant).await?;
            if json {
                print_json(&json!({"id": rec.id, "tenant": rec.tenant, "token": token}))
            } else {
                outln!("{token}");
                eprintln!(
                    "added {} for tenant {}; the token is shown only now",
                    rec.id, rec.tenant
                );
                Ok(())
            }
        }
        TokensCommand::List { data, json } => {
            let all = serve::list_tokens(&data.data).await?;
            if json {
                return print_json(&all);
            }
            for t in all {
                outln!("{}  {}  {}", t.id, t.tenant, t.created_at.to_rfc3339());
            }
            Ok(())
        }
        TokensCommand::Revoke { id, data } => {
            if serve::revoke_token(&data.data, &id).await? {
                eprintln!("revoked {id}");
                Ok(())
            } else {
                Err(Error::not_found(format!("token {id}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_takes_rfc_3339_or_a_time_ago() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-10T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        for (given, want) in [
            ("90s", "2026-01-10T11:58:30Z"),
            ("30m", "2026-01-10T11:30:00Z"),
            ("2h", "2026-01-10T10:00:00Z"),
            ("1d", "2026-01-09T12:00:00Z"),
            ("1w", "2026-01-03T12:00:00Z"),
            ("0s", "2026-01-10T12:00:00Z"),
            ("2026-01-02T03:04:05+01:00", "2026-01-02T02:04:05Z"),
        ] {
            assert_eq!(
                at_or_ago(given, now).unwrap().to_rfc3339(),
                chrono::DateTime::parse_from_rfc3339(want)
                    .unwrap()
                    .to_rfc3339(),
                "{given}"
            );
        }
        for bad in [
            "yesterday",
            "2y",
            "-1d",
            "d",
            "",
            "1.5h",
            "99999999999999999w",
        ] {
            let e = at_or_ago(bad, now).unwrap_err();
            assert!(
                e.contains("RFC 3339") || e.contains("too long ago"),
                "{bad}: {e}"
            );
        }
    }
}
