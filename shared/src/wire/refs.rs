//! `/v1/refs…`: compare-and-swap pointers to tips.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::id::{CommitId, RefName};
use crate::store::RefRecord;

/// `PUT /v1/refs/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRefRequest {
    /// The commit the ref should point at.
    pub target: CommitId,
    /// The tip the caller believes the ref has; absent to create it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<CommitId>,
}

/// A list of refs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RefList {
    /// The refs, by name.
    pub refs: Vec<RefRecord>,
    /// When the page is full: the last name, to pass as `after` for the
    /// next page (absent on the last page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub next: Option<RefName>,
}
