//! `/v1/artifacts…`, `/v1/uploads` and `/v1/gc`: artifact bytes and their
//! collection.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
