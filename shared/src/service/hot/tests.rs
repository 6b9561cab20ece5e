//! The hot result cache on its own: the budget, the LRU order, the lookup
//! by reference, purges and their generations, write-behind and flush.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use super::{ENTRY_OVERHEAD, Hot, HotCache};
use crate::commit::Stop;
use crate::format::translate::Tier;
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};

fn tenant(s: &str) -> TenantId {
    s.parse().unwrap()
}

fn key(n: u8) -> MaterializeKey {
    MaterializeKey {
        commit: format!("ctx-{n:032x}").parse::<CommitId>().unwrap(),
        stop: Stop::Root,
        format: "raw".parse().unwrap(),
    }
}

fn hot(bytes: &[u8]) -> Arc<Hot> {
    let mut hasher = blake3::Hasher::new();
    hasher.update(bytes);
    Arc::new(Hot {
        m: Materialized {
            artifact_ref: ArtifactRef::of(bytes),
            size: bytes.len() as u64,
            message_count: 0,
            token_count: 0,
            tier: Tier::Native,
            fidelity: None,
        },
        bytes: Bytes::copy_from_slice(bytes),
        hasher,
    })
}

/// A budget of `n` results of 10 bytes.
fn tens(n: u64) -> u64 {
    n * (10 + ENTRY_OVERHEAD)
}

#[test]
fn entries_stay_within_the_budget_least_recently_used_dropped_first() {
    let c = HotCache::new(tens(3));
    let a = tenant("acme");
    assert!(c.insert(&a, &key(1), hot(&[1; 10]), 0));
    assert!(c.insert(&a, &key(2), hot(&[2; 10]), 0));
    assert!(c.insert(&a, &key(3), hot(&[3; 10]), 0));
    assert_eq!(c.held_bytes(), tens(3));
    // Key 1 used: key 2 is now the least recently used.
    assert!(c.get(&a, &key(1)).is_some());
    assert!(c.insert(&a, &key(4), hot(&[4; 10]), 0));
    assert_eq!(c.held_bytes(), tens(3));
    assert!(c.get(&a, &key(2)).is_none());
    for k in [1, 3, 4] {
        assert!(c.get(&a, &key(k)).is_some(), "key {k}");
    }
    // A larger one drops as many as it needs (two of three here).
    let big = (tens(2) - ENTRY_OVERHEAD) as usize;
    assert!(c.insert(&a, &key(5), hot(&vec![5; big]), 0));
    assert_eq!(c.held_bytes(), tens(3));
    assert_eq!(c.held(&a), 2);
    assert!(c.get(&a, &key(1)).is_none() && c.get(&a, &key(3)).is_none());
    assert!(c.get(&a, &key(4)).is_some());
    // Replacing an entry counts its bytes once.
    assert!(c.insert(&a, &key(5), hot(&[6; 20]), 0));
    assert_eq!(c.held_bytes(), tens(1) + 20 + ENTRY_OVERHEAD);
    assert_eq!(c.get(&a, &key(5)).unwrap().bytes, Bytes::from(vec![6; 20]));
}

#[test]
fn an_entry_larger_than_the_budget_is_not_held_and_a_zero_budget_holds_nothing() {
    let c = HotCache::new(tens(3));
    let a = tenant("acme");
    assert!(c.insert(&a, &key(1), hot(&[1; 10]), 0));
    let over = (tens(3) - ENTRY_OVERHEAD + 1) as usize;
    assert!(c.holds(over - 1));
    assert!(!c.holds(over));
    assert!(!c.insert(&a, &key(2), hot(&vec![2; over]), 0));
    assert!(c.get(&a, &key(2)).is_none());
    assert!(c.get(&a, &key(1)).is_some(), "nothing dropped for it");

    let off = HotCache::new(0);
    assert!(!off.enabled());
    assert!(!off.holds(0));
    assert!(!off.insert(&a, &key(1), hot(b""), 0));
    assert!(off.get(&a, &key(1)).is_none());
}

#[test]
fn results_are_found_by_reference_per_tenant_while_any_key_holds_them() {
    let c = HotCache::new(tens(10));
    let (a, b) = (tenant("acme"), tenant("bravo"));
    let h = hot(b"context");
    let r = h.m.artifact_ref;
    assert!(c.insert(&a, &key(1), h.clone(), 0));
    assert!(c.insert(&a, &key(2), h, 0));
    assert_eq!(c.bytes_of(&a, &r), Some(Bytes::from_static(b"context")));
    assert_eq!(c.bytes_of(&b, &r), None, "another tenant's");
    assert_eq!(c.bytes_of(&a, &ArtifactRef::of(b"other")), None);
    // Key 1 now names other bytes: key 2 still holds the first.
    assert!(c.insert(&a, &key(1), hot(b"newer"), 0));
    assert_eq!(c.bytes_of(&a, &r), Some(Bytes::from_static(b"context")));
    assert!(c.insert(&a, &key(2), hot(b"newest"), 0));
    assert_eq!(c.bytes_of(&a, &r), None);
}

#[tokio::test]
async fn a_purge_drops_the_tenants_entries_and_refuses_what_was_built_before_it() {
    let c = HotCache::new(tens(10));
    let (a, b) = (tenant("acme"), tenant("bravo"));
    let before = c.generation(&a);
    assert!(c.insert(&a, &key(1), hot(b"a1"), before));
    assert!(c.insert(&b, &key(1), hot(b"b1"), c.generation(&b)));
    c.purge(&a).await;
    assert!(c.get(&a, &key(1)).is_none());
    assert_eq!(c.bytes_of(&a, &ArtifactRef::of(b"a1")), None);
    assert!(c.get(&b, &key(1)).is_some(), "other tenants keep theirs");
    assert_eq!(c.held_bytes(), 2 + ENTRY_OVERHEAD);
    assert!(
        !c.insert(&a, &key(2), hot(b"a2"), before),
        "built before the purge"
    );
    assert!(c.insert(&a, &key(2), hot(b"a2"), c.generation(&a)));
}

#[tokio::test]
async fn purging_drops_what_was_built_during_the_work_even_when_it_fails() {
    let c = HotCache::new(tens(10));
    let a = tenant("acme");
    assert!(c.insert(&a, &key(1), hot(b"a1"), c.generation(&a)));
    let failed: crate::error::Result<()> = c
        .purging(&a, async {
            assert_eq!(c.held(&a), 0, "purged before the work");
            // A materialize running meanwhile holds its result.
            assert!(c.insert(&a, &key(2), hot(b"a2"), c.generation(&a)));
            Err(crate::error::Error::unavailable("the erase failed partway"))
        })
        .await;
    assert!(failed.is_err());
    assert_eq!(c.held(&a), 0, "and after it, although it failed");
}

/// A background write that counts its runs in `ran`.
fn counted(
    ran: &Arc<AtomicUsize>,
) -> impl std::future::Future<Output = crate::error::Result<()>> + Send + 'static {
    let ran = ran.clone();
    async move {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn write_behind_runs_unless_a_purge_comes_first_and_flush_waits_for_it() {
    let c = Arc::new(HotCache::new(tens(10)));
    let a = tenant("acme");
    let ran = Arc::new(AtomicUsize::new(0));
    assert!(
        c.write_behind(a.clone(), c.generation(&a), 10, counted(&ran))
            .is_none()
    );
    c.flush().await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // Held at the gate, then purged: it never writes.
    let gate = c.gate.write().await;
    assert!(
        c.write_behind(a.clone(), c.generation(&a), 10, counted(&ran))
            .is_none()
    );
    c.purge(&a).await;
    drop(gate);
    c.flush().await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // Another tenant's purge does not stop it.
    let gate = c.gate.write().await;
    assert!(
        c.write_behind(a.clone(), c.generation(&a), 10, counted(&ran))
            .is_none()
    );
    c.purge(&tenant("bravo")).await;
    drop(gate);
    c.flush().await;
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn pending_writes_hold_at_most_the_budget_and_a_refused_one_is_handed_back() {
    let c = Arc::new(HotCache::new(tens(10)));
    let a = tenant("acme");
    let ran = Arc::new(AtomicUsize::new(0));
    let gate = c.gate.write().await;
    let budget = usize::try_from(tens(10)).unwrap();
    let g = c.generation(&a);
    assert!(
        c.write_behind(a.clone(), g, budget - 5, counted(&ran))
            .is_none()
    );
    let refused = c.write_behind(a.clone(), g, 6, counted(&ran));
    let refused = refused.expect("over the budget: handed back");
    assert!(
        c.write_behind(a.clone(), g, 5, counted(&ran)).is_none(),
        "exactly the budget"
    );
    refused.await.unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "only the handed-back one ran"
    );
    drop(gate);
    c.flush().await;
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    // Finished writes give their bytes back.
    assert!(
        c.write_behind(a.clone(), g, budget, counted(&ran))
            .is_none()
    );
    c.flush().await;
    assert_eq!(ran.load(Ordering::SeqCst), 4);
}

/// The hot cache in the service, over the local stores (real files and
/// SQLite rows, so "stored" means a file and a row).
mod service {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::Hot;
    use crate::clock::ManualClock;
    use crate::commit::Stop;
    use crate::format::FormatId;
    use crate::format::canonical::{Block, Conversation, Message, Role};
    use crate::format::translate::Tier;
    use crate::id::{ArtifactRef, CommitId, TenantId};
    use crate::service::{Delta, NewCommit, Service};
    use crate::store::conformance::t;
    use crate::store::local::{LocalBlobStore, SqliteMetaStore};
    use crate::store::{BlobArea, MaterializeKey, Materialized, Stores};

    struct Fixture {
        svc: Service,
        files: LocalBlobStore,
        tenant: TenantId,
        _dir: tempfile::TempDir,
    }

    fn fixture() -> Fixture {
        fixture_with(crate::config::DEFAULT_HOT_CACHE_BYTES)
    }

    /// The fixture with a hot cache of `budget` bytes.
    fn fixture_with(budget: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let stores = Stores {
            blobs: Arc::new(LocalBlobStore::open(dir.path()).unwrap()),
            meta: Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
        };
        let svc =
            Service::new(stores, Arc::new(ManualClock::new(t(10_000)))).with_hot_cache(budget);
        Fixture {
            svc,
            files: LocalBlobStore::open(dir.path()).unwrap(),
            tenant: "acme".parse().unwrap(),
            _dir: dir,
        }
    }

    fn key(commit: CommitId, format: &FormatId) -> MaterializeKey {
        MaterializeKey {
            commit,
            stop: Stop::Root,
            format: format.clone(),
        }
    }

    impl Fixture {
        /// The materialization of `id` from the root in its own format.
        async fn root(&self, id: CommitId) -> crate::service::Materialization {
            self.svc
                .materialize(&self.tenant, &id, Stop::Root, None)
                .await
                .unwrap()
        }

        /// The session `s` of two raw turns, `one` and `two`.
        async fn one_two(&self, raw: &FormatId) -> Vec<CommitId> {
            self.chain(
                raw,
                &[Bytes::from_static(b"one\n"), Bytes::from_static(b"two\n")],
            )
            .await
        }

        /// A linear session `s` of `deltas` in `format`, oldest first.
        async fn chain(&self, format: &FormatId, deltas: &[Bytes]) -> Vec<CommitId> {
            let mut ids: Vec<CommitId> = Vec::new();
            for (i, d) in deltas.iter().enumerate() {
                let new = NewCommit {
                    parent: ids.last().copied(),
                    session_id: Some("s".parse().expect("a session id")),
                    created_at: Some(t(i as i64)),
                    ..NewCommit::new("agent".parse().unwrap(), "tpl", format.clone(), d.clone())
                };
                ids.push(
                    self.svc
                        .checkpoint(&self.tenant, new)
                        .await
                        .unwrap()
                        .commit
                        .id,
                );
            }
            ids
        }

        /// The stored cache of (`commit`, root, `format`): its row, and
        /// the bytes of the file it names (`None` for a missing file).
        async fn stored(
            &self,
            commit: CommitId,
            format: &FormatId,
        ) -> Option<(Materialized, Option<Vec<u8>>)> {
            let m = self
                .svc
                .stores()
                .meta
                .get_materialized(&self.tenant, &key(commit, format))
                .await
                .unwrap()?;
            let file = self.cache_file(&m.artifact_ref);
            Some((m, file))
        }

        fn cache_file(&self, art: &ArtifactRef) -> Option<Vec<u8>> {
            let path = self
                .files
                .path_in(&self.tenant, BlobArea::Cache, art)
                .unwrap();
            std::fs::read(path).ok()
        }

        /// Holds `bytes` in memory as the result of (`commit`, root,
        /// `format`), replacing what a materialize held.
        fn plant(&self, commit: CommitId, format: &FormatId, bytes: &[u8]) {
            let hot = super::hot(bytes);
            let hot = Arc::new(Hot {
                m: Materialized {
                    message_count: 100,
                    ..hot.m.clone()
                },
                ..(*hot).clone()
            });
            let g = self.svc.hot.generation(&self.tenant);
            assert!(
                self.svc
                    .hot
                    .insert(&self.tenant, &key(commit, format), hot, g)
            );
        }
    }

    fn conversation(svc: &Service, format: &FormatId, n: usize) -> Bytes {
        let conv = Conversation {
            messages: vec![
                Message::new(Role::User, vec![Block::text(format!("question {n}"))]),
                Message::new(Role::Assistant, vec![Block::text(format!("answer {n}"))]),
            ],
        };
        svc.formats()
            .codec(format)
            .encode_canonical(&conv)
            .unwrap()
            .bytes
    }

    /// The resume loop's case: the parent's result is in memory, so the
    /// tip's is that plus the new delta (a planted parent shows it was
    /// used, not re-read), its reference the parent's hasher fed the tail;
    /// stored behind, file and row, once flushed.
    #[tokio::test]
    async fn the_tip_extends_its_parents_result_held_in_memory_and_is_stored_behind() {
        let f = fixture();
        let raw = FormatId::raw();
        let ids = f.one_two(&raw).await;
        f.plant(ids[0], &raw, b"PLANTED\n");
        let m = f.root(ids[1]).await;
        assert!(!m.cached);
        let want = b"PLANTED\ntwo\n";
        assert_eq!(m.result.artifact_ref, ArtifactRef::of(want));
        assert_eq!(m.result.size, want.len() as u64);
        assert_eq!(
            m.result.message_count, 100,
            "the planted count (raw counts none)"
        );
        assert_eq!(m.result.tier, Tier::Native);
        f.svc.flush_cache_writes().await;
        let (row, file) = f.stored(ids[1], &raw).await.expect("the row is stored");
        assert_eq!(row, m.result);
        assert_eq!(file.as_deref(), Some(&want[..]));
    }

    /// A JSON-array result is not a byte prefix of its extension (the
    /// closing bracket moves): the extension is hashed whole.
    #[tokio::test]
    async fn a_json_array_result_held_in_memory_is_extended_and_hashed_whole() {
        let f = fixture();
        let chat: FormatId = "openai-chat-v1".parse().unwrap();
        let deltas = [
            conversation(&f.svc, &chat, 0),
            conversation(&f.svc, &chat, 1),
        ];
        let ids = f.chain(&chat, &deltas).await;
        let planted = conversation(&f.svc, &chat, 7);
        f.plant(ids[0], &chat, &planted);
        let m = f.root(ids[1]).await;
        let codec = f.svc.formats().codec(&chat).clone();
        let want = codec.concat(&[planted, deltas[1].clone()]).unwrap();
        assert_eq!(m.result.artifact_ref, ArtifactRef::of(&want));
        let got = f
            .svc
            .download_artifact(&f.tenant, &m.result.artifact_ref)
            .await
            .unwrap();
        assert_eq!(got, want);
    }

    /// Before its write lands a result held in memory answers a repeat
    /// (as a cache hit), a download of its reference, and a checkpoint
    /// naming it; nothing is stored until the write runs.
    #[tokio::test]
    async fn a_result_not_stored_yet_is_served_from_memory() {
        let f = fixture();
        let raw = FormatId::raw();
        let ids = f.one_two(&raw).await;
        let gate = f.svc.hot.gate.write().await;
        let first = f.root(ids[1]).await;
        assert!(!first.cached);
        let art = first.result.artifact_ref;
        assert!(f.stored(ids[1], &raw).await.is_none(), "not stored yet");
        assert_eq!(f.cache_file(&art), None);
        let again = f.root(ids[1]).await;
        assert!(again.cached);
        assert_eq!(again.result, first.result);
        let bytes = f.svc.download_artifact(&f.tenant, &art).await.unwrap();
        assert_eq!(&bytes[..], b"one\ntwo\n");
        // A checkpoint naming the result copies it into the durable area.
        let named = NewCommit {
            delta: Delta::Stored(art),
            ..NewCommit::new("agent".parse().unwrap(), "tpl", raw.clone(), Bytes::new())
        };
        let c = f.svc.checkpoint(&f.tenant, named).await.unwrap();
        assert_eq!(c.commit.artifact_ref, art);
        drop(gate);
        f.svc.flush_cache_writes().await;
        let (row, file) = f.stored(ids[1], &raw).await.expect("stored now");
        assert_eq!(row, first.result);
        assert_eq!(file.as_deref(), Some(&b"one\ntwo\n"[..]));
    }

    /// When the writes already pending hold the budget's worth of bytes,
    /// a new result is stored before it is answered (memory does not grow
    /// with a slow disk).
    #[tokio::test]
    async fn a_result_past_the_pending_budget_is_stored_before_the_answer() {
        let turn = |c: u8, n: usize| Bytes::from(vec![c; n]);
        // Each result fits the budget alone; the two pending together not.
        let f = fixture_with(4096 + super::super::ENTRY_OVERHEAD);
        let raw = FormatId::raw();
        let ids = f.chain(&raw, &[turn(b'a', 3072), turn(b'b', 1024)]).await;
        let gate = f.svc.hot.gate.write().await;
        f.root(ids[0]).await;
        assert!(f.stored(ids[0], &raw).await.is_none(), "written behind");
        let second = f.root(ids[1]).await;
        let (row, file) = f
            .stored(ids[1], &raw)
            .await
            .expect("stored before the answer");
        assert_eq!(row, second.result);
        assert_eq!(file.map(|b| b.len()), Some(4096));
        drop(gate);
        f.svc.flush_cache_writes().await;
        assert!(
            f.stored(ids[0], &raw).await.is_some(),
            "the pending one landed"
        );
    }

    /// What an erase leaves when a result of the erased commits is still
    /// waiting to be stored: no file, no row, nothing in memory.
    async fn erase_while_pending(erase: impl AsyncFnOnce(&Fixture)) {
        let f = fixture();
        let raw = FormatId::raw();
        let ids = f.one_two(&raw).await;
        let gate = f.svc.hot.gate.write().await;
        let m = f.root(ids[1]).await;
        assert_eq!(f.svc.hot.held(&f.tenant), 1);
        erase(&f).await;
        assert_eq!(f.svc.hot.held(&f.tenant), 0);
        drop(gate);
        f.svc.flush_cache_writes().await;
        assert!(f.stored(ids[1], &raw).await.is_none(), "no row");
        assert_eq!(f.cache_file(&m.result.artifact_ref), None, "no file");
        let gone = f
            .svc
            .download_artifact(&f.tenant, &m.result.artifact_ref)
            .await
            .unwrap_err();
        assert_eq!(gone.kind, crate::ErrorKind::NotFound, "{gone}");
    }

    #[tokio::test]
    async fn a_session_erase_stops_a_pending_write_and_drops_the_held_result() {
        erase_while_pending(async |f: &Fixture| {
            let e = f
                .svc
                .erase_session(&f.tenant, &"s".parse().unwrap(), false)
                .await
                .unwrap();
            assert_eq!(e.commits, 2);
        })
        .await;
    }

    #[tokio::test]
    async fn a_tenant_erase_stops_a_pending_write_and_drops_the_held_result() {
        erase_while_pending(async |f: &Fixture| {
            f.svc.erase_tenant(&f.tenant, None, |_| {}).await.unwrap();
        })
        .await;
    }
}
