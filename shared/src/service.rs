//! The operations of ctx, one method each, over the store traits: what the
//! HTTP handlers call in every host (`ctx serve`, each Lambda).
//!
//! Every method takes the caller's tenant first; nothing here can reach
//! another tenant's keys.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::clock::{Clock, truncate_to_micros};
use crate::commit::{self, Commit, CommitType, Tags, Trigger, limits};
use crate::error::{Error, ErrorKind, Result};
use crate::format::translate::{self, Part, Tier};
use crate::format::{Checked, FormatId, Formats};
use crate::id::{ArtifactRef, CommitId, Principal, RefName, TenantId};
use crate::store::{
    BlobStoreExt, MaterializeKey, Materialized, MetadataPatch, PutBlob, PutCommit, RefMove,
    RefRecord, Stores,
};

/// Size limits the service enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest artifact (delta, summary, snapshot) in bytes.
    pub max_artifact_bytes: usize,
    /// The most commits one history call returns.
    pub max_history: usize,
    /// The most refs one listing returns.
    pub max_ref_list: usize,
    /// The largest direct (presigned) upload.
    pub max_upload_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_artifact_bytes: 64 * 1024 * 1024,
            max_history: 1000,
            max_ref_list: 1000,
            max_upload_bytes: 5 * 1024 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// The largest JSON body: an artifact in base64 plus room for fields.
    pub fn max_json_bytes(&self) -> usize {
        self.max_artifact_bytes / 3 * 4 + 1024 * 1024
    }
}

/// The first lineage page of a walk whose length is unknown; later pages
/// grow eightfold, up to [`MAX_WALK_PAGE`].
const FIRST_WALK_PAGE: usize = 64;
/// The largest lineage page a walk asks for.
const MAX_WALK_PAGE: usize = 10_000;
/// Artifact reads in flight at once during materialize.
const FETCH_CONCURRENCY: usize = 16;

/// A checkpoint request: one commit and, optionally, a ref move.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// The previous commit; absent for a root.
    #[serde(default)]
    pub parent: Option<CommitId>,
    /// What the artifact holds.
    pub commit_type: CommitType,
    /// The artifact's format.
    pub format: FormatId,
    /// An artifact uploaded before (`POST /v1/artifacts`).
    #[serde(default)]
    pub artifact_ref: Option<ArtifactRef>,
    /// The delta inline, as UTF-8 text.
    #[serde(default)]
    pub delta: Option<String>,
    /// The delta inline, base64-encoded (standard alphabet, padded).
    #[serde(default)]
    pub delta_base64: Option<String>,
    /// The context template the wrapper used.
    pub template: String,
    /// Who checkpoints.
    #[schema(value_type = String)]
    pub principal: Principal,
    /// The machine it runs on.
    #[serde(default)]
    pub machine: Option<String>,
    /// The wrapper's session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Why it checkpoints.
    pub checkpoint: Trigger,
    /// A ticket the work belongs to.
    #[serde(default)]
    pub ticket_id: Option<String>,
    /// A conversation thread the work belongs to.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// A human-readable summary.
    #[serde(default)]
    pub summary: Option<String>,
    /// Messages in the delta, if the wrapper knows; used only for formats
    /// ctx cannot count itself (opaque ones).
    #[serde(default)]
    pub message_count: Option<u64>,
    /// Tokens in the delta as the wrapper counted them. The server always
    /// stores its own estimate as the commit's `token_count`; a different
    /// claim is kept as the tag `client_token_count`.
    #[serde(default)]
    pub token_count: Option<u64>,
    /// When the wrapper checkpointed; the server's clock when absent. Send
    /// it to make retries idempotent.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// Free-form labels.
    #[serde(default)]
    pub tags: Option<Tags>,
    /// A ref to move to the new commit in the same write.
    #[serde(default, rename = "ref")]
    pub ref_move: Option<RefMove>,
}

impl CheckpointRequest {
    /// A delta checkpoint of `delta` by `principal` at a turn boundary, with
    /// everything optional left out; set the rest with struct update syntax.
    pub fn new(
        principal: Principal,
        template: impl Into<String>,
        format: FormatId,
        delta: impl Into<String>,
    ) -> Self {
        CheckpointRequest {
            parent: None,
            commit_type: CommitType::Delta,
            format,
            artifact_ref: None,
            delta: Some(delta.into()),
            delta_base64: None,
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
        }
    }
}

/// Where a materialization starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// At the nearest compaction or snapshot (the default).
    Compaction,
    /// At the root: the whole original conversation.
    Root,
    /// After the named ancestor.
    After(CommitId),
}

impl Stop {
    /// The stop as it is written in requests and cache keys.
    pub fn key(&self) -> String {
        match self {
            Stop::Compaction => "compaction".into(),
            Stop::Root => "root".into(),
            Stop::After(id) => id.to_string(),
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

impl<'de> Deserialize<'de> for Stop {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: Error| serde::de::Error::custom(e.message))
    }
}

/// A materialize request.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MaterializeRequest {
    /// `compaction` (default), `root`, or a `ctx-…` ancestor.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub stop: Option<Stop>,
    /// The format wanted; the tip's format when absent.
    #[serde(default)]
    pub format: Option<FormatId>,
}

/// A materialized context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MaterializeResponse {
    /// The artifact holding it.
    pub artifact_ref: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// Messages in it.
    pub message_count: u64,
    /// Tokens in it.
    pub token_count: u64,
    /// How it was produced: `native` (every delta was in the format asked
    /// for), `field-level`, `cross-runtime`, `narrative` or `raw`.
    pub tier: String,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// A metadata update: summary and tags are all that may change.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMetadataRequest {
    /// A new summary; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub summary: Option<Option<String>>,
    /// Replaces every tag.
    #[serde(default)]
    pub tags: Option<Tags>,
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// A ref update.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRefRequest {
    /// The commit the ref should point at.
    pub target: CommitId,
    /// The tip the caller believes the ref has; absent to create it.
    #[serde(default)]
    pub expected: Option<CommitId>,
}

/// The service: every operation of ctx.
#[derive(Clone)]
pub struct Service {
    stores: Stores,
    formats: Formats,
    clock: Arc<dyn Clock>,
    limits: Limits,
    folding: Option<Arc<crate::branch::Folding>>,
}

impl Service {
    /// A service over `stores`, with the built-in formats.
    pub fn new(stores: Stores, clock: Arc<dyn Clock>) -> Self {
        Service {
            stores,
            formats: Formats::default(),
            clock,
            limits: Limits::default(),
            folding: None,
        }
    }

    // --- context folding (issue 5): the operations live in branch::ops ---

    /// Enables context folding (`branch_*`, session end) over `folding`.
    pub fn with_folding(mut self, folding: crate::branch::Folding) -> Self {
        self.folding = Some(Arc::new(folding));
        self
    }

    /// The context-folding setup, if enabled.
    pub fn folding(&self) -> Option<&crate::branch::Folding> {
        self.folding.as_deref()
    }

    /// The codecs the service knows.
    pub fn formats(&self) -> &Formats {
        &self.formats
    }

    /// Records a checkpoint like [`Service::checkpoint`], and reports the
    /// budget of the branch it writes into (a warning from 80%, the forced
    /// return at 100%).
    ///
    /// # Errors
    /// As [`Service::checkpoint`]; `Conflict` for a branch that has ended.
    pub async fn checkpoint_with_notice(
        &self,
        tenant: &TenantId,
        req: CheckpointRequest,
    ) -> Result<(Commit, bool, Option<crate::branch::ops::BudgetNotice>)> {
        let branch = self.branch_checkpoint_guard(tenant, &req).await?;
        let (commit, created) = self.checkpoint_unguarded(tenant, req).await?;
        let notice = match (branch, created) {
            (Some(b), true) => {
                self.account_branch_tokens(tenant, &b, commit.token_count)
                    .await?
            }
            _ => None,
        };
        Ok((commit, created, notice))
    }

    // --- end of context folding ---

    /// Replaces the size limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The clock the service reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The stores the service runs on.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    fn check_artifact_size(&self, field: &str, len: usize) -> Result<()> {
        if len > self.limits.max_artifact_bytes {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "{field} is {len} bytes; at most {} are allowed",
                    self.limits.max_artifact_bytes
                ),
            )
            .with_field(field));
        }
        Ok(())
    }

    /// Stores an artifact (idempotent).
    ///
    /// # Errors
    /// `TooLarge` over the artifact limit; `Unavailable`.
    pub async fn upload_artifact(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.check_artifact_size("body", bytes.len())?;
        self.stores.blobs.put(tenant, bytes).await
    }

    /// An artifact's bytes, verified against its hash.
    ///
    /// # Errors
    /// `NotFound`; `Internal` when the stored bytes do not match.
    pub async fn download_artifact(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
    ) -> Result<Bytes> {
        self.stores
            .blobs
            .get(tenant, artifact)
            .await?
            .ok_or_else(|| Error::not_found(format!("artifact {artifact}")))
    }

    /// Records a checkpoint. Returns the commit and whether it was created
    /// (false: the same checkpoint was recorded before).
    ///
    /// # Errors
    /// `Invalid` naming the field for bad input (nothing is written);
    /// `Conflict` with the current tip when the ref moved; `TooLarge`.
    pub async fn checkpoint(
        &self,
        tenant: &TenantId,
        req: CheckpointRequest,
    ) -> Result<(Commit, bool)> {
        let (commit, created, _) = self.checkpoint_with_notice(tenant, req).await?;
        Ok((commit, created))
    }

    /// A checkpoint without the branch budget check (the branch operations'
    /// own writes).
    pub(crate) async fn checkpoint_unguarded(
        &self,
        tenant: &TenantId,
        req: CheckpointRequest,
    ) -> Result<(Commit, bool)> {
        commit::check_text("template", &req.template, limits::SHORT_TEXT)?;
        for (field, value) in [
            ("machine", &req.machine),
            ("session_id", &req.session_id),
            ("ticket_id", &req.ticket_id),
            ("thread_id", &req.thread_id),
        ] {
            if let Some(v) = value {
                commit::check_text(field, v, limits::SHORT_TEXT)?;
            }
        }
        if let Some(s) = &req.summary {
            commit::check_summary(s)?;
        }
        if let Some(t) = &req.tags {
            commit::check_tags(t)?;
        }
        if let Some(n) = req.message_count {
            commit::check_count("message_count", n, limits::MESSAGE_COUNT)?;
        }
        if let Some(n) = req.token_count {
            commit::check_count("token_count", n, limits::TOKEN_COUNT)?;
        }
        if req.commit_type == CommitType::Compaction && req.parent.is_none() {
            return Err(Error::invalid(
                "parent",
                "a compaction commit needs a parent: its summary replaces the parent's history",
            ));
        }
        let inline = match (&req.artifact_ref, &req.delta, &req.delta_base64) {
            (Some(_), None, None) => None,
            (None, Some(text), None) => {
                self.check_artifact_size("delta", text.len())?;
                Some(("delta", Bytes::from(text.clone().into_bytes())))
            }
            (None, None, Some(b64)) => {
                self.check_artifact_size("delta_base64", b64.len() / 4 * 3)?;
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| {
                        Error::invalid(
                            "delta_base64",
                            format!("delta_base64 is not valid base64: {e}"),
                        )
                    })?;
                Some(("delta_base64", Bytes::from(bytes)))
            }
            _ => {
                return Err(Error::invalid(
                    "delta",
                    "give exactly one of artifact_ref, delta and delta_base64",
                ));
            }
        };
        let parent =
            match &req.parent {
                Some(id) => Some(self.stores.meta.get_commit(tenant, id).await?.ok_or_else(
                    || Error::invalid("parent", format!("parent {id} does not exist")),
                )?),
                None => None,
            };
        let artifact = match &inline {
            Some((_, bytes)) => ArtifactRef::of(bytes),
            None => req.artifact_ref.expect("exactly one of the three is set"),
        };
        let created_at = req
            .created_at
            .map_or_else(|| self.clock.now(), truncate_to_micros);
        let id = CommitId::derive(
            tenant,
            parent.as_ref().map(|p| &p.id),
            &artifact,
            created_at.timestamp_micros(),
            &req.template,
        );
        if let Some(mv) = &req.ref_move {
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
            if current != mv.expected && current != Some(id) {
                return Err(crate::store::ref_conflict(
                    &mv.name,
                    mv.expected.as_ref(),
                    current.as_ref(),
                ));
            }
        }
        if req.artifact_ref.is_some() {
            self.ensure_artifact(tenant, &artifact).await?;
        }
        let codec = self.formats.codec(&req.format).clone();
        // The bytes to check: inline ones, or a structured format's uploaded
        // artifact (opaque formats need only its size).
        let (field, bytes) = match inline {
            Some((field, bytes)) => (field, Some(bytes)),
            None if codec.structured() => (
                "artifact_ref",
                Some(
                    self.stores
                        .blobs
                        .get(tenant, &artifact)
                        .await?
                        .ok_or_else(|| {
                            Error::invalid(
                                "artifact_ref",
                                format!("artifact {artifact} does not exist"),
                            )
                        })?,
                ),
            ),
            None => ("artifact_ref", None),
        };
        let counts = match &bytes {
            Some(b) => {
                let checked = codec.validate(b).map_err(|e| e.with_field(field))?;
                if req.commit_type == CommitType::Compaction {
                    codec.check_compaction(b).map_err(|e| e.with_field(field))?;
                }
                self.check_open_results(tenant, parent.as_ref(), &req.format, field, &checked)
                    .await?;
                checked.counts
            }
            None => crate::format::Counts::default(),
        };
        let size = match (bytes, &req.artifact_ref) {
            (Some(b), None) => self.stores.blobs.put(tenant, b).await?.size,
            (Some(b), Some(_)) => b.len() as u64,
            (None, _) => self
                .stores
                .blobs
                .size(tenant, &artifact)
                .await?
                .ok_or_else(|| {
                    Error::invalid(
                        "artifact_ref",
                        format!("artifact {artifact} does not exist"),
                    )
                })?,
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
            None => req.message_count.unwrap_or(0),
        };
        let mut tags = req.tags.unwrap_or_default();
        if let Some(claimed) = req.token_count
            && claimed != tokens
            && tags.len() < limits::TAGS
        {
            tags.entry("client_token_count".to_owned())
                .or_insert_with(|| claimed.to_string());
        }
        let commit = Commit {
            id,
            parent: parent.as_ref().map(|p| p.id),
            commit_type: req.commit_type,
            artifact_ref: artifact,
            artifact_size: size,
            format: req.format,
            template: req.template,
            principal: req.principal,
            machine: req.machine,
            session_id: req.session_id,
            checkpoint: req.checkpoint,
            ticket_id: req.ticket_id,
            thread_id: req.thread_id,
            summary: req.summary,
            message_count: messages,
            token_count: tokens,
            created_at,
            tags,
            depth: parent.as_ref().map_or(0, |p| p.depth + 1),
            lineage: parent.as_ref().map_or(id, |p| p.lineage),
            parent_lineage: parent.as_ref().map(|p| p.lineage),
        };
        match self
            .stores
            .meta
            .put_commit(tenant, &commit, req.ref_move.as_ref())
            .await?
        {
            PutCommit::Created(c) => Ok((c, true)),
            PutCommit::Existing(c) => Ok((c, false)),
        }
    }

    /// Makes sure an artifact named by a checkpoint is stored: present, or
    /// staged by a direct upload, whose bytes are re-hashed before they are
    /// moved into place.
    async fn ensure_artifact(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<u64> {
        if let Some(size) = self.stores.blobs.size(tenant, artifact).await? {
            return Ok(size);
        }
        self.stores
            .blobs
            .promote_upload(tenant, artifact)
            .await?
            .ok_or_else(|| {
                Error::invalid(
                    "artifact_ref",
                    format!("artifact {artifact} does not exist"),
                )
            })
    }

    /// A URL to PUT a large artifact to directly (AWS mode), valid for
    /// fifteen minutes. Checkpointing with `artifact_ref` afterwards verifies
    /// the bytes' hash and moves them into place.
    ///
    /// # Errors
    /// `TooLarge` over the upload limit; `Invalid` when the store cannot
    /// take direct uploads (embedded mode: POST the bytes instead).
    pub async fn upload_url(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        size: u64,
    ) -> Result<crate::store::PresignedUpload> {
        if size > self.limits.max_upload_bytes {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "size is {size} bytes; direct uploads take at most {}",
                    self.limits.max_upload_bytes
                ),
            )
            .with_field("size"));
        }
        let ttl = std::time::Duration::from_secs(15 * 60);
        let mut up = self
            .stores
            .blobs
            .presign_upload(tenant, artifact, size, ttl)
            .await?
            .ok_or_else(|| {
                Error::invalid(
                    "body",
                    "this server's storage takes no direct uploads; POST the bytes to /v1/artifacts",
                )
            })?;
        up.expires_at = self.clock.now() + chrono::Duration::seconds(15 * 60);
        Ok(up)
    }

    /// One commit.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn show(&self, tenant: &TenantId, id: &CommitId) -> Result<Commit> {
        self.stores
            .meta
            .get_commit(tenant, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("commit {id}")))
    }

    /// Changes a commit's summary and tags; artifacts never change.
    ///
    /// # Errors
    /// `NotFound`; `Invalid` for an oversized summary or bad tags.
    pub async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        req: UpdateMetadataRequest,
    ) -> Result<Commit> {
        if let Some(Some(s)) = &req.summary {
            commit::check_summary(s)?;
        }
        if let Some(t) = &req.tags {
            commit::check_tags(t)?;
        }
        let patch = MetadataPatch {
            summary: req.summary,
            tags: req.tags,
        };
        self.stores
            .meta
            .update_metadata(tenant, id, &patch)
            .await?
            .ok_or_else(|| Error::not_found(format!("commit {id}")))
    }

    /// Walks from `tip` towards the root, newest first, through whole
    /// lineage runs (one store query per run page, not per commit), until
    /// `done` says the commit just pushed is the last one wanted.
    ///
    /// `wanted` is how many commits (the tip included) the walk will take if
    /// the caller knows; pages are sized to it, so a linear run costs one
    /// query. Otherwise pages start small and grow.
    async fn walk(
        &self,
        tenant: &TenantId,
        tip: Commit,
        wanted: Option<usize>,
        mut done: impl FnMut(&Commit) -> bool,
    ) -> Result<Vec<Commit>> {
        let mut guess = FIRST_WALK_PAGE;
        let mut next = tip.parent_position();
        let mut expected_parent = tip.parent;
        let stop_now = done(&tip);
        let mut out = vec![tip];
        if stop_now {
            return Ok(out);
        }
        while let Some((lineage, depth)) = next {
            let limit = match wanted {
                Some(w) => w.saturating_sub(out.len()),
                None => {
                    let this = guess;
                    guess = (guess * 8).min(MAX_WALK_PAGE);
                    this
                }
            };
            let limit = limit.clamp(1, MAX_WALK_PAGE).min(
                usize::try_from(depth)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            );
            let page = self
                .stores
                .meta
                .lineage_run(tenant, &lineage, depth, limit)
                .await?;
            if page.is_empty() {
                return Err(Error::internal(format!(
                    "chain is broken: run {lineage} has no commit at depth {depth}"
                )));
            }
            for c in page {
                if Some(c.id) != expected_parent {
                    return Err(Error::internal(format!(
                        "chain is broken: expected {} at depth {}, found {}",
                        expected_parent.map_or_else(|| "nothing".into(), |p| p.to_string()),
                        c.depth,
                        c.id
                    )));
                }
                next = c.parent_position();
                expected_parent = c.parent;
                let stop = done(&c);
                let leaves_run = c.parent_lineage != Some(c.lineage);
                out.push(c);
                if stop || next.is_none() {
                    return Ok(out);
                }
                if leaves_run {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The commits from `id` towards the root, newest first, at most `depth`.
    ///
    /// # Errors
    /// `NotFound`; `Invalid` for a depth of 0 or over the limit.
    pub async fn history(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        depth: usize,
    ) -> Result<Vec<Commit>> {
        if depth == 0 || depth > self.limits.max_history {
            return Err(Error::invalid(
                "depth",
                format!("depth is {depth}; give 1 to {}", self.limits.max_history),
            ));
        }
        let tip = self.show(tenant, id).await?;
        let mut n = 0;
        self.walk(tenant, tip, Some(depth), |_| {
            n += 1;
            n >= depth
        })
        .await
    }

    /// Rebuilds the context at `id`: walks to the stop point, joins the
    /// deltas in order, stores the result as an artifact and caches it per
    /// (commit, stop, format).
    ///
    /// # Errors
    /// `NotFound` for the commit; `Invalid` for an unknown stop, a stop that
    /// is not an ancestor, or a format the chain cannot be turned into.
    pub async fn materialize(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        req: MaterializeRequest,
    ) -> Result<MaterializeResponse> {
        let stop = req.stop.unwrap_or(Stop::Compaction);
        let tip = self.show(tenant, id).await?;
        let format = req.format.unwrap_or_else(|| tip.format.clone());
        let key = MaterializeKey {
            commit: *id,
            stop: stop.key(),
            format: format.clone(),
        };
        if let Some(m) = self.stores.meta.get_materialized(tenant, &key).await? {
            return Ok(response(m, true));
        }
        let parts = self.contributing_commits(tenant, tip, stop).await?;
        let wanted: Vec<(CommitId, ArtifactRef)> =
            parts.iter().map(|c| (c.id, c.artifact_ref)).collect();
        let bytes: Vec<Bytes> = stream::iter(wanted)
            .map(|(id, art)| {
                let (blobs, tenant) = (self.stores.blobs.clone(), tenant.clone());
                async move {
                    blobs.get(&tenant, &art).await?.ok_or_else(|| {
                        Error::internal(format!(
                            "artifact {art} of commit {id} is missing from storage"
                        ))
                    })
                }
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let codec = self.formats.codec(&format).clone();
        let m = if parts.iter().all(|c| c.format == format) {
            let joined = codec.concat(&bytes)?;
            let put = self.stores.blobs.put(tenant, joined).await?;
            Materialized {
                artifact_ref: put.artifact,
                size: put.size,
                message_count: parts.iter().map(|c| c.message_count).sum(),
                token_count: parts.iter().map(|c| c.token_count).sum(),
                tier: Tier::Native.as_str().into(),
            }
        } else {
            let translate_parts: Vec<Part> = parts
                .iter()
                .zip(bytes)
                .map(|(c, b)| Part {
                    origin: format!("commit {}", c.id),
                    format: c.format.clone(),
                    bytes: b,
                })
                .collect();
            let formats = self.formats.clone();
            let target = format.clone();
            let out = tokio::task::spawn_blocking(move || {
                translate::translate(&formats, &translate_parts, &target)
            })
            .await
            .map_err(|e| Error::internal(format!("translation panicked: {e}")))??;
            let counts = codec.count(&out.bytes);
            let put = self.stores.blobs.put(tenant, out.bytes).await?;
            Materialized {
                artifact_ref: put.artifact,
                size: put.size,
                message_count: counts
                    .messages
                    .unwrap_or_else(|| parts.iter().map(|c| c.message_count).sum()),
                token_count: counts.tokens,
                tier: out.tier.as_str().into(),
            }
        };
        self.stores.meta.put_materialized(tenant, &key, &m).await?;
        Ok(response(m, false))
    }

    /// Tool results in a new delta whose tool use is not in the delta must
    /// answer a tool use the parent's delta left unanswered.
    async fn check_open_results(
        &self,
        tenant: &TenantId,
        parent: Option<&Commit>,
        format: &FormatId,
        field: &str,
        checked: &Checked,
    ) -> Result<()> {
        if checked.open_results.is_empty() {
            return Ok(());
        }
        let answerable = match parent {
            // A compaction's summary stands in for the history the tool use
            // was in; it cannot be checked.
            Some(p) if p.commit_type == CommitType::Compaction => return Ok(()),
            Some(p) => {
                let codec = self.formats.codec(&p.format);
                if !codec.structured() {
                    return Ok(());
                }
                let bytes = self
                    .stores
                    .blobs
                    .get(tenant, &p.artifact_ref)
                    .await?
                    .ok_or_else(|| {
                        Error::internal(format!(
                            "artifact {} of commit {} is missing",
                            p.artifact_ref, p.id
                        ))
                    })?;
                codec
                    .to_canonical(&bytes)
                    .map(|c| c.unanswered_tool_uses())
                    .unwrap_or_default()
            }
            None => Default::default(),
        };
        match checked
            .open_results
            .iter()
            .find(|r| !answerable.contains(&r.tool_use_id))
        {
            None => Ok(()),
            Some(r) => Err(Error::invalid(
                field,
                format!(
                    "not a valid {format} delta: at {}: a tool_result answers tool_use {:?}, which is neither earlier in the delta nor left unanswered by the parent's delta{}",
                    r.at,
                    r.tool_use_id,
                    if parent.is_none() {
                        " (there is no parent)"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    /// The commits whose artifacts make up the context at `tip` for `stop`,
    /// oldest first.
    async fn contributing_commits(
        &self,
        tenant: &TenantId,
        tip: Commit,
        stop: Stop,
    ) -> Result<Vec<Commit>> {
        let mut path = match stop {
            Stop::Compaction => {
                self.walk(tenant, tip, None, |c| {
                    matches!(c.commit_type, CommitType::Compaction | CommitType::Snapshot)
                })
                .await?
            }
            Stop::Root => {
                let wanted = usize::try_from(tip.depth).ok().map(|d| d.saturating_add(1));
                self.walk(tenant, tip, wanted, |_| false).await?
            }
            Stop::After(ancestor) => {
                let a = self
                    .stores
                    .meta
                    .get_commit(tenant, &ancestor)
                    .await?
                    .ok_or_else(|| {
                        Error::invalid("stop", format!("stop {ancestor} does not exist"))
                    })?;
                if a.depth > tip.depth {
                    return Err(not_an_ancestor(&ancestor, &tip.id));
                }
                let tip_id = tip.id;
                let wanted = usize::try_from(tip.depth - a.depth)
                    .ok()
                    .map(|d| d.saturating_add(1));
                let mut path = self
                    .walk(tenant, tip, wanted, |c| c.depth <= a.depth)
                    .await?;
                match path.pop() {
                    Some(last) if last.id == ancestor => path,
                    _ => return Err(not_an_ancestor(&ancestor, &tip_id)),
                }
            }
        };
        path.reverse();
        if stop != Stop::Compaction {
            // The original conversation: summaries and snapshots that stand
            // in for earlier history are skipped; a parentless snapshot
            // (an imported context) is where the history starts. A
            // compaction in a format whose own log records it (a Claude Code
            // transcript holds its compact_boundary and summary lines) is
            // part of that history and stays (docs/adr/0003).
            path.retain(|c| {
                c.commit_type == CommitType::Delta
                    || c.parent.is_none()
                    || (c.commit_type == CommitType::Compaction
                        && self.formats.codec(&c.format).compaction_in_history())
            });
        }
        Ok(path)
    }

    /// The newest commit of `principal` at or before `at` (default: now).
    ///
    /// # Errors
    /// `NotFound` when the principal has no commit by then.
    pub async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: Option<DateTime<Utc>>,
    ) -> Result<CommitId> {
        let at = at.unwrap_or_else(|| self.clock.now());
        self.stores
            .meta
            .resolve(tenant, principal, at)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "a commit of {principal} at or before {}",
                    at.to_rfc3339()
                ))
            })
    }

    /// A ref.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<RefRecord> {
        self.stores
            .meta
            .get_ref(tenant, name)
            .await?
            .ok_or_else(|| Error::not_found(format!("ref {name}")))
    }

    /// Creates or moves a ref by compare-and-swap.
    ///
    /// # Errors
    /// `Invalid` when the target does not exist; `Conflict` with the
    /// current tip when `expected` is stale.
    pub async fn set_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        req: SetRefRequest,
    ) -> Result<RefRecord> {
        if self
            .stores
            .meta
            .get_commit(tenant, &req.target)
            .await?
            .is_none()
        {
            return Err(Error::invalid(
                "target",
                format!("target {} does not exist", req.target),
            ));
        }
        self.stores
            .meta
            .cas_ref(
                tenant,
                name,
                req.expected.as_ref(),
                &req.target,
                self.clock.now(),
            )
            .await
    }

    /// Refs whose names start with `prefix`.
    ///
    /// # Errors
    /// `Invalid` for a limit of 0 or over the maximum.
    pub async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        if limit == 0 || limit > self.limits.max_ref_list {
            return Err(Error::invalid(
                "limit",
                format!("limit is {limit}; give 1 to {}", self.limits.max_ref_list),
            ));
        }
        self.stores.meta.list_refs(tenant, prefix, limit).await
    }
}

fn not_an_ancestor(stop: &CommitId, tip: &CommitId) -> Error {
    Error::invalid("stop", format!("stop {stop} is not an ancestor of {tip}"))
}

fn response(m: Materialized, cached: bool) -> MaterializeResponse {
    MaterializeResponse {
        artifact_ref: m.artifact_ref,
        size: m.size,
        message_count: m.message_count,
        token_count: m.token_count,
        tier: m.tier,
        cached,
    }
}
