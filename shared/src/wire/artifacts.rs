//! `/v1/artifacts…`, `/v1/uploads` and `/v1/gc`: artifact bytes and their
//! collection.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Bytes, ErrorBody, operations};
use crate::id::ArtifactRef;

/// An artifact reference and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ArtifactInfo {
    /// `art-` and the BLAKE3 hash of the bytes.
    #[serde(rename = "ref")]
    pub artifact_ref: ArtifactRef,
    /// Size in bytes.
    pub size: u64,
}

/// `POST /v1/uploads`: the artifact the bytes will hash to, and their size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadRequest {
    /// `art-` and the BLAKE3 hash the bytes will have.
    pub artifact_ref: ArtifactRef,
    /// Their size in bytes (at most 5 GiB by default: 413 beyond).
    #[serde(deserialize_with = "crate::number::whole")]
    #[schema(maximum = 5_368_709_120_u64)]
    pub size: u64,
}

/// A request to collect garbage: one page of the caller's artifacts
/// (`POST /v1/gc`); call again with the report's `next` until it is
/// absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GcRequest {
    /// Report what would be removed; remove nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Where to continue: the previous report's `next` (an area, a dot,
    /// and the last artifact looked at, if any).
    #[schema(pattern = r"^(durable|cache|staged)\.(art-[0-9a-f]{64})?$")]
    pub cursor: Option<String>,
    /// Artifacts to look at in this call: 1 to 10,000 (default 1,000).
    #[serde(default, deserialize_with = "crate::number::optional_whole")]
    #[schema(minimum = 1, maximum = 10_000)]
    pub limit: Option<u32>,
}

/// One artifact a collection removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GcRemoved {
    /// The artifact.
    pub artifact: ArtifactRef,
    /// Where it was.
    pub area: BlobArea,
    /// Its size in bytes.
    pub size: u64,
}

impl From<crate::service::GcRemoved> for GcRemoved {
    fn from(v: crate::service::GcRemoved) -> Self {
        GcRemoved {
            artifact: v.artifact,
            area: v.area.into(),
            size: v.size,
        }
    }
}

/// What a collection call did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GcReport {
    /// Nothing was removed: `removed` is what would have been.
    pub dry_run: bool,
    /// Artifacts looked at.
    pub scanned: u64,
    /// Kept because a commit or cache entry names them.
    pub referenced: u64,
    /// Kept because they are younger than the grace period.
    pub young: u64,
    /// Removed (or, in a dry run, to be removed).
    pub removed: Vec<GcRemoved>,
    /// Their bytes.
    pub removed_bytes: u64,
    /// Bytes the metadata store gave back to the filesystem afterwards
    /// (SQLite's incremental vacuum, after the last page).
    pub reclaimed_bytes: u64,
    /// Where the next call continues; absent after the last page.
    pub next: Option<String>,
}

impl From<crate::service::GcReport> for GcReport {
    fn from(v: crate::service::GcReport) -> Self {
        GcReport {
            dry_run: v.dry_run,
            scanned: v.scanned,
            referenced: v.referenced,
            young: v.young,
            removed: v.removed.into_iter().map(Into::into).collect(),
            removed_bytes: v.removed_bytes,
            reclaimed_bytes: v.reclaimed_bytes,
            next: v.next,
        }
    }
}

/// Where in a `BlobStore` an artifact lives: its lifecycle policy.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BlobArea {
    /// Deltas, compactions and snapshots: kept while a commit names them
    /// (S3 `cas/`, local `cas/`).
    Durable,
    /// Materialized and translated results: ephemeral, evicted by the
    /// embedded LRU budget or an S3 lifecycle rule, rebuilt on demand (S3
    /// `cache/`, local `cache/`).
    Cache,
    /// Direct uploads waiting for the checkpoint that names them (S3
    /// `uploads/`; the embedded store takes no direct uploads).
    Staged,
}

impl From<crate::store::BlobArea> for BlobArea {
    fn from(v: crate::store::BlobArea) -> Self {
        match v {
            crate::store::BlobArea::Durable => BlobArea::Durable,
            crate::store::BlobArea::Cache => BlobArea::Cache,
            crate::store::BlobArea::Staged => BlobArea::Staged,
        }
    }
}

impl From<BlobArea> for crate::store::BlobArea {
    fn from(v: BlobArea) -> Self {
        match v {
            BlobArea::Durable => crate::store::BlobArea::Durable,
            BlobArea::Cache => crate::store::BlobArea::Cache,
            BlobArea::Staged => crate::store::BlobArea::Staged,
        }
    }
}

/// A presigned direct download: `GET` the URL with no other credentials,
/// then check the bytes against the artifact's reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PresignedDownload {
    /// Where to GET the bytes (also the `Location` header of the 303).
    pub url: String,
    /// How many bytes it holds.
    pub size: u64,
    /// When the URL stops working.
    pub expires_at: DateTime<Utc>,
}

impl From<crate::store::PresignedDownload> for PresignedDownload {
    fn from(v: crate::store::PresignedDownload) -> Self {
        PresignedDownload {
            url: v.url,
            size: v.size,
            expires_at: v.expires_at,
        }
    }
}

/// A presigned direct upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PresignedUpload {
    /// Where to send the bytes.
    pub url: String,
    /// The method to use (`PUT`).
    pub method: String,
    /// Headers the request must carry exactly.
    pub headers: std::collections::BTreeMap<String, String>,
    /// When the URL stops working.
    pub expires_at: DateTime<Utc>,
}

impl From<crate::store::PresignedUpload> for PresignedUpload {
    fn from(v: crate::store::PresignedUpload) -> Self {
        PresignedUpload {
            url: v.url,
            method: v.method,
            headers: v.headers,
            expires_at: v.expires_at,
        }
    }
}

operations! { ARTIFACT_OPERATIONS;
    /// Stores raw bytes as an artifact: 201 when new, 200 when already stored.
    UploadArtifact = upload_artifact: post "/v1/artifacts" in Artifacts,
        bytes => ArtifactInfo {
        tag = "artifacts",
            responses((status = 201, description = "Stored", body = ArtifactInfo),
                (status = 200, description = "Already stored", body = ArtifactInfo),
                (status = 400, description = "The body is empty or cannot be read", body = ErrorBody),
                (status = 413, description = "Larger than the artifact limit (64 MiB by default)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// A URL to PUT a large artifact to directly (AWS mode; bodies beyond the
    /// API's limits). Then checkpoint with `artifact_ref`: the bytes are
    /// re-hashed before the commit references them.
    UploadUrl = upload_url: post "/v1/uploads" in Artifacts,
        json UploadRequest => PresignedUpload {
        tag = "artifacts", responses((status = 201, description = "Where to PUT the bytes", body = PresignedUpload),
                (status = 400, description = "A malformed request, or storage that takes no direct uploads (embedded mode)", body = ErrorBody),
                (status = 413, description = "`size` over the direct-upload limit, or a body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// An artifact's bytes, verified against their hash; or, for one larger
    /// than `CTX_DOWNLOAD_URL_BYTES` where the store hands out URLs (aws), 303
    /// to a presigned GET of them: fetch the `Location` without this API's
    /// `Authorization` and check the bytes against the ref.
    DownloadArtifact = download_artifact: get "/v1/artifacts/{art}" in Artifacts,
        none => Bytes {
        tag = "artifacts",
            params(("art" = ArtifactRef, Path)),
            responses((status = 200, description = "The bytes", content_type = "application/octet-stream", body = Vec<u8>),
                (status = 303, description = "Larger than `CTX_DOWNLOAD_URL_BYTES` on a store that hands out URLs: GET the `Location` (valid 15 minutes; send no `Authorization`) and check the bytes' BLAKE3 against the ref", body = PresignedDownload,
                    headers(("location" = String, description = "The presigned GET URL"))),
                (status = 400, description = "`art` is not an artifact ref", body = ErrorBody),
                (status = 404, description = "No such artifact", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Collects garbage: one page of the caller's artifacts that no commit,
    /// cache entry or pending upload needs and that are older than the grace
    /// period (`CTX_GC_GRACE_SECS`) are removed (or, with `dry_run`, listed).
    /// Call again with `cursor` set to the report's `next` until it is absent.
    Gc = gc: post "/v1/gc" in Artifacts,
        optional GcRequest => GcReport {
        tag = "artifacts", responses((status = 200, description = "What this page removed (or would remove)", body = GcReport),
                (status = 400, description = "A malformed request, a cursor no call handed out, or a limit out of range", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
}
