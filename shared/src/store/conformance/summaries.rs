//! The behaviours of the summary queue of a [`MetaStore`]: commits lacking
//! a summary listed oldest first and paginated, exclusive claims with an
//! expiry, conditional summary writes, failures with a retry time, and the
//! tenants a scheduled batch visits.

use futures::future::join_all;

use super::{commit, fresh_tenant, put, t};
use crate::commit::Commit;
use crate::id::CommitId;
use crate::store::{
    MetaStore, MetadataPatch, SummaryCursor, SummaryState, TAG_SUMMARIZING, TAG_SUMMARY_BY,
    TAG_SUMMARY_ERROR,
};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    missing_summaries_are_listed_oldest_first_in_pages(meta).await;
    a_claim_is_exclusive_until_it_expires(meta).await;
    concurrent_claims_have_one_winner(meta).await;
    a_summary_is_written_only_while_missing(meta).await;
    a_failure_is_recorded_and_backs_off(meta).await;
    tenants_with_work_are_found(meta).await;
}

/// All ids of the queue of `tenant`, page by page of `limit`.
async fn drain(meta: &dyn MetaStore, tenant: &crate::id::TenantId, limit: usize) -> Vec<CommitId> {
    let mut out = Vec::new();
    let mut after: Option<SummaryCursor> = None;
    for _ in 0..100 {
        let page = meta
            .missing_summaries(tenant, after.as_ref(), limit)
            .await
            .expect("missing_summaries");
        assert!(page.items.len() <= limit, "a page holds at most the limit");
        out.extend(page.items.iter().map(|m| m.commit.id));
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
    panic!("the listing did not end");
}

/// Commits lacking a summary, by creation time then id (six share one
/// time, so ties are ordered by id across pages, and across the shards of
/// a sharded queue), in pages whose cursors continue exactly where the
/// last page stopped; commits with a summary and other tenants' commits
/// are not listed.
pub async fn missing_summaries_are_listed_oldest_first_in_pages(meta: &dyn MetaStore) {
    let a = fresh_tenant("queue-a");
    let b = fresh_tenant("queue-b");
    let mut made: Vec<Commit> = Vec::new();
    for (i, at) in [5, 1, 3, 2, 4, 0, 7, 7, 7, 7, 7, 7].into_iter().enumerate() {
        let mut c = commit(&a, None, t(at), "p", format!("q{i}").as_bytes());
        if at == 2 {
            c.summary = Some("written at checkpoint".into());
        }
        made.push(put(meta, &a, &c).await);
    }
    put(meta, &b, &commit(&b, None, t(0), "p", b"other tenant")).await;
    let mut expected: Vec<&Commit> = made.iter().filter(|c| c.summary.is_none()).collect();
    expected.sort_by_key(|c| (c.created_at, c.id));
    let expected: Vec<CommitId> = expected.into_iter().map(|c| c.id).collect();
    for limit in [1, 2, 3, 5, 100] {
        assert_eq!(drain(meta, &a, limit).await, expected, "pages of {limit}");
    }
    let first = meta.missing_summaries(&a, None, 20).await.expect("list");
    assert_eq!(first.next, None, "one page holds them all");
    assert_eq!(first.items.len(), expected.len());
    assert!(
        first
            .items
            .iter()
            .all(|m| m.state == SummaryState::default()),
        "no state yet: {:?}",
        first.items
    );
    // A summary set by update-metadata takes a commit out of the queue.
    let patch = MetadataPatch {
        summary: Some(Some("by hand".into())),
        tags: None,
    };
    meta.update_metadata(&a, &expected[0], &patch)
        .await
        .expect("update");
    assert_eq!(drain(meta, &a, 2).await, expected[1..].to_vec());
}

/// A claim holds until it expires; a claimed commit is marked by a tag.
pub async fn a_claim_is_exclusive_until_it_expires(meta: &dyn MetaStore) {
    let a = fresh_tenant("claim");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"claim me")).await;
    assert!(
        meta.claim_summary(&a, &c, t(100), t(160), true)
            .await
            .expect("claim")
    );
    let got = meta.get_commit(&a, &c.id).await.expect("get").expect("c");
    assert!(got.tags.contains_key(TAG_SUMMARIZING), "{:?}", got.tags);
    let page = meta.missing_summaries(&a, None, 10).await.expect("list");
    assert_eq!(page.items[0].state.claimed_until, Some(t(160)));
    assert!(!page.items[0].state.claimable(t(159)));
    for now in [t(100), t(159)] {
        assert!(
            !meta
                .claim_summary(&a, &c, now, t(200), true)
                .await
                .expect("claim again"),
            "held at {now}"
        );
        assert!(
            !meta
                .claim_summary(&a, &c, now, t(200), false)
                .await
                .expect("claim again"),
            "held at {now} even when back-off is ignored"
        );
    }
    assert!(
        meta.claim_summary(&a, &c, t(160), t(220), true)
            .await
            .expect("claim after expiry"),
        "a crashed claimer's commit is picked up once its claim expires"
    );
    let missing = commit(&a, None, t(50), "p", b"never stored");
    assert!(
        !meta
            .claim_summary(&a, &missing, t(0), t(1), true)
            .await
            .expect("claim missing")
    );
    let b = fresh_tenant("claim-other");
    assert!(
        !meta
            .claim_summary(&b, &c, t(300), t(400), true)
            .await
            .expect("claim from another tenant")
    );
}

/// Many claimers at once on one commit: exactly one wins.
pub async fn concurrent_claims_have_one_winner(meta: &dyn MetaStore) {
    let a = fresh_tenant("claim-race");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"race")).await;
    let results =
        join_all((0..8).map(|_| async { meta.claim_summary(&a, &c, t(10), t(70), true).await }))
            .await;
    let wins = results
        .into_iter()
        .filter(|r| match r {
            Ok(won) => *won,
            // A store may refuse a write that collided; that claimer lost.
            Err(e) => e.kind.is_retryable() || panic!("claim failed: {e}"),
        })
        .count();
    assert_eq!(wins, 1, "exactly one claimer wins");
}

/// A summary is written only while none exists: one a person wrote between
/// the claim and the write is kept. A written summary carries who wrote it
/// and clears the claim.
pub async fn a_summary_is_written_only_while_missing(meta: &dyn MetaStore) {
    let a = fresh_tenant("write");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"one")).await;
    let d = put(meta, &a, &commit(&a, None, t(1), "p", b"two")).await;
    for x in [&c, &d] {
        assert!(
            meta.claim_summary(&a, x, t(10), t(70), true)
                .await
                .expect("claim")
        );
    }
    assert!(
        meta.write_summary(&a, &c, "machine summary", "test:m1")
            .await
            .expect("write")
    );
    let got = meta.get_commit(&a, &c.id).await.expect("get").expect("c");
    assert_eq!(got.summary.as_deref(), Some("machine summary"));
    assert_eq!(
        got.tags.get(TAG_SUMMARY_BY).map(String::as_str),
        Some("test:m1")
    );
    assert!(!got.tags.contains_key(TAG_SUMMARIZING), "{:?}", got.tags);
    assert!(
        !meta
            .write_summary(&a, &c, "again", "test:m2")
            .await
            .expect("write again"),
        "a second write finds the summary there"
    );
    // A person writes d's summary while it is claimed.
    let patch = MetadataPatch {
        summary: Some(Some("human".into())),
        tags: None,
    };
    meta.update_metadata(&a, &d.id, &patch)
        .await
        .expect("update");
    assert!(
        !meta
            .write_summary(&a, &d, "machine", "test:m1")
            .await
            .expect("write d")
    );
    let got = meta.get_commit(&a, &d.id).await.expect("get").expect("d");
    assert_eq!(got.summary.as_deref(), Some("human"));
    assert!(!got.tags.contains_key(TAG_SUMMARY_BY));
    assert!(
        meta.missing_summaries(&a, None, 10)
            .await
            .expect("list")
            .items
            .is_empty()
    );
    assert!(
        !meta
            .claim_summary(&a, &d, t(100), t(160), false)
            .await
            .expect("claim d"),
        "a commit with a summary is never claimed"
    );
}

/// A failure releases the claim, counts the attempt, records the error
/// (also as a tag) and holds the commit back until its retry time; a
/// later success clears all of it.
pub async fn a_failure_is_recorded_and_backs_off(meta: &dyn MetaStore) {
    let a = fresh_tenant("fail");
    let c = put(meta, &a, &commit(&a, None, t(0), "p", b"hard")).await;
    assert!(
        meta.claim_summary(&a, &c, t(10), t(70), true)
            .await
            .expect("claim")
    );
    meta.fail_summary(&a, &c, "model said no", t(300))
        .await
        .expect("fail");
    let state = &meta
        .missing_summaries(&a, None, 10)
        .await
        .expect("list")
        .items[0]
        .state;
    assert_eq!(
        state,
        &SummaryState {
            claimed_until: None,
            attempts: 1,
            last_error: Some("model said no".into()),
            retry_at: Some(t(300)),
        }
    );
    let got = meta.get_commit(&a, &c.id).await.expect("get").expect("c");
    assert_eq!(
        got.tags.get(TAG_SUMMARY_ERROR).map(String::as_str),
        Some("model said no")
    );
    assert!(!got.tags.contains_key(TAG_SUMMARIZING));
    assert!(
        !meta
            .claim_summary(&a, &c, t(20), t(80), true)
            .await
            .expect("claim in back-off"),
        "not before its retry time"
    );
    assert!(
        meta.claim_summary(&a, &c, t(300), t(360), true)
            .await
            .expect("claim after back-off")
    );
    meta.fail_summary(&a, &c, "still no", t(900))
        .await
        .expect("fail again");
    let state = &meta
        .missing_summaries(&a, None, 10)
        .await
        .expect("list")
        .items[0]
        .state;
    assert_eq!(state.attempts, 2);
    assert!(
        meta.claim_summary(&a, &c, t(310), t(370), false)
            .await
            .expect("claim ignoring back-off"),
        "a one-shot request may ignore the back-off"
    );
    assert!(
        meta.write_summary(&a, &c, "at last", "test:m1")
            .await
            .expect("write")
    );
    let got = meta.get_commit(&a, &c.id).await.expect("get").expect("c");
    assert!(!got.tags.contains_key(TAG_SUMMARY_ERROR), "{:?}", got.tags);
    assert_eq!(got.summary.as_deref(), Some("at last"));
    // A failure recorded after a summary exists writes nothing.
    meta.fail_summary(&a, &c, "late", t(1000))
        .await
        .expect("late fail");
    let got = meta.get_commit(&a, &c.id).await.expect("get").expect("c");
    assert!(!got.tags.contains_key(TAG_SUMMARY_ERROR));
}

/// A tenant with a commit lacking a summary is among the tenants with work.
pub async fn tenants_with_work_are_found(meta: &dyn MetaStore) {
    let a = fresh_tenant("tenants");
    let root = put(meta, &a, &commit(&a, None, t(0), "p", b"r")).await;
    put(meta, &a, &commit(&a, Some(&root), t(1), "p", b"c")).await;
    let tenants = meta.summary_tenants().await.expect("tenants");
    assert!(tenants.contains(&a), "{a} missing from {tenants:?}");
    assert_eq!(
        tenants.iter().filter(|t| **t == a).count(),
        1,
        "each tenant once"
    );
}
