//! The `ctx` binary: logging to stderr (`CTX_LOG`, default `warn`; in
//! colour only when stderr is a terminal), then the command line.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let log = ctx_core::config::Config::log_from_env();
    let (filter, bad) = match log.as_deref().map(|s| (s, EnvFilter::try_new(s))) {
        Some((_, Ok(filter))) => (filter, None),
        Some((s, Err(e))) => (
            EnvFilter::new("warn"),
            Some(format!("{}={s:?}: {e}", ctx_core::config::CTX_LOG)),
        ),
        None => (EnvFilter::new("warn"), None),
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // A pipe, a file or a journal gets no escape codes.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .init();
    if let Some(bad) = bad {
        tracing::warn!("{bad}; logging at warn");
    }
    ctx_cli::main_with(std::env::args()).await
}
