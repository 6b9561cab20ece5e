//! Context-folding benchmark: the P1 scenario of docs/bench.md and the latency of
//! branch create / return, over the embedded stores (filesystem CAS +
//! SQLite, full durability, in a temporary directory) and over memory.
//!
//! P1: a main session holds some history; a subtask reads 10 files
//! (~3.5K tokens in all) and concludes with a short summary. Inline, all of
//! it lands in the main context; folded, the reads go into a branch and
//! only the summary is appended to the main chain. Token counts are the
//! server's own (the commits' `token_count`, chars/4 for raw deltas).
//!
//! ```text
//! cargo bench -p ctx-core --bench folding --profile dev    # what this machine allows
//! cargo bench -p ctx-core --bench folding                  # release
//! CTX_BENCH_QUICK=1 cargo bench -p ctx-core --bench folding --profile dev
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctx_core::auth::Caller;
use ctx_core::branch::memories::MemoryConfig;
use ctx_core::branch::scenarios::{
    Extraction, append, extraction, file, new_branch, task, unthrottled,
};
use ctx_core::branch::{BranchConfig, BranchStore, Branching, NoTimer, RuleScrubber};
use ctx_core::store::Stores;
use ctx_core::store::local::SqliteBranchStore;
use ctx_core::store::local::{LocalBlobStore, SqliteMetaStore};
use ctx_core::store::memory::MemoryBranchStore;
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::{OsRandom, Service, SystemClock};

const SUMMARY: &str = "parser.rs:42 indexes one past the end of `tokens` when the input ends in a comment; lexer.rs and ast.rs are fine; fix: bound the loop by len - 1.";

fn service(stores: Stores, branches: Arc<dyn BranchStore>) -> Service {
    service_with(stores, branches, MemoryConfig::default())
}

fn service_with(stores: Stores, branches: Arc<dyn BranchStore>, memory: MemoryConfig) -> Service {
    Service::new(stores, Arc::new(SystemClock)).with_branching(Branching {
        store: branches,
        timer: Arc::new(NoTimer),
        scrubber: Arc::new(RuleScrubber::new().expect("rules compile")),
        ids: Arc::new(OsRandom),
        config: BranchConfig {
            memory,
            ..unthrottled()
        },
    })
}

/// Returns (inline tokens added to main, folded tokens added to main, branch tokens).
async fn p1(svc: &Service, caller: &Caller, round: usize) -> (u64, u64, u64) {
    let inline_session = format!("sessions/inline-{round}");
    let folded_session = format!("folded-{round}");
    append(
        svc,
        caller,
        &inline_session,
        "user: find the crash in the parser\n",
    )
    .await;
    append(
        svc,
        caller,
        &format!("sessions/{folded_session}"),
        "user: find the crash in the parser\n",
    )
    .await;
    let mut inline = 0;
    for i in 0..10 {
        inline += append(svc, caller, &inline_session, &file(i)).await;
    }
    inline += append(svc, caller, &inline_session, SUMMARY).await;
    let b = svc
        .branch_create(
            caller,
            new_branch(
                &folded_session,
                "find the crash in the parser".into(),
                Some("read the parser's modules and report the bug"),
                false,
            ),
        )
        .await
        .expect("create");
    for i in 0..10 {
        append(svc, caller, &b.chain_ref, &file(i)).await;
    }
    let r = svc
        .branch_return(caller, &b.branch_id, SUMMARY)
        .await
        .expect("return");
    let folded = svc
        .show(&caller.tenant, &r.commit)
        .await
        .expect("show")
        .token_count;
    (inline, folded, r.tokens_used)
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

async fn latency(
    svc: &Service,
    caller: &Caller,
    n: usize,
    inject: bool,
) -> (f64, f64, f64, f64, usize) {
    let (mut create, mut ret) = (Vec::new(), Vec::new());
    let mut injected = 0;
    for i in 0..n {
        let t = Instant::now();
        let b = svc
            .branch_create(
                caller,
                new_branch(&format!("lat-{}", i % 10), task(i), Some("do it"), inject),
            )
            .await
            .expect("create");
        injected += b.memories.len();
        create.push(t.elapsed());
        let t = Instant::now();
        svc.branch_return(caller, &b.branch_id, SUMMARY)
            .await
            .expect("return");
        ret.push(t.elapsed());
    }
    (
        pct(&mut create, 0.5),
        pct(&mut create, 0.95),
        pct(&mut ret, 0.5),
        pct(&mut ret, 0.95),
        injected,
    )
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || ctx_core::config::harness_flag("CTX_BENCH_QUICK");
    let n = if quick { 20 } else { 200 };
    let caller = Caller {
        tenant: "bench".parse().expect("tenant"),
        principal: Some("tok-bench".into()),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = Arc::new(SqliteMetaStore::open(dir.path()).expect("sqlite"));
    let local = service(
        Stores {
            blobs: Arc::new(LocalBlobStore::open(dir.path()).expect("cas")),
            meta,
        },
        Arc::new(SqliteBranchStore::open(dir.path()).expect("branches")),
    );
    let memory = service(
        Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: Arc::new(MemoryMetaStore::new()),
        },
        Arc::new(MemoryBranchStore::new()),
    );
    println!("## P1: a branch reads 10 files and returns a short summary\n");
    println!("| | tokens added to the main context |");
    println!("|---|---:|");
    let (inline, folded, branch) = p1(&local, &caller, 0).await;
    println!("| inline (10 reads + summary in the main chain) | {inline} |");
    println!("| folded (summary only; the reads stay in the branch: {branch} tokens) | {folded} |");
    println!(
        "| compression | {:.1} % |\n",
        100.0 * (1.0 - folded as f64 / inline as f64)
    );
    // The same stores without memory extraction: the baseline of the
    // first row, and of SC-003's other services' writes.
    let dir_off = tempfile::tempdir().expect("tempdir");
    let local_off = service_with(
        Stores {
            blobs: Arc::new(LocalBlobStore::open(dir_off.path()).expect("cas")),
            meta: Arc::new(SqliteMetaStore::open(dir_off.path()).expect("sqlite")),
        },
        Arc::new(SqliteBranchStore::open(dir_off.path()).expect("branches")),
        MemoryConfig {
            extract: false,
            ..MemoryConfig::default()
        },
    );
    println!("## branch create / return latency ({n} each, sequential; SC-002: < 100 ms)\n");
    println!(
        "| stores | memories | create p50 ms | create p95 ms | return p50 ms | return p95 ms | injected |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let rows: [(&str, &str, &Service, bool); 5] = [
        (
            "local (SQLite + CAS, fsync)",
            "off (no extraction)",
            &local_off,
            false,
        ),
        (
            "local (SQLite + CAS, fsync)",
            "extracted at return",
            &local,
            false,
        ),
        (
            "local (SQLite + CAS, fsync)",
            "+ inject_memories at create",
            &local,
            true,
        ),
        ("memory", "extracted at return", &memory, false),
        ("memory", "+ inject_memories at create", &memory, true),
    ];
    for (name, what, svc, inject) in rows {
        let (c50, c95, r50, r95, injected) = latency(svc, &caller, n, inject).await;
        println!("| {name} | {what} | {c50:.2} | {c95:.2} | {r50:.2} | {r95:.2} | {injected} |");
    }
    println!("\n## SC-003: memories extracted from completed branches ({n} branches)\n");
    println!(
        "| stores | completed | memories | share | injectable (confidence >= 0.7) | later searches finding their task in the top 3 |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, svc) in [
        ("local (SQLite FTS5)", &local),
        ("memory (BM25 in process)", &memory),
    ] {
        let caller = Caller {
            tenant: format!("sc3-{}", name.len()).parse().expect("tenant"),
            principal: Some("tok-bench".into()),
        };
        let Extraction {
            extracted,
            injectable,
            hits,
            searches,
            ..
        } = extraction(svc, &caller, n).await;
        println!(
            "| {name} | {n} | {extracted} | {:.0} % | {injectable} | {hits} of {searches} |",
            100.0 * extracted as f64 / n as f64
        );
    }
}
