//! What the formats whose delta is a JSON array of messages share
//! (`anthropic-messages-v1`, `openai-chat-v1`, `openai-responses-v1`): a
//! codec of such a format says only what differs ([`JsonArray`]: its id and
//! description, how it reads one element and writes a conversation, what it
//! carries), and its [`Codec`] is written once here. Its deltas are
//! validated element by element, named by index; a chain's deltas join by
//! merging the arrays without re-encoding their elements.
//!
//! Also here: the JSON helpers these formats use, and [`Fold`], which
//! builds a conversation from items read one at a time (Codex rollouts,
//! whose records are Responses API items, use it too).

use std::collections::BTreeSet;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::canonical::{Block, Conversation, Message, Role};
use super::{Carries, Checked, Codec, Counts, Encoded, FormatId, OpenResult, at_index, bad};
use crate::error::Result;

/// What differs between the formats whose delta is a JSON array of
/// messages; every implementor is a [`Codec`].
pub(super) trait JsonArray: Send + Sync + 'static {
    /// The format id ([`Codec::id`]).
    const ID: &'static str;
    /// [`Codec::runtime`].
    const RUNTIME: &'static str;
    /// [`Codec::version`].
    const VERSION: u32;
    /// [`Codec::describe`].
    const DESCRIBE: &'static str;
    /// [`Codec::carries`].
    const CARRIES: Carries = Carries::ALL;
    /// [`Codec::pairs_tool_results`].
    const PAIRS_TOOL_RESULTS: bool = true;

    /// Reads one element of the array; the error says what is wrong with
    /// it, and the caller names the format and the index.
    fn item(v: &Value) -> Result<Item, String>;

    /// Writes `conv` as the array's elements, with what could not be
    /// represented faithfully.
    fn elements(conv: &Conversation) -> (Vec<Value>, Vec<String>);
}

impl<F: JsonArray> Codec for F {
    fn id(&self) -> FormatId {
        FormatId(F::ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        F::RUNTIME
    }

    fn version(&self) -> u32 {
        F::VERSION
    }

    fn describe(&self) -> &'static str {
        F::DESCRIBE
    }

    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        let (fold, counts) = decode::<F>(delta)?;
        Ok(Checked {
            open_results: fold.open,
            counts,
            kept: Vec::new(),
        })
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        join_arrays(F::ID, parts)
    }

    fn count(&self, delta: &[u8]) -> Counts {
        match decode::<F>(delta) {
            Ok((_, counts)) => counts,
            Err(_) => Counts {
                messages: None,
                tokens: super::estimate_tokens(delta.len()),
            },
        }
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(decode::<F>(bytes)?.0.conv)
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let (elements, lost) = F::elements(conv);
        let bytes =
            serde_json::to_vec(&Value::Array(elements)).expect("a JSON value always serializes");
        Ok(Encoded {
            bytes: bytes.into(),
            lost,
        })
    }

    fn carries(&self) -> Carries {
        F::CARRIES
    }

    fn pairs_tool_results(&self) -> bool {
        F::PAIRS_TOOL_RESULTS
    }
}

/// Reads the array's elements into a conversation, with the counts of the
/// array: its messages are its elements (a run of items folded into one
/// canonical message is not what was sent or what is returned).
fn decode<F: JsonArray>(bytes: &[u8]) -> Result<(Fold, Counts)> {
    let mut fold = Fold::default();
    let mut elements = 0;
    each_element(F::ID, bytes, |i, v| {
        let at = at_index(i);
        let item = F::item(&v).map_err(|e| bad(F::ID, &at, e))?;
        fold.push(item, i, &at, None);
        elements = i + 1;
        Ok(())
    })?;
    let counts = Counts {
        messages: Some(elements as u64),
        tokens: fold.conv.estimate_tokens(),
    };
    Ok((fold, counts))
}

/// An element read: content of one role, and the run it belongs to.
pub(super) struct Item {
    /// Whose content it is.
    pub(super) role: Role,
    /// The content.
    pub(super) blocks: Vec<Block>,
    /// The run it belongs to.
    pub(super) run: Run,
}

/// Items of one run (but `Alone`) next to each other are one message.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Run {
    /// Assistant messages, function calls, reasoning.
    Assistant,
    /// Tool results.
    Results,
    /// Everything else: a message of its own.
    #[default]
    Alone,
}

/// A conversation built from items in order, with the tool results whose
/// tool use is not earlier (only the chain can say whether they answer
/// anything).
#[derive(Default)]
pub(super) struct Fold {
    /// The messages so far.
    pub(super) conv: Conversation,
    /// Tool results whose tool use is not earlier, where their items are.
    pub(super) open: Vec<OpenResult>,
    /// Tool uses so far.
    calls: BTreeSet<String>,
    /// The run of the last item.
    last_run: Run,
}

impl Fold {
    /// Adds `item`, read from the element at `origin` (named `at`): to the
    /// last message when it continues its run, else as a message of its
    /// own dated `timestamp`.
    pub(super) fn push(&mut self, item: Item, origin: usize, at: &str, timestamp: Option<String>) {
        for b in &item.blocks {
            match b {
                Block::ToolUse { id, .. } => {
                    self.calls.insert(id.clone());
                }
                Block::ToolResult { tool_use_id, .. } if !self.calls.contains(tool_use_id) => {
                    self.open.push(OpenResult {
                        tool_use_id: tool_use_id.clone(),
                        at: at.to_owned(),
                    });
                }
                _ => {}
            }
        }
        let messages = &mut self.conv.messages;
        match messages.last_mut() {
            Some(prev) if item.run != Run::Alone && item.run == self.last_run => {
                prev.content.extend(item.blocks);
            }
            _ => messages.push(Message {
                role: item.role,
                content: item.blocks,
                timestamp,
                origin,
            }),
        }
        self.last_run = item.run;
    }
}

/// The JSON type of `v`, as an error message names it.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The string field `key` of `obj`, `what` naming `obj` in the error.
pub(super) fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a str, String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "{what} field {key:?} is {}, not a string",
            kind(other)
        )),
        None => Err(format!("{what} has no {key:?}")),
    }
}

/// The byte offset of serde_json's (line, column) in `bytes`.
fn json_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in bytes.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(bytes.len());
        }
        offset += l.len() + 1;
    }
    bytes.len()
}

/// Parses a whole JSON document, naming the byte offset of a syntax error.
fn parse_json(format: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        bad(
            format,
            format!("byte offset {}", json_offset(bytes, e.line(), e.column())),
            format!("not JSON: {e}"),
        )
    })
}

/// Hands `f` each element of a JSON array of messages with its index, in
/// order, parsed one at a time: only one element is a JSON tree at any
/// moment, never the whole array. The first error wins: a syntax error
/// (naming its byte offset), or what `f` returned. Bytes that are not an
/// array give the error naming what they are instead.
fn each_element(
    format: &str,
    bytes: &[u8],
    mut f: impl FnMut(usize, Value) -> Result<()>,
) -> Result<()> {
    use serde::Deserializer as _;
    use serde::de::{Error as _, SeqAccess, Visitor};

    struct Elements<'a, F> {
        f: &'a mut F,
        failed: &'a mut Option<crate::error::Error>,
    }
    impl<'de, F: FnMut(usize, Value) -> Result<()>> Visitor<'de> for Elements<'_, F> {
        type Value = ();
        fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
            out.write_str("a JSON array of messages")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0;
            while let Some(v) = seq.next_element::<Value>()? {
                if let Err(e) = (self.f)(i, v) {
                    *self.failed = Some(e);
                    return Err(A::Error::custom("stopped by the element's error"));
                }
                i += 1;
            }
            Ok(())
        }
    }

    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        let other = parse_json(format, bytes)?;
        return Err(bad(
            format,
            "byte offset 0",
            format!("expected a JSON array of messages, found {}", kind(&other)),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut failed = None;
    let parsed = de
        .deserialize_seq(Elements {
            f: &mut f,
            failed: &mut failed,
        })
        .and_then(|()| de.end());
    if let Some(e) = failed {
        return Err(e);
    }
    parsed.map_err(|e| {
        bad(
            format,
            format!("byte offset {}", json_offset(bytes, e.line(), e.column())),
            format!("not JSON: {e}"),
        )
    })
}

/// Joins JSON arrays without re-encoding their elements: the first part's
/// opening bracket, every part's elements separated by commas, one closing
/// bracket.
fn join_arrays(format: &str, parts: &[Bytes]) -> Result<Bytes> {
    let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum::<usize>() + 2);
    out.push(b'[');
    let mut any = false;
    for (i, p) in parts.iter().enumerate() {
        let inner =
            array_inner(p).ok_or_else(|| bad(format, format!("part {i}"), "not a JSON array"))?;
        if inner.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if any {
            out.push(b',');
        }
        out.extend_from_slice(inner);
        any = true;
    }
    out.push(b']');
    Ok(out.into())
}

fn array_inner(p: &[u8]) -> Option<&[u8]> {
    let start = p.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = p.iter().rposition(|b| !b.is_ascii_whitespace())?;
    (p[start] == b'[' && p[end] == b']' && start < end).then(|| &p[start + 1..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_join_without_reencoding() {
        let parts = [
            Bytes::from_static(b" [1, 2] "),
            Bytes::from_static(b"[]"),
            Bytes::from_static(b"[3]"),
        ];
        assert_eq!(
            &join_arrays("anthropic-messages-v1", &parts).unwrap()[..],
            b"[1, 2,3]"
        );
        assert_eq!(
            &join_arrays("anthropic-messages-v1", &[]).unwrap()[..],
            b"[]"
        );
    }
}
