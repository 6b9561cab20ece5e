//! Agents' live context: the records the metadata store keeps per agent (a
//! principal) for the rolling window, its saves and the working-context
//! cache. The operations over them are in `service::agents`.
//!
//! - [`AgentRecord`]: the settings (`window_seconds`,
//!   `persist_working_context`), the clear marker and the pointer to the
//!   cached working context; every field optional so that one value is both
//!   the stored record and a patch of it.
//! - [`SaveRecord`] and [`SaveId`]: a named snapshot of the window.
//! - the stored formats: the session file of a save ([`SessionFile`]) and
//!   the working-context snapshot ([`WorkingContextSnapshot`]); their
//!   bodies on the wire are `crate::wire::agents`' mirrors of them.
//! - the values the operations take and return: [`AgentPatch`],
//!   [`Settings`], [`LiveContext`], [`RestoreOptions`],
//!   [`RestoredContext`]; their bodies are `crate::wire::agents`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::id::{ArtifactRef, Hash, Principal, TenantId};

/// The window when an agent has not set one: one day.
pub const DEFAULT_WINDOW_SECONDS: i64 = 86_400;

/// The longest window accepted: ten years.
pub const MAX_WINDOW_SECONDS: i64 = 10 * 366 * 86_400;

/// Checks a window length.
///
/// # Errors
/// `Invalid` naming `window_seconds` when it is not positive or longer than
/// [`MAX_WINDOW_SECONDS`].
pub fn check_window_seconds(v: i64) -> Result<()> {
    if v <= 0 {
        return Err(Error::invalid(
            "window_seconds",
            format!("window_seconds is {v}; it must be a positive number of seconds"),
        ));
    }
    if v > MAX_WINDOW_SECONDS {
        return Err(Error::invalid(
            "window_seconds",
            format!("window_seconds is {v}; at most {MAX_WINDOW_SECONDS} (ten years) is allowed"),
        ));
    }
    Ok(())
}

/// Where an agent's cached working context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingContextRef {
    /// The artifact holding the snapshot JSON.
    pub artifact_ref: ArtifactRef,
    /// The snapshot's epoch.
    pub epoch_id: u64,
}

/// What the metadata store keeps per agent. As a patch
/// ([`Agents::update_agent`](crate::store::Agents::update_agent)),
/// the fields that are `Some` are set and the others left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The rolling window's length; the default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<i64>,
    /// Refresh the working-context cache at safe boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist_working_context: Option<bool>,
    /// The latest clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_clear: Option<DateTime<Utc>>,
    /// The cached working context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_context: Option<WorkingContextRef>,
    /// The newest joined windows handed out (ephemeral results in the
    /// cache area, newest last, at most [`WINDOWS_KEPT`]), so that erasing
    /// the commits they hold finds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<ArtifactRef>>,
    /// The system prompt of an assembled context (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The workspace whose documents are the agent's docs (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docs_workspace: Option<String>,
    /// The processes the caller registered as running, by id. As a patch,
    /// each entry is set, or removed when it is `None`; a stored record
    /// holds no `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<BTreeMap<String, Option<ProcessRecord>>>,
}

/// The longest system prompt accepted, in bytes (the agent record is one
/// DynamoDB item, at most 400 KB with everything else in it).
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;
/// The most processes registered per agent at once.
pub const MAX_PROCESSES: usize = 64;
/// The longest process id, in bytes.
pub const MAX_PROCESS_ID_BYTES: usize = 128;
/// The longest process description, in bytes.
pub const MAX_PROCESS_DESCRIPTION_BYTES: usize = 1024;

/// A process the caller registered as running for an agent, listed in the
/// status preamble of its assembled context until it is removed or
/// expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// What it is doing.
    pub description: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The thread it works for, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// When it stops being listed even if never removed (a process that
    /// died without saying so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was registered or last changed.
    pub updated_at: DateTime<Utc>,
}

/// Checks a process id: 1 to [`MAX_PROCESS_ID_BYTES`] of `A-Z a-z 0-9 . _
/// : -`.
///
/// # Errors
/// `Invalid` naming `process_id`.
pub fn check_process_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_PROCESS_ID_BYTES {
        return Err(Error::invalid(
            "process_id",
            format!(
                "process_id is {} bytes long; 1 to {MAX_PROCESS_ID_BYTES} are allowed",
                id.len()
            ),
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(Error::invalid(
            "process_id",
            format!(
                "process_id {id:?} contains {c:?}; only A-Z, a-z, 0-9, '.', '_', ':' and '-' are allowed"
            ),
        ));
    }
    Ok(())
}

/// Checks a system prompt's size and characters (empty clears it).
///
/// # Errors
/// `Invalid` naming `system_prompt`.
pub fn check_system_prompt(p: &str) -> Result<()> {
    if p.len() > MAX_SYSTEM_PROMPT_BYTES {
        return Err(Error::invalid(
            "system_prompt",
            format!(
                "system_prompt is {} bytes long; at most {MAX_SYSTEM_PROMPT_BYTES} are allowed",
                p.len()
            ),
        ));
    }
    if let Some(c) = p
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        return Err(Error::invalid(
            "system_prompt",
            format!("system_prompt contains the control character {c:?}"),
        ));
    }
    Ok(())
}

/// Joined windows an agent's record remembers; an older one is deleted
/// when a newer one pushes it out.
pub const WINDOWS_KEPT: usize = 8;

impl AgentRecord {
    /// `self` with the `Some` fields of `patch` applied.
    pub fn merged(mut self, patch: &AgentRecord) -> Self {
        if patch.window_seconds.is_some() {
            self.window_seconds = patch.window_seconds;
        }
        if patch.persist_working_context.is_some() {
            self.persist_working_context = patch.persist_working_context;
        }
        if patch.last_clear.is_some() {
            self.last_clear = patch.last_clear;
        }
        if patch.working_context.is_some() {
            self.working_context = patch.working_context;
        }
        if patch.windows.is_some() {
            self.windows.clone_from(&patch.windows);
        }
        if patch.system_prompt.is_some() {
            self.system_prompt.clone_from(&patch.system_prompt);
        }
        if patch.docs_workspace.is_some() {
            self.docs_workspace.clone_from(&patch.docs_workspace);
        }
        if let Some(changes) = &patch.processes {
            let procs = self.processes.get_or_insert_with(BTreeMap::new);
            for (id, p) in changes {
                match p {
                    Some(p) => {
                        procs.insert(id.clone(), Some(p.clone()));
                    }
                    None => {
                        procs.remove(id);
                    }
                }
            }
        }
        self
    }
}

/// A save's id: `sav-` + 16 hex digits of its time (so ids sort by time)
/// + 16 hex digits of a hash of what it saved.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SaveId {
    micros: i64,
    tag: u64,
}

impl SaveId {
    /// The id of the save of `agent` at `at` whose session file is
    /// `artifact`.
    pub fn derive(
        tenant: &TenantId,
        agent: &Principal,
        at: DateTime<Utc>,
        artifact: &ArtifactRef,
    ) -> Self {
        let h = Hash::of(
            format!("{tenant}\n{agent}\n{}\n{artifact}", at.timestamp_micros()).as_bytes(),
        );
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&h.as_bytes()[..8]);
        SaveId {
            micros: at.timestamp_micros(),
            tag: u64::from_be_bytes(tag),
        }
    }
}

impl fmt::Display for SaveId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sav-{:016x}{:016x}",
            (self.micros as u64) ^ (1 << 63),
            self.tag
        )
    }
}

impl fmt::Debug for SaveId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl FromStr for SaveId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "save_id",
                format!("{s:?} is not a save id (sav- and 32 lower-case hex digits)"),
            )
        };
        let hex = s.strip_prefix("sav-").ok_or_else(bad)?;
        if hex.len() != 32 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let t = u64::from_str_radix(&hex[..16], 16).map_err(|_| bad())?;
        let tag = u64::from_str_radix(&hex[16..], 16).map_err(|_| bad())?;
        Ok(SaveId {
            micros: (t ^ (1 << 63)) as i64,
            tag,
        })
    }
}

impl Serialize for SaveId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SaveId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: Error| serde::de::Error::custom(e.message))
    }
}

/// A saved snapshot of an agent's window (a save's metadata:
/// docs/http-api.md, "Saves").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveRecord {
    /// Its id.
    pub save_id: SaveId,
    /// When it was saved.
    pub timestamp: DateTime<Utc>,
    /// What the caller called it.
    pub description: Option<String>,
    /// The summarizer's summary, or `(summary generation failed)`.
    pub summary: String,
    /// Messages saved.
    pub message_count: u64,
    /// The window's lower bound (exclusive).
    pub window_start: DateTime<Utc>,
    /// The window's upper bound (the time of the save).
    pub window_end: DateTime<Utc>,
    /// The session file: the artifact holding this record and the messages.
    pub artifact_ref: ArtifactRef,
    /// Each thread's joined window, durable (a restore checkpoints them).
    #[serde(default)]
    pub thread_artifacts: Vec<ArtifactRef>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_ids_round_trip_and_sort_by_time() {
        let tenant: TenantId = "t".parse().unwrap();
        let agent: Principal = "a".parse().unwrap();
        let art = ArtifactRef::of(b"x");
        let times = [-5_000_000i64, 0, 1, 1_790_000_000_000_000];
        let ids: Vec<SaveId> = times
            .iter()
            .map(|&m| SaveId::derive(&tenant, &agent, crate::clock::micros_to_time(m), &art))
            .collect();
        for id in &ids {
            assert_eq!(id.to_string().parse::<SaveId>().unwrap(), *id);
        }
        let texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted);
        for bad in [
            "sav-",
            "sav-XYZ",
            "ctx-00000000000000000000000000000000",
            &format!("sav-{}", "0".repeat(31)),
        ] {
            assert_eq!(
                bad.parse::<SaveId>().unwrap_err().field.as_deref(),
                Some("save_id")
            );
        }
    }

    #[test]
    fn window_seconds_bounds_name_the_field() {
        assert!(check_window_seconds(1).is_ok());
        assert!(check_window_seconds(MAX_WINDOW_SECONDS).is_ok());
        for bad in [0, -1, MAX_WINDOW_SECONDS + 1] {
            assert_eq!(
                check_window_seconds(bad).unwrap_err().field.as_deref(),
                Some("window_seconds")
            );
        }
    }
}

/// A change to an agent's settings: each field given is set, the others
/// are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentPatch {
    /// The rolling window's length in seconds.
    pub window_seconds: Option<i64>,
    /// Whether the working-context cache is refreshed at safe boundaries.
    pub persist_working_context: Option<bool>,
    /// The system prompt (empty clears it).
    pub system_prompt: Option<String>,
    /// The workspace of the agent's docs (empty clears it).
    pub docs_workspace: Option<String>,
}

/// An agent's settings, defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The agent.
    pub agent: Principal,
    /// The rolling window's length in seconds.
    pub window_seconds: i64,
    /// Whether the working-context cache is refreshed at safe boundaries.
    pub persist_working_context: bool,
    /// The latest clear, if any.
    pub last_clear: Option<DateTime<Utc>>,
    /// The cached working context's epoch, if there is a cache.
    pub working_context_epoch: Option<u64>,
    /// The system prompt, if set.
    pub system_prompt: Option<String>,
    /// The workspace of the agent's docs, if set.
    pub docs_workspace: Option<crate::workspace::WorkspaceId>,
}

/// An agent's live context: the window's bounds, its commits and their
/// messages joined into one artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveContext {
    /// The lower bound (exclusive): max(last_clear, now - window).
    pub since: DateTime<Utc>,
    /// Which of the two it is.
    pub reason: WindowReason,
    /// The upper bound (now).
    pub until: DateTime<Utc>,
    /// The commits whose messages are in it, oldest first.
    pub commits: Vec<Commit>,
    /// Messages in it.
    pub message_count: u64,
    /// Tokens in it.
    pub token_count: u64,
    /// The messages, joined (none when the window is empty).
    pub artifact_ref: Option<ArtifactRef>,
    /// Their format (none when the window is empty).
    pub format: Option<FormatId>,
    /// Whether the window held more commits than one answer carries (the
    /// newest are kept).
    pub truncated: bool,
}

/// How to restore a working context when the cache cannot be used: what
/// a rebuild from the agent's memory puts in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// The system prompt (default: the last cache's).
    pub system_prompt: Option<String>,
    /// Commit summaries (default 5, at most 100).
    pub max_episodic: Option<usize>,
    /// Subtask results (default 5, at most 100).
    pub max_semantic: Option<usize>,
    /// Turns of the latest chain (default 10, at most 1000).
    pub raw_tail_turns: Option<usize>,
    /// Rebuild even when the cache is valid.
    pub rebuild: bool,
}

/// A restored working context.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredContext {
    /// Cache or rebuild.
    pub source: RestoreSource,
    /// Why the cache was not used (rebuilds only).
    pub reason: Option<String>,
    /// The working context.
    pub snapshot: WorkingContextSnapshot,
    /// The artifact holding it (the cache now).
    pub artifact_ref: ArtifactRef,
}

/// Why the window starts where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowReason {
    /// At the latest clear (more recent than now - window).
    Clear,
    /// At now - window_seconds.
    Window,
}

/// One message of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMessage {
    /// The thread it belongs to.
    pub thread_id: Option<String>,
    /// `system`, `user`, `assistant`, or `raw` for opaque bytes.
    pub role: String,
    /// Its text.
    pub content: String,
    /// The message in the canonical model, for structured formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<serde_json::Value>,
}

/// One thread of a session file: its messages as one artifact, what
/// restore writes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionThread {
    /// The thread (absent for commits without one).
    pub thread_id: Option<String>,
    /// The format of `artifact_ref`.
    pub format: FormatId,
    /// The thread's window messages, joined.
    pub artifact_ref: ArtifactRef,
    /// Messages in it.
    pub message_count: u64,
    /// The commits they came from.
    pub commits: Vec<crate::id::CommitId>,
}

/// `GET /v1/agents/{agent}/saves/{save_id}`: a save's session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFile {
    /// The save's id.
    pub session_id: SaveId,
    /// The agent.
    pub agent: Principal,
    /// When it was saved.
    pub timestamp: DateTime<Utc>,
    /// What the caller called it.
    pub description: Option<String>,
    /// The summary.
    pub summary: String,
    /// Messages saved.
    pub message_count: u64,
    /// The window's lower bound.
    pub window_start: DateTime<Utc>,
    /// The window's upper bound.
    pub window_end: DateTime<Utc>,
    /// Every thread's messages, oldest first within a thread.
    pub messages: Vec<SessionMessage>,
    /// Per thread, what restore writes back.
    pub threads: Vec<SessionThread>,
}

/// One message of a working-context snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The model's reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Tool calls or results (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_payload: Option<serde_json::Value>,
    /// Media by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_urls: Option<Vec<String>>,
}

/// A working-context snapshot (the cache file of docs/http-api.md,
/// "Working context").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingContextSnapshot {
    /// Must be 1.
    #[serde(deserialize_with = "crate::number::whole")]
    pub schema_version: u32,
    /// Must be the agent of the route.
    pub agent_id: String,
    /// The snapshot's epoch (a rebuild stores the previous + 1).
    #[serde(deserialize_with = "crate::number::whole")]
    pub epoch_id: u64,
    /// The time of the compaction it starts from, in seconds since the
    /// epoch.
    #[serde(default)]
    pub last_compaction_ts: Option<f64>,
    /// The messages, in order.
    pub messages: Vec<WorkingMessage>,
}

/// Where a restored working context came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreSource {
    /// The cache was valid.
    Cache,
    /// Rebuilt from the agent's memory (and stored as the new cache).
    Rebuilt,
}

/// One of an agent's docs in an assembled context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocFile {
    /// Its path in the docs workspace.
    pub path: crate::workspace::FilePath,
    /// Its version (the file's tip commit).
    pub version: crate::id::CommitId,
    /// Its whole size in bytes.
    pub size: u64,
    /// Its text (the head only when `truncated`).
    pub text: String,
    /// Whether only the head of the file is in `text`.
    pub truncated: bool,
}

/// A doc left out of an assembled context, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OmittedDoc {
    /// Its path in the docs workspace.
    pub path: crate::workspace::FilePath,
    /// Why: not UTF-8 text, over the file count, or over the docs budget.
    pub reason: String,
}

/// The agent's docs: the files of its docs workspace, by path, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentDocs {
    /// The docs workspace (absent when the agent names none).
    pub workspace: Option<crate::workspace::WorkspaceId>,
    /// The files in the context, by path.
    pub files: Vec<DocFile>,
    /// The files left out, by path.
    pub omitted: Vec<OmittedDoc>,
    /// True when a file was cut or left out.
    pub truncated: bool,
}

/// Another thread of the agent with messages in its window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadActivity {
    /// The thread.
    pub thread_id: String,
    /// Its newest commit's time.
    pub last_activity: DateTime<Utc>,
    /// Its commits in the window.
    pub commit_count: u64,
    /// Its messages in the window (as the commits count them).
    pub message_count: u64,
}

/// An active folded branch of one of the agent's sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchActivity {
    /// The branch.
    pub branch_id: crate::id::BranchId,
    /// Its session.
    pub session_id: String,
    /// What it is for.
    pub description: String,
    /// Its depth (1 under the session).
    pub depth: u32,
    /// Tokens it may use.
    pub budget: u64,
    /// Tokens it has used.
    pub tokens_used: u64,
    /// When it times out.
    pub deadline: DateTime<Utc>,
}

/// A registered process still running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningProcess {
    /// Its id.
    pub process_id: String,
    /// What it is doing.
    pub description: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The thread it works for, if one.
    pub thread_id: Option<String>,
    /// When it stops being listed, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was registered or last changed.
    pub updated_at: DateTime<Utc>,
}

impl RunningProcess {
    /// Process `id` as registered.
    pub fn new(id: String, p: ProcessRecord) -> Self {
        RunningProcess {
            process_id: id,
            description: p.description,
            started_at: p.started_at,
            thread_id: p.thread_id,
            expires_at: p.expires_at,
            updated_at: p.updated_at,
        }
    }
}

/// The thread and process status preamble of an assembled context.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusPreamble {
    /// The agent's other threads with messages in its window, most
    /// recently active first.
    pub threads: Vec<ThreadActivity>,
    /// The active folded branches of the agent's sessions in its window,
    /// deepest first.
    pub branches: Vec<BranchActivity>,
    /// The processes registered as running, by id.
    pub processes: Vec<RunningProcess>,
    /// True when a list was cut at its bound (the most recent are kept).
    pub truncated: bool,
    /// The preamble as the context's text (absent when all three lists
    /// are empty).
    pub text: Option<String>,
}

/// The assembled context as one conversation in a format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssembledConversation {
    /// Its format.
    pub format: FormatId,
    /// Messages in it (the prefix's and the window's).
    pub message_count: u64,
    /// Its bytes, when they are UTF-8 (JSON, JSONL, text).
    pub text: Option<String>,
    /// Its bytes in base64, when they are not UTF-8 (CBOR).
    pub base64: Option<String>,
    /// What the format could not hold (empty when nothing was lost).
    pub lost: Vec<String>,
}

/// The context of an LLM call for an agent and a thread, in the seed's
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledContext {
    /// The agent.
    pub agent: Principal,
    /// The thread.
    pub thread_id: String,
    /// 1. The system prompt, if set.
    pub system_prompt: Option<String>,
    /// 2. The agent's docs.
    pub docs: AgentDocs,
    /// 3. The thread and process status.
    pub status: StatusPreamble,
    /// 4. The thread's rolling window.
    pub window: LiveContext,
    /// All four as one conversation.
    pub conversation: AssembledConversation,
}
