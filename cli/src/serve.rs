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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ctx_core::api::limits::{InFlightBudget, with_in_flight_budget};
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{Authenticator, TokenAuth, new_token, token_hash};
use ctx_core::config::{self, Config, ServerLimits};
use ctx_core::service::{BatchOptions, Service};
use ctx_core::store::local::SqliteMetaStore;
use ctx_core::store::{TokenRecord, TokenStore};
use ctx_core::wiring::{Backends, Needs};
use ctx_core::{Clock, Error, OsRandom, Result, SystemClock, TenantId};

/// Which backends `ctx serve` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// Filesystem CAS + SQLite under the data directory (durable).
    Local,
    /// Everything in memory; lost when the server stops.
    Memory,
    /// S3 + DynamoDB as configured by the environment (`CTX_BUCKET`,
    /// `CTX_TABLE`, the AWS SDK's variables); tokens stay in the data
    /// directory. Needs a build with the `aws` feature (a build without it
    /// says how to make one).
    Aws,
}

impl From<StoreKind> for config::StoreKind {
    fn from(kind: StoreKind) -> Self {
        match kind {
            StoreKind::Local => config::StoreKind::Local,
            StoreKind::Memory => config::StoreKind::Memory,
            StoreKind::Aws => config::StoreKind::Aws,
        }
    }
}

/// The flags of `ctx serve`; each ends in the [`Config`] (see
/// [`ServeArgs::config`]). The rest of the settings come from the
/// environment (the README's Config table).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The data directory.
    #[arg(long, env = "CTX_DATA", default_value = config::DEFAULT_DATA)]
    pub data: PathBuf,
    /// The address to listen on.
    #[arg(long, env = "CTX_ADDR", default_value = config::DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// The storage backend.
    #[arg(long, value_enum, default_value = "local")]
    pub store: StoreKind,
    /// Who may touch a session's branches: strict (the tenant and
    /// principal, i.e. token, that own the session) or permissive (any
    /// token of the tenant; single-user use).
    #[arg(long, env = "CTX_SESSION_VALIDATION", default_value = "strict")]
    pub session_validation: String,
    /// Fill in missing summaries of every tenant this often (`30s`, `5m`,
    /// `1h`; `off`, the default): an interval task that stops with the
    /// server.
    #[arg(long, env = "CTX_SUMMARIZE_EVERY")]
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
        config.store = self.store.into();
        config.folding.validation =
            Config::parse_validation("--session-validation", &self.session_validation)?;
        if let Some(v) = &self.summarize_every {
            config.summarize_every = config::parse_interval("--summarize-every", v)?;
        }
        Ok(config)
    }
}

/// The tenant the first token is made for.
pub const DEFAULT_TENANT: &str = "default";

/// The file holding the first token, under the data directory.
pub fn token_file(data: &Path) -> PathBuf {
    data.join("token")
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

fn open_tokens(data: &Path) -> Result<SqliteMetaStore> {
    SqliteMetaStore::open(data)
}

/// Builds the backends `config` names (with context folding: branches
/// beside the commits, deadlines as tokio timers or, with the aws store and
/// `CTX_BRANCH_TIMER_ARN`, Step Functions executions), makes the first
/// token if there is none, expires the branches whose deadline passed while
/// the server was down (re-arming the rest), and binds `config.addr`.
///
/// # Errors
/// When the configuration is incomplete, or the data directory, a store or
/// the address cannot be used.
pub async fn prepare(config: &Config) -> Result<Server> {
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
    let sweep = service.branch_sweep().await?;
    if sweep.expired + sweep.rearmed > 0 {
        tracing::info!(
            expired = sweep.expired,
            rearmed = sweep.rearmed,
            "branch deadlines after restart"
        );
    }
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
    let addr = config.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::unavailable(format!("cannot listen on {addr}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::unavailable(format!("cannot read the bound address: {e}")))?;
    // MCP over streamable HTTP at /mcp, behind the same bearer check; its
    // tool calls come back to this server as the caller.
    let mcp = axum::Router::new()
        .nest_service(
            "/mcp",
            crate::mcp::http_service(format!("http://{addr}"), addr.to_string()),
        )
        .layer(axum::middleware::from_fn_with_state(auth, bearer_only));
    let budget = InFlightBudget::new(config.server.max_in_flight_bytes);
    let app = with_in_flight_budget(router(state, Group::ALL).merge(mcp), budget);
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

/// `max_connections`, but at most the open-file limit less 64 descriptors
/// for the stores, logs and the listener, and at least 1.
fn connection_cap(max_connections: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
    let by_files = if known && limit.rlim_cur != libc::RLIM_INFINITY {
        usize::try_from(limit.rlim_cur.saturating_sub(64)).unwrap_or(usize::MAX)
    } else {
        usize::MAX
    };
    max_connections.min(by_files).max(1)
}

/// A connection slot. At the cap, idle connections are asked to close, the
/// oldest first, until one is free; meanwhile further clients wait in the
/// listen backlog (holding no descriptor of ours).
async fn take_slot(
    slots: &Arc<tokio::sync::Semaphore>,
    open: &OpenConns,
) -> tokio::sync::OwnedSemaphorePermit {
    loop {
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return permit;
        }
        open.close_oldest_idle();
        // A connection busy reading a request head does not close at once:
        // ask another one if no slot is free soon.
        if let Ok(Ok(permit)) =
            tokio::time::timeout(Duration::from_millis(50), slots.clone().acquire_owned()).await
        {
            return permit;
        }
    }
}

/// The open connections, by the order they were accepted.
#[derive(Default)]
struct OpenConns(Mutex<BTreeMap<u64, Arc<ConnState>>>);

impl OpenConns {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnState>>> {
        // A panic while holding the lock leaves the map itself consistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn insert(&self, id: u64, conn: Arc<ConnState>) {
        self.map().insert(id, conn);
    }

    fn remove(&self, id: u64) {
        self.map().remove(&id);
    }

    /// Asks the oldest connection with no request in progress (and not
    /// asked before) to close.
    fn close_oldest_idle(&self) {
        let map = self.map();
        if let Some(conn) = map
            .values()
            .find(|c| c.busy.load(Ordering::Acquire) == 0 && !c.asked.swap(true, Ordering::AcqRel))
        {
            conn.close.notify_one();
        }
    }
}

/// What the accept loop and the connection's task share.
struct ConnState {
    /// Requests in progress.
    busy: AtomicUsize,
    /// When the last request ended (or the connection opened).
    last_active: Mutex<tokio::time::Instant>,
    /// The accept loop asked it to close.
    asked: AtomicBool,
    close: tokio::sync::Notify,
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState {
            busy: AtomicUsize::new(0),
            last_active: Mutex::new(tokio::time::Instant::now()),
            asked: AtomicBool::new(false),
            close: tokio::sync::Notify::new(),
        }
    }
}

impl ConnState {
    fn last_active(&self) -> tokio::time::Instant {
        *self
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When to look again whether the connection has been idle for
    /// `idle`: `Some(deadline)` passed means it has.
    fn idle_deadline(&self, idle: Duration) -> (tokio::time::Instant, bool) {
        if self.busy.load(Ordering::Acquire) > 0 {
            (tokio::time::Instant::now() + idle, false)
        } else {
            (self.last_active() + idle, true)
        }
    }
}

/// Counts a request in progress on its connection until dropped (answered
/// or abandoned).
struct InProgress(Arc<ConnState>);

impl InProgress {
    fn new(conn: Arc<ConnState>) -> Self {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        InProgress(conn)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        *self
            .0
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tokio::time::Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves one connection until it closes: by the client, by hyper's
/// header-read timeout, after `idle_timeout` with no request in progress,
/// when the accept loop needs its slot, or at shutdown.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: axum::Router,
    conn: Arc<ConnState>,
    limits: ServerLimits,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let body_timeout = limits.body_read_timeout;
    let state = conn.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        use tower::ServiceExt as _;
        let in_progress = InProgress::new(state.clone());
        let req = req.map(|body| axum::body::Body::new(TimedBody::new(body, body_timeout)));
        let app = app.clone();
        async move {
            let resp = app.oneshot(req).await;
            drop(in_progress);
            resp
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut served = pin!(builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
    let mut closing = false;
    loop {
        let (deadline, idle) = conn.idle_deadline(limits.idle_timeout);
        tokio::select! {
            done = served.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            () = conn.close.notified(), if !closing => {}
            _ = stop.changed(), if !closing => {}
            () = tokio::time::sleep_until(deadline), if !closing => {
                if !idle || conn.idle_deadline(limits.idle_timeout).0 > tokio::time::Instant::now() {
                    continue;
                }
            }
        }
        // Closes an idle connection at once; one with a request in
        // progress after its response.
        served.as_mut().graceful_shutdown();
        closing = true;
    }
}

/// A request body that fails once `timeout` has passed since the request
/// arrived; the connection is then closed.
struct TimedBody {
    inner: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
}

impl TimedBody {
    fn new(inner: hyper::body::Incoming, timeout: Duration) -> Self {
        TimedBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }
}

impl hyper::body::Body for TimedBody {
    type Data = hyper::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            let secs = this.timeout.as_secs();
            return Poll::Ready(Some(Err(format!(
                "the request body did not arrive within {secs} s (CTX_BODY_READ_TIMEOUT_SECS)"
            )
            .into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// `ctx serve`: prepares the server, says where it listens (and the token
/// it made, if it made one), and serves until SIGINT or SIGTERM.
///
/// # Errors
/// As [`ServeArgs::config`] and [`prepare`]; when serving fails.
pub async fn run(args: ServeArgs) -> Result<()> {
    use std::io::Write as _;
    let config = args.config()?;
    let _lock = crate::datadir::lock(&config.data)?;
    let server = prepare(&config).await?;
    if let Some(token) = &server.new_token {
        println!(
            "created a token for tenant {DEFAULT_TENANT} (saved in {}):\n{token}",
            token_file(&config.data).display()
        );
    } else if server.reused_token {
        println!(
            "reusing the token in {} for tenant {DEFAULT_TENANT} (a memory store starts empty)",
            token_file(&config.data).display()
        );
    }
    println!("ctx listening on http://{}", server.addr);
    let _ = std::io::stdout().flush();
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

/// What start-up did about the first token.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FirstToken {
    /// Made a new one (saved in `<data>/token`).
    Created(String),
    /// Registered the one on file again.
    Reused,
}

/// Makes a token for the default tenant when no token exists yet, and
/// writes it to `<data>/token` with mode 0600; a store that starts empty
/// (memory) registers the token on file again instead.
async fn ensure_first_token(
    data: &Path,
    tokens: &dyn TokenStore,
    clock: &dyn Clock,
) -> Result<Option<FirstToken>> {
    let file = token_file(data);
    if !tokens.list_tokens().await?.is_empty() {
        return Ok(None);
    }
    // A memory store starts empty every time: reuse the token on file so
    // clients keep working across restarts.
    let (token, reused) = match std::fs::read_to_string(&file) {
        Ok(t) if !t.trim().is_empty() => (t.trim().to_owned(), true),
        _ => (new_token(&OsRandom), false),
    };
    let tenant: TenantId = DEFAULT_TENANT.parse()?;
    tokens
        .add_token(&token_hash(&token), &tenant, clock.now())
        .await?;
    if reused {
        return Ok(Some(FirstToken::Reused));
    }
    write_secret(&file, &token)
        .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", file.display())))?;
    Ok(Some(FirstToken::Created(token)))
}

fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(format!("{secret}\n").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `ctx tokens add`: a new token for `tenant`, returned once.
///
/// # Errors
/// When the token table cannot be written.
pub async fn add_token(data: &Path, tenant: &TenantId) -> Result<(String, TokenRecord)> {
    let store = open_tokens(data)?;
    let token = new_token(&OsRandom);
    let rec = store
        .add_token(&token_hash(&token), tenant, SystemClock.now())
        .await?;
    Ok((token, rec))
}

/// `ctx tokens list`.
///
/// # Errors
/// When the token table cannot be read.
pub async fn list_tokens(data: &Path) -> Result<Vec<TokenRecord>> {
    open_tokens(data)?.list_tokens().await
}

/// `ctx tokens revoke`: false when no token had that id.
///
/// # Errors
/// When the token table cannot be written.
pub async fn revoke_token(data: &Path, id: &str) -> Result<bool> {
    open_tokens(data)?.revoke_token(id).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

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
            let done = req.submit(&service, &tenant).await.unwrap();
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
        let id = req.submit(&service, &tenant).await.unwrap().commit.id;
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
        use clap::{CommandFactory as _, ValueEnum as _};
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
            c.folding.validation
        );
        let store = StoreKind::from_str(&default("store"), false).unwrap();
        assert_eq!(config::StoreKind::from(store), c.store);
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
            c.folding.validation,
            ctx_core::branch::Validation::Permissive
        );
        let e = parse(&["--session-validation", "loose"])
            .over(Config::default())
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("--session-validation"));
    }
}
