//! The typed client of the ctx API, used by every client command and by
//! `ctx mcp`: one method per route, taking and returning the types the
//! server itself uses (`ctx_core::wire`, [`Commit`], [`RefRecord`],
//! [`PresignedUpload`]), so a change of the contract breaks this crate's
//! build instead of a running client.
//!
//! Every URL is spelled in one place, `Route`, with each path segment
//! and query value percent-encoded. Errors are read from ctx's error body;
//! the status stands in only when the body is not ctx's (a proxy's 502).

use chrono::{DateTime, SecondsFormat, Utc};
use ctx_core::api::error::{ErrorBody, kind_of};
use ctx_core::api::{BUDGET_WARNING, CHECKPOINT_WARNING};
use ctx_core::service::FileVersion;
use ctx_core::store::{Pin, PresignedUpload, RefRecord};
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
use ctx_core::workspace::context::Context;
use ctx_core::workspace::{FilePath, WorkspaceId};
use ctx_core::{
    ArtifactRef, BranchId, Commit, CommitId, Error, ErrorKind, Principal, RefName, Result,
    SessionId,
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

/// What `POST /v1/artifacts` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// The artifact and its size.
    pub artifact: ArtifactInfo,
    /// False when the bytes were stored before (200 instead of 201).
    pub created: bool,
}

/// What `POST /v1/commits` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointed {
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

    /// `GET /healthz`: the server's liveness answer (`ok`).
    ///
    /// # Errors
    /// `Unavailable` when the server cannot be reached; the server's error.
    pub async fn healthz(&self) -> Result<String> {
        let bytes = self.bytes(Route::Healthz, Body::Empty).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `GET /v1/openapi.json`: the OpenAPI document (free-form JSON).
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn openapi(&self) -> Result<serde_json::Value> {
        self.json(Route::OpenApi, Body::Empty).await
    }

    /// `POST /v1/artifacts`: stores `bytes` as an artifact.
    ///
    /// # Errors
    /// `TooLarge` beyond the server's artifact limit; as [`Client::healthz`].
    pub async fn upload_artifact(&self, bytes: Vec<u8>) -> Result<Uploaded> {
        let resp = self.send(Route::UploadArtifact, Body::Bytes(bytes)).await?;
        let created = resp.status() == StatusCode::CREATED;
        Ok(Uploaded {
            artifact: decode(resp).await?,
            created,
        })
    }

    /// `POST /v1/uploads`: a URL to PUT a large artifact to directly.
    ///
    /// # Errors
    /// `Invalid` where the store has no direct uploads; as [`Client::healthz`].
    pub async fn upload_url(&self, req: &UploadRequest) -> Result<PresignedUpload> {
        self.json(Route::UploadUrl, Body::json(req)?).await
    }

    /// `GET /v1/artifacts/{art}`: an artifact's bytes, checked against
    /// the ref. A large one answers 303 to storage, followed without the
    /// bearer token (reqwest drops it on the way to another origin): its
    /// bytes never passed the server's check.
    ///
    /// # Errors
    /// `NotFound`; `Internal` when the bytes do not hash to `art`; as
    /// [`Client::healthz`].
    pub async fn download_artifact(&self, art: &ArtifactRef) -> Result<Vec<u8>> {
        let bytes = self
            .bytes(Route::DownloadArtifact(art), Body::Empty)
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

    /// `POST /v1/commits`: records a checkpoint.
    ///
    /// # Errors
    /// `Invalid`, `Conflict` (a ref moved, a branch's budget is spent); as
    /// [`Client::healthz`].
    ///
    /// A delta over [`DIRECT_UPLOAD_BYTES`] leaves the JSON: where the
    /// server hands out upload URLs (aws) it is PUT straight to storage
    /// and the checkpoint names it.
    pub async fn checkpoint(&self, req: &CheckpointRequest) -> Result<Checkpointed> {
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
        let resp = self.send(Route::Checkpoint, Body::json(req)?).await?;
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
        Ok(Checkpointed {
            commit: decode(resp).await?,
            created,
            budget_warning,
            warnings,
        })
    }

    /// `POST /v1/batch`: commits, artifacts and ref moves as one atomic
    /// write; the commits as stored and the refs as moved.
    ///
    /// # Errors
    /// `Invalid` naming the field; `Conflict` (a ref moved: nothing is
    /// written); `TooLarge`; as [`Client::healthz`].
    pub async fn batch(&self, req: &BatchRequest) -> Result<BatchResponse> {
        self.json(Route::Batch, Body::json(req)?).await
    }

    /// `GET /v1/commits/{ctx}`: one commit.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn show(&self, id: &CommitId) -> Result<Commit> {
        self.json(Route::Show(id), Body::Empty).await
    }

    /// `PATCH /v1/commits/{ctx}`: changes a commit's summary and tags.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn update_metadata(
        &self,
        id: &CommitId,
        req: &UpdateMetadataRequest,
    ) -> Result<Commit> {
        self.json(Route::UpdateMetadata(id), Body::json(req)?).await
    }

    /// `GET /v1/commits/{ctx}/history?depth=`: commits from `id` towards
    /// the root, newest first (the server's default depth when `None`).
    ///
    /// # Errors
    /// `NotFound`, `Invalid` (depth); as [`Client::healthz`].
    pub async fn history(&self, id: &CommitId, depth: Option<usize>) -> Result<HistoryResponse> {
        self.json(Route::History(id, depth), Body::Empty).await
    }

    /// `GET /v1/commits?missing_summary=true&limit=&cursor=`: commits
    /// lacking a summary, oldest first, with their queue state.
    ///
    /// # Errors
    /// `Invalid` (limit, cursor); as [`Client::healthz`].
    pub async fn missing_summaries(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<MissingSummaryList> {
        self.json(Route::MissingSummaries(limit, cursor), Body::Empty)
            .await
    }

    /// `POST /v1/commits/{ctx}/summarize`: summarizes one commit now.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when it has a summary and `force` is not set;
    /// `Unavailable` without a summarizer; as [`Client::healthz`].
    pub async fn summarize(&self, id: &CommitId, req: &SummarizeRequest) -> Result<Commit> {
        self.json(Route::Summarize(id), Body::json(req)?).await
    }

    /// `POST /v1/gc`: one page of garbage collection of the caller's
    /// artifacts (or, with `dry_run`, what it would remove).
    ///
    /// # Errors
    /// `Invalid` for a cursor no call handed out; as [`Client::healthz`].
    pub async fn gc(&self, req: &ctx_core::wire::GcRequest) -> Result<ctx_core::service::GcReport> {
        self.json(Route::Gc, Body::json(req)?).await
    }

    /// `POST /v1/commits/{ctx}/compact`: summarizes the context at `id` into
    /// a compaction commit on top of it.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`, `Conflict` when the ref moved, `Unavailable`
    /// when the summarizer fails; as [`Client::healthz`].
    pub async fn compact(&self, id: &CommitId, req: &CompactRequest) -> Result<CompactResponse> {
        self.json(Route::Compact(id), Body::json(req)?).await
    }

    /// `POST /v1/commits/{ctx}/materialize`: rebuilds the context at `id`.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn materialize(
        &self,
        id: &CommitId,
        req: &MaterializeRequest,
    ) -> Result<MaterializeResponse> {
        self.json(Route::Materialize(id), Body::json(req)?).await
    }

    /// `POST /v1/read`: the context at a ref's tip or a commit, with its
    /// bytes inline when they are at most 1 MiB.
    ///
    /// # Errors
    /// `NotFound`, `Invalid`; as [`Client::healthz`].
    pub async fn read(&self, req: &ReadRequest) -> Result<ReadResponse> {
        self.json(Route::Read, Body::json(req)?).await
    }

    /// The context at `id` and its bytes: one [`Client::read`], and a
    /// [`Client::download_artifact`] of the result only when it is too large
    /// to come inline.
    ///
    /// # Errors
    /// As both.
    pub async fn materialize_and_download(
        &self,
        id: &CommitId,
        req: &MaterializeRequest,
    ) -> Result<(MaterializeResponse, Vec<u8>)> {
        let r = self
            .read(&ReadRequest {
                commit: Some(*id),
                stop: req.stop,
                format: req.format.clone(),
                ..ReadRequest::default()
            })
            .await?;
        let bytes = match (r.content, r.content_base64) {
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
        let m = MaterializeResponse {
            result: r.result,
            cached: r.cached,
        };
        Ok((m, bytes))
    }

    /// `GET /v1/resolve?principal=&at=`: the newest commit of `principal`
    /// at or before `at` (now when `None`).
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn resolve(
        &self,
        principal: &Principal,
        at: Option<DateTime<Utc>>,
    ) -> Result<ResolveResponse> {
        self.json(Route::Resolve(principal, at), Body::Empty).await
    }

    /// `GET /v1/refs?prefix=&limit=`: refs whose names start with `prefix`,
    /// by name (the server's default limit when `None`).
    ///
    /// # Errors
    /// `Invalid` (limit); as [`Client::healthz`].
    pub async fn list_refs(&self, prefix: &str, limit: Option<usize>) -> Result<RefList> {
        self.list_refs_after(prefix, limit, None).await
    }

    /// `GET /v1/refs?prefix=&limit=&after=`: as [`Client::list_refs`], from
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
        self.json(Route::ListRefs(prefix, limit, after), Body::Empty)
            .await
    }

    /// `GET /v1/refs/{name}`: a ref.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_ref(&self, name: &RefName) -> Result<RefRecord> {
        self.json(Route::GetRef(name), Body::Empty).await
    }

    /// `PUT /v1/refs/{name}`: creates a ref, or moves it by compare-and-swap.
    ///
    /// # Errors
    /// `Conflict` with `current` when `expected` is stale; as
    /// [`Client::healthz`].
    pub async fn set_ref(&self, name: &RefName, req: &SetRefRequest) -> Result<RefRecord> {
        self.json(Route::SetRef(name), Body::json(req)?).await
    }

    /// `DELETE /v1/refs/{name}`: removes the ref alone, by compare-and-swap
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
        self.json(Route::DeleteRef(name, expected), Body::Empty)
            .await
    }

    /// `POST /v1/refs/{name}/evict`: drops the deltas older than the
    /// compaction or snapshot `req.before` on the ref's path, keeping
    /// their metadata.
    ///
    /// # Errors
    /// `NotFound` for the ref; `Invalid` (field `before`); as
    /// [`Client::healthz`].
    pub async fn evict_ref(&self, name: &RefName, req: &EvictRequest) -> Result<Evicted> {
        self.json(Route::EvictRef(name), Body::json(req)?).await
    }

    /// `DELETE /v1/sessions/{id}`: erases a session (and, with `cascade`,
    /// the commits of other sessions descending from it).
    ///
    /// # Errors
    /// `NotFound`; `Conflict` listing the forks without `cascade`; as
    /// [`Client::healthz`].
    pub async fn erase_session(&self, session: &SessionId, cascade: bool) -> Result<Erased> {
        self.json(Route::EraseSession(session.as_str(), cascade), Body::Empty)
            .await
    }

    /// `DELETE /v1/principals/{principal}`: erases a principal.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` listing the descendants without `cascade`;
    /// as [`Client::healthz`].
    pub async fn erase_principal(&self, principal: &Principal, cascade: bool) -> Result<Erased> {
        self.json(Route::ErasePrincipal(principal, cascade), Body::Empty)
            .await
    }

    /// `GET /v1/pins`: the tenant's pins.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_pins(&self) -> Result<PinList> {
        self.json(Route::ListPins, Body::Empty).await
    }

    /// `PUT` (`pinned`) or `DELETE /v1/pins/{kind}/{name}`.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn set_pin(&self, pin: &Pin, pinned: bool) -> Result<PinChanged> {
        let route = if pinned {
            Route::SetPin(pin)
        } else {
            Route::DeletePin(pin)
        };
        self.json(route, Body::Empty).await
    }

    /// `POST /v1/branches`: starts an isolated branch of a session.
    ///
    /// # Errors
    /// `Invalid`, `NotFound` (parent branch), `RateLimited`; as
    /// [`Client::healthz`].
    pub async fn branch_create(&self, req: &BranchCreateRequest) -> Result<BranchCreated> {
        self.json(Route::BranchCreate, Body::json(req)?).await
    }

    /// `GET /v1/branches/{br}`: a branch's status.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn branch_status(&self, id: &BranchId) -> Result<BranchStatusResponse> {
        self.json(Route::BranchStatus(id), Body::Empty).await
    }

    /// `GET /v1/branches?session_id=`: a session's active branch, if any.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn branch_status_of_session(
        &self,
        session: &SessionId,
    ) -> Result<BranchStatusResponse> {
        self.json(Route::BranchStatusOfSession(session.as_str()), Body::Empty)
            .await
    }

    /// `POST /v1/branches/{br}/return`: hands a branch's result back.
    ///
    /// # Errors
    /// `NotFound`, `Conflict` (already ended); as [`Client::healthz`].
    pub async fn branch_return(
        &self,
        id: &BranchId,
        req: &BranchReturnRequest,
    ) -> Result<BranchReturned> {
        self.json(Route::BranchReturn(id), Body::json(req)?).await
    }

    /// `POST /v1/sessions/{id}/end`: force-returns a session's branches.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn session_end(&self, session: &SessionId) -> Result<SessionEnded> {
        self.json(Route::SessionEnd(session.as_str()), Body::Empty)
            .await
    }

    /// `GET /v1/memories?q=&limit=&min_confidence=&kind=`: memories of
    /// ended branches matching `q.text`, best first.
    ///
    /// # Errors
    /// `Invalid` naming the parameter; as [`Client::healthz`].
    pub async fn memory_search(&self, q: &MemorySearch<'_>) -> Result<MemorySearchResponse> {
        self.json(Route::MemorySearch(q), Body::Empty).await
    }

    /// `GET /v1/workspaces/{ws}/files?prefix=`: a workspace's files.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_files(&self, ws: &WorkspaceId, prefix: &str) -> Result<FileList> {
        self.json(Route::ListFiles(ws, prefix), Body::Empty).await
    }

    /// `GET /v1/workspaces/{ws}/files/{path}`: a file's bytes and version.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn get_file(&self, ws: &WorkspaceId, path: &FilePath) -> Result<(Vec<u8>, CommitId)> {
        let resp = self
            .send_if(Route::GetFile(ws, path), Body::Empty, None)
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

    /// `PUT /v1/workspaces/{ws}/files/{path}`: writes a file whole; with
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
            self.send_if(Route::PutFile(ws, path), Body::Bytes(bytes), if_match)
                .await?,
        )
        .await
    }

    /// `DELETE /v1/workspaces/{ws}/files/{path}`.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` (412) when `if_match` is stale.
    pub async fn delete_file(
        &self,
        ws: &WorkspaceId,
        path: &FilePath,
        if_match: Option<&CommitId>,
    ) -> Result<()> {
        self.send_if(Route::DeleteFile(ws, path), Body::Empty, if_match)
            .await?;
        Ok(())
    }

    /// `POST /v1/workspaces/{ws}/append/{path}`: appends JSONL lines.
    ///
    /// # Errors
    /// `Invalid` for a line that is not JSON; as [`Client::healthz`].
    pub async fn append_file(
        &self,
        ws: &WorkspaceId,
        path: &FilePath,
        lines: Vec<u8>,
    ) -> Result<FileVersion> {
        self.json(Route::AppendFile(ws, path), Body::Bytes(lines))
            .await
    }

    /// `GET /v1/workspaces/{ws}/context`: the first-turn context.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn read_context(&self, ws: &WorkspaceId) -> Result<Context> {
        self.json(Route::ReadContext(ws), Body::Empty).await
    }

    /// `GET /v1/agents/{agent}`: an agent's settings.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn agent(&self, agent: &Principal) -> Result<AgentSettings> {
        self.json(Route::GetAgent(agent), Body::Empty).await
    }

    /// `PATCH /v1/agents/{agent}`: changes an agent's settings.
    ///
    /// # Errors
    /// `Invalid` (`window_seconds`); as [`Client::healthz`].
    pub async fn patch_agent(
        &self,
        agent: &Principal,
        req: &PatchAgentRequest,
    ) -> Result<AgentSettings> {
        self.json(Route::PatchAgent(agent), Body::json(req)?).await
    }

    /// `POST /v1/agents/{agent}/clear`: moves the clear marker to now.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn clear_context(&self, agent: &Principal) -> Result<Cleared> {
        self.json(Route::ClearContext(agent), Body::Empty).await
    }

    /// `GET /v1/agents/{agent}/window?thread_id=&format=`: the live context.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn context_window(
        &self,
        agent: &Principal,
        thread: Option<&str>,
        format: Option<&str>,
    ) -> Result<Window> {
        self.json(Route::Window(agent, thread, format), Body::Empty)
            .await
    }

    /// `GET /v1/agents/{agent}/context?thread_id=&format=`: the context of
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
        self.json(Route::AssembleContext(agent, thread, format), Body::Empty)
            .await
    }

    /// `GET /v1/agents/{agent}/processes`: the running processes.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn list_processes(&self, agent: &Principal) -> Result<ProcessList> {
        self.json(Route::ListProcesses(agent), Body::Empty).await
    }

    /// `PUT /v1/agents/{agent}/processes/{id}`: registers a running
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
        self.json(Route::PutProcess(agent, id), Body::json(req)?)
            .await
    }

    /// `DELETE /v1/agents/{agent}/processes/{id}`: removes a process.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn delete_process(&self, agent: &Principal, id: &str) -> Result<()> {
        self.send(Route::DeleteProcess(agent, id), Body::Empty)
            .await?;
        Ok(())
    }

    /// `POST /v1/agents/{agent}/saves`: saves the window.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn save_context(&self, agent: &Principal, req: &SaveRequest) -> Result<SaveRecord> {
        self.json(Route::SaveContext(agent), Body::json(req)?).await
    }

    /// `GET /v1/agents/{agent}/saves`: the saves, newest first.
    ///
    /// # Errors
    /// As [`Client::healthz`].
    pub async fn context_history(&self, agent: &Principal) -> Result<SaveList> {
        self.json(Route::ListSaves(agent), Body::Empty).await
    }

    /// `GET /v1/agents/{agent}/saves/{save_id}`: a session file.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn context_save_file(&self, agent: &Principal, id: &SaveId) -> Result<SessionFile> {
        self.json(Route::GetSave(agent, id), Body::Empty).await
    }

    /// `POST /v1/agents/{agent}/saves/{save_id}/restore`: loads a save back
    /// into the window.
    ///
    /// # Errors
    /// `NotFound`; as [`Client::healthz`].
    pub async fn restore_save(&self, agent: &Principal, id: &SaveId) -> Result<Restored> {
        self.json(Route::RestoreSave(agent, id), Body::Empty).await
    }

    /// `PUT /v1/agents/{agent}/working-context`: stores the cache.
    ///
    /// # Errors
    /// `Invalid` naming the field; as [`Client::healthz`].
    pub async fn put_working_context(
        &self,
        agent: &Principal,
        req: &WorkingContextSnapshot,
    ) -> Result<WorkingContextStored> {
        self.json(Route::PutWorkingContext(agent), Body::json(req)?)
            .await
    }

    /// `POST /v1/agents/{agent}/working-context/restore`: cache-first
    /// restore.
    ///
    /// # Errors
    /// `Invalid`; as [`Client::healthz`].
    pub async fn restore_working_context(
        &self,
        agent: &Principal,
        req: &RestoreRequest,
    ) -> Result<RestoreResponse> {
        self.json(Route::RestoreWorkingContext(agent), Body::json(req)?)
            .await
    }

    async fn json<T: DeserializeOwned>(&self, route: Route<'_>, body: Body) -> Result<T> {
        decode(self.send(route, body).await?).await
    }

    async fn bytes(&self, route: Route<'_>, body: Body) -> Result<Vec<u8>> {
        let resp = self.send(route, body).await?;
        Ok(resp
            .bytes()
            .await
            .map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?
            .to_vec())
    }

    async fn send(&self, route: Route<'_>, body: Body) -> Result<reqwest::Response> {
        self.send_if(route, body, None).await
    }

    /// [`Client::send`] with an `If-Match` header when given.
    async fn send_if(
        &self,
        route: Route<'_>,
        body: Body,
        if_match: Option<&CommitId>,
    ) -> Result<reqwest::Response> {
        let url = format!("{}{}", self.base, route.target());
        let mut req = self.http.request(route.method(), url);
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

/// A memory search (`GET /v1/memories`): the server's defaults where
/// `None`.
#[derive(Debug, Clone, Copy)]
pub struct MemorySearch<'a> {
    /// What to look for.
    pub text: &'a str,
    /// At most this many (default 10).
    pub limit: Option<usize>,
    /// Only memories at least this confident.
    pub min_confidence: Option<f64>,
    /// Only this kind.
    pub kind: Option<ctx_core::branch::memories::MemoryKind>,
}

/// One route of the API with its path parameters and query: the one place
/// the client spells a URL. Mirrors `ctx_core::api::routes`.
#[derive(Debug, Clone, Copy)]
enum Route<'a> {
    Healthz,
    OpenApi,
    UploadArtifact,
    UploadUrl,
    DownloadArtifact(&'a ArtifactRef),
    Checkpoint,
    Batch,
    Show(&'a CommitId),
    UpdateMetadata(&'a CommitId),
    History(&'a CommitId, Option<usize>),
    MissingSummaries(Option<usize>, Option<&'a str>),
    Summarize(&'a CommitId),
    Compact(&'a CommitId),
    Materialize(&'a CommitId),
    Read,
    Resolve(&'a Principal, Option<DateTime<Utc>>),
    ListRefs(&'a str, Option<usize>, Option<&'a str>),
    GetRef(&'a RefName),
    SetRef(&'a RefName),
    DeleteRef(&'a RefName, Option<&'a CommitId>),
    EvictRef(&'a RefName),
    BranchCreate,
    BranchStatusOfSession(&'a str),
    BranchStatus(&'a BranchId),
    BranchReturn(&'a BranchId),
    SessionEnd(&'a str),
    MemorySearch(&'a MemorySearch<'a>),
    EraseSession(&'a str, bool),
    ErasePrincipal(&'a Principal, bool),
    ListPins,
    SetPin(&'a Pin),
    DeletePin(&'a Pin),
    ListFiles(&'a WorkspaceId, &'a str),
    GetFile(&'a WorkspaceId, &'a FilePath),
    PutFile(&'a WorkspaceId, &'a FilePath),
    DeleteFile(&'a WorkspaceId, &'a FilePath),
    AppendFile(&'a WorkspaceId, &'a FilePath),
    ReadContext(&'a WorkspaceId),
    Gc,
    GetAgent(&'a Principal),
    PatchAgent(&'a Principal),
    ClearContext(&'a Principal),
    Window(&'a Principal, Option<&'a str>, Option<&'a str>),
    SaveContext(&'a Principal),
    ListSaves(&'a Principal),
    GetSave(&'a Principal, &'a SaveId),
    RestoreSave(&'a Principal, &'a SaveId),
    PutWorkingContext(&'a Principal),
    RestoreWorkingContext(&'a Principal),
    ListProcesses(&'a Principal),
    PutProcess(&'a Principal, &'a str),
    DeleteProcess(&'a Principal, &'a str),
    AssembleContext(&'a Principal, &'a str, Option<&'a str>),
}

impl Route<'_> {
    fn method(self) -> Method {
        use Route::*;
        match self {
            Healthz
            | OpenApi
            | DownloadArtifact(_)
            | Show(_)
            | History(..)
            | MissingSummaries(..)
            | Resolve(..)
            | ListRefs(..)
            | GetRef(_)
            | BranchStatusOfSession(_)
            | BranchStatus(_)
            | MemorySearch(_)
            | ListFiles(..)
            | GetFile(..)
            | ReadContext(_)
            | ListPins
            | GetAgent(_)
            | Window(..)
            | ListSaves(_)
            | GetSave(..)
            | ListProcesses(_)
            | AssembleContext(..) => Method::GET,
            PutProcess(..) => Method::PUT,
            DeleteProcess(..) => Method::DELETE,
            PatchAgent(_) => Method::PATCH,
            ClearContext(_) | SaveContext(_) | RestoreSave(..) | RestoreWorkingContext(_) => {
                Method::POST
            }
            PutFile(..) | PutWorkingContext(_) | SetPin(_) => Method::PUT,
            DeleteFile(..) | DeleteRef(..) | EraseSession(..) | ErasePrincipal(..)
            | DeletePin(_) => Method::DELETE,
            AppendFile(..) => Method::POST,
            UploadArtifact | UploadUrl | Checkpoint | Batch | Materialize(_) | Read
            | Summarize(_) | Compact(_) | BranchCreate | BranchReturn(_) | SessionEnd(_) | Gc
            | EvictRef(_) => Method::POST,
            UpdateMetadata(_) => Method::PATCH,
            SetRef(_) => Method::PUT,
        }
    }

    /// The path and query below the base URL.
    fn target(self) -> String {
        use Route::*;
        let t = Target::default();
        match self {
            Healthz => t.seg("healthz"),
            OpenApi => t.seg("v1").seg("openapi.json"),
            UploadArtifact => t.seg("v1").seg("artifacts"),
            UploadUrl => t.seg("v1").seg("uploads"),
            DownloadArtifact(art) => t.seg("v1").seg("artifacts").seg(art),
            Checkpoint => t.seg("v1").seg("commits"),
            Batch => t.seg("v1").seg("batch"),
            Show(id) | UpdateMetadata(id) => t.seg("v1").seg("commits").seg(id),
            History(id, depth) => t
                .seg("v1")
                .seg("commits")
                .seg(id)
                .seg("history")
                .query_opt("depth", depth),
            Materialize(id) => t.seg("v1").seg("commits").seg(id).seg("materialize"),
            Read => t.seg("v1").seg("read"),
            MissingSummaries(limit, cursor) => t
                .seg("v1")
                .seg("commits")
                .query("missing_summary", true)
                .query_opt("limit", limit)
                .query_opt("cursor", cursor),
            Summarize(id) => t.seg("v1").seg("commits").seg(id).seg("summarize"),
            Compact(id) => t.seg("v1").seg("commits").seg(id).seg("compact"),
            Resolve(principal, at) => t
                .seg("v1")
                .seg("resolve")
                .query("principal", principal)
                .query_opt(
                    "at",
                    at.map(|at| at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
                ),
            ListRefs(prefix, limit, after) => t
                .seg("v1")
                .seg("refs")
                .query("prefix", prefix)
                .query_opt("limit", limit)
                .query_opt("after", after),
            // A ref name's '/' separates path segments (`{*name}`).
            GetRef(name) | SetRef(name) => name
                .as_str()
                .split('/')
                .fold(t.seg("v1").seg("refs"), Target::seg),
            DeleteRef(name, expected) => name
                .as_str()
                .split('/')
                .fold(t.seg("v1").seg("refs"), Target::seg)
                .query_opt("expected", expected),
            EvictRef(name) => name
                .as_str()
                .split('/')
                .fold(t.seg("v1").seg("refs"), Target::seg)
                .seg("evict"),
            BranchCreate => t.seg("v1").seg("branches"),
            BranchStatusOfSession(session) => {
                t.seg("v1").seg("branches").query("session_id", session)
            }
            BranchStatus(id) => t.seg("v1").seg("branches").seg(id),
            BranchReturn(id) => t.seg("v1").seg("branches").seg(id).seg("return"),
            SessionEnd(session) => t.seg("v1").seg("sessions").seg(session).seg("end"),
            MemorySearch(q) => t
                .seg("v1")
                .seg("memories")
                .query("q", q.text)
                .query_opt("limit", q.limit)
                .query_opt("min_confidence", q.min_confidence)
                .query_opt("kind", q.kind),
            EraseSession(session, cascade) => t
                .seg("v1")
                .seg("sessions")
                .seg(session)
                .query_opt("cascade", cascade.then_some(true)),
            ErasePrincipal(principal, cascade) => t
                .seg("v1")
                .seg("principals")
                .seg(principal.as_str())
                .query_opt("cascade", cascade.then_some(true)),
            ListPins => t.seg("v1").seg("pins"),
            // A ref name's '/' separates path segments (`{*name}`).
            SetPin(pin) | DeletePin(pin) => pin
                .name()
                .split('/')
                .fold(t.seg("v1").seg("pins").seg(pin.kind()), Target::seg),
            ListFiles(ws, prefix) => t
                .seg("v1")
                .seg("workspaces")
                .seg(ws)
                .seg("files")
                .query("prefix", prefix),
            // A path's '/' separates path segments (`{*path}`).
            GetFile(ws, path) | PutFile(ws, path) | DeleteFile(ws, path) => {
                path.as_str().split('/').fold(
                    t.seg("v1").seg("workspaces").seg(ws).seg("files"),
                    Target::seg,
                )
            }
            AppendFile(ws, path) => path.as_str().split('/').fold(
                t.seg("v1").seg("workspaces").seg(ws).seg("append"),
                Target::seg,
            ),
            ReadContext(ws) => t.seg("v1").seg("workspaces").seg(ws).seg("context"),
            Gc => t.seg("v1").seg("gc"),
            GetAgent(a) | PatchAgent(a) => t.seg("v1").seg("agents").seg(a),
            ClearContext(a) => t.seg("v1").seg("agents").seg(a).seg("clear"),
            Window(a, thread, format) => t
                .seg("v1")
                .seg("agents")
                .seg(a)
                .seg("window")
                .query_opt("thread_id", thread)
                .query_opt("format", format),
            SaveContext(a) | ListSaves(a) => t.seg("v1").seg("agents").seg(a).seg("saves"),
            GetSave(a, id) => t.seg("v1").seg("agents").seg(a).seg("saves").seg(id),
            RestoreSave(a, id) => t
                .seg("v1")
                .seg("agents")
                .seg(a)
                .seg("saves")
                .seg(id)
                .seg("restore"),
            PutWorkingContext(a) => t.seg("v1").seg("agents").seg(a).seg("working-context"),
            RestoreWorkingContext(a) => t
                .seg("v1")
                .seg("agents")
                .seg(a)
                .seg("working-context")
                .seg("restore"),
            ListProcesses(a) => t.seg("v1").seg("agents").seg(a).seg("processes"),
            PutProcess(a, id) | DeleteProcess(a, id) => {
                t.seg("v1").seg("agents").seg(a).seg("processes").seg(id)
            }
            AssembleContext(a, thread, format) => t
                .seg("v1")
                .seg("agents")
                .seg(a)
                .seg("context")
                .query("thread_id", thread)
                .query_opt("format", format),
        }
        .0
    }
}

/// A path and query under construction.
#[derive(Default)]
struct Target(String);

impl Target {
    /// Appends `/` and one percent-encoded path segment.
    fn seg(mut self, segment: impl std::fmt::Display) -> Self {
        self.0.push('/');
        self.0.push_str(&encode(&segment.to_string()));
        self
    }

    /// Appends one `name=value` query pair, the value percent-encoded.
    fn query(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        self.0.push(if self.0.contains('?') { '&' } else { '?' });
        self.0.push_str(name);
        self.0.push('=');
        self.0.push_str(&encode(&value.to_string()));
        self
    }

    /// [`Target::query`] when there is a value.
    fn query_opt(self, name: &str, value: Option<impl std::fmt::Display>) -> Self {
        match value {
            Some(v) => self.query(name, v),
            None => self,
        }
    }
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
    fn every_route_of_the_server_and_the_document_has_exactly_one_client_route() {
        let id: CommitId = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
        let br: BranchId = "br-0123456789abcdef0123456789abcdef".parse().unwrap();
        let art: ArtifactRef = format!("art-{}", "ab".repeat(32)).parse().unwrap();
        let name: RefName = "sessions/a/b".parse().unwrap();
        let who: Principal = "alice".parse().unwrap();
        let ws: WorkspaceId = "img-1".parse().unwrap();
        let file: FilePath = "a/b.md".parse().unwrap();
        let save: SaveId = format!("sav-{}", "0".repeat(32)).parse().unwrap();
        let pin = Pin::Ref("sessions/a/b".parse().unwrap());
        let client = [
            Route::Healthz,
            Route::OpenApi,
            Route::UploadArtifact,
            Route::UploadUrl,
            Route::DownloadArtifact(&art),
            Route::Checkpoint,
            Route::Batch,
            Route::Show(&id),
            Route::UpdateMetadata(&id),
            Route::History(&id, Some(3)),
            Route::MissingSummaries(Some(3), Some("c")),
            Route::Summarize(&id),
            Route::Compact(&id),
            Route::Materialize(&id),
            Route::Read,
            Route::Resolve(&who, None),
            Route::ListRefs("", None, None),
            Route::GetRef(&name),
            Route::SetRef(&name),
            Route::DeleteRef(&name, Some(&id)),
            Route::EvictRef(&name),
            Route::BranchCreate,
            Route::BranchStatusOfSession("s"),
            Route::BranchStatus(&br),
            Route::BranchReturn(&br),
            Route::SessionEnd("s"),
            Route::MemorySearch(&MemorySearch {
                text: "flaky test",
                limit: Some(3),
                min_confidence: Some(0.5),
                kind: Some(ctx_core::branch::memories::MemoryKind::AntiPattern),
            }),
            Route::EraseSession("s", true),
            Route::ErasePrincipal(&who, true),
            Route::ListPins,
            Route::SetPin(&pin),
            Route::DeletePin(&pin),
            Route::ListFiles(&ws, "a/"),
            Route::GetFile(&ws, &file),
            Route::PutFile(&ws, &file),
            Route::DeleteFile(&ws, &file),
            Route::AppendFile(&ws, &file),
            Route::ReadContext(&ws),
            Route::Gc,
            Route::GetAgent(&who),
            Route::PatchAgent(&who),
            Route::ClearContext(&who),
            Route::Window(&who, Some("t"), None),
            Route::SaveContext(&who),
            Route::ListSaves(&who),
            Route::GetSave(&who, &save),
            Route::RestoreSave(&who, &save),
            Route::PutWorkingContext(&who),
            Route::RestoreWorkingContext(&who),
            Route::ListProcesses(&who),
            Route::PutProcess(&who, "build-1"),
            Route::DeleteProcess(&who, "build-1"),
            Route::AssembleContext(&who, "t", Some("raw")),
        ];
        let server = routes(&Limits::default());
        let mut used = vec![0; server.len()];
        let doc = ctx_core::api::ApiDoc::json();
        let mut documented_used: Vec<(String, String)> = Vec::new();
        for r in client {
            let target = r.target();
            let path = target.split('?').next().unwrap();
            let matching: Vec<usize> = (0..server.len())
                .filter(|&i| server[i].method.as_str() == r.method().as_str())
                .filter(|&i| fits(server[i].path, path))
                .collect();
            assert_eq!(matching.len(), 1, "{} {target}", r.method());
            used[matching[0]] += 1;
            // The OpenAPI document has the same operation, and every query
            // parameter the client sends is one of its parameters.
            let method = r.method().as_str().to_lowercase();
            let ops = documented(&doc, &method, &target);
            assert_eq!(ops.len(), 1, "{method} {target} in the document");
            let (template, op) = ops[0];
            let params: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            for pair in target.split_once('?').map_or("", |(_, q)| q).split('&') {
                if let Some((name, _)) = pair.split_once('=') {
                    assert!(
                        params.contains(&name),
                        "{method} {template} documents no query parameter {name}: {params:?}"
                    );
                }
            }
            documented_used.push((method, template.clone()));
        }
        for (def, n) in server.iter().zip(used) {
            assert_eq!(n, 1, "{} {} has {n} client routes", def.method, def.path);
        }
        // And every documented operation has its client route.
        for (template, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                let n = documented_used
                    .iter()
                    .filter(|(m, t)| m == method && t == template)
                    .count();
                assert_eq!(n, 1, "{method} {template} has {n} client routes");
            }
        }
    }

    #[test]
    fn segments_and_query_values_are_percent_encoded() {
        let name: RefName = "sessions/a.b_c-d".parse().unwrap();
        assert_eq!(Route::GetRef(&name).target(), "/v1/refs/sessions/a.b_c-d");
        assert_eq!(
            Route::SessionEnd("a/b c?d#e%").target(),
            "/v1/sessions/a%2Fb%20c%3Fd%23e%25/end"
        );
        assert_eq!(
            Route::BranchStatusOfSession("a&b=c+d").target(),
            "/v1/branches?session_id=a%26b%3Dc%2Bd"
        );
        assert_eq!(
            Route::ListRefs("sessions/", Some(5), None).target(),
            "/v1/refs?prefix=sessions%2F&limit=5"
        );
        let who: Principal = "a+b@c".parse().unwrap();
        let at = DateTime::parse_from_rfc3339("2024-01-01T02:00:00.5+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            Route::Resolve(&who, Some(at)).target(),
            "/v1/resolve?principal=a%2Bb%40c&at=2024-01-01T00%3A00%3A00.500Z"
        );
        let id: CommitId = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
        assert_eq!(
            Route::History(&id, None).target(),
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
