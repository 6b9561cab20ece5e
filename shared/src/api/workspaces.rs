//! The workspace routes (group [`super::Group::Workspaces`]): files written
//! whole or appended to, read, listed and deleted, and read_context.
//!
//! A file's version is its tip commit id: `ETag` on reads, and `If-Match`
//! makes a write or delete a compare-and-swap (412 when stale).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Path, Query, path_id};
use super::{ApiResult, AppState};
use crate::auth::Caller;
use crate::error::{Error, ErrorKind};
use crate::id::CommitId;
use crate::service::FileVersion;
use crate::wire::FileList;
use crate::workspace::context::Context;
use crate::workspace::{FilePath, WorkspaceId};

fn ids(ws: &str, path: &str) -> Result<(WorkspaceId, FilePath), Error> {
    Ok((path_id("ws", ws)?, path_id("path", path)?))
}

/// The version `If-Match` names (quotes allowed), if given.
fn if_match(headers: &HeaderMap) -> Result<Option<CommitId>, Error> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = v
        .to_str()
        .map_err(|_| Error::invalid("If-Match", "If-Match is not ASCII"))?
        .trim();
    let text = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
    text.parse().map(Some).map_err(|e: Error| {
        Error::invalid(
            "If-Match",
            format!(
                "If-Match must be a file's version (a ctx-… id): {}",
                e.message
            ),
        )
    })
}

/// An error as a response; a stale `If-Match` is 412.
fn failed(e: Error) -> Response {
    let precondition = e.kind == ErrorKind::Conflict && e.field.as_deref() == Some("If-Match");
    let mut resp = ApiError(e).into_response();
    if precondition {
        *resp.status_mut() = StatusCode::PRECONDITION_FAILED;
    }
    resp
}

fn etag(version: &CommitId) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("\"{version}\"")).ok()
}

fn written(v: FileVersion) -> Response {
    let mut resp = axum::Json(&v).into_response();
    if let Some(tag) = etag(&v.version) {
        resp.headers_mut().insert(header::ETAG, tag);
    }
    resp
}

/// Writes a file's whole content (raw body) as its new version; with
/// `If-Match` only over that version.
#[utoipa::path(put, path = "/v1/workspaces/{ws}/files/{path}", tag = "workspaces",
    params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'"),
        ("If-Match" = Option<String>, Header, nullable = false, pattern = r#"^(W/)?"?ctx-[0-9a-f]{32}"?$"#, description = "The version the writer read (a ctx-… id, quoted or not)")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, description = "Written", body = FileVersion),
        (status = 400, description = "A bad workspace, path or If-Match", body = ErrorBody),
        (status = 412, description = "`If-Match` is not the current version (`current` says which is)", body = ErrorBody),
        (status = 413, description = "Larger than the artifact limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn put_file(
    State(s): State<AppState>,
    caller: Caller,
    Path((ws, path)): Path<(String, String)>,
    headers: HeaderMap,
    Body(bytes): Body,
) -> Response {
    let run = async {
        let (ws, path) = ids(&ws, &path)?;
        let expected = if_match(&headers)?;
        s.service
            .put_file(&caller.tenant, &ws, &path, bytes, expected)
            .await
    };
    match run.await {
        Ok(v) => written(v),
        Err(e) => failed(e),
    }
}

/// A file's bytes at its current version (`ETag`).
#[utoipa::path(get, path = "/v1/workspaces/{ws}/files/{path}", tag = "workspaces",
    params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'")),
    responses((status = 200, description = "The bytes", content_type = "application/octet-stream", body = Vec<u8>,
            headers(("etag" = String, description = "The version, quoted"))),
        (status = 400, description = "A bad workspace or path", body = ErrorBody),
        (status = 404, description = "No such file", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn get_file(
    State(s): State<AppState>,
    caller: Caller,
    Path((ws, path)): Path<(String, String)>,
) -> ApiResult<Response> {
    let (ws, path) = ids(&ws, &path)?;
    let f = s.service.read_file(&caller.tenant, &ws, &path).await?;
    let mut resp = (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        f.bytes,
    )
        .into_response();
    if let Some(tag) = etag(&f.version) {
        resp.headers_mut().insert(header::ETAG, tag);
    }
    Ok(resp)
}

/// Removes a file (its versions stay in history); with `If-Match` only
/// from that version.
#[utoipa::path(delete, path = "/v1/workspaces/{ws}/files/{path}", tag = "workspaces",
    params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'"),
        ("If-Match" = Option<String>, Header, nullable = false, pattern = r#"^(W/)?"?ctx-[0-9a-f]{32}"?$"#, description = "The version the caller read (a ctx-… id, quoted or not)")),
    responses((status = 204, description = "Removed"),
        (status = 400, description = "A bad workspace, path or If-Match", body = ErrorBody),
        (status = 404, description = "No such file", body = ErrorBody),
        (status = 412, description = "`If-Match` is not the current version", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn delete_file(
    State(s): State<AppState>,
    caller: Caller,
    Path((ws, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let run = async {
        let (ws, path) = ids(&ws, &path)?;
        let expected = if_match(&headers)?;
        s.service
            .delete_file(&caller.tenant, &ws, &path, expected)
            .await
    };
    match run.await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(e),
    }
}

/// The files of a workspace whose paths start with `prefix`, by path.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/files", tag = "workspaces",
    params(("ws" = WorkspaceId, Path),
        ("prefix" = Option<String>, Query, description = "Only paths that start with it")),
    responses((status = 200, description = "The files, by path", body = FileList),
        (status = 400, description = "A bad workspace or query", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn list_files(
    State(s): State<AppState>,
    caller: Caller,
    Path(ws): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<FileList>> {
    let ws: WorkspaceId = path_id("ws", &ws)?;
    let prefix: String = q
        .optional_with("prefix", |v| Ok::<_, Error>(v.to_owned()))?
        .unwrap_or_default();
    let files = s.service.list_files(&caller.tenant, &ws, &prefix).await?;
    Ok(axum::Json(FileList { files }))
}

/// Appends JSONL lines (each one JSON value) to a file as one version;
/// concurrent appends all land, each line whole.
#[utoipa::path(post, path = "/v1/workspaces/{ws}/append/{path}", tag = "workspaces",
    params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'")),
    request_body(content = String, content_type = "text/plain", description = "JSONL: one JSON value per line"),
    responses((status = 200, description = "Appended (`size`: the bytes appended)", body = FileVersion),
        (status = 400, description = "A bad workspace or path, or a line that is not one JSON value", body = ErrorBody),
        (status = 413, description = "Larger than the artifact limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn append_file(
    State(s): State<AppState>,
    caller: Caller,
    Path((ws, path)): Path<(String, String)>,
    Body(bytes): Body,
) -> ApiResult<Response> {
    let (ws, path) = ids(&ws, &path)?;
    let v = s
        .service
        .append_file(&caller.tenant, &ws, &path, &bytes)
        .await?;
    Ok(written(v))
}

/// The first-turn context of a workspace (docs/workspaces.md): tastes, brief, notes,
/// recent log, recent gaps, in that order. Missing files give empty parts.
#[utoipa::path(get, path = "/v1/workspaces/{ws}/context", tag = "workspaces",
    params(("ws" = WorkspaceId, Path)),
    responses((status = 200, description = "The context", body = Context),
        (status = 400, description = "A bad workspace", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn read_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(ws): Path<String>,
) -> ApiResult<axum::Json<Context>> {
    let ws: WorkspaceId = path_id("ws", &ws)?;
    Ok(axum::Json(
        s.service.read_context(&caller.tenant, &ws).await?,
    ))
}
