//! The `ctx` binary: logging to stderr (`CTX_LOG`, default `warn`; in
//! colour only when stderr is a terminal), then the command line. `ctx
//! serve` also exports its spans and metrics over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see `ctx-telemetry`), flushed
//! when it stops.

use std::io::IsTerminal as _;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    // Only the server exports; a bad endpoint stops it when it reads its
    // configuration, naming the variable.
    let serving = std::env::args().nth(1).as_deref() == Some("serve");
    let endpoint = serving
        .then(|| {
            ctx_core::config::Config::otlp_endpoint_from_env()
                .ok()
                .flatten()
        })
        .flatten();
    let telemetry = ctx_telemetry::init(
        "ctx-serve",
        ctx_core::config::Config::log_from_env().as_deref(),
        ctx_telemetry::Logs {
            default_filter: "warn",
            // A pipe, a file or a journal gets no escape codes.
            ansi: std::io::stderr().is_terminal(),
            time: true,
            stdout: false,
        },
        endpoint.as_deref(),
    );
    let code = ctx_cli::main_with(std::env::args()).await;
    telemetry.shutdown().await;
    code
}
