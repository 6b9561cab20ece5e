//! The ref routes (group [`super::Group::Refs`]): list, read, set by
//! compare-and-swap, and delete.

use axum::extract::State;

use super::error::ErrorBody;
use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState};
use crate::auth::Caller;
use crate::error::Error;
use crate::id::{CommitId, RefName};
use crate::store::RefRecord;
use crate::wire::{RefList, SetRefRequest};

/// Refs whose names start with `prefix`, by name, a page at a time: a full
/// page names its last ref in `next`, which `after` takes for the next.
#[utoipa::path(get, path = "/v1/refs", tag = "refs",
    params(("prefix" = Option<String>, Query, description = "Only names that start with it"),
        ("after" = Option<RefName>, Query, description = "Only names after it: the `next` of the previous page"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "default 100, at most 1000")),
    responses((status = 200, description = "The refs, by name", body = RefList),
        (status = 400, description = "`limit` out of range, `after` not a ref name, or a malformed query string", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn list_refs(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<RefList>> {
    let prefix: String = q
        .optional_with("prefix", |v| Ok::<_, Error>(v.to_owned()))?
        .unwrap_or_default();
    let after = q.optional_with("after", str::parse::<RefName>)?;
    let limit = q
        .optional_with("limit", str::parse::<usize>)?
        .unwrap_or(100);
    let refs = s
        .service
        .list_refs(&caller.tenant, &prefix, after.as_ref(), limit)
        .await?;
    let next = (refs.len() == limit)
        .then(|| refs.last().map(|r| r.name.clone()))
        .flatten();
    Ok(axum::Json(RefList { refs, next }))
}

/// A ref.
#[utoipa::path(get, path = "/v1/refs/{name}", tag = "refs",
    params(("name" = RefName, Path, description = "may contain '/'")),
    responses((status = 200, description = "The ref", body = RefRecord),
        (status = 400, description = "`name` is not a ref name", body = ErrorBody),
        (status = 404, description = "No such ref", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn get_ref(
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
pub(super) async fn set_ref(
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
pub(super) async fn delete_ref(
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
