//! Filling in missing summaries: the batch a schedule runs
//! ([`Service::summarize_batch`]) and the one-shot request
//! ([`Service::summarize_one`]).
//!
//! A commit is claimed (a conditional write with an expiry) before its model
//! call, so two batches running at once never pay for one commit twice, and
//! a crashed batch's claims run out and are picked up later. The summary is
//! written only while the commit still lacks one: a person's summary written
//! meanwhile is kept. A failure is recorded on the commit (`summary_error`)
//! with a retry time that backs off, so one bad commit never jams the queue.

use std::collections::VecDeque;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};

use super::Service;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{Missing, SummaryCursor, TAG_SUMMARIZING, TAG_SUMMARY_BY, TAG_SUMMARY_ERROR};
use crate::summarize::{Failure, Summarizer, SummaryInput, clip_summary};

/// Commits asked for per page of the queue.
const PAGE: usize = 100;

/// What one batch may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOptions {
    /// One tenant's queue, or (`None`) every tenant with work.
    pub tenant: Option<TenantId>,
    /// The most commits claimed.
    pub limit: usize,
    /// Model calls in flight at once.
    pub concurrency: usize,
    /// The most model calls (stop claiming once this many are made).
    pub max_calls: Option<u64>,
    /// The most tokens (read + written; stop claiming once spent).
    pub max_tokens: Option<u64>,
    /// Claim nothing new at or after this time (a Lambda's timeout).
    pub deadline: Option<DateTime<Utc>>,
    /// How long a claim holds: longer than a model call can take.
    pub lease: Duration,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            tenant: None,
            limit: 100,
            concurrency: 4,
            max_calls: None,
            max_tokens: None,
            deadline: None,
            lease: Duration::minutes(10),
        }
    }
}

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchReport {
    /// Summaries written.
    pub summarized: u64,
    /// Commits whose summary failed (recorded as `summary_error`).
    pub failed: u64,
    /// Summaries not written because someone wrote one meanwhile.
    pub skipped_human: u64,
    /// Commits another run held (or took first).
    pub skipped_claimed: u64,
    /// Model calls made.
    pub calls: u64,
    /// Tokens the model read and wrote.
    pub tokens: u64,
    /// Stopped because the call or token budget was spent.
    pub budget_exhausted: bool,
    /// Stopped because the deadline came.
    pub deadline_reached: bool,
}

/// How one claimed commit ended.
enum Outcome {
    Summarized,
    SkippedHuman,
    Failed(Failure),
}

/// How long a commit whose summary failed `attempts` times before (this
/// failure not counted) waits: transient failures from a minute, doubling,
/// up to six hours, and never less than the endpoint asked for; permanent
/// ones from an hour, quadrupling, up to a week.
pub fn retry_delay(failure: &Failure, attempts: u32) -> Duration {
    match failure {
        Failure::Transient { retry_after, .. } => {
            let backoff = Duration::minutes(1) * 2i32.saturating_pow(attempts.min(20));
            let backoff = backoff.min(Duration::hours(6));
            let asked = retry_after
                .and_then(|d| Duration::from_std(d).ok())
                .unwrap_or_else(Duration::zero);
            backoff.max(asked)
        }
        Failure::Permanent { .. } => {
            (Duration::hours(1) * 4i32.saturating_pow(attempts.min(10))).min(Duration::weeks(1))
        }
    }
}

/// The queue a batch walks: tenant by tenant, page by page.
struct Queue {
    tenants: VecDeque<TenantId>,
    current: Option<(TenantId, Option<SummaryCursor>)>,
    buffer: VecDeque<(TenantId, Missing)>,
    /// Entries handed out so far.
    seen: u64,
    /// Whether every tenant's queue was read to its end.
    drained: bool,
}

impl Queue {
    /// The next commit to consider, fetching pages as needed.
    async fn next(&mut self, service: &Service) -> Result<Option<(TenantId, Missing)>> {
        loop {
            if let Some(item) = self.buffer.pop_front() {
                self.seen += 1;
                return Ok(Some(item));
            }
            let (tenant, after) = match self.current.take() {
                Some(c) => c,
                None => match self.tenants.pop_front() {
                    Some(t) => (t, None),
                    None => {
                        self.drained = true;
                        return Ok(None);
                    }
                },
            };
            let page = service
                .stores
                .meta
                .missing_summaries(&tenant, after.as_ref(), PAGE)
                .await?;
            if let Some(next) = page.next {
                self.current = Some((tenant.clone(), Some(next)));
            }
            self.buffer
                .extend(page.items.into_iter().map(|m| (tenant.clone(), m)));
        }
    }
}

impl Service {
    /// Sets the summarizer the batch and the one-shot path call.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// The summarizer, if one is configured.
    pub fn summarizer(&self) -> Option<&Arc<dyn Summarizer>> {
        self.summarizer.as_ref()
    }

    fn require_summarizer(&self) -> Result<Arc<dyn Summarizer>> {
        self.summarizer
            .clone()
            .ok_or_else(|| Error::unavailable("no summarizer is configured on this server"))
    }

    /// Commits of `tenant` lacking a summary, oldest first, at most `limit`,
    /// after `cursor`.
    ///
    /// # Errors
    /// `Invalid` naming `limit` (0 or over the history limit);
    /// `Unavailable`.
    pub async fn missing_summaries(
        &self,
        tenant: &TenantId,
        cursor: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<crate::store::MissingPage> {
        if limit == 0 || limit > self.limits.max_history {
            return Err(Error::invalid(
                "limit",
                format!("limit is {limit}; give 1 to {}", self.limits.max_history),
            ));
        }
        self.stores
            .meta
            .missing_summaries(tenant, cursor, limit)
            .await
    }

    /// Summarizes up to `opts.limit` commits lacking a summary, claiming each
    /// before its model call, `opts.concurrency` at a time, within the
    /// budgets and the deadline.
    ///
    /// # Errors
    /// `Unavailable` when no summarizer is configured or the store fails
    /// (commits already summarized stay summarized).
    pub async fn summarize_batch(&self, opts: &BatchOptions) -> Result<BatchReport> {
        let summarizer = self.require_summarizer()?;
        let tenants = match &opts.tenant {
            Some(t) => VecDeque::from([t.clone()]),
            None => self.stores.meta.summary_tenants().await?.into(),
        };
        let mut queue = Queue {
            tenants,
            current: None,
            buffer: VecDeque::new(),
            seen: 0,
            drained: false,
        };
        let mut report = BatchReport::default();
        let mut claimed = 0usize;
        let mut stop = false;
        let mut inflight = FuturesUnordered::new();
        loop {
            while !stop && inflight.len() < opts.concurrency.max(1) {
                match self
                    .claim_next(&mut queue, opts, &mut report, claimed)
                    .await?
                {
                    Some((tenant, m)) => {
                        claimed += 1;
                        let s = summarizer.clone();
                        inflight.push(async move {
                            let r = self
                                .summarize_claimed(&*s, &tenant, &m.commit, m.state.attempts)
                                .await;
                            (r, m.commit.id)
                        });
                    }
                    None => stop = true,
                }
            }
            let Some((result, id)) = inflight.next().await else {
                break;
            };
            let (outcome, calls, tokens) = result
                .map_err(|e| Error::new(e.kind, format!("summarizing {id}: {}", e.message)))?;
            report.calls += calls;
            report.tokens += tokens;
            match outcome {
                Outcome::Summarized => report.summarized += 1,
                Outcome::SkippedHuman => report.skipped_human += 1,
                Outcome::Failed(_) => report.failed += 1,
            }
        }
        crate::telemetry::summary_queue(queue.seen + queue.buffer.len() as u64, queue.drained);
        Ok(report)
    }

    /// The next commit claimed for this batch, or `None` when the batch
    /// must stop (no work, the limit, a budget or the deadline).
    async fn claim_next(
        &self,
        queue: &mut Queue,
        opts: &BatchOptions,
        report: &mut BatchReport,
        claimed: usize,
    ) -> Result<Option<(TenantId, Missing)>> {
        loop {
            let now = self.clock.now();
            let Some((tenant, m)) = queue.next(self).await? else {
                return Ok(None);
            };
            if !m.state.claimable(now) {
                if m.state.claimed_until.is_some_and(|t| t > now) {
                    report.skipped_claimed += 1;
                }
                continue;
            }
            if claimed >= opts.limit {
                return Ok(None);
            }
            // Calls claimed but not finished count against the budget.
            if opts.max_calls.is_some_and(|max| claimed as u64 >= max)
                || opts.max_tokens.is_some_and(|max| report.tokens >= max)
            {
                report.budget_exhausted = true;
                return Ok(None);
            }
            if opts.deadline.is_some_and(|d| now >= d) {
                report.deadline_reached = true;
                return Ok(None);
            }
            if self
                .stores
                .meta
                .claim_summary(&tenant, &m.commit, now, now + opts.lease, true)
                .await?
            {
                return Ok(Some((tenant, m)));
            }
            report.skipped_claimed += 1;
        }
    }

    /// Summarizes a claimed commit and records the result: the outcome,
    /// model calls made and tokens spent.
    async fn summarize_claimed(
        &self,
        summarizer: &dyn Summarizer,
        tenant: &TenantId,
        commit: &Commit,
        attempts: u32,
    ) -> Result<(Outcome, u64, u64)> {
        let stored = self
            .stored_bytes(
                tenant,
                commit.id,
                commit.artifact_ref,
                commit.inline.clone(),
            )
            .await;
        let (result, calls) = match stored {
            Ok(Some(bytes)) => {
                let input =
                    SummaryInput::decode(&self.formats, commit.commit_type, &commit.format, &bytes);
                (summarizer.summarize(&input).await, 1)
            }
            Ok(None) => (
                Err(Failure::Permanent {
                    reason: format!("artifact {} is not stored", commit.artifact_ref),
                }),
                0,
            ),
            Err(e) => (
                Err(Failure::Transient {
                    reason: format!("reading artifact {}: {}", commit.artifact_ref, e.message),
                    retry_after: None,
                }),
                0,
            ),
        };
        let meta = &self.stores.meta;
        match result {
            Ok(summary) if !summary.text.trim().is_empty() => {
                let tokens = summary.input_tokens + summary.output_tokens;
                let written = meta
                    .write_summary(
                        tenant,
                        commit,
                        clip_summary(&summary.text),
                        &summarizer.id(),
                    )
                    .await?;
                let outcome = if written {
                    Outcome::Summarized
                } else {
                    Outcome::SkippedHuman
                };
                Ok((outcome, calls, tokens))
            }
            Ok(summary) => {
                let failure = Failure::Permanent {
                    reason: format!("{} returned an empty summary", summarizer.id()),
                };
                let tokens = summary.input_tokens + summary.output_tokens;
                self.record_failure(tenant, commit, &failure, attempts)
                    .await?;
                Ok((Outcome::Failed(failure), calls, tokens))
            }
            Err(failure) => {
                self.record_failure(tenant, commit, &failure, attempts)
                    .await?;
                Ok((Outcome::Failed(failure), calls, 0))
            }
        }
    }

    async fn record_failure(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        failure: &Failure,
        attempts: u32,
    ) -> Result<()> {
        let retry_at = self.clock.now() + retry_delay(failure, attempts);
        let error = clip_summary(&failure.to_string()).to_owned();
        self.stores
            .meta
            .fail_summary(tenant, commit, &error, retry_at)
            .await
    }

    /// Summarizes one commit now, ignoring its back-off: the commit after
    /// its summary is written. With `force`, a commit that has a summary
    /// gets a new one.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when it has a summary and `force` is not set,
    /// or another run holds it; `Gone` when an eviction dropped its delta; `Unavailable` when no summarizer is
    /// configured or the summarizer failed (the failure is recorded on the
    /// commit).
    pub async fn summarize_one(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        force: bool,
    ) -> Result<Commit> {
        let commit = self.show(tenant, id).await?;
        let summarizer = self.require_summarizer()?;
        if commit.summary.is_some() {
            if !force {
                return Err(Error::conflict(
                    format!("commit {id} already has a summary; pass force to replace it"),
                    None,
                )
                .with_field("force"));
            }
            return self.resummarize(&*summarizer, tenant, commit).await;
        }
        let now = self.clock.now();
        let lease = BatchOptions::default().lease;
        if !self
            .stores
            .meta
            .claim_summary(tenant, &commit, now, now + lease, false)
            .await?
        {
            if let Some(before) = self.stores.meta.evicted_by(tenant, id).await? {
                return Err(Error::new(
                    crate::error::ErrorKind::Gone,
                    format!(
                        "the delta of commit {id} was evicted (before {before}); it cannot be \
                         summarized any more: write its summary by hand (update-metadata)"
                    ),
                ));
            }
            let current = self.show(tenant, id).await?;
            if current.summary.is_some() && !force {
                return Err(Error::conflict(
                    format!("commit {id} already has a summary; pass force to replace it"),
                    None,
                )
                .with_field("force"));
            }
            return Err(Error::conflict(
                format!("commit {id} is being summarized by another run; try again later"),
                None,
            ));
        }
        // Asked for by a person: a failure backs off as a first one would.
        match self
            .summarize_claimed(&*summarizer, tenant, &commit, 0)
            .await?
        {
            (Outcome::Summarized, ..) => self.show(tenant, id).await,
            (Outcome::SkippedHuman, ..) => Err(Error::conflict(
                format!("commit {id} was given a summary meanwhile; pass force to replace it"),
                None,
            )),
            (Outcome::Failed(f), ..) => Err(Error::unavailable(format!(
                "the summarizer {} failed on {id}: {f} (recorded as {TAG_SUMMARY_ERROR})",
                summarizer.id()
            ))),
        }
    }

    /// A new summary over an existing one (`force`), written as an
    /// update-metadata would.
    async fn resummarize(
        &self,
        summarizer: &dyn Summarizer,
        tenant: &TenantId,
        commit: Commit,
    ) -> Result<Commit> {
        let bytes = self.artifact_of(tenant, &commit).await?;
        let input = SummaryInput::decode(&self.formats, commit.commit_type, &commit.format, &bytes);
        let summary = summarizer.summarize(&input).await.map_err(|f| {
            Error::unavailable(format!(
                "the summarizer {} failed on {}: {f}",
                summarizer.id(),
                commit.id
            ))
        })?;
        let text = clip_summary(&summary.text);
        if text.is_empty() {
            return Err(Error::unavailable(format!(
                "the summarizer {} returned an empty summary for {}",
                summarizer.id(),
                commit.id
            )));
        }
        let mut tags = commit.tags.clone();
        tags.insert(TAG_SUMMARY_BY.to_owned(), summarizer.id());
        tags.remove(TAG_SUMMARY_ERROR);
        tags.remove(TAG_SUMMARIZING);
        self.update_metadata(tenant, &commit.id, Some(Some(text.to_owned())), Some(tags))
            .await
    }
}

#[cfg(test)]
mod tests;
