//! The HTTP API: one axum [`Router`] for every host. `ctx serve` serves all
//! of it; each Lambda serves the routes of its [`Group`]s.
//!
//! Handlers only translate between HTTP and [`Service`] calls; errors become
//! responses in [`error`].

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use utoipa::OpenApi;

use crate::auth::{Authenticator, Caller};
use crate::commit::Commit;
use crate::error::Error;
use crate::id::{ArtifactRef, CommitId, Principal, RefName};
use crate::service::{GcReport, Service};
use crate::store::RefRecord;
use crate::wire::{
    ArtifactInfo, CheckpointRequest, CompactRequest, CompactResponse, GcRequest, HistoryResponse,
    MaterializeRequest, MaterializeResponse, MissingSummaryList, RefList, ResolveResponse,
    SetRefRequest, SummarizeRequest, UpdateMetadataRequest, UploadRequest,
};

mod agents;
mod branches;
pub mod error;
pub mod extract;
mod lifecycle;
pub mod limits;
#[cfg(any(test, feature = "conformance"))]
pub mod testing;
mod workspaces;

use error::{ApiError, ErrorBody};
use extract::{Body, Json, Path, Query, path_id};

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The operations.
    pub service: Arc<Service>,
    /// Who is calling.
    pub auth: Arc<dyn Authenticator>,
}

/// A set of routes one host serves (one Lambda function per group or more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Group {
    /// `/healthz`, `/v1/openapi.json`.
    Meta,
    /// Artifact upload and download.
    Artifacts,
    /// Checkpoint (commit creation).
    Checkpoint,
    /// Show, history, update-metadata.
    History,
    /// Materialize.
    Materialize,
    /// Resolve.
    Resolve,
    /// Refs.
    Refs,
    /// Context folding: branches and session end.
    Branches,
    /// Workspace files and read_context.
    Workspaces,
    /// Agents' live context: settings, window, clear, saves, working
    /// context.
    Agents,
}

impl Group {
    /// Every group.
    pub const ALL: &'static [Group] = &[
        Group::Meta,
        Group::Artifacts,
        Group::Checkpoint,
        Group::History,
        Group::Materialize,
        Group::Resolve,
        Group::Refs,
        Group::Branches,
        Group::Workspaces,
        Group::Agents,
    ];
}

/// One route: its group, method, path (axum syntax) and handler.
pub struct RouteDef {
    /// The group it belongs to.
    pub group: Group,
    /// Its method.
    pub method: Method,
    /// Its path, in axum syntax (`{id}`, `{*name}`).
    pub path: &'static str,
    /// The path the OpenAPI document gives, when not `path`'s: a route
    /// with a suffix after a name that may contain '/' is served on the
    /// greedy `path` (axum and API Gateway allow nothing after it) and
    /// its handler takes the suffix off.
    doc_path: Option<&'static str>,
    handler: MethodRouter<AppState>,
}

impl RouteDef {
    /// The path in OpenAPI syntax (`{*name}` becomes `{name}`).
    pub fn openapi_path(&self) -> String {
        self.doc_path.unwrap_or(self.path).replace("{*", "{")
    }
}

/// A route serving `handler` on `method` (stated once: the handler's
/// method filter is derived from it) and `path`.
fn route<H, T>(group: Group, method: Method, path: &'static str, handler: H) -> RouteDef
where
    H: axum::handler::Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone())
        .expect("the route table names only GET, PUT, POST, PATCH and DELETE");
    RouteDef {
        group,
        method,
        path,
        doc_path: None,
        handler: on(filter, handler),
    }
}

impl RouteDef {
    /// Served on `path` and documented as `doc_path`.
    fn documented_as(self, doc_path: &'static str) -> Self {
        RouteDef {
            doc_path: Some(doc_path),
            ..self
        }
    }

    /// With layers: `wrap` applied to its method router.
    fn wrap(self, wrap: impl FnOnce(MethodRouter<AppState>) -> MethodRouter<AppState>) -> Self {
        RouteDef {
            handler: wrap(self.handler),
            ..self
        }
    }
}

/// Every route of the API.
pub fn routes(limits: &crate::service::Limits) -> Vec<RouteDef> {
    use Group::*;
    let upload_limit = DefaultBodyLimit::max(limits.max_artifact_bytes);
    // Every route on `/v1/refs/{*name}` answers 405 for the methods of
    // the other path it serves (`…/evict` or the ref itself).
    let suffix_guarded = |m: MethodRouter<AppState>| {
        m.route_layer(axum::middleware::from_fn(lifecycle::refs_suffix_guard))
    };
    vec![
        route(Meta, Method::GET, "/healthz", healthz),
        route(Meta, Method::GET, "/v1/openapi.json", openapi_json),
        route(Artifacts, Method::POST, "/v1/artifacts", upload_artifact).wrap(|m| {
            m.layer((
                upload_limit,
                axum::Extension(extract::BodyLimitNote(limits.body_limit_note(false))),
            ))
        }),
        route(Artifacts, Method::POST, "/v1/uploads", upload_url),
        route(
            Artifacts,
            Method::GET,
            "/v1/artifacts/{art}",
            download_artifact,
        ),
        route(Checkpoint, Method::POST, "/v1/commits", checkpoint),
        route(History, Method::GET, "/v1/commits/{ctx}", show),
        route(History, Method::PATCH, "/v1/commits/{ctx}", update_metadata),
        route(History, Method::GET, "/v1/commits/{ctx}/history", history),
        route(History, Method::GET, "/v1/commits", missing_summaries),
        route(
            History,
            Method::POST,
            "/v1/commits/{ctx}/summarize",
            summarize,
        ),
        route(
            Checkpoint,
            Method::POST,
            "/v1/commits/{ctx}/compact",
            compact,
        ),
        route(
            Materialize,
            Method::POST,
            "/v1/commits/{ctx}/materialize",
            materialize,
        ),
        route(Resolve, Method::GET, "/v1/resolve", resolve),
        route(Refs, Method::GET, "/v1/refs", list_refs),
        route(Refs, Method::GET, "/v1/refs/{*name}", get_ref).wrap(suffix_guarded),
        route(Refs, Method::PUT, "/v1/refs/{*name}", set_ref).wrap(suffix_guarded),
        route(Refs, Method::DELETE, "/v1/refs/{*name}", delete_ref).wrap(suffix_guarded),
        route(Refs, Method::POST, "/v1/refs/{*name}", lifecycle::evict_ref)
            .documented_as("/v1/refs/{*name}/evict")
            .wrap(suffix_guarded),
        route(
            Refs,
            Method::DELETE,
            "/v1/sessions/{id}",
            lifecycle::erase_session,
        ),
        route(
            Refs,
            Method::DELETE,
            "/v1/principals/{principal}",
            lifecycle::erase_principal,
        ),
        route(Refs, Method::GET, "/v1/pins", lifecycle::list_pins),
        route(
            Refs,
            Method::PUT,
            "/v1/pins/{kind}/{*name}",
            lifecycle::set_pin,
        ),
        route(
            Refs,
            Method::DELETE,
            "/v1/pins/{kind}/{*name}",
            lifecycle::delete_pin,
        ),
        route(
            Branches,
            Method::POST,
            "/v1/branches",
            branches::branch_create,
        ),
        route(
            Branches,
            Method::GET,
            "/v1/branches",
            branches::branch_status_of_session,
        ),
        route(
            Branches,
            Method::GET,
            "/v1/branches/{br}",
            branches::branch_status,
        ),
        route(
            Branches,
            Method::POST,
            "/v1/branches/{br}/return",
            branches::branch_return,
        ),
        route(
            Branches,
            Method::POST,
            "/v1/sessions/{id}/end",
            branches::session_end,
        ),
        route(
            Workspaces,
            Method::GET,
            "/v1/workspaces/{ws}/files",
            workspaces::list_files,
        ),
        route(
            Workspaces,
            Method::GET,
            "/v1/workspaces/{ws}/files/{*path}",
            workspaces::get_file,
        ),
        route(
            Workspaces,
            Method::PUT,
            "/v1/workspaces/{ws}/files/{*path}",
            workspaces::put_file,
        )
        .wrap(|m| m.layer(upload_limit)),
        route(
            Workspaces,
            Method::DELETE,
            "/v1/workspaces/{ws}/files/{*path}",
            workspaces::delete_file,
        ),
        route(
            Workspaces,
            Method::POST,
            "/v1/workspaces/{ws}/append/{*path}",
            workspaces::append_file,
        )
        .wrap(|m| m.layer(upload_limit)),
        route(
            Workspaces,
            Method::GET,
            "/v1/workspaces/{ws}/context",
            workspaces::read_context,
        ),
        route(Artifacts, Method::POST, "/v1/gc", gc),
        route(Agents, Method::GET, "/v1/agents/{agent}", agents::get_agent),
        route(
            Agents,
            Method::PATCH,
            "/v1/agents/{agent}",
            agents::patch_agent,
        ),
        route(
            Agents,
            Method::POST,
            "/v1/agents/{agent}/clear",
            agents::clear,
        ),
        route(
            Agents,
            Method::GET,
            "/v1/agents/{agent}/window",
            agents::window,
        ),
        route(
            Agents,
            Method::POST,
            "/v1/agents/{agent}/saves",
            agents::save,
        ),
        route(
            Agents,
            Method::GET,
            "/v1/agents/{agent}/saves",
            agents::list_saves,
        ),
        route(
            Agents,
            Method::GET,
            "/v1/agents/{agent}/saves/{save_id}",
            agents::get_save,
        ),
        route(
            Agents,
            Method::POST,
            "/v1/agents/{agent}/saves/{save_id}/restore",
            agents::restore_save,
        ),
        route(
            Agents,
            Method::PUT,
            "/v1/agents/{agent}/working-context",
            agents::put_working_context,
        ),
        route(
            Agents,
            Method::POST,
            "/v1/agents/{agent}/working-context/restore",
            agents::restore_working_context,
        ),
    ]
}

/// The router for the given groups (all of them for `ctx serve`).
pub fn router(state: AppState, groups: &[Group]) -> Router {
    let limits = *state.service.limits();
    let mut r = Router::new();
    for def in routes(&limits) {
        if groups.contains(&def.group) {
            r = r.route(def.path, def.handler);
        }
    }
    r.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limits.max_json_bytes()))
        .layer(axum::Extension(extract::BodyLimitNote(
            limits.body_limit_note(true),
        )))
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError(Error::not_found(format!("route {}", uri.path())))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Response {
    let e = Error::invalid(
        "method",
        format!("{method} is not allowed on {}", uri.path()),
    );
    let mut resp = ApiError(e).into_response();
    *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    // axum's own `Allow` would list both paths' methods (one route serves
    // them); this one lists the documented path's.
    if let Some(allow) = lifecycle::refs_allow(uri.path()) {
        resp.headers_mut()
            .insert(header::ALLOW, axum::http::HeaderValue::from_static(allow));
    }
    resp
}

type ApiResult<T> = Result<T, ApiError>;

/// The response header a checkpoint into a branch carries from 80% of its
/// budget (and when it exhausted it).
pub const BUDGET_WARNING: &str = "ctx-budget-warning";

/// The response header, one per warning, a checkpoint stored as written
/// although it looks wrong carries (a runtime's tool result that answers
/// no tool use in the chain).
pub const CHECKPOINT_WARNING: &str = "ctx-warning";

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, description = "The server is up", body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta", responses((status = 200, description = "The OpenAPI 3.1 document")))]
async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_json().unwrap_or_default(),
    )
        .into_response()
}

/// Stores raw bytes as an artifact: 201 when new, 200 when already stored.
#[utoipa::path(post, path = "/v1/artifacts", tag = "artifacts",
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, description = "Stored", body = ArtifactInfo),
        (status = 200, description = "Already stored", body = ArtifactInfo),
        (status = 400, description = "The body is empty or cannot be read", body = ErrorBody),
        (status = 413, description = "Larger than the artifact limit (64 MiB by default)", body = ErrorBody)),
    security(("bearer" = [])))]
async fn upload_artifact(
    State(s): State<AppState>,
    caller: Caller,
    Body(bytes): Body,
) -> ApiResult<Response> {
    if bytes.is_empty() {
        return Err(
            Error::invalid("body", "the artifact is empty: send its bytes as the body").into(),
        );
    }
    let put = s.service.upload_artifact(&caller.tenant, bytes).await?;
    let status = if put.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        axum::Json(ArtifactInfo {
            artifact_ref: put.artifact,
            size: put.size,
        }),
    )
        .into_response())
}

/// A URL to PUT a large artifact to directly (AWS mode; bodies beyond the
/// API's limits). Then checkpoint with `artifact_ref`: the bytes are
/// re-hashed before the commit references them.
#[utoipa::path(post, path = "/v1/uploads", tag = "artifacts", request_body = UploadRequest,
    responses((status = 201, description = "Where to PUT the bytes", body = crate::store::PresignedUpload),
        (status = 400, description = "A malformed request, or storage that takes no direct uploads (embedded mode)", body = ErrorBody),
        (status = 413, description = "`size` over the direct-upload limit, or a body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn upload_url(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<UploadRequest>,
) -> ApiResult<Response> {
    let up = s
        .service
        .upload_url(&caller.tenant, &req.artifact_ref, req.size)
        .await?;
    Ok((StatusCode::CREATED, axum::Json(up)).into_response())
}

/// An artifact's bytes, verified against their hash.
#[utoipa::path(get, path = "/v1/artifacts/{art}", tag = "artifacts",
    params(("art" = ArtifactRef, Path)),
    responses((status = 200, description = "The bytes", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "`art` is not an artifact ref", body = ErrorBody),
        (status = 404, description = "No such artifact", body = ErrorBody)),
    security(("bearer" = [])))]
async fn download_artifact(
    State(s): State<AppState>,
    caller: Caller,
    Path(art): Path<String>,
) -> ApiResult<Response> {
    let art: ArtifactRef = path_id("art", &art)?;
    let bytes = s.service.download_artifact(&caller.tenant, &art).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

/// Records `req` as `POST /v1/commits` does: converted with
/// [`CheckpointRequest::into_new_commit`], errors about the delta naming
/// the field it was sent in.
///
/// # Errors
/// As [`Service::checkpoint`].
pub async fn submit_checkpoint(
    service: &Service,
    tenant: &crate::id::TenantId,
    req: CheckpointRequest,
) -> Result<crate::service::Checkpointed, Error> {
    // The service names an inline delta `delta`; it may have come as
    // `delta_base64`.
    let field = req.delta_field();
    let new = req.into_new_commit(service.limits())?;
    service
        .checkpoint(tenant, new)
        .await
        .map_err(|e| match e.field.as_deref() {
            Some("delta") if field != "delta" => e.with_field(field),
            _ => e,
        })
}

/// Records a checkpoint: 201 with the new commit, or 200 with the stored one
/// when the same checkpoint (same `created_at`) was recorded before. Into a
/// branch's chain (`ref: branches/br-…`) it counts against the budget: the
/// `ctx-budget-warning` header from 80%, a forced return at 100%, then 409.
/// A `ctx-warning` header per thing stored as written although it looks
/// wrong (a runtime transcript's tool result answering no tool use).
#[utoipa::path(post, path = "/v1/commits", tag = "commits", request_body = CheckpointRequest,
    responses((status = 201, description = "Recorded", body = Commit,
            headers(("ctx-budget-warning" = String, description = "Into a branch at 80% of its budget or more"))),
        (status = 200, description = "Recorded before", body = Commit),
        (status = 400, description = "A malformed request, or a parent, artifact or format that does not exist", body = ErrorBody),
        (status = 404, description = "The branch of the ref does not exist", body = ErrorBody),
        (status = 409, description = "The ref moved (`current` says where to), or the branch ended", body = ErrorBody),
        (status = 413, description = "The delta or the body over its limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn checkpoint(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<CheckpointRequest>,
) -> ApiResult<Response> {
    let done = submit_checkpoint(&s.service, &caller.tenant, req).await?;
    let crate::service::Checkpointed {
        commit,
        created,
        budget: notice,
        warnings,
    } = done;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = (status, axum::Json(commit)).into_response();
    if let Some(n) = notice
        && let Ok(v) = axum::http::HeaderValue::from_str(&n.message)
    {
        // A checkpoint into a branch at 80%+ of its budget, or the one that
        // exhausted it.
        resp.headers_mut().insert(BUDGET_WARNING, v);
    }
    for w in &warnings {
        let ascii: String = w
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(v) = axum::http::HeaderValue::from_str(&ascii) {
            resp.headers_mut().append(CHECKPOINT_WARNING, v);
        }
    }
    Ok(resp)
}

/// One commit.
#[utoipa::path(get, path = "/v1/commits/{ctx}", tag = "commits",
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit", body = Commit),
        (status = 400, description = "`ctx` is not a commit id", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(s.service.show(&caller.tenant, &id).await?))
}

/// Changes a commit's summary (null clears it) and replaces its tags.
#[utoipa::path(patch, path = "/v1/commits/{ctx}", tag = "commits", request_body = UpdateMetadataRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit as changed", body = Commit),
        (status = 400, description = "A malformed request", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn update_metadata(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<UpdateMetadataRequest>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .update_metadata(&caller.tenant, &id, req.summary, req.tags)
            .await?,
    ))
}

/// The commits from `ctx` towards the root, newest first.
#[utoipa::path(get, path = "/v1/commits/{ctx}/history", tag = "commits",
    params(("ctx" = CommitId, Path),
        ("depth" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 50, at most 1000)")),
    responses((status = 200, description = "The commits, newest first", body = HistoryResponse),
        (status = 400, description = "`ctx` is not a commit id, or `depth` is out of range", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn history(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<HistoryResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    let depth = q.optional_with("depth", str::parse::<usize>)?.unwrap_or(50);
    let commits = s.service.history(&caller.tenant, &id, depth).await?;
    Ok(axum::Json(HistoryResponse { commits }))
}

/// Commits lacking a summary, oldest first, with their summary queue state
/// (claimed, failed, retry time). Only `missing_summary=true` is listed.
#[utoipa::path(get, path = "/v1/commits", tag = "commits",
    params(("missing_summary" = crate::wire::MissingSummaryFilter, Query, description = "`true`: the commits lacking a summary (the only listing there is)"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 100, at most 1000)"),
        ("cursor" = Option<String>, Query, pattern = r"^-?[0-9]{1,18}\.ctx-[0-9a-f]{32}$", description = "The `next_cursor` of the previous page")),
    responses((status = 200, description = "The commits, oldest first", body = MissingSummaryList),
        (status = 400, description = "`missing_summary` is not true, or `limit` or `cursor` is malformed", body = ErrorBody)),
    security(("bearer" = [])))]
async fn missing_summaries(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<MissingSummaryList>> {
    let missing = q.optional_with("missing_summary", str::parse::<bool>)?;
    if missing != Some(true) {
        return Err(Error::invalid(
            "missing_summary",
            "listing commits needs missing_summary=true (only commits lacking a summary are listed)",
        )
        .into());
    }
    let limit = q
        .optional_with("limit", str::parse::<usize>)?
        .unwrap_or(100);
    let cursor = q.optional_with("cursor", str::parse::<crate::store::SummaryCursor>)?;
    let page = s
        .service
        .missing_summaries(&caller.tenant, cursor.as_ref(), limit)
        .await?;
    Ok(axum::Json(page.into()))
}

/// Summarizes one commit now (its back-off ignored) and returns it.
#[utoipa::path(post, path = "/v1/commits/{ctx}/summarize", tag = "commits", request_body = SummarizeRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit with its new summary", body = Commit),
        (status = 400, description = "A malformed request", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 409, description = "It has a summary and `force` is not set, or another run is summarizing it", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody),
        (status = 503, description = "No summarizer is configured, or it failed (recorded as `summary_error`)", body = ErrorBody)),
    security(("bearer" = [])))]
async fn summarize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<SummarizeRequest>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .summarize_one(&caller.tenant, &id, req.force)
            .await?,
    ))
}

/// Collects garbage: one page of the caller's artifacts that no commit,
/// cache entry or pending upload needs and that are older than the grace
/// period (`CTX_GC_GRACE_SECS`) are removed (or, with `dry_run`, listed).
/// Call again with `cursor` set to the report's `next` until it is absent.
#[utoipa::path(post, path = "/v1/gc", tag = "artifacts", request_body = Option<GcRequest>,
    responses((status = 200, description = "What this page removed (or would remove)", body = GcReport),
        (status = 400, description = "A malformed request, a cursor no call handed out, or a limit out of range", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn gc(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<Option<GcRequest>>,
) -> ApiResult<axum::Json<GcReport>> {
    // The body is optional: absent, empty or `null` is the default.
    let req = req.unwrap_or_default();
    let opts = crate::service::GcOptions {
        dry_run: req.dry_run,
        cursor: req.cursor,
        limit: req.limit.map(|l| l as usize),
    };
    Ok(axum::Json(s.service.gc(&caller.tenant, &opts).await?))
}

/// Re-compacts the context at `ctx`: summarizes it (from its nearest
/// compaction) and records the summary as a compaction commit whose parent
/// is `ctx`, in the chain's format; a materialize of the new commit starts
/// at the summary, `stop: root` still reaches the original history.
#[utoipa::path(post, path = "/v1/commits/{ctx}/compact", tag = "commits", request_body = CompactRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 201, description = "The compaction was recorded", body = CompactResponse),
        (status = 200, description = "The same compaction was recorded before", body = CompactResponse),
        (status = 400, description = "A malformed request or an unknown summarizer", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 409, description = "The ref moved", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody),
        (status = 503, description = "The summarizer failed; nothing was recorded", body = ErrorBody)),
    security(("bearer" = [])))]
async fn compact(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<CompactRequest>,
) -> ApiResult<Response> {
    let id: CommitId = path_id("ctx", &id)?;
    let summarizer = s.service.summarizer_named(req.summarizer.as_deref())?;
    let done = s
        .service
        .compact(&caller.tenant, &id, summarizer.as_ref(), req.ref_move)
        .await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = CompactResponse {
        commit: done.commit,
        replaced_messages: done.replaced_messages,
        replaced_tokens: done.replaced_tokens,
    };
    Ok((status, axum::Json(body)).into_response())
}

/// Rebuilds the context at `ctx` from its stop point; cached per (commit, stop, format).
#[utoipa::path(post, path = "/v1/commits/{ctx}/materialize", tag = "commits", request_body = MaterializeRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The context", body = MaterializeResponse),
        (status = 400, description = "A malformed request, a stop that is not an ancestor, or a format that cannot be produced", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn materialize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<MaterializeRequest>,
) -> ApiResult<axum::Json<MaterializeResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .materialize(
                &caller.tenant,
                &id,
                req.stop.unwrap_or_default(),
                req.format,
            )
            .await?
            .into(),
    ))
}

/// What did `principal` know at `at`: the newest commit at or before it.
#[utoipa::path(get, path = "/v1/resolve", tag = "commits",
    params(("principal" = Principal, Query),
        ("at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "RFC 3339; default now")),
    responses((status = 200, description = "The commit", body = ResolveResponse),
        (status = 400, description = "`principal` or `at` missing or malformed", body = ErrorBody),
        (status = 404, description = "No commit of `principal` at or before `at`", body = ErrorBody)),
    security(("bearer" = [])))]
async fn resolve(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<ResolveResponse>> {
    let principal: Principal = q.required("principal")?;
    let at = q.optional_with("at", |v| {
        chrono::DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&chrono::Utc))
    })?;
    let id = s.service.resolve(&caller.tenant, &principal, at).await?;
    Ok(axum::Json(ResolveResponse { id }))
}

/// Refs whose names start with `prefix`, by name.
#[utoipa::path(get, path = "/v1/refs", tag = "refs",
    params(("prefix" = Option<String>, Query, description = "Only names that start with it"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "default 100, at most 1000")),
    responses((status = 200, description = "The refs, by name", body = RefList),
        (status = 400, description = "`limit` out of range, or a malformed query string", body = ErrorBody)),
    security(("bearer" = [])))]
async fn list_refs(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<RefList>> {
    let prefix: String = q
        .optional_with("prefix", |v| Ok::<_, Error>(v.to_owned()))?
        .unwrap_or_default();
    let limit = q
        .optional_with("limit", str::parse::<usize>)?
        .unwrap_or(100);
    let refs = s.service.list_refs(&caller.tenant, &prefix, limit).await?;
    Ok(axum::Json(RefList { refs }))
}

/// A ref.
#[utoipa::path(get, path = "/v1/refs/{name}", tag = "refs",
    params(("name" = RefName, Path, description = "may contain '/'")),
    responses((status = 200, description = "The ref", body = RefRecord),
        (status = 400, description = "`name` is not a ref name", body = ErrorBody),
        (status = 404, description = "No such ref", body = ErrorBody)),
    security(("bearer" = [])))]
async fn get_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<axum::Json<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    Ok(axum::Json(s.service.get_ref(&caller.tenant, &name).await?))
}

/// Creates a ref (no `expected`) or moves it by compare-and-swap; 409 with
/// `current` when `expected` is stale.
#[utoipa::path(put, path = "/v1/refs/{name}", tag = "refs", request_body = SetRefRequest,
    params(("name" = RefName, Path, description = "may contain '/'")),
    responses((status = 200, description = "The ref as set", body = RefRecord),
        (status = 400, description = "A malformed request, or a target that does not exist", body = ErrorBody),
        (status = 409, description = "`expected` is stale (`current` says where the ref points)", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
async fn set_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Json(req): Json<SetRefRequest>,
) -> ApiResult<axum::Json<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    Ok(axum::Json(
        s.service
            .set_ref(&caller.tenant, &name, &req.target, req.expected.as_ref())
            .await?,
    ))
}

/// Removes the ref alone; its commits and artifacts stay (erasing those is
/// the session and principal erase). With `expected`, only while the ref
/// still points there.
#[utoipa::path(delete, path = "/v1/refs/{name}", tag = "refs",
    params(("name" = RefName, Path, description = "may contain '/'"),
        ("expected" = Option<CommitId>, Query, description = "Delete only while the ref points at this commit")),
    responses((status = 200, description = "The ref as it was when removed", body = RefRecord),
        (status = 400, description = "`name` is not a ref name, or `expected` is not a commit id", body = ErrorBody),
        (status = 404, description = "No such ref", body = ErrorBody),
        (status = 409, description = "`expected` is stale (`current` says where the ref points)", body = ErrorBody)),
    security(("bearer" = [])))]
async fn delete_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    let expected = q.optional_with("expected", str::parse::<CommitId>)?;
    Ok(axum::Json(
        s.service
            .delete_ref(&caller.tenant, &name, expected.as_ref())
            .await?,
    ))
}

struct BearerAuth;

/// The errors every authenticated operation may answer, added once here
/// rather than on each handler: 401 without a known bearer token, and 503
/// (with `Retry-After`) when a store is unavailable.
struct CommonErrors;

impl utoipa::Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let error = |description: &str, retry: bool| {
            let mut r = ResponseBuilder::new().description(description).content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            );
            if retry {
                r = r.header(
                    "retry-after",
                    HeaderBuilder::new()
                        .schema(<u64 as utoipa::PartialSchema>::schema())
                        .description(Some("Seconds to wait before retrying"))
                        .build(),
                );
            }
            r.build()
        };
        let unauthenticated = error("No bearer token, or one that is not known", false);
        let unavailable = error("A store is unavailable; retry after `Retry-After`", true);
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.patch,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                if op.security.as_ref().is_some_and(|s| !s.is_empty()) {
                    let responses = &mut op.responses.responses;
                    responses
                        .entry("401".to_owned())
                        .or_insert_with(|| unauthenticated.clone().into());
                    responses
                        .entry("503".to_owned())
                        .or_insert_with(|| unavailable.clone().into());
                }
            }
        }
    }
}

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI 3.1 document of the API, generated from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(title = "ctx", description = "A git for AI-agent context."),
    paths(
        healthz, openapi_json, upload_artifact, upload_url, download_artifact, checkpoint, show,
        update_metadata, history, missing_summaries, summarize, compact, materialize, resolve, list_refs, get_ref, set_ref, delete_ref, gc,
        branches::branch_create, branches::branch_status_of_session, branches::branch_status,
        branches::branch_return, branches::session_end, lifecycle::erase_session,
        lifecycle::erase_principal, lifecycle::evict_ref,
        lifecycle::list_pins, lifecycle::set_pin, lifecycle::delete_pin, workspaces::put_file,
        workspaces::get_file, workspaces::delete_file, workspaces::list_files,
        workspaces::append_file, workspaces::read_context, agents::get_agent,
        agents::patch_agent, agents::clear, agents::window, agents::save, agents::list_saves,
        agents::get_save, agents::restore_save, agents::put_working_context,
        agents::restore_working_context
    ),
    components(schemas(
        ErrorBody, error::ErrorDetail, crate::store::RefMove, ArtifactRef, CommitId,
        crate::id::BranchId, Principal, RefName, crate::wire::MissingSummaryFilter,
        crate::workspace::WorkspaceId, crate::workspace::FilePath, crate::agent::SaveId
    )),
    modifiers(&BearerAuth, &CommonErrors)
)]
pub struct ApiDoc;

impl ApiDoc {
    /// The document as JSON, as `GET /v1/openapi.json` serves it: what the
    /// contract's other forms (the MCP tools' input schemas, the clients'
    /// routes) are derived from or checked against.
    pub fn json() -> serde_json::Value {
        serde_json::to_value(Self::openapi()).expect("the OpenAPI document is JSON")
    }
}

#[cfg(test)]
mod summary_tests;
#[cfg(test)]
mod tests;
