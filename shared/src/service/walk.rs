//! The lineage walk: from a tip towards the root through whole lineage runs
//! (one store query per run page, not one per commit), shared by history
//! and materialize.

use super::Service;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::TenantId;

/// The first lineage page of a walk whose length is unknown; later pages
/// grow eightfold, up to [`MAX_WALK_PAGE`].
const FIRST_WALK_PAGE: usize = 64;
/// The largest lineage page a walk asks for.
const MAX_WALK_PAGE: usize = 10_000;

impl Service {
    /// Walks from `tip` towards the root, newest first, until `done` says
    /// the commit just pushed is the last one wanted.
    ///
    /// `wanted` is how many commits (the tip included) the walk will take if
    /// the caller knows; pages are sized to it, so a linear run costs one
    /// query. Otherwise pages start small and grow.
    pub(super) async fn walk(
        &self,
        tenant: &TenantId,
        tip: Commit,
        wanted: Option<usize>,
        mut done: impl FnMut(&Commit) -> bool,
    ) -> Result<Vec<Commit>> {
        let mut guess = FIRST_WALK_PAGE;
        let mut next = tip.parent_position();
        let mut expected_parent = tip.parent;
        let stop_now = done(&tip);
        let mut out = vec![tip];
        if stop_now {
            return Ok(out);
        }
        while let Some((lineage, depth)) = next {
            let limit = match wanted {
                Some(w) => w.saturating_sub(out.len()),
                None => {
                    let this = guess;
                    guess = (guess * 8).min(MAX_WALK_PAGE);
                    this
                }
            };
            let limit = limit.clamp(1, MAX_WALK_PAGE).min(
                usize::try_from(depth)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            );
            let page = self
                .stores
                .meta
                .lineage_run(tenant, &lineage, depth, limit)
                .await?;
            if page.is_empty() {
                return Err(Error::internal(format!(
                    "chain is broken: run {lineage} has no commit at depth {depth}"
                )));
            }
            for c in page {
                if Some(c.id) != expected_parent {
                    return Err(Error::internal(format!(
                        "chain is broken: expected {} at depth {}, found {}",
                        expected_parent.map_or_else(|| "nothing".into(), |p| p.to_string()),
                        c.depth,
                        c.id
                    )));
                }
                next = c.parent_position();
                expected_parent = c.parent;
                let stop = done(&c);
                let leaves_run = c.parent_lineage != Some(c.lineage);
                out.push(c);
                if stop || next.is_none() {
                    return Ok(out);
                }
                if leaves_run {
                    break;
                }
            }
        }
        Ok(out)
    }
}
