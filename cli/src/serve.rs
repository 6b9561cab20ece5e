//! `ctx serve`: the whole API on one address over embedded storage, and the
//! token administration that goes with it (`ctx tokens ...`).

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{TokenAuth, new_token, token_hash};
use ctx_core::branch::{
    BranchStore, BranchTimer, Folding, FoldingConfig, RuleScrubber, TokioTimer,
};
use ctx_core::store::local::SqliteBranchStore;
use ctx_core::store::local::{LocalBlobStore, SqliteMetaStore};
use ctx_core::store::memory::MemoryBranchStore;
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::store::{Stores, TokenRecord, TokenStore};
use ctx_core::{Clock, OsRandom, Result, Service, SystemClock, TenantId};

/// Which backends `ctx serve` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// Filesystem CAS + SQLite under the data directory (durable).
    Local,
    /// Everything in memory; lost when the server stops.
    Memory,
    /// S3 + DynamoDB as configured by the environment (`CTX_BUCKET`,
    /// `CTX_TABLE`, the AWS SDK's variables); tokens stay in the data
    /// directory. Needs the `aws` feature.
    #[cfg(feature = "aws")]
    Aws,
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
    /// The router, ready to serve.
    pub app: axum::Router,
    listener: tokio::net::TcpListener,
}

fn open_tokens(data: &Path) -> Result<SqliteMetaStore> {
    SqliteMetaStore::open(data)
}

/// Opens the stores under `data`, makes the first token if there is none,
/// and binds `addr`.
///
/// # Errors
/// When the data directory or the address cannot be used.
pub async fn prepare(data: &Path, addr: SocketAddr, store: StoreKind) -> Result<Server> {
    prepare_with(data, addr, store, FoldingConfig::from_env()?).await
}

/// [`prepare`] with explicit context-folding settings: branches are stored
/// beside the commits (SQLite, memory, or DynamoDB), deadlines are tokio
/// timers, and branches whose deadline passed while the server was down
/// are expired before it starts serving (the rest are re-armed).
///
/// # Errors
/// When the data directory or the address cannot be used.
pub async fn prepare_with(
    data: &Path,
    addr: SocketAddr,
    store: StoreKind,
    folding: FoldingConfig,
) -> Result<Server> {
    std::fs::create_dir_all(data).map_err(|e| {
        ctx_core::Error::unavailable(format!(
            "cannot create the data directory {}: {e}",
            data.display()
        ))
    })?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (stores, tokens, branches): (Stores, Arc<dyn TokenStore>, Arc<dyn BranchStore>) =
        match store {
            StoreKind::Local => {
                let meta = Arc::new(SqliteMetaStore::open(data)?);
                let blobs = Arc::new(LocalBlobStore::open(data)?);
                (
                    Stores {
                        blobs,
                        meta: meta.clone(),
                    },
                    meta,
                    Arc::new(SqliteBranchStore::open(data)?),
                )
            }
            StoreKind::Memory => {
                let meta = Arc::new(MemoryMetaStore::new());
                (
                    Stores {
                        blobs: Arc::new(MemoryBlobStore::new()),
                        meta: meta.clone(),
                    },
                    meta,
                    Arc::new(MemoryBranchStore::new()),
                )
            }
            #[cfg(feature = "aws")]
            StoreKind::Aws => {
                use ctx_core::store::aws::DynamoBranchStore;
                use ctx_core::store::aws::{AwsConfig, AwsHooks, connect};
                let config = AwsConfig::from_env()?;
                let (blobs, meta) = connect(&config, AwsHooks::default()).await?;
                let branches = Arc::new(DynamoBranchStore::new(
                    meta.client().clone(),
                    config.table.clone(),
                ));
                (
                    Stores {
                        blobs: Arc::new(blobs),
                        meta: Arc::new(meta),
                    },
                    Arc::new(SqliteMetaStore::open(data)?),
                    branches,
                )
            }
        };
    let new_token = ensure_first_token(data, tokens.as_ref(), clock.as_ref()).await?;
    let timer = Arc::new(TokioTimer::new());
    let deadlines: Arc<dyn BranchTimer> = sfn_timer(store).await.unwrap_or_else(|| timer.clone());
    let service = Service::new(stores, clock).with_folding(Folding {
        store: branches,
        timer: deadlines,
        scrubber: Arc::new(RuleScrubber::new()?),
        ids: Arc::new(OsRandom),
        config: folding,
    });
    timer.bind(service.clone());
    let sweep = service.branch_sweep().await?;
    if sweep.expired + sweep.rearmed > 0 {
        tracing::info!(
            expired = sweep.expired,
            rearmed = sweep.rearmed,
            "branch deadlines after restart"
        );
    }
    let service = Arc::new(service);
    let state = AppState {
        service,
        auth: Arc::new(TokenAuth::new(tokens)),
    };
    let app = router(state, Group::ALL);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ctx_core::Error::unavailable(format!("cannot listen on {addr}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ctx_core::Error::unavailable(format!("cannot read the bound address: {e}")))?;
    Ok(Server {
        addr,
        new_token,
        app,
        listener,
    })
}

impl Server {
    /// Serves until `shutdown` resolves.
    ///
    /// # Errors
    /// When the listener fails.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(self.listener, self.app)
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// With `--store aws` and `CTX_BRANCH_TIMER_ARN` set, deadlines are Step
/// Functions executions of that state machine, as in the Lambda
/// deployment; otherwise tokio timers in this process.
#[allow(clippy::unused_async)] // awaits only with the aws feature
async fn sfn_timer(store: StoreKind) -> Option<Arc<dyn BranchTimer>> {
    #[cfg(feature = "aws")]
    if store == StoreKind::Aws
        && let Ok(arn) = std::env::var("CTX_BRANCH_TIMER_ARN")
        && !arn.is_empty()
    {
        use ctx_core::branch::sfn::SfnTimer;
        return Some(Arc::new(SfnTimer::new(
            SfnTimer::client_from_env().await,
            arn,
        )));
    }
    let _ = store;
    None
}

/// Makes a token for the default tenant when no token exists yet, and
/// writes it to `<data>/token` with mode 0600.
async fn ensure_first_token(
    data: &Path,
    tokens: &dyn TokenStore,
    clock: &dyn Clock,
) -> Result<Option<String>> {
    let file = token_file(data);
    if !tokens.list_tokens().await?.is_empty() {
        return Ok(None);
    }
    // A memory store starts empty every time: reuse the token on file so
    // clients keep working across restarts.
    let token = match std::fs::read_to_string(&file) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_owned(),
        _ => new_token(&OsRandom),
    };
    let tenant: TenantId = DEFAULT_TENANT.parse()?;
    tokens
        .add_token(&token_hash(&token), &tenant, clock.now())
        .await?;
    write_secret(&file, &token).map_err(|e| {
        ctx_core::Error::unavailable(format!("cannot write {}: {e}", file.display()))
    })?;
    Ok(Some(token))
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
