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
