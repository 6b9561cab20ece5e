//! The lifecycle behaviours of a [`MetaStore`]: a session's commits, a
//! commit's children, an artifact's users, cache entries by commit, the
//! deletes erasure is built from, idle sessions, pins and the tenant list.

use super::{commit, fresh_tenant, put, t};
use crate::commit::{Commit, Stop};
use crate::format::FormatId;
use crate::id::{ArtifactRef, SessionId, TenantId};
use crate::store::{ArtifactUser, MaterializeKey, Materialized, MetaStore, Pin};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    sessions_and_children_are_found(meta).await;
    deleting_a_commit_removes_every_index_of_it(meta).await;
    artifact_users_and_cache_entries_by_commit(meta).await;
    idle_sessions_by_newest_commit(meta).await;
    pins_round_trip_per_tenant(meta).await;
}

fn session(s: &str) -> SessionId {
    s.parse().expect("valid session")
}

/// A commit of `session`.
fn in_session(tenant: &TenantId, parent: Option<&Commit>, at: i64, s: &str, body: &[u8]) -> Commit {
    let mut c = commit(tenant, parent, t(at), "p", body);
    c.session_id = Some(s.parse().expect("a session id"));
    c
}

fn ids(mut cs: Vec<Commit>) -> Vec<crate::id::CommitId> {
    cs.sort_by_key(|c| c.id);
    cs.into_iter().map(|c| c.id).collect()
}

fn sorted(mut v: Vec<crate::id::CommitId>) -> Vec<crate::id::CommitId> {
    v.sort();
    v
}

/// `session_commits` finds exactly a session's commits (of this tenant);
/// `child_commits` finds the next commit of a run and every fork.
pub async fn sessions_and_children_are_found(meta: &dyn MetaStore) {
    let a = fresh_tenant("erase-find");
    let b = fresh_tenant("erase-find-b");
    let r = put(meta, &a, &in_session(&a, None, 0, "s1", b"r")).await;
    let c1 = put(meta, &a, &in_session(&a, Some(&r), 1, "s1", b"c1")).await;
    let fork = put(meta, &a, &in_session(&a, Some(&r), 2, "s2", b"f")).await;
    let other = put(meta, &b, &in_session(&b, None, 0, "s1", b"r")).await;
    assert_eq!(
        ids(meta.session_commits(&a, &session("s1")).await.expect("s1")),
        sorted(vec![r.id, c1.id])
    );
    assert_eq!(
        ids(meta.session_commits(&a, &session("s2")).await.expect("s2")),
        vec![fork.id]
    );
    assert!(
        meta.session_commits(&a, &session("none"))
            .await
            .expect("none")
            .is_empty()
    );
    assert_eq!(
        ids(meta.session_commits(&b, &session("s1")).await.expect("b")),
        vec![other.id],
        "tenants never see each other's sessions"
    );
    assert_eq!(
        ids(meta.child_commits(&a, &r.id).await.expect("children")),
        sorted(vec![c1.id, fork.id])
    );
    assert!(
        meta.child_commits(&a, &c1.id)
            .await
            .expect("leaf")
            .is_empty()
    );
    assert!(
        meta.child_commits(&b, &r.id)
            .await
            .expect("b children")
            .is_empty()
    );
    let tenants = meta.commit_tenants().await.expect("tenants");
    assert!(tenants.contains(&a) && tenants.contains(&b), "{tenants:?}");
    // A fork of a fork, and the children of a parent that is gone.
    let fork2 = put(meta, &a, &in_session(&a, Some(&r), 3, "s2", b"f2")).await;
    let after_fork = put(meta, &a, &in_session(&a, Some(&fork), 4, "s2", b"g")).await;
    assert_eq!(
        ids(meta.child_commits(&a, &fork.id).await.expect("fork's")),
        vec![after_fork.id],
        "the next commit of a fork's own run"
    );
    assert!(meta.delete_commit(&a, &r).await.expect("delete the root"));
    assert_eq!(
        ids(meta.child_commits(&a, &r.id).await.expect("orphans")),
        sorted(vec![c1.id, fork.id, fork2.id]),
        "children are found after their parent is deleted"
    );
}

/// After `delete_commit` the commit, its timeline entry, its place in its
/// run and its session entry are gone; a second delete says false; the
/// rest of the chain is untouched and a new child can take the freed slot.
pub async fn deleting_a_commit_removes_every_index_of_it(meta: &dyn MetaStore) {
    let a = fresh_tenant("erase-delete");
    let r = put(meta, &a, &in_session(&a, None, 0, "s", b"r")).await;
    let c1 = put(meta, &a, &in_session(&a, Some(&r), 1, "s", b"c1")).await;
    assert!(meta.delete_commit(&a, &c1).await.expect("delete"));
    assert!(!meta.delete_commit(&a, &c1).await.expect("delete again"));
    assert_eq!(meta.get_commit(&a, &c1.id).await.expect("get"), None);
    assert_eq!(
        meta.resolve(&a, &c1.principal, t(1))
            .await
            .expect("resolve"),
        Some(r.id),
        "the timeline entry is gone"
    );
    assert_eq!(
        ids(meta.lineage_run(&a, &r.lineage, 10, 10).await.expect("run")),
        vec![r.id],
        "its run slot is free"
    );
    assert_eq!(
        ids(meta
            .session_commits(&a, &session("s"))
            .await
            .expect("session")),
        vec![r.id]
    );
    assert!(
        meta.child_commits(&a, &r.id)
            .await
            .expect("children")
            .is_empty()
    );
    assert!(
        meta.artifact_users(&a, &c1.artifact_ref, 10)
            .await
            .expect("users")
            .is_empty()
    );
    // A new child continues the run in the freed slot.
    let again = put(meta, &a, &in_session(&a, Some(&r), 5, "s", b"c2")).await;
    assert_eq!(again.lineage, r.lineage);
    assert!(meta.delete_commit(&a, &again).await.expect("delete c2"));
    assert!(meta.delete_commit(&a, &r).await.expect("delete root"));
    assert!(
        meta.session_commits(&a, &session("s"))
            .await
            .expect("empty")
            .is_empty()
    );
    assert_eq!(
        meta.resolve(&a, &r.principal, t(10))
            .await
            .expect("resolve"),
        None
    );
}

/// `artifact_users` lists the commits and cache entries holding an
/// artifact, up to the limit; `materialized_of` lists a commit's cache
/// entries; `delete_materialized` removes one.
pub async fn artifact_users_and_cache_entries_by_commit(meta: &dyn MetaStore) {
    let a = fresh_tenant("erase-users");
    let b = fresh_tenant("erase-users-b");
    let r = put(meta, &a, &in_session(&a, None, 0, "s", b"same")).await;
    let twin = put(meta, &a, &in_session(&a, None, 1, "t", b"same")).await;
    let art = r.artifact_ref;
    let out = ArtifactRef::of(b"joined");
    let m = |artifact_ref| Materialized {
        artifact_ref,
        size: 4,
        message_count: 1,
        token_count: 1,
        tier: crate::format::translate::Tier::Native,
        fidelity: None,
    };
    let k_root = MaterializeKey {
        commit: r.id,
        stop: Stop::Root,
        format: FormatId::raw(),
    };
    let k_comp = MaterializeKey {
        stop: Stop::Compaction,
        ..k_root.clone()
    };
    meta.put_materialized(&a, &k_root, &m(art))
        .await
        .expect("put");
    meta.put_materialized(&a, &k_comp, &m(out))
        .await
        .expect("put");
    let mut users = meta.artifact_users(&a, &art, 10).await.expect("users");
    users.sort_by_key(|u| format!("{u:?}"));
    let mut want = vec![
        ArtifactUser::Commit(r.id),
        ArtifactUser::Commit(twin.id),
        ArtifactUser::Cached(k_root.clone()),
    ];
    want.sort_by_key(|u| format!("{u:?}"));
    assert_eq!(users, want);
    assert_eq!(
        meta.artifact_users(&a, &art, 2)
            .await
            .expect("limited")
            .len(),
        2
    );
    assert!(
        meta.artifact_users(&b, &art, 10)
            .await
            .expect("b")
            .is_empty()
    );
    let mut entries = meta.materialized_of(&a, &r.id).await.expect("entries");
    entries.sort_by_key(|(k, _)| k.stop.to_string());
    assert_eq!(
        entries,
        vec![(k_comp.clone(), m(out)), (k_root.clone(), m(art))]
    );
    assert!(
        meta.materialized_of(&b, &r.id)
            .await
            .expect("b entries")
            .is_empty()
    );
    assert!(meta.delete_materialized(&a, &k_comp).await.expect("del"));
    assert!(
        !meta
            .delete_materialized(&a, &k_comp)
            .await
            .expect("del again")
    );
    assert_eq!(meta.get_materialized(&a, &k_comp).await.expect("get"), None);
    assert!(
        meta.artifact_users(&a, &out, 10)
            .await
            .expect("out users")
            .is_empty()
    );
    assert_eq!(
        meta.materialized_of(&a, &r.id).await.expect("left").len(),
        1
    );
}

/// `idle_sessions` lists the sessions whose newest commit is before the
/// cut-off, by id, in pages after a cursor.
pub async fn idle_sessions_by_newest_commit(meta: &dyn MetaStore) {
    let a = fresh_tenant("erase-idle");
    let old = put(meta, &a, &in_session(&a, None, 0, "old", b"o")).await;
    put(meta, &a, &in_session(&a, Some(&old), 10, "old", b"o2")).await;
    let mixed = put(meta, &a, &in_session(&a, None, 5, "mixed", b"m")).await;
    put(meta, &a, &in_session(&a, Some(&mixed), 100, "mixed", b"m2")).await;
    put(meta, &a, &in_session(&a, None, 20, "also-old", b"a")).await;
    put(meta, &a, &commit(&a, None, t(0), "p", b"no session")).await;
    assert_eq!(
        meta.idle_sessions(&a, t(50), None, 10).await.expect("idle"),
        vec![session("also-old"), session("old")]
    );
    assert_eq!(
        meta.idle_sessions(&a, t(50), None, 1)
            .await
            .expect("limited"),
        vec![session("also-old")]
    );
    assert_eq!(
        meta.idle_sessions(&a, t(10), None, 10)
            .await
            .expect("cut-off"),
        Vec::<SessionId>::new(),
        "a session whose newest commit is at the cut-off is not idle"
    );
    assert_eq!(
        meta.idle_sessions(&a, t(101), None, 10)
            .await
            .expect("all")
            .len(),
        3
    );
    // A cursor: the page after a session id.
    assert_eq!(
        meta.idle_sessions(&a, t(50), Some(&session("also-old")), 10)
            .await
            .expect("next page"),
        vec![session("old")]
    );
    assert_eq!(
        meta.idle_sessions(&a, t(101), Some(&session("mixed")), 1)
            .await
            .expect("after mixed"),
        vec![session("old")]
    );
    assert!(
        meta.idle_sessions(&a, t(101), Some(&session("old")), 10)
            .await
            .expect("past the end")
            .is_empty()
    );
}

/// Pins: set, listed sorted, set again changes nothing, unset; per tenant.
pub async fn pins_round_trip_per_tenant(meta: &dyn MetaStore) {
    let a = fresh_tenant("pins");
    let b = fresh_tenant("pins-b");
    let s = Pin::Session(session("keep/me"));
    let r = Pin::Ref("sessions/x/head".parse().expect("ref"));
    assert!(meta.pins(&a).await.expect("none").is_empty());
    assert!(meta.set_pin(&a, &s, true).await.expect("pin"));
    assert!(!meta.set_pin(&a, &s, true).await.expect("pin again"));
    assert!(meta.set_pin(&a, &r, true).await.expect("pin ref"));
    assert_eq!(
        meta.pins(&a).await.expect("pins"),
        vec![s.clone(), r.clone()]
    );
    assert!(meta.pins(&b).await.expect("b").is_empty());
    assert!(meta.set_pin(&a, &s, false).await.expect("unpin"));
    assert!(!meta.set_pin(&a, &s, false).await.expect("unpin again"));
    assert_eq!(meta.pins(&a).await.expect("left"), vec![r]);
}
