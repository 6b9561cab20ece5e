//! The README's walkthrough against a real `ctx serve` on 127.0.0.1:0:
//! checkpoint three deltas, fork one, compact, materialize to compaction and
//! to root, resolve, log; every result checked byte-exact, over HTTP and
//! through the CLI.

use ctx_tests::Server;
use serde_json::{Value, json};

const D1: &str = "user: find the bug in parser.rs\n";
const D2: &str = "assistant: reading parser.rs\n";
const D3: &str = "tool: parser.rs:42 indexes one past the end\n";
const FORK: &str = "assistant: let me try the lexer instead\n";
const SUMMARY: &str = "summary: the bug is an off-by-one at parser.rs:42\n";
const D5: &str = "user: fix it\n";

fn checkpoint(delta: &str, parent: Option<&str>, principal: &str, at: &str) -> Value {
    let mut b = json!({
        "commit_type": "delta", "format": "raw", "template": "demo",
        "principal": principal, "checkpoint": "turn_boundary",
        "delta": delta, "created_at": at,
    });
    if let Some(p) = parent {
        b["parent"] = json!(p);
    }
    b
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("commit id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkthrough_over_http_and_cli() {
    let dir = tempfile::tempdir().unwrap();
    walkthrough(&Server::start(dir.path())).await;
}

/// The same walkthrough with `ctx serve --store aws` on the emulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkthrough_on_the_aws_backends() {
    let dir = tempfile::tempdir().unwrap();
    if let Some(server) = Server::start_aws(dir.path()) {
        walkthrough(&server).await;
    }
}

async fn walkthrough(server: &Server) {
    let http = server.client();

    // Unauthenticated requests are refused; health is open.
    let (status, _) = http.call("GET", "/healthz", None).await.unwrap();
    assert_eq!(status, 200);

    // Three deltas on one session, the ref moving with each.
    let mut b1 = checkpoint(D1, None, "alice", "2026-11-22T09:00:00Z");
    b1["ref"] = json!({"name": "sessions/demo"});
    let c1 = http.ok("POST", "/v1/commits", Some(&b1)).await;
    let mut b2 = checkpoint(D2, Some(&id(&c1)), "alice", "2026-11-22T09:01:00Z");
    b2["ref"] = json!({"name": "sessions/demo", "expected": id(&c1)});
    let c2 = http.ok("POST", "/v1/commits", Some(&b2)).await;
    let mut b3 = checkpoint(D3, Some(&id(&c2)), "alice", "2026-11-22T09:02:00Z");
    b3["ref"] = json!({"name": "sessions/demo", "expected": id(&c2)});
    let c3 = http.ok("POST", "/v1/commits", Some(&b3)).await;
    assert_eq!(
        (c1["depth"].as_u64(), c3["depth"].as_u64()),
        (Some(0), Some(2))
    );

    // Retrying a checkpoint returns the same commit with 200.
    let (status, again) = http.call("POST", "/v1/commits", Some(&b3)).await.unwrap();
    assert_eq!((status, id(&again)), (200, id(&c3)));

    // A second writer with a stale view of the session gets 409 and the tip.
    let mut stale = checkpoint("late\n", Some(&id(&c2)), "alice", "2026-11-22T09:02:30Z");
    stale["ref"] = json!({"name": "sessions/demo", "expected": id(&c2)});
    let (status, conflict) = http
        .call("POST", "/v1/commits", Some(&stale))
        .await
        .unwrap();
    assert_eq!(status, 409);
    assert_eq!(conflict["current"], json!(id(&c3)));

    // Fork at c2: a commit naming the same parent.
    let fork = http
        .ok(
            "POST",
            "/v1/commits",
            Some(&checkpoint(
                FORK,
                Some(&id(&c2)),
                "bob",
                "2026-11-22T09:03:00Z",
            )),
        )
        .await;
    assert_eq!(fork["lineage"], fork["id"], "a fork starts its own run");

    // Compact: a summary replacing everything up to c3, then one more delta.
    let mut kb = checkpoint(SUMMARY, Some(&id(&c3)), "alice", "2026-11-22T09:04:00Z");
    kb["commit_type"] = json!("compaction");
    kb["checkpoint"] = json!("compaction");
    kb["ref"] = json!({"name": "sessions/demo", "expected": id(&c3)});
    let k = http.ok("POST", "/v1/commits", Some(&kb)).await;
    let mut b5 = checkpoint(D5, Some(&id(&k)), "alice", "2026-11-22T09:05:00Z");
    b5["ref"] = json!({"name": "sessions/demo", "expected": id(&k)});
    let c5 = http.ok("POST", "/v1/commits", Some(&b5)).await;
    let tip = id(&c5);

    // Materialize: to the compaction (default), to the root, after an ancestor.
    assert_eq!(
        http.materialize(&tip, "compaction").await,
        format!("{SUMMARY}{D5}").as_bytes()
    );
    assert_eq!(
        http.materialize(&tip, "root").await,
        format!("{D1}{D2}{D3}{D5}").as_bytes()
    );
    assert_eq!(
        http.materialize(&tip, &id(&c2)).await,
        format!("{D3}{D5}").as_bytes()
    );
    assert_eq!(
        http.materialize(&id(&fork), "root").await,
        format!("{D1}{D2}{FORK}").as_bytes()
    );
    assert_eq!(
        http.materialize(&id(&fork), "compaction").await,
        format!("{D1}{D2}{FORK}").as_bytes()
    );
    let m = http
        .ok(
            "POST",
            &format!("/v1/commits/{tip}/materialize"),
            Some(&json!({"stop": "root"})),
        )
        .await;
    assert_eq!(m["cached"], json!(true));
    assert_eq!(
        m["size"].as_u64(),
        Some((D1.len() + D2.len() + D3.len() + D5.len()) as u64)
    );

    // Resolve: what did alice know at 09:01:30? c2. Bob at 09:10? the fork.
    let r = http
        .ok(
            "GET",
            "/v1/resolve?principal=alice&at=2026-11-22T09:01:30Z",
            None,
        )
        .await;
    assert_eq!(r["id"], json!(id(&c2)));
    let r = http
        .ok(
            "GET",
            "/v1/resolve?principal=bob&at=2026-11-22T09:10:00Z",
            None,
        )
        .await;
    assert_eq!(r["id"], json!(id(&fork)));
    let (status, _) = http
        .call(
            "GET",
            "/v1/resolve?principal=alice&at=2026-11-22T08:00:00Z",
            None,
        )
        .await
        .unwrap();
    assert_eq!(status, 404);

    // Summaries are mutable metadata.
    http.ok(
        "PATCH",
        &format!("/v1/commits/{}", id(&k)),
        Some(&json!({"summary": "compacted"})),
    )
    .await;

    // Log, newest first.
    let h = http
        .ok("GET", &format!("/v1/commits/{tip}/history?depth=10"), None)
        .await;
    let ids: Vec<&str> = h["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![
            tip.as_str(),
            k["id"].as_str().unwrap(),
            c3["id"].as_str().unwrap(),
            c2["id"].as_str().unwrap(),
            c1["id"].as_str().unwrap()
        ]
    );

    // The same through the CLI, by ref name.
    let (code, out) = server.cli(&["materialize", "sessions/demo", "--stop", "root"]);
    assert_eq!((code, out), (0, format!("{D1}{D2}{D3}{D5}").into_bytes()));
    let (code, out) = server.cli(&["log", "sessions/demo"]);
    assert_eq!(code, 0);
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].starts_with(&tip), "{out}");
    assert!(
        lines[1].contains("compaction") && lines[1].ends_with("compacted"),
        "{out}"
    );
    let (code, out) = server.cli(&[
        "resolve",
        "--principal",
        "alice",
        "--at",
        "2026-11-22T09:01:30Z",
    ]);
    assert_eq!(
        (code, String::from_utf8(out).unwrap()),
        (0, format!("{}\n", id(&c2)))
    );
    // A checkpoint from stdin is impossible here (stdin is /dev/null): an
    // empty delta is refused rather than recorded as an empty commit.
    let (code, out) = server.cli(&[
        "checkpoint",
        "--principal",
        "carol",
        "--ref",
        "sessions/carol",
    ]);
    assert_eq!((code, out.is_empty()), (2, true));

    // Exit codes tell not-found, conflict and usage errors apart.
    assert_eq!(
        server
            .cli(&["show", "ctx-00000000000000000000000000000000"])
            .0,
        3
    );
    assert_eq!(
        server
            .cli(&[
                "ref",
                "set",
                "sessions/demo",
                &id(&c1),
                "--expected",
                &id(&c1)
            ])
            .0,
        4
    );
    assert_eq!(server.cli(&["show", "ctx-nope"]).0, 2);
    assert_eq!(server.cli(&["frobnicate"]).0, 2);
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["show", &tip, "--server", &server.url, "--token", "wrong"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_add_tenants_that_cannot_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let token_file = dir.path().join("token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "add", "team-b", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let token_b = String::from_utf8(out.stdout).unwrap().trim().to_owned();

    let a = server.client();
    let mut b = server.client();
    b.token = token_b.clone();
    let c = a
        .ok(
            "POST",
            "/v1/commits",
            Some(&checkpoint("mine\n", None, "alice", "2026-11-22T09:00:00Z")),
        )
        .await;
    let (status, _) = b
        .call("GET", &format!("/v1/commits/{}", id(&c)), None)
        .await
        .unwrap();
    assert_eq!(status, 404, "another tenant's commit answers 404");

    let list = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "list", "--json", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    let b_id = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == "team-b")
        .expect("team-b listed")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let st = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "revoke", &b_id, "--data"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let (status, v) = b.call("GET", "/v1/refs", None).await.unwrap();
    assert_eq!(status, 401, "a revoked token is refused: {v}");
}

/// Large deltas go around the API: a presigned PUT to S3, then a checkpoint
/// naming the artifact, which re-hashes the bytes before referencing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_uploads_are_verified_before_they_are_referenced() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = Server::start_aws(dir.path()) else {
        return;
    };
    let http = server.client();
    // Over S3 the server's own document has direct uploads.
    let doc = http.ok("GET", "/v1/openapi.json", None).await;
    assert!(doc["paths"].get("/v1/uploads").is_some());
    let bytes: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let art = ctx_core::ArtifactRef::of(&bytes).to_string();
    let up = http
        .ok(
            "POST",
            "/v1/uploads",
            Some(&json!({"artifact_ref": art, "size": bytes.len()})),
        )
        .await;
    assert_eq!(up["method"], "PUT");
    let put = reqwest::Client::new()
        .put(up["url"].as_str().unwrap())
        .header("content-type", "application/octet-stream")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert!(
        put.status().is_success(),
        "PUT to the presigned URL: {}",
        put.status()
    );
    let mut body = checkpoint("", None, "uploader", "2026-11-22T09:00:00Z");
    body.as_object_mut().unwrap().remove("delta");
    body["artifact_ref"] = json!(art);
    let c = http.ok("POST", "/v1/commits", Some(&body)).await;
    assert_eq!(c["artifact_size"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(
        http.materialize(c["id"].as_str().unwrap(), "root").await,
        bytes
    );

    // Bytes that do not match the announced hash are refused and discarded.
    let claimed = ctx_core::ArtifactRef::of(b"what I said I would send").to_string();
    let up = http
        .ok(
            "POST",
            "/v1/uploads",
            Some(&json!({"artifact_ref": claimed, "size": 5})),
        )
        .await;
    reqwest::Client::new()
        .put(up["url"].as_str().unwrap())
        .body(b"other".to_vec())
        .send()
        .await
        .unwrap();
    let mut body = checkpoint("", None, "uploader", "2026-11-22T09:01:00Z");
    body.as_object_mut().unwrap().remove("delta");
    body["artifact_ref"] = json!(claimed);
    let (status, v) = http.call("POST", "/v1/commits", Some(&body)).await.unwrap();
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (400, Some("artifact_ref")),
        "{v}"
    );
    // The upload was discarded, not kept: the artifact does not exist.
    let (status, v) = http.call("POST", "/v1/commits", Some(&body)).await.unwrap();
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (404, Some("artifact_ref")),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_mode_says_to_post_bytes_instead_of_presigning() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let art = ctx_core::ArtifactRef::of(b"x").to_string();
    let (status, v) = server
        .client()
        .call(
            "POST",
            "/v1/uploads",
            Some(&json!({"artifact_ref": art, "size": 1})),
        )
        .await
        .unwrap();
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/artifacts"),
        "{v}"
    );
    // And its document leaves them out.
    let doc = server.client().ok("GET", "/v1/openapi.json", None).await;
    assert!(doc["paths"].get("/v1/uploads").is_none());
}

/// A 50 MB context by the CLI on the AWS backends, the server holding
/// API Gateway's 10 MB (`CTX_MAX_IN_FLIGHT_BYTES`): `ctx checkpoint` PUTs
/// the delta to S3 by a presigned URL (inline, its JSON would be refused),
/// and `ctx materialize` and `ctx cat` follow the 303 of the download to a
/// presigned GET; the bytes come back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_context_round_trips_through_the_cli_on_aws() {
    let dir = tempfile::tempdir().unwrap();
    // No hot cache, as on Lambda: a result held in memory is answered
    // from memory, whatever its size.
    let env = [
        ("CTX_MAX_IN_FLIGHT_BYTES", "10485760"),
        ("CTX_HOT_CACHE_BYTES", "0"),
    ];
    let Some(server) = Server::start_aws_env(dir.path(), &env) else {
        return;
    };
    let mut rng = ctx_tests::Rng::new(0x50);
    let data: Vec<u8> = (0..50_000_000 / 8)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    let file = dir.path().join("delta.bin");
    std::fs::write(&file, &data).unwrap();
    let (code, out) = server.cli(&[
        "checkpoint",
        "--principal",
        "large",
        "--format",
        "raw",
        "--json",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "ctx checkpoint of 50 MB");
    let commit: Value = serde_json::from_slice(&out).unwrap();
    let id = commit["id"].as_str().unwrap();
    let art = commit["artifact_ref"].as_str().unwrap();
    assert_eq!(commit["artifact_size"].as_u64(), Some(data.len() as u64));

    let out_file = dir.path().join("context.bin");
    let (code, _) = server.cli(&[
        "materialize",
        id,
        "--stop",
        "root",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "ctx materialize of 50 MB");
    assert!(
        std::fs::read(&out_file).unwrap() == data,
        "the context is the delta"
    );
    let (code, bytes) = server.cli(&["cat", art]);
    assert_eq!(code, 0, "ctx cat of 50 MB");
    assert!(bytes == data, "ctx cat gives the bytes");

    // What the CLI followed: a 303 to S3, whose URL needs no token.
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/artifacts/{art}", server.url))
        .bearer_auth(&server.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    assert!(!location.starts_with(&server.url), "{location}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["size"].as_u64(), Some(data.len() as u64));
    let direct = reqwest::get(&location).await.unwrap();
    assert!(direct.status().is_success());
    assert_eq!(direct.bytes().await.unwrap().len(), data.len());
}
