//! `ctx serve` exporting over OTLP/HTTP to a collector on 127.0.0.1 (this
//! test's receiver): the span tree of one checkpoint (the operation's span,
//! the store calls as its children, no content) and its metrics, on the
//! local store and, with the emulator, on the aws store (the SDK's spans of
//! its DynamoDB and S3 requests).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use ctx_tests::Server;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;

/// What the collector was sent: (path, body), in order.
type Received = Arc<Mutex<Vec<(String, Bytes)>>>;

/// An OTLP/HTTP receiver on 127.0.0.1: its base URL and what it got.
async fn collector() -> (String, Received) {
    let got: Received = Arc::default();
    async fn keep(State(got): State<Received>, uri: axum::http::Uri, body: Bytes) -> &'static str {
        got.lock().unwrap().push((uri.path().to_owned(), body));
        ""
    }
    let app = Router::new()
        .route("/v1/traces", post(keep))
        .route("/v1/metrics", post(keep))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

/// A server (`ctx serve` on a new data directory, by `start`) exporting to
/// a new collector: batches sent at once. `None` when `start` says so (the
/// emulator is not expected here).
async fn exporting(
    start: impl FnOnce(&std::path::Path, &[(&str, &str)]) -> Option<Server>,
) -> Option<(Server, Received, tempfile::TempDir)> {
    let (url, got) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
    ];
    let server = start(&dir.path().join("data"), &env)?;
    Some((server, got, dir))
}

/// Every export request posted to `path`, decoded.
fn received<M: prost::Message + Default>(got: &Received, path: &str) -> Vec<M> {
    let got = got.lock().unwrap();
    got.iter()
        .filter(|(p, _)| p == path)
        .map(|(_, b)| M::decode(b.clone()).expect("a protobuf export request"))
        .collect()
}

/// Every span received, in order.
fn spans(got: &Received) -> Vec<Span> {
    received::<ExportTraceServiceRequest>(got, "/v1/traces")
        .into_iter()
        .flat_map(|r| r.resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|a| a.key == key).map(|a| text(&a.value))
}

/// Waits until `ready` holds of what was received.
async fn until(got: &Received, what: &str, ready: impl Fn(&Received) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(got) {
        assert!(Instant::now() < deadline, "the collector never got {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The checkpoint every test writes: its delta carries `secret`.
fn checkpoint_body(secret: &str) -> serde_json::Value {
    json!({
        "commit_type": "delta",
        "format": "openai-chat-v1",
        "delta": json!([{ "role": "user", "content": secret }]).to_string(),
        "template": "telemetry",
        "principal": "otel-agent",
        "checkpoint": "turn_boundary",
        "ref": { "name": "sessions/otel", "expected": null },
    })
}

/// One checkpoint's span tree as the collector received it: its root (the
/// operation) and the root's children.
async fn checkpoint_tree(server: &Server, got: &Received, secret: &str) -> (Span, Vec<Span>) {
    let http = server.client();
    let c = http
        .ok("POST", "/v1/commits", Some(&checkpoint_body(secret)))
        .await;
    assert!(c["id"].as_str().is_some(), "{c}");
    until(got, "the checkpoint's span", |g| {
        spans(g).iter().any(|s| s.name == "checkpoint")
    })
    .await;
    // Its children end before it, so they were exported with it or before.
    let all = spans(got);
    let root = all
        .iter()
        .find(|s| s.name == "checkpoint")
        .cloned()
        .expect("a checkpoint span");
    let children = all
        .iter()
        .filter(|s| s.parent_span_id == root.span_id)
        .cloned()
        .collect::<Vec<_>>();
    // The tree, for whoever reads the test's output.
    eprintln!("{} ({} µs)", root.name, micros(&root));
    for c in &children {
        eprintln!("  {} ({} µs)", c.name, micros(c));
    }
    assert_no_content(got, secret);
    (root, children)
}

/// Nothing any request held went out: not in a span, not in a metric.
fn assert_no_content(got: &Received, secret: &str) {
    for (path, body) in got.lock().unwrap().iter() {
        assert!(
            !body.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{path} carried the checkpoint's content"
        );
    }
}

fn micros(s: &Span) -> u64 {
    s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano) / 1000
}

/// The root span's attributes: the operation, who called, the sizes.
fn assert_operation(root: &Span, principal_known: bool) {
    assert!(root.parent_span_id.is_empty(), "the operation is the root");
    assert_eq!(attr(&root.attributes, "op").as_deref(), Some("checkpoint"));
    assert_eq!(
        attr(&root.attributes, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attr(&root.attributes, "http.response.status_code").as_deref(),
        Some("201")
    );
    let asked: u64 = attr(&root.attributes, "http.request.body.size")
        .expect("the request's size")
        .parse()
        .unwrap();
    assert!(asked > 0);
    assert!(
        attr(&root.attributes, "http.response.body.size").is_some(),
        "the answer's size: {:?}",
        root.attributes
    );
    assert!(
        attr(&root.attributes, "tenant").is_some_and(|t| !t.is_empty()),
        "{:?}",
        root.attributes
    );
    if principal_known {
        assert!(attr(&root.attributes, "principal").is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_is_one_span_with_its_store_calls_as_children_and_its_metrics() {
    let (server, got, _dir) = exporting(|data, env| Some(Server::start_env(data, &[], env)))
        .await
        .expect("a local server");
    let secret = "the-launch-code-is-7781";
    let (root, children) = checkpoint_tree(&server, &got, secret).await;
    assert_operation(&root, true);
    assert_eq!(
        attr(&root.attributes, "tenant").as_deref(),
        Some("default"),
        "the data directory's token is the default tenant's"
    );
    let names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"sqlite transaction"),
        "the commit's write is a child: {names:?}"
    );
    assert!(
        names.contains(&"sqlite lookup"),
        "the parent and ref lookups are children: {names:?}"
    );
    for child in &children {
        assert_eq!(child.trace_id, root.trace_id);
        assert!(child.start_time_unix_nano >= root.start_time_unix_nano);
        assert!(child.end_time_unix_nano <= root.end_time_unix_nano);
        assert_eq!(
            attr(&child.attributes, "db.system.name").as_deref(),
            Some(if child.name.starts_with("file") {
                "file"
            } else {
                "sqlite"
            }),
        );
    }

    // A read of the session: its own span, and a materialization's size.
    let read = server
        .client()
        .ok("POST", "/v1/read", Some(&json!({ "ref": "sessions/otel" })))
        .await;
    let size = read["size"].as_u64().expect("the context's size");

    // The metrics: the checkpoint counted for its tenant, the operation's
    // duration in the histogram, named by its id, the context's size.
    until(
        &got,
        "the checkpoint counter, the duration and the size",
        |g| {
            let m = metrics(g);
            m.iter().any(|(n, _)| n == "ctx.checkpoints")
                && m.iter().any(|(n, _)| n == "ctx.operation.duration")
                && m.iter().any(|(n, _)| n == "ctx.materialize.bytes")
        },
    )
    .await;
    assert!(spans(&got).iter().any(|s| s.name == "read"));
    let m = metrics(&got);
    let counted = latest(&m, "ctx.checkpoints");
    let Some(Data::Sum(sum)) = counted else {
        panic!("ctx.checkpoints is a sum: {counted:?}");
    };
    assert!(sum.is_monotonic);
    let point = &sum.data_points[0];
    assert_eq!(
        attr(&point.attributes, "tenant").as_deref(),
        Some("default")
    );
    assert_eq!(
        point.value,
        Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(1))
    );
    let durations = latest(&m, "ctx.operation.duration");
    let Some(Data::Histogram(h)) = durations else {
        panic!("ctx.operation.duration is a histogram: {durations:?}");
    };
    assert!(
        h.data_points
            .iter()
            .any(|p| attr(&p.attributes, "op").as_deref() == Some("checkpoint") && p.count == 1),
        "{h:?}"
    );
    let sizes = latest(&m, "ctx.materialize.bytes");
    let Some(Data::Histogram(h)) = sizes else {
        panic!("ctx.materialize.bytes is a histogram: {sizes:?}");
    };
    let point = &h.data_points[0];
    assert_eq!((point.count, point.sum), (1, Some(size as f64)), "{h:?}");
    assert_no_content(&got, secret);
    server.kill();
}

/// The last data received of metric `name` (cumulative: the latest is the
/// whole count).
fn latest(m: &[(String, Option<Data>)], name: &str) -> Option<Data> {
    m.iter()
        .rfind(|(n, _)| n == name)
        .and_then(|(_, d)| d.clone())
}

/// Every metric received: (name, data), in order.
fn metrics(got: &Received) -> Vec<(String, Option<Data>)> {
    received::<ExportMetricsServiceRequest>(got, "/v1/metrics")
        .into_iter()
        .flat_map(|r| r.resource_metrics)
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .map(|m| (m.name, m.data))
        .collect()
}

/// With no endpoint nothing is sent and `ctx serve` serves as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported() {
    let (url, got) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    // An empty endpoint is none; the SDK's per-signal endpoints, which name
    // this collector, do not switch the export on by themselves (were they
    // to, the spans would reach it).
    let traces = format!("{url}/v1/traces");
    let metrics = format!("{url}/v1/metrics");
    let server = Server::start_env(
        &dir.path().join("data"),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.as_str()),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", metrics.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
        ],
    );
    server
        .client()
        .ok("POST", "/v1/commits", Some(&checkpoint_body("quiet")))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(got.lock().unwrap().is_empty());
    server.kill();
}

/// On the aws store (the emulator) the store calls are the SDK's own spans
/// of each request, children of the operation's span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_aws_the_sdk_requests_are_the_checkpoint_s_children() {
    let Some((server, got, _dir)) = exporting(Server::start_aws_env).await else {
        return;
    };
    let (root, children) = checkpoint_tree(&server, &got, "aws-secret-4412").await;
    assert_operation(&root, false);
    let names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.iter().any(|n| n.starts_with("DynamoDB.")),
        "the DynamoDB requests are children: {names:?}"
    );
    for child in children.iter().filter(|s| s.name.starts_with("DynamoDB.")) {
        assert_eq!(
            attr(&child.attributes, "rpc.service").as_deref(),
            Some("DynamoDB")
        );
        assert!(attr(&child.attributes, "rpc.method").is_some());
    }
    server.kill();
}
