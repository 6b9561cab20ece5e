//! The HTTP backends (`openai`, `anthropic`) against the fake server:
//! what they send, their retries and waits, and how each failure is
//! classified.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::fake::{Fake, Reply, ok};
use super::*;
use crate::config::Secret;
use crate::summarize::anthropic::Anthropic;
use crate::summarize::http::SleepFn;
use crate::summarize::openai::OpenAi;

const KEY: &str = "sk-test-9f8e7d6c5b4a";

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
