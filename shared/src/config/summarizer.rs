//! The summarizer's settings: which backend writes missing summaries
//! ([`SummarizerKind`]), its endpoint, model and key ([`SummarizerConfig`]),
//! and the checks that a chosen backend has what it needs. Its variables
//! are declared with every other in `settings`.

use std::time::Duration;

use super::settings::{CTX_SUMMARIZER, CTX_SUMMARIZER_API_KEY, CTX_SUMMARIZER_MODEL};
use crate::error::{Error, Result};

/// Which summarizer backend writes missing summaries (`CTX_SUMMARIZER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SummarizerKind {
    /// No model: a deterministic line from the delta itself.
    #[default]
    Extractive,
    /// An OpenAI-compatible chat completions endpoint (the
    /// `summarize-http` feature).
    OpenAi,
    /// The Anthropic Messages API (the `summarize-http` feature).
    Anthropic,
    /// Bedrock's Converse API (the `summarize-bedrock` feature).
    Bedrock,
}

impl SummarizerKind {
    /// Its name, as `CTX_SUMMARIZER` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizerKind::Extractive => "extractive",
            SummarizerKind::OpenAi => "openai",
            SummarizerKind::Anthropic => "anthropic",
            SummarizerKind::Bedrock => "bedrock",
        }
    }
}

impl std::str::FromStr for SummarizerKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "extractive" => Ok(SummarizerKind::Extractive),
            "openai" => Ok(SummarizerKind::OpenAi),
            "anthropic" => Ok(SummarizerKind::Anthropic),
            "bedrock" => Ok(SummarizerKind::Bedrock),
            _ => Err(Error::invalid(
                CTX_SUMMARIZER.var,
                format!("{CTX_SUMMARIZER}={s:?} is not extractive, openai, anthropic or bedrock"),
            )),
        }
    }
}

impl std::fmt::Display for SummarizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret (an API key): its `Debug` shows only that it is set, so it
/// cannot leak through a logged `Config`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The default base URL of the `openai` summarizer.
pub const DEFAULT_OPENAI_URL: &str = "https://api.openai.com/v1";
/// The default base URL of the `anthropic` summarizer.
pub const DEFAULT_ANTHROPIC_URL: &str = "https://api.anthropic.com";

/// The summarizer's settings (`CTX_SUMMARIZER*`), checked when read: a
/// model backend has its model, and its key where the endpoint needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizerConfig {
    /// `CTX_SUMMARIZER`: the backend.
    pub kind: SummarizerKind,
    /// `CTX_SUMMARIZER_URL`: the endpoint's base URL, without a trailing
    /// slash (the backend's default when unset; unused by `extractive` and
    /// `bedrock`).
    pub url: String,
    /// `CTX_SUMMARIZER_MODEL`: the model (empty for `extractive`).
    pub model: String,
    /// `CTX_SUMMARIZER_API_KEY`: the key, if the endpoint takes one.
    pub api_key: Option<Secret>,
    /// `CTX_SUMMARIZER_TIMEOUT_SECS`: one request's time limit.
    pub timeout: Duration,
    /// `CTX_SUMMARIZER_RETRIES`: retries after a transient failure.
    pub retries: u32,
    /// The first retry's wait, doubled on each further retry (not a
    /// variable: tests shorten it).
    pub backoff: Duration,
    /// The longest wait between retries; a `Retry-After` asking for more
    /// ends the retries (the batch tries again on a later run).
    pub max_backoff: Duration,
    /// `CTX_SUMMARIZER_MAX_INPUT_TOKENS`: the most a model reads of one
    /// commit.
    pub max_input_tokens: u64,
    /// The most a model writes in one summary (not a variable).
    pub max_output_tokens: u32,
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig {
            kind: SummarizerKind::Extractive,
            url: String::new(),
            model: String::new(),
            api_key: None,
            timeout: Duration::from_secs(60),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_input_tokens: 8000,
            max_output_tokens: 400,
        }
    }
}

impl SummarizerConfig {
    /// Completes what its variables gave (the backend's default URL; no
    /// model for `extractive`) and checks that the chosen backend has what
    /// it needs.
    ///
    /// # Errors
    /// `Invalid` naming `CTX_SUMMARIZER_MODEL` or `CTX_SUMMARIZER_API_KEY`
    /// when the backend needs it and it is not set.
    pub(super) fn check(&mut self) -> Result<()> {
        if self.url.is_empty() {
            self.url = match self.kind {
                SummarizerKind::OpenAi => DEFAULT_OPENAI_URL,
                SummarizerKind::Anthropic => DEFAULT_ANTHROPIC_URL,
                SummarizerKind::Extractive | SummarizerKind::Bedrock => "",
            }
            .to_owned();
        }
        if self.kind == SummarizerKind::Extractive {
            self.model.clear();
        } else if self.model.is_empty() {
            return Err(Error::invalid(
                CTX_SUMMARIZER_MODEL.var,
                format!(
                    "{CTX_SUMMARIZER}={} needs the model in {CTX_SUMMARIZER_MODEL}",
                    self.kind
                ),
            ));
        }
        let needs_key = match self.kind {
            SummarizerKind::Anthropic => true,
            SummarizerKind::OpenAi => self.url == DEFAULT_OPENAI_URL,
            SummarizerKind::Extractive | SummarizerKind::Bedrock => false,
        };
        if needs_key && self.api_key.is_none() {
            return Err(Error::invalid(
                CTX_SUMMARIZER_API_KEY.var,
                format!(
                    "{CTX_SUMMARIZER}={} at {} needs a key in {CTX_SUMMARIZER_API_KEY}",
                    self.kind, self.url
                ),
            ));
        }
        Ok(())
    }
}
