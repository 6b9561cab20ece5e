//! The behaviours of a [`BlobStore`].

use bytes::Bytes;
use futures::future::join_all;

use super::fresh_tenant;
use crate::id::ArtifactRef;
use crate::store::{BlobStore, BlobStoreExt};

/// Runs every behaviour.
pub async fn run_all(blobs: &dyn BlobStore) {
    blobs_are_content_addressed(blobs).await;
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
        blobs.size(&a, &first.artifact).await.expect("size"),
        Some(5)
    );
    assert_eq!(
        blobs.get(&b, &first.artifact).await.expect("get b"),
        None,
        "other tenant sees nothing"
    );
    assert_eq!(blobs.size(&b, &first.artifact).await.expect("size b"), None);
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
