//! The batch and the one-shot path over memory stores with summarizers
//! written here: budgets, deadline, back-off, force, no summarizer.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::error::ErrorKind;
use crate::store::conformance::{commit, summary_batch::CountingSummarizer, t};
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobStore, MetaStore, Stores};
use crate::summarize::Summary;

/// Fails every call, transiently or for good.
struct Failing {
    permanent: bool,
    calls: AtomicU64,
}

#[async_trait]
impl Summarizer for Failing {
    fn id(&self) -> String {
        "failing:v1".into()
    }
    async fn summarize(&self, _: &SummaryInput) -> Result<Summary, Failure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(if self.permanent {
            Failure::Permanent {
                reason: "malformed response".into(),
            }
        } else {
            Failure::Transient {
                reason: "429".into(),
                retry_after: Some(std::time::Duration::from_secs(600)),
            }
        })
    }
}

async fn setup(n: i64) -> (Service, TenantId, Vec<Commit>, Arc<ManualClock>) {
    let blobs = Arc::new(MemoryBlobStore::new());
    let meta = Arc::new(MemoryMetaStore::new());
    let tenant: TenantId = "acme".parse().unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let body = format!("delta {i}");
        blobs.put(&tenant, Bytes::from(body.clone())).await.unwrap();
        let c = commit(&tenant, None, t(i), "p", body.as_bytes());
        out.push(
            meta.put_commit(&tenant, &c, None)
                .await
                .unwrap()
                .commit()
                .clone(),
        );
    }
    let clock = Arc::new(ManualClock::new(t(1000)));
    let service = Service::new(Stores { blobs, meta }, clock.clone());
    (service, tenant, out, clock)
}

#[tokio::test]
async fn without_a_summarizer_the_batch_and_one_shot_are_unavailable() {
    let (service, tenant, commits, _) = setup(1).await;
    let e = service
        .summarize_batch(&BatchOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.message.contains("no summarizer"), "{e}");
    let e = service
        .summarize_one(&tenant, &commits[0].id, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
}

#[tokio::test]
async fn the_call_budget_the_limit_and_the_deadline_stop_claiming() {
    let (service, tenant, _, clock) = setup(10).await;
    let service = service.with_summarizer(Arc::new(CountingSummarizer::new()));
    let r = service
        .summarize_batch(&BatchOptions {
            max_calls: Some(3),
            concurrency: 2,
            ..BatchOptions::default()
        })
        .await
        .unwrap();
    assert_eq!((r.calls, r.summarized, r.budget_exhausted), (3, 3, true));
    let r = service
        .summarize_batch(&BatchOptions {
            tenant: Some(tenant.clone()),
            max_tokens: Some(5),
            concurrency: 1,
            ..BatchOptions::default()
        })
        .await
        .unwrap();
    // One call spends 5 tokens; the next claim sees the budget spent.
    assert_eq!((r.calls, r.budget_exhausted), (1, true), "{r:?}");
    let r = service
        .summarize_batch(&BatchOptions {
            deadline: Some(clock.now()),
            ..BatchOptions::default()
        })
        .await
        .unwrap();
    assert_eq!((r.calls, r.deadline_reached), (0, true), "{r:?}");
    let r = service
        .summarize_batch(&BatchOptions {
            limit: 2,
            ..BatchOptions::default()
        })
        .await
        .unwrap();
    assert_eq!((r.calls, r.budget_exhausted), (2, false), "{r:?}");
    let r = service
        .summarize_batch(&BatchOptions::default())
        .await
        .unwrap();
    assert_eq!((r.summarized, r.budget_exhausted), (4, false), "{r:?}");
}

#[tokio::test]
async fn failures_are_recorded_and_retried_after_their_back_off() {
    let (service, tenant, commits, clock) = setup(2).await;
    let failing = Arc::new(Failing {
        permanent: false,
        calls: AtomicU64::new(0),
    });
    let service = service.with_summarizer(failing.clone());
    let r = service
        .summarize_batch(&BatchOptions::default())
        .await
        .unwrap();
    assert_eq!((r.failed, r.calls), (2, 2), "{r:?}");
    let shown = service.show(&tenant, &commits[0].id).await.unwrap();
    assert_eq!(
        shown.tags.get(TAG_SUMMARY_ERROR).map(String::as_str),
        Some("429")
    );
    // Backing off: the next run calls nothing.
    let r = service
        .summarize_batch(&BatchOptions::default())
        .await
        .unwrap();
    assert_eq!(r.calls, 0, "{r:?}");
    // The endpoint asked for 10 minutes, more than the first back-off.
    clock.advance_micros(600 * 1_000_000);
    let r = service
        .summarize_batch(&BatchOptions::default())
        .await
        .unwrap();
    assert_eq!(r.calls, 2, "{r:?}");
    let page = service.missing_summaries(&tenant, None, 10).await.unwrap();
    assert_eq!(page.items[0].state.attempts, 2);
}

#[test]
fn back_off_grows_and_is_capped() {
    let transient = Failure::Transient {
        reason: "x".into(),
        retry_after: None,
    };
    let permanent = Failure::Permanent { reason: "x".into() };
    assert_eq!(retry_delay(&transient, 0), Duration::minutes(1));
    assert_eq!(retry_delay(&transient, 3), Duration::minutes(8));
    assert_eq!(retry_delay(&transient, 30), Duration::hours(6));
    assert_eq!(retry_delay(&permanent, 0), Duration::hours(1));
    assert_eq!(retry_delay(&permanent, 1), Duration::hours(4));
    assert_eq!(retry_delay(&permanent, 30), Duration::weeks(1));
}

#[tokio::test]
async fn one_shot_summarizes_refuses_a_summarized_commit_and_forces() {
    let (service, tenant, commits, _) = setup(1).await;
    let counting = Arc::new(CountingSummarizer::new());
    let service = service.with_summarizer(counting.clone());
    let id = commits[0].id;
    let c = service.summarize_one(&tenant, &id, false).await.unwrap();
    assert_eq!(c.summary.as_deref(), Some("summary of delta 0"));
    assert_eq!(
        c.tags.get(TAG_SUMMARY_BY).map(String::as_str),
        Some("counting:v1")
    );
    let e = service
        .summarize_one(&tenant, &id, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.field.as_deref(), Some("force"));
    service
        .update_metadata(&tenant, &id, Some(Some("mine".into())), None)
        .await
        .unwrap();
    let c = service.summarize_one(&tenant, &id, true).await.unwrap();
    assert_eq!(c.summary.as_deref(), Some("summary of delta 0"));
    assert_eq!(counting.calls().get("delta 0"), Some(&2));
    let missing = CommitId::from_bytes([1; 16]);
    let e = service
        .summarize_one(&tenant, &missing, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
}

#[tokio::test]
async fn one_shot_failure_is_recorded_and_answered_unavailable() {
    let (service, tenant, commits, _) = setup(1).await;
    let service = service.with_summarizer(Arc::new(Failing {
        permanent: true,
        calls: AtomicU64::new(0),
    }));
    let e = service
        .summarize_one(&tenant, &commits[0].id, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    let c = service.show(&tenant, &commits[0].id).await.unwrap();
    assert_eq!(
        c.tags.get(TAG_SUMMARY_ERROR).map(String::as_str),
        Some("malformed response")
    );
    // A person may ask again at once: the back-off binds only batches.
    let e = service
        .summarize_one(&tenant, &commits[0].id, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
}

/// A commit whose delta an eviction dropped cannot be summarized: asked
/// for it, the one-shot answers `Gone` naming the compaction, not that
/// another run holds it (issue 46, item 3).
#[tokio::test]
async fn summarizing_an_evicted_commit_answers_gone() {
    let (service, tenant, commits, _) = setup(2).await;
    let service = service.with_summarizer(Arc::new(CountingSummarizer::default()));
    service
        .stores
        .meta
        .mark_evicted(&tenant, &commits[1].id, &[commits[0].id])
        .await
        .unwrap();
    let e = service
        .summarize_one(&tenant, &commits[0].id, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Gone, "{e}");
    assert!(e.message.contains(&commits[1].id.to_string()), "{e}");
}
