//! The working-context cache: a snapshot an agent (or a turn boundary)
//! stores, read back cache-first and rebuilt when it cannot be used.

use bytes::Bytes;

use super::super::Service;
use super::rebuild::RebuildOptions;
use crate::agent::{
    AgentRecord, RestoreOptions, RestoreSource, RestoredContext, WorkingContextRef,
    WorkingContextSnapshot,
};
use crate::commit::{Commit, CommitType, Trigger};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, Principal, TenantId};

/// The schema version of working-context snapshots.
pub const WORKING_CONTEXT_SCHEMA: u32 = 1;

impl Service {
    /// Stores a working-context snapshot as the agent's cache; returns the
    /// cache artifact.
    ///
    /// # Errors
    /// `Invalid` naming `schema_version`, `agent_id` or the malformed
    /// `messages[i]` field (nothing is written); `Unavailable`.
    pub async fn put_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        snapshot: &WorkingContextSnapshot,
    ) -> Result<ArtifactRef> {
        check_snapshot(agent, snapshot)?;
        self.store_snapshot(tenant, agent, snapshot).await
    }

    pub(super) async fn store_snapshot(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        snapshot: &WorkingContextSnapshot,
    ) -> Result<ArtifactRef> {
        let bytes = serde_json::to_vec(snapshot)
            .map_err(|e| Error::internal(format!("cannot encode a snapshot: {e}")))?;
        self.limits.check_artifact_size("messages", bytes.len())?;
        let put = self.stores.blobs.put(tenant, Bytes::from(bytes)).await?;
        self.stores
            .meta
            .update_agent(
                tenant,
                agent,
                &AgentRecord {
                    working_context: Some(WorkingContextRef {
                        artifact_ref: put.artifact,
                        epoch_id: snapshot.epoch_id,
                    }),
                    ..Default::default()
                },
            )
            .await?;
        Ok(put.artifact)
    }

    /// The agent's cache, or why it cannot be used; with the system prompt
    /// it carried when it could be read at all.
    async fn read_cache(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        pointer: Option<WorkingContextRef>,
    ) -> Result<CacheRead> {
        let Some(p) = pointer else {
            return Ok(CacheRead::Invalid(
                "no working-context cache is stored".into(),
                None,
            ));
        };
        let bytes = match self
            .stores
            .blobs
            .read(tenant, crate::store::BlobArea::READABLE, &p.artifact_ref)
            .await?
        {
            None => {
                return Ok(CacheRead::Invalid(
                    format!("the cache artifact {} is missing", p.artifact_ref),
                    None,
                ));
            }
            Some(b) => b,
        };
        if let Err(e) = crate::store::verify(&p.artifact_ref, &bytes) {
            return Ok(CacheRead::Invalid(
                format!("the cache artifact failed verification: {}", e.message),
                None,
            ));
        }
        let value: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return Ok(CacheRead::Invalid(
                    format!("the cache is not JSON: {e}"),
                    None,
                ));
            }
        };
        let prompt = system_prompt_of(&value);
        let version = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(WORKING_CONTEXT_SCHEMA)) {
            return Ok(CacheRead::Invalid(
                format!(
                    "schema_version mismatch: the cache has {}, this server reads {WORKING_CONTEXT_SCHEMA}",
                    value
                        .get("schema_version")
                        .map_or("none".to_owned(), ToString::to_string)
                ),
                prompt,
            ));
        }
        match value.get("agent_id").and_then(serde_json::Value::as_str) {
            Some(a) if a == agent.as_str() => {}
            other => {
                return Ok(CacheRead::Invalid(
                    format!(
                        "agent_id mismatch: the cache is for {other:?}, not {:?}",
                        agent.as_str()
                    ),
                    prompt,
                ));
            }
        }
        let snapshot: WorkingContextSnapshot = match serde_json::from_value(value) {
            Ok(s) => s,
            Err(e) => {
                return Ok(CacheRead::Invalid(
                    format!("malformed messages: {e}"),
                    prompt,
                ));
            }
        };
        if let Err(e) = check_snapshot(agent, &snapshot) {
            return Ok(CacheRead::Invalid(
                format!("malformed messages: {}", e.message),
                prompt,
            ));
        }
        Ok(CacheRead::Valid(snapshot, p.artifact_ref))
    }

    /// Restores the agent's working context: the cache when it is valid,
    /// else a rebuild from its memory (stored as the new cache, epoch + 1),
    /// with the reason the cache was rejected. Never restores queues or
    /// in-flight tool calls.
    ///
    /// # Errors
    /// `Invalid` naming an out-of-range option; `Unavailable`.
    pub async fn restore_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        req: &RestoreOptions,
    ) -> Result<RestoredContext> {
        let opts = RebuildOptions::of(req)?;
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let cached = match self.read_cache(tenant, agent, rec.working_context).await? {
            // A valid cache is rebuilt only when asked: its prompt is kept.
            CacheRead::Valid(snapshot, _) if req.rebuild => {
                let prompt = snapshot
                    .messages
                    .first()
                    .filter(|m| m.role == "system")
                    .and_then(|m| m.content.clone());
                CacheRead::Invalid("a rebuild was asked for".to_owned(), prompt)
            }
            other => other,
        };
        match cached {
            CacheRead::Valid(snapshot, artifact_ref) => Ok(RestoredContext {
                source: RestoreSource::Cache,
                reason: None,
                snapshot,
                artifact_ref,
            }),
            CacheRead::Invalid(reason, old_prompt) => {
                let prompt = req.system_prompt.clone().or(old_prompt);
                let epoch = rec.working_context.map_or(0, |p| p.epoch_id) + 1;
                let snapshot = self.rebuild(tenant, agent, prompt, epoch, &opts).await?;
                let artifact_ref = self.store_snapshot(tenant, agent, &snapshot).await?;
                Ok(RestoredContext {
                    source: RestoreSource::Rebuilt,
                    reason: Some(reason),
                    snapshot,
                    artifact_ref,
                })
            }
        }
    }

    /// After a commit is written: refreshes its agent's working-context
    /// cache at the safe boundaries (an end-of-turn checkpoint, a
    /// compaction) when the agent asked for it. Costs one point read of the
    /// agent record per such checkpoint; when on, one more artifact write
    /// (and, at a turn, one cache read and one delta read; a compaction
    /// rebuilds). A failure is logged, never the checkpoint's.
    pub(crate) async fn after_commit(&self, tenant: &TenantId, commit: &Commit) {
        let boundary = commit.checkpoint == Trigger::TurnBoundary
            || commit.commit_type == CommitType::Compaction;
        if !boundary {
            return;
        }
        if let Err(e) = self.refresh_working_context(tenant, commit).await {
            tracing::warn!(error = %e, commit = %commit.id, "refreshing the working-context cache failed");
        }
    }

    async fn refresh_working_context(&self, tenant: &TenantId, commit: &Commit) -> Result<()> {
        let agent = &commit.principal;
        let Some(rec) = self.stores.meta.get_agent(tenant, agent).await? else {
            return Ok(());
        };
        if rec.persist_working_context != Some(true) {
            return Ok(());
        }
        let epoch = rec.working_context.map_or(0, |p| p.epoch_id);
        // One read of the cache: a turn extends a valid one; a compaction,
        // or a cache that cannot be used, is rebuilt (keeping its prompt).
        let prompt = match self.read_cache(tenant, agent, rec.working_context).await? {
            CacheRead::Valid(mut snapshot, _) if commit.commit_type == CommitType::Delta => {
                let bytes = self.artifact_of(tenant, commit).await?;
                snapshot
                    .messages
                    .extend(self.working_messages(&commit.format, &bytes));
                self.store_snapshot(tenant, agent, &snapshot).await?;
                return Ok(());
            }
            CacheRead::Valid(s, _) => s
                .messages
                .first()
                .filter(|m| m.role == "system")
                .and_then(|m| m.content.clone()),
            CacheRead::Invalid(_, p) => p,
        };
        let snapshot = self
            .rebuild(
                tenant,
                agent,
                prompt,
                epoch + 1,
                &RebuildOptions::of(&RestoreOptions::default())?,
            )
            .await?;
        self.store_snapshot(tenant, agent, &snapshot).await?;
        Ok(())
    }
}

/// What reading the cache gave.
enum CacheRead {
    Valid(WorkingContextSnapshot, ArtifactRef),
    /// Why not, and the system prompt it held if it could be read.
    Invalid(String, Option<String>),
}

/// The system prompt a cache held: its first message, when it is a system
/// message.
fn system_prompt_of(v: &serde_json::Value) -> Option<String> {
    let first = v.get("messages")?.as_array()?.first()?;
    (first.get("role")?.as_str()? == "system")
        .then(|| first.get("content")?.as_str().map(str::to_owned))
        .flatten()
}

/// Checks a working-context snapshot for `agent`.
///
/// # Errors
/// `Invalid` naming `schema_version`, `agent_id` or `messages[i].<field>`.
pub fn check_snapshot(agent: &Principal, s: &WorkingContextSnapshot) -> Result<()> {
    if s.schema_version != WORKING_CONTEXT_SCHEMA {
        return Err(Error::invalid(
            "schema_version",
            format!(
                "schema_version is {}; this server reads {WORKING_CONTEXT_SCHEMA}",
                s.schema_version
            ),
        ));
    }
    if s.agent_id != agent.as_str() {
        return Err(Error::invalid(
            "agent_id",
            format!(
                "agent_id is {:?}, not the agent of the route ({agent})",
                s.agent_id
            ),
        ));
    }
    for (i, m) in s.messages.iter().enumerate() {
        if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
            return Err(Error::invalid(
                format!("messages[{i}].role"),
                format!(
                    "messages[{i}].role is {:?}; use system, user, assistant or tool",
                    m.role
                ),
            ));
        }
        if m.content.is_none()
            && m.reasoning_content.is_none()
            && m.tool_payload.is_none()
            && m.media_urls.as_ref().is_none_or(Vec::is_empty)
        {
            return Err(Error::invalid(
                format!("messages[{i}]"),
                format!(
                    "messages[{i}] has no content, reasoning_content, tool_payload or media_urls"
                ),
            ));
        }
        if let Some(p) = &m.tool_payload
            && !p.is_object()
        {
            return Err(Error::invalid(
                format!("messages[{i}].tool_payload"),
                format!("messages[{i}].tool_payload must be a JSON object"),
            ));
        }
        if let Some(urls) = &m.media_urls
            && let Some(j) = urls.iter().position(|u| u.trim().is_empty())
        {
            return Err(Error::invalid(
                format!("messages[{i}].media_urls[{j}]"),
                format!("messages[{i}].media_urls[{j}] is empty"),
            ));
        }
    }
    Ok(())
}
