//! Embedded-mode benchmarks: `ctx_core::Service` over the local backends
//! (`LocalBlobStore` + `SqliteMetaStore` in a temporary directory), each
//! measurement printed next to an alternative measured in the same run.
//!
//! 1. **Durable checkpoints/s**: sequential `Service::checkpoint` calls
//!    growing one chain with ~1 KiB inline deltas; next to the same through
//!    the memory backend, the two local stores' writes on their own, and the
//!    physical limit (each 1 KiB to its own file + fsync + rename +
//!    directory fsync).
//!
//!    1b. **Bytes at rest** (issue 14): a transcript-sized run (500 turns,
//!    ~2.75 MB) of durable checkpoints, the data directory's size live and
//!    after a clean stop against the raw bytes, deltas inline (the default)
//!    and in the CAS (`CTX_INLINE_DELTA_BYTES=0`), with the breakdown (by
//!    file, and `ctx.db` by table through `dbstat`). Two corpora: a
//!    transcript-like one (JSON messages of seeded, non-repeating
//!    English-like text, tool calls, paths, identifiers and numbers; see
//!    `Corpus`) and random base64 (the incompressible worst case); each
//!    beside the LZ4 size of its own raw bytes.
//!
//!    1c. **Concurrent writers** (issue 14, group commit): durable
//!    checkpoints/s from 1 and 16 writers at once, each its own chain,
//!    grouped into shared WAL commits and (the alternative) each committed
//!    alone; next to the fsync rate of one file.
//! 2. **Materialize** at chain depth 10 / 100 / 1,000: uncached (cold) and
//!    cached `Service::materialize` with `stop: root`; next to reading the
//!    same artifact files with `std::fs::read` and concatenating them, and
//!    the parts of a cold call (walk, verified reads, storing the result)
//!    timed on their own.
//!
//!    2b. **Incremental materialize** (issue 14): the resume loop at depth
//!    1,000 (100 quick), one turn being a durable `Service::checkpoint` of a
//!    1 KiB delta and a `Service::materialize` of the new tip (`stop:
//!    root`), which extends the parent's cached context; with the hot
//!    result cache (the default) and without it (`CTX_HOT_CACHE_BYTES=0`),
//!    next to its limit in the same run: reading the parent's context
//!    file, appending 1 KiB and writing it to a new file with fsync.
//! 3. **Resolve** over a timeline of 10^4 / 10^6 entries: `Service::resolve`
//!    at random times; next to the same SQL through rusqlite on the calling
//!    thread, a no-op `spawn_blocking` round trip (the floor of every store
//!    call) and the same query on an in-memory `BTreeMap`.
//!
//! "Cold" means not in ctx's materialization cache; the OS page cache is
//! warm (the files were just written), as it is for the `fs::read` baseline.
//!
//! Run (release, the real numbers; prints a markdown report to stdout):
//!
//! ```text
//! cargo bench -p ctx-core --bench embedded
//! ```
//!
//! CI smoke run (small sizes, finishes in seconds in a debug build):
//!
//! ```text
//! cargo bench -p ctx-core --bench embedded --profile dev -- --quick
//! CTX_BENCH_QUICK=1 cargo bench -p ctx-core --bench embedded
//! ```
//!
//! Temporary directories come from `tempfile`, so `TMPDIR` picks the disk.
//! Times are measured with `std::time::Instant`; commit times are explicit
//! `created_at` values, so no wall clock is read.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use ctx_core::clock::micros_to_time;
use ctx_core::format::FormatId;
use ctx_core::service::{NewCommit, Stop};
use ctx_core::store::local::{Durability, LocalBlobStore, SqliteMetaStore};
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::store::{BlobArea, BlobStore, BlobStoreExt, MetaStore, Stores};
use ctx_core::{
    ArtifactRef, Commit, CommitId, CommitType, Principal, Service, SystemClock, TenantId, Trigger,
};
use futures::{StreamExt, TryStreamExt, stream};

/// A fixed epoch for `created_at` values (late 2026), in µs.
const EPOCH_MICROS: i64 = 1_790_000_000_000_000;
/// Bytes per delta.
const DELTA_BYTES: usize = 1024;
/// Cached materializations timed per depth.
const CACHED_REPS: usize = 50;
/// Repetitions of each part of the cold-materialize breakdown.
const PART_REPS: usize = 5;
/// Resolve queries timed per timeline size.
const RESOLVE_QUERIES: usize = 1000;
/// Commits per session chain in the resolve timeline.
const SESSION_LEN: u64 = 1000;
/// put_commit calls in flight during the resolve bulk load.
const LOAD_CONCURRENCY: usize = 32;

/// Sizes for one run.
struct Plan {
    quick: bool,
    checkpoints: usize,
    /// (chain depth, chains built at that depth).
    depths: Vec<(usize, usize)>,
    timelines: Vec<u64>,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                quick,
                checkpoints: 50,
                depths: vec![(10, 2), (100, 2)],
                timelines: vec![1_000, 10_000],
            }
        } else {
            Plan {
                quick,
                checkpoints: 500,
                depths: vec![(10, 3), (100, 3), (1000, 2)],
                timelines: vec![10_000, 1_000_000],
            }
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; every flag but `--quick` is ignored.
    let quick = std::env::args().any(|a| a == "--quick")
        || ctx_core::config::harness_flag("CTX_BENCH_QUICK");
    let plan = Plan::new(quick);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");

    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let profile = if cfg!(debug_assertions) {
        "debug (numbers are not meaningful)"
    } else {
        "release"
    };
    println!("# ctx embedded-mode benchmarks\n");
    println!("- CPUs: {cpus} (std::thread::available_parallelism)");
    println!("- build profile: {profile}");
    println!(
        "- mode: {}",
        if plan.quick {
            "quick (CI smoke sizes)"
        } else {
            "full"
        }
    );
    println!("- temp dir: {}", std::env::temp_dir().display());
    println!("- load average at start: {}", load_average());
    println!();

    // `--materialize-only`: sections 2 and 2b alone; `--checkpoints-only`:
    // sections 1, 1b and 1c alone; `--group-only`: section 1c alone;
    // `--bytes-only`: section 1b alone.
    let only = std::env::args().any(|a| a == "--materialize-only");
    let checkpoints_only = std::env::args().any(|a| a == "--checkpoints-only");
    rt.block_on(async {
        if std::env::args().any(|a| a == "--group-only") {
            concurrent_checkpoints(&plan).await;
            return;
        }
        if std::env::args().any(|a| a == "--bytes-only") {
            bytes_at_rest(&plan).await;
            return;
        }
        if !only {
            checkpoints(&plan).await;
            concurrent_checkpoints(&plan).await;
            bytes_at_rest(&plan).await;
        }
        if checkpoints_only {
            return;
        }
        materialize(&plan).await;
        resume_loop(&plan).await;
        if !only {
            resolve(&plan).await;
        }
    });
    println!("Load average at the end: {}.", load_average());
}

/// `/proc/loadavg`'s 1/5/15-minute figures: other work on the machine
/// skews every number here, so the report says how busy it was.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

// ---------------------------------------------------------------------------
// Shared helpers

fn tenant() -> TenantId {
    "bench".parse().expect("a valid tenant")
}

fn principal() -> Principal {
    "agent-1".parse().expect("a valid principal")
}

fn local_service(dir: &Path, durability: Durability) -> Service {
    let blobs = LocalBlobStore::open(dir).expect("blob store opens");
    let meta = SqliteMetaStore::open_with(dir, durability).expect("sqlite opens");
    service(Arc::new(blobs), Arc::new(meta))
}

fn service(blobs: Arc<dyn BlobStore>, meta: Arc<dyn MetaStore>) -> Service {
    Service::new(Stores { blobs, meta }, Arc::new(SystemClock))
}

/// [`local_service`] storing every delta in the CAS, none inline with its
/// commit (`CTX_INLINE_DELTA_BYTES=0`: how checkpoints were stored before
/// issue 14).
fn local_service_cas_only(dir: &Path, durability: Durability) -> Service {
    local_service(dir, durability).with_limits(ctx_core::service::Limits {
        inline_delta_bytes: 0,
        ..Default::default()
    })
}

/// A distinct ~1 KiB text delta for turn `i` of chain `chain`.
fn delta(chain: usize, i: usize) -> String {
    let mut s = format!("{{\"chain\":{chain},\"turn\":{i},\"text\":\"");
    let filler = "the agent read the file, ran the tests and wrote a fix. ";
    while s.len() < DELTA_BYTES - 2 {
        s.push_str(filler);
    }
    s.truncate(DELTA_BYTES - 2);
    s.push_str("\"}");
    s
}

fn checkpoint_request(
    parent: Option<CommitId>,
    delta: String,
    created_at: DateTime<Utc>,
) -> NewCommit {
    NewCommit {
        parent,
        created_at: Some(created_at),
        ..NewCommit::new(principal(), "bench", FormatId::raw(), delta)
    }
}

/// A commit as `Service::checkpoint` would build it, for loading stores
/// directly (mirrors `store::conformance::commit`, which benches cannot see).
fn commit(parent: Option<&Commit>, at_micros: i64, body: &[u8]) -> Commit {
    let artifact = ArtifactRef::of(body);
    let id = CommitId::derive(
        &tenant(),
        parent.map(|p| &p.id),
        &artifact,
        at_micros,
        "bench",
    );
    Commit {
        id,
        parent: parent.map(|p| p.id),
        commit_type: CommitType::Delta,
        artifact_ref: artifact,
        artifact_size: body.len() as u64,
        format: FormatId::raw(),
        template: "bench".into(),
        principal: principal(),
        machine: None,
        session_id: None,
        checkpoint: Trigger::TurnBoundary,
        ticket_id: None,
        thread_id: None,
        summary: None,
        message_count: 1,
        token_count: body.len().div_ceil(4) as u64,
        created_at: micros_to_time(at_micros),
        tags: Default::default(),
        depth: parent.map_or(0, |p| p.depth + 1),
        lineage: parent.map_or(id, |p| p.lineage),
        parent_lineage: parent.map(|p| p.lineage),
        inline: None,
    }
}

/// Latency samples of one measurement.
struct Samples {
    each: Vec<Duration>,
    total: Duration,
}

impl Samples {
    fn new(mut each: Vec<Duration>, total: Duration) -> Self {
        each.sort();
        Samples { each, total }
    }

    fn ops_per_sec(&self) -> f64 {
        self.each.len() as f64 / self.total.as_secs_f64()
    }

    fn mean(&self) -> Duration {
        self.each.iter().sum::<Duration>() / self.each.len().max(1) as u32
    }

    fn quantile(&self, q: f64) -> Duration {
        let i = ((self.each.len() as f64 - 1.0) * q).round() as usize;
        self.each[i]
    }

    fn median(&self) -> Duration {
        self.quantile(0.5)
    }
}

fn us(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 100.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// Decimal megabytes per second.
fn mb_per_s(bytes: u64, d: Duration) -> String {
    format!("{:.0}", bytes as f64 / d.as_secs_f64() / 1e6)
}

/// Times `n` sequential calls of `op(i)`.
async fn time_each<F, Fut>(n: usize, mut op: F) -> Samples
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut each = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        op(i).await;
        each.push(t.elapsed());
    }
    Samples::new(each, start.elapsed())
}

// ---------------------------------------------------------------------------
// 1. Durable checkpoints

async fn checkpoint_chain(svc: &Service, n: usize) -> Samples {
    let tenant = tenant();
    let mut parent: Option<CommitId> = None;
    let mut each = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let req = checkpoint_request(
            parent,
            delta(0, i),
            micros_to_time(EPOCH_MICROS + i as i64 * 1_000_000),
        );
        let t = Instant::now();
        let done = svc.checkpoint(&tenant, req).await.expect("checkpoint");
        each.push(t.elapsed());
        assert!(done.created, "every checkpoint is new");
        parent = Some(done.commit.id);
    }
    Samples::new(each, start.elapsed())
}

/// Each 1 KiB to its own file: write, fsync, rename, fsync the directory.
fn fsync_files(dir: &Path, n: usize) -> Samples {
    let (tmp, out) = (dir.join("tmp"), dir.join("out"));
    fs::create_dir_all(&tmp).expect("mkdir");
    fs::create_dir_all(&out).expect("mkdir");
    let mut each = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let body = delta(1, i);
        let t = Instant::now();
        let (from, to) = (tmp.join(i.to_string()), out.join(i.to_string()));
        let mut f = File::create(&from).expect("create");
        f.write_all(body.as_bytes()).expect("write");
        f.sync_all().expect("fsync");
        drop(f);
        fs::rename(&from, &to).expect("rename");
        File::open(&out)
            .and_then(|d| d.sync_all())
            .expect("fsync dir");
        each.push(t.elapsed());
    }
    Samples::new(each, start.elapsed())
}

async fn checkpoints(plan: &Plan) {
    let n = plan.checkpoints;
    let tenant = tenant();

    let dir = tempfile::tempdir().expect("tempdir");
    let local = checkpoint_chain(&local_service(dir.path(), Durability::Full), n).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let local_cas =
        checkpoint_chain(&local_service_cas_only(dir.path(), Durability::Full), n).await;

    let mem_svc = service(
        Arc::new(MemoryBlobStore::new()),
        Arc::new(MemoryMetaStore::new()),
    );
    let memory = checkpoint_chain(&mem_svc, n).await;

    // The two writes a local checkpoint makes, each on its own.
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = LocalBlobStore::open(dir.path()).expect("blob store opens");
    let blob_only = time_each(n, |i| {
        let (blobs, tenant) = (&blobs, &tenant);
        async move {
            let put = blobs
                .put(tenant, Bytes::from(delta(2, i)))
                .await
                .expect("put");
            assert!(put.created);
        }
    })
    .await;
    let meta = SqliteMetaStore::open(dir.path()).expect("sqlite opens");
    let chain = chain_commits(0, n);
    let meta_only = time_each(n, |i| {
        let (meta, tenant, c) = (&meta, &tenant, &chain[i]);
        async move {
            meta.put_commit(tenant, c, None).await.expect("put_commit");
        }
    })
    .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let physical = fsync_files(dir.path(), n);

    println!("## 1. Durable checkpoints ({n} sequential, one chain, 1 KiB inline deltas)\n");
    println!("| what | ops/s | mean µs | p50 µs | p99 µs |");
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in [
        (
            "`Service::checkpoint`, local (SQLite `synchronous=FULL`, deltas inline)",
            &local,
        ),
        (
            "`Service::checkpoint`, local, deltas in the fs CAS (`CTX_INLINE_DELTA_BYTES=0`, as before)",
            &local_cas,
        ),
        ("`Service::checkpoint`, memory backend", &memory),
        ("  part: `LocalBlobStore::put` alone", &blob_only),
        (
            "  part: `SqliteMetaStore::put_commit` alone (`FULL`)",
            &meta_only,
        ),
        (
            "limit: `std::fs` write + fsync + rename + dir fsync",
            &physical,
        ),
    ] {
        println!(
            "| {name} | {:.0} | {} | {} | {} |",
            s.ops_per_sec(),
            us(s.mean()),
            us(s.median()),
            us(s.quantile(0.99))
        );
    }
    println!();
}

// ---------------------------------------------------------------------------
// 1c. Concurrent writers (group commit)

/// `writers` tasks, each checkpointing `per_writer` turns of its own chain
/// on `svc` at once: every checkpoint's latency, and the wall time of all.
async fn concurrent_chains(svc: &Service, writers: usize, per_writer: usize) -> Samples {
    let start = Instant::now();
    let each = stream::iter(0..writers)
        .map(|w| async move {
            let tenant = tenant();
            let mut parent: Option<CommitId> = None;
            let mut each = Vec::with_capacity(per_writer);
            for i in 0..per_writer {
                let req = checkpoint_request(
                    parent,
                    delta(100 + w, i),
                    micros_to_time(EPOCH_MICROS + i as i64 * 1_000_000),
                );
                let t = Instant::now();
                let done = svc.checkpoint(&tenant, req).await.expect("checkpoint");
                each.push(t.elapsed());
                parent = Some(done.commit.id);
            }
            each
        })
        .buffer_unordered(writers)
        .collect::<Vec<_>>()
        .await
        .concat();
    Samples::new(each, start.elapsed())
}

/// One file, 1 KiB appended and `fdatasync`ed per write: the rate of
/// fsyncs one writer gets, what a commit that does not share its fsync is
/// bounded by.
fn fsync_appends(dir: &Path, n: usize) -> Samples {
    let mut f = File::create(dir.join("log")).expect("create");
    let mut each = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        f.write_all(delta(3, i).as_bytes()).expect("write");
        f.sync_data().expect("fdatasync");
        each.push(t.elapsed());
    }
    Samples::new(each, start.elapsed())
}

/// Durable checkpoints from 1 and 16 concurrent writers (each its own
/// chain, 1 KiB inline deltas), with group commit and with every
/// transaction committed alone, beside the fsync rate of one file.
async fn concurrent_checkpoints(plan: &Plan) {
    let per_writer = if plan.quick { 10 } else { 200 };
    println!(
        "## 1c. Concurrent writers: durable checkpoints, group commit ({per_writer} per writer, each writer its own chain, 1 KiB inline deltas)\n"
    );
    println!("| writers | commits | ops/s | p50 µs | p99 µs | transactions per WAL commit |");
    println!("|---|---|---:|---:|---:|---:|");
    for (writers, limit) in [(1, 64), (16, 64), (16, 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = SqliteMetaStore::open_with(dir.path(), Durability::Full).expect("sqlite opens");
        meta.set_group_limit(limit);
        let meta = Arc::new(meta);
        let blobs = LocalBlobStore::open(dir.path()).expect("blob store opens");
        let svc = service(Arc::new(blobs), meta.clone());
        let before = meta.write_groups();
        let s = concurrent_chains(&svc, writers, per_writer).await;
        let after = meta.write_groups();
        let per_commit = (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
        println!(
            "| {writers} | {} | {:.0} | {} | {} | {per_commit:.1} |",
            if limit == 1 {
                "each alone (group limit 1, as before)"
            } else {
                "grouped (default)"
            },
            s.ops_per_sec(),
            us(s.median()),
            us(s.quantile(0.99)),
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let s = fsync_appends(dir.path(), per_writer * 4);
    println!(
        "| limit: 1 KiB appended + `fdatasync`, one file, one writer | - | {:.0} | {} | {} | - |",
        s.ops_per_sec(),
        us(s.median()),
        us(s.quantile(0.99)),
    );
    println!();
}

/// `n` commits of one chain (session `session`), 1 s apart.
fn chain_commits(session: u64, n: usize) -> Vec<Commit> {
    let mut out: Vec<Commit> = Vec::with_capacity(n);
    for i in 0..n {
        let at = EPOCH_MICROS + (session * SESSION_LEN + i as u64) as i64 * 1_000_000;
        let c = commit(out.last(), at, format!("s{session} t{i}").as_bytes());
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// 2. Materialize

/// One chain: its tip, its root and its deltas' artifacts, oldest first.
struct Chain {
    root: CommitId,
    tip: CommitId,
    artifacts: Vec<ArtifactRef>,
}

async fn build_chain(svc: &Service, chain: usize, depth: usize) -> Chain {
    let tenant = tenant();
    let mut parent: Option<CommitId> = None;
    let mut artifacts = Vec::with_capacity(depth);
    let mut root = None;
    for i in 0..depth {
        let at = EPOCH_MICROS + (chain * 1_000_000 + i) as i64 * 1_000_000;
        let req = checkpoint_request(parent, delta(chain, i), micros_to_time(at));
        let c = svc
            .checkpoint(&tenant, req)
            .await
            .expect("checkpoint")
            .commit;
        root.get_or_insert(c.id);
        artifacts.push(c.artifact_ref);
        parent = Some(c.id);
    }
    Chain {
        root: root.expect("depth > 0"),
        tip: parent.expect("depth > 0"),
        artifacts,
    }
}

struct MaterializeRow {
    depth: usize,
    bytes: u64,
    load: Duration,
    cold: Samples,
    cached: Samples,
    cached_download: Samples,
    copy: Samples,
    /// The parts of a cold materialize, timed on their own.
    walk: Samples,
    fetch: Samples,
    /// The same reads through `block_in_place`.
    fetch_inline: Samples,
    write: Samples,
    /// The same depth with the deltas inline.
    inline: InlineRow,
}

/// Cold materialize of chains whose deltas are inline with their commits.
struct InlineRow {
    cold: Samples,
    /// One SQLite query reading the same deltas, concatenated.
    sqlite: Samples,
}

/// [`materialize_depth`]'s cold materialize on chains built with the
/// deltas inline (the default), and its limit: the same bytes as rows of
/// one table (`deltas (bytes BLOB)`, in a database of their own) read by
/// one query and concatenated.
async fn materialize_inline_depth(depth: usize, chains: usize) -> InlineRow {
    let dir = tempfile::tempdir().expect("tempdir");
    let loader = local_service(dir.path(), Durability::Off);
    let mut built = Vec::with_capacity(chains);
    for c in 0..chains {
        built.push(build_chain(&loader, depth * 100 + 50 + c, depth).await);
    }
    drop(loader);
    let svc = local_service(dir.path(), Durability::Full);
    let (cold, bytes) = cold_materializes(&svc, &built).await;

    let conn = rusqlite::Connection::open(dir.path().join("limit.db")).expect("open limit.db");
    conn.execute_batch("CREATE TABLE deltas (bytes BLOB NOT NULL)")
        .expect("create");
    {
        let tx = conn.unchecked_transaction().expect("begin");
        let c = depth * 100 + 50;
        for i in 0..depth {
            tx.execute(
                "INSERT INTO deltas (bytes) VALUES (?1)",
                [delta(c, i).as_bytes()],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
    }
    let mut stmt = conn
        .prepare("SELECT bytes FROM deltas ORDER BY rowid")
        .expect("prepare");
    let mut each = Vec::with_capacity(CACHED_REPS);
    let start = Instant::now();
    for _ in 0..CACHED_REPS {
        let t = Instant::now();
        let mut out = Vec::with_capacity(bytes as usize);
        let mut rows = stmt.query([]).expect("query");
        while let Some(r) = rows.next().expect("row") {
            out.extend_from_slice(r.get_ref(0).expect("column").as_blob().expect("a blob"));
        }
        each.push(t.elapsed());
        assert_eq!(out.len() as u64, bytes);
    }
    let sqlite = Samples::new(each, start.elapsed());
    InlineRow { cold, sqlite }
}

/// The first materialize of each chain's tip, `stop: root` and `stop:
/// after <root>` (two cache keys each): their latencies, and the bytes of
/// the `stop: root` result.
async fn cold_materializes(svc: &Service, built: &[Chain]) -> (Samples, u64) {
    let tenant = tenant();
    let mut cold = Vec::new();
    let mut bytes = 0;
    let cold_start = Instant::now();
    for ch in built {
        for stop in [Stop::Root, Stop::After(ch.root)] {
            let t = Instant::now();
            let m = svc
                .materialize(&tenant, &ch.tip, stop, None)
                .await
                .expect("materialize");
            cold.push(t.elapsed());
            // The result is stored behind the answer (the hot cache): let
            // it land before the next call is timed.
            svc.flush_cache_writes().await;
            assert!(!m.cached, "first call is not cached");
            if stop == Stop::Root {
                bytes = m.result.size;
            }
        }
    }
    (Samples::new(cold, cold_start.elapsed()), bytes)
}

async fn materialize_depth(depth: usize, chains: usize) -> MaterializeRow {
    let tenant = tenant();
    let dir = tempfile::tempdir().expect("tempdir");

    // Bulk load: artifacts are still fsynced, SQLite is not. The deltas go
    // to the CAS (not inline), so that the limit below reads the same
    // bytes as files.
    let start = Instant::now();
    let loader = local_service_cas_only(dir.path(), Durability::Off);
    let mut built = Vec::with_capacity(chains);
    for c in 0..chains {
        // Chain numbers are offset so no delta repeats another depth's.
        built.push(build_chain(&loader, depth * 100 + c, depth).await);
    }
    drop(loader);
    let load = start.elapsed();

    // Measure on the store as `ctx` opens it.
    let svc = local_service(dir.path(), Durability::Full);
    let blobs = LocalBlobStore::open(dir.path()).expect("blob store opens");

    // Cold: every (tip, stop) is a separate cache key. Stop::Compaction is
    // left out: on a chain of deltas it joins the same bytes as Stop::Root,
    // so the blob write would be skipped as a duplicate.
    let (cold, bytes) = cold_materializes(&svc, &built).await;

    let tip = built[0].tip;
    let cached = time_each(CACHED_REPS, |_| {
        let (svc, tenant) = (&svc, &tenant);
        async move {
            let m = svc
                .materialize(tenant, &tip, Stop::Root, None)
                .await
                .expect("cached");
            assert!(m.cached);
        }
    })
    .await;
    let cached_download = time_each(CACHED_REPS, |_| {
        let (svc, tenant) = (&svc, &tenant);
        async move {
            let m = svc
                .materialize(tenant, &tip, Stop::Root, None)
                .await
                .expect("cached")
                .result;
            let b = svc
                .download_artifact(tenant, &m.artifact_ref)
                .await
                .expect("download");
            assert_eq!(b.len() as u64, m.size);
        }
    })
    .await;

    // The physical limit: read the same files and concatenate.
    let paths: Vec<_> = built[0]
        .artifacts
        .iter()
        .map(|a| blobs.path_of(&tenant, a))
        .collect();
    let mut each = Vec::with_capacity(CACHED_REPS);
    let copy_start = Instant::now();
    for _ in 0..CACHED_REPS {
        let t = Instant::now();
        let mut out = Vec::with_capacity(bytes as usize);
        for p in &paths {
            out.extend_from_slice(&fs::read(p).expect("read artifact"));
        }
        each.push(t.elapsed());
        assert_eq!(out.len() as u64, bytes);
    }
    let copy = Samples::new(each, copy_start.elapsed());

    // Where a cold materialize spends its time, each part on its own:
    // the chain walk, the verified artifact reads (as materialize does
    // them, 16 in flight), and storing the joined result.
    let walk = time_each(PART_REPS, |_| {
        let (svc, tenant) = (&svc, &tenant);
        async move {
            let h = svc.history(tenant, &tip, depth).await.expect("history");
            assert_eq!(h.len(), depth);
        }
    })
    .await;
    let fetch = time_each(PART_REPS, |_| {
        let (blobs, tenant, arts) = (&blobs, &tenant, &built[0].artifacts);
        async move {
            let parts: Vec<Bytes> = stream::iter(arts)
                .map(|a| async move { blobs.get(tenant, a).await })
                .buffered(16)
                .try_collect::<Vec<_>>()
                .await
                .expect("get")
                .into_iter()
                .map(|b| b.expect("artifact present"))
                .collect();
            assert_eq!(parts.len(), depth);
        }
    })
    .await;
    // The same verified reads done by hand on the calling worker thread
    // (`block_in_place`, multi-thread runtime only), no hop to the
    // blocking pool: the store's reads do the same since issue 14's
    // "fewer hops"; before, this row measured 2.5x faster than the row
    // above (docs/bench.md).
    let fetch_inline = time_each(PART_REPS, |_| {
        let paths = built[0]
            .artifacts
            .iter()
            .map(|a| (*a, blobs.path_of(&tenant, a)))
            .collect::<Vec<_>>();
        async move {
            let parts: Vec<Bytes> = stream::iter(paths)
                .map(|(a, p)| async move {
                    tokio::task::block_in_place(|| {
                        let b = Bytes::from(fs::read(p).expect("read artifact"));
                        ctx_core::store::verify(&a, &b).expect("verified");
                        b
                    })
                })
                .buffered(16)
                .collect()
                .await;
            assert_eq!(parts.len(), depth);
        }
    })
    .await;

    // Stored as materialize stores it: in the cache area, not fsynced.
    let write = time_each(PART_REPS, |rep| {
        let (blobs, tenant) = (&blobs, &tenant);
        async move {
            let mut joined = format!("rep {rep} depth {depth}\n").into_bytes();
            joined.resize(bytes as usize, b'.');
            let put = blobs
                .put_cached(tenant, Bytes::from(joined))
                .await
                .expect("put_cached");
            assert!(put.created);
        }
    })
    .await;

    // The same depth with the deltas inline (the default): cold
    // materialize, next to reading the same bytes with one SQLite query.
    let inline = materialize_inline_depth(depth, chains).await;

    MaterializeRow {
        depth,
        bytes,
        load,
        cold,
        cached,
        cached_download,
        copy,
        walk,
        fetch,
        fetch_inline,
        write,
        inline,
    }
}

async fn materialize(plan: &Plan) {
    let mut rows = Vec::new();
    for &(depth, chains) in &plan.depths {
        rows.push(materialize_depth(depth, chains).await);
    }
    println!("## 2. Materialize (`stop: root`, 1 KiB deltas, local backend)\n");
    println!(
        "| depth | bytes | cold ms (median of n) | cold MB/s | cached µs (median of {CACHED_REPS}) \
         | cached + download µs | cached + download MB/s | limit: `fs::read` + concat µs | limit MB/s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} (n={}) | {} | {} | {} | {} | {} | {} |",
            r.depth,
            r.bytes,
            ms(r.cold.median()),
            r.cold.each.len(),
            mb_per_s(r.bytes, r.cold.median()),
            us(r.cached.median()),
            us(r.cached_download.median()),
            mb_per_s(r.bytes, r.cached_download.median()),
            us(r.copy.median()),
            mb_per_s(r.bytes, r.copy.median()),
        );
    }
    println!();
    for r in &rows {
        println!(
            "- depth {}: loaded {} chain(s) in {:.2} s (`Service::checkpoint`, SQLite `synchronous=OFF`); \
             cold min {} ms, max {} ms",
            r.depth,
            r.cold.each.len() / 2,
            r.load.as_secs_f64(),
            ms(r.cold.each[0]),
            ms(*r.cold.each.last().expect("samples")),
        );
    }
    println!();
    println!(
        "Where a cold materialize goes, each part timed on its own (median of {PART_REPS}):\n"
    );
    println!(
        "| depth | cold ms | walk: `Service::history` ms | fetch: the verified `get`s, 16 in flight, ms \
         | the same `fs::read` + BLAKE3 by hand in `block_in_place`, ms | store result: `LocalBlobStore::put_cached` (no fsync) ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.depth,
            ms(r.cold.median()),
            ms(r.walk.median()),
            ms(r.fetch.median()),
            ms(r.fetch_inline.median()),
            ms(r.write.median()),
        );
    }
    println!();
    println!(
        "Cold materialize with the deltas inline (the default), beside the limit of \
         the CAS rows above and reading the same bytes with one SQLite query \
         (median of n; limits median of {CACHED_REPS}):\n"
    );
    println!(
        "| depth | bytes | cold ms, deltas inline | limit: one SQLite query + concat ms \
         | cold / SQLite limit | limit: `fs::read` + concat ms | cold / fs limit |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let cold = r.inline.cold.median();
        println!(
            "| {} | {} | {} (n={}) | {} | {:.1}x | {} | {:.1}x |",
            r.depth,
            r.bytes,
            ms(cold),
            r.inline.cold.each.len(),
            ms3(r.inline.sqlite.median()),
            cold.as_secs_f64() / r.inline.sqlite.median().as_secs_f64(),
            ms3(r.copy.median()),
            cold.as_secs_f64() / r.copy.median().as_secs_f64(),
        );
    }
    println!();
}

/// Milliseconds with three decimals (for sub-millisecond limits).
fn ms3(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

// ---------------------------------------------------------------------------
// 3. Resolve

/// splitmix64: a fixed-seed generator, so runs query the same times.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The timeline: sessions of `SESSION_LEN` chained commits, 1 s apart, all
/// by one principal. Generated lazily so 10^6 commits are never all held.
fn timeline(n: u64) -> impl Iterator<Item = Commit> {
    let mut prev: Option<Commit> = None;
    (0..n).map(move |i| {
        let parent = if i % SESSION_LEN == 0 {
            None
        } else {
            prev.as_ref()
        };
        let at = EPOCH_MICROS + i as i64 * 1_000_000;
        let c = commit(parent, at, format!("entry {i}").as_bytes());
        prev = Some(c.clone());
        c
    })
}

struct ResolveRow {
    entries: u64,
    load: Duration,
    sqlite: Samples,
    direct: Samples,
    hop: Samples,
    btree: Samples,
}

async fn resolve_size(n: u64) -> ResolveRow {
    let tenant = tenant();
    let principal = principal();
    let dir = tempfile::tempdir().expect("tempdir");

    let mut index: BTreeMap<(i64, CommitId), ()> = BTreeMap::new();
    let start = Instant::now();
    {
        let meta = Arc::new(SqliteMetaStore::open_with(dir.path(), Durability::Off).expect("open"));
        stream::iter(timeline(n).map(|c| {
            index.insert((c.created_at.timestamp_micros(), c.id), ());
            Ok::<_, ctx_core::Error>(c)
        }))
        .map_ok(|c| {
            let (meta, tenant) = (meta.clone(), tenant.clone());
            async move { meta.put_commit(&tenant, &c, None).await }
        })
        .try_buffer_unordered(LOAD_CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await
        .expect("bulk load");
    }
    let load = start.elapsed();

    let svc = local_service(dir.path(), Durability::Full);
    let mut rng = Rng(42);
    let span = n as i64 * 1_000_000;
    let times: Vec<i64> = (0..RESOLVE_QUERIES)
        .map(|_| EPOCH_MICROS + (rng.next() % span as u64) as i64)
        .collect();

    let mut each = Vec::with_capacity(times.len());
    let mut found = Vec::with_capacity(times.len());
    let sqlite_start = Instant::now();
    for &at in &times {
        let t = Instant::now();
        let id = svc
            .resolve(&tenant, &principal, Some(micros_to_time(at)))
            .await
            .expect("resolve");
        each.push(t.elapsed());
        found.push(id);
    }
    let sqlite = Samples::new(each, sqlite_start.elapsed());

    let max_id: CommitId = "ctx-ffffffffffffffffffffffffffffffff"
        .parse()
        .expect("a valid id");
    let mut each = Vec::with_capacity(times.len());
    let mut hits = Vec::with_capacity(times.len());
    let btree_start = Instant::now();
    for &at in &times {
        let t = Instant::now();
        let hit = index.range(..=(at, max_id)).next_back().map(|(k, _)| k.1);
        each.push(t.elapsed());
        hits.push(hit);
    }
    let btree = Samples::new(each, btree_start.elapsed());
    for (a, b) in found.iter().zip(&hits) {
        assert_eq!(Some(*a), *b, "SQLite and the BTreeMap agree");
    }

    // The same SQL as `SqliteMetaStore::resolve`, on the calling thread:
    // what SQLite itself costs, without the hop to the blocking pool.
    let conn = rusqlite::Connection::open_with_flags(
        dir.path().join("ctx.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open ctx.db");
    let mut stmt = conn
        .prepare(
            "SELECT id FROM timeline WHERE tenant = ?1 AND principal = ?2 AND ts <= ?3
             ORDER BY ts DESC, id DESC LIMIT 1",
        )
        .expect("prepare");
    let mut each = Vec::with_capacity(times.len());
    let direct_start = Instant::now();
    for (&at, want) in times.iter().zip(&found) {
        let t = Instant::now();
        let id: String = stmt
            .query_row(
                rusqlite::params![tenant.as_str(), principal.as_str(), at],
                |r| r.get(0),
            )
            .expect("a row");
        let id: CommitId = id.parse().expect("a stored id");
        each.push(t.elapsed());
        assert_eq!(&id, want);
    }
    let direct = Samples::new(each, direct_start.elapsed());

    // Every store call hops to the blocking pool and back: its floor,
    // measured here under the same conditions.
    let hop = time_each(RESOLVE_QUERIES, |_| async {
        tokio::task::spawn_blocking(|| ()).await.expect("no panic");
    })
    .await;

    ResolveRow {
        entries: n,
        load,
        sqlite,
        direct,
        hop,
        btree,
    }
}

async fn resolve(plan: &Plan) {
    let mut rows = Vec::new();
    for &n in &plan.timelines {
        rows.push(resolve_size(n).await);
    }
    println!(
        "## 3. Resolve ({RESOLVE_QUERIES} queries at random times, one principal, sessions of {SESSION_LEN})\n"
    );
    println!(
        "| entries | load s (`put_commit`, `OFF`, {LOAD_CONCURRENCY} in flight) | load entries/s \
         | `Service::resolve` p50 / p99 µs | same SQL via rusqlite, no hop, p50 / p99 µs \
         | `spawn_blocking` no-op p50 / p99 µs | limit: `BTreeMap` p50 / p99 µs |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let pair = |s: &Samples| format!("{} / {}", us(s.median()), us(s.quantile(0.99)));
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.0} | {} | {} | {} | {} |",
            r.entries,
            r.load.as_secs_f64(),
            r.entries as f64 / r.load.as_secs_f64(),
            pair(&r.sqlite),
            pair(&r.direct),
            pair(&r.hop),
            pair(&r.btree),
        );
    }
    println!();
}

// ---------------------------------------------------------------------------
// 2b. Incremental materialize: the resume loop

/// Turns timed in the resume loop.
const RESUME_TURNS: usize = 50;

async fn resume_loop(plan: &Plan) {
    println!("## 2b. Incremental materialize: the resume loop (issue 14)\n");
    for inline in [false, true] {
        let hot = resume_run(plan, inline, true).await;
        // The same loop with the hot result cache off, for the
        // before/after in one run.
        let off = resume_run(plan, inline, false).await;
        print_resume(plan, inline, &hot, &off);
    }
}

/// What one resume loop measured.
struct ResumeRun {
    /// The session's first materialize (nothing cached).
    cold: Duration,
    ck: Samples,
    mat: Samples,
    turn: Samples,
    limit: Samples,
    limit_nosync: Samples,
    hash: Samples,
}

/// One resume loop, the chain's deltas inline (the default) or in the CAS,
/// with the hot result cache on (the default) or off
/// (`CTX_HOT_CACHE_BYTES=0`).
async fn resume_run(plan: &Plan, inline: bool, hot: bool) -> ResumeRun {
    let depth = if plan.quick { 100 } else { 1000 };
    let turns = if plan.quick { 10 } else { RESUME_TURNS };
    let tenant = tenant();
    let dir = tempfile::tempdir().expect("tempdir");
    let (loader, svc) = if inline {
        (
            local_service(dir.path(), Durability::Off),
            local_service(dir.path(), Durability::Full),
        )
    } else {
        (
            local_service_cas_only(dir.path(), Durability::Off),
            local_service_cas_only(dir.path(), Durability::Full),
        )
    };
    let svc = if hot { svc } else { svc.with_hot_cache(0) };
    let chain = build_chain(&loader, 7_000, depth).await;
    drop(loader);
    let blobs = LocalBlobStore::open(dir.path()).expect("blob store opens");
    // The session starts: one cold materialize of the tip.
    let start = Instant::now();
    let first = svc
        .materialize(&tenant, &chain.tip, Stop::Root, None)
        .await
        .expect("materialize");
    let cold = start.elapsed();
    svc.flush_cache_writes().await;
    let mut context = first.result;
    let mut tip = chain.tip;
    let (mut ck, mut mat, mut turn) = (vec![], vec![], vec![]);
    let (mut limit, mut limit_nosync, mut hash) = (vec![], vec![], vec![]);
    let loop_start = Instant::now();
    for i in 0..turns {
        // After the chain's own times (see `build_chain`).
        let at = EPOCH_MICROS + (7_000 * 1_000_000 + depth + i) as i64 * 1_000_000;
        let req = checkpoint_request(Some(tip), delta(7_001, i), micros_to_time(at));
        let t = Instant::now();
        let c = svc
            .checkpoint(&tenant, req)
            .await
            .expect("checkpoint")
            .commit;
        let t1 = Instant::now();
        let m = svc
            .materialize(&tenant, &c.id, Stop::Root, None)
            .await
            .expect("materialize");
        let t2 = Instant::now();
        assert!(!m.cached);
        assert_eq!(m.result.size, context.size + DELTA_BYTES as u64);
        ck.push(t1 - t);
        mat.push(t2 - t1);
        turn.push(t2 - t);
        // Untimed: the result stored behind the answer lands (an agent
        // takes far longer than that between turns), so the limits below
        // read a real file.
        svc.flush_cache_writes().await;
        // The limits of the materialize half: the parent's context read,
        // 1 KiB appended, written whole to a new file (with and without
        // fsync: cached results are no longer fsynced).
        let cached = blobs
            .path_in(&tenant, BlobArea::Cache, &context.artifact_ref)
            .expect("the embedded store has a cache area");
        for sync in [true, false] {
            let t = Instant::now();
            let mut out = fs::read(&cached).expect("read");
            out.extend_from_slice(delta(7_002, i).as_bytes());
            let path = dir.path().join(format!("limit-{i}-{sync}"));
            let mut f = File::create(&path).expect("create");
            f.write_all(&out).expect("write");
            if sync {
                f.sync_all().expect("fsync");
                limit.push(t.elapsed());
            } else {
                limit_nosync.push(t.elapsed());
            }
        }
        // CPU: one BLAKE3 of the new context (without the hot cache a
        // turn hashes it once, verifying the parent's and hashing the
        // result in one pass; with it, only the new 1 KiB).
        let bytes = fs::read(&cached).expect("read");
        let t = Instant::now();
        let art = ArtifactRef::of(&bytes);
        hash.push(t.elapsed());
        assert_eq!(art, context.artifact_ref);
        context = m.result;
        tip = c.id;
    }
    let total = loop_start.elapsed();
    let s = |v: Vec<Duration>| Samples::new(v, total);
    ResumeRun {
        cold,
        ck: s(ck),
        mat: s(mat),
        turn: s(turn),
        limit: s(limit),
        limit_nosync: s(limit_nosync),
        hash: s(hash),
    }
}

/// The resume loop's table: the hot cache on (the default), its
/// materialize beside the same loop's with the cache off, and the limits.
fn print_resume(plan: &Plan, inline: bool, hot: &ResumeRun, off: &ResumeRun) {
    let depth = if plan.quick { 100 } else { 1000 };
    let turns = if plan.quick { 10 } else { RESUME_TURNS };
    println!(
        "Deltas {}: depth {depth}, 1 KiB deltas, `stop: root`, local backend, durable \
         checkpoints (`synchronous=FULL`); {turns} turns, each a checkpoint \
         then a materialize of the new tip (the parent's context is cached), \
         once with the hot result cache (the default, `CTX_HOT_CACHE_BYTES` \
         64 MiB: the parent's result in memory, the new one stored behind the \
         answer) and once without it (`CTX_HOT_CACHE_BYTES=0`: read, verified \
         and stored before the answer). The first materialize of the session \
         (cold, nothing cached): {} ms with, {} ms without.\n",
        if inline {
            "inline (the default)"
        } else {
            "in the CAS (`CTX_INLINE_DELTA_BYTES=0`)"
        },
        ms(hot.cold),
        ms(off.cold),
    );
    println!("| per turn | median µs | p90 µs | max µs |");
    println!("|---|---:|---:|---:|");
    for (name, s) in [
        ("checkpoint (durable)", &hot.ck),
        ("materialize the tip (incremental, hot cache)", &hot.mat),
        ("checkpoint + materialize (hot cache)", &hot.turn),
        ("checkpoint (durable), hot cache off", &off.ck),
        ("materialize the tip (incremental), hot cache off", &off.mat),
        ("checkpoint + materialize, hot cache off", &off.turn),
        (
            "limit: `fs::read` parent context + 1 KiB + write + fsync",
            &hot.limit,
        ),
        (
            "limit: `fs::read` parent context + 1 KiB + write, no fsync",
            &hot.limit_nosync,
        ),
        ("part: one BLAKE3 of the parent's context", &hot.hash),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            us(s.median()),
            us(s.quantile(0.9)),
            us(*s.each.iter().max().expect("samples")),
        );
    }
    println!();
}

// ---------------------------------------------------------------------------
// 1b. Bytes at rest

/// Bytes of the transcript the issue measured (2.75 MB over 500 turns).
const TRANSCRIPT_BYTES: usize = 2_750_000;

/// Space a directory tree takes: allocated bytes (blocks, directories
/// included), file bytes, and files.
fn disk_usage(path: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut out = (0, 0, 0);
    let Ok(meta) = fs::symlink_metadata(path) else {
        return out;
    };
    out.0 += meta.blocks() * 512;
    if meta.is_dir() {
        for entry in fs::read_dir(path).expect("readable directory") {
            let (a, b, f) = disk_usage(&entry.expect("entry").path());
            out.0 += a;
            out.1 += b;
            out.2 += f;
        }
    } else {
        out.1 += meta.len();
        out.2 += 1;
    }
    out
}

/// The data directory's parts: (name, allocated bytes, file bytes, files).
fn breakdown(dir: &Path) -> Vec<(&'static str, (u64, u64, u64))> {
    vec![
        ("ctx.db", disk_usage(&dir.join("ctx.db"))),
        ("ctx.db-wal", disk_usage(&dir.join("ctx.db-wal"))),
        ("cas/", disk_usage(&dir.join("cas"))),
        ("total", disk_usage(dir)),
    ]
}

fn describe(parts: &[(&'static str, (u64, u64, u64))], raw: u64) -> String {
    parts
        .iter()
        .map(|(name, (alloc, len, files))| {
            format!(
                "{name} {:.2} MB ({:.3}x; {} files, {:.2} MB of data)",
                *alloc as f64 / 1e6,
                *alloc as f64 / raw as f64,
                files,
                *len as f64 / 1e6
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Rng {
    /// A number below `n` (the corpora below are the same bytes in every
    /// run: one fixed seed).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The most frequent English words, in rank order: the head of the
/// vocabulary (in real text they make up about half of the words).
const COMMON_WORDS: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "you", "was", "with", "on",
    "as", "have", "but", "be", "they", "this", "at", "not", "from", "or", "by", "we", "an", "are",
    "can", "if", "which", "there", "all", "will", "one", "would", "what", "so", "has", "when",
    "do", "more", "their", "been", "other", "some", "out", "then", "them", "these", "its", "into",
    "only", "new", "also", "should", "could", "now", "first", "any", "like", "than", "need",
    "file", "test", "function", "error", "call", "value", "return", "change", "line", "run",
    "check", "build", "code", "type", "field", "read", "write", "fix", "add", "use", "still",
    "because", "after", "before", "each", "where", "here", "how", "why", "same", "next", "both",
    "let", "me", "look", "see", "try", "again", "instead", "already", "failing", "passes",
];

/// A vocabulary of `COMMON_WORDS` followed by ~3,000 pronounceable made-up
/// content words (two to four consonant-vowel syllables from the seeded
/// stream), ranked: word `r` is drawn with probability ∝ 1/(r+1) (Zipf's
/// law, as in natural language).
struct Vocabulary {
    words: Vec<String>,
    /// Cumulative Zipf weights, for drawing by binary search.
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new(rng: &mut Rng) -> Self {
        const ONSETS: &[&str] = &[
            "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st",
            "tr", "pr", "ch", "sh", "th", "gr", "cl", "br", "sp",
        ];
        const NUCLEI: &[&str] = &["a", "e", "i", "o", "u", "ea", "ou", "io", "ai", "y"];
        const CODAS: &[&str] = &["", "", "", "n", "r", "s", "t", "l", "nd", "ng", "ck", "ss"];
        let mut words: Vec<String> = COMMON_WORDS.iter().map(|w| (*w).to_owned()).collect();
        let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
        while words.len() < COMMON_WORDS.len() + 3_000 {
            let syllables = 2 + rng.below(3);
            let mut w = String::new();
            for _ in 0..syllables {
                w.push_str(ONSETS[rng.below(ONSETS.len())]);
                w.push_str(NUCLEI[rng.below(NUCLEI.len())]);
            }
            w.push_str(CODAS[rng.below(CODAS.len())]);
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|r| {
                total += 1.0 / (r as f64 + 1.0);
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().expect("a vocabulary");
        let x = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let i = self.cumulative.partition_point(|c| *c < x);
        &self.words[i.min(self.words.len() - 1)]
    }

    /// `n` words as sentences (capitalized, 6–20 words, ending in a period).
    fn prose(&self, rng: &mut Rng, n: usize) -> String {
        let mut out = String::new();
        let mut left_in_sentence = 0;
        for _ in 0..n {
            if left_in_sentence == 0 {
                if !out.is_empty() {
                    out.push_str(". ");
                }
                left_in_sentence = 6 + rng.below(15);
                let w = self.word(rng);
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(self.word(rng));
            }
            left_in_sentence -= 1;
        }
        out.push('.');
        out
    }

    /// A snake_case identifier of two or three words.
    fn ident(&self, rng: &mut Rng) -> String {
        let n = 2 + rng.below(2);
        (0..n)
            .map(|_| self.word(rng).to_owned())
            .collect::<Vec<_>>()
            .join("_")
    }
}

/// The two corpora of section 1b.
#[derive(Clone, Copy)]
enum Corpus {
    /// Agent-transcript-like turns: JSON messages (a user request, the
    /// assistant's reasoning, a tool call with its JSON arguments, the
    /// tool's output of file paths, identifiers, numbers, hex ids and log
    /// lines, the assistant's answer) of non-repeating English-like text
    /// drawn from [`Vocabulary`] by a seeded PRNG.
    Transcript,
    /// [`Corpus::Transcript`] with turn sizes drawn from a lognormal
    /// distribution (σ = 1, the same mean): most turns short, a few long,
    /// as in real sessions, so records do not all fit pages alike.
    Lognormal,
    /// The worst case: tool outputs of random bytes as base64 text, which
    /// no compressor without entropy coding shrinks.
    Random,
}

impl Corpus {
    fn name(self) -> &'static str {
        match self {
            Corpus::Transcript => "transcript-like JSON text",
            Corpus::Lognormal => "transcript-like, lognormal turn sizes",
            Corpus::Random => "random base64 (incompressible)",
        }
    }

    /// `turns` deltas of about `per_turn` bytes each (exactly, for
    /// `Random`), from a fixed seed.
    fn turns(self, turns: usize, per_turn: usize) -> Vec<String> {
        let mut rng = Rng(0x00C0_FFEE);
        match self {
            Corpus::Random => (0..turns)
                .map(|i| {
                    let head = format!("{{\"role\":\"tool\",\"turn\":{i},\"content\":\"");
                    let n = (per_turn - head.len() - 2) / 4 * 3;
                    let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                    let mut s = head + &base64::engine::general_purpose::STANDARD.encode(bytes);
                    s.push_str("\"}");
                    s
                })
                .collect(),
            Corpus::Transcript => {
                let vocab = Vocabulary::new(&mut rng);
                (0..turns)
                    .map(|i| transcript_turn(&vocab, &mut rng, i, per_turn))
                    .collect()
            }
            Corpus::Lognormal => {
                let vocab = Vocabulary::new(&mut rng);
                (0..turns)
                    .map(|i| {
                        // Box–Muller: one standard normal from two uniforms.
                        let u = |r: &mut Rng| (r.next() >> 11) as f64 / (1u64 << 53) as f64;
                        let (u1, u2) = (u(&mut rng).max(f64::MIN_POSITIVE), u(&mut rng));
                        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                        let size = per_turn as f64 * (z - 0.5).exp();
                        transcript_turn(&vocab, &mut rng, i, (size as usize).max(200))
                    })
                    .collect()
            }
        }
    }
}

/// One turn of [`Corpus::Transcript`]: JSON lines of messages until
/// `per_turn` bytes are reached.
fn transcript_turn(vocab: &Vocabulary, rng: &mut Rng, turn: usize, per_turn: usize) -> String {
    const TOOLS: &[&str] = &[
        "read_file",
        "run_command",
        "search_code",
        "edit_file",
        "list_dir",
    ];
    let json = |v: serde_json::Value| v.to_string();
    let mut out = String::new();
    let user = {
        let n = 15 + rng.below(50);
        vocab.prose(rng, n)
    };
    out.push_str(&json(
        serde_json::json!({"role": "user", "turn": turn, "content": user}),
    ));
    out.push('\n');
    // Rounds of ~1.2 KB: stop a round early so turns average `per_turn`.
    while out.len() + 1_100 < per_turn {
        let thought = {
            let n = 20 + rng.below(80);
            vocab.prose(rng, n)
        };
        let tool = TOOLS[rng.below(TOOLS.len())];
        let path = format!("src/{}/{}.rs", vocab.word(rng), vocab.ident(rng));
        let call_id = format!("call_{:016x}", rng.next());
        out.push_str(&json(serde_json::json!({
            "role": "assistant",
            "content": thought,
            "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": tool,
                "arguments": serde_json::json!({
                    "path": path,
                    "line": 1 + rng.below(2_000),
                    "query": vocab.ident(rng),
                }).to_string(),
            }}],
        })));
        out.push('\n');
        let mut result = String::new();
        for _ in 0..3 + rng.below(10) {
            match rng.below(4) {
                0 => result.push_str(&format!(
                    "{}:{}: {} `{}` {}\n",
                    path,
                    1 + rng.below(2_000),
                    vocab.word(rng),
                    vocab.ident(rng),
                    {
                        let n = 4 + rng.below(10);
                        vocab.prose(rng, n)
                    }
                )),
                1 => result.push_str(&format!(
                    "    let {} = {}({}, {})?;\n",
                    vocab.ident(rng),
                    vocab.ident(rng),
                    rng.below(100_000),
                    vocab.ident(rng)
                )),
                2 => result.push_str(&format!(
                    "test {}::{} ... {} ({}.{:03}s) id={:08x}\n",
                    vocab.word(rng),
                    vocab.ident(rng),
                    if rng.below(5) == 0 { "FAILED" } else { "ok" },
                    rng.below(10),
                    rng.below(1_000),
                    rng.next() as u32
                )),
                _ => {
                    result.push_str(&{
                        let n = 5 + rng.below(20);
                        vocab.prose(rng, n)
                    });
                    result.push('\n');
                }
            }
        }
        out.push_str(&json(serde_json::json!({
            "role": "tool", "tool_call_id": call_id, "content": result,
        })));
        out.push('\n');
    }
    let answer = {
        let n = 10 + rng.below(40);
        vocab.prose(rng, n)
    };
    out.push_str(&json(
        serde_json::json!({"role": "assistant", "content": answer}),
    ));
    out.push('\n');
    out
}

/// Bytes of `ctx.db` by what holds them (`dbstat`, allocated pages): the
/// inline deltas (`deltas`), the commits with their indexes, the rest of
/// the tables and free pages.
fn db_parts(dir: &Path) -> (String, Vec<(String, i64)>) {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("ctx.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("ctx.db opens");
    let mut stmt = conn
        .prepare("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        .expect("dbstat is compiled in");
    let rows: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("dbstat")
        .collect::<Result<_, _>>()
        .expect("dbstat rows");
    let (mut deltas, mut commits, mut timeline, mut other) = (0, 0, 0, 0);
    for (name, bytes) in rows.iter().cloned() {
        match name.as_str() {
            "deltas" => deltas += bytes,
            n if n.starts_with("commits") => commits += bytes,
            "timeline" => timeline += bytes,
            _ => other += bytes,
        }
    }
    let page: i64 = conn
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .expect("page_size");
    let free: i64 = conn
        .pragma_query_value(None, "freelist_count", |r| r.get(0))
        .expect("freelist_count");
    let (data, packed): (i64, i64) = conn
        .query_row(
            "SELECT COALESCE(SUM(length(bytes)), 0), COALESCE(SUM(codec <> 0), 0) FROM deltas",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("deltas");
    let mb = |b: i64| b as f64 / 1e6;
    let summary = format!(
        "deltas {:.2} MB ({:.2} MB stored, {packed} packed); commits + indexes {:.2} MB; \
         timeline {:.2} MB; other tables {:.2} MB; free {:.2} MB",
        mb(deltas),
        mb(data),
        mb(commits),
        mb(timeline),
        mb(other),
        mb(free * page)
    );
    (summary, rows)
}

/// The dictionary size the zstd comparison trains.
const ZSTD_DICT_BYTES: usize = 16 * 1024;
/// The turns it trains on (at most half of the run's).
const ZSTD_TRAIN_TURNS: usize = 100;

/// Sizes of a corpus's turns under zstd, each turn on its own unless
/// said, and the mean time to pack and unpack one turn.
struct ZstdSizes {
    fast: u64,
    level3: u64,
    level9: u64,
    whole: u64,
    /// The turns after the training ones, with the dictionary...
    dict: u64,
    /// ... and their raw size.
    dict_raw: u64,
    lz4_us: (f64, f64),
    level3_us: (f64, f64),
    dict_us: (f64, f64),
}

fn zstd_sizes(deltas: &[String]) -> ZstdSizes {
    let each = |level: i32| -> u64 {
        deltas
            .iter()
            .map(|d| {
                zstd::bulk::compress(d.as_bytes(), level)
                    .expect("zstd")
                    .len() as u64
            })
            .sum()
    };
    let train = ZSTD_TRAIN_TURNS.min(deltas.len() / 2);
    let samples: Vec<&[u8]> = deltas[..train].iter().map(|d| d.as_bytes()).collect();
    let dict = zstd::dict::from_samples(&samples, ZSTD_DICT_BYTES).expect("a dictionary");
    let rest = &deltas[train..];
    let mut with_dict = zstd::bulk::Compressor::with_dictionary(3, &dict).expect("compressor");
    let mut dict_out = zstd::bulk::Decompressor::with_dictionary(&dict).expect("decompressor");
    let timed = |pack: &mut dyn FnMut(&[u8]) -> Vec<u8>,
                 unpack: &mut dyn FnMut(&[u8], usize) -> Vec<u8>| {
        let (mut p, mut u) = (Duration::ZERO, Duration::ZERO);
        let mut size = 0u64;
        for d in rest {
            let start = Instant::now();
            let packed = pack(d.as_bytes());
            p += start.elapsed();
            let start = Instant::now();
            let back = unpack(&packed, d.len());
            u += start.elapsed();
            assert_eq!(back, d.as_bytes());
            size += packed.len() as u64;
        }
        let n = rest.len().max(1) as f64;
        (size, (p.as_secs_f64() * 1e6 / n, u.as_secs_f64() * 1e6 / n))
    };
    let (_, lz4_us) = timed(&mut |b| lz4_flex::block::compress(b), &mut |b, n| {
        lz4_flex::block::decompress(b, n).expect("lz4")
    });
    let (_, level3_us) = timed(
        &mut |b| zstd::bulk::compress(b, 3).expect("zstd"),
        &mut |b, n| zstd::bulk::decompress(b, n).expect("zstd"),
    );
    let (dict_size, dict_us) = timed(
        &mut |b| with_dict.compress(b).expect("zstd"),
        &mut |b, n| dict_out.decompress(b, n).expect("zstd"),
    );
    ZstdSizes {
        fast: each(-1),
        level3: each(3),
        level9: each(9),
        whole: zstd::bulk::compress(deltas.concat().as_bytes(), 3)
            .expect("zstd")
            .len() as u64,
        dict: dict_size,
        dict_raw: rest.iter().map(|d| d.len() as u64).sum(),
        lz4_us,
        level3_us,
        dict_us,
    }
}

/// A transcript-sized run (500 turns of ~5.5 KB, 2.75 MB; quick: 50) of
/// durable checkpoints into a fresh data directory, per corpus, with the
/// deltas inline and (as before) in the CAS: the space the directory takes
/// while the server runs (live: the WAL as the checkpoints left it) and at
/// rest (after a clean stop truncates the WAL), against the raw bytes and
/// against LZ4 of the same bytes (each turn on its own, as the store packs
/// them, and the whole transcript as one block).
async fn bytes_at_rest(plan: &Plan) {
    let turns = if plan.quick { 50 } else { 500 };
    let per_turn = TRANSCRIPT_BYTES / 500;
    let tenant = tenant();
    println!(
        "## 1b. Bytes at rest ({turns} turns of ~{per_turn} bytes, one durable checkpoint a turn)\n"
    );
    println!(
        "| corpus | deltas | raw bytes | LZ4 per turn / raw | LZ4 whole / raw | live: data dir / raw | at rest: data dir / raw | at rest, by part (allocated) | ctx.db by table (dbstat) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|---|");
    let mut detail = Vec::new();
    let mut zstd_rows = Vec::new();
    for corpus in [Corpus::Transcript, Corpus::Lognormal, Corpus::Random] {
        let deltas = corpus.turns(turns, per_turn);
        let raw: u64 = deltas.iter().map(|d| d.len() as u64).sum();
        let lz4_turns: u64 = deltas
            .iter()
            .map(|d| lz4_flex::block::compress(d.as_bytes()).len() as u64)
            .sum();
        let lz4_whole = lz4_flex::block::compress(deltas.concat().as_bytes()).len() as u64;
        let zstd = zstd_sizes(&deltas);
        zstd_rows.push((corpus.name(), raw, lz4_turns, lz4_whole, zstd));
        for inline in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            let svc = if inline {
                local_service(dir.path(), Durability::Full)
            } else {
                local_service_cas_only(dir.path(), Durability::Full)
            };
            let mut parent: Option<CommitId> = None;
            for (i, d) in deltas.iter().enumerate() {
                let req = checkpoint_request(
                    parent,
                    d.clone(),
                    micros_to_time(EPOCH_MICROS + i as i64 * 1_000_000),
                );
                parent = Some(
                    svc.checkpoint(&tenant, req)
                        .await
                        .expect("checkpoint")
                        .commit
                        .id,
                );
            }
            let live = disk_usage(dir.path()).0;
            drop(svc);
            ctx_core::store::local::checkpoint_wal(dir.path()).expect("WAL truncated");
            let parts = breakdown(dir.path());
            let rest = parts.last().expect("the total").1.0;
            let (tables, by_name) = db_parts(dir.path());
            if inline && matches!(corpus, Corpus::Transcript) {
                detail = by_name;
            }
            println!(
                "| {} | {} | {raw} | {:.3}x | {:.3}x | {:.2} MB ({:.3}x) | {:.2} MB ({:.3}x) | {} | {} |",
                corpus.name(),
                if inline {
                    "inline (default)"
                } else {
                    "fs CAS (`CTX_INLINE_DELTA_BYTES=0`)"
                },
                lz4_turns as f64 / raw as f64,
                lz4_whole as f64 / raw as f64,
                live as f64 / 1e6,
                live as f64 / raw as f64,
                rest as f64 / 1e6,
                rest as f64 / raw as f64,
                describe(&parts, raw),
                tables
            );
        }
    }
    println!();
    println!(
        "The same raw bytes compressed each turn on its own (as the store packs inline deltas), / raw; the dictionary is trained (`zstd::dict`, {} bytes) on the first {} turns and measured on the others:\n",
        ZSTD_DICT_BYTES,
        ZSTD_TRAIN_TURNS.min(turns / 2)
    );
    println!(
        "| corpus | LZ4 per turn | LZ4 whole | zstd -1 per turn | zstd 3 per turn | zstd 9 per turn | zstd 3 whole | zstd 3 + dictionary per turn | µs per turn: LZ4 pack / unpack | zstd 3 pack / unpack | zstd 3 + dictionary pack / unpack |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, raw, lz4_turns, lz4_whole, z) in zstd_rows {
        let r = |n: u64| n as f64 / raw as f64;
        println!(
            "| {name} | {:.3}x | {:.3}x | {:.3}x | {:.3}x | {:.3}x | {:.3}x | {:.3}x | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} |",
            r(lz4_turns),
            r(lz4_whole),
            r(z.fast),
            r(z.level3),
            r(z.level9),
            r(z.whole),
            z.dict as f64 / z.dict_raw as f64,
            z.lz4_us.0,
            z.lz4_us.1,
            z.level3_us.0,
            z.level3_us.1,
            z.dict_us.0,
            z.dict_us.1,
        );
    }
    println!();
    println!(
        "`ctx.db` of the transcript-like run, deltas inline, by table and index (`dbstat`, bytes per commit):\n"
    );
    println!("| table or index | bytes | per commit |");
    println!("|---|---:|---:|");
    for (name, bytes) in detail {
        println!("| {name} | {bytes} | {} |", bytes / turns as i64);
    }
    println!();
}
