//! Context folding on [`Service`]: a subtask runs in an isolated branch with
//! a token budget, a timeout and a depth limit; only its (scrubbed) result
//! returns to the parent context.
//!
//! - `create`: `branch_create`.
//! - `end`: return, session end, expiry, the start-up sweep, and the one
//!   way a branch ends (`end_branch`) with its append to the parent.
//! - `budget`: the guard before a checkpoint into a branch's chain and the
//!   accounting after it.
//! - `memory`: a memory extracted when a branch ends, the memories
//!   injected when one is created, and their search.
//! - `status`: `branch_status`, by id and by session.
//! - `timer`: deadlines as tokio tasks (embedded mode): [`TokioTimer`].
//!
//! The records, their store, the settings and the values these operations
//! take and return are in [`crate::branch`]; the request and response
//! bodies in `crate::wire::branches`.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::Service;
use crate::auth::Caller;
use chrono::{DateTime, Utc};

use crate::branch::{ActiveBranch, BranchRecord, Branching, EndedSession, Validation};
use crate::error::{Error, ErrorKind, Result};
use crate::id::{BranchId, Principal, RefName, TenantId};

mod budget;
mod create;
mod end;
mod memory;
mod status;
mod timer;

pub use timer::TokioTimer;

/// The longest description, in characters.
pub const MAX_DESCRIPTION: usize = 500;
/// The longest prompt, in characters.
pub const MAX_PROMPT: usize = 10_000;
/// The longest returned message, in characters.
pub const MAX_MESSAGE: usize = 50_000;
/// The longest error of a failed return, in characters.
pub const MAX_ERROR: usize = 5_000;
/// The share of the budget past which responses carry a warning.
pub const WARN_PERCENT: u64 = 80;

/// The principal of the commits ctx writes for branches when the caller
/// has none.
const BRANCH_PRINCIPAL: &str = "ctx-branch";

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

/// What a branch's timer found when it woke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Its deadline had come: what the expiry did.
    Expired(Expired),
    /// Its session had been idle past `CTX_SESSION_IDLE_SECS`: the
    /// session's active branches were force-returned.
    Idle(EndedSession),
    /// Nothing to do yet: wake again then (its deadline, or when its
    /// session will have been idle long enough).
    Later(DateTime<Utc>),
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

/// The ref of a session's chain.
fn session_ref(session: &str) -> Result<RefName> {
    format!("sessions/{session}").parse().map_err(|_| {
        Error::invalid(
            "session_id",
            format!(
                "session_id {session:?} cannot name a ref: use letters, digits, '-', '_', '.' and '/' (no empty segment, no '..')"
            ),
        )
    })
}

fn branch_principal() -> Principal {
    BRANCH_PRINCIPAL
        .parse()
        .expect("ctx-branch is a valid principal")
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

impl Service {
    fn branching_or_err(&self) -> Result<&Branching> {
        self.branching()
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
            .unwrap_or_else(branch_principal)
    }

    /// The branch, if the caller may see it (404 otherwise, as for data
    /// that does not exist).
    async fn visible_branch(&self, caller: &Caller, id: &BranchId) -> Result<BranchRecord> {
        let f = self.branching_or_err()?;
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
        let f = self.branching_or_err()?;
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

    /// Force-returns the active branches below `rec` (not `rec` itself),
    /// deepest first, each with status completed and the reason "parent
    /// returning". One that ended meanwhile is skipped. Returns those it
    /// ended.
    ///
    /// # Errors
    /// The first error other than `Conflict` (an already-ended branch);
    /// the branches before it stay ended.
    async fn force_return_descendants(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
    ) -> Result<Vec<BranchId>> {
        let f = self.branching_or_err()?;
        let active = f.store.active_branches(tenant, &rec.session_id).await?;
        let mut ended = Vec::new();
        for child in descendants(&active, &rec.id) {
            let Some(child_rec) = f.store.get_branch(tenant, &child.id).await? else {
                continue;
            };
            match self
                .end_branch(
                    tenant,
                    &child_rec,
                    crate::branch::BranchStatus::Completed,
                    Some("parent returning".into()),
                    None,
                )
                .await
            {
                Ok(_) => ended.push(child.id),
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ended)
    }
}

#[cfg(test)]
mod tests;
