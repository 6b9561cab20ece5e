//! Branch deadlines. A [`BranchTimer`] is started when a branch is created
//! and stopped when it returns; when it fires it calls
//! `Service::branch_expire`, which force-returns the branch with status
//! timeout if it is still active (idempotent, so a late or duplicate firing
//! is harmless).
//!
//! Embedded mode uses `crate::service::TokioTimer` (plus
//! `Service::branch_sweep` at start-up for deadlines that passed while the
//! server was down); AWS mode uses Step Functions (`crate::store::aws::sfn`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::id::{BranchId, TenantId};

/// Starts and stops branch deadline timers.
#[async_trait]
pub trait BranchTimer: Send + Sync + 'static {
    /// Arms the timer of `branch`; returns a handle to store, if any.
    ///
    /// # Errors
    /// `Unavailable` when the timer service cannot be reached.
    async fn start(
        &self,
        tenant: &TenantId,
        branch: &BranchId,
        deadline: DateTime<Utc>,
    ) -> Result<Option<String>>;

    /// Disarms it (a branch returned before its deadline).
    ///
    /// # Errors
    /// `Unavailable` when the timer service cannot be reached.
    async fn stop(&self, tenant: &TenantId, branch: &BranchId, handle: Option<&str>) -> Result<()>;
}

/// No timers: deadlines are only enforced by a sweep or by hand.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTimer;

#[async_trait]
impl BranchTimer for NoTimer {
    async fn start(&self, _: &TenantId, _: &BranchId, _: DateTime<Utc>) -> Result<Option<String>> {
        Ok(None)
    }

    async fn stop(&self, _: &TenantId, _: &BranchId, _: Option<&str>) -> Result<()> {
        Ok(())
    }
}
