//! `ctx serve`: the whole API on one address over embedded storage, and the
//! token administration that goes with it (`ctx tokens ...`).
//!
//! Its flags ([`ServeArgs`]) are laid over `Config::from_env` and the
//! backends come from `Backends::build`, as in every Lambda.
//!
//! It serves HTTP/1 with hyper over its own accept loop so that it can
//! protect itself from clients ([`ServerLimits`]): a cap on open
//! connections (idle ones are closed first when it is reached), a timeout
//! for request heads, for idle connections and for request bodies, and the
//! router's in-flight budget of body bytes
//! ([`ctx_core::api::limits`]).
//!
//! The accept loop and its connection limits are in `conn`, the token
//! administration in `tokens`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use ctx_core::api::limits::{InFlightBudget, with_in_flight_budget};
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{Authenticator, TokenAuth};
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::config::{self, Config, ServerLimits};
use ctx_core::service::{BatchOptions, Service};
use ctx_core::{Clock, Error, Result, SystemClock};

mod conn;
mod tokens;

use conn::{ConnState, OpenConns, connection_cap, serve_connection, take_slot};
pub use tokens::{DEFAULT_TENANT, add_token, list_tokens, revoke_token, token_file};
use tokens::{FirstToken, ensure_first_token};

/// `--store`'s parser: the names of [`config::StoreKind`], each with what
/// it is for `--help`.
fn store_kind() -> impl clap::builder::TypedValueParser<Value = config::StoreKind> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(
        config::StoreKind::ALL.map(|k| PossibleValue::new(k.as_str()).help(k.describe())),
    )
    .map(|s| {
        s.parse::<config::StoreKind>()
            .expect("clap passes only the possible values")
    })
}

/// The flags of `ctx serve`; each ends in the [`Config`] (see
/// [`ServeArgs::config`]). The rest of the settings come from the
/// environment (the Config table in docs/config.md).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The data directory.
    #[arg(long = config::CTX_DATA.long(), env = config::CTX_DATA.var, default_value = config::DEFAULT_DATA)]
    pub data: PathBuf,
    /// The address to listen on.
    #[arg(long = config::CTX_ADDR.long(), env = config::CTX_ADDR.var, default_value = config::DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// The storage backend.
    #[arg(long, value_parser = store_kind(), default_value = "local")]
    pub store: config::StoreKind,
    /// Who may touch a session's branches: strict (the tenant and
    /// principal, i.e. token, that own the session) or permissive (any
    /// token of the tenant; single-user use).
    #[arg(
        long = config::CTX_SESSION_VALIDATION.long(),
        env = config::CTX_SESSION_VALIDATION.var,
        default_value = "strict"
    )]
    pub session_validation: String,
    /// Fill in missing summaries of every tenant this often (`30s`, `5m`,
    /// `1h`; `off`, the default): an interval task that stops with the
    /// server.
    #[arg(
        long = config::CTX_SUMMARIZE_EVERY.long(),
        env = config::CTX_SUMMARIZE_EVERY.var
    )]
    pub summarize_every: Option<String>,
}

impl ServeArgs {
    /// The configuration: the environment's ([`Config::from_env`]) with
    /// these flags laid over it.
    ///
    /// # Errors
    /// `Invalid` naming the variable or flag whose value does not parse.
    pub fn config(self) -> Result<Config> {
        self.over(Config::from_env()?)
    }

    /// `config` with these flags laid over it.
    ///
    /// # Errors
    /// `Invalid` naming `--session-validation` when it is neither `strict`
    /// nor `permissive`.
    pub fn over(self, mut config: Config) -> Result<Config> {
        config.data = self.data;
        config.addr = self.addr;
        config.store = self.store;
        config.branching.validation = Config::parse_validation(
            flag(config::CTX_SESSION_VALIDATION),
            &self.session_validation,
        )?;
        if let Some(v) = &self.summarize_every {
            config.summarize_every = config::parse_interval(flag(config::CTX_SUMMARIZE_EVERY), v)?;
        }
        Ok(config)
    }
}

/// The flag of `setting`, which names it in errors.
fn flag(setting: config::Setting) -> &'static str {
    setting
        .flag
        .expect("ctx serve's flags are settings with a flag (tested)")
}

/// A running server.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The token it created on this start, if it created one.
    pub new_token: Option<String>,
    /// Whether it registered the token already on file again (a memory
    /// store starts empty every time).
    pub reused_token: bool,
    /// The router, ready to serve.
    pub app: axum::Router,
    listener: tokio::net::TcpListener,
    limits: ServerLimits,
    /// The interval of the embedded summary batch, if on.
    summarize: Option<Duration>,
    /// The policy and interval of the retention pass, if any tenant keeps
    /// sessions for a limited time.
    retention: Option<(config::Retention, Duration)>,
    /// The service the batch and the retention pass run on, whose
    /// background cache writes land before `run` returns.
    service: Arc<Service>,
}

/// Binds `config.addr`, then [`prepare_on`] it.
///
/// # Errors
/// As [`bind`] and [`prepare_on`].
pub async fn prepare(config: &Config) -> Result<Server> {
    prepare_on(config, bind(config.addr).await?).await
}

/// Listens on `addr`: done first, so a busy address is refused before
/// anything (a data directory, a token) is made.
///
/// # Errors
/// `Unavailable` naming the address when it cannot be bound.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::unavailable(format!(
            "cannot listen on {addr}: {e} (is another server on it? stop it, or pass another --addr)"
        ))
    })
}

/// Builds the backends `config` names (with context folding: branches
/// beside the commits, deadlines as tokio timers or, with the aws store and
/// `CTX_BRANCH_TIMER_ARN`, Step Functions executions), makes the first
/// token if there is none, expires the branches whose deadline passed while
/// the server was down (re-arming the rest), and serves on `listener`.
///
/// # Errors
/// When the configuration is incomplete, or the data directory or a store
/// cannot be used.
pub async fn prepare_on(config: &Config, listener: tokio::net::TcpListener) -> Result<Server> {
    let backends = Backends::build(config, Needs::SERVER).await?;
    let tokens = backends
        .tokens
        .clone()
        .expect("Needs::SERVER builds the token store");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let first = ensure_first_token(&config.data, tokens.as_ref(), clock.as_ref()).await?;
    let reused_token = first == Some(FirstToken::Reused);
    let new_token = match first {
        Some(FirstToken::Created(t)) => Some(t),
        _ => None,
    };
    let service = backends.into_service(clock);
    service.branch_sweep().await?;
    let service = Arc::new(service);
    let summarize = match config.summarize_every {
        Some(every) if service.summarizer().is_some() => Some(every),
        Some(_) => {
            tracing::warn!(
                "--summarize-every is set but no summarizer is configured: summaries stay missing"
            );
            None
        }
        None => None,
    };
    let r = &config.retention;
    let limited = r.keep_days > 0 || r.per_tenant.values().any(|&d| d > 0);
    let retention = match r.every {
        Some(every) if limited => Some((r.clone(), every)),
        _ => None,
    };
    let auth: Arc<dyn Authenticator> = Arc::new(TokenAuth::new(tokens));
    let state = AppState {
        service: service.clone(),
        auth: auth.clone(),
    };
    let addr = listener
        .local_addr()
        .map_err(|e| Error::unavailable(format!("cannot read the bound address: {e}")))?;
    // MCP over streamable HTTP at /mcp, behind the same bearer check; its
    // tool calls come back to this server as the caller, and its
    // `current_context` stores what the hooks under the data directory have
    // not yet, for the caller they write as.
    let mcp = axum::Router::new()
        .nest_service(
            "/mcp",
            crate::mcp::http_service(
                format!("http://{addr}"),
                addr.to_string(),
                config.data.clone(),
            ),
        )
        .layer(axum::middleware::from_fn_with_state(auth, bearer_only));
    let budget = InFlightBudget::new(config.server.max_in_flight_bytes);
    // The context browser at /ui: static pages that call the API above.
    let app = with_in_flight_budget(
        router(state, Group::ALL)
            .merge(mcp)
            .merge(ctx_core::ui::routes()),
        budget,
    );
    Ok(Server {
        addr,
        new_token,
        reused_token,
        app,
        listener,
        limits: config.server,
        summarize,
        retention,
        service,
    })
}

/// Lets a request through only with a bearer token the API accepts; the
/// API's 401 otherwise.
async fn bearer_only(
    axum::extract::State(auth): axum::extract::State<Arc<dyn Authenticator>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (parts, body) = req.into_parts();
    match auth.authenticate(&parts).await {
        Ok(_) => {
            next.run(axum::extract::Request::from_parts(parts, body))
                .await
        }
        Err(e) => ctx_core::api::error::ApiError(e).into_response(),
    }
}

impl Server {
    /// Serves until `shutdown` resolves, then lets the requests in progress
    /// finish and the cached results they built be stored.
    ///
    /// # Errors
    /// None so far: a failed accept (say, out of file descriptors) is
    /// logged and retried.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let limits = self.limits;
        let cap = connection_cap(limits.max_connections);
        let slots = Arc::new(tokio::sync::Semaphore::new(cap));
        let open = Arc::new(OpenConns::default());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut shutdown = pin!(shutdown);
        let mut next_id: u64 = 0;
        // Aborted when the server stops (this function returns or unwinds).
        let _summarizer = self
            .summarize
            .map(|every| AbortOnDrop(tokio::spawn(summarize_every(self.service.clone(), every))));
        let _retention = self.retention.clone().map(|(policy, every)| {
            AbortOnDrop(tokio::spawn(retain_every(
                self.service.clone(),
                policy,
                every,
            )))
        });
        loop {
            let stream = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // EMFILE and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = take_slot(&slots, &open) => permit,
            };
            next_id += 1;
            let id = next_id;
            let conn = Arc::new(ConnState::default());
            open.insert(id, conn.clone());
            let (app, open, stop) = (self.app.clone(), open.clone(), stop_rx.clone());
            tokio::spawn(async move {
                serve_connection(stream, app, conn, limits, stop).await;
                open.remove(id);
                drop(permit);
            });
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        let all = u32::try_from(cap).unwrap_or(u32::MAX);
        let _ = slots.acquire_many(all).await;
        // Materializations answered from memory and still being stored
        // land before the caller truncates the write-ahead log.
        self.service.flush_cache_writes().await;
        Ok(())
    }
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The embedded summary batch: every `every`, a batch over every tenant with
/// work; a run that is still going when the next is due delays it.
async fn summarize_every(service: Arc<Service>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match service.summarize_batch(&BatchOptions::default()).await {
            Ok(r) if r.calls + r.failed > 0 => tracing::info!(
                summarized = r.summarized,
                failed = r.failed,
                skipped_human = r.skipped_human,
                calls = r.calls,
                tokens = r.tokens,
                "summary batch"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "summary batch failed"),
        }
    }
}

/// The embedded retention pass: every `every`, erase the idle sessions of
/// every tenant whose policy limits them (pins and forks kept).
async fn retain_every(service: Arc<Service>, policy: config::Retention, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match service
            .apply_retention_all(|t| policy.keep_days_for(t))
            .await
        {
            Ok(reports) => {
                for (tenant, r) in reports {
                    if !r.erased.is_empty() {
                        tracing::info!(
                            %tenant,
                            sessions = r.erased.len(),
                            commits = r.removed.commits,
                            artifacts = r.removed.artifacts,
                            pinned = r.pinned.len(),
                            forked = r.forked.len(),
                            "retention"
                        );
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "retention pass failed"),
        }
    }
}

/// `ctx serve`: prepares the server, says where it listens (and the token
/// it made, if it made one), and serves until SIGINT or SIGTERM.
///
/// # Errors
/// As [`ServeArgs::config`] and [`prepare`]; when serving fails.
pub async fn run(args: ServeArgs) -> Result<()> {
    let config = args.config()?;
    // The address first: a busy one leaves no data directory behind.
    let listener = bind(config.addr).await?;
    let _lock = crate::datadir::lock(&config.data)?;
    let server = prepare_on(&config, listener).await?;
    if let Some(token) = &server.new_token {
        outln!(
            "created a token for tenant {DEFAULT_TENANT} (saved in {}):\n{token}",
            token_file(&config.data).display()
        );
    } else if server.reused_token {
        outln!(
            "reusing the token in {} for tenant {DEFAULT_TENANT} (a memory store starts empty)",
            token_file(&config.data).display()
        );
    }
    // Where this server listens, for hooks that follow it across restarts
    // (an --addr with port 0 gets another port each time).
    crate::datadir::write_server(&config.data, &format!("http://{}", server.addr))?;
    outln!("ctx listening on http://{}", server.addr);
    server
        .run(shutdown_signal())
        .await
        .map_err(|e| Error::unavailable(format!("server failed: {e}")))?;
    // A clean stop: fold the write-ahead log into the database and truncate
    // it, so it does not stay behind at its high-water size.
    ctx_core::store::local::checkpoint_wal(&config.data)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use ctx_core::TenantId;

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        Serve::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn summarize_every_is_off_by_default_and_parsed_with_its_flag_named() {
        assert_eq!(
            parse(&[]).over(Config::default()).unwrap().summarize_every,
            None
        );
        let c = parse(&["--summarize-every", "5m"])
            .over(Config::default())
            .unwrap();
        assert_eq!(c.summarize_every, Some(Duration::from_secs(300)));
        let e = parse(&["--summarize-every", "5"])
            .over(Config::default())
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("--summarize-every"), "{e}");
    }

    /// The first line of a delta, for the interval task's test.
    struct FirstLine;

    #[async_trait::async_trait]
    impl ctx_core::summarize::Summarizer for FirstLine {
        fn id(&self) -> String {
            "first-line:v1".into()
        }
        async fn summarize(
            &self,
            input: &ctx_core::summarize::SummaryInput,
        ) -> std::result::Result<ctx_core::summarize::Summary, ctx_core::summarize::Failure>
        {
            let text = match &input.content {
                ctx_core::summarize::Content::Text(t) => t.lines().next().unwrap_or("").to_owned(),
                ctx_core::summarize::Content::Conversation(_) => "conversation".into(),
            };
            Ok(ctx_core::summarize::Summary {
                text,
                input_tokens: 0,
                output_tokens: 0,
            })
        }
    }

    #[tokio::test]
    async fn the_interval_task_fills_in_summaries_of_every_tenant() {
        use ctx_core::format::FormatId;
        use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
        use ctx_core::store::{Commits, Stores};
        use ctx_core::wire::CheckpointRequest;
        let meta = Arc::new(MemoryMetaStore::new());
        let service = Arc::new(
            Service::new(
                Stores {
                    blobs: Arc::new(MemoryBlobStore::new()),
                    meta: meta.clone(),
                },
                Arc::new(SystemClock),
            )
            .with_summarizer(Arc::new(FirstLine)),
        );
        let mut commits = Vec::new();
        for tenant in ["acme", "other"] {
            let tenant: TenantId = tenant.parse().unwrap();
            let body = format!("user: hello from {tenant}\n");
            let req =
                CheckpointRequest::new("p".parse().unwrap(), "tpl", FormatId::raw(), body.as_str());
            let done = ctx_core::api::submit_checkpoint(&service, &tenant, req)
                .await
                .unwrap();
            commits.push((tenant, done.commit.id));
        }
        // The first run is due at once; a long interval means only it runs.
        let task = AbortOnDrop(tokio::spawn(summarize_every(
            service,
            Duration::from_secs(3600),
        )));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for (tenant, id) in &commits {
            loop {
                let c = meta.get_commit(tenant, id).await.unwrap().unwrap();
                if let Some(s) = c.summary {
                    assert_eq!(s, format!("user: hello from {tenant}"));
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "no summary for {tenant}"
                );
                tokio::task::yield_now().await;
            }
        }
        drop(task);
    }

    /// A result answered from memory and still waiting to be stored when
    /// the server stops is stored before `run` returns (and so before
    /// `ctx serve` truncates the write-ahead log). On this current-thread
    /// runtime the background write cannot start before `run` yields.
    #[tokio::test]
    async fn a_stopping_server_stores_the_results_it_answered_from_memory() {
        use ctx_core::format::FormatId;
        use ctx_core::store::BlobArea;
        use ctx_core::store::local::LocalBlobStore;
        use ctx_core::wire::CheckpointRequest;
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data: dir.path().to_owned(),
            addr: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        let server = prepare(&config).await.unwrap();
        let service = server.service.clone();
        let tenant: TenantId = DEFAULT_TENANT.parse().unwrap();
        let req = CheckpointRequest::new(
            "p".parse().unwrap(),
            "tpl",
            FormatId::raw(),
            "user: hello\n",
        );
        let id = ctx_core::api::submit_checkpoint(&service, &tenant, req)
            .await
            .unwrap()
            .commit
            .id;
        let m = service
            .materialize(&tenant, &id, ctx_core::service::Stop::Root, None)
            .await
            .unwrap();
        let file = LocalBlobStore::open(dir.path())
            .unwrap()
            .path_in(&tenant, BlobArea::Cache, &m.result.artifact_ref)
            .unwrap();
        server.run(async {}).await.unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"user: hello\n");
    }

    #[test]
    fn the_flags_defaults_are_the_configs() {
        use clap::CommandFactory as _;
        let cmd = Serve::command();
        let default = |id: &str| {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("--{id} exists"));
            arg.get_default_values()[0].to_str().unwrap().to_owned()
        };
        let c = Config::default();
        assert_eq!(PathBuf::from(default("data")), c.data);
        assert_eq!(default("addr").parse::<SocketAddr>().unwrap(), c.addr);
        assert_eq!(
            Config::parse_validation("", &default("session_validation")).unwrap(),
            c.branching.validation
        );
        let store: config::StoreKind = default("store").parse().unwrap();
        assert_eq!(store, c.store);
    }

    /// The settings table's flags are `ctx serve`'s: each setting with a
    /// flag is an argument of that name read from that variable, and every
    /// argument read from a variable is a setting with that flag.
    #[test]
    fn the_flags_are_the_settings_flags() {
        use clap::CommandFactory as _;
        let cmd = Serve::command();
        let with_flags: Vec<_> = config::SETTINGS
            .iter()
            .filter(|s| s.flag.is_some())
            .collect();
        assert_eq!(with_flags.len(), 4, "{with_flags:?}");
        for s in &with_flags {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long().map(|l| format!("--{l}")).as_deref() == s.flag)
                .unwrap_or_else(|| panic!("ctx serve has no {:?}", s.flag));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(s.var));
        }
        for arg in cmd.get_arguments() {
            if let Some(env) = arg.get_env() {
                let s = config::SETTINGS
                    .iter()
                    .find(|s| std::ffi::OsStr::new(s.var) == env)
                    .unwrap_or_else(|| panic!("{env:?} is no setting"));
                assert_eq!(s.flag, arg.get_long().map(|l| format!("--{l}")).as_deref());
            }
        }
    }

    #[test]
    fn every_flag_ends_in_the_config() {
        let c = parse(&[
            "--data",
            "d",
            "--addr",
            "0.0.0.0:1",
            "--store",
            "memory",
            "--session-validation",
            "permissive",
        ])
        .over(Config::default())
        .unwrap();
        assert_eq!(c.data, PathBuf::from("d"));
        assert_eq!(c.addr, "0.0.0.0:1".parse().unwrap());
        assert_eq!(c.store, config::StoreKind::Memory);
        assert_eq!(
            c.branching.validation,
            ctx_core::branch::Validation::Permissive
        );
        let e = parse(&["--session-validation", "loose"])
            .over(Config::default())
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("--session-validation"));
    }
}
