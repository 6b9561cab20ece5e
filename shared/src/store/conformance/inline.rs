//! Small deltas inline: a commit may carry its artifact's bytes
//! ([`Commit::inline`]); every read of the commit returns them unchanged,
//! [`Lifecycle::clear_inline`](crate::store::Lifecycle::clear_inline)
//! drops them and keeps the commit, and a delete takes them with the
//! commit. Backends may store them packed
//! (`store::packed`); what reads back is always the bytes put.

use bytes::Bytes;

use super::{commit, fresh_tenant, put, t};
use crate::commit::Commit;
use crate::commit::limits::DEFAULT_INLINE_DELTA;
use crate::id::{CommitId, SessionId};
use crate::store::{MetaStore, MetadataPatch, PutCommit};

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    every_read_returns_the_inline_bytes(meta).await;
    clear_inline_drops_the_bytes_and_keeps_the_commit(meta).await;
    a_deleted_commit_takes_its_inline_bytes(meta).await;
    compressible_and_incompressible_bytes_read_back_unchanged(meta).await;
}

/// A commit of session `s1` whose bytes `body` are inline.
fn inline(tenant: &crate::id::TenantId, parent: Option<&Commit>, at: i64, body: &[u8]) -> Commit {
    let mut c = commit(tenant, parent, t(at), "p", body);
    c.session_id = Some("s1".parse().expect("a session id"));
    c.inline = Some(Bytes::copy_from_slice(body));
    c
}

fn session() -> SessionId {
    "s1".parse().expect("valid session")
}

fn by_id(mut cs: Vec<Commit>) -> Vec<Commit> {
    cs.sort_by_key(|c| c.id);
    cs
}

/// A commit written with inline bytes (one byte, and the default limit's
/// worth) reads back with them from every read: by id, its run, its
/// session, its parent's children, its principal's timeline, the summary
/// queue, a metadata update, and a retried write; a commit without them
/// reads back without.
pub async fn every_read_returns_the_inline_bytes(meta: &dyn MetaStore) {
    let a = fresh_tenant("inline-reads");
    let big = vec![b'x'; DEFAULT_INLINE_DELTA];
    let root = put(meta, &a, &inline(&a, None, 0, b"r")).await;
    let mid = put(meta, &a, &inline(&a, Some(&root), 1, &big)).await;
    let mut plain = commit(&a, Some(&mid), t(2), "p", b"in the blob store");
    plain.session_id = Some("s1".parse().expect("a session id"));
    let plain = put(meta, &a, &plain).await;
    assert_eq!(root.inline.as_deref(), Some(&b"r"[..]));
    assert_eq!(mid.inline.as_deref(), Some(&big[..]));
    assert_eq!(plain.inline, None);
    let all = vec![root.clone(), mid.clone(), plain.clone()];

    for c in &all {
        let got = meta
            .get_commit(&a, &c.id)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(&got, c, "get_commit of {}", c.id);
    }
    let run = meta
        .lineage_run(&a, &root.lineage, 2, 10)
        .await
        .expect("lineage_run");
    assert_eq!(run, vec![plain.clone(), mid.clone(), root.clone()]);
    assert_eq!(
        by_id(meta.session_commits(&a, &session()).await.expect("session")),
        by_id(all.clone())
    );
    assert_eq!(
        meta.child_commits(&a, &root.id).await.expect("children"),
        vec![mid.clone()]
    );
    let principal = "p".parse().expect("valid principal");
    assert_eq!(
        meta.timeline_range(&a, &principal, None, t(10), 10, false)
            .await
            .expect("timeline"),
        all
    );
    let queue = meta.missing_summaries(&a, None, 10).await.expect("queue");
    assert_eq!(
        queue
            .items
            .into_iter()
            .map(|m| m.commit)
            .collect::<Vec<_>>(),
        all
    );
    let patched = meta
        .update_metadata(
            &a,
            &mid.id,
            &MetadataPatch {
                summary: Some(Some("s".into())),
                tags: None,
            },
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(patched.inline.as_deref(), Some(&big[..]));
    assert_eq!(
        meta.get_commit(&a, &mid.id)
            .await
            .expect("get")
            .expect("exists")
            .inline
            .as_deref(),
        Some(&big[..]),
        "a metadata update keeps the inline bytes"
    );
    let mut again = inline(&a, None, 0, b"r");
    again.inline = None;
    match meta.put_commit(&a, &again, None).await.expect("retry") {
        PutCommit::Existing(c) => assert_eq!(c.inline.as_deref(), Some(&b"r"[..])),
        PutCommit::Created(c) => panic!("{} was written twice", c.id),
    }
}

/// `clear_inline` drops a commit's inline bytes (true), keeps everything
/// else about it, and is false when there is nothing (left) to drop.
pub async fn clear_inline_drops_the_bytes_and_keeps_the_commit(meta: &dyn MetaStore) {
    let a = fresh_tenant("inline-clear");
    let b = fresh_tenant("inline-clear-b");
    let root = put(meta, &a, &inline(&a, None, 0, b"root")).await;
    let child = put(meta, &a, &inline(&a, Some(&root), 1, b"child")).await;
    assert!(
        !meta.clear_inline(&b, &root.id).await.expect("other tenant"),
        "another tenant cannot name it"
    );
    assert!(meta.clear_inline(&a, &root.id).await.expect("clear"));
    let cleared = meta
        .get_commit(&a, &root.id)
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(cleared.inline, None);
    assert_eq!(
        Commit {
            inline: root.inline.clone(),
            ..cleared.clone()
        },
        root,
        "only the inline bytes went"
    );
    let run = meta
        .lineage_run(&a, &root.lineage, 1, 10)
        .await
        .expect("run");
    assert_eq!(run, vec![child.clone(), cleared]);
    assert!(!meta.clear_inline(&a, &root.id).await.expect("again"));
    let missing: CommitId = commit(&a, None, t(9), "p", b"never").id;
    assert!(!meta.clear_inline(&a, &missing).await.expect("missing"));
    assert_eq!(
        meta.get_commit(&a, &child.id)
            .await
            .expect("get")
            .expect("kept")
            .inline
            .as_deref(),
        Some(&b"child"[..]),
        "the other commit keeps its bytes"
    );
}

/// Deleting a commit takes its inline bytes: one written again with the
/// same id but none reads back without them.
pub async fn a_deleted_commit_takes_its_inline_bytes(meta: &dyn MetaStore) {
    let a = fresh_tenant("inline-delete");
    let root = put(meta, &a, &inline(&a, None, 0, b"gone")).await;
    assert!(meta.delete_commit(&a, &root).await.expect("delete"));
    assert_eq!(meta.get_commit(&a, &root.id).await.expect("get"), None);
    let mut again = root.clone();
    again.inline = None;
    let back = put(meta, &a, &again).await;
    assert_eq!(back.inline, None);
    assert_eq!(
        meta.get_commit(&a, &root.id)
            .await
            .expect("get")
            .expect("exists")
            .inline,
        None
    );
}

/// Text-like bytes that compress well: a sentence repeated, with a counter
/// so that no two deltas are equal.
fn prose(n: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 64);
    let mut i = seed;
    while out.len() < n {
        out.extend_from_slice(
            format!("turn {i}: the agent read the file and called the tool again. ").as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

/// Bytes no compressor shrinks (a xorshift stream from `seed`).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Inline bytes that compress and bytes that do not, of sizes from 0 to
/// past the default inline limit (below, at and above it), and mixes of
/// noise and text on both sides of "compression saves an eighth", read
/// back identical from every read: by id, the run, the session.
pub async fn compressible_and_incompressible_bytes_read_back_unchanged(meta: &dyn MetaStore) {
    let a = fresh_tenant("inline-packed");
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for (k, n) in [
        0,
        1,
        5,
        64,
        5_500,
        DEFAULT_INLINE_DELTA - 1,
        DEFAULT_INLINE_DELTA,
        DEFAULT_INLINE_DELTA + 1,
    ]
    .into_iter()
    .enumerate()
    {
        bodies.push(prose(n, k as u64 * 1_000));
        bodies.push(noise(n, k as u64 + 1));
    }
    // Noise then text, from mostly noise to mostly text: packing saves
    // less than an eighth of the first ones and more of the last.
    for (k, text) in [200, 400, 600, 800, 1_000, 2_000].into_iter().enumerate() {
        let mut b = noise(4_000 - text, 100 + k as u64);
        b.extend(prose(text, 7_000 + k as u64 * 100));
        bodies.push(b);
    }
    let mut written: Vec<Commit> = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let c = inline(&a, written.last(), i as i64, body);
        let stored = put(meta, &a, &c).await;
        assert_eq!(stored.inline.as_deref(), Some(&body[..]), "delta {i}");
        written.push(stored);
    }
    for (c, body) in written.iter().zip(&bodies) {
        let got = meta
            .get_commit(&a, &c.id)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(
            got.inline.as_deref(),
            Some(&body[..]),
            "get_commit of a delta of {} bytes",
            body.len()
        );
        assert_eq!(&got, c);
    }
    let tip = written.last().expect("written");
    let mut run = meta
        .lineage_run(&a, &tip.lineage, tip.depth, 1_000)
        .await
        .expect("lineage_run");
    run.reverse();
    assert_eq!(run, written, "the run reads back every delta unchanged");
    assert_eq!(
        by_id(meta.session_commits(&a, &session()).await.expect("session")),
        by_id(written.clone())
    );
}
