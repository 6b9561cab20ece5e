//! `/v1/agents…`: an agent's settings, rolling window, saves and working
//! context. The session file and the working-context snapshot are stored
//! formats, defined with the agent records (`crate::agent`) and re-exported
//! here.

use super::Commit;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::agent::{
    AgentPatch, AssembledContext, LiveContext, RestoreOptions, RestoredContext, SaveId, Settings,
};
use crate::format::FormatId;
use crate::id::{ArtifactRef, Principal};
use crate::workspace::WorkspaceId;

use super::{ErrorBody, operations};

/// `GET`/`PATCH /v1/agents/{agent}`: an agent's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentSettings {
    /// The agent (a principal).
    #[schema(value_type = String)]
    pub agent: Principal,
    /// The rolling window's length (default 86,400).
    pub window_seconds: i64,
    /// Whether the working-context cache is refreshed at safe
    /// boundaries (default false).
    pub persist_working_context: bool,
    /// The latest clear; absent before the first (the window then
    /// starts at the agent's first commit).
    pub last_clear: Option<DateTime<Utc>>,
    /// The cached working context's epoch, if there is a cache.
    pub working_context_epoch: Option<u64>,
    /// The system prompt of the agent's assembled context (absent when
    /// not set).
    pub system_prompt: Option<String>,
    /// The workspace whose files are the agent's docs (absent when not
    /// set).
    pub docs_workspace: Option<WorkspaceId>,
}

/// `PATCH /v1/agents/{agent}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAgentRequest {
    /// The rolling window's length, 1 s to ten years.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(minimum = 1, maximum = 316_224_000)]
    pub window_seconds: Option<i64>,
    /// Refresh the working-context cache at safe boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist_working_context: Option<bool>,
    /// The system prompt of the agent's assembled context: at most
    /// 65,536 bytes, no control characters but newline, tab and carriage
    /// return; empty clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 65_536,
        pattern = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]*$"
    )]
    pub system_prompt: Option<String>,
    /// The workspace whose files are the agent's docs (a workspace id);
    /// empty clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 64, pattern = "^(?:(?:\\.?[A-Za-z0-9_-]+)+\\.?)?$")]
    pub docs_workspace: Option<String>,
}

/// `PUT /v1/agents/{agent}/processes/{process_id}`: a process running for
/// the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutProcessRequest {
    /// What it is doing (1 to 1024 bytes, no control characters but
    /// newline and tab).
    #[schema(
        min_length = 1,
        max_length = 1024,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub description: String,
    /// When it started (default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// The thread it works for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub thread_id: Option<String>,
    /// When to stop listing it if it is never removed (after now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// `GET /v1/agents/{agent}/processes`: by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProcessList {
    /// The processes registered and still running.
    pub processes: Vec<RunningProcess>,
}

/// `GET /v1/agents/{agent}/context`: the context of an LLM call, in the
/// seed's order, as sections and as one conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AssembledContextResponse {
    /// The agent.
    #[schema(value_type = String)]
    pub agent: Principal,
    /// The thread.
    pub thread_id: String,
    /// 1. The system prompt (absent when not set).
    pub system_prompt: Option<String>,
    /// 2. The agent's docs.
    pub docs: AgentDocs,
    /// 3. The thread and process status preamble.
    pub status: StatusPreamble,
    /// 4. The thread's rolling window.
    pub window: Window,
    /// All four as one conversation: the first three as system messages
    /// (user messages in a format without them, text before the window's
    /// bytes in an opaque one), then the window's messages.
    pub conversation: AssembledConversation,
}

impl From<AssembledContext> for AssembledContextResponse {
    fn from(a: AssembledContext) -> Self {
        AssembledContextResponse {
            agent: a.agent,
            thread_id: a.thread_id,
            system_prompt: a.system_prompt,
            docs: a.docs.into(),
            status: a.status.into(),
            window: a.window.into(),
            conversation: a.conversation.into(),
        }
    }
}

/// `POST /v1/agents/{agent}/clear`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cleared {
    /// The new clear marker (now).
    pub last_clear: DateTime<Utc>,
}

/// `GET /v1/agents/{agent}/window`: the agent's live context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Window {
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
    /// The messages, joined (absent when the window is empty).
    pub artifact_ref: Option<ArtifactRef>,
    /// Their format (absent when the window is empty).
    pub format: Option<FormatId>,
    /// True when the window held more commits than one answer carries
    /// (the newest are kept).
    pub truncated: bool,
}

/// `POST /v1/agents/{agent}/saves`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveRequest {
    /// What to call the save (at most 1024 bytes, no control
    /// characters but newline and tab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 1024,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub description: Option<String>,
}

/// `GET /v1/agents/{agent}/saves`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SaveList {
    /// The saves.
    pub saves: Vec<SaveRecord>,
}

/// `POST /v1/agents/{agent}/saves/{save_id}/restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Restored {
    /// The save restored.
    pub save_id: SaveId,
    /// One commit per thread, at the current time, tagged
    /// `restored_from`.
    pub commits: Vec<Commit>,
}

/// `PUT /v1/agents/{agent}/working-context`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkingContextStored {
    /// The stored epoch.
    pub epoch_id: u64,
    /// The cache artifact.
    pub artifact_ref: ArtifactRef,
}

/// `POST /v1/agents/{agent}/working-context/restore`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// The system prompt of a rebuild (default: the last cache's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1_048_576)]
    pub system_prompt: Option<String>,
    /// Commit summaries in a rebuild (default 5, at most 100).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(maximum = 100)]
    pub max_episodic: Option<usize>,
    /// Subtask results in a rebuild (default 5, at most 100).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(maximum = 100)]
    pub max_semantic: Option<usize>,
    /// Turns of the latest chain in a rebuild (default 10, at most 1000).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(maximum = 1000)]
    pub raw_tail_turns: Option<usize>,
    /// Rebuild even when the cache is valid (default false): after the
    /// agent's memory changed under a cache that still reads as valid.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuild: bool,
}

/// The answer of a working-context restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RestoreResponse {
    /// Cache or rebuild.
    pub source: RestoreSource,
    /// Why the cache was not used (rebuilds only).
    pub reason: Option<String>,
    /// The working context.
    pub snapshot: WorkingContextSnapshot,
    /// The artifact holding it (the cache now).
    pub artifact_ref: ArtifactRef,
}

impl From<Settings> for AgentSettings {
    fn from(s: Settings) -> Self {
        AgentSettings {
            agent: s.agent,
            window_seconds: s.window_seconds,
            persist_working_context: s.persist_working_context,
            last_clear: s.last_clear,
            working_context_epoch: s.working_context_epoch,
            system_prompt: s.system_prompt,
            docs_workspace: s.docs_workspace,
        }
    }
}

impl From<PatchAgentRequest> for AgentPatch {
    fn from(r: PatchAgentRequest) -> Self {
        AgentPatch {
            window_seconds: r.window_seconds,
            persist_working_context: r.persist_working_context,
            system_prompt: r.system_prompt,
            docs_workspace: r.docs_workspace,
        }
    }
}

impl From<LiveContext> for Window {
    fn from(w: LiveContext) -> Self {
        Window {
            since: w.since,
            reason: w.reason.into(),
            until: w.until,
            commits: w.commits.into_iter().map(Into::into).collect(),
            message_count: w.message_count,
            token_count: w.token_count,
            artifact_ref: w.artifact_ref,
            format: w.format,
            truncated: w.truncated,
        }
    }
}

impl From<RestoreRequest> for RestoreOptions {
    fn from(r: RestoreRequest) -> Self {
        RestoreOptions {
            system_prompt: r.system_prompt,
            max_episodic: r.max_episodic,
            max_semantic: r.max_semantic,
            raw_tail_turns: r.raw_tail_turns,
            rebuild: r.rebuild,
        }
    }
}

impl From<RestoredContext> for RestoreResponse {
    fn from(r: RestoredContext) -> Self {
        RestoreResponse {
            source: r.source.into(),
            reason: r.reason,
            snapshot: r.snapshot.into(),
            artifact_ref: r.artifact_ref,
        }
    }
}

/// The agent's docs: the files of its docs workspace, by path, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::AgentDocs> for AgentDocs {
    fn from(v: crate::agent::AgentDocs) -> Self {
        AgentDocs {
            workspace: v.workspace,
            files: v.files.into_iter().map(Into::into).collect(),
            omitted: v.omitted.into_iter().map(Into::into).collect(),
            truncated: v.truncated,
        }
    }
}

/// The assembled context as one conversation in a format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::AssembledConversation> for AssembledConversation {
    fn from(v: crate::agent::AssembledConversation) -> Self {
        AssembledConversation {
            format: v.format,
            message_count: v.message_count,
            text: v.text,
            base64: v.base64,
            lost: v.lost,
        }
    }
}

/// An active folded branch of one of the agent's sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::BranchActivity> for BranchActivity {
    fn from(v: crate::agent::BranchActivity) -> Self {
        BranchActivity {
            branch_id: v.branch_id,
            session_id: v.session_id,
            description: v.description,
            depth: v.depth,
            budget: v.budget,
            tokens_used: v.tokens_used,
            deadline: v.deadline,
        }
    }
}

/// One of an agent's docs in an assembled context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::DocFile> for DocFile {
    fn from(v: crate::agent::DocFile) -> Self {
        DocFile {
            path: v.path,
            version: v.version,
            size: v.size,
            text: v.text,
            truncated: v.truncated,
        }
    }
}

/// A doc left out of an assembled context, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OmittedDoc {
    /// Its path in the docs workspace.
    pub path: crate::workspace::FilePath,
    /// Why: not UTF-8 text, over the file count, or over the docs budget.
    pub reason: String,
}

impl From<crate::agent::OmittedDoc> for OmittedDoc {
    fn from(v: crate::agent::OmittedDoc) -> Self {
        OmittedDoc {
            path: v.path,
            reason: v.reason,
        }
    }
}

/// Where a restored working context came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestoreSource {
    /// The cache was valid.
    Cache,
    /// Rebuilt from the agent's memory (and stored as the new cache).
    Rebuilt,
}

impl From<crate::agent::RestoreSource> for RestoreSource {
    fn from(v: crate::agent::RestoreSource) -> Self {
        match v {
            crate::agent::RestoreSource::Cache => RestoreSource::Cache,
            crate::agent::RestoreSource::Rebuilt => RestoreSource::Rebuilt,
        }
    }
}

impl From<RestoreSource> for crate::agent::RestoreSource {
    fn from(v: RestoreSource) -> Self {
        match v {
            RestoreSource::Cache => crate::agent::RestoreSource::Cache,
            RestoreSource::Rebuilt => crate::agent::RestoreSource::Rebuilt,
        }
    }
}

/// A registered process still running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::RunningProcess> for RunningProcess {
    fn from(v: crate::agent::RunningProcess) -> Self {
        RunningProcess {
            process_id: v.process_id,
            description: v.description,
            started_at: v.started_at,
            thread_id: v.thread_id,
            expires_at: v.expires_at,
            updated_at: v.updated_at,
        }
    }
}

/// A saved snapshot of an agent's window (a save's metadata:
/// docs/http-api.md, "Saves").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::SaveRecord> for SaveRecord {
    fn from(v: crate::agent::SaveRecord) -> Self {
        SaveRecord {
            save_id: v.save_id,
            timestamp: v.timestamp,
            description: v.description,
            summary: v.summary,
            message_count: v.message_count,
            window_start: v.window_start,
            window_end: v.window_end,
            artifact_ref: v.artifact_ref,
            thread_artifacts: v.thread_artifacts,
        }
    }
}

/// `GET /v1/agents/{agent}/saves/{save_id}`: a save's session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionFile {
    /// The save's id.
    pub session_id: SaveId,
    /// The agent.
    #[schema(value_type = String)]
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

impl From<crate::agent::SessionFile> for SessionFile {
    fn from(v: crate::agent::SessionFile) -> Self {
        SessionFile {
            session_id: v.session_id,
            agent: v.agent,
            timestamp: v.timestamp,
            description: v.description,
            summary: v.summary,
            message_count: v.message_count,
            window_start: v.window_start,
            window_end: v.window_end,
            messages: v.messages.into_iter().map(Into::into).collect(),
            threads: v.threads.into_iter().map(Into::into).collect(),
        }
    }
}

/// One message of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionMessage {
    /// The thread it belongs to.
    pub thread_id: Option<String>,
    /// `system`, `user`, `assistant`, or `raw` for opaque bytes.
    pub role: String,
    /// Its text.
    pub content: String,
    /// The message in the canonical model, for structured formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub message: Option<serde_json::Value>,
}

impl From<crate::agent::SessionMessage> for SessionMessage {
    fn from(v: crate::agent::SessionMessage) -> Self {
        SessionMessage {
            thread_id: v.thread_id,
            role: v.role,
            content: v.content,
            message: v.message,
        }
    }
}

/// One thread of a session file: its messages as one artifact, what
/// restore writes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::SessionThread> for SessionThread {
    fn from(v: crate::agent::SessionThread) -> Self {
        SessionThread {
            thread_id: v.thread_id,
            format: v.format,
            artifact_ref: v.artifact_ref,
            message_count: v.message_count,
            commits: v.commits,
        }
    }
}

/// The thread and process status preamble of an assembled context.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::StatusPreamble> for StatusPreamble {
    fn from(v: crate::agent::StatusPreamble) -> Self {
        StatusPreamble {
            threads: v.threads.into_iter().map(Into::into).collect(),
            branches: v.branches.into_iter().map(Into::into).collect(),
            processes: v.processes.into_iter().map(Into::into).collect(),
            truncated: v.truncated,
            text: v.text,
        }
    }
}

/// Another thread of the agent with messages in its window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

impl From<crate::agent::ThreadActivity> for ThreadActivity {
    fn from(v: crate::agent::ThreadActivity) -> Self {
        ThreadActivity {
            thread_id: v.thread_id,
            last_activity: v.last_activity,
            commit_count: v.commit_count,
            message_count: v.message_count,
        }
    }
}

/// Why the window starts where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WindowReason {
    /// At the latest clear (more recent than now - window).
    Clear,
    /// At now - window_seconds.
    Window,
}

impl From<crate::agent::WindowReason> for WindowReason {
    fn from(v: crate::agent::WindowReason) -> Self {
        match v {
            crate::agent::WindowReason::Clear => WindowReason::Clear,
            crate::agent::WindowReason::Window => WindowReason::Window,
        }
    }
}

impl From<WindowReason> for crate::agent::WindowReason {
    fn from(v: WindowReason) -> Self {
        match v {
            WindowReason::Clear => crate::agent::WindowReason::Clear,
            WindowReason::Window => crate::agent::WindowReason::Window,
        }
    }
}

/// The schema of a snapshot's `epoch_id`: any unsigned 64-bit value
/// (no `int64` format, which would cap it at 2^63 - 1).
fn epoch_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0))
        .maximum(Some(utoipa::Number::UInt(u64::MAX as usize)))
        .description(Some(
            "The snapshot's epoch (a rebuild stores the previous + 1).",
        ))
        .build()
}

/// A working-context snapshot (the cache file of docs/http-api.md,
/// "Working context").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingContextSnapshot {
    /// Must be 1.
    #[serde(deserialize_with = "crate::number::whole")]
    #[schema(minimum = 1, maximum = 1)]
    pub schema_version: u32,
    /// Must be the agent of the route.
    pub agent_id: String,
    /// The snapshot's epoch (a rebuild stores the previous + 1).
    #[serde(deserialize_with = "crate::number::whole")]
    #[schema(schema_with = epoch_schema)]
    pub epoch_id: u64,
    /// The time of the compaction it starts from, in seconds since the
    /// epoch.
    #[serde(default)]
    pub last_compaction_ts: Option<f64>,
    /// The messages, in order.
    pub messages: Vec<WorkingMessage>,
}

impl From<crate::agent::WorkingContextSnapshot> for WorkingContextSnapshot {
    fn from(v: crate::agent::WorkingContextSnapshot) -> Self {
        WorkingContextSnapshot {
            schema_version: v.schema_version,
            agent_id: v.agent_id,
            epoch_id: v.epoch_id,
            last_compaction_ts: v.last_compaction_ts,
            messages: v.messages.into_iter().map(Into::into).collect(),
        }
    }
}

/// One message of a working-context snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
    #[schema(value_type = Option<Object>)]
    pub tool_payload: Option<serde_json::Value>,
    /// Media by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_urls: Option<Vec<String>>,
}

impl From<crate::agent::WorkingMessage> for WorkingMessage {
    fn from(v: crate::agent::WorkingMessage) -> Self {
        WorkingMessage {
            role: v.role,
            content: v.content,
            reasoning_content: v.reasoning_content,
            tool_payload: v.tool_payload,
            media_urls: v.media_urls,
        }
    }
}

impl From<WorkingContextSnapshot> for crate::agent::WorkingContextSnapshot {
    fn from(v: WorkingContextSnapshot) -> Self {
        crate::agent::WorkingContextSnapshot {
            schema_version: v.schema_version,
            agent_id: v.agent_id,
            epoch_id: v.epoch_id,
            last_compaction_ts: v.last_compaction_ts,
            messages: v.messages.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<WorkingMessage> for crate::agent::WorkingMessage {
    fn from(v: WorkingMessage) -> Self {
        crate::agent::WorkingMessage {
            role: v.role,
            content: v.content,
            reasoning_content: v.reasoning_content,
            tool_payload: v.tool_payload,
            media_urls: v.media_urls,
        }
    }
}

operations! { AGENT_OPERATIONS;
    /// An agent's settings (the defaults for an agent never configured).
    GetAgent = get_agent: get "/v1/agents/{agent}" in Agents,
        none => AgentSettings {
        tag = "agents",
            params(("agent" = Principal, Path)),
            responses((status = 200, description = "The settings", body = AgentSettings),
                (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Changes an agent's settings: the rolling window's length, whether its
    /// working-context cache is refreshed at safe boundaries, the system prompt
    /// and the docs workspace of its assembled context.
    PatchAgent = patch_agent: patch "/v1/agents/{agent}" in Agents,
        optional PatchAgentRequest => AgentSettings {
        tag = "agents", params(("agent" = Principal, Path)),
            responses((status = 200, description = "The settings as changed", body = AgentSettings),
                (status = 400, description = "`window_seconds` not positive or over ten years, `system_prompt` over 64 KiB or with control characters, `docs_workspace` not a workspace id, or a malformed request (nothing written)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Moves the agent's clear marker to now: every thread's window starts
    /// there. Deletes nothing.
    ClearContext = clear_context: post "/v1/agents/{agent}/clear" in Agents,
        none => Cleared {
        tag = "agents",
            params(("agent" = Principal, Path)),
            responses((status = 200, description = "The new marker", body = Cleared),
                (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The agent's live context: the messages of its commits created after
    /// max(last_clear, now - window_seconds), for one thread or all, oldest
    /// first, joined in `format`.
    ContextWindow = context_window: get "/v1/agents/{agent}/window" in Agents,
        none => Window {
        tag = "agents",
            params(("agent" = Principal, Path),
                ("thread_id" = Option<String>, Query, min_length = 1, max_length = 256, pattern = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$",
                    description = "One thread (default: every thread): 1 to 256 bytes, no control characters but tab and newline"),
                ("format" = Option<FormatId>, Query, description = "Default: the newest commit's")),
            responses((status = 200, description = "The window", body = Window),
                (status = 400, description = "A malformed `thread_id` or `format`, or commits that cannot be turned into it", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Saves every thread's window as a session file with a summary (the
    /// configured summarizer's; `(summary generation failed)` when it fails).
    /// Does not clear.
    SaveContext = save_context: post "/v1/agents/{agent}/saves" in Agents,
        optional SaveRequest => SaveRecord {
        tag = "agents", params(("agent" = Principal, Path)),
            responses((status = 201, description = "The save", body = SaveRecord),
                (status = 400, description = "A malformed `description`", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The agent's saves, newest first.
    ListSaves = list_saves: get "/v1/agents/{agent}/saves" in Agents,
        none => SaveList {
        tag = "agents",
            params(("agent" = Principal, Path)),
            responses((status = 200, description = "The saves", body = SaveList),
                (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// One save's session file (the messages included).
    GetSave = get_save: get "/v1/agents/{agent}/saves/{save_id}" in Agents,
        none => SessionFile {
        tag = "agents",
            params(("agent" = Principal, Path), ("save_id" = SaveId, Path)),
            responses((status = 200, description = "The session file", body = SessionFile),
                (status = 400, description = "`save_id` is not a save id", body = ErrorBody),
                (status = 404, description = "No such save", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Loads a save's messages back into the window: one commit per thread at
    /// the current time, tagged `restored_from`.
    RestoreSave = restore_save: post "/v1/agents/{agent}/saves/{save_id}/restore" in Agents,
        none => Restored {
        tag = "agents",
            params(("agent" = Principal, Path), ("save_id" = SaveId, Path)),
            responses((status = 200, description = "The commits written", body = Restored),
                (status = 400, description = "`save_id` is not a save id", body = ErrorBody),
                (status = 404, description = "No such save", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Stores a working-context snapshot as the agent's cache.
    PutWorkingContext = put_working_context: put "/v1/agents/{agent}/working-context" in Agents,
        json WorkingContextSnapshot => WorkingContextStored {
        tag = "agents", params(("agent" = Principal, Path)),
            responses((status = 200, description = "Stored", body = WorkingContextStored),
                (status = 400, description = "A wrong `schema_version`, an `agent_id` that is not the route's agent, or malformed `messages` (nothing written)", body = ErrorBody),
                (status = 413, description = "Over the artifact limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Restores the agent's working context: the cache when it is valid, else
    /// a rebuild from its memory (system prompt, episodic, semantic, raw tail),
    /// stored as the new cache, with the reason the cache was rejected.
    RestoreWorkingContext = restore_working_context: post "/v1/agents/{agent}/working-context/restore" in Agents,
        optional RestoreRequest => RestoreResponse {
        tag = "agents", params(("agent" = Principal, Path)),
            responses((status = 200, description = "The working context and where it came from", body = RestoreResponse),
                (status = 400, description = "An option out of range", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Registers (or replaces) a process running for the agent: the status
    /// preamble of its assembled context lists it until it is removed or
    /// expires.
    PutProcess = put_process: put "/v1/agents/{agent}/processes/{process_id}" in Agents,
        json PutProcessRequest => RunningProcess {
        tag = "agents", params(("agent" = Principal, Path),
                ("process_id" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$",
                    description = "The caller's id for it: 1 to 128 of A-Z, a-z, 0-9, '.', '_', ':' and '-'")),
            responses((status = 200, description = "The process as registered", body = RunningProcess),
                (status = 400, description = "A bad `process_id`, `description`, `thread_id` or `expires_at`, or `processes` when 64 others run (nothing written)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Removes a registered process.
    DeleteProcess = delete_process: delete "/v1/agents/{agent}/processes/{process_id}" in Agents,
        none => () {
        tag = "agents",
            params(("agent" = Principal, Path),
                ("process_id" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$")),
            responses((status = 204, description = "Removed"),
                (status = 400, description = "A bad `process_id`", body = ErrorBody),
                (status = 404, description = "No such process (or it expired)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The processes registered for the agent and still running, by id.
    ListProcesses = list_processes: get "/v1/agents/{agent}/processes" in Agents,
        none => ProcessList {
        tag = "agents",
            params(("agent" = Principal, Path)),
            responses((status = 200, description = "The processes", body = ProcessList),
                (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The context of an LLM call for the agent and a thread, in seed 001's
    /// order: the system prompt, the agent's docs (its docs workspace's files,
    /// bounded; what was cut is said), a thread and process status preamble
    /// (its other active threads, the active folded branches of its sessions,
    /// its running processes) and the thread's rolling window; as sections
    /// and as one conversation in `format`.
    AssembleContext = assemble_context: get "/v1/agents/{agent}/context" in Agents,
        none => AssembledContextResponse {
        tag = "agents",
            params(("agent" = Principal, Path),
                ("thread_id" = String, Query, min_length = 1, max_length = 256, pattern = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$",
                    description = "The thread: 1 to 256 bytes, no control characters but tab and newline"),
                ("format" = Option<super::KnownFormat>, Query, description = "The conversation's format (default: the window's, else openai-chat-v1)")),
            responses((status = 200, description = "The assembled context", body = AssembledContextResponse),
                (status = 400, description = "A missing or malformed `thread_id`, an unknown `format`, or a window that cannot be turned into it", body = ErrorBody),
                (status = 413, description = "The conversation is over 4 MiB (read the window's artifact instead)", body = ErrorBody)),
            security(("bearer" = []))
    }
}
