//! The embedded backend: artifacts as files in a content-addressed tree,
//! everything else in one SQLite database (WAL mode, `synchronous=FULL`).
//!
//! Layout under the data directory:
//! - `cas/<tenant>/<2 hex>/<64 hex>`: artifacts, written to `tmp/` first,
//!   fsynced, linked into place, and the directory fsynced;
//! - `cache/<tenant>/<2 hex>/<64 hex>`: cached results (materializations),
//!   written and linked the same way but not fsynced: rebuildable, they
//!   are verified on every read and a bad one is a miss;
//! - `ctx.db`: commits, lineages, timelines, refs, the materialization
//!   cache, token hashes and branches, at the schema version of
//!   [`schema`].
//!
//! An artifact is durable before the commit that names it, and a commit,
//! its timeline entry and its ref move are one SQLite transaction (a
//! savepoint of a group commit: `group`), answered only once committed, so
//! a crash at any point leaves no commit without its artifact, no ref to a
//! missing commit, and loses no acknowledged commit.
//!
//! # Layout
//! - this file: the private error type, [`Durability`], and the one
//!   connection setup (`Database`) every SQLite store opens through.
//! - `blobs`: [`LocalBlobStore`], the filesystem CAS.
//! - `meta`: [`SqliteMetaStore`], the `MetaStore` and `TokenStore`.
//! - `group`: group commit, the writer's transactions (`Database::transaction`).
//! - `summaries`: its summary queue.
//! - `lifecycle`: its erasure, retention and pin queries.
//! - `branches`: [`SqliteBranchStore`], the `BranchStore`.
//! - [`schema`]: the tables, their version and the migrations.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tracing::Instrument as _;

use crate::error::{Error, Result};
use crate::telemetry::store_span;

mod agents;
mod blobs;
mod branches;
mod cache;
mod commits;
mod group;
mod lifecycle;
mod meta;
mod refs;
pub mod schema;
mod summaries;
mod tokens;

pub use blobs::LocalBlobStore;
pub use branches::SqliteBranchStore;
pub use meta::SqliteMetaStore;

/// Private errors of the local backend, converted into [`Error`].
#[derive(Debug, thiserror::Error)]
enum LocalError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("filesystem: {0}")]
    Io(#[from] std::io::Error),
    #[error("a stored record is not valid JSON: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("blocking task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// An error already in the crate's terms, passed through as it is.
    #[error(transparent)]
    Store(#[from] Error),
}

impl From<LocalError> for Error {
    fn from(e: LocalError) -> Self {
        match e {
            LocalError::Store(e) => e,
            LocalError::Decode(_) => Error::internal(e.to_string()).with_source(e),
            _ => Error::unavailable(format!("local storage failed: {e}")).with_source(e),
        }
    }
}

/// Maps an SQLite failure.
fn sql(e: rusqlite::Error) -> Error {
    LocalError::from(e).into()
}

/// Runs blocking storage work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LocalError> + Send + 'static,
) -> Result<T> {
    Ok(tokio::task::spawn_blocking(f)
        .await
        .map_err(LocalError::from)??)
}

/// Runs a short blocking read (an SQLite query, a file read): on a
/// multi-thread runtime in place on the calling worker thread
/// (`block_in_place`, which hands the worker's other tasks to another
/// thread), saving the round trip to the blocking pool that
/// [`blocking`] makes; elsewhere (a current-thread runtime, where
/// `block_in_place` would panic) as [`blocking`]. Measured in the
/// embedded bench: 1,000 verified artifact reads, 16 in flight, took
/// about 2.5x as long through the blocking pool (docs/bench.md).
async fn blocking_read<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LocalError> + Send + 'static,
) -> Result<T> {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        return Ok(tokio::task::block_in_place(f)?);
    }
    blocking(f).await
}

/// How hard SQLite pushes writes to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: an acknowledged write survives power loss.
    Full,
    /// `synchronous=OFF`: for bulk loads in benchmarks only.
    Off,
}

/// Reader connections per database.
const READERS: usize = 4;

/// The database file under a data directory.
const DB_FILE: &str = "ctx.db";

/// `data_dir/ctx.db` opened once: one writer connection and a few readers
/// (WAL lets them read while it writes), every one set up alike. The meta
/// store and the branch store both run on one of these.
#[derive(Debug)]
struct Database {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    /// Transactions waiting to be committed together ([`group`]).
    group: group::Queue,
    /// What every connection was opened with.
    durability: Durability,
}

/// Pages of write-ahead log (4 KiB each) after which a commit checkpoints
/// it: SQLite's default, a ~4 MB log. That is the bound under sustained
/// writes only: the writer also checkpoints whenever it falls idle after
/// a few transactions (`group`, `IDLE_CHECKPOINT_TRANSACTIONS`), so the
/// log of a server between bursts stays small (docs/bench.md, 1b), while
/// concurrent writers do not pay a checkpoint (two fsyncs, every page
/// written twice) every few groups: at 64 pages, 16 writers made
/// ~3,000 checkpoints/s against 3,900–4,950/s (docs/bench.md, "Group commit").
const WAL_AUTOCHECKPOINT_PAGES: i64 = 1000;

/// Bytes the write-ahead log file is cut back to when it is reused: the
/// checkpoint size. (Twice that halves the truncations, ~600 instead of
/// ~1,200 in the bench's 3,500 transactions, at no measurable cost either
/// way, but leaves the live directory at 1.29x instead of 1.26x.)
const WAL_SIZE_LIMIT: i64 = 256 * 1024;

/// Opens one connection with the settings every connection has.
fn connect(path: &Path, durability: Durability) -> Result<Connection, LocalError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // A small live WAL: checkpointed when the writer falls idle (`group`)
    // and at the latest every `WAL_AUTOCHECKPOINT_PAGES` pages, and the
    // file cut back to `WAL_SIZE_LIMIT` when it is reused, so the data
    // directory of a running server stays near its size at rest
    // (docs/bench.md, 1b).
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    // Deleted rows are overwritten with zeros, so an erase leaves no bytes
    // in the database file's free pages.
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Full => "FULL",
            Durability::Off => "OFF",
        },
    )?;
    Ok(conn)
}

/// Checkpoints the write-ahead log of `data_dir/ctx.db` into the database
/// and truncates it to zero bytes (`PRAGMA wal_checkpoint(TRUNCATE)`), so a
/// stopped server leaves no WAL behind. Call it when the stores are idle
/// (after a clean stop): a reader in a transaction would keep the log.
/// Nothing to do when there is no database.
///
/// # Errors
/// `Unavailable` when SQLite fails or something still holds the log
/// after `truncate_wal`'s wait.
pub fn checkpoint_wal(data_dir: &Path) -> Result<()> {
    let path = data_dir.join(DB_FILE);
    if !path.exists() {
        return Ok(());
    }
    let truncate = || -> Result<(), LocalError> {
        let conn = Connection::open(&path)?;
        conn.busy_timeout(WAL_TRUNCATE_WAIT)?;
        truncate_wal(&conn)
    };
    truncate().map_err(|e| {
        let e: Error = e.into();
        Error::unavailable(format!("{}: {}", path.display(), e.message))
    })
}

/// How long [`truncate_wal`] keeps trying while another checkpoint holds
/// the log.
const WAL_TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long it sleeps between tries.
const WAL_TRUNCATE_RETRY: std::time::Duration = std::time::Duration::from_millis(20);

/// Checkpoints the write-ahead log into the database and cuts it to zero
/// bytes (what it held, erased rows' old images included, is gone).
///
/// Readers and a writer are waited for by the connection's busy timeout.
/// Another checkpoint is not: one that finds SQLite's checkpoint lock
/// taken is told "busy" at once. Other connections take that lock for a
/// moment: another store's writer checkpointing after its commits (the
/// branch store `ctx serve` opens on the same file), and the last
/// connection of a stopped server, closing on a blocking thread that may
/// outlive the stop by a moment. So a busy answer is tried again for up
/// to [`WAL_TRUNCATE_WAIT`].
fn truncate_wal(conn: &Connection) -> Result<(), LocalError> {
    let deadline = std::time::Instant::now() + WAL_TRUNCATE_WAIT;
    loop {
        // One row: busy (1 when it could not finish), log frames, frames done.
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        if busy == 0 {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Error::unavailable(
                "a reader or another checkpoint held the write-ahead log: it was not truncated (removed bytes may remain in it until the next compaction)",
            )
            .into());
        }
        std::thread::sleep(WAL_TRUNCATE_RETRY.min(left));
    }
}

/// Puts the database in `auto_vacuum = INCREMENTAL` mode, so that
/// [`MetaStore::compact`](crate::store::MetaStore::compact) can give pages
/// freed by deletes back to the filesystem. A new database takes the mode
/// before its first table; one created before this mode existed is
/// rewritten once with `VACUUM` (the only way SQLite changes it then).
fn incremental_vacuum_mode(conn: &Connection) -> Result<(), LocalError> {
    const INCREMENTAL: i64 = 2;
    let mode: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
    if mode == INCREMENTAL {
        return Ok(());
    }
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    let mode: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
    if mode != INCREMENTAL {
        conn.execute_batch("VACUUM")?;
    }
    Ok(())
}

/// Gives the free pages of the database back to the filesystem when they
/// are at least `min_pages` (`PRAGMA incremental_vacuum`); the bytes given
/// back.
fn vacuum_if_worth(conn: &Connection, min_pages: i64) -> Result<u64, LocalError> {
    let free: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
    if free < min_pages {
        return Ok(0);
    }
    let page: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
    // The pragma frees one page per row it steps through.
    let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
    let mut rows = stmt.query([])?;
    while rows.next()?.is_some() {}
    drop(rows);
    let left: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
    Ok(u64::try_from((free - left).max(0) * page).unwrap_or(0))
}

/// Locks a connection. SQLite leaves a connection consistent even if a
/// holder panicked, so a poisoned lock is taken over.
fn lock(m: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Database {
    /// Opens (creating if needed) `data_dir/ctx.db` and brings its schema
    /// to the current version.
    fn open(data_dir: &Path, durability: Durability) -> Result<Arc<Self>> {
        std::fs::create_dir_all(data_dir).map_err(LocalError::from)?;
        let path = data_dir.join(DB_FILE);
        let mut writer = connect(&path, durability)?;
        incremental_vacuum_mode(&writer)?;
        schema::migrate(&mut writer, &path)?;
        let readers = (0..READERS)
            .map(|_| connect(&path, durability).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Database {
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
            group: group::Queue::default(),
            durability,
        }))
    }

    /// Runs `f` on the writer connection outside any transaction, off the
    /// async threads: for work that cannot run inside one (compaction's
    /// `VACUUM`). Every other write is a [`Database::transaction`], which
    /// joins a group commit.
    async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        let db = self.clone();
        blocking(move || {
            let mut conn = lock(&db.writer);
            db.sync_level(&conn, false)?;
            f(&mut conn)
        })
        .instrument(store_span("sqlite", "write"))
        .await
    }

    /// Runs `f` on one of the reader connections (see [`blocking_read`]).
    async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        let db = self.clone();
        blocking_read(move || {
            let i = db.next_reader.fetch_add(1, Ordering::Relaxed) % db.readers.len();
            f(&lock(&db.readers[i]))
        })
        .instrument(store_span("sqlite", "read"))
        .await
    }

    /// Runs `f`, a lookup by key that touches a few pages (a commit, a
    /// ref, a token, an agent or branch record), on the calling thread
    /// with a reader connection free at this moment; when every reader is
    /// busy, as [`Database::read`]. Tens of microseconds on an async
    /// thread cost less than handing that thread's work to another and
    /// back: over HTTP a read request took ~25% less time and ~45% less
    /// CPU, a checkpoint (which makes several lookups) ~15% less time and
    /// ~18% less CPU; their context switches went from 8 to 3 and from 18
    /// to 11 (docs/bench.md, "Lookups in place").
    async fn lookup<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        let n = self.readers.len();
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        {
            let _in = store_span("sqlite", "lookup").entered();
            for i in 0..n {
                match self.readers[(start + i) % n].try_lock() {
                    Ok(conn) => return Ok(f(&conn)?),
                    Err(std::sync::TryLockError::Poisoned(e)) => return Ok(f(&e.into_inner())?),
                    Err(std::sync::TryLockError::WouldBlock) => {}
                }
            }
        }
        self.read(f).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{self, Backend, Capabilities};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_relaxed_transaction_commits_without_fsync_and_restores_full() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), Durability::Full).unwrap();
        let sync = |c: &Connection| -> Result<i64, LocalError> {
            Ok(c.pragma_query_value(None, "synchronous", |r| r.get(0))?)
        };
        // 2 is FULL, 1 NORMAL.
        let inside = db
            .transaction_relaxed(move |tx| {
                tx.execute_batch("CREATE TABLE kept (x); INSERT INTO kept VALUES (1)")?;
                sync(tx)
            })
            .await
            .unwrap();
        assert_eq!(inside, 1);
        assert_eq!(db.write(move |c| sync(c)).await.unwrap(), 2);
        // A failing one rolls back and restores FULL too.
        let e = db
            .transaction_relaxed(|tx| -> Result<(), LocalError> {
                tx.execute_batch("INSERT INTO kept VALUES (2)")?;
                Err(Error::invalid("x", "refused").into())
            })
            .await
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("x"));
        assert_eq!(db.write(move |c| sync(c)).await.unwrap(), 2);
        let rows: i64 = db
            .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM kept", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(rows, 1, "the first committed, the second rolled back");
        // On a database that is not durable anyway, nothing changes.
        let off = tempfile::tempdir().unwrap();
        let db = Database::open(off.path(), Durability::Off).unwrap();
        let inside = db.transaction_relaxed(move |tx| sync(tx)).await.unwrap();
        assert_eq!(inside, 0);
    }

    /// A lookup runs on the calling thread when a reader is free, and
    /// waits for one as a read does when every reader is held. On a
    /// current-thread runtime a read runs on the blocking pool, so where
    /// the closure ran tells the two paths apart.
    #[tokio::test]
    async fn a_lookup_runs_in_place_or_waits_for_a_reader() {
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), Durability::Full).unwrap();
        let caller = std::thread::current().id();
        let here = |n: i64| {
            move |c: &Connection| -> Result<_, LocalError> {
                Ok((
                    std::thread::current().id(),
                    c.query_row(&format!("SELECT {n}"), [], |r| r.get::<_, i64>(0))?,
                ))
            }
        };
        let (ran_on, one) = db.lookup(here(1)).await.unwrap();
        assert_eq!(
            (ran_on, one),
            (caller, 1),
            "in place, on the caller's thread"
        );
        let (read_on, _) = db.read(here(1)).await.unwrap();
        assert_ne!(read_on, caller, "a read goes to the blocking pool");

        // Every reader held by another thread for a while.
        let (held, holding) = std::sync::mpsc::channel();
        let released = Arc::new(AtomicBool::new(false));
        let (db2, released2) = (db.clone(), released.clone());
        let holder = std::thread::spawn(move || {
            let guards: Vec<_> = db2.readers.iter().map(lock).collect();
            held.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            released2.store(true, Ordering::SeqCst);
            drop(guards);
        });
        holding.recv().unwrap();
        let (waited_on, two) = db.lookup(here(2)).await.unwrap();
        assert_eq!(two, 2);
        assert_ne!(waited_on, caller, "as a read, off the caller's thread");
        assert!(
            released.load(Ordering::SeqCst),
            "it waited for a reader to come free"
        );
        holder.join().unwrap();
    }

    /// A connection closing (the last one of a stopped server, on its
    /// blocking thread) checkpoints the log itself and holds SQLite's
    /// checkpoint lock meanwhile; a checkpoint that finds the lock taken
    /// is told "busy" at once, without its busy timeout. Here a second
    /// connection holds that lock, waiting on a reader, while
    /// `checkpoint_wal` runs: it must wait its turn, not fail.
    #[test]
    fn a_wal_truncate_waits_for_a_checkpoint_already_running() {
        use std::sync::mpsc;
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)",
            )
            .unwrap();
        // A reader on the snapshot before the next write, which a full
        // checkpoint must wait for.
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN; SELECT * FROM t").unwrap();
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        let (started, running) = mpsc::channel();
        let other = std::thread::spawn(move || {
            let conn = Connection::open(&path).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            started.send(()).unwrap();
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
        });
        running.recv().unwrap();
        // Let the other checkpoint take its lock and wait on the reader,
        // then let the reader go while ours runs.
        std::thread::sleep(Duration::from_millis(200));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            reader.execute_batch("COMMIT").unwrap();
        });
        checkpoint_wal(dir.path()).expect("the log truncated once the other checkpoint ended");
        release.join().unwrap();
        assert_eq!(
            other.join().unwrap(),
            0,
            "the other checkpoint finished too"
        );
        let wal = dir.path().join(format!("{DB_FILE}-wal"));
        assert_eq!(std::fs::metadata(wal).map_or(0, |m| m.len()), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn local_backend_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        conformance::run_all(
            &Backend {
                blobs: &LocalBlobStore::open(dir.path()).unwrap(),
                meta: &meta,
                tokens: &meta,
                branches: &meta.branch_store(),
            },
            Capabilities {
                global_branch_listing: true,
                cache_budget: true,
                branches_in_meta: true,
            },
        )
        .await;
    }

    #[tokio::test]
    async fn local_history_pages_across_lineage_runs() {
        let dir = tempfile::tempdir().unwrap();
        conformance::history::history_pages_across_lineage_runs(
            Arc::new(LocalBlobStore::open(dir.path()).unwrap()),
            Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn local_two_summary_batches_summarize_each_commit_once() {
        let dir = tempfile::tempdir().unwrap();
        conformance::summary_batch::two_batches_summarize_each_commit_once(
            Arc::new(LocalBlobStore::open(dir.path()).unwrap()),
            Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_branch_store_opened_on_its_own_conforms_too() {
        // `ctx serve` opens the branch store by itself on the same file.
        let dir = tempfile::tempdir().unwrap();
        let _meta = SqliteMetaStore::open(dir.path()).unwrap();
        let branches = SqliteBranchStore::open(dir.path()).unwrap();
        conformance::branches::run_all(
            &branches,
            Capabilities {
                global_branch_listing: true,
                cache_budget: true,
                branches_in_meta: true,
            },
        )
        .await;
    }
}
