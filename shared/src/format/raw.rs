//! `raw`: opaque bytes. Any input is valid, deltas concatenate by byte
//! append, tokens are estimated at one per four bytes, and there is no
//! canonical form: translating raw bytes is the raw fallback tier.

use bytes::Bytes;

use super::canonical::Conversation;
use super::{Carries, Checked, Codec, Counts, Encoded, FormatId, estimate_tokens};
use crate::error::{Error, Result};

/// Opaque bytes; also the behaviour of every format id no codec claims.
#[derive(Debug, Default)]
pub struct RawCodec;

/// Byte append, the concatenation of `raw` and `claude-code-v1`.
pub(crate) fn append(parts: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out.into()
}

impl Codec for RawCodec {
    fn id(&self) -> FormatId {
        FormatId::raw()
    }

    fn runtime(&self) -> &'static str {
        "raw"
    }

    fn version(&self) -> u32 {
        1
    }

    fn describe(&self) -> &'static str {
        "opaque bytes that ctx stores and concatenates by byte append without interpreting them"
    }

    fn structured(&self) -> bool {
        false
    }

    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        Ok(Checked {
            open_results: Vec::new(),
            counts: self.count(delta),
            kept: Vec::new(),
        })
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        Ok(append(parts))
    }

    fn count(&self, delta: &[u8]) -> Counts {
        Counts {
            messages: None,
            tokens: estimate_tokens(delta.len()),
        }
    }

    fn to_canonical(&self, _bytes: &[u8]) -> Result<Conversation> {
        Err(Error::invalid(
            "format",
            "opaque bytes have no canonical form",
        ))
    }

    fn encode_canonical(&self, _conv: &Conversation) -> Result<Encoded> {
        Err(Error::invalid(
            "format",
            "opaque bytes have no canonical form",
        ))
    }

    fn carries(&self) -> Carries {
        Carries {
            system: false,
            thinking: false,
            tool_errors: false,
        }
    }
}
