//! Errors on the wire: the one place an [`ErrorKind`] becomes a status, and
//! the body every error has: `{"error": {"kind", "message", "field"?}}`,
//! plus `current` on a lost compare-and-swap. A client reads the kind from
//! the body ([`Error::from`] an [`ErrorBody`]); [`kind_of`] a status is
//! only for responses that are not ctx's (a proxy's 502).

use crate::error::{Error, ErrorKind};
pub use crate::wire::{ErrorBody, ErrorDetail};

use super::Reply;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The status of each kind.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Gone => StatusCode::GONE,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The kind a status stands for: what a client makes of an error response
/// whose body is not an [`ErrorBody`] (one from a proxy or gateway).
pub fn kind_of(status: StatusCode) -> ErrorKind {
    match status.as_u16() {
        400 | 405 | 415 | 422 => ErrorKind::Invalid,
        401 | 403 => ErrorKind::Unauthenticated,
        404 => ErrorKind::NotFound,
        409 | 412 => ErrorKind::Conflict,
        410 => ErrorKind::Gone,
        413 => ErrorKind::TooLarge,
        429 => ErrorKind::RateLimited,
        502..=504 => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

/// How an error answered to a client is logged: nothing for a 4xx (the
/// caller's mistake, told in the response); WARN for expected back-pressure,
/// an `Unavailable` that carries a `Retry-After` (the in-flight budget is
/// full: the server chose to refuse and says when to come back); ERROR for
/// every other 5xx, a real fault.
pub fn log_level(e: &Error) -> Option<tracing::Level> {
    if !status_of(e.kind).is_server_error() {
        None
    } else if e.kind == ErrorKind::Unavailable && e.retry_after.is_some() {
        Some(tracing::Level::WARN)
    } else {
        Some(tracing::Level::ERROR)
    }
}

/// An [`Error`] as a response.
#[derive(Debug)]
pub struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = status_of(e.kind);
        match log_level(&e) {
            Some(tracing::Level::ERROR) => {
                tracing::error!(kind = %e.kind, error = %e, source = ?e.source, "request failed");
            }
            Some(_) => {
                tracing::warn!(kind = %e.kind, error = %e, "request refused under load");
            }
            None => {}
        }
        let mut resp = (status, Reply(ErrorBody::from(&e))).into_response();
        if e.kind.is_retryable() {
            let secs = e.retry_after.unwrap_or(1).max(1);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// A tracing subscriber for tests that records the level of every event.
#[cfg(test)]
pub(crate) mod capture {
    use std::sync::{Arc, Mutex};

    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    /// Records event levels.
    #[derive(Clone, Default)]
    pub(crate) struct Levels(pub(crate) Arc<Mutex<Vec<Level>>>);

    impl Subscriber for Levels {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            self.0
                .lock()
                .expect("not poisoned")
                .push(*e.metadata().level());
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    impl Levels {
        /// Starts recording on this thread until the guard drops.
        pub(crate) fn install(&self) -> tracing::dispatcher::DefaultGuard {
            tracing::dispatcher::set_default(&tracing::Dispatch::new(self.clone()))
        }

        /// The levels recorded so far.
        pub(crate) fn seen(&self) -> Vec<Level> {
            self.0.lock().expect("not poisoned").clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_pressure_logs_at_warn_and_faults_at_error() {
        use tracing::Level;
        let mut busy = Error::unavailable("the in-flight budget is full");
        busy.retry_after = Some(1);
        let cases = [
            (busy, Some(Level::WARN)),
            (
                Error::unavailable("DynamoDB unreachable"),
                Some(Level::ERROR),
            ),
            (Error::internal("a bug"), Some(Level::ERROR)),
            (Error::invalid("x", "bad"), None),
            (Error::rate_limited("slow down", 5), None),
            (Error::new(ErrorKind::TooLarge, "big"), None),
        ];
        for (e, want) in cases {
            assert_eq!(log_level(&e), want, "{e}");
            let levels = capture::Levels::default();
            let guard = levels.install();
            let status = ApiError(e).into_response().status();
            drop(guard);
            assert_eq!(
                levels.seen(),
                want.into_iter().collect::<Vec<_>>(),
                "{status}"
            );
        }
    }

    #[test]
    fn every_kind_maps_to_its_status_and_back() {
        for &kind in ErrorKind::ALL {
            assert_eq!(kind_of(status_of(kind)), kind);
        }
    }

    #[test]
    fn the_body_has_a_pinned_wire_format_and_reads_back() {
        let e = Error::conflict("ref main moved", Some("ctx-1".to_owned())).with_field("expected");
        let body = serde_json::to_value(ErrorBody::from(&e)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "error": {"kind": "conflict", "message": "ref main moved", "field": "expected"},
                "current": "ctx-1"
            })
        );
        let back = Error::from(serde_json::from_value::<ErrorBody>(body).unwrap());
        assert_eq!(
            (back.kind, back.message, back.field, back.current),
            (e.kind, e.message, e.field, e.current)
        );
        for &kind in ErrorKind::ALL {
            let body = serde_json::to_value(ErrorBody::from(&Error::new(kind, "m"))).unwrap();
            assert_eq!(body["error"]["kind"], kind.as_str());
        }
        // A kind this version does not know is not ctx's error body.
        let unknown = serde_json::json!({"error": {"kind": "teapot", "message": "m"}});
        assert!(serde_json::from_value::<ErrorBody>(unknown).is_err());
    }

    #[test]
    fn the_openapi_document_lists_the_kinds() {
        use utoipa::OpenApi as _;
        let doc = serde_json::to_value(super::super::ApiDoc::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            schemas["ErrorKind"]["enum"],
            serde_json::json!(names),
            "{schemas}"
        );
        assert_eq!(
            schemas["ErrorDetail"]["properties"]["kind"]["$ref"],
            "#/components/schemas/ErrorKind"
        );
    }
}
