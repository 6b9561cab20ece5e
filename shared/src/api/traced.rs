//! The span of each operation: the layer every route is served through
//! (see `crate::telemetry` for what is exported, and how).

use std::time::Instant;

use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::auth::Caller;
use crate::telemetry::{METRICS, OPERATION_SPAN};

/// Serves `req` in the span of operation `op`, then records the answer's
/// status and size on it and the duration metric.
pub(super) async fn operation(op: &'static str, req: Request, next: Next) -> Response {
    let request_bytes = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let span = tracing::info_span!(
        OPERATION_SPAN,
        otel.name = op,
        otel.kind = "server",
        otel.status_code = Empty,
        op,
        tenant = Empty,
        principal = Empty,
        http.request.method = req.method().as_str(),
        http.request.body.size = request_bytes,
        http.response.status_code = Empty,
        http.response.body.size = Empty,
    );
    let started = Instant::now();
    let response = next.run(req).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    if let Some(n) = response.body().size_hint().exact() {
        span.record("http.response.body.size", n);
    }
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
    tracing::info!(
        target: METRICS,
        parent: &span,
        op,
        http.response.status_code = status,
        "histogram.ctx.operation.duration" = started.elapsed().as_secs_f64(),
    );
    response
}

/// Records who is calling on the operation's span (the tenant, and the
/// principal when the credential names one).
pub(super) fn record_caller(caller: &Caller) {
    let span = tracing::Span::current();
    span.record("tenant", caller.tenant.as_str());
    if let Some(p) = &caller.principal {
        span.record("principal", p.as_str());
    }
}
