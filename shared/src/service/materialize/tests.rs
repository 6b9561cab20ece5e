//! Incremental materialize: each reuse rule on its own (a planted cached
//! ancestor shows whether it was used), and a property test comparing
//! incremental results with a full materialize on a store with no cache.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use crate::clock::ManualClock;
use crate::commit::{CommitType, Stop};
use crate::format::FormatId;
use crate::format::canonical::{Block, Conversation, Message, Role};
use crate::format::translate::Tier;
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::service::{NewCommit, ReadOf, ReadTarget, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobStoreExt, MaterializeKey, Materialized, Stores};

fn service() -> (Service, TenantId) {
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let clock = Arc::new(ManualClock::new(t(10_000)));
    (Service::new(stores, clock), "acme".parse().unwrap())
}

fn fid(s: &str) -> FormatId {
    s.parse().unwrap()
}

/// One commit to make: its parent (an index into the commits made before),
/// its type, its format and its delta.
#[derive(Debug, Clone)]
struct Spec {
    parent: Option<usize>,
    kind: CommitType,
    format: String,
    delta: Bytes,
}

/// A delta of `format` holding a user and an assistant message (or the
/// format's compaction delta for a compaction).
fn delta(svc: &Service, format: &str, kind: CommitType, n: usize) -> Bytes {
    let codec = svc.formats().codec(&fid(format)).clone();
    if kind == CommitType::Compaction {
        return codec
            .compaction_delta(&format!("summary {n}"), &[], t(0))
            .unwrap();
    }
    if !codec.structured() {
        return Bytes::from(format!("raw part {n}\n"));
    }
    let conv = Conversation {
        messages: vec![
            Message::new(Role::User, vec![Block::text(format!("question {n}"))]),
            Message::new(Role::Assistant, vec![Block::text(format!("answer {n}"))]),
        ],
    };
    codec.encode_canonical(&conv).unwrap().bytes
}

async fn make(svc: &Service, tenant: &TenantId, specs: &[Spec]) -> Vec<CommitId> {
    let mut ids: Vec<CommitId> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let new = NewCommit {
            parent: s.parent.map(|p| ids[p]),
            commit_type: s.kind,
            created_at: Some(t(i as i64)),
            ..NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                fid(&s.format),
                s.delta.clone(),
            )
        };
        ids.push(svc.checkpoint(tenant, new).await.unwrap().commit.id);
    }
    ids
}

/// A linear chain of `kinds` in `format`.
fn linear(svc: &Service, format: &str, kinds: &[CommitType]) -> Vec<Spec> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, &kind)| Spec {
            parent: i.checked_sub(1),
            kind,
            format: format.into(),
            delta: delta(svc, format, kind, i),
        })
        .collect()
}

/// Plants a cached materialization of `bytes` for (commit, stop, format).
async fn plant(
    svc: &Service,
    tenant: &TenantId,
    commit: CommitId,
    stop: Stop,
    format: &str,
    bytes: &'static [u8],
) {
    let put = svc
        .stores
        .blobs
        .put_cached(tenant, Bytes::from_static(bytes))
        .await
        .unwrap();
    let m = Materialized {
        artifact_ref: put.artifact,
        size: put.size,
        message_count: 100,
        token_count: 1000,
        tier: Tier::Native,
        fidelity: None,
    };
    let key = MaterializeKey {
        commit,
        stop,
        format: fid(format),
    };
    svc.stores
        .meta
        .put_materialized(tenant, &key, &m)
        .await
        .unwrap();
}

/// The cache entry of `key`, if any.
async fn entry(svc: &Service, tenant: &TenantId, key: &MaterializeKey) -> Option<Materialized> {
    svc.stores.meta.get_materialized(tenant, key).await.unwrap()
}

async fn bytes_of(
    svc: &Service,
    tenant: &TenantId,
    id: CommitId,
    stop: Stop,
    format: &str,
) -> (Vec<u8>, Materialized) {
    let m = svc
        .materialize(tenant, &id, stop, Some(fid(format)))
        .await
        .unwrap();
    assert!(!m.cached);
    svc.flush_cache_writes().await;
    let b = svc
        .stores
        .blobs
        .get(tenant, &m.result.artifact_ref)
        .await
        .unwrap()
        .unwrap();
    (b.to_vec(), m.result)
}

use CommitType::{Compaction as C, Delta as D, Snapshot as S};

/// A read of a commit's own delta.
const OWN_DELTA: ReadOf = ReadOf::Delta {
    stop: None,
    depth: None,
};

#[tokio::test]
async fn materialize_appends_to_the_parents_cached_context_for_every_stop() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, D, D])).await;
    for stop in [Stop::Root, Stop::Compaction, Stop::After(ids[0])] {
        plant(&svc, &tenant, ids[2], stop, "raw", b"PLANTED\n").await;
        let (b, m) = bytes_of(&svc, &tenant, ids[3], stop, "raw").await;
        assert_eq!(b, b"PLANTED\nraw part 3\n", "{stop:?}");
        assert_eq!(m.message_count, 100);
        assert!(m.token_count > 1000);
        assert_eq!(m.tier, Tier::Native);
    }
}

#[tokio::test]
async fn materialize_appends_json_arrays_and_cbor_arrays_to_a_cached_ancestor() {
    for format in [
        "anthropic-messages-v1",
        "openai-chat-v1",
        "bureau-agent-v1",
        "bureau-agent-v2",
        "claude-code-v1",
    ] {
        let (svc, tenant) = service();
        let ids = make(&svc, &tenant, &linear(&svc, format, &[D, D, D, D, D])).await;
        // Cache depth 1 (warm), then the tip: reused from distance 2 ...
        let (_, warm) = bytes_of(&svc, &tenant, ids[2], Stop::Root, format).await;
        let (inc, inc_m) = bytes_of(&svc, &tenant, ids[4], Stop::Root, format).await;
        // ... equal to a store that never cached anything.
        let (svc2, _) = service();
        let ids2 = make(&svc2, &tenant, &linear(&svc2, format, &[D, D, D, D, D])).await;
        assert_eq!(ids, ids2);
        let (full, full_m) = bytes_of(&svc2, &tenant, ids2[4], Stop::Root, format).await;
        assert_eq!(inc, full, "{format}");
        assert_eq!(inc_m, full_m, "{format}");
        assert_ne!(warm.artifact_ref, full_m.artifact_ref);
    }
}

#[tokio::test]
async fn materialize_for_the_latest_compaction_reuses_nothing_across_a_compaction() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, C, D])).await;
    plant(&svc, &tenant, ids[1], Stop::Compaction, "raw", b"PLANTED\n").await;
    let (b, _) = bytes_of(&svc, &tenant, ids[3], Stop::Compaction, "raw").await;
    assert_eq!(b, b"summary 2\nraw part 3\n");
    // The compaction itself is where the stop is: its cache is reused.
    plant(&svc, &tenant, ids[2], Stop::Compaction, "raw", b"PLANTED\n").await;
    let (svc2, _) = service();
    let ids2 = make(&svc2, &tenant, &linear(&svc2, "raw", &[D, D, C, D, D])).await;
    plant(
        &svc2,
        &tenant,
        ids2[2],
        Stop::Compaction,
        "raw",
        b"PLANTED\n",
    )
    .await;
    let (b, _) = bytes_of(&svc2, &tenant, ids2[4], Stop::Compaction, "raw").await;
    assert_eq!(b, b"PLANTED\nraw part 3\nraw part 4\n");
}

#[tokio::test]
async fn materialize_from_the_root_skips_compactions_in_the_appended_part() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, C, S, D, D])).await;
    plant(&svc, &tenant, ids[1], Stop::Root, "raw", b"PLANTED\n").await;
    // Distance 4 from the tip: probed after the walk; the compaction and
    // the snapshot with a parent are left out as in a full materialize.
    let (b, _) = bytes_of(&svc, &tenant, ids[5], Stop::Root, "raw").await;
    assert_eq!(b, b"PLANTED\nraw part 4\nraw part 5\n");
}

#[tokio::test]
async fn materialize_after_a_stop_reuses_only_the_same_stop() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, D, D])).await;
    plant(
        &svc,
        &tenant,
        ids[2],
        Stop::After(ids[0]),
        "raw",
        b"PLANTED\n",
    )
    .await;
    let (b, _) = bytes_of(&svc, &tenant, ids[3], Stop::After(ids[1]), "raw").await;
    assert_eq!(b, b"raw part 2\nraw part 3\n");
    let (b, _) = bytes_of(&svc, &tenant, ids[3], Stop::After(ids[0]), "raw").await;
    assert_eq!(b, b"PLANTED\nraw part 3\n");
}

#[tokio::test]
async fn materialize_probes_ancestors_at_doubling_distances_only() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, D, D, D, D])).await;
    // Distance 3 is not probed (2, 4, 8, ... are): a full join.
    plant(&svc, &tenant, ids[2], Stop::Root, "raw", b"PLANTED\n").await;
    let (b, _) = bytes_of(&svc, &tenant, ids[5], Stop::Root, "raw").await;
    assert!(
        b.starts_with(b"raw part 0\n"),
        "{}",
        String::from_utf8_lossy(&b)
    );
    // Distance 4 is: the nearest probed hit wins over a farther one.
    plant(&svc, &tenant, ids[0], Stop::Root, "raw", b"FAR\n").await;
    plant(&svc, &tenant, ids[1], Stop::Root, "raw", b"NEAR\n").await;
    let (svc2, _) = service();
    let ids2 = make(
        &svc2,
        &tenant,
        &linear(&svc2, "raw", &[D, D, D, D, D, D, D]),
    )
    .await;
    plant(&svc2, &tenant, ids2[2], Stop::Root, "raw", b"NEAR\n").await;
    plant(&svc2, &tenant, ids2[0], Stop::Root, "raw", b"FAR\n").await;
    let (b, _) = bytes_of(&svc2, &tenant, ids2[6], Stop::Root, "raw").await;
    assert_eq!(b, b"NEAR\nraw part 3\nraw part 4\nraw part 5\nraw part 6\n");
}

#[tokio::test]
async fn materialize_does_not_extend_a_translation_or_an_evicted_artifact() {
    let (svc, tenant) = service();
    let ids = make(
        &svc,
        &tenant,
        &linear(&svc, "anthropic-messages-v1", &[D, D, D]),
    )
    .await;
    // A cache in the target format over parts of another: translated whole.
    plant(&svc, &tenant, ids[1], Stop::Root, "openai-chat-v1", b"[]").await;
    let (b, m) = bytes_of(&svc, &tenant, ids[2], Stop::Root, "openai-chat-v1").await;
    assert_eq!(m.tier, Tier::CrossRuntime);
    assert!(String::from_utf8_lossy(&b).contains("question 0"));
    // A cache whose artifact is gone: joined whole.
    let gone = Materialized {
        artifact_ref: ArtifactRef::of(b"never stored"),
        size: 12,
        message_count: 1,
        token_count: 1,
        tier: Tier::Native,
        fidelity: None,
    };
    let key = MaterializeKey {
        commit: ids[1],
        stop: Stop::Root,
        format: fid("anthropic-messages-v1"),
    };
    svc.stores
        .meta
        .put_materialized(&tenant, &key, &gone)
        .await
        .unwrap();
    let (b, m) = bytes_of(&svc, &tenant, ids[2], Stop::Root, "anthropic-messages-v1").await;
    assert!(String::from_utf8_lossy(&b).contains("question 0"));
    assert_eq!(m.message_count, 6);
}

proptest! {
    /// One pass hashing a prefix and what extends it gives both hashes,
    /// whatever they share (all of the prefix, part of it, nothing).
    #[test]
    fn hash_both_equals_two_hashes(
        prefix in proptest::collection::vec(0u8..4, 0..9000),
        cut in 0usize..9000,
        tail in proptest::collection::vec(0u8..4, 0..5000),
    ) {
        let cut = cut.min(prefix.len());
        let mut joined = prefix[..cut].to_vec();
        joined.extend_from_slice(&tail);
        let (p, j) = super::hash_both(&prefix, &joined);
        prop_assert_eq!(p, crate::id::Hash::of(&prefix));
        prop_assert_eq!(super::ref_of(&j), ArtifactRef::of(&joined));
    }
}

/// Cached results are not written durably (the local store does not fsync
/// them): one a crash left short, garbled or missing is rebuilt, never
/// returned, by every reader of it: the cache hit, the incremental
/// materialize that extends it, and the download.
#[cfg(feature = "local")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_result_left_short_garbled_or_missing_is_rebuilt_not_returned() {
    use crate::store::BlobArea;
    use crate::store::local::{LocalBlobStore, SqliteMetaStore};
    let dir = tempfile::tempdir().unwrap();
    let stores = Stores {
        blobs: Arc::new(LocalBlobStore::open(dir.path()).unwrap()),
        meta: Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
    };
    // The stored files' robustness: results held in memory never come
    // from a file, and would answer the repeats below.
    let svc = Service::new(stores, Arc::new(ManualClock::new(t(10_000)))).with_hot_cache(0);
    let tenant: TenantId = "acme".parse().unwrap();
    let files = LocalBlobStore::open(dir.path()).unwrap();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, D])).await;
    let want = b"raw part 0\nraw part 1\nraw part 2\n".to_vec();
    let first = svc
        .materialize(&tenant, &ids[2], Stop::Root, None)
        .await
        .unwrap();
    assert!(!first.cached);
    let art = first.result.artifact_ref;
    let path = files.path_in(&tenant, BlobArea::Cache, &art).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), want);
    let key = MaterializeKey {
        commit: ids[2],
        stop: Stop::Root,
        format: fid("raw"),
    };

    // Short: the hit sees the size and rebuilds the file and the entry.
    std::fs::write(&path, &want[..7]).unwrap();
    let again = svc
        .materialize(&tenant, &ids[2], Stop::Root, None)
        .await
        .unwrap();
    assert!(!again.cached, "a short cached file is a miss");
    assert_eq!(again.result, first.result);
    assert_eq!(std::fs::read(&path).unwrap(), want);
    assert_eq!(entry(&svc, &tenant, &key).await, Some(first.result.clone()));

    // Garbled at the right size: the hit hands out the reference, the
    // download verifies the bytes and rebuilds them.
    let mut garbled = want.clone();
    garbled[0] = b'R';
    std::fs::write(&path, &garbled).unwrap();
    let hit = svc
        .materialize(&tenant, &ids[2], Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(hit.result.artifact_ref, art);
    assert_eq!(svc.download_artifact(&tenant, &art).await.unwrap(), want);
    assert_eq!(std::fs::read(&path).unwrap(), want, "the file is rebuilt");

    // Missing: the download rebuilds it from the cache entry.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(svc.download_artifact(&tenant, &art).await.unwrap(), want);
    assert_eq!(std::fs::read(&path).unwrap(), want);

    // The parent of the next turn garbled: not extended; the child is
    // joined whole, and the parent's bad file and entry are removed.
    std::fs::write(&path, &garbled).unwrap();
    let child = make_child(&svc, &tenant, ids[2], 3).await;
    let m = svc
        .materialize(&tenant, &child, Stop::Root, None)
        .await
        .unwrap();
    let mut want_child = want.clone();
    want_child.extend_from_slice(b"raw part 3\n");
    assert_eq!(
        svc.download_artifact(&tenant, &m.result.artifact_ref)
            .await
            .unwrap(),
        want_child
    );
    assert!(!path.exists(), "the garbled parent file is removed");
    assert_eq!(
        entry(&svc, &tenant, &key).await,
        None,
        "and so is its entry"
    );
}

/// A materialize that read its commit before an erase and stores its
/// result after the erase removed the commit leaves nothing behind: the
/// store takes no entry, and the file written for it goes too.
#[tokio::test]
async fn a_result_stored_after_its_commit_was_erased_leaves_nothing() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D])).await;
    let key = MaterializeKey {
        commit: ids[1],
        stop: Stop::Root,
        format: fid("raw"),
    };
    let bytes = Bytes::from_static(b"built before the erase");
    let m = Materialized {
        artifact_ref: ArtifactRef::of(&bytes),
        size: bytes.len() as u64,
        message_count: 2,
        token_count: 2,
        tier: Tier::Native,
        fidelity: None,
    };
    let erased = svc
        .erase_principal(&tenant, &"agent".parse().unwrap(), false)
        .await
        .unwrap();
    assert_eq!(erased.commits, 2);
    svc.store_materialized(&tenant, &key, &m, bytes)
        .await
        .unwrap();
    assert_eq!(entry(&svc, &tenant, &key).await, None);
    assert!(
        svc.stores
            .blobs
            .get(&tenant, &m.artifact_ref)
            .await
            .unwrap()
            .is_none(),
        "no file of the erased commit's result"
    );
}

/// A raw delta `raw part {n}` on `parent`, at time `n`.
#[cfg(feature = "local")]
async fn make_child(svc: &Service, tenant: &TenantId, parent: CommitId, n: i64) -> CommitId {
    let new = NewCommit {
        parent: Some(parent),
        created_at: Some(t(n)),
        ..NewCommit::new(
            "agent".parse().unwrap(),
            "tpl",
            fid("raw"),
            Bytes::from(format!("raw part {n}\n")),
        )
    };
    svc.checkpoint(tenant, new).await.unwrap().commit.id
}

const FORMATS: [&str; 7] = [
    "raw",
    "claude-code-v1",
    "anthropic-messages-v1",
    "bureau-agent-v1",
    "bureau-agent-v2",
    "openai-chat-v1",
    "openai-responses-v1",
];

/// A random commit: parent choice (modulo the commits before), type.
fn spec_strategy() -> impl Strategy<Value = (Option<usize>, u8)> {
    (proptest::option::weighted(0.9, any::<usize>()), 0u8..10)
}

/// A query: commit, stop kind, stop-after commit, target format (the
/// chain's own for half the values).
fn query_strategy() -> impl Strategy<Value = (usize, u8, usize, usize)> {
    (
        any::<usize>(),
        0u8..3,
        any::<usize>(),
        0usize..FORMATS.len(),
    )
}

async fn run_case(
    chain_format: &str,
    shape: &[(Option<usize>, u8)],
    queries: &[(usize, u8, usize, usize)],
    hot_cache: bool,
) {
    let (svc, tenant) = service();
    let svc = if hot_cache {
        svc
    } else {
        svc.with_hot_cache(0)
    };
    let specs: Vec<Spec> = shape
        .iter()
        .enumerate()
        .map(|(i, &(p, k))| {
            // Mostly the previous commit (a linear run), sometimes a fork.
            let parent = match p {
                _ if i == 0 => None,
                None => None,
                Some(x) if x % 3 == 0 => Some(x % i),
                Some(_) => Some(i - 1),
            };
            let kind = match k {
                0 if parent.is_some() => C,
                0 => D,
                1 => S,
                _ => D,
            };
            Spec {
                parent,
                kind,
                format: chain_format.into(),
                delta: delta(&svc, chain_format, kind, i),
            }
        })
        .collect();
    let ids = make(&svc, &tenant, &specs).await;
    // The resume loop first: every commit in order, then random queries.
    let target = |f: usize| -> String { FORMATS.get(f).copied().unwrap_or(chain_format).into() };
    let mut all: Vec<(usize, Stop, String)> = Vec::new();
    let first = queries[0];
    for i in 0..ids.len() {
        all.push((
            i,
            stop_of(first.1, ids[first.2 % ids.len()]),
            target(first.3),
        ));
    }
    for &(c, s, a, f) in queries {
        all.push((c % ids.len(), stop_of(s, ids[a % ids.len()]), target(f)));
    }
    for (i, stop, format) in all {
        let inc = svc
            .materialize(&tenant, &ids[i], stop, Some(fid(&format)))
            .await;
        if let Ok(m) = &inc {
            // What a download gives is what the reference names (from
            // memory or a file).
            let bytes = svc
                .download_artifact(&tenant, &m.result.artifact_ref)
                .await
                .unwrap();
            assert_eq!(ArtifactRef::of(&bytes), m.result.artifact_ref);
        }
        let (fresh, _) = service();
        let fresh = fresh.with_hot_cache(0);
        let ids2 = make(&fresh, &tenant, &specs).await;
        assert_eq!(ids, ids2);
        let full = fresh
            .materialize(&tenant, &ids2[i], stop, Some(fid(&format)))
            .await;
        match (inc, full) {
            (Ok(a), Ok(b)) => assert_eq!(a.result, b.result, "commit {i} {stop:?} {format}"),
            (Err(a), Err(b)) => assert_eq!(a.message, b.message),
            (a, b) => panic!("commit {i} {stop:?} {format}: {a:?} against {b:?}"),
        }
    }
}

fn stop_of(kind: u8, after: CommitId) -> Stop {
    match kind {
        0 => Stop::Root,
        1 => Stop::Compaction,
        _ => Stop::After(after),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Incremental materialize equals a full one on a store that never
    /// cached anything, over random chains (deltas, compactions, snapshots,
    /// forks), every stop, native and translated formats, each with the
    /// hot result cache on (results held in memory extend one another)
    /// and off (every result stored before it is answered and read back).
    #[test]
    fn materialize_incremental_equals_full(
        format in 0usize..FORMATS.len(),
        shape in proptest::collection::vec(spec_strategy(), 1..24),
        queries in proptest::collection::vec(query_strategy(), 1..10),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for hot in [true, false] {
            rt.block_on(run_case(FORMATS[format], &shape, &queries, hot));
        }
    }
}

/// `read` is `materialize` plus the bytes, at a ref's tip or a commit,
/// fresh and from the cache alike; over its limit the bytes stay out.
#[tokio::test]
async fn read_answers_a_refs_tip_with_its_bytes_up_to_the_limit() {
    let (svc, tenant) = service();
    let ids = make(&svc, &tenant, &linear(&svc, "raw", &[D, D, D])).await;
    let name: crate::id::RefName = "sessions/s".parse().unwrap();
    svc.set_ref(&tenant, &name, &ids[1], None).await.unwrap();
    let whole = b"raw part 0\nraw part 1\n".to_vec();

    let context = || ReadOf::Context {
        stop: Stop::Root,
        format: None,
    };
    let read = |target: ReadTarget, limit: u64| svc.read(&tenant, target, context(), limit);
    let fresh = read(ReadTarget::Ref(name.clone()), 1024).await.unwrap();
    assert_eq!(fresh.commit, Some(ids[1]));
    assert!(!fresh.materialization.cached);
    assert_eq!(fresh.bytes.as_deref(), Some(&whole[..]));
    svc.flush_cache_writes().await;
    let cached = read(ReadTarget::Commit(ids[1]), 1024).await.unwrap();
    assert!(cached.materialization.cached);
    assert_eq!(cached.bytes.as_deref(), Some(&whole[..]));
    assert_eq!(cached.materialization.result, fresh.materialization.result);

    let over = read(ReadTarget::Commit(ids[2]), 10).await.unwrap();
    assert_eq!(over.bytes, None, "33 bytes are over a limit of 10");
    assert_eq!(over.materialization.result.size, 33);

    // A delta read: the commit's own bytes, nothing built or cached.
    let own = svc
        .read(&tenant, ReadTarget::Ref(name.clone()), OWN_DELTA, 1024)
        .await
        .unwrap();
    assert_eq!(own.commit, Some(ids[1]));
    assert_eq!(own.bytes.as_deref(), Some(&b"raw part 1\n"[..]));
    assert_eq!(own.materialization.result.size, 11);
    let key = MaterializeKey {
        commit: ids[0],
        stop: Stop::Root,
        format: fid("raw"),
    };
    svc.read(&tenant, ReadTarget::Commit(ids[0]), OWN_DELTA, 1024)
        .await
        .unwrap();
    svc.flush_cache_writes().await;
    assert_eq!(entry(&svc, &tenant, &key).await, None, "nothing was cached");

    let e = read(ReadTarget::Commit(CommitId::from_bytes([9; 16])), 1024)
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (crate::error::ErrorKind::NotFound, Some("commit"))
    );
}

/// Seed 000's fresh start: a context read of no commit (`Fresh`), or of a
/// ref with no commit yet, answers the empty context in the format asked,
/// with no commit and nothing written; a wrong commit id and a delta read
/// of nothing are still errors, each naming its field.
#[tokio::test]
async fn a_read_of_no_commit_is_the_empty_context_and_a_wrong_id_is_not_found() {
    use crate::error::ErrorKind;
    let (svc, tenant) = service();
    let context = |format: Option<&str>| ReadOf::Context {
        stop: Stop::Compaction,
        format: format.map(fid),
    };
    let missing: crate::id::RefName = "sessions/none".parse().unwrap();
    for target in [ReadTarget::Fresh, ReadTarget::Ref(missing.clone())] {
        for (format, empty) in [
            (None, &b""[..]),
            (Some("raw"), b""),
            (Some("anthropic-messages-v1"), b"[]"),
            (Some("claude-code-v1"), b""),
        ] {
            let r = svc
                .read(&tenant, target.clone(), context(format), 1024)
                .await
                .unwrap();
            assert_eq!(r.commit, None, "{target:?} {format:?}");
            assert_eq!(r.parent, None);
            assert_eq!(r.bytes.as_deref(), Some(empty), "{target:?} {format:?}");
            let m = &r.materialization;
            assert_eq!(
                (m.result.size, m.result.message_count, m.result.token_count),
                (empty.len() as u64, 0, 0)
            );
            assert_eq!(m.result.artifact_ref, ArtifactRef::of(empty));
            assert!(!m.cached);
        }
        // Even under a content limit of 0: the empty context is inline.
        let r = svc
            .read(
                &tenant,
                target.clone(),
                context(Some("anthropic-messages-v1")),
                0,
            )
            .await
            .unwrap();
        assert_eq!(r.bytes.as_deref(), Some(&b"[]"[..]));
        let e = svc
            .read(
                &tenant,
                target.clone(),
                context(Some("no-such-format")),
                1024,
            )
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some("format"))
        );
        let after = ReadOf::Context {
            stop: Stop::After(CommitId::from_bytes([7; 16])),
            format: None,
        };
        let e = svc
            .read(&tenant, target.clone(), after, 1024)
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some("stop"))
        );
    }
    // A delta read needs a commit: of a ref with none it is the ref's 404,
    // of nothing a 400 naming `commit`.
    let e = svc
        .read(&tenant, ReadTarget::Ref(missing.clone()), OWN_DELTA, 1024)
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::NotFound, Some("ref"))
    );
    let e = svc
        .read(&tenant, ReadTarget::Fresh, OWN_DELTA, 1024)
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("commit"))
    );
    // A wrong commit id is not a fresh start.
    let e = svc
        .read(
            &tenant,
            ReadTarget::Commit(CommitId::from_bytes([9; 16])),
            context(None),
            1024,
        )
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::NotFound, Some("commit"))
    );
    // Nothing was written: the ref still has no commit, and no empty
    // context was stored, in either area.
    let e = svc.get_ref(&tenant, &missing).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    for empty in [&b""[..], b"[]"] {
        let stored = svc
            .stores()
            .blobs
            .read(
                &tenant,
                &[
                    crate::store::BlobArea::Durable,
                    crate::store::BlobArea::Cache,
                ],
                &ArtifactRef::of(empty),
            )
            .await
            .unwrap();
        assert_eq!(stored, None, "{empty:?}");
    }
}
