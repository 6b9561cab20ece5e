//! The runtimes' hooks: `ctx hooks install|uninstall|doctor
//! claude-code|codex|gemini`, `ctx hook claude-code|codex|gemini` and
//! `ctx resume`.
//!
//! Claude Code, Codex CLI and Gemini CLI all run a command hook with a
//! JSON object on stdin naming the session and its log file
//! (`session_id`, `transcript_path`, `cwd`, `hook_event_name`), and all
//! three append that log as JSONL. So one hook serves them, told apart by
//! a [`Spec`]: where the hooks are configured, which events end a turn,
//! compact or end the session, the log's format and how it is cut into
//! turns (as `ctx import` cuts it), and the ref prefix.
//!
//! - **install** merges one command hook per event (Claude Code: `Stop`,
//!   `PreCompact`, `SessionEnd`; Codex: `Stop`, `PreCompact`; Gemini:
//!   `AfterAgent`, `PreCompress`, `SessionEnd`) into the project's
//!   settings (`.claude/settings.json`, `.codex/hooks.json` with the
//!   `codex_hooks` feature switched on in `.codex/config.toml`,
//!   `.gemini/settings.json`), keeping every other key and hook; running
//!   it again changes nothing.
//! - **hook** reads the hook's JSON from stdin and checkpoints the log's
//!   complete new lines onto `{prefix}/{project_key}/{session_id}`
//!   (`claude/…` is the ref the Python `CtxSessionStore` uses, so both see
//!   one session), one commit per turn. It remembers, per session, how far
//!   it got and the tip it left (`<data>/hooks/<runtime>/…`); when the ref
//!   moved since, it skips the file bytes another hook of the session
//!   stored, or (another writer's entries) drops the lines whose `uuid`
//!   the chain holds. It never fails the runtime: any error is a warning
//!   on stderr, exit 0, and the lines stay pending for the next hook of any
//!   session to retry. The next hook of any session (of any runtime) also
//!   stores the tail of a session whose runtime died mid-turn (its log grew
//!   past what its hooks stored and has been quiet for [`ABANDONED_AFTER`]),
//!   so a crash loses no line that reached the file.
//! - **doctor** checks what an installed hook needs (its settings, the
//!   data directory's token, a live server that accepts it) and shows the
//!   warnings of the newest hook run, which the hook records under
//!   `<data>/hooks/<runtime>/` since the runtimes do not show them.
//! - **resume** (Claude Code) writes the transcript at any commit as a new
//!   Claude Code session file (fresh session id and entry uuids,
//!   `forkedFrom` naming the originals, as Claude Code's own fork does),
//!   records it as a snapshot commit whose parent is that commit, and
//!   points the new session's ref there, so `claude --resume <id>`
//!   continues from that point and the hook chains its next turns onto the
//!   fork.
//!
//! One file a part: `install`, `sync` (the hook itself) and `resume`;
//! the names they share (runtimes, refs, project keys) are here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ctx_core::format::{Segment, codex_segments, gemini_segments, segments};
use ctx_core::wire::Trigger;
use ctx_core::{ArtifactRef, Result};

use crate::{Conn, Remote};

mod current;
mod doctor;
mod install;
mod resume;
mod sync;

pub use current::{Current, CurrentArgs, current, run_current};

pub use install::run_hooks;
pub use resume::run_resume;
pub use sync::run_hook;

/// How long one server call of a hook may take: hooks must not hold
/// Claude Code up.
const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many other sessions' pending lines (or abandoned tails)
/// are stored per hook.
const RETRY_OTHERS: usize = 8;

/// A transcript that grew past what its hooks stored and has not been
/// written for this long is a runtime that died mid-turn (a live one's
/// `Stop` or `SessionEnd` hook would have stored it): the next hook of any
/// session stores its tail.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// The longest a ref name may be (as [`RefName`] checks).
const MAX_REF: usize = 200;

/// What the Claude Code SDK allows a sanitized project directory name
/// before it appends a hash (`MAX_SANITIZED_LENGTH`).
const MAX_SANITIZED: usize = 200;

/// The runtimes ctx installs hooks into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runtime {
    /// Claude Code (`.claude/settings.json`).
    ClaudeCode,
    /// OpenAI Codex CLI (`.codex/hooks.json`).
    Codex,
    /// Gemini CLI (`.gemini/settings.json`).
    Gemini,
}

/// Every runtime, in the order hooks of several are looked at.
pub const RUNTIMES: [Runtime; 3] = [Runtime::ClaudeCode, Runtime::Codex, Runtime::Gemini];

/// What the hook of one runtime needs to know about it.
#[derive(Debug)]
pub struct Spec {
    /// The runtime's name: `ctx hook <name>`, its state directory under
    /// `<data>/hooks/`, and the default principal and template.
    pub name: &'static str,
    /// How people call it.
    pub label: &'static str,
    /// The first part of its sessions' refs.
    pub ref_root: &'static str,
    /// The format of its session logs.
    pub format: &'static str,
    /// How a log is cut into one commit per turn (and per compaction).
    pub cut: fn(&[u8]) -> Result<Vec<Segment>>,
    /// Its hook settings file, under the project directory.
    pub settings: &'static str,
    /// The events the hook is installed on, with their checkpoint
    /// triggers; the first ends a turn.
    pub events: &'static [(&'static str, Trigger)],
    /// The event after each tool call (`install --tool-calls`).
    pub tool_event: &'static str,
    /// Whether the project key is the name of the directory holding the
    /// log (Claude Code's); otherwise it is made from `cwd`.
    pub key_from_log_dir: bool,
    /// Whether a log's first bytes say it is rewritten whole rather than
    /// appended (so no hook can follow it line by line).
    pub rewritten: fn(&[u8]) -> bool,
}

/// Appended logs only.
fn appended(_: &[u8]) -> bool {
    false
}

/// A Gemini CLI session file of the versions before its JSONL files: one
/// JSON document (pretty-printed, or on one line with its `messages`),
/// which the CLI rewrites whole at every change.
fn gemini_document(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    match serde_json::from_slice::<serde_json::Value>(first) {
        Ok(v) => v.get("messages").is_some(),
        Err(_) => first.trim_ascii_start().starts_with(b"{"),
    }
}

impl Spec {
    /// The event that ends a turn (for `--every`).
    pub fn turn_end(&self) -> &'static str {
        self.events[0].0
    }

    /// The event names the hook is installed on (with `tool_calls`, the
    /// tool event too).
    pub fn installed(&self, tool_calls: bool) -> Vec<&'static str> {
        self.events
            .iter()
            .map(|e| e.0)
            .chain(tool_calls.then_some(self.tool_event))
            .collect()
    }

    /// The checkpoint trigger of one of its events.
    pub fn trigger(&self, event: &str) -> Trigger {
        if event == self.tool_event {
            return Trigger::ToolCall;
        }
        self.events
            .iter()
            .find(|e| e.0 == event)
            .map_or(Trigger::TurnBoundary, |e| e.1)
    }

    /// Whether `event` ends the session.
    pub fn ends(&self, event: &str) -> bool {
        self.events
            .iter()
            .any(|&(e, t)| e == event && t == Trigger::SessionEnd)
    }
}

const CLAUDE_CODE: Spec = Spec {
    name: "claude-code",
    label: "Claude Code",
    ref_root: "claude",
    format: "claude-code-v1",
    cut: segments,
    settings: ".claude/settings.json",
    events: &[
        ("Stop", Trigger::TurnBoundary),
        ("PreCompact", Trigger::Compaction),
        ("SessionEnd", Trigger::SessionEnd),
    ],
    tool_event: "PostToolUse",
    key_from_log_dir: true,
    rewritten: appended,
};

const CODEX: Spec = Spec {
    name: "codex",
    label: "Codex CLI",
    ref_root: "codex",
    format: "codex-rollout-v1",
    cut: codex_segments,
    settings: ".codex/hooks.json",
    // Codex has no session-end hook: its sessions end by the idle sweep.
    events: &[
        ("Stop", Trigger::TurnBoundary),
        ("PreCompact", Trigger::Compaction),
    ],
    tool_event: "PostToolUse",
    key_from_log_dir: false,
    rewritten: appended,
};

const GEMINI: Spec = Spec {
    name: "gemini",
    label: "Gemini CLI",
    ref_root: "gemini",
    format: "gemini-cli-v1",
    cut: gemini_segments,
    settings: ".gemini/settings.json",
    events: &[
        ("AfterAgent", Trigger::TurnBoundary),
        ("PreCompress", Trigger::Compaction),
        ("SessionEnd", Trigger::SessionEnd),
    ],
    tool_event: "AfterTool",
    key_from_log_dir: false,
    rewritten: gemini_document,
};

impl Runtime {
    /// What its hook needs to know.
    pub const fn spec(self) -> &'static Spec {
        match self {
            Runtime::ClaudeCode => &CLAUDE_CODE,
            Runtime::Codex => &CODEX,
            Runtime::Gemini => &GEMINI,
        }
    }
}

/// `ctx hooks …`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Add `ctx hook` to a project's hooks (Claude Code: Stop, PreCompact,
    /// SessionEnd; Codex: Stop, PreCompact; Gemini: AfterAgent,
    /// PreCompress, SessionEnd), keeping its other hooks.
    Install(InstallArgs),
    /// Remove the hooks `install` added, keeping every other hook.
    Uninstall(InstallArgs),
    /// Say what keeps the installed hooks from working: the hooks in the
    /// project's settings, the data directory and its token, the server
    /// (reachable, token accepted), the newest hook run's warnings and the
    /// sessions whose lines wait. Exits non-zero when something is wrong.
    Doctor(DoctorArgs),
}

/// Which project's hooks `ctx hooks doctor` checks.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The runtime.
    #[arg(default_value = "claude-code")]
    runtime: Runtime,
    /// The project directory whose settings (`.claude/settings.json`,
    /// `.codex/hooks.json`, `.gemini/settings.json`) hold the hooks.
    #[arg(long, default_value = ".")]
    project: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Where to install and which server the hook talks to.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The runtime.
    runtime: Runtime,
    /// The project directory (its `.claude/settings.json`,
    /// `.codex/hooks.json` and `.codex/config.toml`, or
    /// `.gemini/settings.json` is edited).
    #[arg(long, default_value = ".")]
    project: PathBuf,
    /// The server the hook checkpoints to (written into the hook command).
    #[arg(long, env = "CTX_SERVER", default_value = "http://127.0.0.1:7878")]
    server: String,
    /// The data directory whose token file the hook reads and where it
    /// keeps its progress (written into the hook command, made absolute).
    #[arg(long, env = ctx_core::config::CTX_DATA.var, default_value = ctx_core::config::DEFAULT_DATA)]
    data: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also checkpoint after each tool call (`PostToolUse`; Gemini:
    /// `AfterTool`; trigger `tool_call`): what the agent learned, as soon
    /// as it learned it.
    #[arg(long)]
    tool_calls: bool,
    /// Written into the hook command: checkpoint at every Nth turn end.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    every: Option<u64>,
    /// Written into the hook command: checkpoint only on significant
    /// events (compaction, session end, tool calls, `ctx current`).
    #[arg(long, conflicts_with = "every")]
    significant_only: bool,
}

/// `ctx hook …`.
#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Checkpoint a Claude Code session from a hook: reads the hook's JSON
    /// on stdin; always exits 0.
    ClaudeCode(HookArgs),
    /// Checkpoint a Codex CLI session (its rollout) from a hook: reads the
    /// hook's JSON on stdin; always exits 0.
    Codex(HookArgs),
    /// Checkpoint a Gemini CLI session (its session file) from a hook:
    /// reads the hook's JSON on stdin; always exits 0.
    Gemini(HookArgs),
}

impl HookCommand {
    /// The runtime and the run's arguments.
    pub fn parts(self) -> (Runtime, HookArgs) {
        match self {
            HookCommand::ClaudeCode(a) => (Runtime::ClaudeCode, a),
            HookCommand::Codex(a) => (Runtime::Codex, a),
            HookCommand::Gemini(a) => (Runtime::Gemini, a),
        }
    }
}

/// What a hook run needs.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// Checkpoint at every Nth `Stop` of a session (turn boundary) only;
    /// compactions, session end, tool calls and `ctx current` always
    /// store what is pending.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    every: u64,
    /// Checkpoint only on significant events: a compaction, the session's
    /// end, a tool call (with `--tool-calls`) or `ctx current`, never at a
    /// plain turn end.
    #[arg(long, conflicts_with = "every")]
    significant_only: bool,
    /// Read the server's URL at every run from `<data>/server`, which
    /// `ctx serve` writes when it starts, instead of `--server`: the hook
    /// follows a server restarted on another port.
    #[arg(long)]
    server_from_data: bool,
    #[command(flatten)]
    writes: Writes,
    #[command(flatten)]
    remote: Remote,
}

/// Who the commits of a session are written as: the hook's, `ctx
/// resume`'s, `ctx current`'s and `ctx mcp`'s `current_context` (which
/// store the same sessions, so they must agree). Unset, the runtime's name
/// (`claude-code`, `codex`, `gemini`).
#[derive(Debug, Clone, Default, Args)]
pub struct Writes {
    /// Who checkpoints (default: the runtime's name, `claude-code`,
    /// `codex` or `gemini`).
    #[arg(long, env = "CTX_PRINCIPAL")]
    pub principal: Option<String>,
    /// The context template recorded on each commit (default: the
    /// runtime's name).
    #[arg(long, env = "CTX_TEMPLATE")]
    pub template: Option<String>,
}

impl Writes {
    /// The principal of `runtime`'s commits.
    pub fn principal(&self, runtime: Runtime) -> &str {
        self.principal.as_deref().unwrap_or(runtime.spec().name)
    }

    /// The template of `runtime`'s commits.
    pub fn template(&self, runtime: Runtime) -> &str {
        self.template.as_deref().unwrap_or(runtime.spec().name)
    }
}

/// `ctx resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The commit (or ref) to continue from.
    rev: String,
    /// The project directory Claude Code will run in.
    #[arg(long, default_value = ".")]
    project: PathBuf,
    /// Claude Code's configuration directory (default: ~/.claude).
    #[arg(long, env = "CLAUDE_CONFIG_DIR")]
    claude_dir: Option<PathBuf>,
    #[command(flatten)]
    writes: Writes,
    #[command(flatten)]
    conn: Conn,
}

/// The ref of a session: `{root}/{project_key}/{session_id}` (`claude/…`
/// for Claude Code), the project key shortened (kept unique by a hash)
/// when the name would pass the ref length limit.
pub fn session_ref(root: &str, project_key: &str, session: &str) -> String {
    let name = format!("{root}/{project_key}/{session}");
    if name.len() <= MAX_REF {
        return name;
    }
    let hash = ArtifactRef::of(project_key.as_bytes()).hash().to_hex();
    let keep = MAX_REF.saturating_sub(root.len() + 1 + 1 + session.len() + 1 + 16);
    let head: String = project_key.chars().take(keep).collect();
    format!("{root}/{head}-{}/{session}", &hash[..16])
}

/// Claude Code's project key for a directory: its real path with every
/// character but ASCII letters and digits replaced by `-`; past 200
/// characters, cut and suffixed with a hash of the path (as the SDK's
/// `project_key_for_directory`, without its Unicode normalization).
pub fn project_key(dir: &Path) -> String {
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    let path = real.to_string_lossy();
    let sanitized: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if sanitized.chars().count() <= MAX_SANITIZED {
        return sanitized;
    }
    let head: String = sanitized.chars().take(MAX_SANITIZED).collect();
    format!("{head}-{}", simple_hash(&path))
}

/// The 32-bit string hash Claude Code names long project directories with
/// (JavaScript's `(h << 5) - h + c`, in base 36).
fn simple_hash(s: &str) -> String {
    let mut h: i32 = 0;
    for c in s.chars() {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(c as i32);
    }
    let mut n = h.unsigned_abs();
    if n == 0 {
        return "0".to_owned();
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).expect("base-36 digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_core::RefName;

    #[test]
    fn project_keys_match_claude_code() {
        assert_eq!(
            project_key(Path::new("/nonexistent/home/dev/my_proj.v2")),
            "-nonexistent-home-dev-my-proj-v2"
        );
        let long = format!("/nonexistent/{}", "a".repeat(250));
        let k = project_key(Path::new(&long));
        assert!(k.starts_with("-nonexistent-aaa"), "{k}");
        assert_eq!(k.len(), 200 + 1 + simple_hash(&long).len());
        // The SDK's hash: JavaScript's 32-bit (h << 5) - h + c, base 36.
        assert_eq!(simple_hash(""), "0");
        assert_eq!(simple_hash("a"), "2p");
        assert_eq!(simple_hash("abc"), "22ci");
        assert_eq!(simple_hash("/x/\u{e9}\u{e9}\u{e9}"), "o42in7");
    }

    #[test]
    fn a_gemini_session_written_as_one_document_is_told_from_its_jsonl() {
        let jsonl = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/gemini-cli-session.jsonl"
        ))
        .unwrap();
        assert!(!gemini_document(&jsonl));
        assert!(gemini_document(
            b"{\n  \"sessionId\": \"s\",\n  \"messages\": []\n}\n"
        ));
        assert!(gemini_document(b"{\"sessionId\":\"s\",\"messages\":[]}"));
        assert!(!gemini_document(
            b"{\"sessionId\":\"s\",\"projectHash\":\"h\"}\n"
        ));
        assert!(!gemini_document(b"not json\n"));
    }

    #[test]
    fn session_refs_fit_the_ref_limit() {
        let sid = "5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10";
        assert_eq!(
            session_ref("claude", "-home-dev-p", sid),
            format!("claude/-home-dev-p/{sid}")
        );
        let long = "-x".repeat(120);
        let r = session_ref("claude", &long, sid);
        assert!(r.len() <= MAX_REF, "{} bytes", r.len());
        assert!(r.parse::<RefName>().is_ok(), "{r}");
        assert_ne!(
            r,
            session_ref("claude", &format!("{long}y"), sid),
            "distinct keys stay distinct"
        );
    }
}
