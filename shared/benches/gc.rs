//! Garbage-collection benchmark: the time to collect a tenant of N
//! artifacts (half named by commits, half orphans), over the embedded
//! stores (filesystem CAS + SQLite, in a temporary directory) and over
//! memory: a dry run, the run that removes the orphans (and compacts the
//! database), and a run over what is left. The service's clock stands two
//! days ahead, so every artifact is past the grace period.
//!
//! ```text
//! cargo bench -p ctx-core --features local --bench gc --profile dev   # N = 10,000
//! cargo bench -p ctx-core --features local --bench gc --profile dev -- --quick
//! ```

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ctx_core::format::FormatId;
use ctx_core::service::{GcReport, NewCommit};
use ctx_core::store::local::{Durability, LocalBlobStore, SqliteMetaStore};
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::store::{BlobStore, Stores};
use ctx_core::{Clock, ManualClock, Service, SystemClock, TenantId};

/// Commits per chain (a session).
const CHAIN: usize = 100;

/// Fills `tenant` with `n` artifacts: `n / 2` deltas of commits in chains
/// of [`CHAIN`], and `n / 2` orphans.
async fn fill(svc: &Service, blobs: &dyn BlobStore, tenant: &TenantId, n: usize) {
    let mut parent = None;
    for i in 0..n / 2 {
        if i % CHAIN == 0 {
            parent = None;
        }
        let new = NewCommit {
            parent,
            ..NewCommit::new(
                "agent".parse().expect("valid"),
                "bench",
                FormatId::raw(),
                Bytes::from(format!("turn {i}: {}\n", "x".repeat(200))),
            )
        };
        parent = Some(
            svc.checkpoint(tenant, new)
                .await
                .expect("checkpoint")
                .commit
                .id,
        );
    }
    for i in 0..n / 2 {
        blobs
            .put(
                tenant,
                Bytes::from(format!("orphan {i}: {}\n", "y".repeat(200))),
            )
            .await
            .expect("put");
    }
}

fn row(stores: &str, n: usize, what: &str, secs: f64, r: &GcReport) {
    println!(
        "| {stores} | {what} | {n} | {} | {} | {:.2} | {:.2} |",
        r.scanned,
        r.removed.len(),
        secs,
        secs * 10_000.0 / r.scanned.max(1) as f64
    );
}

async fn run(stores_name: &str, stores: Stores, n: usize) {
    let ahead = SystemClock.now() + chrono::Duration::hours(48);
    let blobs = stores.blobs.clone();
    // Checkpoints at the real time; collection two days later.
    let writer = Service::new(stores.clone(), Arc::new(SystemClock));
    let tenant: TenantId = "bench".parse().expect("valid");
    fill(&writer, blobs.as_ref(), &tenant, n).await;
    let svc = Service::new(stores, Arc::new(ManualClock::new(ahead)));
    for (what, dry) in [
        ("dry run", true),
        ("collect (removes the orphans)", false),
        ("collect again", false),
    ] {
        let start = Instant::now();
        let r = svc.gc_all(&tenant, dry).await.expect("gc");
        row(stores_name, n, what, start.elapsed().as_secs_f64(), &r);
    }
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || ctx_core::config::harness_flag("CTX_BENCH_QUICK");
    let n = if quick { 400 } else { 10_000 };
    println!("| stores | run | artifacts | scanned | removed | seconds | s per 10,000 scanned |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let local = Stores {
        blobs: Arc::new(LocalBlobStore::open(dir.path()).expect("open")),
        // The fill is bulk loading; collection's own writes are deletes.
        meta: Arc::new(SqliteMetaStore::open_with(dir.path(), Durability::Off).expect("open")),
    };
    run("local (SQLite + CAS)", local, n).await;
    let memory = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    run("memory", memory, n).await;
}
