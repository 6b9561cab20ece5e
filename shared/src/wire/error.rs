//! The body of every error response: `{"error": {"kind", "message",
//! "field"?}}`, plus `current` on a lost compare-and-swap.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, ErrorKind};

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
                kind: e.kind,
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
        let mut e = Error::new(b.error.kind, b.error.message);
        e.field = b.error.field;
        e.current = b.current;
        e
    }
}
