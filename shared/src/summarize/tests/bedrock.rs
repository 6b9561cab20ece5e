//! bedrock: the real SDK client (signing, serialization, its own retries,
//! the production rustls HTTP client) pointed at the fake endpoint.

use std::time::Duration;

use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use serde_json::json;

use super::fake::{Fake, Reply, ok};
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
        .retry_config(Bedrock::sdk_policy(&cfg).retry_config())
        .timeout_config(Bedrock::sdk_policy(&cfg).timeout_config())
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
