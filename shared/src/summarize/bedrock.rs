//! `bedrock`: Bedrock's Converse API through `aws-sdk-bedrockruntime`,
//! authenticated by the AWS default credential chain (IAM), over the same
//! rustls client as the S3 and DynamoDB clients. The SDK retries
//! throttling and 5xx itself (`CTX_SUMMARIZER_RETRIES`, exponential
//! backoff); what is left is classified into [`Failure`]s.

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseError;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, ConverseOutput, InferenceConfiguration, Message,
    SystemContentBlock,
};
use tokio::sync::OnceCell;

use super::{Failure, PROMPT, Summarizer, Summary, SummaryInput, summary_text, user_message};
use crate::config::SummarizerConfig;

/// The Converse API summarizer (`bedrock:<model-id>`).
#[derive(Debug)]
pub struct Bedrock {
    client: OnceCell<Client>,
    config: SummarizerConfig,
}

impl Bedrock {
    /// A summarizer whose client is built, on first use, from the
    /// environment's SDK configuration (region, credentials,
    /// `AWS_ENDPOINT_URL`) with `config`'s timeout and retries.
    pub fn from_env(config: &SummarizerConfig) -> Bedrock {
        Bedrock {
            client: OnceCell::new(),
            config: config.clone(),
        }
    }

    /// A summarizer over a given client (tests: the SDK's replay client).
    pub fn with_client(client: Client, config: &SummarizerConfig) -> Bedrock {
        Bedrock {
            client: OnceCell::new_with(Some(client)),
            config: config.clone(),
        }
    }

    /// The SDK's retry policy for `config`: `retries` after the first
    /// attempt, backoff from `backoff` up to `max_backoff`.
    pub fn retry_config(config: &SummarizerConfig) -> RetryConfig {
        RetryConfig::standard()
            .with_max_attempts(config.retries.saturating_add(1))
            .with_initial_backoff(config.backoff)
            .with_max_backoff(config.max_backoff)
    }

    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let sdk = aws_config::defaults(BehaviorVersion::latest())
                    .http_client(crate::store::aws::https_client())
                    .retry_config(Self::retry_config(&self.config))
                    .timeout_config(
                        TimeoutConfig::builder()
                            .operation_attempt_timeout(self.config.timeout)
                            .build(),
                    )
                    .load()
                    .await;
                Client::new(&sdk)
            })
            .await
    }
}

#[async_trait]
impl Summarizer for Bedrock {
    fn id(&self) -> String {
        format!("bedrock:{}", self.config.model)
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        let message = Message::builder()
            .role(ConversationRole::User)
            .content(ContentBlock::Text(user_message(
                input,
                self.config.max_input_tokens,
            )))
            .build()
            .map_err(|e| Failure::Permanent {
                reason: format!("cannot build the Converse request: {e}"),
            })?;
        let out = self
            .client()
            .await
            .converse()
            .model_id(&self.config.model)
            .system(SystemContentBlock::Text(PROMPT.to_owned()))
            .messages(message)
            .inference_config(
                InferenceConfiguration::builder()
                    .max_tokens(i32::try_from(self.config.max_output_tokens).unwrap_or(i32::MAX))
                    .build(),
            )
            .send()
            .await
            .map_err(failure)?;
        let text: Vec<&str> = match out.output() {
            Some(ConverseOutput::Message(m)) => m
                .content()
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let usage = out.usage();
        let count = |n: i32| u64::try_from(n).unwrap_or(0);
        Ok(Summary {
            text: summary_text(&text.join("\n"))?,
            input_tokens: usage.map_or(0, |u| count(u.input_tokens())),
            output_tokens: usage.map_or(0, |u| count(u.output_tokens())),
        })
    }
}

/// What a failed Converse call means for the batch.
fn failure<R: std::fmt::Debug>(e: SdkError<ConverseError, R>) -> Failure {
    let reason = format!("Bedrock Converse failed: {}", DisplayErrorContext(&e));
    match &e {
        SdkError::ServiceError(se) => match se.err() {
            ConverseError::ThrottlingException(_)
            | ConverseError::ServiceUnavailableException(_)
            | ConverseError::InternalServerException(_)
            | ConverseError::ModelTimeoutException(_)
            | ConverseError::ModelNotReadyException(_) => Failure::Transient {
                reason,
                retry_after: None,
            },
            _ => Failure::Permanent { reason },
        },
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => Failure::Transient {
            reason,
            retry_after: None,
        },
        _ => Failure::Permanent { reason },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
    use aws_smithy_types::body::SdkBody;
    use axum::http;
    use serde_json::{Value, json};

    use super::*;
    use crate::commit::CommitType;
    use crate::config::SummarizerKind;
    use crate::format::FormatId;
    use crate::summarize::Content;

    const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";

    fn config(retries: u32) -> SummarizerConfig {
        SummarizerConfig {
            kind: SummarizerKind::Bedrock,
            model: MODEL.into(),
            retries,
            backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_input_tokens: 200,
            ..SummarizerConfig::default()
        }
    }

    fn event(status: u16, headers: &[(&str, &str)], body: &str) -> ReplayEvent {
        let mut resp = http::Response::builder().status(status);
        for (k, v) in headers {
            resp = resp.header(*k, *v);
        }
        ReplayEvent::new(
            http::Request::builder()
                .uri("https://bedrock-runtime.us-east-1.amazonaws.com/")
                .body(SdkBody::empty())
                .unwrap(),
            resp.body(SdkBody::from(body.to_owned())).unwrap(),
        )
    }

    fn error(status: u16, kind: &str) -> ReplayEvent {
        event(
            status,
            &[
                ("content-type", "application/json"),
                ("x-amzn-errortype", kind),
            ],
            &json!({"message": format!("{kind} for the test")}).to_string(),
        )
    }

    fn bedrock(events: Vec<ReplayEvent>, retries: u32) -> (Bedrock, StaticReplayClient) {
        let replay = StaticReplayClient::new(events);
        let cfg = config(retries);
        let sdk = aws_sdk_bedrockruntime::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("AKIDTEST", "secret", None, None, "test"))
            .retry_config(Bedrock::retry_config(&cfg))
            .http_client(replay.clone())
            .build();
        let b = Bedrock::with_client(Client::from_conf(sdk), &cfg);
        (b, replay)
    }

    fn input() -> SummaryInput {
        SummaryInput {
            commit_type: CommitType::Delta,
            format: FormatId::raw(),
            content: Content::Text("deployed the service; ".repeat(100)),
        }
    }

    #[tokio::test]
    async fn converse_sends_the_prompt_and_the_excerpt_and_reads_usage() {
        let (b, replay) = bedrock(
            vec![event(
                200,
                &[("content-type", "application/json")],
                &json!({
                    "output": {"message": {"role": "assistant", "content": [{"text": " Deployed it. "}]}},
                    "stopReason": "end_turn",
                    "usage": {"inputTokens": 210, "outputTokens": 12, "totalTokens": 222},
                    "metrics": {"latencyMs": 5},
                })
                .to_string(),
            )],
            0,
        );
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
        let sent: Vec<_> = replay.actual_requests().collect();
        assert_eq!(sent.len(), 1);
        let uri = sent[0].uri().to_owned();
        assert!(
            uri.ends_with("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"),
            "{uri}"
        );
        assert!(
            sent[0]
                .headers()
                .get("authorization")
                .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")),
            "signed with the credentials of the chain"
        );
        let body: Value = serde_json::from_slice(sent[0].body().bytes().unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "system": [{"text": PROMPT}],
                "messages": [{"role": "user", "content": [{"text": user_message(&input(), 200)}]}],
                "inferenceConfig": {"maxTokens": 400},
            })
        );
    }

    #[tokio::test]
    async fn throttling_is_retried_by_the_sdk_then_transient() {
        let (b, replay) = bedrock(
            vec![
                error(429, "ThrottlingException"),
                error(429, "ThrottlingException"),
            ],
            1,
        );
        match b.summarize(&input()).await {
            Err(Failure::Transient { reason, .. }) => {
                assert!(reason.contains("ThrottlingException"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(replay.actual_requests().count(), 2);
    }

    #[tokio::test]
    async fn throttling_then_success_succeeds() {
        let ok = event(
            200,
            &[("content-type", "application/json")],
            r#"{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2},"metrics":{"latencyMs":1}}"#,
        );
        let (b, replay) = bedrock(vec![error(503, "ServiceUnavailableException"), ok], 2);
        assert_eq!(b.summarize(&input()).await.unwrap().text, "ok");
        assert_eq!(replay.actual_requests().count(), 2);
    }

    #[tokio::test]
    async fn a_validation_error_is_permanent_and_not_retried() {
        let (b, replay) = bedrock(vec![error(400, "ValidationException")], 3);
        match b.summarize(&input()).await {
            Err(Failure::Permanent { reason }) => {
                assert!(reason.contains("ValidationException"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(replay.actual_requests().count(), 1);
    }

    #[tokio::test]
    async fn a_malformed_or_empty_answer_is_permanent() {
        for body in [
            "not json",
            r#"{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":0,"totalTokens":1},"metrics":{"latencyMs":1}}"#,
        ] {
            let (b, _) = bedrock(
                vec![event(200, &[("content-type", "application/json")], body)],
                0,
            );
            match b.summarize(&input()).await {
                Err(Failure::Permanent { .. }) => {}
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn from_config_builds_bedrock_with_the_aws_feature() {
        let s = crate::summarize::from_config(&config(0)).unwrap();
        assert_eq!(s.id(), format!("bedrock:{MODEL}"));
    }
}
