//! What AWS refuses on the path API Gateway → Lambda, held on the AWS
//! backends (the emulator): an upload over the HTTP API's 10 MB is
//! refused, and goes through a presigned PUT instead; a download over
//! `CTX_DOWNLOAD_URL_BYTES` answers 303 to a presigned GET, so that no
//! response nears Lambda's 6 MB; and a function that would answer more
//! than 6 MB fails the test, as it would fail on AWS.

use std::sync::Arc;

use ctx_core::api::testing::Call;
use ctx_core::bootstrap::Backends;
use ctx_core::config::Config;
use ctx_core::store::conformance::fresh_tenant;
use ctx_core::{IdSource, OsRandom, SystemClock};
use ctx_lambda::{Function, JwtClaimsAuth, app};
use futures::FutureExt as _;
use serde_json::{Value, json};

#[path = "support/apigw.rs"]
mod apigw;

use apigw::{Invoked, LAMBDA_MAX_PAYLOAD};

/// `n` bytes no compressor or dedup could shrink.
fn noise(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    OsRandom.fill(&mut b);
    b
}

/// The checkpoint function (which serves the artifact routes) over the
/// emulator, built as `ctx_lambda::run` builds it.
async fn checkpoint_function(config: &Config) -> axum::Router {
    let service = Arc::new(
        Backends::build(config, Function::Checkpoint.needs())
            .await
            .expect("the checkpoint function's backends")
            .into_service(Arc::new(SystemClock)),
    );
    app(
        Function::Checkpoint,
        service,
        Arc::new(JwtClaimsAuth::new("tenant")),
    )
}

/// An event for `method uri` of `tenant` with `body` (binary, so in
/// base64 as API Gateway sends it).
fn event(method: &str, uri: &str, tenant: &str, body: Vec<u8>, content_type: &str) -> String {
    let mut e = apigw::event(&Call {
        method: method.to_owned(),
        uri: uri.to_owned(),
        tenant: Some(tenant.to_owned()),
        body,
    });
    e["headers"]["content-type"] = json!(content_type);
    e.to_string()
}

fn json_of(resp: &axum::http::Response<bytes::Bytes>) -> Value {
    serde_json::from_slice(resp.body()).unwrap_or(Value::Null)
}

/// Stores `bytes` the way a client must above the API's limits: a
/// presigned URL from `POST /v1/uploads`, a PUT straight to S3, then a
/// checkpoint naming the artifact (which verifies and promotes it).
async fn upload_directly(router: &axum::Router, tenant: &str, bytes: &[u8]) -> String {
    let art = format!("art-{}", blake3::hash(bytes).to_hex());
    let req = json!({ "artifact_ref": art, "size": bytes.len() });
    let up = apigw::invoke(
        router,
        &event(
            "POST",
            "/v1/uploads",
            tenant,
            req.to_string().into_bytes(),
            "application/json",
        ),
    )
    .await
    .answered();
    assert_eq!(up.status(), 201, "{:?}", up.body());
    let up = json_of(&up);
    let mut put = reqwest::Client::new().put(up["url"].as_str().expect("a url"));
    for (k, v) in up["headers"].as_object().expect("headers") {
        put = put.header(k, v.as_str().expect("a header value"));
    }
    let put = put.body(bytes.to_vec()).send().await.expect("PUT to S3");
    assert!(put.status().is_success(), "S3 refused the PUT: {put:?}");
    let commit = json!({
        "commit_type": "delta", "format": "raw", "template": "t",
        "principal": "alice", "checkpoint": "explicit",
        "artifact_ref": art,
    });
    let c = apigw::invoke(
        router,
        &event(
            "POST",
            "/v1/commits",
            tenant,
            commit.to_string().into_bytes(),
            "application/json",
        ),
    )
    .await
    .answered();
    assert_eq!(c.status(), 201, "{}", String::from_utf8_lossy(c.body()));
    art
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bytes_go_around_the_function_and_an_oversized_answer_fails() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let config = Config {
        hot_cache_bytes: 0,
        ..config
    };
    assert_eq!(
        config.download_url_bytes,
        4 * 1024 * 1024,
        "the default threshold"
    );
    let router = checkpoint_function(&config).await;
    let tenant = fresh_tenant("limits").to_string();

    // 11 MB through the API: API Gateway refuses it before any function
    // runs, so the client takes the presigned PUT.
    let eleven = noise(11 * 1000 * 1000);
    match apigw::invoke(
        &router,
        &event(
            "POST",
            "/v1/artifacts",
            &tenant,
            eleven.clone(),
            "application/octet-stream",
        ),
    )
    .await
    {
        Invoked::Refused { status, why } => {
            assert_eq!(status, 413, "{why}");
            assert!(why.contains("HTTP API"), "{why}");
        }
        Invoked::Answered(r) => panic!("an 11 MB body reached the function: {}", r.status()),
    }
    let big = upload_directly(&router, &tenant, &eleven).await;

    // 7 MB: under API Gateway's 10 MB, yet its event (in base64) is over
    // Lambda's 6 MB, so it too must go directly.
    let seven = noise(7 * 1000 * 1000);
    assert!(matches!(
        apigw::invoke(
            &router,
            &event(
                "POST",
                "/v1/artifacts",
                &tenant,
                seven.clone(),
                "application/octet-stream"
            ),
        )
        .await,
        Invoked::Refused { status: 413, .. }
    ));
    let art = upload_directly(&router, &tenant, &seven).await;

    // Downloads: each answers 303 to a presigned GET of the bytes, which
    // are the bytes uploaded; the answer itself is small.
    for (art, bytes) in [(&art, &seven), (&big, &eleven)] {
        let resp = apigw::invoke(
            &router,
            &event(
                "GET",
                &format!("/v1/artifacts/{art}"),
                &tenant,
                Vec::new(),
                "application/json",
            ),
        )
        .await
        .answered();
        assert_eq!(
            resp.status(),
            303,
            "{}",
            String::from_utf8_lossy(resp.body())
        );
        let location = resp.headers()["location"].to_str().unwrap().to_owned();
        let body = json_of(&resp);
        assert_eq!(body["url"], json!(location));
        assert_eq!(body["size"], json!(bytes.len()));
        assert!(resp.body().len() < 4096, "{} bytes", resp.body().len());
        let got = reqwest::get(&location).await.expect("GET from S3");
        assert!(got.status().is_success(), "{got:?}");
        let got = got.bytes().await.expect("the bytes");
        assert_eq!(got.len(), bytes.len());
        assert_eq!(format!("art-{}", blake3::hash(&got).to_hex()), **art);
    }

    // Small artifacts still come back as bytes.
    let small = noise(1000);
    let put = apigw::invoke(
        &router,
        &event(
            "POST",
            "/v1/artifacts",
            &tenant,
            small.clone(),
            "application/octet-stream",
        ),
    )
    .await
    .answered();
    let small_art = json_of(&put)["ref"].as_str().expect("a ref").to_owned();
    let got = apigw::invoke(
        &router,
        &event(
            "GET",
            &format!("/v1/artifacts/{small_art}"),
            &tenant,
            Vec::new(),
            "application/json",
        ),
    )
    .await
    .answered();
    assert_eq!(got.status(), 200);
    assert_eq!(got.body().as_ref(), small.as_slice());

    // With the threshold raised past Lambda's limit, the same download is
    // answered with its bytes: 7 MB in base64 is over 6 MB, and the run
    // fails as the function would on AWS.
    let unbounded = checkpoint_function(&Config {
        download_url_bytes: 64 * 1024 * 1024,
        ..config.clone()
    })
    .await;
    let download = event(
        "GET",
        &format!("/v1/artifacts/{art}"),
        &tenant,
        Vec::new(),
        "application/json",
    );
    let failed = std::panic::AssertUnwindSafe(apigw::invoke(&unbounded, &download))
        .catch_unwind()
        .await
        .expect_err("a 7 MB answer must fail the test");
    let why = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        why.contains(&format!(
            "over Lambda's {LAMBDA_MAX_PAYLOAD}-byte response limit"
        )),
        "{why}"
    );
}

/// The materialize function (which serves `POST /v1/read`) over the
/// emulator, built as `ctx_lambda::run` builds it.
async fn materialize_function(config: &Config) -> axum::Router {
    let service = Arc::new(
        Backends::build(config, Function::Materialize.needs())
            .await
            .expect("the materialize function's backends")
            .into_service(Arc::new(SystemClock)),
    );
    app(
        Function::Materialize,
        service,
        Arc::new(JwtClaimsAuth::new("tenant")),
    )
}

/// `POST /v1/read` answers a context's bytes inline up to 1 MiB: text that
/// JSON escapes six bytes a character (control characters) must still
/// fit Lambda's 6 MB response, as must base64 of bytes that are not UTF-8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answer_fits_a_lambda_response_whatever_its_bytes() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let checkpoint = checkpoint_function(&config).await;
    let materialize = materialize_function(&config).await;
    let tenant = fresh_tenant("read-limits").to_string();
    let mib = 1024 * 1024;
    for (what, bytes) in [
        ("control characters", vec![1u8; mib]),
        ("not UTF-8", noise(mib)),
        ("quotes", vec![b'"'; mib]),
    ] {
        use base64::Engine as _;
        let body = json!({
            "commit_type": "snapshot",
            "format": "raw",
            "template": "tpl",
            "principal": "alice",
            "checkpoint": "turn_boundary",
            "delta_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
        });
        let c = apigw::invoke(
            &checkpoint,
            &event(
                "POST",
                "/v1/commits",
                &tenant,
                body.to_string().into_bytes(),
                "application/json",
            ),
        )
        .await
        .answered();
        assert_eq!(
            c.status(),
            201,
            "{what}: {}",
            String::from_utf8_lossy(c.body())
        );
        let id = json_of(&c)["id"].as_str().expect("an id").to_owned();
        for read in [json!({"commit": id, "delta": true}), json!({"commit": id})] {
            // invoke fails the test on an answer over Lambda's 6 MB.
            let r = apigw::invoke(
                &materialize,
                &event(
                    "POST",
                    "/v1/read",
                    &tenant,
                    read.to_string().into_bytes(),
                    "application/json",
                ),
            )
            .await
            .answered();
            assert_eq!(r.status(), 200, "{what}");
            let v = json_of(&r);
            let got = match (v["content"].as_str(), v["content_base64"].as_str()) {
                (Some(text), None) => text.as_bytes().to_vec(),
                (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("base64"),
                other => panic!("{what}: no content inline: {other:?}"),
            };
            assert!(got == bytes, "{what}: other bytes came back");
        }
    }
}
