//! Tests of the summarizers: the extractive lines pinned on every format,
//! and a build's refusal of a backend it was built without. The
//! model-backed backends run against a fake LLM server on 127.0.0.1 that
//! records what it is sent ([`fake`]): the HTTP backends in [`http`], the
//! Bedrock SDK client in [`bedrock`].

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::config::{SummarizerConfig, SummarizerKind};
use crate::format::canonical::{Block, Message, Role};
use crate::format::segments;

#[cfg(feature = "summarize-bedrock")]
mod bedrock;
#[cfg(any(feature = "summarize-http", feature = "summarize-bedrock"))]
mod fake;
#[cfg(feature = "summarize-http")]
mod http;

// ---------------------------------------------------------------------
// extractive

fn fid(s: &str) -> FormatId {
    s.parse().unwrap()
}

/// Two turns of a coding session: asks, thinking, tool calls (one failing),
/// results and answers.
fn session() -> Conversation {
    let tool = |id: &str, name: &str, input: Value| Block::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    };
    let result = |id: &str, text: &str, is_error: bool| Block::ToolResult {
        tool_use_id: id.into(),
        content: vec![Block::text(text)],
        is_error,
    };
    Conversation {
        messages: vec![
            Message::new(
                Role::User,
                vec![Block::text(
                    "The parser tests fail with `index out of bounds` in src/parser.rs;\n\
                     find the cause and fix it, then run the whole test suite.",
                )],
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Block::Thinking {
                        thinking: "Probably an off-by-one in peek.".into(),
                        signature: Some("sig".into()),
                    },
                    Block::text("Reading the parser."),
                    tool("t1", "Read", json!({"file_path": "src/parser.rs"})),
                    tool("t2", "Grep", json!({"pattern": "i \\+ 1"})),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result("t1", "fn peek(&self) -> u8 { self.buf[self.i + 1] }", false),
                    result("t2", "src/parser.rs:42", false),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![
                    tool("t3", "Edit", json!({"file_path": "src/parser.rs"})),
                    tool("t4", "Bash", json!({"command": "cargo test"})),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result("t3", "ok", false),
                    result("t4", "test result: FAILED. 1 failed", true),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![tool("t5", "Bash", json!({"command": "cargo test"}))],
            ),
            Message::new(Role::User, vec![result("t5", "test result: ok", false)]),
            Message::new(
                Role::Assistant,
                vec![Block::text(
                    "Fixed: `peek` read one past the end of the buffer (parser.rs:42). \
                     It now checks `i + 1 < len()`; all 212 tests pass.",
                )],
            ),
        ],
    }
}

fn compaction_conversation() -> Conversation {
    Conversation {
        messages: vec![Message::new(
            Role::User,
            vec![Block::text(
                "Summary of the work so far: the off-by-one in `peek` is fixed and covered by \
                 a regression test; the lexer's error messages still lack line numbers.",
            )],
        )],
    }
}

fn extract(commit_type: CommitType, format: &str, bytes: &[u8]) -> String {
    let input = SummaryInput::decode(&Formats::default(), commit_type, &fid(format), bytes);
    let line = extractive::line(&input);
    assert!(line.chars().count() <= extractive::MAX_CHARS, "{line}");
    line
}

#[test]
fn extractive_lines_on_every_structured_format() {
    let formats = Formats::default();
    let mut out = String::new();
    for format in [
        "openai-chat-v1",
        "anthropic-messages-v1",
        "claude-code-v1",
        "bureau-agent-v1",
        "bureau-agent-v2",
    ] {
        let codec = formats.codec(&fid(format));
        for (kind, conv) in [
            (CommitType::Delta, session()),
            (CommitType::Compaction, compaction_conversation()),
        ] {
            let bytes = codec.encode_canonical(&conv).unwrap().bytes;
            let input = SummaryInput::decode(&formats, kind, &fid(format), &bytes);
            assert!(
                matches!(input.content, Content::Conversation(_)),
                "{format} decodes"
            );
            out.push_str(&format!(
                "{format} {kind:?}:\n  {}\n",
                extract(kind, format, &bytes)
            ));
        }
    }
    insta::assert_snapshot!("extractive_structured", out);
}

#[test]
fn extractive_lines_on_a_real_claude_code_transcript() {
    let transcript = include_bytes!("../../../tests/data/claude-code-session.jsonl");
    let mut out = String::new();
    for seg in segments(transcript).unwrap() {
        let kind = match seg.kind {
            crate::format::SegmentKind::Delta => CommitType::Delta,
            crate::format::SegmentKind::Compaction => CommitType::Compaction,
        };
        out.push_str(&format!(
            "{kind:?}:\n  {}\n",
            extract(kind, "claude-code-v1", &transcript[seg.range])
        ));
    }
    insta::assert_snapshot!("extractive_claude_code_transcript", out);
}

#[test]
fn extractive_lines_on_raw_and_undecodable_bytes() {
    let long = "word ".repeat(100);
    let cases: Vec<(&str, CommitType, &str, Vec<u8>)> = vec![
        (
            "markdown notes",
            CommitType::Delta,
            "raw",
            b"\n\n# Plan for the migration\n\n- move the tables\n".to_vec(),
        ),
        (
            "punctuation first",
            CommitType::Delta,
            "raw",
            b"---\n```\n  {\n  \"step\": \"deploy\"\n".to_vec(),
        ),
        (
            "a long line",
            CommitType::Delta,
            "raw",
            long.clone().into_bytes(),
        ),
        (
            "multibyte at the cut",
            CommitType::Delta,
            "raw",
            "é".repeat(300).into_bytes(),
        ),
        ("empty", CommitType::Delta, "raw", Vec::new()),
        (
            "binary",
            CommitType::Delta,
            "raw",
            vec![0, 1, 2, 0xff, 0xfe, b'\n', 0x1b],
        ),
        (
            "an unknown format",
            CommitType::Delta,
            "my-agent-v9",
            b"status: all green\n".to_vec(),
        ),
        (
            "openai bytes that do not decode",
            CommitType::Delta,
            "openai-chat-v1",
            b"[{\"role\": \"user\", \"content\": \"half a mess".to_vec(),
        ),
        (
            "a raw compaction",
            CommitType::Compaction,
            "raw",
            b"\n\nThis session is being continued from a previous conversation. \
              Summary: the migration ran; two tables still need indexes.\n"
                .to_vec(),
        ),
    ];
    let mut out = String::new();
    for (what, kind, format, bytes) in cases {
        out.push_str(&format!(
            "{what} ({format}, {kind:?}):\n  {}\n",
            extract(kind, format, &bytes)
        ));
    }
    insta::assert_snapshot!("extractive_raw", out);
}

#[tokio::test]
async fn extractive_is_the_default_and_costs_no_tokens() {
    let s = from_config(&SummarizerConfig::default()).unwrap();
    assert_eq!(s.id(), "extractive:v1");
    let input = SummaryInput::decode(
        &Formats::default(),
        CommitType::Delta,
        &FormatId::raw(),
        b"hello\n",
    );
    let summary = s.summarize(&input).await.unwrap();
    assert_eq!(
        summary,
        Summary {
            text: "hello".into(),
            input_tokens: 0,
            output_tokens: 0
        }
    );
}

proptest! {
    #[test]
    fn extractive_lines_stay_within_200_characters(
        texts in proptest::collection::vec("\\PC{0,400}", 1..6),
        compaction in any::<bool>(),
    ) {
        let kind = if compaction { CommitType::Compaction } else { CommitType::Delta };
        let messages = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                let mut content = vec![Block::text(t.clone())];
                if i % 3 == 1 {
                    content.push(Block::ToolUse {
                        id: format!("t{i}"),
                        name: t.chars().take(30).collect(),
                        input: json!({}),
                    });
                }
                Message::new(role, content)
            })
            .collect();
        for content in [
            Content::Conversation(Conversation { messages }),
            Content::Text(texts.join("\n")),
        ] {
            let input = SummaryInput { commit_type: kind, format: FormatId::raw(), content };
            let line = extractive::line(&input);
            prop_assert!(line.chars().count() <= extractive::MAX_CHARS, "{}", line);
            prop_assert!(!line.is_empty());
        }
    }
}

// ---------------------------------------------------------------------
// a backend this build lacks

#[cfg(not(feature = "summarize-bedrock"))]
#[test]
fn bedrock_without_its_feature_says_which_feature() {
    let cfg = SummarizerConfig {
        kind: SummarizerKind::Bedrock,
        model: "m".into(),
        ..SummarizerConfig::default()
    };
    let e = from_config(&cfg).err().unwrap();
    assert_eq!(e.field.as_deref(), Some("CTX_SUMMARIZER"));
    assert!(
        e.message.contains("CTX_SUMMARIZER=bedrock"),
        "{}",
        e.message
    );
    assert!(e.message.contains("summarize-bedrock"), "{}", e.message);
    assert!(e.message.contains("--features aws"), "{}", e.message);
}

#[cfg(not(feature = "summarize-http"))]
#[test]
fn the_http_backends_without_their_feature_say_which_feature() {
    for kind in [SummarizerKind::OpenAi, SummarizerKind::Anthropic] {
        let cfg = SummarizerConfig {
            kind,
            model: "m".into(),
            ..SummarizerConfig::default()
        };
        let e = from_config(&cfg).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("CTX_SUMMARIZER"));
        assert!(
            e.message.contains(&format!("CTX_SUMMARIZER={kind}")),
            "{}",
            e.message
        );
        assert!(e.message.contains("summarize-http"), "{}", e.message);
    }
}
