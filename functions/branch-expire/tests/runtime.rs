//! The real `branch-expire` binary under a Lambda Runtime API served by the
//! test: it receives exactly the event the branch-timer state machine's
//! Task sends (`Payload.$: "$"`, the execution input [`TimerInput`] that
//! `SfnTimer` starts executions with), expires the branch in DynamoDB on
//! the emulator, and answers `{"outcome": "timed_out"}`; a second delivery
//! answers `already_ended`.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use ctx_core::SystemClock;
use ctx_core::auth::Caller;
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::branch::NewBranch;
use ctx_core::config::Config;
use ctx_core::store::aws::sfn::TimerInput;
use serde_json::Value;
use tokio::sync::mpsc;

#[derive(Clone)]
struct Runtime {
    events: Arc<Mutex<Vec<Value>>>,
    responses: mpsc::UnboundedSender<Value>,
}

async fn next(State(rt): State<Runtime>) -> (HeaderMap, String) {
    let event = rt.events.lock().unwrap().pop();
    let Some(event) = event else {
        // No more invocations: keep the runtime waiting.
        std::future::pending::<()>().await;
        unreachable!()
    };
    let mut h = HeaderMap::new();
    h.insert(
        "lambda-runtime-aws-request-id",
        HeaderValue::from_static("req-1"),
    );
    h.insert(
        "lambda-runtime-deadline-ms",
        HeaderValue::from_static("9999999999999"),
    );
    h.insert(
        "lambda-runtime-invoked-function-arn",
        HeaderValue::from_static("arn:aws:lambda:us-east-1:123456789012:function:branch-expire"),
    );
    (h, event.to_string())
}

async fn response(
    State(rt): State<Runtime>,
    Path(_id): Path<String>,
    body: String,
) -> &'static str {
    let v = serde_json::from_str(&body).unwrap_or(Value::String(body));
    let _ = rt.responses.send(v);
    "{}"
}

async fn error(State(rt): State<Runtime>, body: String) -> &'static str {
    let _ = rt
        .responses
        .send(serde_json::json!({ "runtime_error": body }));
    "{}"
}

async fn invoke_binary(event: Value) -> Value {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let rt = Runtime {
        events: Arc::new(Mutex::new(vec![event])),
        responses: tx,
    };
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(error))
        .with_state(rt);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let mut child = Command::new(env!("CARGO_BIN_EXE_branch-expire"))
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "branch-expire")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
        .env_remove("CTX_BRANCH_TIMER_ARN")
        .stdout(Stdio::null())
        .spawn()
        .expect("the branch-expire binary starts");
    let out = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("branch-expire answered in time")
        .expect("a response");
    let _ = child.kill();
    let _ = child.wait();
    server.abort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_expires_a_branch_from_the_state_machines_event() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    // No branch timer: the test delivers the deadline itself.
    let config = Config {
        branch_timer_arn: None,
        ..config
    };
    let service = Backends::build(&config, Needs::FOLDING)
        .await
        .unwrap()
        .into_service(Arc::new(SystemClock));
    let caller = Caller {
        tenant: ctx_core::store::conformance::fresh_tenant("expire"),
        principal: Some("agent".into()),
    };
    let b = service
        .branch_create(
            &caller,
            NewBranch {
                session_id: "s".parse().unwrap(),
                description: "slow".into(),
                prompt: None,
                budget: None,
                timeout_seconds: Some(1),
                parent_branch: None,
                inject_memories: false,
            },
        )
        .await
        .unwrap();
    // The Wait state ends at the deadline (rounded up to the second).
    let input = TimerInput::new(&caller.tenant, &b.branch_id, b.deadline);
    let due: chrono::DateTime<chrono::Utc> = input.deadline.parse().unwrap();
    while ctx_core::Clock::now(&SystemClock) < due {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let event = serde_json::to_value(&input).unwrap();
    let out = invoke_binary(event.clone()).await;
    assert_eq!(out["outcome"], "timed_out", "{out}");
    let st = service.branch_status(&caller, &b.branch_id).await.unwrap();
    assert_eq!(st.record.status.as_str(), "timeout");
    let again = invoke_binary(event).await;
    assert_eq!(again["outcome"], "already_ended", "{again}");
}
