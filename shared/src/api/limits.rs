//! A global budget of request-body bytes in flight, so that many concurrent
//! large bodies cannot grow the process without bound.
//!
//! [`with_in_flight_budget`] wraps a [`Router`]: before a body is read, a
//! request reserves its `Content-Length` from an [`InFlightBudget`] and
//! holds it until its response is produced. A request that does not fit
//! gets 503 (`Unavailable`) with `Retry-After` and its body is never read,
//! so nothing is written. A body of unknown length (chunked) reserves as
//! its bytes arrive; when the budget runs out the body fails and the
//! response is the same 503. A body larger than the whole budget can never
//! fit and gets 413.
//!
//! `ctx serve` applies it (`CTX_MAX_IN_FLIGHT_BYTES`). The Lambdas do not:
//! API Gateway refuses bodies over 10 MB and a Lambda instance serves one
//! request at a time.
//!
//! The budget counts wire bytes. A checkpoint holds about its body: a large
//! inline delta shares the body's buffer and base64 decodes in place
//! ([`crate::body_text`]); docs/bench.md measures it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, HttpBody as _};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::error::ApiError;
use crate::error::{Error, ErrorKind};

/// How many request-body bytes may be held at once, and how many are.
#[derive(Debug)]
pub struct InFlightBudget {
    limit: u64,
    used: AtomicU64,
}

impl InFlightBudget {
    /// A budget of `limit` bytes, none in use.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(InFlightBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// The budget in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes reserved now.
    pub fn in_use(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Takes `n` more bytes when they fit.
    fn take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// One request's share of the budget, given back when the last holder (the
/// middleware, or a streamed body) drops it.
struct Held {
    budget: Arc<InFlightBudget>,
    bytes: AtomicU64,
    /// A streamed body ran out of budget.
    refused: AtomicBool,
}

impl Held {
    fn new(budget: Arc<InFlightBudget>) -> Arc<Self> {
        Arc::new(Held {
            budget,
            bytes: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        })
    }

    fn grow(&self, n: u64) -> bool {
        if self.budget.take(n) {
            self.bytes.fetch_add(n, Ordering::AcqRel);
            true
        } else {
            self.refused.store(true, Ordering::Release);
            false
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.give_back(*self.bytes.get_mut());
    }
}

/// `router` with every request body counted against `budget`.
pub fn with_in_flight_budget(router: Router, budget: Arc<InFlightBudget>) -> Router {
    router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let budget = budget.clone();
            async move { reserve(budget, req, next).await }
        },
    ))
}

fn over_budget(budget: &InFlightBudget, needed: Option<u64>) -> Response {
    let needed = needed.map_or_else(|| "more".to_owned(), |n| n.to_string());
    let mut e = Error::unavailable(format!(
        "the server holds {} of its {} bytes of request bodies in flight \
         ({}) and this body needs {needed}: retry later",
        budget.in_use(),
        budget.limit,
        crate::config::CTX_MAX_IN_FLIGHT_BYTES,
    ))
    .with_field("body");
    e.retry_after = Some(1);
    ApiError(e).into_response()
}

async fn reserve(budget: Arc<InFlightBudget>, req: Request, next: Next) -> Response {
    let held = Held::new(budget.clone());
    let req = match req.body().size_hint().exact() {
        Some(0) => req,
        Some(n) if n > budget.limit => {
            let e = Error::new(
                ErrorKind::TooLarge,
                format!(
                    "the body of {n} bytes is larger than the server's in-flight budget of {} \
                     bytes ({})",
                    budget.limit,
                    crate::config::CTX_MAX_IN_FLIGHT_BYTES,
                ),
            )
            .with_field("body");
            return ApiError(e).into_response();
        }
        Some(n) => {
            if !held.grow(n) {
                return over_budget(&budget, Some(n));
            }
            req
        }
        None => {
            // Unknown length: reserve each chunk as it arrives.
            let counter = held.clone();
            req.map(|body| {
                Body::from_stream(body.into_data_stream().map(move |chunk| {
                    let chunk = chunk?;
                    let n = u64::try_from(chunk.len()).expect("a chunk's length fits in u64");
                    if counter.grow(n) {
                        Ok(chunk)
                    } else {
                        Err(axum::Error::new(
                            "the request body ran out of the in-flight budget",
                        ))
                    }
                }))
            })
        }
    };
    let resp = next.run(req).await;
    if held.refused.load(Ordering::Acquire) {
        return over_budget(&budget, None);
    }
    drop(held);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use axum::http::{Request as HttpRequest, StatusCode, header};
    use axum::routing::post;
    use tower::ServiceExt as _;

    /// A router whose one route reads the body and reports the budget in
    /// use while it holds it.
    fn app(budget: &Arc<InFlightBudget>) -> Router {
        let seen = budget.clone();
        let r = Router::new().route(
            "/",
            post(move |body: Bytes| {
                let seen = seen.clone();
                async move { format!("{} {}", body.len(), seen.in_use()) }
            }),
        );
        with_in_flight_budget(r, budget.clone())
    }

    async fn send(app: Router, body: Body) -> (StatusCode, Option<String>, String) {
        let resp = app
            .oneshot(HttpRequest::post("/").body(body).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let retry = resp
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, retry, String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn chunked(chunks: usize, size: usize) -> Body {
        let stream = futures::stream::iter(
            (0..chunks).map(move |_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; size]))),
        );
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn a_body_within_the_budget_holds_its_length_until_answered() {
        let budget = InFlightBudget::new(100);
        let (status, _, text) = send(app(&budget), Body::from(vec![0u8; 60])).await;
        assert_eq!((status, text.as_str()), (StatusCode::OK, "60 60"));
        assert_eq!(budget.in_use(), 0, "given back after the response");
    }

    #[tokio::test]
    async fn a_body_beyond_what_is_left_gets_503_with_retry_after() {
        let budget = InFlightBudget::new(100);
        assert!(budget.take(50), "another request holds 50");
        let (status, retry, text) = send(app(&budget), Body::from(vec![0u8; 60])).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
        assert_eq!(retry.as_deref(), Some("1"));
        assert!(text.contains("CTX_MAX_IN_FLIGHT_BYTES"), "{text}");
        assert_eq!(budget.in_use(), 50);
        // Expected back-pressure: a warning, not an error.
        let levels = crate::api::error::capture::Levels::default();
        let guard = levels.install();
        let (status, _, _) = send(app(&budget), Body::from(vec![0u8; 60])).await;
        drop(guard);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(levels.seen(), [tracing::Level::WARN]);
        budget.give_back(50);
        let (status, _, _) = send(app(&budget), Body::from(vec![0u8; 60])).await;
        assert_eq!(status, StatusCode::OK, "fits once the other is done");
    }

    #[tokio::test]
    async fn a_body_larger_than_the_whole_budget_is_too_large() {
        let budget = InFlightBudget::new(100);
        let (status, retry, _) = send(app(&budget), Body::from(vec![0u8; 101])).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(retry, None, "retrying cannot help");
    }

    #[tokio::test]
    async fn a_chunked_body_reserves_as_it_arrives() {
        let budget = InFlightBudget::new(100);
        let (status, _, text) = send(app(&budget), chunked(4, 20)).await;
        assert_eq!((status, text.as_str()), (StatusCode::OK, "80 80"));
        assert_eq!(budget.in_use(), 0);
        let (status, retry, text) = send(app(&budget), chunked(6, 20)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
        assert_eq!(retry.as_deref(), Some("1"));
        assert_eq!(budget.in_use(), 0, "the partial reservation is given back");
    }

    #[tokio::test]
    async fn bodiless_requests_pass_untouched() {
        let budget = InFlightBudget::new(0);
        let (status, _, text) = send(app(&budget), Body::empty()).await;
        assert_eq!((status, text.as_str()), (StatusCode::OK, "0 0"));
    }
}
