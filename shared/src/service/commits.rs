//! Reading and annotating commits: show, update-metadata, history, resolve.

use chrono::{DateTime, Utc};

use super::Service;
use crate::commit::{self, Commit, Tags};
use crate::error::{Error, Result};
use crate::id::{CommitId, Principal, TenantId};
use crate::store::MetadataPatch;

impl Service {
    /// One commit.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn show(&self, tenant: &TenantId, id: &CommitId) -> Result<Commit> {
        self.stores
            .meta
            .get_commit(tenant, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("commit {id}")))
    }

    /// Changes a commit's summary (`Some(None)` clears it) and replaces its
    /// tags; artifacts never change.
    ///
    /// # Errors
    /// `NotFound`; `Invalid` for an oversized summary or bad tags.
    pub async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        summary: Option<Option<String>>,
        tags: Option<Tags>,
    ) -> Result<Commit> {
        if let Some(Some(s)) = &summary {
            commit::check_summary(s)?;
        }
        if let Some(t) = &tags {
            commit::check_tags(t)?;
        }
        let patch = MetadataPatch { summary, tags };
        self.stores
            .meta
            .update_metadata(tenant, id, &patch)
            .await?
            .ok_or_else(|| Error::not_found(format!("commit {id}")))
    }

    /// The commits from `id` towards the root, newest first, at most `depth`.
    ///
    /// # Errors
    /// `NotFound`; `Invalid` for a depth of 0 or over the limit.
    pub async fn history(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        depth: usize,
    ) -> Result<Vec<Commit>> {
        Ok(self.history_page(tenant, id, None, depth).await?.0)
    }

    /// A page of `id`'s history: at most `depth` commits from `cursor` (the
    /// `next` of the page before) or from `id`, newest first, and the
    /// `next` of this page: the parent of its last commit when the root
    /// was not reached.
    ///
    /// The cursor is the id of the commit the page starts at, so a page
    /// costs what the first one does, on every store. It must be `id` or
    /// older than `id` (a smaller depth); a commit the tenant does not have
    /// is not a cursor.
    ///
    /// # Errors
    /// `NotFound` for `id`; `Invalid` for a depth of 0 or over the limit,
    /// and for a cursor that is no commit or not older than `id`.
    pub async fn history_page(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        cursor: Option<&CommitId>,
        depth: usize,
    ) -> Result<(Vec<Commit>, Option<CommitId>)> {
        if depth == 0 || depth > self.limits.max_history {
            return Err(Error::invalid(
                "depth",
                format!("depth is {depth}; give 1 to {}", self.limits.max_history),
            ));
        }
        let tip = self.show(tenant, id).await?;
        let start = match cursor {
            None => tip,
            Some(c) if *c == tip.id => tip,
            Some(c) => {
                let at = self.stores.meta.get_commit(tenant, c).await?.ok_or_else(|| {
                    Error::invalid(
                        "cursor",
                        format!(
                            "cursor {c} is no commit; pass the `next` of a page of {id}'s history"
                        ),
                    )
                })?;
                if at.depth >= tip.depth {
                    return Err(Error::invalid(
                        "cursor",
                        format!(
                            "cursor {c} is not older than {id}; pass the `next` of a page of its history"
                        ),
                    ));
                }
                at
            }
        };
        let mut n = 0;
        let commits = self
            .walk(tenant, start, Some(depth), |_| {
                n += 1;
                n >= depth
            })
            .await?;
        let next = commits.last().and_then(|c| c.parent);
        Ok((commits, next))
    }

    /// The newest commit of `principal` at or before `at` (default: now).
    ///
    /// # Errors
    /// `NotFound` when the principal has no commit by then.
    pub async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: Option<DateTime<Utc>>,
    ) -> Result<CommitId> {
        let at = at.unwrap_or_else(|| self.clock.now());
        self.stores
            .meta
            .resolve(tenant, principal, at)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "a commit of {principal} at or before {}",
                    at.to_rfc3339()
                ))
            })
    }
}
