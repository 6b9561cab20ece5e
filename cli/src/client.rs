//! The typed client of the ctx API, used by every client command and by
//! `ctx mcp`: one method per route, taking and returning the types the
//! server itself uses (`ctx_core::wire`, [`Commit`], [`RefRecord`],
//! [`PresignedUpload`]), so a change of the contract breaks this crate's
//! build instead of a running client.
//!
//! Every URL is the path of an operation declared in `ctx_core::wire`,
//! filled in one place, `Req`, with each path segment
//! and query value percent-encoded. Errors are read from ctx's error body;
//! the status stands in only when the body is not ctx's (a proxy's 502).

use chrono::{DateTime, SecondsFormat, Utc};
use ctx_core::api::error::{ErrorBody, kind_of};
use ctx_core::api::{BUDGET_WARNING, CHECKPOINT_WARNING};
use ctx_core::wire::{
    self, Commit, Context, FileVersion, Operation, Pin, PresignedUpload, RefRecord,
};
use ctx_core::wire::{
    AgentSettings, AssembledContextResponse, Cleared, PatchAgentRequest, ProcessList,
    PutProcessRequest, RestoreRequest, RestoreResponse, Restored, RunningProcess, SaveId, SaveList,
    SaveRecord, SaveRequest, SessionFile, Window, WorkingContextSnapshot, WorkingContextStored,
};
use ctx_core::wire::{
    ArtifactInfo, BatchRequest, BatchResponse, BranchCreateRequest, BranchCreated,
    BranchReturnRequest, BranchReturned, BranchStatusResponse, CheckpointRequest, CompactRequest,
    CompactResponse, Erased, EvictRequest, Evicted, FileList, HistoryResponse, MaterializeRequest,
    MaterializeResponse, MemorySearchResponse, MissingSummaryList, PinChanged, PinList,
    ReadRequest, ReadResponse, RefList, ResolveResponse, SessionEnded, SetRefRequest,
    SummarizeRequest, UpdateMetadataRequest, UploadRequest,
};
use ctx_core::workspace::{FilePath, WorkspaceId};
use ctx_core::{
    ArtifactRef, BranchId, CommitId, Error, ErrorKind, Principal, RefName, Result, SessionId,
};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Above this many bytes a checkpoint's delta is PUT straight to storage
/// first where the server hands out upload URLs: on AWS a request passes
/// API Gateway and Lambda, which carry at most 6 MB, a JSON body's base64
/// of bytes in base64 again.
pub const DIRECT_UPLOAD_BYTES: usize = 3 * 1024 * 1024;

/// Talks to one ctx server with one token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    token_hint: Option<String>,
}

/// What [`UploadArtifact`](wire::UploadArtifact) answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// The artifact and its size.
    pub artifact: ArtifactInfo,
    /// False when the bytes were stored before (200 instead of 201).
    pub created: bool,
}

/// What [`Checkpoint`](wire::Checkpoint) answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReply {
    /// The new commit, or the one recorded before by the same request.
    pub commit: Commit,
    /// False when the same checkpoint was recorded before (200, not 201).
    pub created: bool,
    /// The `ctx-budget-warning` header: a checkpoint into a branch at 80%
    /// or more of its budget, or the one that exhausted it.
    pub budget_warning: Option<String>,
    /// The `ctx-warning` headers: what was stored as written although it
    /// looks wrong (a transcript's tool result answering no tool use).
    pub warnings: Vec<String>,
}

impl Client {
    /// A client of the server at `base` (`http://127.0.0.1:7878`, or a URL
    /// with a path prefix such as an API Gateway stage).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Client {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            token,
            token_hint: None,
        }
    }

    /// A client of the same server on the same connection pool, with
    /// `token` (no hint).
    pub fn with_token(&self, token: Option<String>) -> Self {
        Client {
            http: self.http.clone(),
            base: self.base.clone(),
            token,
            token_hint: None,
        }
    }

    /// The same client with a limit on each request's whole time.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> reqwest::Result<Self> {
        self.http = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(self)
    }

    /// What to tell the user when the server wants a token: where one was
    /// looked for and how to get one.
    pub fn with_token_hint(mut self, hint: impl Into<String>) -> Self {
        self.token_hint = Some(hint.into());
        self
    }

    /// [`Healthz`](wire::Healthz): the server's liveness answer (`ok`).
    ///
    /// # Errors
    /// `Unavailable` when the server cannot be reached; the server's error.
    pub async fn healthz(&self) -> Result<String> {
        let bytes = self
            .bytes(Req::<wire::Healthz>::new(&[]), Body::Empty)
            .await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// [`OpenapiJson`](wire::OpenapiJson): the OpenAPI document (free-form JSON).
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn openapi_json(&self) -> Result<serde_json::Value> {
        self.json(Req::<wire::OpenapiJson>::new(&[]), Body::Empty)
            .await
    }

    /// [`UploadArtifact`](wire::UploadArtifact): stores `bytes` as an artifact.
    ///
    /// # Errors
    /// `TooLarge` beyond the server's artifact limit; as [`Client::healthz`].
    pub async fn upload_artifact(&self, bytes: Vec<u8>) -> Result<Uploaded> {
        let resp = self
            .send(Req::<wire::UploadArtifact>::new(&[]), Body::Bytes(bytes))
            .await?;
        let created = resp.status() == StatusCode::CREATED;
        Ok(Uploaded {
            artifact: decode(resp).await?,
            created,
        })
    }

    /// [`UploadUrl`](wire::UploadUrl): a URL to PUT a large artifact to directly.
    ///
    /// # Errors
    /// `Invalid` where the store has no direct uploads; as [`Client::healthz`].
    pub async fn upload_url(&self, req: &UploadRequest) -> Result<PresignedUpload> {
        self.json(
            Req::<wire::UploadUrl>::new(&[]),
            Body::of::<wire::UploadUrl>(req)?,
        )
        .await
    }

    /// [`DownloadArtifact`](wire::DownloadArtifact): an artifact's bytes, checked against
    /// the ref. A large one answers 303 to storage, followed without the
    /// bearer token (reqwest drops it on the way to another origin): its
    /// bytes never passed the server's check.
    ///
    /// # Errors
    /// `NotFound`; `Internal` when the bytes do not hash to `art`; as
    /// [`Client::healthz`].
    pub async fn download_artifact(&self, art: &ArtifactRef) -> Result<Vec<u8>> {
        let bytes = self
            .bytes(Req::<wire::DownloadArtifact>::new(&[art]), Body::Empty)
            .await?;
        ctx_core::store::verify(art, &bytes)?;
        Ok(bytes)
    }

    /// The delta of `req` PUT straight to storage when it is over
    /// [`DIRECT_UPLOAD_BYTES`] and the server hands out upload URLs: its
    /// ref, for the checkpoint to name; `None` when the delta stays in the
    /// request.
    async fn upload_large_delta(&self, req: &CheckpointRequest) -> Result<Option<ArtifactRef>> {
        let bytes = match (&req.delta, &req.delta_base64) {
            (Some(text), _) if text.len() > DIRECT_UPLOAD_BYTES => text.as_bytes().to_vec(),
            (_, Some(b64)) if b64.len() / 4 * 3 > DIRECT_UPLOAD_BYTES => {
                ctx_core::body_text::decode_base64(b64.clone())
                    .map_err(|e| {
                        Error::invalid("delta_base64", format!("the delta is not base64: {e}"))
                    })?
                    .to_vec()
            }
            _ => return Ok(None),
        };
        let artifact_ref = ArtifactRef::of(&bytes);
        let up = match self
            .upload_url(&UploadRequest {
                artifact_ref,
                size: bytes.len() as u64,
            })
            .await
        {
            Ok(up) => up,
            // Embedded storage takes no direct uploads: the bytes go in
            // the request.
            Err(e) if e.kind == ErrorKind::Invalid && e.field.as_deref() == Some("body") => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let method = Method::from_bytes(up.method.as_bytes()).map_err(|_| {
            Error::internal(format!("the upload method {:?} is not HTTP", up.method))
        })?;
        let mut put = self.http.request(method, &up.url);
        for (k, v) in &up.headers {
            put = put.header(k, v);
        }
        let resp = put
            .body(bytes)
            .send()
            .await
            .map_err(|e| Error::unavailable(format!("the direct upload failed: {e}")))?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            return Err(Error::new(
                kind_of(status),
                format!(
                    "storage refused the direct upload: {status} {}",
                    body.trim()
                ),
            ));
        }
        Ok(Some(artifact_ref))
    }

    /// [`Checkpoint`](wire::Checkpoint): records a checkpoint.
    ///
    /// # Errors
    /// `Invalid`, `Conflict` (a ref moved, a branch's budget is spent); as
    /// [`Client::healthz`].
    ///
    /// A delta over [`DIRECT_UPLOAD_BYTES`] leaves the JSON: where the
    /// server hands out upload URLs (aws) it is PUT straight to storage
    /// and the checkpoint names it.
    pub async fn checkpoint(&self, req: &CheckpointRequest) -> Result<CheckpointReply> {
        let direct;
        let req = match self.upload_large_delta(req).await? {
            Some(artifact_ref) => {
                direct = CheckpointRequest {
                    artifact_ref: Some(artifact_ref),
                    delta: None,
                    delta_base64: None,
                    ..req.clone()
                };
                &direct
            }
            None => req,
        };
        let resp = self
            .send(
                Req::<wire::Checkpoint>::new(&[]),
                Body::of::<wire::Checkpoint>(req)?,
            )
            .await?;
        let created = resp.status() == StatusCode::CREATED;
        let budget_warning = resp
            .headers()
            .get(BUDGET_WARNING)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let warnings = resp
            .headers()
            .get_all(CHECKPOINT_WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        Ok(CheckpointReply {
            commit: decode(resp).await?,
            created,
            budget_warning,
            warnings,
        })
    }

    /// [`Batch`](wire::Batch): commits, artifacts and ref moves as one atomic
    /// write; the commits as stored and the refs as moved.
    ///
    /// # Errors
    /// `Invalid` naming the field; `Conflict` (a ref moved: nothing is
    /// written); `TooLarge`; as [`Client::healthz`].
    pub async fn batch(&self, req: &BatchRequest) -> Result<BatchResponse> {
        self.json(Req::<wire::Batch>::new(&[]), Body::of::<wire::Batch>(req)?)
            .await
    }

    /// [`GetCommit`](wire::GetCommit): one commit.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_commit(&self, id: &CommitId) -> Result<Commit> {
        self.json(Req::<wire::GetCommit>::new(&[id]), Body::Empty)
            .await
    }

    /// [`UpdateMetadata`](wire::UpdateMetadata): changes a commit's summary and tags.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn update_metadata(
        &self,
        id: &CommitId,
        req: &UpdateMetadataRequest,
    ) -> Result<Commit> {
        self.json(
            Req::<wire::UpdateMetadata>::new(&[id]),
            Body::of::<wire::UpdateMetadata>(req)?,
        )
        .await
    }

    /// [`History`](wire::History): commits from `id` towards
    /// the root, newest first (the server's default depth when `None`).
    ///
    /// # Errors
    /// `NotFound`, `Invalid` (depth); as [`Client::healthz`].
    pub async fn history(&self, id: &CommitId, depth: Option<usize>) -> Result<HistoryResponse> {
        self.history_page(id, depth, None).await
    }

    /// [`History`](wire::History) from `cursor` on (the `next` of an
    /// earlier page of `id`'s history), or from `id` without one.
    ///
    /// # Errors
    /// `NotFound`, `Invalid` (depth, cursor); as [`Client::healthz`].
    pub async fn history_page(
        &self,
        id: &CommitId,
        depth: Option<usize>,
        cursor: Option<&CommitId>,
    ) -> Result<HistoryResponse> {
        self.json(
            Req::<wire::History>::new(&[id])
                .query_opt("depth", depth)
                .query_opt("cursor", cursor),
            Body::Empty,
        )
        .await
    }

    /// [`MissingSummaries`](wire::MissingSummaries): commits
    /// lacking a summary, oldest first, with their queue state.
    ///
    /// # Errors
    /// `Invalid` (limit, cursor); as [`Client::healthz`].
    pub async fn missing_summaries(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<MissingSummaryList> {
        let req = Req::<wire::MissingSummaries>::new(&[])
            .query("missing_summary", true)
            .query_opt("limit", limit)
            .query_opt("cursor", cursor);
        self.json(req, Body::Empty).await
    }

    /// [`Summarize`](wire::Summarize): summarizes one commit now.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when it has a summary and `force` is not set;
    /// `Unavailable` without a summarizer; as [`Client::healthz`].
    pub async fn summarize(&self, id: &CommitId, req: &SummarizeRequest) -> Result<Commit> {
        self.json(
            Req::<wire::Summarize>::new(&[id]),
            Body::of::<wire::Summarize>(req)?,
        )
        .await
    }

    /// [`Gc`](wire::Gc): one page of garbage collection of the caller's
    /// artifacts (or, with `dry_run`, what it would remove).
    ///
    /// # Errors
    /// `Invalid` for a cursor no call handed out; as [`Client::healthz`].
    pub async fn gc(&self, req: &ctx_core::wire::GcRequest) -> Result<ctx_core::wire::GcReport> {
        self.json(Req::<wire::Gc>::new(&[]), Body::json(req)?).await
    }

    /// [`Compact`](wire::Compact): summarizes the context at `id` into
    /// a compaction commit on top of it.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`, `Conflict` when the ref moved, `Unavailable`
    /// when the summarizer fails; as [`Client::healthz`].
    pub async fn compact(&self, id: &CommitId, req: &CompactRequest) -> Result<CompactResponse> {
        self.json(
            Req::<wire::Compact>::new(&[id]),
            Body::of::<wire::Compact>(req)?,
        )
        .await
    }

    /// [`Materialize`](wire::Materialize): rebuilds the context at `id`.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn materialize(
        &self,
        id: &CommitId,
        req: &MaterializeRequest,
    ) -> Result<MaterializeResponse> {
        self.json(
            Req::<wire::Materialize>::new(&[id]),
            Body::of::<wire::Materialize>(req)?,
        )
        .await
    }

    /// [`Read`](wire::Read): the context at a ref's tip or a commit, with its
    /// bytes inline when they are at most 1 MiB.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn read(&self, req: &ReadRequest) -> Result<ReadResponse> {
        self.json(Req::<wire::Read>::new(&[]), Body::of::<wire::Read>(req)?)
            .await
    }

    /// A [`Client::read`] and its bytes: inline when they came so, else a
    /// [`Client::download_artifact`] of the result (only when too large to
    /// come inline).
    ///
    /// # Errors
    /// As both.
    pub async fn read_bytes(&self, req: &ReadRequest) -> Result<(ReadResponse, Vec<u8>)> {
        let mut r = self.read(req).await?;
        let bytes = match (r.content.take(), r.content_base64.take()) {
            (Some(text), _) => text.into_bytes(),
            (None, Some(b64)) => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| {
                        Error::internal(format!(
                            "the server sent content_base64 that is not base64: {e}"
                        ))
                    })?
            }
            (None, None) => self.download_artifact(&r.result.artifact_ref).await?,
        };
        Ok((r, bytes))
    }

    /// The context at `id` and its bytes: [`Client::read_bytes`] of it.
    ///
    /// # Errors
    /// As [`Client::read_bytes`].
    pub async fn materialize_and_download(
        &self,
        id: &CommitId,
        req: &MaterializeRequest,
    ) -> Result<(MaterializeResponse, Vec<u8>)> {
        let (r, bytes) = self
            .read_bytes(&ReadRequest {
                commit: Some(Some(*id)),
                stop: req.stop,
                format: req.format.clone(),
                ..ReadRequest::default()
            })
            .await?;
        let m = MaterializeResponse {
            result: r.result,
            cached: r.cached,
        };
        Ok((m, bytes))
    }

    /// [`Resolve`](wire::Resolve): the newest commit of `principal`
    /// at or before `at` (now when `None`).
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn resolve(
        &self,
        principal: &Principal,
        at: Option<DateTime<Utc>>,
    ) -> Result<ResolveResponse> {
        self.json(
            Req::<wire::Resolve>::new(&[])
                .query("principal", principal)
                .query_opt(
                    "at",
                    at.map(|at| at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
                ),
            Body::Empty,
        )
        .await
    }

    /// [`ListRefs`](wire::ListRefs): refs whose names start with `prefix`,
    /// by name (the server's default limit when `None`).
    ///
    /// # Errors
    /// `Invalid` (limit); as [`Client::healthz`].
    pub async fn list_refs(&self, prefix: &str, limit: Option<usize>) -> Result<RefList> {
        self.list_refs_after(prefix, limit, None).await
    }

    /// [`ListRefs`](wire::ListRefs): as [`Client::list_refs`], from
    /// the name after `after` (a page's `next`).
    ///
    /// # Errors
    /// As [`Client::list_refs`].
    pub async fn list_refs_after(
        &self,
        prefix: &str,
        limit: Option<usize>,
        after: Option<&str>,
    ) -> Result<RefList> {
        let req = Req::<wire::ListRefs>::new(&[])
            .query("prefix", prefix)
            .query_opt("limit", limit)
            .query_opt("after", after);
        self.json(req, Body::Empty).await
    }

    /// [`GetRef`](wire::GetRef): a ref.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_ref(&self, name: &RefName) -> Result<RefRecord> {
        self.json(Req::<wire::GetRef>::new(&[name]), Body::Empty)
            .await
    }

    /// [`SetRef`](wire::SetRef): creates a ref, or moves it by compare-and-swap.
    ///
    /// # Errors
    /// `Conflict` with `current` when `expected` is stale; as
    /// [`Client::healthz`].
    pub async fn set_ref(&self, name: &RefName, req: &SetRefRequest) -> Result<RefRecord> {
        self.json(
            Req::<wire::SetRef>::new(&[name]),
            Body::of::<wire::SetRef>(req)?,
        )
        .await
    }

    /// [`DeleteRef`](wire::DeleteRef): removes the ref alone, by compare-and-swap
    /// when `expected` is given.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` with `current` when `expected` is stale; as
    /// [`Client::healthz`].
    pub async fn delete_ref(
        &self,
        name: &RefName,
        expected: Option<&CommitId>,
    ) -> Result<RefRecord> {
        let req = Req::<wire::DeleteRef>::new(&[name]).query_opt("expected", expected);
        self.json(req, Body::Empty).await
    }

    /// [`EvictRef`](wire::EvictRef): drops the deltas older than the
    /// compaction or snapshot `req.before` on the ref's path, keeping
    /// their metadata.
    ///
    /// # Errors
    /// `NotFound` for the ref; `Invalid` (field `before`); as
    /// [`Client::healthz`].
    pub async fn evict_ref(&self, name: &RefName, req: &EvictRequest) -> Result<Evicted> {
        self.json(
            Req::<wire::EvictRef>::new(&[name]),
            Body::of::<wire::EvictRef>(req)?,
        )
        .await
    }

    /// [`EraseSession`](wire::EraseSession): erases a session (and, with `cascade`,
    /// the commits of other sessions descending from it).
    ///
    /// # Errors
    /// `NotFound`; `Conflict` listing the forks without `cascade`; as
    /// [`Client::healthz`].
    pub async fn erase_session(&self, session: &SessionId, cascade: bool) -> Result<Erased> {
        let req = Req::<wire::EraseSession>::new(&[session])
            .query_opt("cascade", cascade.then_some(true));
        self.json(req, Body::Empty).await
    }

    /// [`ErasePrincipal`](wire::ErasePrincipal): erases a principal.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` listing the descendants without `cascade`;
    /// as [`Client::healthz`].
    pub async fn erase_principal(&self, principal: &Principal, cascade: bool) -> Result<Erased> {
        let req = Req::<wire::ErasePrincipal>::new(&[principal])
            .query_opt("cascade", cascade.then_some(true));
        self.json(req, Body::Empty).await
    }

    /// [`ListPins`](wire::ListPins): the tenant's pins.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_pins(&self) -> Result<PinList> {
        self.json(Req::<wire::ListPins>::new(&[]), Body::Empty)
            .await
    }

    /// [`SetPin`](wire::SetPin): pins a session or a ref.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn set_pin(&self, pin: &Pin) -> Result<PinChanged> {
        let req = Req::<wire::SetPin>::new(&[&pin.kind(), &pin.name()]);
        self.json(req, Body::Empty).await
    }

    /// [`DeletePin`](wire::DeletePin): unpins a session or a ref.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn delete_pin(&self, pin: &Pin) -> Result<PinChanged> {
        let req = Req::<wire::DeletePin>::new(&[&pin.kind(), &pin.name()]);
        self.json(req, Body::Empty).await
    }

    /// [`BranchCreate`](wire::BranchCreate): starts an isolated branch of a session.
    ///
    /// # Errors
    /// `Invalid`, `NotFound` (parent branch), `RateLimited`; as
    /// [`Client::healthz`].
    pub async fn branch_create(&self, req: &BranchCreateRequest) -> Result<BranchCreated> {
        self.json(
            Req::<wire::BranchCreate>::new(&[]),
            Body::of::<wire::BranchCreate>(req)?,
        )
        .await
    }

    /// [`GetBranchStatus`](wire::GetBranchStatus): a branch's status.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn branch_status(&self, id: &BranchId) -> Result<BranchStatusResponse> {
        self.json(Req::<wire::GetBranchStatus>::new(&[id]), Body::Empty)
            .await
    }

    /// [`BranchStatusOfSession`](wire::BranchStatusOfSession): a session's active branch, if any.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn branch_status_of_session(
        &self,
        session: &SessionId,
    ) -> Result<BranchStatusResponse> {
        let req = Req::<wire::BranchStatusOfSession>::new(&[]).query("session_id", session);
        self.json(req, Body::Empty).await
    }

    /// [`BranchReturn`](wire::BranchReturn): hands a branch's result back.
    ///
    /// # Errors
    /// `NotFound`, `Conflict` (already ended); as [`Client::healthz`].
    pub async fn branch_return(
        &self,
        id: &BranchId,
        req: &BranchReturnRequest,
    ) -> Result<BranchReturned> {
        self.json(
            Req::<wire::BranchReturn>::new(&[id]),
            Body::of::<wire::BranchReturn>(req)?,
        )
        .await
    }

    /// [`SessionEnd`](wire::SessionEnd): force-returns a session's branches.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn session_end(&self, session: &SessionId) -> Result<SessionEnded> {
        self.json(Req::<wire::SessionEnd>::new(&[session]), Body::Empty)
            .await
    }

    /// [`MemorySearch`](wire::MemorySearch): memories of
    /// ended branches matching `q.text`, best first.
    ///
    /// # Errors
    /// `Invalid` naming the parameter; as [`Client::healthz`].
    pub async fn memory_search(&self, q: &MemorySearchParams<'_>) -> Result<MemorySearchResponse> {
        let req = Req::<wire::MemorySearch>::new(&[])
            .query("q", q.text)
            .query_opt("limit", q.limit)
            .query_opt("min_confidence", q.min_confidence)
            .query_opt("kind", q.kind);
        self.json(req, Body::Empty).await
    }

    /// [`ListFiles`](wire::ListFiles): a workspace's files.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_files(&self, ws: &WorkspaceId, prefix: &str) -> Result<FileList> {
        self.json(
            Req::<wire::ListFiles>::new(&[ws]).query("prefix", prefix),
            Body::Empty,
        )
        .await
    }

    /// [`GetFile`](wire::GetFile): a file's bytes and version.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_file(&self, ws: &WorkspaceId, path: &FilePath) -> Result<(Vec<u8>, CommitId)> {
        let resp = self
            .send_if(Req::<wire::GetFile>::new(&[ws, path]), Body::Empty, None)
            .await?;
        let version = resp
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim_matches('"').parse().ok())
            .ok_or_else(|| Error::internal("the server sent a file without its version (ETag)"))?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?;
        Ok((bytes.to_vec(), version))
    }

    /// [`PutFile`](wire::PutFile): writes a file whole; with
    /// `if_match`, only over that version.
    ///
    /// # Errors
    /// `Conflict` (412) when `if_match` is stale; as [`Client::healthz`].
    pub async fn put_file(
        &self,
        ws: &WorkspaceId,
        path: &FilePath,
        bytes: Vec<u8>,
        if_match: Option<&CommitId>,
    ) -> Result<FileVersion> {
        decode(
            self.send_if(
                Req::<wire::PutFile>::new(&[ws, path]),
                Body::Bytes(bytes),
                if_match,
            )
            .await?,
        )
        .await
    }

    /// [`DeleteFile`](wire::DeleteFile).
    ///
    /// # Errors
    /// `NotFound`; `Conflict` (412) when `if_match` is stale.
    pub async fn delete_file(
        &self,
        ws: &WorkspaceId,
        path: &FilePath,
        if_match: Option<&CommitId>,
    ) -> Result<()> {
        self.send_if(
            Req::<wire::DeleteFile>::new(&[ws, path]),
            Body::Empty,
            if_match,
        )
        .await?;
        Ok(())
    }

    /// [`AppendFile`](wire::AppendFile): appends JSONL lines.
    ///
    /// # Errors
    /// `Invalid` for a line that is not JSON; as [`Client::healthz`].
    pub async fn append_file(
        &self,
        ws: &WorkspaceId,
        path: &FilePath,
        lines: Vec<u8>,
    ) -> Result<FileVersion> {
        self.json(
            Req::<wire::AppendFile>::new(&[ws, path]),
            Body::Bytes(lines),
        )
        .await
    }

    /// [`ReadContext`](wire::ReadContext): the first-turn context.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn read_context(&self, ws: &WorkspaceId) -> Result<Context> {
        self.json(Req::<wire::ReadContext>::new(&[ws]), Body::Empty)
            .await
    }

    /// [`GetAgent`](wire::GetAgent): an agent's settings.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn get_agent(&self, agent: &Principal) -> Result<AgentSettings> {
        self.json(Req::<wire::GetAgent>::new(&[agent]), Body::Empty)
            .await
    }

    /// [`PatchAgent`](wire::PatchAgent): changes an agent's settings.
    ///
    /// # Errors
    /// `Invalid` (`window_seconds`); as [`Client::healthz`].
    pub async fn patch_agent(
        &self,
        agent: &Principal,
        req: &PatchAgentRequest,
    ) -> Result<AgentSettings> {
        self.json(Req::<wire::PatchAgent>::new(&[agent]), Body::json(req)?)
            .await
    }

    /// [`ClearContext`](wire::ClearContext): moves the clear marker to now.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn clear_context(&self, agent: &Principal) -> Result<Cleared> {
        self.json(Req::<wire::ClearContext>::new(&[agent]), Body::Empty)
            .await
    }

    /// [`ContextWindow`](wire::ContextWindow): the live context.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn context_window(
        &self,
        agent: &Principal,
        thread: Option<&str>,
        format: Option<&str>,
    ) -> Result<Window> {
        let req = Req::<wire::ContextWindow>::new(&[agent])
            .query_opt("thread_id", thread)
            .query_opt("format", format);
        self.json(req, Body::Empty).await
    }

    /// [`AssembleContext`](wire::AssembleContext): the context of
    /// an LLM call (system prompt, docs, status preamble, the thread's
    /// window) as sections and as one conversation.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn assemble_context(
        &self,
        agent: &Principal,
        thread: &str,
        format: Option<&str>,
    ) -> Result<AssembledContextResponse> {
        let req = Req::<wire::AssembleContext>::new(&[agent])
            .query("thread_id", thread)
            .query_opt("format", format);
        self.json(req, Body::Empty).await
    }

    /// [`ListProcesses`](wire::ListProcesses): the running processes.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_processes(&self, agent: &Principal) -> Result<ProcessList> {
        self.json(Req::<wire::ListProcesses>::new(&[agent]), Body::Empty)
            .await
    }

    /// [`PutProcess`](wire::PutProcess): registers a running
    /// process.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn put_process(
        &self,
        agent: &Principal,
        id: &str,
        req: &PutProcessRequest,
    ) -> Result<RunningProcess> {
        self.json(
            Req::<wire::PutProcess>::new(&[agent, &id]),
            Body::of::<wire::PutProcess>(req)?,
        )
        .await
    }

    /// [`DeleteProcess`](wire::DeleteProcess): removes a process.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn delete_process(&self, agent: &Principal, id: &str) -> Result<()> {
        self.send(Req::<wire::DeleteProcess>::new(&[agent, &id]), Body::Empty)
            .await?;
        Ok(())
    }

    /// [`SaveContext`](wire::SaveContext): saves the window.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn save_context(&self, agent: &Principal, req: &SaveRequest) -> Result<SaveRecord> {
        self.json(Req::<wire::SaveContext>::new(&[agent]), Body::json(req)?)
            .await
    }

    /// [`ListSaves`](wire::ListSaves): the saves, newest first.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_saves(&self, agent: &Principal) -> Result<SaveList> {
        self.json(Req::<wire::ListSaves>::new(&[agent]), Body::Empty)
            .await
    }

    /// [`GetSave`](wire::GetSave): a session file.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_save(&self, agent: &Principal, id: &SaveId) -> Result<SessionFile> {
        self.json(Req::<wire::GetSave>::new(&[agent, id]), Body::Empty)
            .await
    }

    /// [`RestoreSave`](wire::RestoreSave): loads a save back
    /// into the window.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn restore_save(&self, agent: &Principal, id: &SaveId) -> Result<Restored> {
        self.json(Req::<wire::RestoreSave>::new(&[agent, id]), Body::Empty)
            .await
    }

    /// [`PutWorkingContext`](wire::PutWorkingContext): stores the cache.
    ///
    /// # Errors
    /// `Invalid` naming the field; as [`Client::healthz`].
    pub async fn put_working_context(
        &self,
        agent: &Principal,
        req: &WorkingContextSnapshot,
    ) -> Result<WorkingContextStored> {
        self.json(
            Req::<wire::PutWorkingContext>::new(&[agent]),
            Body::of::<wire::PutWorkingContext>(req)?,
        )
        .await
    }

    /// [`RestoreWorkingContext`](wire::RestoreWorkingContext): cache-first
    /// restore.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn restore_working_context(
        &self,
        agent: &Principal,
        req: &RestoreRequest,
    ) -> Result<RestoreResponse> {
        self.json(
            Req::<wire::RestoreWorkingContext>::new(&[agent]),
            Body::json(req)?,
        )
        .await
    }

    async fn json<O: Operation>(&self, req: Req<O>, body: Body) -> Result<O::Response>
    where
        O::Response: DeserializeOwned,
    {
        decode(self.send(req, body).await?).await
    }

    async fn bytes<O: Operation>(&self, req: Req<O>, body: Body) -> Result<Vec<u8>> {
        let resp = self.send(req, body).await?;
        Ok(resp
            .bytes()
            .await
            .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?
            .to_vec())
    }

    async fn send<O: Operation>(&self, req: Req<O>, body: Body) -> Result<reqwest::Response> {
        self.send_if(req, body, None).await
    }

    /// [`Client::send`] with an `If-Match` header when given.
    async fn send_if<O: Operation>(
        &self,
        target: Req<O>,
        body: Body,
        if_match: Option<&CommitId>,
    ) -> Result<reqwest::Response> {
        let url = format!("{}{}", self.base, target.target);
        let mut req = self.http.request(O::VERB.method(), url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(v) = if_match {
            req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
        }
        let (content_type, bytes) = match body {
            Body::Empty => (None, None),
            Body::Json(b) => (Some("application/json"), Some(b)),
            Body::Bytes(b) => (Some("application/octet-stream"), Some(b)),
        };
        if let (Some(ct), Some(b)) = (content_type, bytes) {
            req = req.header(reqwest::header::CONTENT_TYPE, ct).body(b);
        }
        let resp = req.send().await.map_err(|e| self.send_error(&e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.bytes().await.unwrap_or_default();
        let mut e = error_from(status, &body);
        if e.kind == ErrorKind::Unauthenticated
            && let Some(hint) = &self.token_hint
        {
            e.message = format!("{}: {hint}", e.message);
        }
        let ours = serde_json::from_slice::<ErrorBody>(&body).is_ok();
        if status == StatusCode::NOT_FOUND && (!ours || e.message.starts_with("route ")) {
            e.message = format!(
                "{} (the server has no such route: is the base path of --server {} right?)",
                e.message, self.base
            );
        }
        Err(e)
    }

    /// Why a request could not be sent, in words a user can act on.
    fn send_error(&self, e: &reqwest::Error) -> Error {
        let base = &self.base;
        if e.is_builder() {
            let why = if !base.contains("://") {
                "it has no scheme: write it as http://HOST:PORT".to_owned()
            } else {
                "it is not a valid http(s) URL".to_owned()
            };
            return Error::invalid(
                "server",
                format!("the server URL {base:?} is unusable: {why}"),
            );
        }
        let mut cause: Option<&dyn std::error::Error> = Some(e);
        let mut refused = false;
        let mut last = e.to_string();
        while let Some(c) = cause {
            if let Some(io) = c.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::ConnectionRefused
            {
                refused = true;
            }
            last = c.to_string();
            cause = c.source();
        }
        let why = if refused {
            "connection refused: nothing listens there (is `ctx serve` running, and is --server / CTX_SERVER right?)".to_owned()
        } else if e.is_timeout() {
            "the request timed out".to_owned()
        } else {
            last
        };
        Error::unavailable(format!("cannot reach the ctx server at {base}: {why}"))
    }
}

/// A request body.
enum Body {
    Empty,
    Json(Vec<u8>),
    Bytes(Vec<u8>),
}

impl Body {
    fn json(v: &impl Serialize) -> Result<Body> {
        serde_json::to_vec(v)
            .map(Body::Json)
            .map_err(|e| Error::internal(format!("cannot encode the request: {e}")))
    }

    /// The JSON body of operation `O`: its declared request type.
    fn of<O: Operation>(v: &O::Request) -> Result<Body>
    where
        O::Request: Serialize,
    {
        Body::json(v)
    }
}

async fn decode<T: DeserializeOwned>(resp: reqwest::Response) -> Result<T> {
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::internal(format!(
            "the server sent a response that is not the expected JSON: {e}"
        ))
    })
}

/// A memory search ([`MemorySearch`](wire::MemorySearch)): the server's defaults where
/// `None`.
#[derive(Debug, Clone, Copy)]
pub struct MemorySearchParams<'a> {
    /// What to look for.
    pub text: &'a str,
    /// At most this many (default 10).
    pub limit: Option<usize>,
    /// Only memories at least this confident.
    pub min_confidence: Option<f64>,
    /// Only this kind.
    pub kind: Option<ctx_core::branch::memories::MemoryKind>,
}

/// A request of operation `O`: its path, with its parameters filled in,
/// and query under construction. The one place the client spells a URL;
/// the path itself is the operation's declaration.
struct Req<O> {
    target: String,
    op: std::marker::PhantomData<O>,
}

impl<O: Operation> Req<O> {
    /// `O`'s path with `params` in its parameters' places, in order: each
    /// percent-encoded as one segment, but a `{*name}` parameter's '/',
    /// which separate its segments.
    fn new(params: &[&(dyn std::fmt::Display + Sync)]) -> Self {
        Req {
            target: fill(O::ID, O::PATH, params),
            op: std::marker::PhantomData,
        }
    }

    /// Appends one `name=value` query pair, the value percent-encoded.
    fn query(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        let t = &mut self.target;
        t.push(if t.contains('?') { '&' } else { '?' });
        t.push_str(name);
        t.push('=');
        t.push_str(&encode(&value.to_string()));
        self
    }

    /// [`Req::query`] when there is a value.
    fn query_opt(self, name: &str, value: Option<impl std::fmt::Display>) -> Self {
        match value {
            Some(v) => self.query(name, v),
            None => self,
        }
    }
}

/// `path` (of operation `id`) with `params` in its parameters' places, in
/// order: each percent-encoded as one segment, but a `{*name}`
/// parameter's '/', which separate its segments.
fn fill(id: &str, path: &str, params: &[&(dyn std::fmt::Display + Sync)]) -> String {
    let mut params = params.iter();
    let mut target = String::new();
    for seg in path.split('/').skip(1) {
        target.push('/');
        let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            target.push_str(seg);
            continue;
        };
        let value = params
            .next()
            .unwrap_or_else(|| panic!("{id} needs a value for {{{name}}}"))
            .to_string();
        if name.starts_with('*') {
            let segs: Vec<String> = value.split('/').map(encode).collect();
            target.push_str(&segs.join("/"));
        } else {
            target.push_str(&encode(&value));
        }
    }
    assert!(params.next().is_none(), "{id} takes fewer parameters");
    target
}

/// Percent-encodes everything but RFC 3986's unreserved characters, which
/// makes `s` safe as one path segment or one query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The error a non-success response stands for: ctx's error body as the
/// server sent it, or for any other body (a proxy's), the kind its status
/// stands for and the body as the message.
pub fn error_from(status: StatusCode, body: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => Error::from(b),
        Err(_) => Error::new(
            kind_of(status),
            format!("HTTP {status}: {}", String::from_utf8_lossy(body).trim()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use ctx_core::ErrorKind;
    use ctx_core::api::routes;
    use ctx_core::service::Limits;

    use super::*;

    /// Whether `path` (no query) fits the axum template `tpl`.
    fn fits(tpl: &str, path: &str) -> bool {
        let (mut t, mut p) = (tpl.split('/'), path.split('/'));
        loop {
            match (t.next(), p.next()) {
                (None, None) => return true,
                (Some(ts), Some(_)) if ts.starts_with("{*") => return true,
                (Some(ts), Some(ps)) if ts.starts_with('{') => {
                    if ps.is_empty() {
                        return false;
                    }
                }
                (Some(ts), Some(ps)) if ts == ps => {}
                _ => return false,
            }
        }
    }

    /// The operation of the OpenAPI document `method target` (a path and
    /// query) is an instance of: its path template, where a parameter is
    /// one segment, or, when no template fits so, several (a ref name's or
    /// a file path's '/').
    fn documented<'d>(
        doc: &'d serde_json::Value,
        method: &str,
        target: &str,
    ) -> Vec<(&'d String, &'d serde_json::Value)> {
        let path = target.split('?').next().unwrap();
        let fits = |tpl: &str, greedy: bool| {
            let (t, p): (Vec<&str>, Vec<&str>) =
                (tpl.split('/').collect(), path.split('/').collect());
            // Literal segments must match in order; a parameter takes one
            // segment, or (greedy) as many as leave the rest to match.
            fn go(t: &[&str], p: &[&str], greedy: bool) -> bool {
                match (t.first(), p.first()) {
                    (None, None) => true,
                    (Some(ts), Some(ps)) if ts.starts_with('{') => {
                        !ps.is_empty()
                            && (go(&t[1..], &p[1..], greedy)
                                || (greedy && (2..=p.len()).any(|n| go(&t[1..], &p[n..], greedy))))
                    }
                    (Some(ts), Some(ps)) => ts == ps && go(&t[1..], &p[1..], greedy),
                    _ => false,
                }
            }
            go(&t, &p, greedy)
        };
        let paths = doc["paths"].as_object().unwrap();
        for greedy in [false, true] {
            let found: Vec<_> = paths
                .iter()
                .filter(|(tpl, item)| item.get(method).is_some() && fits(tpl, greedy))
                .map(|(tpl, item)| (tpl, &item[method]))
                .collect();
            if !found.is_empty() {
                return found;
            }
        }
        Vec::new()
    }

    #[test]
    fn every_operation_fills_to_exactly_one_route_and_documented_operation() {
        let server = routes(&Limits::default());
        let doc = ctx_core::api::ApiDoc::json();
        let mut filled = 0;
        for op in ctx_core::wire::all() {
            // A value per parameter: two segments where it may hold '/'.
            let values: Vec<String> = op
                .path
                .split('/')
                .filter_map(|s| s.strip_prefix('{'))
                .map(|p| if p.starts_with('*') { "a/b c" } else { "x y" }.to_owned())
                .collect();
            let params: Vec<&(dyn std::fmt::Display + Sync)> = values
                .iter()
                .map(|v| v as &(dyn std::fmt::Display + Sync))
                .collect();
            let target = fill(op.id, op.path, &params);
            let matching: Vec<_> = server
                .iter()
                .filter(|r| r.method.as_str() == op.verb.as_str() && fits(r.path, &target))
                .collect();
            assert_eq!(matching.len(), 1, "{op:?}: {target}");
            let method = op.verb.as_str().to_lowercase();
            let found = documented(&doc, &method, &target);
            assert_eq!(found.len(), 1, "{op:?}: {target} in the document");
            assert_eq!(*found[0].0, op.openapi_path());
            assert_eq!(found[0].1["operationId"], op.id);
            filled += 1;
        }
        assert_eq!(filled, server.len());
    }

    #[test]
    fn segments_and_query_values_are_percent_encoded() {
        use ctx_core::wire;
        let name: RefName = "sessions/a.b_c-d".parse().unwrap();
        assert_eq!(
            Req::<wire::GetRef>::new(&[&name]).target,
            "/v1/refs/sessions/a.b_c-d"
        );
        assert_eq!(
            Req::<wire::EvictRef>::new(&[&name]).target,
            "/v1/refs/sessions/a.b_c-d/evict"
        );
        assert_eq!(
            Req::<wire::SessionEnd>::new(&[&"a/b c?d#e%"]).target,
            "/v1/sessions/a%2Fb%20c%3Fd%23e%25/end"
        );
        assert_eq!(
            Req::<wire::BranchStatusOfSession>::new(&[])
                .query("session_id", "a&b=c+d")
                .target,
            "/v1/branches?session_id=a%26b%3Dc%2Bd"
        );
        assert_eq!(
            Req::<wire::ListRefs>::new(&[])
                .query("prefix", "sessions/")
                .query_opt("limit", Some(5))
                .query_opt("after", None::<&str>)
                .target,
            "/v1/refs?prefix=sessions%2F&limit=5"
        );
        let id: CommitId = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
        assert_eq!(
            Req::<wire::History>::new(&[&id]).target,
            format!("/v1/commits/{id}/history")
        );
    }

    #[test]
    fn errors_take_their_kind_from_the_body_and_the_status_only_otherwise() {
        // The body's kind wins over what the status would say.
        let body = br#"{"error": {"kind": "conflict", "message": "moved", "field": "expected"}, "current": "ctx-1"}"#;
        let e = error_from(StatusCode::BAD_REQUEST, body);
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(e.message, "moved");
        assert_eq!(e.field.as_deref(), Some("expected"));
        assert_eq!(e.current.as_deref(), Some("ctx-1"));
        // A gateway's body: the status decides.
        let e = error_from(StatusCode::BAD_GATEWAY, b"<html>Bad Gateway</html>\n");
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert_eq!(e.message, "HTTP 502 Bad Gateway: <html>Bad Gateway</html>");
        let e = error_from(StatusCode::UNAUTHORIZED, br#"{"message": "Unauthorized"}"#);
        assert_eq!(e.kind, ErrorKind::Unauthenticated);
    }
}
