//! `openai`: any OpenAI-compatible chat completions endpoint (OpenAI,
//! vLLM, Ollama, llama.cpp's server, LiteLLM): `POST {base}/chat/completions`
//! with `Authorization: Bearer <key>` when a key is set.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::http::Http;
use super::{Failure, PROMPT, Summarizer, Summary, SummaryInput, summary_text, user_message};
use crate::config::SummarizerConfig;
use crate::error::Result;

/// The OpenAI-compatible summarizer (`openai:<model>`).
#[derive(Debug, Clone)]
pub struct OpenAi {
    http: Http,
    url: String,
    model: String,
    max_input_tokens: u64,
    max_output_tokens: u32,
}

impl OpenAi {
    /// A summarizer of `config`'s endpoint and model.
    ///
    /// # Errors
    /// `Internal` when the HTTP client cannot be built.
    pub fn new(config: &SummarizerConfig) -> Result<OpenAi> {
        Ok(OpenAi {
            http: Http::new(config)?,
            url: format!("{}/chat/completions", config.url.trim_end_matches('/')),
            model: config.model.clone(),
            max_input_tokens: config.max_input_tokens,
            max_output_tokens: config.max_output_tokens,
        })
    }

    #[cfg(test)]
    pub(crate) fn with_sleep(mut self, sleep: super::http::SleepFn) -> OpenAi {
        self.http = self.http.with_sleep(sleep);
        self
    }
}

#[async_trait]
impl Summarizer for OpenAi {
    fn id(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        let body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": PROMPT},
                {"role": "user", "content": user_message(input, self.max_input_tokens)},
            ],
            "max_tokens": self.max_output_tokens,
            "stream": false,
        });
        let answer = self
            .http
            .post_json("the chat completions endpoint", |client| {
                let req = client.post(&self.url).json(&body);
                match self.http.key() {
                    Some(key) => req.bearer_auth(key.expose()),
                    None => req,
                }
            })
            .await?;
        let text = answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure::Permanent {
                reason: "the chat completions endpoint answered without choices[0].message.content"
                    .into(),
            })?;
        Ok(Summary {
            text: summary_text(text)?,
            input_tokens: tokens(&answer, "/usage/prompt_tokens"),
            output_tokens: tokens(&answer, "/usage/completion_tokens"),
        })
    }
}

/// A token count at `pointer` in a response (0 when absent).
pub(crate) fn tokens(answer: &Value, pointer: &str) -> u64 {
    answer.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}
