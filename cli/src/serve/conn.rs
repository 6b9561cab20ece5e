//! The accept loop's parts: a cap on open connections (idle ones closed
//! first when it is reached), and per connection the timeouts for request
//! heads, idle time and request bodies.

use std::collections::BTreeMap;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ctx_core::Result;
use ctx_core::config::ServerLimits;

/// `max_connections`, but at most the open-file limit less 64 descriptors
/// for the stores, logs and the listener, and at least 1.
pub(super) fn connection_cap(max_connections: usize) -> usize {
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
pub(super) async fn take_slot(
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
pub(super) struct OpenConns(Mutex<BTreeMap<u64, Arc<ConnState>>>);

impl OpenConns {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnState>>> {
        // A panic while holding the lock leaves the map itself consistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn insert(&self, id: u64, conn: Arc<ConnState>) {
        self.map().insert(id, conn);
    }

    pub(super) fn remove(&self, id: u64) {
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
pub(super) struct ConnState {
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
pub(super) async fn serve_connection(
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
                "the request body did not arrive within {secs} s ({})",
                ctx_core::config::CTX_BODY_READ_TIMEOUT_SECS
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
