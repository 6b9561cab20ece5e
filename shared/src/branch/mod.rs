//! Context folding: an agent runs a subtask in an isolated branch (`br-…`)
//! with a token budget, a deadline and a depth limit, and only the
//! (secret-scrubbed) result returns to its parent's context.
//!
//! A branch's context is its own chain, named by the ref `branches/<br-…>`,
//! whose root commit holds only the description and the prompt. A return
//! appends the scrubbed message to the parent's chain (the ref
//! `sessions/<session_id>` for a first-level branch, `branches/<parent>`
//! for a nested one) as one delta commit with the trigger `branch_return`.
//!
//! The guides call the feature context folding (docs/folding.md); the
//! code names it by what it makes, branches: this module,
//! `crate::service::branches`, `crate::api::branches`,
//! `crate::wire::branches`, [`BranchStore`], [`BranchConfig`] and the
//! [`Branching`] bundle.
//!
//! # Layout
//! - this file: the branch record, the [`BranchStore`] trait with the rules
//!   every backend shares ([`check_limits`], [`not_active`], ...), the
//!   configuration and the [`Branching`] bundle a service is given.
//! - the values the operations (in `crate::service::branches`) take and
//!   return: [`NewBranch`], [`CreatedBranch`], [`ReturnedBranch`],
//!   [`BranchState`], [`EndedSession`]; their request and response bodies
//!   are `crate::wire::branches`.
//! - [`scrub`]: the secret scrubber.
//! - [`timer`]: deadlines: the [`BranchTimer`] trait (the embedded tokio
//!   timer is `crate::service::TokioTimer`, AWS mode's Step Functions one
//!   `crate::store::aws::sfn`).
//!
//! The store backends live with the other stores of their backend:
//! `store::memory::MemoryBranchStore`, `store::local::SqliteBranchStore`,
//! `store::aws::DynamoBranchStore`; their conformance suite is
//! `store::conformance::branches`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::clock::IdSource;
use crate::error::{Error, Result};
use crate::id::{BranchId, CommitId, RefName, SessionId, TenantId};

pub mod memories;
#[cfg(any(test, feature = "conformance"))]
pub mod scenarios;
pub mod scrub;
pub mod timer;

pub use memories::{MemoryQuery, MemoryRecord, ScoredMemory};
pub use scrub::{RuleScrubber, Scrubbed, Scrubber};
pub use timer::{BranchTimer, NoTimer};

/// Where a branch is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchStatus {
    /// Recorded, not yet running (never stored by this implementation: a
    /// branch is active from the moment its record exists).
    Created,
    /// Running: checkpoints into it count against its budget.
    Active,
    /// Returned (by the agent, by its parent's return, or at 100% budget).
    Completed,
    /// Its deadline passed before it returned.
    Timeout,
    /// Ended by an error or by session end without finishing.
    Failed,
}

impl BranchStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BranchStatus::Created => "created",
            BranchStatus::Active => "active",
            BranchStatus::Completed => "completed",
            BranchStatus::Timeout => "timeout",
            BranchStatus::Failed => "failed",
        }
    }

    /// Whether the branch has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            BranchStatus::Completed | BranchStatus::Timeout | BranchStatus::Failed
        )
    }
}

impl std::fmt::Display for BranchStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchRecord {
    /// Its id.
    pub id: BranchId,
    /// The session it belongs to (a nested branch keeps its root session).
    pub session_id: String,
    /// The branch it was created from; none for a first-level branch.
    pub parent_branch: Option<BranchId>,
    /// 1 for a first-level branch (the session itself is depth 0).
    pub depth: u32,
    /// Where it is in its life.
    pub status: BranchStatus,
    /// What the subtask is.
    pub description: String,
    /// Tokens it may checkpoint.
    pub budget: u64,
    /// Tokens checkpointed into it so far (counted by the server).
    pub tokens_used: u64,
    /// The root commit of its chain (description + prompt).
    pub root_commit: CommitId,
    /// The principal that owns its session ("" when unknown).
    pub owner: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// When it ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// Why it ended, when it did not end by its own return.
    pub reason: Option<String>,
    /// The commit its return appended to the parent's chain.
    pub return_commit: Option<CommitId>,
    /// The handle of its deadline timer (a Step Functions execution ARN).
    pub timer: Option<String>,
}

impl BranchRecord {
    /// The ref naming the branch's chain: `branches/<br-…>`.
    pub fn chain_ref(&self) -> RefName {
        branch_ref(&self.id)
    }
}

/// The ref of a branch's chain.
pub fn branch_ref(id: &BranchId) -> RefName {
    format!("branches/{id}")
        .parse()
        .expect("branches/ and a br- id is a valid ref name")
}

/// The branch a ref names, if it is `branches/<br-…>`.
pub fn branch_of_ref(name: &RefName) -> Option<BranchId> {
    name.as_str().strip_prefix("branches/")?.parse().ok()
}

/// A branch to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBranch {
    /// The session it belongs to (its chain is the ref
    /// `sessions/<session_id>`).
    pub session_id: SessionId,
    /// What the subtask is.
    pub description: String,
    /// The subtask's instructions.
    pub prompt: Option<String>,
    /// Tokens it may checkpoint (the configured default when absent; capped).
    pub budget: Option<u64>,
    /// Seconds until it times out (the configured default when absent;
    /// capped).
    pub timeout_seconds: Option<u64>,
    /// The active branch to nest under (default: the session itself).
    pub parent_branch: Option<BranchId>,
    /// Prepend the memories relevant to the description (FR-005).
    pub inject_memories: bool,
}

/// A branch just created.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedBranch {
    /// Its id.
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
    /// The ref of its chain.
    pub chain_ref: String,
    /// The memories prepended to its root (with `inject_memories`).
    pub memories: Vec<memories::InjectedMemory>,
    /// Memories left out for matching a prompt-injection pattern.
    pub memories_blocked: Vec<memories::BlockedMemory>,
}

/// A branch returned by its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnedBranch {
    /// False when the agent returned the branch as failed (FR-008).
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

/// A branch as its status shows it: the record, and the budget warning of
/// an active branch at 80% of its budget or more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchState {
    /// The stored branch.
    pub record: BranchRecord,
    /// The budget warning, if any.
    pub warning: Option<String>,
}

/// What a session end did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedSession {
    /// The session.
    pub session_id: String,
    /// Branches force-returned (status completed), deepest first.
    pub returned: Vec<BranchId>,
    /// Branches that did not finish in time or errored (status failed).
    pub failed: Vec<BranchId>,
}

/// An active branch of a session, as its listing returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveBranch {
    /// Its id.
    pub id: BranchId,
    /// Its depth.
    pub depth: u32,
    /// Its parent branch.
    pub parent_branch: Option<BranchId>,
}

/// How a branch ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// The terminal status.
    pub status: BranchStatus,
    /// When.
    pub at: DateTime<Utc>,
    /// Why, when not by its own return.
    pub reason: Option<String>,
}

/// Limits on branch creation, enforced atomically by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimits {
    /// Active branches per session.
    pub active_per_session: u32,
    /// Active branches per tenant.
    pub active_per_tenant: u32,
    /// Creations per session per (fixed, UTC) minute.
    pub creations_per_minute: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            active_per_session: 10,
            active_per_tenant: 100,
            creations_per_minute: 5,
        }
    }
}

/// Seconds a caller over a concurrency limit is told to wait.
pub const CONCURRENCY_RETRY_AFTER: u64 = 5;

/// The start of the minute window `now` falls in, in seconds since the epoch.
pub fn minute_window(now: DateTime<Utc>) -> i64 {
    now.timestamp().div_euclid(60) * 60
}

/// Seconds until the minute window of `now` ends.
pub fn seconds_to_next_window(now: DateTime<Utc>) -> u64 {
    let next = minute_window(now) + 60;
    u64::try_from(next - now.timestamp()).unwrap_or(1).max(1)
}

/// A limit on branch creation (see [`RateLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`RateLimits::active_per_session`].
    ActivePerSession,
    /// [`RateLimits::active_per_tenant`].
    ActivePerTenant,
    /// [`RateLimits::creations_per_minute`].
    CreationsPerMinute,
}

/// The `RateLimited` error of creating `rec` over `limit`. `count` is what
/// the store counted, when it knows (a store whose conditional write failed
/// knows only that the limit was reached).
pub fn over_limit(
    limit: Limit,
    rec: &BranchRecord,
    limits: &RateLimits,
    count: Option<u64>,
) -> Error {
    let max = match limit {
        Limit::ActivePerSession => limits.active_per_session,
        Limit::ActivePerTenant => limits.active_per_tenant,
        Limit::CreationsPerMinute => limits.creations_per_minute,
    };
    let (n, bound) = match count {
        Some(n) => (n, format!("at most {max}")),
        None => (u64::from(max), "the most allowed".to_owned()),
    };
    match limit {
        Limit::ActivePerSession => Error::rate_limited(
            format!(
                "session {:?} already has {n} active branches ({bound})",
                rec.session_id
            ),
            CONCURRENCY_RETRY_AFTER,
        ),
        Limit::ActivePerTenant => Error::rate_limited(
            format!("the tenant already has {n} active branches ({bound})"),
            CONCURRENCY_RETRY_AFTER,
        ),
        Limit::CreationsPerMinute => Error::rate_limited(
            format!(
                "session {:?} created {n} branches this minute ({bound})",
                rec.session_id
            ),
            seconds_to_next_window(rec.created_at),
        ),
    }
}

/// The check every store makes before creating `rec`, given its counts: the
/// session's and the tenant's active branches and the session's creations
/// in `rec`'s minute window.
///
/// # Errors
/// `RateLimited` ([`over_limit`]) naming the first limit reached.
pub fn check_limits(
    rec: &BranchRecord,
    limits: &RateLimits,
    session_active: u64,
    tenant_active: u64,
    window_count: u64,
) -> Result<()> {
    let checks = [
        (
            Limit::ActivePerSession,
            session_active,
            limits.active_per_session,
        ),
        (
            Limit::ActivePerTenant,
            tenant_active,
            limits.active_per_tenant,
        ),
        (
            Limit::CreationsPerMinute,
            window_count,
            limits.creations_per_minute,
        ),
    ];
    for (limit, count, max) in checks {
        if count >= u64::from(max) {
            return Err(over_limit(limit, rec, limits, Some(count)));
        }
    }
    Ok(())
}

/// The `Conflict` of an operation on a branch that is no longer active; its
/// `current` is the branch's status.
pub fn not_active(id: &BranchId, status: BranchStatus) -> Error {
    Error::conflict(
        format!("branch {id} is {status}, not active"),
        Some(status.as_str().to_owned()),
    )
    .with_field("branch_id")
}

/// The `Conflict` of creating a branch whose id exists.
pub fn branch_exists(id: &BranchId) -> Error {
    Error::conflict(format!("branch {id} exists"), None)
}

/// The `NotFound` of a branch that does not exist (in this tenant).
pub fn branch_not_found(id: &BranchId) -> Error {
    Error::not_found(format!("branch {id}"))
}

/// Branch state: records, per-session and per-tenant counts and creation
/// windows. Every method is one request to the store (a transaction where
/// several items change), so limits hold across concurrent processes.
#[async_trait]
pub trait BranchStore: Send + Sync + 'static {
    /// Records a new active branch if every limit allows it: fewer than
    /// `active_per_session` active branches in its session, fewer than
    /// `active_per_tenant` in the tenant, fewer than
    /// `creations_per_minute` creations in the session's current minute
    /// window. Also records the session's owner (`rec.owner`) if the
    /// session has none.
    ///
    /// # Errors
    /// `RateLimited` (with `retry_after`) naming the limit; `Conflict` if
    /// the id exists; `Unavailable`.
    async fn create_branch(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        limits: &RateLimits,
    ) -> Result<()>;

    /// One branch.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>>;

    /// The active branches of a session.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn active_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<ActiveBranch>>;

    /// The principal that owns a session (set by its first branch).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn session_owner(&self, tenant: &TenantId, session: &str) -> Result<Option<String>>;

    /// Adds `tokens` to an active branch's usage; returns the record after.
    ///
    /// # Errors
    /// `Conflict` (with the current status) when the branch is not active;
    /// `NotFound`; `Unavailable`.
    async fn add_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<BranchRecord>;

    /// Moves an active branch to a terminal status and releases its slot in
    /// the session's and the tenant's counts, exactly once.
    ///
    /// # Errors
    /// `Conflict` (with the current status) when it is not active;
    /// `NotFound`; `Unavailable`.
    async fn finish_branch(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        finish: &Finish,
    ) -> Result<BranchRecord>;

    /// Records the timer handle and/or the return commit of a branch.
    ///
    /// # Errors
    /// `NotFound`; `Unavailable`.
    async fn annotate(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        timer: Option<&str>,
        return_commit: Option<&CommitId>,
    ) -> Result<()>;

    /// Every active branch of every tenant with its deadline: what the
    /// embedded server's start-up sweep reads. Stores without a global
    /// listing (DynamoDB, where Step Functions keeps the deadlines) return
    /// `None`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn all_active(&self) -> Result<Option<Vec<(TenantId, BranchId, DateTime<Utc>)>>>;

    /// Every branch of a session (nested ones too: they keep their root
    /// session), in any status.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn session_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<BranchId>>;

    /// Removes a branch's record (an active one is finished first, by the
    /// caller, so that the counts are released); false when there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<bool>;

    /// Removes a session's branch bookkeeping (its owner and creation
    /// counts), once its branches are removed; false when there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<bool>;

    /// Stores a memory, replacing the one of its id. `delete_branch` of its
    /// branch removes it (its `created_at` is the branch's `completed_at`,
    /// which a backend may key it by).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn put_memory(&self, tenant: &TenantId, memory: &MemoryRecord) -> Result<()>;

    /// The tenant's newest memories, newest first, at most `max`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn recent_memories(&self, tenant: &TenantId, max: usize) -> Result<Vec<MemoryRecord>>;

    /// The memories matching `q`, best first, among every memory of the
    /// tenant: by default [`memories::rank`] over all of them (the memory
    /// store's, which holds them in memory anyway); SQLite asks FTS5, and
    /// DynamoDB streams them past a [`memories::Ranker`].
    ///
    /// # Errors
    /// `Unavailable`.
    async fn search_memories(
        &self,
        tenant: &TenantId,
        q: &MemoryQuery,
    ) -> Result<Vec<ScoredMemory>> {
        let recent = self.recent_memories(tenant, usize::MAX).await?;
        Ok(memories::rank(q, recent))
    }
}

/// Whether branches check who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// A branch is created, returned or read only by the tenant and the
    /// principal that own its session.
    #[default]
    Strict,
    /// Only the tenant is checked (single-user embedded use).
    Permissive,
}

impl std::str::FromStr for Validation {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "strict" => Ok(Validation::Strict),
            "permissive" => Ok(Validation::Permissive),
            other => Err(crate::error::Error::invalid(
                "validation",
                format!("session validation {other:?} is not \"strict\" or \"permissive\""),
            )),
        }
    }
}

/// Context-folding settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchConfig {
    /// The deepest branch (the session is 0, its first branch 1).
    pub max_depth: u32,
    /// The budget when none is asked for.
    pub default_budget: u64,
    /// The largest budget granted (larger requests are capped).
    pub max_budget: u64,
    /// The timeout when none is asked for, in seconds.
    pub default_timeout_secs: u64,
    /// The longest timeout, in seconds.
    pub max_timeout_secs: u64,
    /// Creation limits.
    pub limits: RateLimits,
    /// Who may touch a session's branches.
    pub validation: Validation,
    /// How long session end waits for its branches before marking the rest
    /// failed.
    pub session_end_timeout: Duration,
    /// A session whose active branches saw no activity for this long has
    /// them force-returned, as at session end; `None`: never.
    pub session_idle: Option<Duration>,
    /// Memory extraction and injection.
    pub memory: memories::MemoryConfig,
}

/// How long a session's active branches may see nothing before they are
/// force-returned as at session end (`CTX_SESSION_IDLE_SECS`): under the
/// default branch timeout (300 s), over a turn's usual length.
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 120;

/// The longest timeout a branch may ask for, in seconds (what the API's
/// document says of `timeout_seconds`).
pub const MAX_TIMEOUT_SECS: u64 = 600;

impl Default for BranchConfig {
    fn default() -> Self {
        BranchConfig {
            max_depth: 3,
            default_budget: 8192,
            max_budget: 32768,
            default_timeout_secs: 300,
            max_timeout_secs: MAX_TIMEOUT_SECS,
            limits: RateLimits::default(),
            validation: Validation::Strict,
            session_end_timeout: Duration::from_secs(30),
            session_idle: Some(Duration::from_secs(DEFAULT_SESSION_IDLE_SECS)),
            memory: memories::MemoryConfig::default(),
        }
    }
}

/// Everything context folding needs beside the commit stores.
#[derive(Clone)]
pub struct Branching {
    /// Branch records and counts.
    pub store: Arc<dyn BranchStore>,
    /// Deadlines.
    pub timer: Arc<dyn BranchTimer>,
    /// The secret scrubber every returned message passes through.
    pub scrubber: Arc<dyn Scrubber>,
    /// Randomness for branch ids.
    pub ids: Arc<dyn IdSource>,
    /// Settings.
    pub config: BranchConfig,
}
