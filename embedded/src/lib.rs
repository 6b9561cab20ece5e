//! # ctx-embedded
//!
//! ctx inside the caller's process: a data directory (the one `ctx serve`
//! opens) opened by a Python or Node process, every operation answered by
//! the one router (`ctx_core::api::router`) in memory, as a tower service,
//! with no socket and no server. The Python module (`clients/python/native`)
//! and the Node module bind this crate and hold no logic of their own: a
//! call is an HTTP request of an operation declared in `ctx_core::wire` (its
//! method, path and query, its body) and its answer (status, headers,
//! body), so the clients send their generated calls here unchanged, and
//! every operation, its validation and its errors are the server's own
//! (docs/adr/0011-ctx-inside-the-process.md).
//!
//! # Layout
//! - [`Embedded`]: an open data directory; [`Embedded::call`] (blocking:
//!   for a binding that has released its interpreter's lock),
//!   [`Embedded::spawn`] and [`Embedded::call_then`] (on the facade's
//!   runtime, for async callers).
//! - [`Request`] and [`Response`]: a call and its answer, as plain values.
//! - the runtime: one tokio runtime per process, made again in a child
//!   after a `fork` (the parent's threads do not exist there), with the
//!   stores opened again.
//!
//! Several processes may open one directory at once (an API and a worker,
//! and `ctx serve` for the browser): SQLite in WAL mode with `BEGIN
//! IMMEDIATE` transactions and a busy wait orders their writes, and the
//! content-addressed files are written to a temporary name and renamed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use bytes::Bytes;
use ctx_core::api::{AppState, router};
use ctx_core::auth::{Authenticator, Caller};
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::config::{Config, StoreKind};
use ctx_core::service::Service;
use ctx_core::wire::Group;
pub use ctx_core::{Error, ErrorKind, Result};
use ctx_core::{SystemClock, TenantId};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

/// The tenant a data directory's first token names, and so the one
/// `Embedded` acts as unless told otherwise: the same data `ctx serve`
/// shows with its token.
pub const DEFAULT_TENANT: &str = "default";

/// One call: an operation's request as HTTP has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `PUT`, `POST`, `PATCH` or `DELETE`.
    pub method: String,
    /// The path and query (`/v1/refs/sessions/a?expected=ctx-…`), each
    /// segment and value percent-encoded as over HTTP.
    pub target: String,
    /// Its headers (`content-type`, `if-match`, ...); no `authorization`
    /// is needed: the caller is the process that opened the directory.
    pub headers: Vec<(String, String)>,
    /// Its body (empty for none).
    pub body: Bytes,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Its headers, each as many times as it came.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Bytes,
}

/// The caller of every request: the process that opened the directory, as
/// `tenant`.
struct InProcess {
    tenant: TenantId,
}

#[async_trait::async_trait]
impl Authenticator for InProcess {
    async fn authenticate(&self, _parts: &axum::http::request::Parts) -> Result<Caller> {
        Ok(Caller::tenant(self.tenant.clone()))
    }
}

/// What one process opened: its runtime and the router over its stores.
struct Opened {
    pid: u32,
    runtime: Runtime,
    router: Router,
    service: Arc<Service>,
}

/// A data directory opened in this process. Cheap to share between
/// threads (`Arc<Embedded>`): calls run concurrently.
pub struct Embedded {
    config: Config,
    tenant: TenantId,
    opened: Mutex<Arc<Opened>>,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("data", &self.config.data)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// The facade's tokio runtime, shut down without waiting when the last
/// handle to it goes. That drop may come from an interpreter that holds its
/// lock (Python collecting an `Embedded` it no longer references) while a
/// thread of the runtime's blocking pool waits for that same lock to hand
/// an answer over: a drop that waited for the pool, as dropping a tokio
/// runtime does, would never end. What is still in flight is abandoned;
/// none of it was answered, and every write that was is durable.
struct Runtime(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for Runtime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &tokio::runtime::Runtime {
        self.0
            .as_ref()
            .expect("the runtime is taken only when dropped")
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Worker threads of the facade's runtime: a call runs on the caller's
/// thread ([`Embedded::call`]); these carry the async calls and what the
/// stores hand off (group commits, timers).
const WORKERS: usize = 2;

impl Embedded {
    /// Opens (creating it if needed) the data directory `data` as the
    /// tenant `tenant` ([`DEFAULT_TENANT`] when `None`), with every other
    /// setting from the environment as `ctx serve` reads it (the
    /// summarizer, limits, retention; see docs/config.md). Branches whose
    /// deadline passed while no process had the directory open end now,
    /// and the others' timers run in this process.
    ///
    /// # Errors
    /// `Invalid` for a bad tenant or setting; `Unavailable` when the
    /// directory or its database cannot be opened.
    pub fn open(data: impl Into<PathBuf>, tenant: Option<&str>) -> Result<Embedded> {
        let mut config = Config::from_env()?;
        config.data = data.into();
        config.store = StoreKind::Local;
        let tenant: TenantId = tenant.unwrap_or(DEFAULT_TENANT).parse()?;
        let opened = open(&config, &tenant)?;
        Ok(Embedded {
            config,
            tenant,
            opened: Mutex::new(Arc::new(opened)),
        })
    }

    /// The data directory.
    pub fn data(&self) -> &Path {
        &self.config.data
    }

    /// The tenant it acts as.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// What this process opened. In a child of a `fork` the parent's
    /// runtime has no threads and its database connections must not be
    /// used: the child opens everything again, and leaves the parent's
    /// copies alone (closing an inherited SQLite connection could release
    /// the parent's locks).
    fn opened(&self) -> Result<Arc<Opened>> {
        let mut current = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if current.pid != std::process::id() {
            let fresh = Arc::new(open(&self.config, &self.tenant)?);
            let inherited = std::mem::replace(&mut *current, fresh);
            std::mem::forget(inherited);
        }
        Ok(current.clone())
    }

    /// Answers `req`, blocking the calling thread until it is done. Meant
    /// for a binding's thread that released its interpreter's lock; never
    /// call it from a task of the facade's own runtime. Every failure is
    /// an answer: the operation's own (a 4xx or 5xx with the API's error
    /// body), or a 503 when the directory could not be opened again after
    /// a `fork`.
    pub fn call(&self, req: Request) -> Response {
        match self.opened() {
            Ok(opened) => {
                let router = opened.router.clone();
                opened.runtime.block_on(answer(router, req))
            }
            Err(e) => failed(&e),
        }
    }

    /// Answers `req` on the facade's runtime: for async callers, whose
    /// event loop must not wait. The handle resolves on any runtime.
    pub fn spawn(&self, req: Request) -> tokio::task::JoinHandle<Response> {
        match self.opened() {
            Ok(opened) => {
                let router = opened.router.clone();
                opened.runtime.spawn(answer(router, req))
            }
            Err(e) => {
                let answer = failed(&e);
                fallback_runtime().spawn(async move { answer })
            }
        }
    }

    /// Answers `req` on the facade's runtime and hands the answer to
    /// `then` on its blocking pool: for a binding that must wait for its
    /// interpreter's lock to hand the answer over, which must not hold up
    /// an async worker, and must not run on the caller's event loop.
    pub fn call_then(&self, req: Request, then: impl FnOnce(Response) + Send + 'static) {
        let handle = self.spawn(req);
        let run = async move {
            let answer = match handle.await {
                Ok(a) => a,
                Err(e) => failed(&Error::internal(format!("a call failed: {e}"))),
            };
            drop(tokio::task::spawn_blocking(move || then(answer)));
        };
        match self.opened() {
            Ok(opened) => drop(opened.runtime.spawn(run)),
            Err(_) => drop(fallback_runtime().spawn(run)),
        }
    }

    /// Waits for the cached results still being written (a materialization
    /// answered from memory is stored behind its answer): call before the
    /// process exits, as `ctx serve` does when it stops.
    ///
    /// # Errors
    /// When the directory cannot be opened again after a `fork`.
    pub fn flush(&self) -> Result<()> {
        let opened = self.opened()?;
        let service = opened.service.clone();
        opened
            .runtime
            .block_on(async move { service.flush_cache_writes().await });
        Ok(())
    }
}

/// Opens the stores of `config` in this process, with a runtime of its own.
fn open(config: &Config, tenant: &TenantId) -> Result<Opened> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("ctx-embedded")
        .enable_all()
        .build()
        .map_err(|e| Error::unavailable(format!("cannot start ctx's runtime: {e}")))?;
    let needs = Needs {
        tokens: false,
        branching: true,
        process_timers: true,
    };
    let service = runtime.block_on(async {
        let backends = Backends::build(config, needs).await?;
        let service = backends.into_service(Arc::new(SystemClock));
        service.branch_sweep().await?;
        Ok::<_, Error>(Arc::new(service))
    })?;
    let auth: Arc<dyn Authenticator> = Arc::new(InProcess {
        tenant: tenant.clone(),
    });
    let router = router(
        AppState {
            service: service.clone(),
            auth,
        },
        Group::ALL,
    );
    Ok(Opened {
        pid: std::process::id(),
        runtime: Runtime(Some(runtime)),
        router,
        service,
    })
}

/// A runtime for answers that did not need the stores (a failure to open
/// them): one thread, made once per process.
fn fallback_runtime() -> &'static tokio::runtime::Runtime {
    static FALLBACK: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    FALLBACK.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a one-thread runtime starts")
    })
}

/// `e` as the API answers it: its status and error body.
fn failed(e: &Error) -> Response {
    let body = ctx_core::wire::ErrorBody::from(e);
    Response {
        status: ctx_core::api::error::status_of(e.kind).as_u16(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(serde_json::to_vec(&body).expect("an error body is strings and an enum")),
    }
}

/// `req` through `router`, in memory.
async fn answer(router: Router, req: Request) -> Response {
    let mut builder = axum::http::Request::builder()
        .method(req.method.as_str())
        .uri(req.target.as_str());
    for (k, v) in &req.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let request = match builder.body(axum::body::Body::from(req.body)) {
        Ok(r) => r,
        Err(e) => {
            let message = format!("{} {} is not a request: {e}", req.method, req.target);
            return failed(&Error::invalid("request", message));
        }
    };
    let resp = match router.oneshot(request).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let (parts, body) = resp.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return failed(&Error::internal(format!("reading an answer failed: {e}"))),
    };
    let headers = parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    Response {
        status: parts.status.as_u16(),
        headers,
        body,
    }
}
