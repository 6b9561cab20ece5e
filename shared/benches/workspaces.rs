//! read_context benchmark (issue 13): a workspace with a 1 MB `notes.md`
//! and a 10,000-line `log.jsonl`, over the embedded stores (filesystem CAS
//! and SQLite in a temporary directory), each measurement printed next to
//! an alternative measured in the same run.
//!
//! The log is appended in batches (100, 10 and 1 lines per append, so 100,
//! 1,000 and 10,000 delta commits). read_context's log tail walks back from
//! the tip over append deltas, a page of commits at a time, until it has
//! its 10 entries, so it reads one page of deltas however long the log is;
//! the artifact bytes it reads are counted by a wrapper around the blob
//! store and printed beside the log's size. Alternatives: reading the whole
//! log (what a tail that re-read the file would cost), and the same log
//! written whole in one PUT (one snapshot artifact, which the tail has to
//! read whole: appends are what keep the tail small).
//!
//! ```text
//! cargo bench -p ctx-core --bench workspaces                # release, the real numbers
//! cargo bench -p ctx-core --bench workspaces --profile dev -- --quick   # CI smoke run
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ctx_core::store::Stores;
use ctx_core::store::local::{LocalBlobStore, SqliteMetaStore};
use ctx_core::workspace::context::assemble;
use ctx_core::workspace::dir::DirSource;
use ctx_core::workspace::{FilePath, WorkspaceId};
use ctx_core::{Service, SystemClock, TenantId};

/// read_context calls timed per workspace.
const REPS: usize = 30;

type Counting = ctx_core::store::counting::CountingBlobs<LocalBlobStore>;

fn log_line(i: usize) -> String {
    format!(
        r#"{{"timestamp":"2026-04-29T10:00:{:02}Z","op":"apply_primitive","details":{{"primitive":"exposure","value":{i},"note":"step {i} of the session"}}}}"#,
        i % 60
    )
}

fn notes(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 100);
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "Session note {i}: lifted the shadows a little, the water column still reads green at depth.\n"
        ));
        i += 1;
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

struct Row {
    what: String,
    latency: Duration,
    reads: usize,
    bytes: u64,
}

async fn time_context(svc: &Service, blobs: &Counting, tenant: &TenantId, ws: &WorkspaceId) -> Row {
    let mut times = Vec::with_capacity(REPS);
    let (r0, b0) = (blobs.reads() as usize, blobs.read_bytes());
    for _ in 0..REPS {
        let t = Instant::now();
        let ctx = svc.read_context(tenant, ws).await.expect("read_context");
        times.push(t.elapsed());
        assert_eq!(ctx.recent_log.len(), 10);
    }
    Row {
        what: String::new(),
        latency: median(times),
        reads: (blobs.reads() as usize - r0) / REPS,
        bytes: (blobs.read_bytes() - b0) / REPS as u64,
    }
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || ctx_core::config::harness_flag("CTX_BENCH_QUICK");
    let (lines, notes_bytes, batches): (usize, usize, Vec<usize>) = if quick {
        (1_000, 100_000, vec![100, 10])
    } else {
        (10_000, 1_000_000, vec![100, 10, 1])
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = Arc::new(Counting::new(
        LocalBlobStore::open(dir.path()).expect("blob store opens"),
    ));
    let meta = SqliteMetaStore::open(dir.path()).expect("sqlite opens");
    let svc = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: Arc::new(meta),
        },
        Arc::new(SystemClock),
    );
    let tenant: TenantId = "bench".parse().expect("valid");
    let p = |s: &str| s.parse::<FilePath>().expect("valid path");
    let notes = notes(notes_bytes);
    let all_lines: Vec<String> = (0..lines).map(log_line).collect();
    let log_bytes: usize = all_lines.iter().map(|l| l.len() + 1).sum();
    let mut rows = Vec::new();
    let tastes = WorkspaceId::tastes();
    svc.put_file(
        &tenant,
        &tastes,
        &p("_default.md"),
        Bytes::from_static(b"Prefer natural colour.\n"),
        None,
    )
    .await
    .expect("put");
    svc.put_file(
        &tenant,
        &tastes,
        &p("underwater.md"),
        Bytes::from_static(b"Recover reds.\n"),
        None,
    )
    .await
    .expect("put");
    for (i, batch) in batches.iter().enumerate() {
        let ws: WorkspaceId = format!("img-{i}").parse().expect("valid");
        svc.put_file(
            &tenant,
            &ws,
            &p("brief.md"),
            Bytes::from_static(b"Tastes: underwater\nThe manta.\n"),
            None,
        )
        .await
        .expect("put");
        svc.put_file(
            &tenant,
            &ws,
            &p("notes.md"),
            Bytes::from(notes.clone()),
            None,
        )
        .await
        .expect("put");
        let load = Instant::now();
        for chunk in all_lines.chunks(*batch) {
            svc.append_file(&tenant, &ws, &p("log.jsonl"), chunk.join("\n").as_bytes())
                .await
                .expect("append");
        }
        eprintln!(
            "loaded {lines} lines in appends of {batch} in {:.1} s",
            load.elapsed().as_secs_f64()
        );
        let mut row = time_context(&svc, &blobs, &tenant, &ws).await;
        row.what = format!(
            "read_context, log appended {batch} line(s) at a time ({} commits)",
            lines / batch
        );
        rows.push(row);
        {
            // The alternative a tail must beat: the whole log, read.
            let mut times = Vec::new();
            let (r0, b0) = (blobs.reads() as usize, blobs.read_bytes());
            for _ in 0..REPS {
                let t = Instant::now();
                let f = svc
                    .read_file(&tenant, &ws, &p("log.jsonl"))
                    .await
                    .expect("read");
                times.push(t.elapsed());
                assert_eq!(f.bytes.len(), log_bytes);
            }
            rows.push(Row {
                what: format!(
                    "  alternative: the whole log read (`read_file`, {} commits)",
                    lines / batch
                ),
                latency: median(times),
                reads: (blobs.reads() as usize - r0) / REPS,
                bytes: (blobs.read_bytes() - b0) / REPS as u64,
            });
        }
    }
    // The same log written whole: one snapshot the tail must read.
    let ws: WorkspaceId = "img-whole".parse().expect("valid");
    svc.put_file(
        &tenant,
        &ws,
        &p("notes.md"),
        Bytes::from(notes.clone()),
        None,
    )
    .await
    .expect("put");
    let mut whole = all_lines.join("\n");
    whole.push('\n');
    svc.put_file(
        &tenant,
        &ws,
        &p("log.jsonl"),
        Bytes::from(whole.clone()),
        None,
    )
    .await
    .expect("put");
    let mut row = time_context(&svc, &blobs, &tenant, &ws).await;
    row.what = "  alternative: the log written whole in one PUT (1 snapshot)".into();
    rows.push(row);
    // The local-directory assembly of the same files (`ctx read-context --dir`).
    let local = tempfile::tempdir().expect("tempdir");
    std::fs::write(local.path().join("notes.md"), &notes).expect("write");
    std::fs::write(local.path().join("log.jsonl"), &whole).expect("write");
    let src = DirSource::new(local.path(), None);
    let mut times = Vec::new();
    for _ in 0..REPS {
        let t = Instant::now();
        let ctx = assemble(&src).await.expect("assemble");
        times.push(t.elapsed());
        assert_eq!(ctx.recent_log.len(), 10);
    }
    rows.push(Row {
        what: "  alternative: `ctx read-context --dir` on the same files (reads the whole log)"
            .into(),
        latency: median(times),
        reads: 0,
        bytes: (log_bytes + notes.len()) as u64,
    });

    println!(
        "read_context: notes.md {} bytes, log.jsonl {lines} lines / {log_bytes} bytes; median of {REPS} calls{}",
        notes.len(),
        if quick {
            " (quick run: small sizes)"
        } else {
            ""
        }
    );
    println!();
    println!("| what | median | artifact reads per call | bytes read per call |");
    println!("|---|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} |",
            r.what,
            ms(r.latency),
            r.reads,
            r.bytes
        );
    }
}
