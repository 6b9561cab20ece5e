//! The eviction markers of a [`MetaStore`]: a commit whose delta an
//! eviction dropped records the compaction or snapshot to materialize
//! from instead, durably, per tenant, replaced by a later eviction and
//! removed with the commit.

use super::{commit, fresh_tenant, put, t};
use chrono::Duration;

use crate::store::{MetaStore, MetadataPatch};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    markers_are_set_read_and_replaced(meta).await;
    markers_survive_metadata_writes_and_go_with_the_commit(meta).await;
    evicted_commits_leave_the_summary_queue(meta).await;
}

/// `mark_evicted` marks exactly the named commits of the tenant (skipping
/// unknown ones), counts only what it changed (so a re-run counts 0), and
/// a later eviction replaces the marker; `evicted_by` reads it back.
pub async fn markers_are_set_read_and_replaced(meta: &dyn MetaStore) {
    let a = fresh_tenant("evict-mark");
    let b = fresh_tenant("evict-mark-b");
    let r = put(meta, &a, &commit(&a, None, t(0), "p", b"r")).await;
    let c1 = put(meta, &a, &commit(&a, Some(&r), t(1), "p", b"c1")).await;
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(2), "p", b"c2")).await;
    let c3 = put(meta, &a, &commit(&a, Some(&c2), t(3), "p", b"c3")).await;
    let unknown = commit(&a, Some(&c3), t(4), "p", b"never stored").id;
    assert_eq!(meta.evicted_by(&a, &r.id).await.expect("read"), None);
    let n = meta
        .mark_evicted(&a, &c2.id, &[r.id, c1.id, unknown])
        .await
        .expect("mark");
    assert_eq!(
        n, 2,
        "the two stored commits are marked, the unknown one skipped"
    );
    assert_eq!(meta.evicted_by(&a, &r.id).await.expect("r"), Some(c2.id));
    assert_eq!(meta.evicted_by(&a, &c1.id).await.expect("c1"), Some(c2.id));
    assert_eq!(meta.evicted_by(&a, &c2.id).await.expect("c2"), None);
    assert_eq!(meta.evicted_by(&a, &unknown).await.expect("unknown"), None);
    assert_eq!(
        meta.evicted_by(&b, &r.id).await.expect("other tenant"),
        None,
        "another tenant sees no marker"
    );
    assert_eq!(
        meta.mark_evicted(&b, &c2.id, &[r.id])
            .await
            .expect("other tenant"),
        0,
        "another tenant cannot mark this tenant's commit"
    );
    assert_eq!(meta.evicted_by(&a, &r.id).await.expect("r"), Some(c2.id));
    assert_eq!(
        meta.mark_evicted(&a, &c2.id, &[r.id, c1.id])
            .await
            .expect("again"),
        0,
        "marking again changes nothing"
    );
    assert_eq!(
        meta.mark_evicted(&a, &c3.id, &[r.id, c1.id, c2.id])
            .await
            .expect("later"),
        3,
        "a later eviction replaces the markers"
    );
    assert_eq!(meta.evicted_by(&a, &r.id).await.expect("r"), Some(c3.id));
    assert_eq!(meta.evicted_by(&a, &c2.id).await.expect("c2"), Some(c3.id));
    assert_eq!(meta.mark_evicted(&a, &c3.id, &[]).await.expect("empty"), 0);
}

/// A marker survives writes of the commit's mutable metadata, and a
/// deleted commit leaves no marker behind.
pub async fn markers_survive_metadata_writes_and_go_with_the_commit(meta: &dyn MetaStore) {
    let a = fresh_tenant("evict-keep");
    let r = put(meta, &a, &commit(&a, None, t(0), "p", b"r")).await;
    let c1 = put(meta, &a, &commit(&a, Some(&r), t(1), "p", b"c1")).await;
    assert_eq!(
        meta.mark_evicted(&a, &c1.id, &[r.id]).await.expect("mark"),
        1
    );
    let patch = MetadataPatch {
        summary: Some(Some("the start".into())),
        tags: None,
    };
    let patched = meta
        .update_metadata(&a, &r.id, &patch)
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(patched.summary.as_deref(), Some("the start"));
    assert_eq!(
        meta.evicted_by(&a, &r.id).await.expect("after patch"),
        Some(c1.id),
        "a summary write keeps the marker"
    );
    assert!(meta.delete_commit(&a, &c1).await.expect("delete c1"));
    assert!(meta.delete_commit(&a, &r).await.expect("delete r"));
    assert_eq!(
        meta.evicted_by(&a, &r.id).await.expect("after delete"),
        None,
        "the marker goes with the commit"
    );
}

/// A commit marked evicted leaves the summary queue for good: its delta is
/// gone, so no summarizer can read it, and listing it would put it first
/// in every backfill (issue 46, item 3). It is not listed, not claimable,
/// and stays out even when its summary is cleared later; the commits not
/// marked stay listed and claimable.
pub async fn evicted_commits_leave_the_summary_queue(meta: &dyn MetaStore) {
    let a = fresh_tenant("evict-queue");
    let r = put(meta, &a, &commit(&a, None, t(0), "p", b"r")).await;
    let c1 = put(meta, &a, &commit(&a, Some(&r), t(1), "p", b"c1")).await;
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(2), "p", b"c2")).await;
    let listed = |page: crate::store::MissingPage| -> Vec<_> {
        page.items.into_iter().map(|m| m.commit.id).collect()
    };
    let before = listed(meta.missing_summaries(&a, None, 10).await.expect("list"));
    assert_eq!(before, [r.id, c1.id, c2.id], "all three lack a summary");
    assert_eq!(
        meta.mark_evicted(&a, &c2.id, &[r.id, c1.id])
            .await
            .expect("mark"),
        2
    );
    let after = listed(meta.missing_summaries(&a, None, 10).await.expect("list"));
    assert_eq!(after, [c2.id], "evicted commits are no longer listed");
    let page = meta.missing_summaries(&a, None, 1).await.expect("page");
    assert_eq!(listed(page), [c2.id], "a page of one lists the live commit");
    let now = t(10);
    assert!(
        !meta
            .claim_summary(&a, &r, now, now + Duration::minutes(5), false)
            .await
            .expect("claim evicted"),
        "an evicted commit cannot be claimed"
    );
    assert!(
        meta.claim_summary(&a, &c2, now, now + Duration::minutes(5), false)
            .await
            .expect("claim live"),
        "a live commit still can"
    );
    // A summary written and cleared again by hand does not bring it back.
    for summary in [Some("by hand".to_owned()), None] {
        let patch = MetadataPatch {
            summary: Some(summary),
            tags: None,
        };
        meta.update_metadata(&a, &c1.id, &patch)
            .await
            .expect("patch")
            .expect("exists");
    }
    let again = listed(meta.missing_summaries(&a, None, 10).await.expect("list"));
    assert_eq!(again, [c2.id], "a cleared summary does not requeue it");
}
