//! `anthropic`: the Messages API, `POST {base}/v1/messages` with
//! `x-api-key` and `anthropic-version: 2023-06-01`.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::http::Http;
use super::openai::tokens;
use super::{Failure, PROMPT, Summarizer, Summary, SummaryInput, summary_text, user_message};
use crate::config::SummarizerConfig;
use crate::error::Result;

/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The Messages API summarizer (`anthropic:<model>`).
#[derive(Debug, Clone)]
pub struct Anthropic {
    http: Http,
    url: String,
    model: String,
    max_input_tokens: u64,
    max_output_tokens: u32,
}

impl Anthropic {
    /// A summarizer of `config`'s endpoint and model.
    ///
    /// # Errors
    /// `Internal` when the HTTP client cannot be built.
    pub fn new(config: &SummarizerConfig) -> Result<Anthropic> {
        Ok(Anthropic {
            http: Http::new(config)?,
            url: format!("{}/v1/messages", config.url.trim_end_matches('/')),
            model: config.model.clone(),
            max_input_tokens: config.max_input_tokens,
            max_output_tokens: config.max_output_tokens,
        })
    }

    #[cfg(test)]
    pub(crate) fn with_sleep(mut self, sleep: super::http::SleepFn) -> Anthropic {
        self.http = self.http.with_sleep(sleep);
        self
    }
}

#[async_trait]
impl Summarizer for Anthropic {
    fn id(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        let body = json!({
            "model": self.model,
            "max_tokens": self.max_output_tokens,
            "system": PROMPT,
            "messages": [
                {"role": "user", "content": user_message(input, self.max_input_tokens)},
            ],
        });
        let answer = self
            .http
            .post_json("the Messages API", |client| {
                let req = client
                    .post(&self.url)
                    .header("anthropic-version", API_VERSION)
                    .json(&body);
                match self.http.key() {
                    Some(key) => req.header("x-api-key", key.expose()),
                    None => req,
                }
            })
            .await?;
        let blocks = answer
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| Failure::Permanent {
                reason: "the Messages API answered without a content array".into(),
            })?;
        let text: Vec<&str> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        Ok(Summary {
            text: summary_text(&text.join("\n"))?,
            input_tokens: tokens(&answer, "/usage/input_tokens"),
            output_tokens: tokens(&answer, "/usage/output_tokens"),
        })
    }
}
