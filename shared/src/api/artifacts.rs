//! The artifact routes (group [`super::Group::Artifacts`]): upload,
//! direct-upload URLs, download, and garbage collection of what no commit
//! needs.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ErrorBody;
use super::extract::{Body, Json, Path, path_id};
use super::{ApiResult, AppState};
use crate::auth::Caller;
use crate::error::Error;
use crate::id::ArtifactRef;
use crate::service::GcReport;
use crate::store::Fetched;
use crate::wire::{ArtifactInfo, GcRequest, UploadRequest};

/// Stores raw bytes as an artifact: 201 when new, 200 when already stored.
#[utoipa::path(post, path = "/v1/artifacts", tag = "artifacts",
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, description = "Stored", body = ArtifactInfo),
        (status = 200, description = "Already stored", body = ArtifactInfo),
        (status = 400, description = "The body is empty or cannot be read", body = ErrorBody),
        (status = 413, description = "Larger than the artifact limit (64 MiB by default)", body = ErrorBody)),
    security(("bearer" = [])))]
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
pub(super) async fn upload_url(
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

/// An artifact's bytes, verified against their hash; or, for one larger
/// than `CTX_DOWNLOAD_URL_BYTES` where the store hands out URLs (aws), 303
/// to a presigned GET of them: fetch the `Location` without this API's
/// `Authorization` and check the bytes against the ref.
#[utoipa::path(get, path = "/v1/artifacts/{art}", tag = "artifacts",
    params(("art" = ArtifactRef, Path)),
    responses((status = 200, description = "The bytes", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 303, description = "Larger than `CTX_DOWNLOAD_URL_BYTES` on a store that hands out URLs: GET the `Location` (valid 15 minutes; send no `Authorization`) and check the bytes' BLAKE3 against the ref", body = crate::store::PresignedDownload,
            headers(("location" = String, description = "The presigned GET URL"))),
        (status = 400, description = "`art` is not an artifact ref", body = ErrorBody),
        (status = 404, description = "No such artifact", body = ErrorBody)),
    security(("bearer" = [])))]
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
                axum::Json(d),
            )
                .into_response(),
        },
    )
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
pub(super) async fn gc(
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
