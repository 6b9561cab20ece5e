//! The in-memory store's the summary queue ([`SummaryQueue`](crate::store::SummaryQueue)).

use super::{MemoryMetaStore, lock};
use crate::commit::Commit;
use crate::error::Result;
use crate::id::TenantId;
use crate::store::{
    Missing, MissingPage, SummaryCursor, TAG_SUMMARIZING, TAG_SUMMARY_BY, TAG_SUMMARY_ERROR,
    claim_tag,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[async_trait]
impl crate::store::SummaryQueue for MemoryMetaStore {
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        let m = lock(&self.meta);
        let mut missing: Vec<(SummaryCursor, &Commit)> = m
            .commits
            .iter()
            .filter(|(k, c)| &k.0 == tenant && c.summary.is_none() && !m.evicted.contains_key(k))
            .map(|(_, c)| (SummaryCursor::after(c), c))
            .filter(|(k, _)| after.is_none_or(|a| k > a))
            .collect();
        missing.sort_by_key(|(k, _)| *k);
        let more = missing.len() > limit;
        missing.truncate(limit);
        let next = if more {
            missing.last().map(|(k, _)| *k)
        } else {
            None
        };
        let items = missing
            .into_iter()
            .map(|(_, c)| Missing {
                commit: c.clone(),
                state: m
                    .summary_states
                    .get(&(tenant.clone(), c.id))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        Ok(MissingPage { items, next })
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        if m.commits.get(&key).is_none_or(|c| c.summary.is_some()) || m.evicted.contains_key(&key) {
            return Ok(false);
        }
        let state = m.summary_states.entry(key.clone()).or_default();
        if state.claimed_until.is_some_and(|t| t > now)
            || (respect_backoff && state.retry_at.is_some_and(|t| t > now))
        {
            return Ok(false);
        }
        state.claimed_until = Some(until);
        if let Some(c) = m.commits.get_mut(&key) {
            c.tags.insert(TAG_SUMMARIZING.to_owned(), claim_tag(until));
        }
        Ok(true)
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        let Some(c) = m.commits.get_mut(&key).filter(|c| c.summary.is_none()) else {
            return Ok(false);
        };
        c.summary = Some(summary.to_owned());
        c.tags.insert(TAG_SUMMARY_BY.to_owned(), by.to_owned());
        c.tags.remove(TAG_SUMMARY_ERROR);
        c.tags.remove(TAG_SUMMARIZING);
        m.summary_states.remove(&key);
        Ok(true)
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        let id = &commit.id;
        let mut m = lock(&self.meta);
        let key = (tenant.clone(), *id);
        let Some(c) = m.commits.get_mut(&key).filter(|c| c.summary.is_none()) else {
            return Ok(());
        };
        c.tags
            .insert(TAG_SUMMARY_ERROR.to_owned(), error.to_owned());
        c.tags.remove(TAG_SUMMARIZING);
        let state = m.summary_states.entry(key).or_default();
        state.claimed_until = None;
        state.attempts += 1;
        state.last_error = Some(error.to_owned());
        state.retry_at = Some(retry_at);
        Ok(())
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        let m = lock(&self.meta);
        let mut tenants: Vec<TenantId> = m
            .commits
            .iter()
            .filter(|(_, c)| c.summary.is_none())
            .map(|((t, _), _)| t.clone())
            .collect();
        tenants.sort();
        tenants.dedup();
        Ok(tenants)
    }
}
