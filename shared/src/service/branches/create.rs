//! `branch_create`: a new isolated branch whose chain holds only the
//! description and the prompt.

use super::{MAX_DESCRIPTION, MAX_PROMPT, check_len, strip_controls};
use crate::auth::Caller;
use crate::branch::memories::{self, InjectedMemory};
use crate::branch::{BranchRecord, BranchStatus, CreatedBranch, NewBranch};
use crate::commit::{Tags, Trigger};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::id::BranchId;
use crate::service::{NewCommit, Service};

impl Service {
    /// `branch_create`: a new isolated branch whose chain holds only the
    /// description and the prompt.
    ///
    /// # Errors
    /// `Invalid` for bad or over-long fields and for exceeding the depth
    /// limit; `NotFound` for a session or parent branch the caller does
    /// not own; `Conflict` for an ended parent; `RateLimited` past a limit.
    pub async fn branch_create(&self, caller: &Caller, req: NewBranch) -> Result<CreatedBranch> {
        let f = self.branching_or_err()?.clone();
        let cfg = &f.config;
        let tenant = &caller.tenant;
        // A SessionId names its ref by construction: nothing to normalise.
        let session = req.session_id.as_str().to_owned();
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
            // Refused rather than clamped: a caller asking for more
            // must not be left believing it got it.
            Some(t) if t > cfg.max_timeout_secs => {
                return Err(Error::invalid(
                    "timeout_seconds",
                    format!(
                        "timeout_seconds {t} is over the limit of {} seconds: give 1 to {} \
                         (default {})",
                        cfg.max_timeout_secs,
                        cfg.max_timeout_secs,
                        cfg.default_timeout_secs.min(cfg.max_timeout_secs)
                    ),
                ));
            }
            Some(t) => t,
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
        let (chosen, memories_blocked) = if req.inject_memories {
            self.choose_memories(caller, &session, &description, budget)
                .await?
        } else {
            (Vec::new(), Vec::new())
        };
        let task = if prompt.is_empty() {
            description.clone()
        } else {
            format!("{description}\n\n{prompt}")
        };
        // The memories come first, as data (FR-005, SEC-005).
        let block = memories::render(&chosen);
        let text = if block.is_empty() {
            task
        } else {
            format!("{block}\n\n{task}")
        };
        // The root is raw text: it ends its line, so the branch's first
        // checkpoint starts on a line of its own.
        let text = crate::format::end_line(&text);
        let (root, _) = self
            .record(
                tenant,
                NewCommit {
                    session_id: Some(id.to_string().parse()?),
                    checkpoint: Trigger::Explicit,
                    summary: Some(description.clone()),
                    created_at: Some(now),
                    tags: Some(Tags::from([
                        ("branch".to_owned(), id.to_string()),
                        ("session".to_owned(), session.clone()),
                    ])),
                    ..NewCommit::new(
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
            // Injected memories are in its context: they count.
            tokens_used: chosen.iter().map(|c| c.tokens).sum(),
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
        match f
            .timer
            .start(tenant, &id, self.first_wake(now, deadline))
            .await
        {
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
        Ok(CreatedBranch {
            branch_id: id,
            budget_allocated: budget,
            depth,
            timeout_seconds: timeout,
            deadline,
            root_commit: root.id,
            chain_ref: rec.chain_ref().to_string(),
            memories: chosen.iter().map(InjectedMemory::from).collect(),
            memories_blocked,
        })
    }
}
