//! Summarizers: what turns a commit's delta into the one-line or
//! few-sentence `summary` that makes a chain browsable like `git log`.
//!
//! One small trait, [`Summarizer`], with backends chosen in Config: the
//! deterministic `extractive` default (no model), OpenAI-compatible chat
//! completions, the Anthropic Messages API and Bedrock's Converse API. The
//! batch that finds commits lacking a summary, claims them and writes the
//! results lives in the service (`Service::summarize_batch`); a backend
//! only answers "summarize this".
//!
//! # Layout
//! - this file: the trait, its input and failures, [`from_config`].
//! - [`extractive`]: the default, a deterministic line without a model.
//! - [`excerpt`](mod@excerpt): the text a model reads (role-prefixed
//!   lines, head and tail of a long delta within a token budget).
//! - `http`: the request loop the HTTP backends share (timeout, retries
//!   with backoff and `Retry-After`, the key kept out of messages).
//! - `openai`, `anthropic`: the HTTP backends (feature `summarize-http`).
//! - `bedrock`: the Converse API (feature `summarize-bedrock`).
//!
//! A backend whose feature is off is still a valid `CTX_SUMMARIZER`
//! value: [`from_config`] refuses it, naming the feature, so a Lambda
//! built without one says so at start instead of reading as a typo.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::commit::CommitType;
use crate::config::{SummarizerConfig, SummarizerKind};
use crate::error::Result;
use crate::format::canonical::Conversation;
use crate::format::{FormatId, Formats};

#[cfg(feature = "summarize-http")]
pub mod anthropic;
#[cfg(feature = "summarize-bedrock")]
pub mod bedrock;
pub mod excerpt;
pub mod extractive;
#[cfg(feature = "summarize-http")]
mod http;
#[cfg(feature = "summarize-http")]
pub mod openai;

pub use excerpt::{excerpt, truncate};
pub use extractive::Extractive;

/// The instruction every model-backed summarizer sends, after the seed:
/// what was accomplished, the decisions made and the unfinished work.
pub const PROMPT: &str = "Summarize this conversation in 2-4 sentences. Focus on what was \
accomplished, key decisions made, and any unfinished work.";

/// The summary recorded when a commit's summary failed for good (also a
/// save's summary when it fails: docs/http-api.md, "Saves").
pub const FAILED_MARKER: &str = "(summary generation failed)";

/// What a commit's artifact holds, decoded as far as its format allows.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// A structured format, decoded into the canonical model.
    Conversation(Conversation),
    /// Opaque bytes (`raw`, or a delta its codec could not decode), as
    /// text, lossily.
    Text(String),
}

/// One thing to summarize.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryInput {
    /// The commit's type: a compaction's content is already a summary.
    pub commit_type: CommitType,
    /// The format the artifact is in.
    pub format: FormatId,
    /// The artifact's content.
    pub content: Content,
}

impl SummaryInput {
    /// Decodes `bytes` through `format`'s codec; opaque or undecodable
    /// bytes become [`Content::Text`].
    pub fn decode(
        formats: &Formats,
        commit_type: CommitType,
        format: &FormatId,
        bytes: &[u8],
    ) -> Self {
        let codec = formats.codec(format);
        let content = if codec.structured() {
            match codec.to_canonical(bytes) {
                Ok(conv) => Content::Conversation(conv),
                Err(_) => Content::Text(String::from_utf8_lossy(bytes).into_owned()),
            }
        } else {
            Content::Text(String::from_utf8_lossy(bytes).into_owned())
        };
        SummaryInput {
            commit_type,
            format: format.clone(),
            content,
        }
    }
}

/// A summary a backend wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The text, within `commit::limits::SUMMARY`.
    pub text: String,
    /// Tokens the model read (0 for `extractive`).
    pub input_tokens: u64,
    /// Tokens the model wrote (0 for `extractive`).
    pub output_tokens: u64,
}

/// Why a backend wrote no summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Worth trying again later (timeouts, 429 and 5xx after the backend's
    /// own retries, an unreachable endpoint).
    #[error("{reason}")]
    Transient {
        /// What happened, without secrets.
        reason: String,
        /// When the endpoint asked to be retried, if it did.
        retry_after: Option<Duration>,
    },
    /// Will fail again the same way (a malformed response, a refused
    /// request, content the backend cannot take).
    #[error("{reason}")]
    Permanent {
        /// What happened, without secrets.
        reason: String,
    },
}

/// A summarizer backend.
#[async_trait]
pub trait Summarizer: Send + Sync + 'static {
    /// Who wrote the summary, recorded as the `summary_by` tag:
    /// `<backend>:<model>` (`extractive:v1`, `openai:gpt-4o-mini`, ...).
    fn id(&self) -> String;

    /// Summarizes `input`.
    ///
    /// # Errors
    /// A [`Failure`] saying whether a later run should try again.
    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure>;

    /// Summarizes a whole context a compaction replaces: the summary must
    /// stand for every turn of it. By default the same as
    /// [`Summarizer::summarize`] (a model reads the whole context); the
    /// extractive summarizer writes a line per turn.
    ///
    /// # Errors
    /// A [`Failure`] saying whether a later run should try again.
    async fn summarize_context(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        self.summarize(input).await
    }
}

/// The backend `config` chooses.
///
/// # Errors
/// `Invalid` naming `CTX_SUMMARIZER` for a backend this build does not
/// have (`openai` and `anthropic` without the `summarize-http` feature,
/// `bedrock` without `summarize-bedrock`); `Internal` when the HTTP client
/// cannot be built.
pub fn from_config(config: &SummarizerConfig) -> Result<Arc<dyn Summarizer>> {
    Ok(match config.kind {
        SummarizerKind::Extractive => Arc::new(Extractive),
        #[cfg(feature = "summarize-http")]
        SummarizerKind::OpenAi => Arc::new(openai::OpenAi::new(config)?),
        #[cfg(feature = "summarize-http")]
        SummarizerKind::Anthropic => Arc::new(anthropic::Anthropic::new(config)?),
        #[cfg(feature = "summarize-bedrock")]
        SummarizerKind::Bedrock => Arc::new(bedrock::Bedrock::from_env(config)),
        #[cfg(not(all(feature = "summarize-http", feature = "summarize-bedrock")))]
        kind => return Err(not_built(kind)),
    })
}

/// The feature a backend needs, for a build without it.
#[cfg(not(all(feature = "summarize-http", feature = "summarize-bedrock")))]
fn not_built(kind: SummarizerKind) -> crate::error::Error {
    let (feature, ctx) = match kind {
        SummarizerKind::Bedrock => ("summarize-bedrock", "cargo build -p ctx-cli --features aws"),
        _ => ("summarize-http", "cargo build -p ctx-cli"),
    };
    let var = crate::config::CTX_SUMMARIZER.var;
    crate::error::Error::invalid(
        var,
        format!(
            "{var}={kind} is not in this build: it needs ctx-core's {feature} \
             feature (the ctx command has it with `{ctx}`)"
        ),
    )
}

/// What a model is sent after [`PROMPT`]: the commit's [`excerpt()`]
/// within `max_tokens`, between `<conversation>` tags.
pub fn user_message(input: &SummaryInput, max_tokens: u64) -> String {
    format!(
        "<conversation format=\"{}\">\n{}\n</conversation>",
        input.format,
        excerpt(input, max_tokens)
    )
}

/// The text of a model's answer made a summary: trimmed, within
/// `commit::limits::SUMMARY`.
///
/// # Errors
/// [`Failure::Permanent`] when nothing is left.
#[cfg(any(feature = "summarize-http", feature = "summarize-bedrock"))]
pub(crate) fn summary_text(text: &str) -> std::result::Result<String, Failure> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Failure::Permanent {
            reason: "the model answered with an empty summary".into(),
        });
    }
    Ok(clip_summary(text).to_owned())
}

/// `text` trimmed and within `commit::limits::SUMMARY`, cut at a
/// character boundary.
pub(crate) fn clip_summary(text: &str) -> &str {
    let text = text.trim();
    let mut end = text.len().min(crate::commit::limits::SUMMARY);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
