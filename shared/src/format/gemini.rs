//! `gemini-cli-v1`: a Gemini CLI session file
//! (`~/.gemini/tmp/<project hash>/chats/session-*.jsonl`), one JSON record
//! per line, each line ending in a newline, as the CLI appends them.
//! Deltas are whole lines; concatenation is byte append (a newline goes
//! before a delta that follows one whose last line lacks it, as in
//! `claude-code-v1`), so a materialized chain is the file byte for byte.
//!
//! Records: the session's metadata (`sessionId`, `projectHash`,
//! `startTime`, `lastUpdated`, `kind`, ...); a message (`id`, `timestamp`,
//! `type` user / gemini / info / error / warning, `content` a string, a
//! part or a list of parts: `text`, `inlineData`, `fileData`,
//! `functionCall`, `functionResponse`; a `gemini` message also has
//! `toolCalls` — `id`, `name`, `args`, `status` and the `result` parts —
//! `thoughts` — `subject`, `description` — `tokens` and `model`); `{"$set":
//! {...}}`, a metadata update (whose `messages`, when present, replace every
//! message); and `{"$rewindTo": id}`, which removes that message and every
//! later one. A message record whose `id` was seen before replaces that
//! message where it stands (the CLI appends a `gemini` message again as its
//! tool calls finish). Older files read as well: a whole session record
//! (metadata and `messages`) as one document, on one line or
//! pretty-printed, and a `/chat save` checkpoint, a JSON array of Gemini
//! API `Content` (`role` user / model, `parts`).
//!
//! The file is the runtime's own log: a record this format cannot read (not
//! JSON, a message of a type it does not know, a part missing a field) is
//! stored as written, read as no message and reported ([`Checked::kept`]),
//! never refused, bytes that are not UTF-8 included. `info`, `error` and
//! `warning` messages are the CLI's notices, never sent to the model: no
//! message.
//!
//! Translation: a `user` message is a user message; a `gemini` message an
//! assistant message (its thoughts as thinking without a signature, its
//! text, a tool use per tool call) followed, when calls have results, by a
//! user message of their tool results (`status: "error"` flags one as
//! failed; a `functionResponse`'s `response.output`, or `response.error`,
//! is its text). Written from another format: a metadata line, then a
//! record per message, each tool result put in its call's `result`. A
//! system prompt and thinking are not carried (the CLI supplies its own
//! system prompt; thoughts are its summaries). Replacements and rewinds
//! apply within what is decoded together: a chain is translated commit by
//! commit, so a rewind reaches no further back than its own commit.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::canonical::{Block, Conversation, ImageSource, Message, Role};
use super::claude_code::{append_lines, uuid};
use super::json_array::{kind, string};
use super::jsonl::{Record, at, each_record, write_line};
use super::{Carries, Checked, Codec, Encoded, FormatId, Segment, SegmentKind, at_line};
use crate::error::Result;

const ID: &str = "gemini-cli-v1";

/// The API family of parts this codec passes through.
const GEMINI: &str = "gemini";

/// `gemini-cli-v1`.
#[derive(Debug, Default)]
pub struct GeminiCodec;

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} is {}, not an object", kind(v)))
}

/// Gives calls without an id (a checkpoint's `functionCall` parts) one, and
/// pairs responses without one with the oldest open call of their name.
#[derive(Default)]
struct CallIds {
    made: usize,
    open: Vec<(String, String)>,
}

impl CallIds {
    fn call(&mut self, id: Option<&str>, name: &str) -> String {
        let id = id.map_or_else(
            || {
                self.made += 1;
                format!("gemini-call-{}", self.made)
            },
            str::to_owned,
        );
        self.open.push((name.to_owned(), id.clone()));
        id
    }

    fn response(&mut self, id: Option<&str>, name: &str) -> String {
        if let Some(id) = id {
            self.open.retain(|(_, open)| open != id);
            return id.to_owned();
        }
        match self.open.iter().position(|(n, _)| n == name) {
            Some(k) => self.open.remove(k).1,
            None => format!("gemini-response-{name}"),
        }
    }
}

/// The text a function response carries, and whether it says it failed.
fn response_text(response: Option<&Value>) -> (String, bool) {
    match response {
        None | Some(Value::Null) => (String::new(), false),
        Some(Value::String(s)) => (s.clone(), false),
        Some(Value::Object(r)) => match (r.get("output"), r.get("error")) {
            (Some(Value::String(o)), None) if r.len() == 1 => (o.clone(), false),
            (None, Some(Value::String(e))) if r.len() == 1 => (e.clone(), true),
            (_, err) => (Value::Object(r.clone()).to_string(), err.is_some()),
        },
        Some(other) => (other.to_string(), false),
    }
}

/// One part of a content.
fn part(v: &Value, what: &str, ids: &mut CallIds) -> Result<Block, String> {
    let obj = object(v, what)?;
    if let Some(text) = obj.get("text") {
        let text = text
            .as_str()
            .ok_or_else(|| format!("{what} field \"text\" is {}, not a string", kind(text)))?;
        return Ok(
            if obj.get("thought").and_then(Value::as_bool) == Some(true) {
                Block::Thinking {
                    thinking: text.to_owned(),
                    signature: None,
                }
            } else {
                Block::text(text)
            },
        );
    }
    if let Some(data) = obj.get("inlineData") {
        let what = format!("{what} inlineData");
        let d = object(data, &what)?;
        return Ok(Block::Image {
            source: ImageSource::Base64 {
                media_type: string(d, "mimeType", &what)?.to_owned(),
                data: string(d, "data", &what)?.to_owned(),
            },
        });
    }
    if let Some(call) = obj.get("functionCall") {
        let what = format!("{what} functionCall");
        let c = object(call, &what)?;
        let name = string(c, "name", &what)?;
        let id = ids.call(c.get("id").and_then(Value::as_str), name);
        return Ok(Block::ToolUse {
            id,
            name: name.to_owned(),
            input: c.get("args").cloned().unwrap_or_else(|| json!({})),
        });
    }
    if let Some(resp) = obj.get("functionResponse") {
        let what = format!("{what} functionResponse");
        let r = object(resp, &what)?;
        let name = string(r, "name", &what)?;
        let id = ids.response(r.get("id").and_then(Value::as_str), name);
        let (text, is_error) = response_text(r.get("response"));
        return Ok(Block::ToolResult {
            tool_use_id: id,
            content: vec![Block::text(text)],
            is_error,
        });
    }
    if let Some(Value::Object(f)) = obj.get("fileData")
        && let (Some(Value::String(mime)), Some(Value::String(uri))) =
            (f.get("mimeType"), f.get("fileUri"))
        && mime.starts_with("image/")
    {
        return Ok(Block::Image {
            source: ImageSource::Url { url: uri.clone() },
        });
    }
    Ok(Block::Other {
        api: GEMINI.into(),
        value: v.clone(),
    })
}

/// A `PartListUnion`: a string, a part, or a list of strings and parts.
fn parts(v: Option<&Value>, what: &str, ids: &mut CallIds) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => out.push(Block::text(s.as_str())),
        Some(Value::Array(ps)) => {
            for (i, p) in ps.iter().enumerate() {
                match p {
                    Value::String(s) => out.push(Block::text(s.as_str())),
                    p => out.push(part(p, &format!("{what}[{i}]"), ids)?),
                }
            }
        }
        Some(p @ Value::Object(_)) => out.push(part(p, what, ids)?),
        Some(other) => {
            return Err(format!(
                "{what} is {}, not a string, a part or a list of parts",
                kind(other)
            ));
        }
    }
    out.retain(|b| !matches!(b, Block::Text { text } if text.is_empty()));
    Ok(out)
}

/// A tool call's result: its function responses' text, then what else it
/// holds.
fn result_blocks(v: &Value, what: &str) -> Result<(Vec<Block>, bool), String> {
    let mut ids = CallIds::default();
    let mut content = Vec::new();
    let mut failed = false;
    for b in parts(Some(v), what, &mut ids)? {
        match b {
            Block::ToolResult {
                content: c,
                is_error,
                ..
            } => {
                failed |= is_error;
                content.extend(c);
            }
            Block::ToolUse { .. } | Block::Thinking { .. } => {
                return Err(format!("{what} holds a part that is no tool output"));
            }
            other => content.push(other),
        }
    }
    Ok((content, failed))
}

/// The canonical messages of one message record (none for the CLI's
/// notices).
fn message(v: &Value, origin: usize, ids: &mut CallIds) -> Result<Vec<Message>, String> {
    let obj = object(v, "a message")?;
    let ty = string(obj, "type", "a message")?;
    let timestamp = obj
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let msg = |role, content| Message {
        role,
        content,
        timestamp: timestamp.clone(),
        origin,
    };
    match ty {
        "user" => {
            let content = parts(obj.get("content"), "content", ids)?;
            if let Some(i) = content.iter().position(|b| {
                matches!(
                    b,
                    Block::ToolUse { .. } | Block::Thinking { .. } | Block::RedactedThinking { .. }
                )
            }) {
                return Err(format!("content[{i}]: a user message holds model output"));
            }
            Ok(vec![msg(Role::User, content)])
        }
        "gemini" => {
            let mut content = Vec::new();
            match obj.get("thoughts") {
                None | Some(Value::Null) => {}
                Some(Value::Array(ts)) => {
                    for (i, t) in ts.iter().enumerate() {
                        let t = object(t, &format!("thoughts[{i}]"))?;
                        let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
                        let thinking = [field("subject"), field("description")]
                            .into_iter()
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>()
                            .join("\n\n");
                        content.push(Block::Thinking {
                            thinking,
                            signature: None,
                        });
                    }
                }
                Some(other) => {
                    return Err(format!("\"thoughts\" is {}, not an array", kind(other)));
                }
            }
            let said = parts(obj.get("content"), "content", ids)?;
            if let Some(i) = said
                .iter()
                .position(|b| matches!(b, Block::ToolResult { .. }))
            {
                return Err(format!(
                    "content[{i}]: a gemini message holds a functionResponse"
                ));
            }
            content.extend(said);
            let mut results = Vec::new();
            match obj.get("toolCalls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (i, c) in calls.iter().enumerate() {
                        let what = format!("toolCalls[{i}]");
                        let c = object(c, &what)?;
                        let id = string(c, "id", &what)?;
                        let name = string(c, "name", &what)?;
                        let input = match c.get("args") {
                            None | Some(Value::Null) => json!({}),
                            Some(a @ Value::Object(_)) => a.clone(),
                            Some(other) => {
                                return Err(format!(
                                    "{what} field \"args\" is {}, not an object",
                                    kind(other)
                                ));
                            }
                        };
                        content.push(Block::ToolUse {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            input,
                        });
                        match c.get("result") {
                            None | Some(Value::Null) => {}
                            Some(r) => {
                                let (out, failed) = result_blocks(r, &format!("{what} result"))?;
                                let status = c.get("status").and_then(Value::as_str);
                                results.push(Block::ToolResult {
                                    tool_use_id: id.to_owned(),
                                    content: out,
                                    is_error: failed || status == Some("error"),
                                });
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(format!("\"toolCalls\" is {}, not an array", kind(other)));
                }
            }
            let mut out = vec![msg(Role::Assistant, content)];
            if !results.is_empty() {
                out.push(msg(Role::User, results));
            }
            Ok(out)
        }
        "info" | "error" | "warning" => Ok(Vec::new()),
        other => Err(format!(
            "a message of type {other:?}, which this format does not know"
        )),
    }
}

/// A checkpoint's `Content`: `role` user or model, `parts`.
fn content(v: &Value, origin: usize, ids: &mut CallIds) -> Result<Message, String> {
    let obj = object(v, "a Content")?;
    let role = match string(obj, "role", "a Content")? {
        "user" => Role::User,
        "model" => Role::Assistant,
        other => return Err(format!("role {other:?} is not user or model")),
    };
    Ok(Message {
        role,
        content: parts(obj.get("parts"), "parts", ids)?,
        timestamp: None,
        origin,
    })
}

/// The messages of a session as the CLI loads them: by id, in the order
/// first seen, a later record of an id replacing the earlier one.
#[derive(Default)]
struct Session {
    order: Vec<(String, Vec<Message>)>,
    index: BTreeMap<String, usize>,
}

impl Session {
    fn set(&mut self, id: &str, msgs: Vec<Message>) {
        match self.index.get(id) {
            Some(&k) => self.order[k].1 = msgs,
            None => {
                self.index.insert(id.to_owned(), self.order.len());
                self.order.push((id.to_owned(), msgs));
            }
        }
    }

    fn rewind(&mut self, id: &str) {
        let keep = self.index.get(id).copied().unwrap_or(0);
        self.order.truncate(keep);
        self.index.retain(|_, k| *k < keep);
    }

    /// Adds each message record of `msgs`.
    fn extend(&mut self, msgs: &[Value], origin: usize, ids: &mut CallIds) -> Result<(), String> {
        for (i, m) in msgs.iter().enumerate() {
            let id = m
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("messages[{i}] has no string \"id\""))?;
            let decoded = message(m, origin, ids).map_err(|e| format!("messages[{i}]: {e}"))?;
            self.set(id, decoded);
        }
        Ok(())
    }
}

/// Reads one record into `session`.
fn read(v: &Value, origin: usize, session: &mut Session, ids: &mut CallIds) -> Result<(), String> {
    if let Value::Array(contents) = v {
        // A `/chat save` checkpoint: a JSON array of Content.
        for (i, c) in contents.iter().enumerate() {
            let m = content(c, origin, ids).map_err(|e| format!("[{i}]: {e}"))?;
            session.set(&format!("#{origin}/{i}"), vec![m]);
        }
        return Ok(());
    }
    let obj = object(v, "a record")?;
    if let Some(to) = obj.get("$rewindTo") {
        let to = to
            .as_str()
            .ok_or_else(|| format!("\"$rewindTo\" is {}, not a string", kind(to)))?;
        session.rewind(to);
        return Ok(());
    }
    if let Some(set) = obj.get("$set") {
        let set = object(set, "\"$set\"")?;
        if let Some(msgs) = set.get("messages") {
            let msgs = msgs
                .as_array()
                .ok_or_else(|| format!("\"$set\".messages is {}, not an array", kind(msgs)))?;
            let mut fresh = Session::default();
            fresh.extend(msgs, origin, ids)?;
            *session = fresh;
        }
        return Ok(());
    }
    if let Some(id) = obj.get("id").and_then(Value::as_str) {
        let msgs = message(v, origin, ids)?;
        session.set(id, msgs);
        return Ok(());
    }
    if obj.get("sessionId").is_some_and(Value::is_string)
        && obj.get("projectHash").is_some_and(Value::is_string)
    {
        // Metadata; an older file's whole record holds the messages too.
        if let Some(msgs) = obj.get("messages") {
            let msgs = msgs
                .as_array()
                .ok_or_else(|| format!("\"messages\" is {}, not an array", kind(msgs)))?;
            session.extend(msgs, origin, ids)?;
        }
        return Ok(());
    }
    Err("a record that is no message, metadata, $set or $rewindTo".into())
}

/// The conversation of `bytes` and the records kept as written.
fn decode(bytes: &[u8]) -> Result<(Conversation, Vec<String>)> {
    let mut session = Session::default();
    let mut ids = CallIds::default();
    let mut kept = Vec::new();
    each_record(bytes, |r: Record| {
        let here = at(r.offset, r.number);
        let mut problems: Vec<String> = r.problem.into_iter().collect();
        let mut read_ok = false;
        if let Some(v) = &r.value {
            match read(v, r.number - 1, &mut session, &mut ids) {
                Ok(()) => read_ok = true,
                Err(e) => problems.push(e),
            }
        }
        if !problems.is_empty() {
            let how = if read_ok {
                "read as its record"
            } else {
                "read as no message"
            };
            kept.push(format!("at {here}: {}: {how}", problems.join("; ")));
        }
        Ok(())
    })?;
    let messages = session.order.into_iter().flat_map(|(_, m)| m).collect();
    Ok((Conversation { messages }, kept))
}

fn mime_of(url: &str) -> &'static str {
    let lower = url.to_ascii_lowercase();
    match lower.rsplit('.').next() {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "image/png",
    }
}

fn image_part(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        ImageSource::Url { url } => json!({"fileData": {"mimeType": mime_of(url), "fileUri": url}}),
    }
}

/// Puts a tool result into its call of `gemini` (the record of the
/// assistant turn before it); false when that turn has no such open call.
fn answer(
    gemini: &mut Value,
    id: &str,
    content: &[Block],
    is_error: bool,
    lost: &mut Vec<String>,
    at: &str,
) -> bool {
    let Some(calls) = gemini.get_mut("toolCalls").and_then(Value::as_array_mut) else {
        return false;
    };
    let Some(call) = calls
        .iter_mut()
        .find(|c| c["id"] == id && c.get("result").is_none())
    else {
        return false;
    };
    let mut text = String::new();
    let mut extra = Vec::new();
    for b in content {
        match b {
            Block::Text { text: t } => text.push_str(t),
            Block::Image { source } => extra.push(image_part(source)),
            Block::Other { api, value } if api == GEMINI => extra.push(value.clone()),
            _ => lost.push(format!(
                "{at}: the tool result for {id} holds a block the format cannot hold"
            )),
        }
    }
    let name = call["name"].clone();
    let response = if is_error {
        json!({"error": text})
    } else {
        json!({"output": text})
    };
    let mut result =
        vec![json!({"functionResponse": {"id": id, "name": name, "response": response}})];
    result.extend(extra);
    call["result"] = Value::Array(result);
    call["status"] = json!(if is_error { "error" } else { "success" });
    true
}

impl Codec for GeminiCodec {
    fn id(&self) -> FormatId {
        FormatId(ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        "gemini-cli"
    }

    fn version(&self) -> u32 {
        1
    }

    fn describe(&self) -> &'static str {
        "a Gemini CLI session file: JSON Lines of records (session metadata, user and gemini messages with tool calls and their results, $set, $rewindTo)"
    }

    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        let (conv, kept) = decode(delta)?;
        Ok(Checked {
            kept,
            ..Checked::of(&conv, at_line)
        })
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        Ok(append_lines(parts))
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(decode(bytes)?.0)
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let mut lost = Vec::new();
        if conv.messages.is_empty() {
            return Ok(Encoded {
                bytes: Bytes::new(),
                lost,
            });
        }
        let seed = serde_json::to_vec(conv).expect("a conversation always serializes");
        let session = uuid(&seed);
        let first = conv.messages.iter().find_map(|m| m.timestamp.clone());
        let last = conv.messages.iter().rev().find_map(|m| m.timestamp.clone());
        let epoch = "1970-01-01T00:00:00.000Z".to_owned();
        let mut timestamp = first.clone().unwrap_or_else(|| epoch.clone());
        let mut records: Vec<Value> = Vec::new();
        // The gemini record the next tool results answer, and whether a
        // user message came after it (an assistant message then starts a
        // new record; before, it adds to the same turn).
        let mut turn: Option<usize> = None;
        let mut after_user = false;
        for (i, m) in conv.messages.iter().enumerate() {
            let at = format!("message {i}");
            if let Some(t) = &m.timestamp {
                timestamp.clone_from(t);
            }
            let id = uuid(format!("{session}/{i}").as_bytes());
            match m.role {
                Role::System => {}
                Role::User => {
                    let mut content = Vec::new();
                    for b in &m.content {
                        match b {
                            Block::Text { text } => content.push(json!({"text": text})),
                            Block::Image { source } => content.push(image_part(source)),
                            Block::Other { api, value } if api == GEMINI => {
                                content.push(value.clone())
                            }
                            Block::ToolResult {
                                tool_use_id,
                                content: c,
                                is_error,
                            } => {
                                let answered = turn.is_some_and(|k| {
                                    answer(
                                        &mut records[k],
                                        tool_use_id,
                                        c,
                                        *is_error,
                                        &mut lost,
                                        &at,
                                    )
                                });
                                if !answered {
                                    lost.push(format!(
                                        "{at}: the tool result for {tool_use_id} does not follow its tool call"
                                    ));
                                }
                            }
                            Block::Other { api, .. } => {
                                lost.push(format!("{at}: a block of the {api} API"))
                            }
                            _ => lost.push(format!("{at}: assistant content in a user message")),
                        }
                    }
                    after_user = true;
                    if !content.is_empty() {
                        records.push(json!({
                            "id": id, "timestamp": timestamp, "type": "user", "content": content,
                        }));
                        turn = None;
                    }
                }
                Role::Assistant => {
                    let k = match turn {
                        Some(k) if !after_user => k,
                        _ => {
                            records.push(json!({
                                "id": id, "timestamp": timestamp, "type": "gemini",
                                "content": [], "model": "ctx-translated",
                            }));
                            records.len() - 1
                        }
                    };
                    turn = Some(k);
                    after_user = false;
                    for b in &m.content {
                        match b {
                            Block::Text { text } => {
                                push(&mut records[k], "content", json!({"text": text}))
                            }
                            Block::Image { source } => {
                                push(&mut records[k], "content", image_part(source))
                            }
                            Block::Other { api, value } if api == GEMINI => {
                                push(&mut records[k], "content", value.clone())
                            }
                            Block::ToolUse { id, name, input } if input.is_object() => push(
                                &mut records[k],
                                "toolCalls",
                                json!({
                                    "id": id, "name": name, "args": input,
                                    "status": "scheduled", "timestamp": timestamp,
                                }),
                            ),
                            Block::ToolUse { id, .. } => lost.push(format!(
                                "{at}: the arguments of tool call {id} are not a JSON object"
                            )),
                            Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
                            Block::Other { api, .. } => {
                                lost.push(format!("{at}: a block of the {api} API"))
                            }
                            _ => lost
                                .push(format!("{at}: an assistant block the format cannot hold")),
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        write_line(
            &mut out,
            &json!({
                "sessionId": session, "projectHash": "ctx",
                "startTime": first.unwrap_or_else(|| epoch.clone()),
                "lastUpdated": last.unwrap_or(epoch),
                "kind": "main",
            }),
        );
        for r in &records {
            write_line(&mut out, r);
        }
        Ok(Encoded {
            bytes: out.into(),
            lost,
        })
    }

    fn carries(&self) -> Carries {
        Carries {
            system: false,
            thinking: false,
            tool_errors: true,
        }
    }

    fn place(&self, origin: usize) -> String {
        at_line(origin)
    }

    fn pairs_tool_results(&self) -> bool {
        // The runtime's own log: stored as written.
        false
    }
}

/// Appends `v` to the array `key` of `record`.
fn push(record: &mut Value, key: &str, v: Value) {
    match record.get_mut(key).and_then(Value::as_array_mut) {
        Some(a) => a.push(v),
        None => record[key] = json!([v]),
    }
}

/// Cuts a session file into one delta per turn, in order, covering every
/// byte: a turn starts at a `user` message that follows a `gemini` one.
/// Translation reads each commit on its own, so when a record reaches back
/// into an earlier turn (a message rewritten there, a `$rewindTo` to it, a
/// `$set` of every message after the first turn) the file is one delta.
/// Each segment's time is its newest `timestamp` (or `$set.lastUpdated`);
/// its session is the file's `sessionId`.
///
/// # Errors
/// None today (a record it cannot read is kept in its segment); the
/// `Result` is the segment functions' common shape.
pub fn gemini_segments(bytes: &[u8]) -> Result<Vec<Segment>> {
    let mut cuts: Vec<super::codex::Cut> = vec![(0, None, SegmentKind::Delta)];
    let mut session: Option<String> = None;
    let mut model_spoke = false;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut whole = false;
    each_record(bytes, |r: Record| {
        let Some(Value::Object(obj)) = &r.value else {
            return Ok(());
        };
        let str_of =
            |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
        if session.is_none() {
            session = str_of(obj, "sessionId");
        }
        if let Some(id) = str_of(obj, "id") {
            let ty = obj.get("type").and_then(Value::as_str);
            if ty == Some("user") && model_spoke {
                cuts.push((r.offset, None, SegmentKind::Delta));
                model_spoke = false;
            } else if ty == Some("gemini") {
                model_spoke = true;
            }
            let here = cuts.len() - 1;
            whole |= *seen.entry(id).or_insert(here) < here;
        }
        let here = cuts.len() - 1;
        if let Some(to) = str_of(obj, "$rewindTo") {
            whole |= seen.get(&to).is_none_or(|&k| k < here);
        }
        let set = obj.get("$set").and_then(Value::as_object);
        whole |= here > 0 && set.is_some_and(|s| s.contains_key("messages"));
        let at = str_of(obj, "timestamp").or_else(|| set.and_then(|s| str_of(s, "lastUpdated")));
        if let (Some(at), Some(last)) = (at, cuts.last_mut())
            && last.1.as_deref().is_none_or(|old| old < at.as_str())
        {
            last.1 = Some(at);
        }
        Ok(())
    })?;
    if whole {
        let newest = cuts.iter().filter_map(|c| c.1.clone()).max();
        cuts = vec![(0, newest, SegmentKind::Delta)];
    }
    Ok(super::codex::segments_at(bytes.len(), cuts, session))
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"sessionId":"s1","projectHash":"p1","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"2026-01-01T00:00:00.000Z"}"#;

    fn user(id: &str, text: &str) -> String {
        json!({"id": id, "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": text}]})
            .to_string()
    }

    fn texts(bytes: &str) -> Vec<String> {
        GeminiCodec
            .to_canonical(bytes.as_bytes())
            .unwrap()
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    fn lines(ls: &[String]) -> String {
        ls.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn records_replace_by_id_rewind_and_reset_as_the_cli_loads_them() {
        let t = lines(&[
            META.into(),
            user("a", "one"),
            user("b", "two"),
            user("a", "one, edited"),
            user("c", "three"),
            r#"{"$rewindTo":"b"}"#.into(),
            user("d", "four"),
            r#"{"id":"n","timestamp":"t","type":"info","content":"Switched model."}"#.into(),
        ]);
        assert_eq!(texts(&t), ["one, edited", "four"]);
        // A rewind to an id it does not know empties the session.
        let t2 = format!("{t}{{\"$rewindTo\":\"zz\"}}\n{}\n", user("e", "five"));
        assert_eq!(texts(&t2), ["five"]);
        // $set with messages replaces them all.
        let set = json!({"$set": {"messages": [
            {"id": "x", "timestamp": "t", "type": "user", "content": "six"}
        ]}});
        assert_eq!(texts(&format!("{t}{set}\n")), ["six"]);
        let c = GeminiCodec.validate(t.as_bytes()).unwrap();
        assert!(c.kept.is_empty(), "{:?}", c.kept);
        assert_eq!(c.counts.messages, Some(2));
    }

    #[test]
    fn records_this_format_cannot_read_are_kept_and_reported() {
        for (line, why) in [
            ("{oops", "not JSON"),
            ("7", "a record is a number, not an object"),
            (
                r#"{"id":"m","timestamp":"t","type":"tool","content":"x"}"#,
                "a message of type \"tool\", which this format does not know",
            ),
            (
                r#"{"id":"m","timestamp":"t","type":"gemini","content":"","toolCalls":[{"name":"ls","args":{}}]}"#,
                "toolCalls[0] has no \"id\"",
            ),
            (
                r#"{"id":"m","timestamp":"t","type":"user","content":[{"inlineData":{"data":"AA=="}}]}"#,
                "content[0] inlineData has no \"mimeType\"",
            ),
            (r#"{"hello":"world"}"#, "a record that is no message"),
        ] {
            let t = lines(&[META.into(), line.into(), user("u", "hi")]);
            let c = GeminiCodec.validate(t.as_bytes()).unwrap();
            assert_eq!(c.counts.messages, Some(1), "{line}");
            assert_eq!(c.kept.len(), 1, "{line}: {:?}", c.kept);
            let at_line_2 = format!("at byte offset {} (line 2): ", META.len() + 1);
            assert!(c.kept[0].starts_with(&at_line_2), "{:?}", c.kept);
            assert!(c.kept[0].contains(why), "{why}: {:?}", c.kept);
            let b = Bytes::from(t.clone());
            assert_eq!(GeminiCodec.concat(&[b.clone(), b]).unwrap(), t.repeat(2));
        }
        // The last line of a file cut mid-write: read, reported, and the
        // next delta starts a line of its own.
        let cut = format!("{META}\n{}", user("u", "hi"));
        let c = GeminiCodec.validate(cut.as_bytes()).unwrap();
        assert_eq!(c.counts.messages, Some(1));
        assert!(c.kept[0].ends_with("read as its record"), "{:?}", c.kept);
        let next = format!("{}\n", user("v", "there"));
        let joined = GeminiCodec
            .concat(&[Bytes::from(cut.clone()), Bytes::from(next.clone())])
            .unwrap();
        assert_eq!(joined, format!("{cut}\n{next}"));
        assert_eq!(
            texts(std::str::from_utf8(&joined).unwrap()),
            ["hi", "there"]
        );
    }

    #[test]
    fn older_files_read_too_a_whole_record_and_a_chat_checkpoint() {
        // A session file of the older CLI: one pretty-printed document.
        let record = json!({
            "sessionId": "s1", "projectHash": "p1",
            "startTime": "2025-09-01T10:00:00.000Z", "lastUpdated": "2025-09-01T10:01:00.000Z",
            "messages": [
                {"id": "1", "timestamp": "2025-09-01T10:00:01.000Z", "type": "user", "content": "Count the files."},
                {"id": "2", "timestamp": "2025-09-01T10:00:05.000Z", "type": "gemini", "content": "There are 3.",
                 "thoughts": [{"subject": "Counting", "description": "List the directory.", "timestamp": "2025-09-01T10:00:02.000Z"}]}
            ]
        });
        let pretty = serde_json::to_string_pretty(&record).unwrap();
        let c = GeminiCodec.validate(pretty.as_bytes()).unwrap();
        assert_eq!(c.counts.messages, Some(2));
        let conv = GeminiCodec.to_canonical(pretty.as_bytes()).unwrap();
        assert_eq!(
            conv.messages[1].content[0],
            Block::Thinking {
                thinking: "Counting\n\nList the directory.".into(),
                signature: None
            }
        );
        // A `/chat save` checkpoint: Gemini API Content, calls without ids
        // paired with their responses by name.
        let checkpoint = json!([
            {"role": "user", "parts": [{"text": "List the files."}]},
            {"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {"path": "."}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": "a.txt"}}}]},
            {"role": "model", "parts": [{"text": "Just a.txt."}]}
        ]);
        let bytes = serde_json::to_string_pretty(&checkpoint).unwrap();
        let conv = GeminiCodec.to_canonical(bytes.as_bytes()).unwrap();
        assert_eq!(conv.messages.len(), 4);
        assert!(conv.open_results().is_empty());
        assert!(conv.unanswered_tool_uses().is_empty());
        assert!(matches!(
            &conv.messages[2].content[0],
            Block::ToolResult { content, is_error: false, .. } if content == &[Block::text("a.txt")]
        ));
    }

    #[test]
    fn a_tool_result_goes_into_its_call_and_one_that_answers_nothing_is_lost() {
        let call = Block::ToolUse {
            id: "c1".into(),
            name: "ls".into(),
            input: json!({}),
        };
        let result = |id: &str| Block::ToolResult {
            tool_use_id: id.into(),
            content: vec![Block::text("a.txt")],
            is_error: true,
        };
        let conv = Conversation {
            messages: vec![
                Message::new(Role::Assistant, vec![call]),
                Message::new(Role::User, vec![result("c1")]),
                Message::new(Role::User, vec![result("c2")]),
            ],
        };
        let enc = GeminiCodec.encode_canonical(&conv).unwrap();
        assert_eq!(
            enc.lost,
            ["message 2: the tool result for c2 does not follow its tool call"]
        );
        let records: Vec<Value> = enc
            .bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1]["toolCalls"][0]["status"], "error");
        assert_eq!(
            records[1]["toolCalls"][0]["result"][0]["functionResponse"]["response"],
            json!({"error": "a.txt"})
        );
    }
}
