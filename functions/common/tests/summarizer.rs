//! The `summarizer` function's handler driven with the EventBridge
//! scheduled-event fixture (tests/data/eventbridge): on the memory store
//! always, and on the aws stores against the emulator in a table of its own
//! (the handler summarizes every tenant with work, so it must not reach
//! into the commits other tests on the shared table are counting). The
//! service is built as `ctx_lambda::run` builds it, with the default
//! (extractive) summarizer.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use ctx_core::bootstrap::Backends;
use ctx_core::config::{Config, StoreKind};
use ctx_core::id::TenantId;
use ctx_core::store::conformance::{commit, fresh_tenant, t};
use ctx_core::{Commit, ErrorKind, Service, SystemClock};
use ctx_lambda::{Function, MIN_MARGIN, stop_claiming_at, summarize};
use serde_json::{Value, json};

#[path = "support/table.rs"]
mod table;

const SCHEDULED: &str = include_str!("../../../tests/data/eventbridge/scheduled-event.json");
const API_GATEWAY: &str = include_str!("../../../tests/data/apigw/base-event.json");

async fn service(config: &Config) -> Service {
    Backends::build(config, Function::Summarizer.needs())
        .await
        .expect("the summarizer's backends build")
        .into_service(Arc::new(SystemClock))
}

/// A chain of three commits of `tenant`, each delta stored.
async fn chain(service: &Service, tenant: &TenantId) -> Vec<Commit> {
    let stores = service.stores();
    let mut out: Vec<Commit> = Vec::new();
    for i in 0..3 {
        let body = format!("{tenant}: step {i} of the work\n");
        stores
            .blobs
            .put(tenant, bytes::Bytes::from(body.clone()))
            .await
            .unwrap();
        let c = commit(tenant, out.last(), t(i), "agent", body.as_bytes());
        stores.meta.put_commit(tenant, &c, None).await.unwrap();
        out.push(c);
    }
    out
}

fn scheduled() -> Value {
    serde_json::from_str(SCHEDULED).expect("the fixture is JSON")
}

fn in_seconds(service: &Service, secs: i64) -> DateTime<Utc> {
    service.clock().now() + Duration::seconds(secs)
}

/// Every step of the schedule's life on one service: refusals write
/// nothing, a deadline already near claims nothing, the fixture summarizes
/// both tenants' commits, and a second run finds nothing to do.
async fn the_schedule_summarizes_every_tenant(service: &Service) {
    let a = fresh_tenant("sched-a");
    let b = fresh_tenant("sched-b");
    let mut commits: Vec<(TenantId, Commit)> = Vec::new();
    for tenant in [&a, &b] {
        for c in chain(service, tenant).await {
            commits.push((tenant.clone(), c));
        }
    }
    assert_eq!(commits.len(), 6);
    let unsummarized = || async {
        let mut n = 0;
        for (tenant, c) in &commits {
            if service.show(tenant, &c.id).await.unwrap().summary.is_none() {
                n += 1;
            }
        }
        n
    };

    // Not a scheduled event: refused, naming the event, nothing written.
    for wrong in [
        serde_json::from_str::<Value>(API_GATEWAY).unwrap(),
        json!({"version": "0", "detail-type": "Object Created", "source": "aws.s3", "detail": {}}),
        json!({"version": "0", "detail-type": "Scheduled Event", "source": "my.app", "detail": {}}),
        json!("Scheduled Event"),
    ] {
        let e = summarize(service, wrong.clone(), in_seconds(service, 300))
            .await
            .expect_err("only a scheduled event runs the batch");
        assert_eq!(e.kind, ErrorKind::Invalid, "{wrong}: {e}");
        assert_eq!(e.field.as_deref(), Some("event"), "{wrong}: {e}");
        assert!(e.message.contains("EventBridge schedule"), "{e}");
    }
    assert_eq!(unsummarized().await, 6, "a refused event wrote nothing");

    // The deadline is within the margin already: nothing is claimed.
    let near = summarize(service, scheduled(), in_seconds(service, 5))
        .await
        .unwrap();
    assert_eq!(near["deadline_reached"], true, "{near}");
    assert_eq!(near["summarized"], 0, "{near}");
    assert_eq!(near["calls"], 0, "{near}");
    assert_eq!(unsummarized().await, 6, "nothing was claimed");
    for (tenant, c) in &commits {
        let c = service.show(tenant, &c.id).await.unwrap();
        assert!(
            !c.tags.contains_key(ctx_core::store::TAG_SUMMARIZING),
            "{} was not claimed: {:?}",
            c.id,
            c.tags
        );
    }

    // The fixture with a Lambda's five minutes: both tenants' commits.
    let report = summarize(service, scheduled(), in_seconds(service, 300))
        .await
        .unwrap();
    // The store holds no other work (the aws test has a table of its own).
    assert_eq!(report["summarized"], 6, "{report}");
    assert_eq!(report["calls"], 6, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    assert_eq!(report["deadline_reached"], false, "{report}");
    for (tenant, c) in &commits {
        let c = service.show(tenant, &c.id).await.unwrap();
        let summary = c.summary.as_deref().unwrap_or_default();
        assert!(summary.contains("step"), "{}: {summary:?}", c.id);
        assert_eq!(
            c.tags
                .get(ctx_core::store::TAG_SUMMARY_BY)
                .map(String::as_str),
            Some("extractive:v1"),
            "{}",
            c.id
        );
        assert!(!c.tags.contains_key(ctx_core::store::TAG_SUMMARIZING));
    }

    // A second run of the schedule finds nothing to do.
    let again = summarize(service, scheduled(), in_seconds(service, 300))
        .await
        .unwrap();
    assert_eq!(again["summarized"], 0, "{again}");
    assert_eq!(again["calls"], 0, "{again}");
}

#[tokio::test]
async fn the_schedule_on_the_memory_store() {
    let config = Config {
        store: StoreKind::Memory,
        ..Config::default()
    };
    the_schedule_summarizes_every_tenant(&service(&config).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_on_the_aws_stores() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let config = Config {
        branch_timer_arn: None,
        ..table::own_table(&config).await
    };
    let service = service(&config).await;
    the_schedule_summarizes_every_tenant(&service).await;
    // Only our two tenants were in this table.
    let again = summarize(&service, scheduled(), in_seconds(&service, 300))
        .await
        .unwrap();
    assert_eq!(again["skipped_claimed"], 0, "{again}");
}

#[test]
fn the_margin_is_a_tenth_of_the_time_left_and_at_least_ten_seconds() {
    let now = t(0);
    assert_eq!(
        stop_claiming_at(now, now + Duration::seconds(300)),
        now + Duration::seconds(270)
    );
    assert_eq!(
        stop_claiming_at(now, now + Duration::seconds(60)),
        now + Duration::seconds(50)
    );
    assert_eq!(MIN_MARGIN, Duration::seconds(10));
    // Already late: the stop is before now, so nothing is claimed.
    assert!(stop_claiming_at(now, now + Duration::seconds(3)) < now);
}
