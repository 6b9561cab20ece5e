//! Garbage collection and the cache budget, on the memory store with a
//! driven clock (its write times come from the same clock), and on the
//! embedded store racing real checkpoints.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;

use super::{GcOptions, LifecycleSettings};
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::commit::{CommitType, Stop};
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::service::{Delta, NewCommit, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobArea, BlobStore, BlobStoreExt, Stores};

const HOUR: i64 = 3_600_000_000;

struct Fixture {
    svc: Service,
    blobs: Arc<MemoryBlobStore>,
    clock: Arc<ManualClock>,
    tenant: TenantId,
}

fn fixture(cache_budget: Option<u64>) -> Fixture {
    let clock = Arc::new(ManualClock::new(t(10_000)));
    let blobs = Arc::new(MemoryBlobStore::with_clock(clock.clone()));
    let stores = Stores {
        blobs: blobs.clone(),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    // Deltas in the blob store: collection is about blobs (inline deltas
    // are never in it; see service::artifacts' tests).
    let svc = Service::new(stores, clock.clone())
        .with_lifecycle(LifecycleSettings {
            cache_budget,
            gc_grace: Duration::from_secs(3600),
            ..LifecycleSettings::default()
        })
        // The stored cache's budget and collection: a result held in
        // memory would answer a repeat before the store is asked (the hot
        // cache has its own tests, in service::hot and below).
        .with_hot_cache(0)
        .with_limits(crate::service::Limits {
            inline_delta_bytes: 0,
            ..Default::default()
        });
    Fixture {
        svc,
        blobs,
        clock,
        tenant: "acme".parse().unwrap(),
    }
}

/// A raw commit holding `body` on `parent`.
async fn commit(
    svc: &Service,
    tenant: &TenantId,
    parent: Option<CommitId>,
    body: &str,
) -> CommitId {
    let new = NewCommit {
        parent,
        ..NewCommit::new(
            "agent".parse().unwrap(),
            "tpl",
            FormatId::raw(),
            Bytes::from(body.to_owned()),
        )
    };
    svc.checkpoint(tenant, new).await.unwrap().commit.id
}

fn art(s: &str) -> ArtifactRef {
    ArtifactRef::of(s.as_bytes())
}

#[tokio::test]
async fn gc_sweeps_old_unreferenced_artifacts_and_keeps_the_rest() {
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    let root = commit(svc, tenant, None, "kept: a commit names me\n").await;
    let tip = commit(svc, tenant, Some(root), "kept too\n").await;
    svc.materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    f.blobs
        .put(tenant, Bytes::from("orphan: old\n"))
        .await
        .unwrap();
    f.blobs
        .put_cached(tenant, Bytes::from("cached orphan\n"))
        .await
        .unwrap();
    let other: TenantId = "other".parse().unwrap();
    f.blobs
        .put(&other, Bytes::from("orphan: old\n"))
        .await
        .unwrap();
    f.clock.advance_micros(2 * HOUR);
    f.blobs
        .put(tenant, Bytes::from("orphan: young\n"))
        .await
        .unwrap();

    let dry = svc.gc_all(tenant, true).await.unwrap();
    let mut would: Vec<_> = dry.removed.iter().map(|r| (r.area, r.artifact)).collect();
    would.sort();
    let mut expected = vec![
        (BlobArea::Durable, art("orphan: old\n")),
        (BlobArea::Cache, art("cached orphan\n")),
    ];
    expected.sort();
    assert_eq!(would, expected);
    assert_eq!(dry.young, 1, "{dry:?}");
    assert_eq!(
        dry.referenced, 3,
        "two deltas and the cached materialization"
    );
    assert_eq!(dry.scanned, 6);
    assert!(
        f.blobs
            .get(tenant, &art("orphan: old\n"))
            .await
            .unwrap()
            .is_some(),
        "a dry run removes nothing"
    );

    let done = svc.gc_all(tenant, false).await.unwrap();
    assert_eq!(done.removed, dry.removed);
    assert_eq!(done.removed_bytes, 12 + 14);
    for gone in ["orphan: old\n", "cached orphan\n"] {
        assert_eq!(
            f.blobs.get(tenant, &art(gone)).await.unwrap(),
            None,
            "{gone}"
        );
    }
    for kept in ["orphan: young\n", "kept: a commit names me\n", "kept too\n"] {
        assert!(
            f.blobs.get(tenant, &art(kept)).await.unwrap().is_some(),
            "{kept}"
        );
    }
    assert!(
        f.blobs
            .get(&other, &art("orphan: old\n"))
            .await
            .unwrap()
            .is_some(),
        "another tenant's artifacts are not this collection's"
    );
    let m = svc
        .materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    assert!(
        m.cached,
        "the cached materialization was referenced, so kept"
    );
}

#[tokio::test]
async fn gc_pages_one_artifact_at_a_time_reach_the_same_result() {
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    commit(svc, tenant, None, "named\n").await;
    for i in 0..5 {
        f.blobs
            .put(tenant, Bytes::from(format!("orphan {i}\n")))
            .await
            .unwrap();
    }
    f.blobs
        .put_cached(tenant, Bytes::from("c\n"))
        .await
        .unwrap();
    f.clock.advance_micros(2 * HOUR);
    let mut opts = GcOptions {
        limit: Some(1),
        ..GcOptions::default()
    };
    let mut removed = 0;
    let mut calls = 0;
    loop {
        let page = svc.gc(tenant, &opts).await.unwrap();
        calls += 1;
        assert!(page.scanned <= 1);
        removed += page.removed.len();
        match page.next {
            Some(n) => opts.cursor = Some(n),
            None => break,
        }
    }
    assert_eq!(removed, 6);
    assert!(
        calls >= 7,
        "one page per artifact, and the areas' ends: {calls}"
    );
    assert_eq!(
        f.blobs
            .list(tenant, BlobArea::Durable, None, 100)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn gc_refuses_bad_cursors_and_limits_naming_the_field() {
    let f = fixture(None);
    for (opts, field) in [
        (
            GcOptions {
                cursor: Some("nowhere.".into()),
                ..GcOptions::default()
            },
            "cursor",
        ),
        (
            GcOptions {
                cursor: Some("durable.art-12".into()),
                ..GcOptions::default()
            },
            "cursor",
        ),
        (
            GcOptions {
                limit: Some(0),
                ..GcOptions::default()
            },
            "limit",
        ),
        (
            GcOptions {
                limit: Some(super::GC_MAX_PAGE + 1),
                ..GcOptions::default()
            },
            "limit",
        ),
    ] {
        let e = f.svc.gc(&f.tenant, &opts).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{opts:?}");
        assert_eq!(e.field.as_deref(), Some(field), "{opts:?}");
    }
}

#[tokio::test]
async fn an_artifact_put_again_is_young_again_and_not_swept() {
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    f.blobs.put(tenant, Bytes::from("reused\n")).await.unwrap();
    f.clock.advance_micros(2 * HOUR);
    // A client uploads the same bytes again, to name them in a checkpoint.
    f.blobs.put(tenant, Bytes::from("reused\n")).await.unwrap();
    let report = svc.gc_all(tenant, false).await.unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.young, 1);
}

#[tokio::test]
async fn an_evicted_cache_entry_is_rebuilt_transparently() {
    // Room for one materialization of about 60 bytes, not two.
    let f = fixture(Some(100));
    let (svc, tenant) = (&f.svc, &f.tenant);
    let a0 = commit(svc, tenant, None, "first chain, first part.....\n").await;
    let a = commit(svc, tenant, Some(a0), "first chain, second part....\n").await;
    let b0 = commit(svc, tenant, None, "second chain, first part....\n").await;
    let b = commit(svc, tenant, Some(b0), "second chain, second part...\n").await;

    let first = svc.materialize(tenant, &a, Stop::Root, None).await.unwrap();
    assert!(!first.cached);
    let bytes = svc
        .download_artifact(tenant, &first.result.artifact_ref)
        .await
        .unwrap();
    let again = svc.materialize(tenant, &a, Stop::Root, None).await.unwrap();
    assert!(again.cached, "within the budget it stays");

    f.clock.advance_micros(HOUR);
    let other = svc.materialize(tenant, &b, Stop::Root, None).await.unwrap();
    assert!(!other.cached);
    assert_eq!(
        f.blobs
            .get(tenant, &first.result.artifact_ref)
            .await
            .unwrap(),
        None,
        "the least recently used entry and its artifact were evicted"
    );
    assert!(
        f.blobs
            .get(tenant, &a0_artifact(svc, tenant, &a0).await)
            .await
            .unwrap()
            .is_some(),
        "deltas are durable"
    );

    let rebuilt = svc.materialize(tenant, &a, Stop::Root, None).await.unwrap();
    assert!(!rebuilt.cached, "rebuilt, not a dangling hit");
    assert_eq!(rebuilt.result, first.result);
    assert_eq!(
        svc.download_artifact(tenant, &rebuilt.result.artifact_ref)
            .await
            .unwrap(),
        bytes
    );
}

async fn a0_artifact(svc: &Service, tenant: &TenantId, id: &CommitId) -> ArtifactRef {
    svc.show(tenant, id).await.unwrap().artifact_ref
}

#[tokio::test]
async fn a_cached_artifact_gone_from_storage_is_rebuilt_not_an_error() {
    // What an S3 lifecycle rule does: the object goes, the entry stays.
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    let root = commit(svc, tenant, None, "one\n").await;
    let tip = commit(svc, tenant, Some(root), "two\n").await;
    let m = svc
        .materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    assert!(
        f.blobs
            .stat(tenant, &[BlobArea::Cache], &m.result.artifact_ref)
            .await
            .unwrap()
            .is_some(),
        "results are stored in the cache area"
    );
    assert!(
        f.blobs
            .remove(tenant, BlobArea::Cache, &m.result.artifact_ref)
            .await
            .unwrap()
    );
    let again = svc
        .materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    assert!(!again.cached);
    assert_eq!(again.result, m.result);
    assert_eq!(
        svc.download_artifact(tenant, &again.result.artifact_ref)
            .await
            .unwrap(),
        Bytes::from("one\ntwo\n")
    );
}

#[tokio::test]
async fn a_checkpoint_naming_a_cached_artifact_makes_it_durable() {
    let f = fixture(Some(1));
    let (svc, tenant) = (&f.svc, &f.tenant);
    let root = commit(svc, tenant, None, "alpha\n").await;
    let tip = commit(svc, tenant, Some(root), "beta\n").await;
    let m = svc
        .materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    let art = m.result.artifact_ref;
    let snapshot = NewCommit {
        commit_type: CommitType::Snapshot,
        delta: Delta::Stored(art),
        ..NewCommit::new(
            "agent".parse().unwrap(),
            "tpl",
            FormatId::raw(),
            Bytes::new(),
        )
    };
    let c = svc.checkpoint(tenant, snapshot).await.unwrap().commit;
    assert!(
        f.blobs
            .stat(tenant, &[BlobArea::Durable], &art)
            .await
            .unwrap()
            .is_some()
    );
    // Evicting every cache entry leaves the snapshot's bytes.
    f.clock.advance_micros(HOUR);
    let other = commit(svc, tenant, None, "gamma\n").await;
    svc.materialize(tenant, &other, Stop::Root, None)
        .await
        .unwrap();
    f.clock.advance_micros(2 * HOUR);
    svc.gc_all(tenant, false).await.unwrap();
    let back = svc
        .materialize(tenant, &c.id, Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(
        svc.download_artifact(tenant, &back.result.artifact_ref)
            .await
            .unwrap(),
        Bytes::from("alpha\nbeta\n")
    );
}

/// Sets a file's mtime `hours` hours back.
fn age_file(path: &std::path::Path, hours: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    let then = std::time::SystemTime::UNIX_EPOCH
        + Duration::from_micros(SystemClock.now().timestamp_micros() as u64)
        - Duration::from_secs(hours * 3600);
    f.set_modified(then).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gc_racing_checkpoints_never_sweeps_what_a_commit_names() {
    use crate::store::local::{LocalBlobStore, SqliteMetaStore};
    let dir = tempfile::tempdir().unwrap();
    let blobs = Arc::new(LocalBlobStore::open(dir.path()).unwrap());
    let stores = Stores {
        blobs: blobs.clone(),
        meta: Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
    };
    let svc = Service::new(stores, Arc::new(SystemClock)).with_lifecycle(LifecycleSettings {
        cache_budget: Some(4096),
        gc_grace: Duration::from_secs(3600),
        ..LifecycleSettings::default()
    });
    let tenant: TenantId = "race".parse().unwrap();
    // Old artifacts: half are orphans nobody will name, half will be
    // uploaded again and named by checkpoints while the collector runs.
    const OLD: usize = 40;
    for i in 0..OLD {
        let put = blobs
            .put(&tenant, Bytes::from(format!("old {i}\n")))
            .await
            .unwrap();
        age_file(&blobs.path_of(&tenant, &put.artifact), 48);
    }
    let done = Arc::new(AtomicBool::new(false));
    let collector = {
        let (svc, tenant, done) = (svc.clone(), tenant.clone(), done.clone());
        tokio::spawn(async move {
            let mut runs = 0u32;
            let mut removed = 0usize;
            // Bounded: until the writers finish, and at most 10,000 runs.
            while !done.load(Ordering::SeqCst) && runs < 10_000 {
                removed += svc.gc_all(&tenant, false).await.unwrap().removed.len();
                runs += 1;
            }
            // One more after the writers: the orphans go now at the latest.
            removed += svc.gc_all(&tenant, false).await.unwrap().removed.len();
            (runs + 1, removed)
        })
    };
    let mut writers = Vec::new();
    for w in 0..3usize {
        let svc = svc.clone();
        let tenant = tenant.clone();
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut parent = None;
            for i in 0..30usize {
                let new = if i % 3 == 0 && (w * 10 + i / 3) < OLD / 2 {
                    // Name an old artifact: upload it again, then commit.
                    let body = Bytes::from(format!("old {}\n", w * 10 + i / 3));
                    let put = svc.upload_artifact(&tenant, body).await.unwrap();
                    NewCommit {
                        parent,
                        delta: Delta::Stored(put.artifact),
                        ..NewCommit::new(
                            "agent".parse().unwrap(),
                            "tpl",
                            FormatId::raw(),
                            Bytes::new(),
                        )
                    }
                } else {
                    NewCommit {
                        parent,
                        ..NewCommit::new(
                            "agent".parse().unwrap(),
                            "tpl",
                            FormatId::raw(),
                            Bytes::from(format!("writer {w} turn {i}\n")),
                        )
                    }
                };
                let id = svc.checkpoint(&tenant, new).await.unwrap().commit.id;
                // Materialize as a resuming agent would: cache entries come
                // and go under the small budget meanwhile.
                svc.materialize(&tenant, &id, Stop::Root, None)
                    .await
                    .unwrap();
                parent = Some(id);
                ids.push(id);
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for w in writers {
        ids.extend(w.await.unwrap());
    }
    done.store(true, Ordering::SeqCst);
    let (runs, removed) = collector.await.unwrap();
    assert!(runs >= 2, "the collector ran during the writes: {runs}");
    assert!(
        removed >= OLD / 2,
        "the unnamed old artifacts went: {removed}"
    );
    for id in &ids {
        let m = svc.materialize(&tenant, id, Stop::Root, None).await;
        let m = m.unwrap_or_else(|e| panic!("{id} no longer materializes: {e}"));
        svc.download_artifact(&tenant, &m.result.artifact_ref)
            .await
            .unwrap();
    }
    for i in 0..OLD {
        let there = blobs
            .get(&tenant, &art(&format!("old {i}\n")))
            .await
            .unwrap()
            .is_some();
        assert_eq!(there, i < OLD / 2, "old {i}");
    }
}

#[tokio::test]
async fn gc_keeps_agent_save_files_and_working_context_snapshots() {
    use crate::agent::{WorkingContextSnapshot, WorkingMessage};
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    let agent = "agent".parse().unwrap();
    commit(svc, tenant, None, "something the agent knows\n").await;
    let save = svc
        .save_context(tenant, &agent, Some("before lunch".into()))
        .await
        .unwrap();
    let wc = svc
        .put_working_context(
            tenant,
            &agent,
            &WorkingContextSnapshot {
                schema_version: 1,
                agent_id: "agent".into(),
                epoch_id: 1,
                last_compaction_ts: None,
                messages: vec![WorkingMessage {
                    role: "user".into(),
                    content: Some("hello".into()),
                    reasoning_content: None,
                    tool_payload: None,
                    media_urls: None,
                }],
            },
        )
        .await
        .unwrap();
    f.clock.advance_micros(48 * HOUR);
    let done = svc.gc_all(tenant, false).await.unwrap();
    assert!(
        done.removed.iter().all(|r| r.area == BlobArea::Cache),
        "{done:?}"
    );
    for art in [save.artifact_ref, wc] {
        assert!(f.blobs.get(tenant, &art).await.unwrap().is_some(), "{art}");
    }
    assert!(
        !svc.restore_save(tenant, &agent, &save.save_id)
            .await
            .unwrap()
            .is_empty(),
        "the save's threads are written back"
    );
}

#[tokio::test]
async fn a_save_of_several_commits_is_restorable_after_a_collection() {
    let f = fixture(None);
    let (svc, tenant) = (&f.svc, &f.tenant);
    let agent = "agent".parse().unwrap();
    let root = commit(svc, tenant, None, "first turn\n").await;
    f.clock.advance_micros(1_000);
    commit(svc, tenant, Some(root), "second turn\n").await;
    let save = svc.save_context(tenant, &agent, None).await.unwrap();
    f.clock.advance_micros(48 * HOUR);
    svc.gc_all(tenant, false).await.unwrap();
    let restored = svc
        .restore_save(tenant, &agent, &save.save_id)
        .await
        .unwrap();
    let tip = restored.last().unwrap().id;
    let m = svc
        .materialize(tenant, &tip, Stop::Compaction, None)
        .await
        .unwrap();
    let bytes = f
        .blobs
        .get(tenant, &m.result.artifact_ref)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bytes, Bytes::from("first turn\nsecond turn\n"));
}

/// With a cache budget (embedded), a result built on its parent's cached
/// entry supersedes it: the parent's entry and file go, so a session read
/// after every append keeps one copy of its context, not one per turn. A
/// read of the parent rebuilds it. Without a budget (S3's lifecycle rule
/// expires cached files) the parent's entry stays.
#[tokio::test]
async fn a_childs_cached_result_supersedes_its_parents_with_a_budget() {
    for budget in [Some(1 << 20), None] {
        let f = fixture(budget);
        let (svc, tenant) = (&f.svc, &f.tenant);
        let root = commit(svc, tenant, None, "one\n").await;
        let a = commit(svc, tenant, Some(root), "two\n").await;
        let b = commit(svc, tenant, Some(a), "three\n").await;
        let key = |commit| crate::store::MaterializeKey {
            commit,
            stop: Stop::Root,
            format: FormatId::raw(),
        };
        let first = svc.materialize(tenant, &a, Stop::Root, None).await.unwrap();
        let second = svc.materialize(tenant, &b, Stop::Root, None).await.unwrap();
        assert!(!first.cached && !second.cached);
        let meta = &svc.stores.meta;
        let parent = meta.get_materialized(tenant, &key(a)).await.unwrap();
        let parent_file = f
            .blobs
            .stat(tenant, &[BlobArea::Cache], &first.result.artifact_ref)
            .await
            .unwrap();
        let child = meta.get_materialized(tenant, &key(b)).await.unwrap();
        assert_eq!(child, Some(second.result.clone()), "{budget:?}");
        if budget.is_some() {
            assert_eq!((parent, parent_file), (None, None));
            let again = svc.read(
                tenant,
                crate::service::ReadTarget::Commit(a),
                crate::service::ReadOf::Context {
                    stop: Stop::Root,
                    format: None,
                },
                1024,
            );
            let again = again.await.unwrap();
            assert!(!again.materialization.cached, "rebuilt");
            assert_eq!(again.bytes.as_deref(), Some(&b"one\ntwo\n"[..]));
        } else {
            assert_eq!(parent, Some(first.result.clone()));
            assert!(parent_file.is_some());
        }
    }
}
