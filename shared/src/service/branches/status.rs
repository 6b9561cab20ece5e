//! `branch_status`: one branch by id, or the active branches of a session.

use super::budget::warning;
use crate::auth::Caller;
use crate::branch::{BranchRecord, BranchState, BranchStatus};
use crate::error::Result;
use crate::id::{BranchId, SessionId, TenantId};
use crate::service::Service;

/// Branch records read at once.
const READ_CONCURRENCY: usize = 16;

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
        self.check_session_owner(caller, session).await?;
        Ok(self
            .active_branch_records(&caller.tenant, session)
            .await?
            .into_iter()
            .map(state_of)
            .collect())
    }

    /// The records of `session`'s active branches, deepest first (then by
    /// id), read [`READ_CONCURRENCY`] at a time.
    ///
    /// # Errors
    /// `Invalid` when context folding is off; `Unavailable`.
    pub(crate) async fn active_branch_records(
        &self,
        tenant: &TenantId,
        session: &str,
    ) -> Result<Vec<BranchRecord>> {
        use futures::{StreamExt, TryStreamExt};
        let f = self.branching_or_err()?;
        let mut active = f.store.active_branches(tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let records: Vec<Option<BranchRecord>> = futures::stream::iter(active)
            .map(|a| async move { f.store.get_branch(tenant, &a.id).await })
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(records
            .into_iter()
            .flatten()
            .filter(|r| r.status == BranchStatus::Active)
            .collect())
    }
}
