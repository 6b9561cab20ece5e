//! Eviction with metadata kept: `evict(ref, before)` drops the delta
//! artifacts of the commits older than `before` (a compaction or snapshot
//! on the ref's path) while keeping every commit's metadata, summary and
//! the artifacts of compactions and snapshots, so history (`ctx log`)
//! still reads the whole chain and the default materialize (which stops at
//! the nearest compaction) still works. Materializing across an evicted
//! delta answers `Gone` naming the commit and the `before` to materialize
//! from instead.
//!
//! # What is evicted
//! The delta commits strictly older than `before` on the ref target's path,
//! down to the root, except those another line of history still needs: a
//! commit with a child off the path below `before` (a fork that does not
//! descend from `before`) keeps its delta, and so do all its ancestors,
//! since that fork's own default materialize reads them. They are reported
//! as `kept`.
//!
//! # The cache
//! A cached materialization built across the evicted deltas must not be
//! served, or a materialize would answer bytes where an uncached one
//! answers 410. Removed are: every cache entry of an evicted commit, and
//! every entry of `before` and its descendants whose stop is not the
//! default (`compaction`); a default-stop entry of those stops at `before`
//! or later and never read an evicted delta, so it stays. Entries of the
//! kept commits and their forks never read an evicted delta either.
//!
//! # Order (crash safety)
//! The commits are marked evicted first, then the cache entries go (their
//! artifact, then the entry), then the delta artifacts, each deleted only
//! when no commit or cache entry outside the eviction uses the same bytes
//! (the rule erasure uses). Interrupted anywhere, running the eviction
//! again finishes it (the markers are idempotent, deletes of what is
//! already gone count nothing), and a reader that finds an artifact
//! missing finds its marker too: the answer is 410, never a 500.
//!
//! Cost: one store query per commit of the path below `before` (its
//! children, its cache entries) and per descendant of `before`: eviction
//! is an operator's occasional call, not a hot path.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::Service;
use super::lifecycle::{Doomed, Erased};
use crate::commit::{Commit, CommitType, Stop};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, RefName, TenantId};
use crate::service::compact::COVERS;
use crate::store::MaterializeKey;
use crate::summarize::{Extractive, Summarizer, SummaryInput, clip_summary};

/// What an eviction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evicted {
    /// The compaction or snapshot evicted before: what to materialize from.
    pub before: CommitId,
    /// Delta commits whose delta is evicted (by this call or an earlier one
    /// with the same `before`); their metadata stays.
    pub commits: u64,
    /// Eviction markers this call set (0 on a re-run).
    pub marked: u64,
    /// Delta commits older than `before` whose delta is kept because a fork
    /// off the path below `before` still needs it, oldest first.
    pub kept: Vec<CommitId>,
    /// Artifacts deleted (evicted deltas and cached results built on them).
    pub artifacts: u64,
    /// Artifacts kept because a commit or cache entry outside the eviction
    /// uses the same bytes.
    pub artifacts_shared: u64,
    /// Materialization cache entries removed.
    pub cache: u64,
    /// Evicted commits that had no summary and were given the extractive
    /// one before their delta went.
    pub summarized: u64,
}

/// Whether compaction or snapshot `c` stands for the context it replaces:
/// a snapshot holds it whole; a compaction was made by `compact` from the
/// whole context at its parent (the tag [`COVERS`] names the parent). A
/// compaction written by hand may say anything.
fn covers(c: &Commit) -> bool {
    match c.commit_type {
        CommitType::Snapshot => true,
        CommitType::Compaction => c
            .parent
            .is_some_and(|p| c.tags.get(COVERS).is_some_and(|t| *t == p.to_string())),
        CommitType::Delta => false,
    }
}

/// The most lost commits an eviction's 409 lists.
const LOST_SHOWN: usize = 5;

/// The 409 for an eviction that would lose what no compaction covers:
/// what would be lost (the first [`LOST_SHOWN`] of `total` commits, each
/// with its summary or its delta's first line).
fn not_covered(before: &CommitId, lost: &[(CommitId, String)], total: usize) -> Error {
    let mut list: Vec<String> = lost
        .iter()
        .map(|(id, what)| format!("{id} ({what})"))
        .collect();
    if total > lost.len() {
        list.push(format!("and {} more", total - lost.len()));
    }
    Error::conflict(
        format!(
            "evicting before {before} would lose {total} turn(s) that no compaction made by \
             `compact` covers (a compaction written by hand may not stand for them): {}; \
             compact the ref first (`ctx compact`), or pass force (`--force`) to evict anyway",
            list.join(", ")
        ),
        None,
    )
    .with_field("force")
}

impl Service {
    /// Evicts the deltas older than `before` on the path of ref `name`
    /// (see the module documentation).
    ///
    /// # Errors
    /// `NotFound` for the ref (also another tenant's), or naming `before`
    /// when that commit does not exist; `Invalid` (field `before`) when it
    /// is not a compaction or snapshot, or is not on the ref target's
    /// path; `Unavailable`.
    pub async fn evict(
        &self,
        tenant: &TenantId,
        name: &RefName,
        before: &CommitId,
        force: bool,
    ) -> Result<Evicted> {
        let meta = &self.stores.meta;
        let target = self.get_ref(tenant, name).await?.target;
        let b = meta
            .get_commit(tenant, before)
            .await?
            .ok_or_else(|| super::missing_commit("before", before))?;
        if !matches!(b.commit_type, CommitType::Compaction | CommitType::Snapshot) {
            return Err(Error::invalid(
                "before",
                format!(
                    "commit {before} is a {}; eviction keeps history from a compaction \
                     or snapshot commit",
                    b.commit_type.as_str()
                ),
            ));
        }
        let tip = self.show(tenant, &target).await?;
        let not_on_path = || {
            Error::invalid(
                "before",
                format!("commit {before} is not on the path of ref {name} (at {target})"),
            )
        };
        if b.depth > tip.depth {
            return Err(not_on_path());
        }
        // From `before` down to the root, newest first.
        let wanted = usize::try_from(tip.depth.saturating_add(1)).ok();
        let path = self.walk(tenant, tip, wanted, |_| false).await?;
        let at = path
            .iter()
            .position(|c| c.id == *before)
            .ok_or_else(not_on_path)?;
        let older = &path[at + 1..];
        // The newest commit below `before` with a child off the path: it
        // and everything older stay readable for that fork.
        let mut keep_from = older.len();
        let mut above = *before;
        for (i, c) in older.iter().enumerate() {
            let children = meta.child_commits(tenant, &c.id).await?;
            if children.iter().any(|k| k.id != above) {
                keep_from = i;
                break;
            }
            above = c.id;
        }
        let evicted: BTreeMap<CommitId, Commit> = older[..keep_from]
            .iter()
            .filter(|c| c.commit_type == CommitType::Delta)
            .map(|c| (c.id, c.clone()))
            .collect();
        let mut kept: Vec<CommitId> = older[keep_from..]
            .iter()
            .filter(|c| c.commit_type == CommitType::Delta)
            .map(|c| c.id)
            .collect();
        kept.reverse();
        // What no compaction stands for: each evicted delta's nearest
        // compaction or snapshot above it (from `before` down) must cover it.
        let mut uncovered: Vec<&Commit> = Vec::new();
        let mut covering = covers(&b);
        for c in older {
            match c.commit_type {
                CommitType::Compaction | CommitType::Snapshot => covering = covers(c),
                CommitType::Delta if !covering && evicted.contains_key(&c.id) => {
                    uncovered.push(c);
                }
                _ => {}
            }
        }
        if !uncovered.is_empty() && !force {
            // What would be lost, oldest first: each commit's summary, or
            // the extractive line of its delta.
            let mut lost = Vec::with_capacity(uncovered.len().min(LOST_SHOWN));
            for c in uncovered.iter().rev().take(LOST_SHOWN) {
                let what = match &c.summary {
                    Some(s) => s.clone(),
                    None => self.extractive_line(tenant, c).await?.unwrap_or_default(),
                };
                lost.push((c.id, what));
            }
            return Err(not_covered(before, &lost, uncovered.len()));
        }
        // The commits evicted without a summary get the extractive one
        // while their delta is still there, so that the log still reads.
        let mut summarized = 0;
        for c in evicted.values().filter(|c| c.summary.is_none()) {
            let Some(line) = self.extractive_line(tenant, c).await? else {
                continue;
            };
            if meta
                .write_summary(tenant, c, clip_summary(&line), &Extractive.id())
                .await?
            {
                summarized += 1;
            }
        }
        let ids: Vec<CommitId> = evicted.keys().copied().collect();
        let mut report = Evicted {
            summarized,
            before: *before,
            commits: ids.len() as u64,
            marked: 0,
            kept,
            artifacts: 0,
            artifacts_shared: 0,
            cache: 0,
        };
        // 1. Markers: from here on a missing delta reads as evicted.
        report.marked = meta.mark_evicted(tenant, before, &ids).await?;
        // 2.–3. Between two purges of the tenant's results in memory and
        // pending writes (see `hot`): none built on an evicted delta
        // stays, whether this finishes or fails partway.
        self.hot
            .purging(tenant, async {
                // 2. Cache entries that may have read an evicted delta.
                let mut doomed: Vec<(MaterializeKey, ArtifactRef)> = Vec::new();
                for id in evicted.keys() {
                    for (k, m) in meta.materialized_of(tenant, id).await? {
                        doomed.push((k, m.artifact_ref));
                    }
                }
                let mut frontier = vec![*before];
                let mut seen: HashSet<CommitId> = HashSet::from([*before]);
                while let Some(id) = frontier.pop() {
                    for (k, m) in meta.materialized_of(tenant, &id).await? {
                        if k.stop != Stop::Compaction {
                            doomed.push((k, m.artifact_ref));
                        }
                    }
                    for child in meta.child_commits(tenant, &id).await? {
                        if seen.insert(child.id) {
                            frontier.push(child.id);
                        }
                    }
                }
                let cache_keys = doomed.iter().map(|(k, _)| k.clone()).collect();
                let scope = Doomed::new(&evicted, cache_keys);
                let mut removed = Erased::default();
                self.drop_cache_entries(tenant, doomed, &scope, &mut removed)
                    .await?;
                report.cache = removed.cache;
                // 3. The deltas: a blob unless another commit or cache entry still
                // uses its bytes; bytes inline with the commit always (they are
                // this commit's own copy).
                for c in evicted.values() {
                    let counted = removed.artifacts;
                    self.drop_artifact(tenant, &c.artifact_ref, false, &scope, &mut removed)
                        .await?;
                    if meta.clear_inline(tenant, &c.id).await? && removed.artifacts == counted {
                        removed.artifacts += 1;
                    }
                }
                report.artifacts = removed.artifacts;
                report.artifacts_shared = removed.artifacts_shared;
                // Bytes inline with the commits were rows: no copy of them may stay
                // in the database's free pages or its write-ahead log.
                meta.reclaim_space().await?;
                Ok(())
            })
            .await?;
        Ok(report)
    }

    /// The extractive summary line of commit `c`'s delta; `None` when its
    /// bytes are gone.
    async fn extractive_line(&self, tenant: &TenantId, c: &Commit) -> Result<Option<String>> {
        let Some(bytes) = self
            .stored_bytes(tenant, c.id, c.artifact_ref, c.inline.clone())
            .await?
        else {
            return Ok(None);
        };
        let input = SummaryInput::decode(&self.formats, c.commit_type, &c.format, &bytes);
        Ok(Some(crate::summarize::extractive::line(&input)))
    }

    /// The error for commit `id`'s missing artifact `art`: `Gone` naming
    /// what to materialize from when an eviction dropped it, else
    /// `Internal` (a stored commit's bytes must exist).
    pub(super) async fn missing_artifact(
        &self,
        tenant: &TenantId,
        id: CommitId,
        art: ArtifactRef,
    ) -> Error {
        match self.stores.meta.evicted_by(tenant, &id).await {
            Ok(Some(before)) => Error::new(
                crate::error::ErrorKind::Gone,
                format!(
                    "the delta of commit {id} was evicted (metadata and summary kept); \
                     materialize from {before} or a later commit instead (the default \
                     stop, `compaction`, does)"
                ),
            ),
            Ok(None) => Error::internal(format!(
                "artifact {art} of commit {id} is missing from storage"
            )),
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests;
