//! Group commit: concurrent write transactions share one SQLite `COMMIT`,
//! and so one WAL fsync.
//!
//! A transaction asked for while another group is being written waits in
//! the queue; the thread that writes groups (the *leader*, one at a time)
//! takes every waiting transaction, runs each inside its own `SAVEPOINT` of
//! one `BEGIN IMMEDIATE` transaction, commits once, and only then answers
//! each of them. So:
//!
//! - an answer is never sent before the `COMMIT` that made its writes
//!   durable returned ("acknowledged means durable" holds as it did with
//!   one transaction each: with `synchronous=FULL` that commit is fsynced);
//! - a transaction that fails is rolled back to its savepoint, alone, and
//!   answered with its error; the others of its group commit;
//! - each one sees the writes of those before it in the group, exactly as
//!   if they had run one after another (they did, on one connection);
//! - when the commit itself fails, or SQLite abandons the transaction
//!   (an I/O error, a full disk), every transaction of the group is
//!   answered with that error and none of them was written.
//!
//! Nobody waits on purpose: a lone writer commits at once, as before;
//! batches form only from the transactions that arrive while the previous
//! group is being fsynced, so the fsyncs are shared exactly when writers
//! would otherwise queue behind them.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;
use tracing::Instrument as _;

use super::{Database, Durability, LocalError, lock};
use crate::error::{Error, Result};

/// The most transactions one group commits unless set otherwise; the
/// rest wait for the next. Bounds how long the first of a group waits for
/// the last.
const MAX_GROUP: usize = 64;

/// Transactions committed after which a leader that finds nobody waiting
/// checkpoints the write-ahead log into the database before it stops
/// (`PRAGMA wal_checkpoint(PASSIVE)`): ~8 pages each, about 256 KiB of
/// log. Under sustained writes nobody is idle and SQLite's own automatic
/// checkpoint (`WAL_AUTOCHECKPOINT_PAGES`) bounds the log instead.
const IDLE_CHECKPOINT_TRANSACTIONS: u64 = 8;

/// Transactions waiting for a group, and whether a leader is writing.
#[derive(Debug)]
pub(super) struct Queue {
    state: Mutex<State>,
    /// The most transactions one commit carries.
    limit: AtomicUsize,
    /// Transactions answered, and `COMMIT`s that carried them.
    transactions: AtomicU64,
    commits: AtomicU64,
    /// Transactions committed since the last idle checkpoint.
    unchecked: AtomicU64,
    /// Idle checkpoints run.
    checkpoints: AtomicU64,
    /// Whether the writer connection was left at `synchronous=NORMAL` by
    /// a relaxed group (read and set under the writer's lock; see
    /// [`Database::sync_level`]).
    relaxed: AtomicBool,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            state: Mutex::default(),
            limit: AtomicUsize::new(MAX_GROUP),
            transactions: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            unchecked: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            relaxed: AtomicBool::new(false),
        }
    }
}

impl Queue {
    /// Caps the transactions of one commit (at least 1).
    pub(super) fn set_limit(&self, limit: usize) {
        self.limit.store(limit.max(1), Ordering::Relaxed);
    }

    /// Transactions answered so far, and the commits that carried them
    /// (their ratio is the mean group size).
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.transactions.load(Ordering::Relaxed),
            self.commits.load(Ordering::Relaxed),
        )
    }
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Box<dyn Pending>>,
    leading: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("waiting", &self.waiting.len())
            .field("leading", &self.leading)
            .finish()
    }
}

/// One transaction of a group: its work, then its answer.
trait Pending: Send {
    /// Whether its commit must survive power loss.
    fn durable(&self) -> bool;

    /// Runs the work inside its own savepoint of the open transaction,
    /// keeping its outcome. `Err` only when the savepoint itself could not
    /// be handled: the group's transaction can no longer be trusted.
    fn run(&mut self, conn: &Connection) -> Result<(), LocalError>;

    /// Answers the caller once the group's fate is known: `undone` is the
    /// error that undid the whole group, if one did.
    fn answer(self: Box<Self>, undone: Option<&Error>);
}

/// A transaction's work, its outcome, and the caller waiting for it.
struct Job<T, F> {
    work: Option<F>,
    /// Whether its commit must survive power loss.
    durable: bool,
    outcome: Option<Result<T, LocalError>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Pending for Job<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
{
    fn durable(&self) -> bool {
        self.durable
    }

    fn run(&mut self, conn: &Connection) -> Result<(), LocalError> {
        let work = self.work.take().expect("a job runs once");
        step(conn, "SAVEPOINT job")?;
        let outcome = match catch_unwind(AssertUnwindSafe(|| work(conn))) {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::internal("a storage transaction panicked").into()),
        };
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (I/O error, full
            // disk, ...): the group's earlier work is gone with it.
            self.outcome = Some(outcome);
            return Err(Error::unavailable(
                "local storage failed: the database abandoned the transaction",
            )
            .into());
        }
        if outcome.is_err() {
            step(conn, "ROLLBACK TO job")?;
        }
        step(conn, "RELEASE job")?;
        self.outcome = Some(outcome);
        Ok(())
    }

    fn answer(self: Box<Self>, undone: Option<&Error>) {
        let outcome = match (self.outcome, undone) {
            // Its own error stands: it wrote nothing either way.
            (Some(Err(e)), _) => Err(e.into()),
            (Some(Ok(_)) | None, Some(e)) => Err(Error {
                kind: e.kind,
                message: e.message.clone(),
                field: None,
                current: None,
                retry_after: e.retry_after,
                source: None,
            }),
            (Some(Ok(v)), None) => Ok(v),
            (None, None) => Err(Error::internal("a transaction of a group never ran")),
        };
        // The caller may have gone away; its transaction stands regardless.
        let _ = self.reply.send(outcome);
    }
}

/// Runs one statement without parameters, prepared once per connection.
fn step(conn: &Connection, sql: &str) -> Result<(), LocalError> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

impl Database {
    /// Runs `f` as one transaction on the writer, grouped with the
    /// transactions other callers ask for meanwhile into one `BEGIN
    /// IMMEDIATE … COMMIT` (see the module docs): what `f` reads cannot
    /// change under it (across processes too), its writes are committed
    /// when it succeeds and undone when it fails, and the answer comes
    /// after the commit.
    pub(super) async fn transaction<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        self.submit(f, true).await
    }

    /// A transaction whose commit need not survive power loss (a
    /// rebuildable cache). It joins a group like any other; a group made
    /// only of such transactions commits with `synchronous=NORMAL` on a
    /// [`Durability::Full`] database (WAL appended, not fsynced; a later
    /// durable commit syncs it), a group with any durable one commits
    /// durably.
    ///
    /// Ordering is safe: WAL frames are appended in commit order, so a
    /// durable commit after this one fsyncs this one's frames too, and a
    /// torn tail after a power loss loses only commits made here (never a
    /// durable one, which an fsync ended). Callers write only cache rows
    /// and cache-use stamps with it; a surviving row whose cached file did
    /// not survive (cached files are not fsynced either) is a cache miss,
    /// rebuilt by materialize.
    pub(super) async fn transaction_relaxed<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        self.submit(f, false).await
    }

    /// Queues `f` (durable or not), leads if nobody is, and waits for the
    /// answer.
    async fn submit<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
        durable: bool,
    ) -> Result<T> {
        let (answer, lead) = self.enqueue(f, durable);
        if lead {
            let db = self.clone();
            tokio::task::spawn_blocking(move || db.lead());
        }
        let call = if durable {
            "transaction"
        } else {
            "transaction relaxed"
        };
        answer
            .instrument(crate::telemetry::store_span("sqlite", call))
            .await
            .map_err(|_| {
                Error::unavailable("local storage failed: the writer stopped before answering")
            })?
    }

    /// Queues `f`; its answer, and whether the caller must start a leader
    /// (nobody was leading).
    fn enqueue<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
        durable: bool,
    ) -> (oneshot::Receiver<Result<T>>, bool) {
        let (reply, answer) = oneshot::channel();
        let mut state = self.group.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waiting.push_back(Box::new(Job {
            work: Some(f),
            durable,
            outcome: None,
            reply,
        }));
        (answer, !std::mem::replace(&mut state.leading, true))
    }

    /// The leader: writes groups until nobody is waiting, then, when
    /// enough was committed since the last time, checkpoints the log.
    fn lead(&self) {
        loop {
            let group: Option<Vec<Box<dyn Pending>>> = {
                let mut state = self.group.state.lock().unwrap_or_else(|e| e.into_inner());
                if state.waiting.is_empty() {
                    if self.group.unchecked.load(Ordering::Relaxed) < IDLE_CHECKPOINT_TRANSACTIONS {
                        state.leading = false;
                        return;
                    }
                    // Still leading: whoever comes meanwhile queues for
                    // the next round of this loop.
                    None
                } else {
                    let n = state
                        .waiting
                        .len()
                        .min(self.group.limit.load(Ordering::Relaxed));
                    Some(state.waiting.drain(..n).collect())
                }
            };
            match group {
                Some(group) => self.commit_group(group),
                None => self.checkpoint_idle(),
            }
        }
    }

    /// Puts the writer (locked as `conn`) at the level its next commit
    /// needs: `NORMAL` for a `relaxed` one on a durable database, else the
    /// database's own. Set only when it differs from what the writer was
    /// left at, and set before every commit that needs it, so a level that
    /// could not be set fails that commit: nothing is acknowledged as
    /// durable at `NORMAL`.
    pub(super) fn sync_level(&self, conn: &Connection, relaxed: bool) -> Result<(), LocalError> {
        let relaxed = relaxed && self.durability == Durability::Full;
        if self.group.relaxed.load(Ordering::Relaxed) == relaxed {
            return Ok(());
        }
        conn.pragma_update(None, "synchronous", if relaxed { "NORMAL" } else { "FULL" })?;
        self.group.relaxed.store(relaxed, Ordering::Relaxed);
        Ok(())
    }

    /// Checkpoints the write-ahead log while nobody waits to write
    /// (`PASSIVE`: it never waits for readers, and copies what it can).
    fn checkpoint_idle(&self) {
        let conn = lock(&self.writer);
        self.group.unchecked.store(0, Ordering::Relaxed);
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) => {
                self.group.checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            // The next idle moment or SQLite's own checkpoint tries again.
            Err(e) => tracing::debug!("idle WAL checkpoint failed: {e}"),
        }
    }

    /// Runs one group in one transaction, commits it, answers each.
    fn commit_group(&self, mut group: Vec<Box<dyn Pending>>) {
        let conn = lock(&self.writer);
        // Only a durable database has anything to relax, and only when no
        // transaction of the group needs its commit durable.
        let relax = !group.iter().any(|j| j.durable());
        if let Err(e) = self.sync_level(&conn, relax) {
            drop(conn);
            let e = Error::from(e);
            for job in group {
                job.answer(Some(&e));
            }
            return;
        }
        let undone = match conn.execute_batch("BEGIN IMMEDIATE") {
            Err(e) => Some(LocalError::from(e)),
            Ok(()) => {
                let failed = group.iter_mut().find_map(|job| job.run(&conn).err());
                match failed {
                    Some(e) => {
                        if !conn.is_autocommit() {
                            let _ = conn.execute_batch("ROLLBACK");
                        }
                        Some(e)
                    }
                    None => match conn.execute_batch("COMMIT") {
                        Ok(()) => None,
                        Err(e) => {
                            if !conn.is_autocommit() {
                                let _ = conn.execute_batch("ROLLBACK");
                            }
                            Some(LocalError::from(e))
                        }
                    },
                }
            }
        };
        drop(conn);
        self.group.commits.fetch_add(1, Ordering::Relaxed);
        self.group
            .transactions
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        if undone.is_none() {
            self.group
                .unchecked
                .fetch_add(group.len() as u64, Ordering::Relaxed);
        }
        let undone = undone.map(Error::from);
        for job in group {
            job.answer(undone.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Durability;
    use super::*;
    use crate::error::ErrorKind;

    /// A transaction's work, boxed to queue several of one type.
    type Work<T> = Box<dyn FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static>;

    fn database() -> (tempfile::TempDir, Arc<Database>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), Durability::Full).unwrap();
        (dir, db)
    }

    async fn table(db: &Arc<Database>) {
        db.transaction(|c| {
            c.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY)")?;
            Ok(())
        })
        .await
        .unwrap();
    }

    async fn rows(db: &Arc<Database>) -> Vec<i64> {
        db.read(|c| {
            let mut stmt = c.prepare("SELECT n FROM t ORDER BY n")?;
            let rows = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap()
    }

    fn insert(n: i64) -> impl FnOnce(&Connection) -> Result<i64, LocalError> + Send + 'static {
        move |c| {
            c.execute("INSERT INTO t (n) VALUES (?1)", [n])?;
            Ok(n)
        }
    }

    /// Queues `jobs` in order as if a leader were busy, then lets one
    /// leader write them: one group, deterministically.
    async fn one_group<T: Send + 'static>(
        db: &Arc<Database>,
        jobs: Vec<Work<T>>,
    ) -> Vec<Result<T>> {
        // Hold the leader off, once the setup's leader (the table's
        // transaction was answered before its leader stopped) has stopped:
        // taking the flag while it still leads would see it cleared.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Takes the flag; true when someone still led (the flag stays).
        let led = || std::mem::replace(&mut db.group.state.lock().unwrap().leading, true);
        while led() {
            assert!(
                std::time::Instant::now() < deadline,
                "the setup's leader never stopped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let answers: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let (answer, lead) = db.enqueue(job, true);
                assert!(!lead, "the leader is held off");
                answer
            })
            .collect();
        let leader = db.clone();
        tokio::task::spawn_blocking(move || leader.lead())
            .await
            .unwrap();
        let mut out = Vec::new();
        for a in answers {
            out.push(a.await.unwrap());
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_commits_once_and_answers_each() {
        let (_dir, db) = database();
        table(&db).await;
        let before = db.group.counts();
        let jobs = (1..=5).map(|n| Box::new(insert(n)) as Work<i64>).collect();
        let answers = one_group(&db, jobs).await;
        let answers: Vec<i64> = answers.into_iter().map(Result::unwrap).collect();
        assert_eq!(answers, vec![1, 2, 3, 4, 5]);
        let after = db.group.counts();
        assert_eq!((after.0 - before.0, after.1 - before.1), (5, 1));
        assert_eq!(rows(&db).await, vec![1, 2, 3, 4, 5]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_transaction_is_undone_alone() {
        let (_dir, db) = database();
        table(&db).await;
        let jobs: Vec<Work<i64>> = vec![
            Box::new(insert(1)),
            Box::new(|c: &Connection| {
                c.execute("INSERT INTO t (n) VALUES (2)", [])?;
                Err(Error::invalid("no", "the second one fails after writing").into())
            }),
            // Sees the first one's row (they run in order): a duplicate.
            Box::new(insert(1)),
            Box::new(|c: &Connection| {
                c.execute("INSERT INTO t (n) VALUES (4)", [])?;
                panic!("a bug in a transaction");
            }),
            Box::new(insert(5)),
        ];
        let answers = one_group(&db, jobs).await;
        assert_eq!(*answers[0].as_ref().unwrap(), 1);
        assert_eq!(answers[1].as_ref().unwrap_err().kind, ErrorKind::Invalid);
        assert!(answers[2].is_err(), "the duplicate key fails");
        assert_eq!(answers[3].as_ref().unwrap_err().kind, ErrorKind::Internal);
        assert_eq!(*answers[4].as_ref().unwrap(), 5);
        assert_eq!(rows(&db).await, vec![1, 5]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_are_answered_after_their_commit() {
        let (_dir, db) = database();
        table(&db).await;
        let before = db.group.counts();
        let tasks: Vec<_> = (0..16)
            .map(|w| {
                let db = db.clone();
                tokio::spawn(async move {
                    for i in 0..20 {
                        let n = db.transaction(insert(w * 100 + i)).await.unwrap();
                        // Answered: committed, so a reader sees it.
                        let seen: i64 = db
                            .read(move |c| {
                                Ok(
                                    c.query_row("SELECT count(*) FROM t WHERE n = ?1", [n], |r| {
                                        r.get(0)
                                    })?,
                                )
                            })
                            .await
                            .unwrap();
                        assert_eq!(seen, 1, "row {n} answered but not visible");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(rows(&db).await.len(), 320);
        let after = db.group.counts();
        assert_eq!(after.0 - before.0, 320);
        assert!(after.1 - before.1 <= 320);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_commit_runs_at_the_level_it_needs_whatever_ran_before() {
        // `synchronous` as the writer's work sees it: 1 NORMAL, 2 FULL.
        fn level(c: &Connection) -> Result<i64, LocalError> {
            Ok(c.pragma_query_value(None, "synchronous", |r| r.get(0))?)
        }
        let (_dir, db) = database();
        assert_eq!(db.transaction_relaxed(level).await.unwrap(), 1);
        assert_eq!(db.transaction(level).await.unwrap(), 2);
        assert_eq!(db.transaction_relaxed(level).await.unwrap(), 1);
        assert_eq!(
            db.write(|c| level(c)).await.unwrap(),
            2,
            "outside a group too"
        );
        assert_eq!(db.transaction_relaxed(level).await.unwrap(), 1);
        assert_eq!(db.transaction_relaxed(level).await.unwrap(), 1);
        assert_eq!(db.transaction(level).await.unwrap(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_falling_idle_checkpoints_the_log() {
        let (_dir, db) = database();
        table(&db).await;
        for n in 1..IDLE_CHECKPOINT_TRANSACTIONS as i64 {
            db.transaction(insert(n)).await.unwrap();
        }
        // The table and 7 rows: 8 transactions, each answered before the
        // leader, idle, checkpoints; wait for it to stop.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while db.group.checkpoints.load(Ordering::Relaxed) == 0
            || db.group.state.lock().unwrap().leading
        {
            assert!(std::time::Instant::now() < deadline, "no idle checkpoint");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(db.group.checkpoints.load(Ordering::Relaxed), 1);
        assert_eq!(db.group.unchecked.load(Ordering::Relaxed), 0);
        // One transaction more is not enough for another.
        db.transaction(insert(100)).await.unwrap();
        while db.group.state.lock().unwrap().leading {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(db.group.checkpoints.load(Ordering::Relaxed), 1);
        assert_eq!(rows(&db).await.len(), 8);
    }
}
