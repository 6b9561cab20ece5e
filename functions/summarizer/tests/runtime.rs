//! The real `summarizer` binary under a Lambda Runtime API served by the
//! test, on the emulator in a table of its own: it receives the EventBridge
//! scheduled-event fixture with the deadline the runtime announces
//! (`Lambda-Runtime-Deadline-Ms`), summarizes every commit lacking a
//! summary and answers the batch report; a deadline already within the
//! margin claims nothing; any other event is answered with an error.

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::config::Config;
use ctx_core::store::conformance::{commit, fresh_tenant, t};
use ctx_core::{Clock, SystemClock};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[path = "../../common/tests/support/table.rs"]
mod table;

const SCHEDULED: &str = include_str!("../../../tests/data/eventbridge/scheduled-event.json");

/// One invocation: the event and the deadline the runtime announces.
type Invocation = (Value, chrono::DateTime<chrono::Utc>);

#[derive(Clone)]
struct Runtime {
    invocations: Arc<Mutex<VecDeque<Invocation>>>,
    responses: mpsc::UnboundedSender<Value>,
}

async fn next(State(rt): State<Runtime>) -> (HeaderMap, String) {
    let next = rt.invocations.lock().unwrap().pop_front();
    let Some((event, deadline)) = next else {
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
        HeaderValue::from_str(&deadline.timestamp_millis().to_string()).unwrap(),
    );
    h.insert(
        "lambda-runtime-invoked-function-arn",
        HeaderValue::from_static("arn:aws:lambda:us-east-1:123456789012:function:summarizer"),
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
    let _ = rt.responses.send(json!({ "runtime_error": body }));
    "{}"
}

/// Runs the binary on `config`'s table for `invocations`, one after the
/// other, and returns its answers in order.
async fn run_binary(config: &Config, invocations: Vec<Invocation>) -> Vec<Value> {
    let n = invocations.len();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let rt = Runtime {
        invocations: Arc::new(Mutex::new(invocations.into())),
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_summarizer"))
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "summarizer")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
        .env("CTX_TABLE", config.table.as_deref().unwrap())
        .env("CTX_SUMMARIZER", "extractive")
        .env_remove("CTX_BRANCH_TIMER_ARN")
        .stdout(Stdio::null())
        .spawn()
        .expect("the summarizer binary starts");
    let mut out = Vec::new();
    for _ in 0..n {
        let answer = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the summarizer answered in time")
            .expect("an answer");
        out.push(answer);
    }
    let _ = child.kill();
    let _ = child.wait();
    server.abort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_summarizes_on_the_scheduled_event() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let config = Config {
        branch_timer_arn: None,
        ..table::own_table(&config).await
    };
    let service = Backends::build(&config, Needs::default())
        .await
        .unwrap()
        .into_service(Arc::new(SystemClock));
    let stores = service.stores();
    let mut commits = Vec::new();
    for tenant in [fresh_tenant("bin-a"), fresh_tenant("bin-b")] {
        let body = format!("user: what does {tenant} need?\n");
        stores
            .blobs
            .put(&tenant, bytes::Bytes::from(body.clone()))
            .await
            .unwrap();
        let c = commit(&tenant, None, t(0), "agent", body.as_bytes());
        stores.meta.put_commit(&tenant, &c, None).await.unwrap();
        commits.push((tenant, c.id));
    }
    let scheduled: Value = serde_json::from_str(SCHEDULED).unwrap();
    let now = SystemClock.now();
    let answers = run_binary(
        &config,
        vec![
            (
                json!({"detail-type": "Object Created", "source": "aws.s3"}),
                now + chrono::Duration::seconds(300),
            ),
            (scheduled.clone(), now + chrono::Duration::seconds(5)),
            (scheduled.clone(), now + chrono::Duration::seconds(300)),
            (scheduled, now + chrono::Duration::seconds(300)),
        ],
    )
    .await;
    let refused = answers[0]["runtime_error"].as_str().unwrap_or_default();
    assert!(refused.contains("EventBridge schedule"), "{}", answers[0]);
    assert_eq!(answers[1]["deadline_reached"], true, "{}", answers[1]);
    assert_eq!(answers[1]["summarized"], 0, "{}", answers[1]);
    assert_eq!(answers[2]["summarized"], 2, "{}", answers[2]);
    assert_eq!(answers[2]["deadline_reached"], false, "{}", answers[2]);
    assert_eq!(answers[3]["summarized"], 0, "{}", answers[3]);
    assert_eq!(answers[3]["calls"], 0, "{}", answers[3]);
    for (tenant, id) in &commits {
        let c = service.show(tenant, id).await.unwrap();
        assert!(c.summary.is_some(), "{id}");
        assert_eq!(
            c.tags
                .get(ctx_core::store::TAG_SUMMARY_BY)
                .map(String::as_str),
            Some("extractive:v1")
        );
    }
}
