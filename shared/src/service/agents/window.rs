//! The rolling window: the messages of an agent's commits since
//! max(last_clear, now - window_seconds), and the clear marker that moves
//! its start.

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::super::Service;
use crate::agent::{AgentRecord, DEFAULT_WINDOW_SECONDS, LiveContext, WINDOWS_KEPT, WindowReason};
use crate::commit::{Commit, CommitType};
use crate::error::Result;
use crate::format::FormatId;
use crate::id::{ArtifactRef, Principal, TenantId};

/// The most commits one window answer carries (the newest are kept).
pub const MAX_WINDOW_COMMITS: usize = 10_000;
/// The window has no upper bound (only a lower one, the clear or the
/// window's start): a commit
/// stamped a moment ahead of the server's clock, such as a restore just
/// after a clear, is in it.
const END_OF_TIME: DateTime<Utc> = DateTime::<Utc>::MAX_UTC;

/// An agent's window as its record and timeline give it.
pub(super) struct WindowCommits {
    /// The lower bound (exclusive).
    pub(super) since: DateTime<Utc>,
    /// What set the lower bound.
    pub(super) reason: WindowReason,
    /// The upper bound: now.
    pub(super) until: DateTime<Utc>,
    /// The commits in it, oldest first.
    pub(super) commits: Vec<Commit>,
    /// Whether more commits were in it than one read returns.
    pub(super) truncated: bool,
    /// The joined windows the record remembers.
    pub(super) windows: Vec<ArtifactRef>,
}

impl Service {
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
    pub(super) async fn window_commits(
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
        self.window_commits_of(tenant, agent, &rec, thread).await
    }

    /// [`Service::window_commits`] of an agent whose record is `rec`.
    pub(super) async fn window_commits_of(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        rec: &AgentRecord,
        thread: Option<&str>,
    ) -> Result<WindowCommits> {
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
            windows: rec.windows.clone().unwrap_or_default(),
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
    ) -> Result<LiveContext> {
        let wc = self.window_commits(tenant, agent, thread).await?;
        Ok(self.window_from(tenant, agent, wc, format).await?.0)
    }

    /// The window of `wc`'s commits joined in `format` (as
    /// [`Service::context_window`]), and the joined bytes.
    pub(super) async fn window_from(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        wc: WindowCommits,
        format: Option<FormatId>,
    ) -> Result<(LiveContext, Option<Bytes>)> {
        let WindowCommits {
            since,
            reason,
            until,
            commits,
            truncated,
            windows,
        } = wc;
        let format = format.or_else(|| default_format(&commits));
        let (artifact_ref, message_count, token_count, bytes) = match (&format, commits.is_empty())
        {
            (Some(f), false) => {
                let (m, bytes) = self.join_commits(tenant, &commits, f).await?;
                self.remember_window(tenant, agent, windows, m.artifact_ref)
                    .await?;
                (
                    Some(m.artifact_ref),
                    m.message_count,
                    m.token_count,
                    Some(bytes),
                )
            }
            _ => (None, 0, 0, None),
        };
        let window = LiveContext {
            since,
            reason,
            until,
            format: artifact_ref.and(format),
            commits,
            message_count,
            token_count,
            artifact_ref,
            truncated,
        };
        Ok((window, bytes))
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
}

/// The format of a window when the caller names none.
pub(super) fn default_format(commits: &[Commit]) -> Option<FormatId> {
    commits.last().map(|c| c.format.clone())
}

/// Whether a commit's artifact holds messages of the window: deltas, and a
/// parentless snapshot (an imported context); compactions stand in for
/// earlier messages and are not messages of their own.
fn in_window(c: &Commit) -> bool {
    c.commit_type == CommitType::Delta
        || (c.commit_type == CommitType::Snapshot && c.parent.is_none())
}
