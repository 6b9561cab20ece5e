//! Commits, their runs (lineages) and the principals' timelines: the
//! [`Commits`] concern of a [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::RefRecord;
use crate::commit::{Commit, Tags};
use crate::error::{Error, ErrorKind, Result};
use crate::id::{CommitId, Principal, RefName, SessionId, TenantId};

/// Commits, runs and timelines.
///
/// Every method is one request to the underlying store, scoped by tenant.
#[async_trait]
pub trait Commits: Send + Sync + 'static {
    /// The one write of commits, under [`MetaStore::put_batch`](super::MetaStore::put_batch)
    /// and [`MetaStore::put_commit`](super::MetaStore::put_commit) (a batch
    /// of one): writes the new commits of `commits` (each with its timeline
    /// entry and indexes, a fork starting a run of its own as `put_commit`
    /// says) and
    /// makes the ref moves of `moves`, all as ONE atomic write: all of it,
    /// or nothing when any move is stale.
    ///
    /// `put_batch` has checked the batch's shape ([`check_batch`]). A commit
    /// whose `parent_in_batch` is `Some(j)` continues the run of commit `j`
    /// as stored (its `lineage` and `parent_lineage` are taken from it, not
    /// from the value given). A commit that exists already is not written
    /// again and is returned as `Existing`; a move whose ref already points
    /// at its target is left alone (its record returned as it is) whatever
    /// it expected: a retried batch writes nothing twice and succeeds. Every
    /// other move is a compare-and-swap from its `expected`, and a moved
    /// ref's `updated_at` is `now`.
    ///
    /// # Errors
    /// `Conflict` naming `refs[i].expected`, with the current tip, when
    /// move `i` is stale (nothing is written); `Unavailable`.
    async fn create_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched>;

    /// One commit.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>>;

    /// The commits of run `lineage` at depth `max_depth` and below, deepest
    /// first, at most `limit` of them.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>>;

    /// The newest commit of `principal` created at or before `at`.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>>;

    /// Applies `patch` to a commit's summary and tags.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>>;

    /// The commits on `principal`'s timeline created after `after` (all
    /// when `None`) and at or before `until`, at most `limit` of them:
    /// the oldest when `newest_first` is false (returned oldest first),
    /// else the newest (returned newest first). One range read of the
    /// timeline (on DynamoDB a Query plus a batch read of those commits):
    /// its cost follows the range, not the length of the timeline.
    ///
    /// Every backend starts with `timeline_micros`, which says which
    /// instants the range holds and answers an empty one for it.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>>;

    /// Every commit whose `session_id` is `session`, in no particular
    /// order. One indexed read (a session index).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>>;

    /// The commits whose parent is `parent` (its children: the next commit
    /// of its run and every fork), in no particular order.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>>;

    /// Removes a commit with everything that indexes it (its place in its
    /// run, its timeline entry, its session and summary-queue entries),
    /// atomically; false when it did not exist. Refs and cache entries are
    /// the caller's to remove first.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool>;
}

/// The outcome of [`MetaStore::put_commit`](super::MetaStore::put_commit) for one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCommit {
    /// The commit was written; this is it as stored (with its lineage).
    Created(Commit),
    /// A commit with this id already existed; this is the stored one.
    Existing(Commit),
}

impl PutCommit {
    /// The stored commit.
    pub fn commit(&self) -> &Commit {
        match self {
            PutCommit::Created(c) | PutCommit::Existing(c) => c,
        }
    }
}

/// A change to a commit's mutable metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataPatch {
    /// `Some(None)` clears the summary; `None` leaves it.
    pub summary: Option<Option<String>>,
    /// Replaces the tags when given.
    pub tags: Option<Tags>,
}

/// One commit of a batch ([`Commits::create_batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCommit {
    /// The commit, built as for [`MetaStore::put_commit`](super::MetaStore::put_commit).
    pub commit: Commit,
    /// The index of its parent among the batch's earlier commits, when the
    /// parent is written by the same batch.
    pub parent_in_batch: Option<usize>,
}

/// A ref move of a batch: `name` to `target`, by compare-and-swap from
/// `expected` (`None`: the ref must not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRefMove {
    /// The ref.
    pub name: RefName,
    /// The tip the caller believes the ref has.
    pub expected: Option<CommitId>,
    /// The commit to point it at: an existing one or one of the batch.
    pub target: CommitId,
}

/// What [`Commits::create_batch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batched {
    /// The batch's commits as stored, in the batch's order.
    pub commits: Vec<PutCommit>,
    /// The refs as they are after the batch, in the batch's order.
    pub refs: Vec<RefRecord>,
}

/// The most actions one DynamoDB `TransactWriteItems` may hold.
pub const TRANSACTION_ACTIONS: usize = 100;

/// The actions one commit of a batch takes in the aws backend's
/// transaction at most: the commit by id, its slot in its run, its
/// timeline entry, the tenant registry (a root) or its entry among its
/// parent's children (a child), its entry among its artifact's users, and
/// its session's entry and last-activity item. The aws backend's tests pin
/// it to the items it really builds.
pub const BATCH_COMMIT_ACTIONS: usize = 7;

/// The actions one ref move of a batch takes (a conditional put, or a
/// condition check when the ref already points at its target).
pub const BATCH_REF_ACTIONS: usize = 1;

/// The most inline bytes one batch stores with its commits' metadata; the
/// service stores the rest of a batch's deltas as blobs. The aws backend
/// writes a commit twice (by id and in its run), inline bytes included, so
/// a batch's transaction holds at most 2 × 512 KiB of them plus 14 × 2
/// commits' metadata (at most ~91 KB each with a full summary and 64 full
/// tags: ~2.6 MB), under DynamoDB's 4 MB.
pub const BATCH_INLINE_BYTES: usize = 512 * 1024;

/// Whether a batch of `commits` commits and `refs` ref moves fits one
/// transaction on every backend: `7 × commits + refs ≤ 100` (so at most
/// 14 commits, or 100 ref moves alone).
pub fn batch_fits(commits: usize, refs: usize) -> bool {
    commits
        .saturating_mul(BATCH_COMMIT_ACTIONS)
        .saturating_add(refs.saturating_mul(BATCH_REF_ACTIONS))
        <= TRANSACTION_ACTIONS
}

/// Refuses a batch of `commits` commits and `refs` ref moves that is
/// empty or does not fit one transaction ([`batch_fits`]).
///
/// # Errors
/// `Invalid` naming `commits` for an empty batch; `TooLarge` naming
/// `commits` (or `refs`, when the commits alone fit).
pub fn check_batch_size(commits: usize, refs: usize) -> Result<()> {
    if commits == 0 && refs == 0 {
        return Err(Error::invalid(
            "commits",
            "a batch needs at least one commit or ref move",
        ));
    }
    if !batch_fits(commits, refs) {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "a batch of {} commits and {} ref moves does not fit one transaction: \
                 {BATCH_COMMIT_ACTIONS} × commits + refs may be at most {TRANSACTION_ACTIONS} \
                 (so at most {} commits)",
                commits,
                refs,
                TRANSACTION_ACTIONS / BATCH_COMMIT_ACTIONS,
            ),
        )
        .with_field(
            if commits.saturating_mul(BATCH_COMMIT_ACTIONS) > TRANSACTION_ACTIONS {
                "commits"
            } else {
                "refs"
            },
        ));
    }
    Ok(())
}

/// Checks a batch's shape, the same for every backend: not empty, within
/// [`batch_fits`], each in-batch parent an earlier commit that is the
/// commit's parent, no commit twice, no ref moved twice.
///
/// # Errors
/// `Invalid` naming the field (`commits`, `refs`, `commits[i].…`,
/// `refs[i].name`); `TooLarge` naming `commits` when the batch does not fit
/// one transaction.
pub fn check_batch(commits: &[BatchCommit], moves: &[BatchRefMove]) -> Result<()> {
    check_batch_size(commits.len(), moves.len())?;
    let mut ids = std::collections::HashMap::new();
    for (i, c) in commits.iter().enumerate() {
        if let Some(j) = c.parent_in_batch {
            if j >= i {
                return Err(Error::invalid(
                    format!("commits[{i}].parent_in_batch"),
                    format!(
                        "commits[{i}].parent_in_batch is {j}: it must name an earlier commit of the batch"
                    ),
                ));
            }
            if c.commit.parent != Some(commits[j].commit.id) {
                return Err(Error::invalid(
                    format!("commits[{i}].parent_in_batch"),
                    format!("commits[{i}]'s parent is not commits[{j}]"),
                ));
            }
        }
        if let Some(first) = ids.insert(c.commit.id, i) {
            return Err(Error::invalid(
                format!("commits[{i}]"),
                format!(
                    "commits[{i}] is the same commit as commits[{first}] ({}): same parent, artifact, time and template",
                    c.commit.id
                ),
            ));
        }
    }
    let mut names = std::collections::HashMap::new();
    for (i, m) in moves.iter().enumerate() {
        if let Some(first) = names.insert(&m.name, i) {
            return Err(Error::invalid(
                format!("refs[{i}].name"),
                format!(
                    "refs[{i}] moves ref {} again (refs[{first}] moves it)",
                    m.name
                ),
            ));
        }
    }
    Ok(())
}

/// The instants (µs) a timeline range (`after`, `until`] holds, both ends
/// included (`after` is left out; `None` is the beginning of time):
/// `None` when the range holds none or `limit` is 0, so that
/// [`Commits::timeline_range`] answers empty without reading. The one
/// check of its arguments, every backend's first step.
pub(crate) fn timeline_micros(
    after: Option<DateTime<Utc>>,
    until: DateTime<Utc>,
    limit: usize,
) -> Option<std::ops::RangeInclusive<i64>> {
    let first = after.map_or(i64::MIN, |a| a.timestamp_micros().saturating_add(1));
    let last = until.timestamp_micros();
    (limit > 0 && first <= last).then_some(first..=last)
}

/// `commit`, continuing the run of `parent` as stored: how every backend
/// takes an in-batch parent's run (which a fork may have changed).
pub(crate) fn continuing(mut commit: Commit, parent: &Commit) -> Commit {
    commit.lineage = parent.lineage;
    commit.parent_lineage = Some(parent.lineage);
    commit
}

/// How a ref move of a batch stands against the ref's `current` target:
/// `Ok(true)` when the ref already points at the target (left alone),
/// `Ok(false)` when it is where the move expects it.
///
/// # Errors
/// The ref's conflict naming `refs[i].expected`.
pub(crate) fn batch_move_settled(
    i: usize,
    mv: &BatchRefMove,
    current: Option<&CommitId>,
) -> Result<bool> {
    if current == Some(&mv.target) {
        return Ok(true);
    }
    if current != mv.expected.as_ref() {
        return Err(super::ref_conflict(&mv.name, mv.expected.as_ref(), current)
            .with_field(format!("refs[{i}].expected")));
    }
    Ok(false)
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn a_timeline_range_holds_the_instants_after_after_up_to_until() {
        let t = |micros: i64| DateTime::<Utc>::from_timestamp_micros(micros).unwrap();
        assert_eq!(timeline_micros(Some(t(10)), t(20), 5), Some(11..=20));
        assert_eq!(timeline_micros(None, t(20), 5), Some(i64::MIN..=20));
        assert_eq!(timeline_micros(Some(t(19)), t(20), 1), Some(20..=20));
        assert_eq!(timeline_micros(Some(t(20)), t(20), 5), None, "empty");
        assert_eq!(timeline_micros(Some(t(21)), t(20), 5), None, "reversed");
        assert_eq!(timeline_micros(Some(t(10)), t(20), 0), None, "no limit");
        // Below a microsecond: the instants of the stored times.
        let half = t(20) + chrono::Duration::nanoseconds(500);
        assert_eq!(timeline_micros(Some(t(20)), half, 5), None);
        assert_eq!(timeline_micros(Some(t(19)), half, 5), Some(20..=20));
    }

    #[test]
    fn a_batch_fits_by_its_actions() {
        assert!(batch_fits(14, 2));
        assert!(!batch_fits(14, 3));
        assert!(!batch_fits(15, 0));
        assert!(batch_fits(0, 100));
        assert!(!batch_fits(0, 101));
        assert!(batch_fits(1, 93));
        assert!(!batch_fits(usize::MAX, usize::MAX));
    }
}
