//! The behaviours of a [`BranchStore`]: records per tenant, the exact-count
//! creation races of every limit, token accounting and finishing once.

use futures::future::join_all;

use super::{Capabilities, fresh_tenant, t};
use crate::branch::memories::{MemoryId, MemoryKind, MemoryQuery, MemoryRecord, Provenance};
use crate::branch::{BranchRecord, BranchStatus, BranchStore, Finish, RateLimits};
use crate::clock::{IdSource, OsRandom};
use crate::error::ErrorKind;
use crate::id::{BranchId, CommitId, SessionId, TenantId};

/// Runs every behaviour the store's capabilities call for.
pub async fn run_all(store: &dyn BranchStore, caps: Capabilities) {
    records_round_trip_per_tenant(store).await;
    session_concurrency_race_has_an_exact_count(store).await;
    tenant_concurrency_race_has_an_exact_count(store).await;
    creation_window_race_has_an_exact_count(store).await;
    tokens_add_up_and_finish_happens_once(store).await;
    a_sessions_branches_are_listed_and_removed(store).await;
    memories_are_searched_per_tenant_and_go_with_their_branch(store).await;
    a_search_reads_every_memory_not_the_newest_few(store).await;
    if caps.global_branch_listing {
        all_active_lists_every_tenant(store).await;
    }
}

fn new_id() -> BranchId {
    let mut b = [0u8; 16];
    OsRandom.fill(&mut b);
    BranchId::from_bytes(b)
}

/// A fresh active record of `session` created at `t(at)`.
pub fn record(session: &str, at: i64) -> BranchRecord {
    BranchRecord {
        id: new_id(),
        session_id: session.to_owned(),
        parent_branch: None,
        depth: 1,
        status: BranchStatus::Active,
        description: "look into it".into(),
        budget: 100,
        tokens_used: 0,
        root_commit: CommitId::from_bytes([7; 16]),
        owner: "tok-owner".into(),
        created_at: t(at),
        deadline: t(at + 300),
        completed_at: None,
        reason: None,
        return_commit: None,
        timer: None,
    }
}

const LOOSE: RateLimits = RateLimits {
    active_per_session: 1000,
    active_per_tenant: 1000,
    creations_per_minute: 1000,
};

fn finish(status: BranchStatus, at: i64) -> Finish {
    Finish {
        status,
        at: t(at),
        reason: Some("test".into()),
    }
}

/// Created records read back for their tenant only; an id is created once;
/// the session's first owner sticks.
pub async fn records_round_trip_per_tenant(store: &dyn BranchStore) {
    let a = fresh_tenant("br-a");
    let b = fresh_tenant("br-b");
    let rec = record("s1", 0);
    store.create_branch(&a, &rec, &LOOSE).await.expect("create");
    assert_eq!(
        store.get_branch(&a, &rec.id).await.expect("get"),
        Some(rec.clone())
    );
    assert_eq!(store.get_branch(&b, &rec.id).await.expect("get"), None);
    let again = store.create_branch(&a, &rec, &LOOSE).await.unwrap_err();
    assert_eq!(again.kind, ErrorKind::Conflict, "{again}");
    let mut other = record("s1", 1);
    other.owner = "tok-other".into();
    other.parent_branch = Some(rec.id);
    other.depth = 2;
    store
        .create_branch(&a, &other, &LOOSE)
        .await
        .expect("create");
    assert_eq!(
        store
            .session_owner(&a, "s1")
            .await
            .expect("owner")
            .as_deref(),
        Some("tok-owner")
    );
    assert_eq!(store.session_owner(&b, "s1").await.expect("owner"), None);
    let mut active = store.active_branches(&a, "s1").await.expect("active");
    active.sort_by_key(|x| x.depth);
    assert_eq!(active.len(), 2);
    assert_eq!((active[0].id, active[0].depth), (rec.id, 1));
    assert_eq!(
        (active[1].id, active[1].parent_branch),
        (other.id, Some(rec.id))
    );
    assert!(
        store
            .active_branches(&a, "s2")
            .await
            .expect("active")
            .is_empty()
    );
    assert!(
        store
            .active_branches(&b, "s1")
            .await
            .expect("active")
            .is_empty()
    );
    store
        .annotate(&a, &rec.id, Some("arn:timer"), None)
        .await
        .expect("annotate");
    let ret = CommitId::from_bytes([9; 16]);
    store
        .annotate(&a, &rec.id, None, Some(&ret))
        .await
        .expect("annotate");
    let got = store
        .get_branch(&a, &rec.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(got.timer.as_deref(), Some("arn:timer"));
    assert_eq!(got.return_commit, Some(ret));
    let missing = store
        .annotate(&b, &rec.id, Some("x"), None)
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound);
}

async fn race(
    store: &dyn BranchStore,
    tenant: &TenantId,
    recs: &[BranchRecord],
    limits: &RateLimits,
) -> (usize, usize) {
    let results = join_all(recs.iter().map(|r| store.create_branch(tenant, r, limits))).await;
    let mut ok = 0;
    let mut limited = 0;
    for r in results {
        match r {
            Ok(()) => ok += 1,
            Err(e) if e.kind == ErrorKind::RateLimited => {
                assert!(e.retry_after.unwrap_or(0) >= 1, "no Retry-After: {e}");
                limited += 1;
            }
            Err(e) => panic!("unexpected error in a creation race: {e}"),
        }
    }
    (ok, limited)
}

/// 24 concurrent creations in one session with a limit of 10 active: exactly
/// 10 succeed; finishing one frees exactly one slot.
pub async fn session_concurrency_race_has_an_exact_count(store: &dyn BranchStore) {
    let tenant = fresh_tenant("br-sess");
    let limits = RateLimits {
        active_per_session: 10,
        ..LOOSE
    };
    let recs: Vec<_> = (0..24).map(|_| record("s", 0)).collect();
    assert_eq!(race(store, &tenant, &recs, &limits).await, (10, 14));
    let active = store.active_branches(&tenant, "s").await.expect("active");
    assert_eq!(active.len(), 10);
    // Another session is not affected.
    store
        .create_branch(&tenant, &record("other", 0), &limits)
        .await
        .expect("another session");
    store
        .finish_branch(&tenant, &active[0].id, &finish(BranchStatus::Completed, 1))
        .await
        .expect("finish");
    let more: Vec<_> = (0..3).map(|_| record("s", 2)).collect();
    assert_eq!(race(store, &tenant, &more, &limits).await, (1, 2));
}

/// 12 concurrent creations over 12 sessions with a tenant limit of 4:
/// exactly 4 succeed.
pub async fn tenant_concurrency_race_has_an_exact_count(store: &dyn BranchStore) {
    let tenant = fresh_tenant("br-ten");
    let limits = RateLimits {
        active_per_tenant: 4,
        ..LOOSE
    };
    let recs: Vec<_> = (0..12).map(|i| record(&format!("s{i}"), 0)).collect();
    assert_eq!(race(store, &tenant, &recs, &limits).await, (4, 8));
    // Another tenant has its own count.
    let other = fresh_tenant("br-ten2");
    store
        .create_branch(&other, &record("s0", 0), &limits)
        .await
        .expect("another tenant");
}

/// 9 concurrent creations in one session's minute with a limit of 5 per
/// minute: exactly 5 succeed, even though each finishes at once; the next
/// minute window allows more. The Retry-After points at the window's end.
pub async fn creation_window_race_has_an_exact_count(store: &dyn BranchStore) {
    let tenant = fresh_tenant("br-rate");
    let limits = RateLimits {
        creations_per_minute: 5,
        ..LOOSE
    };
    // t(0) is 20 s into its minute (1_790_000_000 mod 60 = 20).
    let recs: Vec<_> = (0..9).map(|_| record("s", 0)).collect();
    assert_eq!(race(store, &tenant, &recs, &limits).await, (5, 4));
    let late = store
        .create_branch(&tenant, &record("s", 30), &limits)
        .await
        .unwrap_err();
    assert_eq!(late.kind, ErrorKind::RateLimited);
    assert_eq!(late.retry_after, Some(10), "{late}");
    store
        .create_branch(&tenant, &record("s", 40), &limits)
        .await
        .expect("the next minute");
}

/// Tokens accumulate on an active branch; a branch finishes exactly once
/// even when finishes race, and then refuses tokens and finishes.
pub async fn tokens_add_up_and_finish_happens_once(store: &dyn BranchStore) {
    let tenant = fresh_tenant("br-tok");
    let rec = record("s", 0);
    store
        .create_branch(&tenant, &rec, &LOOSE)
        .await
        .expect("create");
    assert_eq!(
        store
            .add_tokens(&tenant, &rec.id, 30)
            .await
            .expect("add")
            .tokens_used,
        30
    );
    let adds = join_all((0..8).map(|_| store.add_tokens(&tenant, &rec.id, 5))).await;
    assert!(adds.iter().all(|r| r.is_ok()));
    let got = store
        .get_branch(&tenant, &rec.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(got.tokens_used, 70);
    let ends: Vec<Finish> = (0..6)
        .map(|i| {
            let status = if i % 2 == 0 {
                BranchStatus::Timeout
            } else {
                BranchStatus::Completed
            };
            finish(status, 5)
        })
        .collect();
    let finishes = join_all(
        ends.iter()
            .map(|f| store.finish_branch(&tenant, &rec.id, f)),
    )
    .await;
    let won: Vec<_> = finishes.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "exactly one finish wins");
    for e in finishes.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
        assert_eq!(e.current.as_deref(), Some(won[0].status.as_str()));
    }
    let got = store
        .get_branch(&tenant, &rec.id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(got.status, won[0].status);
    assert_eq!(got.completed_at, Some(t(5)));
    assert_eq!(got.reason.as_deref(), Some("test"));
    assert_eq!(got.tokens_used, 70);
    let e = store.add_tokens(&tenant, &rec.id, 1).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(
        store
            .active_branches(&tenant, "s")
            .await
            .expect("active")
            .is_empty()
    );
    let nf = store
        .add_tokens(&fresh_tenant("br-none"), &rec.id, 1)
        .await
        .unwrap_err();
    assert_eq!(nf.kind, ErrorKind::NotFound);
}

/// The global listing has every active branch of every tenant, and no
/// finished one.
pub async fn all_active_lists_every_tenant(store: &dyn BranchStore) {
    let a = fresh_tenant("br-all");
    let b = fresh_tenant("br-all2");
    let ra = record("s", 0);
    let rb = record("s", 0);
    let done = record("s", 0);
    store.create_branch(&a, &ra, &LOOSE).await.expect("create");
    store.create_branch(&b, &rb, &LOOSE).await.expect("create");
    store
        .create_branch(&a, &done, &LOOSE)
        .await
        .expect("create");
    store
        .finish_branch(&a, &done.id, &finish(BranchStatus::Failed, 1))
        .await
        .expect("finish");
    let all = store.all_active().await.expect("list").expect("supported");
    assert!(all.contains(&(a.clone(), ra.id, ra.deadline)));
    assert!(all.contains(&(b.clone(), rb.id, rb.deadline)));
    assert!(!all.iter().any(|(_, id, _)| *id == done.id));
}

/// Every branch of a session is listed, finished or not (per tenant and
/// session); a finished branch's record is removed once; forgetting the
/// session drops its owner and counts, so a new branch starts afresh.
pub async fn a_sessions_branches_are_listed_and_removed(store: &dyn BranchStore) {
    let a = fresh_tenant("br-erase-a");
    let b = fresh_tenant("br-erase-b");
    let first = record("doomed", 0);
    let second = record("doomed", 1);
    let other = record("kept", 2);
    for (tenant, rec) in [(&a, &first), (&a, &second), (&a, &other), (&b, &first)] {
        store
            .create_branch(tenant, rec, &LOOSE)
            .await
            .expect("create");
    }
    store
        .finish_branch(&a, &first.id, &finish(BranchStatus::Completed, 5))
        .await
        .expect("finish");
    let mut listed = store.session_branches(&a, "doomed").await.expect("list");
    listed.sort();
    let mut want = vec![first.id, second.id];
    want.sort();
    assert_eq!(listed, want);
    assert!(
        store
            .session_branches(&a, "none")
            .await
            .expect("none")
            .is_empty()
    );

    store
        .finish_branch(&a, &second.id, &finish(BranchStatus::Failed, 6))
        .await
        .expect("finish");
    for id in [first.id, second.id] {
        assert!(store.delete_branch(&a, &id).await.expect("delete"));
        assert!(!store.delete_branch(&a, &id).await.expect("again"));
        assert_eq!(store.get_branch(&a, &id).await.expect("get"), None);
    }
    assert!(
        store
            .session_branches(&a, "doomed")
            .await
            .expect("list")
            .is_empty()
    );
    let doomed: SessionId = "doomed".parse().expect("a session id");
    assert!(store.forget_session(&a, &doomed).await.expect("forget"));
    assert!(!store.forget_session(&a, &doomed).await.expect("again"));
    assert_eq!(
        store.session_owner(&a, "doomed").await.expect("owner"),
        None
    );
    // The session can have branches again; the rest is untouched.
    let mut fresh = record("doomed", 10);
    fresh.owner = "tok-new".into();
    store
        .create_branch(&a, &fresh, &LOOSE)
        .await
        .expect("create again");
    assert_eq!(
        store.session_owner(&a, "doomed").await.expect("owner"),
        Some("tok-new".into())
    );
    assert_eq!(
        store.get_branch(&a, &other.id).await.expect("kept"),
        Some(other.clone())
    );
    assert_eq!(
        store.get_branch(&b, &first.id).await.expect("b's"),
        Some(first.clone())
    );
    assert_eq!(
        store.session_branches(&b, "doomed").await.expect("b").len(),
        1
    );
}

/// A memory of branch `b`, extracted when it was created.
pub fn memory_of(tenant: &TenantId, b: &BranchRecord) -> MemoryRecord {
    memory(
        tenant,
        b,
        MemoryKind::Strategy,
        &b.description,
        "what it found",
        0.8,
        b.created_at.timestamp(),
    )
}

/// A memory of branch `b` extracted at `t(at)`.
fn memory(
    tenant: &TenantId,
    b: &BranchRecord,
    kind: MemoryKind,
    title: &str,
    content: &str,
    confidence: f64,
    at: i64,
) -> MemoryRecord {
    MemoryRecord {
        id: MemoryId::of_branch(tenant, &b.id),
        kind,
        title: title.to_owned(),
        description: format!("{title}: what happened"),
        content: content.to_owned(),
        confidence,
        provenance: Provenance {
            session_id: b.session_id.clone(),
            principal: "agent-1".into(),
            branch_id: b.id,
            commit: CommitId::from_bytes([9; 16]),
        },
        created_at: t(at),
        extracted_by: "extractive:v1".into(),
    }
}

/// A search ranks every memory of the tenant: the oldest of 2,100 (over
/// 1 MB of them, so more than one DynamoDB page) is found by its one rare
/// word, and first among those sharing a common one, before the newest of
/// those, which tie. The aws store once ranked only the newest 2,000.
pub async fn a_search_reads_every_memory_not_the_newest_few(store: &dyn BranchStore) {
    use futures::StreamExt as _;
    let a = fresh_tenant("mem-all");
    const N: i64 = 2_100;
    let filler =
        "the routine step checked the build, ran the suite and wrote the notes down; ".repeat(8);
    futures::stream::iter(0..N)
        .for_each_concurrent(32, |i| {
            let (a, filler) = (&a, &filler);
            async move {
                let b = record("s-mem-all", i);
                let title = if i == 0 {
                    "moor the zeppelin at the routine mast".to_owned()
                } else {
                    format!("routine task {i:05}")
                };
                let m = memory(a, &b, MemoryKind::Strategy, &title, filler, 0.9, i);
                store.put_memory(a, &m).await.unwrap();
            }
        })
        .await;
    let search = |text: &str, limit: usize| MemoryQuery {
        text: text.to_owned(),
        limit,
        min_confidence: 0.0,
        kind: None,
    };
    let found = store
        .search_memories(&a, &search("zeppelin", 10))
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].memory.created_at, t(0));
    let found = store
        .search_memories(&a, &search("routine zeppelin", 3))
        .await
        .unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(
        found[0].memory.created_at,
        t(0),
        "{:?}",
        found[0].memory.title
    );
    assert!(found[0].score > found[1].score);
    // The others tie, so the newest come next: the last read of all (which
    // a store that keeps only the first matches whole reads again).
    assert_eq!(found[1].memory.created_at, t(N - 1));
    assert_eq!(found[2].memory.created_at, t(N - 2));
    assert_eq!(found[1].memory.content, filler);
}

/// Memories round-trip, list newest first, are found by lexical search
/// (best match first, filtered by confidence and kind, nothing for words
/// no memory has), stay in their tenant, are replaced by id, and are
/// removed with their branch.
pub async fn memories_are_searched_per_tenant_and_go_with_their_branch(store: &dyn BranchStore) {
    let (a, other) = (fresh_tenant("mem"), fresh_tenant("mem-other"));
    assert!(store.recent_memories(&a, 10).await.unwrap().is_empty());
    let search = |text: &str| MemoryQuery {
        text: text.to_owned(),
        limit: 10,
        min_confidence: 0.0,
        kind: None,
    };
    assert!(
        store
            .search_memories(&a, &search("anything"))
            .await
            .unwrap()
            .is_empty()
    );
    let mut branches = Vec::new();
    for (i, (kind, title, content, conf)) in [
        (
            MemoryKind::AntiPattern,
            "migrate the database schema",
            "the ALTER TABLE locked writes for minutes: batch it",
            0.8,
        ),
        (
            MemoryKind::Strategy,
            "parse the timezone offsets",
            "chrono's parse_from_rfc3339 handles offsets; the timezone database is not needed",
            0.9,
        ),
        (
            MemoryKind::Strategy,
            "write the changelog",
            "group entries by crate",
            0.5,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = record("s-mem", 1000);
        b.status = BranchStatus::Completed;
        b.completed_at = Some(t(1000 + i as i64));
        store.create_branch(&a, &b, &LOOSE).await.unwrap();
        let m = memory(&a, &b, kind, title, content, conf, 1000 + i as i64);
        store.put_memory(&a, &m).await.unwrap();
        branches.push((b, m));
    }
    // Newest first, whole.
    let recent = store.recent_memories(&a, 10).await.unwrap();
    let titles: Vec<&str> = recent.iter().map(|m| m.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "write the changelog",
            "parse the timezone offsets",
            "migrate the database schema"
        ]
    );
    assert_eq!(recent[2], branches[0].1);
    assert_eq!(store.recent_memories(&a, 1).await.unwrap().len(), 1);
    // Search: the best match first; a word in the content counts.
    let found = store
        .search_memories(&a, &search("timezone parse"))
        .await
        .unwrap();
    assert_eq!(
        found[0].memory.title, "parse the timezone offsets",
        "{found:?}"
    );
    assert!(found[0].score > 0.0);
    let found = store
        .search_memories(&a, &search("ALTER writes"))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].memory.id, branches[0].1.id);
    assert!(
        store
            .search_memories(&a, &search("kubernetes"))
            .await
            .unwrap()
            .is_empty()
    );
    // Filters.
    let mut q = search("changelog timezone schema");
    q.min_confidence = 0.7;
    assert_eq!(store.search_memories(&a, &q).await.unwrap().len(), 2);
    q.kind = Some(MemoryKind::AntiPattern);
    let only = store.search_memories(&a, &q).await.unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].memory.kind, MemoryKind::AntiPattern);
    q.kind = None;
    q.limit = 1;
    assert_eq!(store.search_memories(&a, &q).await.unwrap().len(), 1);
    // Another tenant sees none of them.
    assert!(store.recent_memories(&other, 10).await.unwrap().is_empty());
    assert!(
        store
            .search_memories(&other, &search("timezone"))
            .await
            .unwrap()
            .is_empty()
    );
    // A put of the same id replaces it (and its words).
    let mut changed = branches[1].1.clone();
    changed.content = "use the jiff crate".into();
    store.put_memory(&a, &changed).await.unwrap();
    assert!(
        store
            .search_memories(&a, &search("rfc3339"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.search_memories(&a, &search("jiff")).await.unwrap()[0].memory,
        changed
    );
    assert_eq!(store.recent_memories(&a, 10).await.unwrap().len(), 3);
    // Deleting a branch deletes its memory.
    assert!(store.delete_branch(&a, &branches[0].0.id).await.unwrap());
    assert!(
        store
            .search_memories(&a, &search("ALTER"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.recent_memories(&a, 10).await.unwrap().len(), 2);
}
