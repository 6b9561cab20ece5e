//! Lifecycle: erasing a session (with every commit, artifact, cache entry
//! and ref that holds its bytes), retention by age with pins.
//!
//! # Erase order (crash safety)
//! An erase first removes the refs that point into the commits it erases
//! (so nothing new is written on top of them), then takes the commits
//! newest first (every descendant before its ancestor): for each, its cache
//! entries (the artifact, then the entry), its artifact, and last the
//! commit itself with its timeline entry. An artifact is deleted only when
//! no commit or cache entry outside the erase still uses it.
//!
//! Interrupted anywhere, the commits not yet removed are still found by
//! their session (and their descendants by their parents), so running the
//! erase again finishes it. Meanwhile a reader may find a commit or cache
//! entry of the erase whose artifact is already gone: that is answered as
//! a missing artifact naming the commit, never as other bytes.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::Duration;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Service;
use crate::commit::Commit;
use crate::error::{Error, ErrorKind, Result};
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, MaterializeKey, Pin};

/// Users looked at per artifact when deciding whether it is shared.
const USERS_LIMIT: usize = 10_000;

/// What an erase removed (only what was there to remove: a re-run after a
/// finished erase removes nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Erased {
    /// Commits removed.
    pub commits: u64,
    /// Timeline entries removed (one per commit).
    pub timeline: u64,
    /// Artifacts deleted (deltas and cached results no one else uses).
    pub artifacts: u64,
    /// Artifacts kept because a commit or cache entry outside the erase
    /// uses the same bytes.
    pub artifacts_shared: u64,
    /// Refs removed (those pointing into the erased commits).
    pub refs: u64,
    /// Materialization cache entries removed.
    pub cache: u64,
    /// Commits of other sessions erased with it (`cascade`).
    pub cascaded: u64,
}

impl Erased {
    fn add(&mut self, o: &Erased) {
        self.commits += o.commits;
        self.timeline += o.timeline;
        self.artifacts += o.artifacts;
        self.artifacts_shared += o.artifacts_shared;
        self.refs += o.refs;
        self.cache += o.cache;
        self.cascaded += o.cascaded;
    }
}

/// What a retention pass did for one tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RetentionReport {
    /// Sessions erased, by id.
    #[schema(value_type = Vec<String>)]
    pub erased: Vec<SessionId>,
    /// Idle sessions kept because they (or a ref into them) are pinned.
    #[schema(value_type = Vec<String>)]
    pub pinned: Vec<SessionId>,
    /// Idle sessions kept because another session forked from them.
    #[schema(value_type = Vec<String>)]
    pub forked: Vec<SessionId>,
    /// What the erases removed, summed.
    pub removed: Erased,
}

/// Idle sessions looked at per retention pass and tenant.
const RETENTION_BATCH: usize = 1000;

impl Service {
    /// Erases session `session`: its commits, their artifacts (unless
    /// another surviving commit or cache entry uses the same bytes), their
    /// timeline entries, cache entries and cached artifacts, and the refs
    /// pointing into them. Commits of other sessions descending from it
    /// are erased too with `cascade`; without it they make the erase a
    /// conflict that names them, and nothing is removed.
    ///
    /// # Errors
    /// `NotFound` when the tenant has no commit of the session (also when
    /// another tenant has); `Conflict` listing the forks; `Unavailable`.
    pub async fn erase_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        cascade: bool,
    ) -> Result<Erased> {
        let own = self.stores.meta.session_commits(tenant, session).await?;
        if own.is_empty() {
            return Err(Error::not_found(format!("session {session}")));
        }
        let own_ids: HashSet<CommitId> = own.iter().map(|c| c.id).collect();
        let mut all: BTreeMap<CommitId, Commit> = own.into_iter().map(|c| (c.id, c)).collect();
        // Descendants in other sessions (forks), found through parents.
        let mut frontier: Vec<CommitId> = all.keys().copied().collect();
        let mut foreign: Vec<Commit> = Vec::new();
        while let Some(id) = frontier.pop() {
            for child in self.stores.meta.child_commits(tenant, &id).await? {
                if let std::collections::btree_map::Entry::Vacant(slot) = all.entry(child.id) {
                    frontier.push(child.id);
                    if !own_ids.contains(&child.id) {
                        foreign.push(child.clone());
                    }
                    slot.insert(child);
                }
            }
        }
        if !foreign.is_empty() && !cascade {
            foreign.sort_by_key(|c| (c.created_at, c.id));
            let list: Vec<String> = foreign
                .iter()
                .map(|c| match &c.session_id {
                    Some(s) => format!("{} (session {s})", c.id),
                    None => c.id.to_string(),
                })
                .collect();
            return Err(Error::conflict(
                format!(
                    "session {session} has {} descendant commit(s) in other sessions: {}; \
                     erase with cascade=true to erase them too",
                    foreign.len(),
                    list.join(", ")
                ),
                None,
            )
            .with_field("cascade"));
        }
        let mut report = self.erase_commits(tenant, all).await?;
        report.cascaded = foreign.len() as u64;
        self.stores.meta.compact().await?;
        Ok(report)
    }

    /// Removes `commits` (a set closed under descendants) in the order the
    /// module documentation gives.
    async fn erase_commits(
        &self,
        tenant: &TenantId,
        commits: BTreeMap<CommitId, Commit>,
    ) -> Result<Erased> {
        let meta = &self.stores.meta;
        let mut report = Erased::default();
        // Refs first: nothing may move on top of a commit being erased.
        let mut refs_total = 0u64;
        for r in meta.list_refs(tenant, "", usize::MAX).await? {
            if commits.contains_key(&r.target) {
                match meta.delete_ref(tenant, &r.name, &r.target).await {
                    Ok(()) => refs_total += 1,
                    // Moved meanwhile: not ours to remove any more.
                    Err(e) if e.kind == ErrorKind::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
        }
        report.refs = refs_total;
        // Cache entries of every erased commit, known up front so that an
        // artifact used only inside the erase is recognised as such.
        let mut cache: BTreeMap<CommitId, Vec<(MaterializeKey, ArtifactRef)>> = BTreeMap::new();
        let mut cache_keys: HashSet<MaterializeKey> = HashSet::new();
        for id in commits.keys() {
            let entries = meta.materialized_of(tenant, id).await?;
            for (k, _) in &entries {
                cache_keys.insert(k.clone());
            }
            cache.insert(
                *id,
                entries
                    .into_iter()
                    .map(|(k, m)| (k, m.artifact_ref))
                    .collect(),
            );
        }
        // Deepest first: every descendant goes before its ancestor.
        let mut order: Vec<&Commit> = commits.values().collect();
        order.sort_by_key(|c| std::cmp::Reverse((c.depth, c.created_at)));
        let mut decided: BTreeSet<ArtifactRef> = BTreeSet::new();
        for c in order {
            for (key, art) in cache.remove(&c.id).unwrap_or_default() {
                self.drop_artifact(
                    tenant,
                    &art,
                    &commits,
                    &cache_keys,
                    &mut decided,
                    &mut report,
                )
                .await?;
                if meta.delete_materialized(tenant, &key).await? {
                    report.cache += 1;
                }
            }
            self.drop_artifact(
                tenant,
                &c.artifact_ref,
                &commits,
                &cache_keys,
                &mut decided,
                &mut report,
            )
            .await?;
            if meta.delete_commit(tenant, c).await? {
                report.commits += 1;
                report.timeline += 1;
            }
        }
        Ok(report)
    }

    /// Deletes `art` unless a commit or cache entry outside the erase uses
    /// it; each artifact is decided once per erase.
    pub(super) async fn drop_artifact(
        &self,
        tenant: &TenantId,
        art: &ArtifactRef,
        commits: &BTreeMap<CommitId, Commit>,
        cache_keys: &HashSet<MaterializeKey>,
        decided: &mut BTreeSet<ArtifactRef>,
        report: &mut Erased,
    ) -> Result<()> {
        if !decided.insert(*art) {
            return Ok(());
        }
        let users = self
            .stores
            .meta
            .artifact_users(tenant, art, USERS_LIMIT)
            .await?;
        let shared = users.len() >= USERS_LIMIT
            || users.iter().any(|u| match u {
                ArtifactUser::Commit(id) => !commits.contains_key(id),
                ArtifactUser::Cached(k) => !cache_keys.contains(k),
            });
        if shared {
            report.artifacts_shared += 1;
        } else if self.stores.blobs.delete(tenant, art).await? {
            report.artifacts += 1;
        }
        Ok(())
    }

    /// Pins (`pinned`) or unpins `pin`: a pinned session, or the session of
    /// a pinned ref's target, is never erased by retention. True when it
    /// changed anything.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        self.stores.meta.set_pin(tenant, pin, pinned).await
    }

    /// The tenant's pins.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        self.stores.meta.pins(tenant).await
    }

    /// Applies retention to `tenant`: erases every session whose newest
    /// commit is more than `keep_days` days older than the clock's now,
    /// except pinned ones (directly, or through a pinned ref pointing into
    /// them) and those other sessions forked from. `keep_days` 0 keeps
    /// everything.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn apply_retention(
        &self,
        tenant: &TenantId,
        keep_days: u32,
    ) -> Result<RetentionReport> {
        let mut report = RetentionReport::default();
        if keep_days == 0 {
            return Ok(report);
        }
        let before = self.clock.now() - Duration::days(i64::from(keep_days));
        let idle = self
            .stores
            .meta
            .idle_sessions(tenant, before, RETENTION_BATCH)
            .await?;
        if idle.is_empty() {
            return Ok(report);
        }
        let mut protected: HashSet<SessionId> = HashSet::new();
        for pin in self.stores.meta.pins(tenant).await? {
            match pin {
                Pin::Session(s) => {
                    protected.insert(s);
                }
                Pin::Ref(name) => {
                    let target = self.stores.meta.get_ref(tenant, &name).await?;
                    let commit = match target {
                        Some(r) => self.stores.meta.get_commit(tenant, &r.target).await?,
                        None => None,
                    };
                    if let Some(Ok(s)) = commit.and_then(|c| c.session_id).map(|s| s.parse()) {
                        protected.insert(s);
                    }
                }
            }
        }
        for session in idle {
            if protected.contains(&session) {
                report.pinned.push(session);
                continue;
            }
            match self.erase_session(tenant, &session, false).await {
                Ok(e) => {
                    report.removed.add(&e);
                    report.erased.push(session);
                }
                Err(e) if e.kind == ErrorKind::Conflict => report.forked.push(session),
                // Erased meanwhile by someone else.
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// [`Service::apply_retention`] over every tenant that has commits,
    /// with `keep_days_for` giving each tenant's policy.
    ///
    /// # Errors
    /// `Unavailable`; a tenant's failure stops the pass.
    pub async fn apply_retention_all(
        &self,
        keep_days_for: impl Fn(&TenantId) -> u32,
    ) -> Result<Vec<(TenantId, RetentionReport)>> {
        let mut out = Vec::new();
        for tenant in self.stores.meta.commit_tenants().await? {
            let days = keep_days_for(&tenant);
            if days == 0 {
                continue;
            }
            let r = self.apply_retention(&tenant, days).await?;
            out.push((tenant, r));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
