//! Router tests of the summary routes: `GET /v1/commits?missing_summary=true`
//! and `POST /v1/commits/{ctx}/summarize`, over memory stores with a
//! counting summarizer (and without one).

use std::sync::Arc;

use axum::body::Body as AxBody;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::api::testing::checkpoint_body;
use crate::auth::{TokenAuth, token_hash};
use crate::clock::{Clock as _, ManualClock};
use crate::store::conformance::summary_batch::CountingSummarizer;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{Stores, TokenStore};

const TOKEN: &str = "token-acme";

async fn app(with_summarizer: bool) -> Router {
    let meta = Arc::new(MemoryMetaStore::new());
    let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
    meta.add_token(&token_hash(TOKEN), &"acme".parse().unwrap(), clock.now())
        .await
        .unwrap();
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: meta.clone(),
    };
    let mut service = Service::new(stores, clock);
    if with_summarizer {
        service = service.with_summarizer(Arc::new(CountingSummarizer::new()));
    }
    let state = AppState {
        service: Arc::new(service),
        auth: Arc::new(TokenAuth::new(meta)),
    };
    router(state, Group::ALL)
}

async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(AxBody::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        ))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn checkpoints(app: &Router, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let mut body = checkpoint_body(&format!("delta {i}"), ids.last().map(String::as_str));
        body["created_at"] = json!(format!("2026-11-22T10:00:0{i}Z"));
        let (s, c) = call(app, "POST", "/v1/commits", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        ids.push(c["id"].as_str().unwrap().to_owned());
    }
    ids
}

#[tokio::test]
async fn missing_summaries_are_listed_in_pages_with_their_state() {
    let app = app(true).await;
    let ids = checkpoints(&app, 3).await;
    let (s, page) = call(
        &app,
        "GET",
        "/v1/commits?missing_summary=true&limit=2",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let listed: Vec<&str> = page["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [ids[0].as_str(), ids[1].as_str()]);
    assert_eq!(page["commits"][0]["summary_state"]["attempts"], 0);
    let cursor = page["next_cursor"].as_str().unwrap();
    let (s, page) = call(
        &app,
        "GET",
        &format!("/v1/commits?missing_summary=true&limit=2&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["commits"][0]["id"], ids[2].as_str());
    assert!(page.get("next_cursor").is_none(), "{page}");
}

#[tokio::test]
async fn bad_listing_parameters_are_400s_naming_them() {
    let app = app(true).await;
    for (uri, field) in [
        ("/v1/commits", "missing_summary"),
        ("/v1/commits?missing_summary=false", "missing_summary"),
        ("/v1/commits?missing_summary=yes", "missing_summary"),
        ("/v1/commits?missing_summary=true&limit=0", "limit"),
        ("/v1/commits?missing_summary=true&limit=1001", "limit"),
        ("/v1/commits?missing_summary=true&limit=-1", "limit"),
        ("/v1/commits?missing_summary=true&cursor=nope", "cursor"),
        ("/v1/commits?missing_summary=true&cursor=1.ctx-zz", "cursor"),
    ] {
        let (s, e) = call(&app, "GET", uri, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {e}");
        assert_eq!(e["error"]["field"], field, "{uri}: {e}");
    }
}

#[tokio::test]
async fn summarize_writes_a_summary_then_refuses_without_force() {
    let app = app(true).await;
    let ids = checkpoints(&app, 1).await;
    let uri = format!("/v1/commits/{}/summarize", ids[0]);
    let (s, c) = call(&app, "POST", &uri, Some(json!({}))).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["summary"], "summary of delta 0");
    assert_eq!(c["tags"]["summary_by"], "counting:v1");
    let (s, e) = call(&app, "POST", &uri, Some(json!({}))).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert_eq!(e["error"]["field"], "force");
    let (s, _) = call(&app, "POST", &uri, Some(json!({"force": true}))).await;
    assert_eq!(s, StatusCode::OK);
    let (s, e) = call(&app, "POST", &uri, Some(json!({"force": "yes"}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, e) = call(&app, "POST", &uri, Some(json!({"forse": true}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, page) = call(&app, "GET", "/v1/commits?missing_summary=true", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["commits"], json!([]));
    let (s, _) = call(
        &app,
        "POST",
        "/v1/commits/ctx-00000000000000000000000000000000/summarize",
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn summarize_without_a_summarizer_is_503() {
    let app = app(false).await;
    let ids = checkpoints(&app, 1).await;
    let (s, e) = call(
        &app,
        "POST",
        &format!("/v1/commits/{}/summarize", ids[0]),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no summarizer"),
        "{e}"
    );
}

#[tokio::test]
async fn compact_records_a_compaction_the_new_tip_materializes_from() {
    let app = app(true).await;
    let (st, c1) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("one\n", None)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{c1}");
    let first = c1["id"].as_str().unwrap();
    let (_, c2) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("two\n", Some(first))),
    )
    .await;
    let tip = c2["id"].as_str().unwrap();
    call(&app, "PUT", "/v1/refs/main", Some(json!({"target": tip}))).await;

    // An unknown summarizer: 400 naming the field, nothing written.
    let (st, body) = call(
        &app,
        "POST",
        &format!("/v1/commits/{tip}/compact"),
        Some(json!({"summarizer": "gpt-9"})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["field"], "summarizer");

    // The configured one, moving main by compare-and-swap.
    let (st, done) = call(
        &app,
        "POST",
        &format!("/v1/commits/{tip}/compact"),
        Some(json!({"ref": {"name": "main", "expected": tip}})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{done}");
    let new = done["commit"]["id"].as_str().unwrap();
    assert_eq!(done["commit"]["parent"], tip);
    assert_eq!(done["commit"]["commit_type"], "compaction");
    assert_eq!(done["commit"]["tags"]["compacted_by"], "counting:v1");
    assert!(done["replaced_tokens"].as_u64().unwrap() > 0, "{done}");
    let (_, main) = call(&app, "GET", "/v1/refs/main", None).await;
    assert_eq!(main["target"], new);

    // The same ref move again is stale: 409, main stays.
    let (st, _) = call(
        &app,
        "POST",
        &format!("/v1/commits/{tip}/compact"),
        Some(json!({"summarizer": "extractive", "ref": {"name": "main", "expected": tip}})),
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT);

    // From the new tip: the summary alone, ending its line; from the root:
    // the original.
    let (_, latest) = call(
        &app,
        "POST",
        &format!("/v1/commits/{new}/materialize"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        download(&app, &latest).await,
        format!("{}\n", done["commit"]["summary"].as_str().unwrap()).as_bytes()
    );
    let (_, root) = call(
        &app,
        "POST",
        &format!("/v1/commits/{new}/materialize"),
        Some(json!({"stop": "root"})),
    )
    .await;
    assert_eq!(download(&app, &root).await, b"one\ntwo\n");
}

/// The bytes of a materialization's artifact.
async fn download(app: &Router, materialized: &Value) -> Vec<u8> {
    let art = materialized["artifact_ref"].as_str().unwrap();
    let req = Request::builder()
        .uri(format!("/v1/artifacts/{art}"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(AxBody::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    resp.into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec()
}

#[tokio::test]
async fn compact_without_a_summarizer_is_503_unless_extractive_is_named() {
    let app = app(false).await;
    let (_, c) = call(
        &app,
        "POST",
        "/v1/commits",
        Some(checkpoint_body("one\n", None)),
    )
    .await;
    let id = c["id"].as_str().unwrap();
    let (st, _) = call(
        &app,
        "POST",
        &format!("/v1/commits/{id}/compact"),
        Some(json!({})),
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    let (st, done) = call(
        &app,
        "POST",
        &format!("/v1/commits/{id}/compact"),
        Some(json!({"summarizer": "extractive"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{done}");
    assert_eq!(done["commit"]["tags"]["compacted_by"], "extractive:v1");
}
