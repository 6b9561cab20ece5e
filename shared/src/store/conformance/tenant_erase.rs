//! The operator's tenant erase, store by store: of two tenants holding the
//! same kinds of data, erasing one leaves nothing of it to any read method
//! and the other whole; a re-run erases nothing; an erase interrupted part
//! way (part of the bytes, part of the records) finishes when run again.

use bytes::Bytes;

use super::{Backend, Capabilities, commit, fresh_tenant, put, t};
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::branch::RateLimits;
use crate::commit::{Commit, Stop};
use crate::format::FormatId;
use crate::format::translate::Tier;
use crate::id::{ArtifactRef, Hash, Principal, RefName, SessionId, TenantId};
use crate::store::{BlobArea, BlobStoreExt, MaterializeKey, Materialized, Pin, TenantRecords};

/// Runs every behaviour.
pub async fn run_all(backend: &Backend<'_>, caps: Capabilities) {
    erasing_one_tenant_leaves_the_other_whole(backend, caps).await;
    an_interrupted_erase_finishes_when_run_again(backend, caps).await;
    tokens_of_one_tenant_are_revoked(backend).await;
}

/// What [`populate`] wrote for one tenant.
pub struct Populated {
    /// The tenant.
    pub tenant: TenantId,
    /// Its commits: a root, its child, a fork of the root.
    pub commits: Vec<Commit>,
    /// The agent (principal) of every commit, with a record and a save.
    pub agent: Principal,
    /// The cached artifact the cache entry names.
    pub cached: ArtifactRef,
    /// The cache entry.
    pub key: MaterializeKey,
    /// The branch record, where the backend keeps branches with the meta.
    pub branch: Option<crate::id::BranchId>,
}

fn session() -> SessionId {
    "s".parse().expect("valid session")
}

fn head() -> RefName {
    "sessions/s".parse().expect("valid ref")
}

/// Writes one of every kind of record and byte the stores keep for a
/// tenant: three commits (durable artifacts, timeline, lineage, session
/// and child indexes, the summary queue and a claim on it), a ref, a pin,
/// a cache entry and its cached artifact, an agent record and a save, and
/// (with `caps.branches_in_meta`) a branch record.
pub async fn populate(backend: &Backend<'_>, caps: Capabilities, label: &str) -> Populated {
    let tenant = fresh_tenant(label);
    let (meta, blobs) = (backend.meta, backend.blobs);
    let mut commits = Vec::new();
    for (i, body) in ["root", "child", "fork"].into_iter().enumerate() {
        let body = format!("{label} {body} of {tenant}");
        blobs
            .put(&tenant, Bytes::from(body.clone()))
            .await
            .expect("put artifact");
        let parent = match i {
            0 => None,
            _ => Some(&commits[0]),
        };
        let mut c = commit(&tenant, parent, t(i as i64), "agent", body.as_bytes());
        c.session_id = Some(session());
        commits.push(put(meta, &tenant, &c).await);
    }
    meta.claim_summary(&tenant, &commits[1], t(10), t(70), true)
        .await
        .expect("claim");
    meta.cas_ref(&tenant, &head(), None, &commits[1].id, t(3))
        .await
        .expect("ref");
    meta.set_pin(&tenant, &Pin::Session(session()), true)
        .await
        .expect("pin");
    let cached_bytes = format!("{label} materialized for {tenant}");
    let cached = blobs
        .put_cached(&tenant, Bytes::from(cached_bytes.clone()))
        .await
        .expect("put cached")
        .artifact;
    let key = MaterializeKey {
        commit: commits[1].id,
        stop: Stop::Root,
        format: FormatId::raw(),
    };
    meta.put_materialized(
        &tenant,
        &key,
        &Materialized {
            artifact_ref: cached,
            size: cached_bytes.len() as u64,
            message_count: 2,
            token_count: 4,
            tier: Tier::Native,
            fidelity: None,
        },
    )
    .await
    .expect("put materialized");
    let agent: Principal = "agent".parse().expect("principal");
    meta.update_agent(
        &tenant,
        &agent,
        &AgentRecord {
            window_seconds: Some(60),
            ..Default::default()
        },
    )
    .await
    .expect("agent");
    let saved = ArtifactRef::of(b"saved");
    meta.put_save(
        &tenant,
        &agent,
        &SaveRecord {
            save_id: SaveId::derive(&tenant, &agent, t(5), &saved),
            timestamp: t(5),
            description: Some("a save".into()),
            summary: "saved".into(),
            message_count: 2,
            window_start: t(0),
            window_end: t(5),
            artifact_ref: saved,
            thread_artifacts: vec![ArtifactRef::of(b"a thread")],
        },
    )
    .await
    .expect("save");
    let branch = if caps.branches_in_meta {
        let rec = super::branches::record("s", 0);
        backend
            .branches
            .create_branch(
                &tenant,
                &rec,
                &RateLimits {
                    active_per_session: 10,
                    active_per_tenant: 10,
                    creations_per_minute: 10,
                },
            )
            .await
            .expect("branch");
        let memory = super::branches::memory_of(&tenant, &rec);
        backend
            .branches
            .put_memory(&tenant, &memory)
            .await
            .expect("memory");
        Some(rec.id)
    } else {
        None
    };
    Populated {
        tenant,
        commits,
        agent,
        cached,
        key,
        branch,
    }
}

/// Repeats both halves of the erase until each reports nothing; what they
/// removed in all.
pub async fn erase_all(backend: &Backend<'_>, tenant: &TenantId) -> (TenantRecords, u64) {
    let mut records = TenantRecords::default();
    loop {
        let r = backend
            .meta
            .erase_tenant(tenant, 2)
            .await
            .expect("erase meta");
        if r.total() == 0 {
            break;
        }
        records.add(&r);
    }
    let mut blobs = 0;
    loop {
        let n = backend
            .blobs
            .erase_tenant(tenant, 2)
            .await
            .expect("erase blobs");
        if n == 0 {
            break;
        }
        blobs += n;
    }
    backend.meta.reclaim_space().await.expect("compact");
    (records, blobs)
}

/// Panics unless every read method finds `p` whole.
pub async fn assert_whole(backend: &Backend<'_>, p: &Populated) {
    let (meta, blobs, tenant) = (backend.meta, backend.blobs, &p.tenant);
    for c in &p.commits {
        assert_eq!(
            meta.get_commit(tenant, &c.id)
                .await
                .expect("get")
                .map(|got| got.id),
            Some(c.id),
            "{tenant}: commit {}",
            c.id
        );
        assert!(
            blobs
                .get(tenant, &c.artifact_ref)
                .await
                .expect("read")
                .is_some(),
            "{tenant}: artifact of {}",
            c.id
        );
    }
    assert_eq!(
        meta.session_commits(tenant, &session())
            .await
            .expect("session")
            .len(),
        3
    );
    assert!(meta.get_ref(tenant, &head()).await.expect("ref").is_some());
    assert_eq!(
        meta.pins(tenant).await.expect("pins"),
        vec![Pin::Session(session())]
    );
    assert!(
        meta.get_materialized(tenant, &p.key)
            .await
            .expect("cache")
            .is_some()
    );
    assert!(
        blobs
            .read(tenant, &[BlobArea::Cache], &p.cached)
            .await
            .expect("cached")
            .is_some()
    );
    assert!(
        meta.get_agent(tenant, &p.agent)
            .await
            .expect("agent")
            .is_some()
    );
    assert_eq!(
        meta.list_saves(tenant, &p.agent, 10)
            .await
            .expect("saves")
            .len(),
        1
    );
    if let Some(id) = &p.branch {
        assert!(
            backend
                .branches
                .get_branch(tenant, id)
                .await
                .expect("branch")
                .is_some()
        );
        assert_eq!(
            backend
                .branches
                .recent_memories(tenant, 10)
                .await
                .expect("memories")
                .len(),
            1
        );
    }
}

/// Panics if any read method finds anything of `p`'s tenant.
pub async fn assert_gone(backend: &Backend<'_>, p: &Populated) {
    let (meta, blobs, tenant) = (backend.meta, backend.blobs, &p.tenant);
    for c in &p.commits {
        assert_eq!(meta.get_commit(tenant, &c.id).await.expect("get"), None);
        assert!(
            meta.child_commits(tenant, &c.id)
                .await
                .expect("children")
                .is_empty()
        );
        assert!(
            meta.materialized_of(tenant, &c.id)
                .await
                .expect("cache of")
                .is_empty()
        );
        assert!(
            meta.artifact_users(tenant, &c.artifact_ref, 10)
                .await
                .expect("users")
                .is_empty()
        );
        assert!(
            meta.lineage_run(tenant, &c.lineage, u64::MAX, 100)
                .await
                .expect("lineage")
                .is_empty()
        );
    }
    assert_eq!(
        meta.resolve(tenant, &p.agent, t(1000))
            .await
            .expect("resolve"),
        None
    );
    assert!(
        meta.timeline_range(tenant, &p.agent, None, t(1000), 100, false)
            .await
            .expect("timeline")
            .is_empty()
    );
    assert!(
        meta.session_commits(tenant, &session())
            .await
            .expect("session")
            .is_empty()
    );
    assert!(
        meta.list_refs(tenant, "", None, 100)
            .await
            .expect("refs")
            .is_empty()
    );
    assert!(meta.pins(tenant).await.expect("pins").is_empty());
    assert_eq!(
        meta.get_materialized(tenant, &p.key).await.expect("cache"),
        None
    );
    assert_eq!(meta.get_agent(tenant, &p.agent).await.expect("agent"), None);
    assert!(
        meta.list_saves(tenant, &p.agent, 10)
            .await
            .expect("saves")
            .is_empty()
    );
    assert!(
        meta.missing_summaries(tenant, None, 10)
            .await
            .expect("missing")
            .items
            .is_empty()
    );
    assert!(
        meta.idle_sessions(tenant, t(1_000_000), None, 10)
            .await
            .expect("idle")
            .is_empty()
    );
    let refs = meta.references(tenant).await.expect("references");
    assert!(
        refs.durable.is_empty() && refs.cached.is_empty(),
        "{refs:?}"
    );
    assert!(
        !meta
            .commit_tenants()
            .await
            .expect("tenants")
            .contains(tenant)
    );
    assert!(
        !meta
            .summary_tenants()
            .await
            .expect("tenants")
            .contains(tenant)
    );
    for area in BlobArea::ALL {
        assert!(
            blobs
                .list(tenant, area, None, 10)
                .await
                .expect("list")
                .is_empty(),
            "{tenant}: {area:?} is not empty"
        );
    }
    if let Some(id) = &p.branch {
        assert_eq!(
            backend
                .branches
                .get_branch(tenant, id)
                .await
                .expect("branch"),
            None
        );
        assert!(
            backend
                .branches
                .recent_memories(tenant, 10)
                .await
                .expect("memories")
                .is_empty()
        );
        assert!(
            backend
                .branches
                .active_branches(tenant, "s")
                .await
                .expect("active")
                .is_empty()
        );
        assert_eq!(
            backend
                .branches
                .session_owner(tenant, "s")
                .await
                .expect("owner"),
            None
        );
    }
}

/// Erasing tenant a of two removes every kind of record and byte of a
/// (counted by kind) and nothing of b; a second erase removes nothing.
pub async fn erasing_one_tenant_leaves_the_other_whole(backend: &Backend<'_>, caps: Capabilities) {
    let a = populate(backend, caps, "te-a").await;
    let b = populate(backend, caps, "te-b").await;
    assert_whole(backend, &a).await;
    let (records, blobs) = erase_all(backend, &a.tenant).await;
    assert_eq!(records.commits, 3, "{records:?}");
    assert_eq!(records.refs, 1, "{records:?}");
    assert_eq!(records.cache, 1, "{records:?}");
    assert_eq!(records.agents, 2, "{records:?}");
    assert_eq!(records.branches > 0, caps.branches_in_meta, "{records:?}");
    // Timeline entries (3) and the pin at least.
    assert!(records.other >= 4, "{records:?}");
    // Three deltas and the cached result.
    assert_eq!(blobs, 4);
    assert_gone(backend, &a).await;
    assert_whole(backend, &b).await;
    assert_eq!(
        erase_all(backend, &a.tenant).await,
        (TenantRecords::default(), 0),
        "a re-run erases nothing"
    );
    // A tenant that never had anything.
    assert_eq!(
        erase_all(backend, &fresh_tenant("te-none")).await,
        (TenantRecords::default(), 0)
    );
}

/// An erase stopped after part of its bytes and part of its records (one
/// call of each half with a small limit) finishes when run again, and the
/// two runs together count everything once.
pub async fn an_interrupted_erase_finishes_when_run_again(
    backend: &Backend<'_>,
    caps: Capabilities,
) {
    let a = populate(backend, caps, "te-int").await;
    let b = populate(backend, caps, "te-int-b").await;
    let part_blobs = backend
        .blobs
        .erase_tenant(&a.tenant, 1)
        .await
        .expect("part of the bytes");
    assert!(part_blobs >= 1, "removes something");
    let mut part = backend
        .meta
        .erase_tenant(&a.tenant, 2)
        .await
        .expect("part of the records");
    assert!(part.total() >= 1, "removes something");
    let (rest, rest_blobs) = erase_all(backend, &a.tenant).await;
    part.add(&rest);
    assert_eq!(part.commits, 3, "{part:?}");
    assert_eq!(part.refs, 1, "{part:?}");
    assert_eq!(part.cache, 1, "{part:?}");
    assert_eq!(part.agents, 2, "{part:?}");
    assert_eq!(part_blobs + rest_blobs, 4);
    assert_gone(backend, &a).await;
    assert_whole(backend, &b).await;
}

/// `revoke_tenant` removes exactly the tenant's tokens.
pub async fn tokens_of_one_tenant_are_revoked(backend: &Backend<'_>) {
    let a = fresh_tenant("te-tok-a");
    let b = fresh_tenant("te-tok-b");
    let mut raw = [0u8; 16];
    crate::clock::IdSource::fill(&crate::clock::OsRandom, &mut raw);
    let (ha1, ha2, hb) = (
        Hash::of(&[&raw[..], b"a1"].concat()),
        Hash::of(&[&raw[..], b"a2"].concat()),
        Hash::of(&[&raw[..], b"b"].concat()),
    );
    let tokens = backend.tokens;
    tokens.add_token(&ha1, &a, t(0)).await.expect("add");
    tokens.add_token(&ha2, &a, t(1)).await.expect("add");
    tokens.add_token(&hb, &b, t(2)).await.expect("add");
    assert_eq!(tokens.revoke_tenant(&a).await.expect("revoke"), 2);
    assert_eq!(tokens.tenant_for(&ha1).await.expect("lookup"), None);
    assert_eq!(tokens.tenant_for(&ha2).await.expect("lookup"), None);
    assert_eq!(
        tokens.tenant_for(&hb).await.expect("lookup"),
        Some(b.clone())
    );
    assert_eq!(tokens.revoke_tenant(&a).await.expect("again"), 0);
    tokens.revoke_tenant(&b).await.expect("clean up");
}
