//! `anthropic-messages-v1`: a JSON array of Anthropic Messages API messages
//! (`role` user / assistant, `content` a string or content blocks: text,
//! image, tool_use, tool_result, thinking with signature,
//! redacted_thinking; other block types pass through untouched).
//!
//! The API takes the system prompt as a top-level `system` parameter, not a
//! message; in this format it is an element `{"role": "system", "content":
//! ...}`, and a wrapper sends every such element as `system` (joined in
//! order) and the rest as `messages`. Translation puts system elements first.
//!
//! The content-block mapping here is shared with `claude-code-v1`, whose
//! `message` fields are Messages API messages.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::canonical::{Block, Conversation, ImageSource, Role};
use super::json_array::{Item, JsonArray, Run, kind, string};
use crate::error::Result;

const ID: &str = "anthropic-messages-v1";

/// The API family of blocks this codec (and Claude Code's) passes through.
pub(crate) const ANTHROPIC: &str = "anthropic";

/// `anthropic-messages-v1`.
#[derive(Debug, Default)]
pub struct AnthropicCodec;

/// One Messages API content block.
pub(crate) fn parse_block(v: &Value) -> Result<Block, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("a content block is {}, not an object", kind(v)))?;
    let ty = string(obj, "type", "a content block")?;
    let what = format!("a {ty} block");
    Ok(match ty {
        "text" => Block::text(string(obj, "text", &what)?),
        "image" => {
            let src = obj
                .get("source")
                .and_then(Value::as_object)
                .ok_or_else(|| format!("{what} has no \"source\" object"))?;
            match string(src, "type", "an image source")? {
                "base64" => Block::Image {
                    source: ImageSource::Base64 {
                        media_type: string(src, "media_type", "an image source")?.to_owned(),
                        data: string(src, "data", "an image source")?.to_owned(),
                    },
                },
                "url" => Block::Image {
                    source: ImageSource::Url {
                        url: string(src, "url", "an image source")?.to_owned(),
                    },
                },
                _ => Block::Other {
                    api: ANTHROPIC.into(),
                    value: v.clone(),
                },
            }
        }
        "tool_use" => {
            let input = obj
                .get("input")
                .ok_or_else(|| format!("{what} has no \"input\""))?;
            if !input.is_object() {
                return Err(format!("{what}'s input is {}, not an object", kind(input)));
            }
            Block::ToolUse {
                id: string(obj, "id", &what)?.to_owned(),
                name: string(obj, "name", &what)?.to_owned(),
                input: input.clone(),
            }
        }
        "tool_result" => {
            let content = match obj.get("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(c) => parse_content(c).map_err(|e| format!("in a tool_result: {e}"))?,
            };
            let is_error = match obj.get("is_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(format!(
                        "{what}'s is_error is {}, not a boolean",
                        kind(other)
                    ));
                }
            };
            Block::ToolResult {
                tool_use_id: string(obj, "tool_use_id", &what)?.to_owned(),
                content,
                is_error,
            }
        }
        "thinking" => Block::Thinking {
            thinking: string(obj, "thinking", &what)?.to_owned(),
            signature: match obj.get("signature") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(format!(
                        "{what}'s signature is {}, not a string",
                        kind(other)
                    ));
                }
            },
        },
        "redacted_thinking" => Block::RedactedThinking {
            data: string(obj, "data", &what)?.to_owned(),
        },
        _ => Block::Other {
            api: ANTHROPIC.into(),
            value: v.clone(),
        },
    })
}

/// A message's `content`: a string, or an array of blocks.
pub(crate) fn parse_content(v: &Value) -> Result<Vec<Block>, String> {
    match v {
        Value::String(s) => Ok(vec![Block::text(s.as_str())]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, b)| parse_block(b).map_err(|e| format!("content[{i}]: {e}")))
            .collect(),
        other => Err(format!(
            "content is {}, not a string or an array",
            kind(other)
        )),
    }
}

/// Checks block placement: tool uses and thinking only from the assistant,
/// tool results only from the user.
pub(crate) fn check_roles(role: Role, blocks: &[Block]) -> Result<(), String> {
    for (i, b) in blocks.iter().enumerate() {
        let ok = match b {
            Block::ToolUse { .. } | Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                role == Role::Assistant
            }
            Block::ToolResult { .. } => role == Role::User,
            Block::Image { .. } => role != Role::System,
            _ => true,
        };
        if !ok {
            let name = match b {
                Block::ToolUse { .. } => "tool_use",
                Block::Thinking { .. } => "thinking",
                Block::RedactedThinking { .. } => "redacted_thinking",
                Block::ToolResult { .. } => "tool_result",
                _ => "image",
            };
            return Err(format!(
                "content[{i}]: a {name} block cannot be in a {} message",
                role_name(role)
            ));
        }
    }
    Ok(())
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// One block as Messages API JSON.
pub(crate) fn block_json(b: &Block) -> Value {
    match b {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Image { source } => match source {
            ImageSource::Base64 { media_type, data } => json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data}
            }),
            ImageSource::Url { url } => {
                json!({"type": "image", "source": {"type": "url", "url": url}})
            }
        },
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut v = json!({
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": content_json(content),
            });
            if *is_error {
                v["is_error"] = json!(true);
            }
            v
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            let mut v = json!({"type": "thinking", "thinking": thinking});
            if let Some(s) = signature {
                v["signature"] = json!(s);
            }
            v
        }
        Block::RedactedThinking { data } => json!({"type": "redacted_thinking", "data": data}),
        Block::Other { value, .. } => value.clone(),
    }
}

/// A content list as Messages API JSON: a lone text block as a string.
pub(crate) fn content_json(blocks: &[Block]) -> Value {
    match blocks {
        [Block::Text { text }] => json!(text),
        _ => Value::Array(blocks.iter().map(block_json).collect()),
    }
}

/// What cannot go into a Messages API conversation as it stands: tool
/// results not answering the assistant message just before them, tool
/// results after other content, images from the assistant.
pub(crate) fn messages_api_losses(conv: &Conversation) -> Vec<String> {
    // Consecutive messages of one role count as one, as the API merges them.
    let mut lost = Vec::new();
    let mut uses: BTreeSet<&str> = BTreeSet::new();
    let mut prev_role = Role::System;
    let mut seen_other = false;
    for (i, m) in conv.messages.iter().enumerate() {
        if m.role == Role::System {
            continue;
        }
        if m.role != prev_role {
            seen_other = false;
            if m.role == Role::Assistant {
                uses.clear();
            }
        }
        let answerable = if m.role == Role::User && prev_role == Role::Assistant {
            std::mem::take(&mut uses)
        } else if m.role == Role::User {
            uses.clone()
        } else {
            BTreeSet::new()
        };
        if m.role == Role::User {
            uses = answerable.clone();
        }
        for b in &m.content {
            match b {
                Block::ToolResult { tool_use_id, .. } => {
                    if m.role != Role::User || !answerable.contains(tool_use_id.as_str()) {
                        lost.push(format!(
                            "message {i}: the tool_result for {tool_use_id} does not follow its tool_use"
                        ));
                    } else if seen_other {
                        lost.push(format!(
                            "message {i}: the tool_result for {tool_use_id} comes after other content"
                        ));
                    }
                }
                Block::ToolUse { id, .. } if m.role == Role::Assistant => {
                    uses.insert(id.as_str());
                    seen_other = true;
                }
                Block::Image { .. } if m.role == Role::Assistant => {
                    lost.push(format!("message {i}: an assistant message holds an image"));
                }
                Block::Other { api, value } if api != ANTHROPIC => {
                    lost.push(format!("message {i}: a block of the {api} API: {value}"));
                }
                Block::ToolUse { .. } | Block::Thinking { .. } | Block::RedactedThinking { .. }
                    if m.role != Role::Assistant =>
                {
                    lost.push(format!(
                        "message {i}: a user message holds assistant content"
                    ));
                }
                _ => seen_other = true,
            }
        }
        prev_role = m.role;
    }
    lost
}

impl JsonArray for AnthropicCodec {
    const ID: &'static str = ID;
    const RUNTIME: &'static str = "anthropic-messages";
    const VERSION: u32 = 1;
    const DESCRIBE: &'static str = "a JSON array of Anthropic Messages API messages (system prompts as leading role \"system\" elements)";

    fn item(v: &Value) -> Result<Item, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("a message is {}, not an object", kind(v)))?;
        let role = match string(obj, "role", "a message")? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            other => {
                return Err(format!(
                    "role {other:?} is not one of user, assistant, system"
                ));
            }
        };
        let content = obj.get("content").ok_or("a message has no \"content\"")?;
        let blocks = parse_content(content)?;
        check_roles(role, &blocks)?;
        Ok(Item {
            role,
            blocks,
            run: Run::Alone,
        })
    }

    fn elements(conv: &Conversation) -> (Vec<Value>, Vec<String>) {
        let mut system = Vec::new();
        let mut items = Vec::new();
        for m in &conv.messages {
            match m.role {
                Role::System => system.extend(m.content.iter().cloned()),
                Role::User | Role::Assistant => items.push(json!({
                    "role": role_name(m.role),
                    "content": content_json(&m.content),
                })),
            }
        }
        if !system.is_empty() {
            items.insert(
                0,
                json!({"role": "system", "content": content_json(&system)}),
            );
        }
        (items, messages_api_losses(conv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Codec, OpenResult};

    fn err(bytes: &[u8]) -> String {
        AnthropicCodec.validate(bytes).unwrap_err().message
    }

    #[test]
    fn bad_deltas_name_the_place_and_the_problem() {
        assert!(
            err(br#"{"role":"user"}"#)
                .contains("at byte offset 0: expected a JSON array of messages, found an object")
        );
        assert!(
            err(br#"[{"role":"user","content":"a"}, {"role":"tool","content":"x"}]"#)
                .contains("at index 1: role \"tool\" is not one of")
        );
        assert!(err(br#"[{"role":"user","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]}]"#)
            .contains("at index 0: content[0]: a tool_use block cannot be in a user message"));
        assert!(err(b"[{\"role\":\"user\",\n \"content\": tru").contains("at byte offset"));
        assert!(err(br#"[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":[]}]}]"#)
            .contains("input is an array, not an object"));
    }

    #[test]
    fn open_tool_results_are_reported_by_index() {
        let c = AnthropicCodec
            .validate(br#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]"#)
            .unwrap();
        assert_eq!(
            c.open_results,
            vec![OpenResult {
                tool_use_id: "t1".into(),
                at: "index 0".into()
            }]
        );
    }
}
