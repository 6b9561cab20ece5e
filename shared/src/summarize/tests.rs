//! Tests of the summarizers: the extractive lines pinned on every format,
//! and the HTTP backends against a fake LLM server on 127.0.0.1 that
//! records what it is sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::anthropic::Anthropic;
use super::http::SleepFn;
use super::openai::OpenAi;
use super::*;
use crate::config::{Secret, SummarizerConfig, SummarizerKind};
use crate::format::canonical::{Block, Message, Role};
use crate::format::segments;

const KEY: &str = "sk-test-9f8e7d6c5b4a";

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
// the fake LLM server

/// What the fake server answers to one request.
#[derive(Clone)]
enum Reply {
    /// A status, headers and a body.
    With(u16, Vec<(&'static str, String)>, String),
    /// Never answers (the client's timeout fires).
    Hang,
}

fn ok(body: Value) -> Reply {
    Reply::With(200, Vec::new(), body.to_string())
}

/// One request the fake server received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Fake {
    /// Serves `replies` in order on 127.0.0.1 (the last one again when
    /// they run out); returns the base URL.
    async fn start(replies: Vec<Reply>) -> (Fake, String) {
        let fake = Fake {
            replies: Arc::new(Mutex::new(replies.into())),
            ..Fake::default()
        };
        let app = Router::new().fallback(answer).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (fake, format!("http://{addr}"))
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn answer(State(fake): State<Fake>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    fake.received.lock().unwrap().push(Received {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = {
        let mut q = fake.replies.lock().unwrap();
        if q.len() > 1 {
            q.pop_front().unwrap()
        } else {
            q.front().cloned().unwrap()
        }
    };
    match reply {
        Reply::With(status, headers, body) => {
            let mut resp = (StatusCode::from_u16(status).unwrap(), body).into_response();
            resp.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            for (k, v) in headers {
                resp.headers_mut().insert(k, v.parse().unwrap());
            }
            resp
        }
        Reply::Hang => std::future::pending().await,
    }
}

/// The waits a recorded sleep was asked for.
type Waits = Arc<Mutex<Vec<Duration>>>;

/// A sleep that returns at once and records what it was asked to wait.
fn recorded_sleep() -> (SleepFn, Waits) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let w = waits.clone();
    let sleep: SleepFn = Arc::new(move |d| {
        w.lock().unwrap().push(d);
        Box::pin(async {})
    });
    (sleep, waits)
}

fn config(kind: SummarizerKind, url: &str, key: Option<&str>) -> SummarizerConfig {
    SummarizerConfig {
        kind,
        url: url.to_owned(),
        model: "test-model".into(),
        api_key: key.map(Secret::new),
        timeout: Duration::from_secs(5),
        retries: 2,
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(10),
        max_input_tokens: 500,
        max_output_tokens: 300,
    }
}

/// Both HTTP backends over `config`, with recorded sleeps.
fn backends(
    openai: &SummarizerConfig,
    anthropic: &SummarizerConfig,
) -> Vec<(Arc<dyn Summarizer>, Waits)> {
    let (s1, w1) = recorded_sleep();
    let (s2, w2) = recorded_sleep();
    vec![
        (Arc::new(OpenAi::new(openai).unwrap().with_sleep(s1)), w1),
        (
            Arc::new(Anthropic::new(anthropic).unwrap().with_sleep(s2)),
            w2,
        ),
    ]
}

fn openai_answer(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 321, "completion_tokens": 42, "total_tokens": 363},
    })
}

fn anthropic_answer(text: &str) -> Value {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 321, "output_tokens": 42},
    })
}

/// A long delta: its excerpt is cut.
fn long_input() -> SummaryInput {
    let mut conv = session();
    for i in 0..200 {
        conv.messages.push(Message::new(
            Role::User,
            vec![Block::text(format!(
                "follow-up {i}: and also look at module {i}"
            ))],
        ));
    }
    SummaryInput {
        commit_type: CommitType::Delta,
        format: fid("anthropic-messages-v1"),
        content: Content::Conversation(conv),
    }
}

#[tokio::test]
async fn openai_sends_the_prompt_and_the_excerpt_with_a_bearer_key() {
    let (fake, url) = Fake::start(vec![ok(openai_answer("  Fixed the parser.  "))]).await;
    let cfg = config(SummarizerKind::OpenAi, &format!("{url}/v1"), Some(KEY));
    let s = from_config(&cfg).unwrap();
    assert_eq!(s.id(), "openai:test-model");
    let input = long_input();
    let summary = s.summarize(&input).await.unwrap();
    assert_eq!(
        summary,
        Summary {
            text: "Fixed the parser.".into(),
            input_tokens: 321,
            output_tokens: 42
        }
    );
    let got = fake.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], format!("Bearer {KEY}"));
    assert!(r.headers.get("x-api-key").is_none());
    assert_eq!(r.body["model"], "test-model");
    assert_eq!(r.body["max_tokens"], 300);
    assert_eq!(
        r.body["messages"][0],
        json!({"role": "system", "content": PROMPT})
    );
    let user = r.body["messages"][1]["content"].as_str().unwrap();
    assert_eq!(r.body["messages"][1]["role"], "user");
    assert_eq!(user, user_message(&input, 500));
    assert!(user.contains("user: The parser tests fail"), "{user}");
    assert!(user.contains("assistant: [calls Read]"), "{user}");
    assert!(user.contains("characters cut …]"), "{user}");
    assert!(user.contains("follow-up 199"), "{user}");
    assert!(crate::format::estimate_tokens(user.len()) <= 500 + 20);
}

#[tokio::test]
async fn openai_without_a_key_sends_no_authorization() {
    let (fake, url) = Fake::start(vec![ok(openai_answer("ok"))]).await;
    let s = OpenAi::new(&config(SummarizerKind::OpenAi, &url, None)).unwrap();
    s.summarize(&long_input()).await.unwrap();
    let got = fake.received();
    assert_eq!(got[0].path, "/chat/completions");
    assert!(got[0].headers.get("authorization").is_none());
    assert!(got[0].headers.get("x-api-key").is_none());
}

#[tokio::test]
async fn anthropic_sends_the_key_the_version_and_the_prompt() {
    let (fake, url) = Fake::start(vec![ok(anthropic_answer("Fixed the parser."))]).await;
    let cfg = config(SummarizerKind::Anthropic, &url, Some(KEY));
    let s = from_config(&cfg).unwrap();
    assert_eq!(s.id(), "anthropic:test-model");
    let input = long_input();
    let summary = s.summarize(&input).await.unwrap();
    assert_eq!(summary.text, "Fixed the parser.");
    assert_eq!((summary.input_tokens, summary.output_tokens), (321, 42));
    let got = fake.received();
    let r = &got[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.headers["x-api-key"], KEY);
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert!(r.headers.get("authorization").is_none());
    assert_eq!(r.body["system"], PROMPT);
    assert_eq!(r.body["max_tokens"], 300);
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": user_message(&input, 500)}])
    );
}

#[tokio::test]
async fn a_timeout_is_transient() {
    let (fake, url) = Fake::start(vec![Reply::Hang]).await;
    let mut cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
    cfg.timeout = Duration::from_millis(200);
    cfg.retries = 1;
    for (s, waits) in backends(&cfg, &cfg) {
        match s.summarize(&long_input()).await {
            Err(Failure::Transient {
                reason,
                retry_after,
            }) => {
                assert!(reason.contains("timed out"), "{reason}");
                assert!(reason.contains("after 2 attempts"), "{reason}");
                assert_eq!(retry_after, None);
            }
            other => panic!("{}: {other:?}", s.id()),
        }
        assert_eq!(*waits.lock().unwrap(), [Duration::from_millis(100)]);
    }
    assert_eq!(fake.received().len(), 4);
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_retry_after_asks_for() {
    for (i, answer) in [openai_answer("done"), anthropic_answer("done")]
        .into_iter()
        .enumerate()
    {
        let (fake, url) = Fake::start(vec![
            Reply::With(
                429,
                vec![("retry-after", "3".into())],
                r#"{"error":"slow down"}"#.into(),
            ),
            Reply::With(503, Vec::new(), String::new()),
            ok(answer),
        ])
        .await;
        let cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
        let (s, waits) = backends(&cfg, &cfg).swap_remove(i);
        let summary = s.summarize(&long_input()).await.unwrap();
        assert_eq!(summary.text, "done");
        // Retry-After's 3 s, then the second backoff step (100 ms × 2).
        assert_eq!(
            *waits.lock().unwrap(),
            [Duration::from_secs(3), Duration::from_millis(200)]
        );
        let got = fake.received();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].body, got[2].body, "the same request each time");
    }
}

#[tokio::test]
async fn exhausted_retries_on_5xx_are_transient() {
    let (fake, url) = Fake::start(vec![Reply::With(
        502,
        vec![("retry-after", "1".into())],
        "bad gateway".into(),
    )])
    .await;
    let cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
    for (s, waits) in backends(&cfg, &cfg) {
        match s.summarize(&long_input()).await {
            Err(Failure::Transient {
                reason,
                retry_after,
            }) => {
                assert!(reason.contains("502"), "{reason}");
                assert!(reason.contains("after 3 attempts"), "{reason}");
                assert_eq!(retry_after, Some(Duration::from_secs(1)));
            }
            other => panic!("{}: {other:?}", s.id()),
        }
        assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(1); 2]);
    }
    assert_eq!(fake.received().len(), 6);
}

#[tokio::test]
async fn a_retry_after_beyond_the_longest_backoff_stops_at_once() {
    let (fake, url) = Fake::start(vec![Reply::With(
        429,
        vec![("retry-after", "3600".into())],
        String::new(),
    )])
    .await;
    let cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
    for (s, waits) in backends(&cfg, &cfg) {
        let e = s.summarize(&long_input()).await.unwrap_err();
        assert_eq!(
            e,
            Failure::Transient {
                reason: format!(
                    "{} answered 429 Too Many Requests (after 1 attempt)",
                    if s.id().starts_with("openai") {
                        "the chat completions endpoint"
                    } else {
                        "the Messages API"
                    }
                ),
                retry_after: Some(Duration::from_secs(3600)),
            }
        );
        assert!(waits.lock().unwrap().is_empty());
    }
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn malformed_and_empty_answers_are_permanent_and_not_retried() {
    let cases = [
        Reply::With(200, Vec::new(), "{\"choices\": [".into()),
        Reply::With(200, Vec::new(), "<html>gateway</html>".into()),
        ok(json!({"unexpected": true})),
        ok(json!({"choices": [], "content": []})),
        ok(openai_answer("   ")),
        ok(anthropic_answer("")),
        ok(json!({"choices": [{"message": {"content": null}}], "content": "text"})),
    ];
    for reply in cases {
        let (fake, url) = Fake::start(vec![reply]).await;
        let cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
        for (s, waits) in backends(&cfg, &cfg) {
            match s.summarize(&long_input()).await {
                Err(Failure::Permanent { reason }) => assert!(!reason.is_empty()),
                other => panic!("{}: {other:?}", s.id()),
            }
            assert!(waits.lock().unwrap().is_empty());
        }
        assert_eq!(fake.received().len(), 2);
    }
}

#[tokio::test]
async fn a_refused_request_is_permanent_and_the_key_is_never_shown() {
    // An endpoint that echoes the key it was sent in its error.
    let (fake, url) = Fake::start(vec![Reply::With(
        401,
        Vec::new(),
        format!(r#"{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}"#),
    )])
    .await;
    let cfg = config(SummarizerKind::OpenAi, &url, Some(KEY));
    for (s, _) in backends(&cfg, &cfg) {
        let e = s.summarize(&long_input()).await.unwrap_err();
        let Failure::Permanent { reason } = &e else {
            panic!("{e:?}")
        };
        assert!(reason.contains("401"), "{reason}");
        assert!(
            reason.contains("Incorrect API key provided: ***"),
            "{reason}"
        );
        assert!(!format!("{e} {e:?}").contains(KEY));
    }
    assert_eq!(fake.received().len(), 2);
    // Nor in the Debug of the configuration or of the backends.
    let shown = format!(
        "{cfg:?} {:?} {:?}",
        OpenAi::new(&cfg).unwrap(),
        Anthropic::new(&cfg).unwrap()
    );
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("Secret(***)"), "{shown}");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut cfg = config(SummarizerKind::OpenAi, &url, None);
    cfg.retries = 1;
    for (s, waits) in backends(&cfg, &cfg) {
        match s.summarize(&long_input()).await {
            Err(Failure::Transient { reason, .. }) => {
                assert!(reason.contains("unreachable"), "{reason}")
            }
            other => panic!("{}: {other:?}", s.id()),
        }
        assert_eq!(waits.lock().unwrap().len(), 1);
    }
}

#[cfg(not(feature = "aws"))]
#[test]
fn bedrock_without_the_aws_feature_says_which_feature() {
    let cfg = SummarizerConfig {
        kind: SummarizerKind::Bedrock,
        model: "m".into(),
        ..SummarizerConfig::default()
    };
    let e = from_config(&cfg).err().unwrap();
    assert_eq!(e.field.as_deref(), Some("CTX_SUMMARIZER"));
    assert!(e.message.contains("--features aws"), "{}", e.message);
}

// ---------------------------------------------------------------------
// bedrock: the real SDK client (signing, serialization, its own retries,
// the production rustls HTTP client) pointed at the fake endpoint.

#[cfg(feature = "aws")]
mod bedrock {
    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};

    use super::*;
    use crate::summarize::bedrock::Bedrock;

    const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";

    fn bedrock(url: &str, retries: u32) -> Bedrock {
        let cfg = SummarizerConfig {
            kind: SummarizerKind::Bedrock,
            model: MODEL.into(),
            timeout: Duration::from_millis(500),
            retries,
            backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_input_tokens: 200,
            ..SummarizerConfig::default()
        };
        let sdk = aws_sdk_bedrockruntime::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(url)
            .credentials_provider(Credentials::new("AKIDTEST", "secret", None, None, "test"))
            .http_client(crate::store::aws::https_client())
            .retry_config(Bedrock::retry_config(&cfg))
            .timeout_config(Bedrock::timeout_config(&cfg))
            .build();
        Bedrock::with_client(aws_sdk_bedrockruntime::Client::from_conf(sdk), &cfg)
    }

    fn error(status: u16, kind: &str) -> Reply {
        Reply::With(
            status,
            vec![("x-amzn-errortype", kind.to_owned())],
            json!({"message": format!("{kind} for the test")}).to_string(),
        )
    }

    fn answer(text: &str) -> Reply {
        ok(json!({
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 210, "outputTokens": 12, "totalTokens": 222},
            "metrics": {"latencyMs": 5},
        }))
    }

    fn input() -> SummaryInput {
        SummaryInput {
            commit_type: CommitType::Delta,
            format: FormatId::raw(),
            content: Content::Text("deployed the service; ".repeat(100)),
        }
    }

    #[tokio::test]
    async fn converse_sends_the_prompt_and_the_excerpt_signed_and_reads_usage() {
        let (fake, url) = Fake::start(vec![answer(" Deployed it. ")]).await;
        let b = bedrock(&url, 0);
        assert_eq!(b.id(), format!("bedrock:{MODEL}"));
        let summary = b.summarize(&input()).await.unwrap();
        assert_eq!(
            summary,
            Summary {
                text: "Deployed it.".into(),
                input_tokens: 210,
                output_tokens: 12
            }
        );
        let got = fake.received();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].path,
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        let auth = got[0].headers["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/"),
            "SigV4 with the chain's credentials: {auth}"
        );
        assert!(auth.contains("/us-east-1/bedrock/aws4_request"), "{auth}");
        assert_eq!(
            got[0].body,
            json!({
                "system": [{"text": PROMPT}],
                "messages": [{"role": "user", "content": [{"text": user_message(&input(), 200)}]}],
                "inferenceConfig": {"maxTokens": 400},
            })
        );
    }

    #[tokio::test]
    async fn throttling_is_retried_by_the_sdk_then_transient() {
        let (fake, url) = Fake::start(vec![error(429, "ThrottlingException")]).await;
        match bedrock(&url, 1).summarize(&input()).await {
            Err(Failure::Transient { reason, .. }) => {
                assert!(reason.contains("ThrottlingException"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fake.received().len(), 2);
    }

    #[tokio::test]
    async fn unavailable_then_an_answer_succeeds() {
        let (fake, url) = Fake::start(vec![
            error(503, "ServiceUnavailableException"),
            answer("ok"),
        ])
        .await;
        let summary = bedrock(&url, 2).summarize(&input()).await.unwrap();
        assert_eq!(summary.text, "ok");
        assert_eq!(fake.received().len(), 2);
    }

    #[tokio::test]
    async fn a_validation_error_is_permanent_and_not_retried() {
        let (fake, url) = Fake::start(vec![error(400, "ValidationException")]).await;
        match bedrock(&url, 3).summarize(&input()).await {
            Err(Failure::Permanent { reason }) => {
                assert!(reason.contains("ValidationException"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fake.received().len(), 1);
    }

    #[tokio::test]
    async fn a_timeout_is_transient() {
        let (_fake, url) = Fake::start(vec![Reply::Hang]).await;
        match bedrock(&url, 0).summarize(&input()).await {
            Err(Failure::Transient { .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_malformed_or_empty_answer_is_permanent() {
        for reply in [
            Reply::With(200, Vec::new(), "not json".into()),
            answer("  "),
            ok(
                json!({"output": {"message": {"role": "assistant", "content": []}},
                      "stopReason": "end_turn",
                      "usage": {"inputTokens": 1, "outputTokens": 0, "totalTokens": 1},
                      "metrics": {"latencyMs": 1}}),
            ),
        ] {
            let (_fake, url) = Fake::start(vec![reply]).await;
            match bedrock(&url, 0).summarize(&input()).await {
                Err(Failure::Permanent { .. }) => {}
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn from_config_builds_bedrock_with_the_aws_feature() {
        let cfg = SummarizerConfig {
            kind: SummarizerKind::Bedrock,
            model: MODEL.into(),
            ..SummarizerConfig::default()
        };
        assert_eq!(from_config(&cfg).unwrap().id(), format!("bedrock:{MODEL}"));
    }
}
