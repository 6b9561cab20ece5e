//! The request-count report: how many S3 and DynamoDB requests each
//! operation costs, counted by [`RequestCounter`] on a service over the aws
//! backends. Printed by `cargo bench --bench aws_requests`; the test suite
//! asserts its bounds.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use chrono::Duration;

use super::{AwsConfig, AwsHooks, RequestCounter, connect};
use crate::clock::{Clock, IdSource, ManualClock};

use crate::error::Result;
use crate::format::FormatId;
use crate::id::{CommitId, TenantId};
use crate::service::{NewCommit, Service, Stop};
use crate::store::Stores;

/// One operation's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The operation, e.g. `materialize (cold)`.
    pub op: String,
    /// Chain depth of the tip (commits below it).
    pub depth: u64,
    /// Forks on the tip's path.
    pub forks: usize,
    /// Whether the (small) deltas were stored inline with their commits
    /// (the default), or in S3 (`CTX_INLINE_DELTA_BYTES=0`).
    pub inline: bool,
    /// Requests by (service, operation).
    pub counts: BTreeMap<(String, String), u64>,
}

impl Row {
    /// Requests to one service.
    pub fn total(&self, service: &str) -> u64 {
        self.counts
            .iter()
            .filter(|((s, _), _)| s == service)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of one operation.
    pub fn count(&self, operation: &str) -> u64 {
        self.counts
            .iter()
            .filter(|((_, o), _)| o == operation)
            .map(|(_, n)| n)
            .sum()
    }

    /// `PutObject×1, GetItem×2`.
    pub fn describe(&self, service: &str) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .filter(|((s, _), _)| s == service)
            .map(|((_, o), n)| format!("{o}×{n}"))
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    }
}

fn request(parent: Option<CommitId>, i: u64, principal: &str) -> NewCommit {
    NewCommit {
        parent,
        summary: Some(format!("turn {i}")),
        message_count: Some(1),
        ..NewCommit::new(
            principal.parse().expect("valid principal"),
            "report",
            FormatId::raw(),
            format!("turn {i}: some context the agent saw and said\n"),
        )
    }
}

/// A service over `stores` as the Lambdas run it (`template.yaml`): no
/// results held in memory, so each materialize has stored its result when
/// it answers. With results held they are stored behind the answer, and
/// what a count (or a test) then finds in the tables and the bucket would
/// depend on timing.
pub fn lambda_service(stores: Stores, clock: Arc<dyn Clock>) -> Service {
    Service::new(stores, clock).with_hot_cache(0)
}

/// A Lambda's service over `blobs` and `meta` storing small deltas
/// inline, or (`inline` false) none.
fn service(
    blobs: super::S3BlobStore,
    meta: super::DynamoMetaStore,
    clock: Arc<ManualClock>,
    inline: bool,
) -> Service {
    let limits = crate::service::Limits::default();
    lambda_service(
        Stores {
            blobs: Arc::new(blobs),
            meta: Arc::new(meta),
        },
        clock,
    )
    .with_limits(crate::service::Limits {
        inline_delta_bytes: if inline { limits.inline_delta_bytes } else { 0 },
        ..limits
    })
}

/// A service over the emulator whose every AWS request `counter` counts,
/// on a driven clock; the deltas inline, or (`inline` false) in S3. With
/// it the metadata store's source of randomness, which names fresh tenants,
/// and the branch store of the same table and client.
async fn counted(
    config: &AwsConfig,
    inline: bool,
) -> Result<(
    RequestCounter,
    Arc<ManualClock>,
    crate::service::Service,
    Arc<dyn IdSource>,
    super::DynamoBranchStore,
)> {
    let counter = RequestCounter::new();
    let hooks = AwsHooks {
        interceptor: Some(SharedInterceptor::new(counter.clone())),
        ..AwsHooks::default()
    };
    let (blobs, meta) = connect(config, hooks).await?;
    let clock = Arc::new(ManualClock::new(crate::clock::micros_to_time(
        1_790_000_000_000_000,
    )));
    let ids = meta.ids().clone();
    let branches = meta.branch_store();
    let service = service(blobs, meta, clock.clone(), inline);
    Ok((counter, clock, service, ids, branches))
}

/// A tenant no earlier run used, named from the store's `ids`.
fn fresh_tenant(ids: &dyn IdSource) -> Result<TenantId> {
    let mut nonce = [0u8; 6];
    ids.fill(&mut nonce);
    format!("report-{}", hex::encode(nonce)).parse()
}

/// Counts the requests of checkpoint, resolve, show, history(50) and cold
/// and warm materialize and the next turn's materialize at each depth,
/// with `forks` forks on the path; the (small) deltas inline with their
/// commits, or (`inline` false) in S3.
///
/// # Errors
/// Storage errors.
pub async fn request_counts(
    config: &AwsConfig,
    depths: &[u64],
    forks: usize,
    inline: bool,
) -> Result<Vec<Row>> {
    let (counter, clock, service, ids, _) = counted(config, inline).await?;
    let mut rows = Vec::new();
    for &depth in depths {
        let tenant = fresh_tenant(&*ids)?;
        let principal = "reporter";
        // Build the chain: `forks` + 1 segments, each after the first
        // starting at a commit whose run slot a decoy child already holds.
        let segment = (depth / (forks as u64 + 1)).max(1);
        let mut tip: Option<CommitId> = None;
        let mut made_forks = 0;
        for i in 0..=depth {
            if i > 0 && i % segment == 0 && made_forks < forks && i < depth {
                clock.advance_micros(1);
                let decoy = request(tip, 1_000_000 + i, "decoy");
                service.checkpoint(&tenant, decoy).await?;
                made_forks += 1;
            }
            clock.advance_micros(1_000);
            let c = service
                .checkpoint(&tenant, request(tip, i, principal))
                .await?;
            tip = Some(c.commit.id);
        }
        let tip = tip.expect("at least the root");
        let mut row = |op: &str, counts| {
            rows.push(Row {
                op: op.to_owned(),
                depth,
                forks: made_forks,
                inline,
                counts,
            })
        };
        clock.advance_micros(1_000);
        counter.reset();
        let next = service
            .checkpoint(&tenant, request(Some(tip), depth + 1, "other"))
            .await?
            .commit
            .id;
        row("checkpoint", counter.snapshot());
        counter.reset();
        service
            .resolve(
                &tenant,
                &principal.parse()?,
                Some(clock.now() + Duration::seconds(1)),
            )
            .await?;
        row("resolve", counter.snapshot());
        counter.reset();
        service.show(&tenant, &tip).await?;
        row("show", counter.snapshot());
        counter.reset();
        service.history(&tenant, &tip, 50).await?;
        row("history(50)", counter.snapshot());
        counter.reset();
        service.materialize(&tenant, &tip, Stop::Root, None).await?;
        row("materialize root (cold)", counter.snapshot());
        counter.reset();
        service.materialize(&tenant, &tip, Stop::Root, None).await?;
        row("materialize root (warm)", counter.snapshot());
        // The resume loop: the next turn's tip, its parent's context cached.
        counter.reset();
        service
            .materialize(&tenant, &next, Stop::Root, None)
            .await?;
        row("materialize root (next turn)", counter.snapshot());
    }
    Ok(rows)
}

/// SC-002's costs as counts: the requests of a branch create, of the
/// branch's `depth` checkpoints, and of its return (the summary appended
/// to the parent's chain, the memory extracted), on a service with
/// branching over the same table; one row each per depth: `branch
/// create`, `branch create (inject_memories)` (with that depth's memories
/// of earlier branches to search), `branch return`. The branch timer is
/// not counted here (on AWS a create adds one Step Functions
/// `StartExecution` and a return one `StopExecution`).
///
/// # Errors
/// As [`request_counts`].
pub async fn branch_request_counts(config: &AwsConfig, depths: &[u64]) -> Result<Vec<Row>> {
    use crate::auth::Caller;
    use crate::branch::scenarios::{append, new_branch, task, unthrottled};
    use crate::branch::{Branching, NoTimer, RuleScrubber};
    let (counter, _clock, service, ids, branches) = counted(config, true).await?;
    let service = service.with_branching(Branching {
        store: Arc::new(branches),
        timer: Arc::new(NoTimer),
        scrubber: Arc::new(RuleScrubber::new()?),
        ids: ids.clone(),
        config: unthrottled(),
    });
    let mut rows = Vec::new();
    for &depth in depths {
        let caller = Caller {
            tenant: fresh_tenant(&*ids)?,
            principal: Some("tok-report".into()),
        };
        let mut row = |op: &str, counts| {
            rows.push(Row {
                op: op.to_owned(),
                depth,
                forks: 0,
                inline: true,
                counts,
            })
        };
        // `depth` earlier branches, each with a memory to find.
        for i in 0..depth as usize {
            let b = service
                .branch_create(&caller, new_branch("report", task(i), None, false))
                .await?;
            service
                .branch_return(&caller, &b.branch_id, &format!("{}: done", task(i)))
                .await?;
        }
        counter.reset();
        let b = service
            .branch_create(&caller, new_branch("report", task(0), Some("go"), false))
            .await?;
        row("branch create", counter.snapshot());
        for i in 0..depth as usize {
            append(
                &service,
                &caller,
                &b.chain_ref,
                &format!("tool: step {i}\n"),
            )
            .await;
        }
        counter.reset();
        service
            .branch_return(&caller, &b.branch_id, "done: the parser bound fixed")
            .await?;
        row("branch return", counter.snapshot());
        counter.reset();
        service
            .branch_create(&caller, new_branch("report", task(1), None, true))
            .await?;
        row("branch create (inject_memories)", counter.snapshot());
    }
    Ok(rows)
}

/// The requests of erasing one session of `depth + 1` commits whose tip was
/// materialized (one cache entry, one cached artifact), with no other
/// session sharing its bytes: one row `erase session` per depth; the
/// deltas inline, or (`inline` false) in S3.
///
/// # Errors
/// As [`request_counts`].
pub async fn erase_request_counts(
    config: &AwsConfig,
    depths: &[u64],
    inline: bool,
) -> Result<Vec<Row>> {
    let (counter, clock, service, ids, _) = counted(config, inline).await?;
    let mut rows = Vec::new();
    for &depth in depths {
        let (tenant, session) = session_to_erase(&service, &clock, &*ids, depth).await?;
        counter.reset();
        let erased = service.erase_session(&tenant, &session, false).await?;
        debug_assert_eq!(erased.commits, depth + 1);
        rows.push(Row {
            op: "erase session".to_owned(),
            depth,
            forks: 0,
            inline,
            counts: counter.snapshot(),
        });
    }
    Ok(rows)
}

/// How long erasing one session of `depth + 1` commits (as in
/// [`erase_request_counts`], deltas inline) takes with an erase working
/// on each of `concurrency` commits at once, and the requests it made:
/// one `(concurrency, time, requests)` per entry.
///
/// # Errors
/// As [`request_counts`].
pub async fn erase_times(
    config: &AwsConfig,
    depth: u64,
    concurrency: &[usize],
) -> Result<Vec<(usize, std::time::Duration, u64)>> {
    let (counter, clock, service, ids, _) = counted(config, true).await?;
    let mut out = Vec::new();
    for &n in concurrency {
        let service = service.clone().with_erase_concurrency(n);
        let (tenant, session) = session_to_erase(&service, &clock, &*ids, depth).await?;
        counter.reset();
        let started = std::time::Instant::now();
        let erased = service.erase_session(&tenant, &session, false).await?;
        let took = started.elapsed();
        debug_assert_eq!(erased.commits, depth + 1);
        let counts = counter.snapshot();
        out.push((n, took, counts.values().sum()));
    }
    Ok(out)
}

/// A fresh tenant's session `erase-me` of `depth + 1` commits, its tip
/// materialized.
async fn session_to_erase(
    service: &Service,
    clock: &ManualClock,
    ids: &dyn IdSource,
    depth: u64,
) -> Result<(TenantId, crate::id::SessionId)> {
    let tenant = fresh_tenant(ids)?;
    let session: crate::id::SessionId = "erase-me".parse()?;
    let mut tip: Option<CommitId> = None;
    for i in 0..=depth {
        clock.advance_micros(1_000);
        let c = service
            .checkpoint(
                &tenant,
                NewCommit {
                    session_id: Some(session.to_string().parse().expect("a session id")),
                    ..request(tip, i, "eraser")
                },
            )
            .await?;
        tip = Some(c.commit.id);
    }
    let tip = tip.expect("at least the root");
    service.materialize(&tenant, &tip, Stop::Root, None).await?;
    Ok((tenant, session))
}
