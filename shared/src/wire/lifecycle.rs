//! Lifecycle: `POST /v1/refs/{name}/evict`, the session and principal
//! erases and `/v1/pins…`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::id::CommitId;

pub use crate::service::{Erased, Evicted, RetentionReport};

/// `POST /v1/refs/{name}/evict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvictRequest {
    /// A compaction or snapshot commit on the ref's path: the deltas of
    /// the commits older than it are dropped (their metadata is kept).
    pub before: CommitId,
}

/// `GET /v1/pins`: what retention never erases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PinList {
    /// The pins, sorted.
    pub pins: Vec<crate::store::Pin>,
}

/// `PUT`/`DELETE /v1/pins/{kind}/{name}`: the pin and whether that
/// changed anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PinChanged {
    /// The pin.
    pub pin: crate::store::Pin,
    /// Whether it is pinned now.
    pub pinned: bool,
    /// False when it already was (or was not) pinned.
    pub changed: bool,
}
