//! API Gateway's spelling of the router's paths, and its v2 events.
//! Included by path from the tests of ctx-lambda.

// Each test crate that includes it uses a part of it.
#![allow(dead_code)]

use base64::Engine as _;
use ctx_core::api::testing::Call;
use serde_json::{Value, json};

/// axum's `{*name}` is API Gateway's greedy `{name+}`.
pub fn api_gateway_path(axum_path: &str) -> String {
    match axum_path.split_once("{*") {
        Some((head, tail)) => format!("{head}{{{}+}}", tail.trim_end_matches('}')),
        None => axum_path.to_owned(),
    }
}

/// An API Gateway v2 event for `call`, built from the base fixture.
pub fn event(call: &Call) -> Value {
    let mut e: Value =
        serde_json::from_str(include_str!("../../../../tests/data/apigw/base-event.json"))
            .expect("fixture is JSON");
    let (path, query) = call.uri.split_once('?').unwrap_or((&call.uri, ""));
    e["routeKey"] = json!(format!("{} {path}", call.method));
    e["rawPath"] = json!(path);
    e["rawQueryString"] = json!(query);
    e["requestContext"]["http"]["method"] = json!(call.method);
    e["requestContext"]["http"]["path"] = json!(path);
    e["body"] = json!(base64::engine::general_purpose::STANDARD.encode(&call.body));
    e["isBase64Encoded"] = json!(true);
    match &call.tenant {
        Some(t) => e["requestContext"]["authorizer"]["jwt"]["claims"]["tenant"] = json!(t),
        None => {
            e["requestContext"]
                .as_object_mut()
                .expect("object")
                .remove("authorizer");
        }
    }
    e
}

/// The largest request payload an HTTP API takes (API Gateway quota):
/// a larger body is refused with 413 before any function runs.
pub const HTTP_API_MAX_REQUEST: usize = 10 * 1024 * 1024;
/// The largest event and the largest response of a synchronous Lambda
/// invocation (Lambda quota: 6 MB each way), as the runtime serializes
/// them: a binary body travels in base64. 6 MiB: Lambda's own refusal
/// names 6,291,556 bytes, so this is 100 bytes stricter than AWS. The
/// events built here always carry their body in base64, as API Gateway
/// does for binary types (it passes text types as they are), so a JSON
/// request is held to a stricter limit than AWS holds it to, not a looser.
pub const LAMBDA_MAX_PAYLOAD: usize = 6 * 1024 * 1024;
/// How long an HTTP API waits for its Lambda integration (quota: 30 s).
pub const INTEGRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the path API Gateway → Lambda → API Gateway did with an event.
#[derive(Debug)]
pub enum Invoked {
    /// The function ran and its answer fits every limit.
    Answered(axum::http::Response<bytes::Bytes>),
    /// AWS refused the request before the function ran: `status` is what
    /// the client sees.
    Refused { status: u16, why: String },
}

impl Invoked {
    /// The answer; panics (naming why) on a refused request.
    pub fn answered(self) -> axum::http::Response<bytes::Bytes> {
        match self {
            Invoked::Answered(r) => r,
            Invoked::Refused { status, why } => panic!("AWS refused the request ({status}): {why}"),
        }
    }
}

/// Why AWS would refuse `event` before the function runs, if it would:
/// a body over the HTTP API's 10 MB, or an event over Lambda's 6 MB.
pub fn refused(event: &str) -> Option<(u16, String)> {
    let v: Value = serde_json::from_str(event).expect("an event is JSON");
    let body = v["body"].as_str().unwrap_or("");
    let body_len = if v["isBase64Encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("a base64 body")
            .len()
    } else {
        body.len()
    };
    if body_len > HTTP_API_MAX_REQUEST {
        return Some((
            413,
            format!(
                "a request body of {body_len} bytes is over the HTTP API's {HTTP_API_MAX_REQUEST}"
            ),
        ));
    }
    if event.len() > LAMBDA_MAX_PAYLOAD {
        return Some((
            413,
            format!(
                "an event of {} bytes is over Lambda's {LAMBDA_MAX_PAYLOAD}-byte invocation payload",
                event.len()
            ),
        ));
    }
    None
}

/// The response payload the Lambda runtime would send for `response`
/// (lambda_http's own conversion: text types as text, anything else in
/// base64), in bytes.
pub async fn response_payload(parts: &axum::http::response::Parts, body: &bytes::Bytes) -> usize {
    use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
    let resp =
        axum::http::Response::from_parts(parts.clone(), axum::body::Body::from(body.clone()));
    let converted = lambda_http::IntoResponse::into_response(resp).await;
    let (parts, body) = converted.into_parts();
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(parts.status.as_u16());
    out.is_base64_encoded = matches!(body, lambda_http::Body::Binary(_));
    out.body = match body {
        lambda_http::Body::Empty => None,
        b => Some(b),
    };
    out.headers = parts.headers;
    serde_json::to_vec(&out)
        .expect("a response serializes")
        .len()
}

/// Invokes `router` with `event` as API Gateway and Lambda would, holding
/// their limits: a request over them is [`Invoked::Refused`]; a function
/// that answers more than Lambda's 6 MB, or takes longer than the
/// integration timeout, fails the test (AWS would answer 502 or 503).
pub async fn invoke(router: &axum::Router, event: &str) -> Invoked {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    if let Some((status, why)) = refused(event) {
        return Invoked::Refused { status, why };
    }
    let req = lambda_http::request::from_str(event).expect("a valid API Gateway v2 event");
    let resp = tokio::time::timeout(INTEGRATION_TIMEOUT, router.clone().oneshot(req))
        .await
        .unwrap_or_else(|_| {
            panic!("no answer within API Gateway's {INTEGRATION_TIMEOUT:?} integration timeout")
        })
        .expect("infallible");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("a body").to_bytes();
    let payload = response_payload(&parts, &body).await;
    assert!(
        payload <= LAMBDA_MAX_PAYLOAD,
        "a {} response of {payload} bytes as Lambda would send it ({} body bytes) is over \
         Lambda's {LAMBDA_MAX_PAYLOAD}-byte response limit: AWS would answer 502",
        parts.status,
        body.len()
    );
    Invoked::Answered(axum::http::Response::from_parts(parts, body))
}
