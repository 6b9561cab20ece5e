//! The in-memory store's refs ([`Refs`](crate::store::Refs)).

use super::{MemoryMetaStore, lock};
use crate::error::Result;
use crate::id::{CommitId, RefName, TenantId};
use crate::store::RefRecord;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::Refs for MemoryMetaStore {
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        Ok(lock(&self.meta)
            .refs
            .get(&(tenant.clone(), name.clone()))
            .cloned())
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        let mut m = lock(&self.meta);
        m.check_ref(tenant, name, expected)?;
        Ok(m.set_ref(tenant, name, target, now))
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        let mut m = lock(&self.meta);
        m.check_ref(tenant, name, Some(expected))?;
        m.refs.remove(&(tenant.clone(), name.clone()));
        Ok(())
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        let m = lock(&self.meta);
        Ok(m.refs
            .iter()
            .filter(|((t, n), _)| {
                t == tenant
                    && n.as_str().starts_with(prefix)
                    && after.is_none_or(|a| n.as_str() > a.as_str())
            })
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect())
    }
}
