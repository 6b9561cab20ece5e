//! The body of every error response: `{"error": {"kind", "message",
//! "field"?}}`, plus `current` on a lost compare-and-swap.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;

/// The body of an error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
    /// For a lost compare-and-swap on a ref: where it points now (absent if
    /// the ref does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
}

/// The error itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// `invalid`, `unauthenticated`, `not_found`, `conflict`, `gone`,
    /// `too_large`, `rate_limited`, `unavailable` or `internal`.
    pub kind: ErrorKind,
    /// What was wrong, with the offending value.
    pub message: String,
    /// The request field at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl From<&Error> for ErrorBody {
    fn from(e: &Error) -> Self {
        ErrorBody {
            error: ErrorDetail {
                kind: e.kind.into(),
                message: e.message.clone(),
                field: e.field.clone(),
            },
            current: e.current.clone(),
        }
    }
}

/// The error a response's body describes: kind, message, field and
/// `current` as the server had them (no source, no `Retry-After`).
impl From<ErrorBody> for Error {
    fn from(b: ErrorBody) -> Self {
        let mut e = Error::new(b.error.kind.into(), b.error.message);
        e.field = b.error.field;
        e.current = b.current;
        e
    }
}

/// What a caller can do about an error. On the wire (the `kind` of an
/// error body) it is the snake_case name, as `as_str` gives it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request is malformed or names something unusable (400).
    Invalid,
    /// No or an unknown credential (401).
    Unauthenticated,
    /// The thing does not exist, or belongs to another tenant (404).
    NotFound,
    /// A compare-and-swap lost, or the state forbids the change (409).
    Conflict,
    /// The thing existed but its bytes were dropped on purpose (an evicted
    /// delta); the message names what to use instead (410).
    Gone,
    /// The body or a field is larger than allowed (413).
    TooLarge,
    /// Too many requests; retry later (429).
    RateLimited,
    /// A dependency is down or throttling; the request may be retried (503).
    Unavailable,
    /// A bug or corrupted storage (500).
    Internal,
}

impl From<crate::error::ErrorKind> for ErrorKind {
    fn from(v: crate::error::ErrorKind) -> Self {
        match v {
            crate::error::ErrorKind::Invalid => ErrorKind::Invalid,
            crate::error::ErrorKind::Unauthenticated => ErrorKind::Unauthenticated,
            crate::error::ErrorKind::NotFound => ErrorKind::NotFound,
            crate::error::ErrorKind::Conflict => ErrorKind::Conflict,
            crate::error::ErrorKind::Gone => ErrorKind::Gone,
            crate::error::ErrorKind::TooLarge => ErrorKind::TooLarge,
            crate::error::ErrorKind::RateLimited => ErrorKind::RateLimited,
            crate::error::ErrorKind::Unavailable => ErrorKind::Unavailable,
            crate::error::ErrorKind::Internal => ErrorKind::Internal,
        }
    }
}

impl From<ErrorKind> for crate::error::ErrorKind {
    fn from(v: ErrorKind) -> Self {
        match v {
            ErrorKind::Invalid => crate::error::ErrorKind::Invalid,
            ErrorKind::Unauthenticated => crate::error::ErrorKind::Unauthenticated,
            ErrorKind::NotFound => crate::error::ErrorKind::NotFound,
            ErrorKind::Conflict => crate::error::ErrorKind::Conflict,
            ErrorKind::Gone => crate::error::ErrorKind::Gone,
            ErrorKind::TooLarge => crate::error::ErrorKind::TooLarge,
            ErrorKind::RateLimited => crate::error::ErrorKind::RateLimited,
            ErrorKind::Unavailable => crate::error::ErrorKind::Unavailable,
            ErrorKind::Internal => crate::error::ErrorKind::Internal,
        }
    }
}
