//! A small HTTP client for the ctx API, used by the client commands.

use ctx_core::api::error::{ErrorBody, kind_of};
use ctx_core::{Error, ErrorKind, Result};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

/// Talks to one ctx server with one token.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of the server at `base` (`http://127.0.0.1:7878`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Client {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<reqwest::Body>,
        json: bool,
    ) -> Result<reqwest::Response> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            let ct = if json {
                "application/json"
            } else {
                "application/octet-stream"
            };
            req = req.header(reqwest::header::CONTENT_TYPE, ct).body(b);
        }
        let resp = req.send().await.map_err(|e| {
            Error::unavailable(format!("cannot reach the ctx server at {}: {e}", self.base))
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(error_from(
            resp.status(),
            &resp.bytes().await.unwrap_or_default(),
        ))
    }

    /// A JSON request; the decoded response and its status.
    ///
    /// # Errors
    /// The server's error, or `Unavailable` when it cannot be reached.
    pub async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(StatusCode, T)> {
        let body = body.map(|b| reqwest::Body::from(b.to_string()));
        let resp = self.send(method, path, body, true).await?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?;
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            Error::internal(format!(
                "the server sent a response that is not the expected JSON: {e}"
            ))
        })?;
        Ok((status, value))
    }

    /// Raw bytes of a GET.
    ///
    /// # Errors
    /// The server's error, or `Unavailable` when it cannot be reached.
    pub async fn bytes(&self, path: &str) -> Result<Vec<u8>> {
        let resp = self.send(Method::GET, path, None, false).await?;
        Ok(resp
            .bytes()
            .await
            .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?
            .to_vec())
    }
}

impl Client {
    /// Materializes `id` (a `ctx-…` id) and fetches the result: the
    /// response and the context's bytes.
    ///
    /// # Errors
    /// The server's errors.
    pub async fn materialize(
        &self,
        id: &str,
        stop: Option<&str>,
        format: Option<&str>,
    ) -> Result<(ctx_core::wire::MaterializeResponse, Vec<u8>)> {
        let mut body = serde_json::json!({});
        if let Some(s) = stop {
            body["stop"] = s.into();
        }
        if let Some(f) = format {
            body["format"] = f.into();
        }
        let (_, m): (_, ctx_core::wire::MaterializeResponse) = self
            .json(
                Method::POST,
                &format!("/v1/commits/{id}/materialize"),
                Some(&body),
            )
            .await?;
        let bytes = self
            .bytes(&format!("/v1/artifacts/{}", m.result.artifact_ref))
            .await?;
        Ok((m, bytes))
    }
}

/// The error a non-success response stands for.
pub fn error_from(status: StatusCode, body: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => {
            let mut e = Error::new(kind_of(status), b.error.message);
            e.field = b.error.field;
            e.current = b.current;
            e
        }
        Err(_) => Error::new(
            kind_of(status),
            format!("HTTP {status}: {}", String::from_utf8_lossy(body).trim()),
        ),
    }
}

/// The process exit code for an error kind.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Invalid | ErrorKind::TooLarge => 2,
        ErrorKind::NotFound => 3,
        ErrorKind::Conflict => 4,
        ErrorKind::Unauthenticated => 5,
        ErrorKind::Unavailable | ErrorKind::RateLimited => 6,
        _ => 1,
    }
}

/// Percent-encodes a query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
