//! Crash consistency: a client streams checkpoints into one session while
//! `ctx serve` is killed with SIGKILL at random points, then restarted on
//! the same data directory. Every acknowledged checkpoint must survive and
//! materialize byte-exact, and the session's ref must never point at a
//! missing commit.
//!
//! `CTX_CRASH_KILLS` (default 24) and `CTX_CRASH_SEED` replay a run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctx_tests::{Http, Rng, Server};
use serde_json::{Value, json};

const REF: &str = "crash/session";

fn line(i: u64) -> String {
    format!("turn {i}: the agent learned fact number {i}\n")
}

fn expected(upto: u64) -> Vec<u8> {
    (0..=upto).flat_map(|i| line(i).into_bytes()).collect()
}

/// Where the session stands: the tip and the index of its last line.
async fn tip(http: &Http) -> Option<(String, u64)> {
    let (status, r) = http
        .call("GET", &format!("/v1/refs/{REF}"), None)
        .await
        .expect("server up");
    if status == 404 {
        return None;
    }
    assert_eq!(status, 200, "{r}");
    let target = r["target"].as_str().expect("target").to_owned();
    let c = http.ok("GET", &format!("/v1/commits/{target}"), None).await;
    let i = c["depth"].as_u64().expect("depth");
    Some((target, i))
}

/// Streams checkpoints until the server dies; records each acknowledged one.
async fn stream(
    http: Http,
    mut from: Option<(String, u64)>,
    acked: Arc<Mutex<Vec<(String, u64)>>>,
) {
    loop {
        let i = from.as_ref().map_or(0, |(_, i)| i + 1);
        let mut body = json!({
            "commit_type": "delta", "format": "raw", "template": "crash",
            "principal": "crasher", "checkpoint": "turn_boundary",
            "delta": line(i),
            "created_at": format!("2026-11-22T00:00:00.{:06}Z", i),
            "ref": {"name": REF, "expected": from.as_ref().map(|(id, _)| id.clone())},
        });
        if let Some((parent, _)) = &from {
            body["parent"] = json!(parent);
        }
        match http.call("POST", "/v1/commits", Some(&body)).await {
            Ok((201 | 200, c)) => {
                let id = c["id"].as_str().expect("id").to_owned();
                acked.lock().unwrap().push((id.clone(), i));
                from = Some((id, i));
            }
            Ok((status, v)) => panic!("checkpoint {i} failed with {status}: {v}"),
            Err(_) => return, // the server died mid-request
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_checkpoints_survive_sigkill() {
    let kills: u64 = ctx_core::config::harness_var("CTX_CRASH_KILLS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seed: u64 = ctx_core::config::harness_var("CTX_CRASH_SEED")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xC7A5);
    eprintln!("crash test: {kills} kills, seed {seed}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    // Rounds where a checkpoint in flight at the kill had been committed.
    let mut in_flight_landed = 0;

    for round in 0..kills {
        let server = Server::start(dir.path());
        let http = server.client();
        let from = tip(&http).await;
        // The ref never runs behind an acknowledged checkpoint, and never
        // points at a commit that is not there (tip() fetched it).
        if let Some((_, last)) = acked.lock().unwrap().last() {
            let (_, at) = from.as_ref().expect("ref exists after the first ack");
            assert!(
                at >= last,
                "round {round}: ref at line {at}, but line {last} was acknowledged"
            );
            assert!(
                *at <= last + 1,
                "round {round}: ref at line {at} is past anything sent"
            );
            in_flight_landed += usize::from(*at == last + 1);
        }
        let before = acked.lock().unwrap().len();
        let task = tokio::spawn(stream(http.clone(), from, acked.clone()));
        // Let a random number of checkpoints land, then kill at a random moment.
        let wait_for = rng.range(1, 12) as usize;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < before + wait_for {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: checkpoints stalled"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_micros(rng.range(0, 3000))).await;
        server.kill();
        task.await.expect("stream task");
    }

    // Restart once more and check every acknowledged checkpoint.
    let server = Server::start(dir.path());
    let http = server.client();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() as u64 >= kills,
        "every round acknowledged something"
    );
    let (tip_id, tip_line) = tip(&http).await.expect("ref exists");
    let (_, last) = acked.last().unwrap();
    assert!(tip_line >= *last);
    assert_eq!(http.materialize(&tip_id, "root").await, expected(tip_line));
    for (id, i) in &acked {
        assert_eq!(
            http.materialize(id, "root").await,
            expected(*i),
            "commit {id} (line {i})"
        );
    }
    let ids: std::collections::BTreeSet<&String> = acked.iter().map(|(id, _)| id).collect();
    assert_eq!(
        ids.len(),
        acked.len(),
        "no acknowledged commit was lost and redone"
    );
    let h: Value = http
        .ok(
            "GET",
            &format!("/v1/commits/{tip_id}/history?depth=1000"),
            None,
        )
        .await;
    assert_eq!(
        h["commits"].as_array().unwrap().len() as u64,
        (tip_line + 1).min(1000)
    );
    eprintln!(
        "crash test: {} acknowledged checkpoints over {kills} kills survived; \
         {in_flight_landed} kills fell after a commit but before its acknowledgement",
        acked.len()
    );
}
