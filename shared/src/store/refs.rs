//! Refs: named, mutable pointers to a commit, moved by compare-and-swap;
//! the [`Refs`] concern of a [`MetaStore`](super::MetaStore).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{CommitId, RefName, TenantId};

/// Refs, each moved by compare-and-swap on its expected tip.
#[async_trait]
pub trait Refs: Send + Sync + 'static {
    /// A ref.
    ///
    /// # Errors
    /// `Unavailable`.
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>>;

    /// Points `name` at `target` if it currently points at `expected`
    /// (`None`: if it does not exist).
    ///
    /// # Errors
    /// `Conflict` carrying the current target when `expected` is stale.
    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord>;

    /// Removes `name` if it currently points at `expected`: the minimal
    /// ref deletion workspace files need (their commits and artifacts stay;
    /// erasing those is not this method's job).
    ///
    /// # Errors
    /// `Conflict` carrying the current target (absent when the ref does not
    /// exist) when `expected` is stale; `Unavailable`.
    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()>;

    /// Refs whose names start with `prefix`, by name, at most `limit`;
    /// with `after`, only names after it (the next page of a listing whose
    /// last name was `after`).
    ///
    /// # Errors
    /// `Unavailable`.
    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>>;
}

/// A ref move requested together with a checkpoint (the `ref` of a
/// checkpoint request, so unknown fields are refused like any request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefMove {
    /// The ref to move to the new commit.
    pub name: RefName,
    /// The tip the caller believes the ref has; absent means the ref must
    /// not exist yet.
    pub expected: Option<CommitId>,
}

/// A named, mutable pointer to a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefRecord {
    /// The ref's name.
    pub name: RefName,
    /// The commit it points at.
    pub target: CommitId,
    /// When it last moved.
    pub updated_at: DateTime<Utc>,
}

/// The conflict error of a stale compare-and-swap on a ref.
///
/// Its `current` is the ref's current target (absent when the ref does not
/// exist): [`MetaStore::put_commit`](super::MetaStore::put_commit)'s retry rule reads it.
pub fn ref_conflict(
    name: &RefName,
    expected: Option<&CommitId>,
    current: Option<&CommitId>,
) -> Error {
    let now = current.map_or_else(|| "does not exist".to_owned(), |c| format!("points at {c}"));
    let wanted = expected.map_or_else(
        || "expected it not to exist".to_owned(),
        |e| format!("expected {e}"),
    );
    Error::conflict(
        format!("ref {name} {now} ({wanted})"),
        current.map(ToString::to_string),
    )
    .with_field("expected")
}
