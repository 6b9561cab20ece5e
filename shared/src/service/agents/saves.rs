//! Saves: an agent's window kept as a session file with a summary, the
//! list of them, and their restore into the window.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::super::{Delta, NewCommit, Service};
use super::messages::{role_name, text_of};
use super::window::{WindowCommits, default_format};
use crate::agent::{SaveId, SaveRecord, SessionFile, SessionMessage, SessionThread};
use crate::commit::{Commit, CommitType, Tags, Trigger};
use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::format::canonical::Conversation;
use crate::id::{ArtifactRef, Principal, TenantId};
use crate::summarize::{Content, FAILED_MARKER, SummaryInput};

/// The most saves a history lists.
pub const MAX_SAVES: usize = 1000;
/// The tag on commits a save restore writes: the save's id.
pub const RESTORED_FROM: &str = "restored_from";
/// The template of commits a save restore writes.
const RESTORE_TEMPLATE: &str = "ctx-restore";
/// Bytes in a save's description.
const MAX_DESCRIPTION: usize = 1024;

impl Service {
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
}
