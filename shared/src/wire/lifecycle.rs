//! Lifecycle: `POST /v1/refs/{name}/evict`, the session and principal
//! erases and `/v1/pins…`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::id::CommitId;

use super::{ErrorBody, operations};
use crate::id::{Principal, RefName, SessionId};
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

/// What a pin names, as its route's `kind` says it (a schema only: the
/// handlers read the path themselves, refusing another kind with a 400).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum PinKind {
    /// A session id.
    Session,
    /// A ref name.
    Ref,
}

operations! { LIFECYCLE_OPERATIONS;
    /// Erases a session: its commits, their artifacts (unless a commit or
    /// cache entry outside the erase uses the same bytes), timeline entries,
    /// cache entries and cached artifacts, and the refs pointing into it.
    /// Commits of other sessions descending from it make it a 409 listing
    /// them, unless `cascade=true` erases them too. Re-run after an
    /// interruption, it finishes.
    EraseSession = erase_session: delete "/v1/sessions/{id}" in Refs,
        none => Erased {
        tag = "lifecycle",
            params(("id" = SessionId, Path, description = "the session id"),
                ("cascade" = Option<bool>, Query, description = "Erase descendant commits of other sessions too (default false)")),
            responses((status = 200, description = "What was removed", body = Erased),
                (status = 400, description = "`id` is not a session id, or `cascade` not a boolean", body = ErrorBody),
                (status = 404, description = "No commit of the session (also another tenant's)", body = ErrorBody),
                (status = 409, description = "Other sessions forked from it; nothing was removed", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Erases a principal: every commit on its timeline (with what a session
    /// erase removes with a commit), its agent saves, working-context snapshot
    /// and agent record. Commits of other principals descending from its
    /// commits make it a 409 listing them, unless `cascade=true` erases them
    /// too. Re-run after an interruption, it finishes.
    ErasePrincipal = erase_principal: delete "/v1/principals/{principal}" in Refs,
        none => Erased {
        tag = "lifecycle",
            params(("principal" = Principal, Path, description = "the principal (an agent or user id; percent-encode '/')"),
                ("cascade" = Option<bool>, Query, description = "Erase descendant commits of other principals too (default false)")),
            responses((status = 200, description = "What was removed", body = Erased),
                (status = 400, description = "`principal` is malformed, or `cascade` not a boolean", body = ErrorBody),
                (status = 404, description = "Nothing of the principal (also another tenant's)", body = ErrorBody),
                (status = 409, description = "Other principals' commits descend from its commits; nothing was removed", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Evicts the delta artifacts of the commits older than `before` (a
    /// compaction or snapshot on the ref's path), keeping every commit's
    /// metadata and summary and the deltas a fork below `before` needs.
    /// Materializing across an evicted delta then answers 410 naming the
    /// commit; the default materialize (from the nearest compaction) and the
    /// history still work. Re-run after an interruption, it finishes.
    EvictRef = evict_ref: post "/v1/refs/{*name}/evict" in Refs,
        json EvictRequest => Evicted {
        tag = "lifecycle", params(("name" = RefName, Path, description = "may contain '/'")),
            responses((status = 200, description = "What was evicted", body = Evicted),
                (status = 400, description = "`name` is not a ref name; `before` is malformed, unknown, not a compaction or snapshot, or not on the ref's path", body = ErrorBody),
                (status = 404, description = "No such ref (also another tenant's)", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The tenant's pins.
    ListPins = list_pins: get "/v1/pins" in Refs,
        none => PinList {
        tag = "lifecycle",
            responses((status = 200, description = "The pins, sorted", body = PinList)),
            security(("bearer" = []))
    }
    /// Pins a session (`kind` `session`) or a ref (`ref`): retention never
    /// erases the session, or the session the ref's target belongs to.
    SetPin = set_pin: put "/v1/pins/{kind}/{*name}" in Refs,
        none => PinChanged {
        tag = "lifecycle",
            params(("kind" = inline(PinKind), Path, description = "`session` or `ref`"),
                ("name" = RefName, Path, description = "the session id (at most 191 bytes) or ref name; may contain '/'")),
            responses((status = 200, description = "Pinned", body = PinChanged),
                (status = 400, description = "An unknown kind, or a malformed name", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Unpins a session or ref.
    DeletePin = delete_pin: delete "/v1/pins/{kind}/{*name}" in Refs,
        none => PinChanged {
        tag = "lifecycle",
            params(("kind" = inline(PinKind), Path, description = "`session` or `ref`"),
                ("name" = RefName, Path, description = "the session id (at most 191 bytes) or ref name; may contain '/'")),
            responses((status = 200, description = "Unpinned", body = PinChanged),
                (status = 400, description = "An unknown kind, or a malformed name", body = ErrorBody)),
            security(("bearer" = []))
    }
}
