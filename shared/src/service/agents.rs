//! Agents' live context (docs/http-api.md): the rolling window over an
//! agent's timeline, clear / save / history / restore, and the
//! working-context cache with its cache-first restore.
//!
//! An agent is a principal; its messages are the deltas of its commits on
//! its timeline. The window is one range read of that timeline, so its
//! cost follows the window, not the history. Saves and working-context
//! caches are artifacts; the metadata store keeps the agent record and the
//! save records.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::{Delta, NewCommit, Service};
use crate::agent::{
    AgentPatch, AgentRecord, ContextWindow, DEFAULT_WINDOW_SECONDS, RestoreOptions, RestoreSource,
    RestoredContext, SaveId, SaveRecord, SessionFile, SessionMessage, SessionThread, Settings,
    WINDOWS_KEPT, WindowReason, WorkingContextRef, WorkingContextSnapshot, WorkingMessage,
    check_window_seconds,
};
use crate::commit::{Commit, CommitType, Tags, Trigger};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::format::canonical::{Block, Conversation, ImageSource, Message, Role};
use crate::id::{ArtifactRef, Principal, TenantId};
use crate::summarize::{Content, FAILED_MARKER, SummaryInput};

/// The most commits one window answer carries (the newest are kept).
pub const MAX_WINDOW_COMMITS: usize = 10_000;
/// The window has no upper bound (only a lower one, the clear or the
/// window's start): a commit
/// stamped a moment ahead of the server's clock, such as a restore just
/// after a clear, is in it.
const END_OF_TIME: DateTime<Utc> = DateTime::<Utc>::MAX_UTC;
/// The most saves a history lists.
pub const MAX_SAVES: usize = 1000;
/// The schema version of working-context snapshots.
pub const WORKING_CONTEXT_SCHEMA: u32 = 1;
/// How far back (newest commits of the timeline) a rebuild looks for
/// commit summaries.
const EPISODIC_SCAN: usize = 500;
/// Rebuild defaults and limits: (default, max).
const EPISODIC: (usize, usize) = (5, 100);
const SEMANTIC: (usize, usize) = (5, 100);
const RAW_TAIL: (usize, usize) = (10, 1000);
/// The tag on commits a save restore writes: the save's id.
pub const RESTORED_FROM: &str = "restored_from";
/// The template of commits a save restore writes.
const RESTORE_TEMPLATE: &str = "ctx-restore";
/// Bytes in a save's description.
const MAX_DESCRIPTION: usize = 1024;
/// Bytes in a system prompt given to a restore.
const MAX_SYSTEM_PROMPT: usize = 1024 * 1024;

/// An agent's window as its record and timeline give it.
struct WindowCommits {
    /// The lower bound (exclusive).
    since: DateTime<Utc>,
    /// What set the lower bound.
    reason: WindowReason,
    /// The upper bound: now.
    until: DateTime<Utc>,
    /// The commits in it, oldest first.
    commits: Vec<Commit>,
    /// Whether more commits were in it than one read returns.
    truncated: bool,
    /// The joined windows the record remembers.
    windows: Vec<ArtifactRef>,
}

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

    /// Moves the agent's clear marker to now (every thread; nothing is
    /// deleted) and returns it.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn clear_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
    ) -> Result<DateTime<Utc>> {
        let now = self.clock.now();
        self.stores
            .meta
            .update_agent(
                tenant,
                agent,
                &AgentRecord {
                    last_clear: Some(now),
                    ..Default::default()
                },
            )
            .await?;
        Ok(now)
    }

    /// The window's bounds and the commits in it (every thread when
    /// `thread` is `None`), oldest first: one range read of the timeline.
    async fn window_commits(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        thread: Option<&str>,
    ) -> Result<WindowCommits> {
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let now = self.clock.now();
        let window = rec.window_seconds.unwrap_or(DEFAULT_WINDOW_SECONDS);
        let by_window = now - chrono::Duration::seconds(window);
        let (since, reason) = match rec.last_clear {
            Some(c) if c > by_window => (c, WindowReason::Clear),
            _ => (by_window, WindowReason::Window),
        };
        let mut commits = self
            .stores
            .meta
            .timeline_range(
                tenant,
                agent,
                Some(since),
                END_OF_TIME,
                MAX_WINDOW_COMMITS,
                true,
            )
            .await?;
        let truncated = commits.len() == MAX_WINDOW_COMMITS;
        commits.reverse();
        commits
            .retain(|c| in_window(c) && thread.is_none_or(|t| c.thread_id.as_deref() == Some(t)));
        Ok(WindowCommits {
            since,
            reason,
            until: now,
            commits,
            truncated,
            windows: rec.windows.unwrap_or_default(),
        })
    }

    /// The agent's window: the messages of its commits created after
    /// max(last_clear, now - window_seconds) and up to now, for `thread`
    /// (every thread when `None`), oldest first, joined in `format` (the
    /// newest commit's when `None`; translated as materialize does).
    ///
    /// # Errors
    /// `Invalid` when the commits cannot be turned into `format`;
    /// `Unavailable`.
    pub async fn context_window(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        thread: Option<&str>,
        format: Option<FormatId>,
    ) -> Result<ContextWindow> {
        let WindowCommits {
            since,
            reason,
            until,
            commits,
            truncated,
            windows,
        } = self.window_commits(tenant, agent, thread).await?;
        let format = format.or_else(|| default_format(&commits));
        let (artifact_ref, message_count, token_count) = match (&format, commits.is_empty()) {
            (Some(f), false) => {
                let (m, _) = self.join_commits(tenant, &commits, f).await?;
                self.remember_window(tenant, agent, windows, m.artifact_ref)
                    .await?;
                (Some(m.artifact_ref), m.message_count, m.token_count)
            }
            _ => (None, 0, 0),
        };
        Ok(ContextWindow {
            since,
            reason,
            until,
            format: artifact_ref.and(format),
            commits,
            message_count,
            token_count,
            artifact_ref,
            truncated,
        })
    }

    /// Remembers a joined window handed out in `agent`'s record (whose
    /// list, as the window read it, is `windows`), so that an erase of the
    /// commits it holds finds it; the oldest beyond
    /// [`WINDOWS_KEPT`] is deleted unless a cache entry or commit holds the
    /// same bytes. (Two windows remembered at once may lose one; the
    /// collection removes it as an unreferenced cached result.)
    async fn remember_window(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        mut windows: Vec<ArtifactRef>,
        window: ArtifactRef,
    ) -> Result<()> {
        let meta = &self.stores.meta;
        if windows.last() == Some(&window) {
            return Ok(());
        }
        windows.retain(|w| *w != window);
        windows.push(window);
        let dropped: Vec<ArtifactRef> = windows
            .drain(..windows.len().saturating_sub(WINDOWS_KEPT))
            .collect();
        meta.update_agent(
            tenant,
            agent,
            &AgentRecord {
                windows: Some(windows),
                ..AgentRecord::default()
            },
        )
        .await?;
        for old in dropped {
            self.remove_cached_unless_used(tenant, &old).await?;
        }
        Ok(())
    }

    /// Saves every thread's window as a session file (an artifact) with a
    /// summary from the configured summarizer (`(summary generation
    /// failed)` when it fails), and records it. Does not clear.
    ///
    /// # Errors
    /// `Invalid` naming `description` when it is too long or holds control
    /// characters; `Unavailable`.
    pub async fn save_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        description: Option<String>,
    ) -> Result<SaveRecord> {
        if let Some(d) = &description {
            crate::commit::check_text("description", d, MAX_DESCRIPTION)?;
        }
        let WindowCommits {
            since,
            until: now,
            commits,
            ..
        } = self.window_commits(tenant, agent, None).await?;
        let mut by_thread: BTreeMap<Option<String>, Vec<Commit>> = BTreeMap::new();
        for c in commits {
            by_thread.entry(c.thread_id.clone()).or_default().push(c);
        }
        let mut threads = Vec::new();
        let mut messages = Vec::new();
        let mut all = Conversation::default();
        let mut texts = Vec::new();
        for (thread_id, commits) in by_thread {
            let format = default_format(&commits).expect("a thread has commits");
            let joined = self.join_parts(tenant, &commits, &format).await?;
            // Durable: a restore checkpoints it, whenever that is.
            let stored = self.stores.blobs.put(tenant, joined.bytes.clone()).await?;
            let bytes = joined.bytes;
            let codec = self.formats.codec(&format);
            match codec.structured().then(|| codec.to_canonical(&bytes)) {
                Some(Ok(conv)) => {
                    for msg in &conv.messages {
                        messages.push(SessionMessage {
                            thread_id: thread_id.clone(),
                            role: role_name(msg.role).to_owned(),
                            content: text_of(&msg.content),
                            message: serde_json::to_value(msg).ok(),
                        });
                    }
                    all.messages.extend(conv.messages);
                }
                _ => {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    texts.push(text.clone());
                    messages.push(SessionMessage {
                        thread_id: thread_id.clone(),
                        role: "raw".to_owned(),
                        content: text,
                        message: None,
                    });
                }
            }
            threads.push(SessionThread {
                thread_id,
                format,
                artifact_ref: stored.artifact,
                message_count: joined.message_count,
                commits: commits.iter().map(|c| c.id).collect(),
            });
        }
        let message_count = threads.iter().map(|t| t.message_count).sum();
        let summary = self.summarize_window(all, texts).await;
        let content = serde_json::to_vec(&threads)
            .map_err(|e| Error::internal(format!("cannot encode a save: {e}")))?;
        let save_id = SaveId::derive(tenant, agent, now, &ArtifactRef::of(&content));
        let file = SessionFile {
            session_id: save_id,
            agent: agent.clone(),
            timestamp: now,
            description: description.clone(),
            summary: summary.clone(),
            message_count,
            window_start: since,
            window_end: now,
            messages,
            threads,
        };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| Error::internal(format!("cannot encode a session file: {e}")))?;
        let put = self.stores.blobs.put(tenant, Bytes::from(bytes)).await?;
        let record = SaveRecord {
            save_id,
            timestamp: now,
            description,
            summary,
            message_count,
            window_start: since,
            window_end: now,
            artifact_ref: put.artifact,
            thread_artifacts: file.threads.iter().map(|t| t.artifact_ref).collect(),
        };
        self.stores.meta.put_save(tenant, agent, &record).await?;
        Ok(record)
    }

    /// The summary of a save: the configured summarizer's (the extractive
    /// one when none is configured), or the failure marker.
    async fn summarize_window(&self, conv: Conversation, texts: Vec<String>) -> String {
        if conv.messages.is_empty() && texts.is_empty() {
            return "(empty window)".to_owned();
        }
        let input = if texts.is_empty() {
            SummaryInput {
                commit_type: CommitType::Delta,
                format: FormatId::raw(),
                content: Content::Conversation(conv),
            }
        } else {
            let mut text = conv
                .messages
                .iter()
                .map(|m| format!("{}: {}", role_name(m.role), text_of(&m.content)))
                .collect::<Vec<_>>()
                .join("\n");
            for t in texts {
                text.push('\n');
                text.push_str(&t);
            }
            SummaryInput {
                commit_type: CommitType::Delta,
                format: FormatId::raw(),
                content: Content::Text(text),
            }
        };
        let result = match self.summarizer() {
            Some(s) => s.summarize(&input).await,
            None => {
                use crate::summarize::Summarizer;
                crate::summarize::Extractive.summarize(&input).await
            }
        };
        match result {
            Ok(s) if !s.text.trim().is_empty() => s.text.trim().to_owned(),
            Ok(_) => FAILED_MARKER.to_owned(),
            Err(e) => {
                tracing::warn!(error = %e, "summarizing a context save failed");
                FAILED_MARKER.to_owned()
            }
        }
    }

    /// An agent's saves, newest first.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn context_history(
        &self,
        tenant: &TenantId,
        agent: &Principal,
    ) -> Result<Vec<SaveRecord>> {
        self.stores.meta.list_saves(tenant, agent, MAX_SAVES).await
    }

    /// One save's session file.
    ///
    /// # Errors
    /// `NotFound` for an unknown save; `Unavailable`.
    pub async fn context_save_file(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<SessionFile> {
        let rec = self
            .stores
            .meta
            .get_save(tenant, agent, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("save {id} of agent {agent}")))?;
        let bytes = self.download_artifact(tenant, &rec.artifact_ref).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::internal(format!(
                "the session file of save {id} does not decode: {e}"
            ))
        })
    }

    /// Loads a save's messages back into the window: one commit per thread
    /// at the current time, tagged [`RESTORED_FROM`]; returns those commits.
    ///
    /// # Errors
    /// `NotFound` for an unknown save; `Unavailable`.
    pub async fn restore_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Vec<Commit>> {
        let file = self.context_save_file(tenant, agent, id).await?;
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let mut at = self.clock.now();
        if let Some(c) = rec.last_clear
            && c >= at
        {
            at = c + chrono::Duration::microseconds(1);
        }
        let mut commits = Vec::new();
        for (i, t) in file.threads.iter().enumerate() {
            let new = NewCommit {
                thread_id: t.thread_id.clone(),
                checkpoint: Trigger::Explicit,
                delta: Delta::Stored(t.artifact_ref),
                created_at: Some(at + chrono::Duration::microseconds(i as i64)),
                tags: Some(Tags::from([(RESTORED_FROM.to_owned(), id.to_string())])),
                message_count: Some(t.message_count),
                ..NewCommit::new(
                    agent.clone(),
                    RESTORE_TEMPLATE,
                    t.format.clone(),
                    Bytes::new(),
                )
            };
            commits.push(self.record(tenant, new).await?.0);
        }
        Ok(commits)
    }

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

    async fn store_snapshot(
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
        match self.read_cache(tenant, agent, rec.working_context).await? {
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

    /// Rebuilds a working context from the agent's memory: the system
    /// prompt; episodic memory (the nearest compaction summary, then the
    /// newest commit summaries, oldest first); semantic memory (the newest
    /// branch_return results on the latest chain); the raw tail (the last
    /// turns of the latest chain since its nearest compaction).
    async fn rebuild(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        system_prompt: Option<String>,
        epoch_id: u64,
        opts: &RebuildOptions,
    ) -> Result<WorkingContextSnapshot> {
        let now = self.clock.now();
        let mut messages = Vec::new();
        if let Some(p) = system_prompt.filter(|p| !p.is_empty()) {
            messages.push(text_message("system", p));
        }
        let newest = self
            .stores
            .meta
            .timeline_range(tenant, agent, None, now, EPISODIC_SCAN, true)
            .await?;
        let mut last_compaction_ts = None;
        if let Some(tip) = newest.first().cloned() {
            let path = self
                .walk(tenant, tip, None, |c| {
                    matches!(c.commit_type, CommitType::Compaction | CommitType::Snapshot)
                })
                .await?;
            let compaction = path
                .last()
                .filter(|c| c.commit_type == CommitType::Compaction);
            let tail: Vec<&Commit> = path
                .iter()
                .filter(|c| {
                    c.commit_type == CommitType::Delta && c.checkpoint != Trigger::BranchReturn
                })
                .take(opts.raw_tail)
                .collect();
            let in_tail: HashSet<_> = tail.iter().map(|c| c.id).collect();
            let mut episodic = Vec::new();
            if let Some(c) = compaction {
                last_compaction_ts = Some(c.created_at.timestamp_micros() as f64 / 1e6);
                let text = match &c.summary {
                    Some(s) => s.clone(),
                    None => {
                        String::from_utf8_lossy(&self.artifact_of(tenant, c).await?).into_owned()
                    }
                };
                episodic.push(format!(
                    "Compaction summary ({}): {text}",
                    c.created_at.to_rfc3339()
                ));
            }
            let mut summaries: Vec<&Commit> = newest
                .iter()
                .filter(|c| {
                    c.commit_type != CommitType::Compaction
                        && c.summary.is_some()
                        && !in_tail.contains(&c.id)
                })
                .take(opts.episodic)
                .collect();
            summaries.reverse();
            for c in summaries {
                episodic.push(format!(
                    "{} ({}): {}",
                    c.id,
                    c.created_at.to_rfc3339(),
                    c.summary.as_deref().unwrap_or_default()
                ));
            }
            if !episodic.is_empty() {
                messages.push(text_message(
                    "system",
                    format!("Episodic memory:\n- {}", episodic.join("\n- ")),
                ));
            }
            // The artifacts of each list are fetched concurrently.
            let returns: Vec<&Commit> = path
                .iter()
                .filter(|c| c.checkpoint == Trigger::BranchReturn)
                .take(opts.semantic)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let semantic: Vec<String> = returns
                .iter()
                .zip(self.fetch_parts(tenant, returns.iter().copied()).await?)
                .map(|(c, bytes)| self.text_of_delta(&c.format, &bytes))
                .collect();
            if !semantic.is_empty() {
                messages.push(text_message(
                    "system",
                    format!(
                        "Semantic memory (what subtasks concluded):\n- {}",
                        semantic.join("\n- ")
                    ),
                ));
            }
            let tail: Vec<&Commit> = tail.into_iter().rev().collect();
            for (c, bytes) in tail
                .iter()
                .zip(self.fetch_parts(tenant, tail.iter().copied()).await?)
            {
                messages.extend(self.working_messages(&c.format, &bytes));
            }
        }
        Ok(WorkingContextSnapshot {
            schema_version: WORKING_CONTEXT_SCHEMA,
            agent_id: agent.as_str().to_owned(),
            epoch_id,
            last_compaction_ts,
            messages,
        })
    }

    fn text_of_delta(&self, format: &FormatId, bytes: &[u8]) -> String {
        let codec = self.formats.codec(format);
        match codec.structured().then(|| codec.to_canonical(bytes)) {
            Some(Ok(conv)) => conv
                .messages
                .iter()
                .map(|m| text_of(&m.content))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::from_utf8_lossy(bytes).trim_end().to_owned(),
        }
    }

    /// A delta's messages as working-context messages.
    fn working_messages(&self, format: &FormatId, bytes: &[u8]) -> Vec<WorkingMessage> {
        let codec = self.formats.codec(format);
        match codec.structured().then(|| codec.to_canonical(bytes)) {
            Some(Ok(conv)) => conv.messages.iter().map(working_message).collect(),
            _ => vec![text_message(
                "user",
                String::from_utf8_lossy(bytes).into_owned(),
            )],
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

struct RebuildOptions {
    episodic: usize,
    semantic: usize,
    raw_tail: usize,
}

impl RebuildOptions {
    fn of(req: &RestoreOptions) -> Result<Self> {
        let pick =
            |field: &str, v: Option<usize>, (default, max): (usize, usize)| -> Result<usize> {
                let v = v.unwrap_or(default);
                if v > max {
                    return Err(Error::invalid(
                        field,
                        format!("{field} is {v}; at most {max} is allowed"),
                    ));
                }
                Ok(v)
            };
        if let Some(p) = &req.system_prompt
            && p.len() > MAX_SYSTEM_PROMPT
        {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "system_prompt is {} bytes; at most {MAX_SYSTEM_PROMPT} are allowed",
                    p.len()
                ),
            )
            .with_field("system_prompt"));
        }
        Ok(RebuildOptions {
            episodic: pick("max_episodic", req.max_episodic, EPISODIC)?,
            semantic: pick("max_semantic", req.max_semantic, SEMANTIC)?,
            raw_tail: pick("raw_tail_turns", req.raw_tail_turns, RAW_TAIL)?,
        })
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

/// The format of a window when the caller names none.
fn default_format(commits: &[Commit]) -> Option<FormatId> {
    commits.last().map(|c| c.format.clone())
}

/// Whether a commit's artifact holds messages of the window: deltas, and a
/// parentless snapshot (an imported context); compactions stand in for
/// earlier messages and are not messages of their own.
fn in_window(c: &Commit) -> bool {
    c.commit_type == CommitType::Delta
        || (c.commit_type == CommitType::Snapshot && c.parent.is_none())
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn text_of(blocks: &[Block]) -> String {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Text { text } => out.push(text.clone()),
            Block::ToolResult { content, .. } => out.push(text_of(content)),
            _ => {}
        }
    }
    out.join("\n")
}

fn text_message(role: &str, content: impl Into<String>) -> WorkingMessage {
    WorkingMessage {
        role: role.to_owned(),
        content: Some(content.into()),
        reasoning_content: None,
        tool_payload: None,
        media_urls: None,
    }
}

/// A canonical message as a working-context message: text as content,
/// thinking as reasoning, tool calls and results as the tool payload,
/// images by URL as media; a user message holding only tool results is a
/// `tool` message.
fn working_message(m: &Message) -> WorkingMessage {
    let mut reasoning = Vec::new();
    let mut uses = Vec::new();
    let mut results = Vec::new();
    let mut media = Vec::new();
    for b in &m.content {
        match b {
            Block::Thinking { thinking, .. } => reasoning.push(thinking.clone()),
            Block::ToolUse { id, name, input } => {
                uses.push(serde_json::json!({"id": id, "name": name, "input": input}));
            }
            Block::ToolResult { tool_use_id, content, is_error } => results.push(
                serde_json::json!({"tool_use_id": tool_use_id, "content": text_of(content), "is_error": is_error}),
            ),
            Block::Image { source: ImageSource::Url { url } } => media.push(url.clone()),
            _ => {}
        }
    }
    let text = text_of(
        &m.content
            .iter()
            .filter(|b| matches!(b, Block::Text { .. }))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let only_results = !results.is_empty() && text.is_empty() && uses.is_empty();
    let mut payload = serde_json::Map::new();
    if !uses.is_empty() {
        payload.insert("tool_calls".into(), uses.into());
    }
    if !results.is_empty() {
        payload.insert("tool_results".into(), results.into());
    }
    WorkingMessage {
        role: if only_results {
            "tool".to_owned()
        } else {
            role_name(m.role).to_owned()
        },
        content: (!text.is_empty()).then_some(text),
        reasoning_content: (!reasoning.is_empty()).then(|| reasoning.join("\n")),
        tool_payload: (!payload.is_empty()).then_some(serde_json::Value::Object(payload)),
        media_urls: (!media.is_empty()).then_some(media),
    }
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

#[cfg(test)]
mod tests;
