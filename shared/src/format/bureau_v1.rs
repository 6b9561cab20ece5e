//! `bureau-agent-v1`: a CBOR array of message structs (ciborium): `role`
//! (system / user / assistant / tool), `content` blocks tagged by `kind`
//! (text, image with raw bytes, image_url, thinking with signature,
//! redacted_thinking), `tool_calls` (`id`, `name`, `arguments`),
//! `tool_results` (`call_id`, `content`, `is_error`) and an RFC 3339
//! `timestamp`. Unknown fields are refused.
//!
//! Deltas concatenate by merging arrays: the output is one definite-length
//! array whose items are the parts' items, byte for byte.

use std::io::Read;

use base64::Engine as _;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::canonical::{Block, Conversation, ImageSource, Message, Role};
use super::{Codec, Encoded, FormatId, at_index, bad};
use crate::error::Result;

const ID: &str = "bureau-agent-v1";

/// `bureau-agent-v1`.
#[derive(Debug, Default)]
pub struct BureauV1Codec;

/// Bytes that CBOR encodes as a byte string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByteBuf(pub Vec<u8>);

impl Serialize for ByteBuf {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// Who speaks (shared with v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RoleV1 {
    System,
    User,
    Assistant,
    Tool,
}

/// A content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum BlockV1 {
    Text {
        text: String,
    },
    Image {
        media_type: String,
        data: ByteBuf,
    },
    ImageUrl {
        url: String,
    },
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCallV1 {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// A tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolResultV1 {
    pub call_id: String,
    #[serde(default)]
    pub content: Vec<BlockV1>,
    #[serde(default)]
    pub is_error: bool,
}

/// A message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageV1 {
    pub role: RoleV1,
    #[serde(default)]
    pub content: Vec<BlockV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResultV1>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

struct Counting<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.bytes.len() - self.pos);
        buf[..n].copy_from_slice(&self.bytes[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Decodes one CBOR array, naming the byte offset of what is wrong.
pub(crate) fn decode_array(format: &str, bytes: &[u8]) -> Result<Vec<ciborium::Value>> {
    let mut r = Counting { bytes, pos: 0 };
    let v: ciborium::Value = ciborium::from_reader(&mut r).map_err(|e| {
        let what = match &e {
            ciborium::de::Error::Io(_) => {
                "truncated CBOR: the input ends inside an item".to_owned()
            }
            ciborium::de::Error::Syntax(_) => "not CBOR: a malformed item".to_owned(),
            ciborium::de::Error::Semantic(_, m) => format!("not CBOR: {m}"),
            ciborium::de::Error::RecursionLimitExceeded => "CBOR nested too deeply".to_owned(),
        };
        let offset = match e {
            ciborium::de::Error::Syntax(o) | ciborium::de::Error::Semantic(Some(o), _) => o,
            _ => r.pos,
        };
        bad(format, format!("byte offset {offset}"), what)
    })?;
    if r.pos != bytes.len() {
        return Err(bad(
            format,
            format!("byte offset {}", r.pos),
            format!("{} bytes after the array", bytes.len() - r.pos),
        ));
    }
    match v {
        ciborium::Value::Array(items) => Ok(items),
        other => Err(bad(
            format,
            "byte offset 0",
            format!(
                "expected a CBOR array of messages, found {}",
                cbor_kind(&other)
            ),
        )),
    }
}

fn cbor_kind(v: &ciborium::Value) -> &'static str {
    use ciborium::Value as V;
    match v {
        V::Integer(_) => "an integer",
        V::Bytes(_) => "a byte string",
        V::Float(_) => "a float",
        V::Text(_) => "a text string",
        V::Bool(_) => "a boolean",
        V::Null => "null",
        V::Tag(..) => "a tagged item",
        V::Array(_) => "an array",
        V::Map(_) => "a map",
        _ => "an unknown item",
    }
}

/// Decodes a CBOR array of `T`, naming the index of a message of the wrong shape.
pub(crate) fn decode_messages<T: DeserializeOwned>(format: &str, bytes: &[u8]) -> Result<Vec<T>> {
    decode_array(format, bytes)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.deserialized::<T>().map_err(|e| {
                let ciborium::value::Error::Custom(why) = e;
                bad(format, at_index(i), format!("not a message: {why}"))
            })
        })
        .collect()
}

/// Encodes messages as one CBOR array.
pub(crate) fn encode<T: Serialize>(items: &[T]) -> Bytes {
    let mut out = Vec::new();
    ciborium::into_writer(items, &mut out).expect("writing CBOR to memory cannot fail");
    out.into()
}

/// Reads a CBOR array header: (item count, header length); `None` for an
/// indefinite-length array or anything else.
fn array_header(p: &[u8]) -> Option<(u64, usize)> {
    let first = *p.first()?;
    if first >> 5 != 4 {
        return None;
    }
    let info = first & 0x1f;
    let be = |n: usize| -> Option<u64> {
        let b = p.get(1..1 + n)?;
        Some(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    };
    match info {
        0..=23 => Some((u64::from(info), 1)),
        24 => Some((be(1)?, 2)),
        25 => Some((be(2)?, 3)),
        26 => Some((be(4)?, 5)),
        27 => Some((be(8)?, 9)),
        _ => None,
    }
}

fn write_header(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=23 => out.push(0x80 | n as u8),
        24..=0xff => out.extend_from_slice(&[0x98, n as u8]),
        0x100..=0xffff => {
            out.push(0x99);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0x9a);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(0x9b);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Merges CBOR arrays into one definite-length array. Items of
/// definite-length parts are copied as bytes; an indefinite-length part is
/// decoded and its items re-encoded.
pub(crate) fn concat_arrays(format: &str, parts: &[Bytes]) -> Result<Bytes> {
    // First the item count (the header comes first), then one copy.
    let mut count = 0u64;
    let mut bodies: Vec<std::borrow::Cow<'_, [u8]>> = Vec::with_capacity(parts.len());
    for p in parts {
        match array_header(p) {
            Some((n, len)) => {
                // A declared count is untrusted: parts claiming more than
                // 2^64 items in all are malformed, not an overflow.
                count = count.checked_add(n).ok_or_else(|| {
                    crate::error::Error::invalid(
                        "delta",
                        format!("{format}: the parts declare more than 2^64 items"),
                    )
                })?;
                bodies.push(std::borrow::Cow::Borrowed(&p[len..]));
            }
            None => {
                let items = decode_array(format, p)?;
                count += items.len() as u64;
                let mut body = Vec::new();
                for item in &items {
                    ciborium::into_writer(item, &mut body)
                        .expect("writing CBOR to memory cannot fail");
                }
                bodies.push(std::borrow::Cow::Owned(body));
            }
        }
    }
    let mut out = Vec::with_capacity(bodies.iter().map(|b| b.len()).sum::<usize>() + 9);
    write_header(&mut out, count);
    for b in &bodies {
        out.extend_from_slice(b);
    }
    Ok(out.into())
}

/// Structural checks a schema cannot express.
pub(crate) fn check_messages(format: &str, msgs: &[MessageV1]) -> Result<()> {
    for (i, m) in msgs.iter().enumerate() {
        let at = at_index(i);
        if !m.tool_calls.is_empty() && m.role != RoleV1::Assistant {
            return Err(bad(format, &at, "only assistant messages make tool calls"));
        }
        if !m.tool_results.is_empty() && !matches!(m.role, RoleV1::User | RoleV1::Tool) {
            return Err(bad(
                format,
                &at,
                "only user and tool messages carry tool results",
            ));
        }
        if m.role != RoleV1::Assistant
            && m.content.iter().any(|b| {
                matches!(
                    b,
                    BlockV1::Thinking { .. } | BlockV1::RedactedThinking { .. }
                )
            })
        {
            return Err(bad(format, &at, "only assistant messages hold thinking"));
        }
        if let Some(t) = &m.timestamp
            && chrono::DateTime::parse_from_rfc3339(t).is_err()
        {
            return Err(bad(format, &at, format!("timestamp {t:?} is not RFC 3339")));
        }
    }
    Ok(())
}

fn block_to_canonical(b: BlockV1) -> Block {
    match b {
        BlockV1::Text { text } => Block::Text { text },
        BlockV1::Image { media_type, data } => Block::Image {
            source: ImageSource::Base64 {
                media_type,
                data: base64::engine::general_purpose::STANDARD.encode(data.0),
            },
        },
        BlockV1::ImageUrl { url } => Block::Image {
            source: ImageSource::Url { url },
        },
        BlockV1::Thinking { text, signature } => Block::Thinking {
            thinking: text,
            signature,
        },
        BlockV1::RedactedThinking { data } => Block::RedactedThinking { data },
    }
}

/// v1 messages in the canonical model.
pub(crate) fn to_canonical(msgs: Vec<MessageV1>) -> Conversation {
    let mut messages = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.into_iter().enumerate() {
        let role = match m.role {
            RoleV1::System => Role::System,
            RoleV1::User | RoleV1::Tool => Role::User,
            RoleV1::Assistant => Role::Assistant,
        };
        let mut content = Vec::new();
        for r in m.tool_results {
            content.push(Block::ToolResult {
                tool_use_id: r.call_id,
                content: r.content.into_iter().map(block_to_canonical).collect(),
                is_error: r.is_error,
            });
        }
        content.extend(m.content.into_iter().map(block_to_canonical));
        for c in m.tool_calls {
            content.push(Block::ToolUse {
                id: c.id,
                name: c.name,
                input: c.arguments,
            });
        }
        messages.push(Message {
            role,
            content,
            timestamp: m.timestamp,
            origin: i,
        });
    }
    Conversation { messages }
}

fn block_from_canonical(b: &Block, i: usize, lost: &mut Vec<String>) -> Option<BlockV1> {
    Some(match b {
        Block::Text { text } => BlockV1::Text { text: text.clone() },
        Block::Image {
            source: ImageSource::Base64 { media_type, data },
        } => match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(bytes) => BlockV1::Image {
                media_type: media_type.clone(),
                data: ByteBuf(bytes),
            },
            Err(_) => {
                lost.push(format!("message {i}: an image whose data is not base64"));
                return None;
            }
        },
        Block::Image {
            source: ImageSource::Url { url },
        } => BlockV1::ImageUrl { url: url.clone() },
        Block::Thinking {
            thinking,
            signature,
        } => BlockV1::Thinking {
            text: thinking.clone(),
            signature: signature.clone(),
        },
        Block::RedactedThinking { data } => BlockV1::RedactedThinking { data: data.clone() },
        Block::Other { value, .. } => {
            lost.push(format!(
                "message {i}: a block the format cannot hold: {value}"
            ));
            return None;
        }
        Block::ToolUse { .. } | Block::ToolResult { .. } => {
            lost.push(format!(
                "message {i}: a tool block nested where it cannot be"
            ));
            return None;
        }
    })
}

/// The canonical model as v1 messages, with what could not be kept.
pub(crate) fn from_canonical(conv: &Conversation) -> (Vec<MessageV1>, Vec<String>) {
    let mut lost = Vec::new();
    let mut out = Vec::with_capacity(conv.messages.len());
    for (i, m) in conv.messages.iter().enumerate() {
        let mut msg = MessageV1 {
            role: match m.role {
                Role::System => RoleV1::System,
                Role::User => RoleV1::User,
                Role::Assistant => RoleV1::Assistant,
            },
            content: Vec::new(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            timestamp: m.timestamp.clone(),
        };
        for b in &m.content {
            match b {
                Block::ToolUse { id, name, input } => {
                    if m.role != Role::Assistant {
                        lost.push(format!(
                            "message {i}: a tool use outside an assistant message"
                        ));
                    }
                    msg.tool_calls.push(ToolCallV1 {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: input.clone(),
                    });
                }
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    if !msg.content.is_empty() {
                        lost.push(format!("message {i}: a tool result after other content"));
                    }
                    msg.tool_results.push(ToolResultV1 {
                        call_id: tool_use_id.clone(),
                        content: content
                            .iter()
                            .filter_map(|c| block_from_canonical(c, i, &mut lost))
                            .collect(),
                        is_error: *is_error,
                    });
                }
                other => {
                    if !msg.tool_calls.is_empty() {
                        lost.push(format!("message {i}: content after a tool call"));
                    }
                    if let Some(b) = block_from_canonical(other, i, &mut lost) {
                        msg.content.push(b);
                    }
                }
            }
        }
        if msg.role == RoleV1::User && msg.content.is_empty() && !msg.tool_results.is_empty() {
            msg.role = RoleV1::Tool;
        }
        out.push(msg);
    }
    (out, lost)
}

/// Decodes and checks v1 bytes.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<MessageV1>> {
    let msgs = decode_messages::<MessageV1>(ID, bytes)?;
    check_messages(ID, &msgs)?;
    Ok(msgs)
}

impl Codec for BureauV1Codec {
    fn id(&self) -> FormatId {
        FormatId(ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        "bureau-agent"
    }

    fn version(&self) -> u32 {
        1
    }

    fn describe(&self) -> &'static str {
        "a CBOR array of bureau agent message structs (version 1: role, content, tool_calls, tool_results, timestamp)"
    }

    fn pairs_tool_results(&self) -> bool {
        // The runtime's own log: stored as written.
        false
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        concat_arrays(ID, parts)
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(to_canonical(decode(bytes)?))
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let (msgs, lost) = from_canonical(conv);
        Ok(Encoded {
            bytes: encode(&msgs),
            lost,
        })
    }

    fn field_level(&self, target: &FormatId, part: &[u8]) -> Option<Result<Bytes>> {
        (target.as_str() == super::bureau_v2::ID).then(|| {
            let v1 = decode(part)?;
            let v2: Vec<_> = v1.into_iter().map(super::bureau_v2::from_v1).collect();
            Ok(encode(&v2))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> MessageV1 {
        MessageV1 {
            role: RoleV1::User,
            content: vec![BlockV1::Text { text: text.into() }],
            tool_calls: vec![],
            tool_results: vec![],
            timestamp: Some("2026-11-22T10:00:00Z".into()),
        }
    }

    #[test]
    fn bad_deltas_name_the_offset_or_index() {
        let good = encode(&[msg("a"), msg("b")]);
        let e = BureauV1Codec
            .validate(&good[..good.len() - 3])
            .unwrap_err()
            .message;
        assert!(
            e.starts_with("not a valid bureau-agent-v1 delta: at byte offset"),
            "{e}"
        );
        assert!(e.contains("truncated CBOR"), "{e}");
        let mut extra = good.to_vec();
        extra.push(0);
        assert!(
            BureauV1Codec
                .validate(&extra)
                .unwrap_err()
                .message
                .contains("1 bytes after the array")
        );
        let map = encode(&[std::collections::BTreeMap::from([("role", "user")])]);
        let e = BureauV1Codec.validate(&map[1..]).unwrap_err().message;
        assert!(
            e.contains("at byte offset 0: expected a CBOR array of messages, found a map"),
            "{e}"
        );
        let wrong = encode(&[serde_json::json!({"role": "user", "content": [], "colour": 1})]);
        let e = BureauV1Codec.validate(&wrong).unwrap_err().message;
        assert!(e.contains("at index 0: not a message"), "{e}");
        let mut bad_time = msg("x");
        bad_time.timestamp = Some("noon".into());
        let e = BureauV1Codec
            .validate(&encode(&[msg("x"), bad_time]))
            .unwrap_err()
            .message;
        assert!(
            e.contains("at index 1: timestamp \"noon\" is not RFC 3339"),
            "{e}"
        );
    }

    #[test]
    fn arrays_merge_into_one_definite_array() {
        let many: Vec<_> = (0..30).map(|i| msg(&i.to_string())).collect();
        let parts = [
            encode(&many[..1]),
            encode(&[] as &[MessageV1]),
            encode(&many[1..]),
        ];
        let joined = BureauV1Codec.concat(&parts).unwrap();
        assert_eq!(joined, encode(&many));
        // An indefinite-length part is decoded and re-encoded.
        let mut indefinite = vec![0x9f];
        ciborium::into_writer(&msg("0"), &mut indefinite).unwrap();
        indefinite.push(0xff);
        assert!(BureauV1Codec.validate(&indefinite).is_ok());
        let joined = BureauV1Codec
            .concat(&[Bytes::from(indefinite), encode(&many[1..])])
            .unwrap();
        assert_eq!(joined, encode(&many));
    }
}
