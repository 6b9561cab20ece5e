//! Refs: named pointers to tips, moved by compare-and-swap.

use super::{Service, missing_commit};
use crate::error::{Error, Result};
use crate::id::{CommitId, RefName, TenantId};
use crate::store::RefRecord;

impl Service {
    /// A ref.
    ///
    /// # Errors
    /// `NotFound`.
    pub async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<RefRecord> {
        self.stores
            .meta
            .get_ref(tenant, name)
            .await?
            .ok_or_else(|| Error::not_found(format!("ref {name}")))
    }

    /// Creates (`expected` absent) or moves a ref to `target` by
    /// compare-and-swap.
    ///
    /// # Errors
    /// `NotFound` (field `target`) when the target does not exist;
    /// `Conflict` with the current tip when `expected` is stale.
    pub async fn set_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        target: &CommitId,
        expected: Option<&CommitId>,
    ) -> Result<RefRecord> {
        if self.stores.meta.get_commit(tenant, target).await?.is_none() {
            return Err(missing_commit("target", target));
        }
        self.stores
            .meta
            .cas_ref(tenant, name, expected, target, self.clock.now())
            .await
    }

    /// Removes the ref alone (its commits and artifacts stay): by
    /// compare-and-swap when `expected` is given, otherwise whatever it
    /// points at (re-read and retried if another writer moves it between
    /// the read and the delete). Returns the record removed.
    ///
    /// # Errors
    /// `NotFound` when the ref does not exist; `Conflict` with the current
    /// tip when `expected` is stale.
    pub async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
    ) -> Result<RefRecord> {
        loop {
            let current = self.get_ref(tenant, name).await?;
            if let Some(e) = expected
                && *e != current.target
            {
                return Err(crate::store::ref_conflict(
                    name,
                    Some(e),
                    Some(&current.target),
                ));
            }
            match self
                .stores
                .meta
                .delete_ref(tenant, name, &current.target)
                .await
            {
                Ok(()) => return Ok(current),
                // Moved or removed by another writer since the read: with
                // `expected` that is the caller's conflict (or the ref is
                // gone); without, look again.
                Err(e) if e.kind == crate::ErrorKind::Conflict && expected.is_none() => {}
                Err(e) if e.kind == crate::ErrorKind::Conflict && e.current.is_none() => {
                    return Err(Error::not_found(format!("ref {name}")));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Refs whose names start with `prefix` (after `after`, when given).
    ///
    /// # Errors
    /// `Invalid` for a limit of 0 or over the maximum.
    pub async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        if limit == 0 || limit > self.limits.max_ref_list {
            return Err(Error::invalid(
                "limit",
                format!("limit is {limit}; give 1 to {}", self.limits.max_ref_list),
            ));
        }
        self.stores
            .meta
            .list_refs(tenant, prefix, after, limit)
            .await
    }
}
