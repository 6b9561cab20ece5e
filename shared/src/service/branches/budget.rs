//! The budget of a branch, as two named steps of every checkpoint into its
//! chain: the guard before the write and the accounting after it (a
//! warning from 80%, the forced return at 100%).

use super::{BudgetNotice, WARN_PERCENT};
use crate::branch::{BranchRecord, BranchStatus};
use crate::error::{Error, ErrorKind, Result};
use crate::id::{BranchId, TenantId};
use crate::service::Service;

/// The budget warning of an active branch at 80% or more of its budget.
pub(super) fn warning(rec: &BranchRecord) -> Option<String> {
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

impl Service {
    /// The guard before a checkpoint into `branch`'s chain: a branch that
    /// has ended, or has used its budget, refuses it. Returns the branch to
    /// charge afterwards (none when folding is off or it is not a branch).
    ///
    /// # Errors
    /// `Conflict` for a branch that has ended; `Unavailable`.
    pub(crate) async fn budget_guard(
        &self,
        tenant: &TenantId,
        branch: Option<&BranchId>,
    ) -> Result<Option<BranchId>> {
        let (Some(f), Some(id)) = (self.branching(), branch) else {
            return Ok(None);
        };
        let id = *id;
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
    pub(crate) async fn charge_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<Option<BudgetNotice>> {
        let Some(f) = self.branching().cloned() else {
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
        crate::telemetry::branch_budget(rec.tokens_used, rec.budget);
        if rec.tokens_used >= rec.budget {
            // The budget is spent whatever happens to the children: a child
            // that cannot be ended now is left to its own deadline.
            if let Err(e) = self.force_return_descendants(tenant, &rec).await {
                tracing::warn!(branch = %id, error = %e, "could not force-return every child of an exhausted branch");
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
