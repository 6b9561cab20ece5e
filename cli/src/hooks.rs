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
//!   (`<data>/hooks/claude-code/…`); when the ref moved since (another
//!   writer), it drops the lines whose `uuid` the chain already holds. It
//!   never fails Claude Code: any error is a warning on stderr, exit 0, and
//!   the lines stay pending for the next hook of any session to retry.
//! - **resume** writes the transcript at any commit as a new Claude Code
//!   session file (fresh session id and entry uuids, `forkedFrom` naming
//!   the originals, as Claude Code's own fork does), records it as a
//!   snapshot commit whose parent is that commit, and points the new
//!   session's ref there, so `claude --resume <id>` continues from that
//!   point and the hook chains its next turns onto the fork.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ctx_core::clock::{Clock, IdSource, OsRandom, SystemClock};
use ctx_core::format::{FormatId, segments};
use ctx_core::store::RefMove;
use ctx_core::wire::{CheckpointRequest, MaterializeRequest};
use ctx_core::{
    ArtifactRef, CommitId, CommitType, Error, ErrorKind, Principal, RefName, Result, SessionId,
    Trigger,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::Client;
use crate::commands::{rev, wire_value};
use crate::import::segment_request;
use crate::{Conn, Remote, print_json};

/// The Claude Code events whose hooks checkpoint.
pub const HOOK_EVENTS: [&str; 3] = ["Stop", "PreCompact", "SessionEnd"];

/// How long one server call of a hook may take: hooks must not hold
/// Claude Code up.
const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many other sessions' pending lines are retried per hook.
const RETRY_OTHERS: usize = 8;

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
    #[arg(long, env = "CTX_DATA", default_value = ".ctx")]
    data: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
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
    /// Who checkpoints.
    #[arg(long, env = "CTX_PRINCIPAL", default_value = "claude-code")]
    principal: String,
    /// The context template recorded on each commit.
    #[arg(long, env = "CTX_TEMPLATE", default_value = "claude-code")]
    template: String,
    #[command(flatten)]
    remote: Remote,
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
    /// Who checkpoints the fork.
    #[arg(long, env = "CTX_PRINCIPAL", default_value = "claude-code")]
    principal: String,
    /// The context template recorded on the fork's commit.
    #[arg(long, env = "CTX_TEMPLATE", default_value = "claude-code")]
    template: String,
    #[command(flatten)]
    conn: Conn,
}

/// Runs `ctx hooks install|uninstall`.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings file is not a JSON
/// object; `Unavailable` when it cannot be read or written.
pub fn run_hooks(cmd: HooksCommand) -> Result<()> {
    let (a, install) = match cmd {
        HooksCommand::Install(a) => (a, true),
        HooksCommand::Uninstall(a) => (a, false),
    };
    let Runtime::ClaudeCode = a.runtime;
    let path = a.project.join(".claude").join("settings.json");
    let mut settings = match std::fs::read(&path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Value::Object(Map::new()),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::invalid(
                "settings",
                format!("{} is not JSON: {e}; fix it first", path.display()),
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
        Err(e) => {
            return Err(Error::unavailable(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let command = if install {
        let exe = std::env::current_exe()
            .map_err(|e| Error::unavailable(format!("where is this ctx binary? {e}")))?;
        let data = std::path::absolute(&a.data)
            .map_err(|e| Error::invalid("data", format!("{}: {e}", a.data.display())))?;
        Some(format!(
            "{} hook claude-code --server {} --data {}",
            shell_quote(&exe.to_string_lossy()),
            shell_quote(&a.server),
            shell_quote(&data.to_string_lossy())
        ))
    } else {
        None
    };
    let changed = merge_hooks(&mut settings, command.as_deref())?;
    if changed {
        let dir = path.parent().expect("settings.json has a parent");
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
        let mut text =
            serde_json::to_string_pretty(&settings).map_err(|e| Error::internal(e.to_string()))?;
        text.push('\n');
        write_atomically(&path, text.as_bytes())?;
    }
    if a.json {
        print_json(&json!({
            "settings": path,
            "changed": changed,
            "events": HOOK_EVENTS,
            "command": command,
        }))
    } else {
        let what = match (install, changed) {
            (true, true) => "installed the ctx hooks in",
            (true, false) => "the ctx hooks were already in",
            (false, true) => "removed the ctx hooks from",
            (false, false) => "there were no ctx hooks in",
        };
        eprintln!("{what} {} ({})", path.display(), HOOK_EVENTS.join(", "));
        Ok(())
    }
}

/// Whether a hook command is one `install` wrote.
fn is_ours(command: &str) -> bool {
    command.contains(" hook claude-code")
}

/// Removes ctx's command hooks from `settings.hooks` for [`HOOK_EVENTS`]
/// (dropping matcher groups and events left empty by that), then, with a
/// `command`, adds one matcher group running it per event. Whether the
/// settings changed.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings or their `hooks` are not
/// JSON objects, or an event's hooks are not a list.
fn merge_hooks(settings: &mut Value, command: Option<&str>) -> Result<bool> {
    let before = settings.clone();
    let not_object = |what: &str| {
        Error::invalid(
            "settings",
            format!("{what} is not a JSON object; fix it first"),
        )
    };
    let root = settings
        .as_object_mut()
        .ok_or_else(|| not_object("the settings file"))?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| not_object("`hooks`"))?;
    for event in HOOK_EVENTS {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| {
                Error::invalid(
                    "settings",
                    format!("`hooks.{event}` is not a list; fix it first"),
                )
            })?;
        for group in groups.iter_mut() {
            if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                list.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
            }
        }
        groups.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|l| !l.is_empty())
        });
        if let Some(cmd) = command {
            groups.push(json!({"hooks": [{"type": "command", "command": cmd}]}));
        }
        if groups.is_empty() {
            hooks.remove(event);
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    Ok(*settings != before)
}

/// `s` as one POSIX shell word.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:@+=,".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader sees the old file or the new one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("ctx-tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::unavailable(format!("cannot write {}: {e}", path.display()))
        })
}

/// The JSON a Claude Code hook receives on stdin (the fields ctx uses).
#[derive(Debug, Deserialize)]
struct HookInput {
    session_id: String,
    transcript_path: PathBuf,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    hook_event_name: Option<String>,
}

/// What the hook remembers of one session.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
struct HookState {
    /// The session's ref.
    #[serde(rename = "ref")]
    ref_name: String,
    /// The session id, as the hook got it.
    session_id: String,
    /// The transcript file.
    transcript_path: PathBuf,
    /// Bytes of the transcript checkpointed so far.
    offset: u64,
    /// Where the hook left the ref.
    tip: Option<CommitId>,
    /// The event of the newest hook run (its checkpoint trigger).
    event: String,
    /// Lines are waiting: the last attempt failed.
    pending: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs `ctx hook claude-code`: always `Ok` (exit 0), reporting failures
/// as warnings.
///
/// # Errors
/// None: a hook must not fail Claude Code.
pub async fn run_hook(cmd: HookCommand) -> Result<()> {
    let HookCommand::ClaudeCode(a) = cmd;
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("ctx hook: warning: cannot read the hook's input: {e}");
        return Ok(());
    }
    let state_dir = state_dir(&a.remote.data);
    let current = match hook_once(&a, &state_dir, &input).await {
        Ok(path) => Some(path),
        Err((path, e)) => {
            eprintln!(
                "ctx hook: warning: {}{}",
                e.message,
                if path.is_some() {
                    " (the lines are kept; the next hook retries them)"
                } else {
                    ""
                }
            );
            path
        }
    };
    retry_pending(&a, &state_dir, current.as_deref()).await;
    Ok(())
}

/// Where the hook keeps its per-session state.
fn state_dir(data: &Path) -> PathBuf {
    data.join("hooks").join("claude-code")
}

/// The state file of a session.
fn state_path(dir: &Path, project_key: &str, session: &str) -> PathBuf {
    dir.join(project_key).join(format!("{session}.json"))
}

/// The hook's work for its own session; the state file it used (if it got
/// that far) either way.
async fn hook_once(
    a: &HookArgs,
    dir: &Path,
    input: &str,
) -> std::result::Result<PathBuf, (Option<PathBuf>, Error)> {
    let hook: HookInput = serde_json::from_str(input).map_err(|e| {
        (
            None,
            Error::invalid("stdin", format!("the hook's input is not its JSON: {e}")),
        )
    })?;
    if hook.session_id.is_empty()
        || hook.session_id.contains(['/', '\\'])
        || hook.session_id.starts_with('.')
    {
        return Err((
            None,
            Error::invalid(
                "session_id",
                format!("session_id {:?} cannot name a file", hook.session_id),
            ),
        ));
    }
    let project_key = hook
        .transcript_path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| project_key(hook.cwd.as_deref().unwrap_or(Path::new("."))));
    let path = state_path(dir, &project_key, &hook.session_id);
    let mut state = match read_state(&path) {
        Some(s) if s.transcript_path == hook.transcript_path => s,
        _ => HookState {
            ref_name: session_ref(&project_key, &hook.session_id),
            session_id: hook.session_id.clone(),
            transcript_path: hook.transcript_path.clone(),
            ..HookState::default()
        },
    };
    state.event = hook.hook_event_name.unwrap_or_else(|| "Stop".to_owned());
    let result = sync(a, &mut state).await;
    if let Err(e) = &result {
        state.pending = true;
        state.error = Some(e.message.clone());
    }
    if let Err(e) = write_state(&path, &state) {
        return Err((None, e));
    }
    result.map(|_| path.clone()).map_err(|e| (Some(path), e))
}

/// Retries other sessions whose lines are pending, quietly but for a
/// warning per failure.
async fn retry_pending(a: &HookArgs, dir: &Path, current: Option<&Path>) {
    let Ok(projects) = std::fs::read_dir(dir) else {
        return;
    };
    let mut tried = 0;
    for project in projects.flatten() {
        let Ok(files) = std::fs::read_dir(project.path()) else {
            continue;
        };
        for file in files.flatten() {
            let path = file.path();
            if tried >= RETRY_OTHERS {
                return;
            }
            if Some(path.as_path()) == current {
                continue;
            }
            let Some(mut state) = read_state(&path).filter(|s| s.pending) else {
                continue;
            };
            tried += 1;
            match sync(a, &mut state).await {
                Ok(_) => {}
                Err(e) => {
                    eprintln!(
                        "ctx hook: warning: session {} still pending: {}",
                        state.session_id, e.message
                    );
                    state.error = Some(e.message);
                }
            }
            if let Err(e) = write_state(&path, &state) {
                eprintln!("ctx hook: warning: {}", e.message);
            }
        }
    }
}

fn read_state(path: &Path) -> Option<HookState> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn write_state(path: &Path, state: &HookState) -> Result<()> {
    let dir = path.parent().expect("state files have a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| Error::internal(e.to_string()))?;
    write_atomically(path, &bytes)
}

/// The checkpoint trigger of a hook event.
fn trigger_of(event: &str) -> Trigger {
    match event {
        "PreCompact" => Trigger::Compaction,
        "SessionEnd" => Trigger::SessionEnd,
        _ => Trigger::TurnBoundary,
    }
}

/// Checkpoints the complete lines of `state`'s transcript past its offset
/// onto its ref, moving the offset and tip on success; the commits made.
async fn sync(a: &HookArgs, state: &mut HookState) -> Result<usize> {
    let (tail, complete) = read_tail(state)?;
    if complete == 0 {
        state.pending = false;
        state.error = None;
        return Ok(0);
    }
    let end = state.offset + complete as u64;
    let new = &tail[..complete];
    let name: RefName = state.ref_name.parse()?;
    let client = a
        .remote
        .client()?
        .with_timeout(HOOK_TIMEOUT)
        .map_err(|e| Error::internal(format!("HTTP client: {e}")))?;
    let principal: Principal = wire_value("principal", &a.principal)?;
    let session: Option<SessionId> = state.session_id.parse().ok();
    let trigger = trigger_of(&state.event);
    // A writer that moved the ref since may hold some of these lines.
    for _ in 0..4 {
        let tip = match client.get_ref(&name).await {
            Ok(r) => Some(r.target),
            Err(e) if e.kind == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let lines = match &tip {
            Some(t) if state.tip.as_ref() != Some(t) => {
                drop_known(new, &known_uuids(&client, t, state.tip.as_ref()).await?)
            }
            _ => new.to_vec(),
        };
        if lines.is_empty() {
            state.tip = tip;
            state.offset = end;
            state.pending = false;
            state.error = None;
            return Ok(0);
        }
        match append(
            &client,
            &lines,
            tip,
            &name,
            &principal,
            &a.template,
            session.as_ref(),
            trigger,
        )
        .await
        {
            Ok((new_tip, made)) => {
                state.tip = Some(new_tip);
                state.offset = end;
                state.pending = false;
                state.error = None;
                return Ok(made);
            }
            Err(e) if e.kind == ErrorKind::Conflict => {}
            Err(e) => return Err(e),
        }
    }
    Err(Error::conflict(
        format!("ref {name} kept moving under the hook"),
        None,
    ))
}

/// The `uuid` of every entry the chain at `tip` added after `since` (the
/// tip this hook left: our new lines come after it, so only what others
/// added since can overlap them), or from the root when `since` is unknown
/// or no longer an ancestor (the ref was moved elsewhere).
async fn known_uuids(
    client: &Client,
    tip: &CommitId,
    since: Option<&CommitId>,
) -> Result<HashSet<String>> {
    let from_root = transcript_request()?;
    let req = match since {
        Some(s) => crate::commands::materialize::request(Some(&s.to_string()), Some(CLAUDE_CODE))?,
        None => from_root.clone(),
    };
    let bytes = match client.materialize_and_download(tip, &req).await {
        Ok((_, b)) => b,
        Err(e) if since.is_some() && e.kind == ErrorKind::Invalid => {
            client.materialize_and_download(tip, &from_root).await?.1
        }
        Err(e) => return Err(e),
    };
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter_map(|v| v.get("uuid").and_then(Value::as_str).map(str::to_owned))
        .collect())
}

/// The transcript past `state`'s offset and how many of its bytes end in
/// a newline (complete lines); only those bytes are read. A file shorter
/// than the offset was rewritten: the hook starts it over (the uuids
/// already in the chain keep it from holding anything twice).
fn read_tail(state: &mut HookState) -> Result<(Vec<u8>, usize)> {
    use std::io::{Seek, SeekFrom};
    let path = &state.transcript_path;
    let unreadable = |e: std::io::Error| {
        Error::unavailable(format!(
            "cannot read the transcript {}: {e}",
            path.display()
        ))
    };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let len = file.metadata().map_err(unreadable)?.len();
    if state.offset > len {
        state.offset = 0;
        state.tip = None;
    }
    file.seek(SeekFrom::Start(state.offset))
        .map_err(unreadable)?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).map_err(unreadable)?;
    let complete = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    Ok((tail, complete))
}

/// The format of Claude Code transcripts.
const CLAUDE_CODE: &str = "claude-code-v1";

/// The whole transcript: `stop: root`, as `claude-code-v1`.
fn transcript_request() -> Result<MaterializeRequest> {
    crate::commands::materialize::request(Some("root"), Some(CLAUDE_CODE))
}

/// The lines of `lines` whose `uuid` is not in `known`.
fn drop_known(lines: &[u8], known: &HashSet<String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len());
    for line in lines.split_inclusive(|&b| b == b'\n') {
        let uuid = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.get("uuid").and_then(Value::as_str).map(str::to_owned));
        if uuid.is_none_or(|u| !known.contains(&u)) {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Checkpoints `lines` after `tip`, a commit per turn and per compaction
/// (as `ctx import` cuts them), the last one moving `name` from `tip`.
/// Each commit's time is its newest entry's, so a retry whose answer was
/// lost finds the same commits. The new tip and the commits made.
#[allow(clippy::too_many_arguments)]
async fn append(
    client: &Client,
    lines: &[u8],
    tip: Option<CommitId>,
    name: &RefName,
    principal: &Principal,
    template: &str,
    session: Option<&SessionId>,
    trigger: Trigger,
) -> Result<(CommitId, usize)> {
    let segs = segments(lines)?;
    let mut parent = tip;
    for (i, seg) in segs.iter().enumerate() {
        let text = std::str::from_utf8(&lines[seg.range.clone()])
            .map_err(|e| Error::invalid("transcript", format!("not UTF-8: {e}")))?;
        let req = CheckpointRequest {
            session_id: session.cloned(),
            ref_move: (i + 1 == segs.len()).then(|| RefMove {
                name: name.clone(),
                expected: tip,
            }),
            ..segment_request(seg, text, parent, trigger, principal, template)
        };
        parent = Some(client.checkpoint(&req).await?.commit.id);
    }
    Ok((parent.expect("segments cover non-empty lines"), segs.len()))
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

/// A random (version 4) UUID.
fn uuid_v4(ids: &dyn IdSource) -> String {
    let mut b = [0u8; 16];
    ids.fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// What `ctx resume --json` prints.
#[derive(Debug, Serialize)]
struct Resumed {
    /// The new Claude Code session.
    session_id: String,
    /// Its transcript file.
    path: PathBuf,
    /// The commit it continues from.
    from: CommitId,
    /// The snapshot commit of the new session (the parent is `from`).
    commit: CommitId,
    /// The new session's ref.
    #[serde(rename = "ref")]
    ref_name: String,
    /// Entries written.
    entries: usize,
}

/// Runs `ctx resume`.
///
/// # Errors
/// `Invalid` when the commit's context is not a Claude Code transcript;
/// `Unavailable` when the file cannot be written; the server's errors.
pub async fn run_resume(a: ResumeArgs) -> Result<()> {
    let c = a.conn.client()?;
    let from = rev(&c, &a.rev).await?;
    let (_, bytes) = c
        .materialize_and_download(&from, &transcript_request()?)
        .await?;
    let ids = OsRandom;
    let session = uuid_v4(&ids);
    let now = SystemClock
        .now()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let (text, entries) = fork_transcript(&bytes, &session, &now, &from, &ids)?;
    let project_key = project_key(&a.project);
    let claude_dir = match a.claude_dir {
        Some(d) => d,
        None => std::env::home_dir()
            .ok_or_else(|| {
                Error::invalid(
                    "claude_dir",
                    "no home directory: pass --claude-dir or set CLAUDE_CONFIG_DIR",
                )
            })?
            .join(".claude"),
    };
    let dir = claude_dir.join("projects").join(&project_key);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("{session}.jsonl"));
    let name = session_ref(&project_key, &session);
    let principal: Principal = wire_value("principal", &a.principal)?;
    let format: FormatId = "claude-code-v1"
        .parse()
        .expect("claude-code-v1 is a format id");
    let req = CheckpointRequest {
        parent: Some(from),
        commit_type: CommitType::Snapshot,
        checkpoint: Trigger::Explicit,
        session_id: session.parse().ok(),
        ref_move: Some(RefMove {
            name: name.parse()?,
            expected: None,
        }),
        ..CheckpointRequest::new(principal, &a.template, format, text.clone())
    };
    let commit = c.checkpoint(&req).await?.commit.id;
    write_atomically(&path, text.as_bytes())?;
    // The hook continues the new session from here: its lines so far are
    // the snapshot.
    let state = HookState {
        ref_name: name.clone(),
        session_id: session.clone(),
        transcript_path: path.clone(),
        offset: text.len() as u64,
        tip: Some(commit),
        event: "Stop".to_owned(),
        pending: false,
        error: None,
    };
    write_state(
        &state_path(&state_dir(&a.conn.remote.data), &project_key, &session),
        &state,
    )?;
    if a.conn.json {
        print_json(&Resumed {
            session_id: session,
            path,
            from,
            commit,
            ref_name: name,
            entries,
        })
    } else {
        eprintln!(
            "wrote {entries} entries of {from} to {}; continue with: claude --resume {session}",
            path.display()
        );
        println!("{session}");
        Ok(())
    }
}

/// The transcript `bytes` as a new session `session`: fresh entry uuids
/// (parent links remapped, progress entries dropped and skipped over),
/// `sessionId` replaced, `forkedFrom` naming each original, the last
/// entry's time `now`, and a `custom-title` entry naming the commit. The
/// text and the entries written.
fn fork_transcript(
    bytes: &[u8],
    session: &str,
    now: &str,
    from: &CommitId,
    ids: &dyn IdSource,
) -> Result<(String, usize)> {
    let mut entries: Vec<Map<String, Value>> = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => entries.push(m),
            _ => {
                return Err(Error::invalid(
                    "rev",
                    format!(
                        "{from} is not a Claude Code transcript: line {} is not a JSON object",
                        i + 1
                    ),
                ));
            }
        }
    }
    let uuid_of =
        |e: &Map<String, Value>, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut mapping: HashMap<String, String> = HashMap::new();
    let mut by_uuid: HashMap<String, &Map<String, Value>> = HashMap::new();
    for e in &entries {
        if let Some(u) = uuid_of(e, "uuid") {
            mapping.insert(u.clone(), uuid_v4(ids));
            by_uuid.insert(u, e);
        }
    }
    let is_progress =
        |e: &Map<String, Value>| e.get("type").and_then(Value::as_str) == Some("progress");
    let writable: Vec<&Map<String, Value>> = entries.iter().filter(|e| !is_progress(e)).collect();
    let mut out = String::new();
    for (i, original) in writable.iter().enumerate() {
        let mut e = (*original).clone();
        if let Some(old) = uuid_of(original, "uuid") {
            // The nearest ancestor that is written.
            let mut parent = uuid_of(original, "parentUuid");
            while let Some(p) = parent.clone() {
                match by_uuid.get(&p) {
                    Some(pe) if is_progress(pe) => parent = uuid_of(pe, "parentUuid"),
                    Some(_) => break,
                    None => {
                        parent = None;
                        break;
                    }
                }
            }
            e.insert("uuid".into(), Value::String(mapping[&old].clone()));
            if original.contains_key("parentUuid") {
                e.insert(
                    "parentUuid".into(),
                    parent.map_or(Value::Null, |p| Value::String(mapping[&p].clone())),
                );
            }
            if let Some(lp) = uuid_of(original, "logicalParentUuid") {
                e.insert(
                    "logicalParentUuid".into(),
                    mapping
                        .get(&lp)
                        .map_or(Value::Null, |m| Value::String(m.clone())),
                );
            }
            e.insert(
                "forkedFrom".into(),
                json!({"sessionId": original.get("sessionId"), "messageUuid": old}),
            );
        }
        // A summary names the leaf it summarizes up to.
        if let Some(leaf) = uuid_of(original, "leafUuid").and_then(|l| mapping.get(&l)) {
            e.insert("leafUuid".into(), Value::String(leaf.clone()));
        }
        if e.contains_key("sessionId") {
            e.insert("sessionId".into(), Value::String(session.to_owned()));
        }
        if i + 1 == writable.len() && e.contains_key("timestamp") {
            e.insert("timestamp".into(), Value::String(now.to_owned()));
        }
        out.push_str(&Value::Object(e).to_string());
        out.push('\n');
    }
    let title = json!({
        "type": "custom-title",
        "customTitle": format!("ctx resume of {from}"),
        "sessionId": session,
        "uuid": uuid_v4(ids),
        "timestamp": now,
    });
    out.push_str(&title.to_string());
    out.push('\n');
    Ok((out, writable.len() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_core::clock::SeededIds;

    #[test]
    fn merging_keeps_other_hooks_and_is_idempotent() {
        let mut s = json!({
            "model": "opus",
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]
            }
        });
        let cmd = "/bin/ctx hook claude-code --server http://127.0.0.1:7878 --data /d";
        assert!(merge_hooks(&mut s, Some(cmd)).unwrap());
        let once = s.clone();
        assert!(
            !merge_hooks(&mut s, Some(cmd)).unwrap(),
            "a second install changes nothing"
        );
        assert_eq!(s, once);
        assert_eq!(s["model"], "opus");
        assert_eq!(s["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(s["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["command"], cmd);
        for e in ["PreCompact", "SessionEnd"] {
            assert_eq!(s["hooks"][e][0]["hooks"][0]["command"], cmd, "{e}");
        }
        // A reinstall with another server replaces the command, not adds one.
        let other = "/bin/ctx hook claude-code --server http://127.0.0.1:9 --data /d";
        assert!(merge_hooks(&mut s, Some(other)).unwrap());
        assert_eq!(s["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["command"], other);
        assert!(merge_hooks(&mut s, None).unwrap());
        assert_eq!(
            s,
            json!({
                "model": "opus",
                "hooks": {
                    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]
                }
            }),
            "uninstall leaves exactly the user's hooks"
        );
        let mut empty = json!({});
        merge_hooks(&mut empty, Some(cmd)).unwrap();
        merge_hooks(&mut empty, None).unwrap();
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn settings_that_are_not_objects_are_refused() {
        for bad in [
            json!([]),
            json!({"hooks": 3}),
            json!({"hooks": {"Stop": {}}}),
        ] {
            let mut s = bad.clone();
            let e = merge_hooks(&mut s, Some("ctx hook claude-code")).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("settings"), "{bad}");
        }
    }

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

    #[test]
    fn forking_remaps_uuids_and_keeps_the_chain() {
        let t = concat!(
            r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"old","timestamp":"t1","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"progress","uuid":"p1","parentUuid":"u1","sessionId":"old"}"#,
            "\n",
            r#"{"type":"assistant","uuid":"a1","parentUuid":"p1","sessionId":"old","timestamp":"t2","message":{"role":"assistant","content":"yo"}}"#,
            "\n",
            r#"{"type":"summary","summary":"s","leafUuid":"a1"}"#,
            "\n"
        );
        let from: CommitId = format!("ctx-{}", "0".repeat(32)).parse().unwrap();
        let (text, n) =
            fork_transcript(t.as_bytes(), "new", "t9", &from, &SeededIds::new(1)).unwrap();
        assert_eq!(n, 4, "progress dropped, a title added");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["sessionId"], "new");
        assert_ne!(lines[0]["uuid"], "u1");
        assert_eq!(
            lines[0]["forkedFrom"],
            json!({"sessionId": "old", "messageUuid": "u1"})
        );
        assert_eq!(lines[1]["type"], "assistant");
        assert_eq!(
            lines[1]["parentUuid"], lines[0]["uuid"],
            "skips the progress entry"
        );
        assert_eq!(lines[1]["timestamp"], "t2");
        assert_eq!(lines[2]["type"], "summary");
        assert!(lines[2].get("sessionId").is_none(), "no field is invented");
        assert_eq!(
            lines[2]["leafUuid"], lines[1]["uuid"],
            "a summary points at its leaf in the new file"
        );
        assert_eq!(lines[3]["type"], "custom-title");
        assert_eq!(lines[3]["timestamp"], "t9");
        let e = fork_transcript(b"not json\n", "new", "t9", &from, &SeededIds::new(1)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("rev"));
    }

    #[test]
    fn known_lines_are_dropped_by_uuid() {
        let known: HashSet<String> = ["u1".to_owned()].into();
        let lines = b"{\"uuid\":\"u1\"}\n{\"uuid\":\"u2\"}\n{\"type\":\"summary\"}\n";
        assert_eq!(
            drop_known(lines, &known),
            b"{\"uuid\":\"u2\"}\n{\"type\":\"summary\"}\n"
        );
    }
}
