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
//! - `processes`: the running processes a caller registers;
//! - `assemble`: the context of an LLM call in the seed's order (system
//!   prompt, docs, thread and process status, the thread's window);
//! - `saves`: save / history / restore of named snapshots;
//! - `working`: the working-context cache and its cache-first restore;
//! - `rebuild`: a working context rebuilt from the agent's memory;
//! - `messages`: canonical messages as window text and working-context
//!   messages.

mod assemble;
mod messages;
mod processes;
mod rebuild;
mod saves;
mod window;
mod working;

use super::Service;
use crate::agent::{
    AgentPatch, AgentRecord, DEFAULT_WINDOW_SECONDS, Settings, check_system_prompt,
    check_window_seconds,
};
use crate::error::{Error, Result};
use crate::id::{Principal, TenantId};
use crate::workspace::WorkspaceId;

pub use assemble::{MAX_DOC_BYTES, MAX_DOC_FILES, MAX_DOCS_BYTES, MAX_STATUS_ITEMS};
pub use processes::NewProcess;
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
    /// ten years, `system_prompt` when over 64 KiB or holding control
    /// characters, `docs_workspace` when not a workspace id (nothing is
    /// written); `Unavailable`.
    pub async fn patch_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        req: &AgentPatch,
    ) -> Result<Settings> {
        if let Some(w) = req.window_seconds {
            check_window_seconds(w)?;
        }
        if let Some(p) = &req.system_prompt {
            check_system_prompt(p)?;
        }
        if let Some(ws) = req.docs_workspace.as_deref().filter(|w| !w.is_empty()) {
            ws.parse::<WorkspaceId>()
                .map_err(|e| Error::invalid("docs_workspace", e.message))?;
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
                    system_prompt: req.system_prompt.clone(),
                    docs_workspace: req.docs_workspace.clone(),
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
        system_prompt: rec.system_prompt.clone().filter(|p| !p.is_empty()),
        docs_workspace: rec.docs_workspace.as_deref().and_then(|w| w.parse().ok()),
    }
}

#[cfg(test)]
mod tests;
