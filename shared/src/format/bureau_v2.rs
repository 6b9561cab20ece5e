//! `bureau-agent-v2`: version 2 of the bureau agent's CBOR messages. Against
//! v1 it renames and restructures fields: `role` → `author`, `content` →
//! `parts` tagged by `type` (not `kind`), image `media_type`/`data` →
//! `mime`/`bytes`, `thinking` → `reasoning`, `tool_calls` → `calls` with
//! `call_id`/`tool`/`input`, `tool_results` → `results` with
//! `output`/`error`, and the RFC 3339 `timestamp` string becomes `at`,
//! integer microseconds since the Unix epoch.
//!
//! Translation between v1 and v2 is the field-level tier: the mapping here,
//! struct to struct, without going through the canonical model.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::bureau_v1::{
    self, BlockV1, ByteBuf, MessageV1, RoleV1, ToolCallV1, ToolResultV1, concat_arrays,
    decode_messages, encode,
};
use super::canonical::Conversation;
use super::{Codec, Encoded, FormatId, at_index, bad};
use crate::error::Result;

pub(crate) const ID: &str = "bureau-agent-v2";

/// `bureau-agent-v2`.
#[derive(Debug, Default)]
pub struct BureauV2Codec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum PartV2 {
    Text {
        text: String,
    },
    Image {
        mime: String,
        bytes: ByteBuf,
    },
    ImageUrl {
        url: String,
    },
    Reasoning {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    RedactedReasoning {
        data: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallV2 {
    pub call_id: String,
    pub tool: String,
    pub input: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResultV2 {
    pub call_id: String,
    #[serde(default)]
    pub output: Vec<PartV2>,
    #[serde(default)]
    pub error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageV2 {
    pub author: RoleV1,
    #[serde(default)]
    pub parts: Vec<PartV2>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallV2>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ResultV2>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
}

fn part_from_v1(b: BlockV1) -> PartV2 {
    match b {
        BlockV1::Text { text } => PartV2::Text { text },
        BlockV1::Image { media_type, data } => PartV2::Image {
            mime: media_type,
            bytes: data,
        },
        BlockV1::ImageUrl { url } => PartV2::ImageUrl { url },
        BlockV1::Thinking { text, signature } => PartV2::Reasoning { text, signature },
        BlockV1::RedactedThinking { data } => PartV2::RedactedReasoning { data },
    }
}

fn part_to_v1(p: PartV2) -> BlockV1 {
    match p {
        PartV2::Text { text } => BlockV1::Text { text },
        PartV2::Image { mime, bytes } => BlockV1::Image {
            media_type: mime,
            data: bytes,
        },
        PartV2::ImageUrl { url } => BlockV1::ImageUrl { url },
        PartV2::Reasoning { text, signature } => BlockV1::Thinking { text, signature },
        PartV2::RedactedReasoning { data } => BlockV1::RedactedThinking { data },
    }
}

/// The field-level mapping v1 → v2. The v1 message must have passed
/// validation (its timestamp is RFC 3339).
pub(crate) fn from_v1(m: MessageV1) -> MessageV2 {
    MessageV2 {
        author: m.role,
        parts: m.content.into_iter().map(part_from_v1).collect(),
        calls: m
            .tool_calls
            .into_iter()
            .map(|c| CallV2 {
                call_id: c.id,
                tool: c.name,
                input: c.arguments,
            })
            .collect(),
        results: m
            .tool_results
            .into_iter()
            .map(|r| ResultV2 {
                call_id: r.call_id,
                output: r.content.into_iter().map(part_from_v1).collect(),
                error: r.is_error,
            })
            .collect(),
        at: m
            .timestamp
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.timestamp_micros()),
    }
}

/// The field-level mapping v2 → v1.
pub(crate) fn to_v1(m: MessageV2) -> MessageV1 {
    MessageV1 {
        role: m.author,
        content: m.parts.into_iter().map(part_to_v1).collect(),
        tool_calls: m
            .calls
            .into_iter()
            .map(|c| ToolCallV1 {
                id: c.call_id,
                name: c.tool,
                arguments: c.input,
            })
            .collect(),
        tool_results: m
            .results
            .into_iter()
            .map(|r| ToolResultV1 {
                call_id: r.call_id,
                content: r.output.into_iter().map(part_to_v1).collect(),
                is_error: r.error,
            })
            .collect(),
        timestamp: m
            .at
            .and_then(chrono::DateTime::from_timestamp_micros)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
    }
}

fn decode(bytes: &[u8]) -> Result<Vec<MessageV1>> {
    let msgs = decode_messages::<MessageV2>(ID, bytes)?;
    for (i, m) in msgs.iter().enumerate() {
        if let Some(at) = m.at
            && chrono::DateTime::from_timestamp_micros(at).is_none()
        {
            return Err(bad(
                ID,
                at_index(i),
                format!("at {at} is not a representable time"),
            ));
        }
    }
    let v1: Vec<MessageV1> = msgs.into_iter().map(to_v1).collect();
    bureau_v1::check_messages(ID, &v1)?;
    Ok(v1)
}

impl Codec for BureauV2Codec {
    fn id(&self) -> FormatId {
        FormatId(ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        "bureau-agent"
    }

    fn version(&self) -> u32 {
        2
    }

    fn describe(&self) -> &'static str {
        "a CBOR array of bureau agent message structs (version 2: author, parts, calls, results, at)"
    }

    fn pairs_tool_results(&self) -> bool {
        // The runtime's own log: stored as written.
        false
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        concat_arrays(ID, parts)
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(bureau_v1::to_canonical(decode(bytes)?))
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let (msgs, lost) = bureau_v1::from_canonical(conv);
        let v2: Vec<MessageV2> = msgs.into_iter().map(from_v1).collect();
        Ok(Encoded {
            bytes: encode(&v2),
            lost,
        })
    }

    fn field_level(&self, target: &FormatId, part: &[u8]) -> Option<Result<Bytes>> {
        (target.as_str() == "bureau-agent-v1").then(|| Ok(encode(&decode(part)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_map_field_by_field() {
        let v1 = MessageV1 {
            role: RoleV1::Assistant,
            content: vec![BlockV1::Thinking {
                text: "t".into(),
                signature: Some("sig".into()),
            }],
            tool_calls: vec![ToolCallV1 {
                id: "c".into(),
                name: "n".into(),
                arguments: serde_json::json!({"a": 1}),
            }],
            tool_results: vec![],
            timestamp: Some("2026-11-22T10:00:00.000001Z".into()),
        };
        let v2 = from_v1(v1.clone());
        let micros = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .timestamp_micros();
        assert_eq!(v2.at, Some(micros + 1));
        assert_eq!(v2.calls[0].tool, "n");
        assert_eq!(to_v1(v2), v1);
        let bytes = v1_bytes(&v1);
        let mapped = super::super::BureauV1Codec
            .field_level(&BureauV2Codec.id(), &bytes)
            .unwrap()
            .unwrap();
        assert!(BureauV2Codec.validate(&mapped).is_ok());
        let back = BureauV2Codec
            .field_level(&"bureau-agent-v1".parse().unwrap(), &mapped)
            .unwrap()
            .unwrap();
        assert_eq!(back, bytes);
    }

    fn v1_bytes(m: &MessageV1) -> Bytes {
        encode(std::slice::from_ref(m))
    }
}
