//! `codex-rollout-v1`: an OpenAI Codex CLI rollout file
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), one JSON record per
//! line, each line ending in a newline. Deltas are whole lines;
//! concatenation is byte append (a newline goes before a delta that follows
//! one whose last line lacks it, as in `claude-code-v1`), so a materialized
//! chain is the rollout byte for byte.
//!
//! A line is `{"timestamp", "type", "payload"}` with `type` one of
//! `session_meta` (the session's id, cwd, originator, CLI version, ...),
//! `response_item` (a Responses API item: a `message` with `role` and
//! `input_text` / `output_text` / `input_image` parts, `function_call`,
//! `function_call_output`, `reasoning`, `local_shell_call`,
//! `custom_tool_call` and its `custom_tool_call_output`, `web_search_call`,
//! ...), `event_msg` (what the UI showed, repeating the items),
//! `turn_context` (the turn's model, cwd and policies) and `compacted`
//! (the summary that replaced the history at a compaction). Older rollouts
//! have the bare item on each line, a first line of session meta
//! (`{"id", "timestamp", "instructions"}`) and `{"record_type": "state"}`
//! lines: both shapes are read.
//!
//! The rollout is the runtime's own log: a line this format cannot read
//! (not JSON, a record type it does not know, an item missing a field) is
//! stored as written, read as no message and reported ([`Checked::kept`]),
//! never refused, bytes that are not UTF-8 included.
//!
//! Translation: the `response_item` records are what the model saw, read
//! as `openai-responses-v1` reads items (a run of assistant items is one
//! assistant message, a run of outputs one user message of tool results,
//! reasoning is thinking without a signature). A `local_shell_call` is a
//! tool use named `local_shell` whose input is its `action`; a
//! `custom_tool_call` (Codex's `apply_patch`) a tool use whose input is
//! `{"input": <its text>}`; a `compacted` record a user message of its
//! summary. `event_msg`, `turn_context` and `session_meta` lines are not
//! messages. Written from another format: a `session_meta` line, then one
//! `response_item` line per item, system prompts as `developer` messages;
//! thinking and a tool result's error flag are not carried (the flag
//! becomes [`ERROR_PREFIX`](super::canonical::ERROR_PREFIX) text), as in `openai-responses-v1`.

use std::collections::BTreeSet;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::canonical::{Block, Conversation, Role};
use super::claude_code::{append_lines, uuid};
use super::json_array::{Fold, Item, Run, kind, string};
use super::jsonl::{Record, at, each_record, write_line};
use super::openai_responses::{ItemShape, item, items_of};
use super::{
    Carries, Checked, Codec, Counts, Encoded, FormatId, OpenResult, Segment, SegmentKind, at_line,
};
use crate::error::Result;

const ID: &str = "codex-rollout-v1";

/// `codex-rollout-v1`.
#[derive(Debug, Default)]
pub struct CodexCodec;

/// What a line of a rollout is.
enum Entry<'a> {
    /// A Responses API item the model saw.
    Item(&'a Value),
    /// The summary that replaced the history at a compaction.
    Compacted(&'a str),
    /// Session meta, turn context, UI events, state: no message.
    Skip,
}

/// Record types of the `{"type", "payload"}` shape that hold no message.
const NO_MESSAGE: [&str; 3] = ["session_meta", "turn_context", "event_msg"];

fn entry(v: &Value) -> Result<Entry<'_>, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("a record is {}, not an object", kind(v)))?;
    let ty = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(other) => {
            return Err(format!(
                "the record's \"type\" is {}, not a string",
                kind(other)
            ));
        }
    };
    if let Some(payload) = obj.get("payload") {
        let ty = ty.ok_or("a record with a \"payload\" has no \"type\"")?;
        return match ty {
            "response_item" if payload.is_object() => Ok(Entry::Item(payload)),
            "response_item" => Err(format!(
                "a response_item's \"payload\" is {}, not an object",
                kind(payload)
            )),
            "compacted" => {
                let what = "a compacted record's payload";
                let p = payload
                    .as_object()
                    .ok_or_else(|| format!("{what} is {}, not an object", kind(payload)))?;
                Ok(Entry::Compacted(string(p, "message", what)?))
            }
            t if NO_MESSAGE.contains(&t) => Ok(Entry::Skip),
            t => Err(format!(
                "a record of type {t:?}, which this format does not know"
            )),
        };
    }
    // An older rollout: bare items, a first line of session meta, state.
    if obj.contains_key("record_type") {
        return Ok(Entry::Skip);
    }
    match ty {
        Some(_) => Ok(Entry::Item(v)),
        None if obj.contains_key("role") => Ok(Entry::Item(v)),
        None if obj.contains_key("id") && obj.contains_key("timestamp") => Ok(Entry::Skip),
        None => Err("a record with neither a \"type\" nor a \"role\"".into()),
    }
}

/// The Codex items `openai-responses-v1` does not read as tool calls.
fn codex_item(obj: &Map<String, Value>, ty: &str) -> Option<Result<Item, String>> {
    let call_id = |what: &str| {
        string(obj, "call_id", what)
            .or_else(|_| string(obj, "id", what))
            .map(str::to_owned)
    };
    Some(match ty {
        "local_shell_call" => (|| {
            let what = "a local_shell_call";
            let id = call_id(what)?;
            let action = obj
                .get("action")
                .filter(|a| a.is_object())
                .ok_or_else(|| format!("{what} has no \"action\" object"))?;
            Ok(Item {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id,
                    name: "local_shell".into(),
                    input: action.clone(),
                }],
                run: Run::Assistant,
            })
        })(),
        "custom_tool_call" => (|| {
            let what = "a custom_tool_call";
            Ok(Item {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: string(obj, "call_id", what)?.to_owned(),
                    name: string(obj, "name", what)?.to_owned(),
                    input: json!({"input": string(obj, "input", what)?}),
                }],
                run: Run::Assistant,
            })
        })(),
        "custom_tool_call_output" => (|| {
            let what = "a custom_tool_call_output";
            Ok(Item {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    tool_use_id: string(obj, "call_id", what)?.to_owned(),
                    content: vec![Block::text(string(obj, "output", what)?)],
                    is_error: false,
                }],
                run: Run::Results,
            })
        })(),
        _ => return None,
    })
}

/// What decoding a rollout found.
struct Decoded {
    conv: Conversation,
    open: Vec<OpenResult>,
    kept: Vec<String>,
}

fn decode(bytes: &[u8]) -> Result<Decoded> {
    let mut fold = Fold::default();
    let mut kept = Vec::new();
    each_record(bytes, |r: Record| {
        // A message's origin is its line, from 0 (what `place` names).
        let i = r.number - 1;
        let here = at(r.offset, r.number);
        let mut problems: Vec<String> = r.problem.into_iter().collect();
        let read = r.value.as_ref().map(|v| {
            let timestamp = v
                .get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let item = match entry(v)? {
                Entry::Skip => return Ok(None),
                Entry::Compacted(summary) => Item {
                    role: Role::User,
                    blocks: vec![Block::text(summary)],
                    run: Run::Alone,
                },
                Entry::Item(it) => {
                    let ty = it.get("type").and_then(Value::as_str).unwrap_or("");
                    match it.as_object().and_then(|obj| codex_item(obj, ty)) {
                        Some(decoded) => decoded?,
                        None => item(it)?,
                    }
                }
            };
            Ok::<_, String>(Some((item, timestamp)))
        });
        let read_ok = matches!(read, Some(Ok(_)));
        match read {
            Some(Ok(Some((it, timestamp)))) => fold.push(it, i, &here, timestamp),
            Some(Ok(None)) => {}
            Some(Err(e)) => problems.push(e),
            None => {}
        }
        if !problems.is_empty() {
            let read = if read_ok {
                "read as its record"
            } else {
                "read as no message"
            };
            kept.push(format!("at {here}: {}: {read}", problems.join("; ")));
        }
        Ok(())
    })?;
    Ok(Decoded {
        conv: fold.conv,
        open: fold.open,
        kept,
    })
}

/// Codex's shapes of the Responses items: typed `message` items, a system
/// prompt as a `developer` message, images without `detail`.
const SHAPE: ItemShape = ItemShape {
    system: |t| {
        json!({
            "type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": t}],
        })
    },
    user: |parts| json!({"type": "message", "role": "user", "content": parts}),
    assistant: |t| {
        json!({
            "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": t}],
        })
    },
    image_detail: false,
};

impl Codec for CodexCodec {
    fn id(&self) -> FormatId {
        FormatId(ID.to_owned())
    }

    fn runtime(&self) -> &'static str {
        "codex"
    }

    fn version(&self) -> u32 {
        1
    }

    fn describe(&self) -> &'static str {
        "an OpenAI Codex CLI rollout: JSON Lines of {timestamp, type, payload} records (session_meta, response_item, event_msg, turn_context, compacted)"
    }

    fn validate(&self, delta: &[u8]) -> Result<Checked> {
        let d = decode(delta)?;
        Ok(Checked {
            open_results: d.open,
            counts: Counts::of(&d.conv),
            kept: d.kept,
        })
    }

    fn concat(&self, parts: &[Bytes]) -> Result<Bytes> {
        Ok(append_lines(parts))
    }

    fn to_canonical(&self, bytes: &[u8]) -> Result<Conversation> {
        Ok(decode(bytes)?.conv)
    }

    fn encode_canonical(&self, conv: &Conversation) -> Result<Encoded> {
        let mut out = Vec::new();
        let mut lost = Vec::new();
        if conv.messages.is_empty() {
            return Ok(Encoded {
                bytes: Bytes::new(),
                lost,
            });
        }
        let seed = serde_json::to_vec(conv).expect("a conversation always serializes");
        let mut timestamp = conv
            .messages
            .iter()
            .find_map(|m| m.timestamp.clone())
            .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned());
        write_line(
            &mut out,
            &json!({
                "timestamp": timestamp,
                "type": "session_meta",
                "payload": {
                    "id": uuid(&seed), "timestamp": timestamp, "cwd": ".",
                    "originator": "ctx", "cli_version": "ctx", "instructions": null,
                },
            }),
        );
        let mut pending = BTreeSet::new();
        for (i, m) in conv.messages.iter().enumerate() {
            if let Some(t) = &m.timestamp {
                timestamp.clone_from(t);
            }
            for item in items_of(m, &format!("message {i}"), &mut pending, &mut lost, &SHAPE) {
                write_line(
                    &mut out,
                    &json!({"timestamp": timestamp, "type": "response_item", "payload": item}),
                );
            }
        }
        Ok(Encoded {
            bytes: out.into(),
            lost,
        })
    }

    fn carries(&self) -> Carries {
        Carries {
            system: true,
            thinking: false,
            tool_errors: false,
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
        // A rollout records its compactions (`compacted` records), so the
        // file is its whole history with them.
        true
    }

    fn compaction_delta(&self, summary: &str, _context: &[u8], at: DateTime<Utc>) -> Result<Bytes> {
        // What Codex writes when it compacts: a `compacted` record holding
        // the summary that stands in for the history before it.
        let mut out = Vec::new();
        write_line(
            &mut out,
            &json!({
                "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "type": "compacted",
                "payload": {"message": format!("{}\n\n{summary}", super::COMPACTION_PREAMBLE)},
            }),
        );
        Ok(out.into())
    }
}

/// Cuts a rollout into one delta per turn, in order, covering every byte:
/// a turn starts at a user message item that follows a model item (an
/// assistant message, a call, reasoning), so each turn's calls stay with
/// their outputs. A `compacted` record (the summary that replaced the
/// history) ends the turn before it and starts a compaction segment, which
/// the next user message ends: a compaction commit of the record Codex
/// wrote, as [`Codec::compaction_delta`] writes one. Each segment's time
/// is its newest record's `timestamp`; its session is the `session_meta`
/// id (a bare first line's `id` in an older rollout).
///
/// # Errors
/// None today (a record it cannot read is kept in its segment); the
/// `Result` is the segment functions' common shape.
pub fn codex_segments(bytes: &[u8]) -> Result<Vec<Segment>> {
    let mut cuts: Vec<Cut> = Vec::new();
    let mut session: Option<String> = None;
    let mut model_spoke = false;
    each_record(bytes, |r: Record| {
        let Some(v) = &r.value else {
            return Ok(());
        };
        let ty = v.get("type").and_then(Value::as_str);
        if ty == Some("compacted") {
            cuts.push((r.offset, None, SegmentKind::Compaction));
            // The next user message starts a turn.
            model_spoke = true;
        }
        if session.is_none() {
            let meta = match ty {
                Some("session_meta") => v.get("payload").and_then(|p| p.get("id")),
                None if v.get("role").is_none() => v.get("id"),
                _ => None,
            };
            session = meta.and_then(Value::as_str).map(str::to_owned);
        }
        let at = v
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Ok(Entry::Item(it)) = entry(v) {
            let user = it.get("role").and_then(Value::as_str) == Some("user");
            let output = it
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_output"));
            if user && model_spoke {
                cuts.push((r.offset, None, SegmentKind::Delta));
                model_spoke = false;
            } else if !user && !output {
                model_spoke = true;
            }
        }
        // A segment's time is its newest record's, as the other logs'.
        if let Some(at) = at {
            match cuts.last_mut() {
                Some(last) if last.1.as_deref().is_some_and(|old| old >= at.as_str()) => {}
                Some(last) => last.1 = Some(at),
                None => cuts.push((0, Some(at), SegmentKind::Delta)),
            }
        }
        Ok(())
    })?;
    if cuts.first().is_none_or(|c| c.0 != 0) {
        cuts.insert(0, (0, None, SegmentKind::Delta));
    }
    Ok(segments_at(bytes.len(), cuts, session))
}

/// Where a segment starts, its newest time, and what it becomes.
pub(super) type Cut = (usize, Option<String>, SegmentKind);

/// Segments from their cuts.
pub(super) fn segments_at(len: usize, cuts: Vec<Cut>, session: Option<String>) -> Vec<Segment> {
    let ends: Vec<usize> = cuts.iter().skip(1).map(|c| c.0).chain([len]).collect();
    cuts.into_iter()
        .zip(ends)
        .filter(|((start, _, _), end)| start < end)
        .map(|((start, timestamp, kind), end)| Segment {
            kind,
            range: start..end,
            timestamp,
            session_id: session.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#;

    fn kept(bytes: &str) -> Checked {
        CodexCodec
            .validate(bytes.as_bytes())
            .expect("a rollout is never refused")
    }

    #[test]
    fn records_this_format_cannot_read_are_kept_and_reported() {
        for (line, why) in [
            ("not json", "not JSON"),
            ("[1]", "a record is an array, not an object"),
            (
                r#"{"timestamp":"t","type":"world_state","payload":{}}"#,
                "a record of type \"world_state\", which this format does not know",
            ),
            (
                r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}"#,
                "a function_call has no \"call_id\"",
            ),
            (
                r#"{"type":"response_item","payload":{"type":"custom_tool_call","call_id":"c","name":"apply_patch"}}"#,
                "a custom_tool_call has no \"input\"",
            ),
            (
                r#"{"type":"compacted","payload":{"message":7}}"#,
                "a compacted record's payload field \"message\" is a number, not a string",
            ),
            (
                r#"{"payload":{}}"#,
                "a record with a \"payload\" has no \"type\"",
            ),
        ] {
            let t = format!("{USER}\n{line}\n{USER}\n");
            let c = kept(&t);
            assert_eq!(c.counts.messages, Some(2), "{line}");
            assert_eq!(c.kept.len(), 1, "{line}: {:?}", c.kept);
            let at_line_2 = format!("at byte offset {} (line 2): ", USER.len() + 1);
            assert!(c.kept[0].starts_with(&at_line_2), "{:?}", c.kept);
            assert!(c.kept[0].contains(why), "{why}: {:?}", c.kept);
            assert!(c.kept[0].ends_with("read as no message"), "{:?}", c.kept);
            // Kept as written: a chain of it is the bytes.
            let b = Bytes::from(t.clone());
            assert_eq!(CodexCodec.concat(&[b.clone(), b]).unwrap(), t.repeat(2));
        }
        // Bytes that are not UTF-8 are kept as written too.
        let c = CodexCodec.validate(b"\xff\n").unwrap();
        assert_eq!(c.kept.len(), 1, "{:?}", c.kept);
    }

    #[test]
    fn a_last_line_without_its_newline_is_read_and_the_next_delta_starts_a_line() {
        let cut = Bytes::from(format!("{USER}\n{USER}"));
        let c = kept(std::str::from_utf8(&cut).unwrap());
        assert_eq!(c.counts.messages, Some(2));
        assert!(
            c.kept[0].contains("a last line without a newline")
                && c.kept[0].ends_with("read as its record"),
            "{:?}",
            c.kept
        );
        let next = Bytes::from(format!("{USER}\n"));
        let joined = CodexCodec.concat(&[cut, next]).unwrap();
        assert_eq!(joined, format!("{USER}\n{USER}\n{USER}\n"));
    }

    #[test]
    fn an_older_rollout_of_bare_items_reads_too() {
        let old = [
            r#"{"id":"5973b6c0-94b8-487b-a530-2aeb6098ae0e","timestamp":"2025-07-14T10:12:03.104Z","instructions":null}"#,
            r#"{"record_type":"state"}"#,
            r#"{"type":"message","id":null,"role":"user","content":[{"type":"input_text","text":"List the files."}]}"#,
            r#"{"type":"function_call","id":"fc_1","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}"#,
            r#"{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"Cargo.toml\\nsrc\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}"#,
            r#"{"record_type":"state"}"#,
            r#"{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Cargo.toml and src."}]}"#,
        ]
        .map(|l| format!("{l}\n"))
        .concat();
        let c = kept(&old);
        assert!(c.kept.is_empty(), "{:?}", c.kept);
        assert!(c.open_results.is_empty());
        let conv = CodexCodec.to_canonical(old.as_bytes()).unwrap();
        let roles: Vec<Role> = conv.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::User, Role::Assistant]
        );
        assert_eq!(conv.messages[1].origin, 3, "line 4");
    }

    #[test]
    fn an_output_whose_call_is_elsewhere_is_the_chains_to_judge() {
        let t = r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_9","output":"ok"}}"#;
        let c = kept(&format!("{USER}\n{t}\n"));
        assert_eq!(c.open_results.len(), 1);
        assert_eq!(c.open_results[0].tool_use_id, "call_9");
        assert!(
            c.open_results[0].at.contains("(line 2)"),
            "{:?}",
            c.open_results
        );
    }

    #[test]
    fn a_compaction_is_what_codex_writes_and_reads_as_its_summary() {
        let at = DateTime::parse_from_rfc3339("2026-11-21T14:05:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let d = CodexCodec
            .compaction_delta("fixed divide", b"", at)
            .unwrap();
        let v: Value = serde_json::from_slice(&d).unwrap();
        assert_eq!(v["type"], "compacted");
        assert_eq!(v["timestamp"], "2026-11-21T14:05:00.000Z");
        let conv = CodexCodec.to_canonical(&d).unwrap();
        assert_eq!(conv.messages.len(), 1);
        assert_eq!(conv.messages[0].role, Role::User);
        assert!(
            matches!(&conv.messages[0].content[0], Block::Text { text } if text.ends_with("fixed divide"))
        );
    }
}

#[cfg(test)]
mod segment_time {
    use super::*;

    #[test]
    fn a_segments_time_is_its_newest_records() {
        // A record written late with an earlier time (a clock step back)
        // does not make the turn older.
        let rollout = concat!(
            r#"{"timestamp":"2026-01-01T00:00:05Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
            "\n",
            r#"{"timestamp":"2026-01-01T00:00:03Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}}"#,
            "\n",
        );
        let segs = codex_segments(rollout.as_bytes()).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].timestamp.as_deref(), Some("2026-01-01T00:00:05Z"));
    }

    /// A `compacted` record ends the turn before it and starts a
    /// compaction segment (what `compaction_delta` writes), which the next
    /// user message ends, as Claude Code's `compact_boundary` does.
    #[test]
    fn a_compacted_record_starts_a_compaction_segment() {
        let user = |t: &str| {
            format!(
                r#"{{"timestamp":"{t}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"hi"}}]}}}}"#
            )
        };
        let model = |t: &str| {
            format!(
                r#"{{"timestamp":"{t}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"hello"}}]}}}}"#
            )
        };
        let compacted = r#"{"timestamp":"2026-01-01T00:00:03Z","type":"compacted","payload":{"message":"the summary"}}"#;
        let context =
            r#"{"timestamp":"2026-01-01T00:00:04Z","type":"turn_context","payload":{"cwd":"/w"}}"#;
        let lines = [
            user("2026-01-01T00:00:01Z"),
            model("2026-01-01T00:00:02Z"),
            compacted.to_owned(),
            context.to_owned(),
            user("2026-01-01T00:00:05Z"),
            model("2026-01-01T00:00:06Z"),
        ];
        let rollout: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let segs = codex_segments(rollout.as_bytes()).unwrap();
        let kinds: Vec<_> = segs.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SegmentKind::Delta,
                SegmentKind::Compaction,
                SegmentKind::Delta
            ]
        );
        let text = |i: usize| &rollout[segs[i].range.clone()];
        assert!(text(1).starts_with(compacted) && text(1).ends_with(&format!("{context}\n")));
        assert_eq!(segs[1].timestamp.as_deref(), Some("2026-01-01T00:00:04Z"));
        assert_eq!(segs.last().unwrap().range.end, rollout.len());
    }
}
