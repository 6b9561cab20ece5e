//! The commit model: one checkpoint of an agent's context, pointing at the
//! artifact that holds its delta (or summary, or snapshot) and at its parent.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Principal, SessionId};

/// What a commit's artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitType {
    /// What the agent saw and said since its parent.
    Delta,
    /// A summary that replaces everything before it.
    Compaction,
    /// A full materialized context.
    Snapshot,
}

impl CommitType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitType::Delta => "delta",
            CommitType::Compaction => "compaction",
            CommitType::Snapshot => "snapshot",
        }
    }
}

/// Why the wrapper checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The end of a user/assistant turn.
    TurnBoundary,
    /// After a tool call.
    ToolCall,
    /// The runtime compacted its context.
    Compaction,
    /// The session ended.
    SessionEnd,
    /// Someone asked for it.
    Explicit,
    /// A context-folding branch returned its result.
    BranchReturn,
}

impl Trigger {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::TurnBoundary => "turn_boundary",
            Trigger::ToolCall => "tool_call",
            Trigger::Compaction => "compaction",
            Trigger::SessionEnd => "session_end",
            Trigger::Explicit => "explicit",
            Trigger::BranchReturn => "branch_return",
        }
    }
}

/// Free-form labels on a commit, mutable like the summary.
pub type Tags = BTreeMap<String, String>;

/// A commit, with every field of the data model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// Derived from (tenant, parent, artifact, created_at, template).
    pub id: CommitId,
    /// The previous commit; none for a root.
    pub parent: Option<CommitId>,
    /// What the artifact holds.
    pub commit_type: CommitType,
    /// The delta, summary or snapshot.
    pub artifact_ref: ArtifactRef,
    /// The artifact's size in bytes.
    pub artifact_size: u64,
    /// How the artifact's bytes are encoded and concatenate.
    pub format: FormatId,
    /// The context template the wrapper used.
    pub template: String,
    /// Who checkpointed.
    pub principal: Principal,
    /// The machine it ran on.
    pub machine: Option<String>,
    /// The wrapper's session.
    pub session_id: Option<SessionId>,
    /// Why it checkpointed.
    pub checkpoint: Trigger,
    /// A ticket the work belongs to.
    pub ticket_id: Option<String>,
    /// A conversation thread the work belongs to.
    pub thread_id: Option<String>,
    /// A human-readable summary; mutable.
    pub summary: Option<String>,
    /// Messages in this commit's artifact.
    pub message_count: u64,
    /// Tokens in this commit's artifact.
    pub token_count: u64,
    /// When the wrapper checkpointed (RFC 3339, UTC, µs precision).
    pub created_at: DateTime<Utc>,
    /// Free-form labels; mutable.
    #[serde(default)]
    pub tags: Tags,
    /// Distance from the root (a root has depth 0).
    pub depth: u64,
    /// The linear run this commit is stored in: the id of the run's first
    /// commit. A child continues its parent's run unless the parent already
    /// has a child there (a fork), in which case it starts its own.
    pub lineage: CommitId,
    /// The run the parent is stored in (equal to `lineage` inside a run).
    pub parent_lineage: Option<CommitId>,
    /// The artifact's bytes when they are stored with the commit's metadata
    /// (a delta of at most `CTX_INLINE_DELTA_BYTES`) instead of in the blob
    /// store; still `artifact_ref`'s bytes, verified against it when read.
    /// `None` when they are in the blob store (or were dropped by
    /// [`Lifecycle::clear_inline`](crate::store::Lifecycle::clear_inline)).
    /// Never part of the commit's JSON.
    #[serde(skip)]
    pub inline: Option<bytes::Bytes>,
}

impl Commit {
    /// Where the parent is stored, if there is one.
    pub fn parent_position(&self) -> Option<(CommitId, u64)> {
        let lineage = self.parent_lineage?;
        Some((lineage, self.depth.checked_sub(1)?))
    }
}

/// Limits on the free-text fields of a commit.
pub mod limits {
    /// Bytes in `template`, `machine`, `session_id`, `ticket_id`, `thread_id`.
    pub const SHORT_TEXT: usize = 256;
    /// Bytes in a summary.
    pub const SUMMARY: usize = 16 * 1024;
    /// Tags on one commit.
    pub const TAGS: usize = 64;
    /// Bytes in a tag key.
    pub const TAG_KEY: usize = 128;
    /// Bytes in a tag value.
    pub const TAG_VALUE: usize = 1024;
    /// The largest message count a single commit may claim.
    pub const MESSAGE_COUNT: u64 = 10_000_000;
    /// The largest token count a single commit may claim.
    pub const TOKEN_COUNT: u64 = 1_000_000_000;
    /// Bytes in one artifact by default (`CTX_MAX_ARTIFACT_BYTES`).
    pub const DEFAULT_MAX_ARTIFACT: usize = 64 * 1024 * 1024;
    /// The largest delta stored inline with its commit by default
    /// in SQLite (`CTX_INLINE_DELTA_BYTES`): 64 KiB, where the bytes bench
    /// of a lognormal transcript keeps its long turns zstd-packed in the
    /// database instead of raw in CAS files (docs/bench.md, "Bytes below
    /// raw").
    pub const DEFAULT_INLINE_DELTA: usize = 64 * 1024;
    /// The largest delta stored inline with its commit on DynamoDB by
    /// default (`CTX_DYNAMODB_INLINE_DELTA_BYTES`): 768 bytes, the cost
    /// model's crossover (docs/cost.md, "The inline threshold on
    /// DynamoDB"): above it a delta costs less as an S3 object than as
    /// write units on every item that carries it.
    pub const DEFAULT_DYNAMODB_INLINE_DELTA: usize = 768;
    /// The largest artifact a download answers with its bytes where the
    /// store hands out URLs (`CTX_DOWNLOAD_URL_BYTES`): 4 MiB, whose
    /// base64 (5.6 MB) and headers fit a synchronous Lambda response
    /// (6 MB).
    pub const DEFAULT_DOWNLOAD_URL: u64 = 4 * 1024 * 1024;
    /// The largest `CTX_INLINE_DELTA_BYTES`: 256 KiB, so a DynamoDB commit
    /// item (metadata up to ~110 KB) stays under 400 KB.
    pub const MAX_INLINE_DELTA: usize = 256 * 1024;
}

/// Checks a short free-text field: non-empty when `required`, bounded, and
/// free of control characters.
///
/// # Errors
/// `Invalid` naming `field`.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, format!("{field} must not be empty")));
    }
    if value.len() > max {
        return Err(Error::new(
            crate::ErrorKind::Invalid,
            format!(
                "{field} is {} bytes long; at most {max} are allowed",
                value.len()
            ),
        )
        .with_field(field));
    }
    if let Some(c) = value
        .chars()
        .find(|c| c.is_control() && *c != '\n' && *c != '\t')
    {
        return Err(Error::invalid(
            field,
            format!("{field} contains the control character {c:?}"),
        ));
    }
    Ok(())
}

/// Checks a summary.
///
/// # Errors
/// `Invalid` naming `summary`.
pub fn check_summary(summary: &str) -> Result<()> {
    if summary.len() > limits::SUMMARY {
        return Err(Error::invalid(
            "summary",
            format!(
                "summary is {} bytes long; at most {} are allowed",
                summary.len(),
                limits::SUMMARY
            ),
        ));
    }
    Ok(())
}

/// Checks a tag map.
///
/// # Errors
/// `Invalid` naming `tags` or the offending `tags.<key>`.
pub fn check_tags(tags: &Tags) -> Result<()> {
    if tags.len() > limits::TAGS {
        return Err(Error::invalid(
            "tags",
            format!(
                "{} tags given; at most {} are allowed",
                tags.len(),
                limits::TAGS
            ),
        ));
    }
    for (k, v) in tags {
        check_text("tags", k, limits::TAG_KEY)?;
        if v.len() > limits::TAG_VALUE {
            return Err(Error::invalid(
                format!("tags.{k}"),
                format!(
                    "tag {k:?} is {} bytes long; at most {} are allowed",
                    v.len(),
                    limits::TAG_VALUE
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a claimed count against its limit.
///
/// # Errors
/// `Invalid` naming `field`.
pub fn check_count(field: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::invalid(
            field,
            format!("{field} is {value}; a single commit may claim at most {max}"),
        ));
    }
    Ok(())
}

/// Where a materialization starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Stop {
    /// At the nearest compaction or snapshot (the default).
    #[default]
    Compaction,
    /// At the root: the whole original conversation.
    Root,
    /// After the named ancestor.
    After(CommitId),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Compaction => f.write_str("compaction"),
            Stop::Root => f.write_str("root"),
            Stop::After(id) => write!(f, "{id}"),
        }
    }
}

impl std::str::FromStr for Stop {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "compaction" => Ok(Stop::Compaction),
            "root" => Ok(Stop::Root),
            other => other.parse().map(Stop::After).map_err(|_| {
                Error::invalid(
                    "stop",
                    format!("stop {other:?} is not \"compaction\", \"root\" or a ctx-… id"),
                )
            }),
        }
    }
}

impl Serialize for Stop {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: Error| serde::de::Error::custom(e.message))
    }
}
