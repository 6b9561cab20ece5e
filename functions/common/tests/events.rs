//! The Lambda handlers driven with API Gateway v2 (HTTP API) events: the
//! fixtures in tests/data/apigw, the shared bad-input table (which must give
//! the same bodies as `ctx serve`), and a checkpoint → show → materialize run
//! over the aws backends on the emulator.

use std::sync::Arc;

use axum::Router;
use ctx_core::api::testing::{self, Call};
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{TokenAuth, token_hash};
use ctx_core::store::TokenStore;
use ctx_lambda::{Function, JwtClaimsAuth, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "support/apigw.rs"]
mod apigw;

const CHECKPOINT_ROOT: &str = include_str!("../../../tests/data/apigw/checkpoint-root.json");
const BATCH_ROOT: &str = include_str!("../../../tests/data/apigw/batch-root.json");
const SHOW_UNKNOWN: &str = include_str!("../../../tests/data/apigw/show-unknown.json");
const RESOLVE_NO_CLAIMS: &str = include_str!("../../../tests/data/apigw/resolve-no-claims.json");
const UI_PAGE: &str = include_str!("../../../tests/data/apigw/ui-page.json");
const UI_SCRIPT: &str = include_str!("../../../tests/data/apigw/ui-script.json");

/// Every function's router over one service, as API Gateway would route.
struct Functions {
    routers: Vec<(&'static str, Router)>,
}

impl Functions {
    fn new(service: Arc<ctx_core::Service>) -> Self {
        let auth: Arc<JwtClaimsAuth> = Arc::new(JwtClaimsAuth::new("tenant"));
        let routers = Function::ALL
            .iter()
            .filter(|f| !f.is_invoked())
            .map(|f| (f.name(), app(*f, service.clone(), auth.clone())))
            .collect();
        Functions { routers }
    }

    /// Sends an event to the function that serves its route (an unrouted
    /// event gets the routers' common 404, as from any of them).
    async fn invoke(&self, event: &str) -> (u16, Vec<u8>, &'static str) {
        let mut last = None;
        for (name, r) in &self.routers {
            let resp = apigw::invoke(r, event).await.answered();
            let status = resp.status().as_u16();
            let body = resp.into_body().to_vec();
            let unrouted = status == 404
                && serde_json::from_slice::<Value>(&body).is_ok_and(|v| {
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("route "))
                });
            if !unrouted {
                return (status, body, name);
            }
            last = Some((status, body, "none"));
        }
        last.expect("there are functions")
    }
}

/// An API Gateway v2 event for `call`, built from the base fixture.
fn event(call: &Call) -> String {
    apigw::event(call).to_string()
}

#[tokio::test]
async fn bad_input_gets_the_same_bodies_as_embedded_mode() {
    // Embedded: ctx serve's router with bearer tokens.
    let (service, meta) = testing::memory_service();
    for t in [testing::TENANT_A, testing::TENANT_B] {
        meta.add_token(
            &token_hash(t),
            &t.parse().unwrap(),
            ctx_core::store::conformance::t(0),
        )
        .await
        .unwrap();
    }
    let embedded_app = router(
        AppState {
            service: Arc::new(service),
            auth: Arc::new(TokenAuth::new(meta)),
        },
        Group::ALL,
    );
    let embedded = testing::bad_input_table(|c| {
        let app = embedded_app.clone();
        async move {
            let mut req = axum::http::Request::builder()
                .method(c.method.as_str())
                .uri(&c.uri);
            if let Some(t) = &c.tenant {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let resp = app
                .oneshot(req.body(axum::body::Body::from(c.body)).unwrap())
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (
                status,
                resp.into_body()
                    .collect()
                    .await
                    .unwrap()
                    .to_bytes()
                    .to_vec(),
            )
        }
    })
    .await;

    // Lambda: the same calls as API Gateway events, tenant from JWT claims.
    let (service, _) = testing::memory_service();
    let functions = Functions::new(Arc::new(service));
    let lambda = testing::bad_input_table(|c| {
        let ev = event(&c);
        let f = &functions;
        async move {
            let (status, body, _) = f.invoke(&ev).await;
            (status, body)
        }
    })
    .await;
    assert_eq!(embedded.len(), lambda.len());
    for (e, l) in embedded.iter().zip(&lambda) {
        assert_eq!(e, l, "the Lambda path answers differently");
    }
}

#[tokio::test]
async fn fixtures_reach_the_right_function_with_the_right_answers() {
    let (service, _) = testing::memory_service();
    let functions = Functions::new(Arc::new(service));

    let (status, body, f) = functions.invoke(CHECKPOINT_ROOT).await;
    assert_eq!(
        (status, f),
        (201, "checkpoint"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let commit: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(commit["principal"], "agent-7");
    assert_eq!(commit["artifact_size"], 26);
    // The same event again: idempotent.
    let (status, again, _) = functions.invoke(CHECKPOINT_ROOT).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&again).unwrap()["id"],
        commit["id"]
    );

    // A batch: served by the checkpoint function; the same event again
    // answers the same.
    let (status, body, f) = functions.invoke(BATCH_ROOT).await;
    assert_eq!(
        (status, f),
        (201, "checkpoint"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let batch: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(batch["commits"][1]["parent"], batch["commits"][0]["id"]);
    assert_eq!(batch["refs"][0]["target"], batch["commits"][1]["id"]);
    let (status, again, _) = functions.invoke(BATCH_ROOT).await;
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_slice::<Value>(&again).unwrap(), batch);

    let (status, body, f) = functions.invoke(SHOW_UNKNOWN).await;
    assert_eq!((status, f), (404, "history"));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["kind"],
        "not_found"
    );

    let (status, body, f) = functions.invoke(RESOLVE_NO_CLAIMS).await;
    assert_eq!((status, f), (401, "resolve"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["kind"], "unauthenticated");
    assert_eq!(v["error"]["field"], "authorization");

    // The context browser's pages: from the history function, without a
    // token (the events carry no authorizer), the same bytes as `ctx serve`.
    let (status, body, f) = functions.invoke(UI_PAGE).await;
    assert_eq!((status, f), (200, "history"));
    assert!(
        String::from_utf8(body)
            .unwrap()
            .contains("/ui/assets/app.js")
    );
    let (status, body, f) = functions.invoke(UI_SCRIPT).await;
    assert_eq!((status, f), (200, "history"));
    assert!(
        String::from_utf8(body)
            .unwrap()
            .contains("ctx context browser")
    );
}

#[tokio::test]
async fn a_chain_through_the_functions_on_the_aws_backends() {
    use ctx_core::bootstrap::{Backends, Needs};
    let Some(config) = ctx_core::config::Config::emulator_from_env() else {
        return;
    };
    let service = Backends::build(&config, Needs::default())
        .await
        .unwrap()
        .into_service(Arc::new(ctx_core::SystemClock));
    let functions = Functions::new(Arc::new(service));
    let tenant = ctx_core::store::conformance::fresh_tenant("lambda").to_string();
    let call = |method: &str, uri: String, body: Value| Call {
        method: method.into(),
        uri,
        tenant: Some(tenant.clone()),
        body: body.to_string().into_bytes(),
    };
    let (s, b, _) = functions
        .invoke(&event(&call(
            "POST",
            "/v1/commits".into(),
            testing::checkpoint_body("one\n", None),
        )))
        .await;
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    let root: Value = serde_json::from_slice(&b).unwrap();
    let root_id = root["id"].as_str().unwrap();
    let (s, b, _) = functions
        .invoke(&event(&call(
            "POST",
            "/v1/commits".into(),
            testing::checkpoint_body("two\n", Some(root_id)),
        )))
        .await;
    assert_eq!(s, 201);
    let tip: Value = serde_json::from_slice(&b).unwrap();
    let tip_id = tip["id"].as_str().unwrap();
    let (s, b, f) = functions
        .invoke(&event(&call(
            "POST",
            format!("/v1/commits/{tip_id}/materialize"),
            json!({"stop": "root"}),
        )))
        .await;
    assert_eq!(
        (s, f),
        (200, "materialize"),
        "{}",
        String::from_utf8_lossy(&b)
    );
    let m: Value = serde_json::from_slice(&b).unwrap();
    let (s, bytes, f) = functions
        .invoke(&event(&Call {
            method: "GET".into(),
            uri: format!("/v1/artifacts/{}", m["artifact_ref"].as_str().unwrap()),
            tenant: Some(tenant.clone()),
            body: vec![],
        }))
        .await;
    assert_eq!((s, f, bytes), (200, "checkpoint", b"one\ntwo\n".to_vec()));
    let (s, b, f) = functions
        .invoke(&event(&Call {
            method: "GET".into(),
            uri: format!("/v1/commits/{tip_id}/history?depth=5"),
            tenant: Some(tenant.clone()),
            body: vec![],
        }))
        .await;
    assert_eq!((s, f), (200, "history"));
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["commits"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
