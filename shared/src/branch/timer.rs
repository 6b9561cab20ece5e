//! Branch deadlines. A [`BranchTimer`] is started when a branch is created
//! and stopped when it returns; when it fires it calls
//! `Service::branch_expire`, which force-returns the branch with status
//! timeout if it is still active (idempotent, so a late or duplicate firing
//! is harmless).
//!
//! Embedded mode uses [`TokioTimer`] (plus `Service::branch_sweep` at
//! start-up for deadlines that passed while the server was down); AWS mode
//! uses Step Functions (`super::sfn`).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::id::{BranchId, TenantId};
use crate::service::Service;

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

/// Timers as tokio tasks in the serving process.
#[derive(Default)]
pub struct TokioTimer {
    service: OnceLock<Service>,
    tasks: Mutex<HashMap<(TenantId, BranchId), tokio::task::AbortHandle>>,
}

impl std::fmt::Debug for TokioTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioTimer")
            .field("armed", &self.armed())
            .finish()
    }
}

impl TokioTimer {
    /// A timer that fires into the service given to [`TokioTimer::bind`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the timer the service it expires branches through (the
    /// service holds the timer, so this closes the loop once).
    pub fn bind(&self, service: Service) {
        let _ = self.service.set(service);
    }

    /// How many timers are armed.
    pub fn armed(&self) -> usize {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|h| !h.is_finished())
            .count()
    }

    fn arm(&self, tenant: &TenantId, branch: &BranchId, deadline: DateTime<Utc>) {
        let Some(service) = self.service.get().cloned() else {
            tracing::warn!(%branch, "branch timer not bound to a service; deadline not armed");
            return;
        };
        let (tenant, branch) = (tenant.clone(), *branch);
        let key = (tenant.clone(), branch);
        let task = tokio::spawn(async move {
            loop {
                let now = service.clock().now();
                let wait = (deadline - now).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                match service.branch_expire(&tenant, &branch).await {
                    Ok(super::ops::Expired::NotDue) => continue,
                    Ok(outcome) => {
                        tracing::info!(%branch, ?outcome, "branch deadline");
                        break;
                    }
                    Err(e) => {
                        tracing::error!(%branch, error = %e, "branch expiry failed; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|_, h| !h.is_finished());
        if let Some(old) = tasks.insert(key, task.abort_handle()) {
            old.abort();
        }
    }
}

#[async_trait]
impl BranchTimer for TokioTimer {
    async fn start(
        &self,
        tenant: &TenantId,
        branch: &BranchId,
        deadline: DateTime<Utc>,
    ) -> Result<Option<String>> {
        self.arm(tenant, branch, deadline);
        Ok(None)
    }

    async fn stop(&self, tenant: &TenantId, branch: &BranchId, _: Option<&str>) -> Result<()> {
        if let Some(h) = self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.clone(), *branch))
        {
            h.abort();
        }
        Ok(())
    }
}
