//! The behaviours of a [`MetaStore`]'s refs: compare-and-swap, the ref
//! move of a checkpoint, and the retry rule of a checkpoint whose commit
//! exists.

use futures::future::join_all;

use super::{commit, fresh_tenant, name, put, t};
use crate::commit::Commit;
use crate::error::ErrorKind;
use crate::id::{CommitId, RefName};
use crate::store::{MetaStore, PutCommit, RefMove, RefRecord};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    refs_move_by_compare_and_swap(meta).await;
    checkpoint_ref_moves_are_atomic(meta).await;
    concurrent_cas_race_has_an_exact_count(meta).await;
    retried_checkpoints_settle_their_ref_move(meta).await;
    concurrent_retries_of_one_checkpoint_all_succeed(meta).await;
    refs_are_deleted_by_compare_and_swap(meta).await;
}

/// A ref is deleted only from the target the caller names: a stale or
/// absent one is a conflict carrying the current target and deletes
/// nothing; the commit it pointed at stays; the name can be created again;
/// of concurrent deleters exactly one succeeds.
pub async fn refs_are_deleted_by_compare_and_swap(meta: &dyn MetaStore) {
    let a = fresh_tenant("delref");
    let c1 = put(meta, &a, &commit(&a, None, t(0), "p", b"1")).await;
    let c2 = put(meta, &a, &commit(&a, Some(&c1), t(1), "p", b"2")).await;
    let file = name("workspaces/w/notes.md");
    meta.cas_ref(&a, &file, None, &c2.id, t(2))
        .await
        .expect("create");
    let e = meta
        .delete_ref(&a, &file, &c1.id)
        .await
        .expect_err("stale delete");
    assert_eq!(
        (e.kind, e.current),
        (ErrorKind::Conflict, Some(c2.id.to_string()))
    );
    assert_eq!(
        meta.get_ref(&a, &file)
            .await
            .expect("get")
            .map(|r| r.target),
        Some(c2.id)
    );
    let b = fresh_tenant("delref-b");
    let e = meta
        .delete_ref(&b, &file, &c2.id)
        .await
        .expect_err("another tenant's ref");
    assert_eq!((e.kind, e.current), (ErrorKind::Conflict, None));
    meta.delete_ref(&a, &file, &c2.id).await.expect("delete");
    assert_eq!(meta.get_ref(&a, &file).await.expect("get"), None);
    assert!(
        meta.list_refs(&a, "workspaces/", None, 10)
            .await
            .expect("list")
            .is_empty()
    );
    assert!(meta.get_commit(&a, &c2.id).await.expect("get").is_some());
    let e = meta
        .delete_ref(&a, &file, &c2.id)
        .await
        .expect_err("delete of an absent ref");
    assert_eq!((e.kind, e.current), (ErrorKind::Conflict, None));
    meta.cas_ref(&a, &file, None, &c1.id, t(3))
        .await
        .expect("created again");
    let results = join_all((0..8).map(|_| meta.delete_ref(&a, &file, &c1.id))).await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert_eq!(meta.get_ref(&a, &file).await.expect("get"), None);
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
    let names = |v: Vec<RefRecord>| {
        v.into_iter()
            .map(|r| r.name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            meta.list_refs(&a, "sessions/", None, 100)
                .await
                .expect("list")
        ),
        vec!["sessions/s1/head", "sessions/s2/head"]
    );
    assert_eq!(
        names(
            meta.list_refs(&a, "sessions_", None, 100)
                .await
                .expect("list")
        ),
        vec!["sessions_x"]
    );
    assert_eq!(
        names(meta.list_refs(&a, "", None, 2).await.expect("list")),
        vec!["Sessions/s3", "other"]
    );
    assert_eq!(
        meta.list_refs(&a, "%", None, 100)
            .await
            .expect("list")
            .len(),
        0
    );
    // Pages: after the last name of one page, the next; a name that is not
    // a ref (deleted since) still marks a place.
    let all = names(meta.list_refs(&a, "", None, 100).await.expect("list"));
    let mut paged = Vec::new();
    let mut after: Option<RefName> = None;
    loop {
        let page = names(
            meta.list_refs(&a, "", after.as_ref(), 2)
                .await
                .expect("page"),
        );
        paged.extend(page.iter().cloned());
        if page.len() < 2 {
            break;
        }
        after = Some(
            page.last()
                .expect("a full page")
                .parse()
                .expect("a ref name"),
        );
    }
    assert_eq!(paged, all);
    assert_eq!(
        names(
            meta.list_refs(&a, "sessions/", Some(&name("sessions/s1/head")), 100)
                .await
                .expect("after")
        ),
        vec!["sessions/s2/head"]
    );
    assert_eq!(
        names(
            meta.list_refs(&a, "sessions/", Some(&name("sessions/s1/gone")), 100)
                .await
                .expect("after a name that is no ref")
        ),
        vec!["sessions/s1/head", "sessions/s2/head"]
    );
    assert_eq!(
        names(
            meta.list_refs(&a, "sessions/", Some(&name("Sessions/s3")), 100)
                .await
                .expect("after a name before the prefix")
        ),
        vec!["sessions/s1/head", "sessions/s2/head"]
    );
    assert!(
        meta.list_refs(&a, "sessions/", Some(&name("zzz")), 100)
            .await
            .expect("after the end")
            .is_empty()
    );
    let b = fresh_tenant("refs-b");
    assert_eq!(meta.get_ref(&b, &head).await.expect("get b"), None);
    assert!(
        meta.list_refs(&b, "", None, 100)
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
