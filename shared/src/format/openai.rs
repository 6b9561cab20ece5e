//! `openai-chat-v1`: a JSON array of OpenAI Chat Completions messages: roles
//! system / developer / user / assistant / tool; user content a string or
//! text and image_url parts; assistant `tool_calls` whose
//! `function.arguments` is a JSON document in a string; tool messages
//! answering a `tool_call_id`.
//!
//! The format has no thinking blocks and no error flag on tool results:
//! translation drops thinking and writes a failed result's text after
//! [`ERROR_PREFIX`]. System prompts go first, as `system` messages.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::Carries;
use super::canonical::{Block, Conversation, ERROR_PREFIX, Role};
use super::json_array::{Item, JsonArray, Run};
use super::openai_responses::{image, image_url, text_of};
use crate::error::Result;

const ID: &str = "openai-chat-v1";

/// The API family of content parts this codec passes through.
const OPENAI: &str = "openai";

/// `openai-chat-v1`.
#[derive(Debug, Default)]
pub struct OpenAiCodec;

fn string<'a>(obj: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str, String> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what} has no string {key:?}"))
}

fn part(v: &Value, allow_images: bool) -> Result<Block, String> {
    let obj = v.as_object().ok_or("a content part is not an object")?;
    match string(obj, "type", "a content part")? {
        "text" => Ok(Block::text(string(obj, "text", "a text part")?)),
        "refusal" => Ok(Block::text(string(obj, "refusal", "a refusal part")?)),
        "image_url" if allow_images => {
            let url = obj
                .get("image_url")
                .and_then(Value::as_object)
                .ok_or("an image_url part has no \"image_url\" object")?;
            Ok(image(string(url, "url", "an image_url")?))
        }
        "image_url" => Err("an image_url part is only allowed in user messages".into()),
        _ if allow_images => Ok(Block::Other {
            api: OPENAI.into(),
            value: v.clone(),
        }),
        other => Err(format!(
            "a {other} part is not allowed here; use text parts"
        )),
    }
}

fn content(v: Option<&Value>, allow_images: bool, allow_null: bool) -> Result<Vec<Block>, String> {
    match v {
        Some(Value::String(s)) => Ok(vec![Block::text(s.as_str())]),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(i, p)| part(p, allow_images).map_err(|e| format!("content[{i}]: {e}")))
            .collect(),
        None | Some(Value::Null) if allow_null => Ok(Vec::new()),
        None => Err("a message has no \"content\"".into()),
        Some(_) => Err("content is not a string or an array of parts".into()),
    }
}

fn tool_calls(v: Option<&Value>) -> Result<Vec<Block>, String> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let calls = v.as_array().ok_or("tool_calls is not an array")?;
    let mut out = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        let what = format!("tool_calls[{i}]");
        let obj = c
            .as_object()
            .ok_or_else(|| format!("{what} is not an object"))?;
        let id = string(obj, "id", &what)?;
        if let Some(t) = obj.get("type")
            && t != "function"
        {
            return Err(format!(
                "{what} has type {t}; only \"function\" calls are known"
            ));
        }
        let f = obj
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{what} has no \"function\" object"))?;
        let name = string(f, "name", &format!("{what}.function"))?;
        let args = string(f, "arguments", &format!("{what}.function"))?;
        let input: Value = serde_json::from_str(args)
            .map_err(|e| format!("{what}.function.arguments is not a JSON document: {e}"))?;
        out.push(Block::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        });
    }
    Ok(out)
}

impl JsonArray for OpenAiCodec {
    const ID: &'static str = ID;
    const RUNTIME: &'static str = "openai-chat";
    const VERSION: u32 = 1;
    const DESCRIBE: &'static str = "a JSON array of OpenAI Chat Completions messages";
    const CARRIES: Carries = Carries {
        system: true,
        thinking: false,
        tool_errors: false,
    };

    fn item(v: &Value) -> Result<Item, String> {
        let obj = v.as_object().ok_or("a message is not an object")?;
        let (role, blocks, run) = match string(obj, "role", "a message")? {
            "system" | "developer" => (
                Role::System,
                content(obj.get("content"), false, false)?,
                Run::Alone,
            ),
            "user" => (
                Role::User,
                content(obj.get("content"), true, false)?,
                Run::Alone,
            ),
            "assistant" => {
                let mut b = content(obj.get("content"), false, true)?;
                b.extend(tool_calls(obj.get("tool_calls"))?);
                (Role::Assistant, b, Run::Alone)
            }
            // A run of tool messages is one canonical message.
            "tool" => {
                let id = string(obj, "tool_call_id", "a tool message")?;
                let c = content(obj.get("content"), false, false)?;
                (
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: id.to_owned(),
                        content: c,
                        is_error: false,
                    }],
                    Run::Results,
                )
            }
            other => {
                return Err(format!(
                    "role {other:?} is not one of system, developer, user, assistant, tool"
                ));
            }
        };
        Ok(Item { role, blocks, run })
    }

    fn elements(conv: &Conversation) -> (Vec<Value>, Vec<String>) {
        let mut lost = Vec::new();
        let mut system = Vec::new();
        let mut items = Vec::new();
        let mut pending: BTreeSet<String> = BTreeSet::new();
        for (i, m) in conv.messages.iter().enumerate() {
            match m.role {
                Role::System => match text_of(&m.content) {
                    Some(t) => system.push(json!({"role": "system", "content": t})),
                    None => lost.push(format!("message {i}: a system prompt holds more than text")),
                },
                Role::User => {
                    let mut parts = Vec::new();
                    for b in &m.content {
                        match b {
                            Block::ToolResult {
                                tool_use_id,
                                content,
                                is_error,
                            } => {
                                if !parts.is_empty() {
                                    lost.push(format!(
                                        "message {i}: the tool result for {tool_use_id} comes after other content"
                                    ));
                                }
                                if !pending.remove(tool_use_id) {
                                    lost.push(format!(
                                        "message {i}: the tool result for {tool_use_id} does not follow its tool call"
                                    ));
                                }
                                let mut text = match text_of(content) {
                                    Some(t) => t,
                                    None => {
                                        lost.push(format!(
                                            "message {i}: the tool result for {tool_use_id} holds more than text"
                                        ));
                                        String::new()
                                    }
                                };
                                if *is_error {
                                    text.insert_str(0, ERROR_PREFIX);
                                }
                                items.push(json!({
                                    "role": "tool", "tool_call_id": tool_use_id, "content": text,
                                }));
                            }
                            Block::Text { text } => {
                                parts.push(json!({"type": "text", "text": text}))
                            }
                            Block::Image { source } => parts.push(
                                json!({"type": "image_url", "image_url": {"url": image_url(source)}}),
                            ),
                            Block::Other { api, value } if api == OPENAI => {
                                parts.push(value.clone())
                            }
                            Block::Other { value, .. } => {
                                lost.push(format!(
                                    "message {i}: a block the format cannot hold: {value}"
                                ));
                            }
                            _ => lost
                                .push(format!("message {i}: assistant content in a user message")),
                        }
                    }
                    if !parts.is_empty() {
                        let content = match text_of(
                            &m.content
                                .iter()
                                .filter(|b| !matches!(b, Block::ToolResult { .. }))
                                .cloned()
                                .collect::<Vec<_>>(),
                        ) {
                            Some(t) if parts.len() == 1 => json!(t),
                            _ => Value::Array(parts),
                        };
                        items.push(json!({"role": "user", "content": content}));
                    }
                }
                Role::Assistant => {
                    let mut text = String::new();
                    let mut calls = Vec::new();
                    for b in &m.content {
                        match b {
                            Block::Text { text: t } => {
                                if !calls.is_empty() {
                                    lost.push(format!("message {i}: text after a tool call"));
                                }
                                text.push_str(t);
                            }
                            Block::ToolUse { id, name, input } => {
                                pending.insert(id.clone());
                                calls.push(json!({
                                    "id": id, "type": "function",
                                    "function": {"name": name, "arguments": input.to_string()},
                                }));
                            }
                            Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
                            _ => lost.push(format!(
                                "message {i}: an assistant block the format cannot hold"
                            )),
                        }
                    }
                    let mut msg = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
                    if !calls.is_empty() {
                        msg["tool_calls"] = Value::Array(calls);
                    }
                    items.push(msg);
                }
            }
        }
        system.extend(items);
        (system, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Codec;

    fn err(bytes: &[u8]) -> String {
        OpenAiCodec.validate(bytes).unwrap_err().message
    }

    #[test]
    fn bad_deltas_name_the_place_and_the_problem() {
        assert!(err(br#"[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{oops"}}]}]"#)
            .contains("at index 0: tool_calls[0].function.arguments is not a JSON document"));
        assert!(
            err(br#"[{"role":"function","content":"x"}]"#)
                .contains("at index 0: role \"function\"")
        );
        assert!(err(br#"[{"role":"user"}]"#).contains("has no \"content\""));
        assert!(err(br#""hello""#).contains("expected a JSON array of messages, found a string"));
    }

    #[test]
    fn tool_messages_merge_into_one_user_message() {
        let conv = OpenAiCodec
            .to_canonical(
                br#"[{"role":"assistant","content":null,"tool_calls":[
                {"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},
                {"id":"b","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
               {"role":"tool","tool_call_id":"a","content":"1"},
               {"role":"tool","tool_call_id":"b","content":"2"}]"#,
            )
            .unwrap();
        assert_eq!(conv.messages.len(), 2);
        assert_eq!(conv.messages[1].content.len(), 2);
        let c = OpenAiCodec
            .validate(br#"[{"role":"tool","tool_call_id":"zz","content":"1"}]"#)
            .unwrap();
        assert_eq!(c.open_results[0].at, "index 0");
    }
}
