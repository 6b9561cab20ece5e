//! Context folding: the request and response bodies of `/v1/branches…`
//! and `POST /v1/sessions/{id}/end`, and their conversions from and to the
//! service's values (`crate::branch`).

use std::collections::BTreeMap;

use crate::id::MemoryId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, operations};
use crate::branch::memories::ScoredMemory;
use crate::branch::{BranchState, CreatedBranch, EndedSession, NewBranch, ReturnedBranch};
use crate::id::{BranchId, CommitId, SessionId};

/// `POST /v1/branches`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchCreateRequest {
    /// The session the branch belongs to (its chain is the ref
    /// `sessions/<session_id>`).
    pub session_id: SessionId,
    /// What the subtask is (at most 500 characters, not blank).
    #[schema(min_length = 1, max_length = 500, pattern = r"[^\s\x00-\x1f\x7f-\x9f]")]
    pub description: String,
    /// The subtask's instructions (at most 10,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 10_000)]
    pub prompt: Option<String>,
    /// Tokens the branch may checkpoint (default 8192, capped at 32768).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(schema_with = capped_count)]
    pub budget: Option<u64>,
    /// Seconds until it times out (default 300, at most 600: more is a 400
    /// naming `timeout_seconds`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(schema_with = timeout_range)]
    pub timeout_seconds: Option<u64>,
    /// The active branch to nest under (default: the session itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_branch: Option<BranchId>,
    /// Prepend the memories relevant to the description to the branch's
    /// root (FR-005): at most `CTX_MEMORY_MAX_ITEMS` (10), at least
    /// `CTX_MEMORY_MIN_CONFIDENCE` (0.7) confident, within
    /// `CTX_MEMORY_INJECTION_RATIO` (20%) of the budget, each marked as
    /// data with its provenance. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inject_memories: bool,
}

/// An optional count of at least 1 that the server caps rather than
/// refuses: any unsigned 64-bit value above 0 (no `int64` format, which
/// would cap it at 2^63 - 1).
fn capped_count() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(utoipa::Number::UInt(u64::MAX as usize)))
        .build()
}

/// `timeout_seconds`: 1 to the longest timeout, or null (the default).
fn timeout_range() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(utoipa::Number::UInt(
            crate::branch::MAX_TIMEOUT_SECS as usize,
        )))
        .build()
}

/// What `branch_create` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BranchCreated {
    /// The new branch.
    pub branch_id: BranchId,
    /// The budget granted (the request, capped).
    pub budget_allocated: u64,
    /// 1 for a branch of the session, one more per nesting.
    pub depth: u32,
    /// Seconds until it times out.
    pub timeout_seconds: u64,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// The root commit of its chain (description + prompt only).
    pub root_commit: CommitId,
    /// The ref of its chain: checkpoint with `ref: {name: this}`.
    pub chain_ref: String,
    /// The memories prepended to its root (with `inject_memories`; empty
    /// otherwise), best match first.
    #[serde(default)]
    pub memories: Vec<InjectedMemory>,
    /// Memories that matched but were left out for matching a
    /// prompt-injection pattern (SEC-005).
    #[serde(default)]
    pub memories_blocked: Vec<BlockedMemory>,
}

/// `POST /v1/branches/{br}/return`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchReturnRequest {
    /// The result to hand back (at most 50,000 characters); secrets in it
    /// are scrubbed. With `status: failed`, what the agent adds to the
    /// error (may be empty).
    #[serde(default)]
    #[schema(max_length = 50_000)]
    pub message: String,
    /// `completed` (the default) or `failed`: the agent returns its branch
    /// early as failed (FR-008); then `error` is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ReturnStatus>,
    /// What went wrong (with `status: failed`; at most 5,000 characters,
    /// not blank, scrubbed): the parent's chain gets it with the branch's
    /// description, and the branch's `reason` is this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 5_000,
        pattern = r"[^\s\x00-\x1f\x7f-\x9f]"
    )]
    pub error: Option<String>,
}

impl BranchReturnRequest {
    /// A successful return of `message`.
    pub fn completed(message: impl Into<String>) -> Self {
        BranchReturnRequest {
            message: message.into(),
            status: None,
            error: None,
        }
    }

    /// The error of a failed return; none for a successful one.
    ///
    /// # Errors
    /// `Invalid` (field `error`) for `status: failed` without an error, or
    /// an error without `status: failed`.
    pub fn failure(&self) -> crate::error::Result<Option<&str>> {
        match (self.status.unwrap_or(ReturnStatus::Completed), &self.error) {
            (ReturnStatus::Completed, None) => Ok(None),
            (ReturnStatus::Failed, Some(e)) => Ok(Some(e)),
            (ReturnStatus::Failed, None) => Err(crate::error::Error::invalid(
                "error",
                "status failed needs an error: say what went wrong",
            )),
            (ReturnStatus::Completed, Some(_)) => Err(crate::error::Error::invalid(
                "error",
                "an error is only given with status \"failed\"",
            )),
        }
    }
}

impl super::rules::Rules for BranchReturnRequest {
    /// `error` goes with `status: failed`, and only with it.
    fn rules() -> Vec<serde_json::Value> {
        vec![serde_json::json!({
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "status": {
                            "type": ["string", "null"],
                            "enum": [ReturnStatus::Completed, null],
                        },
                        "error": {"type": "null"},
                    },
                },
                {
                    "type": "object",
                    "required": ["status", "error"],
                    "properties": {
                        "status": {"type": "string", "enum": [ReturnStatus::Failed]},
                        "error": {"type": "string"},
                    },
                },
            ],
        })]
    }
}

/// How the agent ends its branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReturnStatus {
    /// It finished: `message` is its result.
    Completed,
    /// It could not finish: `error` says why (FR-008).
    Failed,
}

/// What `branch_return` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BranchReturned {
    /// False for a branch returned as failed.
    pub success: bool,
    /// Tokens checkpointed into the branch.
    pub tokens_used: u64,
    /// The message as appended to the parent (scrubbed).
    pub message: String,
    /// The commit appended to the parent's chain.
    pub commit: CommitId,
    /// Secrets replaced, per rule.
    pub redactions: BTreeMap<String, usize>,
    /// Active children force-returned first, deepest first.
    pub force_returned: Vec<BranchId>,
}

/// What `branch_status` answers (docs/adr/0005-context-folding.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BranchStatusResponse {
    /// The branch; null when a session has no active branch.
    pub branch_id: Option<BranchId>,
    /// created | active | completed | timeout | failed, or "No active
    /// branch found".
    pub status: String,
    /// Its depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Tokens checkpointed into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_used: Option<u64>,
    /// Its budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_total: Option<u64>,
    /// What the subtask is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// When it times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Its session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The branch it is nested in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_branch: Option<BranchId>,
    /// Why it ended, when not by its own return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The commit its return appended to the parent's chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_commit: Option<CommitId>,
    /// Set at 80% of the budget and above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// By session only: every active branch of the session, deepest first
    /// (the top-level fields describe the first); `[]` when there is none.
    /// Absent by branch id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion, nullable = false)]
    pub active_branches: Option<Vec<BranchStatusResponse>>,
}

/// What session end answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionEnded {
    /// The session.
    pub session_id: String,
    /// Branches force-returned (status completed), deepest first.
    pub returned: Vec<BranchId>,
    /// Branches that did not finish in time or errored (status failed).
    pub failed: Vec<BranchId>,
}

impl From<BranchCreateRequest> for NewBranch {
    fn from(r: BranchCreateRequest) -> Self {
        NewBranch {
            session_id: r.session_id,
            description: r.description,
            prompt: r.prompt,
            budget: r.budget,
            timeout_seconds: r.timeout_seconds,
            parent_branch: r.parent_branch,
            inject_memories: r.inject_memories,
        }
    }
}

impl From<CreatedBranch> for BranchCreated {
    fn from(b: CreatedBranch) -> Self {
        BranchCreated {
            branch_id: b.branch_id,
            budget_allocated: b.budget_allocated,
            depth: b.depth,
            timeout_seconds: b.timeout_seconds,
            deadline: b.deadline,
            root_commit: b.root_commit,
            chain_ref: b.chain_ref,
            memories: b.memories.into_iter().map(Into::into).collect(),
            memories_blocked: b.memories_blocked.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<ReturnedBranch> for BranchReturned {
    fn from(r: ReturnedBranch) -> Self {
        BranchReturned {
            success: r.success,
            tokens_used: r.tokens_used,
            message: r.message,
            commit: r.commit,
            redactions: r.redactions,
            force_returned: r.force_returned,
        }
    }
}

impl From<EndedSession> for SessionEnded {
    fn from(e: EndedSession) -> Self {
        SessionEnded {
            session_id: e.session_id,
            returned: e.returned,
            failed: e.failed,
        }
    }
}

impl From<BranchState> for BranchStatusResponse {
    fn from(
        BranchState {
            record: rec,
            warning,
        }: BranchState,
    ) -> Self {
        BranchStatusResponse {
            branch_id: Some(rec.id),
            status: rec.status.as_str().to_owned(),
            depth: Some(rec.depth),
            budget_used: Some(rec.tokens_used),
            budget_total: Some(rec.budget),
            description: Some(rec.description),
            created_at: Some(rec.created_at),
            completed_at: rec.completed_at,
            deadline: Some(rec.deadline),
            session_id: Some(rec.session_id),
            parent_branch: rec.parent_branch,
            reason: rec.reason,
            return_commit: rec.return_commit,
            warning,
            active_branches: None,
        }
    }
}

impl BranchStatusResponse {
    /// The status of `session` from its active branches, deepest first:
    /// the deepest in the top-level fields and all of them in
    /// `active_branches`; or `{branch_id: null, status: "No active branch
    /// found", active_branches: []}` (seed 004's answer, with the empty
    /// list).
    pub fn of_session(session: &SessionId, active: Vec<BranchState>) -> Self {
        let all: Vec<BranchStatusResponse> = active.into_iter().map(Into::into).collect();
        let Some(deepest) = all.first() else {
            return BranchStatusResponse {
                branch_id: None,
                status: "No active branch found".into(),
                depth: None,
                budget_used: None,
                budget_total: None,
                description: None,
                created_at: None,
                completed_at: None,
                deadline: None,
                session_id: Some(session.as_str().to_owned()),
                parent_branch: None,
                reason: None,
                return_commit: None,
                warning: None,
                active_branches: Some(Vec::new()),
            };
        };
        BranchStatusResponse {
            active_branches: Some(all.clone()),
            ..deepest.clone()
        }
    }
}

/// A memory a search found (`GET /v1/memories`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FoundMemory {
    /// How well it matched (higher is better; comparable within one
    /// search only).
    pub score: f64,
    /// The memory.
    #[serde(flatten)]
    pub memory: MemoryRecord,
}

/// `GET /v1/memories`: the tenant's memories matching `q`, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemorySearchResponse {
    /// Best first.
    pub memories: Vec<FoundMemory>,
}

impl From<Vec<ScoredMemory>> for MemorySearchResponse {
    fn from(found: Vec<ScoredMemory>) -> Self {
        MemorySearchResponse {
            memories: found
                .into_iter()
                .map(|s| FoundMemory {
                    score: s.score,
                    memory: s.memory.into(),
                })
                .collect(),
        }
    }
}

/// A memory left out of an injection because it matched a prompt-injection
/// pattern (SEC-005, `CTX_MEMORY_INJECTION_GUARD=block`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BlockedMemory {
    /// The memory.
    pub id: MemoryId,
    /// The patterns it matched.
    pub patterns: Vec<String>,
    /// From another principal or session than the new branch's.
    pub untrusted: bool,
    /// Where it came from.
    pub provenance: Provenance,
}

impl From<crate::branch::memories::BlockedMemory> for BlockedMemory {
    fn from(v: crate::branch::memories::BlockedMemory) -> Self {
        BlockedMemory {
            id: v.id,
            patterns: v.patterns,
            untrusted: v.untrusted,
            provenance: v.provenance.into(),
        }
    }
}

/// A memory injected into a new branch, as its creation reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InjectedMemory {
    /// The memory.
    pub id: MemoryId,
    /// Strategy or anti-pattern.
    pub kind: MemoryKind,
    /// Its title.
    pub title: String,
    /// Its confidence.
    pub confidence: f64,
    /// From another principal or session than the new branch's (SEC-005).
    pub untrusted: bool,
    /// The injection patterns it matched, injected anyway because
    /// `CTX_MEMORY_INJECTION_GUARD` is `log` (empty otherwise).
    pub patterns: Vec<String>,
    /// Its block's estimated tokens.
    pub tokens: u64,
    /// Where it came from.
    pub provenance: Provenance,
}

impl From<crate::branch::memories::InjectedMemory> for InjectedMemory {
    fn from(v: crate::branch::memories::InjectedMemory) -> Self {
        InjectedMemory {
            id: v.id,
            kind: v.kind.into(),
            title: v.title,
            confidence: v.confidence,
            untrusted: v.untrusted,
            patterns: v.patterns,
            tokens: v.tokens,
            provenance: v.provenance.into(),
        }
    }
}

/// What a memory teaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// How a task was done (from a completed branch).
    Strategy,
    /// What did not work (from a failed or timed-out branch).
    AntiPattern,
}

impl From<crate::branch::memories::MemoryKind> for MemoryKind {
    fn from(v: crate::branch::memories::MemoryKind) -> Self {
        match v {
            crate::branch::memories::MemoryKind::Strategy => MemoryKind::Strategy,
            crate::branch::memories::MemoryKind::AntiPattern => MemoryKind::AntiPattern,
        }
    }
}

impl From<MemoryKind> for crate::branch::memories::MemoryKind {
    fn from(v: MemoryKind) -> Self {
        match v {
            MemoryKind::Strategy => crate::branch::memories::MemoryKind::Strategy,
            MemoryKind::AntiPattern => crate::branch::memories::MemoryKind::AntiPattern,
        }
    }
}

/// A memory: what one ended branch teaches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryRecord {
    /// Its id (derived from the branch).
    pub id: MemoryId,
    /// Strategy or anti-pattern.
    pub kind: MemoryKind,
    /// The branch's task (its description).
    pub title: String,
    /// One line (or a few sentences) on what happened, by the summarizer.
    pub description: String,
    /// What the next branch should know: task, outcome, result or error,
    /// the last work (scrubbed of secrets).
    pub content: String,
    /// How much the extraction trusts it, 0 to 1 (see `docs/folding.md`).
    pub confidence: f64,
    /// Where it came from.
    pub provenance: Provenance,
    /// When it was extracted.
    pub created_at: DateTime<Utc>,
    /// Who wrote `description` (`extractive:v1`, `openai:<model>`, ...).
    pub extracted_by: String,
}

impl From<crate::branch::memories::MemoryRecord> for MemoryRecord {
    fn from(v: crate::branch::memories::MemoryRecord) -> Self {
        MemoryRecord {
            id: v.id,
            kind: v.kind.into(),
            title: v.title,
            description: v.description,
            content: v.content,
            confidence: v.confidence,
            provenance: v.provenance.into(),
            created_at: v.created_at,
            extracted_by: v.extracted_by,
        }
    }
}

/// Where a memory came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Provenance {
    /// The session of the branch.
    pub session_id: String,
    /// The principal that owned the session ("" when unknown).
    pub principal: String,
    /// The branch.
    pub branch_id: BranchId,
    /// The commit its end appended to its parent's chain.
    pub commit: CommitId,
}

impl From<crate::branch::memories::Provenance> for Provenance {
    fn from(v: crate::branch::memories::Provenance) -> Self {
        Provenance {
            session_id: v.session_id,
            principal: v.principal,
            branch_id: v.branch_id,
            commit: v.commit,
        }
    }
}

impl std::fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::branch::memories::MemoryKind::from(*self).fmt(f)
    }
}

operations! { BRANCH_OPERATIONS;
    /// Creates an isolated branch of a session: its chain holds only the
    /// description and the prompt. 429 with Retry-After past a creation limit.
    BranchCreate = branch_create: post "/v1/branches" in Branches,
        json BranchCreateRequest => BranchCreated {
        tag = "branches", responses((status = 201, description = "The new branch", body = BranchCreated),
                (status = 400, description = "A malformed request, or a branch nested too deep", body = ErrorBody),
                (status = 404, description = "The session or parent branch belongs to another caller, or does not exist", body = ErrorBody),
                (status = 409, description = "The parent branch ended", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody),
                (status = 429, description = "Past a creation limit; retry after `Retry-After`", body = ErrorBody,
                    headers(("retry-after" = u64, description = "Seconds to wait before retrying")))),
            security(("bearer" = []))
    }
    /// The active branches of a session (`session_id`): the deepest in the
    /// top-level fields and every one, deepest first, in `active_branches`; or
    /// `{branch_id: null, status: "No active branch found", active_branches: []}`.
    BranchStatusOfSession = branch_status_of_session: get "/v1/branches" in Branches,
        none => BranchStatusResponse {
        tag = "branches",
            params(("session_id" = SessionId, Query)),
            responses((status = 200, description = "The deepest active branch and every active branch, or none", body = BranchStatusResponse),
                (status = 400, description = "No `session_id`, one that is not a session id, or a malformed query string", body = ErrorBody),
                (status = 404, description = "The session belongs to another caller", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// A branch's status, depth, budget and times.
    GetBranchStatus = branch_status: get "/v1/branches/{br}" in Branches,
        none => BranchStatusResponse {
        tag = "branches",
            params(("br" = BranchId, Path)),
            responses((status = 200, description = "The branch", body = BranchStatusResponse),
                (status = 400, description = "`br` is not a branch id", body = ErrorBody),
                (status = 404, description = "No such branch of this caller", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Returns a branch: its active children first (deepest first), then its
    /// scrubbed message is appended to the parent's chain. With `status:
    /// failed` and an `error` the agent ends it early as failed, and the
    /// parent gets the error context. 409 when it already ended.
    BranchReturn = branch_return: post "/v1/branches/{br}/return" in Branches,
        json BranchReturnRequest => BranchReturned {
        tag = "branches", params(("br" = BranchId, Path)),
            responses((status = 200, description = "Returned", body = BranchReturned),
                (status = 400, description = "A malformed request", body = ErrorBody),
                (status = 404, description = "No such branch of this caller", body = ErrorBody),
                (status = 409, description = "The branch already ended", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Ends a session: force-returns its active branches within a bounded
    /// time; what does not finish is marked failed.
    SessionEnd = session_end: post "/v1/sessions/{id}/end" in Branches,
        none => SessionEnded {
        tag = "branches",
            params(("id" = SessionId, Path, description = "the session id")),
            responses((status = 200, description = "Its branches, returned or failed", body = SessionEnded),
                (status = 400, description = "`id` is not a session id", body = ErrorBody),
                (status = 404, description = "The session belongs to another caller", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The tenant's memories of ended branches matching `q` (any of its
    /// words; SQLite FTS5 embedded, BM25 over every memory on AWS), best
    /// first: strategies from completed branches, anti-patterns from failed
    /// or timed-out ones, each with its provenance.
    MemorySearch = memory_search: get "/v1/memories" in Branches,
        none => MemorySearchResponse {
        tag = "branches",
            params(
                ("q" = String, Query, min_length = 1, max_length = 1000, pattern = r"[^\s\x00-\x1f\x7f-\x9f]",
                    description = "What to look for: words, any of which may match (1 to 1,000 characters)"),
                ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "At most this many (default 10)"),
                ("min_confidence" = Option<f64>, Query, minimum = 0, maximum = 1, description = "Only memories at least this confident (default 0)"),
                ("kind" = Option<MemoryKind>, Query, description = "Only this kind")),
            responses((status = 200, description = "Best first", body = MemorySearchResponse),
                (status = 400, description = "No `q`, a blank or over-long one, or `limit`, `min_confidence` or `kind` out of range (the field named)", body = ErrorBody)),
            security(("bearer" = []))
    }
}
