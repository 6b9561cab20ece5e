//! The conformance suite: every behaviour a backend must have, written once
//! as a function over the store traits and run in full by every backend's
//! tests (memory, local, and the aws backends against an emulator).
//!
//! Each run starts in fresh tenants, so it can run against a store that
//! already holds data. Functions panic with a message on a violation.

use std::collections::BTreeSet;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use super::{
    BlobStore, BlobStoreExt, MaterializeKey, Materialized, MetaStore, MetadataPatch, PutCommit,
    RefMove, TokenStore,
};
use crate::clock::{IdSource, OsRandom, micros_to_time};
use crate::commit::{Commit, CommitType, Tags, Trigger};
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Hash, Principal, RefName, TenantId};

/// A tenant no earlier run used.
pub fn fresh_tenant(label: &str) -> TenantId {
    let mut b = [0u8; 6];
    OsRandom.fill(&mut b);
    format!("conf-{label}-{}", hex::encode(b))
        .parse()
        .expect("conformance tenant names are valid")
}

/// Time `n` seconds after a fixed epoch.
pub fn t(n: i64) -> DateTime<Utc> {
    micros_to_time(1_790_000_000_000_000 + n * 1_000_000)
}

/// A commit as the service would build it: a child continues its parent's
/// lineage, a root starts its own.
pub fn commit(
    tenant: &TenantId,
    parent: Option<&Commit>,
    at: DateTime<Utc>,
    principal: &str,
    body: &[u8],
) -> Commit {
    let artifact = ArtifactRef::of(body);
    let id = CommitId::derive(
        tenant,
        parent.map(|p| &p.id),
        &artifact,
        at.timestamp_micros(),
        "tpl",
    );
    Commit {
        id,
        parent: parent.map(|p| p.id),
        commit_type: CommitType::Delta,
        artifact_ref: artifact,
        artifact_size: body.len() as u64,
        format: FormatId::raw(),
        template: "tpl".into(),
        principal: principal.parse().expect("valid principal"),
        machine: None,
        session_id: None,
        checkpoint: Trigger::Explicit,
        ticket_id: None,
        thread_id: None,
        summary: None,
        message_count: 1,
        token_count: 2,
        created_at: at,
        tags: Tags::new(),
        depth: parent.map_or(0, |p| p.depth + 1),
        lineage: parent.map_or(id, |p| p.lineage),
        parent_lineage: parent.map(|p| p.lineage),
    }
}

async fn put(meta: &dyn MetaStore, tenant: &TenantId, c: &Commit) -> Commit {
    match meta.put_commit(tenant, c, None).await.expect("put_commit") {
        PutCommit::Created(c) => c,
        PutCommit::Existing(c) => panic!("{} already existed", c.id),
    }
}

fn name(s: &str) -> RefName {
    s.parse().expect("valid ref name")
}

/// Runs every behaviour.
pub async fn run_all(blobs: &dyn BlobStore, meta: &dyn MetaStore, tokens: &dyn TokenStore) {
    blobs_are_content_addressed(blobs).await;
    commits_round_trip_and_are_idempotent(meta).await;
    lineages_keep_runs_together_and_forks_apart(meta).await;
    concurrent_forks_get_distinct_lineages(meta).await;
    resolve_finds_the_newest_at_or_before(meta).await;
    refs_move_by_compare_and_swap(meta).await;
    checkpoint_ref_moves_are_atomic(meta).await;
    concurrent_cas_race_has_an_exact_count(meta).await;
    create_commit_of_an_existing_commit_writes_nothing(meta).await;
    retried_checkpoints_settle_their_ref_move(meta).await;
    concurrent_retries_of_one_checkpoint_all_succeed(meta).await;
    metadata_updates_change_only_summary_and_tags(meta).await;
    materialization_cache_round_trips(meta).await;
    tokens_add_resolve_list_revoke(tokens).await;
}

/// Artifacts: idempotent puts, verified reads, sizes, tenant isolation.
pub async fn blobs_are_content_addressed(blobs: &dyn BlobStore) {
    let a = fresh_tenant("blob-a");
    let b = fresh_tenant("blob-b");
    let first = blobs
        .put(&a, Bytes::from_static(b"hello"))
        .await
        .expect("put");
    assert_eq!(first.artifact, ArtifactRef::of(b"hello"));
    assert_eq!(first.size, 5);
    assert!(first.created, "first put creates");
    let again = blobs
        .put(&a, Bytes::from_static(b"hello"))
        .await
        .expect("put again");
    assert_eq!(again.artifact, first.artifact);
    assert!(
        !again.created,
        "second put of the same bytes stores nothing"
    );
    assert_eq!(
        blobs
            .get(&a, &first.artifact)
            .await
            .expect("get")
            .as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(
        blobs.size(&a, &first.artifact).await.expect("size"),
        Some(5)
    );
    assert_eq!(
        blobs.get(&b, &first.artifact).await.expect("get b"),
        None,
        "other tenant sees nothing"
    );
    assert_eq!(blobs.size(&b, &first.artifact).await.expect("size b"), None);
    let empty = blobs.put(&a, Bytes::new()).await.expect("put empty");
    assert_eq!(
        blobs
            .get(&a, &empty.artifact)
            .await
            .expect("get empty")
            .as_deref(),
        Some(&b""[..])
    );
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let put_big = blobs
        .put(&a, Bytes::from(big.clone()))
        .await
        .expect("put big");
    assert_eq!(
        blobs
            .get(&a, &put_big.artifact)
            .await
            .expect("get big")
            .as_deref(),
        Some(&big[..])
    );
    // Concurrent writers of one artifact all succeed; exactly one creates it.
    let payload = Bytes::from_static(b"raced");
    let results = join_all((0..8).map(|_| blobs.put(&b, payload.clone()))).await;
    let created = results
        .iter()
        .filter(|r| r.as_ref().expect("raced put").created)
        .count();
    assert!(
        created <= 1,
        "{created} writers claim to have created one artifact"
    );
    assert_eq!(
        blobs
            .get(&b, &ArtifactRef::of(b"raced"))
            .await
            .expect("get")
            .as_deref(),
        Some(&b"raced"[..])
    );
}

/// Commits: get what was put, a second put returns the stored one, other
/// tenants see nothing.
pub async fn commits_round_trip_and_are_idempotent(meta: &dyn MetaStore) {
    let a = fresh_tenant("commit-a");
    let b = fresh_tenant("commit-b");
    let mut root = commit(&a, None, t(0), "p", b"root");
    root.summary = Some("the root".into());
    root.tags.insert("k".into(), "v".into());
    root.machine = Some("m1".into());
    let stored = put(meta, &a, &root).await;
    assert_eq!(stored, root);
    assert_eq!(
        meta.get_commit(&a, &root.id).await.expect("get"),
        Some(root.clone())
    );
    assert_eq!(meta.get_commit(&b, &root.id).await.expect("get b"), None);
    match meta.put_commit(&a, &root, None).await.expect("put again") {
        PutCommit::Existing(c) => assert_eq!(c, root),
        other => panic!("second put returned {other:?}"),
    }
    let missing = CommitId::from_bytes([7; 16]);
    assert_eq!(
        meta.get_commit(&a, &missing).await.expect("get missing"),
        None
    );
}

/// A linear chain is one run; a fork starts a run of its own that records
/// where it left its parent's.
pub async fn lineages_keep_runs_together_and_forks_apart(meta: &dyn MetaStore) {
    let a = fresh_tenant("lineage");
    let root = put(meta, &a, &commit(&a, None, t(0), "p", b"0")).await;
    let mut chain = vec![root.clone()];
    for i in 1..=5 {
        let c = put(meta, &a, &commit(&a, chain.last(), t(i), "p", &[i as u8])).await;
        assert_eq!(c.lineage, root.id, "a linear child continues the run");
        assert_eq!(c.depth, i as u64);
        chain.push(c);
    }
    let run = meta.lineage_run(&a, &root.id, 5, 100).await.expect("run");
    assert_eq!(
        run.iter().map(|c| c.id).collect::<Vec<_>>(),
        chain.iter().rev().map(|c| c.id).collect::<Vec<_>>(),
        "deepest first"
    );
    let part = meta
        .lineage_run(&a, &root.id, 3, 2)
        .await
        .expect("partial run");
    assert_eq!(part.iter().map(|c| c.depth).collect::<Vec<_>>(), vec![3, 2]);
    // Fork at depth 2: the slot at depth 3 is taken, so a new run starts.
    let fork = put(meta, &a, &commit(&a, Some(&chain[2]), t(100), "p", b"fork")).await;
    assert_eq!(fork.lineage, fork.id, "a fork starts its own run");
    assert_eq!(fork.parent_lineage, Some(root.id));
    assert_eq!(fork.parent_position(), Some((root.id, 2)));
    let fork_child = put(
        meta,
        &a,
        &commit(&a, Some(&fork), t(101), "p", b"fork child"),
    )
    .await;
    assert_eq!(fork_child.lineage, fork.id);
    let fork_run = meta
        .lineage_run(&a, &fork.id, u64::MAX, 100)
        .await
        .expect("fork run");
    assert_eq!(
        fork_run.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![fork_child.id, fork.id]
    );
    // The original run is untouched.
    assert_eq!(
        meta.lineage_run(&a, &root.id, u64::MAX, 100)
            .await
            .expect("run")
            .len(),
        6
    );
    // Other tenants see no run.
    let b = fresh_tenant("lineage-b");
    assert!(
        meta.lineage_run(&b, &root.id, u64::MAX, 100)
            .await
            .expect("run b")
            .is_empty()
    );
}

/// Many children of one parent written at once: exactly one continues the
/// parent's run, every other starts its own, none is lost.
pub async fn concurrent_forks_get_distinct_lineages(meta: &dyn MetaStore) {
    let a = fresh_tenant("forks");
    let root = put(meta, &a, &commit(&a, None, t(0), "p", b"root")).await;
    let children: Vec<Commit> = (0..12)
        .map(|i| {
            commit(
                &a,
                Some(&root),
                t(1 + i),
                "p",
                format!("child {i}").as_bytes(),
            )
        })
        .collect();
    let stored = join_all(children.iter().map(|c| meta.put_commit(&a, c, None))).await;
    let stored: Vec<Commit> = stored
        .into_iter()
        .map(|r| r.expect("put child").commit().clone())
        .collect();
    let continuing = stored.iter().filter(|c| c.lineage == root.id).count();
    assert_eq!(continuing, 1, "exactly one child continues the run");
    let lineages: BTreeSet<_> = stored.iter().map(|c| c.lineage).collect();
    assert_eq!(lineages.len(), 12, "every fork has its own run");
    for c in &stored {
        let run = meta
            .lineage_run(&a, &c.lineage, c.depth, 10)
            .await
            .expect("run");
        assert_eq!(run[0].id, c.id);
        assert_eq!(c.parent_position(), Some((root.id, 0)));
    }
}

/// resolve: the newest entry at or before the time, per principal and tenant.
pub async fn resolve_finds_the_newest_at_or_before(meta: &dyn MetaStore) {
    let a = fresh_tenant("resolve");
    let p: Principal = "alice".parse().expect("valid");
    let q: Principal = "bob".parse().expect("valid");
    let c1 = put(meta, &a, &commit(&a, None, t(10), "alice", b"1")).await;
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(20), "alice", b"2")).await;
    let other = put(meta, &a, &commit(&a, None, t(15), "bob", b"b")).await;
    assert_eq!(meta.resolve(&a, &p, t(9)).await.expect("resolve"), None);
    assert_eq!(
        meta.resolve(&a, &p, t(10)).await.expect("resolve"),
        Some(c1.id)
    );
    assert_eq!(
        meta.resolve(&a, &p, t(19)).await.expect("resolve"),
        Some(c1.id)
    );
    assert_eq!(
        meta.resolve(&a, &p, t(20)).await.expect("resolve"),
        Some(c2.id)
    );
    assert_eq!(
        meta.resolve(&a, &p, t(1_000_000)).await.expect("resolve"),
        Some(c2.id)
    );
    assert_eq!(
        meta.resolve(&a, &q, t(16)).await.expect("resolve"),
        Some(other.id)
    );
    let b = fresh_tenant("resolve-b");
    assert_eq!(meta.resolve(&b, &p, t(100)).await.expect("resolve b"), None);
    // Two commits at the same instant: the larger id wins, deterministically.
    let d1 = put(meta, &a, &commit(&a, None, t(30), "alice", b"x")).await;
    let d2 = put(meta, &a, &commit(&a, None, t(30), "alice", b"y")).await;
    assert_eq!(
        meta.resolve(&a, &p, t(30)).await.expect("resolve"),
        Some(d1.id.max(d2.id))
    );
}

/// Refs: create when absent, compare-and-swap, conflicts carry the current
/// tip, listing by prefix is literal and case-sensitive.
pub async fn refs_move_by_compare_and_swap(meta: &dyn MetaStore) {
    let a = fresh_tenant("refs");
    let c1 = put(meta, &a, &commit(&a, None, t(0), "p", b"1")).await;
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(1), "p", b"2")).await;
    let head = name("sessions/s1/head");
    assert_eq!(meta.get_ref(&a, &head).await.expect("get"), None);
    let r = meta
        .cas_ref(&a, &head, None, &c1.id, t(5))
        .await
        .expect("create");
    assert_eq!((r.target, r.updated_at), (c1.id, t(5)));
    let e = meta
        .cas_ref(&a, &head, None, &c2.id, t(6))
        .await
        .expect_err("create over existing");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.current, Some(c1.id.to_string()));
    let e = meta
        .cas_ref(&a, &head, Some(&c2.id), &c2.id, t(6))
        .await
        .expect_err("stale");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.current, Some(c1.id.to_string()));
    let missing = name("sessions/none");
    let e = meta
        .cas_ref(&a, &missing, Some(&c1.id), &c2.id, t(6))
        .await
        .expect_err("expected on absent");
    assert_eq!((e.kind, e.current), (ErrorKind::Conflict, None));
    assert_eq!(meta.get_ref(&a, &missing).await.expect("get"), None);
    meta.cas_ref(&a, &head, Some(&c1.id), &c2.id, t(7))
        .await
        .expect("cas");
    assert_eq!(
        meta.get_ref(&a, &head)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(c2.id)
    );
    for n in ["sessions/s2/head", "sessions_x", "Sessions/s3", "other"] {
        meta.cas_ref(&a, &name(n), None, &c1.id, t(8))
            .await
            .expect("create");
    }
    let names = |v: Vec<super::RefRecord>| {
        v.into_iter()
            .map(|r| r.name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(meta.list_refs(&a, "sessions/", 100).await.expect("list")),
        vec!["sessions/s1/head", "sessions/s2/head"]
    );
    assert_eq!(
        names(meta.list_refs(&a, "sessions_", 100).await.expect("list")),
        vec!["sessions_x"]
    );
    assert_eq!(
        names(meta.list_refs(&a, "", 2).await.expect("list")),
        vec!["Sessions/s3", "other"]
    );
    assert_eq!(meta.list_refs(&a, "%", 100).await.expect("list").len(), 0);
    let b = fresh_tenant("refs-b");
    assert_eq!(meta.get_ref(&b, &head).await.expect("get b"), None);
    assert!(
        meta.list_refs(&b, "", 100)
            .await
            .expect("list b")
            .is_empty()
    );
}

/// A checkpoint's ref move is part of the same write: a stale expectation
/// writes nothing at all; a retry of a done checkpoint succeeds.
pub async fn checkpoint_ref_moves_are_atomic(meta: &dyn MetaStore) {
    let a = fresh_tenant("ckref");
    let head = name("head");
    let c1 = commit(&a, None, t(0), "p", b"1");
    let mv = RefMove {
        name: head.clone(),
        expected: None,
    };
    meta.put_commit(&a, &c1, Some(&mv)).await.expect("first");
    assert_eq!(
        meta.get_ref(&a, &head)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(c1.id)
    );
    // A retry of the same checkpoint: the ref already points at it.
    assert!(matches!(
        meta.put_commit(&a, &c1, Some(&mv)).await.expect("retry"),
        PutCommit::Existing(_)
    ));
    // A stale expectation: nothing written, not the commit, not its timeline entry.
    let stale = commit(&a, Some(&c1), t(1), "q", b"2");
    let e = meta
        .put_commit(
            &a,
            &stale,
            Some(&RefMove {
                name: head.clone(),
                expected: None,
            }),
        )
        .await
        .expect_err("stale");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.current, Some(c1.id.to_string()));
    assert_eq!(meta.get_commit(&a, &stale.id).await.expect("get"), None);
    assert_eq!(
        meta.resolve(&a, &"q".parse().expect("valid"), t(5))
            .await
            .expect("resolve"),
        None
    );
    assert!(
        meta.lineage_run(&a, &c1.id, 1, 10)
            .await
            .expect("run")
            .iter()
            .all(|c| c.id != stale.id)
    );
    let ok = meta
        .put_commit(
            &a,
            &stale,
            Some(&RefMove {
                name: head.clone(),
                expected: Some(c1.id),
            }),
        )
        .await
        .expect("fresh");
    assert_eq!(ok.commit().id, stale.id);
    assert_eq!(
        meta.get_ref(&a, &head)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(stale.id)
    );
}

/// Eight writers race to advance one ref through a chain, each by
/// compare-and-swap from what it last read: every step is taken exactly
/// once, so the successes add up to the chain's length.
pub async fn concurrent_cas_race_has_an_exact_count(meta: &dyn MetaStore) {
    const STEPS: usize = 40;
    const WRITERS: usize = 8;
    let a = fresh_tenant("race");
    let mut chain = vec![put(meta, &a, &commit(&a, None, t(0), "p", b"0")).await];
    for i in 1..=STEPS {
        let c = put(
            meta,
            &a,
            &commit(
                &a,
                chain.last(),
                t(i as i64),
                "p",
                &(i as u32).to_le_bytes(),
            ),
        )
        .await;
        chain.push(c);
    }
    let ids: Vec<CommitId> = chain.iter().map(|c| c.id).collect();
    let head = name("race/head");
    meta.cas_ref(&a, &head, None, &ids[0], t(0))
        .await
        .expect("create");
    let writer = |_: usize| {
        let (ids, head, a) = (&ids, &head, &a);
        async move {
            let mut wins = 0usize;
            let mut conflicts = 0usize;
            loop {
                let cur = meta
                    .get_ref(a, head)
                    .await
                    .expect("get")
                    .expect("exists")
                    .target;
                let pos = ids
                    .iter()
                    .position(|i| *i == cur)
                    .expect("ref on the chain");
                if pos == STEPS {
                    return (wins, conflicts);
                }
                match meta.cas_ref(a, head, Some(&cur), &ids[pos + 1], t(1)).await {
                    Ok(_) => wins += 1,
                    Err(e) if e.kind == ErrorKind::Conflict => conflicts += 1,
                    Err(e) => panic!("cas failed: {e}"),
                }
            }
        }
    };
    let results = join_all((0..WRITERS).map(writer)).await;
    let wins: usize = results.iter().map(|r| r.0).sum();
    assert_eq!(
        wins, STEPS,
        "every step won exactly once (results {results:?})"
    );
    assert_eq!(
        meta.get_ref(&a, &head)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(ids[STEPS])
    );
}

/// The primitive under `put_commit`: for a commit that exists it writes
/// nothing, not even the requested ref move, and returns the stored commit.
pub async fn create_commit_of_an_existing_commit_writes_nothing(meta: &dyn MetaStore) {
    let a = fresh_tenant("create");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"1")).await;
    let mv = RefMove {
        name: name("untouched"),
        expected: None,
    };
    match meta.create_commit(&a, &c, Some(&mv)).await.expect("create") {
        PutCommit::Existing(stored) => assert_eq!(stored, c),
        other => panic!("an existing commit came back as {other:?}"),
    }
    assert_eq!(meta.get_ref(&a, &mv.name).await.expect("get"), None);
    let fresh = commit(&a, Some(&c), t(1), "p", b"2");
    match meta
        .create_commit(&a, &fresh, Some(&mv))
        .await
        .expect("create")
    {
        PutCommit::Created(stored) => assert_eq!(stored.id, fresh.id),
        other => panic!("a new commit came back as {other:?}"),
    }
    assert_eq!(
        meta.get_ref(&a, &mv.name)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(fresh.id)
    );
}

/// A checkpoint whose commit exists still makes its ref move: from the
/// expected tip it moves (at the commit's time); a ref already at the
/// commit is left exactly as it is; a ref elsewhere is a conflict naming
/// where it is.
pub async fn retried_checkpoints_settle_their_ref_move(meta: &dyn MetaStore) {
    let a = fresh_tenant("retry");
    let head = name("retry/head");
    let c1 = put(meta, &a, &commit(&a, None, t(0), "p", b"1")).await;
    // Written without its ref move (e.g. by a wrapper that crashed before
    // it could ask for one): the same checkpoint with the move creates it.
    let mv = |expected: Option<CommitId>| RefMove {
        name: head.clone(),
        expected,
    };
    let again = meta
        .put_commit(&a, &c1, Some(&mv(None)))
        .await
        .expect("retry with a move");
    assert!(matches!(again, PutCommit::Existing(_)), "{again:?}");
    let r = meta.get_ref(&a, &head).await.expect("get").expect("moved");
    assert_eq!((r.target, r.updated_at), (c1.id, c1.created_at));
    // From the expected tip to an existing commit.
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(1), "p", b"2")).await;
    meta.put_commit(&a, &c2, Some(&mv(Some(c1.id))))
        .await
        .expect("move to an existing commit");
    let r = meta.get_ref(&a, &head).await.expect("get").expect("exists");
    assert_eq!((r.target, r.updated_at), (c2.id, c2.created_at));
    // Already there: nothing is written, whatever the request expected.
    meta.cas_ref(&a, &head, Some(&c2.id), &c1.id, t(50))
        .await
        .expect("back to c1");
    for expected in [None, Some(c1.id), Some(c2.id)] {
        meta.put_commit(&a, &c1, Some(&mv(expected)))
            .await
            .expect("the ref is already at the commit");
        let r = meta.get_ref(&a, &head).await.expect("get").expect("exists");
        assert_eq!((r.target, r.updated_at), (c1.id, t(50)), "{expected:?}");
    }
    // Elsewhere than expected: a conflict with the current tip.
    let e = meta
        .put_commit(&a, &c2, Some(&mv(Some(c2.id))))
        .await
        .expect_err("stale");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.current, Some(c1.id.to_string()));
    let e = meta
        .put_commit(&a, &c2, Some(&mv(None)))
        .await
        .expect_err("expected absent");
    assert_eq!(
        (e.kind, e.current),
        (ErrorKind::Conflict, Some(c1.id.to_string()))
    );
    assert_eq!(
        meta.get_ref(&a, &head)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(c1.id),
        "a conflict moves nothing"
    );
}

/// Copies of one checkpoint with one ref move sent at once, then more once
/// it exists (racing to make the move): every one succeeds (retrying what comes back
/// retryable, as a wrapper does), exactly one creates the commit, none is a
/// conflict, and the ref ends at the commit.
pub async fn concurrent_retries_of_one_checkpoint_all_succeed(meta: &dyn MetaStore) {
    const COPIES: usize = 32;
    let a = fresh_tenant("retries");
    let root = put(meta, &a, &commit(&a, None, t(0), "p", b"root")).await;
    let attempt = |c: Commit, mv: RefMove| {
        let a = &a;
        async move {
            for _ in 0..100 {
                match meta.put_commit(a, &c, Some(&mv)).await {
                    Ok(put) => return put,
                    Err(e) if e.kind == ErrorKind::Unavailable => continue,
                    Err(e) => panic!("a copy of the checkpoint failed: {e}"),
                }
            }
            panic!("a copy of the checkpoint stayed unavailable through 100 attempts")
        }
    };
    let tip = commit(&a, Some(&root), t(1), "p", b"tip");
    let mv = RefMove {
        name: name("retries/head"),
        expected: None,
    };
    let puts = join_all((0..COPIES).map(|_| attempt(tip.clone(), mv.clone()))).await;
    let created = puts
        .iter()
        .filter(|p| matches!(p, PutCommit::Created(_)))
        .count();
    assert_eq!(created, 1, "exactly one copy creates the commit: {puts:?}");
    assert!(puts.iter().all(|p| p.commit().id == tip.id));
    // The commit exists; its ref does not yet: all copies race to move it.
    let late = RefMove {
        name: name("retries/late"),
        expected: None,
    };
    let puts = join_all((0..COPIES).map(|_| attempt(root.clone(), late.clone()))).await;
    assert!(puts.iter().all(|p| matches!(p, PutCommit::Existing(_))));
    for (mv, want) in [(&mv, tip.id), (&late, root.id)] {
        assert_eq!(
            meta.get_ref(&a, &mv.name)
                .await
                .expect("get")
                .map(|r| r.target),
            Some(want)
        );
    }
}

/// Metadata updates touch summary and tags and nothing else.
pub async fn metadata_updates_change_only_summary_and_tags(meta: &dyn MetaStore) {
    let a = fresh_tenant("meta");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"x")).await;
    let mut tags = Tags::new();
    tags.insert("reviewed".into(), "yes".into());
    let patched = meta
        .update_metadata(
            &a,
            &c.id,
            &MetadataPatch {
                summary: Some(Some("sum".into())),
                tags: Some(tags.clone()),
            },
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(patched.summary.as_deref(), Some("sum"));
    assert_eq!(patched.tags, tags);
    let mut expected = c.clone();
    expected.summary = Some("sum".into());
    expected.tags = tags.clone();
    assert_eq!(
        meta.get_commit(&a, &c.id).await.expect("get"),
        Some(expected)
    );
    let cleared = meta
        .update_metadata(
            &a,
            &c.id,
            &MetadataPatch {
                summary: Some(None),
                tags: None,
            },
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!((cleared.summary, cleared.tags), (None, tags));
    let b = fresh_tenant("meta-b");
    assert_eq!(
        meta.update_metadata(&b, &c.id, &MetadataPatch::default())
            .await
            .expect("update b"),
        None
    );
    // The lineage run sees the update too.
    let run = meta.lineage_run(&a, &c.lineage, 0, 1).await.expect("run");
    assert_eq!(run[0].summary, None);
}

/// The materialization cache: per tenant, per (commit, stop, format).
pub async fn materialization_cache_round_trips(meta: &dyn MetaStore) {
    let a = fresh_tenant("cache");
    let key = MaterializeKey {
        commit: CommitId::from_bytes([1; 16]),
        stop: "root".into(),
        format: FormatId::raw(),
    };
    assert_eq!(meta.get_materialized(&a, &key).await.expect("get"), None);
    let value = Materialized {
        artifact_ref: ArtifactRef::of(b"m"),
        size: 1,
        message_count: 3,
        token_count: 4,
        tier: "native".into(),
    };
    meta.put_materialized(&a, &key, &value).await.expect("put");
    meta.put_materialized(&a, &key, &value)
        .await
        .expect("put twice");
    assert_eq!(
        meta.get_materialized(&a, &key).await.expect("get"),
        Some(value)
    );
    let other_stop = MaterializeKey {
        stop: "compaction".into(),
        ..key.clone()
    };
    assert_eq!(
        meta.get_materialized(&a, &other_stop).await.expect("get"),
        None
    );
    let b = fresh_tenant("cache-b");
    assert_eq!(meta.get_materialized(&b, &key).await.expect("get b"), None);
}

/// Tokens: stored by hash, listed without secrets, revocable.
pub async fn tokens_add_resolve_list_revoke(tokens: &dyn TokenStore) {
    let a = fresh_tenant("tok");
    let mut secret = [0u8; 16];
    OsRandom.fill(&mut secret);
    let h = Hash::of(&secret);
    let rec = tokens.add_token(&h, &a, t(0)).await.expect("add");
    assert_eq!(rec.id, super::token_id(&h));
    assert_eq!(
        tokens.tenant_for(&h).await.expect("lookup"),
        Some(a.clone())
    );
    assert!(tokens.list_tokens().await.expect("list").contains(&rec));
    assert!(tokens.revoke_token(&rec.id).await.expect("revoke"));
    assert!(!tokens.revoke_token(&rec.id).await.expect("revoke twice"));
    assert_eq!(tokens.tenant_for(&h).await.expect("lookup"), None);
}
