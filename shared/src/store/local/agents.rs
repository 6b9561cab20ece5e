//! Agents' live context in `ctx.db`: the timeline range the rolling window
//! reads (one indexed range of `timeline` joined to `commits`), agent
//! records (`agents`) and saves (`agent_saves`).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{LocalError, SqliteMetaStore, sql};
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, Principal, TenantId};

fn encode<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::internal(format!("cannot encode a record: {e}")))
}

#[async_trait]
impl crate::store::Agents for SqliteMetaStore {
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        let (tenant, agent) = (tenant.clone(), agent.clone());
        self.db
            .lookup(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached("SELECT body FROM agents WHERE tenant = ?1 AND agent = ?2")?
                    .query_row(params![tenant.as_str(), agent.as_str()], |r| r.get(0))
                    .optional()?;
                Ok(body.map(|b| serde_json::from_str(&b)).transpose()?)
            })
            .await
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        let (tenant, agent, patch) = (tenant.clone(), agent.clone(), patch.clone());
        self.db
            .transaction(move |tx| {
                let body: Option<String> = tx
                    .query_row(
                        "SELECT body FROM agents WHERE tenant = ?1 AND agent = ?2",
                        params![tenant.as_str(), agent.as_str()],
                        |r| r.get(0),
                    )
                    .optional()?;
                let old: AgentRecord = match body {
                    Some(b) => serde_json::from_str(&b)?,
                    None => AgentRecord::default(),
                };
                let new = old.merged(&patch);
                tx.execute(
                    "INSERT INTO agents (tenant, agent, body) VALUES (?1, ?2, ?3)
                     ON CONFLICT (tenant, agent) DO UPDATE SET body = excluded.body",
                    params![tenant.as_str(), agent.as_str(), encode(&new)?],
                )
                .map_err(sql)?;
                Ok::<_, LocalError>(new)
            })
            .await
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        let (tenant, agent) = (tenant.clone(), agent.clone());
        let (id, body) = (save.save_id.to_string(), encode(save)?);
        self.db
            .transaction(move |conn| {
                conn.execute(
                    "INSERT INTO agent_saves (tenant, agent, save_id, body) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING",
                    params![tenant.as_str(), agent.as_str(), id, body],
                )?;
                Ok(())
            })
            .await
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        let (tenant, agent) = (tenant.clone(), agent.clone());
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT body FROM agent_saves WHERE tenant = ?1 AND agent = ?2
                     ORDER BY save_id DESC LIMIT ?3",
                )?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        agent.as_str(),
                        limit.min(i64::MAX as usize) as i64
                    ],
                    |r| r.get::<_, String>(0),
                )?;
                rows.map(|b| Ok(serde_json::from_str(&b?)?)).collect()
            })
            .await
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        let (tenant, agent, id) = (tenant.clone(), agent.clone(), id.to_string());
        self.db
            .read(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached(
                        "SELECT body FROM agent_saves WHERE tenant = ?1 AND agent = ?2 AND save_id = ?3",
                    )?
                    .query_row(params![tenant.as_str(), agent.as_str(), id], |r| r.get(0))
                    .optional()?;
                Ok(body.map(|b| serde_json::from_str(&b)).transpose()?)
            })
            .await
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        let (tenant, agent, id) = (tenant.clone(), agent.clone(), id.to_string());
        self.db
            .transaction(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM agent_saves WHERE tenant = ?1 AND agent = ?2 AND save_id = ?3",
                    params![tenant.as_str(), agent.as_str(), id],
                )? > 0)
            })
            .await
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        let (tenant, agent, artifact) = (tenant.clone(), agent.clone(), artifact.to_string());
        self.db
            .transaction(move |conn| {
                Ok(conn.execute(
                    "UPDATE agents SET body = json_remove(body, '$.working_context')
                     WHERE tenant = ?1 AND agent = ?2
                       AND json_extract(body, '$.working_context.artifact_ref') = ?3",
                    params![tenant.as_str(), agent.as_str(), artifact],
                )? > 0)
            })
            .await
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        let (tenant, agent) = (tenant.clone(), agent.clone());
        self.db
            .transaction(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM agents WHERE tenant = ?1 AND agent = ?2",
                    params![tenant.as_str(), agent.as_str()],
                )? > 0)
            })
            .await
    }
}
