//! The artifact routes (group [`super::Group::Artifacts`]): upload,
//! direct-upload URLs, download, and garbage collection of what no commit
//! needs.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::extract::{Body, Json, Path, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::error::Error;
use crate::id::ArtifactRef;
use crate::store::Fetched;
use crate::wire;
use crate::wire::{
    ArtifactInfo, GcReport, GcRequest, PresignedDownload, PresignedUpload, UploadRequest,
};

/// This family's routes.
pub(super) fn routes(limits: &crate::service::Limits) -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::UploadArtifact, _>(upload_artifact).wrap(|m| {
            m.layer((
                super::upload_limit(limits),
                axum::Extension(super::extract::BodyLimitNote(limits.body_limit_note(false))),
            ))
        }),
        super::route::<wire::UploadUrl, _>(upload_url),
        super::route::<wire::DownloadArtifact, _>(download_artifact),
        super::route::<wire::Gc, _>(gc),
    ]
}

/// Serves [`UploadArtifact`](crate::wire::UploadArtifact).
pub(super) async fn upload_artifact(
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
        Reply(ArtifactInfo {
            artifact_ref: put.artifact,
            size: put.size,
        }),
    )
        .into_response())
}

/// Serves [`UploadUrl`](crate::wire::UploadUrl).
pub(super) async fn upload_url(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<UploadRequest>,
) -> ApiResult<Response> {
    let up = s
        .service
        .upload_url(&caller.tenant, &req.artifact_ref, req.size)
        .await?;
    Ok((StatusCode::CREATED, Reply(PresignedUpload::from(up))).into_response())
}

/// Serves [`DownloadArtifact`](crate::wire::DownloadArtifact).
pub(super) async fn download_artifact(
    State(s): State<AppState>,
    caller: Caller,
    Path(art): Path<String>,
) -> ApiResult<Response> {
    let art: ArtifactRef = path_id("art", &art)?;
    Ok(
        match s.service.fetch_artifact(&caller.tenant, &art).await? {
            Fetched::Bytes(bytes) => {
                ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
            }
            Fetched::Url(d) => (
                StatusCode::SEE_OTHER,
                [(header::LOCATION, d.url.clone())],
                Reply(PresignedDownload::from(d)),
            )
                .into_response(),
        },
    )
}

/// Serves [`Gc`](crate::wire::Gc).
pub(super) async fn gc(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<Option<GcRequest>>,
) -> ApiResult<Reply<GcReport>> {
    // The body is optional: absent, empty or `null` is the default.
    let req = req.unwrap_or_default();
    let opts = crate::service::GcOptions {
        dry_run: req.dry_run,
        cursor: req.cursor,
        limit: req.limit.map(|l| l as usize),
    };
    Ok(Reply(s.service.gc(&caller.tenant, &opts).await?.into()))
}
