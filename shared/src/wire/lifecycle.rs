//! Lifecycle: `POST /v1/refs/{name}/evict`, the session and principal
//! erases and `/v1/pins…`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::id::CommitId;

use super::{ErrorBody, operations};
use crate::id::{Principal, RefName, SessionId};
pub use crate::service::RetentionReport;

/// `POST /v1/refs/{name}/evict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvictRequest {
    /// A compaction or snapshot commit on the ref's path: the deltas of
    /// the commits older than it are dropped (their metadata is kept).
    pub before: CommitId,
    /// Evict even what the compaction does not cover (a compaction not
    /// made by `compact` from the context it replaces): without it such an
    /// eviction answers 409 naming `force` and what would be lost.
    #[serde(default)]
    pub force: bool,
}

/// `GET /v1/pins`: what retention never erases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PinList {
    /// The pins, sorted.
    pub pins: Vec<Pin>,
}

/// `PUT`/`DELETE /v1/pins/{kind}/{name}`: the pin and whether that
/// changed anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PinChanged {
    /// The pin.
    pub pin: Pin,
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

/// What retention never erases: a session, or the session a ref's target
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Pin {
    /// A session.
    Session(SessionId),
    /// A ref.
    Ref(RefName),
}

impl From<crate::store::Pin> for Pin {
    fn from(v: crate::store::Pin) -> Self {
        match v {
            crate::store::Pin::Session(s) => Pin::Session(s),
            crate::store::Pin::Ref(r) => Pin::Ref(r),
        }
    }
}

/// What an erase removed (only what was there to remove: a re-run after a
/// finished erase removes nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Erased {
    /// Commits removed (each with its timeline entry).
    pub commits: u64,
    /// Artifacts deleted (deltas and cached results no one else uses).
    pub artifacts: u64,
    /// Artifacts kept because a commit or cache entry outside the erase
    /// uses the same bytes.
    pub artifacts_shared: u64,
    /// Refs removed (those pointing into the erased commits).
    pub refs: u64,
    /// Materialization cache entries removed.
    pub cache: u64,
    /// Commits of other sessions (of a session's erase) or of other
    /// principals (of a principal's) erased with it (`cascade`).
    pub cascaded: u64,
    /// Agent saves removed (record and file): those whose window held an
    /// erased commit, or every save of an erased principal.
    pub saves: u64,
    /// Working-context snapshots removed (rebuilt on the next restore).
    pub working_contexts: u64,
    /// Agent records removed (a principal's erase).
    pub agents: u64,
    /// Branch records removed (a session's erase: its context-folding
    /// branches, whose chains are erased with it).
    pub branches: u64,
    /// Until when the deployment's backups still hold what was erased
    /// (`CTX_BACKUP_RETENTION_DAYS` after the erase: on AWS, DynamoDB's
    /// point-in-time recovery keeps deleted items for 35 days; S3 keeps
    /// no version of an erased object). Absent where nothing keeps a
    /// backup (embedded mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backups_until: Option<DateTime<Utc>>,
}

impl From<crate::service::Erased> for Erased {
    fn from(v: crate::service::Erased) -> Self {
        Erased {
            commits: v.commits,
            artifacts: v.artifacts,
            artifacts_shared: v.artifacts_shared,
            refs: v.refs,
            cache: v.cache,
            cascaded: v.cascaded,
            saves: v.saves,
            working_contexts: v.working_contexts,
            agents: v.agents,
            branches: v.branches,
            backups_until: v.backups_until,
        }
    }
}

/// What an eviction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Evicted {
    /// The compaction or snapshot evicted before: what to materialize from.
    #[schema(value_type = String)]
    pub before: CommitId,
    /// Delta commits whose delta is evicted (by this call or an earlier one
    /// with the same `before`); their metadata stays.
    pub commits: u64,
    /// Eviction markers this call set (0 on a re-run).
    pub marked: u64,
    /// Delta commits older than `before` whose delta is kept because a fork
    /// off the path below `before` still needs it, oldest first.
    #[schema(value_type = Vec<String>)]
    pub kept: Vec<CommitId>,
    /// Artifacts deleted (evicted deltas and cached results built on them).
    pub artifacts: u64,
    /// Artifacts kept because a commit or cache entry outside the eviction
    /// uses the same bytes.
    pub artifacts_shared: u64,
    /// Materialization cache entries removed.
    pub cache: u64,
    /// Evicted commits that had no summary and were given the extractive
    /// one before their delta went (so `ctx log` still reads them).
    #[serde(default)]
    pub summarized: u64,
}

impl From<crate::service::Evicted> for Evicted {
    fn from(v: crate::service::Evicted) -> Self {
        Evicted {
            before: v.before,
            commits: v.commits,
            marked: v.marked,
            kept: v.kept,
            artifacts: v.artifacts,
            artifacts_shared: v.artifacts_shared,
            summarized: v.summarized,
            cache: v.cache,
        }
    }
}

impl From<Pin> for crate::store::Pin {
    fn from(v: Pin) -> Self {
        match v {
            Pin::Session(s) => crate::store::Pin::Session(s),
            Pin::Ref(r) => crate::store::Pin::Ref(r),
        }
    }
}

impl Pin {
    /// `session` or `ref`.
    pub fn kind(&self) -> &'static str {
        match self {
            Pin::Session(_) => "session",
            Pin::Ref(_) => "ref",
        }
    }

    /// The session id or ref name.
    pub fn name(&self) -> &str {
        match self {
            Pin::Session(s) => s.as_str(),
            Pin::Ref(r) => r.as_str(),
        }
    }
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
                (status = 400, description = "`name` is not a ref name; `before` is malformed, not a compaction or snapshot, or not on the ref's path", body = ErrorBody),
                (status = 404, description = "No such ref, or a `before` that does not exist (also another tenant's)", body = ErrorBody),
                (status = 409, description = "A compaction does not cover the deltas (one written by hand): the message lists what would be lost, nothing is written; `force: true` evicts anyway", body = ErrorBody),
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
                ("name" = super::PinName, Path, description = "the session id or ref name (at most 191 bytes); may contain '/'")),
            responses((status = 200, description = "Pinned", body = PinChanged),
                (status = 400, description = "An unknown kind, or a malformed name (a ref name over 191 bytes among them)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Unpins a session or ref.
    DeletePin = delete_pin: delete "/v1/pins/{kind}/{*name}" in Refs,
        none => PinChanged {
        tag = "lifecycle",
            params(("kind" = inline(PinKind), Path, description = "`session` or `ref`"),
                ("name" = super::PinName, Path, description = "the session id or ref name (at most 191 bytes); may contain '/'")),
            responses((status = 200, description = "Unpinned", body = PinChanged),
                (status = 400, description = "An unknown kind, or a malformed name (a ref name over 191 bytes among them)", body = ErrorBody)),
            security(("bearer" = []))
    }
}
