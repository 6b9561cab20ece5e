//! The context-folding operations on [`Service`]: create, return, status,
//! session end, expiry, the start-up sweep, and the budget hook every
//! checkpoint into a branch's chain goes through.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    ActiveBranch, BranchRecord, BranchStatus, Finish, Folding, Validation, branch_of_ref,
    branch_ref,
};
use crate::auth::Caller;
use crate::commit::{Commit, Tags, Trigger, check_text, limits};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::id::{BranchId, CommitId, Principal, RefName, TenantId};
use crate::service::{CheckpointRequest, Service};
use crate::store::RefMove;

/// The longest description, in characters.
pub const MAX_DESCRIPTION: usize = 500;
/// The longest prompt, in characters.
pub const MAX_PROMPT: usize = 10_000;
/// The longest returned message, in characters.
pub const MAX_MESSAGE: usize = 50_000;
/// The share of the budget past which responses carry a warning.
pub const WARN_PERCENT: u64 = 80;

/// `POST /v1/branches`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchCreateRequest {
    /// The session the branch belongs to (its chain is the ref
    /// `sessions/<session_id>`).
    pub session_id: String,
    /// What the subtask is (at most 500 characters).
    pub description: String,
    /// The subtask's instructions (at most 10,000 characters).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Tokens the branch may checkpoint (default 8192, capped at 32768).
    #[serde(default)]
    pub budget: Option<u64>,
    /// Seconds until it times out (default 300, capped at 600).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// The active branch to nest under (default: the session itself).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub parent_branch: Option<BranchId>,
}

/// What `branch_create` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BranchCreated {
    /// The new branch.
    #[schema(value_type = String)]
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
}

/// `POST /v1/branches/{br}/return`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchReturnRequest {
    /// The result to hand back (at most 50,000 characters); secrets in it
    /// are scrubbed.
    pub message: String,
}

/// What `branch_return` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BranchReturned {
    /// Always true (failures are errors).
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
    #[schema(value_type = Vec<String>)]
    pub force_returned: Vec<BranchId>,
}

/// What `branch_status` answers (the seed's shape, plus a few fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BranchStatusResponse {
    /// The branch; null when a session has no active branch.
    #[schema(value_type = Option<String>)]
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
    #[schema(value_type = Option<String>)]
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
}

/// What session end answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionEnded {
    /// The session.
    pub session_id: String,
    /// Branches force-returned (status completed), deepest first.
    #[schema(value_type = Vec<String>)]
    pub returned: Vec<BranchId>,
    /// Branches that did not finish in time or errored (status failed).
    #[schema(value_type = Vec<String>)]
    pub failed: Vec<BranchId>,
}

/// What an expiry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expired {
    /// The branch was active and is now `timeout`.
    TimedOut,
    /// It had already ended (returned, or expired before): nothing done.
    AlreadyEnded,
    /// Its deadline has not come yet: nothing done.
    NotDue,
    /// No such branch.
    Unknown,
}

/// What the start-up sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Branches whose deadline had passed, now `timeout`.
    pub expired: usize,
    /// Branches still running whose timers were armed again.
    pub rearmed: usize,
}

/// What a checkpoint into a branch's chain reports beside the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetNotice {
    /// The branch.
    pub branch: BranchId,
    /// Tokens used after the checkpoint.
    pub used: u64,
    /// The budget.
    pub budget: u64,
    /// The warning text (80%+), or the notice that it was force-returned.
    pub message: String,
}

/// Removes control characters (keeping newlines and tabs when `multiline`).
pub fn strip_controls(s: &str, multiline: bool) -> String {
    s.chars()
        .filter(|c| !c.is_control() || (multiline && (*c == '\n' || *c == '\t')))
        .collect()
}

fn check_len(field: &str, value: &str, max: usize) -> Result<()> {
    let n = value.chars().count();
    if n > max {
        return Err(Error::invalid(
            field,
            format!("{field} is {n} characters; at most {max} are allowed"),
        ));
    }
    Ok(())
}

fn session_ref(session: &str) -> Result<RefName> {
    format!("sessions/{session}").parse().map_err(|_| {
        Error::invalid(
            "session_id",
            format!(
                "session_id {session:?} cannot name a ref: use letters, digits, '-', '_', '.', '@'"
            ),
        )
    })
}

fn warning(rec: &BranchRecord) -> Option<String> {
    (rec.budget > 0 && rec.tokens_used * 100 >= rec.budget * WARN_PERCENT).then(|| {
        format!(
            "branch {} has used {} of its {} budget tokens ({}%)",
            rec.id,
            rec.tokens_used,
            rec.budget,
            rec.tokens_used * 100 / rec.budget
        )
    })
}

fn status_of(rec: &BranchRecord) -> BranchStatusResponse {
    BranchStatusResponse {
        branch_id: Some(rec.id),
        status: rec.status.as_str().to_owned(),
        depth: Some(rec.depth),
        budget_used: Some(rec.tokens_used),
        budget_total: Some(rec.budget),
        description: Some(rec.description.clone()),
        created_at: Some(rec.created_at),
        completed_at: rec.completed_at,
        deadline: Some(rec.deadline),
        session_id: Some(rec.session_id.clone()),
        parent_branch: rec.parent_branch,
        reason: rec.reason.clone(),
        return_commit: rec.return_commit,
        warning: if rec.status == BranchStatus::Active {
            warning(rec)
        } else {
            None
        },
    }
}

/// The active branches below `root` (not `root` itself), deepest first.
fn descendants(active: &[ActiveBranch], root: &BranchId) -> Vec<ActiveBranch> {
    let mut inside: HashSet<BranchId> = HashSet::from([*root]);
    let mut sorted: Vec<&ActiveBranch> = active.iter().collect();
    sorted.sort_by_key(|b| b.depth);
    let mut out = Vec::new();
    for b in sorted {
        if b.parent_branch.is_some_and(|p| inside.contains(&p)) {
            inside.insert(b.id);
            out.push(b.clone());
        }
    }
    out.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
    out
}

const BRANCH_PRINCIPAL: &str = "ctx-branch";
const APPEND_ATTEMPTS: usize = 8;

impl Service {
    fn folding_or_err(&self) -> Result<&Folding> {
        self.folding()
            .ok_or_else(|| Error::unavailable("context folding is not configured on this server"))
    }

    fn owner_of(&self, caller: &Caller) -> String {
        caller.principal.clone().unwrap_or_default()
    }

    fn principal_of(caller: &Caller) -> Principal {
        caller
            .principal
            .as_deref()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                BRANCH_PRINCIPAL
                    .parse()
                    .expect("ctx-branch is a valid principal")
            })
    }

    /// The branch, if the caller may see it (404 otherwise, as for data
    /// that does not exist).
    async fn visible_branch(&self, caller: &Caller, id: &BranchId) -> Result<BranchRecord> {
        let f = self.folding_or_err()?;
        let rec = f
            .store
            .get_branch(&caller.tenant, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("branch {id}")).with_field("branch_id"))?;
        if f.config.validation == Validation::Strict && rec.owner != self.owner_of(caller) {
            return Err(Error::not_found(format!("branch {id}")).with_field("branch_id"));
        }
        Ok(rec)
    }

    async fn check_session_owner(&self, caller: &Caller, session: &str) -> Result<()> {
        let f = self.folding_or_err()?;
        if f.config.validation == Validation::Permissive {
            return Ok(());
        }
        match f.store.session_owner(&caller.tenant, session).await? {
            Some(owner) if owner != self.owner_of(caller) => {
                Err(Error::not_found(format!("session {session:?}")).with_field("session_id"))
            }
            _ => Ok(()),
        }
    }

    /// `branch_create`: a new isolated branch whose chain holds only the
    /// description and the prompt.
    ///
    /// # Errors
    /// `Invalid` for bad or over-long fields and for exceeding the depth
    /// limit; `NotFound` for a session or parent branch the caller does
    /// not own; `Conflict` for an ended parent; `RateLimited` past a limit.
    pub async fn branch_create(
        &self,
        caller: &Caller,
        req: BranchCreateRequest,
    ) -> Result<BranchCreated> {
        let f = self.folding_or_err()?.clone();
        let cfg = &f.config;
        let tenant = &caller.tenant;
        let session = strip_controls(req.session_id.trim(), false);
        if session.is_empty() {
            return Err(Error::invalid("session_id", "session_id is empty"));
        }
        check_text("session_id", &session, limits::SHORT_TEXT)?;
        session_ref(&session)?;
        let description = strip_controls(req.description.trim(), false);
        if description.is_empty() {
            return Err(Error::invalid("description", "description is empty"));
        }
        check_len("description", &description, MAX_DESCRIPTION)?;
        let prompt = strip_controls(req.prompt.as_deref().unwrap_or(""), true);
        check_len("prompt", &prompt, MAX_PROMPT)?;
        let budget = match req.budget {
            Some(0) => return Err(Error::invalid("budget", "budget must be at least 1 token")),
            Some(b) => b.min(cfg.max_budget),
            None => cfg.default_budget.min(cfg.max_budget),
        };
        let timeout = match req.timeout_seconds {
            Some(0) => {
                return Err(Error::invalid(
                    "timeout_seconds",
                    "timeout_seconds must be at least 1",
                ));
            }
            Some(t) => t.min(cfg.max_timeout_secs),
            None => cfg.default_timeout_secs.min(cfg.max_timeout_secs),
        };
        self.check_session_owner(caller, &session).await?;
        let depth = match &req.parent_branch {
            None => 1,
            Some(p) => {
                let parent = self.visible_branch(caller, p).await.map_err(|e| {
                    if e.kind == ErrorKind::NotFound {
                        e.with_field("parent_branch")
                    } else {
                        e
                    }
                })?;
                if parent.session_id != session {
                    return Err(Error::invalid(
                        "parent_branch",
                        format!(
                            "parent branch {p} belongs to session {:?}, not {session:?}",
                            parent.session_id
                        ),
                    ));
                }
                if parent.status != BranchStatus::Active {
                    return Err(
                        crate::branch::not_active(p, parent.status).with_field("parent_branch")
                    );
                }
                parent.depth + 1
            }
        };
        if depth > cfg.max_depth {
            return Err(Error::invalid(
                "parent_branch",
                format!(
                    "a branch at depth {depth} exceeds the maximum depth {} (the session is depth 0)",
                    cfg.max_depth
                ),
            ));
        }
        let mut bytes = [0u8; 16];
        f.ids.fill(&mut bytes);
        let id = BranchId::from_bytes(bytes);
        let now = self.clock().now();
        let deadline = now + chrono::Duration::seconds(timeout as i64);
        let text = if prompt.is_empty() {
            description.clone()
        } else {
            format!("{description}\n\n{prompt}")
        };
        let (root, _) = self
            .checkpoint_unguarded(
                tenant,
                CheckpointRequest {
                    session_id: Some(id.to_string()),
                    checkpoint: Trigger::Explicit,
                    summary: Some(description.clone()),
                    created_at: Some(now),
                    tags: Some(Tags::from([
                        ("branch".to_owned(), id.to_string()),
                        ("session".to_owned(), session.clone()),
                    ])),
                    ..CheckpointRequest::new(
                        Self::principal_of(caller),
                        "ctx-branch",
                        FormatId::raw(),
                        text,
                    )
                },
            )
            .await?;
        let rec = BranchRecord {
            id,
            session_id: session,
            parent_branch: req.parent_branch,
            depth,
            status: BranchStatus::Active,
            description,
            budget,
            tokens_used: 0,
            root_commit: root.id,
            owner: self.owner_of(caller),
            created_at: now,
            deadline,
            completed_at: None,
            reason: None,
            return_commit: None,
            timer: None,
        };
        f.store.create_branch(tenant, &rec, &cfg.limits).await?;
        self.stores()
            .meta
            .cas_ref(tenant, &rec.chain_ref(), None, &root.id, now)
            .await?;
        match f.timer.start(tenant, &id, deadline).await {
            Ok(Some(handle)) => f.store.annotate(tenant, &id, Some(&handle), None).await?,
            Ok(None) => {}
            Err(e) => {
                // Without a timer the branch could outlive its deadline:
                // end it now rather than leave it unbounded.
                let _ = self
                    .end_branch(
                        tenant,
                        &rec,
                        BranchStatus::Failed,
                        Some(format!("its deadline timer could not start: {}", e.message)),
                        None,
                    )
                    .await;
                return Err(e);
            }
        }
        Ok(BranchCreated {
            branch_id: id,
            budget_allocated: budget,
            depth,
            timeout_seconds: timeout,
            deadline,
            root_commit: root.id,
            chain_ref: rec.chain_ref().to_string(),
        })
    }

    /// `branch_return`: force-returns the branch's active children (deepest
    /// first), scrubs the message and appends it to the parent's chain as
    /// one `branch_return` commit.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when it already ended; `Invalid` for an
    /// over-long message; the scrubber's error (nothing is appended).
    pub async fn branch_return(
        &self,
        caller: &Caller,
        id: &BranchId,
        req: BranchReturnRequest,
    ) -> Result<BranchReturned> {
        let f = self.folding_or_err()?.clone();
        let tenant = &caller.tenant;
        let message = strip_controls(&req.message, true);
        check_len("message", &message, MAX_MESSAGE)?;
        let rec = self.visible_branch(caller, id).await?;
        if rec.status != BranchStatus::Active {
            return Err(Error::conflict(
                format!("branch {id} already ended: it is {}", rec.status),
                Some(rec.status.as_str().to_owned()),
            )
            .with_field("branch_id"));
        }
        // Fail closed: no scrub, no return.
        let scrubbed = f.scrubber.scrub(&message)?;
        let active = f.store.active_branches(tenant, &rec.session_id).await?;
        let mut force_returned = Vec::new();
        for child in descendants(&active, id) {
            let Some(child_rec) = f.store.get_branch(tenant, &child.id).await? else {
                continue;
            };
            match self
                .end_branch(
                    tenant,
                    &child_rec,
                    BranchStatus::Completed,
                    Some("parent returning".into()),
                    None,
                )
                .await
            {
                Ok(_) => force_returned.push(child.id),
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        let (done, commit) = self
            .end_branch(
                tenant,
                &rec,
                BranchStatus::Completed,
                None,
                Some(scrubbed.text.clone()),
            )
            .await?;
        Ok(BranchReturned {
            success: true,
            tokens_used: done.tokens_used,
            message: scrubbed.text,
            commit,
            redactions: scrubbed.redactions,
            force_returned,
        })
    }

    /// `branch_status` by id.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn branch_status(
        &self,
        caller: &Caller,
        id: &BranchId,
    ) -> Result<BranchStatusResponse> {
        Ok(status_of(&self.visible_branch(caller, id).await?))
    }

    /// `branch_status` by session: its active branch (the deepest), or
    /// `{branch_id: null, status: "No active branch found"}`.
    ///
    /// # Errors
    /// `NotFound` for another principal's session (strict mode).
    pub async fn branch_status_of_session(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<BranchStatusResponse> {
        let f = self.folding_or_err()?;
        self.check_session_owner(caller, session).await?;
        let mut active = f.store.active_branches(&caller.tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        for a in active {
            if let Some(rec) = f.store.get_branch(&caller.tenant, &a.id).await?
                && rec.status == BranchStatus::Active
            {
                return Ok(status_of(&rec));
            }
        }
        Ok(BranchStatusResponse {
            branch_id: None,
            status: "No active branch found".into(),
            depth: None,
            budget_used: None,
            budget_total: None,
            description: None,
            created_at: None,
            completed_at: None,
            deadline: None,
            session_id: Some(session.to_owned()),
            parent_branch: None,
            reason: None,
            return_commit: None,
            warning: None,
        })
    }

    /// Session end: force-returns every active branch of the session,
    /// deepest first, within the configured time; what does not finish in
    /// time (or errors) is marked failed, with its error context appended
    /// to its parent.
    ///
    /// # Errors
    /// `NotFound` for another principal's session (strict mode).
    pub async fn session_end(&self, caller: &Caller, session: &str) -> Result<SessionEnded> {
        let f = self.folding_or_err()?.clone();
        let tenant = &caller.tenant;
        self.check_session_owner(caller, session).await?;
        let mut active = f.store.active_branches(tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let limit = chrono::Duration::from_std(f.config.session_end_timeout)
            .unwrap_or(chrono::Duration::MAX);
        let deadline = self.clock().now() + limit;
        let started = tokio::time::Instant::now();
        let mut out = SessionEnded {
            session_id: session.to_owned(),
            returned: Vec::new(),
            failed: Vec::new(),
        };
        for a in active {
            let Some(rec) = f.store.get_branch(tenant, &a.id).await? else {
                continue;
            };
            if rec.status != BranchStatus::Active {
                continue;
            }
            let left = f
                .config
                .session_end_timeout
                .saturating_sub(started.elapsed());
            let in_time = self.clock().now() < deadline && !left.is_zero();
            let result = if in_time {
                tokio::time::timeout(
                    left,
                    self.end_branch(
                        tenant,
                        &rec,
                        BranchStatus::Completed,
                        Some("session ended".into()),
                        None,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(Error::unavailable("session end ran out of time")))
            } else {
                Err(Error::unavailable("session end ran out of time"))
            };
            match result {
                Ok(_) => out.returned.push(rec.id),
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => {
                    let reason = format!("session ended before it finished: {}", e.message);
                    match self
                        .end_branch(tenant, &rec, BranchStatus::Failed, Some(reason), None)
                        .await
                    {
                        Ok(_) => out.failed.push(rec.id),
                        Err(e2) if e2.kind == ErrorKind::Conflict => {
                            // It ended meanwhile (the timed-out return won).
                            out.returned.push(rec.id);
                        }
                        Err(e2) => return Err(e2),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Expires a branch whose deadline has passed: its active children are
    /// force-returned, then it ends with status timeout and what it has is
    /// appended to its parent. Idempotent.
    ///
    /// # Errors
    /// `Unavailable` when storage fails (the caller retries).
    pub async fn branch_expire(&self, tenant: &TenantId, id: &BranchId) -> Result<Expired> {
        let f = self.folding_or_err()?.clone();
        let Some(rec) = f.store.get_branch(tenant, id).await? else {
            return Ok(Expired::Unknown);
        };
        if rec.status != BranchStatus::Active {
            return Ok(Expired::AlreadyEnded);
        }
        // A timer may fire a little early by this clock: allow 1 s.
        if self.clock().now() + chrono::Duration::seconds(1) < rec.deadline {
            return Ok(Expired::NotDue);
        }
        let active = f.store.active_branches(tenant, &rec.session_id).await?;
        for child in descendants(&active, id) {
            if let Some(c) = f.store.get_branch(tenant, &child.id).await? {
                match self
                    .end_branch(
                        tenant,
                        &c,
                        BranchStatus::Completed,
                        Some("parent returning".into()),
                        None,
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.kind == ErrorKind::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let secs = (rec.deadline - rec.created_at).num_seconds();
        match self
            .end_branch(
                tenant,
                &rec,
                BranchStatus::Timeout,
                Some(format!("timed out after {secs} s")),
                None,
            )
            .await
        {
            Ok(_) => Ok(Expired::TimedOut),
            Err(e) if e.kind == ErrorKind::Conflict => Ok(Expired::AlreadyEnded),
            Err(e) => Err(e),
        }
    }

    /// The embedded server's start-up sweep: expires every branch whose
    /// deadline passed while it was down, and re-arms the timers of the
    /// rest.
    ///
    /// # Errors
    /// `Unavailable` when storage fails.
    pub async fn branch_sweep(&self) -> Result<Sweep> {
        let f = self.folding_or_err()?.clone();
        let mut sweep = Sweep::default();
        let Some(all) = f.store.all_active().await? else {
            return Ok(sweep);
        };
        let now = self.clock().now();
        for (tenant, id, deadline) in all {
            if deadline <= now {
                if self.branch_expire(&tenant, &id).await? == Expired::TimedOut {
                    sweep.expired += 1;
                }
            } else {
                f.timer.start(&tenant, &id, deadline).await?;
                sweep.rearmed += 1;
            }
        }
        Ok(sweep)
    }

    /// Ends `rec` with `status` (exactly once: a second end is a
    /// `Conflict`) and appends `message`, or for a forced end what the
    /// branch has, to its parent's chain. Returns the ended record and the
    /// appended commit.
    fn end_branch<'a>(
        &'a self,
        tenant: &'a TenantId,
        rec: &'a BranchRecord,
        status: BranchStatus,
        reason: Option<String>,
        message: Option<String>,
    ) -> BoxFuture<'a, Result<(BranchRecord, CommitId)>> {
        Box::pin(async move {
            let f = self.folding_or_err()?.clone();
            let done = f
                .store
                .finish_branch(
                    tenant,
                    &rec.id,
                    &Finish {
                        status,
                        at: self.clock().now(),
                        reason: reason.clone(),
                    },
                )
                .await?;
            let text = match message {
                Some(m) => m,
                None => self.forced_text(tenant, &done).await,
            };
            let commit = self.append_to_parent(tenant, &done, text).await?;
            f.store
                .annotate(tenant, &rec.id, None, Some(&commit.id))
                .await?;
            if status != BranchStatus::Timeout
                && let Err(e) = f.timer.stop(tenant, &rec.id, done.timer.as_deref()).await
            {
                tracing::warn!(branch = %rec.id, error = %e, "could not stop the branch timer");
            }
            let mut done = done;
            done.return_commit = Some(commit.id);
            Ok((done, commit.id))
        })
    }

    /// What a branch that did not return by itself hands its parent: its
    /// status, why, its usage, and its latest checkpoint (scrubbed; left
    /// out if the scrubber fails).
    async fn forced_text(&self, tenant: &TenantId, rec: &BranchRecord) -> String {
        let mut head = format!(
            "[branch {} {}: {}] {} ({} of {} budget tokens used; its chain stays at branches/{}",
            rec.id,
            rec.status,
            rec.reason.as_deref().unwrap_or("ended"),
            rec.description,
            rec.tokens_used,
            rec.budget,
            rec.id,
        );
        let tip = self
            .stores()
            .meta
            .get_ref(tenant, &rec.chain_ref())
            .await
            .ok()
            .flatten()
            .map(|r| r.target);
        let mut body = String::new();
        if let Some(tip) = tip {
            head.push_str(&format!(", tip {tip}"));
            if tip != rec.root_commit
                && let Ok(bytes) = self.download_artifact_of(tenant, &tip).await
            {
                let last = String::from_utf8_lossy(&bytes);
                let last: String = last.chars().take(2000).collect();
                body = format!("\nlatest checkpoint:\n{last}");
            }
        }
        head.push(')');
        let f = self.folding().cloned();
        let full = format!("{head}{body}");
        match f.map(|f| f.scrubber.scrub(&full)) {
            Some(Ok(s)) => s.text,
            // Fail closed: without a scrub only the fixed part goes back.
            _ => format!(
                "[branch {} {}] (details withheld: the secret scrubber failed)",
                rec.id, rec.status
            ),
        }
    }

    async fn download_artifact_of(&self, tenant: &TenantId, id: &CommitId) -> Result<Vec<u8>> {
        let c = self.show(tenant, id).await?;
        Ok(self
            .download_artifact(tenant, &c.artifact_ref)
            .await?
            .to_vec())
    }

    /// Appends `text` to the chain of `rec`'s parent (its parent branch's,
    /// or its session's) as one `branch_return` delta commit, by
    /// compare-and-swap on the parent's ref.
    async fn append_to_parent(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        text: String,
    ) -> Result<Commit> {
        let (name, session_of_commit) = match &rec.parent_branch {
            Some(p) => (branch_ref(p), p.to_string()),
            None => (session_ref(&rec.session_id)?, rec.session_id.clone()),
        };
        let principal: Principal = BRANCH_PRINCIPAL
            .parse()
            .expect("ctx-branch is a valid principal");
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS {
            let tip = self
                .stores()
                .meta
                .get_ref(tenant, &name)
                .await?
                .map(|r| r.target);
            // In the parent's own format when it holds messages (one user
            // message with the text), so its context stays native; raw
            // otherwise, or if that format refuses the message.
            let mut encodings = Vec::new();
            if let Some(t) = &tip {
                let format = self.show(tenant, t).await?.format;
                let codec = self.formats().codec(&format).clone();
                if codec.structured() {
                    let conv = crate::format::canonical::Conversation {
                        messages: vec![crate::format::canonical::Message::new(
                            crate::format::canonical::Role::User,
                            vec![crate::format::canonical::Block::text(text.clone())],
                        )],
                    };
                    if let Ok(enc) = codec.encode_canonical(&conv)
                        && enc.lost.is_empty()
                    {
                        encodings.push((format, enc.bytes));
                    }
                }
            }
            encodings.push((FormatId::raw(), bytes::Bytes::from(text.clone())));
            let mut moved = false;
            for (i, (format, bytes)) in encodings.iter().enumerate() {
                use base64::Engine as _;
                let req = CheckpointRequest {
                    parent: tip,
                    delta: None,
                    delta_base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                    session_id: Some(session_of_commit.clone()),
                    checkpoint: Trigger::BranchReturn,
                    summary: Some(format!("branch {} {}", rec.id, rec.status)),
                    created_at: Some(self.clock().now()),
                    tags: Some(Tags::from([
                        ("branch".to_owned(), rec.id.to_string()),
                        ("branch_status".to_owned(), rec.status.as_str().to_owned()),
                    ])),
                    ref_move: Some(RefMove {
                        name: name.clone(),
                        expected: tip,
                    }),
                    ..CheckpointRequest::new(
                        principal.clone(),
                        "ctx-branch-return",
                        format.clone(),
                        String::new(),
                    )
                };
                match self.checkpoint_unguarded(tenant, req).await {
                    Ok((commit, _)) => {
                        if let Some(p) = &rec.parent_branch {
                            self.account_branch_tokens(tenant, p, commit.token_count)
                                .await?;
                        }
                        return Ok(commit);
                    }
                    Err(e) if e.kind == ErrorKind::Conflict => {
                        last = Some(e);
                        moved = true;
                        break;
                    }
                    Err(e) if e.kind == ErrorKind::Invalid && i + 1 < encodings.len() => {
                        tracing::warn!(format = %format, error = %e, "branch return falls back to raw");
                    }
                    Err(e) => return Err(e),
                }
            }
            if !moved {
                break;
            }
        }
        Err(last.unwrap_or_else(|| Error::unavailable("the parent's chain kept moving")))
    }

    /// The branch a checkpoint writes into, if any: its ref is
    /// `branches/<br-…>` or its session_id is a `br-…` id. A branch that
    /// has ended, or has used its budget, refuses the checkpoint.
    pub(crate) async fn branch_checkpoint_guard(
        &self,
        tenant: &TenantId,
        req: &CheckpointRequest,
    ) -> Result<Option<BranchId>> {
        let Some(f) = self.folding() else {
            return Ok(None);
        };
        let id = req
            .ref_move
            .as_ref()
            .and_then(|m| branch_of_ref(&m.name))
            .or_else(|| req.session_id.as_deref().and_then(|s| s.parse().ok()));
        let Some(id) = id else { return Ok(None) };
        let Some(rec) = f.store.get_branch(tenant, &id).await? else {
            return Ok(None);
        };
        if rec.status != BranchStatus::Active {
            return Err(Error::conflict(
                format!(
                    "branch {id} is {}{}: checkpoints into it are refused",
                    rec.status,
                    rec.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                Some(rec.status.as_str().to_owned()),
            )
            .with_field("ref"));
        }
        Ok(Some(id))
    }

    /// Counts a checkpoint's tokens against its branch: a warning from 80%,
    /// a forced return at 100%.
    ///
    /// # Errors
    /// `Unavailable` when storage fails.
    pub(crate) async fn account_branch_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<Option<BudgetNotice>> {
        let Some(f) = self.folding().cloned() else {
            return Ok(None);
        };
        let rec = match f.store.add_tokens(tenant, id, tokens).await {
            Ok(r) => r,
            // Ended meanwhile (a parent returning): nothing to count against.
            Err(e) if matches!(e.kind, ErrorKind::Conflict | ErrorKind::NotFound) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if rec.tokens_used >= rec.budget {
            let active = f.store.active_branches(tenant, &rec.session_id).await?;
            for child in descendants(&active, id) {
                if let Some(c) = f.store.get_branch(tenant, &child.id).await? {
                    let _ = self
                        .end_branch(
                            tenant,
                            &c,
                            BranchStatus::Completed,
                            Some("parent returning".into()),
                            None,
                        )
                        .await;
                }
            }
            let reason = format!(
                "budget exhausted: {} of {} tokens used",
                rec.tokens_used, rec.budget
            );
            return match self
                .end_branch(
                    tenant,
                    &rec,
                    BranchStatus::Completed,
                    Some(reason.clone()),
                    None,
                )
                .await
            {
                Ok(_)
                | Err(Error {
                    kind: ErrorKind::Conflict,
                    ..
                }) => Ok(Some(BudgetNotice {
                    branch: *id,
                    used: rec.tokens_used,
                    budget: rec.budget,
                    message: format!(
                        "branch {id} was force-returned: {reason}; further checkpoints into it are refused"
                    ),
                })),
                Err(e) => Err(e),
            };
        }
        Ok(warning(&rec).map(|message| BudgetNotice {
            branch: *id,
            used: rec.tokens_used,
            budget: rec.budget,
            message,
        }))
    }
}

#[cfg(test)]
mod tests;
