//! The in-memory store's agents' records and saves ([`Agents`](crate::store::Agents)).

use super::{MemoryMetaStore, lock};
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::error::Result;
use crate::id::{ArtifactRef, Principal, TenantId};
use async_trait::async_trait;

#[async_trait]
impl crate::store::Agents for MemoryMetaStore {
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        Ok(lock(&self.meta)
            .agents
            .get(&(tenant.clone(), agent.clone()))
            .cloned())
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        let mut m = lock(&self.meta);
        let rec = m.agents.entry((tenant.clone(), agent.clone())).or_default();
        *rec = std::mem::take(rec).merged(patch);
        Ok(rec.clone())
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        lock(&self.meta)
            .saves
            .entry((tenant.clone(), agent.clone()))
            .or_default()
            .entry(save.save_id)
            .or_insert_with(|| save.clone());
        Ok(())
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        Ok(lock(&self.meta)
            .saves
            .get(&(tenant.clone(), agent.clone()))
            .map(|s| s.values().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        Ok(lock(&self.meta)
            .saves
            .get(&(tenant.clone(), agent.clone()))
            .and_then(|s| s.get(id))
            .cloned())
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        Ok(lock(&self.meta)
            .saves
            .get_mut(&(tenant.clone(), agent.clone()))
            .and_then(|s| s.remove(id))
            .is_some())
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        let mut m = lock(&self.meta);
        match m.agents.get_mut(&(tenant.clone(), agent.clone())) {
            Some(rec) if rec.working_context.map(|w| w.artifact_ref) == Some(*artifact) => {
                rec.working_context = None;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        Ok(lock(&self.meta)
            .agents
            .remove(&(tenant.clone(), agent.clone()))
            .is_some())
    }
}
