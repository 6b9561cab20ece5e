//! The ref routes (group [`super::Group::Refs`]): list, read, set by
//! compare-and-swap, and delete.

use axum::extract::State;

use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::error::Error;
use crate::id::{CommitId, RefName};
use crate::wire;
use crate::wire::{RefList, RefRecord, SetRefRequest};

/// This family's routes.
pub(super) fn routes() -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::ListRefs, _>(list_refs),
        super::route::<wire::GetRef, _>(get_ref).wrap(super::lifecycle::suffix_guarded),
        super::route::<wire::SetRef, _>(set_ref).wrap(super::lifecycle::suffix_guarded),
        super::route::<wire::DeleteRef, _>(delete_ref).wrap(super::lifecycle::suffix_guarded),
    ]
}

/// Serves [`ListRefs`](crate::wire::ListRefs).
pub(super) async fn list_refs(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<Reply<RefList>> {
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
    Ok(Reply(RefList {
        refs: refs.into_iter().map(Into::into).collect(),
        next,
    }))
}

/// Serves [`GetRef`](crate::wire::GetRef).
pub(super) async fn get_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Reply<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    Ok(Reply(
        s.service.get_ref(&caller.tenant, &name).await?.into(),
    ))
}

/// Serves [`SetRef`](crate::wire::SetRef).
pub(super) async fn set_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Json(req): Json<SetRefRequest>,
) -> ApiResult<Reply<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    Ok(Reply(
        s.service
            .set_ref(&caller.tenant, &name, &req.target, req.expected.as_ref())
            .await?
            .into(),
    ))
}

/// Serves [`DeleteRef`](crate::wire::DeleteRef).
pub(super) async fn delete_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    q: Query,
) -> ApiResult<Reply<RefRecord>> {
    let name: RefName = path_id("name", &name)?;
    let expected = q.optional_with("expected", str::parse::<CommitId>)?;
    Ok(Reply(
        s.service
            .delete_ref(&caller.tenant, &name, expected.as_ref())
            .await?
            .into(),
    ))
}
