//! The behaviours garbage collection and the cache budget rely on: blob
//! areas, listings in hash order with sizes and ages, touches, sweeps by
//! age, and the references and LRU eviction of the meta store.

use bytes::Bytes;

use super::{commit, fresh_tenant, put, t};
use crate::agent::{AgentRecord, WorkingContextRef};
use crate::clock::micros_to_time;
use crate::commit::Stop;
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::format::translate::Tier;
use crate::id::{ArtifactRef, Principal};
use crate::store::{BlobArea, BlobStore, MaterializeKey, Materialized, MetaStore};

/// Runs every blob behaviour.
pub async fn run_all_blobs(blobs: &dyn BlobStore) {
    areas_are_separate_and_reads_find_cached_artifacts(blobs).await;
    listings_page_in_hash_order_per_tenant_and_area(blobs).await;
    sweeps_remove_only_what_is_older_than_the_cutoff(blobs).await;
}

/// Runs every meta behaviour; `budget` when the store has an LRU cache
/// budget (embedded stores).
pub async fn run_all_meta(meta: &dyn MetaStore, budget: bool) {
    references_are_every_commit_and_cache_entry_artifact(meta).await;
    if budget {
        eviction_drops_least_recently_used_entries_first(meta).await;
    }
}

/// `put_cached` lands in the cache area alone; `read` and `size` find it;
/// `remove` takes it from one area; `delete` from both; the durable area
/// cannot be `remove`d.
pub async fn areas_are_separate_and_reads_find_cached_artifacts(blobs: &dyn BlobStore) {
    let a = fresh_tenant("gc-areas");
    let cached = blobs
        .put_cached(&a, Bytes::from_static(b"a cached result"))
        .await
        .expect("put_cached");
    let art = cached.artifact;
    assert_eq!(art, ArtifactRef::of(b"a cached result"));
    assert!(
        blobs
            .stat(&a, &[BlobArea::Durable], &art)
            .await
            .expect("stat")
            .is_none()
    );
    let info = blobs
        .stat(&a, &[BlobArea::Cache], &art)
        .await
        .expect("stat")
        .expect("in the cache area");
    assert_eq!((info.artifact, info.size), (art, 15));
    assert_eq!(
        blobs
            .read(&a, BlobArea::READABLE, &art)
            .await
            .expect("read")
            .as_deref(),
        Some(&b"a cached result"[..])
    );
    assert_eq!(
        blobs
            .stat(&a, BlobArea::READABLE, &art)
            .await
            .expect("size")
            .map(|i| i.size),
        Some(15)
    );
    assert_eq!(
        blobs.touch(&a, &art).await.expect("touch"),
        None,
        "not durable"
    );

    blobs
        .put(&a, Bytes::from_static(b"a cached result"))
        .await
        .expect("put");
    assert!(
        blobs
            .remove(&a, BlobArea::Cache, &art)
            .await
            .expect("remove")
    );
    assert!(
        !blobs
            .remove(&a, BlobArea::Cache, &art)
            .await
            .expect("remove again")
    );
    assert_eq!(
        blobs
            .stat(&a, BlobArea::READABLE, &art)
            .await
            .expect("size")
            .map(|i| i.size),
        Some(15),
        "the durable copy stays"
    );
    let e = blobs
        .remove(&a, BlobArea::Durable, &art)
        .await
        .expect_err("durable artifacts are deleted, not removed");
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert_eq!(blobs.touch(&a, &art).await.expect("touch"), Some(15));

    blobs
        .put_cached(&a, Bytes::from_static(b"a cached result"))
        .await
        .expect("put_cached");
    assert!(blobs.delete(&a, &art).await.expect("delete"));
    assert_eq!(
        blobs
            .read(&a, BlobArea::READABLE, &art)
            .await
            .expect("read"),
        None,
        "both copies"
    );
}

/// Listings: one tenant's one area, hash order, pages after a cursor,
/// sizes, and write times no later than a stat's.
pub async fn listings_page_in_hash_order_per_tenant_and_area(blobs: &dyn BlobStore) {
    let a = fresh_tenant("gc-list-a");
    let b = fresh_tenant("gc-list-b");
    let mut durable: Vec<ArtifactRef> = Vec::new();
    for i in 0..7 {
        let body = Bytes::from(format!("durable {i}"));
        durable.push(blobs.put(&a, body).await.expect("put").artifact);
    }
    blobs
        .put(&b, Bytes::from_static(b"durable 0"))
        .await
        .expect("put b");
    blobs
        .put(&b, Bytes::from_static(b"only b"))
        .await
        .expect("put b");
    let cached = blobs
        .put_cached(&a, Bytes::from_static(b"cached 0"))
        .await
        .expect("put_cached")
        .artifact;
    durable.sort();

    let mut listed = Vec::new();
    let mut after: Option<ArtifactRef> = None;
    loop {
        let page = blobs
            .list(&a, BlobArea::Durable, after.as_ref(), 3)
            .await
            .expect("list");
        assert!(page.len() <= 3);
        for info in &page {
            let stat = blobs
                .stat(&a, &[BlobArea::Durable], &info.artifact)
                .await
                .expect("stat")
                .expect("listed, so stored");
            assert_eq!(info.size, stat.size);
            assert_eq!(info.size, 9);
        }
        listed.extend(page.iter().map(|i| i.artifact));
        match page.last() {
            Some(last) if page.len() == 3 => after = Some(last.artifact),
            _ => break,
        }
    }
    assert_eq!(
        listed, durable,
        "every durable artifact of a, in hash order"
    );
    let cache = blobs
        .list(&a, BlobArea::Cache, None, 100)
        .await
        .expect("list cache");
    assert_eq!(
        cache.iter().map(|i| i.artifact).collect::<Vec<_>>(),
        [cached]
    );
    assert_eq!(
        blobs
            .list(&b, BlobArea::Durable, None, 100)
            .await
            .expect("list b")
            .len(),
        2,
        "another tenant's listing is its own"
    );
    assert!(
        blobs
            .list(&b, BlobArea::Staged, None, 100)
            .await
            .expect("list staged")
            .is_empty()
    );
}

/// A sweep removes an artifact written before the cutoff and keeps one
/// written (or touched) after it.
pub async fn sweeps_remove_only_what_is_older_than_the_cutoff(blobs: &dyn BlobStore) {
    let a = fresh_tenant("gc-sweep");
    let art = blobs
        .put(&a, Bytes::from_static(b"to sweep"))
        .await
        .expect("put")
        .artifact;
    let info = blobs
        .stat(&a, &[BlobArea::Durable], &art)
        .await
        .expect("stat")
        .expect("stored");
    // Written at `modified`: a cutoff at that time keeps it, any later one
    // (here: far in the future) sweeps it.
    assert!(
        !blobs
            .sweep(&a, BlobArea::Durable, &art, info.modified)
            .await
            .expect("sweep")
    );
    assert!(
        !blobs
            .sweep(&a, BlobArea::Cache, &art, micros_to_time(i64::MAX / 2))
            .await
            .expect("sweep another area"),
        "a sweep takes from its area alone"
    );
    assert!(
        blobs
            .sweep(&a, BlobArea::Durable, &art, micros_to_time(i64::MAX / 2))
            .await
            .expect("sweep")
    );
    assert_eq!(
        blobs
            .read(&a, BlobArea::READABLE, &art)
            .await
            .expect("read"),
        None
    );
    assert!(
        !blobs
            .sweep(&a, BlobArea::Durable, &art, micros_to_time(i64::MAX / 2))
            .await
            .expect("sweep again")
    );
}

fn entry(body: &[u8], size: u64) -> Materialized {
    Materialized {
        artifact_ref: ArtifactRef::of(body),
        size,
        message_count: 1,
        token_count: 1,
        tier: Tier::Native,
        fidelity: None,
    }
}

/// References: every commit's artifact, every cache entry's, every agent
/// save file and working-context snapshot (durable: nothing else names
/// them), the tenant's alone.
pub async fn references_are_every_commit_and_cache_entry_artifact(meta: &dyn MetaStore) {
    let a = fresh_tenant("gc-refs-a");
    let b = fresh_tenant("gc-refs-b");
    let root = put(meta, &a, &commit(&a, None, t(0), "p", b"root")).await;
    let child = put(meta, &a, &commit(&a, Some(&root), t(1), "p", b"child")).await;
    put(meta, &b, &commit(&b, None, t(0), "p", b"theirs")).await;
    let key = MaterializeKey {
        commit: child.id,
        stop: Stop::Root,
        format: FormatId::raw(),
    };
    meta.put_materialized(&a, &key, &entry(b"rootchild", 9))
        .await
        .expect("put_materialized");
    let agent: Principal = "p".parse().expect("principal");
    let save = super::agents::save(&a, &agent, 50, "a save file");
    meta.put_save(&a, &agent, &save).await.expect("put_save");
    let wc = ArtifactRef::of(b"a working context");
    meta.update_agent(
        &a,
        &agent,
        &AgentRecord {
            working_context: Some(WorkingContextRef {
                artifact_ref: wc,
                epoch_id: 1,
            }),
            ..AgentRecord::default()
        },
    )
    .await
    .expect("update_agent");
    let refs = meta.references(&a).await.expect("references");
    assert_eq!(
        refs.durable,
        [
            ArtifactRef::of(b"root"),
            ArtifactRef::of(b"child"),
            save.artifact_ref,
            save.thread_artifacts[0],
            wc
        ]
        .into()
    );
    assert_eq!(refs.cached, [ArtifactRef::of(b"rootchild")].into());
    let theirs = meta.references(&b).await.expect("references b");
    assert_eq!(theirs.durable, [ArtifactRef::of(b"theirs")].into());
    assert!(theirs.cached.is_empty());
}

/// LRU eviction: oldest stamps first, never the entry kept, artifacts
/// returned only when no remaining entry names them.
pub async fn eviction_drops_least_recently_used_entries_first(meta: &dyn MetaStore) {
    let a = fresh_tenant("gc-lru");
    let mut ids = Vec::new();
    for n in 1..=4u8 {
        ids.push(
            put(
                meta,
                &a,
                &commit(&a, None, t(i64::from(n)), "p", &[b'c', n]),
            )
            .await
            .id,
        );
    }
    let key = |n: u8| MaterializeKey {
        commit: ids[usize::from(n) - 1],
        stop: Stop::Root,
        format: FormatId::raw(),
    };
    for n in 1..=4u8 {
        meta.put_materialized(&a, &key(n), &entry(&[n], 100))
            .await
            .expect("put_materialized");
    }
    // 3 and 4 share one artifact.
    meta.put_materialized(&a, &key(4), &entry(&[3], 100))
        .await
        .expect("put_materialized");
    for (n, at) in [(1u8, 50), (2, 10), (3, 20), (4, 40)] {
        meta.touch_materialized(&a, &key(n), t(at))
            .await
            .expect("touch");
    }
    // Order of use: 2, 3, 4, 1 (1 newest). Keep 2 whatever its age.
    let mut evicted = meta
        .evict_materialized(200, (&a, &key(2)))
        .await
        .expect("evict");
    evicted.retain(|(t, _)| t == &a);
    // Other tenants' entries (never touched) go first; then ours by age:
    // 3, then 4, which leaves 200 bytes. 3's artifact is named by 4 until
    // 4 goes too, so it is returned once.
    let mut left = Vec::new();
    for n in 1..=4u8 {
        if meta
            .get_materialized(&a, &key(n))
            .await
            .expect("get")
            .is_some()
        {
            left.push(n);
        }
    }
    assert_eq!(
        left,
        [1, 2],
        "the kept entry and the most recently used stay; 3, then 4, go"
    );
    assert_eq!(evicted, [(a.clone(), ArtifactRef::of(&[3]))]);
    assert!(
        meta.evict_materialized(200, (&a, &key(2)))
            .await
            .expect("evict")
            .is_empty(),
        "within the budget nothing goes"
    );
}
