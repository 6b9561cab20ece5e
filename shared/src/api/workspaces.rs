//! The workspace routes (group [`super::Group::Workspaces`]): files written
//! whole or appended to, read, listed and deleted, and read_context.
//!
//! A file's version is its tip commit id: `ETag` on reads, and `If-Match`
//! makes a write or delete a compare-and-swap (412 when stale).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::{Body, Path, Query, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::error::{Error, ErrorKind};
use crate::id::CommitId;
use crate::wire;
use crate::wire::{Context, FileList, FileVersion};
use crate::workspace::{FilePath, WorkspaceId};

/// This family's routes.
pub(super) fn routes(limits: &crate::service::Limits) -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::ListFiles, _>(list_files),
        super::route::<wire::GetFile, _>(get_file),
        super::route::<wire::PutFile, _>(put_file).wrap(|m| m.layer(super::upload_limit(limits))),
        super::route::<wire::DeleteFile, _>(delete_file),
        super::route::<wire::AppendFile, _>(append_file)
            .wrap(|m| m.layer(super::upload_limit(limits))),
        super::route::<wire::ReadContext, _>(read_context),
    ]
}

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

fn written(v: crate::service::FileVersion) -> Response {
    let tag = etag(&v.version);
    let mut resp = Reply(FileVersion::from(v)).into_response();
    if let Some(tag) = tag {
        resp.headers_mut().insert(header::ETAG, tag);
    }
    resp
}

/// Serves [`PutFile`](crate::wire::PutFile).
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

/// Serves [`GetFile`](crate::wire::GetFile).
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

/// Serves [`DeleteFile`](crate::wire::DeleteFile).
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

/// Serves [`ListFiles`](crate::wire::ListFiles).
pub(super) async fn list_files(
    State(s): State<AppState>,
    caller: Caller,
    Path(ws): Path<String>,
    q: Query,
) -> ApiResult<Reply<FileList>> {
    let ws: WorkspaceId = path_id("ws", &ws)?;
    let prefix: String = q
        .optional_with("prefix", |v| Ok::<_, Error>(v.to_owned()))?
        .unwrap_or_default();
    let files = s.service.list_files(&caller.tenant, &ws, &prefix).await?;
    Ok(Reply(FileList {
        files: files.into_iter().map(Into::into).collect(),
    }))
}

/// Serves [`AppendFile`](crate::wire::AppendFile).
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

/// Serves [`ReadContext`](crate::wire::ReadContext).
pub(super) async fn read_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(ws): Path<String>,
) -> ApiResult<Reply<Context>> {
    let ws: WorkspaceId = path_id("ws", &ws)?;
    Ok(Reply(
        s.service.read_context(&caller.tenant, &ws).await?.into(),
    ))
}
