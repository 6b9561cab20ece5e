//! Re-compaction: an operator or a batch job folds an old chain into a
//! summary written by a (newer) summarizer. The context at a commit, from
//! its nearest compaction, is summarized and recorded as a compaction
//! commit whose parent is that commit, in the chain's own format, so a
//! materialize of the new tip starts at the summary while `stop: root`
//! still reaches the original history.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Service;
use super::checkpoint::{Delta, NewCommit};
use crate::commit::{Commit, CommitType, Stop, Tags, Trigger};
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::RefMove;
use crate::summarize::{Extractive, Failure, Summarizer, SummaryInput, clip_summary};

/// Tag naming the summarizer that wrote a compaction (`<backend>:<model>`).
pub const COMPACTED_BY: &str = "compacted_by";

/// Tag of a compaction made from the whole context it replaces: the id of
/// the commit it compacted (its parent). An eviction behind a compaction
/// without it asks for `force` (see `Service::evict`).
pub const COVERS: &str = "covers";

/// What a re-compaction recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The new compaction commit (its parent is the compacted commit).
    pub commit: Commit,
    /// False when the same compaction had been recorded before.
    pub created: bool,
    /// Messages in the context it stands in for.
    pub replaced_messages: u64,
    /// Tokens in the context it stands in for.
    pub replaced_tokens: u64,
}

impl Service {
    /// The summarizer a compaction asks for by name: the configured one
    /// when `name` is absent or names it (`openai` or `openai:gpt-4o-mini`),
    /// or `extractive`, which every server has.
    ///
    /// # Errors
    /// `Invalid` naming `summarizer` for any other name; `Unavailable` when
    /// none is configured and none is named.
    pub fn summarizer_named(&self, name: Option<&str>) -> Result<Arc<dyn Summarizer>> {
        let configured = self.summarizer().cloned();
        let matches = |s: &Arc<dyn Summarizer>, n: &str| names_of(&**s).contains(&n.to_owned());
        match (name, configured) {
            (None, Some(s)) => Ok(s),
            (None, None) => Err(Error::unavailable(
                "no summarizer is configured on this server",
            )),
            (Some(n), Some(s)) if matches(&s, n) => Ok(s),
            (Some(n), configured) => {
                let extractive: Arc<dyn Summarizer> = Arc::new(Extractive);
                if matches(&extractive, n) {
                    return Ok(extractive);
                }
                let mut known = vec![extractive.id()];
                known.extend(configured.map(|s| s.id()));
                known.dedup();
                Err(Error::invalid(
                    "summarizer",
                    format!(
                        "summarizer {n:?} is not available here; this server has {}",
                        known.join(" and ")
                    ),
                ))
            }
        }
    }

    /// Every name [`Service::summarizer_named`] takes on this server:
    /// `extractive` and the configured summarizer's, each by its id and by
    /// the part before its `:` (its kind).
    pub fn summarizer_names(&self) -> Vec<String> {
        let mut names = names_of(&Extractive);
        if let Some(s) = self.summarizer() {
            names.extend(names_of(&**s));
        }
        names.sort();
        names.dedup();
        names
    }

    /// Summarizes the context at `id` (from its nearest compaction) with
    /// `summarizer` and records it as a compaction commit on top of `id`,
    /// moving `ref_move` to it by compare-and-swap when given.
    ///
    /// # Errors
    /// `NotFound` for the commit; `Unavailable` when the summarizer fails
    /// (nothing is written); `Conflict` when the ref moved.
    pub async fn compact(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        summarizer: &dyn Summarizer,
        ref_move: Option<RefMove>,
    ) -> Result<Compacted> {
        let tip = self.show(tenant, id).await?;
        let (materialized, joined) = self
            .materialize_bytes(tenant, id, Stop::Compaction, Some(tip.format.clone()))
            .await?;
        let context = materialized.result;
        let bytes = match joined {
            Some(bytes) => bytes,
            None => {
                self.download_artifact(tenant, &context.artifact_ref)
                    .await?
            }
        };
        // Opaque text keeps its last turns verbatim after the summary (the
        // raw tail); the summary stands for the turns before them.
        let structured = self.formats.codec(&tip.format).structured();
        let (head, tail) = if structured {
            (&bytes[..], &[][..])
        } else {
            split_tail(&bytes)
        };
        let whole = SummaryInput::decode(&self.formats, CommitType::Delta, &tip.format, &bytes);
        // When every turn is in the tail, the summary (the log's line) is
        // of the whole context.
        let input = if head.iter().all(u8::is_ascii_whitespace) {
            whole
        } else {
            SummaryInput::decode(&self.formats, CommitType::Delta, &tip.format, head)
        };
        let summary = summarizer
            .summarize_context(&input)
            .await
            .map_err(|f| summarizer_failed(&summarizer.id(), &f))?;
        let text = summary.text.trim();
        if text.is_empty() {
            return Err(Error::unavailable(format!(
                "summarizer {} wrote an empty summary; nothing was recorded",
                summarizer.id()
            )));
        }
        let at = later_than(self.clock.now(), tip.created_at);
        let delta = if head.iter().all(u8::is_ascii_whitespace) && !tail.is_empty() {
            bytes::Bytes::copy_from_slice(tail)
        } else {
            let summary = self
                .formats
                .codec(&tip.format)
                .compaction_delta(text, head, at)?;
            let mut d = summary.to_vec();
            if !tail.is_empty() && !d.ends_with(b"\n") {
                d.push(b'\n');
            }
            d.extend_from_slice(tail);
            bytes::Bytes::from(d)
        };
        let mut tags = Tags::new();
        tags.insert(COMPACTED_BY.to_owned(), summarizer.id());
        tags.insert(COVERS.to_owned(), id.to_string());
        let new = NewCommit {
            parent: Some(*id),
            commit_type: CommitType::Compaction,
            delta: Delta::Inline(delta),
            machine: tip.machine.clone(),
            session_id: tip.session_id.clone(),
            checkpoint: Trigger::Compaction,
            ticket_id: tip.ticket_id.clone(),
            thread_id: tip.thread_id.clone(),
            summary: Some(clip_summary(text).to_owned()),
            created_at: Some(at),
            tags: Some(tags),
            ref_move,
            ..NewCommit::new(
                tip.principal.clone(),
                tip.template.clone(),
                tip.format.clone(),
                bytes::Bytes::new(),
            )
        };
        let done = self.checkpoint(tenant, new).await?;
        Ok(Compacted {
            commit: done.commit,
            created: done.created,
            replaced_messages: context.message_count,
            replaced_tokens: context.token_count,
        })
    }
}

/// Turns of opaque text a compaction keeps verbatim after its summary (as
/// seed 003's raw tail does).
pub const TAIL_TURNS: usize = 2;

/// Opaque text cut into what the summary stands for and the last
/// [`TAIL_TURNS`] turns ([`raw_turns`](crate::summarize::extractive::raw_turns)),
/// kept verbatim. Bytes that are not UTF-8, and text of at most
/// [`TAIL_TURNS`] turns, are all summarized.
fn split_tail(bytes: &[u8]) -> (&[u8], &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return (bytes, &[]);
    };
    let turns = crate::summarize::extractive::raw_turns(text);
    if turns.len() <= TAIL_TURNS {
        // Nothing before the tail: the summary stands for all of it.
        return (bytes, &[]);
    }
    let tail: usize = turns.iter().rev().take(TAIL_TURNS).map(|t| t.len()).sum();
    bytes.split_at(bytes.len() - tail)
}

/// The error for a summarizer that wrote nothing.
fn summarizer_failed(id: &str, failure: &Failure) -> Error {
    Error::unavailable(format!(
        "summarizer {id} failed ({failure}); nothing was recorded, try again later"
    ))
}

/// `now`, or a microsecond after `parent` when the clock is behind it (a
/// child is never older than its parent).
fn later_than(now: DateTime<Utc>, parent: DateTime<Utc>) -> DateTime<Utc> {
    if now > parent {
        now
    } else {
        parent + chrono::Duration::microseconds(1)
    }
}

#[cfg(test)]
mod tests;

/// The names a summarizer answers to: its id (`openai:gpt-4o-mini`) and
/// its kind, the part before the `:` (`openai`).
fn names_of(s: &dyn Summarizer) -> Vec<String> {
    let id = s.id();
    let kind = id.split(':').next().unwrap_or_default().to_owned();
    if kind == id { vec![id] } else { vec![id, kind] }
}
