//! Test tables every host of the router is held to, written once: the
//! bad-input table runs against `ctx serve`'s router and through the Lambda
//! event path, and both must give the same statuses and bodies.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::clock::ManualClock;
use crate::service::{Limits, Service};
use crate::store::Stores;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};

/// The tenant most calls act for.
pub const TENANT_A: &str = "acme";
/// Another tenant.
pub const TENANT_B: &str = "other";

/// The limits the tables assume (small, so oversize cases are cheap).
pub fn limits() -> Limits {
    Limits {
        max_artifact_bytes: 4096,
        ..Limits::default()
    }
}

/// A service over fresh memory stores with a clock standing still, so that
/// ids come out the same in every host.
pub fn memory_service() -> (Service, Arc<MemoryMetaStore>) {
    let meta = Arc::new(MemoryMetaStore::new());
    let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: meta.clone(),
    };
    (Service::new(stores, clock).with_limits(limits()), meta)
}

/// The router over [`memory_service`], every group mounted, with each
/// `(token, tenant)` of `tokens` registered.
pub async fn memory_router(tokens: &[(&str, &str)]) -> axum::Router {
    let (service, meta) = memory_service();
    for (token, tenant) in tokens {
        crate::store::TokenStore::add_token(
            &*meta,
            &crate::auth::token_hash(token),
            &tenant.parse().expect("a tenant id"),
            crate::store::conformance::t(0),
        )
        .await
        .expect("a token");
    }
    let state = super::AppState {
        service: Arc::new(service),
        auth: Arc::new(crate::auth::TokenAuth::new(meta)),
    };
    super::router(state, super::Group::ALL)
}

/// One request, host-neutral: the host turns `tenant` into its credential.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// The tenant to authenticate as.
    pub tenant: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// A checkpoint body as the tables use it.
pub fn checkpoint_body(delta: &str, parent: Option<&str>) -> Value {
    let mut b = json!({
        "commit_type": "delta",
        "format": "raw",
        "template": "tpl",
        "principal": "alice",
        "checkpoint": "turn_boundary",
        "delta": delta,
        "created_at": "2026-11-22T10:00:00Z",
    });
    if let Some(p) = parent {
        b["parent"] = json!(p);
    }
    b
}

/// A bad-input case: name, method, URI, tenant, body.
type Case<'a> = (&'a str, &'a str, String, Option<&'a str>, Option<Value>);

/// Runs every bad-input case through `call` on fresh stores and returns
/// `[{case, status, body}]`. Panics unless each is a 4xx with a message, and
/// unless nothing was written.
pub async fn bad_input_table<F, Fut>(call: F) -> Vec<Value>
where
    F: Fn(Call) -> Fut,
    Fut: Future<Output = (u16, Vec<u8>)>,
{
    let json_call = |method: &str, uri: &str, tenant: Option<&str>, body: Option<Value>| {
        let c = Call {
            method: method.to_owned(),
            uri: uri.to_owned(),
            tenant: tenant.map(str::to_owned),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        };
        let fut = call(c);
        async move {
            let (status, bytes) = fut.await;
            let v: Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
            (status, v)
        }
    };
    let ok = |uri: &'static str, tenant: &'static str, body: Value| {
        let fut = json_call("POST", uri, Some(tenant), Some(body));
        async move {
            let (status, v) = fut.await;
            assert!((200..300).contains(&status), "setup {uri}: {status} {v}");
            v
        }
    };
    let root = ok("/v1/commits", TENANT_A, checkpoint_body("root", None)).await;
    let root_id = root["id"].as_str().expect("id").to_owned();
    let other_root = ok("/v1/commits", TENANT_B, checkpoint_body("theirs", None)).await;
    let other_root = other_root["id"].as_str().expect("id").to_owned();
    let mut sib_body = checkpoint_body("sibling root", None);
    sib_body["created_at"] = json!("2026-11-22T11:00:00Z");
    let sibling = ok("/v1/commits", TENANT_A, sib_body).await;
    let bad = |f: &dyn Fn(&mut Value)| {
        let mut b = checkpoint_body("BAD-DELTA", Some(&root_id));
        b["principal"] = json!("mallory");
        f(&mut b);
        Some(b)
    };
    let missing = "ctx-00000000000000000000000000000000";
    let sib = sibling["id"].as_str().expect("id");
    let cases: Vec<Case> = vec![
        (
            "malformed parent",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["parent"] = json!("ctx-zz")),
        ),
        (
            "unknown parent",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["parent"] = json!(missing)),
        ),
        (
            "parent of another tenant",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["parent"] = json!(other_root)),
        ),
        (
            "missing artifact",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| {
                b.as_object_mut().unwrap().remove("delta");
                b["artifact_ref"] = json!(crate::ArtifactRef::of(b"never stored").to_string());
            }),
        ),
        (
            "malformed artifact ref",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| {
                b.as_object_mut().unwrap().remove("delta");
                b["artifact_ref"] = json!("art-123");
            }),
        ),
        (
            "compaction without parent",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| {
                b.as_object_mut().unwrap().remove("parent");
                b["commit_type"] = json!("compaction");
            }),
        ),
        (
            "negative count",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["message_count"] = json!(-1)),
        ),
        (
            "absurd count",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["token_count"] = json!(1_000_000_000_000u64)),
        ),
        (
            "two deltas",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["delta_base64"] = json!("eA==")),
        ),
        (
            "no delta",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| {
                b.as_object_mut().unwrap().remove("delta");
            }),
        ),
        (
            "bad base64",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| {
                b.as_object_mut().unwrap().remove("delta");
                b["delta_base64"] = json!("not base64!");
            }),
        ),
        (
            "unknown commit type",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["commit_type"] = json!("merge")),
        ),
        (
            "misspelt field",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["parnet"] = json!("x")),
        ),
        (
            "empty template",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["template"] = json!("")),
        ),
        (
            "control character in principal",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["principal"] = json!("a\u{1}b")),
        ),
        (
            "session id that cannot name a session",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["session_id"] = json!("a b")),
        ),
        (
            "bad time",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["created_at"] = json!("yesterday")),
        ),
        (
            "oversized summary",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["summary"] = json!("s".repeat(20_000))),
        ),
        (
            "oversized delta",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["delta"] = json!("d".repeat(5000))),
        ),
        (
            "stale ref expectation",
            "POST",
            "/v1/commits".into(),
            Some(TENANT_A),
            bad(&|b| b["ref"] = json!({"name": "main", "expected": missing})),
        ),
        (
            "malformed id in path",
            "GET",
            "/v1/commits/ctx-12".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "unknown commit",
            "GET",
            format!("/v1/commits/{missing}"),
            Some(TENANT_A),
            None,
        ),
        (
            "stop not an ancestor",
            "POST",
            format!("/v1/commits/{root_id}/materialize"),
            Some(TENANT_A),
            Some(json!({"stop": sib})),
        ),
        (
            "unknown stop",
            "POST",
            format!("/v1/commits/{root_id}/materialize"),
            Some(TENANT_A),
            Some(json!({"stop": missing})),
        ),
        (
            "garbage stop",
            "POST",
            format!("/v1/commits/{root_id}/materialize"),
            Some(TENANT_A),
            Some(json!({"stop": "yesterday"})),
        ),
        (
            "malformed format",
            "POST",
            format!("/v1/commits/{root_id}/materialize"),
            Some(TENANT_A),
            Some(json!({"format": "OpenAI Chat"})),
        ),
        (
            "read of neither a ref nor a commit",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({})),
        ),
        (
            "read of a ref and a commit",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"ref": "main", "commit": root_id})),
        ),
        (
            "delta read of a ref with no commit",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"ref": "nowhere", "delta": true})),
        ),
        (
            "delta read of a fresh start",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": null, "delta": true})),
        ),
        (
            "read of a null ref",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"ref": null})),
        ),
        (
            "read of an unknown commit",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": missing})),
        ),
        (
            "read of another tenant's commit",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": other_root})),
        ),
        (
            "delta read from a stop that does not exist",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": root_id, "delta": true, "stop": missing})),
        ),
        (
            "read with a depth and no delta",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": root_id, "depth": 2})),
        ),
        (
            "delta read with a depth of 0",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": root_id, "delta": true, "stop": "root", "depth": 0})),
        ),
        (
            "delta read with a format",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": root_id, "delta": true, "format": "raw"})),
        ),
        (
            "read with a misspelt field",
            "POST",
            "/v1/read".into(),
            Some(TENANT_A),
            Some(json!({"commit": root_id, "stopp": "root"})),
        ),
        (
            "zero history depth",
            "GET",
            format!("/v1/commits/{root_id}/history?depth=0"),
            Some(TENANT_A),
            None,
        ),
        (
            "non-numeric history depth",
            "GET",
            format!("/v1/commits/{root_id}/history?depth=ten"),
            Some(TENANT_A),
            None,
        ),
        (
            "resolve without principal",
            "GET",
            "/v1/resolve".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "resolve with a bad time",
            "GET",
            "/v1/resolve?principal=alice&at=noon".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "resolve before anything",
            "GET",
            "/v1/resolve?principal=alice&at=2000-01-01T00:00:00Z".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "bad ref name",
            "PUT",
            "/v1/refs/a//b".into(),
            Some(TENANT_A),
            Some(json!({"target": root_id})),
        ),
        (
            "ref to a missing commit",
            "PUT",
            "/v1/refs/x".into(),
            Some(TENANT_A),
            Some(json!({"target": missing})),
        ),
        (
            "ref list limit",
            "GET",
            "/v1/refs?limit=0".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "unknown route",
            "GET",
            "/v1/nothing".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "wrong method",
            "DELETE",
            "/v1/commits".into(),
            Some(TENANT_A),
            None,
        ),
        (
            "gc limit of 0",
            "POST",
            "/v1/gc".into(),
            Some(TENANT_A),
            Some(json!({"limit": 0})),
        ),
        (
            "gc cursor no call handed out",
            "POST",
            "/v1/gc".into(),
            Some(TENANT_A),
            Some(json!({"cursor": "durable.art-zz"})),
        ),
        (
            "gc unknown field",
            "POST",
            "/v1/gc".into(),
            Some(TENANT_A),
            Some(json!({"dry_run": true, "grace_seconds": 0})),
        ),
    ];
    let mut table = Vec::new();
    for (name, method, uri, tenant, body) in cases {
        let (status, v) = json_call(method, &uri, tenant, body).await;
        assert!((400..500).contains(&status), "{name}: {status} {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{name}: {v}"
        );
        table.push(json!({"case": name, "status": status, "body": v}));
    }
    // Bodies that are not JSON, or too large for any route.
    let raw = |method: &str, uri: &str, body: Vec<u8>| {
        call(Call {
            method: method.to_owned(),
            uri: uri.to_owned(),
            tenant: Some(TENANT_A.to_owned()),
            body,
        })
    };
    for (name, method, uri, body) in [
        (
            "non-JSON body",
            "POST",
            "/v1/commits",
            b"{not json".to_vec(),
        ),
        (
            "oversize JSON body",
            "POST",
            "/v1/commits",
            vec![b' '; limits().max_json_bytes() + 1],
        ),
        (
            "oversize artifact",
            "POST",
            "/v1/artifacts",
            vec![0u8; limits().max_artifact_bytes + 1],
        ),
    ] {
        let (status, bytes) = raw(method, uri, body).await;
        let v: Value = serde_json::from_slice(&bytes).expect("error bodies are JSON");
        table.push(json!({"case": name, "status": status, "body": v}));
    }

    // Nothing was written: mallory has no commit, the bad delta is not
    // stored, no ref was made.
    let (status, _) = json_call("GET", "/v1/resolve?principal=mallory", Some(TENANT_A), None).await;
    assert_eq!(status, 404, "a bad checkpoint left a timeline entry");
    let art = crate::ArtifactRef::of(b"BAD-DELTA");
    let (status, _) = json_call("GET", &format!("/v1/artifacts/{art}"), Some(TENANT_A), None).await;
    assert_eq!(status, 404, "a bad checkpoint stored its delta");
    let (_, refs) = json_call("GET", "/v1/refs", Some(TENANT_A), None).await;
    assert_eq!(refs["refs"], json!([]), "a bad checkpoint made a ref");
    table
}
