//! The summary queue: commits lacking a summary, claimed, written or
//! failed by the summarizer; the [`SummaryQueue`] concern of a
//! [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};

/// The summary queue over the commits lacking a summary.
#[async_trait]
pub trait SummaryQueue: Send + Sync + 'static {
    /// Commits of `tenant` lacking a summary, oldest first (by
    /// `created_at`, then id), at most `limit`, starting after `after`;
    /// each with its [`SummaryState`]. One request to the store (the sparse
    /// index on DynamoDB, a partial index on SQLite).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage>;

    /// `commit` is the commit as listed or read (its id, and where it is
    /// stored: backends that keep copies update them all).
    ///
    /// Claims a commit for summarizing until `until`: a conditional write
    /// that succeeds only while its summary is missing, no claim unexpired
    /// at `now` holds it and (when `respect_backoff`) its retry time has
    /// passed. Sets the tag [`TAG_SUMMARIZING`]. False when not claimed
    /// (also when the commit does not exist).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool>;

    /// Writes `summary` only if the commit still has none (a summary a
    /// person wrote meanwhile is kept), tags it [`TAG_SUMMARY_BY`] `by`,
    /// and clears the claim and the failure state (and their tags). False
    /// when nothing was written.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool>;

    /// Records that summarizing failed: the error (also as the tag
    /// [`TAG_SUMMARY_ERROR`]), one more attempt, no retry before
    /// `retry_at`, the claim released. Nothing is written when the commit
    /// has a summary by now.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()>;

    /// Tenants that may have commits lacking a summary (a superset is
    /// fine: the batch asks each), for a scheduled job over all tenants.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn summary_tenants(&self) -> Result<Vec<TenantId>>;
}

/// The tag a summarizer's summary carries: who wrote it (`<backend>:<model>`).
pub const TAG_SUMMARY_BY: &str = "summary_by";

/// The tag of a commit whose summary failed: the last error.
pub const TAG_SUMMARY_ERROR: &str = "summary_error";

/// The tag of a commit being summarized: until when (RFC 3339) the claim
/// holds.
pub const TAG_SUMMARIZING: &str = "summarizing";

/// The value of the [`TAG_SUMMARIZING`] tag of a claim held until `until`.
pub fn claim_tag(until: DateTime<Utc>) -> String {
    until.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Where a listing of commits lacking a summary continues: after the
/// commit created at `micros` with id `id`. Opaque to callers (written
/// `<µs>.<ctx id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SummaryCursor {
    /// The last listed commit's `created_at` in µs.
    pub micros: i64,
    /// The last listed commit's id.
    pub id: CommitId,
}

impl SummaryCursor {
    /// The cursor after `commit`.
    pub fn after(commit: &Commit) -> Self {
        SummaryCursor {
            micros: commit.created_at.timestamp_micros(),
            id: commit.id,
        }
    }
}

impl std::fmt::Display for SummaryCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.micros, self.id)
    }
}

impl std::str::FromStr for SummaryCursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "cursor",
                format!("cursor {s:?} is not one a listing handed out"),
            )
        };
        let (micros, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(SummaryCursor {
            micros: micros.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

/// Where a commit stands in the summary queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryState {
    /// A summarizer holds it until then.
    pub claimed_until: Option<DateTime<Utc>>,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Not retried before then.
    pub retry_at: Option<DateTime<Utc>>,
}

impl SummaryState {
    /// Whether a batch may claim it at `now`.
    pub fn claimable(&self, now: DateTime<Utc>) -> bool {
        self.claimed_until.is_none_or(|t| t <= now) && self.retry_at.is_none_or(|t| t <= now)
    }
}

/// A commit lacking a summary, with its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The commit.
    pub commit: Commit,
    /// Its place in the queue.
    pub state: SummaryState,
}

/// A page of commits lacking a summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MissingPage {
    /// Oldest first.
    pub items: Vec<Missing>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<SummaryCursor>,
}
