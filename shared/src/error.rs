//! The one error type of ctx: a short kind a caller can act on, a message
//! that says what was wrong and with which value, and optionally the field.
//!
//! Backends keep their own error enums and convert into [`Error`]; the HTTP
//! layer maps [`ErrorKind`] to a status in one place (`api::error`).

use std::fmt;

/// What a caller can do about an error. On the wire (the `kind` of an
/// error body) it is the snake_case name, as `as_str` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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

impl ErrorKind {
    /// Every kind.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::Invalid,
        ErrorKind::Unauthenticated,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Gone,
        ErrorKind::TooLarge,
        ErrorKind::RateLimited,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// The wire name of the kind, as in error bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Gone => "gone",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }

    /// Whether retrying the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Unavailable | ErrorKind::RateLimited)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The crate error.
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct Error {
    /// What the caller can do about it.
    pub kind: ErrorKind,
    /// What was wrong, with the offending value.
    pub message: String,
    /// The request field at fault, as a JSON path (`ref.expected`).
    pub field: Option<String>,
    /// For a lost compare-and-swap: the current value.
    pub current: Option<String>,
    /// For `RateLimited`, and for an `Unavailable` that is the server's
    /// own back-pressure (logged at WARN, not ERROR): seconds until a retry
    /// may succeed (the `Retry-After` header); 1 when absent.
    pub retry_after: Option<u64>,
    /// The underlying cause, if any.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            field: None,
            current: None,
            retry_after: None,
            source: None,
        }
    }

    /// Invalid input in `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Invalid, message).with_field(field)
    }

    /// Nothing called `what` exists (for this tenant).
    pub fn not_found(what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::NotFound, format!("{what} not found"))
    }

    /// A lost compare-and-swap; `current` is what the value is now.
    pub fn conflict(message: impl Into<String>, current: Option<String>) -> Self {
        let mut e = Error::new(ErrorKind::Conflict, message);
        e.current = current;
        e
    }

    /// A storage or dependency failure that may pass.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unavailable, message)
    }

    /// A bug or corrupted data.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }

    /// Too many requests: retry after `seconds`.
    pub fn rate_limited(message: impl Into<String>, seconds: u64) -> Self {
        let mut e = Error::new(ErrorKind::RateLimited, message);
        e.retry_after = Some(seconds.max(1));
        e
    }

    /// Sets the field at fault.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_their_wire_names() {
        for &kind in ErrorKind::ALL {
            let json = serde_json::to_value(kind).expect("a kind serializes");
            assert_eq!(json, serde_json::Value::from(kind.as_str()));
            let back: ErrorKind = serde_json::from_value(json).expect("and reads back");
            assert_eq!(back, kind);
        }
        assert!(serde_json::from_str::<ErrorKind>("\"NotFound\"").is_err());
    }
}
