//! Request extractors whose failures are ordinary ctx errors: a JSON body
//! parsed with the failing field named, raw bodies with the size limit as a
//! 413, query strings and path ids validated field by field, and the caller.

use std::collections::HashMap;
use std::str::FromStr;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;
use crate::auth::Caller;
use crate::error::{Error, ErrorKind, Result};

/// A request body as bytes, within the route's body limit.
pub struct Body(pub Bytes);

/// The body limit of a route as its 413 states it (the bytes and the
/// setting that raises them): a request extension the router sets.
#[derive(Debug, Clone)]
pub struct BodyLimitNote(pub String);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit_note = req.extensions().get::<BodyLimitNote>().map_or_else(
            || "the body is larger than this route accepts".to_owned(),
            |n| format!("the body is larger than this route accepts: {}", n.0),
        );
        match Bytes::from_request(req, state).await {
            Ok(b) => Ok(Body(b)),
            Err(rejection) => {
                let status = rejection.status();
                let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    ErrorKind::TooLarge
                } else {
                    ErrorKind::Invalid
                };
                let text = rejection.body_text();
                let message = if kind == ErrorKind::TooLarge {
                    format!("{limit_note} ({text})")
                } else {
                    format!("cannot read the body: {text}")
                };
                Err(Error::new(kind, message).with_field("body").into())
            }
        }
    }
}

/// A JSON body. An empty body counts as `{}`. Errors name the field at
/// fault (`ref.expected`, `message_count`) or `body` when it is not JSON
/// or has anything but whitespace after its one value.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Body(bytes) = Body::from_request(req, state).await?;
        // Large string fields ([`crate::body_text::BodyText`]) share `bytes`
        // instead of copying out of it; it is dropped here, so they then
        // own the buffer alone (and a base64 delta decodes in place).
        Ok(Json(crate::body_text::with_source(&bytes, parse_json)?))
    }
}

/// Parses `bytes` as `T`, naming the failing field.
///
/// # Errors
/// `Invalid` with `field` set to the JSON path, or `body`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    // JSON's whitespace: a form feed, whitespace to ASCII, is not.
    let bytes: &[u8] = if bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        b"{}"
    } else {
        bytes
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let e = match result {
        Ok(v) => {
            // One JSON value and nothing after it but whitespace.
            de.end().map_err(|e| {
                Error::invalid(
                    "body",
                    format!("the body has text after its JSON value: {e}"),
                )
            })?;
            return Ok(v);
        }
        Err(e) => e,
    };
    let inner = e.inner();
    // A number too large for any field (`1e400`) is a syntax error to
    // serde_json, but the path says whose value it was.
    let out_of_range =
        inner.to_string().starts_with("number out of range") && e.path().iter().next().is_some();
    if (inner.is_syntax() && !out_of_range) || inner.is_eof() {
        return Err(Error::invalid(
            "body",
            format!("the body is not valid JSON: {inner}"),
        ));
    }
    let path = e.path().to_string();
    let message = inner.to_string();
    let named = ["missing field `", "unknown field `", "duplicate field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next());
    let field = match (path.as_str(), named) {
        (".", Some(name)) => name.to_owned(),
        (p, Some(name)) if p == name || p.ends_with(&format!(".{name}")) => p.to_owned(),
        (p, Some(name)) => format!("{p}.{name}"),
        (".", None) => "body".to_owned(),
        (p, None) => p.to_owned(),
    };
    // serde_json appends " at line L column C"; keep it, it helps find the spot.
    let message = in_json_terms(&message);
    Err(Error::invalid(field.clone(), format!("{field}: {message}")))
}

/// serde's message in JSON's terms, not Rust's: what a client sent and
/// what the field takes as JSON says them (`expected struct RefMove` is
/// `expected an object`, `invalid type: map` is `invalid type: object`,
/// `u64` a non-negative integer).
fn in_json_terms(message: &str) -> String {
    /// Rust's words as serde writes them, and JSON's.
    const WORDS: [(&str, &str); 13] = [
        ("invalid type: map", "invalid type: object"),
        ("invalid type: sequence", "invalid type: array"),
        ("invalid type: unit value", "invalid type: null"),
        ("expected a map", "expected an object"),
        ("expected a sequence", "expected an array"),
        ("expected a borrowed string", "expected a string"),
        ("expected u8", "expected an integer from 0 to 255"),
        ("expected u16", "expected an integer from 0 to 65535"),
        ("expected u32", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected usize", "expected a non-negative integer"),
        ("expected i64", "expected an integer"),
        ("expected f64", "expected a number"),
    ];
    let mut out = message.to_owned();
    for (rust, json) in WORDS {
        out = out.replace(rust, json);
    }
    // `expected struct Name`, `expected tuple struct Name`, `expected unit
    // struct Name`: an object (or null) whose name is Rust's alone.
    for kind in [
        "expected struct ",
        "expected tuple struct ",
        "expected unit struct ",
    ] {
        while let Some(at) = out.find(kind) {
            let name_end = out[at + kind.len()..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(out.len(), |n| at + kind.len() + n);
            let word = if kind == "expected struct " {
                "expected an object"
            } else {
                "expected a value of this field's type"
            };
            out.replace_range(at..name_end, word);
        }
    }
    out
}

/// Query-string parameters, parsed one by one so errors name the parameter.
pub struct Query(HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Ok(Query(parse_query(parts.uri.query().unwrap_or(""))?))
    }
}

/// Splits a query string into decoded parameters (the last of a repeated
/// one wins). Decoding is strict: a name or value that is not UTF-8 once
/// percent-decoded is refused, naming the parameter, rather than patched
/// with U+FFFD.
fn parse_query(q: &str) -> Result<HashMap<String, String>> {
    let mut map = HashMap::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k).ok_or_else(|| {
            Error::invalid(
                "query",
                format!("the query parameter name {k:?} is not UTF-8 once percent-decoded"),
            )
        })?;
        let value = percent_decode(v).ok_or_else(|| {
            Error::invalid(
                key.as_str(),
                format!("the query parameter {key} {v:?} is not UTF-8 once percent-decoded"),
            )
        })?;
        map.insert(key, value);
    }
    Ok(map)
}

/// Decodes `+` and `%XX` (a `%` without two hex digits stays as it is);
/// `None` when the bytes are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    fn hex_val(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                b.get(i + 1).copied().and_then(hex_val),
                b.get(i + 2).copied().and_then(hex_val),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// A path parameter (or a tuple of them), its failures in ctx's error
/// shape naming the parameter: a segment that is not UTF-8 once
/// percent-decoded is a 400 like any other bad input.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        use axum::extract::path::ErrorKind as PathErrorKind;
        use axum::extract::rejection::PathRejection;
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(p) => Ok(Path(p.0)),
            Err(rejection) => {
                let field = match &rejection {
                    PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
                        PathErrorKind::InvalidUtf8InPathParam { key }
                        | PathErrorKind::ParseErrorAtKey { key, .. } => Some(key.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                let kind = if rejection.status().is_server_error() {
                    ErrorKind::Internal
                } else {
                    ErrorKind::Invalid
                };
                let text = rejection.body_text();
                Err(Error::new(kind, format!("bad path: {text}"))
                    .with_field(field.unwrap_or_else(|| "path".to_owned()))
                    .into())
            }
        }
    }
}

impl Query {
    /// A required parameter.
    ///
    /// # Errors
    /// `Invalid` naming the parameter.
    pub fn required<T: FromStr<Err = Error>>(&self, name: &str) -> Result<T> {
        self.optional(name)?
            .ok_or_else(|| Error::invalid(name, format!("the query parameter {name} is required")))
    }

    /// An optional parameter.
    ///
    /// # Errors
    /// `Invalid` naming the parameter when it does not parse.
    pub fn optional<T: FromStr<Err = Error>>(&self, name: &str) -> Result<Option<T>> {
        self.0
            .get(name)
            .map(|v| v.parse::<T>().map_err(|e| e.with_field(name)))
            .transpose()
    }

    /// An optional parameter parsed by `parse`.
    ///
    /// # Errors
    /// `Invalid` naming the parameter when it does not parse.
    pub fn optional_with<T, E: std::fmt::Display>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Result<Option<T>> {
        self.0
            .get(name)
            .map(|v| parse(v).map_err(|e| Error::invalid(name, format!("{name} {v:?}: {e}"))))
            .transpose()
    }
}

/// Parses a path segment as an id, naming `field` on failure.
///
/// # Errors
/// `Invalid` naming `field`.
pub fn path_id<T: FromStr<Err = Error>>(field: &str, s: &str) -> Result<T> {
    s.parse().map_err(|e: Error| e.with_field(field))
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = axum::response::Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // One credential per request, whichever authenticator reads it: a
        // proxy in front may read another of several.
        let n = parts.headers.get_all(AUTHORIZATION).iter().count();
        if n > 1 {
            return Err(ApiError(Error::invalid(
                "authorization",
                format!("the request has {n} Authorization headers; send exactly one"),
            ))
            .into_response());
        }
        let caller = state
            .auth
            .authenticate(parts)
            .await
            .map_err(|e| ApiError(e).into_response())?;
        super::traced::record_caller(&caller);
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        expected: Option<u64>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        count: u64,
        #[serde(rename = "ref")]
        r: Option<Inner>,
    }

    fn field_of(json: &str) -> String {
        parse_json::<Outer>(json.as_bytes())
            .unwrap_err()
            .field
            .unwrap()
    }

    #[test]
    fn json_errors_name_the_field() {
        assert_eq!(field_of("{\"count\": -1}"), "count");
        assert_eq!(field_of("{}"), "count");
        assert_eq!(field_of(""), "count");
        assert_eq!(field_of("{\"count\": 1, \"cuont\": 2}"), "cuont");
        assert_eq!(
            field_of("{\"count\": 1, \"ref\": {\"expected\": \"x\"}}"),
            "ref.expected"
        );
        assert_eq!(
            field_of("{\"count\": 1, \"ref\": {\"nope\": 1}}"),
            "ref.nope"
        );
        assert_eq!(field_of("not json"), "body");
        assert_eq!(field_of("{\"count\": 1"), "body");
    }

    fn message_of(json: &str) -> String {
        parse_json::<Outer>(json.as_bytes()).unwrap_err().message
    }

    /// Issue 46: a string for an object field answered `expected struct
    /// RefMove`, a Rust type's name. Errors say what JSON takes.
    #[test]
    fn json_errors_are_worded_in_json_terms() {
        let m = message_of("{\"count\": 1, \"ref\": \"sessions/x\"}");
        assert!(m.contains("expected an object"), "{m}");
        assert!(!m.contains("struct"), "{m}");
        let m = message_of("{\"count\": \"one\"}");
        assert!(m.contains("expected a non-negative integer"), "{m}");
        assert!(!m.contains("u64"), "{m}");
        let m = message_of("{\"count\": {}}");
        assert!(m.contains("invalid type: object"), "{m}");
        let m = message_of("{\"count\": [1]}");
        assert!(m.contains("invalid type: array"), "{m}");
        let m = message_of("{\"count\": 1, \"ref\": {\"expected\": 1.5}}");
        assert!(m.contains("ref.expected"), "{m}");
        assert!(!m.contains("u64"), "{m}");
    }

    #[test]
    fn an_empty_body_is_only_json_whitespace() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Empty {}
        assert!(parse_json::<Empty>(b" \t\r\n").is_ok());
        // A form feed is whitespace to ASCII, not to JSON: a body of one
        // is not empty but not JSON either.
        for body in [&b"\x0c"[..], b" \x0c ", b"\x0b"] {
            let e = parse_json::<Empty>(body).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("body"), "{body:?}");
        }
    }

    #[test]
    fn text_after_the_json_value_is_refused() {
        for body in [
            "{\"count\": 1} garbage",
            "{\"count\": 1}{}",
            "{\"count\": 1} 2",
        ] {
            let e = parse_json::<Outer>(body.as_bytes()).unwrap_err();
            assert_eq!(
                (e.kind, e.field.as_deref()),
                (ErrorKind::Invalid, Some("body")),
                "{body}"
            );
        }
        // Whitespace after it is fine.
        assert!(parse_json::<Outer>(b"{\"count\": 1}\n\t ").is_ok());
    }
}
