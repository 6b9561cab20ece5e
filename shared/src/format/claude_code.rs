//! `claude-code-v1`: Claude Code transcript JSONL, one JSON object per line,
//! each line ending in a newline. Deltas are whole lines; concatenation is
//! byte append, so a materialized chain is the original transcript byte for
//! byte. A delta whose last line lacks its newline (a transcript cut
//! mid-line, stored as written) gets one when another delta follows it, so
//! the next writer's first line stays a line of its own.
//!
//! A transcript is a log: a line that is not an entry this format reads
//! (not JSON, empty, a `user` entry with a misspelt `content`) is stored as
//! written, read as no message, and reported ([`Checked::kept`]), never
//! refused; so is a line that is not UTF-8 (a runtime's bad write). A last
//! line without its newline is reported too, and read as its entry when it
//! is one.
//!
//! Entry types known here: `user` and `assistant` (a Messages API `message`
//! with content blocks and, for the assistant, `usage`), `system` (with
//! subtypes such as `compact_boundary`, which carries `compactMetadata` with
//! the trigger and token count before compaction, `parentUuid: null` and a
//! `logicalParentUuid`), `summary`, and everything else (`attachment`,
//! `file-history-snapshot`, titles, types yet to come), which is kept intact
//! and never sent to a model. After a `compact_boundary` Claude Code writes
//! the summary as a `user` entry with `isCompactSummary: true`.
//!
//! [`segments`] cuts a transcript into one delta per turn and one compaction
//! per boundary (the boundary line and its summary), for `ctx import`.

use std::ops::Range;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::anthropic::{block_json, check_roles, content_json, messages_api_losses, parse_content};
use super::canonical::{Conversation, Message, Role};
use super::jsonl::{at, write_line};
use super::{Carries, Checked, Codec, Encoded, FormatId, at_line, bad};
use crate::error::Result;

const ID: &str = "claude-code-v1";

/// `claude-code-v1`.
#[derive(Debug, Default)]
pub struct ClaudeCodeCodec;

/// One parsed line.
struct Line {
    offset: usize,
    end: usize,
    number: usize,
    /// The entry; `Null` for a line kept as written ([`Line::problem`]).
    value: Value,
    /// Why the line is no entry this format reads, when it is not.
    problem: Option<String>,
}

/// Every line of `bytes`, parsed and checked (lines that are no entry are
/// kept, with their problem).
fn parse(bytes: &[u8]) -> Result<Vec<Line>> {
    let mut lines = Vec::new();
    each_line(bytes, |line| {
        lines.push(line);
        Ok(())
    })?;
    Ok(lines)
}

/// The parts appended, a newline put before a part when the bytes so far
/// do not end in one (associative: a join joined again with more parts is
/// the join of all of them).
pub(super) fn append_lines(parts: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for p in parts.iter().filter(|p| !p.is_empty()) {
        if out.last().is_some_and(|&b| b != b'\n') {
            out.push(b'\n');
        }
        out.extend_from_slice(p);
    }
    out.into()
}

/// Hands each line of `bytes` to `f` as it is parsed and checked, so that
/// a caller that keeps only what it builds from a line holds one line's
/// JSON tree at a time (a long session's trees are many times its bytes).
fn each_line(bytes: &[u8], mut f: impl FnMut(Line) -> Result<()>) -> Result<()> {
    let mut pos = 0;
    let mut number = 1;
    while pos < bytes.len() {
        let (nl, mut problem) = match bytes[pos..].iter().position(|&b| b == b'\n') {
            Some(nl) => (nl, None),
            None => (
                bytes.len() - pos,
                Some(format!(
                    "a last line without a newline ({} bytes)",
                    bytes.len() - pos
                )),
            ),
        };
        let line = &bytes[pos..pos + nl];
        let value = if line.iter().all(u8::is_ascii_whitespace) {
            problem.get_or_insert_with(|| "an empty line".to_owned());
            Value::Null
        } else {
            let mut no_entry = |why: String| {
                problem = Some(match problem.take() {
                    Some(p) => format!("{p}; {why}"),
                    None => why,
                });
                Value::Null
            };
            match std::str::from_utf8(line) {
                Err(e) => no_entry(format!(
                    "the line is not UTF-8 (at its byte {})",
                    e.valid_up_to()
                )),
                Ok(_) => match serde_json::from_slice::<Value>(line) {
                    Ok(v) => match check_entry(&v) {
                        Ok(()) => v,
                        Err(e) => no_entry(e),
                    },
                    Err(e) => no_entry(format!("the line is not JSON: {e}")),
                },
            }
        };
        let end = (pos + nl + 1).min(bytes.len());
        f(Line {
            offset: pos,
            end,
            number,
            value,
            problem,
        })?;
        pos = end;
        number += 1;
    }
    Ok(())
}

fn entry_type(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

fn check_entry(v: &Value) -> Result<(), String> {
    let obj = v.as_object().ok_or("an entry is not a JSON object")?;
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("the entry's \"type\" is not a string".into()),
        None => return Err("the entry has no \"type\"".into()),
    };
    match ty {
        "user" | "assistant" => {
            let msg = obj
                .get("message")
                .and_then(Value::as_object)
                .ok_or_else(|| format!("a {ty} entry has no \"message\" object"))?;
            let role = msg.get("role").and_then(Value::as_str);
            if role != Some(ty) {
                return Err(format!("a {ty} entry's message has role {role:?}"));
            }
            let content = msg
                .get("content")
                .ok_or_else(|| format!("a {ty} entry's message has no \"content\""))?;
            let blocks = parse_content(content).map_err(|e| format!("message.{e}"))?;
            let role = if ty == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            check_roles(role, &blocks).map_err(|e| format!("message.{e}"))?;
            if let Some(u) = msg.get("usage")
                && !u.is_object()
            {
                return Err("an assistant message's \"usage\" is not an object".into());
            }
        }
        "system" if obj.get("subtype").and_then(Value::as_str) == Some("compact_boundary") => {
            let meta = obj
                .get("compactMetadata")
                .and_then(Value::as_object)
                .ok_or("a compact_boundary entry has no \"compactMetadata\" object")?;
            if !meta.get("trigger").is_some_and(Value::is_string) {
                return Err(
                    "a compact_boundary's compactMetadata has no string \"trigger\"".into(),
                );
            }
            if obj.get("parentUuid").is_some_and(|p| !p.is_null()) {
                return Err(
                        "a compact_boundary starts a new chain: its parentUuid must be null (the old tip is logicalParentUuid)"
                            .into(),
                    );
            }
        }
        "summary" if !obj.get("summary").is_some_and(Value::is_string) => {
            return Err("a summary entry has no string \"summary\"".into());
        }
        _ => {}
    }
    Ok(())
}

/// Where a line starts: its byte offset and line number.
struct Position {
    offset: usize,
    number: usize,
}

/// The conversation of `bytes`, where each line starts (a message's
/// `origin` indexes them), and the lines kept as written (where, and why
/// they are no entry). Each line's JSON is dropped once its message is
/// built.
fn decode(bytes: &[u8]) -> Result<(Conversation, Vec<Position>, Vec<String>)> {
    let mut positions: Vec<Position> = Vec::new();
    let mut messages: Vec<Message> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    let mut last_assistant_id: Option<String> = None;
    each_line(bytes, |line| {
        let i = positions.len();
        positions.push(Position {
            offset: line.offset,
            number: line.number,
        });
        if let Some(p) = &line.problem {
            // A last line without its newline may still be an entry.
            let read = if line.value.is_null() {
                "read as no message"
            } else {
                "read as its entry"
            };
            kept.push(format!("at {}: {p}: {read}", at(line.offset, line.number)));
        }
        let v = &line.value;
        let ty = entry_type(v);
        if !(ty == "user" || ty == "assistant")
            || v.get("isSidechain").and_then(Value::as_bool) == Some(true)
        {
            return Ok(());
        }
        let msg = &v["message"];
        let content =
            parse_content(&msg["content"]).map_err(|e| bad(ID, at(line.offset, line.number), e))?;
        let timestamp = v
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if ty == "assistant" {
            let id = msg.get("id").and_then(Value::as_str).map(str::to_owned);
            if let (Some(id), Some(prev)) = (&id, messages.last_mut())
                && prev.role == Role::Assistant
                && last_assistant_id.as_ref() == Some(id)
            {
                prev.content.extend(content);
                return Ok(());
            }
            last_assistant_id = id;
        } else {
            last_assistant_id = None;
        }
        messages.push(Message {
            role: if ty == "user" {
                Role::User
            } else {
                Role::Assistant
            },
            content,
            timestamp,
            origin: i,
        });
        Ok(())
    })?;
    Ok((Conversation { messages }, positions, kept))
}

/// A UUID-shaped id derived from `seed`, so translations are deterministic.
pub(super) fn uuid(seed: &[u8]) -> String {
    let h = blake3::hash(seed);
    let b = h.as_bytes();
    let hex = hex::encode(&b[..16]);
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

impl Codec for ClaudeCodeCodec {
    fn id(&self) -> FormatId {
        FormatId(ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        "claude-code"
    }

    fn version(&self) -> u32 {
        1
    }

    fn describe(&self) -> &'static str {
        "a Claude Code transcript: JSON Lines, one entry (user, assistant, system, summary, ...) per line"
    }

    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        let (conv, lines, kept) = decode(delta)?;
        Ok(Checked {
            kept,
            ..Checked::of(&conv, |i| at(lines[i].offset, lines[i].number))
        })
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        Ok(append_lines(parts))
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(decode(bytes)?.0)
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let seed = serde_json::to_vec(conv).expect("a conversation always serializes");
        let session = uuid(&seed);
        let mut out = Vec::new();
        let mut parent: Option<String> = None;
        let mut timestamp = "1970-01-01T00:00:00.000Z".to_owned();
        for (i, m) in conv.messages.iter().enumerate() {
            if let Some(t) = &m.timestamp {
                timestamp.clone_from(t);
            }
            let id = uuid(format!("{session}/{i}").as_bytes());
            let (ty, message) = match m.role {
                Role::System => continue,
                Role::User => (
                    "user",
                    json!({"role": "user", "content": content_json(&m.content)}),
                ),
                Role::Assistant => (
                    "assistant",
                    json!({
                        "id": format!("msg_ctx_{}", id.replace('-', "")),
                        "type": "message",
                        "role": "assistant",
                        "model": "ctx-translated",
                        "content": m.content.iter().map(block_json).collect::<Vec<_>>(),
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    }),
                ),
            };
            let entry = json!({
                "parentUuid": parent,
                "isSidechain": false,
                "userType": "external",
                "cwd": ".",
                "sessionId": session,
                "version": "ctx",
                "type": ty,
                "message": message,
                "uuid": id,
                "timestamp": timestamp,
            });
            write_line(&mut out, &entry);
            parent = Some(id);
        }
        Ok(Encoded {
            bytes: out.into(),
            lost: messages_api_losses(conv),
        })
    }

    fn carries(&self) -> Carries {
        // A transcript never holds the system prompt: Claude Code supplies
        // its own when it resumes.
        Carries {
            system: false,
            thinking: true,
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

    fn compaction_in_history(&self) -> bool {
        true
    }

    fn compaction_delta(&self, summary: &str, context: &[u8], at: DateTime<Utc>) -> Result<Bytes> {
        // What Claude Code writes when it compacts: a compact_boundary
        // system entry that starts a new parent chain (`parentUuid: null`,
        // `logicalParentUuid` the last entry before it), then the summary as
        // a user entry flagged `isCompactSummary`. Session, working
        // directory and version carry over from the last entry that has
        // them, so the transcript resumes as the same session.
        let lines = parse(context)?;
        let field = |name: &str| {
            lines
                .iter()
                .rev()
                .find_map(|l| l.value.get(name).filter(|v| !v.is_null()).cloned())
        };
        let last_uuid = lines.iter().rev().find_map(|l| {
            l.value
                .get("uuid")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let seed = blake3::hash(&[context, summary.as_bytes()].concat()).to_hex();
        let boundary_id = uuid(format!("{seed}/compact_boundary").as_bytes());
        let summary_id = uuid(format!("{seed}/summary").as_bytes());
        let session = field("sessionId").unwrap_or_else(|| json!(uuid(seed.as_bytes())));
        let cwd = field("cwd").unwrap_or_else(|| json!("."));
        let version = field("version").unwrap_or_else(|| json!("ctx"));
        let timestamp = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let pre_tokens = super::estimate_tokens(context.len());
        let boundary = json!({
            "parentUuid": null,
            "logicalParentUuid": last_uuid,
            "isSidechain": false,
            "userType": "external",
            "cwd": cwd,
            "sessionId": session,
            "version": version,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": false,
            "timestamp": timestamp,
            "uuid": boundary_id,
            "level": "info",
            "compactMetadata": {"trigger": "manual", "preTokens": pre_tokens},
        });
        let entry = json!({
            "parentUuid": boundary_id,
            "isSidechain": false,
            "userType": "external",
            "cwd": cwd,
            "sessionId": session,
            "version": version,
            "type": "user",
            "message": {
                "role": "user",
                "content": format!("{}\n\n{summary}", super::COMPACTION_PREAMBLE),
            },
            "isVisibleInTranscriptOnly": true,
            "isCompactSummary": true,
            "uuid": summary_id,
            "timestamp": timestamp,
        });
        let mut out = Vec::new();
        for v in [boundary, entry] {
            write_line(&mut out, &v);
        }
        Ok(out.into())
    }

    fn check_compaction(&self, delta: &[u8]) -> Result<()> {
        // Root materialization keeps these lines as part of the transcript,
        // so they must be what Claude Code writes at a compaction.
        let lines = parse(delta)?;
        match lines.first() {
            Some(l)
                if entry_type(&l.value) == "system"
                    && l.value.get("subtype").and_then(Value::as_str)
                        == Some("compact_boundary") =>
            {
                Ok(())
            }
            _ => Err(bad(
                ID,
                at(0, 1),
                "a compaction commit starts with its compact_boundary entry (then the summary)",
            )),
        }
    }
}

/// What a segment of a transcript becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// A turn: a user prompt and everything up to the next prompt.
    Delta,
    /// A `compact_boundary` entry and the summary after it.
    Compaction,
}

/// A run of whole lines of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Delta or compaction.
    pub kind: SegmentKind,
    /// Its bytes in the transcript.
    pub range: Range<usize>,
    /// The newest `timestamp` among its entries.
    pub timestamp: Option<String>,
    /// The first `sessionId` among its entries.
    pub session_id: Option<String>,
}

fn is_prompt(v: &Value) -> bool {
    if entry_type(v) != "user" || v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
        return false;
    }
    match v["message"].get("content") {
        Some(Value::Array(blocks)) => !blocks
            .iter()
            .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")),
        _ => true,
    }
}

/// Cuts a transcript into segments, in order, covering every byte: one
/// delta per turn (a turn starts at a user prompt that follows an assistant
/// reply; tool results stay with their tool uses), and at each
/// `compact_boundary` the turn so far ends and a compaction segment holds
/// the boundary and the lines up to and including the next `user` entry
/// (the summary Claude Code writes after it).
///
/// # Errors
/// `Invalid` (field `delta`) when the transcript is not valid `claude-code-v1`.
pub fn segments(bytes: &[u8]) -> Result<Vec<Segment>> {
    let lines = parse(bytes)?;
    let mut out = Vec::new();
    let mut cur: Option<Segment> = None;
    let mut has_assistant = false;
    let mut in_compaction = false;
    for line in &lines {
        let v = &line.value;
        let ty = entry_type(v);
        let boundary =
            ty == "system" && v.get("subtype").and_then(Value::as_str) == Some("compact_boundary");
        let starts = boundary || (!in_compaction && has_assistant && is_prompt(v));
        if starts && let Some(s) = cur.take() {
            out.push(s);
        }
        if boundary {
            in_compaction = true;
            has_assistant = false;
        }
        let seg = cur.get_or_insert(Segment {
            kind: if boundary {
                SegmentKind::Compaction
            } else {
                SegmentKind::Delta
            },
            range: line.offset..line.offset,
            timestamp: None,
            session_id: None,
        });
        seg.range.end = line.end;
        if let Some(t) = v.get("timestamp").and_then(Value::as_str)
            && seg.timestamp.as_deref().is_none_or(|old| old < t)
        {
            seg.timestamp = Some(t.to_owned());
        }
        if seg.session_id.is_none() {
            seg.session_id = v
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        if in_compaction && ty == "user" {
            in_compaction = false;
            out.extend(cur.take());
        } else if ty == "assistant" {
            has_assistant = true;
        }
    }
    out.extend(cur);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z"}"#;

    #[test]
    fn a_delta_without_its_last_newline_is_not_glued_to_the_next() {
        // The hook stores a transcript cut mid-line as written; a writer
        // that appends after it (the SDK's store resuming the session)
        // must keep its first line a line of its own.
        let cut = Bytes::from(format!("{USER}\n{USER}"));
        let next = Bytes::from(format!("{USER}\n"));
        let joined = ClaudeCodeCodec
            .concat(&[cut.clone(), Bytes::new(), next.clone()])
            .unwrap();
        assert_eq!(joined, format!("{USER}\n{USER}\n{USER}\n").as_bytes());
        assert_eq!(ClaudeCodeCodec.count(&joined).messages, Some(3));
        // Still associative (incremental materialize joins onto a cached
        // join), and still byte for byte when nothing follows the cut.
        let once = ClaudeCodeCodec.concat(std::slice::from_ref(&cut)).unwrap();
        assert_eq!(once, cut);
        assert_eq!(
            ClaudeCodeCodec.concat(&[once, next.clone()]).unwrap(),
            joined
        );
        assert_eq!(
            ClaudeCodeCodec
                .concat_onto(
                    &ClaudeCodeCodec.concat(&[cut, Bytes::new()]).unwrap(),
                    &[next]
                )
                .unwrap()
                .unwrap(),
            joined
        );
    }

    #[test]
    fn lines_that_are_no_entry_are_kept_with_where_and_why() {
        // A transcript is a log: what this format cannot read is kept as
        // written, read as no message, and reported, bytes that are not
        // UTF-8 too.
        let cases: [(&[u8], &str); 7] = [
            (b"\n", "at byte offset 0 (line 1): an empty line"),
            (b"{\"type\":1}\n", "\"type\" is not a string"),
            (b"[1]\n", "not a JSON object"),
            (
                b"{\"type\":\"user\",\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}\n",
                "has role",
            ),
            (
                b"{\"type\":\"system\",\"subtype\":\"compact_boundary\"}\n",
                "compactMetadata",
            ),
            (b"{\"type\": nope}\n", "(line 1): the line is not JSON"),
            (
                b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"contnet\":\"x\"}}\n",
                "has no \"content\"",
            ),
        ];
        for (line, why) in cases {
            let t = [
                format!("{USER}\n").as_bytes(),
                line,
                format!("{USER}\n").as_bytes(),
            ]
            .concat();
            let checked = ClaudeCodeCodec.validate(&t).unwrap();
            assert_eq!(checked.counts.messages, Some(2), "{why}");
            assert_eq!(checked.kept.len(), 1, "{why}: {:?}", checked.kept);
            let at_line_2 = format!("at byte offset {} (line 2)", USER.len() + 1);
            let why = why
                .replace("at byte offset 0 (line 1)", &at_line_2)
                .replace("(line 1)", "(line 2)");
            assert!(checked.kept[0].contains(&why), "{why}: {:?}", checked.kept);
            assert!(checked.kept[0].contains(&at_line_2), "{:?}", checked.kept);
            assert!(
                checked.kept[0].ends_with(": read as no message"),
                "{:?}",
                checked.kept
            );
        }
        // A last line without its newline (a finished transcript's) is
        // read when it is an entry, and reported.
        let partial = format!("{USER}\n{USER}");
        let checked = ClaudeCodeCodec.validate(partial.as_bytes()).unwrap();
        assert_eq!(checked.counts.messages, Some(2));
        assert_eq!(
            checked.kept,
            [format!(
                "at byte offset {} (line 2): a last line without a newline ({} bytes): read as its entry",
                USER.len() + 1,
                USER.len()
            )]
        );
        let mut bad_bytes = format!("{USER}\n").into_bytes();
        bad_bytes.extend_from_slice(b"{\"x\":\"\xff\"}\n");
        let checked = ClaudeCodeCodec.validate(&bad_bytes).unwrap();
        assert_eq!(checked.counts.messages, Some(1));
        assert_eq!(
            checked.kept,
            [format!(
                "at byte offset {} (line 2): the line is not UTF-8 (at its byte 6): read as no message",
                USER.len() + 1
            )]
        );
        let segs = segments(partial.as_bytes()).unwrap();
        assert_eq!(segs.last().unwrap().range.end, partial.len());
    }

    #[test]
    fn compactions_start_with_their_boundary() {
        assert!(
            ClaudeCodeCodec
                .check_compaction(format!("{USER}\n").as_bytes())
                .unwrap_err()
                .message
                .contains("starts with its compact_boundary")
        );
        let boundary = r#"{"type":"system","subtype":"compact_boundary","parentUuid":null,"compactMetadata":{"trigger":"manual","preTokens":10}}"#;
        assert!(
            ClaudeCodeCodec
                .check_compaction(format!("{boundary}\n{USER}\n").as_bytes())
                .is_ok()
        );
    }

    #[test]
    fn unknown_entries_are_kept_and_not_messages() {
        let t = format!("{USER}\n{{\"type\":\"future-thing\",\"x\":[1]}}\n");
        let conv = ClaudeCodeCodec.to_canonical(t.as_bytes()).unwrap();
        assert_eq!(conv.messages.len(), 1);
        let parts = [Bytes::from(t.clone()), Bytes::from(t.clone())];
        assert_eq!(
            ClaudeCodeCodec.concat(&parts).unwrap(),
            Bytes::from(t.repeat(2))
        );
    }

    #[test]
    fn split_assistant_entries_merge_by_message_id() {
        let t = concat!(
            r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"x","name":"Read","input":{}}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"done"}]}}"#,
            "\n",
        );
        let conv = ClaudeCodeCodec.to_canonical(t.as_bytes()).unwrap();
        assert_eq!(conv.messages.len(), 2);
        assert_eq!(conv.messages[0].content.len(), 2);
    }
}
