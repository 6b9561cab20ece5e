//! Interleavings the conformance races cannot force on the memory store
//! (whose operations never yield): the retry rule of
//! [`MetaStore::put_commit`] with a store whose `get_ref` answers from
//! before a concurrent retry moved the ref, and an erase with a cache
//! entry written by a concurrent materialize after the erase listed the
//! commit's entries.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::memory::MemoryMetaStore;
use super::*;
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::id::{ArtifactRef, CommitId, Principal, RefName, SessionId};
use crate::store::conformance::t;

/// The memory store, except that its next `delete_commit` (once armed)
/// first caches the entry `late` holds, as a materialize finishing just
/// then would.
#[derive(Default)]
struct StaleRead {
    inner: MemoryMetaStore,
    late: Mutex<Option<(MaterializeKey, Materialized)>>,
}

#[async_trait]
impl Commits for StaleRead {
    async fn create_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched> {
        self.inner.create_batch(tenant, commits, moves, now).await
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        self.inner.get_commit(tenant, id).await
    }

    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>> {
        self.inner
            .lineage_run(tenant, lineage, max_depth, limit)
            .await
    }

    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>> {
        self.inner.resolve(tenant, principal, at).await
    }

    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>> {
        self.inner.update_metadata(tenant, id, patch).await
    }

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        self.inner
            .timeline_range(tenant, principal, after, until, limit, newest_first)
            .await
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        self.inner.session_commits(tenant, session).await
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
        self.inner.child_commits(tenant, parent).await
    }

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        let late = self.late.lock().unwrap().take();
        if let Some((key, m)) = late {
            self.inner.put_materialized(tenant, &key, &m).await?;
        }
        self.inner.delete_commit(tenant, commit).await
    }
}

#[async_trait]
impl Refs for StaleRead {
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        self.inner.get_ref(tenant, name).await
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        self.inner
            .cas_ref(tenant, name, expected, target, now)
            .await
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        self.inner.delete_ref(tenant, name, expected).await
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        self.inner.list_refs(tenant, prefix, after, limit).await
    }
}

#[async_trait]
impl MaterializationCache for StaleRead {
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        self.inner.get_materialized(tenant, key).await
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        self.inner.put_materialized(tenant, key, value).await
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        self.inner.materialized_of(tenant, commit).await
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        self.inner.delete_materialized(tenant, key).await
    }
}

#[async_trait]
impl SummaryQueue for StaleRead {
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        self.inner.missing_summaries(tenant, after, limit).await
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        self.inner
            .claim_summary(tenant, commit, now, until, respect_backoff)
            .await
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        self.inner.write_summary(tenant, commit, summary, by).await
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        self.inner
            .fail_summary(tenant, commit, error, retry_at)
            .await
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        self.inner.summary_tenants().await
    }
}

#[async_trait]
impl Agents for StaleRead {
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        self.inner.get_agent(tenant, agent).await
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        self.inner.update_agent(tenant, agent, patch).await
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        self.inner.put_save(tenant, agent, save).await
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        self.inner.list_saves(tenant, agent, limit).await
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        self.inner.get_save(tenant, agent, id).await
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        self.inner.delete_save(tenant, agent, id).await
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        self.inner
            .clear_working_context(tenant, agent, artifact)
            .await
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        self.inner.delete_agent(tenant, agent).await
    }
}

#[async_trait]
impl Lifecycle for StaleRead {
    async fn references(&self, tenant: &TenantId) -> Result<crate::store::References> {
        self.inner.references(tenant).await
    }

    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        self.inner.artifact_users(tenant, artifact, limit).await
    }

    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        self.inner.idle_sessions(tenant, before, after, limit).await
    }

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        self.inner.set_pin(tenant, pin, pinned).await
    }

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        self.inner.pins(tenant).await
    }

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
        self.inner.commit_tenants().await
    }

    async fn erase_tenant(
        &self,
        tenant: &TenantId,
        limit: usize,
    ) -> Result<crate::store::TenantRecords> {
        self.inner.erase_tenant(tenant, limit).await
    }

    async fn clear_inline(&self, tenant: &TenantId, commit: &CommitId) -> Result<bool> {
        self.inner.clear_inline(tenant, commit).await
    }

    async fn mark_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64> {
        self.inner.mark_evicted(tenant, before, commits).await
    }

    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
        self.inner.evicted_by(tenant, commit).await
    }
}

/// A materialize that read a commit before its erase and cached the result
/// after the erase listed the commit's entries (but before the commit
/// went): the erase still removes the entry and its file.
#[tokio::test]
async fn an_entry_cached_while_its_commit_is_erased_goes_with_it() {
    use crate::store::memory::MemoryBlobStore;
    let meta = Arc::new(StaleRead::default());
    let blobs = Arc::new(MemoryBlobStore::new());
    let svc = crate::service::Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        Arc::new(crate::clock::ManualClock::new(t(100))),
    );
    let tenant: TenantId = "t".parse().unwrap();
    let c = svc
        .checkpoint(
            &tenant,
            crate::service::NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                crate::format::FormatId::raw(),
                bytes::Bytes::from_static(b"erased"),
            ),
        )
        .await
        .unwrap()
        .commit;
    let result = bytes::Bytes::from_static(b"built from the erased commit");
    let put = blobs.put_cached(&tenant, result).await.unwrap();
    let key = MaterializeKey {
        commit: c.id,
        stop: crate::commit::Stop::Root,
        format: crate::format::FormatId::raw(),
    };
    let m = Materialized {
        artifact_ref: put.artifact,
        size: put.size,
        message_count: 1,
        token_count: 1,
        tier: crate::format::translate::Tier::Native,
        fidelity: None,
    };
    *meta.late.lock().unwrap() = Some((key.clone(), m));
    let erased = svc
        .erase_principal(&tenant, &c.principal, false)
        .await
        .unwrap();
    assert!(meta.late.lock().unwrap().is_none(), "the entry came late");
    assert_eq!((erased.commits, erased.cache), (1, 1), "{erased:?}");
    assert_eq!(meta.get_materialized(&tenant, &key).await.unwrap(), None);
    assert!(
        blobs.get(&tenant, &put.artifact).await.unwrap().is_none(),
        "the cached file went too"
    );
}
