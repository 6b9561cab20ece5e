//! Claude Code, hooked: `ctx hooks install|uninstall claude-code`,
//! `ctx hook claude-code` and `ctx resume`.
//!
//! - **install** merges one command hook per event (`Stop`, `PreCompact`,
//!   `SessionEnd`) into a project's `.claude/settings.json`, keeping every
//!   other key and hook; running it again changes nothing.
//! - **hook** reads the hook's JSON from stdin and checkpoints the
//!   transcript's complete new lines onto `claude/{project_key}/{session_id}`
//!   (the ref the Python `CtxSessionStore` uses, so both see one session).
//!   It remembers, per session, how far it got and the tip it left
//!   (`<data>/hooks/claude-code/…`); when the ref moved since, it skips
//!   the file bytes another hook of the session stored, or (another
//!   writer's entries) drops the lines whose `uuid` the chain holds. It
//!   never fails Claude Code: any error is a warning on stderr, exit 0, and
//!   the lines stay pending for the next hook of any session to retry.
//!   The next hook of any session also stores the tail of a session whose
//!   runtime died mid-turn (its transcript grew past what its hooks stored
//!   and has been quiet for [`ABANDONED_AFTER`]), so a crash loses no
//!   line that reached the file.
//! - **doctor** checks what an installed hook needs (its settings, the
//!   data directory's token, a live server that accepts it) and shows the
//!   warnings of the newest hook run, which the hook records under
//!   `<data>/hooks/claude-code/` since Claude Code does not show them.
//! - **resume** writes the transcript at any commit as a new Claude Code
//!   session file (fresh session id and entry uuids, `forkedFrom` naming
//!   the originals, as Claude Code's own fork does), records it as a
//!   snapshot commit whose parent is that commit, and points the new
//!   session's ref there, so `claude --resume <id>` continues from that
//!   point and the hook chains its next turns onto the fork.
//!
//! One file a part: `install`, `sync` (the hook itself) and `resume`;
//! the names they share (refs, project keys) are here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ctx_core::ArtifactRef;

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

/// The Claude Code events whose hooks checkpoint.
pub const HOOK_EVENTS: [&str; 3] = ["Stop", "PreCompact", "SessionEnd"];

/// The event whose hook checkpoints each tool's result, with
/// `ctx hooks install --tool-calls`.
pub const TOOL_EVENT: &str = "PostToolUse";

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
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Runtime {
    /// Claude Code (`.claude/settings.json`).
    ClaudeCode,
}

/// `ctx hooks …`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Add `ctx hook` to a project's hooks (Stop, PreCompact, SessionEnd),
    /// keeping its other hooks.
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
    /// The project directory whose `.claude/settings.json` holds the hooks.
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
    /// The project directory (its `.claude/settings.json` is edited).
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
    /// Also checkpoint after each tool call (`PostToolUse`, trigger
    /// `tool_call`): what the agent learned, as soon as it learned it.
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

/// Who the commits of a Claude Code session are written as: the hook's,
/// `ctx resume`'s, `ctx current`'s and `ctx mcp`'s `current_context`
/// (which store the same sessions, so they must agree).
#[derive(Debug, Clone, Default, Args)]
pub struct Writes {
    /// Who checkpoints.
    #[arg(long, env = "CTX_PRINCIPAL", default_value = "claude-code")]
    pub principal: String,
    /// The context template recorded on each commit.
    #[arg(long, env = "CTX_TEMPLATE", default_value = "claude-code")]
    pub template: String,
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

/// The ref of a Claude Code session: `claude/{project_key}/{session_id}`,
/// the project key shortened (kept unique by a hash) when the name would
/// pass the ref length limit.
pub fn session_ref(project_key: &str, session: &str) -> String {
    let name = format!("claude/{project_key}/{session}");
    if name.len() <= MAX_REF {
        return name;
    }
    let hash = ArtifactRef::of(project_key.as_bytes()).hash().to_hex();
    let keep = MAX_REF.saturating_sub("claude/".len() + 1 + session.len() + 1 + 16);
    let head: String = project_key.chars().take(keep).collect();
    format!("claude/{head}-{}/{session}", &hash[..16])
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
    fn session_refs_fit_the_ref_limit() {
        let sid = "5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10";
        assert_eq!(
            session_ref("-home-dev-p", sid),
            format!("claude/-home-dev-p/{sid}")
        );
        let long = "-x".repeat(120);
        let r = session_ref(&long, sid);
        assert!(r.len() <= MAX_REF, "{} bytes", r.len());
        assert!(r.parse::<RefName>().is_ok(), "{r}");
        assert_ne!(
            r,
            session_ref(&format!("{long}y"), sid),
            "distinct keys stay distinct"
        );
    }
}
