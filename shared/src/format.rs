//! Formats: how a commit's artifact bytes are encoded and how the deltas of
//! a chain concatenate into one context.
//!
//! A [`Codec`] per known format is registered in [`Formats`] by id. A format
//! id that no codec claims is still accepted and stored, as opaque bytes
//! that concatenate by byte append (the `raw` behaviour).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::error::{Error, Result};

/// A format id such as `raw` or `claude-code-v1`: 1–64 bytes of
/// `a-z 0-9 . _ -`, starting with a letter or digit.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct FormatId(String);

impl FormatId {
    /// The `raw` format: opaque bytes, byte append.
    pub fn raw() -> Self {
        FormatId("raw".to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FormatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for FormatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl FromStr for FormatId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes().enumerate().all(|(i, b)| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || (i > 0 && matches!(b, b'.' | b'_' | b'-'))
            });
        if ok {
            Ok(FormatId(s.to_owned()))
        } else {
            Err(Error::invalid(
                "format",
                format!(
                    "{s:?} is not a format id: use 1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
                ),
            ))
        }
    }
}

impl<'de> Deserialize<'de> for FormatId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: Error| serde::de::Error::custom(e.message))
    }
}

impl utoipa::PartialSchema for FormatId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[a-z0-9][a-z0-9._-]{0,63}$"))
            .description(Some("A format id such as `raw`."))
            .into()
    }
}

impl utoipa::ToSchema for FormatId {}

/// Counts the server derives from a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Messages, when the format knows what a message is.
    pub messages: Option<u64>,
    /// Estimated tokens.
    pub tokens: u64,
}

/// One format's behaviour.
pub trait Codec: Send + Sync + 'static {
    /// The format this codec handles.
    fn id(&self) -> FormatId;

    /// Checks that `delta` is a valid delta of this format.
    ///
    /// # Errors
    /// `Invalid` naming the format, the offset and what was wrong.
    fn validate(&self, delta: &[u8]) -> Result<()>;

    /// Joins the deltas of a chain, oldest first, into one context.
    ///
    /// # Errors
    /// `Invalid` when a part cannot be decoded.
    fn concat(&self, parts: &[Bytes]) -> Result<Bytes>;

    /// Counts what `delta` holds.
    fn count(&self, delta: &[u8]) -> Counts;
}

/// Opaque bytes: any input is valid, deltas concatenate by byte append,
/// tokens are estimated at one per four bytes.
#[derive(Debug, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    fn id(&self) -> FormatId {
        FormatId::raw()
    }

    fn validate(&self, _delta: &[u8]) -> Result<()> {
        Ok(())
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
        for p in parts {
            out.extend_from_slice(p);
        }
        Ok(out.into())
    }

    fn count(&self, delta: &[u8]) -> Counts {
        Counts {
            messages: None,
            tokens: estimate_tokens(delta.len()),
        }
    }
}

/// The chars/4 heuristic on bytes, rounded up.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The codecs known to a service, by format id.
#[derive(Clone)]
pub struct Formats {
    codecs: BTreeMap<FormatId, Arc<dyn Codec>>,
    opaque: Arc<dyn Codec>,
}

impl Default for Formats {
    fn default() -> Self {
        let mut f = Formats {
            codecs: BTreeMap::new(),
            opaque: Arc::new(RawCodec),
        };
        f.register(Arc::new(RawCodec));
        f
    }
}

impl Formats {
    /// Adds (or replaces) the codec for its format.
    pub fn register(&mut self, codec: Arc<dyn Codec>) {
        self.codecs.insert(codec.id(), codec);
    }

    /// The codec for `format`; unknown formats are handled as opaque bytes.
    pub fn codec(&self, format: &FormatId) -> &Arc<dyn Codec> {
        self.codecs.get(format).unwrap_or(&self.opaque)
    }

    /// Whether a codec claims `format`.
    pub fn is_known(&self, format: &FormatId) -> bool {
        self.codecs.contains_key(format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_ids_validate() {
        assert!("claude-code-v1".parse::<FormatId>().is_ok());
        assert!("raw".parse::<FormatId>().is_ok());
        for bad in ["", "-x", "Raw", "a b", &"x".repeat(65)] {
            assert!(bad.parse::<FormatId>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn raw_concatenates_by_byte_append() {
        let parts = [
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"c\n"),
        ];
        assert_eq!(&RawCodec.concat(&parts).unwrap()[..], b"abc\n");
        assert_eq!(RawCodec.count(b"12345").tokens, 2);
        assert_eq!(RawCodec.count(b"").tokens, 0);
    }
}
