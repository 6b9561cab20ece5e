//! Agents' live context (docs/http-api.md): the rolling window over an
//! agent's timeline, clear / save / history / restore, and the
//! working-context cache with its cache-first restore.
//!
//! An agent is a principal; its messages are the deltas of its commits on
//! its timeline. The window is one range read of that timeline, so its
//! cost follows the window, not the history. Saves and working-context
//! caches are artifacts; the metadata store keeps the agent record and the
//! save records.
//!
//! - this file: an agent's settings;
//! - `window`: the rolling window and its clear marker;
//! - `saves`: save / history / restore of named snapshots;
//! - `working`: the working-context cache and its cache-first restore;
//! - `rebuild`: a working context rebuilt from the agent's memory;
//! - `messages`: canonical messages as window text and working-context
//!   messages.

mod messages;
mod rebuild;
mod saves;
mod window;
mod working;

use super::Service;
use crate::agent::{
    AgentPatch, AgentRecord, DEFAULT_WINDOW_SECONDS, Settings, check_window_seconds,
};
use crate::error::Result;
use crate::id::{Principal, TenantId};

pub use saves::{MAX_SAVES, RESTORED_FROM};
pub use window::MAX_WINDOW_COMMITS;
pub use working::{WORKING_CONTEXT_SCHEMA, check_snapshot};

impl Service {
    /// An agent's settings (defaults for an agent never configured).
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn agent_settings(&self, tenant: &TenantId, agent: &Principal) -> Result<Settings> {
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        Ok(settings(agent, &rec))
    }

    /// Changes an agent's settings.
    ///
    /// # Errors
    /// `Invalid` naming `window_seconds` when it is not positive or over
    /// ten years (nothing is written); `Unavailable`.
    pub async fn patch_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        req: &AgentPatch,
    ) -> Result<Settings> {
        if let Some(w) = req.window_seconds {
            check_window_seconds(w)?;
        }
        let rec = self
            .stores
            .meta
            .update_agent(
                tenant,
                agent,
                &AgentRecord {
                    window_seconds: req.window_seconds,
                    persist_working_context: req.persist_working_context,
                    ..Default::default()
                },
            )
            .await?;
        Ok(settings(agent, &rec))
    }
}

fn settings(agent: &Principal, rec: &AgentRecord) -> Settings {
    Settings {
        agent: agent.clone(),
        window_seconds: rec.window_seconds.unwrap_or(DEFAULT_WINDOW_SECONDS),
        persist_working_context: rec.persist_working_context.unwrap_or(false),
        last_clear: rec.last_clear,
        working_context_epoch: rec.working_context.map(|p| p.epoch_id),
    }
}

#[cfg(test)]
mod tests;
