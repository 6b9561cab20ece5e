//! Crash consistency: clients stream checkpoints, each into its own
//! session, while `ctx serve` is killed with SIGKILL at random points, then
//! restarted on the same data directory. Every acknowledged checkpoint must
//! survive and materialize byte-exact, and no session's ref may point at a
//! missing commit or run behind an acknowledged checkpoint. One test runs
//! one writer; the other 8 at once, whose transactions the embedded store
//! commits in groups (one WAL fsync for several), so a kill lands in the
//! middle of a group as often as not.
//!
//! `CTX_CRASH_KILLS` (default 24) and `CTX_CRASH_SEED` replay a run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctx_tests::{Http, Rng, Server};
use serde_json::{Value, json};

/// The ref stream `s` moves.
fn ref_name(s: usize) -> String {
    format!("crash/session-{s}")
}

/// Line `i` of stream `s` (distinct per stream, so no two streams ever
/// write the same commit).
fn line(s: usize, i: u64) -> String {
    format!("stream {s}, turn {i}: the agent learned fact number {i}\n")
}

fn expected(s: usize, upto: u64) -> Vec<u8> {
    (0..=upto).flat_map(|i| line(s, i).into_bytes()).collect()
}

/// Where stream `s` stands: its tip and the index of its last line.
async fn tip(http: &Http, s: usize) -> Option<(String, u64)> {
    let (status, r) = http
        .call("GET", &format!("/v1/refs/{}", ref_name(s)), None)
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

/// Acknowledged checkpoints of each stream: (commit, line index).
type Acked = Arc<Vec<Mutex<Vec<(String, u64)>>>>;

/// Streams checkpoints of stream `s` until the server dies; records each
/// acknowledged one.
async fn stream(http: Http, s: usize, mut from: Option<(String, u64)>, acked: Acked) {
    loop {
        let i = from.as_ref().map_or(0, |(_, i)| i + 1);
        let mut body = json!({
            "commit_type": "delta", "format": "raw", "template": "crash",
            "principal": format!("crasher-{s}"), "checkpoint": "turn_boundary",
            "delta": line(s, i),
            "created_at": format!("2026-11-22T00:00:00.{:06}Z", i),
            "ref": {"name": ref_name(s), "expected": from.as_ref().map(|(id, _)| id.clone())},
        });
        if let Some((parent, _)) = &from {
            body["parent"] = json!(parent);
        }
        match http.call("POST", "/v1/commits", Some(&body)).await {
            Ok((201 | 200, c)) => {
                let id = c["id"].as_str().expect("id").to_owned();
                acked[s].lock().unwrap().push((id.clone(), i));
                from = Some((id, i));
            }
            Ok((status, v)) => panic!("checkpoint {i} of stream {s} failed with {status}: {v}"),
            Err(_) => return, // the server died mid-request
        }
    }
}

fn total(acked: &Acked) -> usize {
    acked.iter().map(|a| a.lock().unwrap().len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_checkpoints_survive_sigkill() {
    crash_rounds(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_checkpoints_of_concurrent_writers_survive_sigkill() {
    crash_rounds(8).await;
}

/// Kills the server `CTX_CRASH_KILLS` times while `streams` writers
/// stream checkpoints at once, then checks every acknowledged one.
async fn crash_rounds(streams: usize) {
    let kills: u64 = ctx_core::config::harness_var("CTX_CRASH_KILLS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seed: u64 = ctx_core::config::harness_var("CTX_CRASH_SEED")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xC7A5);
    eprintln!("crash test: {streams} writers, {kills} kills, seed {seed}");
    let mut rng = Rng::new(seed.wrapping_add(streams as u64 - 1));
    let dir = tempfile::tempdir().unwrap();
    let acked: Acked = Arc::new((0..streams).map(|_| Mutex::default()).collect());
    // Times a checkpoint in flight at the kill had been committed.
    let mut in_flight_landed = 0;

    for round in 0..kills {
        let server = Server::start(dir.path());
        let http = server.client();
        let mut tasks = Vec::new();
        for s in 0..streams {
            let from = tip(&http, s).await;
            // The ref never runs behind an acknowledged checkpoint, and never
            // points at a commit that is not there (tip() fetched it).
            if let Some((_, last)) = acked[s].lock().unwrap().last() {
                let (_, at) = from.as_ref().expect("ref exists after the first ack");
                assert!(
                    at >= last,
                    "round {round}, stream {s}: ref at line {at}, but line {last} was acknowledged"
                );
                assert!(
                    *at <= last + 1,
                    "round {round}, stream {s}: ref at line {at} is past anything sent"
                );
                in_flight_landed += usize::from(*at == last + 1);
            }
            tasks.push(tokio::spawn(stream(http.clone(), s, from, acked.clone())));
        }
        let before = total(&acked);
        // Let a random number of checkpoints land, then kill at a random moment.
        let wait_for = rng.range(1, 12) as usize * streams;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while total(&acked) < before + wait_for {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: checkpoints stalled"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_micros(rng.range(0, 3000))).await;
        server.kill();
        for task in tasks {
            task.await.expect("stream task");
        }
    }

    // Restart once more and check every acknowledged checkpoint.
    let server = Server::start(dir.path());
    let http = server.client();
    assert!(
        total(&acked) as u64 >= kills,
        "every round acknowledged something"
    );
    for s in 0..streams {
        let acked = acked[s].lock().unwrap().clone();
        if acked.is_empty() {
            continue;
        }
        let (tip_id, tip_line) = tip(&http, s).await.expect("ref exists");
        let (_, last) = acked.last().unwrap();
        assert!(tip_line >= *last);
        assert_eq!(
            http.materialize(&tip_id, "root").await,
            expected(s, tip_line)
        );
        for (id, i) in &acked {
            assert_eq!(
                http.materialize(id, "root").await,
                expected(s, *i),
                "stream {s}: commit {id} (line {i})"
            );
        }
        let ids: std::collections::BTreeSet<&String> = acked.iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids.len(),
            acked.len(),
            "stream {s}: no acknowledged commit was lost and redone"
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
    }
    eprintln!(
        "crash test: {} acknowledged checkpoints of {streams} writers over {kills} kills survived; \
         {in_flight_landed} times a checkpoint was committed but not yet acknowledged at the kill",
        total(&acked)
    );
}
