//! The behaviours of a [`MetaStore`]: commits, lineage runs and forks,
//! resolve, metadata updates and the materialization cache (refs are in
//! [`super::refs`]).

use std::collections::BTreeSet;

use futures::future::join_all;

use super::{commit, fresh_tenant, put, t};
use crate::commit::{Commit, Tags};
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Principal};
use crate::store::{MaterializeKey, Materialized, MetaStore, MetadataPatch, PutCommit};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    commits_round_trip_and_are_idempotent(meta).await;
    lineages_keep_runs_together_and_forks_apart(meta).await;
    concurrent_forks_get_distinct_lineages(meta).await;
    resolve_finds_the_newest_at_or_before(meta).await;
    metadata_updates_change_only_summary_and_tags(meta).await;
    materialization_cache_round_trips(meta).await;
}

/// Commits: get what was put (its machine, ticket and thread with it: a
/// ticket's `context_id` names such a commit), a second put returns the
/// stored one, other tenants see nothing.
pub async fn commits_round_trip_and_are_idempotent(meta: &dyn MetaStore) {
    let a = fresh_tenant("commit-a");
    let b = fresh_tenant("commit-b");
    let mut root = commit(&a, None, t(0), "p", b"root");
    root.summary = Some("the root".into());
    root.tags.insert("k".into(), "v".into());
    root.machine = Some("m1".into());
    root.ticket_id = Some("tkt-42".into());
    root.thread_id = Some("thread-7".into());
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

/// The materialization cache: per tenant, per (commit, stop, format),
/// and only for a commit that exists.
pub async fn materialization_cache_round_trips(meta: &dyn MetaStore) {
    let a = fresh_tenant("cache");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"cached")).await;
    let key = MaterializeKey {
        commit: c.id,
        stop: crate::commit::Stop::Root,
        format: FormatId::raw(),
    };
    assert_eq!(meta.get_materialized(&a, &key).await.expect("get"), None);
    let value = Materialized {
        artifact_ref: ArtifactRef::of(b"m"),
        size: 1,
        message_count: 3,
        token_count: 4,
        tier: crate::format::translate::Tier::Native,
        fidelity: None,
    };
    // No entry for a commit the tenant does not have: never stored,
    // another tenant's, or erased.
    let b = fresh_tenant("cache-b");
    let never = MaterializeKey {
        commit: CommitId::from_bytes([1; 16]),
        ..key.clone()
    };
    for (tenant, k) in [(&a, &never), (&b, &key)] {
        let e = meta
            .put_materialized(tenant, k, &value)
            .await
            .expect_err("no such commit");
        assert_eq!(e.kind, crate::error::ErrorKind::NotFound, "{e:?}");
        assert!(e.message.contains(&k.commit.to_string()), "{e:?}");
        assert_eq!(meta.get_materialized(tenant, k).await.expect("get"), None);
        assert!(
            meta.artifact_users(tenant, &value.artifact_ref, 10)
                .await
                .expect("users")
                .is_empty()
        );
    }
    meta.put_materialized(&a, &key, &value).await.expect("put");
    meta.put_materialized(&a, &key, &value)
        .await
        .expect("put twice");
    assert_eq!(
        meta.get_materialized(&a, &key).await.expect("get"),
        Some(value.clone())
    );
    let other_stop = MaterializeKey {
        stop: crate::commit::Stop::Compaction,
        ..key.clone()
    };
    assert_eq!(
        meta.get_materialized(&a, &other_stop).await.expect("get"),
        None
    );
    assert_eq!(meta.get_materialized(&b, &key).await.expect("get b"), None);
    let gone = put(meta, &a, &commit(&a, Some(&c), t(1), "p", b"erased")).await;
    assert!(meta.delete_commit(&a, &gone).await.expect("delete"));
    let after = MaterializeKey {
        commit: gone.id,
        ..key.clone()
    };
    let e = meta
        .put_materialized(&a, &after, &value)
        .await
        .expect_err("erased commit");
    assert_eq!(e.kind, crate::error::ErrorKind::NotFound, "{e:?}");
    assert!(
        meta.materialized_of(&a, &gone.id)
            .await
            .expect("of")
            .is_empty()
    );
}
