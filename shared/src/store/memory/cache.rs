//! The in-memory store's the materialization cache ([`MaterializationCache`](crate::store::MaterializationCache)).

use super::{MemoryMetaStore, lock};
use crate::error::Result;
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::MaterializationCache for MemoryMetaStore {
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        Ok(lock(&self.meta)
            .materialized
            .get(&(tenant.clone(), key.clone()))
            .cloned())
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let mut meta = lock(&self.meta);
        if !meta.commits.contains_key(&(tenant.clone(), key.commit)) {
            return Err(crate::store::gone_commit(&key.commit));
        }
        let newest = meta.cache_stamps.values().copied().max().unwrap_or(0);
        let k = (tenant.clone(), key.clone());
        meta.cache_stamps.insert(k.clone(), newest);
        meta.materialized.insert(k, value.clone());
        Ok(())
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        Ok(lock(&self.meta)
            .materialized
            .iter()
            .filter(|((t, k), _)| t == tenant && &k.commit == commit)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        let mut m = lock(&self.meta);
        let k = (tenant.clone(), key.clone());
        // Its use stamp goes with it, or eviction keeps sorting over it.
        m.cache_stamps.remove(&k);
        Ok(m.materialized.remove(&k).is_some())
    }

    async fn touch_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        at: DateTime<Utc>,
    ) -> Result<()> {
        if let Some(stamp) = lock(&self.meta)
            .cache_stamps
            .get_mut(&(tenant.clone(), key.clone()))
        {
            *stamp = (*stamp).max(at.timestamp_micros());
        }
        Ok(())
    }

    async fn evict_materialized(
        &self,
        budget: u64,
        keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        let keep = (keep.0.clone(), keep.1.clone());
        let mut meta = lock(&self.meta);
        let mut total: u64 = meta.materialized.values().map(|m| m.size).sum();
        if total <= budget {
            return Ok(Vec::new());
        }
        let mut by_age: Vec<_> = meta
            .cache_stamps
            .iter()
            .filter(|(k, _)| **k != keep)
            .map(|(k, s)| (*s, k.clone()))
            .collect();
        by_age.sort_by_key(|a| a.0);
        let mut dropped = Vec::new();
        for (_, k) in by_age {
            if total <= budget {
                break;
            }
            meta.cache_stamps.remove(&k);
            if let Some(m) = meta.materialized.remove(&k) {
                total = total.saturating_sub(m.size);
                dropped.push((k.0, m.artifact_ref));
            }
        }
        dropped.retain(|(t, a)| {
            !meta
                .materialized
                .iter()
                .any(|((t2, _), m)| t2 == t && &m.artifact_ref == a)
        });
        dropped.sort();
        dropped.dedup();
        Ok(dropped)
    }
}
