//! Format tests across codecs: every pair of formats translated both ways
//! on one rich conversation, CBOR merge, the Claude Code import/export round
//! trip through the service, concatenation properties per format, and
//! arbitrary bytes into every decoder.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::canonical::{self, Block, Conversation, ImageSource, Message, Role};
use super::translate::{FidelityChangeKind, Part, Tier, translate};
use super::*;
use crate::clock::ManualClock;
use crate::service::{Service, Stop};
use crate::store::Stores;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::wire::CheckpointRequest;
use crate::{CommitType, TenantId};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

const STRUCTURED: [&str; 8] = [
    "claude-code-v1",
    "bureau-agent-v1",
    "bureau-agent-v2",
    "anthropic-messages-v1",
    "openai-chat-v1",
    "openai-responses-v1",
    "codex-rollout-v1",
    "gemini-cli-v1",
];

/// The formats that are logs of JSON lines, concatenated by byte append.
const LINES: [&str; 3] = ["claude-code-v1", "codex-rollout-v1", "gemini-cli-v1"];

fn at(role: Role, content: Vec<Block>, ts: &str) -> Message {
    Message {
        role,
        content,
        timestamp: Some(ts.to_owned()),
        origin: 0,
    }
}

/// Text, an image, thinking with a signature, two parallel tool calls, one
/// result an error, a system prompt.
fn reference() -> Conversation {
    Conversation {
        messages: vec![
            at(
                Role::System,
                vec![Block::text("You are a careful coding agent.")],
                "2026-11-22T10:00:00Z",
            ),
            at(
                Role::User,
                vec![
                    Block::text("What do config.toml and data.bin hold? Screenshot attached."),
                    Block::Image {
                        source: ImageSource::Base64 {
                            media_type: "image/png".into(),
                            data: PNG.into(),
                        },
                    },
                ],
                "2026-11-22T10:00:01Z",
            ),
            at(
                Role::Assistant,
                vec![
                    Block::Thinking {
                        thinking: "Read both files at once.".into(),
                        signature: Some("sig-EqQBCkgIBxAB".into()),
                    },
                    Block::text("Reading both files."),
                    Block::ToolUse {
                        id: "toolu_1".into(),
                        name: "Read".into(),
                        input: json!({"path": "config.toml"}),
                    },
                    Block::ToolUse {
                        id: "toolu_2".into(),
                        name: "Read".into(),
                        input: json!({"path": "data.bin", "limit": 10}),
                    },
                ],
                "2026-11-22T10:00:02Z",
            ),
            at(
                Role::User,
                vec![
                    Block::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: vec![Block::text("name = \"demo\"")],
                        is_error: false,
                    },
                    Block::ToolResult {
                        tool_use_id: "toolu_2".into(),
                        content: vec![Block::text("permission denied")],
                        is_error: true,
                    },
                ],
                "2026-11-22T10:00:03Z",
            ),
            at(
                Role::Assistant,
                vec![Block::text(
                    "config.toml names the project demo; data.bin is unreadable.",
                )],
                "2026-11-22T10:00:04Z",
            ),
            at(
                Role::User,
                vec![Block::text("Thanks — that's all.")],
                "2026-11-22T10:00:05Z",
            ),
        ],
    }
}

fn formats() -> Formats {
    Formats::default()
}

fn fid(s: &str) -> FormatId {
    s.parse().unwrap()
}

fn both(a: Carries, b: Carries) -> Carries {
    Carries {
        system: a.system && b.system,
        thinking: a.thinking && b.thinking,
        tool_errors: a.tool_errors && b.tool_errors,
    }
}

/// CBOR as JSON for snapshots (byte strings as base64 text).
fn cbor_json(v: ciborium::Value) -> Value {
    use ciborium::Value as C;
    match v {
        C::Integer(i) => json!(i128::from(i)),
        C::Bytes(b) => json!({"bytes": base64::engine::general_purpose::STANDARD.encode(b)}),
        C::Float(f) => json!(f),
        C::Text(t) => json!(t),
        C::Bool(b) => json!(b),
        C::Null => Value::Null,
        C::Array(a) => Value::Array(a.into_iter().map(cbor_json).collect()),
        C::Map(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k.as_text().unwrap_or("?").to_owned(), cbor_json(v)))
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    }
}

/// A format's bytes as JSON for snapshots.
fn render(format: &str, bytes: &[u8]) -> Value {
    match format {
        f if LINES.contains(&f) => Value::Array(
            bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect(),
        ),
        "bureau-agent-v1" | "bureau-agent-v2" => {
            cbor_json(ciborium::from_reader::<ciborium::Value, _>(bytes).unwrap())
        }
        _ => serde_json::from_slice(bytes).unwrap(),
    }
}

fn tool_results(conv: &Conversation) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for b in conv.messages.iter().flat_map(|m| &m.content) {
        if let Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = b
        {
            let text: String = content
                .iter()
                .map(|c| match c {
                    Block::Text { text } => text.as_str(),
                    _ => "",
                })
                .collect();
            out.push((tool_use_id.clone(), text, *is_error));
        }
    }
    out
}

/// The ids of the tool calls of `conv`, in order.
fn tool_use_ids(conv: &Conversation) -> Vec<&str> {
    conv.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// The text blocks of `role`'s messages in `conv`, in order.
fn texts_of(conv: &Conversation, role: Role) -> Vec<&str> {
    conv.messages
        .iter()
        .filter(|m| m.role == role)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_pair_of_formats_translates_both_ways_keeping_what_must_survive() {
    let f = formats();
    let reference = reference();
    let mut tiers = String::new();
    let mut outputs = Vec::new();
    for from in STRUCTURED {
        let src = f.codec(&fid(from));
        let enc = src.encode_canonical(&reference).unwrap();
        assert!(enc.lost.is_empty(), "{from} loses {:?}", enc.lost);
        assert!(
            src.validate(&enc.bytes).is_ok(),
            "{from} encodes what it validates"
        );
        for to in STRUCTURED {
            if to == from {
                continue;
            }
            let target = f.codec(&fid(to));
            let part = Part {
                origin: "commit ctx-test".into(),
                format: fid(from),
                bytes: enc.bytes.clone(),
            };
            let out = translate(&f, vec![part], &fid(to)).unwrap();
            tiers.push_str(&format!("{from:>22} -> {to:<22} {}\n", out.tier.as_str()));
            outputs.push(json!({"from": from, "to": to, "tier": out.tier.as_str(), "output": render(to, &out.bytes)}));
            target
                .validate(&out.bytes)
                .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
            let got = target.to_canonical(&out.bytes).unwrap();
            let expected_tier = if src.runtime() == target.runtime() {
                Tier::FieldLevel
            } else {
                Tier::CrossRuntime
            };
            assert_eq!(out.tier, expected_tier, "{from} -> {to}: {}", out.note);
            // Everything both formats carry survives, exactly.
            let keep = both(src.carries(), target.carries());
            assert_eq!(
                canonical::normalize(&got, keep),
                canonical::normalize(&reference, keep),
                "{from} -> {to}"
            );
            // Spelled out: parallel tool calls with their ids, names and
            // arguments, each paired with its result, the error kept.
            let uses: Vec<(String, String, Value)> = got
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        Some((id.clone(), name.clone(), input.clone()))
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(uses.len(), 2, "{from} -> {to}");
            assert_eq!(
                uses[1],
                (
                    "toolu_2".into(),
                    "Read".into(),
                    json!({"path": "data.bin", "limit": 10})
                )
            );
            let results = tool_results(&got);
            assert_eq!(
                results[0],
                ("toolu_1".into(), "name = \"demo\"".into(), false)
            );
            if keep.tool_errors {
                assert_eq!(
                    results[1],
                    ("toolu_2".into(), "permission denied".into(), true)
                );
            } else {
                assert_eq!(
                    results[1],
                    ("toolu_2".into(), "Error: permission denied".into(), false)
                );
            }
            let image = got.messages.iter().flat_map(|m| &m.content).any(|b| {
                matches!(b, Block::Image { source: ImageSource::Base64 { media_type, data } } if media_type == "image/png" && data == PNG)
            });
            assert!(image, "{from} -> {to}: the image survives");
            let signature = got.messages.iter().flat_map(|m| &m.content).any(|b| {
                matches!(b, Block::Thinking { signature: Some(s), .. } if s == "sig-EqQBCkgIBxAB")
            });
            assert_eq!(
                signature, keep.thinking,
                "{from} -> {to}: thinking and its signature"
            );
            if keep.system {
                assert_eq!(
                    got.messages[0].role,
                    Role::System,
                    "{from} -> {to}: system prompt first"
                );
            }
        }
    }
    insta::assert_snapshot!("translation_tiers", tiers);
    insta::assert_json_snapshot!("translations", outputs);
}

/// A Claude Code transcript with three tool pairs and, between a call and
/// its result, the result of a call that is not in it (a rewind, a
/// compaction or an imported fragment): line 6.
fn transcript_with_an_orphan() -> String {
    let user = |uuid: &str, content: Value| {
        json!({"type": "user", "uuid": uuid, "timestamp": "2026-01-01T00:00:00Z",
               "message": {"role": "user", "content": content}})
    };
    let assistant = |uuid: &str, id: &str, content: Value| {
        json!({"type": "assistant", "uuid": uuid, "timestamp": "2026-01-01T00:00:01Z",
               "message": {"id": id, "role": "assistant", "content": content}})
    };
    let call = |id: &str, cmd: &str| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": cmd}});
    let result =
        |id: &str, out: &str| json!({"type": "tool_result", "tool_use_id": id, "content": out});
    let lines = [
        user("u1", json!("How big is the repo, and what changed?")),
        assistant("u2", "msg_1", json!([call("toolu_1", "du -sh .")])),
        user("u3", json!([result("toolu_1", "12M\t.")])),
        assistant(
            "u4",
            "msg_2",
            json!([{"type": "text", "text": "Now the log."}, call("toolu_2", "git log -1")]),
        ),
        user(
            "u5",
            json!([{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "42 rows", "is_error": false}]),
        ),
        user("u6", json!([result("toolu_2", "commit abc")])),
        assistant("u7", "msg_3", json!([call("toolu_3", "git status")])),
        user("u8", json!([result("toolu_3", "clean")])),
        assistant(
            "u9",
            "msg_4",
            json!([{"type": "text", "text": "12M, last commit abc, clean."}]),
        ),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn an_orphan_tool_result_is_carried_as_text_and_every_pair_stays_native() {
    let f = formats();
    let transcript = transcript_with_an_orphan();
    let part = Part {
        origin: "commit ctx-x".into(),
        format: fid("claude-code-v1"),
        bytes: Bytes::from(transcript),
    };
    for to in STRUCTURED.into_iter().filter(|t| *t != "claude-code-v1") {
        let out = translate(&f, vec![part.clone()], &fid(to)).unwrap();
        assert_eq!(out.tier, Tier::CrossRuntime, "{to}: {}", out.note);
        let got = f.codec(&fid(to)).to_canonical(&out.bytes).unwrap();
        // Every pair is native tool blocks, in order.
        let results = tool_results(&got);
        let paired: Vec<_> = results
            .iter()
            .filter(|r| r.0 != "toolu_gone")
            .map(|r| (r.0.as_str(), r.1.as_str()))
            .collect();
        assert_eq!(
            paired,
            [
                ("toolu_1", "12M\t."),
                ("toolu_2", "commit abc"),
                ("toolu_3", "clean")
            ],
            "{to}"
        );
        assert_eq!(
            tool_use_ids(&got),
            ["toolu_1", "toolu_2", "toolu_3"],
            "{to}"
        );
        let fidelity = out.fidelity.expect("a cross-runtime translation reports");
        assert_eq!(fidelity.dropped, 0, "{to}: {fidelity:?}");
        if to.starts_with("bureau-agent") {
            // A bureau agent's message log holds it as it was.
            assert!(results.iter().any(|r| r.0 == "toolu_gone"), "{to}");
            assert_eq!((fidelity.kept, fidelity.converted), (9, 0), "{to}");
            assert!(fidelity.changes.is_empty(), "{to}: {fidelity:?}");
            continue;
        }
        // An API's array: the orphan is text saying what it is, after the
        // result of the turn's call (the API takes text only after them).
        assert!(
            got.open_results().is_empty(),
            "{to}: {:?}",
            got.open_results()
        );
        let texts = texts_of(&got, Role::User);
        let orphan = texts
            .iter()
            .find(|t| t.contains("toolu_gone"))
            .unwrap_or_else(|| panic!("{to}: no text names the orphan: {texts:?}"));
        assert!(
            orphan.contains("whose call is not in this context") && orphan.contains("42 rows"),
            "{to}: {orphan}"
        );
        assert_eq!(
            (fidelity.kept, fidelity.converted, fidelity.dropped),
            (8, 1, 0),
            "{to}: {fidelity:?}"
        );
        assert_eq!(fidelity.changes.len(), 1, "{to}: {fidelity:?}");
        let change = &fidelity.changes[0];
        assert_eq!(change.kind, FidelityChangeKind::Converted);
        assert_eq!(change.message, 4);
        assert_eq!(change.at, "commit ctx-x, line 5");
        assert_eq!(change.tool_use_id.as_deref(), Some("toolu_gone"));
        assert!(
            change.reason.contains("not in this context"),
            "{}",
            change.reason
        );
    }
}

#[test]
fn a_lone_orphan_is_text_and_the_rest_stays_native() {
    let f = formats();
    // A tool result whose call is outside the context (cut off by a
    // compaction): no Messages API or Chat Completions array can hold it,
    // so it is text saying what it is; the reply after it stays a message.
    let conv = Conversation {
        messages: vec![
            Message::new(
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: "toolu_gone".into(),
                    content: vec![Block::text("42 rows")],
                    is_error: false,
                }],
            ),
            Message::new(
                Role::Assistant,
                vec![Block::text("The query returned 42 rows.")],
            ),
        ],
    };
    let bytes = BureauV1Codec.encode_canonical(&conv).unwrap().bytes;
    for to in [
        "anthropic-messages-v1",
        "openai-chat-v1",
        "openai-responses-v1",
        "claude-code-v1",
    ] {
        let out = translate(
            &f,
            vec![Part {
                origin: "commit ctx-x".into(),
                format: fid("bureau-agent-v1"),
                bytes: bytes.clone(),
            }],
            &fid(to),
        )
        .unwrap();
        assert_eq!(out.tier, Tier::CrossRuntime, "{to}: {}", out.note);
        let got = f.codec(&fid(to)).to_canonical(&out.bytes).unwrap();
        assert_eq!(got.messages.len(), 2, "{to}");
        assert_eq!(
            got.messages[0].content,
            [Block::text(
                "[ctx: the result of tool call toolu_gone, whose call is not in this context; \
                 it returned:]\n42 rows"
            )],
            "{to}"
        );
        assert_eq!(
            got.messages[1].content,
            [Block::text("The query returned 42 rows.")]
        );
        let fidelity = out.fidelity.unwrap();
        assert_eq!((fidelity.kept, fidelity.converted), (1, 1), "{to}");
        assert_eq!(fidelity.changes[0].at, "commit ctx-x, index 0");
    }
}

#[test]
fn the_fidelity_report_names_what_the_target_does_not_carry_and_stays_bounded() {
    let f = formats();
    let part = |format: &str, bytes: Bytes| Part {
        origin: "commit ctx-r".into(),
        format: fid(format),
        bytes,
    };
    let reference = part(
        "anthropic-messages-v1",
        AnthropicCodec.encode_canonical(&reference()).unwrap().bytes,
    );
    let report = |to: &str| {
        let out = translate(&f, vec![reference.clone()], &fid(to)).unwrap();
        assert_eq!(out.tier, Tier::CrossRuntime, "{to}: {}", out.note);
        let fidelity = out.fidelity.unwrap();
        let changes: Vec<_> = fidelity
            .changes
            .iter()
            .map(|c| (c.kind, c.message, c.at.as_str(), c.tool_use_id.as_deref()))
            .collect();
        (
            (fidelity.kept, fidelity.converted, fidelity.dropped),
            format!("{changes:?}"),
            fidelity,
        )
    };
    // OpenAI chat holds no thinking and no error flag.
    let (counts, changes, fidelity) = report("openai-chat-v1");
    assert_eq!(counts, (4, 2, 0));
    assert_eq!(
        changes,
        r#"[(Converted, 2, "commit ctx-r, index 2", None), (Converted, 3, "commit ctx-r, index 3", Some("toolu_2"))]"#
    );
    assert!(
        fidelity.changes[0]
            .reason
            .contains("does not carry thinking")
    );
    assert!(fidelity.changes[1].reason.contains("after \"Error: \""));
    // A transcript holds no system prompt: Claude Code supplies its own.
    let (counts, changes, fidelity) = report("claude-code-v1");
    assert_eq!(counts, (5, 0, 1));
    assert_eq!(changes, r#"[(Dropped, 0, "commit ctx-r, index 0", None)]"#);
    assert!(fidelity.changes[0].reason.contains("system prompt"));
    // Everything carried: counted, nothing listed.
    let (counts, changes, fidelity) = report("bureau-agent-v2");
    assert_eq!((counts, changes.as_str()), ((6, 0, 0), "[]"));
    assert_eq!(fidelity.note, "");

    // Forty results of calls cut off by a compaction, then a call the
    // user interrupted and its result two turns later: every one counted
    // (the call and its late result both become text), 32 listed.
    let result = |id: &str| Block::ToolResult {
        tool_use_id: id.into(),
        content: vec![Block::text("ok")],
        is_error: false,
    };
    let mut messages: Vec<Message> = (0..40)
        .map(|i| Message::new(Role::User, vec![result(&format!("toolu_gone_{i}"))]))
        .collect();
    messages.extend([
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: "toolu_late".into(),
                name: "Bash".into(),
                input: json!({}),
            }],
        ),
        Message::new(Role::User, vec![Block::text("never mind")]),
        Message::new(Role::Assistant, vec![Block::text("ok")]),
        Message::new(Role::User, vec![result("toolu_late")]),
    ]);
    let conv = Conversation { messages };
    let bytes = BureauV2Codec.encode_canonical(&conv).unwrap().bytes;
    let out = translate(
        &f,
        vec![part("bureau-agent-v2", bytes)],
        &fid("openai-chat-v1"),
    )
    .unwrap();
    assert_eq!(out.tier, Tier::CrossRuntime, "{}", out.note);
    let fidelity = out.fidelity.unwrap();
    assert_eq!(
        (fidelity.kept, fidelity.converted, fidelity.dropped),
        (2, 42, 0)
    );
    assert_eq!(
        (fidelity.changes.len(), fidelity.unlisted),
        (translate::MAX_CHANGES, 10)
    );
    let got = OpenAiCodec.to_canonical(&out.bytes).unwrap();
    let Some(Block::Text { text }) = got.messages.last().and_then(|m| m.content.first()) else {
        panic!("the late result is text: {got:?}")
    };
    assert_eq!(
        text,
        "[ctx: the result of tool call toolu_late, which does not answer the turn just before it; it returned:]\nok"
    );
}

#[test]
fn no_faithful_mapping_falls_back_to_a_narrative() {
    let f = formats();
    // An image inside a tool result cannot go into OpenAI's tool messages.
    let mut r = reference();
    r.messages[3].content[0] = Block::ToolResult {
        tool_use_id: "toolu_1".into(),
        content: vec![Block::Image {
            source: ImageSource::Url {
                url: "https://example.invalid/x.png".into(),
            },
        }],
        is_error: false,
    };
    let bytes = AnthropicCodec.encode_canonical(&r).unwrap().bytes;
    let out = translate(
        &f,
        vec![Part {
            origin: "c".into(),
            format: fid("anthropic-messages-v1"),
            bytes,
        }],
        &fid("openai-chat-v1"),
    )
    .unwrap();
    assert_eq!(out.tier, Tier::Narrative);
    assert!(out.note.contains("holds more than text"), "{}", out.note);
    let got = OpenAiCodec.to_canonical(&out.bytes).unwrap();
    assert_eq!(got.messages.len(), 1);
    let Block::Text { text } = &got.messages[0].content[0] else {
        panic!("a narrative is text")
    };
    assert!(text.contains("What the previous session knew"));
    assert!(
        text.contains("Called tool `Read` (call toolu_2) with arguments"),
        "{text}"
    );
    assert!(text.contains("failed:\n\npermission denied"), "{text}");
    assert!(text.contains("[image at https://example.invalid/x.png]"));
    let fidelity = out.fidelity.unwrap();
    assert_eq!(
        (fidelity.kept, fidelity.converted, fidelity.dropped),
        (0, 6, 0)
    );
    assert_eq!(fidelity.note, out.note);
    // A content part of one API has no place in another API's messages.
    let audio = json!([{"role": "user", "content": [
        {"type": "text", "text": "Transcribe this."},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    ]}]);
    let part = Part {
        origin: "c".into(),
        format: fid("openai-chat-v1"),
        bytes: Bytes::from(audio.to_string()),
    };
    let out = translate(&f, vec![part.clone()], &fid("anthropic-messages-v1")).unwrap();
    assert_eq!(out.tier, Tier::Narrative);
    assert!(
        out.note.contains("a block of the openai API"),
        "{}",
        out.note
    );
    // ... while a mixed chain back into OpenAI keeps it as it was.
    let other = Part {
        origin: "d".into(),
        format: fid("anthropic-messages-v1"),
        bytes: Bytes::from(json!([{"role": "assistant", "content": "Done."}]).to_string()),
    };
    let out = translate(&f, vec![part, other], &fid("openai-chat-v1")).unwrap();
    assert_eq!(out.tier, Tier::CrossRuntime, "{}", out.note);
    let v: Value = serde_json::from_slice(&out.bytes).unwrap();
    assert_eq!(v[0]["content"][1]["type"], "input_audio");
}

#[test]
fn unknown_formats_are_handed_over_raw_with_a_description() {
    let f = formats();
    let parts = [
        Part {
            origin: "commit ctx-a".into(),
            format: fid("gemini-contents-v3"),
            bytes: Bytes::from_static(b"{\"parts\":[{\"text\":\"hi\"}]}"),
        },
        Part {
            origin: "commit ctx-b".into(),
            format: fid("raw"),
            bytes: Bytes::from_static(b"\xff\x00binary"),
        },
    ];
    let out = translate(&f, parts.to_vec(), &fid("anthropic-messages-v1")).unwrap();
    assert_eq!(out.tier, Tier::Raw);
    let conv = AnthropicCodec.to_canonical(&out.bytes).unwrap();
    let texts: Vec<&str> = conv
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(texts[0].contains("gemini-contents-v3 (a format ctx has no codec for"));
    assert!(texts[0].ends_with("{\"parts\":[{\"text\":\"hi\"}]}"));
    assert!(texts[1].contains("base64-encoded"));
    assert!(
        texts[1].ends_with(&base64::engine::general_purpose::STANDARD.encode(b"\xff\x00binary"))
    );
    // A target ctx cannot write: the bytes as stored, each described.
    let out = translate(&f, parts.to_vec(), &fid("gemini-contents-v3")).unwrap();
    assert_eq!(out.tier, Tier::Raw);
    let text = String::from_utf8_lossy(&out.bytes);
    assert!(text.contains("--- ctx part 1 of 2: commit ctx-a"));
    assert!(out.bytes.windows(8).any(|w| w == b"\xff\x00binary"));
}

/// Issue 46: a mistyped target (`openai-chat` for `openai-chat-v1`) that
/// no part of the context is in is refused naming `format` and the formats
/// this server knows, not answered with the raw fallback; a target no codec
/// claims that the context itself is in still reads as stored (above).
#[test]
fn an_unknown_target_no_part_is_in_is_refused_naming_the_known_formats() {
    let f = Formats::default();
    let parts = [Part {
        origin: "commit ctx-a".into(),
        format: fid("raw"),
        bytes: Bytes::from_static(b"user: hi\n"),
    }];
    let e = translate(&f, parts.to_vec(), &fid("openai-chat")).unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::Invalid, "{e:?}");
    assert_eq!(e.field.as_deref(), Some("format"), "{e:?}");
    assert!(e.message.contains("openai-chat-v1"), "{}", e.message);
    assert!(e.message.contains("claude-code-v1"), "{}", e.message);
    // Raw, which every server knows, still takes any context.
    assert_eq!(
        translate(&f, parts.to_vec(), &fid("raw")).unwrap().tier,
        Tier::Native
    );
}

#[test]
fn cbor_deltas_merge_into_one_array() {
    let r = reference();
    let first = Conversation {
        messages: r.messages[..3].to_vec(),
    };
    let second = Conversation {
        messages: r.messages[3..].to_vec(),
    };
    let a = BureauV1Codec.encode_canonical(&first).unwrap().bytes;
    let b = BureauV1Codec.encode_canonical(&second).unwrap().bytes;
    let merged = BureauV1Codec.concat(&[a, b]).unwrap();
    assert_eq!(merged, BureauV1Codec.encode_canonical(&r).unwrap().bytes);
    assert_eq!(BureauV1Codec.to_canonical(&merged).unwrap(), r);
    insta::assert_json_snapshot!("cbor_merge", render("bureau-agent-v1", &merged));
}

fn service() -> (Service, TenantId) {
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
    (Service::new(stores, clock), "acme".parse().unwrap())
}

fn request(
    format: &str,
    delta: &[u8],
    parent: Option<crate::CommitId>,
    kind: CommitType,
    n: i64,
) -> CheckpointRequest {
    CheckpointRequest {
        parent,
        commit_type: kind.into(),
        delta: None,
        delta_base64: Some(
            base64::engine::general_purpose::STANDARD
                .encode(delta)
                .into(),
        ),
        created_at: Some(crate::store::conformance::t(n)),
        ..CheckpointRequest::new("p".parse().unwrap(), "t", fid(format), "")
    }
}

/// Checkpoints `req` as `POST /v1/commits` does.
async fn checkpoint(
    svc: &Service,
    tenant: &TenantId,
    req: CheckpointRequest,
) -> crate::Result<(crate::Commit, bool)> {
    let done = crate::api::submit_checkpoint(svc, tenant, req).await?;
    Ok((done.commit, done.created))
}

async fn materialized(
    svc: &Service,
    tenant: &TenantId,
    id: &crate::CommitId,
    stop: Stop,
    format: Option<&str>,
) -> (Bytes, String) {
    let m = svc
        .materialize(tenant, id, stop, format.map(fid))
        .await
        .unwrap()
        .result;
    (
        svc.download_artifact(tenant, &m.artifact_ref)
            .await
            .unwrap(),
        m.tier.to_string(),
    )
}

const TRANSCRIPT: &[u8] = include_bytes!("../../../tests/data/claude-code-session.jsonl");

#[tokio::test]
async fn claude_code_import_then_export_is_byte_identical() {
    let (svc, tenant) = service();
    let segs = segments(TRANSCRIPT).unwrap();
    let mut parent = None;
    let mut ids = Vec::new();
    let mut table = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        let kind = match s.kind {
            SegmentKind::Compaction => CommitType::Compaction,
            SegmentKind::Delta => CommitType::Delta,
        };
        let req = request(
            "claude-code-v1",
            &TRANSCRIPT[s.range.clone()],
            parent,
            kind,
            i as i64,
        );
        let (c, _) = checkpoint(&svc, &tenant, req).await.unwrap();
        let first = TRANSCRIPT[s.range.clone()]
            .split(|&b| b == b'\n')
            .next()
            .unwrap();
        let first: Value = serde_json::from_slice(first).unwrap();
        table.push(json!({
            "kind": c.commit_type.as_str(),
            "bytes": s.range.len(),
            "starts_with": first["type"],
            "messages": c.message_count,
            "tokens": c.token_count,
        }));
        parent = Some(c.id);
        ids.push(c.id);
    }
    insta::assert_json_snapshot!("claude_code_import", table);
    // After a named ancestor: the rest of the transcript, compactions kept.
    let (after, _) = materialized(
        &svc,
        &tenant,
        parent.as_ref().unwrap(),
        Stop::After(ids[0]),
        None,
    )
    .await;
    assert_eq!(&after[..], &TRANSCRIPT[segs[1].range.start..]);
    let tip = parent.unwrap();
    let (root, tier) = materialized(&svc, &tenant, &tip, Stop::Root, None).await;
    assert_eq!(tier, "native");
    assert_eq!(
        &root[..],
        TRANSCRIPT,
        "root materialization is the original transcript"
    );
    // Default: from the latest compaction (its boundary and summary) on.
    let (latest, _) = materialized(&svc, &tenant, &tip, Stop::Compaction, None).await;
    let last_boundary = segs
        .iter()
        .rev()
        .find(|s| s.kind == SegmentKind::Compaction)
        .unwrap();
    assert_eq!(&latest[..], &TRANSCRIPT[last_boundary.range.start..]);
    let first: Value =
        serde_json::from_slice(latest.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(
        (first["type"].as_str(), first["subtype"].as_str()),
        (Some("system"), Some("compact_boundary"))
    );
    // Translated from the whole history: every tool call kept, paired.
    let (openai, tier) =
        materialized(&svc, &tenant, &tip, Stop::Root, Some("openai-chat-v1")).await;
    assert_eq!(tier, "cross-runtime");
    let conv = OpenAiCodec.to_canonical(&openai).unwrap();
    assert_eq!(
        tool_results(&conv)
            .iter()
            .map(|r| r.0.as_str())
            .collect::<Vec<_>>(),
        ["toolu_01Read", "toolu_01Grep", "toolu_01Edit"]
    );
    assert!(tool_results(&conv)[1].1.starts_with("Error: ripgrep"));
}

#[tokio::test]
async fn a_chain_may_mix_formats_and_is_translated_whole() {
    let (svc, tenant) = service();
    // An Anthropic-format turn ending in two parallel tool calls ...
    let calls = json!([
        {"role": "user", "content": "Sizes of a.txt and b.txt?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Both at once.", "signature": "sig-1"},
            {"type": "tool_use", "id": "call_a", "name": "stat", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "call_b", "name": "stat", "input": {"path": "b.txt"}}
        ]}
    ]);
    let (c1, _) = checkpoint(
        &svc,
        &tenant,
        request(
            "anthropic-messages-v1",
            calls.to_string().as_bytes(),
            None,
            CommitType::Delta,
            1,
        ),
    )
    .await
    .unwrap();
    // ... answered by an OpenAI-format delta: its tool messages answer the
    // parent's calls, across formats.
    let results = json!([
        {"role": "tool", "tool_call_id": "call_a", "content": "12 bytes"},
        {"role": "tool", "tool_call_id": "call_b", "content": "7 bytes"},
        {"role": "assistant", "content": "a.txt is 12 bytes, b.txt 7."}
    ]);
    let (c2, _) = checkpoint(
        &svc,
        &tenant,
        request(
            "openai-chat-v1",
            results.to_string().as_bytes(),
            Some(c1.id),
            CommitType::Delta,
            2,
        ),
    )
    .await
    .unwrap();
    // A tool message answering nothing the parent left open is refused.
    let stray = json!([{"role": "tool", "tool_call_id": "call_zz", "content": "?"}]);
    let err = checkpoint(
        &svc,
        &tenant,
        request(
            "openai-chat-v1",
            stray.to_string().as_bytes(),
            Some(c2.id),
            CommitType::Delta,
            3,
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("delta_base64"));
    assert!(
        err.message.contains("at index 0") && err.message.contains("call_zz"),
        "{}",
        err.message
    );

    for (to, tier) in [
        ("anthropic-messages-v1", "cross-runtime"),
        ("bureau-agent-v2", "cross-runtime"),
        ("claude-code-v1", "cross-runtime"),
        ("openai-chat-v1", "cross-runtime"),
    ] {
        let (bytes, got_tier) = materialized(&svc, &tenant, &c2.id, Stop::Root, Some(to)).await;
        assert_eq!(got_tier, tier, "{to}");
        let conv = formats().codec(&fid(to)).to_canonical(&bytes).unwrap();
        assert_eq!(
            tool_results(&conv),
            vec![
                ("call_a".to_owned(), "12 bytes".to_owned(), false),
                ("call_b".to_owned(), "7 bytes".to_owned(), false)
            ],
            "{to}"
        );
        // Cached per (commit, stop, target format).
        let m = svc
            .materialize(&tenant, &c2.id, Stop::Root, Some(fid(to)))
            .await
            .unwrap();
        assert!(m.cached);
        assert_eq!(m.result.tier.as_str(), tier);
    }
}

#[tokio::test]
async fn a_runtime_log_with_an_unpaired_tool_result_is_stored_as_written_with_a_warning() {
    let (svc, tenant) = service();
    // A Claude Code transcript resumed after an interrupted tool call: the
    // result of a call the file does not hold.
    let lines = [
        json!({"type": "user", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "42 rows"}]}}),
        json!({"type": "assistant", "uuid": "u2", "timestamp": "2026-01-01T00:00:01Z",
               "message": {"id": "msg_1", "role": "assistant", "content": [
                   {"type": "text", "text": "The query returned 42 rows."}]}}),
    ];
    let transcript: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let done = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request(
            "claude-code-v1",
            transcript.as_bytes(),
            None,
            CommitType::Delta,
            1,
        ),
    )
    .await
    .unwrap();
    assert_eq!(done.warnings.len(), 1, "{:?}", done.warnings);
    assert!(
        done.warnings[0].contains("toolu_gone") && done.warnings[0].contains("line 1"),
        "{:?}",
        done.warnings
    );
    // Byte for byte what the runtime wrote.
    let (native, tier) = materialized(&svc, &tenant, &done.commit.id, Stop::Root, None).await;
    assert_eq!(
        (&native[..], tier.as_str()),
        (transcript.as_bytes(), "native")
    );
    // Repaired only for an API that needs pairing: told by the tier.
    let (api, tier) = materialized(
        &svc,
        &tenant,
        &done.commit.id,
        Stop::Root,
        Some("anthropic-messages-v1"),
    )
    .await;
    assert_eq!(tier, "cross-runtime");
    assert!(
        AnthropicCodec
            .to_canonical(&api)
            .unwrap()
            .open_results()
            .is_empty()
    );
    // The same in a bureau agent's log.
    let conv = ClaudeCodeCodec.to_canonical(transcript.as_bytes()).unwrap();
    let cbor = BureauV2Codec.encode_canonical(&conv).unwrap().bytes;
    let done = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request("bureau-agent-v2", &cbor, None, CommitType::Delta, 2),
    )
    .await
    .unwrap();
    assert_eq!(done.warnings.len(), 1, "{:?}", done.warnings);
    // An API format is refused: no API would accept it.
    let api = AnthropicCodec.encode_canonical(&conv).unwrap().bytes;
    let err = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request("anthropic-messages-v1", &api, None, CommitType::Delta, 3),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("toolu_gone"), "{}", err.message);
}

#[tokio::test]
async fn an_agents_sdk_session_chains_and_translates() {
    let (svc, tenant) = service();
    // One Runner turn: the input, a reasoning item, a function call ...
    let first = json!([
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the tool."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"}
    ]);
    let done = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request(
            "openai-responses-v1",
            first.to_string().as_bytes(),
            None,
            CommitType::Delta,
            1,
        ),
    )
    .await
    .unwrap();
    assert_eq!(done.commit.message_count, 3);
    // ... and the next delta answers it: no warning.
    let second = json!([
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "18C in Paris.", "annotations": []}]}
    ]);
    let next = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request(
            "openai-responses-v1",
            second.to_string().as_bytes(),
            Some(done.commit.id),
            CommitType::Delta,
            2,
        ),
    )
    .await
    .unwrap();
    assert!(next.warnings.is_empty(), "{:?}", next.warnings);
    // Native: the items exactly as written, in order.
    let (native, tier) = materialized(&svc, &tenant, &next.commit.id, Stop::Root, None).await;
    assert_eq!(tier, "native");
    let mut all = first.as_array().unwrap().clone();
    all.extend(second.as_array().unwrap().iter().cloned());
    assert_eq!(
        serde_json::from_slice::<Value>(&native).unwrap(),
        Value::Array(all)
    );
    // Into every other structured format, the call paired with its result.
    for to in &STRUCTURED[..5] {
        let (bytes, tier) =
            materialized(&svc, &tenant, &next.commit.id, Stop::Root, Some(to)).await;
        assert_eq!(tier, "cross-runtime", "{to}");
        let conv = formats().codec(&fid(to)).to_canonical(&bytes).unwrap();
        assert_eq!(
            tool_results(&conv),
            vec![("call_1".to_owned(), "18C".to_owned(), false)],
            "{to}"
        );
    }
    // A malformed item is refused, naming the item and the field.
    let err = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request(
            "openai-responses-v1",
            br#"[{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}]"#,
            Some(next.commit.id),
            CommitType::Delta,
            3,
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("delta_base64"));
    assert!(
        err.message
            .contains("openai-responses-v1 delta: at index 0")
            && err.message.contains("\"arguments\" is not a JSON document"),
        "{}",
        err.message
    );
    // An output whose call is nowhere in the chain is the runtime's own
    // log: stored as written, with a warning.
    let stray = crate::api::submit_checkpoint(
        &svc,
        &tenant,
        request(
            "openai-responses-v1",
            br#"[{"type":"function_call_output","call_id":"call_gone","output":"1"}]"#,
            Some(next.commit.id),
            CommitType::Delta,
            4,
        ),
    )
    .await
    .unwrap();
    assert!(
        stray.warnings.len() == 1 && stray.warnings[0].contains("call_gone"),
        "{:?}",
        stray.warnings
    );
}

const ROLLOUT: &[u8] = include_bytes!("../../../tests/data/codex-rollout.jsonl");
const GEMINI_SESSION: &[u8] = include_bytes!("../../../tests/data/gemini-cli-session.jsonl");

/// `bytes` cut into deltas before each of the 1-based `lines`.
fn cut_before_lines<'a>(bytes: &'a [u8], lines: &[usize]) -> Vec<&'a [u8]> {
    let mut starts = vec![0];
    let mut line = 1;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            line += 1;
            if lines.contains(&line) {
                starts.push(i + 1);
            }
        }
    }
    starts.push(bytes.len());
    starts.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

/// Checkpoints `deltas` as one chain of `format`; the tip.
async fn chain(
    svc: &Service,
    tenant: &TenantId,
    format: &str,
    deltas: &[&[u8]],
) -> crate::CommitId {
    let mut parent = None;
    for (i, d) in deltas.iter().enumerate() {
        let done = crate::api::submit_checkpoint(
            svc,
            tenant,
            request(format, d, parent, CommitType::Delta, i as i64),
        )
        .await
        .unwrap();
        assert!(done.warnings.is_empty(), "{format}: {:?}", done.warnings);
        parent = Some(done.commit.id);
    }
    parent.expect("at least one delta")
}

fn tool_uses(conv: &Conversation) -> Vec<(String, String)> {
    conv.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_codex_rollout_goes_in_and_comes_back_byte_for_byte_and_translates() {
    let (svc, tenant) = service();
    let deltas = cut_before_lines(ROLLOUT, &[10, 17]);
    assert_eq!(deltas.len(), 3);
    let tip = chain(&svc, &tenant, "codex-rollout-v1", &deltas).await;
    let (native, tier) = materialized(&svc, &tenant, &tip, Stop::Root, None).await;
    assert_eq!((&native[..], tier.as_str()), (ROLLOUT, "native"));
    let conv = CodexCodec.to_canonical(ROLLOUT).unwrap();
    let roles: Vec<Role> = conv.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, User as U};
    assert_eq!(roles, [U, U, A, U, A, U, A, U, A, U, A]);
    let uses = [
        ("call_Q1shell".to_owned(), "shell".to_owned()),
        ("call_Q2patch".to_owned(), "apply_patch".to_owned()),
        ("call_Q3test".to_owned(), "local_shell".to_owned()),
    ];
    assert_eq!(tool_uses(&conv), uses);
    // Into every other structured format: each call a native tool use,
    // paired with its result.
    for to in STRUCTURED.iter().filter(|t| **t != "codex-rollout-v1") {
        let (bytes, tier) = materialized(&svc, &tenant, &tip, Stop::Root, Some(to)).await;
        assert_eq!(tier, "cross-runtime", "{to}");
        let got = formats().codec(&fid(to)).to_canonical(&bytes).unwrap();
        assert_eq!(tool_uses(&got), uses, "{to}");
        let results: Vec<String> = tool_results(&got).into_iter().map(|r| r.0).collect();
        assert_eq!(
            results,
            ["call_Q1shell", "call_Q2patch", "call_Q3test"],
            "{to}"
        );
        assert!(got.open_results().is_empty(), "{to}");
    }
    // The reasoning summary is thinking: a format without it says so.
    let out = translate(
        &formats(),
        vec![Part {
            origin: "commit ctx-codex".into(),
            format: fid("codex-rollout-v1"),
            bytes: Bytes::from_static(ROLLOUT),
        }],
        &fid("openai-chat-v1"),
    )
    .unwrap();
    let fidelity = out.fidelity.unwrap();
    assert_eq!(
        (fidelity.kept, fidelity.converted, fidelity.dropped),
        (10, 1, 0),
        "{fidelity:?}"
    );
    assert_eq!(fidelity.changes[0].at, "commit ctx-codex, line 6");
    assert!(fidelity.changes[0].reason.contains("thinking"));
}

#[tokio::test]
async fn a_gemini_session_goes_in_and_comes_back_byte_for_byte_and_translates() {
    let (svc, tenant) = service();
    let deltas = cut_before_lines(GEMINI_SESSION, &[4, 12]);
    assert_eq!(deltas.len(), 3);
    let tip = chain(&svc, &tenant, "gemini-cli-v1", &deltas).await;
    let (native, tier) = materialized(&svc, &tenant, &tip, Stop::Root, None).await;
    assert_eq!((&native[..], tier.as_str()), (GEMINI_SESSION, "native"));
    // As the CLI loads it: the second record of a message replaces the
    // first, the rewound turn is gone, the notice is no message.
    let conv = GeminiCodec.to_canonical(GEMINI_SESSION).unwrap();
    let roles: Vec<Role> = conv.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, User as U};
    assert_eq!(roles, [U, A, U, A, U, A, U, A, U, A]);
    let text = serde_json::to_string(&conv).unwrap();
    assert!(!text.contains("Temporal"), "the rewound turn is gone");
    let results = vec![
        (
            "read_file-1763737206312-0".to_owned(),
            "export function parseDay(s: string): number {\n  return new Date(s).getDay();\n}\n"
                .to_owned(),
            false,
        ),
        (
            "run_shell_command-1763737211874-0".to_owned(),
            "Tool execution for \"Shell\" requires user confirmation, which was declined."
                .to_owned(),
            true,
        ),
        (
            "replace-1763737260015-0".to_owned(),
            "Successfully modified file: /home/dev/app/utils/date.ts (1 replacements).".to_owned(),
            false,
        ),
    ];
    assert_eq!(tool_results(&conv), results);
    for to in STRUCTURED.iter().filter(|t| **t != "gemini-cli-v1") {
        let (bytes, tier) = materialized(&svc, &tenant, &tip, Stop::Root, Some(to)).await;
        assert_eq!(tier, "cross-runtime", "{to}");
        let codec = formats().codec(&fid(to)).clone();
        let got = codec.to_canonical(&bytes).unwrap();
        let ids: Vec<String> = tool_uses(&got).into_iter().map(|u| u.0).collect();
        assert_eq!(ids.len(), 3, "{to}");
        let mut expected = results.clone();
        if !codec.carries().tool_errors {
            expected[1].1.insert_str(0, canonical::ERROR_PREFIX);
            expected[1].2 = false;
        }
        assert_eq!(tool_results(&got), expected, "{to}");
    }
    // What Chat Completions cannot hold is named, message by message.
    let out = translate(
        &formats(),
        vec![Part {
            origin: "commit ctx-gemini".into(),
            format: fid("gemini-cli-v1"),
            bytes: Bytes::from_static(GEMINI_SESSION),
        }],
        &fid("openai-chat-v1"),
    )
    .unwrap();
    let fidelity = out.fidelity.unwrap();
    let changes: Vec<_> = fidelity
        .changes
        .iter()
        .map(|c| (c.message, c.at.as_str(), c.tool_use_id.as_deref()))
        .collect();
    assert_eq!(
        changes,
        [
            (1, "commit ctx-gemini, line 5", None),
            (
                4,
                "commit ctx-gemini, line 6",
                Some("run_shell_command-1763737211874-0")
            ),
            (5, "commit ctx-gemini, line 8", None),
        ]
    );
    assert_eq!(
        (fidelity.kept, fidelity.converted, fidelity.dropped),
        (7, 3, 0)
    );
}

/// The line (from 1) each segment starts at.
fn first_lines(bytes: &[u8], segs: &[Segment]) -> Vec<usize> {
    segs.iter()
        .map(|s| {
            bytes[..s.range.start]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        })
        .collect()
}

#[test]
fn codex_and_gemini_files_cut_into_turns_that_cover_every_byte() {
    let segs = codex_segments(ROLLOUT).unwrap();
    assert_eq!(first_lines(ROLLOUT, &segs), [1, 17]);
    assert_eq!(segs.last().unwrap().range.end, ROLLOUT.len());
    assert_eq!(
        segs[0].session_id.as_deref(),
        Some("0199a3f2-6c1e-7d40-9b1a-3f5e2c8d4a10")
    );
    assert_eq!(
        segs[0].timestamp.as_deref(),
        Some("2026-11-21T14:02:30.216Z")
    );
    assert_eq!(
        segs[1].timestamp.as_deref(),
        Some("2026-11-21T14:03:09.006Z")
    );

    let segs = gemini_segments(GEMINI_SESSION).unwrap();
    assert_eq!(first_lines(GEMINI_SESSION, &segs), [1, 9, 12]);
    assert_eq!(segs[2].range.end, GEMINI_SESSION.len());
    assert_eq!(
        segs[0].session_id.as_deref(),
        Some("8c1f4e2a-3b7d-4e9a-a1c2-5d6e7f8091ab")
    );
    assert_eq!(
        segs[2].timestamp.as_deref(),
        Some("2026-11-21T15:01:02.331Z")
    );
    // Each turn translates on its own as the whole file does.
    let f = formats();
    let parts: Vec<Part> = segs
        .iter()
        .map(|s| Part {
            origin: "c".into(),
            format: fid("gemini-cli-v1"),
            bytes: Bytes::copy_from_slice(&GEMINI_SESSION[s.range.clone()]),
        })
        .collect();
    let whole = Part {
        origin: "c".into(),
        format: fid("gemini-cli-v1"),
        bytes: Bytes::from_static(GEMINI_SESSION),
    };
    let to = fid("anthropic-messages-v1");
    assert_eq!(
        translate(&f, parts, &to).unwrap().bytes,
        translate(&f, vec![whole], &to).unwrap().bytes
    );
    // A rewind into an earlier turn keeps the file one delta.
    let back = [
        r#"{"sessionId":"s","projectHash":"p"}"#,
        r#"{"id":"u1","timestamp":"t1","type":"user","content":"a"}"#,
        r#"{"id":"g1","timestamp":"t2","type":"gemini","content":"b"}"#,
        r#"{"id":"u2","timestamp":"t3","type":"user","content":"c"}"#,
        r#"{"$rewindTo":"u1"}"#,
    ]
    .map(|l| format!("{l}\n"))
    .concat();
    let segs = gemini_segments(back.as_bytes()).unwrap();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].range, 0..back.len());
    assert_eq!(segs[0].timestamp.as_deref(), Some("t3"));
}

mod proptests;

/// A Claude Code transcript whose second call never got its result (the
/// user interrupted it): line 4's tool_use.
fn transcript_with_an_unanswered_call() -> String {
    let lines = [
        json!({"type": "user", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
               "message": {"role": "user", "content": "Run the tests."}}),
        json!({"type": "assistant", "uuid": "u2", "timestamp": "2026-01-01T00:00:01Z",
               "message": {"id": "msg_1", "role": "assistant", "content": [
                   {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cargo build"}}]}}),
        json!({"type": "user", "uuid": "u3", "timestamp": "2026-01-01T00:00:02Z",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Finished"}]}}),
        json!({"type": "assistant", "uuid": "u4", "timestamp": "2026-01-01T00:00:03Z",
               "message": {"id": "msg_2", "role": "assistant", "content": [
                   {"type": "text", "text": "Now the tests."},
                   {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "cargo test"}}]}}),
        json!({"type": "user", "uuid": "u5", "timestamp": "2026-01-01T00:00:04Z",
               "message": {"role": "user", "content": "Stop, just tell me the build result."}}),
        json!({"type": "assistant", "uuid": "u6", "timestamp": "2026-01-01T00:00:05Z",
               "message": {"id": "msg_3", "role": "assistant", "content": [
                   {"type": "text", "text": "The build finished."}]}}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_call_without_its_result_is_carried_as_text_and_every_pair_stays_native() {
    let f = formats();
    let part = Part {
        origin: "commit ctx-y".into(),
        format: fid("claude-code-v1"),
        bytes: Bytes::from(transcript_with_an_unanswered_call()),
    };
    // The formats whose APIs refuse a call without its result; a runtime's
    // log (Claude Code's, a session's) holds it as written.
    for to in ["anthropic-messages-v1", "openai-chat-v1"] {
        let out = translate(&f, vec![part.clone()], &fid(to)).unwrap();
        assert_eq!(out.tier, Tier::CrossRuntime, "{to}: {}", out.note);
        let got = f.codec(&fid(to)).to_canonical(&out.bytes).unwrap();
        let results = tool_results(&got);
        assert_eq!(
            results
                .iter()
                .map(|r| (r.0.as_str(), r.1.as_str()))
                .collect::<Vec<_>>(),
            [("toolu_1", "Finished")],
            "{to}"
        );
        assert_eq!(
            tool_use_ids(&got),
            ["toolu_1"],
            "{to}: the unanswered call is text"
        );
        let texts = texts_of(&got, Role::Assistant);
        let call = texts
            .iter()
            .find(|t| t.contains("toolu_2"))
            .unwrap_or_else(|| panic!("{to}: no text names the call: {texts:?}"));
        assert!(
            call.contains("cargo test") && call.contains("no result"),
            "{to}: {call}"
        );
        let fidelity = out.fidelity.expect("a cross-runtime translation reports");
        assert_eq!(
            (fidelity.kept, fidelity.converted, fidelity.dropped),
            (5, 1, 0),
            "{to}: {fidelity:?}"
        );
        let change = &fidelity.changes[0];
        assert_eq!(change.kind, FidelityChangeKind::Converted);
        assert_eq!(change.message, 3);
        assert_eq!(change.at, "commit ctx-y, line 4");
        assert_eq!(change.tool_use_id.as_deref(), Some("toolu_2"));
        assert!(change.reason.contains("no result"), "{}", change.reason);
    }
}
