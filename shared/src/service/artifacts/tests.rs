//! Small deltas inline with their commit, on the memory store and on the
//! embedded store (SQLite + filesystem): which are inline (below, at and
//! above the limit), that materializing them gives the same bytes as with
//! none inline, and that every reader that has only the reference (a
//! download, a checkpoint naming it, erase, garbage collection) still
//! finds or keeps them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::clock::{Clock, ManualClock};
use crate::commit::Stop;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::service::{Delta, GcOptions, LifecycleSettings, Limits, NewCommit, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobArea, Stores};

/// The inline limit of these tests.
const LIMIT: usize = 64;

/// A service over `stores` storing deltas of at most `limit` bytes inline.
fn service(stores: Stores, limit: usize) -> Service {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(t(10_000)));
    Service::new(stores, clock)
        .with_limits(Limits {
            inline_delta_bytes: limit,
            ..Limits::default()
        })
        .with_lifecycle(LifecycleSettings {
            cache_budget: None,
            gc_grace: Duration::ZERO,
            ..LifecycleSettings::default()
        })
}

fn memory() -> Stores {
    Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    }
}

#[cfg(feature = "local")]
fn local(dir: &std::path::Path) -> Stores {
    Stores {
        blobs: Arc::new(crate::store::local::LocalBlobStore::open(dir).unwrap()),
        meta: Arc::new(crate::store::local::SqliteMetaStore::open(dir).unwrap()),
    }
}

fn tenant() -> TenantId {
    "acme".parse().unwrap()
}

/// Deltas below, at and above the limit (and empty), each a distinct byte.
fn deltas() -> Vec<Vec<u8>> {
    [1, LIMIT - 1, LIMIT, LIMIT + 1, 0, 3 * LIMIT, LIMIT]
        .iter()
        .enumerate()
        .map(|(i, &n)| vec![b'a' + i as u8; n])
        .collect()
}

/// Checkpoints `deltas` as one chain of session `s1`; the commit ids.
async fn chain(svc: &Service, deltas: &[Vec<u8>]) -> Vec<CommitId> {
    let mut ids: Vec<CommitId> = Vec::new();
    for (i, d) in deltas.iter().enumerate() {
        let new = NewCommit {
            parent: ids.last().copied(),
            session_id: Some("s1".parse().expect("a session id")),
            created_at: Some(t(i as i64)),
            ..NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                FormatId::raw(),
                Bytes::from(d.clone()),
            )
        };
        ids.push(svc.checkpoint(&tenant(), new).await.unwrap().commit.id);
    }
    ids
}

/// What each backend must show: the deltas of at most the limit are
/// inline and not in the blob store, larger ones the other way round; the
/// materialization is byte-identical to the same chain with nothing
/// inline; each delta downloads by its reference.
async fn inline_up_to_the_limit(stores: Stores, plain: Stores) {
    let svc = service(stores.clone(), LIMIT);
    let none_inline = service(plain, 0);
    let deltas = deltas();
    let ids = chain(&svc, &deltas).await;
    let plain_ids = chain(&none_inline, &deltas).await;
    assert_eq!(ids, plain_ids, "where the bytes are does not change ids");
    let a = tenant();
    for (id, d) in ids.iter().zip(&deltas) {
        let c = stores.meta.get_commit(&a, id).await.unwrap().unwrap();
        let art = ArtifactRef::of(d);
        assert_eq!(c.artifact_ref, art);
        assert_eq!(c.artifact_size, d.len() as u64);
        let in_blobs = stores
            .blobs
            .stat(&a, BlobArea::READABLE, &art)
            .await
            .unwrap()
            .map(|i| i.size);
        if d.len() <= LIMIT {
            assert_eq!(
                c.inline.as_deref(),
                Some(&d[..]),
                "{} bytes inline",
                d.len()
            );
            assert_eq!(in_blobs, None, "{} bytes: no blob", d.len());
        } else {
            assert_eq!(c.inline, None, "{} bytes not inline", d.len());
            assert_eq!(in_blobs, Some(d.len() as u64));
        }
        assert_eq!(svc.download_artifact(&a, &art).await.unwrap(), &d[..]);
    }
    let tip = ids.last().unwrap();
    let m = svc.materialize(&a, tip, Stop::Root, None).await.unwrap();
    let pm = none_inline
        .materialize(&a, tip, Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(m.result, pm.result, "the same materialization");
    let joined = svc
        .download_artifact(&a, &m.result.artifact_ref)
        .await
        .unwrap();
    assert_eq!(joined, deltas.concat());
    // Incremental too: from each commit's parent's cached result.
    for (i, id) in ids.iter().enumerate() {
        let m = svc.materialize(&a, id, Stop::Root, None).await.unwrap();
        let bytes = svc
            .download_artifact(&a, &m.result.artifact_ref)
            .await
            .unwrap();
        assert_eq!(bytes, deltas[..=i].concat(), "materialized at {i}");
    }
}

#[tokio::test]
async fn memory_stores_deltas_up_to_the_limit_inline() {
    inline_up_to_the_limit(memory(), memory()).await;
}

#[cfg(feature = "local")]
#[tokio::test]
async fn the_embedded_store_stores_deltas_up_to_the_limit_inline() {
    let (x, y) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    inline_up_to_the_limit(local(x.path()), local(y.path())).await;
}

/// A checkpoint naming by reference an artifact that another commit holds
/// only inline is accepted; the new commit's bytes then survive the erase
/// of the first commit's session and a collection.
async fn a_reference_to_inline_bytes_outlives_their_commit(stores: Stores) {
    let svc = service(stores.clone(), LIMIT);
    let a = tenant();
    let first = chain(&svc, &[b"small and inline".to_vec()]).await[0];
    let art = ArtifactRef::of(b"small and inline");
    let named = NewCommit {
        session_id: Some("s2".parse().expect("a session id")),
        delta: Delta::Stored(art),
        created_at: Some(t(100)),
        ..NewCommit::new("agent".parse().unwrap(), "tpl", FormatId::raw(), "")
    };
    let second = svc.checkpoint(&a, named).await.unwrap().commit;
    assert_eq!(second.artifact_ref, art);
    assert_ne!(second.id, first);
    // Garbage collection keeps what commits name and finds no orphan.
    let gc = svc.gc(&a, &GcOptions::default()).await.unwrap();
    assert!(gc.removed.is_empty(), "{gc:?}");
    let s1: SessionId = "s1".parse().unwrap();
    let erased = svc.erase_session(&a, &s1, false).await.unwrap();
    assert_eq!(erased.commits, 1);
    assert_eq!(stores.meta.get_commit(&a, &first).await.unwrap(), None);
    let m = svc
        .materialize(&a, &second.id, Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(
        svc.download_artifact(&a, &m.result.artifact_ref)
            .await
            .unwrap(),
        &b"small and inline"[..]
    );
    assert_eq!(
        svc.download_artifact(&a, &art).await.unwrap(),
        &b"small and inline"[..]
    );
    // Erasing the second session leaves no copy behind.
    let s2: SessionId = "s2".parse().unwrap();
    svc.erase_session(&a, &s2, false).await.unwrap();
    assert_eq!(
        stores
            .blobs
            .stat(&a, BlobArea::READABLE, &art)
            .await
            .unwrap()
            .map(|i| i.size),
        None
    );
    assert!(svc.download_artifact(&a, &art).await.is_err());
}

#[tokio::test]
async fn memory_a_reference_to_inline_bytes_outlives_their_commit() {
    a_reference_to_inline_bytes_outlives_their_commit(memory()).await;
}

#[cfg(feature = "local")]
#[tokio::test]
async fn embedded_a_reference_to_inline_bytes_outlives_their_commit() {
    let dir = tempfile::tempdir().unwrap();
    a_reference_to_inline_bytes_outlives_their_commit(local(dir.path())).await;
}

/// Inline bytes that do not hash to the commit's reference are refused,
/// never returned.
#[tokio::test]
async fn inline_bytes_are_verified() {
    let stores = memory();
    let svc = service(stores.clone(), LIMIT);
    let a = tenant();
    let id = chain(&svc, &[b"good".to_vec()]).await[0];
    let mut c = stores.meta.get_commit(&a, &id).await.unwrap().unwrap();
    c.inline = Some(Bytes::from_static(b"evil"));
    let e = svc.artifact_of(&a, &c).await.unwrap_err();
    assert_eq!(e.kind, crate::ErrorKind::Internal, "{e}");
    assert!(e.message.contains("failed verification"), "{}", e.message);
}

/// A commit read without its inline bytes (a copy kept elsewhere) still
/// reads them: from its row, when the blob store does not have them.
#[tokio::test]
async fn a_commit_without_its_inline_bytes_reads_them_from_its_row() {
    let stores = memory();
    let svc = service(stores.clone(), LIMIT);
    let a = tenant();
    let id = chain(&svc, &[b"kept in the row".to_vec()]).await[0];
    let mut c = stores.meta.get_commit(&a, &id).await.unwrap().unwrap();
    c.inline = None;
    assert_eq!(
        svc.artifact_of(&a, &c).await.unwrap(),
        &b"kept in the row"[..]
    );
}
