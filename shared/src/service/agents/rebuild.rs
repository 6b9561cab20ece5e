//! A working context rebuilt from an agent's memory: the system prompt,
//! episodic memory, semantic memory and the raw tail.

use std::collections::HashSet;

use super::super::Service;
use super::WORKING_CONTEXT_SCHEMA;
use super::messages::text_message;
use crate::agent::{RestoreOptions, WorkingContextSnapshot};
use crate::commit::{Commit, CommitType, Trigger};
use crate::error::{Error, ErrorKind, Result};
use crate::id::{Principal, TenantId};

/// How far back (newest commits of the timeline) a rebuild looks for
/// commit summaries.
const EPISODIC_SCAN: usize = 500;
/// Rebuild defaults and limits: (default, max).
const EPISODIC: (usize, usize) = (5, 100);
const SEMANTIC: (usize, usize) = (5, 100);
const RAW_TAIL: (usize, usize) = (10, 1000);
/// Bytes in a system prompt given to a restore.
const MAX_SYSTEM_PROMPT: usize = 1024 * 1024;

impl Service {
    /// Rebuilds a working context from the agent's memory: the system
    /// prompt; one user message carrying episodic memory (the nearest
    /// compaction summary, then the newest commit summaries, oldest first)
    /// and semantic memory (the newest branch_return results on the latest
    /// chain), each kind under its marker ([`memory_message`]); the raw
    /// tail (the last turns of the latest chain since its nearest
    /// compaction), as its messages.
    pub(super) async fn rebuild(
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
            if let Some(memory) = memory_message(&episodic, &semantic) {
                messages.push(text_message("user", memory));
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
}

/// The one user message that carries a rebuild's memory, as seed 003's
/// bootstrap writes it: a marked section per kind of memory,
/// `[MEMORY:EPISODIC]` (numbered, oldest first) then `[MEMORY:SEMANTIC]`
/// (what subtasks concluded); `None` when there is none. A user message,
/// not a second system one: the Anthropic Messages API takes one system
/// prompt, outside the messages.
fn memory_message(episodic: &[String], semantic: &[String]) -> Option<String> {
    let mut parts = Vec::new();
    if !episodic.is_empty() {
        let items = episodic.iter().enumerate();
        parts.push(
            std::iter::once("[MEMORY:EPISODIC]".to_owned())
                .chain(items.map(|(i, e)| format!("{}) {e}", i + 1)))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    if !semantic.is_empty() {
        parts.push(
            std::iter::once("[MEMORY:SEMANTIC]".to_owned())
                .chain(semantic.iter().map(|s| format!("- {s}")))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

pub(super) struct RebuildOptions {
    episodic: usize,
    semantic: usize,
    raw_tail: usize,
}

impl RebuildOptions {
    pub(super) fn of(req: &RestoreOptions) -> Result<Self> {
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
