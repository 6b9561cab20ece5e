//! Recording a checkpoint: a [`NewCommit`] is validated, its delta stored
//! and checked by its format's codec, and the commit written (with an
//! optional ref move in the same store call). Into a branch's chain it is
//! three named steps: the budget guard, the write, the accounting.

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::Service;
use super::branches::BudgetNotice;
use crate::clock::truncate_to_micros;
use crate::commit::{self, Commit, CommitType, Tags, Trigger, limits};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Checked, Counts, FormatId};
use crate::id::{ArtifactRef, BranchId, CommitId, Principal, SessionId, TenantId};
use crate::store::{BlobArea, BlobStoreExt, PutCommit, RefMove};

/// Where a new commit's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Given with the checkpoint; stored by it.
    Inline(Bytes),
    /// Uploaded before (`POST /v1/artifacts` or a direct upload).
    Stored(ArtifactRef),
}

impl Delta {
    /// The request field errors about the delta name.
    pub fn field(&self) -> &'static str {
        match self {
            Delta::Inline(_) => "delta",
            Delta::Stored(_) => "artifact_ref",
        }
    }
}

/// A commit to record: the domain form of a checkpoint request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCommit {
    /// The previous commit; absent for a root.
    pub parent: Option<CommitId>,
    /// What the artifact holds.
    pub commit_type: CommitType,
    /// The artifact's format.
    pub format: FormatId,
    /// The bytes.
    pub delta: Delta,
    /// The context template the wrapper used.
    pub template: String,
    /// Who checkpoints.
    pub principal: Principal,
    /// The machine it runs on.
    pub machine: Option<String>,
    /// The wrapper's session.
    pub session_id: Option<SessionId>,
    /// Why it checkpoints.
    pub checkpoint: Trigger,
    /// A ticket the work belongs to.
    pub ticket_id: Option<String>,
    /// A conversation thread the work belongs to.
    pub thread_id: Option<String>,
    /// A human-readable summary.
    pub summary: Option<String>,
    /// Messages in the delta as the wrapper counted them (used for opaque
    /// formats only).
    pub message_count: Option<u64>,
    /// Tokens in the delta as the wrapper counted them (kept as the tag
    /// `client_token_count` when it differs from the server's count).
    pub token_count: Option<u64>,
    /// When the wrapper checkpointed; the server's clock when absent.
    pub created_at: Option<DateTime<Utc>>,
    /// Free-form labels.
    pub tags: Option<Tags>,
    /// A ref to move to the new commit in the same write.
    pub ref_move: Option<RefMove>,
    /// The branch whose chain this writes into: its budget is checked
    /// before and charged after.
    pub branch: Option<BranchId>,
}

impl NewCommit {
    /// A delta commit of `delta` by `principal` at a turn boundary, with
    /// everything optional left out; set the rest with struct update syntax.
    pub fn new(
        principal: Principal,
        template: impl Into<String>,
        format: FormatId,
        delta: impl Into<Bytes>,
    ) -> Self {
        NewCommit {
            parent: None,
            commit_type: CommitType::Delta,
            format,
            delta: Delta::Inline(delta.into()),
            template: template.into(),
            principal,
            machine: None,
            session_id: None,
            checkpoint: Trigger::TurnBoundary,
            ticket_id: None,
            thread_id: None,
            summary: None,
            message_count: None,
            token_count: None,
            created_at: None,
            tags: None,
            ref_move: None,
            branch: None,
        }
    }
}

/// What a checkpoint did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointed {
    /// The commit, as stored.
    pub commit: Commit,
    /// False when the same checkpoint had been recorded before.
    pub created: bool,
    /// The budget of the branch it wrote into: a warning from 80%, the
    /// forced return at 100%.
    pub budget: Option<BudgetNotice>,
    /// What was stored as written although it looks wrong: tool results of
    /// a runtime's own log that answer no tool use in the chain (after an
    /// interrupted tool call, a rewind or a resumed session).
    pub warnings: Vec<String>,
}

/// A new commit's artifact, time and id ([`Service::commit_key`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct CommitKey {
    pub(super) artifact: ArtifactRef,
    pub(super) created_at: DateTime<Utc>,
    pub(super) id: CommitId,
}

/// A commit checked and built, not yet written ([`Service::build_commit`]).
pub(super) struct Built {
    /// The commit, its bytes inline when they are small enough.
    pub(super) commit: Commit,
    /// Bytes to store as a blob before the commit is written.
    pub(super) blob: Option<Bytes>,
    /// The bytes the codec checked (an inline delta, or a structured
    /// format's uploaded artifact).
    pub(super) bytes: Option<Bytes>,
    /// What was stored as written although it looks wrong.
    pub(super) warnings: Vec<String>,
}

/// A written commit, whether it was new, and what it was warned about.
pub(crate) struct Recorded {
    pub(crate) commit: Commit,
    pub(crate) created: bool,
    pub(crate) warnings: Vec<String>,
}

impl Service {
    /// Records a checkpoint: the branch budget guard, the write, then the
    /// accounting against the branch.
    ///
    /// # Errors
    /// `Invalid` naming the field for bad input (nothing is written);
    /// `NotFound` naming `parent` or `artifact_ref` when what it names does
    /// not exist; `Conflict` with the current tip when the ref moved, or
    /// for a branch that has ended; `TooLarge`.
    pub async fn checkpoint(&self, tenant: &TenantId, new: NewCommit) -> Result<Checkpointed> {
        let branch = self.budget_guard(tenant, new.branch.as_ref()).await?;
        let Recorded {
            commit,
            created,
            warnings,
        } = self.record_checked(tenant, new).await?;
        if created {
            crate::telemetry::checkpoints(tenant.as_str(), 1);
            self.after_commit(tenant, &commit).await;
        }
        let budget = match (branch, created) {
            (Some(b), true) => self.charge_tokens(tenant, &b, commit.token_count).await?,
            _ => None,
        };
        Ok(Checkpointed {
            commit,
            created,
            budget,
            warnings,
        })
    }

    /// Writes a commit without the branch budget steps (the branch
    /// operations' own writes). Returns it and whether it was created.
    pub(crate) async fn record(&self, tenant: &TenantId, new: NewCommit) -> Result<(Commit, bool)> {
        let r = self.record_checked(tenant, new).await?;
        Ok((r.commit, r.created))
    }

    /// [`Service::record`], with the warnings about what was stored.
    async fn record_checked(&self, tenant: &TenantId, new: NewCommit) -> Result<Recorded> {
        check_fields(&new)?;
        let field = new.delta.field();
        if let Delta::Inline(bytes) = &new.delta {
            self.limits.check_artifact_size(field, bytes.len())?;
        }
        let parent = match &new.parent {
            Some(id) => Some(
                self.stores
                    .meta
                    .get_commit(tenant, id)
                    .await?
                    .ok_or_else(|| super::missing_commit("parent", id))?,
            ),
            None => None,
        };
        let key = self.commit_key(tenant, &new, parent.as_ref());
        if let Some(mv) = &new.ref_move {
            // Refuse a stale expectation before storing anything (unless this
            // is a retry the ref already reflects). The store checks again
            // atomically; losing that race leaves at most an unreferenced
            // artifact, never a half-written checkpoint.
            let current = self
                .stores
                .meta
                .get_ref(tenant, &mv.name)
                .await?
                .map(|r| r.target);
            if current != mv.expected && current != Some(key.id) {
                return Err(crate::store::ref_conflict(
                    &mv.name,
                    mv.expected.as_ref(),
                    current.as_ref(),
                ));
            }
        }
        let ref_move = new.ref_move.clone();
        let Built {
            commit,
            blob,
            warnings,
            ..
        } = self
            .build_commit(
                tenant,
                new,
                parent.as_ref(),
                key,
                self.limits.inline_delta_bytes,
            )
            .await?;
        if let Some(b) = blob {
            self.stores.blobs.put(tenant, b).await?;
        }
        match self
            .stores
            .meta
            .put_commit(tenant, &commit, ref_move.as_ref())
            .await?
        {
            PutCommit::Created(c) => Ok(Recorded {
                commit: c,
                created: true,
                warnings,
            }),
            PutCommit::Existing(c) => Ok(Recorded {
                commit: c,
                created: false,
                warnings,
            }),
        }
    }

    /// The artifact, time and id of `new` over `parent`.
    pub(super) fn commit_key(
        &self,
        tenant: &TenantId,
        new: &NewCommit,
        parent: Option<&Commit>,
    ) -> CommitKey {
        let artifact = match &new.delta {
            Delta::Inline(bytes) => ArtifactRef::of(bytes),
            Delta::Stored(art) => *art,
        };
        let created_at = new
            .created_at
            .map_or_else(|| self.clock.now(), truncate_to_micros);
        let id = CommitId::derive(
            tenant,
            parent.map(|p| &p.id),
            &artifact,
            created_at.timestamp_micros(),
            &new.template,
        );
        CommitKey {
            artifact,
            created_at,
            id,
        }
    }

    /// Checks `new` (over `parent`, with the key [`Service::commit_key`]
    /// gave) and builds its commit: the artifact is made sure of (an
    /// uploaded one), the bytes validated by the format's codec (the
    /// parent's open tool uses included), the counts taken, and the bytes
    /// kept inline when there are at most `inline_limit` of them (else
    /// handed back to be stored as a blob). Writes no metadata: the single
    /// checkpoint and the batch both write what this builds.
    pub(super) async fn build_commit(
        &self,
        tenant: &TenantId,
        new: NewCommit,
        parent: Option<&Commit>,
        key: CommitKey,
        inline_limit: usize,
    ) -> Result<Built> {
        let CommitKey {
            artifact,
            created_at,
            id,
        } = key;
        let field = new.delta.field();
        if matches!(new.delta, Delta::Stored(_)) {
            self.ensure_artifact(tenant, &artifact).await?;
        }
        let codec = self.formats.codec(&new.format).clone();
        // The bytes to check: inline ones, or a structured format's uploaded
        // artifact (opaque formats need only its size).
        let bytes = match &new.delta {
            Delta::Inline(bytes) => Some(bytes.clone()),
            Delta::Stored(_) if codec.structured() => Some(
                self.stores
                    .blobs
                    .get(tenant, &artifact)
                    .await?
                    .ok_or_else(|| missing_artifact(&artifact))?,
            ),
            Delta::Stored(_) => None,
        };
        let mut warnings = Vec::new();
        let counts = match &bytes {
            Some(b) => {
                let compaction = new.commit_type == CommitType::Compaction;
                let checked = validate(codec.clone(), b.clone(), compaction)
                    .await
                    .map_err(|e| e.with_field(field))?;
                let unpaired = self
                    .check_open_results(tenant, parent, &new.format, &checked)
                    .await?;
                if let Some(first) = unpaired.first() {
                    if codec.pairs_tool_results() {
                        return Err(Error::invalid(field, first.clone()));
                    }
                    // A runtime's own log is stored as it wrote it; each
                    // warning says so itself, as the ones below do.
                    warnings = unpaired
                        .into_iter()
                        .map(|w| format!("{w} (stored as written)"))
                        .collect();
                }
                warnings.extend(
                    checked
                        .kept
                        .iter()
                        .map(|k| format!("{} delta: {k} (stored as written)", new.format)),
                );
                checked.counts
            }
            None => Counts::default(),
        };
        // A small delta is stored inline with its commit (one metadata
        // write, no blob); a larger one in the blob store first.
        let mut inline = None;
        let mut blob = None;
        let size = match (&bytes, &new.delta) {
            (Some(b), Delta::Inline(_)) if inline_limit > 0 && b.len() <= inline_limit => {
                inline = Some(b.clone());
                b.len() as u64
            }
            (Some(b), Delta::Inline(_)) => {
                blob = Some(b.clone());
                b.len() as u64
            }
            (Some(b), Delta::Stored(_)) => b.len() as u64,
            (None, _) => self
                .stores
                .blobs
                .stat(tenant, BlobArea::READABLE, &artifact)
                .await?
                .map(|i| i.size)
                .ok_or_else(|| missing_artifact(&artifact))?,
        };
        // Counts are the server's: the codec's for a known format, chars/4
        // of the bytes for opaque ones. A client's token_count is kept apart
        // as the tag `client_token_count`, never used as the count.
        let tokens = if codec.structured() {
            counts.tokens
        } else {
            crate::format::estimate_tokens(size as usize)
        };
        let messages = match counts.messages {
            Some(n) => n,
            None => new.message_count.unwrap_or(0),
        };
        let mut tags = new.tags.unwrap_or_default();
        if let Some(claimed) = new.token_count
            && claimed != tokens
            && tags.len() < limits::TAGS
        {
            tags.entry("client_token_count".to_owned())
                .or_insert_with(|| claimed.to_string());
        }
        let commit = Commit {
            id,
            parent: parent.map(|p| p.id),
            commit_type: new.commit_type,
            artifact_ref: artifact,
            artifact_size: size,
            format: new.format,
            template: new.template,
            principal: new.principal,
            machine: new.machine,
            session_id: new.session_id,
            checkpoint: new.checkpoint,
            ticket_id: new.ticket_id,
            thread_id: new.thread_id,
            summary: new.summary,
            message_count: messages,
            token_count: tokens,
            created_at,
            tags,
            depth: parent.map_or(0, |p| p.depth + 1),
            lineage: parent.map_or(id, |p| p.lineage),
            parent_lineage: parent.map(|p| p.lineage),
            inline,
        };
        Ok(Built {
            commit,
            blob,
            bytes,
            warnings,
        })
    }

    /// Tool results in a new delta whose tool use is not in the delta should
    /// answer a tool use the parent's delta left unanswered: what each one
    /// that does not is, as an error message would say it. An API's format
    /// refuses them; a runtime's own log keeps them with a warning.
    async fn check_open_results(
        &self,
        tenant: &TenantId,
        parent: Option<&Commit>,
        format: &FormatId,
        checked: &Checked,
    ) -> Result<Vec<String>> {
        if checked.open_results.is_empty() {
            return Ok(Vec::new());
        }
        let answerable = match parent {
            // A compaction's summary stands in for the history the tool use
            // was in; it cannot be checked.
            Some(p) if p.commit_type == CommitType::Compaction => return Ok(Vec::new()),
            Some(p) => {
                let codec = self.formats.codec(&p.format);
                if !codec.structured() {
                    return Ok(Vec::new());
                }
                let bytes = self.artifact_of(tenant, p).await?;
                codec
                    .to_canonical(&bytes)
                    .map(|c| c.unanswered_tool_uses())
                    .unwrap_or_default()
            }
            None => Default::default(),
        };
        Ok(checked
            .open_results
            .iter()
            .filter(|r| !answerable.contains(&r.tool_use_id))
            .map(|r| {
                format!(
                    "not a valid {format} delta: at {}: a tool_result answers tool_use {:?}, which is neither earlier in the delta nor left unanswered by the parent's delta{}",
                    r.at,
                    r.tool_use_id,
                    if parent.is_none() {
                        " (there is no parent)"
                    } else {
                        ""
                    }
                )
            })
            .collect())
    }
}

/// The field limits of a new commit.
pub(super) fn check_fields(new: &NewCommit) -> Result<()> {
    commit::check_text("template", &new.template, limits::SHORT_TEXT)?;
    for (field, value) in [
        ("machine", &new.machine),
        ("ticket_id", &new.ticket_id),
        ("thread_id", &new.thread_id),
    ] {
        if let Some(v) = value {
            commit::check_text(field, v, limits::SHORT_TEXT)?;
        }
    }
    if let Some(s) = &new.summary {
        commit::check_summary(s)?;
    }
    if let Some(t) = &new.tags {
        commit::check_tags(t)?;
    }
    if let Some(n) = new.message_count {
        commit::check_count("message_count", n, limits::MESSAGE_COUNT)?;
    }
    if let Some(n) = new.token_count {
        commit::check_count("token_count", n, limits::TOKEN_COUNT)?;
    }
    if new.commit_type == CommitType::Compaction && new.parent.is_none() {
        return Err(Error::invalid(
            "parent",
            "a compaction commit needs a parent: its summary replaces the parent's history",
        ));
    }
    Ok(())
}

/// The error of an `artifact_ref` naming an artifact that is not stored:
/// `NotFound`, naming the field.
pub(super) fn missing_artifact(artifact: &ArtifactRef) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("artifact {artifact} does not exist"),
    )
    .with_field("artifact_ref")
}

/// `bytes` validated by `codec` (and as a compaction when `compaction`):
/// a delta of [`super::trim::TRIM_AFTER_BYTES`] or more is decoded off the
/// async threads, and the allocator trimmed of what decoding it freed (a
/// 51 MB Claude Code delta left ~100 MiB held after its checkpoint
/// otherwise: docs/bench.md, "Memory of a large materialize").
async fn validate(
    codec: std::sync::Arc<dyn crate::format::Codec>,
    bytes: Bytes,
    compaction: bool,
) -> Result<Checked> {
    let run = move |bytes: &Bytes| {
        let checked = codec.validate(bytes)?;
        if compaction {
            codec.check_compaction(bytes)?;
        }
        Ok(checked)
    };
    if bytes.len() < super::trim::TRIM_AFTER_BYTES {
        return run(&bytes);
    }
    tokio::task::spawn_blocking(move || {
        let checked = run(&bytes);
        super::trim::after_decoding(bytes.len());
        checked
    })
    .await
    .map_err(|e| Error::internal(format!("validating a delta panicked: {e}")))?
}
