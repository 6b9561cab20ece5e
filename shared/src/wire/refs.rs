//! `/v1/refs…`: compare-and-swap pointers to tips.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ErrorBody, operations};
use crate::id::{CommitId, RefName};

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

/// A ref move requested together with a checkpoint (the `ref` of a
/// checkpoint request, so unknown fields are refused like any request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefMove {
    /// The ref to move to the new commit.
    pub name: RefName,
    /// The tip the caller believes the ref has; absent means the ref must
    /// not exist yet.
    pub expected: Option<CommitId>,
}

impl From<crate::store::RefMove> for RefMove {
    fn from(v: crate::store::RefMove) -> Self {
        RefMove {
            name: v.name,
            expected: v.expected,
        }
    }
}

/// A named, mutable pointer to a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RefRecord {
    /// The ref's name.
    #[schema(value_type = String)]
    pub name: RefName,
    /// The commit it points at.
    pub target: CommitId,
    /// When it last moved.
    pub updated_at: DateTime<Utc>,
}

impl From<crate::store::RefRecord> for RefRecord {
    fn from(v: crate::store::RefRecord) -> Self {
        RefRecord {
            name: v.name,
            target: v.target,
            updated_at: v.updated_at,
        }
    }
}

operations! { REF_OPERATIONS;
    /// Refs whose names start with `prefix`, by name, a page at a time: a full
    /// page names its last ref in `next`, which `after` takes for the next.
    ListRefs = list_refs: get "/v1/refs" in Refs,
        none => RefList {
        tag = "refs",
            params(("prefix" = Option<String>, Query, description = "Only names that start with it"),
                ("after" = Option<RefName>, Query, description = "Only names after it: the `next` of the previous page"),
                ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "default 100, at most 1000")),
            responses((status = 200, description = "The refs, by name", body = RefList),
                (status = 400, description = "`limit` out of range, `after` not a ref name, or a malformed query string", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// A ref.
    GetRef = get_ref: get "/v1/refs/{*name}" in Refs,
        none => RefRecord {
        tag = "refs",
            params(("name" = RefName, Path, description = "may contain '/'")),
            responses((status = 200, description = "The ref", body = RefRecord),
                (status = 400, description = "`name` is not a ref name", body = ErrorBody),
                (status = 404, description = "No such ref", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Creates a ref (no `expected`) or moves it by compare-and-swap; 409 with
    /// `current` when `expected` is stale.
    SetRef = set_ref: put "/v1/refs/{*name}" in Refs,
        json SetRefRequest => RefRecord {
        tag = "refs", params(("name" = RefName, Path, description = "may contain '/'")),
            responses((status = 200, description = "The ref as set", body = RefRecord),
                (status = 400, description = "A malformed request", body = ErrorBody),
                (status = 404, description = "A `target` that does not exist", body = ErrorBody),
                (status = 409, description = "`expected` is stale (`current` says where the ref points)", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Removes the ref alone; its commits and artifacts stay (erasing those is
    /// the session and principal erase). With `expected`, only while the ref
    /// still points there.
    DeleteRef = delete_ref: delete "/v1/refs/{*name}" in Refs,
        none => RefRecord {
        tag = "refs",
            params(("name" = RefName, Path, description = "may contain '/'"),
                ("expected" = Option<CommitId>, Query, description = "Delete only while the ref points at this commit")),
            responses((status = 200, description = "The ref as it was when removed", body = RefRecord),
                (status = 400, description = "`name` is not a ref name, or `expected` is not a commit id", body = ErrorBody),
                (status = 404, description = "No such ref", body = ErrorBody),
                (status = 409, description = "`expected` is stale (`current` says where the ref points)", body = ErrorBody)),
            security(("bearer" = []))
    }
}

impl From<RefMove> for crate::store::RefMove {
    fn from(v: RefMove) -> Self {
        crate::store::RefMove {
            name: v.name,
            expected: v.expected,
        }
    }
}
