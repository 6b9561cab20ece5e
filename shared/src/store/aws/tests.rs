//! The aws backends against an AWS emulator on 127.0.0.1 (started by
//! tests/run through localstack/emulator). With `CTX_TEST_AWS=1` a missing
//! or unreachable emulator fails; without it and without an endpoint the
//! tests say loudly that they did not run.

use std::sync::Arc;

use super::*;
use crate::store::conformance;
use crate::store::memory::MemoryMetaStore;

/// The emulator's configuration, or `None` (printed) when aws tests are
/// not expected here.
pub(crate) fn emulator() -> Option<AwsConfig> {
    let required = std::env::var("CTX_TEST_AWS").is_ok_and(|v| v == "1");
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.is_empty());
    match (endpoint, required) {
        (None, true) => panic!(
            "CTX_TEST_AWS=1 but AWS_ENDPOINT_URL is not set: start the emulator (tests/run does)"
        ),
        (None, false) => {
            eprintln!(
                "NOT RUN: aws backend tests need an emulator; run tests/run (sets CTX_TEST_AWS=1)"
            );
            None
        }
        (Some(url), _) => {
            let addr = url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned();
            if std::net::TcpStream::connect(&addr).is_err() {
                panic!("the AWS emulator at {url} is unreachable");
            }
            Some(
                AwsConfig::from_env()
                    .expect("CTX_BUCKET and CTX_TABLE are set with AWS_ENDPOINT_URL"),
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aws_backends_conform() {
    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    conformance::run_all(&blobs, &meta, &MemoryMetaStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_counted_per_operation() {
    let Some(config) = emulator() else { return };
    let counter = RequestCounter::new();
    let hooks = AwsHooks {
        interceptor: Some(SharedInterceptor::new(counter.clone())),
        ..AwsHooks::default()
    };
    let (blobs, meta) = connect(&config, hooks).await.unwrap();
    let tenant = conformance::fresh_tenant("count");
    use crate::store::{BlobStore, MetaStore};
    blobs
        .put(&tenant, bytes::Bytes::from_static(b"x"))
        .await
        .unwrap();
    let c = conformance::commit(&tenant, None, conformance::t(0), "p", b"x");
    meta.put_commit(&tenant, &c, None).await.unwrap();
    let counts = counter.snapshot();
    assert_eq!(
        counts.get(&("s3".into(), "PutObject".into())),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get(&("dynamodb".into(), "TransactWriteItems".into())),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(counter.total("s3") + counter.total("dynamodb"), 2);
}

#[test]
fn config_comes_from_the_environment_naming_what_is_missing() {
    // Reads only; does not modify the process environment.
    if std::env::var("CTX_BUCKET").is_err() {
        let e = AwsConfig::from_env().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("CTX_BUCKET"));
    }
    let _ = Arc::new(FaultPlan::new(10, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_cost_the_requests_the_design_promises() {
    let Some(config) = emulator() else { return };
    let rows = report::request_counts(&config, &[1, 30], 3).await.unwrap();
    for r in &rows {
        let forks = r.forks as u64;
        let ctx = format!(
            "{} at depth {} with {} forks: {:?}",
            r.op, r.depth, r.forks, r.counts
        );
        match r.op.as_str() {
            "checkpoint" => {
                assert_eq!(r.count("PutObject"), 1, "{ctx}");
                assert_eq!(r.count("TransactWriteItems"), 1, "{ctx}");
                assert_eq!(r.count("GetItem"), 1, "the parent: {ctx}");
                assert_eq!(r.total("s3") + r.total("dynamodb"), 3, "{ctx}");
            }
            "resolve" => assert_eq!((r.count("Query"), r.total("dynamodb")), (1, 1), "{ctx}"),
            "show" => assert_eq!((r.count("GetItem"), r.total("dynamodb")), (1, 1), "{ctx}"),
            "history(50)" => {
                assert_eq!(r.count("GetItem"), 1, "{ctx}");
                assert!(r.count("Query") <= 1 + forks, "{ctx}");
            }
            "materialize root (cold)" => {
                assert!(r.count("Query") <= 1 + forks, "one query per run: {ctx}");
                assert_eq!(
                    r.count("GetObject"),
                    r.depth + 1,
                    "one GET per delta: {ctx}"
                );
                assert_eq!(r.count("GetItem"), 2, "tip and cache: {ctx}");
                assert_eq!((r.count("PutObject"), r.count("PutItem")), (1, 1), "{ctx}");
            }
            "materialize root (warm)" => {
                assert_eq!(r.total("s3") + r.total("dynamodb"), 2, "{ctx}")
            }
            other => panic!("unexpected row {other}"),
        }
    }
    assert_eq!(
        rows.iter().filter(|r| r.forks == 3).count(),
        6,
        "the deep chain has 3 forks"
    );
}
