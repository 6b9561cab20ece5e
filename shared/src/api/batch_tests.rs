//! Router tests of `POST /v1/batch`: a batch written whole (in-batch
//! parents, artifacts, two ref moves) and retried; every refusal names its
//! field and writes nothing.

use axum::body::Body as AxBody;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::api::testing::checkpoint_body;

const TOKEN: &str = "token-acme";

async fn app() -> Router {
    crate::api::testing::memory_router(&[(TOKEN, "acme")]).await
}

async fn raw(app: &Router, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(AxBody::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())),
    )
}

async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    raw(
        app,
        method,
        uri,
        body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
    )
    .await
}

/// The `art-…` name of `bytes`.
fn art(bytes: &[u8]) -> String {
    crate::id::ArtifactRef::of(bytes).to_string()
}

/// A batch commit by the principal `batcher` (whose timeline shows
/// whether anything was written).
fn batch_commit(delta: &str, at: &str) -> Value {
    let mut c = checkpoint_body(delta, None);
    c["principal"] = json!("batcher");
    c["created_at"] = json!(at);
    c
}

/// What of a batch was written: a commit on `batcher`'s timeline, a ref
/// other than `sessions/s1` at `s1`, an artifact of `artifacts`.
async fn written(app: &Router, artifacts: &[&str], s1: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let (s, v) = call(
        app,
        "GET",
        "/v1/resolve?principal=batcher&at=2030-01-01T00:00:00Z",
        None,
    )
    .await;
    if s != StatusCode::NOT_FOUND {
        out.push(format!("a commit: {s} {v}"));
    }
    let (_, refs) = call(app, "GET", "/v1/refs", None).await;
    for r in refs["refs"].as_array().unwrap() {
        if r["name"] != "sessions/s1" || &r["target"] != s1 {
            out.push(format!("a ref: {r}"));
        }
    }
    for a in artifacts {
        let (s, _) = call(app, "GET", &format!("/v1/artifacts/{a}"), None).await;
        if s != StatusCode::NOT_FOUND {
            out.push(format!("artifact {a}: {s}"));
        }
    }
    out
}

#[tokio::test]
async fn a_batch_writes_commits_artifacts_and_ref_moves_at_once_and_retries_safely() {
    let app = app().await;
    let (_, a) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("a\n", None)),
    )
    .await;
    let a_id = a["id"].as_str().unwrap().to_owned();
    let (s, _) = call(
        &app,
        "PUT",
        "/v1/refs/sessions/s1",
        Some(json!({"target": a_id})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let named = b"named by a commit\n";
    let loose = [0u8, 159, 146, 150, 7];
    let mut c0 = batch_commit("", "2026-11-22T11:00:00Z");
    c0.as_object_mut().unwrap().remove("delta");
    c0["artifact_ref"] = json!(art(named));
    c0["parent"] = json!(a_id);
    let mut c1 = batch_commit("", "2026-11-22T11:00:01Z");
    c1.as_object_mut().unwrap().remove("delta");
    c1["delta_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(b"c1\n"));
    c1["parent_in_batch"] = json!(0);
    let body = json!({
        "artifacts": [
            {"ref": art(named), "text": std::str::from_utf8(named).unwrap()},
            {"ref": art(&loose), "base64": base64::engine::general_purpose::STANDARD.encode(loose)},
        ],
        "commits": [c0, c1],
        "refs": [
            {"name": "sessions/s1", "expected": a_id, "target_in_batch": 1},
            {"name": "threads/t1", "expected": null, "target_in_batch": 0},
        ],
    });
    let (s, done) = call(&app, "POST", "/v1/batch", Some(body.clone())).await;
    assert_eq!(s, StatusCode::CREATED, "{done}");
    let commits = done["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["parent"], json!(a_id));
    assert_eq!(commits[0]["artifact_ref"], json!(art(named)));
    assert_eq!(commits[1]["parent"], commits[0]["id"]);
    assert_eq!(
        commits[1]["lineage"], a["lineage"],
        "one run with its parent"
    );
    let refs = done["refs"].as_array().unwrap();
    assert_eq!(refs[0]["name"], "sessions/s1");
    assert_eq!(refs[0]["target"], commits[1]["id"]);
    assert_eq!(refs[1]["target"], commits[0]["id"]);
    for (i, c) in commits.iter().enumerate() {
        let (s, shown) = call(
            &app,
            "GET",
            &format!("/v1/commits/{}", c["id"].as_str().unwrap()),
            None,
        )
        .await;
        assert_eq!((s, &shown), (StatusCode::OK, c), "commit {i}");
    }
    for r in refs {
        let (_, got) = call(
            &app,
            "GET",
            &format!("/v1/refs/{}", r["name"].as_str().unwrap()),
            None,
        )
        .await;
        assert_eq!(&got, r);
    }
    // The chain reads back whole; the loose artifact was stored.
    let tip = commits[1]["id"].as_str().unwrap();
    let (s, m) = call(
        &app,
        "POST",
        &format!("/v1/commits/{tip}/materialize"),
        Some(json!({"stop": "root"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{m}");
    let (s, bytes) = raw(
        &app,
        "GET",
        &format!("/v1/artifacts/{}", m["artifact_ref"].as_str().unwrap()),
        vec![],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(bytes, json!("a\nnamed by a commit\nc1\n"));
    let req = Request::builder()
        .method("GET")
        .uri(format!("/v1/artifacts/{}", art(&loose)))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(AxBody::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.into_body().collect().await.unwrap().to_bytes(),
        &loose[..]
    );
    // The same batch again (its answer lost): 200, the same commits and
    // refs, nothing written twice.
    let (s, again) = call(&app, "POST", "/v1/batch", Some(body.clone())).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again, done);
    let (_, history) = call(
        &app,
        "GET",
        &format!("/v1/commits/{tip}/history?depth=10"),
        None,
    )
    .await;
    assert_eq!(history["commits"].as_array().unwrap().len(), 3);
    // Once the ref moved on, the retry is its conflict.
    let (_, c2) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("c2\n", Some(tip))),
    )
    .await;
    call(
        &app,
        "PUT",
        "/v1/refs/sessions/s1",
        Some(json!({"target": c2["id"], "expected": tip})),
    )
    .await;
    let (s, e) = call(&app, "POST", "/v1/batch", Some(body)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert_eq!(e["error"]["field"], "refs[0].expected");
    assert_eq!(e["current"], c2["id"]);
}

#[tokio::test]
async fn a_stale_ref_is_a_409_with_the_tip_and_writes_nothing() {
    let app = app().await;
    let (_, a) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("a\n", None)),
    )
    .await;
    let (_, b) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("b\n", a["id"].as_str())),
    )
    .await;
    call(
        &app,
        "PUT",
        "/v1/refs/sessions/s1",
        Some(json!({"target": b["id"]})),
    )
    .await;
    let loose = b"loose";
    let body = json!({
        "artifacts": [{"ref": art(loose), "text": "loose"}],
        "commits": [batch_commit("x\n", "2026-11-22T11:00:00Z")],
        "refs": [
            {"name": "threads/new", "target_in_batch": 0},
            {"name": "sessions/s1", "expected": a["id"], "target_in_batch": 0},
        ],
    });
    let (s, e) = call(&app, "POST", "/v1/batch", Some(body)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert_eq!(e["error"]["field"], "refs[1].expected");
    assert_eq!(e["current"], b["id"]);
    assert_eq!(
        written(&app, &[&art(loose)], &b["id"]).await,
        Vec::<String>::new()
    );
}

/// `on_stale`: a `skip` move whose ref moved leaves it as it is and the
/// rest is written; an `overwrite` move moves its ref wherever it was; a
/// `conflict` move (the default) still refuses the batch, naming its own
/// index among all the moves, skipped ones counted.
#[tokio::test]
async fn a_stale_move_may_skip_or_overwrite_instead_of_refusing_the_batch() {
    let app = app().await;
    let post = |body: Value| {
        let app = app.clone();
        async move { call(&app, "POST", "/v1/commits", Some(body)).await.1 }
    };
    let a = post(checkpoint_body("a\n", None)).await;
    let b = post(checkpoint_body("b\n", a["id"].as_str())).await;
    for name in ["threads/head", "threads/w", "threads/c"] {
        let (s, _) = call(
            &app,
            "PUT",
            &format!("/v1/refs/{name}"),
            Some(json!({"target": b["id"]})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
    }
    // Every move expects `a`, but each ref is at `b` (and `gone` is none).
    let stale = |name: &str, mode: Option<&str>| {
        let mut m = json!({"name": name, "expected": a["id"], "target_in_batch": 0});
        if let Some(mode) = mode {
            m["on_stale"] = json!(mode);
        }
        m
    };
    let refused = json!({
        "commits": [batch_commit("x\n", "2026-11-22T11:00:00Z")],
        "refs": [stale("threads/w", Some("skip")), stale("threads/c", None)],
    });
    let (s, e) = call(&app, "POST", "/v1/batch", Some(refused)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert_eq!(e["error"]["field"], "refs[1].expected", "{e}");
    assert_eq!(e["current"], b["id"]);
    let unmoved = |app: Router| async move {
        let mut at = Vec::new();
        for name in ["threads/head", "threads/w", "threads/c"] {
            let (_, r) = call(&app, "GET", &format!("/v1/refs/{name}"), None).await;
            at.push(r["target"].clone());
        }
        at
    };
    assert_eq!(unmoved(app.clone()).await, vec![b["id"].clone(); 3]);

    let body = json!({
        "commits": [batch_commit("y\n", "2026-11-22T11:00:01Z")],
        "refs": [
            stale("threads/w", Some("skip")),
            stale("threads/head", Some("overwrite")),
            stale("threads/gone", Some("skip")),
            {"name": "threads/new", "target_in_batch": 0, "on_stale": "overwrite"},
            stale("threads/c", Some("conflict")),
        ],
    });
    let (s, e) = call(&app, "POST", "/v1/batch", Some(body.clone())).await;
    assert_eq!(
        s,
        StatusCode::CONFLICT,
        "an explicit conflict move still refuses: {e}"
    );
    assert_eq!(e["error"]["field"], "refs[4].expected", "{e}");
    let mut body = body;
    body["refs"].as_array_mut().unwrap().pop();
    let (s, done) = call(&app, "POST", "/v1/batch", Some(body.clone())).await;
    assert_eq!(s, StatusCode::CREATED, "{done}");
    let y = done["commits"][0]["id"].clone();
    let refs = done["refs"].as_array().unwrap();
    assert_eq!(refs.len(), 4, "{done}");
    assert_eq!(refs[0]["name"], "threads/w");
    assert_eq!(refs[0]["target"], b["id"], "skipped: where it was");
    assert_eq!(refs[1]["target"], y, "overwritten");
    assert_eq!(refs[2], Value::Null, "skipped, and it does not exist");
    assert_eq!(refs[3]["target"], y, "overwrite creates");
    assert_eq!(
        unmoved(app.clone()).await,
        vec![y.clone(), b["id"].clone(), b["id"].clone()]
    );
    let (s, _) = call(&app, "GET", "/v1/refs/threads/gone", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The same batch again is a retry: the skip move still skips, the
    // others already point at their target.
    let (s, again) = call(&app, "POST", "/v1/batch", Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again["refs"], done["refs"]);
    // Ref moves alone, every one skipped: nothing to write, and said so.
    let alone = json!({"refs": [
        {"name": "threads/w", "expected": a["id"], "target": a["id"], "on_stale": "skip"},
    ]});
    let (s, skipped) = call(&app, "POST", "/v1/batch", Some(alone)).await;
    assert_eq!(s, StatusCode::OK, "{skipped}");
    assert_eq!(skipped["commits"], json!([]));
    assert_eq!(skipped["refs"][0]["target"], b["id"]);
}

/// Each refusal: its status, the field it names, and nothing written (no
/// commit on the batch's principal, no ref moved or made, no artifact
/// stored).
#[tokio::test]
async fn every_bad_batch_names_its_field_and_writes_nothing() {
    let app = app().await;
    let (_, a) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("a\n", None)),
    )
    .await;
    let a_id = a["id"].as_str().unwrap().to_owned();
    call(
        &app,
        "PUT",
        "/v1/refs/sessions/s1",
        Some(json!({"target": a_id})),
    )
    .await;
    let ok = |at: &str| batch_commit("ok\n", at);
    let loose = "loose bytes";
    let loose_art = art(loose.as_bytes());
    let with = |c: Value, k: &str, v: Value| {
        let mut c = c;
        c[k] = v;
        c
    };
    let many = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| ok(&format!("2026-11-22T11:00:{i:02}Z")))
            .collect()
    };
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("empty", json!({}), 400, "commits"),
        (
            "a hash that is not the bytes'",
            json!({"artifacts": [{"ref": art(b"other"), "text": loose}], "commits": [ok("2026-11-22T11:00:00Z")]}),
            400,
            "artifacts[0].ref",
        ),
        (
            "an artifact twice",
            json!({"artifacts": [{"ref": loose_art, "text": loose}, {"ref": loose_art, "text": loose}], "commits": [ok("2026-11-22T11:00:00Z")]}),
            400,
            "artifacts[1].ref",
        ),
        (
            "an artifact with text and base64",
            json!({"artifacts": [{"ref": loose_art, "text": loose, "base64": "eA=="}], "commits": [ok("2026-11-22T11:00:00Z")]}),
            400,
            "artifacts[0]",
        ),
        (
            "an artifact in bad base64",
            json!({"artifacts": [{"ref": loose_art, "base64": "not base64!"}], "commits": [ok("2026-11-22T11:00:00Z")]}),
            400,
            "artifacts[0].base64",
        ),
        (
            "an artifact over the limit",
            json!({"artifacts": [{"ref": art(&[b'x'; 5000]), "text": "x".repeat(5000)}], "commits": [ok("2026-11-22T11:00:00Z")]}),
            413,
            "artifacts[0].text",
        ),
        (
            "an unknown artifact_ref",
            json!({"artifacts": [{"ref": loose_art, "text": loose}], "commits": [with(with(ok("2026-11-22T11:00:00Z"), "delta", Value::Null), "artifact_ref", json!(art(b"nowhere")))]}),
            404,
            "commits[0].artifact_ref",
        ),
        (
            "parent and parent_in_batch",
            json!({"commits": [ok("2026-11-22T11:00:00Z"), with(with(ok("2026-11-22T11:00:01Z"), "parent", json!(a_id)), "parent_in_batch", json!(0))]}),
            400,
            "commits[1].parent_in_batch",
        ),
        (
            "a parent_in_batch not earlier",
            json!({"commits": [with(ok("2026-11-22T11:00:00Z"), "parent_in_batch", json!(0))]}),
            400,
            "commits[0].parent_in_batch",
        ),
        (
            "a parent that does not exist",
            json!({"commits": [with(ok("2026-11-22T11:00:00Z"), "parent", json!("ctx-00000000000000000000000000000000"))]}),
            404,
            "commits[0].parent",
        ),
        (
            "a bad delta of the second commit, in base64",
            json!({
                "artifacts": [{"ref": loose_art, "text": loose}],
                "commits": [ok("2026-11-22T11:00:00Z"), with(with(with(ok("2026-11-22T11:00:01Z"), "delta", Value::Null), "delta_base64", json!("bm90IGpzb24=")), "format", json!("anthropic-messages-v1"))],
            }),
            400,
            "commits[1].delta_base64",
        ),
        (
            "a template too long",
            json!({"commits": [with(ok("2026-11-22T11:00:00Z"), "template", json!("t".repeat(300)))]}),
            400,
            "commits[0].template",
        ),
        (
            "a ref moved twice",
            json!({"commits": [ok("2026-11-22T11:00:00Z")], "refs": [{"name": "threads/x", "target_in_batch": 0}, {"name": "threads/x", "target_in_batch": 0}]}),
            400,
            "refs[1].name",
        ),
        (
            "a target_in_batch past the commits",
            json!({"commits": [ok("2026-11-22T11:00:00Z")], "refs": [{"name": "threads/x", "target_in_batch": 1}]}),
            400,
            "refs[0].target_in_batch",
        ),
        (
            "target and target_in_batch",
            json!({"commits": [ok("2026-11-22T11:00:00Z")], "refs": [{"name": "threads/x", "target": a_id, "target_in_batch": 0}]}),
            400,
            "refs[0].target",
        ),
        (
            "a target that does not exist",
            json!({"commits": [ok("2026-11-22T11:00:00Z")], "refs": [{"name": "threads/x", "target": "ctx-00000000000000000000000000000000"}]}),
            404,
            "refs[0].target",
        ),
        (
            "a ref that must not exist but does",
            json!({"artifacts": [{"ref": loose_art, "text": loose}], "commits": [ok("2026-11-22T11:00:00Z")], "refs": [{"name": "sessions/s1", "expected": null, "target_in_batch": 0}]}),
            409,
            "refs[0].expected",
        ),
        ("15 commits", json!({"commits": many(15)}), 413, "commits"),
        (
            "14 commits and 3 refs",
            json!({"commits": many(14), "refs": [{"name": "threads/x", "target": a_id}, {"name": "threads/y", "target": a_id}, {"name": "threads/z", "target": a_id}]}),
            413,
            "refs",
        ),
    ];
    for (name, body, status, field) in cases {
        let (s, e) = call(&app, "POST", "/v1/batch", Some(body)).await;
        assert_eq!(s.as_u16(), status, "{name}: {e}");
        assert_eq!(e["error"]["field"], field, "{name}: {e}");
        assert!(
            !e["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{name}"
        );
        assert_eq!(
            written(&app, &[&loose_art], &json!(a_id)).await,
            Vec::<String>::new(),
            "{name} wrote something"
        );
    }
    // What JSON itself refuses: a per-commit `ref` (a batch moves refs in
    // `refs`), and a body over the limit.
    let mut with_ref = ok("2026-11-22T11:00:00Z");
    with_ref["ref"] = json!({"name": "threads/x"});
    let (s, e) = call(
        &app,
        "POST",
        "/v1/batch",
        Some(json!({"commits": [with_ref]})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let huge = format!(
        r#"{{"artifacts": [{{"ref": "{loose_art}", "text": "{}"}}]}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let (s, e) = raw(&app, "POST", "/v1/batch", huge.into_bytes()).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert_eq!(
        written(&app, &[&loose_art], &json!(a_id)).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn commits_without_a_time_keep_the_batchs_order_on_the_timeline() {
    // The test clock stands still: every commit's "now" is the same.
    let app = app().await;
    let mut commits = Vec::new();
    for (k, text) in ["user: a\n", "user: b\n", "user: c\n"]
        .into_iter()
        .enumerate()
    {
        let mut c = checkpoint_body(text, None);
        c["principal"] = json!("batcher");
        c.as_object_mut().unwrap().remove("created_at");
        if k > 0 {
            c["parent_in_batch"] = json!(k - 1);
        }
        commits.push(c);
    }
    let (s, v) = call(&app, "POST", "/v1/batch", Some(json!({"commits": commits}))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let times: Vec<chrono::DateTime<chrono::Utc>> = v["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["created_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "each later than the one before: {times:?}"
    );
    // So "what did batcher know at the last time" is the last commit.
    let at = times[2].to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let (s, r) = call(
        &app,
        "GET",
        &format!(
            "/v1/resolve?principal=batcher&at={}",
            at.replace('+', "%2B")
        ),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["id"], v["commits"][2]["id"], "{r}");
}
