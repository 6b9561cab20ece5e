//! Erasure against a real `ctx serve`: no byte left behind (a canary in
//! one session's deltas and summary, materialized, translated and forked,
//! then erased with cascade, is in no file of the data directory, SQLite's
//! database and write-ahead log included), the 409 that touches nothing
//! without cascade, and an erase killed with SIGKILL part-way that a second
//! run finishes.

use ctx_tests::{Http, Server, files_holding, files_holding_settled};
use serde_json::{Value, json};

const CANARY: &str = "CANARY-9f1c2e7a-do-not-keep";

async fn checkpoint(
    http: &Http,
    session: &str,
    parent: Option<&str>,
    delta: &str,
    at: u32,
) -> String {
    let mut body = json!({
        "commit_type": "delta", "format": "raw", "template": "t",
        "principal": "agent", "checkpoint": "turn_boundary",
        "session_id": session,
        "delta": delta,
        "created_at": format!("2026-11-22T00:00:{at:02}Z"),
    });
    if let Some(p) = parent {
        body["parent"] = json!(p);
    }
    let c = http.ok("POST", "/v1/commits", Some(&body)).await;
    c["id"].as_str().expect("id").to_owned()
}

async fn materialize(http: &Http, id: &str, format: Option<&str>) -> Value {
    let mut body = json!({"stop": "root"});
    if let Some(f) = format {
        body["format"] = json!(f);
    }
    http.ok(
        "POST",
        &format!("/v1/commits/{id}/materialize"),
        Some(&body),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_session_leaves_no_byte_behind() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let http = server.client();

    // The session holding the canary: three deltas, a summary, cached
    // materializations in its own format and translated.
    let c0 = checkpoint(
        &http,
        "canary",
        None,
        &format!("user: remember {CANARY}\n"),
        0,
    )
    .await;
    let c1 = checkpoint(&http, "canary", Some(&c0), "assistant: noted\n", 1).await;
    let c2 = checkpoint(
        &http,
        "canary",
        Some(&c1),
        &format!("user: again {CANARY}\n"),
        2,
    )
    .await;
    http.ok(
        "PATCH",
        &format!("/v1/commits/{c1}"),
        Some(&json!({"summary": format!("the user said {CANARY}")})),
    )
    .await;
    materialize(&http, &c2, None).await;
    let translated = materialize(&http, &c2, Some("openai-chat-v1")).await;
    assert_ne!(translated["tier"], "native", "{translated}");
    http.ok(
        "PUT",
        "/v1/refs/sessions/canary",
        Some(&json!({"target": c2})),
    )
    .await;
    // A second session forks from it; its materialization holds the canary.
    let f0 = checkpoint(&http, "fork", Some(&c2), "user: and then?\n", 3).await;
    materialize(&http, &f0, None).await;
    // An unrelated session that must survive.
    let o0 = checkpoint(&http, "other", None, "user: unrelated\n", 4).await;
    let before = files_holding_settled(dir.path(), CANARY.as_bytes());
    assert!(
        before.len() >= 4,
        "the canary is stored before the erase: {before:?}"
    );

    // Without cascade: 409 naming the fork, and nothing removed.
    let out = server.cli_output(&["session", "erase", "canary"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&f0), "{err}");
    for id in [&c0, &c1, &c2, &f0] {
        http.ok("GET", &format!("/v1/commits/{id}"), None).await;
    }
    assert_eq!(files_holding(dir.path(), CANARY.as_bytes()), before);

    // With cascade, through the CLI.
    let (code, out) = server.cli(&["session", "erase", "canary", "--cascade", "--json"]);
    assert_eq!(code, 0);
    let erased: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(erased["commits"], 4, "{erased}");
    assert_eq!(erased["cascaded"], 1, "{erased}");
    assert_eq!(erased["refs"], 1, "{erased}");
    assert!(erased["artifacts"].as_u64().unwrap() >= 6, "{erased}");
    // c2's translation and f0's result: f0's, built on c2's own-format
    // result, superseded that one.
    assert_eq!(erased["cache"], 2, "{erased}");

    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "the canary survives in {left:?}");
    for id in [&c0, &c1, &c2, &f0] {
        let (status, _) = http
            .call("GET", &format!("/v1/commits/{id}"), None)
            .await
            .unwrap();
        assert_eq!(status, 404);
    }
    assert_eq!(http.materialize(&o0, "root").await, b"user: unrelated\n");
    let (status, _) = http
        .call("DELETE", "/v1/sessions/canary", None)
        .await
        .unwrap();
    assert_eq!(status, 404, "erased already");
    server.kill();
    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "after the server stopped: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_killed_part_way_is_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let http = server.client();
    let n = 300;
    let mut parent: Option<String> = None;
    let mut root: Option<String> = None;
    for i in 0..n {
        let id = checkpoint(
            &http,
            "long",
            parent.as_deref(),
            &format!("turn {i} {CANARY}\n"),
            0,
        )
        .await;
        root.get_or_insert_with(|| id.clone());
        parent = Some(id);
    }
    let (root, tip) = (root.unwrap(), parent.unwrap());
    materialize(&http, &tip, None).await;
    let keep = checkpoint(&http, "keep", None, "kept\n", 1).await;

    // Erase in the background and kill the server while it runs.
    let url = format!("{}/v1/sessions/long", server.url);
    let token = server.token.clone();
    let eraser = tokio::spawn(async move {
        reqwest::Client::new()
            .delete(url)
            .bearer_auth(token)
            .send()
            .await
    });
    // Kill once some (not all) commits are gone: poll the root's presence
    // backwards from the tip.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, _) = http
            .call("GET", &format!("/v1/commits/{tip}"), None)
            .await
            .unwrap();
        if status == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the erase never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    server.kill();
    let _ = eraser.await;

    let server = Server::start(dir.path());
    let http = server.client();
    // The erase takes the tip first and the root last: with the tip gone
    // and the root still there, the kill landed part-way.
    let (status, _) = http
        .call("GET", &format!("/v1/commits/{root}"), None)
        .await
        .unwrap();
    assert_eq!(
        status, 200,
        "the erase finished before the kill: the test did not interrupt it"
    );
    let (status, r) = http
        .call("DELETE", "/v1/sessions/long", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "re-running the erase finishes it: {r}");
    let (status, _) = http
        .call("DELETE", "/v1/sessions/long", None)
        .await
        .unwrap();
    assert_eq!(status, 404, "nothing of the session is left");
    assert_eq!(http.materialize(&keep, "root").await, b"kept\n");
    server.kill();
    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "the canary survives in {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_principal_leaves_no_byte_behind() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let http = server.client();
    // The leaving principal's commits in two sessions (at the server's
    // time, so they are in its rolling window), a save of that window and
    // a working-context snapshot, all holding the canary.
    let mut ids = Vec::new();
    for (session, text) in [("s-1", "first"), ("s-2", "second")] {
        let c = http
            .ok(
                "POST",
                "/v1/commits",
                Some(&json!({
                    "commit_type": "delta", "format": "raw", "template": "t",
                    "principal": "team/leaver", "checkpoint": "turn_boundary",
                    "session_id": session,
                    "delta": format!("user: {text} {CANARY}\n"),
                })),
            )
            .await;
        ids.push(c["id"].as_str().unwrap().to_owned());
    }
    let agent = "/v1/agents/team%2Fleaver";
    // A joined window handed out (an ephemeral result in the cache area).
    let window = http.ok("GET", &format!("{agent}/window"), None).await;
    assert!(window["artifact_ref"].is_string(), "{window}");
    let save = http
        .ok("POST", &format!("{agent}/saves"), Some(&json!({})))
        .await;
    assert!(
        save["summary"].as_str().unwrap().contains(CANARY),
        "the save holds the window: {save}"
    );
    http.ok(
        "PUT",
        &format!("{agent}/working-context"),
        Some(&json!({
            "schema_version": 1, "agent_id": "team/leaver", "epoch_id": 1,
            "messages": [{"role": "user", "content": format!("recall {CANARY}")}],
        })),
    )
    .await;
    let other = checkpoint(&http, "s-3", None, "user: someone else\n", 5).await;
    let before = files_holding(dir.path(), CANARY.as_bytes());
    assert!(before.len() >= 4, "stored before: {before:?}");

    let (code, out) = server.cli(&["principal", "erase", "team/leaver", "--json"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let erased: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (
            erased["commits"].as_u64(),
            erased["saves"].as_u64(),
            erased["working_contexts"].as_u64(),
            erased["agents"].as_u64()
        ),
        (Some(2), Some(1), Some(1), Some(1)),
        "{erased}"
    );
    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "the canary survives in {left:?}");
    for id in &ids {
        let (status, _) = http
            .call("GET", &format!("/v1/commits/{id}"), None)
            .await
            .unwrap();
        assert_eq!(status, 404);
    }
    let (status, _) = http
        .call("GET", &format!("{agent}/saves"), None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        http.materialize(&other, "root").await,
        b"user: someone else\n"
    );
    let out = server.cli_output(&["principal", "erase", "team/leaver"]);
    assert!(!out.status.success(), "nothing left: not found");
}

/// The pins left after an erase: `pin list --json` as (kind, name), sorted.
fn pins(server: &Server) -> Vec<(String, String)> {
    let (code, out) = server.cli(&["pin", "list", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_slice(&out).expect("JSON");
    let mut all: Vec<(String, String)> = v["pins"]
        .as_array()
        .expect("pins")
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().expect("kind").to_owned(),
                p["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect();
    all.sort();
    all
}

/// Erasing a pinned session, or the principal of a pinned session,
/// removes the pins of what it erased (the session's and those of the refs
/// it deleted) and keeps the others; on each backend the server runs
/// (SQLite, memory, and aws on the emulator when expected).
async fn an_erase_removes_the_pins_of_what_it_erased(server: &Server) {
    let http = server.client();
    let run = |args: &[&str]| {
        let (code, out) = server.cli(args);
        assert_eq!(code, 0, "{args:?}");
        out
    };
    let a = checkpoint(&http, "pinned-a", None, "user: a\n", 1).await;
    checkpoint(&http, "kept-b", None, "user: b\n", 2).await;
    let c = http
        .ok(
            "POST",
            "/v1/commits",
            Some(&json!({
                "commit_type": "delta", "format": "raw", "template": "t",
                "principal": "leaver", "checkpoint": "turn_boundary",
                "session_id": "pinned-c", "delta": "user: c\n",
            })),
        )
        .await;
    let c = c["id"].as_str().expect("id").to_owned();
    run(&["ref", "set", "keep/a", &a]);
    run(&["ref", "set", "keep/c", &c]);
    for (kind, name) in [
        ("session", "pinned-a"),
        ("ref", "keep/a"),
        ("session", "kept-b"),
        ("session", "pinned-c"),
        ("ref", "keep/c"),
    ] {
        run(&["pin", "add", kind, name]);
    }
    run(&["session", "erase", "pinned-a"]);
    let want = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, n)| ((*k).to_owned(), (*n).to_owned()))
            .collect()
    };
    assert_eq!(
        pins(server),
        want(&[
            ("ref", "keep/c"),
            ("session", "kept-b"),
            ("session", "pinned-c")
        ])
    );
    run(&["principal", "erase", "leaver"]);
    assert_eq!(pins(server), want(&[("session", "kept-b")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_removes_the_pins_of_what_it_erased_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    an_erase_removes_the_pins_of_what_it_erased(&Server::start(dir.path())).await;
    let dir = tempfile::tempdir().unwrap();
    let memory = Server::start_with(dir.path(), &["--store", "memory"]);
    an_erase_removes_the_pins_of_what_it_erased(&memory).await;
    let dir = tempfile::tempdir().unwrap();
    if let Some(aws) = Server::start_aws(dir.path()) {
        an_erase_removes_the_pins_of_what_it_erased(&aws).await;
    }
}
