//! `openai-responses-v1`: a JSON array of OpenAI Responses API input items,
//! as the OpenAI Agents SDK keeps them in a session: messages (`role` user /
//! assistant / system / developer, `content` a string or parts:
//! `input_text`, `output_text`, `refusal`, `input_image`, ...; `type:
//! "message"` optional), `function_call` items (`call_id`, `name`,
//! `arguments`, a JSON document in a string), `function_call_output` items
//! answering a `call_id` (`output` a string or `input_text` /
//! `input_image` parts), `reasoning` items, and every other item type of the
//! API (hosted tool calls, MCP, computer use, item references, ...), which
//! are kept as they are.
//!
//! Translation: a run of assistant items (messages, function calls,
//! reasoning) is one canonical assistant message and a run of
//! `function_call_output` items one user message of tool results, as the
//! Chat Completions codec does with its `tool` messages. Reasoning reads as
//! thinking without a signature (its summary text; the encrypted content is
//! OpenAI's and means nothing elsewhere), and the format does not carry
//! thinking: written items never hold reasoning the API did not produce.
//! A failed tool result's text follows [`ERROR_PREFIX`]; a tool result may
//! hold images (`input_image` parts). Item types and content parts the
//! canonical model does not know pass through to this format only.
//!
//! A `function_call_output` whose call is not in the chain is stored with a
//! warning ([`Codec::pairs_tool_results`] is false): a session is the
//! runtime's own log, and the SDK writes what it ran.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::Carries;
use super::canonical::{Block, Conversation, ERROR_PREFIX, ImageSource, Message, Role};
use super::json_array::{Item, JsonArray, Run, kind, string};
use crate::error::Result;

const ID: &str = "openai-responses-v1";

/// The API family of content parts this codec passes through.
pub(super) const PARTS: &str = "openai-responses";

/// The API family of whole items this codec passes through.
pub(super) const ITEMS: &str = "openai-responses-item";

/// `openai-responses-v1`.
#[derive(Debug, Default)]
pub struct OpenAiResponsesCodec;

fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    rest.split_once(";base64,")
}

/// An image part's URL as a block: a `data:` URL's bytes inline, else the URL.
pub(super) fn image(url: &str) -> Block {
    Block::Image {
        source: match parse_data_url(url) {
            Some((media_type, data)) => ImageSource::Base64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            },
            None => ImageSource::Url {
                url: url.to_owned(),
            },
        },
    }
}

/// One content part of a message or a tool output.
fn part(v: &Value, what: &str) -> Result<Block, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{what} is {}, not an object", kind(v)))?;
    let ty = string(obj, "type", what)?;
    let what = format!("{what} ({ty})");
    Ok(match ty {
        "input_text" | "output_text" | "text" => Block::text(string(obj, "text", &what)?),
        "refusal" => Block::text(string(obj, "refusal", &what)?),
        "input_image" => match obj.get("image_url") {
            Some(Value::String(url)) => image(url),
            None | Some(Value::Null) => {
                string(obj, "file_id", &what).map_err(|_| {
                    format!("{what} has neither a string \"image_url\" nor a string \"file_id\"")
                })?;
                Block::Other {
                    api: PARTS.into(),
                    value: v.clone(),
                }
            }
            Some(other) => {
                return Err(format!(
                    "{what} field \"image_url\" is {}, not a string",
                    kind(other)
                ));
            }
        },
        _ => Block::Other {
            api: PARTS.into(),
            value: v.clone(),
        },
    })
}

pub(super) fn parts(v: Option<&Value>, what: &str, key: &str) -> Result<Vec<Block>, String> {
    match v {
        Some(Value::String(s)) => Ok(vec![Block::text(s.as_str())]),
        Some(Value::Array(ps)) => ps
            .iter()
            .enumerate()
            .map(|(i, p)| part(p, &format!("{key}[{i}]")))
            .collect(),
        Some(other) => Err(format!(
            "{what} field {key:?} is {}, not a string or an array of parts",
            kind(other)
        )),
        None => Err(format!("{what} has no {key:?}")),
    }
}

/// One Responses API item (a Codex rollout's items too).
pub(super) fn item(v: &Value) -> Result<Item, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("an item is {}, not an object", kind(v)))?;
    let ty = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(other) => {
            return Err(format!(
                "an item field \"type\" is {}, not a string",
                kind(other)
            ));
        }
    };
    match ty {
        None | Some("message") => {
            let role = match obj.get("role") {
                Some(Value::String(r)) => r.as_str(),
                Some(other) => {
                    return Err(format!(
                        "a message field \"role\" is {}, not a string",
                        kind(other)
                    ));
                }
                None if ty.is_none() => {
                    return Err("an item has no \"type\" and no \"role\"".into());
                }
                None => return Err("a message has no \"role\"".into()),
            };
            let (role, run) = match role {
                "user" => (Role::User, Run::Alone),
                "system" | "developer" => (Role::System, Run::Alone),
                "assistant" => (Role::Assistant, Run::Assistant),
                other => {
                    return Err(format!(
                        "role {other:?} is not one of user, assistant, system, developer"
                    ));
                }
            };
            let blocks = parts(obj.get("content"), "a message", "content")?;
            Ok(Item { role, blocks, run })
        }
        Some("function_call") => {
            let what = "a function_call";
            let id = string(obj, "call_id", what)?;
            let name = string(obj, "name", what)?;
            let args = string(obj, "arguments", what)?;
            let input: Value = if args.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(args).map_err(|e| {
                    format!("{what} field \"arguments\" is not a JSON document: {e}")
                })?
            };
            Ok(Item {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    input,
                }],
                run: Run::Assistant,
            })
        }
        Some("function_call_output") => {
            let what = "a function_call_output";
            let id = string(obj, "call_id", what)?;
            let content = parts(obj.get("output"), what, "output")?;
            Ok(Item {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    tool_use_id: id.to_owned(),
                    content,
                    is_error: false,
                }],
                run: Run::Results,
            })
        }
        Some("reasoning") => {
            let what = "a reasoning item";
            let mut text = String::new();
            for key in ["summary", "content"] {
                match obj.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(ps)) => {
                        for (i, p) in ps.iter().enumerate() {
                            let at = format!("{what} {key}[{i}]");
                            let p = p
                                .as_object()
                                .ok_or_else(|| format!("{at} is {}, not an object", kind(p)))?;
                            let t = string(p, "text", &at)?;
                            if !text.is_empty() {
                                text.push_str("\n\n");
                            }
                            text.push_str(t);
                        }
                    }
                    Some(other) => {
                        return Err(format!(
                            "{what} field {key:?} is {}, not an array",
                            kind(other)
                        ));
                    }
                }
            }
            Ok(Item {
                role: Role::Assistant,
                blocks: vec![Block::Thinking {
                    thinking: text,
                    signature: None,
                }],
                run: Run::Assistant,
            })
        }
        Some(other) => {
            // Outputs of hosted and custom tools answer what the user side
            // ran; everything else the model produced.
            let (role, run) = if other.ends_with("_output") || other == "mcp_approval_response" {
                (Role::User, Run::Alone)
            } else {
                (Role::Assistant, Run::Assistant)
            };
            Ok(Item {
                role,
                blocks: vec![Block::Other {
                    api: ITEMS.into(),
                    value: v.clone(),
                }],
                run,
            })
        }
    }
}

/// The text of `blocks` when they are all text.
pub(super) fn text_of(blocks: &[Block]) -> Option<String> {
    let mut s = String::new();
    for b in blocks {
        match b {
            Block::Text { text } => s.push_str(text),
            _ => return None,
        }
    }
    Some(s)
}

/// An image's URL: a `data:` URL of its bytes when it holds them.
pub(super) fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// A tool result's output: a string when it is text, else parts.
pub(super) fn output(content: &[Block], is_error: bool, lost: &mut Vec<String>, at: &str) -> Value {
    if let Some(mut t) = text_of(content) {
        if is_error {
            t.insert_str(0, ERROR_PREFIX);
        }
        return json!(t);
    }
    let mut out = Vec::new();
    if is_error {
        out.push(json!({"type": "input_text", "text": ERROR_PREFIX}));
    }
    for b in content {
        match b {
            Block::Text { text } => out.push(json!({"type": "input_text", "text": text})),
            Block::Image { source } => out.push(
                json!({"type": "input_image", "image_url": image_url(source), "detail": "auto"}),
            ),
            Block::Other { api, value } if api == PARTS => out.push(value.clone()),
            _ => lost.push(format!(
                "{at}: a tool result holds a block the format cannot hold"
            )),
        }
    }
    Value::Array(out)
}

/// How a runtime writes Responses items: the Responses API's shorthand
/// (an Agents SDK session, [`RESPONSES`]) or Codex's typed messages
/// (`codex::SHAPE`). Tool calls, their outputs and kept items are the same
/// in both.
pub(super) struct ItemShape {
    /// A system prompt's text as an item.
    pub(super) system: fn(String) -> Value,
    /// A user message's parts (never empty) as an item.
    pub(super) user: fn(Vec<Value>) -> Value,
    /// An assistant message's text (never empty) as an item.
    pub(super) assistant: fn(String) -> Value,
    /// Whether an image part says `"detail": "auto"`.
    pub(super) image_detail: bool,
}

/// The Responses API's own shapes.
pub(super) const RESPONSES: ItemShape = ItemShape {
    system: |t| json!({"role": "system", "content": t}),
    user: |parts| {
        let content = match parts.as_slice() {
            [p] if p["type"] == "input_text" => p["text"].clone(),
            _ => Value::Array(parts),
        };
        json!({"role": "user", "content": content})
    },
    assistant: |t| json!({"role": "assistant", "content": t}),
    image_detail: true,
};

/// The items of message `m` (at `at`) in `shape`: tool calls are added to
/// `pending` and their outputs taken from it; what cannot be held goes to
/// `lost`.
pub(super) fn items_of(
    m: &Message,
    at: &str,
    pending: &mut BTreeSet<String>,
    lost: &mut Vec<String>,
    shape: &ItemShape,
) -> Vec<Value> {
    let mut items = Vec::new();
    let flush_user = |parts: &mut Vec<Value>, items: &mut Vec<Value>| {
        if !parts.is_empty() {
            items.push((shape.user)(std::mem::take(parts)));
        }
    };
    let flush_assistant = |text: &mut String, items: &mut Vec<Value>| {
        if !text.is_empty() {
            items.push((shape.assistant)(std::mem::take(text)));
        }
    };
    match m.role {
        Role::System => match text_of(&m.content) {
            Some(t) => items.push((shape.system)(t)),
            None => lost.push(format!("{at}: a system prompt holds more than text")),
        },
        Role::User => {
            let mut parts = Vec::new();
            for b in &m.content {
                match b {
                    Block::Text { text } => parts.push(json!({"type": "input_text", "text": text})),
                    Block::Image { source } => {
                        let mut part =
                            json!({"type": "input_image", "image_url": image_url(source)});
                        if shape.image_detail {
                            part["detail"] = json!("auto");
                        }
                        parts.push(part);
                    }
                    Block::Other { api, value } if api == PARTS => parts.push(value.clone()),
                    Block::Other { api, value } if api == ITEMS => {
                        flush_user(&mut parts, &mut items);
                        items.push(value.clone());
                    }
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        flush_user(&mut parts, &mut items);
                        if !pending.remove(tool_use_id) {
                            lost.push(format!(
                                "{at}: the tool result for {tool_use_id} does not follow its tool call"
                            ));
                        }
                        items.push(json!({
                            "type": "function_call_output",
                            "call_id": tool_use_id,
                            "output": output(content, *is_error, lost, at),
                        }));
                    }
                    Block::Other { api, .. } => {
                        lost.push(format!("{at}: a block of the {api} API"))
                    }
                    _ => lost.push(format!("{at}: assistant content in a user message")),
                }
            }
            flush_user(&mut parts, &mut items);
        }
        Role::Assistant => {
            let mut text = String::new();
            for b in &m.content {
                match b {
                    Block::Text { text: t } => text.push_str(t),
                    Block::ToolUse { id, name, input } => {
                        flush_assistant(&mut text, &mut items);
                        pending.insert(id.clone());
                        items.push(json!({
                            "type": "function_call", "call_id": id, "name": name,
                            "arguments": input.to_string(),
                        }));
                    }
                    Block::Other { api, value } if api == ITEMS => {
                        flush_assistant(&mut text, &mut items);
                        items.push(value.clone());
                    }
                    Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
                    Block::Other { api, .. } => {
                        lost.push(format!("{at}: a block of the {api} API"))
                    }
                    _ => lost.push(format!("{at}: an assistant block the format cannot hold")),
                }
            }
            flush_assistant(&mut text, &mut items);
        }
    }
    items
}

impl JsonArray for OpenAiResponsesCodec {
    const ID: &'static str = ID;
    const RUNTIME: &'static str = "openai-responses";
    const VERSION: u32 = 1;
    const DESCRIBE: &'static str =
        "a JSON array of OpenAI Responses API input items (an OpenAI Agents SDK session)";
    const CARRIES: Carries = Carries {
        system: true,
        thinking: false,
        tool_errors: false,
    };
    const PAIRS_TOOL_RESULTS: bool = false;

    fn item(v: &Value) -> Result<Item, String> {
        item(v)
    }

    fn elements(conv: &Conversation) -> (Vec<Value>, Vec<String>) {
        let mut lost = Vec::new();
        let mut items = Vec::new();
        let mut pending: BTreeSet<String> = BTreeSet::new();
        for (i, m) in conv.messages.iter().enumerate() {
            let at = format!("message {i}");
            items.extend(items_of(m, &at, &mut pending, &mut lost, &RESPONSES));
        }
        (items, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Codec;

    fn err(bytes: &str) -> String {
        OpenAiResponsesCodec
            .validate(bytes.as_bytes())
            .unwrap_err()
            .message
    }

    #[test]
    fn bad_items_name_the_place_the_field_and_the_problem() {
        for (delta, says) in [
            (
                r#""hi""#,
                "at byte offset 0: expected a JSON array of messages, found a string",
            ),
            (
                r#"[{"role":"user","content":"a"}, 3]"#,
                "at index 1: an item is a number",
            ),
            (
                r#"[{"content":"a"}]"#,
                "at index 0: an item has no \"type\" and no \"role\"",
            ),
            (
                r#"[{"type":"message","content":"a"}]"#,
                "a message has no \"role\"",
            ),
            (
                r#"[{"role":"tool","content":"a"}]"#,
                "role \"tool\" is not one of",
            ),
            (r#"[{"role":"user"}]"#, "a message has no \"content\""),
            (
                r#"[{"role":"user","content":7}]"#,
                "field \"content\" is a number",
            ),
            (
                r#"[{"role":"user","content":[{"type":"input_text"}]}]"#,
                "content[0] (input_text) has no \"text\"",
            ),
            (
                r#"[{"role":"user","content":[{"type":"input_image"}]}]"#,
                "neither a string \"image_url\" nor a string \"file_id\"",
            ),
            (
                r#"[{"type":"function_call","name":"f","arguments":"{}"}]"#,
                "a function_call has no \"call_id\"",
            ),
            (
                r#"[{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}]"#,
                "a function_call field \"arguments\" is not a JSON document",
            ),
            (
                r#"[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]"#,
                "field \"arguments\" is an object, not a string",
            ),
            (
                r#"[{"type":"function_call_output","call_id":"c"}]"#,
                "a function_call_output has no \"output\"",
            ),
            (
                r#"[{"type":"reasoning","summary":"x"}]"#,
                "a reasoning item field \"summary\" is a string, not an array",
            ),
            (r#"[{"type":7}]"#, "an item field \"type\" is a number"),
        ] {
            let e = err(delta);
            assert!(e.contains(ID), "{delta}: {e}");
            assert!(e.contains(says), "{delta}: {e}");
        }
    }

    #[test]
    fn an_agents_sdk_turn_decodes_into_the_canonical_model() {
        let turn = json!([
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Call the tool."}], "encrypted_content": "gAAAA"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
            {"type": "function_call", "call_id": "call_2", "name": "time", "arguments": ""},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "18C at noon.", "annotations": []}]}
        ]);
        let bytes = turn.to_string();
        let checked = OpenAiResponsesCodec.validate(bytes.as_bytes()).unwrap();
        assert!(checked.open_results.is_empty());
        assert_eq!(checked.counts.messages, Some(8));
        let conv = OpenAiResponsesCodec.to_canonical(bytes.as_bytes()).unwrap();
        let roles: Vec<Role> = conv.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::User, Role::Assistant]
        );
        assert_eq!(
            conv.messages[1].content[2],
            Block::ToolUse {
                id: "call_2".into(),
                name: "time".into(),
                input: json!({}),
            }
        );
        assert_eq!(conv.messages[2].content.len(), 2);
        assert!(matches!(
            &conv.messages[3].content[..],
            [Block::Other { api, .. }, Block::Text { text }] if api == ITEMS && text == "18C at noon."
        ));
        // An output whose call is elsewhere is only the chain's to judge.
        let c = OpenAiResponsesCodec
            .validate(br#"[{"type":"function_call_output","call_id":"zz","output":"1"}]"#)
            .unwrap();
        assert_eq!(c.open_results[0].at, "index 0");
    }

    #[test]
    fn tool_results_keep_images_and_write_errors_as_text() {
        let conv = Conversation {
            messages: vec![
                Message::new(
                    Role::Assistant,
                    vec![Block::ToolUse {
                        id: "c1".into(),
                        name: "shot".into(),
                        input: json!({}),
                    }],
                ),
                Message::new(
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: "c1".into(),
                        content: vec![
                            Block::text("here"),
                            Block::Image {
                                source: ImageSource::Url {
                                    url: "https://example.invalid/a.png".into(),
                                },
                            },
                        ],
                        is_error: true,
                    }],
                ),
            ],
        };
        let enc = OpenAiResponsesCodec.encode_canonical(&conv).unwrap();
        assert!(enc.lost.is_empty(), "{:?}", enc.lost);
        let v: Value = serde_json::from_slice(&enc.bytes).unwrap();
        assert_eq!(
            v[1]["output"],
            json!([
                {"type": "input_text", "text": "Error: "},
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": "https://example.invalid/a.png", "detail": "auto"}
            ])
        );
        let back = OpenAiResponsesCodec.to_canonical(&enc.bytes).unwrap();
        let carries = OpenAiResponsesCodec.carries();
        assert_eq!(
            super::super::canonical::normalize(&back, carries),
            super::super::canonical::normalize(&conv, carries)
        );
    }
}
