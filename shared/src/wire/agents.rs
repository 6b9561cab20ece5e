//! `/v1/agents…`: an agent's settings, rolling window, saves and working
//! context. The session file and the working-context snapshot are stored
//! formats, defined with the agent records (`crate::agent`) and re-exported
//! here.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::agent::{
    AgentPatch, AssembledContext, ContextWindow, RestoreOptions, RestoredContext, SaveId,
    SaveRecord, Settings,
};
use crate::commit::Commit;
use crate::format::FormatId;
use crate::id::{ArtifactRef, Principal};
use crate::workspace::WorkspaceId;

pub use crate::agent::{
    AgentDocs, AssembledConversation, BranchActivity, DocFile, OmittedDoc, RestoreSource,
    RunningProcess, SessionFile, SessionMessage, SessionThread, StatusPreamble, ThreadActivity,
    WindowReason, WorkingContextSnapshot, WorkingMessage,
};

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
            docs: a.docs,
            status: a.status,
            window: a.window.into(),
            conversation: a.conversation,
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

impl From<ContextWindow> for Window {
    fn from(w: ContextWindow) -> Self {
        Window {
            since: w.since,
            reason: w.reason,
            until: w.until,
            commits: w.commits,
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
            source: r.source,
            reason: r.reason,
            snapshot: r.snapshot,
            artifact_ref: r.artifact_ref,
        }
    }
}
