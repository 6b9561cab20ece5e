//! The request loop the HTTP summarizers share: one POST of JSON with a
//! time limit, retried with exponential backoff after a timeout, a
//! connection error, 429 or 5xx (waiting as long as `Retry-After` asks),
//! classified into [`Failure`]s. No message it writes holds the key.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;

use super::Failure;
use crate::config::{Secret, SummarizerConfig};
use crate::error::{Error, Result};

/// How the loop waits between attempts (tokio's sleep; tests record the
/// waits instead of sleeping them).
pub(crate) type SleepFn = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// The most of an error response's body quoted in a failure.
const BODY_QUOTE: usize = 300;

/// A JSON-over-HTTP client with the summarizer's retry policy.
#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    key: Option<Secret>,
    sleep: SleepFn,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("max_backoff", &self.max_backoff)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client with `config`'s timeout and retry policy.
    ///
    /// # Errors
    /// `Internal` when the TLS client cannot be built.
    pub(crate) fn new(config: &SummarizerConfig) -> Result<Http> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| Error::internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Http {
            client,
            retries: config.retries,
            backoff: config.backoff,
            max_backoff: config.max_backoff,
            key: config.api_key.clone(),
            sleep: Arc::new(|d| Box::pin(tokio::time::sleep(d))),
        })
    }

    /// Replaces how the loop waits (tests).
    #[cfg(test)]
    pub(crate) fn with_sleep(mut self, sleep: SleepFn) -> Http {
        self.sleep = sleep;
        self
    }

    /// The key, for the header that carries it.
    pub(crate) fn key(&self) -> Option<&Secret> {
        self.key.as_ref()
    }

    /// `msg` with the key, should it appear, replaced by `***`.
    fn redact(&self, msg: &str) -> String {
        match &self.key {
            Some(k) if !k.expose().is_empty() => msg.replace(k.expose(), "***"),
            _ => msg.to_owned(),
        }
    }

    /// Sends the request `build` makes (again on each attempt) and returns
    /// the response's JSON.
    ///
    /// # Errors
    /// [`Failure::Transient`] when the retries are used up (or
    /// `Retry-After` asks for longer than the longest backoff);
    /// [`Failure::Permanent`] for any other 4xx and a body that is not
    /// JSON.
    pub(crate) async fn post_json(
        &self,
        what: &str,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> std::result::Result<Value, Failure> {
        let mut attempt = 0u32;
        loop {
            let (reason, retry_after) = match build(&self.client).send().await {
                Ok(resp) if resp.status().is_success() => return self.json(what, resp).await,
                Ok(resp) if retryable(resp.status()) => {
                    let status = resp.status();
                    let retry_after = retry_after(&resp);
                    let body = self.quote(resp).await;
                    (format!("{what} answered {status}{body}"), retry_after)
                }
                Ok(resp) => {
                    let status = resp.status();
                    let body = self.quote(resp).await;
                    return Err(Failure::Permanent {
                        reason: format!("{what} refused the request: {status}{body}"),
                    });
                }
                Err(e) => (self.describe(what, e), None),
            };
            let wait = retry_after.unwrap_or_else(|| {
                self.backoff
                    .saturating_mul(2u32.saturating_pow(attempt))
                    .min(self.max_backoff)
            });
            if attempt >= self.retries || wait > self.max_backoff {
                let tries = attempt + 1;
                return Err(Failure::Transient {
                    reason: format!(
                        "{reason} (after {tries} attempt{})",
                        if tries == 1 { "" } else { "s" }
                    ),
                    retry_after,
                });
            }
            tracing::warn!(
                attempt = attempt + 1,
                wait_ms = wait.as_millis() as u64,
                "summarizer: {reason}; retrying"
            );
            (self.sleep)(wait).await;
            attempt += 1;
        }
    }

    async fn json(&self, what: &str, resp: Response) -> std::result::Result<Value, Failure> {
        let bytes = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Err(Failure::Transient {
                    reason: self.describe(what, e),
                    retry_after: None,
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| Failure::Permanent {
            reason: format!("{what} answered with malformed JSON: {e}"),
        })
    }

    /// `: <the start of the body>` of an error response, redacted.
    async fn quote(&self, resp: Response) -> String {
        let body = resp.text().await.unwrap_or_default();
        let body = super::excerpt::one_line(&body);
        if body.is_empty() {
            String::new()
        } else {
            format!(": {}", self.redact(&super::truncate(&body, BODY_QUOTE)))
        }
    }

    fn describe(&self, what: &str, e: reqwest::Error) -> String {
        let kind = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "is unreachable"
        } else {
            "failed"
        };
        self.redact(&format!("{what} {kind}: {}", e.without_url()))
    }
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: the
/// backoff applies).
fn retry_after(resp: &Response) -> Option<Duration> {
    let v = resp.headers().get(reqwest::header::RETRY_AFTER)?;
    let secs: f64 = v.to_str().ok()?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}
