//! `ctx hook claude-code|codex|gemini`: a session log's complete new
//! lines checkpointed onto the session's ref, one commit per turn, with
//! per-session progress kept under the data directory and pending lines
//! retried (any runtime's, by the next hook of any).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use ctx_core::wire::{CheckpointRequest, MaterializeRequest};
use ctx_core::wire::{RefMove, Trigger};
use ctx_core::{CommitId, Error, ErrorKind, Principal, RefName, Result, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::Client;
use crate::commands::wire_value;
use crate::import::segment_request;

use super::install::write_atomically;
use super::{
    ABANDONED_AFTER, HOOK_TIMEOUT, HookArgs, HookCommand, RETRY_OTHERS, RUNTIMES, Runtime, Spec,
    Writes, project_key, session_ref,
};

/// The JSON a hook receives on stdin (the fields ctx uses; Claude Code,
/// Codex and Gemini CLI all send them).
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
pub(super) struct HookState {
    /// The session's ref.
    #[serde(rename = "ref")]
    pub(super) ref_name: String,
    /// The session id, as the hook got it.
    pub(super) session_id: String,
    /// The transcript file.
    pub(super) transcript_path: PathBuf,
    /// Bytes of the transcript checkpointed so far.
    pub(super) offset: u64,
    /// Where the hook left the ref.
    pub(super) tip: Option<CommitId>,
    /// The event of the newest hook run (its checkpoint trigger).
    pub(super) event: String,
    /// Lines are waiting: the last attempt failed.
    pub(super) pending: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
    /// The server refused the lines (they would fail the same way again):
    /// other sessions' hooks leave them to this session's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) refused: bool,
    /// The session's turn ends so far (for `--every`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) stops: u64,
    /// Who the session's commits are written as (unset in the state of a
    /// hook before codex and gemini: the writer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) principal: Option<String>,
    /// The template recorded on them (unset: the writer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) template: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl HookState {
    /// Nothing is waiting: the lines are stored.
    fn settled(&mut self) {
        self.pending = false;
        self.error = None;
        self.refused = false;
    }

    /// The last attempt failed with `e`: the lines wait.
    fn failed(&mut self, e: &Error) {
        self.pending = true;
        self.error = Some(e.message.clone());
        self.refused = matches!(e.kind, ErrorKind::Invalid | ErrorKind::TooLarge);
    }
}

/// Runs `ctx hook claude-code|codex|gemini`: always `Ok` (exit 0), with
/// nothing on stdout (Gemini CLI reads it as the hook's JSON answer),
/// reporting failures as warnings on stderr (which the runtimes do not
/// show) and recording the run's warnings in [`LAST_WARNING`] for `ctx
/// hooks doctor`; a run without one removes that record.
///
/// # Errors
/// None: a hook must not fail its runtime.
pub async fn run_hook(cmd: HookCommand) -> Result<()> {
    let (runtime, a) = cmd.parts();
    let state_dir = state_dir(&a.remote.data, runtime.spec());
    let mut warnings = Vec::new();
    hook_run(runtime, &a, &state_dir, &mut warnings).await;
    for w in &warnings {
        eprintln!("ctx hook: warning: {w}");
    }
    record_warnings(&a.remote.data, &state_dir, &warnings);
    Ok(())
}

/// The hook's run: its warnings pushed onto `warnings`.
async fn hook_run(runtime: Runtime, a: &HookArgs, state_dir: &Path, warnings: &mut Vec<String>) {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        warnings.push(format!("cannot read the hook's input: {e}"));
        return;
    }
    let w = match Writer::of(runtime, a) {
        Ok(w) => w,
        Err(e) => {
            warnings.push(e.message);
            return;
        }
    };
    let current = match hook_once(&w, state_dir, &input, warnings).await {
        Ok(path) => Some(path),
        Err((path, e)) => {
            warnings.push(format!(
                "{}{}",
                e.message,
                if path.is_some() {
                    " (the lines are kept; the next hook retries them)"
                } else {
                    ""
                }
            ));
            path
        }
    };
    retry_pending(&w, &a.remote.data, current.as_deref(), warnings).await;
}

/// The file, under the hooks' state directory, holding the warnings of the
/// newest hook run that had any (`ctx hooks doctor` shows it).
pub(super) const LAST_WARNING: &str = "last-warning.json";

/// What [`LAST_WARNING`] holds.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct LastWarning {
    /// When the run warned.
    pub(super) at: chrono::DateTime<chrono::Utc>,
    /// Its warnings, in order.
    pub(super) warnings: Vec<String>,
}

/// Records a run's warnings for `ctx hooks doctor` (an existing data
/// directory only: a hook never makes one), or removes the record of an
/// earlier run when this one had none.
fn record_warnings(data: &Path, dir: &Path, warnings: &[String]) {
    use ctx_core::Clock as _;
    let path = dir.join(LAST_WARNING);
    if warnings.is_empty() {
        let _ = std::fs::remove_file(&path);
        return;
    }
    if !data.is_dir() {
        return;
    }
    let record = LastWarning {
        at: ctx_core::SystemClock.now(),
        warnings: warnings.to_vec(),
    };
    let written = std::fs::create_dir_all(dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))
        .and_then(|()| {
            serde_json::to_vec_pretty(&record).map_err(|e| Error::internal(e.to_string()))
        })
        .and_then(|bytes| write_atomically(&path, &bytes));
    if let Err(e) = written {
        eprintln!("ctx hook: warning: {}", e.message);
    }
}

/// Who a hook's commits are written as, and the server they go to.
pub(crate) struct Writer {
    client: Client,
    /// Who writes, for a session whose state does not say.
    writes: Writes,
    /// The runtime of the hook run (`ctx current`'s: Claude Code).
    runtime: Runtime,
    /// Checkpoint at every this many turn ends (0: never at one).
    every: u64,
}

impl Writer {
    /// The writer of a hook run.
    fn of(runtime: Runtime, a: &HookArgs) -> Result<Self> {
        let client = if a.server_from_data {
            let server = crate::datadir::read_server(&a.remote.data).ok_or_else(|| {
                let file = crate::datadir::server_file(&a.remote.data);
                Error::unavailable(format!(
                    "there is no server address in {} (this hook reads it there, --server-from-data): start `ctx serve --data {}`",
                    file.display(),
                    a.remote.data.display()
                ))
            })?;
            crate::Remote {
                server,
                token: a.remote.token.clone(),
                data: a.remote.data.clone(),
            }
            .client()?
        } else {
            a.remote.client()?
        };
        let mut w = Self::new(client, &a.writes, runtime)?;
        w.every = if a.significant_only { 0 } else { a.every };
        Ok(w)
    }

    /// Whether this run of `state`'s hook checkpoints: every significant
    /// event does; a turn end (`Stop`, Gemini's `AfterAgent`) only every
    /// [`Writer::every`]th.
    fn due(&self, state: &mut HookState) -> bool {
        if state.event != self.runtime.spec().turn_end() {
            return true;
        }
        state.stops += 1;
        self.every != 0 && state.stops.is_multiple_of(self.every)
    }

    /// Commits through `client` (each call bounded by the hook's timeout),
    /// as `writes` says for `runtime`.
    ///
    /// # Errors
    /// `Invalid` (`principal`).
    pub(crate) fn new(client: Client, writes: &Writes, runtime: Runtime) -> Result<Self> {
        let _: Principal = wire_value("principal", writes.principal(runtime))?;
        Ok(Writer {
            client: client
                .with_timeout(HOOK_TIMEOUT)
                .map_err(|e| Error::internal(format!("HTTP client: {e}")))?,
            writes: writes.clone(),
            runtime,
            every: 1,
        })
    }

    /// Who `state`'s commits (a session of `runtime`) are written as, and
    /// their template: what its state recorded, else this writer's.
    ///
    /// # Errors
    /// `Invalid` (`principal`).
    fn identity(&self, runtime: Runtime, state: &HookState) -> Result<(Principal, String)> {
        let principal = match &state.principal {
            Some(p) => p.as_str(),
            None => self.writes.principal(runtime),
        };
        let template = match &state.template {
            Some(t) => t.clone(),
            None => self.writes.template(runtime).to_owned(),
        };
        Ok((wire_value("principal", principal)?, template))
    }
}

/// Where the hooks of `spec`'s runtime keep their per-session state.
pub(super) fn state_dir(data: &Path, spec: &Spec) -> PathBuf {
    data.join("hooks").join(spec.name)
}

/// Every recorded session's state file under `data`, with its runtime:
/// each runtime's in [`RUNTIMES`] order.
fn state_files(data: &Path) -> Vec<(Runtime, PathBuf)> {
    let mut out = Vec::new();
    for runtime in RUNTIMES {
        let dir = state_dir(data, runtime.spec());
        for project in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(project.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push((runtime, file.path()));
            }
        }
    }
    out
}

/// The state file of a session.
pub(super) fn state_path(dir: &Path, project_key: &str, session: &str) -> PathBuf {
    dir.join(project_key).join(format!("{session}.json"))
}

/// The hook's work for its own session; the state file it used (if it got
/// that far) either way.
async fn hook_once(
    w: &Writer,
    dir: &Path,
    input: &str,
    warnings: &mut Vec<String>,
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
    let spec = w.runtime.spec();
    let from_cwd = || project_key(hook.cwd.as_deref().unwrap_or(Path::new(".")));
    let project_key = if spec.key_from_log_dir {
        hook.transcript_path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(from_cwd)
    } else {
        from_cwd()
    };
    let path = state_path(dir, &project_key, &hook.session_id);
    let mut state = match read_state(&path) {
        Some(s) if s.transcript_path == hook.transcript_path => s,
        _ => HookState {
            ref_name: session_ref(spec.ref_root, &project_key, &hook.session_id),
            session_id: hook.session_id.clone(),
            transcript_path: hook.transcript_path.clone(),
            ..HookState::default()
        },
    };
    state.principal = Some(w.writes.principal(w.runtime).to_owned());
    state.template = Some(w.writes.template(w.runtime).to_owned());
    state.event = hook
        .hook_event_name
        .unwrap_or_else(|| spec.turn_end().to_owned());
    if !w.due(&mut state) {
        // Not this turn: the lines wait for a later hook (or `ctx current`).
        return match write_state(&path, &state) {
            Ok(()) => Ok(path),
            Err(e) => Err((None, e)),
        };
    }
    let result = sync(w, w.runtime, &mut state).await;
    if let Err(e) = &result {
        state.failed(e);
    }
    if let Err(e) = write_state(&path, &state) {
        return Err((None, e));
    }
    if spec.ends(&state.event) {
        warnings.extend(end_session(w, &state.session_id).await);
    }
    result.map(|_| path.clone()).map_err(|e| (Some(path), e))
}

/// The session ended: its context-folding branches are force-returned
/// (`POST /v1/sessions/{id}/end`, FR-010), as `ctx session end` would.
/// A session with no branch, or a server without context folding, has
/// nothing to end; any other failure is the warning returned.
async fn end_session(w: &Writer, session: &str) -> Option<String> {
    let Ok(id) = session.parse::<SessionId>() else {
        return None;
    };
    match w.client.session_end(&id).await {
        Ok(ended) if !ended.failed.is_empty() => Some(format!(
            "session {session}: {} branch(es) could not return and ended as failed",
            ended.failed.len()
        )),
        Ok(_) => None,
        Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::Unavailable) => None,
        Err(e) => Some(format!(
            "session {session}: its branches were not returned: {}",
            e.message
        )),
    }
}

/// Retries other sessions whose lines are pending, and stores the tails
/// other sessions' runtimes left when they died ([`abandoned`]), of every
/// runtime's hooks under `data`, quietly but for a warning per failure.
async fn retry_pending(
    w: &Writer,
    data: &Path,
    current: Option<&Path>,
    warnings: &mut Vec<String>,
) {
    let mut tried = 0;
    for (runtime, path) in state_files(data) {
        if tried >= RETRY_OTHERS {
            return;
        }
        if Some(path.as_path()) == current {
            continue;
        }
        // Lines the server refused would be refused again: they are
        // left to their own session's hooks, not retried (and warned
        // of) by every other session's.
        let Some(mut state) = read_state(&path) else {
            continue;
        };
        if !state.pending && abandoned(&state) {
            // Stored as a flush stores it: an explicit checkpoint (the
            // runtime may yet come back; its next hook goes on from here).
            state.event = FLUSH_EVENT.to_owned();
        } else if !state.pending || state.refused {
            continue;
        }
        tried += 1;
        match sync(w, runtime, &mut state).await {
            Ok(_) => {}
            Err(e) => {
                warnings.push(format!(
                    "session {} still pending: {}",
                    state.session_id, e.message
                ));
                state.failed(&e);
            }
        }
        if let Err(e) = write_state(&path, &state) {
            warnings.push(e.message);
        }
    }
}

/// Whether `state`'s transcript holds lines its hooks never stored and has
/// been quiet for [`ABANDONED_AFTER`]: its runtime died mid-turn.
fn abandoned(state: &HookState) -> bool {
    let Ok(meta) = std::fs::metadata(&state.transcript_path) else {
        return false;
    };
    use ctx_core::Clock as _;
    let quiet = |at: std::time::SystemTime| {
        (ctx_core::SystemClock.now() - chrono::DateTime::<chrono::Utc>::from(at))
            .to_std()
            .is_ok_and(|d| d >= ABANDONED_AFTER)
    };
    meta.len() > state.offset && meta.modified().is_ok_and(quiet)
}

/// The event a flush records: its commits are `explicit` checkpoints.
const FLUSH_EVENT: &str = "CurrentContext";

/// At most this many sessions are flushed by one call without a session.
const FLUSH_SESSIONS: usize = 16;

/// What a flush did for one session.
#[derive(Debug, Clone, Serialize)]
pub struct Flushed {
    /// The session id.
    pub session_id: String,
    /// Its runtime (`claude-code`, `codex`, `gemini`).
    pub runtime: &'static str,
    /// Its ref.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// The commits the flush made (0: nothing was pending).
    pub commits: usize,
    /// Where the session's ref is now, as far as the hook knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tip: Option<CommitId>,
    /// Why its pending lines could not be stored (they stay pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Stores what the hooks under `data` (of every runtime) have not stored
/// yet: the complete lines written to a recorded session's log since its
/// last hook (the runtimes write a turn's lines before its tools run, so a
/// tool call that asks for the current context finds them here). With `session`,
/// that session only; without, every recorded session whose transcript
/// grew or whose lines wait, the most recently written first, at most
/// [`FLUSH_SESSIONS`].
///
/// # Errors
/// None of a session's own: a session that cannot be stored reports its
/// error in its [`Flushed`] and stays pending.
pub async fn flush(w: &Writer, data: &Path, session: Option<&str>) -> Vec<Flushed> {
    let mut found = Vec::new();
    for (runtime, path) in state_files(data) {
        let Some(state) = read_state(&path) else {
            continue;
        };
        if session.is_some_and(|s| s != state.session_id) {
            continue;
        }
        let written = std::fs::metadata(&state.transcript_path).ok();
        let grown = written.as_ref().is_some_and(|m| m.len() != state.offset);
        if session.is_none() && !grown && !state.pending {
            continue;
        }
        let at = written.and_then(|m| m.modified().ok());
        found.push((at, runtime, path, state));
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.truncate(FLUSH_SESSIONS);
    let mut out = Vec::with_capacity(found.len());
    for (_, runtime, path, mut state) in found {
        if !runtime.spec().ends(&state.event) {
            state.event = FLUSH_EVENT.to_owned();
        }
        let made = sync(w, runtime, &mut state).await;
        if let Err(e) = &made {
            state.failed(e);
        }
        let written = write_state(&path, &state);
        out.push(Flushed {
            session_id: state.session_id.clone(),
            runtime: runtime.spec().name,
            ref_name: state.ref_name.clone(),
            commits: made.as_ref().copied().unwrap_or(0),
            tip: state.tip,
            error: made.err().or(written.err()).map(|e| e.message),
        });
    }
    out
}

fn read_state(path: &Path) -> Option<HookState> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

pub(super) fn write_state(path: &Path, state: &HookState) -> Result<()> {
    let dir = path.parent().expect("state files have a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| Error::internal(e.to_string()))?;
    write_atomically(path, &bytes)
}

/// The checkpoint trigger of a hook event of `spec`'s runtime.
fn trigger_of(spec: &Spec, event: &str) -> Trigger {
    if event == FLUSH_EVENT {
        Trigger::Explicit
    } else {
        spec.trigger(event)
    }
}

/// Checkpoints the complete lines of `state`'s transcript past its offset
/// (at `SessionEnd`, every byte) onto its ref, moving the offset and tip
/// on success; the commits made. A line the format cannot read is stored
/// as written (the server warns of it), so it never holds back the lines
/// after it.
async fn sync(w: &Writer, runtime: Runtime, state: &mut HookState) -> Result<usize> {
    let spec = runtime.spec();
    let (mut tail, mut complete) = read_lines(spec, state)?;
    if state.offset == 0 && (spec.rewritten)(&tail) {
        return Err(Error::invalid(
            "transcript_path",
            format!(
                "{} is a {} session written as one document, rewritten whole at every change, which a hook cannot follow line by line; nothing was stored: import it once the session is over (`ctx import {} FILE`)",
                state.transcript_path.display(),
                spec.label,
                spec.name
            ),
        ));
    }
    if complete == 0 {
        state.settled();
        return Ok(0);
    }
    let name: RefName = state.ref_name.parse()?;
    let client = &w.client;
    let session: Option<SessionId> = state.session_id.parse().ok();
    let trigger = trigger_of(spec, &state.event);
    let (principal, template) = w.identity(runtime, state)?;
    // A writer that moved the ref since may hold some of these lines.
    for _ in 0..4 {
        let tip = match client.get_ref(&name).await {
            Ok(r) => Some(r.target),
            Err(e) if e.kind == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let mut stored = 0;
        let lines = match &tip {
            Some(t) if state.tip.as_ref() != Some(t) => {
                let known = added_since(client, spec, t, state.tip.as_ref()).await?;
                // Read again: the file only grows, so it now holds what any
                // other hook of this session read before it.
                (tail, complete) = read_lines(spec, state)?;
                if tail.starts_with(&known) {
                    // Another hook of this session stored the file's next
                    // bytes: the rest goes after them, entries without a
                    // `uuid` (summaries, snapshots) included, once.
                    stored = known.len();
                    tail[stored.min(complete)..complete].to_vec()
                } else {
                    // Another writer (a SessionStore) wrote entries of its
                    // own: drop the ones it shares with the transcript.
                    drop_known(&tail[..complete], &uuids(&known))
                }
            }
            _ => tail[..complete].to_vec(),
        };
        let end = state.offset + complete.max(stored) as u64;
        if lines.is_empty() {
            state.tip = tip;
            state.offset = end;
            state.settled();
            return Ok(0);
        }
        match append(
            client,
            spec,
            &lines,
            tip,
            &name,
            &principal,
            &template,
            session.as_ref(),
            trigger,
        )
        .await
        {
            Ok((new_tip, made)) => {
                state.tip = Some(new_tip);
                state.offset = end;
                state.settled();
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

/// The transcript past `state`'s offset, and how many of its bytes to
/// store: its complete lines, or at `SessionEnd` (the transcript is
/// finished) every byte, a last line without its newline included when it
/// is whole characters.
fn read_lines(spec: &Spec, state: &mut HookState) -> Result<(Vec<u8>, usize)> {
    let (tail, complete) = read_tail(state)?;
    // A last line cut inside a character (a runtime killed mid-write) is
    // left out, as before the session ended: the server refuses bytes that
    // are not UTF-8, and would refuse the complete lines sent with it.
    let complete = if spec.ends(&state.event) && std::str::from_utf8(&tail[complete..]).is_ok() {
        tail.len()
    } else {
        complete
    };
    Ok((tail, complete))
}

/// The bytes the chain at `tip` added after `since` (the tip this hook
/// left: our new lines come after it, so only what others added since can
/// overlap them), or from the root when `since` is unknown or no longer an
/// ancestor (the ref was moved elsewhere).
async fn added_since(
    client: &Client,
    spec: &Spec,
    tip: &CommitId,
    since: Option<&CommitId>,
) -> Result<Vec<u8>> {
    let from_root = log_request(spec)?;
    let req = match since {
        Some(s) => crate::commands::materialize::request(Some(&s.to_string()), Some(spec.format))?,
        None => from_root.clone(),
    };
    let bytes = match client.materialize_and_download(tip, &req).await {
        Ok((_, b)) => b,
        Err(e) if since.is_some() && e.kind == ErrorKind::Invalid => {
            client.materialize_and_download(tip, &from_root).await?.1
        }
        Err(e) => return Err(e),
    };
    Ok(bytes)
}

/// The `uuid` of every entry of a transcript's bytes.
fn uuids(bytes: &[u8]) -> HashSet<String> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter_map(|v| v.get("uuid").and_then(Value::as_str).map(str::to_owned))
        .collect()
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

/// The whole log of one of `spec`'s sessions: `stop: root`, in its
/// format.
pub(super) fn log_request(spec: &Spec) -> Result<MaterializeRequest> {
    crate::commands::materialize::request(Some("root"), Some(spec.format))
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

/// Checkpoints `lines` (of a `spec` log) after `tip`, a commit per turn
/// and per compaction (as `ctx import` cuts them), the last one moving
/// `name` from `tip`.
/// Each commit's time is its newest entry's, so a retry whose answer was
/// lost finds the same commits. The new tip and the commits made.
#[allow(clippy::too_many_arguments)]
async fn append(
    client: &Client,
    spec: &Spec,
    lines: &[u8],
    tip: Option<CommitId>,
    name: &RefName,
    principal: &Principal,
    template: &str,
    session: Option<&SessionId>,
    trigger: Trigger,
) -> Result<(CommitId, usize)> {
    let segs = (spec.cut)(lines)?;
    let format: ctx_core::format::FormatId = spec.format.parse()?;
    let mut parent = tip;
    for (i, seg) in segs.iter().enumerate() {
        // A line that is not UTF-8 is stored as written too (the format
        // keeps it, read as no entry).
        let req = CheckpointRequest {
            session_id: session.cloned(),
            ref_move: (i + 1 == segs.len()).then(|| RefMove {
                name: name.clone(),
                expected: tip,
            }),
            ..segment_request(
                seg,
                &lines[seg.range.clone()],
                format.clone(),
                parent,
                trigger,
                principal,
                template,
            )
        };
        parent = Some(client.checkpoint(&req).await?.commit.id);
    }
    Ok((parent.expect("segments cover non-empty lines"), segs.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
