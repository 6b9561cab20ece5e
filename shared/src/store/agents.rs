//! Agents' records (settings, clear marker, working-context cache) and
//! their saves; the [`Agents`] concern of a [`MetaStore`](super::MetaStore).

use async_trait::async_trait;

use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::error::Result;
use crate::id::{ArtifactRef, Principal, TenantId};

/// Agents' records and saves.
#[async_trait]
pub trait Agents: Send + Sync + 'static {
    /// An agent's record (settings, clear marker, working-context cache).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>>;

    /// Sets the `Some` fields of `patch` on an agent's record (creating
    /// it), atomically, and returns the record as stored.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord>;

    /// Records a save of an agent's window (a save id is written once).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn put_save(&self, tenant: &TenantId, agent: &Principal, save: &SaveRecord)
    -> Result<()>;

    /// An agent's saves, newest first, at most `limit`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>>;

    /// One save of an agent.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>>;

    /// Removes one save's record (its file is the caller's to delete);
    /// false when there was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool>;

    /// Drops an agent's working-context pointer if it still names
    /// `artifact` (a newer snapshot stored meanwhile is kept); true when it
    /// did.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool>;

    /// Removes an agent's record (settings, clear marker, working-context
    /// pointer); its saves are the caller's to remove. False when there
    /// was none.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool>;
}
