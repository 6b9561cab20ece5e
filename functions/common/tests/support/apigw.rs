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
