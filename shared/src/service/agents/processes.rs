//! The running processes a caller registers for an agent: what the status
//! preamble of its assembled context lists. Each is an entry of the
//! agent's record, set and removed on its own; one past its `expires_at`
//! is no longer listed (a process that died without saying so).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::Service;
use crate::agent::{
    AgentRecord, MAX_PROCESS_DESCRIPTION_BYTES, MAX_PROCESSES, ProcessRecord, check_process_id,
};
use crate::commit::{check_text, limits};
use crate::error::{Error, Result};
use crate::id::{Principal, TenantId};

/// What a caller registers: a process's description, start, thread and
/// expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProcess {
    /// What it is doing (1 to 1024 bytes).
    pub description: String,
    /// When it started (default: now).
    pub started_at: Option<DateTime<Utc>>,
    /// The thread it works for.
    pub thread_id: Option<String>,
    /// When to stop listing it.
    pub expires_at: Option<DateTime<Utc>>,
}

/// The registered processes still running at `now`, by id.
pub(super) fn running(rec: &AgentRecord, now: DateTime<Utc>) -> Vec<(String, ProcessRecord)> {
    rec.processes
        .iter()
        .flatten()
        .filter_map(|(id, p)| Some((id.clone(), p.clone()?)))
        .filter(|(_, p)| p.expires_at.is_none_or(|e| e > now))
        .collect()
}

impl Service {
    /// Registers (or replaces) process `id` of `agent` as running.
    ///
    /// # Errors
    /// `Invalid` naming `process_id`, `description`, `thread_id` or
    /// `expires_at` (an expiry not after now), or `processes` when the
    /// agent already has [`MAX_PROCESSES`] others running (nothing is
    /// written); `Unavailable`.
    pub async fn put_process(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &str,
        req: NewProcess,
    ) -> Result<ProcessRecord> {
        check_process_id(id)?;
        check_text(
            "description",
            &req.description,
            MAX_PROCESS_DESCRIPTION_BYTES,
        )?;
        if let Some(t) = &req.thread_id {
            check_text("thread_id", t, limits::SHORT_TEXT)?;
        }
        let now = self.clock.now();
        if let Some(e) = req.expires_at
            && e <= now
        {
            return Err(Error::invalid(
                "expires_at",
                format!("expires_at {e} is not after now ({now})"),
            ));
        }
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let others = running(&rec, now)
            .into_iter()
            .filter(|(k, _)| k != id)
            .count();
        if others >= MAX_PROCESSES {
            return Err(Error::invalid(
                "processes",
                format!(
                    "agent {agent} has {others} running processes; at most {MAX_PROCESSES} are kept (remove one first)"
                ),
            ));
        }
        let p = ProcessRecord {
            description: req.description,
            started_at: req.started_at.unwrap_or(now),
            thread_id: req.thread_id,
            expires_at: req.expires_at,
            updated_at: now,
        };
        // Expired entries go with this write.
        let mut changes: BTreeMap<String, Option<ProcessRecord>> = rec
            .processes
            .iter()
            .flatten()
            .filter(|(_, v)| {
                v.as_ref()
                    .is_some_and(|v| v.expires_at.is_some_and(|e| e <= now))
            })
            .map(|(k, _)| (k.clone(), None))
            .collect();
        changes.insert(id.to_owned(), Some(p.clone()));
        self.stores
            .meta
            .update_agent(
                tenant,
                agent,
                &AgentRecord {
                    processes: Some(changes),
                    ..AgentRecord::default()
                },
            )
            .await?;
        Ok(p)
    }

    /// Removes process `id` of `agent`.
    ///
    /// # Errors
    /// `Invalid` naming `process_id`; `NotFound` when it is not registered
    /// (or has expired); `Unavailable`.
    pub async fn delete_process(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &str,
    ) -> Result<()> {
        check_process_id(id)?;
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let now = self.clock.now();
        let Some(known) = rec
            .processes
            .as_ref()
            .and_then(|m| m.get(id))
            .cloned()
            .flatten()
        else {
            return Err(Error::not_found(format!("process {id} of agent {agent}")));
        };
        self.stores
            .meta
            .update_agent(
                tenant,
                agent,
                &AgentRecord {
                    processes: Some(BTreeMap::from([(id.to_owned(), None)])),
                    ..AgentRecord::default()
                },
            )
            .await?;
        if known.expires_at.is_some_and(|e| e <= now) {
            return Err(Error::not_found(format!(
                "process {id} of agent {agent} (it expired at {})",
                known.expires_at.unwrap_or(now)
            )));
        }
        Ok(())
    }

    /// The processes registered for `agent` and still running, by id.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn list_processes(
        &self,
        tenant: &TenantId,
        agent: &Principal,
    ) -> Result<Vec<(String, ProcessRecord)>> {
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        Ok(running(&rec, self.clock.now()))
    }
}
