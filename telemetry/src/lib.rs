//! # ctx-telemetry
//!
//! Logging and OpenTelemetry for the ctx binaries (`ctx` and the Lambda
//! functions), installed once by their `main` with [`init`]:
//!
//! - logs through `tracing_subscriber`'s fmt layer, filtered by `CTX_LOG`
//!   (a filter that does not parse is said, then the default is used);
//! - when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and not empty): the spans
//!   and metric events `ctx_core::telemetry` emits, exported over
//!   OTLP/HTTP with protobuf bodies to `$OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces`
//!   and `/v1/metrics` (the ADOT Lambda layer's collector listens on
//!   `http://localhost:4318`). Off otherwise: no exporter, no thread, and
//!   the spans are disabled where they are made.
//!
//! The OpenTelemetry SDK's own variables apply (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_SCHEDULE_DELAY`,
//! `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_EXPORTER_OTLP_TIMEOUT`, …). Only
//! `http://` endpoints: the exporter links no TLS stack, as a collector
//! runs beside the process (the Lambda layer, an agent on the host) and
//! forwards over TLS itself.
//!
//! What is exported is spans only (never log events, whose messages could
//! carry what a request held) and the metric events, each of which names
//! its own attributes.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

/// The variable that switches the export on: the collector's base URL.
pub const OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// How logs are written.
#[derive(Debug, Clone, Copy)]
pub struct Logs {
    /// The filter when `CTX_LOG` is unset or does not parse.
    pub default_filter: &'static str,
    /// Colour codes (only on a terminal).
    pub ansi: bool,
    /// A timestamp on each line (CloudWatch stamps lines itself).
    pub time: bool,
    /// To stdout (CloudWatch) rather than stderr.
    pub stdout: bool,
}

/// The installed exporters, when the export is on: flushed after each
/// Lambda invocation, shut down (flushing) when a process ends.
#[derive(Debug, Default)]
pub struct Telemetry {
    providers: Option<Providers>,
}

#[derive(Debug, Clone)]
struct Providers {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

impl Telemetry {
    /// Whether spans and metrics are exported.
    pub fn exporting(&self) -> bool {
        self.providers.is_some()
    }

    /// Exports what is buffered now, off the async threads (a Lambda is
    /// frozen after it answers, so each invocation flushes before that).
    pub async fn flush(&self) {
        let Some(p) = self.providers.clone() else {
            return;
        };
        let done = tokio::task::spawn_blocking(move || {
            if let Err(e) = p.traces.force_flush() {
                tracing::warn!(error = %e, "exporting spans failed");
            }
            if let Err(e) = p.metrics.force_flush() {
                tracing::warn!(error = %e, "exporting metrics failed");
            }
        });
        let _ = done.await;
    }

    /// Exports what is left and stops the exporters, off the async threads.
    pub async fn shutdown(self) {
        let Some(p) = self.providers else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || {
            let _ = p.traces.shutdown();
            let _ = p.metrics.shutdown();
        })
        .await;
    }
}

/// Installs logging and, given a collector's `endpoint` (the checked
/// value of [`OTLP_ENDPOINT`], which the exporter reads again with the
/// SDK's other variables), the OpenTelemetry export, as the process's
/// subscriber. `log` is `CTX_LOG`'s value; `service` the default
/// `service.name` (`OTEL_SERVICE_NAME` wins, read by the SDK).
pub fn init(service: &str, log: Option<&str>, logs: Logs, endpoint: Option<&str>) -> Telemetry {
    let (filter, bad) = match log.map(|s| (s, EnvFilter::try_new(s))) {
        Some((_, Ok(filter))) => (filter, None),
        Some((s, Err(e))) => (
            EnvFilter::new(logs.default_filter),
            Some(format!("CTX_LOG={s:?}: {e}")),
        ),
        None => (EnvFilter::new(logs.default_filter), None),
    };
    let fmt = tracing_subscriber::fmt::layer().with_ansi(logs.ansi);
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = match (logs.stdout, logs.time) {
        (true, true) => Box::new(fmt.with_writer(std::io::stdout)),
        (true, false) => Box::new(fmt.with_writer(std::io::stdout).without_time()),
        (false, true) => Box::new(fmt.with_writer(std::io::stderr)),
        (false, false) => Box::new(fmt.with_writer(std::io::stderr).without_time()),
    };
    // Metric events are for the metrics layer, not the log.
    let fmt = fmt
        .with_filter(filter_fn(|m| m.target() != ctx_core::telemetry::METRICS))
        .with_filter(filter);

    let (providers, failed) = match endpoint {
        Some(endpoint) => {
            // The blocking HTTP client must be made (and dropped) off the
            // async threads.
            let service = service.to_owned();
            let built = std::thread::spawn(move || providers(&service))
                .join()
                .unwrap_or_else(|_| Err("building the exporter panicked".to_owned()));
            match built {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(format!("{OTLP_ENDPOINT}={endpoint:?}: {e}"))),
            }
        }
        None => (None, None),
    };
    let (traces, metrics) = match &providers {
        Some(p) => (
            Some(
                tracing_opentelemetry::layer()
                    .with_tracer(p.traces.tracer("ctx"))
                    .with_location(false)
                    .with_threads(false)
                    .with_target(false)
                    .with_level(false)
                    .with_filter(filter_fn(exported_span)),
            ),
            Some(
                tracing_opentelemetry::MetricsLayer::new(p.metrics.clone())
                    .with_filter(filter_fn(|m| m.target() == ctx_core::telemetry::METRICS)),
            ),
        ),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(traces)
        .with(metrics)
        .init();
    if let Some(bad) = bad {
        tracing::warn!("{bad}; logging at {}", logs.default_filter);
    }
    if let Some(failed) = failed {
        tracing::warn!("{failed}; spans and metrics are not exported");
    }
    Telemetry { providers }
}

/// The spans exported: ctx's own (operations, store calls) and the AWS
/// SDK's span of each request (named `DynamoDB.PutItem` and so on, with
/// the `rpc.*` attributes), not the SDK's inner ones (attempts,
/// serialization) nor an HTTP stack's; and no events.
fn exported_span(m: &Metadata<'_>) -> bool {
    if !m.is_span() {
        return false;
    }
    let target = m.target();
    (target.starts_with("ctx_") && *m.level() <= Level::INFO)
        || (target.starts_with("aws_sdk_") && m.fields().field("rpc.method").is_some())
}

/// The tracer and meter providers over OTLP/HTTP, reading the SDK's
/// variables.
fn providers(service: &str) -> Result<Providers, String> {
    // The SDK's detectors read OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES;
    // when neither names the service, they say `unknown_service`, and
    // `service` is its name.
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    let resource = if named {
        detected
    } else {
        Resource::builder()
            .with_service_name(service.to_owned())
            .build()
    };
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| e.to_string())?;
    let measures = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .build()
        .map_err(|e| e.to_string())?;
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metrics = SdkMeterProvider::builder()
        .with_periodic_exporter(measures)
        .with_resource(resource)
        .build();
    Ok(Providers { traces, metrics })
}
