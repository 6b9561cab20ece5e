//! `branch_status`: one branch by id, or the active branches of a session.

use super::budget::warning;
use crate::auth::Caller;
use crate::branch::{BranchRecord, BranchState, BranchStatus};
use crate::error::Result;
use crate::id::{BranchId, SessionId};
use crate::service::Service;

fn state_of(rec: BranchRecord) -> BranchState {
    let warning = if rec.status == BranchStatus::Active {
        warning(&rec)
    } else {
        None
    };
    BranchState {
        record: rec,
        warning,
    }
}

impl Service {
    /// `branch_status` by id.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn branch_status(&self, caller: &Caller, id: &BranchId) -> Result<BranchState> {
        Ok(state_of(self.visible_branch(caller, id).await?))
    }

    /// `branch_status` by session: every active branch of the session,
    /// deepest first (none when it has none).
    ///
    /// # Errors
    /// `NotFound` for another principal's session (strict mode).
    pub async fn branch_status_of_session(
        &self,
        caller: &Caller,
        session: &SessionId,
    ) -> Result<Vec<BranchState>> {
        let session = session.as_str();
        let f = self.branching_or_err()?;
        self.check_session_owner(caller, session).await?;
        let mut active = f.store.active_branches(&caller.tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let mut all = Vec::with_capacity(active.len());
        for a in active {
            if let Some(rec) = f.store.get_branch(&caller.tenant, &a.id).await?
                && rec.status == BranchStatus::Active
            {
                all.push(state_of(rec));
            }
        }
        Ok(all)
    }
}
