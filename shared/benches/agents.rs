//! Agents' live context benchmark (issue 12), over the embedded stores
//! (filesystem CAS and SQLite in a temporary directory), each measurement
//! printed next to an alternative measured in the same run:
//!
//! - the rolling window of an agent with 100,000 commits on its timeline
//!   whose window holds 100: the timeline range read alone and the whole
//!   window call (range read + joining the 100 deltas into one artifact),
//!   against reading the agent's whole history and filtering it (what a
//!   window without the range read costs);
//! - working-context restore from a valid cache against a rebuild (the
//!   cache pointer is made stale before each rebuild), with the chain's
//!   nearest compaction 200 commits back.
//!
//! The commits are written straight to the meta store (a bulk load, SQLite
//! with `synchronous=OFF`), all pointing at one stored delta.
//!
//! ```text
//! cargo bench -p ctx-core --features conformance --bench agents                # release, the real numbers
//! cargo bench -p ctx-core --features conformance --bench agents --profile dev -- --quick   # CI smoke run
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ctx_core::agent::{
    AgentPatch, AgentRecord, RestoreOptions, RestoreSource, WorkingContextRef,
    WorkingContextSnapshot, WorkingMessage,
};
use ctx_core::commit::{CommitType, Trigger};
use ctx_core::store::conformance::commit;
use ctx_core::store::local::{Durability, LocalBlobStore, SqliteMetaStore};
use ctx_core::store::{Agents, BlobStore, Commits, MetaStore, Stores};
use ctx_core::{ArtifactRef, Clock, ManualClock, Principal, Service, TenantId};

/// Calls timed per measurement.
const REPS: usize = 30;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn time<F, Fut>(reps: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f().await;
        out.push(t.elapsed());
    }
    median(out)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let total: i64 = if quick { 2_000 } else { 100_000 };
    let in_window: i64 = 100;
    let reps = if quick { 3 } else { REPS };
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = Arc::new(SqliteMetaStore::open_with(dir.path(), Durability::Off).expect("sqlite"));
    let blobs = Arc::new(LocalBlobStore::open(dir.path()).expect("blobs"));
    let tenant: TenantId = "bench".parse().expect("tenant");
    let agent: Principal = "agent-bench".parse().expect("principal");
    let body = serde_json::json!([{ "role": "user", "content": "a turn of about this many words, give or take" }]).to_string();
    let stored = blobs
        .put(&tenant, Bytes::from(body.clone()))
        .await
        .expect("put");
    let start = ctx_core::store::conformance::t(0);
    // The chain, one commit a second; a compaction 200 commits from the tip.
    let load = Instant::now();
    let mut parent: Option<ctx_core::Commit> = None;
    for i in 0..total {
        let mut c = commit(
            &tenant,
            parent.as_ref(),
            ctx_core::store::conformance::t(i),
            "agent-bench",
            body.as_bytes(),
        );
        c.format = "openai-chat-v1".parse().expect("format");
        c.checkpoint = Trigger::TurnBoundary;
        c.thread_id = Some(format!("t{}", i % 3));
        c.summary = (i % 10 == 0).then(|| format!("turn {i}"));
        if i == total - 200 {
            c.commit_type = CommitType::Compaction;
            c.summary = Some("everything before, summarized".into());
        }
        assert_eq!(c.artifact_ref, stored.artifact);
        let put = meta
            .put_commit(&tenant, &c, None)
            .await
            .expect("put commit");
        parent = Some(put.commit().clone());
    }
    let load = load.elapsed();
    let clock = Arc::new(ManualClock::new(start));
    // Now is half a second after the last commit; the window holds 100.
    clock.set(ctx_core::store::conformance::t(total - 1) + chrono::Duration::milliseconds(500));
    let svc = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        clock.clone(),
    );
    svc.patch_agent(
        &tenant,
        &agent,
        &AgentPatch {
            window_seconds: Some(in_window),
            persist_working_context: None,
            ..AgentPatch::default()
        },
    )
    .await
    .expect("settings");
    let now = clock.now();
    let since = now - chrono::Duration::seconds(in_window);

    let w = svc
        .context_window(&tenant, &agent, None, None)
        .await
        .expect("window");
    assert_eq!(w.commits.len() as i64, in_window);
    let range = time(reps, || async {
        let got = meta
            .timeline_range(&tenant, &agent, Some(since), now, 10_000, true)
            .await
            .expect("range");
        assert_eq!(got.len() as i64, in_window);
    })
    .await;
    let window = time(reps, || async {
        svc.context_window(&tenant, &agent, None, None)
            .await
            .expect("window");
    })
    .await;
    let scan_reps = if quick { 1 } else { 5 };
    let scan = time(scan_reps, || async {
        let all = meta
            .timeline_range(&tenant, &agent, None, now, usize::MAX, false)
            .await
            .expect("scan");
        let n = all.iter().filter(|c| c.created_at > since).count();
        assert_eq!(n as i64, in_window);
    })
    .await;

    // Working context: a 200-message cache, and rebuilds.
    let snap = WorkingContextSnapshot {
        schema_version: 1,
        agent_id: agent.as_str().to_owned(),
        epoch_id: 1,
        last_compaction_ts: None,
        messages: (0..200)
            .map(|i| WorkingMessage {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                content: Some(format!(
                    "message {i} of the working context, a sentence long"
                )),
                reasoning_content: None,
                tool_payload: None,
                media_urls: None,
            })
            .collect(),
    };
    svc.put_working_context(&tenant, &agent, &snap)
        .await
        .expect("put cache");
    let cache = time(reps, || async {
        let r = svc
            .restore_working_context(&tenant, &agent, &RestoreOptions::default())
            .await
            .expect("restore");
        assert_eq!(r.source, RestoreSource::Cache);
    })
    .await;
    let stale = AgentRecord {
        working_context: Some(WorkingContextRef {
            artifact_ref: ArtifactRef::of(b"gone"),
            epoch_id: 1,
        }),
        ..Default::default()
    };
    let mut rebuilds = Vec::new();
    for _ in 0..reps {
        meta.update_agent(&tenant, &agent, &stale)
            .await
            .expect("stale pointer");
        let t = Instant::now();
        let r = svc
            .restore_working_context(&tenant, &agent, &RestoreOptions::default())
            .await
            .expect("restore");
        rebuilds.push(t.elapsed());
        assert_eq!(r.source, RestoreSource::Rebuilt);
    }
    let rebuild = median(rebuilds);

    println!(
        "agents benchmark: {total} commits on one agent's timeline (bulk load {:.1} s), window {in_window} s = {in_window} commits; median of {reps} runs (whole-history scan: {scan_reps})\n",
        load.as_secs_f64()
    );
    println!("| measurement | latency |");
    println!("|---|---|");
    println!(
        "| window: timeline range read (100 commits) | {} |",
        ms(range)
    );
    println!(
        "| window: GET /window's service call (range read + join of 100 deltas) | {} |",
        ms(window)
    );
    println!(
        "| alternative: read the whole history ({total} commits) and filter | {} |",
        ms(scan)
    );
    println!(
        "| working-context restore, cache hit (200 messages) | {} |",
        ms(cache)
    );
    println!(
        "| working-context restore, rebuild (walk 200 to the compaction, 500 summaries scanned, 10 tail turns) | {} |",
        ms(rebuild)
    );
}
