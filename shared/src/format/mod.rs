//! Formats: how a commit's artifact bytes are encoded, how the deltas of a
//! chain concatenate into one context, and how a context is translated into
//! another runtime's format.
//!
//! A [`Codec`] per known format is registered in [`Formats`] by id. A format
//! id that no codec claims is still accepted and stored, as opaque bytes
//! that concatenate by byte append (the `raw` behaviour); it is never
//! guessed at.
//!
//! # Layout
//! - this file: [`FormatId`], the [`Codec`] trait, the [`Formats`] registry.
//! - [`canonical`]: the canonical message model every structured format
//!   converts to and from, token estimates, the narrative rendering.
//! - `raw`: opaque bytes.
//! - `claude_code`: `claude-code-v1`, Claude Code transcript JSONL, and the
//!   turn/compaction segmentation used by `ctx import claude-code`.
//! - `bureau_v1`, `bureau_v2`: `bureau-agent-v1` / `-v2`, CBOR arrays of
//!   message structs; v2 renames and restructures fields of v1, and the
//!   field-level mapping between them lives in `bureau_v2`.
//! - `anthropic`: `anthropic-messages-v1`, a JSON array of Messages API
//!   messages (the content-block mapping is shared with `claude_code`).
//! - `openai`: `openai-chat-v1`, a JSON array of Chat Completions messages.
//! - `openai_responses`: `openai-responses-v1`, a JSON array of Responses
//!   API input items (an OpenAI Agents SDK session).
//! - `codex`: `codex-rollout-v1`, an OpenAI Codex CLI rollout (JSONL of
//!   `{timestamp, type, payload}` records whose response items are
//!   Responses API items, read with `openai_responses`' item mapping).
//! - `gemini`: `gemini-cli-v1`, a Gemini CLI session file (JSONL of
//!   metadata, message, `$set` and `$rewindTo` records).
//! - `jsonl`: the lenient record reader those two share.
//! - `json_array`: what the JSON array formats (`anthropic`, `openai`,
//!   `openai_responses`) share: each says only what differs (a
//!   `JsonArray`), and their `Codec` is written once there; also the JSON
//!   helpers and the fold of items into messages that `codex` uses too.
//! - [`translate`]: the translation tiers (native, field-level,
//!   cross-runtime, narrative, raw).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

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

mod anthropic;
mod bureau_v1;
mod bureau_v2;
pub mod canonical;
mod claude_code;
mod codex;
mod gemini;
mod json_array;
mod jsonl;
mod openai;
mod openai_responses;
mod raw;
pub mod translate;

pub use anthropic::AnthropicCodec;
pub use bureau_v1::BureauV1Codec;
pub use bureau_v2::BureauV2Codec;
pub use claude_code::{ClaudeCodeCodec, Segment, SegmentKind, segments};
pub use codex::{CodexCodec, codex_segments};
pub use gemini::{GeminiCodec, gemini_segments};
pub use openai::OpenAiCodec;
pub use openai_responses::OpenAiResponsesCodec;
pub use raw::RawCodec;
pub use translate::{Fidelity, FidelityChange, FidelityChangeKind, Tier, Translated};

use canonical::Conversation;

/// Counts the server derives from a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Messages, when the format knows what a message is.
    pub messages: Option<u64>,
    /// Estimated tokens.
    pub tokens: u64,
}

impl Counts {
    /// The counts of a decoded conversation: its messages and the token
    /// estimate of its content ([`Conversation::estimate_tokens`]).
    pub fn of(conv: &Conversation) -> Self {
        Counts {
            messages: Some(conv.messages.len() as u64),
            tokens: conv.estimate_tokens(),
        }
    }
}

/// A tool result in a delta whose tool use is not in the same delta: only
/// the chain (the parent's delta) can say whether it answers anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenResult {
    /// The tool use it answers.
    pub tool_use_id: String,
    /// Where it is, as an error message names it (`index 3`, `byte offset 120 (line 4)`).
    pub at: String,
}

/// What validating a delta found: what only the chain can check, and the
/// counts, so that a checkpoint decodes its delta once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Tool results that answer a tool use outside the delta.
    pub open_results: Vec<OpenResult>,
    /// The delta's counts.
    pub counts: Counts,
    /// Lines of a log format stored as written that look wrong, each with
    /// where, why and how it is read (as no message, or as its entry): a
    /// checkpoint warns of each.
    pub kept: Vec<String>,
}

impl Checked {
    /// What a decoded delta holds; `at` names where message `i` is.
    pub fn of(conv: &Conversation, at: impl Fn(usize) -> String) -> Self {
        Checked {
            open_results: conv
                .open_results()
                .into_iter()
                .map(|(tool_use_id, i)| OpenResult {
                    tool_use_id,
                    at: at(i),
                })
                .collect(),
            counts: Counts::of(conv),
            kept: Vec::new(),
        }
    }
}

/// `index i`, how array formats name a message's place.
pub(crate) fn at_index(i: usize) -> String {
    format!("index {i}")
}

/// `line n`, how log formats name the place of the message whose origin
/// is line `origin` counted from 0.
pub(crate) fn at_line(origin: usize) -> String {
    format!("line {}", origin + 1)
}

/// What a format can hold beyond messages, text, images and tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carries {
    /// System prompts.
    pub system: bool,
    /// Thinking blocks (with signatures) and redacted thinking.
    pub thinking: bool,
    /// A flag marking a tool result as an error.
    pub tool_errors: bool,
}

impl Carries {
    /// Everything.
    pub const ALL: Carries = Carries {
        system: true,
        thinking: true,
        tool_errors: true,
    };
}

/// A context encoded from the canonical model.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The bytes in the codec's format.
    pub bytes: Bytes,
    /// What could not be represented faithfully (empty when nothing was lost).
    pub lost: Vec<String>,
}

/// One format's behaviour.
pub trait Codec: Send + Sync + 'static {
    /// The format this codec handles.
    fn id(&self) -> FormatId;

    /// The runtime whose format this is (`claude-code`, `bureau-agent`, ...):
    /// codecs of one runtime with different versions may map field by field.
    fn runtime(&self) -> &'static str;

    /// The version of the runtime's format.
    fn version(&self) -> u32;

    /// One sentence describing the format, for raw fallbacks and narratives.
    fn describe(&self) -> &'static str;

    /// Whether the codec understands messages (false for opaque bytes).
    fn structured(&self) -> bool {
        true
    }

    /// Checks that `delta` is a valid delta of this format.
    ///
    /// The default decodes it ([`Codec::to_canonical`]) and reports what it
    /// holds ([`Checked::of`]), each place named by [`Codec::place`].
    ///
    /// # Errors
    /// `Invalid` on field `delta`, naming the format, the byte offset or
    /// array index, and what was wrong.
    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        Ok(Checked::of(&self.to_canonical(delta)?, |i| self.place(i)))
    }

    /// Joins the deltas of a chain, oldest first, into one context.
    ///
    /// # Errors
    /// `Invalid` when a part cannot be decoded.
    fn concat(&self, parts: &[Bytes]) -> Result<Bytes>;

    /// Appends `parts` to `prefix`, a result of this codec's [`concat`]
    /// (`Codec::concat`), giving byte for byte what `concat` of the parts
    /// `prefix` was made of followed by `parts` gives; incremental
    /// materialize uses it to extend a cached ancestor's context. `None`
    /// when the codec cannot, and the caller joins the whole chain with
    /// `concat` instead.
    ///
    /// The default joins `prefix` as the first part, which is right when
    /// `concat` is associative (a joined result joined again with more
    /// parts is the join of all of them): true of every codec here (byte
    /// append, JSON arrays, JSONL, definite-length CBOR arrays), and
    /// checked per format by the proptest
    /// `materialize_incremental_equals_full`. A codec whose `concat` is
    /// not associative answers `None`.
    ///
    /// # Errors
    /// `Invalid` when a part cannot be decoded.
    fn concat_onto(&self, prefix: &Bytes, parts: &[Bytes]) -> Option<Result<Bytes>> {
        let mut all = Vec::with_capacity(parts.len() + 1);
        all.push(prefix.clone());
        all.extend_from_slice(parts);
        Some(self.concat(&all))
    }

    /// Counts what `delta` holds: messages and the token estimate of the
    /// canonical content ([`canonical::Conversation::estimate_tokens`]).
    fn count(&self, delta: &[u8]) -> Counts {
        match self.to_canonical(delta) {
            Ok(c) => Counts::of(&c),
            Err(_) => Counts {
                messages: None,
                tokens: estimate_tokens(delta.len()),
            },
        }
    }

    /// Where the element a decoded message came from (its `origin`) is,
    /// as a person would look for it: `index 3` in an array format.
    fn place(&self, origin: usize) -> String {
        at_index(origin)
    }

    /// Decodes a (valid) context into the canonical model.
    ///
    /// # Errors
    /// `Invalid` when the bytes are not valid, or the codec is opaque.
    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation>;

    /// Encodes a canonical conversation in this format, listing what could
    /// not be represented.
    ///
    /// # Errors
    /// `Invalid` when the codec is opaque.
    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded>;

    /// What the format can hold; what it cannot is dropped in translation
    /// without making it unfaithful (see `docs/adr/0003`).
    fn carries(&self) -> Carries {
        Carries::ALL
    }

    /// Maps `part` field by field into `target`, a format of the same
    /// runtime; `None` when no such mapping exists.
    fn field_level(&self, _target: &FormatId, _part: &[u8]) -> Option<Result<Bytes>> {
        None
    }

    /// Whether the format refuses a tool result that answers no tool use
    /// in the chain, as an API's does. A runtime's own log (a Claude Code
    /// transcript, a bureau agent's message log) holds such results after
    /// interrupted tool calls, rewinds and resumed sessions: it is stored as
    /// written, with a warning, and repaired only when translated into a
    /// format that refuses them: carried as text saying what they are, as
    /// are tool calls without their result (`translate`).
    fn pairs_tool_results(&self) -> bool {
        true
    }

    /// Whether a compaction commit's artifact in this format is part of the
    /// original history (materialized under `stop: root`). True where the
    /// runtime's own log records the compaction, as a Claude Code transcript
    /// does.
    fn compaction_in_history(&self) -> bool {
        false
    }

    /// Checks a (valid) delta checkpointed as a compaction commit.
    ///
    /// # Errors
    /// `Invalid` on field `delta` when the format's compactions have a
    /// shape and this is not it.
    fn check_compaction(&self, _delta: &[u8]) -> Result<()> {
        Ok(())
    }

    /// The delta of a compaction commit that stands in for `context` (a
    /// context of this format, from its nearest compaction) with `summary`:
    /// one user message opening with [`COMPACTION_PREAMBLE`] in a
    /// structured format, the summary's text ending its line in an opaque
    /// one (as every delta of lines that ctx writes does). A format
    /// whose runtime records compactions in its own log writes what the
    /// runtime writes. `at` is when the compaction happened.
    ///
    /// # Errors
    /// `Invalid` when `context` cannot be decoded where the format needs it.
    fn compaction_delta(
        &self,
        summary: &str,
        _context: &[u8],
        _at: DateTime<Utc>,
    ) -> Result<Bytes> {
        if !self.structured() {
            // Opaque bytes join by byte append: the summary ends its line,
            // or the delta after it would continue it.
            return Ok(Bytes::from(end_line(summary)));
        }
        let conv = Conversation {
            messages: vec![canonical::Message::new(
                canonical::Role::User,
                vec![canonical::Block::text(format!(
                    "{COMPACTION_PREAMBLE}\n\n{summary}"
                ))],
            )],
        };
        Ok(self.encode_canonical(&conv)?.bytes)
    }
}

/// How a compaction's summary message opens: what Claude Code writes at a
/// compaction, so a model reading it knows what it is.
pub const COMPACTION_PREAMBLE: &str = "This session is being continued from a previous \
conversation that ran out of context. The conversation is summarized below:";

/// `text` ending its line: with a `\n` added unless it has one. What ctx
/// writes into a context of lines (opaque bytes, joined by byte append)
/// ends so, so that the next delta starts on a line of its own.
pub(crate) fn end_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    out.push_str(text);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The chars/4 heuristic on bytes, rounded up.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The error for an invalid delta of `format` at `at`.
pub(crate) fn bad(format: &str, at: impl fmt::Display, what: impl fmt::Display) -> Error {
    Error::invalid(
        "delta",
        format!("not a valid {format} delta: at {at}: {what}"),
    )
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
        f.register(Arc::new(ClaudeCodeCodec));
        f.register(Arc::new(BureauV1Codec));
        f.register(Arc::new(BureauV2Codec));
        f.register(Arc::new(AnthropicCodec));
        f.register(Arc::new(OpenAiCodec));
        f.register(Arc::new(OpenAiResponsesCodec));
        f.register(Arc::new(CodexCodec));
        f.register(Arc::new(GeminiCodec));
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

    /// The empty context in `format`: `concat` of no part (`[]` for a
    /// JSON array format, no bytes for a log). What a materialize of no
    /// context answers (seed 000: `materialize(null)` returns empty, not an
    /// error).
    ///
    /// # Errors
    /// None of the registered codecs fails on no parts.
    pub fn empty(&self, format: &FormatId) -> Result<Bytes> {
        self.codec(format).concat(&[])
    }

    /// Every registered format id.
    pub fn ids(&self) -> impl Iterator<Item = &FormatId> {
        self.codecs.keys()
    }

    /// The error for a context asked for in `format`, which no codec
    /// claims: `Invalid` naming `format` and the formats this server knows
    /// (a mistyped `openai-chat` is told `openai-chat-v1`).
    pub fn unknown(&self, format: &FormatId) -> Error {
        let mut known: Vec<&str> = self.ids().map(FormatId::as_str).collect();
        known.sort_unstable();
        Error::invalid(
            "format",
            format!(
                "format {format} is not one this server knows; it knows {}",
                known.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;

    /// No context is the empty context of each format: bytes its own
    /// codec reads as no message (`[]` for the JSON array formats).
    #[test]
    fn every_format_has_an_empty_context() {
        let formats = Formats::default();
        for id in formats.ids() {
            let empty = formats.empty(id).expect("empty");
            let codec = formats.codec(id);
            if codec.structured() {
                assert_eq!(
                    codec.to_canonical(&empty).expect("reads").messages.len(),
                    0,
                    "{id}"
                );
            }
        }
        let json = |f: &str| formats.empty(&f.parse().unwrap()).unwrap();
        assert_eq!(&json("anthropic-messages-v1")[..], b"[]");
        assert_eq!(&json("openai-chat-v1")[..], b"[]");
        assert!(json("claude-code-v1").is_empty());
        assert!(json("codex-rollout-v1").is_empty());
        assert!(json("gemini-cli-v1").is_empty());
        assert!(json("raw").is_empty());
    }

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
        assert!(RawCodec.validate(b"\xff\x00").is_ok());
        assert_eq!(RawCodec.count(b"12345").tokens, 2);
        assert_eq!(RawCodec.count(b"").tokens, 0);
    }
}
