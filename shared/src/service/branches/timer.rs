//! Branch deadlines as tokio tasks in the serving process (embedded mode):
//! when one fires it calls [`Service::branch_expire`], which is idempotent,
//! so a late or duplicate firing is harmless.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Wake;
use crate::branch::BranchTimer;
use crate::error::Result;
use crate::id::{BranchId, TenantId};
use crate::service::Service;

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
            let mut deadline = deadline;
            loop {
                let now = service.clock().now();
                let wait = (deadline - now).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                // The wake runs as a task of its own: a wake may end other
                // branches of the session, whose ends stop their timers, and
                // stopping this timer meanwhile (another timer's wake ending
                // this branch) must cancel only the waiting, never a branch
                // end half done (ended, its return not yet appended).
                let wake = tokio::spawn({
                    let (service, tenant) = (service.clone(), tenant.clone());
                    async move { service.branch_wake(&tenant, &branch).await }
                });
                match wake.await {
                    Ok(Ok(Wake::Later(at))) => deadline = at,
                    Ok(Ok(outcome)) => {
                        tracing::info!(%branch, ?outcome, "branch timer");
                        break;
                    }
                    Ok(Err(e)) => {
                        tracing::error!(%branch, error = %e, "branch expiry failed; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                    Err(e) => {
                        tracing::error!(%branch, error = %e, "branch timer's wake panicked");
                        break;
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
