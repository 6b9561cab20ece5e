//! Eviction against a real `ctx serve` (SQLite and the filesystem): `ctx
//! ref evict` drops the old deltas' files, the default materialize and
//! `ctx log` (every summary) still work, and materializing across them
//! answers 410 over HTTP and exit code 7 in the CLI, naming the commit.

use ctx_tests::Server;
use serde_json::{Value, json};

fn body(kind: &str, parent: Option<&str>, delta: &str, at: u32) -> Value {
    let mut b = json!({
        "commit_type": kind, "format": "raw", "template": "t",
        "principal": "agent", "checkpoint": "turn_boundary",
        "session_id": "s-evict",
        "summary": format!("summary {at}"),
        "delta": delta,
        "created_at": format!("2026-11-22T00:00:{at:02}Z"),
        "ref": {"name": "sessions/s-evict"},
    });
    if let Some(p) = parent {
        b["parent"] = json!(p);
        b["ref"]["expected"] = json!(p);
    }
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_deltas_answer_gone_while_log_and_the_default_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let http = server.client();
    let mut ids: Vec<String> = Vec::new();
    for (i, (kind, delta)) in [
        ("delta", "EVICTME-0 "),
        ("delta", "EVICTME-1 "),
        ("compaction", "SUMMARY "),
        ("delta", "after "),
    ]
    .into_iter()
    .enumerate()
    {
        let c = http
            .ok(
                "POST",
                "/v1/commits",
                Some(&body(kind, ids.last().map(String::as_str), delta, i as u32)),
            )
            .await;
        ids.push(c["id"].as_str().unwrap().to_owned());
    }
    let (d0, compaction, tip) = (&ids[0], &ids[2], &ids[3]);
    assert_eq!(
        http.materialize(tip, "root").await,
        b"EVICTME-0 EVICTME-1 after "
    );

    let out = server.cli_output(&[
        "ref",
        "evict",
        "sessions/s-evict",
        "--before",
        compaction,
        "--force",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&e["commits"], &e["marked"]), (&json!(2), &json!(2)), "{e}");

    // The deltas' bytes are gone from the data directory (the cached root
    // materialization too); their metadata is not.
    let left = ctx_tests::files_holding(dir.path(), b"EVICTME-");
    assert!(left.is_empty(), "{left:?} still hold an evicted delta");

    let uri = format!("/v1/commits/{tip}/materialize");
    let (st, err) = http
        .call("POST", &uri, Some(&json!({"stop": "root"})))
        .await
        .unwrap();
    assert_eq!(st, 410, "{err}");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(d0.as_str()) && msg.contains(compaction.as_str()),
        "{msg}"
    );
    assert_eq!(http.materialize(tip, "compaction").await, b"SUMMARY after ");

    let (code, out) = server.cli(&["materialize", "sessions/s-evict", "--stop", "root"]);
    assert_eq!(
        (code, out.is_empty()),
        (7, true),
        "gone has its own exit code"
    );
    let (code, out) = server.cli(&["log", "sessions/s-evict"]);
    assert_eq!(code, 0);
    let log = String::from_utf8(out).unwrap();
    assert_eq!(log.lines().count(), 4, "{log}");
    for i in 0..4 {
        assert!(log.contains(&format!("summary {i}")), "{log}");
    }
}

/// Snapshot commits as optimization points, on each backend: `ctx
/// snapshot REV --ref` stores the context whole on top of REV and moves the
/// ref; a materialize of the snapshot is one artifact and equals REV's; a
/// walk to the root still reads the original deltas; a chain continued on
/// the snapshot materializes from it. `ctx snapshot --all` takes only the
/// chains past the depth or the cost, and skips a ref that moved.
async fn snapshots_are_where_materialize_starts(server: &Server) {
    let c = server.client();
    // `ctx snapshot --all` over the test's chains, its --json answer.
    let batch = |extra: &[&str]| -> Value {
        let args = [
            &["snapshot", "--all", "--prefix", "chains/snap-", "--json"][..],
            extra,
        ]
        .concat();
        let out = server.cli_output(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let session = |n: &str| format!("chains/snap-{n}");
    // A long chain (6 commits) and a short one (2).
    let mut tip: Option<String> = None;
    for i in 0..6 {
        let mut b = body("delta", tip.as_deref(), &format!("line {i}\n"), i);
        b["ref"] = json!({"name": session("long"), "expected": tip});
        tip = Some(
            c.ok("POST", "/v1/commits", Some(&b)).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let long_tip = tip.unwrap();
    let mut short = body("delta", None, "short\n", 1);
    short["ref"] = json!({"name": session("short"), "expected": null});
    let short_tip = c.ok("POST", "/v1/commits", Some(&short)).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let whole = c.materialize(&long_tip, "compaction").await;
    assert_eq!(whole, b"line 0\nline 1\nline 2\nline 3\nline 4\nline 5\n");

    // The batch form, dry: only the long chain is past a depth of 3.
    let dry = batch(&["--min-depth", "3", "--dry-run"]);
    assert_eq!(dry.as_array().unwrap().len(), 1, "{dry}");
    assert_eq!(dry[0]["ref"], session("long"));
    assert_eq!(dry[0]["depth"], 6);
    assert_eq!(dry[0]["bytes"], 42);
    assert!(dry[0].get("snapshot").is_none());
    // By cost instead: 40 bytes take the long chain below a depth of 1000.
    let by_cost = batch(&["--min-depth", "1000", "--min-bytes", "40", "--dry-run"]);
    assert_eq!(by_cost.as_array().unwrap().len(), 1, "{by_cost}");

    // For real.
    let made = batch(&["--min-depth", "3"]);
    let snap = made[0]["snapshot"].as_str().expect("made").to_owned();
    let r = c
        .ok("GET", &format!("/v1/refs/{}", session("long")), None)
        .await;
    assert_eq!(r["target"], snap.as_str(), "the ref moved onto it");
    let shown = c.ok("GET", &format!("/v1/commits/{snap}"), None).await;
    assert_eq!(shown["commit_type"], "snapshot");
    assert_eq!(shown["parent"], long_tip.as_str());
    assert_eq!(shown["session_id"], "s-evict");
    assert_eq!(
        c.materialize(&snap, "compaction").await,
        whole,
        "one artifact, the same context"
    );
    assert_eq!(
        c.materialize(&snap, "root").await,
        whole,
        "the deltas, not the snapshot again"
    );
    let short_ref = c
        .ok("GET", &format!("/v1/refs/{}", session("short")), None)
        .await;
    assert_eq!(
        short_ref["target"],
        short_tip.as_str(),
        "the short chain is left alone"
    );

    // A chain continued on the snapshot starts there (were the snapshot
    // not a stop, its context would come twice).
    let mut next = body("delta", Some(&snap), "line 6\n", 7);
    next["ref"] = json!({"name": session("long"), "expected": snap});
    let t = c.ok("POST", "/v1/commits", Some(&next)).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        c.materialize(&t, "compaction").await,
        b"line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"
    );
    // Nothing is past the depth now: the next run makes nothing.
    let none = batch(&["--min-depth", "3"]);
    assert_eq!(none, json!([]));

    // One commit, by hand, with a ref that moved: a conflict (exit 4).
    let out = server.cli_output(&["snapshot", &long_tip, "--ref", &session("long")]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.cli_output(&["snapshot", &t]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain = String::from_utf8(out.stdout).unwrap();
    assert!(plain.trim().starts_with("ctx-"), "{plain}");
    // Bad input names the flag.
    let out = server.cli_output(&["snapshot", "--all", "--min-depth", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("min-depth"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    snapshots_are_where_materialize_starts(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_on_the_aws_backends() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = Server::start_aws(dir.path()) else {
        return;
    };
    snapshots_are_where_materialize_starts(&server).await;
}

/// Runs `ctx checkpoint` with `text` on stdin.
fn checkpoint(server: &Server, principal: &str, name: &str, text: &str) {
    checkpoint_with(server, &["--principal", principal, "--ref", name], text);
}

/// Runs `ctx checkpoint ARGS` with `text` on stdin.
fn checkpoint_with(server: &Server, args: &[&str], text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new(ctx_tests::ctx_bin())
        .arg("checkpoint")
        .args(args)
        .env("CTX_SERVER", &server.url)
        .env("CTX_TOKEN", &server.token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ctx runs");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("stdin written");
    assert!(
        child.wait().expect("ctx ends").success(),
        "checkpoint {text}"
    );
}

/// Issue 46, item 3: after an eviction, `ctx summarize` (and `--limit N`)
/// makes progress and exits 0: the evicted commits, whose deltas are gone,
/// are not in the queue it works through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarize_after_an_eviction_exits_0_and_makes_progress() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let http = server.client();
    // Three turns without a summary, compacted, evicted behind the
    // compaction, then four more turns.
    let name = "sessions/s-evict";
    for i in 1..4 {
        checkpoint(&server, "agent", name, &format!("user: turn {i}\n"));
    }
    let tip = http.ok("GET", &format!("/v1/refs/{name}"), None).await;
    let tip = tip["target"].as_str().unwrap().to_owned();
    let log = http
        .ok("GET", &format!("/v1/commits/{tip}/history"), None)
        .await;
    let mut ids: Vec<String> = log["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    ids.reverse();
    assert_eq!(ids.len(), 3, "{log}");
    let (code, _) = server.cli(&["compact", name, "--ref", name]);
    assert_eq!(code, 0, "ctx compact");
    let out = server.cli_output(&["ref", "evict", name, "--before", name]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The summaries an eviction writes are not what this tests: clear them,
    // so the evicted commits lack a summary as they did before issue 46.
    for id in &ids[..3] {
        http.ok(
            "PATCH",
            &format!("/v1/commits/{id}"),
            Some(&json!({"summary": null})),
        )
        .await;
    }
    for i in 4..8 {
        checkpoint(&server, "agent", name, &format!("user: turn {i}\n"));
    }
    let missing = |v: &Value| -> Vec<String> {
        v["commits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = http
        .ok("GET", "/v1/commits?missing_summary=true&limit=100", None)
        .await;
    let listed = missing(&listed);
    let n = listed.len();
    assert!(n >= 4, "at least the four new turns: {listed:?}");
    assert!(
        ids[..3].iter().all(|id| !listed.contains(id)),
        "evicted commits are not listed: {listed:?}"
    );

    let out = server.cli_output(&["summarize", "--limit", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "--limit 2: {out:?}");
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["summarized"], 2, "{done}");
    let left = http
        .ok("GET", "/v1/commits?missing_summary=true&limit=100", None)
        .await;
    assert_eq!(
        missing(&left).len(),
        n - 2,
        "--limit 2 made progress: {left}"
    );

    let out = server.cli_output(&["summarize", "--json"]);
    assert_eq!(out.status.code(), Some(0), "summarize: {out:?}");
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&done["summarized"], &done["failed"]),
        (&json!(n - 2), &json!(0)),
        "{done}"
    );
    let left = http
        .ok("GET", "/v1/commits?missing_summary=true&limit=100", None)
        .await;
    assert_eq!(
        missing(&left),
        Vec::<String>::new(),
        "nothing is left: {left}"
    );
}

/// Issue 46, item 2 (the repro): three raw turns, `ctx compact`, `ctx ref
/// evict`: the compaction stands for every turn, so the eviction needs no
/// `--force` and the turns are still in the context. Behind a compaction
/// written by hand the eviction exits 4, names `--force` and what would be
/// lost, and evicts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_then_evict_keeps_every_turn_and_a_hand_compaction_asks_for_force() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let name = "sessions/s-7";
    for i in 1..4 {
        checkpoint(&server, "f", name, &format!("user: turn {i}\n"));
    }
    let (code, _) = server.cli(&["compact", name, "--ref", name]);
    assert_eq!(code, 0, "ctx compact");
    let out = server.cli_output(&["ref", "evict", name, "--before", name, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&e["commits"], &e["summarized"]),
        (&json!(3), &json!(3)),
        "{e}"
    );
    let (code, text) = server.cli(&["materialize", name]);
    assert_eq!(code, 0);
    let text = String::from_utf8(text).unwrap();
    for i in 1..4 {
        assert!(
            text.contains(&format!("user: turn {i}")),
            "turn {i}: {text:?}"
        );
    }
    let (code, log) = server.cli(&["log", name]);
    assert_eq!(code, 0);
    let log = String::from_utf8(log).unwrap();
    assert!(!log.contains("(no summary)"), "{log}");

    // A compaction written by hand, then an eviction behind it.
    let name = "sessions/s-8";
    checkpoint(&server, "f", name, "user: keep me\n");
    checkpoint_with(
        &server,
        &["--principal", "f", "--ref", name, "--type", "compaction"],
        "summary: by hand\n",
    );
    let out = server.cli_output(&["ref", "evict", name, "--before", name]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("--force") && stderr.contains("user: keep me"),
        "{stderr}"
    );
    let (code, text) = server.cli(&["materialize", name, "--stop", "root"]);
    assert_eq!(
        (code, text),
        (0, b"user: keep me\n".to_vec()),
        "nothing evicted"
    );
    let out = server.cli_output(&["ref", "evict", name, "--before", name, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
