//! A batch: the artifacts, commits and ref moves of one framework
//! operation, checked as a checkpoint checks each of them and written as
//! one atomic store operation ([`MetaStore::put_batch`]).
//!
//! Every commit goes through the checkpoint's own steps
//! ([`Service::commit_key`], [`Service::build_commit`] and the field
//! checks), so a batch commit is refused for whatever a single checkpoint
//! is; errors name the field as `commits[i].<field>`, `refs[i].<field>` or
//! `artifacts[i].ref`.
//!
//! [`MetaStore::put_batch`]: crate::store::MetaStore::put_batch

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::Service;
use super::checkpoint::{Built, Checkpointed, Delta, NewCommit, check_fields};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, BranchId, CommitId, RefName, TenantId};
use crate::store::{
    BATCH_INLINE_BYTES, BatchCommit, BatchRefMove, Batched, PutCommit, RefRecord, check_batch,
    check_batch_size,
};

/// An artifact given with a batch, addressed by the hash the caller
/// claims for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedArtifact {
    /// The hash claimed; refused unless the bytes hash to it.
    pub artifact_ref: ArtifactRef,
    /// The bytes.
    pub bytes: Bytes,
}

/// One commit of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry {
    /// The commit, as a checkpoint asks for it (its `ref_move` must be
    /// absent: a batch moves refs in [`NewBatch::refs`]). With
    /// `parent_in_batch`, its `parent` is set from that commit.
    pub new: NewCommit,
    /// Its parent is the batch's commit at this (earlier) index.
    pub parent_in_batch: Option<usize>,
}

/// Where a batch's ref move points the ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefTarget {
    /// A commit that exists.
    Commit(CommitId),
    /// The batch's commit at this index.
    InBatch(usize),
}

/// A ref move of a batch, by compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRefMove {
    /// The ref.
    pub name: RefName,
    /// The tip the caller believes it has; `None`: it must not exist.
    pub expected: Option<CommitId>,
    /// Where to point it.
    pub target: RefTarget,
    /// What to do when the ref is not at `expected`.
    pub on_stale: OnStale,
}

/// What a batch's ref move does when the ref is not at its `expected`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnStale {
    /// Refuse the batch with a conflict naming `refs[i].expected`.
    #[default]
    Conflict,
    /// Leave the ref as it is and write the rest of the batch: a move
    /// that follows a ref only where it still was (writes that carry a
    /// head along only if it pointed at their checkpoint).
    Skip,
    /// Move it wherever it points: a ref whose newest writer wins.
    Overwrite,
}

/// How often a batch with `skip` or `overwrite` moves is written again
/// after a ref it read moved before the write (each time it reads the
/// refs anew); a move that kept losing that race is a conflict.
const STALE_RETRIES: usize = 8;

/// A batch: what one framework operation writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewBatch {
    /// Artifacts given inline, each named by its hash: a commit's
    /// `artifact_ref` may name one, and those no commit names are stored
    /// as blobs.
    pub artifacts: Vec<ClaimedArtifact>,
    /// The commits, in order.
    pub commits: Vec<BatchEntry>,
    /// The ref moves.
    pub refs: Vec<NewRefMove>,
}

/// What a batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchDone {
    /// Each commit as stored, in the batch's order (`created` false for
    /// one that existed: a retry).
    pub commits: Vec<Checkpointed>,
    /// Each ref as it is after the batch, in the batch's order (`None`: a
    /// skipped move whose ref does not exist).
    pub refs: Vec<Option<RefRecord>>,
}

/// Where each move of a batch went: written (at this index of the moves
/// the store writes), or skipped, the ref as it was.
enum Slot {
    Written(usize),
    Skipped(Option<RefRecord>),
}

/// `e` with its field (if it names one) as the field of commit `i`.
fn of_commit(i: usize, e: Error) -> Error {
    match e.field.clone() {
        Some(f) => e.with_field(format!("commits[{i}].{f}")),
        None => e,
    }
}

impl Service {
    /// Records a batch: checks every artifact, commit and ref move as a
    /// checkpoint would, then writes them as one atomic store operation.
    ///
    /// Bytes go before the metadata, as an upload goes before its
    /// checkpoint: large deltas and the artifacts no commit names are
    /// stored as blobs (content-addressed, so a batch refused by the store
    /// afterwards leaves at most unreferenced blobs that garbage collection
    /// takes, never a half-written batch). Every check that can refuse the
    /// batch runs before the first of them is stored. Small deltas are
    /// stored inline with their commits, up to [`BATCH_INLINE_BYTES`] per
    /// batch.
    ///
    /// Retrying a batch is safe ([`MetaStore::put_batch`](crate::store::MetaStore::put_batch)):
    /// commits that exist come back with `created` false, refs that already
    /// point at their targets are left alone.
    ///
    /// # Errors
    /// `Invalid` naming the field (`artifacts[i].ref` for a hash that is not
    /// the bytes' or given twice, `commits[i].…`, `refs[i].…`); `NotFound`
    /// naming `commits[i].parent`, `commits[i].artifact_ref` or
    /// `refs[i].target` when what it names does not exist; `TooLarge`
    /// naming `commits`, `refs` or an artifact over its limit; `Conflict`
    /// naming `refs[i].expected` with the current tip when a ref moved, or
    /// for a branch that has ended.
    pub async fn batch(&self, tenant: &TenantId, batch: NewBatch) -> Result<BatchDone> {
        let NewBatch {
            artifacts,
            commits,
            refs,
        } = batch;
        check_batch_size(commits.len(), refs.len())?;
        let mut given: HashMap<ArtifactRef, (usize, Bytes)> = HashMap::new();
        for (i, a) in artifacts.into_iter().enumerate() {
            self.limits
                .check_artifact_size(&format!("artifacts[{i}]"), a.bytes.len())?;
            let actual = ArtifactRef::of(&a.bytes);
            if actual != a.artifact_ref {
                return Err(Error::invalid(
                    format!("artifacts[{i}].ref"),
                    format!(
                        "artifacts[{i}].ref is {} but its bytes hash to {actual}",
                        a.artifact_ref
                    ),
                ));
            }
            if let Some((first, _)) = given.get(&actual) {
                return Err(Error::invalid(
                    format!("artifacts[{i}].ref"),
                    format!("artifact {actual} is given twice (artifacts[{first}] and [{i}])"),
                ));
            }
            given.insert(actual, (i, a.bytes));
        }
        for (i, r) in refs.iter().enumerate() {
            if let RefTarget::InBatch(k) = r.target
                && k >= commits.len()
            {
                return Err(Error::invalid(
                    format!("refs[{i}].target_in_batch"),
                    format!(
                        "refs[{i}].target_in_batch is {k}, but the batch has {} commits",
                        commits.len()
                    ),
                ));
            }
        }
        // The branch each commit writes into: its session's, or that of a
        // `branches/br-…` ref the batch moves to it.
        let mut branches: Vec<Option<(BranchId, String)>> = commits
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.new
                    .branch
                    .map(|b| (b, format!("commits[{i}].session_id")))
            })
            .collect();
        for (k, r) in refs.iter().enumerate() {
            if let (RefTarget::InBatch(i), Some(b)) =
                (r.target, crate::branch::branch_of_ref(&r.name))
            {
                branches[i] = Some((b, format!("refs[{k}].name")));
            }
        }

        let mut used = HashSet::new();
        let mut built: Vec<Built> = Vec::with_capacity(commits.len());
        let mut entries: Vec<BatchCommit> = Vec::with_capacity(commits.len());
        let mut inline_left = BATCH_INLINE_BYTES;
        for (i, entry) in commits.into_iter().enumerate() {
            let BatchEntry {
                mut new,
                parent_in_batch,
            } = entry;
            if new.ref_move.is_some() {
                return Err(Error::invalid(
                    format!("commits[{i}].ref"),
                    "a batch moves refs in `refs`, not per commit",
                ));
            }
            if let Some(j) = parent_in_batch {
                let Some(parent) = built.get(j) else {
                    return Err(Error::invalid(
                        format!("commits[{i}].parent_in_batch"),
                        format!(
                            "commits[{i}].parent_in_batch is {j}: it must name an earlier commit of the batch"
                        ),
                    ));
                };
                new.parent = Some(parent.commit.id);
            }
            // An artifact of the batch named by `artifact_ref` is checked
            // and stored as an inline delta is; errors name `artifact_ref`.
            let mut from_batch = false;
            if let Delta::Stored(art) = &new.delta
                && let Some((_, bytes)) = given.get(art)
            {
                used.insert(*art);
                new.delta = Delta::Inline(bytes.clone());
                from_batch = true;
            }
            let named = |e: Error| {
                let e = match e.field.as_deref() {
                    Some("delta") if from_batch => e.with_field("artifact_ref"),
                    _ => e,
                };
                of_commit(i, e)
            };
            check_fields(&new).map_err(named)?;
            let field = new.delta.field();
            if let Delta::Inline(bytes) = &new.delta {
                self.limits
                    .check_artifact_size(field, bytes.len())
                    .map_err(named)?;
            }
            let parent = match (parent_in_batch, &new.parent) {
                (Some(j), _) => {
                    // The parent's bytes are the batch's, not stored yet:
                    // the checks that read them (open tool uses) get them
                    // inline.
                    let p = &built[j];
                    let mut c = p.commit.clone();
                    if c.inline.is_none() {
                        c.inline = p.bytes.clone().or_else(|| p.blob.clone());
                    }
                    Some(c)
                }
                (None, Some(id)) => Some(
                    self.stores
                        .meta
                        .get_commit(tenant, id)
                        .await?
                        .ok_or_else(|| of_commit(i, super::missing_commit("parent", id)))?,
                ),
                (None, None) => None,
            };
            // A commit without a time gets now, later than the batch's
            // commit before it: the timeline keeps the batch's order (equal
            // times would leave resolve to choose by id).
            if new.created_at.is_none() {
                let now = crate::clock::truncate_to_micros(self.clock.now());
                new.created_at = Some(match built.last() {
                    Some(prev) if now <= prev.commit.created_at => {
                        prev.commit.created_at + chrono::Duration::microseconds(1)
                    }
                    _ => now,
                });
            }
            let key = self.commit_key(tenant, &new, parent.as_ref());
            let limit = self.limits.inline_delta_bytes.min(inline_left);
            let b = self
                .build_commit(tenant, new, parent.as_ref(), key, limit)
                .await
                .map_err(named)?;
            if let Some(bytes) = &b.commit.inline {
                inline_left -= bytes.len();
            }
            entries.push(BatchCommit {
                commit: b.commit.clone(),
                parent_in_batch,
            });
            built.push(b);
        }

        let ids: HashSet<CommitId> = built.iter().map(|b| b.commit.id).collect();
        let mut moves = Vec::with_capacity(refs.len());
        let mut modes = Vec::with_capacity(refs.len());
        for (i, r) in refs.into_iter().enumerate() {
            let target = match r.target {
                RefTarget::InBatch(k) => built[k].commit.id,
                RefTarget::Commit(id) => {
                    if !ids.contains(&id)
                        && self.stores.meta.get_commit(tenant, &id).await?.is_none()
                    {
                        return Err(super::missing_commit("target", &id)
                            .with_field(format!("refs[{i}].target")));
                    }
                    id
                }
            };
            moves.push(BatchRefMove {
                name: r.name,
                expected: r.expected,
                target,
            });
            modes.push(r.on_stale);
        }
        check_batch(&entries, &moves)?;
        // Refuse a stale expectation before storing any bytes (unless the
        // ref already points at the target: a retry). The store checks
        // again atomically.
        let resolved = self.stale_moves(tenant, &moves, &modes).await?;
        let mut guarded: HashMap<BranchId, Option<BranchId>> = HashMap::new();
        for (b, field) in branches.iter().flatten() {
            if !guarded.contains_key(b) {
                let g = self
                    .budget_guard(tenant, Some(b))
                    .await
                    .map_err(|e| e.with_field(field.clone()))?;
                guarded.insert(*b, g);
            }
        }

        for blob in built.iter().filter_map(|b| b.blob.clone()) {
            self.stores.blobs.put(tenant, blob).await?;
        }
        for (art, (_, bytes)) in given {
            if !used.contains(&art) {
                self.stores.blobs.put(tenant, bytes).await?;
            }
        }
        let (commits, refs) = self
            .put_resolved(tenant, &entries, &moves, &modes, resolved)
            .await?;

        let mut out = Vec::with_capacity(commits.len());
        for ((put, b), branch) in commits.into_iter().zip(built).zip(branches) {
            let (commit, created) = match put {
                PutCommit::Created(c) => (c, true),
                PutCommit::Existing(c) => (c, false),
            };
            let mut budget = None;
            if created {
                self.after_commit(tenant, &commit).await;
                if let Some(Some(branch)) = branch.and_then(|(b, _)| guarded.get(&b).copied()) {
                    budget = self
                        .charge_tokens(tenant, &branch, commit.token_count)
                        .await?;
                }
            }
            out.push(Checkpointed {
                commit,
                created,
                budget,
                warnings: b.warnings,
            });
        }
        let created = out.iter().filter(|c| c.created).count() as u64;
        if created > 0 {
            crate::telemetry::checkpoints(tenant.as_str(), created);
        }
        Ok(BatchDone { commits: out, refs })
    }

    /// Writes a batch whose moves [`Service::stale_moves`] resolved; when
    /// the store finds a `skip` or `overwrite` move's ref moved since, the
    /// moves are resolved again and the batch written again (nothing was
    /// written), at most [`STALE_RETRIES`] times. Answers the commits as
    /// stored, and each ref as it is after the batch in `moves`' order.
    ///
    /// # Errors
    /// The store's; a conflict names `refs[i].expected` by the index in
    /// `moves`, skipped moves counted.
    async fn put_resolved(
        &self,
        tenant: &TenantId,
        entries: &[BatchCommit],
        moves: &[BatchRefMove],
        modes: &[OnStale],
        (mut written, mut slots): (Vec<BatchRefMove>, Vec<Slot>),
    ) -> Result<(Vec<PutCommit>, Vec<Option<RefRecord>>)> {
        let mut tries = 0;
        let Batched { commits, refs } = loop {
            if entries.is_empty() && written.is_empty() {
                // Ref moves alone, every one skipped: nothing to write.
                break Batched {
                    commits: Vec::new(),
                    refs: Vec::new(),
                };
            }
            match self
                .stores
                .meta
                .put_batch(tenant, entries, &written, self.clock.now())
                .await
            {
                Ok(done) => break done,
                Err(e) => {
                    // The store names the move by its index among those it
                    // wrote: the caller's index is its slot's.
                    let Some(j) = stale_index(&e) else {
                        return Err(e);
                    };
                    let i = slots
                        .iter()
                        .position(|s| matches!(s, Slot::Written(k) if *k == j))
                        .unwrap_or(j);
                    tries += 1;
                    if modes.get(i).copied().unwrap_or_default() == OnStale::Conflict
                        || tries > STALE_RETRIES
                    {
                        return Err(e.with_field(format!("refs[{i}].expected")));
                    }
                    // A `skip` or `overwrite` move's ref moved after it was
                    // read: read them again.
                    (written, slots) = self.stale_moves(tenant, moves, modes).await?;
                }
            }
        };
        let mut stored = refs.into_iter().map(Some);
        let refs = slots
            .into_iter()
            .map(|s| match s {
                Slot::Written(_) => stored.next().flatten(),
                Slot::Skipped(r) => r,
            })
            .collect();
        Ok((commits, refs))
    }

    /// The moves of a batch as the store writes them, read against where
    /// each ref points now: a `conflict` move whose ref is elsewhere is
    /// refused (unless it already points at the target: a retry), an
    /// `overwrite` move expects where the ref is, a `skip` move whose ref
    /// is elsewhere is left out. With each move's slot.
    ///
    /// # Errors
    /// `Conflict` naming `refs[i].expected` for a stale `conflict` move.
    async fn stale_moves(
        &self,
        tenant: &TenantId,
        moves: &[BatchRefMove],
        modes: &[OnStale],
    ) -> Result<(Vec<BatchRefMove>, Vec<Slot>)> {
        let mut written = Vec::with_capacity(moves.len());
        let mut slots = Vec::with_capacity(moves.len());
        for (i, (mv, mode)) in moves.iter().zip(modes).enumerate() {
            let record = self.stores.meta.get_ref(tenant, &mv.name).await?;
            let current = record.as_ref().map(|r| r.target);
            let fresh = current == mv.expected || current == Some(mv.target);
            let mv = match mode {
                OnStale::Conflict => {
                    crate::store::batch_move_settled(i, mv, current.as_ref())?;
                    mv.clone()
                }
                OnStale::Skip if !fresh => {
                    slots.push(Slot::Skipped(record));
                    continue;
                }
                OnStale::Skip => mv.clone(),
                OnStale::Overwrite if fresh => mv.clone(),
                OnStale::Overwrite => BatchRefMove {
                    expected: current,
                    ..mv.clone()
                },
            };
            slots.push(Slot::Written(written.len()));
            written.push(mv);
        }
        Ok((written, slots))
    }
}

/// The index of the move a store's conflict names (`refs[j].expected`).
fn stale_index(e: &Error) -> Option<usize> {
    if e.kind != crate::error::ErrorKind::Conflict {
        return None;
    }
    e.field
        .as_deref()?
        .strip_prefix("refs[")?
        .strip_suffix("].expected")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ManualClock;
    use crate::format::FormatId;
    use crate::service::Limits;
    use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
    use crate::store::{BlobArea, BlobStore as _, Stores};

    /// A service on memory stores, and three commits of tenant `acme`.
    async fn three_commits() -> (Service, TenantId, [CommitId; 3]) {
        let stores = Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: Arc::new(MemoryMetaStore::new()),
        };
        let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
        let svc = Service::new(stores, clock);
        let tenant: TenantId = "acme".parse().unwrap();
        let mut ids = Vec::new();
        for i in 0..3u8 {
            let new = NewCommit {
                created_at: Some(crate::store::conformance::t(i.into())),
                ..NewCommit::new(
                    "p".parse().unwrap(),
                    "t",
                    FormatId::raw(),
                    vec![b'a' + i, b'\n'],
                )
            };
            let batch = NewBatch {
                commits: vec![BatchEntry {
                    new,
                    parent_in_batch: None,
                }],
                ..NewBatch::default()
            };
            ids.push(
                svc.batch(&tenant, batch).await.unwrap().commits[0]
                    .commit
                    .id,
            );
        }
        (svc, tenant, ids.try_into().unwrap())
    }

    /// A ref that moves after a batch read it (another writer between the
    /// read and the store's atomic write): an `overwrite` move reads it
    /// again and moves it, a `skip` move reads it again and leaves it, a
    /// `conflict` move answers the conflict.
    #[tokio::test]
    async fn a_ref_that_moves_between_the_read_and_the_write_is_read_again() {
        let (svc, tenant, [a, b, c]) = three_commits().await;
        let name: RefName = "threads/head".parse().unwrap();
        let now = crate::store::conformance::t(9);
        for (mode, want) in [
            (OnStale::Overwrite, Some(c)),
            (OnStale::Skip, Some(b)),
            (OnStale::Conflict, None),
        ] {
            let meta = &svc.stores.meta;
            let at = meta
                .get_ref(&tenant, &name)
                .await
                .unwrap()
                .map(|r| r.target);
            meta.cas_ref(&tenant, &name, at.as_ref(), &a, now)
                .await
                .unwrap();
            let moves = [BatchRefMove {
                name: name.clone(),
                expected: Some(a),
                target: c,
            }];
            let resolved = svc.stale_moves(&tenant, &moves, &[mode]).await.unwrap();
            // Another writer moves the ref before the batch is written.
            meta.cas_ref(&tenant, &name, Some(&a), &b, now)
                .await
                .unwrap();
            let got = svc
                .put_resolved(&tenant, &[], &moves, &[mode], resolved)
                .await;
            let head = meta.get_ref(&tenant, &name).await.unwrap().unwrap().target;
            match want {
                Some(want) => {
                    let (_, refs) = got.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
                    assert_eq!(head, want, "{mode:?}");
                    assert_eq!(refs[0].as_ref().map(|r| r.target), Some(want), "{mode:?}");
                }
                None => {
                    let e = got.unwrap_err();
                    assert_eq!(e.kind, crate::error::ErrorKind::Conflict);
                    assert_eq!(e.field.as_deref(), Some("refs[0].expected"));
                    assert_eq!(head, b, "nothing written");
                }
            }
        }
    }

    /// Inline deltas up to [`BATCH_INLINE_BYTES`] a batch: past it, a
    /// delta small enough to go inline goes to the blob store instead.
    #[tokio::test]
    async fn a_batch_keeps_at_most_its_inline_budget_inline() {
        let blobs = Arc::new(MemoryBlobStore::new());
        let stores = Stores {
            blobs: blobs.clone(),
            meta: Arc::new(MemoryMetaStore::new()),
        };
        let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
        let limits = Limits {
            inline_delta_bytes: 256 * 1024,
            max_artifact_bytes: 1024 * 1024,
            ..Limits::default()
        };
        let svc = Service::new(stores, clock).with_limits(limits);
        let tenant: TenantId = "acme".parse().unwrap();
        let size = 200 * 1024;
        let commits = (0..3u8)
            .map(|i| BatchEntry {
                new: NewCommit {
                    created_at: Some(crate::store::conformance::t(i.into())),
                    ..NewCommit::new(
                        "p".parse().unwrap(),
                        "t",
                        FormatId::raw(),
                        vec![b'a' + i; size],
                    )
                },
                parent_in_batch: i.checked_sub(1).map(usize::from),
            })
            .collect();
        let done = svc
            .batch(
                &tenant,
                NewBatch {
                    commits,
                    ..NewBatch::default()
                },
            )
            .await
            .unwrap();
        let inline: Vec<bool> = done
            .commits
            .iter()
            .map(|c| c.commit.inline.is_some())
            .collect();
        assert_eq!(inline, [true, true, false], "2 × 200 KiB fit 512 KiB");
        let third = &done.commits[2].commit;
        assert!(
            blobs
                .stat(&tenant, BlobArea::READABLE, &third.artifact_ref)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            blobs
                .stat(
                    &tenant,
                    BlobArea::READABLE,
                    &done.commits[0].commit.artifact_ref
                )
                .await
                .unwrap()
                .is_none()
        );
    }
}
