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

use crate::auth::Authenticator;
use crate::error::Error;
use crate::id::{ArtifactRef, CommitId, Principal, RefName};
use crate::service::Service;
use crate::wire::{self, Operation, OperationInfo};

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
mod traced;
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

pub use crate::wire::Group;

/// One route: the operation it serves (its method, path and group come
/// from the operation's declaration in `wire`) and its handler.
pub struct RouteDef {
    /// The operation.
    pub op: OperationInfo,
    /// The group it belongs to.
    pub group: Group,
    /// Its method.
    pub method: Method,
    /// The path it is served on, in axum syntax (`{id}`, `{*name}`): the
    /// operation's path, up to a `{*name}` that something follows.
    pub path: &'static str,
    handler: MethodRouter<AppState>,
}

impl RouteDef {
    /// The path in OpenAPI syntax (`{*name}` becomes `{name}`).
    pub fn openapi_path(&self) -> String {
        self.op.openapi_path()
    }

    /// With layers: `wrap` applied to its method router.
    fn wrap(self, wrap: impl FnOnce(MethodRouter<AppState>) -> MethodRouter<AppState>) -> Self {
        RouteDef {
            handler: wrap(self.handler),
            ..self
        }
    }
}

/// The route serving operation `O` with `handler`.
fn route<O: Operation, T: 'static>(handler: impl axum::handler::Handler<T, AppState>) -> RouteDef {
    let op = O::INFO;
    let method = op.verb.method();
    let filter = MethodFilter::try_from(method.clone())
        .expect("an operation's verb is GET, PUT, POST, PATCH or DELETE");
    RouteDef {
        op,
        group: op.group,
        method,
        path: op.route_path(),
        handler: on(filter, handler).layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                traced::operation(op.id, req, next)
            },
        )),
    }
}

/// Every route of the API, family by family.
pub fn routes(limits: &crate::service::Limits) -> Vec<RouteDef> {
    [
        vec![
            route::<wire::Healthz, _>(healthz),
            route::<wire::OpenapiJson, _>(openapi_json),
        ],
        artifacts::routes(limits),
        commits::routes(),
        refs::routes(),
        lifecycle::routes(),
        branches::routes(),
        workspaces::routes(limits),
        agents::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The layer that bounds a raw upload's body at the artifact limit.
fn upload_limit(limits: &crate::service::Limits) -> DefaultBodyLimit {
    DefaultBodyLimit::max(limits.max_artifact_bytes)
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

/// A JSON response body. Handlers answer JSON through it alone (clippy
/// refuses `axum::Json`), and it takes only types with a schema: `wire`
/// types, the only ones that have one. So every response body is a `wire`
/// type, and a domain value must be converted into one first.
pub struct Reply<T>(pub T);

impl<T: serde::Serialize + utoipa::ToSchema> IntoResponse for Reply<T> {
    #[allow(clippy::disallowed_methods)] // the one place it is used
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}
/// Serves [`Healthz`](crate::wire::Healthz).
async fn healthz() -> &'static str {
    "ok"
}

/// Serves [`OpenapiJson`](crate::wire::OpenapiJson).
async fn openapi_json(State(s): State<AppState>, q: extract::Query) -> ApiResult<Response> {
    let all = q.optional_with("all", str::parse::<bool>)?;
    let doc = if all == Some(true) {
        ApiDoc::openapi()
    } else {
        ApiDoc::of(&s.service)
    };
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_json().unwrap_or_default(),
    )
        .into_response())
}

struct BearerAuth;

/// Every declared operation ([`wire::all`]), with the schemas it refers to.
struct Operations;

impl utoipa::Modify for Operations {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let mut schemas = Vec::new();
        for op in wire::all() {
            openapi.paths.add_path_operation(
                op.openapi_path(),
                vec![op.documented_method()],
                op.document(),
            );
            op.schemas(&mut schemas);
        }
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, schema) in schemas {
            components.schemas.entry(name).or_insert(schema);
        }
        // What a schema says beyond its fields (`wire::rules`).
        for (name, rules) in crate::wire::rules::all() {
            if let Some(schema) = components.schemas.remove(name.as_ref()) {
                components.schemas.insert(
                    name.into_owned(),
                    crate::wire::rules::with_rules(schema, &rules),
                );
            }
        }
    }
}

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

/// The OpenAPI 3.1 document of the API, generated from the operations
/// declared in `wire`.
#[derive(OpenApi)]
#[openapi(
    info(title = "ctx", description = "A git for AI-agent context."),
    components(schemas(
        ErrorBody, error::ErrorDetail, crate::wire::RefMove, ArtifactRef, CommitId,
        crate::id::BranchId, Principal, RefName, crate::wire::MissingSummaryFilter,
        crate::workspace::WorkspaceId, crate::workspace::FilePath, crate::agent::SaveId,
        crate::id::MemoryId, crate::wire::KnownFormat, crate::wire::PinName
    )),
    modifiers(&Operations, &BearerAuth, &CommonErrors)
)]
pub struct ApiDoc;

impl ApiDoc {
    /// The whole contract as JSON, as `GET /v1/openapi.json?all=true` serves
    /// it: what the contract's other forms (the MCP tools' input schemas,
    /// the clients' routes) are derived from or checked against.
    pub fn json() -> serde_json::Value {
        serde_json::to_value(Self::openapi()).expect("the OpenAPI document is JSON")
    }

    /// The document of one server, as `GET /v1/openapi.json` serves it: the
    /// contract without the operations its configuration does not serve
    /// (direct uploads, unless its blob store hands out URLs), and a
    /// compaction's `summarizer` as the names it takes.
    pub fn of(service: &Service) -> utoipa::openapi::OpenApi {
        let mut doc = Self::openapi();
        if !service.takes_direct_uploads() {
            let uploads = <wire::UploadUrl as wire::Operation>::INFO.openapi_path();
            doc.paths.paths.remove(&uploads);
        }
        let names = service.summarizer_names();
        if let Some(utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(compact))) = doc
            .components
            .as_mut()
            .and_then(|c| c.schemas.get_mut("CompactRequest"))
            && let Some(utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(field))) =
                compact.properties.get_mut("summarizer")
        {
            // Absent or null: the configured one.
            let names = names.into_iter().map(Into::into);
            field.enum_values = Some(names.chain([serde_json::Value::Null]).collect());
        }
        doc
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod summary_tests;
#[cfg(test)]
mod tests;
