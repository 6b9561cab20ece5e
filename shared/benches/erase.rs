//! Erasure on the embedded store: the data directory's size before and
//! after erasing half the sessions of a 10,000-commit store (100 sessions
//! of 100 commits with ~1 KiB deltas, each session's tip materialized and
//! cached), and the time per erased session, the sessions erased
//! alternately one commit at a time (as before) and many at once (the
//! default). Prints a table.
//!
//! `cargo bench -p ctx-core --bench erase` (`-- --quick`: 20 sessions of
//! 50 commits).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ctx_core::clock::ManualClock;
use ctx_core::format::FormatId;
use ctx_core::id::{CommitId, SessionId, TenantId};
use ctx_core::service::{NewCommit, Service, Stop};
use ctx_core::store::Stores;
use ctx_core::store::local::{Durability, LocalBlobStore, SqliteMetaStore};

/// Bytes of every file under `dir`, and of those under `dir/cas`.
fn sizes(dir: &Path) -> (u64, u64) {
    let (mut all, mut cas) = (0, 0);
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            let m = std::fs::metadata(&p).expect("metadata");
            if m.is_dir() {
                stack.push(p);
            } else {
                all += m.len();
                if p.strip_prefix(dir).is_ok_and(|r| r.starts_with("cas")) {
                    cas += m.len();
                }
            }
        }
    }
    (all, cas)
}

fn delta(session: usize, i: usize) -> String {
    let mut s = format!("session {session} turn {i}: ");
    while s.len() < 1000 {
        s.push_str("the agent read the file, ran the tests and wrote a fix. ");
    }
    s.push('\n');
    s
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (sessions, per) = if quick { (20, 50) } else { (100, 100) };
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(ManualClock::new(ctx_core::clock::micros_to_time(
        1_790_000_000_000_000,
    )));
    let meta = SqliteMetaStore::open_with(dir.path(), Durability::Off).expect("sqlite");
    let service = Service::new(
        Stores {
            blobs: Arc::new(LocalBlobStore::open(dir.path()).expect("cas")),
            meta: Arc::new(meta),
        },
        clock.clone(),
    );
    let tenant: TenantId = "bench".parse().expect("tenant");
    for s in 0..sessions {
        let mut tip: Option<CommitId> = None;
        for i in 0..per {
            clock.advance_micros(1_000);
            let c = service
                .checkpoint(
                    &tenant,
                    NewCommit {
                        parent: tip,
                        session_id: Some(format!("s{s}").parse().expect("a session id")),
                        ..NewCommit::new(
                            "agent".parse().expect("principal"),
                            "bench",
                            FormatId::raw(),
                            delta(s, i),
                        )
                    },
                )
                .await
                .expect("checkpoint");
            tip = Some(c.commit.id);
        }
        service
            .materialize(&tenant, &tip.expect("tip"), Stop::Root, None)
            .await
            .expect("materialize");
    }
    service
        .stores()
        .meta
        .reclaim_space()
        .await
        .expect("checkpoint the log");
    let before = sizes(dir.path());
    // Every other session, alternately by an erase working on one commit
    // at a time (as before) and on many at once (the default).
    let one_at_a_time = service.clone().with_erase_concurrency(1);
    let mut took = [std::time::Duration::ZERO; 2];
    let mut counted = [0u64; 2];
    let mut erased = 0;
    for (k, s) in (0..sessions).step_by(2).enumerate() {
        let id: SessionId = format!("s{s}").parse().expect("session");
        let svc = if k % 2 == 0 { &one_at_a_time } else { &service };
        let started = Instant::now();
        let r = svc.erase_session(&tenant, &id, false).await.expect("erase");
        took[k % 2] += started.elapsed();
        counted[k % 2] += 1;
        erased += r.commits;
    }
    let after = sizes(dir.path());
    println!("| store | data dir | artifacts (cas/) | ctx.db + log |");
    println!("|---|---:|---:|---:|");
    println!(
        "| {} commits, {sessions} sessions | {} | {} | {} |",
        sessions * per,
        mib(before.0),
        mib(before.1),
        mib(before.0 - before.1)
    );
    println!(
        "| after erasing {} sessions ({erased} commits) | {} | {} | {} |",
        sessions / 2,
        mib(after.0),
        mib(after.1),
        mib(after.0 - after.1)
    );
    for (i, how) in ["one commit at a time (before)", "many commits at once"]
        .iter()
        .enumerate()
    {
        let ms = took[i].as_secs_f64() * 1000.0 / counted[i].max(1) as f64;
        println!(
            "\nerase, {how}: {ms:.1} ms per session of {per} commits ({:.2} ms per commit; {} sessions)",
            ms / per as f64,
            counted[i]
        );
    }
}
