//! The context of an LLM call, in seed 001's order: the agent's system
//! prompt, its docs (the files of the workspace it names, bounded), a
//! thread and process status preamble (its other active threads, the
//! active folded branches of its sessions, the processes registered as
//! running) and the thread's rolling window; as sections and as one
//! conversation in a format.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::super::Service;
use super::processes::running;
use super::window::WindowCommits;
use crate::agent::{
    AgentDocs, AssembledContext, AssembledConversation, BranchActivity, DocFile, OmittedDoc,
    RunningProcess, StatusPreamble, ThreadActivity,
};
use crate::commit::Commit;
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::format::canonical::{Block, Conversation, Message, Role};
use crate::id::{Principal, SessionId, TenantId};
use crate::workspace::WorkspaceId;

/// Docs files read into one context (the first by path).
pub const MAX_DOC_FILES: usize = 50;
/// Bytes of one doc in a context (its head when longer).
pub const MAX_DOC_BYTES: usize = 32 * 1024;
/// Bytes of all docs in a context.
pub const MAX_DOCS_BYTES: usize = 128 * 1024;
/// Entries in each list of the status preamble (threads, sessions whose
/// branches are read, branches, processes).
pub const MAX_STATUS_ITEMS: usize = 50;
/// The largest conversation one answer carries (a Lambda answers at most
/// 6 MB, and the JSON view carries the sections beside it).
const MAX_CONVERSATION_BYTES: usize = 4 * 1024 * 1024;
/// The format of a conversation when neither the caller nor the window
/// names one.
const DEFAULT_FORMAT: &str = "openai-chat-v1";

impl Service {
    /// The context of an LLM call for `agent` and `thread`: system prompt,
    /// docs, status preamble and the thread's rolling window, in that
    /// order, and all four as one conversation in `format` (default: the
    /// window's, else `openai-chat-v1`), the first three as system
    /// messages where the format has them (else user messages; plain text
    /// before the window's bytes in an opaque format).
    ///
    /// # Errors
    /// `Invalid` naming `format` when it is unknown or the window cannot
    /// be turned into it; `TooLarge` when the conversation is over 4 MiB
    /// (read the window's artifact instead); `Unavailable`.
    pub async fn assemble_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        thread: &str,
        format: Option<FormatId>,
    ) -> Result<AssembledContext> {
        if let Some(f) = &format
            && !self.formats.is_known(f)
        {
            return Err(self.formats.unknown(f));
        }
        let rec = self
            .stores
            .meta
            .get_agent(tenant, agent)
            .await?
            .unwrap_or_default();
        let system_prompt = rec.system_prompt.clone().filter(|p| !p.is_empty());
        let docs = match rec.docs_workspace.as_deref().filter(|w| !w.is_empty()) {
            Some(ws) => self.agent_docs(tenant, &ws.parse()?).await?,
            None => AgentDocs::default(),
        };
        // One read of the record and of the window, for the status of
        // every thread and this thread's window both.
        let all = self.window_commits_of(tenant, agent, &rec, None).await?;
        let this_thread = WindowCommits {
            commits: all
                .commits
                .iter()
                .filter(|c| c.thread_id.as_deref() == Some(thread))
                .cloned()
                .collect(),
            since: all.since,
            reason: all.reason,
            until: all.until,
            truncated: all.truncated,
            windows: all.windows.clone(),
        };
        let now = self.clock.now();
        let mut status = self.status_preamble(tenant, thread, &all.commits).await?;
        let mut procs: Vec<RunningProcess> = running(&rec, now)
            .into_iter()
            .map(|(id, p)| RunningProcess::new(id, p))
            .collect();
        if procs.len() > MAX_STATUS_ITEMS {
            procs.sort_by_key(|p| std::cmp::Reverse(p.started_at));
            procs.truncate(MAX_STATUS_ITEMS);
            procs.sort_by(|a, b| a.process_id.cmp(&b.process_id));
            status.truncated = true;
        }
        status.processes = procs;
        status.text = status_text(&status);
        let (window, window_bytes) = self
            .window_from(tenant, agent, this_thread, format.clone())
            .await?;
        let format = format
            .or_else(|| window.format.clone())
            .map_or_else(|| DEFAULT_FORMAT.parse(), Ok)?;
        let mut prefix = Vec::new();
        prefix.extend(system_prompt.clone());
        prefix.extend(docs_text(&docs));
        prefix.extend(status.text.clone());
        let conversation = self.conversation(
            &format,
            &prefix,
            window_bytes.as_ref(),
            window.message_count,
        )?;
        Ok(AssembledContext {
            agent: agent.clone(),
            thread_id: thread.to_owned(),
            system_prompt,
            docs,
            status,
            window,
            conversation,
        })
    }

    /// The files of workspace `ws` by path, bounded by
    /// [`MAX_DOC_FILES`], [`MAX_DOC_BYTES`] and [`MAX_DOCS_BYTES`]; what
    /// was cut or left out is said.
    async fn agent_docs(&self, tenant: &TenantId, ws: &WorkspaceId) -> Result<AgentDocs> {
        let mut docs = AgentDocs {
            workspace: Some(ws.clone()),
            ..AgentDocs::default()
        };
        let mut budget = MAX_DOCS_BYTES;
        for (i, entry) in self
            .list_files(tenant, ws, "")
            .await?
            .into_iter()
            .enumerate()
        {
            let omit = |reason: String| OmittedDoc {
                path: entry.path.clone(),
                reason,
            };
            if i >= MAX_DOC_FILES {
                docs.omitted.push(omit(format!(
                    "over the {MAX_DOC_FILES} files a context holds"
                )));
                continue;
            }
            if budget == 0 {
                docs.omitted.push(omit(format!(
                    "over the {MAX_DOCS_BYTES} bytes of docs a context holds"
                )));
                continue;
            }
            let content = match self.read_file(tenant, ws, &entry.path).await {
                Ok(c) => c,
                // Removed since it was listed.
                Err(e) if e.kind == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let size = content.bytes.len();
            let Ok(text) = std::str::from_utf8(&content.bytes) else {
                docs.omitted.push(omit("not UTF-8 text".to_owned()));
                continue;
            };
            let keep =
                &text[..crate::summarize::excerpt::floor_boundary(text, MAX_DOC_BYTES.min(budget))];
            budget -= keep.len();
            docs.files.push(DocFile {
                path: entry.path.clone(),
                version: content.version,
                size: size as u64,
                text: keep.to_owned(),
                truncated: keep.len() < size,
            });
        }
        docs.truncated = !docs.omitted.is_empty() || docs.files.iter().any(|f| f.truncated);
        Ok(docs)
    }

    /// The agent's other threads in its window and the active branches of
    /// its sessions there (processes are added by the caller).
    async fn status_preamble(
        &self,
        tenant: &TenantId,
        thread: &str,
        commits: &[Commit],
    ) -> Result<StatusPreamble> {
        let mut status = StatusPreamble::default();
        let mut threads: BTreeMap<&str, ThreadActivity> = BTreeMap::new();
        // Newest first: the sessions kept are the most recently active.
        let mut sessions: Vec<&str> = Vec::new();
        let mut seen = BTreeSet::new();
        for c in commits.iter().rev() {
            if let Some(s) = c.session_id.as_ref().map(SessionId::as_str)
                && seen.insert(s)
            {
                sessions.push(s);
            }
            let Some(t) = c.thread_id.as_deref().filter(|t| *t != thread) else {
                continue;
            };
            let a = threads.entry(t).or_insert_with(|| ThreadActivity {
                thread_id: t.to_owned(),
                last_activity: c.created_at,
                commit_count: 0,
                message_count: 0,
            });
            a.last_activity = a.last_activity.max(c.created_at);
            a.commit_count += 1;
            a.message_count += c.message_count;
        }
        let mut threads: Vec<ThreadActivity> = threads.into_values().collect();
        threads.sort_by(|a, b| {
            b.last_activity
                .cmp(&a.last_activity)
                .then(a.thread_id.cmp(&b.thread_id))
        });
        if threads.len() > MAX_STATUS_ITEMS {
            threads.truncate(MAX_STATUS_ITEMS);
            status.truncated = true;
        }
        status.threads = threads;
        if self.branching().is_some() {
            if sessions.len() > MAX_STATUS_ITEMS {
                sessions.truncate(MAX_STATUS_ITEMS);
                status.truncated = true;
            }
            let mut branches = Vec::new();
            for s in sessions {
                for b in self.active_branch_records(tenant, s).await? {
                    branches.push(BranchActivity {
                        branch_id: b.id,
                        session_id: b.session_id,
                        description: b.description,
                        depth: b.depth,
                        budget: b.budget,
                        tokens_used: b.tokens_used,
                        deadline: b.deadline,
                    });
                }
            }
            branches.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.branch_id.cmp(&b.branch_id)));
            if branches.len() > MAX_STATUS_ITEMS {
                branches.truncate(MAX_STATUS_ITEMS);
                status.truncated = true;
            }
            status.branches = branches;
        }
        Ok(status)
    }

    /// The prefix texts and the window's bytes as one conversation.
    fn conversation(
        &self,
        format: &FormatId,
        prefix: &[String],
        window: Option<&Bytes>,
        window_messages: u64,
    ) -> Result<AssembledConversation> {
        let codec = self.formats.codec(format);
        let (bytes, lost) = if codec.structured() {
            let role = if codec.carries().system {
                Role::System
            } else {
                Role::User
            };
            let mut conv = Conversation {
                messages: prefix
                    .iter()
                    .map(|t| Message::new(role, vec![Block::text(t.clone())]))
                    .collect(),
            };
            if let Some(w) = window {
                conv.messages.extend(
                    codec
                        .to_canonical(w)
                        .map_err(|e| e.with_field("format"))?
                        .messages,
                );
            }
            let enc = codec
                .encode_canonical(&conv)
                .map_err(|e| e.with_field("format"))?;
            (enc.bytes, enc.lost)
        } else {
            let mut out = prefix.join("\n\n").into_bytes();
            if let Some(w) = window {
                if !out.is_empty() {
                    out.extend_from_slice(b"\n\n");
                }
                out.extend_from_slice(w);
            }
            (Bytes::from(out), Vec::new())
        };
        if bytes.len() > MAX_CONVERSATION_BYTES {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "the assembled context is {} bytes; at most {MAX_CONVERSATION_BYTES} are answered: read the window's artifact (GET /v1/agents/{{agent}}/window) instead, or shorten the window",
                    bytes.len()
                ),
            ));
        }
        let (text, base64) = match std::str::from_utf8(&bytes) {
            Ok(t) => (Some(t.to_owned()), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
            ),
        };
        Ok(AssembledConversation {
            format: format.clone(),
            message_count: prefix.len() as u64 + window_messages,
            text,
            base64,
            lost,
        })
    }
}

/// The docs as the context's text (none when there are no files).
fn docs_text(docs: &AgentDocs) -> Option<String> {
    let ws = docs.workspace.as_ref()?;
    if docs.files.is_empty() && docs.omitted.is_empty() {
        return None;
    }
    let mut out = format!("Agent docs (workspace {ws}):");
    for f in &docs.files {
        out.push_str(&format!("\n\n--- {} ---\n{}", f.path, f.text));
        if f.truncated {
            out.push_str(&format!(
                "\n[cut: the first {} of {} bytes]",
                f.text.len(),
                f.size
            ));
        }
    }
    for o in &docs.omitted {
        out.push_str(&format!("\n\n[left out: {} ({})]", o.path, o.reason));
    }
    Some(out)
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The status preamble as the context's text (none when it is empty).
fn status_text(s: &StatusPreamble) -> Option<String> {
    if s.threads.is_empty() && s.branches.is_empty() && s.processes.is_empty() {
        return None;
    }
    let mut out = String::from("Thread and process status:");
    if !s.threads.is_empty() {
        out.push_str("\nOther active threads:");
        for t in &s.threads {
            out.push_str(&format!(
                "\n- {}: last activity {}, {} messages",
                t.thread_id,
                time(t.last_activity),
                t.message_count
            ));
        }
    }
    if !s.branches.is_empty() {
        out.push_str("\nActive folded branches:");
        for b in &s.branches {
            out.push_str(&format!(
                "\n- {} ({}; session {}, depth {}): {} of {} tokens used, deadline {}",
                b.branch_id,
                b.description,
                b.session_id,
                b.depth,
                b.tokens_used,
                b.budget,
                time(b.deadline)
            ));
        }
    }
    if !s.processes.is_empty() {
        out.push_str("\nRunning processes:");
        for p in &s.processes {
            out.push_str(&format!(
                "\n- {}: {} (since {}{})",
                p.process_id,
                p.description,
                time(p.started_at),
                p.thread_id
                    .as_deref()
                    .map(|t| format!(", thread {t}"))
                    .unwrap_or_default()
            ));
        }
    }
    if s.truncated {
        out.push_str("\n(lists cut at their bound; the most recent kept)");
    }
    Some(out)
}
