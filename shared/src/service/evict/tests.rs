//! Eviction over the memory stores: 410 across evicted deltas naming the
//! commit, the default materialize and the log still whole, forks keeping
//! what they need, shared bytes kept, the cache, bad input writing
//! nothing, and an interrupted eviction answering 410 and finishing when
//! run again.

use crate::store::BlobArea;
use crate::store::Commits;
use crate::store::Lifecycle;
use crate::store::Refs;
use std::sync::Arc;

use bytes::Bytes;

use crate::clock::ManualClock;
use crate::commit::{CommitType, Stop};
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, RefName, TenantId};
use crate::service::{NewCommit, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobStore, MaterializationCache, RefMove, Stores};

struct Fixture {
    svc: Service,
    blobs: Arc<MemoryBlobStore>,
    meta: Arc<MemoryMetaStore>,
    tenant: TenantId,
}

/// Deltas stored as blobs (what most of these tests look at).
fn fixture() -> Fixture {
    fixture_inline(0)
}

/// Deltas of at most `inline` bytes stored with their commits.
fn fixture_inline(inline: usize) -> Fixture {
    let blobs = Arc::new(MemoryBlobStore::new());
    let meta = Arc::new(MemoryMetaStore::new());
    let clock = Arc::new(ManualClock::new(t(0)));
    let svc = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        clock,
    )
    .with_limits(crate::service::Limits {
        inline_delta_bytes: inline,
        ..Default::default()
    });
    Fixture {
        svc,
        blobs,
        meta,
        tenant: "acme".parse().unwrap(),
    }
}

fn rn(s: &str) -> RefName {
    format!("sessions/{s}").parse().unwrap()
}

impl Fixture {
    /// Checkpoints `text` (of `kind`) in `session` on `parent` at `at`
    /// seconds, with `summary`, moving the ref `sessions/<session>`.
    async fn put(
        &self,
        session: &str,
        parent: Option<CommitId>,
        at: i64,
        kind: CommitType,
        text: &str,
    ) -> CommitId {
        let name = rn(session);
        let expected = self
            .meta
            .get_ref(&self.tenant, &name)
            .await
            .unwrap()
            .map(|r| r.target);
        let new = NewCommit {
            parent,
            commit_type: kind,
            session_id: Some(session.parse().expect("a session id")),
            created_at: Some(t(at)),
            summary: Some(format!("summary of {text}")),
            ref_move: Some(RefMove { name, expected }),
            ..NewCommit::new(
                "agent".parse().unwrap(),
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

    async fn delta(&self, s: &str, parent: Option<CommitId>, at: i64, text: &str) -> CommitId {
        self.put(s, parent, at, CommitType::Delta, text).await
    }

    async fn compaction(&self, s: &str, parent: CommitId, at: i64, text: &str) -> CommitId {
        self.put(s, Some(parent), at, CommitType::Compaction, text)
            .await
    }

    /// Session `s`: `d0 `, `d1 `, a compaction `SUMMARY `, then `d2 `.
    async fn compacted_session(&self, s: &str) -> [CommitId; 4] {
        let d0 = self.delta(s, None, 0, "d0 ").await;
        let d1 = self.delta(s, Some(d0), 1, "d1 ").await;
        let c = self.compaction(s, d1, 2, "SUMMARY ").await;
        let d2 = self.delta(s, Some(c), 3, "d2 ").await;
        [d0, d1, c, d2]
    }

    async fn text(&self, id: &CommitId, stop: Stop) -> crate::error::Result<String> {
        let m = self.svc.materialize(&self.tenant, id, stop, None).await?;
        // Stored, so that an eviction finds (and counts) its entry.
        self.svc.flush_cache_writes().await;
        let bytes = self
            .svc
            .download_artifact(&self.tenant, &m.result.artifact_ref)
            .await?;
        Ok(String::from_utf8(bytes.to_vec()).unwrap())
    }

    async fn blob_exists(&self, text: &str) -> bool {
        self.blobs
            .stat(
                &self.tenant,
                BlobArea::READABLE,
                &ArtifactRef::of(text.as_bytes()),
            )
            .await
            .unwrap()
            .is_some()
    }
}

#[tokio::test]
async fn evicted_deltas_answer_gone_while_the_default_and_the_log_still_work() {
    let f = fixture();
    let [d0, d1, c, d2] = f.compacted_session("s").await;
    // Cached before the eviction: the original conversation at the tip and
    // the default at d1 (which reads d0 and d1).
    assert_eq!(f.text(&d2, Stop::Root).await.unwrap(), "d0 d1 d2 ");
    assert_eq!(f.text(&d1, Stop::Compaction).await.unwrap(), "d0 d1 ");
    assert_eq!(f.text(&d2, Stop::Compaction).await.unwrap(), "SUMMARY d2 ");

    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!(e.before, c);
    assert_eq!((e.commits, e.marked), (2, 2));
    assert!(e.kept.is_empty());
    assert_eq!(
        e.cache, 2,
        "the root entry of d2 and the entry of d1: {e:?}"
    );
    assert!(e.artifacts >= 2, "{e:?}");
    assert!(!f.blob_exists("d0 ").await && !f.blob_exists("d1 ").await);
    assert!(f.blob_exists("SUMMARY ").await && f.blob_exists("d2 ").await);

    // The default stops at the compaction: still fine (and still cached).
    assert_eq!(f.text(&d2, Stop::Compaction).await.unwrap(), "SUMMARY d2 ");
    // Across the evicted deltas: 410 naming the first one and the stop.
    for (at, stop) in [
        (d2, Stop::Root),
        (d1, Stop::Compaction),
        (d2, Stop::After(d0)),
    ] {
        let err = f.text(&at, stop).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Gone, "{at} {stop}: {err}");
        assert!(
            err.message.contains(&c.to_string()),
            "names the compaction: {}",
            err.message
        );
        let first = if stop == Stop::After(d0) { d1 } else { d0 };
        assert!(
            err.message.contains(&first.to_string()),
            "names {first}: {}",
            err.message
        );
    }
    // The log reads the whole chain with every summary.
    let log = f.svc.history(&f.tenant, &d2, 10).await.unwrap();
    let ids: Vec<CommitId> = log.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![d2, c, d1, d0]);
    assert_eq!(log[3].summary.as_deref(), Some("summary of d0 "));
    assert_eq!(log[2].summary.as_deref(), Some("summary of d1 "));

    // Idempotent: a re-run finds nothing left to do.
    let again = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!(
        (again.commits, again.marked, again.artifacts, again.cache),
        (2, 0, 0, 0),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_fork_below_the_compaction_keeps_the_deltas_it_needs() {
    let f = fixture();
    let [d0, d1, c, d2] = f.compacted_session("s").await;
    // Another session forked off d0.
    let fork = f.delta("other", Some(d0), 4, "fork ").await;

    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!(e.commits, 1, "only d1: {e:?}");
    assert_eq!(e.kept, vec![d0]);
    assert!(f.blob_exists("d0 ").await && !f.blob_exists("d1 ").await);
    assert_eq!(f.text(&fork, Stop::Compaction).await.unwrap(), "d0 fork ");
    let err = f.text(&d2, Stop::Root).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Gone);
    assert!(err.message.contains(&d1.to_string()), "{}", err.message);
}

#[tokio::test]
async fn bytes_another_commit_uses_are_kept() {
    let f = fixture();
    let d0 = f.delta("s", None, 0, "shared ").await;
    let c = f
        .put("s", Some(d0), 1, CommitType::Snapshot, "shared whole ")
        .await;
    let _b = f.delta("b", None, 2, "shared ").await;
    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!((e.commits, e.artifacts, e.artifacts_shared), (1, 0, 1));
    assert!(f.blob_exists("shared ").await);
    // The bytes are there: d0 still reads (it is only marked).
    assert_eq!(f.text(&d0, Stop::Root).await.unwrap(), "shared ");
}

#[tokio::test]
async fn bad_input_names_the_field_and_writes_nothing() {
    let f = fixture();
    let d0 = f.delta("s", None, 0, "d0 ").await;
    let c = f.compaction("s", d0, 1, "SUMMARY ").await;
    let d1 = f.delta("s", Some(c), 2, "d1 ").await;
    let o0 = f.delta("o", None, 3, "o0 ").await;
    let oc = f.compaction("o", o0, 4, "OTHER ").await;
    let cases: Vec<(RefName, CommitId, ErrorKind, Option<&str>)> = vec![
        (rn("none"), c, ErrorKind::NotFound, None),
        (rn("s"), d1, ErrorKind::Invalid, Some("before")),
        (rn("s"), oc, ErrorKind::Invalid, Some("before")),
    ];
    for (name, before, kind, field) in cases {
        let err = f
            .svc
            .evict(&f.tenant, &name, &before, true)
            .await
            .unwrap_err();
        assert_eq!((err.kind, err.field.as_deref()), (kind, field), "{err}");
    }
    // A snapshot of another tenant is unknown here: not found, as a commit
    // that does not exist.
    let other: TenantId = "other".parse().unwrap();
    let theirs = f
        .svc
        .checkpoint(
            &other,
            NewCommit {
                commit_type: CommitType::Snapshot,
                ..NewCommit::new(
                    "agent".parse().unwrap(),
                    "tpl",
                    FormatId::raw(),
                    Bytes::from_static(b"THEIRS "),
                )
            },
        )
        .await
        .unwrap()
        .commit
        .id;
    let err = f
        .svc
        .evict(&f.tenant, &rn("s"), &theirs, true)
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.field.as_deref()),
        (ErrorKind::NotFound, Some("before")),
        "{err}"
    );
    // Another tenant's ref is not found.
    let err = f.svc.evict(&other, &rn("s"), &c, true).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    for id in [d0, o0] {
        assert_eq!(f.meta.evicted_by(&f.tenant, &id).await.unwrap(), None);
    }
    assert!(f.blob_exists("d0 ").await && f.blob_exists("o0 ").await);
    assert_eq!(f.text(&d1, Stop::Root).await.unwrap(), "d0 d1 ");
}

#[tokio::test]
async fn an_interrupted_eviction_answers_gone_and_finishes_when_run_again() {
    let f = fixture();
    let d0 = f.delta("s", None, 0, "d0 ").await;
    let d1 = f.delta("s", Some(d0), 1, "d1 ").await;
    let c = f.compaction("s", d1, 2, "SUMMARY ").await;
    // Interrupted after the markers and one delete.
    f.meta.mark_evicted(&f.tenant, &c, &[d0, d1]).await.unwrap();
    f.blobs
        .delete(&f.tenant, &ArtifactRef::of(b"d1 "))
        .await
        .unwrap();
    let err = f.text(&d1, Stop::Root).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Gone, "never a 500: {err}");
    assert!(err.message.contains(&d1.to_string()), "{}", err.message);
    // A missing artifact with no marker is still a bug, said as such.
    f.blobs
        .delete(&f.tenant, &ArtifactRef::of(b"SUMMARY "))
        .await
        .unwrap();
    let err = f.text(&c, Stop::Compaction).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal, "{err}");

    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!((e.commits, e.marked, e.artifacts), (2, 0, 1), "{e:?}");
    assert!(!f.blob_exists("d0 ").await);
}

#[tokio::test]
async fn deltas_inline_with_their_commits_are_evicted_too() {
    let f = fixture_inline(16 * 1024);
    let d0 = f.delta("s", None, 0, "inline d0 ").await;
    let c = f.compaction("s", d0, 1, "SUMMARY ").await;
    let d1 = f.delta("s", Some(c), 2, "d1 ").await;
    let stored = f.meta.get_commit(&f.tenant, &d0).await.unwrap().unwrap();
    assert!(stored.inline.is_some(), "a small delta is inline");
    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!((e.commits, e.artifacts), (1, 1), "{e:?}");
    let stored = f.meta.get_commit(&f.tenant, &d0).await.unwrap().unwrap();
    assert_eq!(stored.inline, None, "the bytes left the commit's row");
    assert_eq!(stored.summary.as_deref(), Some("summary of inline d0 "));
    let err = f.text(&d1, Stop::Root).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Gone, "{err}");
    assert!(err.message.contains(&d0.to_string()), "{}", err.message);
    assert_eq!(f.text(&d1, Stop::Compaction).await.unwrap(), "SUMMARY d1 ");
}

/// A result held in memory (the hot cache) that read an evicted delta is
/// not served after the eviction, and one still waiting to be stored is
/// never stored: the eviction drops the tenant's held results and stops
/// its pending writes.
#[tokio::test]
async fn an_eviction_drops_results_held_in_memory_and_stops_their_pending_writes() {
    let f = fixture();
    let [_, d1, c, d2] = f.compacted_session("s").await;
    // d1's is stored; d2's is held and waits to be stored.
    let at_d1 = f.svc.materialize(&f.tenant, &d1, Stop::Root, None).await;
    let at_d1 = at_d1.unwrap().result;
    f.svc.flush_cache_writes().await;
    let gate = f.svc.hot.gate.write().await;
    let at_d2 = f.svc.materialize(&f.tenant, &d2, Stop::Root, None).await;
    let at_d2 = at_d2.unwrap().result;
    f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    drop(gate);
    f.svc.flush_cache_writes().await;
    for (id, m) in [(d1, at_d1), (d2, at_d2)] {
        let e = f
            .svc
            .materialize(&f.tenant, &id, Stop::Root, None)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Gone, "{id}");
        let key = crate::store::MaterializeKey {
            commit: id,
            stop: Stop::Root,
            format: FormatId::raw(),
        };
        assert_eq!(
            f.meta.get_materialized(&f.tenant, &key).await.unwrap(),
            None
        );
        assert_eq!(
            f.blobs
                .stat(&f.tenant, BlobArea::READABLE, &m.artifact_ref)
                .await
                .unwrap()
                .map(|i| i.size),
            None
        );
    }
}

/// A commit's own delta read (`POST /v1/read` with `delta`), blob or
/// inline, answered inline or to be downloaded (over the content limit),
/// of an evicted commit answers 410 naming the compaction, not a 404 for
/// its artifact or an artifact that is gone.
#[tokio::test]
async fn a_delta_read_of_an_evicted_commit_answers_gone() {
    use crate::service::{ReadOf, ReadTarget};
    for f in [fixture(), fixture_inline(16 * 1024)] {
        let [d0, _, c, _] = f.compacted_session("s").await;
        f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
        for content_limit in [1 << 20, 1] {
            let err = f
                .svc
                .read(
                    &f.tenant,
                    ReadTarget::Commit(d0),
                    ReadOf::Delta {
                        stop: None,
                        depth: None,
                    },
                    content_limit,
                )
                .await
                .unwrap_err();
            assert_eq!(err.kind, ErrorKind::Gone, "{content_limit}: {err}");
            assert!(err.message.contains(&c.to_string()), "{}", err.message);
        }
    }
}

/// Commits `texts` as raw deltas without a summary on session `s`,
/// moving its ref; the ids, oldest first.
async fn turns(f: &Fixture, s: &str, texts: &[&str]) -> Vec<CommitId> {
    let mut ids: Vec<CommitId> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let name = rn(s);
        let new = NewCommit {
            parent: ids.last().copied(),
            session_id: Some(s.parse().expect("a session id")),
            created_at: Some(t(i as i64)),
            ref_move: Some(RefMove {
                name,
                expected: ids.last().copied(),
            }),
            ..NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                FormatId::raw(),
                Bytes::from(text.to_string()),
            )
        };
        ids.push(f.svc.checkpoint(&f.tenant, new).await.unwrap().commit.id);
    }
    ids
}

/// Issue 46, item 2: behind a compaction written by hand (not made by
/// `ctx compact` from the context it replaces), an eviction says what
/// would be lost and asks for `force`; nothing is written. With `force`
/// it evicts.
#[tokio::test]
async fn an_eviction_behind_a_compaction_that_does_not_cover_asks_for_force() {
    let f = fixture();
    let [d0, d1, c, _] = f.compacted_session("s").await;
    let err = f
        .svc
        .evict(&f.tenant, &rn("s"), &c, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert_eq!(err.field.as_deref(), Some("force"), "{err}");
    for lost in [d0, d1] {
        assert!(
            err.message.contains(&lost.to_string()),
            "names {lost}: {err}"
        );
    }
    assert!(
        err.message.contains("summary of d0"),
        "says what is lost: {err}"
    );
    assert_eq!(f.meta.evicted_by(&f.tenant, &d0).await.unwrap(), None);
    assert!(f.blob_exists("d0 ").await, "nothing is deleted");
    let e = f.svc.evict(&f.tenant, &rn("s"), &c, true).await.unwrap();
    assert_eq!(e.commits, 2, "{e:?}");
}

/// Issue 46, item 2 (the repro): three raw turns, `ctx compact` with the
/// default extractive summarizer, then an eviction behind it. The
/// compaction stands for every turn, so no `force` is needed; the evicted
/// commits, which had no summary, get one (`ctx log` still reads them).
#[tokio::test]
async fn an_eviction_behind_ctx_compact_needs_no_force_and_summarizes_what_it_evicts() {
    let f = fixture();
    let ids = turns(
        &f,
        "s-7",
        &["user: turn 1\n", "user: turn 2\n", "user: turn 3\n"],
    )
    .await;
    let tip = *ids.last().unwrap();
    let c = f
        .svc
        .compact(
            &f.tenant,
            &tip,
            &crate::summarize::Extractive,
            Some(RefMove {
                name: rn("s-7"),
                expected: Some(tip),
            }),
        )
        .await
        .unwrap()
        .commit;
    let e = f
        .svc
        .evict(&f.tenant, &rn("s-7"), &c.id, false)
        .await
        .unwrap();
    assert_eq!(e.commits, 3, "{e:?}");
    // Every turn is still there, in the compaction's context.
    let text = f.text(&c.id, Stop::Compaction).await.unwrap();
    for turn in ["turn 1", "turn 2", "turn 3"] {
        assert!(text.contains(turn), "{turn} in {text:?}");
    }
    let log = f.svc.history(&f.tenant, &c.id, 10).await.unwrap();
    for (commit, n) in log[1..].iter().zip([3, 2, 1]) {
        assert_eq!(
            commit.summary.as_deref(),
            Some(format!("user: turn {n}").as_str()),
            "{commit:?}"
        );
        assert_eq!(
            commit
                .tags
                .get(crate::store::TAG_SUMMARY_BY)
                .map(String::as_str),
            Some("extractive:v1")
        );
    }
}
