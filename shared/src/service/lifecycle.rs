//! Lifecycle: erasing a session or a principal (with every commit,
//! artifact, cache entry, ref and agent file that holds its bytes),
//! retention by age with pins.
//!
//! # Erase order (crash safety)
//! An erase first removes the refs that point into the commits it erases
//! (so nothing new is written on top of them), each with its pin (an
//! erase interrupted between the two leaves the pin of a ref that no
//! longer exists, which protects nothing), then the agent files built
//! from those commits: every save whose window holds one of them (the
//! file, then the record) and the working-context snapshot of each agent
//! whose commits it erases (rebuilt on demand). Then the commits: first
//! the descendants outside the session or principal (a cascade's forks),
//! deepest first, one at a time, since a re-run finds each only through
//! its parent; then the session's or principal's own, which a re-run
//! finds by their own lookup, many at once (16; a session of a thousand
//! commits is about 9,000 requests on AWS, too many in a row for one API
//! request). For each commit, in this order: its cache entries (the
//! artifact, then the entry), its artifact, the commit
//! itself with its timeline entry, and last the cache entries it has
//! again: a materialize that read the commit before the erase may have
//! cached its result since the entries were listed, and the store takes
//! no entry of a commit that is gone (a materialize that stores after
//! that removes the file it wrote). An artifact is deleted only when no
//! commit or cache entry outside the erase still uses it. Then each
//! session left without a commit loses what the store keeps of it beside
//! its commits (its pin; its last-write record on DynamoDB; an erase interrupted
//! just before leaves that to the idle-session sweep, which removes the
//! record of a session with no commit). A principal's erase ends with the
//! agent's record.
//!
//! Interrupted anywhere, the commits not yet removed are still found by
//! their session or their principal's timeline (and the descendants
//! outside them by their parents, which are removed only after them),
//! and the agent files they fed are removed before them, so running the
//! erase again finishes it. Meanwhile a reader may find a
//! commit or cache entry of the erase whose artifact is already gone: that
//! is answered as a missing artifact naming the commit, never as other
//! bytes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};
use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::Service;
use crate::agent::AgentRecord;
use crate::commit::Commit;
use crate::error::{Error, ErrorKind, Result};
use crate::id::{ArtifactRef, CommitId, Principal, SessionId, TenantId};
use crate::store::{ArtifactUser, BlobArea, MaterializeKey, Pin};

/// Users looked at per artifact when deciding whether it is shared.
const USERS_LIMIT: usize = 10_000;

/// What an erase or an eviction removes, shared by the commits it works
/// on at once: its commits and cache entries (whose use of an artifact
/// does not keep it), and the artifacts already decided.
pub(super) struct Doomed<'a> {
    commits: &'a BTreeMap<CommitId, Commit>,
    cache_keys: Mutex<HashSet<MaterializeKey>>,
    decided: Mutex<BTreeSet<ArtifactRef>>,
}

impl<'a> Doomed<'a> {
    pub(super) fn new(
        commits: &'a BTreeMap<CommitId, Commit>,
        cache_keys: HashSet<MaterializeKey>,
    ) -> Self {
        Doomed {
            commits,
            cache_keys: Mutex::new(cache_keys),
            decided: Mutex::new(BTreeSet::new()),
        }
    }

    /// True the first time `art` is asked about: that caller decides it.
    fn decide(&self, art: &ArtifactRef) -> bool {
        lock(&self.decided).insert(*art)
    }

    /// True when every one of `users` is removed with this.
    fn holds_all(&self, users: &[ArtifactUser]) -> bool {
        let keys = lock(&self.cache_keys);
        users.iter().all(|u| match u {
            ArtifactUser::Commit(id) => self.commits.contains_key(id),
            ArtifactUser::Cached(k) => keys.contains(k),
        })
    }

    /// Takes in an entry found after its commit went, and lets its
    /// artifact be decided again (its bytes may have been written again).
    fn take_late(&self, key: &MaterializeKey, art: &ArtifactRef) {
        lock(&self.cache_keys).insert(key.clone());
        lock(&self.decided).remove(art);
    }
}

/// A mutex's guard, whether or not a holder panicked (the sets stay
/// consistent: each change is one insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What an erase removed (only what was there to remove: a re-run after a
/// finished erase removes nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl Erased {
    fn add(&mut self, o: &Erased) {
        self.commits += o.commits;
        self.artifacts += o.artifacts;
        self.artifacts_shared += o.artifacts_shared;
        self.refs += o.refs;
        self.cache += o.cache;
        self.cascaded += o.cascaded;
        self.saves += o.saves;
        self.working_contexts += o.working_contexts;
        self.agents += o.agents;
        self.branches += o.branches;
        self.backups_until = self.backups_until.max(o.backups_until);
    }
}

/// What a retention pass did for one tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionReport {
    /// Sessions erased, by id.
    pub erased: Vec<SessionId>,
    /// Idle sessions kept because they (or a ref into them) are pinned.
    pub pinned: Vec<SessionId>,
    /// Idle sessions kept because another session forked from them.
    pub forked: Vec<SessionId>,
    /// What the erases removed, summed.
    pub removed: Erased,
}

/// Idle sessions read per page of a retention pass (a pass reads every
/// page: sessions kept because they are pinned or forked never hide the
/// ones after them).
const RETENTION_PAGE: usize = if cfg!(test) { 2 } else { 500 };

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
        let meta = &self.stores.meta;
        let mut own = meta.session_commits(tenant, session).await?;
        // Its branches' chains (each its own session, `br-…`), nested ones
        // included: their records go last, so a re-run still finds them.
        let branches = match self.branching() {
            Some(f) => f.store.session_branches(tenant, session.as_str()).await?,
            None => Vec::new(),
        };
        for b in &branches {
            let root = match self.branching() {
                Some(f) => f.store.get_branch(tenant, b).await?.map(|r| r.root_commit),
                None => None,
            };
            if let Some(root) = root {
                own.extend(self.chain_from(tenant, &root).await?);
            }
        }
        let mut seen = HashSet::new();
        own.retain(|c| seen.insert(c.id));
        if own.is_empty() && branches.is_empty() {
            return Err(Error::not_found(format!("session {session}")));
        }
        let mut report = Erased::default();
        if !own.is_empty() {
            report = self
                .erase_closure(tenant, own, &format!("session {session}"), cascade, |c| {
                    c.session_id.as_ref().map(|s| format!("session {s}"))
                })
                .await?;
        }
        if let Some(f) = self.branching() {
            for b in &branches {
                if self.forget_branch(f, tenant, b).await? {
                    report.branches += 1;
                }
            }
            f.store.forget_session(tenant, session).await?;
        }
        meta.reclaim_space().await?;
        report.backups_until = self.backups_until();
        Ok(report)
    }

    /// Erases principal `principal`: every commit on its timeline (with
    /// what [`Service::erase_session`] removes with a commit), its agent
    /// saves, working-context snapshot and agent record. Commits of other
    /// principals descending from its commits are erased too with
    /// `cascade`; without it they make the erase a conflict that names
    /// them, and nothing is removed.
    ///
    /// # Errors
    /// `NotFound` when the tenant has nothing of the principal (also when
    /// another tenant has); `Conflict` listing the descendants;
    /// `Unavailable`.
    pub async fn erase_principal(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        cascade: bool,
    ) -> Result<Erased> {
        let meta = &self.stores.meta;
        let own = meta
            .timeline_range(
                tenant,
                principal,
                None,
                DateTime::<Utc>::MAX_UTC,
                usize::MAX,
                false,
            )
            .await?;
        let agent = meta.get_agent(tenant, principal).await?;
        let saves = meta.list_saves(tenant, principal, usize::MAX).await?;
        if own.is_empty() && agent.is_none() && saves.is_empty() {
            return Err(Error::not_found(format!("principal {principal}")));
        }
        let mut report = Erased::default();
        if !own.is_empty() {
            report = self
                .erase_closure(
                    tenant,
                    own,
                    &format!("principal {principal}"),
                    cascade,
                    |c| Some(format!("principal {}", c.principal)),
                )
                .await?;
        }
        // What the commits' erase left: saves outside every erased
        // commit's window, and the record itself.
        let rest = self.drop_agent_files(tenant, principal, &[], true).await?;
        report.add(&rest);
        if meta.delete_agent(tenant, principal).await? {
            report.agents += 1;
        }
        meta.reclaim_space().await?;
        report.backups_until = self.backups_until();
        Ok(report)
    }

    /// When the deployment's backups of what an erase removes now expire.
    fn backups_until(&self) -> Option<DateTime<Utc>> {
        let keep = self.lifecycle.backup_retention?;
        Some(self.clock.now() + chrono::Duration::from_std(keep).ok()?)
    }

    /// A branch's chain: its root commit and every descendant.
    async fn chain_from(&self, tenant: &TenantId, root: &CommitId) -> Result<Vec<Commit>> {
        let meta = &self.stores.meta;
        let Some(root) = meta.get_commit(tenant, root).await? else {
            return Ok(Vec::new());
        };
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            let children = meta.child_commits(tenant, &out[i].id).await?;
            out.extend(children);
            i += 1;
        }
        Ok(out)
    }

    /// Removes a branch's record: an active one is first marked failed (its
    /// deadline timer stopped, the session's and tenant's counts
    /// released). True when there was a record.
    async fn forget_branch(
        &self,
        branching: &crate::branch::Branching,
        tenant: &TenantId,
        id: &crate::id::BranchId,
    ) -> Result<bool> {
        let store = &branching.store;
        let Some(rec) = store.get_branch(tenant, id).await? else {
            return Ok(false);
        };
        if rec.status == crate::branch::BranchStatus::Active {
            branching
                .timer
                .stop(tenant, id, rec.timer.as_deref())
                .await?;
            let finish = crate::branch::Finish {
                status: crate::branch::BranchStatus::Failed,
                at: self.clock.now(),
                reason: Some("its session was erased".to_owned()),
            };
            match store.finish_branch(tenant, id, &finish).await {
                // Finished meanwhile: nothing to release.
                Err(e) if e.kind == ErrorKind::Conflict => {}
                other => {
                    other?;
                }
            }
        }
        store.delete_branch(tenant, id).await
    }

    /// Erases `own` (every commit of one session or principal, `what`)
    /// and its descendants: those outside `own` make it a conflict naming
    /// them (each labelled by `owner`) unless `cascade`.
    async fn erase_closure(
        &self,
        tenant: &TenantId,
        own: Vec<Commit>,
        what: &str,
        cascade: bool,
        owner: impl Fn(&Commit) -> Option<String>,
    ) -> Result<Erased> {
        let own_ids: HashSet<CommitId> = own.iter().map(|c| c.id).collect();
        let mut all: BTreeMap<CommitId, Commit> = own.into_iter().map(|c| (c.id, c)).collect();
        // Descendants outside `own` (forks), found through parents, a
        // generation at a time (the children of a generation looked up
        // many at once).
        let mut frontier: Vec<CommitId> = all.keys().copied().collect();
        let mut foreign: Vec<Commit> = Vec::new();
        while !frontier.is_empty() {
            let meta = &self.stores.meta;
            let lookups: Vec<_> = std::mem::take(&mut frontier)
                .into_iter()
                .map(|id| async move { meta.child_commits(tenant, &id).await })
                .collect();
            let children: Vec<Vec<Commit>> = stream::iter(lookups)
                .buffered(self.erase_concurrency)
                .try_collect()
                .await?;
            for child in children.into_iter().flatten() {
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
                .map(|c| match owner(c) {
                    Some(o) => format!("{} ({o})", c.id),
                    None => c.id.to_string(),
                })
                .collect();
            return Err(Error::conflict(
                format!(
                    "{what} has {} descendant commit(s) outside it: {}; \
                     erase with cascade to erase them too (`?cascade=true`; the CLI's `--cascade`)",
                    foreign.len(),
                    list.join(", ")
                ),
                None,
            )
            .with_field("cascade"));
        }
        // Between two purges of the tenant's results in memory and pending
        // writes (see `hot`): none built on the commits stays, whether the
        // erase finishes or fails partway.
        let mut report = self
            .hot
            .purging(tenant, self.erase_commits(tenant, all, &own_ids))
            .await?;
        report.cascaded = foreign.len() as u64;
        Ok(report)
    }

    /// Removes `commits` (a set closed under descendants, of which `own`
    /// are found again by a re-run's own lookup) in the order the module
    /// documentation gives.
    async fn erase_commits(
        &self,
        tenant: &TenantId,
        commits: BTreeMap<CommitId, Commit>,
        own: &HashSet<CommitId>,
    ) -> Result<Erased> {
        let meta = &self.stores.meta;
        let mut report = Erased::default();
        // Refs first: nothing may move on top of a commit being erased.
        let mut refs_total = 0u64;
        for r in meta.list_refs(tenant, "", None, usize::MAX).await? {
            if commits.contains_key(&r.target) {
                match meta.delete_ref(tenant, &r.name, &r.target).await {
                    Ok(()) => {
                        refs_total += 1;
                        // Its pin protected what is erased now: it goes too.
                        meta.set_pin(tenant, &Pin::Ref(r.name.clone()), false)
                            .await?;
                    }
                    // Moved meanwhile: not ours to remove any more.
                    Err(e) if e.kind == ErrorKind::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
        }
        report.refs = refs_total;
        // Agent files built from the commits, while the commits still
        // find them (see the module documentation).
        let mut by_agent: BTreeMap<&Principal, Vec<DateTime<Utc>>> = BTreeMap::new();
        for c in commits.values() {
            by_agent.entry(&c.principal).or_default().push(c.created_at);
        }
        for (agent, times) in by_agent {
            let r = self.drop_agent_files(tenant, agent, &times, false).await?;
            report.add(&r);
        }
        // Cache entries of every erased commit, known up front so that an
        // artifact used only inside the erase is recognised as such.
        // (Futures made up front: a stream mapping through a closure over
        // borrowed commits does not prove `Send` for the erase routes.)
        let listings: Vec<_> = commits
            .keys()
            .map(|id| async move {
                let entries = meta.materialized_of(tenant, id).await?;
                let entries = entries.into_iter().map(|(k, m)| (k, m.artifact_ref));
                Ok::<_, Error>((*id, entries.collect::<Vec<_>>()))
            })
            .collect();
        let mut cache: BTreeMap<CommitId, Vec<(MaterializeKey, ArtifactRef)>> =
            stream::iter(listings)
                .buffer_unordered(self.erase_concurrency)
                .try_collect()
                .await?;
        let cache_keys = cache.values().flatten().map(|(k, _)| k.clone()).collect();
        let doomed = Doomed::new(&commits, cache_keys);
        // Deepest first. A commit outside `own` is found again only
        // through its parent, so each goes before its parent, one at a
        // time; then `own`, found by their own lookup in any order, many
        // at once (each commit's own steps stay in order).
        let mut order: Vec<&Commit> = commits.values().collect();
        order.sort_by_key(|c| std::cmp::Reverse((c.depth, c.created_at)));
        let (own_order, foreign): (Vec<&Commit>, Vec<&Commit>) =
            order.into_iter().partition(|c| own.contains(&c.id));
        for c in foreign {
            let listed = cache.remove(&c.id).unwrap_or_default();
            report.add(&self.erase_commit(tenant, c, listed, &doomed).await?);
        }
        let steps: Vec<_> = own_order
            .into_iter()
            .map(|c| {
                let listed = cache.remove(&c.id).unwrap_or_default();
                self.erase_commit(tenant, c, listed, &doomed)
            })
            .collect();
        let mut own_steps = stream::iter(steps).buffer_unordered(self.erase_concurrency);
        while let Some(done) = own_steps.next().await {
            report.add(&done?);
        }
        // Last, what the store keeps of a session beside its commits, for
        // each session left with none.
        let sessions: BTreeSet<&SessionId> = commits
            .values()
            .filter_map(|c| c.session_id.as_ref())
            .collect();
        for session in sessions {
            meta.forget_session(tenant, session).await?;
            // A pin of a session with no commit left pins nothing.
            if meta.session_commits(tenant, session).await?.is_empty() {
                meta.set_pin(tenant, &Pin::Session(session.clone()), false)
                    .await?;
            }
        }
        Ok(report)
    }

    /// Removes one commit of an erase: its cache entries `listed` (each
    /// artifact, then the entry), its artifact, the commit, and the cache
    /// entries it has after that.
    async fn erase_commit(
        &self,
        tenant: &TenantId,
        c: &Commit,
        listed: Vec<(MaterializeKey, ArtifactRef)>,
        doomed: &Doomed<'_>,
    ) -> Result<Erased> {
        let meta = &self.stores.meta;
        let mut report = Erased::default();
        self.drop_cache_entries(tenant, listed, doomed, &mut report)
            .await?;
        self.drop_artifact(
            tenant,
            &c.artifact_ref,
            c.inline.is_some(),
            doomed,
            &mut report,
        )
        .await?;
        if meta.delete_commit(tenant, c).await? {
            report.commits += 1;
        }
        // A materialize that read the commit before the erase may have
        // cached its result after the entries were listed: the store takes
        // no entry of a commit once it is gone, so what is there now is all
        // there will be.
        let late: Vec<_> = meta
            .materialized_of(tenant, &c.id)
            .await?
            .into_iter()
            .map(|(key, m)| {
                // Part of the erase now, its bytes decided again (they may
                // have been written again since).
                doomed.take_late(&key, &m.artifact_ref);
                (key, m.artifact_ref)
            })
            .collect();
        self.drop_cache_entries(tenant, late, doomed, &mut report)
            .await?;
        Ok(report)
    }

    /// Removes cache entries of an erase or eviction, each artifact first
    /// (unless a commit or cache entry outside it uses the bytes), then
    /// the entry.
    pub(super) async fn drop_cache_entries(
        &self,
        tenant: &TenantId,
        entries: Vec<(MaterializeKey, ArtifactRef)>,
        doomed: &Doomed<'_>,
        report: &mut Erased,
    ) -> Result<()> {
        for (key, art) in entries {
            self.drop_artifact(tenant, &art, false, doomed, report)
                .await?;
            if self.stores.meta.delete_materialized(tenant, &key).await? {
                report.cache += 1;
            }
        }
        Ok(())
    }

    /// Removes `agent`'s saves whose window holds one of `times` (all of
    /// them with `all`), each file before its record, and its
    /// working-context snapshot (the file, then the pointer, kept if a
    /// newer snapshot replaced it meanwhile).
    async fn drop_agent_files(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        times: &[DateTime<Utc>],
        all: bool,
    ) -> Result<Erased> {
        let meta = &self.stores.meta;
        let mut report = Erased::default();
        for save in meta.list_saves(tenant, agent, usize::MAX).await? {
            let holds = |t: &DateTime<Utc>| save.window_start < *t && *t <= save.window_end;
            if all || times.iter().any(holds) {
                for art in std::iter::once(&save.artifact_ref).chain(&save.thread_artifacts) {
                    self.drop_agent_file(tenant, art, &mut report).await?;
                }
                if meta.delete_save(tenant, agent, &save.save_id).await? {
                    report.saves += 1;
                }
            }
        }
        if all || !times.is_empty() {
            let rec = meta.get_agent(tenant, agent).await?.unwrap_or_default();
            // Joined windows handed out: ephemeral, in the cache area.
            let windows = rec.windows.unwrap_or_default();
            for w in &windows {
                if self.remove_cached_unless_used(tenant, w).await? {
                    report.artifacts += 1;
                }
            }
            if !windows.is_empty() {
                meta.update_agent(
                    tenant,
                    agent,
                    &AgentRecord {
                        windows: Some(Vec::new()),
                        ..AgentRecord::default()
                    },
                )
                .await?;
            }
            if let Some(wc) = rec.working_context {
                self.drop_agent_file(tenant, &wc.artifact_ref, &mut report)
                    .await?;
                if meta
                    .clear_working_context(tenant, agent, &wc.artifact_ref)
                    .await?
                {
                    report.working_contexts += 1;
                }
            }
        }
        Ok(report)
    }

    /// Deletes an agent file unless a commit or cache entry holds the same
    /// bytes (then the erase of that commit decides).
    async fn drop_agent_file(
        &self,
        tenant: &TenantId,
        art: &ArtifactRef,
        report: &mut Erased,
    ) -> Result<()> {
        if self.in_use(tenant, art).await? {
            report.artifacts_shared += 1;
        } else if self.stores.blobs.delete(tenant, art).await? {
            report.artifacts += 1;
        }
        Ok(())
    }

    /// Removes the cached copy of `art` (a result or a joined window:
    /// ephemeral, in the cache area) unless a commit or cache entry names
    /// the same bytes; true when it was there.
    pub(super) async fn remove_cached_unless_used(
        &self,
        tenant: &TenantId,
        art: &ArtifactRef,
    ) -> Result<bool> {
        if self.in_use(tenant, art).await? {
            return Ok(false);
        }
        self.stores.blobs.remove(tenant, BlobArea::Cache, art).await
    }

    /// Whether a commit or cache entry names the bytes `art`.
    async fn in_use(&self, tenant: &TenantId, art: &ArtifactRef) -> Result<bool> {
        let users = self.stores.meta.artifact_users(tenant, art, 1).await?;
        Ok(!users.is_empty())
    }

    /// Deletes `art` unless a commit or cache entry outside `doomed` uses
    /// it; each artifact is decided once. Bytes `inline` with the commit go
    /// with its row and count as an erased artifact too.
    pub(super) async fn drop_artifact(
        &self,
        tenant: &TenantId,
        art: &ArtifactRef,
        inline: bool,
        doomed: &Doomed<'_>,
        report: &mut Erased,
    ) -> Result<()> {
        if !doomed.decide(art) {
            return Ok(());
        }
        let users = self
            .stores
            .meta
            .artifact_users(tenant, art, USERS_LIMIT)
            .await?;
        if users.len() >= USERS_LIMIT || !doomed.holds_all(&users) {
            report.artifacts_shared += 1;
        } else if self.stores.blobs.delete(tenant, art).await? || inline {
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
        let mut protected: Option<HashSet<SessionId>> = None;
        let mut cursor: Option<SessionId> = None;
        loop {
            let idle = self
                .stores
                .meta
                .idle_sessions(tenant, before, cursor.as_ref(), RETENTION_PAGE)
                .await?;
            let Some(last) = idle.last().cloned() else {
                break;
            };
            let protected = match &mut protected {
                Some(p) => p,
                None => protected.insert(self.retention_protected(tenant).await?),
            };
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
            cursor = Some(last);
        }
        Ok(report)
    }

    /// The sessions retention keeps because they, or a ref into them, are
    /// pinned.
    async fn retention_protected(&self, tenant: &TenantId) -> Result<HashSet<SessionId>> {
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
                    if let Some(s) = commit.and_then(|c| c.session_id) {
                        protected.insert(s);
                    }
                }
            }
        }
        Ok(protected)
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
