//! The `branch` function driven with API Gateway v2 events on the aws
//! backends (emulator): the principal comes from the JWT's `sub`, so strict
//! validation separates two agents of one tenant; and creations sent
//! concurrently to two function instances (two services, two DynamoDB
//! clients, as two Lambdas would be) hit the session limit exactly.

use std::sync::Arc;

use ctx_core::SystemClock;
use ctx_core::bootstrap::Backends;
use ctx_core::branch::RateLimits;
use ctx_core::config::Config;
use ctx_lambda::{Function, JwtClaimsAuth, app};
use serde_json::{Value, json};

#[path = "support/apigw.rs"]
mod apigw;

const BASE_EVENT: &str = include_str!("../../../tests/data/apigw/base-event.json");

fn event(method: &str, uri: &str, tenant: &str, sub: &str, body: &Value) -> String {
    use base64::Engine as _;
    let mut e: Value = serde_json::from_str(BASE_EVENT).unwrap();
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    e["routeKey"] = json!(format!("{method} {path}"));
    e["rawPath"] = json!(path);
    e["rawQueryString"] = json!(query);
    e["requestContext"]["http"]["method"] = json!(method);
    e["requestContext"]["http"]["path"] = json!(path);
    e["requestContext"]["authorizer"]["jwt"]["claims"]["tenant"] = json!(tenant);
    e["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(sub);
    e["body"] = json!(if body.is_null() {
        String::new()
    } else {
        base64::engine::general_purpose::STANDARD.encode(body.to_string())
    });
    e.to_string()
}

async fn invoke(app: &axum::Router, event: String) -> (u16, Option<String>, Value) {
    let resp = apigw::invoke(app, &event).await.answered();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = resp.into_body();
    (
        status,
        retry,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// One instance of the `branch` function, built as `ctx_lambda::run` builds
/// it (no branch timer on the emulator: deadlines are not enforced here).
async fn function(config: &Config) -> axum::Router {
    let mut config = config.clone();
    config.branching.limits = RateLimits {
        active_per_session: 10,
        active_per_tenant: 100,
        creations_per_minute: 1000,
    };
    config.branch_timer_arn = None;
    let service = Backends::build(&config, Function::Branch.needs())
        .await
        .unwrap()
        .into_service(Arc::new(SystemClock));
    app(
        Function::Branch,
        Arc::new(service),
        Arc::new(JwtClaimsAuth::new("tenant")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_branch_function_on_the_aws_backends() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let (a, b) = (function(&config).await, function(&config).await);
    let tenant = ctx_core::store::conformance::fresh_tenant("fnbranch").to_string();
    let create = |session: &str, sub: &str| {
        event(
            "POST",
            "/v1/branches",
            &tenant,
            sub,
            &json!({"session_id": session, "description": "look"}),
        )
    };
    let (s, _, created) = invoke(&a, create("s1", "agent-7")).await;
    assert_eq!(s, 201, "{created}");
    let id = created["branch_id"].as_str().unwrap();
    let status = |sub: &str| {
        event(
            "GET",
            &format!("/v1/branches/{id}"),
            &tenant,
            sub,
            &Value::Null,
        )
    };
    assert_eq!(invoke(&b, status("agent-7")).await.0, 200);
    assert_eq!(
        invoke(&b, status("agent-8")).await.0,
        404,
        "another principal"
    );
    let (s, _, r) = invoke(
        &b,
        event(
            "POST",
            &format!("/v1/branches/{id}/return"),
            &tenant,
            "agent-7",
            &json!({"message": "done"}),
        ),
    )
    .await;
    assert_eq!((s, r["success"].clone()), (200, json!(true)), "{r}");
    let (s, _, _) = invoke(
        &a,
        event(
            "GET",
            "/v1/branches?session_id=s1",
            &tenant,
            "agent-7",
            &Value::Null,
        ),
    )
    .await;
    assert_eq!(s, 200);
    // 16 concurrent creations in one session, alternating between the two
    // function instances: exactly 10 (the session limit) succeed.
    let results = futures::future::join_all((0..16).map(|i| {
        let app = if i % 2 == 0 { a.clone() } else { b.clone() };
        let e = create("race", "agent-7");
        async move { invoke(&app, e).await }
    }))
    .await;
    let ok = results.iter().filter(|r| r.0 == 201).count();
    let limited: Vec<_> = results.iter().filter(|r| r.0 == 429).collect();
    assert_eq!((ok, limited.len()), (10, 6), "{results:?}");
    assert!(limited.iter().all(|r| r.1.as_deref() == Some("5")));
    let (s, _, e) = invoke(
        &a,
        event(
            "POST",
            "/v1/sessions/race/end",
            &tenant,
            "agent-8",
            &Value::Null,
        ),
    )
    .await;
    assert_eq!(s, 404, "another principal cannot end it: {e}");
    let (s, _, e) = invoke(
        &a,
        event(
            "POST",
            "/v1/sessions/race/end",
            &tenant,
            "agent-7",
            &Value::Null,
        ),
    )
    .await;
    assert_eq!(
        (s, e["returned"].as_array().map(Vec::len)),
        (200, Some(10)),
        "{e}"
    );
}
