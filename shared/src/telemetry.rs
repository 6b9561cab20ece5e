//! What ctx tells OpenTelemetry, said through `tracing` only: the spans of
//! operations and store calls, and metric events. Exporting them is the
//! binaries' part (crate `ctx-telemetry`, on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set); with no exporter installed the
//! spans and events here are disabled at their call sites and cost an
//! atomic load.
//!
//! - one span per operation ([`OPERATION_SPAN`], made by the router's layer
//!   on every route, `api::traced`), named by the operation's id
//!   (`checkpoint`, `read`, …), with its tenant and principal, its method,
//!   status and body sizes. Never content.
//! - the store calls are its children: the local store's SQLite and file
//!   calls ([`store_span`]), and on AWS the SDK's own span of every
//!   request (`DynamoDB.PutItem`, `S3.GetObject`, with `rpc.*`).
//! - metrics, as events of target [`METRICS`] whose fields the exporter's
//!   metrics layer turns into instruments: [`checkpoints`],
//!   [`materialized`], the operation duration histogram (`api::traced`), the summary
//!   queue's depth ([`summary_queue`]) and branch budgets
//!   ([`branch_budget`]).

use tracing::field::Empty;

/// The target of every metric event (and of nothing else), so that logs
/// can leave them out and the metrics layer take only them.
pub const METRICS: &str = "ctx_core::metrics";

/// The name of the span of one operation (its OpenTelemetry name is the
/// operation's id, `otel.name`).
pub const OPERATION_SPAN: &str = "operation";

/// The span of one store call of the local backend: `system` is `sqlite`
/// or `file`, `call` what it does (`transaction`, `read`, `put`, …).
pub fn store_span(system: &'static str, call: &'static str) -> tracing::Span {
    tracing::info_span!(
        "store",
        otel.name = format_args!("{system} {call}"),
        otel.kind = "client",
        db.system.name = system,
        db.operation.name = call,
        bytes = Empty,
    )
}

/// Counts commits written by checkpoints and batches, per tenant.
pub fn checkpoints(tenant: &str, commits: u64) {
    tracing::info!(target: METRICS, tenant, "monotonic_counter.ctx.checkpoints" = commits);
}

/// A materialization's size in bytes, and whether a cache answered it.
pub fn materialized(bytes: u64, cached: bool) {
    tracing::info!(target: METRICS, cached, "histogram.ctx.materialize.bytes" = bytes);
}

/// The summary queue as one summarizer batch found it: `depth` entries
/// waiting, exactly when `complete` (the batch read the whole queue), and a
/// lower bound when it stopped first (a limit, a budget, the deadline).
pub fn summary_queue(depth: u64, complete: bool) {
    tracing::info!(target: METRICS, complete, "gauge.ctx.summarizer.queue_depth" = depth);
}

/// A branch's budget after a checkpoint was charged to it: the share used
/// (1.0 and over is spent, and the branch is returned).
pub fn branch_budget(used: u64, budget: u64) {
    if budget > 0 {
        let share = used as f64 / budget as f64;
        tracing::info!(target: METRICS, exhausted = used >= budget, "histogram.ctx.branch.budget.used" = share);
    }
}
