//! The behaviours of a [`BlobStore`].

use bytes::Bytes;
use futures::future::join_all;

use super::fresh_tenant;
use crate::id::ArtifactRef;
use crate::store::{BlobArea, BlobStore, BlobStoreExt};

/// Runs every behaviour.
pub async fn run_all(blobs: &dyn BlobStore) {
    blobs_are_content_addressed(blobs).await;
    deleting_an_artifact(blobs).await;
}

/// Deletes: `true` once, then `false`; the bytes are gone, other tenants'
/// copies stay, and the same bytes can be stored again.
pub async fn deleting_an_artifact(blobs: &dyn BlobStore) {
    let a = fresh_tenant("del-a");
    let b = fresh_tenant("del-b");
    let bytes = Bytes::from_static(b"to be forgotten");
    let put = blobs.put(&a, bytes.clone()).await.expect("put a");
    blobs.put(&b, bytes.clone()).await.expect("put b");
    assert!(blobs.delete(&a, &put.artifact).await.expect("delete"));
    assert_eq!(blobs.get(&a, &put.artifact).await.expect("get"), None);
    assert_eq!(
        blobs
            .stat(&a, BlobArea::READABLE, &put.artifact)
            .await
            .expect("size")
            .map(|i| i.size),
        None
    );
    assert!(
        !blobs.delete(&a, &put.artifact).await.expect("delete again"),
        "a second delete finds nothing"
    );
    assert_eq!(
        blobs
            .get(&b, &put.artifact)
            .await
            .expect("get b")
            .as_deref(),
        Some(&bytes[..]),
        "another tenant's copy stays"
    );
    let again = blobs.put(&a, bytes.clone()).await.expect("put again");
    assert!(again.created, "deleted bytes are stored anew");
    assert_eq!(
        blobs.get(&a, &put.artifact).await.expect("get").as_deref(),
        Some(&bytes[..])
    );
    let absent = ArtifactRef::of(b"never stored");
    assert!(!blobs.delete(&a, &absent).await.expect("delete absent"));
}

/// Artifacts: idempotent puts, verified reads, sizes, tenant isolation.
pub async fn blobs_are_content_addressed(blobs: &dyn BlobStore) {
    let a = fresh_tenant("blob-a");
    let b = fresh_tenant("blob-b");
    let first = blobs
        .put(&a, Bytes::from_static(b"hello"))
        .await
        .expect("put");
    assert_eq!(first.artifact, ArtifactRef::of(b"hello"));
    assert_eq!(first.size, 5);
    assert!(first.created, "first put creates");
    let again = blobs
        .put(&a, Bytes::from_static(b"hello"))
        .await
        .expect("put again");
    assert_eq!(again.artifact, first.artifact);
    assert!(
        !again.created,
        "second put of the same bytes stores nothing"
    );
    assert_eq!(
        blobs
            .get(&a, &first.artifact)
            .await
            .expect("get")
            .as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(
        blobs
            .stat(&a, BlobArea::READABLE, &first.artifact)
            .await
            .expect("size")
            .map(|i| i.size),
        Some(5)
    );
    assert_eq!(
        blobs.get(&b, &first.artifact).await.expect("get b"),
        None,
        "other tenant sees nothing"
    );
    assert_eq!(
        blobs
            .stat(&b, BlobArea::READABLE, &first.artifact)
            .await
            .expect("size b")
            .map(|i| i.size),
        None
    );
    let empty = blobs.put(&a, Bytes::new()).await.expect("put empty");
    assert_eq!(
        blobs
            .get(&a, &empty.artifact)
            .await
            .expect("get empty")
            .as_deref(),
        Some(&b""[..])
    );
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let put_big = blobs
        .put(&a, Bytes::from(big.clone()))
        .await
        .expect("put big");
    assert_eq!(
        blobs
            .get(&a, &put_big.artifact)
            .await
            .expect("get big")
            .as_deref(),
        Some(&big[..])
    );
    // Concurrent writers of one artifact all succeed; exactly one creates it.
    let payload = Bytes::from_static(b"raced");
    let results = join_all((0..8).map(|_| blobs.put(&b, payload.clone()))).await;
    let created = results
        .iter()
        .filter(|r| r.as_ref().expect("raced put").created)
        .count();
    assert!(
        created <= 1,
        "{created} writers claim to have created one artifact"
    );
    assert_eq!(
        blobs
            .get(&b, &ArtifactRef::of(b"raced"))
            .await
            .expect("get")
            .as_deref(),
        Some(&b"raced"[..])
    );
}
