//! API Gateway's spelling of the router's paths. Included by path from
//! the tests of ctx-lambda.

/// axum's `{*name}` is API Gateway's greedy `{name+}`.
pub fn api_gateway_path(axum_path: &str) -> String {
    match axum_path.split_once("{*") {
        Some((head, tail)) => format!("{head}{{{}+}}", tail.trim_end_matches('}')),
        None => axum_path.to_owned(),
    }
}
