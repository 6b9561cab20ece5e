//! The behaviours of [`MetaStore::put_batch`]: several commits and ref
//! moves as one atomic write, in-batch parents, forks, the retry rule and
//! the shape every backend refuses alike.

use futures::future::join_all;

use super::{commit, fresh_tenant, name, put, t};
use crate::commit::Commit;
use crate::error::ErrorKind;
use crate::id::{Principal, SessionId, TenantId};
use crate::store::{BatchCommit, BatchRefMove, MetaStore, PutCommit};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    a_batch_writes_commits_with_in_batch_parents_and_moves_refs(meta).await;
    a_stale_ref_writes_nothing_of_the_batch(meta).await;
    forks_in_a_batch_start_runs_of_their_own(meta).await;
    a_retried_batch_writes_nothing_twice(meta).await;
    a_batch_shares_a_session_and_roots(meta).await;
    concurrent_batches_on_one_ref_have_one_winner(meta).await;
    a_malformed_batch_is_refused_alike(meta).await;
}

fn in_batch(commit: Commit, parent: Option<usize>) -> BatchCommit {
    BatchCommit {
        commit,
        parent_in_batch: parent,
    }
}

fn mv(n: &str, expected: Option<&Commit>, target: &Commit) -> BatchRefMove {
    BatchRefMove {
        name: name(n),
        expected: expected.map(|c| c.id),
        target: target.id,
    }
}

fn principal(p: &str) -> Principal {
    p.parse().expect("valid principal")
}

/// The ids on `p`'s timeline, oldest first.
async fn timeline(meta: &dyn MetaStore, tenant: &TenantId, p: &str) -> Vec<crate::id::CommitId> {
    meta.timeline_range(tenant, &principal(p), None, t(1000), 100, false)
        .await
        .expect("timeline")
        .into_iter()
        .map(|c| c.id)
        .collect()
}

/// A root, its child and grandchild in one batch (parents in the batch),
/// on top of a stored commit for a second chain; two refs moved (one
/// created, one moved from where it was): every commit, run slot and
/// timeline entry is there, and the refs point where asked.
pub async fn a_batch_writes_commits_with_in_batch_parents_and_moves_refs(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch");
    let base = put(meta, &a, &commit(&a, None, t(0), "p", b"base")).await;
    meta.cas_ref(&a, &name("other"), None, &base.id, t(0))
        .await
        .expect("ref");
    let c0 = commit(&a, None, t(1), "p", b"0");
    let c1 = commit(&a, Some(&c0), t(2), "p", b"1");
    let c2 = commit(&a, Some(&c1), t(3), "p", b"2");
    let on_base = commit(&a, Some(&base), t(4), "p", b"3");
    let done = meta
        .put_batch(
            &a,
            &[
                in_batch(c0.clone(), None),
                in_batch(c1.clone(), Some(0)),
                in_batch(c2.clone(), Some(1)),
                in_batch(on_base.clone(), None),
            ],
            &[mv("head", None, &c2), mv("other", Some(&base), &on_base)],
            t(9),
        )
        .await
        .expect("batch");
    assert_eq!(done.commits.len(), 4);
    for (put, want) in done.commits.iter().zip([&c0, &c1, &c2, &on_base]) {
        assert!(matches!(put, PutCommit::Created(_)), "{put:?}");
        assert_eq!(put.commit().id, want.id);
        assert_eq!(
            meta.get_commit(&a, &want.id).await.expect("get").as_ref(),
            Some(put.commit())
        );
    }
    let run = meta.lineage_run(&a, &c0.id, 10, 10).await.expect("run");
    assert_eq!(
        run.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![c2.id, c1.id, c0.id],
        "the batch's chain is one run"
    );
    assert_eq!(done.commits[3].commit().lineage, base.lineage);
    assert_eq!(
        timeline(meta, &a, "p").await,
        vec![base.id, c0.id, c1.id, c2.id, on_base.id]
    );
    assert_eq!(
        done.refs
            .iter()
            .map(|r| (r.name.to_string(), r.target, r.updated_at))
            .collect::<Vec<_>>(),
        vec![
            ("head".to_owned(), c2.id, t(9)),
            ("other".to_owned(), on_base.id, t(9))
        ]
    );
    for r in &done.refs {
        assert_eq!(
            meta.get_ref(&a, &r.name).await.expect("get").as_ref(),
            Some(r)
        );
    }
    let children = meta.child_commits(&a, &c0.id).await.expect("children");
    assert_eq!(
        children.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![c1.id]
    );
}

/// A stale move in second place: a conflict naming `refs[1].expected`
/// with the current tip, and nothing of the batch written (not its
/// commits, not their timeline entries, not the first move).
pub async fn a_stale_ref_writes_nothing_of_the_batch(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-stale");
    let base = put(meta, &a, &commit(&a, None, t(0), "p", b"base")).await;
    let tip = put(meta, &a, &commit(&a, Some(&base), t(1), "p", b"tip")).await;
    meta.cas_ref(&a, &name("head"), None, &tip.id, t(1))
        .await
        .expect("ref");
    let c0 = commit(&a, Some(&base), t(2), "q", b"0");
    let c1 = commit(&a, Some(&c0), t(3), "q", b"1");
    let e = meta
        .put_batch(
            &a,
            &[in_batch(c0.clone(), None), in_batch(c1.clone(), Some(0))],
            &[mv("new", None, &c1), mv("head", Some(&base), &c1)],
            t(9),
        )
        .await
        .expect_err("stale");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.field.as_deref(), Some("refs[1].expected"));
    assert_eq!(e.current, Some(tip.id.to_string()));
    for c in [&c0, &c1] {
        assert_eq!(meta.get_commit(&a, &c.id).await.expect("get"), None);
    }
    assert!(timeline(meta, &a, "q").await.is_empty());
    assert_eq!(meta.get_ref(&a, &name("new")).await.expect("get"), None);
    assert_eq!(
        meta.get_ref(&a, &name("head"))
            .await
            .expect("get")
            .map(|r| r.target),
        Some(tip.id)
    );
    assert_eq!(
        meta.child_commits(&a, &base.id)
            .await
            .expect("children")
            .iter()
            .map(|c| c.id)
            .collect::<Vec<_>>(),
        vec![tip.id]
    );
    // A ref that must not exist but does: the same.
    let e = meta
        .put_batch(
            &a,
            &[in_batch(c0.clone(), None)],
            &[mv("head", None, &c0)],
            t(9),
        )
        .await
        .expect_err("exists");
    assert_eq!(
        (e.kind, e.field.as_deref(), e.current),
        (
            ErrorKind::Conflict,
            Some("refs[0].expected"),
            Some(tip.id.to_string())
        )
    );
    assert_eq!(meta.get_commit(&a, &c0.id).await.expect("get"), None);
}

/// Lineage rules as for single commits: a child of a stored commit whose
/// run goes on starts a run of its own, and so does the second child of
/// an in-batch parent; an in-batch child of such a fork continues the
/// fork's run.
pub async fn forks_in_a_batch_start_runs_of_their_own(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-fork");
    let base = put(meta, &a, &commit(&a, None, t(0), "p", b"base")).await;
    let next = put(meta, &a, &commit(&a, Some(&base), t(1), "p", b"next")).await;
    assert_eq!(next.lineage, base.lineage);
    // A fork of the stored run, then its child, its second child (an
    // in-batch fork) and that one's child.
    let f = commit(&a, Some(&base), t(2), "p", b"f");
    let f1 = commit(&a, Some(&f), t(3), "p", b"f1");
    let f2 = commit(&a, Some(&f), t(4), "p", b"f2");
    let f21 = commit(&a, Some(&f2), t(5), "p", b"f21");
    let done = meta
        .put_batch(
            &a,
            &[
                in_batch(f.clone(), None),
                in_batch(f1.clone(), Some(0)),
                in_batch(f2.clone(), Some(0)),
                in_batch(f21.clone(), Some(2)),
            ],
            &[],
            t(9),
        )
        .await
        .expect("batch");
    let stored: Vec<&Commit> = done.commits.iter().map(PutCommit::commit).collect();
    assert_eq!(stored[0].lineage, f.id, "a fork of a stored run");
    assert_eq!(stored[1].lineage, f.id, "continues the fork");
    assert_eq!(stored[1].parent_lineage, Some(f.id));
    assert_eq!(stored[2].lineage, f2.id, "an in-batch fork");
    assert_eq!(stored[3].lineage, f2.id);
    assert_eq!(stored[3].parent_lineage, Some(f2.id));
    for c in &stored {
        assert_eq!(
            meta.get_commit(&a, &c.id).await.expect("get").as_ref(),
            Some(*c)
        );
    }
    let ids = |v: Vec<Commit>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(
        ids(meta.lineage_run(&a, &f.id, 10, 10).await.expect("run")),
        vec![f1.id, f.id]
    );
    assert_eq!(
        ids(meta.lineage_run(&a, &f2.id, 10, 10).await.expect("run")),
        vec![f21.id, f2.id]
    );
    assert_eq!(
        ids(meta
            .lineage_run(&a, &base.lineage, 10, 10)
            .await
            .expect("run")),
        vec![next.id, base.id],
        "the stored run is untouched"
    );
}

/// The same batch twice: the second time every commit is `Existing` (as
/// stored, with the run a fork gave it), the refs that already point at
/// their targets are left as they are, and nothing is written twice. A
/// retry after a ref moved on is that ref's conflict.
pub async fn a_retried_batch_writes_nothing_twice(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-retry");
    let base = put(meta, &a, &commit(&a, None, t(0), "p", b"base")).await;
    put(meta, &a, &commit(&a, Some(&base), t(1), "p", b"next")).await;
    let c0 = commit(&a, Some(&base), t(2), "p", b"0");
    let c1 = commit(&a, Some(&c0), t(3), "p", b"1");
    let commits = [in_batch(c0.clone(), None), in_batch(c1.clone(), Some(0))];
    let moves = [mv("head", None, &c1), mv("first", None, &c0)];
    let first = meta
        .put_batch(&a, &commits, &moves, t(9))
        .await
        .expect("first");
    let again = meta
        .put_batch(&a, &commits, &moves, t(20))
        .await
        .expect("retry");
    for (f, g) in first.commits.iter().zip(&again.commits) {
        assert!(matches!(f, PutCommit::Created(_)));
        assert!(matches!(g, PutCommit::Existing(_)), "{g:?}");
        assert_eq!(f.commit(), g.commit());
    }
    assert_eq!(again.commits[1].commit().lineage, c0.id, "the fork's run");
    assert_eq!(first.refs, again.refs, "left as they were (updated_at too)");
    assert_eq!(timeline(meta, &a, "p").await.len(), 4);
    assert_eq!(
        meta.lineage_run(&a, &c0.id, 10, 10)
            .await
            .expect("run")
            .len(),
        2
    );
    // Partly done: one commit stored by itself before; the batch writes the
    // rest.
    let d0 = commit(&a, Some(first.commits[1].commit()), t(4), "p", b"d0");
    let d1 = commit(&a, Some(&d0), t(5), "p", b"d1");
    put(meta, &a, &d0).await;
    let part = meta
        .put_batch(
            &a,
            &[in_batch(d0.clone(), None), in_batch(d1.clone(), Some(0))],
            &[mv("head", Some(&c1), &d1)],
            t(21),
        )
        .await
        .expect("partly done");
    assert!(matches!(part.commits[0], PutCommit::Existing(_)));
    assert!(matches!(part.commits[1], PutCommit::Created(_)));
    // The ref moved on since: a retry of the first batch is its conflict,
    // and writes nothing.
    let e = meta
        .put_batch(&a, &commits, &moves, t(22))
        .await
        .expect_err("moved on");
    assert_eq!(
        (e.kind, e.field.as_deref(), e.current),
        (
            ErrorKind::Conflict,
            Some("refs[0].expected"),
            Some(d1.id.to_string())
        )
    );
    assert_eq!(
        meta.get_ref(&a, &name("first"))
            .await
            .expect("get")
            .map(|r| r.updated_at),
        Some(t(9))
    );
}

/// Several commits of one session and several roots in one batch (on
/// DynamoDB they share the session's last-activity item and the tenant
/// registry item, which one transaction may write once): all indexed.
pub async fn a_batch_shares_a_session_and_roots(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-session");
    let s: SessionId = "s-1".parse().expect("valid session");
    let mut r0 = commit(&a, None, t(1), "p", b"r0");
    r0.session_id = Some(s.clone());
    let mut c1 = commit(&a, Some(&r0), t(2), "p", b"c1");
    c1.session_id = Some(s.clone());
    let mut r1 = commit(&a, None, t(3), "p", b"r1");
    r1.session_id = Some(s.clone());
    meta.put_batch(
        &a,
        &[
            in_batch(r0.clone(), None),
            in_batch(c1.clone(), Some(0)),
            in_batch(r1.clone(), None),
        ],
        &[],
        t(9),
    )
    .await
    .expect("batch");
    let mut got: Vec<_> = meta
        .session_commits(&a, &s)
        .await
        .expect("session")
        .into_iter()
        .map(|c| c.id)
        .collect();
    got.sort();
    let mut want = vec![r0.id, c1.id, r1.id];
    want.sort();
    assert_eq!(got, want);
}

/// Batches racing to create one ref: exactly one wins; the others are its
/// conflict and wrote nothing.
pub async fn concurrent_batches_on_one_ref_have_one_winner(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-race");
    let batches: Vec<Commit> = (0..6)
        .map(|i| commit(&a, None, t(i), "p", format!("racer {i}").as_bytes()))
        .collect();
    let results = join_all(batches.iter().map(|c| {
        let moves = [mv("head", None, c)];
        let commits = [in_batch(c.clone(), None)];
        let a = a.clone();
        async move { meta.put_batch(&a, &commits, &moves, t(9)).await }
    }))
    .await;
    let won: Vec<usize> = (0..results.len()).filter(|i| results[*i].is_ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    let winner = &batches[won[0]];
    for (i, r) in results.iter().enumerate() {
        if let Err(e) = r {
            assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
            assert_eq!(
                meta.get_commit(&a, &batches[i].id).await.expect("get"),
                None
            );
        }
    }
    assert_eq!(
        meta.get_ref(&a, &name("head"))
            .await
            .expect("get")
            .map(|r| r.target),
        Some(winner.id)
    );
    assert_eq!(timeline(meta, &a, "p").await, vec![winner.id]);
}

/// What no backend takes, refused before anything is written: an empty
/// batch, one over the transaction's size, a ref moved twice, the same
/// commit twice, an in-batch parent that is not earlier or not the parent.
pub async fn a_malformed_batch_is_refused_alike(meta: &dyn MetaStore) {
    let a = fresh_tenant("batch-shape");
    let c0 = commit(&a, None, t(1), "p", b"0");
    let c1 = commit(&a, Some(&c0), t(2), "p", b"1");
    let other = commit(&a, None, t(3), "p", b"other");
    let cases: Vec<(Vec<BatchCommit>, Vec<BatchRefMove>, ErrorKind, &str)> = vec![
        (vec![], vec![], ErrorKind::Invalid, "commits"),
        (
            (0..15)
                .map(|i| in_batch(commit(&a, None, t(i), "p", b"x"), None))
                .collect(),
            vec![],
            ErrorKind::TooLarge,
            "commits",
        ),
        (
            (0..14)
                .map(|i| in_batch(commit(&a, None, t(i), "p", b"x"), None))
                .collect(),
            (0..3).map(|i| mv(&format!("r{i}"), None, &c0)).collect(),
            ErrorKind::TooLarge,
            "refs",
        ),
        (
            vec![in_batch(c0.clone(), None)],
            vec![mv("h", None, &c0), mv("h", None, &c0)],
            ErrorKind::Invalid,
            "refs[1].name",
        ),
        (
            vec![in_batch(c0.clone(), None), in_batch(c0.clone(), None)],
            vec![],
            ErrorKind::Invalid,
            "commits[1]",
        ),
        (
            vec![in_batch(c1.clone(), Some(1)), in_batch(c0.clone(), None)],
            vec![],
            ErrorKind::Invalid,
            "commits[0].parent_in_batch",
        ),
        (
            vec![in_batch(other.clone(), None), in_batch(c1.clone(), Some(0))],
            vec![],
            ErrorKind::Invalid,
            "commits[1].parent_in_batch",
        ),
    ];
    for (commits, moves, kind, field) in cases {
        let e = meta
            .put_batch(&a, &commits, &moves, t(9))
            .await
            .expect_err(field);
        assert_eq!((e.kind, e.field.as_deref()), (kind, Some(field)), "{e}");
    }
    for c in [&c0, &c1, &other] {
        assert_eq!(meta.get_commit(&a, &c.id).await.expect("get"), None);
    }
    assert_eq!(meta.get_ref(&a, &name("h")).await.expect("get"), None);
}
