//! Memory for folded branches on [`Service`]: extraction when a branch
//! ends, injection when one is created, search (`crate::branch::memories`
//! has the record, the ranking and the safety checks).

use std::sync::Arc;

use super::{MAX_DESCRIPTION, strip_controls};
use crate::auth::Caller;
use crate::branch::memories::{
    self, BlockedMemory, Guard, Injected, MemoryId, MemoryKind, MemoryQuery, MemoryRecord,
    Provenance, ScoredMemory,
};
use crate::branch::{BranchRecord, BranchStatus, Scrubber};
use crate::commit::CommitType;
use crate::error::{Error, Result};
use crate::format::{FormatId, estimate_tokens};
use crate::id::{CommitId, TenantId};
use crate::service::Service;
use crate::summarize::{Content, Extractive, Summarizer, SummaryInput, truncate};

/// The characters of a branch's last checkpoint a memory keeps.
const LAST_WORK_CHARS: usize = 1500;
/// The characters of the result or error a memory keeps.
const OUTCOME_CHARS: usize = 2000;

/// The tip of a branch's chain as its end reads it once
/// (`Service::chain_tip`).
#[derive(Debug, Clone, Default)]
pub(super) struct ChainTip {
    /// The tip; none when the ref cannot be read.
    pub(super) id: Option<CommitId>,
    /// Its delta as text, when it is past the root and readable.
    pub(super) work: Option<String>,
}

/// How a branch ended, for its memory's confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The agent returned it (completed, or failed with an error).
    Own,
    /// Ended for it: budget, deadline, session end, idle, parent.
    Forced,
}

/// The end of a branch's last checkpoint, scrubbed ("" when the scrubber
/// fails: fail closed).
fn last_work(scrubber: &dyn Scrubber, work: &str) -> String {
    let text = strip_controls(work, true);
    let chars: Vec<char> = text.trim().chars().collect();
    let tail: String = chars[chars.len().saturating_sub(LAST_WORK_CHARS)..]
        .iter()
        .collect();
    scrubber.scrub(&tail).map(|s| s.text).unwrap_or_default()
}

/// How much a memory of a branch that ended so is trusted: the agent's own
/// account (a result, or an error it named) most; a timeout (why is a
/// guess) less; a forced end least (the work was cut off).
fn confidence(status: BranchStatus, ending: Ending) -> f64 {
    match (status, ending) {
        (BranchStatus::Completed | BranchStatus::Failed, Ending::Own) => 0.8,
        (BranchStatus::Timeout, _) => 0.6,
        (BranchStatus::Completed, Ending::Forced) => 0.5,
        _ => 0.4,
    }
}

impl Service {
    /// Extracts and stores the memory of `rec`, which just ended with
    /// `outcome` appended to its parent as `commit`, its chain at `tip`. A
    /// completed branch that left nothing (no checkpoint after its root,
    /// an empty result) teaches nothing and yields none. Best effort: the
    /// caller logs a failure, the branch's end stands.
    pub(super) async fn extract_memory(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        outcome: &str,
        ending: Ending,
        commit: CommitId,
        tip: &ChainTip,
    ) -> Result<Option<MemoryRecord>> {
        let f = self.branching_or_err()?.clone();
        let kind = if rec.status == BranchStatus::Completed {
            MemoryKind::Strategy
        } else {
            MemoryKind::AntiPattern
        };
        // A forced end's outcome already quotes the latest checkpoint.
        let last_work = match (ending, &tip.work) {
            (Ending::Own, Some(work)) => last_work(&*f.scrubber, work),
            _ => String::new(),
        };
        let outcome = outcome.trim();
        if kind == MemoryKind::Strategy && last_work.is_empty() && outcome.is_empty() {
            return Ok(None);
        }
        let status_line = match (&rec.status, &rec.reason) {
            (BranchStatus::Completed, None) => "completed".to_owned(),
            (s, Some(r)) => format!("{s}: {r}"),
            (s, None) => s.to_string(),
        };
        let label = if kind == MemoryKind::Strategy {
            "Result"
        } else {
            "What went wrong"
        };
        let mut content = format!(
            "Task: {}\nOutcome: {status_line}\n{label}: {}",
            rec.description,
            truncate(outcome, OUTCOME_CHARS)
        );
        if !last_work.is_empty() {
            content.push_str("\nLast work: ");
            content.push_str(&last_work);
        }
        let summarizer: Arc<dyn Summarizer> = self
            .summarizer()
            .cloned()
            .unwrap_or_else(|| Arc::new(Extractive));
        let input = SummaryInput {
            commit_type: CommitType::Delta,
            format: FormatId::raw(),
            content: Content::Text(format!("{outcome}\n{last_work}")),
        };
        let (description, by) = match summarizer.summarize(&input).await {
            Ok(s) => (s.text, summarizer.id()),
            Err(e) => {
                tracing::warn!(branch = %rec.id, error = %e, "memory: the summarizer failed; extractive instead");
                let s = Extractive.summarize(&input).await.map_err(|e| {
                    Error::internal(format!("the extractive summarizer failed: {e}"))
                })?;
                (s.text, Extractive.id())
            }
        };
        let memory = MemoryRecord {
            id: MemoryId::of_branch(tenant, &rec.id),
            kind,
            title: truncate(&rec.description, MAX_DESCRIPTION),
            description,
            content,
            confidence: confidence(rec.status, ending),
            provenance: Provenance {
                session_id: rec.session_id.clone(),
                principal: rec.owner.clone(),
                branch_id: rec.id,
                commit,
            },
            created_at: rec.completed_at.unwrap_or_else(|| self.clock().now()),
            extracted_by: by,
        };
        f.store.put_memory(tenant, &memory).await?;
        Ok(Some(memory))
    }

    /// The memories to prepend to a new branch of `session` whose task is
    /// `description`: the best matches at least `min_confidence` confident,
    /// at most `max_items`, whose blocks fit `injection_ratio` of `budget`
    /// (a block that does not fit is skipped for a smaller one). Those
    /// matching an injection pattern are logged, and left out when the
    /// guard blocks.
    pub(super) async fn choose_memories(
        &self,
        caller: &Caller,
        session: &str,
        description: &str,
        budget: u64,
    ) -> Result<(Vec<Injected>, Vec<BlockedMemory>)> {
        let f = self.branching_or_err()?.clone();
        let cfg = &f.config.memory;
        if cfg.max_items == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let found = f
            .store
            .search_memories(
                &caller.tenant,
                &MemoryQuery {
                    text: description.to_owned(),
                    // Candidates beyond the cap, for those that do not fit.
                    limit: (cfg.max_items * 3).min(memories::MAX_SEARCH_LIMIT),
                    min_confidence: cfg.min_confidence,
                    kind: None,
                },
            )
            .await?;
        let allowance = (budget as f64 * cfg.injection_ratio).floor() as u64;
        let frame =
            estimate_tokens(memories::MEMORIES_OPEN.len() + memories::MEMORIES_CLOSE.len() + 2);
        let owner = self.owner_of(caller);
        let mut used = frame;
        let (mut chosen, mut blocked) = (Vec::new(), Vec::new());
        for ScoredMemory { memory, .. } in found {
            if chosen.len() >= cfg.max_items {
                break;
            }
            let untrusted =
                memory.provenance.principal != owner || memory.provenance.session_id != session;
            let patterns = memories::injection_patterns(&memories::searchable(&memory));
            if !patterns.is_empty() {
                tracing::warn!(
                    memory = %memory.id,
                    branch = %memory.provenance.branch_id,
                    session = %memory.provenance.session_id,
                    untrusted,
                    patterns = ?patterns,
                    blocked = cfg.guard == Guard::Block,
                    "memory matches a prompt-injection pattern"
                );
                if cfg.guard == Guard::Block {
                    blocked.push(BlockedMemory {
                        id: memory.id,
                        patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
                        untrusted,
                        provenance: memory.provenance.clone(),
                    });
                    continue;
                }
            }
            let tokens = estimate_tokens(memories::render_one(&memory, untrusted).len() + 1);
            if used + tokens > allowance {
                continue;
            }
            used += tokens;
            chosen.push(Injected {
                memory,
                untrusted,
                patterns,
                tokens,
            });
        }
        Ok((chosen, blocked))
    }

    /// Memories of the caller's tenant matching `q`, best first.
    ///
    /// # Errors
    /// `Invalid` naming `q` (blank, or over 1,000 characters), `limit`
    /// (not 1 to 100) or `min_confidence` (not 0 to 1); `Invalid` when
    /// context folding is off; `Unavailable`.
    pub async fn memory_search(
        &self,
        caller: &Caller,
        q: MemoryQuery,
    ) -> Result<Vec<ScoredMemory>> {
        let f = self.branching_or_err()?.clone();
        // As the document's pattern says: something that is neither
        // whitespace nor a control character.
        if !q
            .text
            .chars()
            .any(|c| !c.is_whitespace() && !c.is_control())
        {
            return Err(Error::invalid("q", "q is blank: say what to look for"));
        }
        if q.text.chars().count() > memories::MAX_QUERY_CHARS {
            return Err(Error::invalid(
                "q",
                format!("q is over {} characters", memories::MAX_QUERY_CHARS),
            ));
        }
        if q.limit == 0 || q.limit > memories::MAX_SEARCH_LIMIT {
            return Err(Error::invalid(
                "limit",
                format!(
                    "limit is {}; it must be 1 to {}",
                    q.limit,
                    memories::MAX_SEARCH_LIMIT
                ),
            ));
        }
        if !(0.0..=1.0).contains(&q.min_confidence) {
            return Err(Error::invalid(
                "min_confidence",
                format!("min_confidence is {}; it must be 0 to 1", q.min_confidence),
            ));
        }
        f.store.search_memories(&caller.tenant, &q).await
    }
}
