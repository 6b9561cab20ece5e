//! Erasure and retention over the memory stores: what is removed, what is
//! kept because it is shared, forks (409 or cascade), idempotence, tenant
//! isolation, and retention with a driven clock and pins.

use std::sync::Arc;

use bytes::Bytes;

use crate::clock::ManualClock;
use crate::commit::Stop;
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::id::{CommitId, Principal, RefName, SessionId, TenantId};
use crate::service::{Erased, NewCommit, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobArea, BlobStore, MetaStore, Pin, RefMove, Stores};

struct Fixture {
    svc: Service,
    blobs: Arc<dyn BlobStore>,
    meta: Arc<dyn MetaStore>,
    clock: Arc<ManualClock>,
    tenant: TenantId,
}

fn fixture() -> Fixture {
    fixture_over(Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    })
}

/// A fixture over `stores`, its clock at `t(0)`.
fn fixture_over(stores: Stores) -> Fixture {
    let clock = Arc::new(ManualClock::new(t(0)));
    Fixture {
        blobs: stores.blobs.clone(),
        meta: stores.meta.clone(),
        svc: Service::new(stores, clock.clone()),
        clock,
        tenant: "acme".parse().unwrap(),
    }
}

fn sid(s: &str) -> SessionId {
    s.parse().unwrap()
}

impl Fixture {
    /// Checkpoints `text` in `session` on `parent` at time `at` (seconds),
    /// moving the ref `sessions/<session>`.
    async fn commit(
        &self,
        session: &str,
        parent: Option<CommitId>,
        at: i64,
        text: &str,
    ) -> CommitId {
        self.commit_by("agent", session, parent, at, text).await
    }

    /// [`Fixture::commit`] by principal `by`.
    async fn commit_by(
        &self,
        by: &str,
        session: &str,
        parent: Option<CommitId>,
        at: i64,
        text: &str,
    ) -> CommitId {
        let name: RefName = format!("sessions/{session}").parse().unwrap();
        let expected = self
            .meta
            .get_ref(&self.tenant, &name)
            .await
            .unwrap()
            .map(|r| r.target);
        let new = NewCommit {
            parent,
            session_id: Some(session.parse().expect("a session id")),
            created_at: Some(t(at)),
            ref_move: Some(RefMove { name, expected }),
            ..NewCommit::new(
                by.parse().unwrap(),
                "tpl",
                FormatId::raw(),
                Bytes::from(text.to_owned()),
            )
        };
        self.svc
            .checkpoint(&self.tenant, new)
            .await
            .unwrap()
            .commit
            .id
    }

    /// Whether the bytes `text` are stored anywhere: a blob, or inline
    /// with a commit (found by reference as a download finds them).
    async fn blob_exists(&self, text: &str) -> bool {
        let art = crate::id::ArtifactRef::of(text.as_bytes());
        self.blobs
            .stat(&self.tenant, BlobArea::READABLE, &art)
            .await
            .unwrap()
            .is_some()
            || self.svc.download_artifact(&self.tenant, &art).await.is_ok()
    }
}

#[tokio::test]
async fn erase_removes_commits_artifacts_cache_and_refs_but_keeps_shared_bytes() {
    let f = fixture();
    let a0 = f.commit("a", None, 0, "secret-0 ").await;
    let a1 = f.commit("a", Some(a0), 1, "secret-1 ").await;
    // Another session holds the same bytes as a0's delta on its own.
    let b0 = f.commit("b", None, 2, "secret-0 ").await;
    let m = f
        .svc
        .materialize(&f.tenant, &a1, Stop::Root, None)
        .await
        .unwrap();
    let joined = m.result.artifact_ref;
    let translated = f
        .svc
        .materialize(
            &f.tenant,
            &a1,
            Stop::Root,
            Some("openai-chat-v1".parse().unwrap()),
        )
        .await
        .unwrap()
        .result
        .artifact_ref;
    assert_ne!(joined, translated);
    f.svc.flush_cache_writes().await;

    let erased = f
        .svc
        .erase_session(&f.tenant, &sid("a"), false)
        .await
        .unwrap();
    assert_eq!(
        erased,
        Erased {
            commits: 2,
            // secret-1, the joined result, the translation.
            artifacts: 3,
            // secret-0, also b0's delta.
            artifacts_shared: 1,
            refs: 1,
            cache: 2,
            cascaded: 0,
            ..Erased::default()
        }
    );
    for id in [a0, a1] {
        assert_eq!(f.meta.get_commit(&f.tenant, &id).await.unwrap(), None);
    }
    assert!(!f.blob_exists("secret-1 ").await);
    assert!(f.blob_exists("secret-0 ").await, "b0 still uses it");
    for art in [joined, translated] {
        assert_eq!(
            f.blobs
                .stat(&f.tenant, BlobArea::READABLE, &art)
                .await
                .unwrap()
                .map(|i| i.size),
            None
        );
    }
    assert_eq!(
        f.meta
            .get_ref(&f.tenant, &"sessions/a".parse().unwrap())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        f.meta
            .resolve(&f.tenant, &"agent".parse().unwrap(), t(1))
            .await
            .unwrap(),
        None,
        "the timeline no longer finds the erased commits"
    );
    // b is untouched and still materializes.
    let mb = f
        .svc
        .materialize(&f.tenant, &b0, Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(mb.result.size, 9);
    // Erasing again finds nothing: the erase is done.
    let again = f
        .svc
        .erase_session(&f.tenant, &sid("a"), false)
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound);
}

#[tokio::test]
async fn a_fork_in_another_session_is_a_conflict_unless_cascade() {
    let f = fixture();
    let a0 = f.commit("a", None, 0, "base ").await;
    let a1 = f.commit("a", Some(a0), 1, "more ").await;
    let fork = f.commit("b", Some(a1), 2, "forked ").await;
    let fork2 = f.commit("b", Some(fork), 3, "forked again ").await;

    let err = f
        .svc
        .erase_session(&f.tenant, &sid("a"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert!(err.message.contains(&fork.to_string()), "{}", err.message);
    assert!(err.message.contains("session b"), "{}", err.message);
    for id in [a0, a1, fork, fork2] {
        assert!(
            f.meta.get_commit(&f.tenant, &id).await.unwrap().is_some(),
            "nothing removed"
        );
    }
    assert!(f.blob_exists("base ").await);

    let erased = f
        .svc
        .erase_session(&f.tenant, &sid("a"), true)
        .await
        .unwrap();
    assert_eq!(erased.commits, 4);
    assert_eq!(erased.cascaded, 2);
    assert_eq!(erased.refs, 2, "sessions/a and sessions/b");
    for id in [a0, a1, fork, fork2] {
        assert_eq!(f.meta.get_commit(&f.tenant, &id).await.unwrap(), None);
    }
    for text in ["base ", "more ", "forked ", "forked again "] {
        assert!(!f.blob_exists(text).await, "{text} deleted");
    }
}

#[tokio::test]
async fn another_tenants_session_is_not_found_and_untouched() {
    let f = fixture();
    let a0 = f.commit("a", None, 0, "mine ").await;
    let other: TenantId = "other".parse().unwrap();
    let err = f
        .svc
        .erase_session(&other, &sid("a"), true)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(f.meta.get_commit(&f.tenant, &a0).await.unwrap().is_some());
    assert!(f.blob_exists("mine ").await);
}

#[tokio::test]
async fn an_erase_interrupted_after_some_commits_finishes_when_run_again() {
    let f = fixture();
    let a0 = f.commit("a", None, 0, "zero ").await;
    let a1 = f.commit("a", Some(a0), 1, "one ").await;
    let a2 = f.commit("a", Some(a1), 2, "two ").await;
    f.svc
        .materialize(&f.tenant, &a2, Stop::Root, None)
        .await
        .unwrap();
    f.svc.flush_cache_writes().await;
    // What a crash after the newest commit was erased leaves: the ref and
    // the tip gone (with its artifact and cache), the rest still there.
    let tip = f.meta.get_commit(&f.tenant, &a2).await.unwrap().unwrap();
    f.meta
        .delete_ref(&f.tenant, &"sessions/a".parse().unwrap(), &a2)
        .await
        .unwrap();
    for (k, m) in f.meta.materialized_of(&f.tenant, &a2).await.unwrap() {
        f.blobs.delete(&f.tenant, &m.artifact_ref).await.unwrap();
        f.meta.delete_materialized(&f.tenant, &k).await.unwrap();
    }
    f.blobs.delete(&f.tenant, &tip.artifact_ref).await.unwrap();
    f.meta.delete_commit(&f.tenant, &tip).await.unwrap();

    let erased = f
        .svc
        .erase_session(&f.tenant, &sid("a"), false)
        .await
        .unwrap();
    assert_eq!((erased.commits, erased.artifacts, erased.refs), (2, 2, 0));
    for text in ["zero ", "one ", "two "] {
        assert!(!f.blob_exists(text).await);
    }
}

#[tokio::test]
async fn retention_erases_idle_sessions_except_pinned_and_forked_ones() {
    let f = fixture();
    let day = 86_400;
    let old = f.commit("old", None, 0, "old ").await;
    f.commit("old", Some(old), day, "old 2 ").await;
    f.commit("pinned", None, 0, "pinned ").await;
    f.commit("by-ref", None, 0, "by ref ").await;
    let forked = f.commit("forked", None, 0, "forked ").await;
    f.commit("child", Some(forked), 20 * day, "child ").await;
    f.commit("fresh", None, 9 * day, "fresh ").await;
    f.svc
        .set_pin(&f.tenant, &Pin::Session(sid("pinned")), true)
        .await
        .unwrap();
    f.svc
        .set_pin(
            &f.tenant,
            &Pin::Ref("sessions/by-ref".parse().unwrap()),
            true,
        )
        .await
        .unwrap();

    // Day 10 with keep_days 7: old (newest day 1), pinned, by-ref and
    // forked (day 0) are idle; fresh (day 9) and child (day 20) are not.
    f.clock.set(t(10 * day));
    assert_eq!(
        f.svc.apply_retention(&f.tenant, 0).await.unwrap(),
        Default::default(),
        "0 keeps everything"
    );
    let r = f.svc.apply_retention(&f.tenant, 7).await.unwrap();
    assert_eq!(r.erased, vec![sid("old")]);
    assert_eq!(r.pinned, vec![sid("by-ref"), sid("pinned")]);
    assert_eq!(r.forked, vec![sid("forked")]);
    assert_eq!(r.removed.commits, 2);
    assert!(!f.blob_exists("old ").await && !f.blob_exists("old 2 ").await);
    for kept in ["pinned ", "by ref ", "forked ", "child ", "fresh "] {
        assert!(f.blob_exists(kept).await, "{kept} kept");
    }
    // Unpinned, the session goes on the next pass.
    f.svc
        .set_pin(&f.tenant, &Pin::Session(sid("pinned")), false)
        .await
        .unwrap();
    let all = f.svc.apply_retention_all(|_| 7).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].1.erased, vec![sid("pinned")]);
    assert!(!f.blob_exists("pinned ").await);
}

fn snapshot_of(agent: &str, text: &str) -> crate::agent::WorkingContextSnapshot {
    crate::agent::WorkingContextSnapshot {
        schema_version: 1,
        agent_id: agent.to_owned(),
        epoch_id: 1,
        last_compaction_ts: None,
        messages: vec![crate::agent::WorkingMessage {
            role: "user".to_owned(),
            content: Some(text.to_owned()),
            reasoning_content: None,
            tool_payload: None,
            media_urls: None,
        }],
    }
}

#[tokio::test]
async fn a_session_erase_removes_the_saves_and_snapshots_built_from_it() {
    let f = fixture();
    let me: Principal = "agent".parse().unwrap();
    let other: Principal = "other".parse().unwrap();
    let day = 86_400;
    // Day 0: an unrelated session; day 10: the one to erase.
    f.commit("old", None, 0, "old turn ").await;
    f.clock.set(t(1));
    let early = f.svc.save_context(&f.tenant, &me, None).await.unwrap();
    f.commit("doomed", None, 10 * day, "doomed turn ").await;
    f.commit_by("other", "theirs", None, 10 * day, "their turn ")
        .await;
    f.clock.set(t(10 * day + 1));
    let late = f.svc.save_context(&f.tenant, &me, None).await.unwrap();
    let theirs = f.svc.save_context(&f.tenant, &other, None).await.unwrap();
    let mine_wc = f
        .svc
        .put_working_context(&f.tenant, &me, &snapshot_of("agent", "doomed turn"))
        .await
        .unwrap();
    let their_wc = f
        .svc
        .put_working_context(&f.tenant, &other, &snapshot_of("other", "their turn"))
        .await
        .unwrap();

    let erased = f
        .svc
        .erase_session(&f.tenant, &sid("doomed"), false)
        .await
        .unwrap();
    assert_eq!(
        (erased.commits, erased.saves, erased.working_contexts),
        (1, 1, 1),
        "{erased:?}"
    );
    assert!(!f.blob_exists("doomed turn ").await);
    for gone in [late.artifact_ref, mine_wc] {
        assert_eq!(
            f.blobs
                .stat(&f.tenant, BlobArea::READABLE, &gone)
                .await
                .unwrap()
                .map(|i| i.size),
            None
        );
    }
    let saves = f.meta.list_saves(&f.tenant, &me, 10).await.unwrap();
    assert_eq!(
        saves.iter().map(|s| s.save_id).collect::<Vec<_>>(),
        vec![early.save_id],
        "a save whose window does not hold the session stays"
    );
    let rec = f.meta.get_agent(&f.tenant, &me).await.unwrap();
    assert_eq!(rec.and_then(|r| r.working_context), None);
    // The other agent keeps everything.
    for kept in [theirs.artifact_ref, their_wc] {
        assert!(
            f.blobs
                .stat(&f.tenant, BlobArea::READABLE, &kept)
                .await
                .unwrap()
                .is_some()
        );
    }
    assert!(
        f.meta
            .get_agent(&f.tenant, &other)
            .await
            .unwrap()
            .and_then(|r| r.working_context)
            .is_some()
    );
    // A restore after the erase rebuilds from what is left.
    f.svc
        .restore_working_context(&f.tenant, &me, &Default::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_principal_erase_removes_its_commits_files_and_record_and_refuses_forks() {
    let f = fixture();
    let gone: Principal = "leaver".parse().unwrap();
    let root = f.commit_by("leaver", "s1", None, 0, "leaver secret ").await;
    f.commit_by("leaver", "s1", Some(root), 1, "leaver again ")
        .await;
    f.commit_by("leaver", "s2", None, 2, "leaver elsewhere ")
        .await;
    // Another principal continues the leaver's first chain.
    let fork = f
        .commit_by("stayer", "s3", Some(root), 3, "stayer turn ")
        .await;
    let unrelated = f.commit_by("stayer", "s4", None, 4, "stayer own ").await;
    f.clock.set(t(5));
    let save = f.svc.save_context(&f.tenant, &gone, None).await.unwrap();
    f.svc
        .patch_agent(
            &f.tenant,
            &gone,
            &crate::agent::AgentPatch {
                window_seconds: Some(600),
                persist_working_context: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    f.svc
        .put_working_context(&f.tenant, &gone, &snapshot_of("leaver", "leaver secret"))
        .await
        .unwrap();

    let e = f
        .svc
        .erase_principal(&f.tenant, &gone, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains(&fork.to_string()), "{}", e.message);
    assert!(e.message.contains("principal stayer"), "{}", e.message);
    assert!(f.blob_exists("leaver secret ").await, "nothing removed");
    assert!(
        f.meta.get_agent(&f.tenant, &gone).await.unwrap().is_some(),
        "nothing removed"
    );

    let erased = f.svc.erase_principal(&f.tenant, &gone, true).await.unwrap();
    assert_eq!(
        (
            erased.commits,
            erased.cascaded,
            erased.saves,
            erased.working_contexts,
            erased.agents
        ),
        (4, 1, 1, 1, 1),
        "{erased:?}"
    );
    for text in [
        "leaver secret ",
        "leaver again ",
        "leaver elsewhere ",
        "stayer turn ",
    ] {
        assert!(!f.blob_exists(text).await, "{text}");
    }
    assert_eq!(
        f.blobs
            .stat(&f.tenant, BlobArea::READABLE, &save.artifact_ref)
            .await
            .unwrap()
            .map(|i| i.size),
        None
    );
    assert!(f.blob_exists("stayer own ").await);
    assert!(
        f.meta
            .get_commit(&f.tenant, &unrelated)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(f.meta.get_agent(&f.tenant, &gone).await.unwrap(), None);
    assert!(
        f.meta
            .list_saves(&f.tenant, &gone, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Idempotent: nothing left is a 404; so is another tenant's principal.
    let again = f
        .svc
        .erase_principal(&f.tenant, &gone, true)
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound);
    let stayer: Principal = "stayer".parse().unwrap();
    let elsewhere = f
        .svc
        .erase_principal(&"other-tenant".parse().unwrap(), &stayer, true)
        .await
        .unwrap_err();
    assert_eq!(elsewhere.kind, ErrorKind::NotFound);
    assert!(f.blob_exists("stayer own ").await);
}

#[tokio::test]
async fn a_principal_with_only_agent_files_is_erased_too() {
    let f = fixture();
    let p: Principal = "quiet".parse().unwrap();
    f.svc
        .put_working_context(&f.tenant, &p, &snapshot_of("quiet", "hello"))
        .await
        .unwrap();
    let e = f.svc.erase_principal(&f.tenant, &p, false).await.unwrap();
    assert_eq!(
        (e.commits, e.working_contexts, e.agents),
        (0, 1, 1),
        "{e:?}"
    );
    assert_eq!(f.meta.get_agent(&f.tenant, &p).await.unwrap(), None);
}

/// An erase working on many commits at once (on SQLite, where store calls
/// really interleave) removes exactly what one working on one commit at a
/// time removes, reports the same counts, and leaves nothing of the
/// session or its cascaded forks: shared bytes (inside the session,
/// across its commits and cache entries, and with a surviving session)
/// decided once each.
#[cfg(feature = "local")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_erase_many_commits_at_a_time_removes_what_one_at_a_time_removes() {
    async fn run(concurrency: usize) -> (Erased, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let mut f = fixture_over(Stores {
            blobs: Arc::new(crate::store::local::LocalBlobStore::open(dir.path()).unwrap()),
            meta: Arc::new(crate::store::local::SqliteMetaStore::open(dir.path()).unwrap()),
        });
        f.svc = f.svc.with_erase_concurrency(concurrency);
        // 60 turns, every tenth one's bytes repeated (shared inside the
        // erase), a big turn in the CAS, a surviving session holding turn
        // 5's bytes, and a fork in another session off turn 30 (cascaded).
        let text = |i: i64| match i {
            _ if i % 10 == 9 => "the same tool output\n".to_owned(),
            40 => format!("a big turn {}\n", "x".repeat(64 * 1024)),
            _ => format!("turn {i}\n"),
        };
        let mut ids = Vec::new();
        let mut tip = None;
        for i in 0..60 {
            let id = f.commit("long", tip, i, &text(i)).await;
            ids.push(id);
            tip = Some(id);
        }
        f.commit("keeps", None, 100, &text(5)).await;
        let mut fork = Some(ids[30]);
        for i in 0..5 {
            fork = Some(
                f.commit("fork", fork, 200 + i, &format!("fork {i}\n"))
                    .await,
            );
        }
        for at in [ids[59], ids[20], fork.unwrap()] {
            f.svc
                .materialize(&f.tenant, &at, Stop::Root, None)
                .await
                .unwrap();
        }
        f.svc.flush_cache_writes().await;
        let erased = f
            .svc
            .erase_session(&f.tenant, &sid("long"), true)
            .await
            .unwrap();
        // What is left: every commit of the tenant, by session.
        let mut left = Vec::new();
        for s in ["long", "fork", "keeps"] {
            for c in f.meta.session_commits(&f.tenant, &sid(s)).await.unwrap() {
                left.push(format!("{s} {}", c.artifact_size));
            }
        }
        for i in 0..60 {
            let art = crate::id::ArtifactRef::of(text(i).as_bytes());
            if f.blobs
                .stat(&f.tenant, BlobArea::READABLE, &art)
                .await
                .unwrap()
                .is_some()
            {
                left.push(format!("bytes of turn {i}"));
            }
        }
        (erased, left)
    }
    let (one, left_one) = run(1).await;
    let (many, left_many) = run(16).await;
    assert_eq!(many, one);
    assert_eq!(
        (many.commits, many.cascaded, many.cache),
        (65, 5, 3),
        "{many:?}"
    );
    assert_eq!(left_many, left_one);
    assert_eq!(
        left_many,
        ["keeps 7"],
        "only the surviving session's commit"
    );
}

/// An erase's answer says until when the deployment's backups still hold
/// what it removed (`CTX_BACKUP_RETENTION_DAYS`), and says nothing where
/// there are no backups.
#[tokio::test]
async fn an_erase_states_until_when_backups_hold_what_it_removed() {
    let f = fixture();
    f.commit("none", None, 1, "kept nowhere\n").await;
    let plain = f
        .svc
        .erase_session(&f.tenant, &sid("none"), false)
        .await
        .unwrap();
    assert_eq!(plain.backups_until, None);
    let json = serde_json::to_value(&plain).unwrap();
    assert!(json.get("backups_until").is_none(), "{json}");

    let f = Fixture {
        svc: f
            .svc
            .clone()
            .with_lifecycle(crate::service::LifecycleSettings {
                backup_retention: Some(std::time::Duration::from_secs(35 * 86_400)),
                ..crate::service::LifecycleSettings::default()
            }),
        ..f
    };
    f.commit("pitr", None, 2, "in a backup for 35 days\n").await;
    f.clock.set(t(100));
    let erased = f
        .svc
        .erase_session(&f.tenant, &sid("pitr"), false)
        .await
        .unwrap();
    assert_eq!(erased.commits, 1);
    assert_eq!(
        erased.backups_until,
        Some(t(100) + chrono::Duration::days(35))
    );
    let by_principal = {
        f.commit_by("bob", "bobs", None, 101, "bob's\n").await;
        f.svc
            .erase_principal(&f.tenant, &"bob".parse().unwrap(), false)
            .await
            .unwrap()
    };
    assert_eq!(
        by_principal.backups_until,
        Some(t(100) + chrono::Duration::days(35))
    );
}
