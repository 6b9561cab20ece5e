//! `branch_status`: one branch by id, or the active branches of a session.

use super::budget::warning;
use crate::auth::Caller;
use crate::branch::wire::BranchStatusResponse;
use crate::branch::{BranchRecord, BranchStatus};
use crate::error::Result;
use crate::id::{BranchId, SessionId};
use crate::service::Service;

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
        active_branches: Vec::new(),
    }
}

impl Service {
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

    /// `branch_status` by session: its deepest active branch in the
    /// top-level fields and every active branch, deepest first, in
    /// `active_branches`; or `{branch_id: null, status: "No active branch
    /// found"}`.
    ///
    /// # Errors
    /// `NotFound` for another principal's session (strict mode).
    pub async fn branch_status_of_session(
        &self,
        caller: &Caller,
        session: &SessionId,
    ) -> Result<BranchStatusResponse> {
        let session = session.as_str();
        let f = self.folding_or_err()?;
        self.check_session_owner(caller, session).await?;
        let mut active = f.store.active_branches(&caller.tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let mut all = Vec::with_capacity(active.len());
        for a in active {
            if let Some(rec) = f.store.get_branch(&caller.tenant, &a.id).await?
                && rec.status == BranchStatus::Active
            {
                all.push(status_of(&rec));
            }
        }
        let Some(deepest) = all.first() else {
            return Ok(BranchStatusResponse {
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
                active_branches: Vec::new(),
            });
        };
        Ok(BranchStatusResponse {
            active_branches: all.clone(),
            ..deepest.clone()
        })
    }
}
