//! The HTTP API: one axum [`Router`] for every host. `ctx serve` serves all
//! of it; each Lambda serves the routes of its [`Group`]s.
//!
//! Handlers only translate between HTTP and [`Service`] calls; errors become
//! responses in [`error`].

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use utoipa::OpenApi;

use crate::auth::Authenticator;
use crate::error::Error;
use crate::id::{ArtifactRef, CommitId, Principal, RefName};
use crate::service::Service;

mod agents;
mod artifacts;
mod branches;
mod commits;
pub mod error;
pub mod extract;
mod lifecycle;
pub mod limits;
mod refs;
#[cfg(any(test, feature = "conformance"))]
pub mod testing;
mod workspaces;

pub use commits::{BUDGET_WARNING, CHECKPOINT_WARNING, submit_batch, submit_checkpoint};

use error::{ApiError, ErrorBody};

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
        route(
            Artifacts,
            Method::POST,
            "/v1/artifacts",
            artifacts::upload_artifact,
        )
        .wrap(|m| {
            m.layer((
                upload_limit,
                axum::Extension(extract::BodyLimitNote(limits.body_limit_note(false))),
            ))
        }),
        route(
            Artifacts,
            Method::POST,
            "/v1/uploads",
            artifacts::upload_url,
        ),
        route(
            Artifacts,
            Method::GET,
            "/v1/artifacts/{art}",
            artifacts::download_artifact,
        ),
        route(Checkpoint, Method::POST, "/v1/commits", commits::checkpoint),
        route(Checkpoint, Method::POST, "/v1/batch", commits::batch),
        route(History, Method::GET, "/v1/commits/{ctx}", commits::show),
        route(
            History,
            Method::PATCH,
            "/v1/commits/{ctx}",
            commits::update_metadata,
        ),
        route(
            History,
            Method::GET,
            "/v1/commits/{ctx}/history",
            commits::history,
        ),
        route(
            History,
            Method::GET,
            "/v1/commits",
            commits::missing_summaries,
        ),
        route(
            History,
            Method::POST,
            "/v1/commits/{ctx}/summarize",
            commits::summarize,
        ),
        route(
            Checkpoint,
            Method::POST,
            "/v1/commits/{ctx}/compact",
            commits::compact,
        ),
        route(
            Materialize,
            Method::POST,
            "/v1/commits/{ctx}/materialize",
            commits::materialize,
        ),
        route(Materialize, Method::POST, "/v1/read", commits::read),
        route(Resolve, Method::GET, "/v1/resolve", commits::resolve),
        route(Refs, Method::GET, "/v1/refs", refs::list_refs),
        route(Refs, Method::GET, "/v1/refs/{*name}", refs::get_ref).wrap(suffix_guarded),
        route(Refs, Method::PUT, "/v1/refs/{*name}", refs::set_ref).wrap(suffix_guarded),
        route(Refs, Method::DELETE, "/v1/refs/{*name}", refs::delete_ref).wrap(suffix_guarded),
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
            Branches,
            Method::GET,
            "/v1/memories",
            branches::memory_search,
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
        route(Artifacts, Method::POST, "/v1/gc", artifacts::gc),
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
        route(
            Agents,
            Method::GET,
            "/v1/agents/{agent}/processes",
            agents::list_processes,
        ),
        route(
            Agents,
            Method::PUT,
            "/v1/agents/{agent}/processes/{process_id}",
            agents::put_process,
        ),
        route(
            Agents,
            Method::DELETE,
            "/v1/agents/{agent}/processes/{process_id}",
            agents::delete_process,
        ),
        route(
            Agents,
            Method::GET,
            "/v1/agents/{agent}/context",
            agents::assemble,
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
        healthz, openapi_json, artifacts::upload_artifact, artifacts::upload_url,
        artifacts::download_artifact, commits::checkpoint, commits::batch, commits::show,
        commits::update_metadata, commits::history, commits::missing_summaries,
        commits::summarize, commits::compact, commits::materialize, commits::read, commits::resolve,
        refs::list_refs, refs::get_ref, refs::set_ref, refs::delete_ref, artifacts::gc,
        branches::branch_create, branches::branch_status_of_session, branches::branch_status,
        branches::branch_return, branches::session_end, branches::memory_search,
        lifecycle::erase_session,
        lifecycle::erase_principal, lifecycle::evict_ref,
        lifecycle::list_pins, lifecycle::set_pin, lifecycle::delete_pin, workspaces::put_file,
        workspaces::get_file, workspaces::delete_file, workspaces::list_files,
        workspaces::append_file, workspaces::read_context, agents::get_agent,
        agents::patch_agent, agents::clear, agents::window, agents::save, agents::list_saves,
        agents::get_save, agents::restore_save, agents::put_working_context,
        agents::restore_working_context, agents::list_processes, agents::put_process,
        agents::delete_process, agents::assemble
    ),
    components(schemas(
        ErrorBody, error::ErrorDetail, crate::store::RefMove, ArtifactRef, CommitId,
        crate::id::BranchId, Principal, RefName, crate::wire::MissingSummaryFilter,
        crate::workspace::WorkspaceId, crate::workspace::FilePath, crate::agent::SaveId,
        crate::id::MemoryId
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
mod batch_tests;
#[cfg(test)]
mod summary_tests;
#[cfg(test)]
mod tests;
