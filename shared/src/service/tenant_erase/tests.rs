//! The tenant erase through the service over the memory stores: counts,
//! the other tenant whole (it still materializes), tokens of the erased
//! tenant revoked first, idempotence, and an interrupted erase finished by
//! a re-run.

use crate::store::Commits;
use std::sync::Arc;

use bytes::Bytes;

use crate::clock::ManualClock;
use crate::commit::Stop;
use crate::format::FormatId;
use crate::id::{CommitId, Hash, RefName, TenantId};
use crate::service::{NewCommit, Service, TenantErased};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobArea, BlobStore, Lifecycle, RefMove, Stores, TenantRecords, TokenStore};

struct Fixture {
    svc: Service,
    blobs: Arc<MemoryBlobStore>,
    meta: Arc<MemoryMetaStore>,
}

fn fixture() -> Fixture {
    let blobs = Arc::new(MemoryBlobStore::new());
    let meta = Arc::new(MemoryMetaStore::new());
    let svc = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        Arc::new(ManualClock::new(t(0))),
    )
    // Deltas as blobs: what these tests count.
    .with_limits(crate::service::Limits {
        inline_delta_bytes: 0,
        ..Default::default()
    });
    Fixture { svc, blobs, meta }
}

fn tenant(s: &str) -> TenantId {
    s.parse().unwrap()
}

/// Two commits in session `s` (moving `sessions/s`), materialized in its
/// own format and translated; a token; the tip.
async fn fill(f: &Fixture, tenant: &TenantId, text: &str) -> CommitId {
    let mut parent = None;
    for (i, line) in [format!("user: {text}\n"), "assistant: ok\n".into()]
        .into_iter()
        .enumerate()
    {
        let name: RefName = "sessions/s".parse().unwrap();
        let new = NewCommit {
            parent,
            session_id: Some("s".parse().expect("a session id")),
            created_at: Some(t(i as i64)),
            ref_move: Some(RefMove {
                name,
                expected: parent,
            }),
            ..NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                FormatId::raw(),
                Bytes::from(line),
            )
        };
        parent = Some(f.svc.checkpoint(tenant, new).await.unwrap().commit.id);
    }
    let tip = parent.unwrap();
    f.svc
        .materialize(tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    f.svc
        .materialize(
            tenant,
            &tip,
            Stop::Root,
            Some("openai-chat-v1".parse().unwrap()),
        )
        .await
        .unwrap();
    f.svc.flush_cache_writes().await;
    f.meta
        .add_token(&Hash::of(tenant.as_str().as_bytes()), tenant, t(0))
        .await
        .unwrap();
    tip
}

#[tokio::test]
async fn erasing_a_tenant_removes_everything_of_it_and_nothing_else() {
    let f = fixture();
    let (acme, other) = (tenant("acme"), tenant("other"));
    let gone = fill(&f, &acme, "secret").await;
    let kept = fill(&f, &other, "kept").await;
    let mut seen = Vec::new();
    let erased = f
        .svc
        .erase_tenant(&acme, Some(f.meta.as_ref()), |p| seen.push(p.clone()))
        .await
        .unwrap();
    assert_eq!(erased.tenant, acme);
    assert_eq!(erased.tokens, 1);
    assert_eq!(erased.records.commits, 2);
    assert_eq!(erased.records.refs, 1);
    assert_eq!(erased.records.cache, 2);
    // Two deltas, the joined result, the translation.
    assert_eq!(erased.blobs, 4);
    // Progress came step by step, the tokens first.
    assert_eq!(seen.first().map(|p| p.tokens), Some(1));
    assert_eq!(seen.first().map(|p| p.records.total()), Some(0));
    assert_eq!(seen.last().map(|p| p.blobs), Some(4));

    assert!(f.meta.get_commit(&acme, &gone).await.unwrap().is_none());
    for area in BlobArea::ALL {
        assert!(
            f.blobs
                .list(&acme, area, None, 10)
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert_eq!(
        f.meta.tenant_for(&Hash::of(b"acme")).await.unwrap(),
        None,
        "the token is revoked"
    );
    // The other tenant still materializes, and keeps its token.
    assert_eq!(
        f.svc.materialize_to_bytes(&other, &kept).await,
        b"user: kept\nassistant: ok\n"
    );
    assert_eq!(
        f.meta.tenant_for(&Hash::of(b"other")).await.unwrap(),
        Some(other.clone())
    );
    // Again: nothing.
    let again = f
        .svc
        .erase_tenant(&acme, Some(f.meta.as_ref()), |_| {})
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(
        again,
        TenantErased {
            tenant: acme,
            tokens: 0,
            records: TenantRecords::default(),
            blobs: 0,
            reclaimed_bytes: 0,
        }
    );
}

#[tokio::test]
async fn an_erase_stopped_after_its_tokens_and_part_of_its_bytes_is_finished_by_a_rerun() {
    let f = fixture();
    let acme = tenant("acme");
    fill(&f, &acme, "secret").await;
    // The first run got as far as the tokens and one artifact.
    f.meta.revoke_tenant(&acme).await.unwrap();
    assert_eq!(f.blobs.erase_tenant(&acme, 1).await.unwrap(), 1);
    let rest = f
        .svc
        .erase_tenant(&acme, Some(f.meta.as_ref()), |_| {})
        .await
        .unwrap();
    assert_eq!(rest.tokens, 0);
    assert_eq!(rest.records.commits, 2);
    assert_eq!(rest.blobs, 3);
    for area in BlobArea::ALL {
        assert!(
            f.blobs
                .list(&acme, area, None, 10)
                .await
                .unwrap()
                .is_empty()
        );
    }
    assert!(f.meta.references(&acme).await.unwrap().durable.is_empty());
}

#[tokio::test]
async fn the_report_is_flat_json_with_every_count() {
    let r = TenantErased {
        tenant: tenant("acme"),
        tokens: 1,
        records: TenantRecords {
            commits: 2,
            refs: 3,
            cache: 4,
            agents: 5,
            branches: 6,
            other: 7,
        },
        blobs: 8,
        reclaimed_bytes: 9,
    };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "tenant": "acme", "tokens": 1, "commits": 2, "refs": 3, "cache": 4,
            "agents": 5, "branches": 6, "other": 7, "blobs": 8, "reclaimed_bytes": 9
        })
    );
    assert_eq!(serde_json::from_value::<TenantErased>(v).unwrap(), r);
}

impl Service {
    /// The root materialization of `id`'s bytes.
    async fn materialize_to_bytes(&self, tenant: &TenantId, id: &CommitId) -> Vec<u8> {
        let m = self
            .materialize(tenant, id, Stop::Root, None)
            .await
            .unwrap();
        self.flush_cache_writes().await;
        self.stores
            .blobs
            .read(tenant, &[BlobArea::Cache], &m.result.artifact_ref)
            .await
            .unwrap()
            .or(self
                .stores
                .blobs
                .read(tenant, BlobArea::READABLE, &m.result.artifact_ref)
                .await
                .unwrap())
            .unwrap()
            .to_vec()
    }
}
