//! `bedrock`: Bedrock's Converse API through `aws-sdk-bedrockruntime`,
//! authenticated by the AWS default credential chain (IAM), over the same
//! rustls client as the S3 and DynamoDB clients. The SDK retries
//! throttling and 5xx itself (`CTX_SUMMARIZER_RETRIES`, exponential
//! backoff); what is left is classified into [`Failure`]s.

use async_trait::async_trait;
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
use crate::store::aws::SdkPolicy;

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

    /// A summarizer over a given client (tests: one pointed at a fake
    /// endpoint).
    pub fn with_client(client: Client, config: &SummarizerConfig) -> Bedrock {
        Bedrock {
            client: OnceCell::new_with(Some(client)),
            config: config.clone(),
        }
    }

    /// The SDK's policy for `config` (the one shape of every AWS client,
    /// [`SdkPolicy`]): `retries` after the first attempt, backoff from
    /// `backoff` up to `max_backoff`, `timeout` per attempt.
    pub fn sdk_policy(config: &SummarizerConfig) -> SdkPolicy {
        SdkPolicy {
            attempts: config.retries.saturating_add(1),
            backoff: Some((config.backoff, config.max_backoff)),
            attempt_timeout: config.timeout,
            operation_timeout: None,
        }
    }

    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let sdk = Self::sdk_policy(&self.config)
                    .load(crate::store::aws::https_client())
                    .await;
                #[allow(unused_mut)] // Only the tests' call log adds to it.
                let mut config = aws_sdk_bedrockruntime::config::Builder::from(&sdk);
                #[cfg(any(test, feature = "conformance"))]
                if let Some(i) = crate::store::aws::calls::CallLog::interceptor() {
                    config.push_interceptor(i);
                }
                Client::from_conf(config.build())
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
