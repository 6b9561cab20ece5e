//! `ctx serve`: the whole API on one address over embedded storage, and the
//! token administration that goes with it (`ctx tokens ...`).
//!
//! Its flags ([`ServeArgs`]) are laid over `Config::from_env` and the
//! backends come from `Backends::build`, as in every Lambda.

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{TokenAuth, new_token, token_hash};
use ctx_core::config::{self, Config};
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
    /// directory. Needs the `aws` feature.
    #[cfg(feature = "aws")]
    Aws,
}

impl From<StoreKind> for config::StoreKind {
    fn from(kind: StoreKind) -> Self {
        match kind {
            StoreKind::Local => config::StoreKind::Local,
            StoreKind::Memory => config::StoreKind::Memory,
            #[cfg(feature = "aws")]
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
    /// The router, ready to serve.
    pub app: axum::Router,
    listener: tokio::net::TcpListener,
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
    let new_token = ensure_first_token(&config.data, tokens.as_ref(), clock.as_ref()).await?;
    let service = backends.into_service(clock);
    let sweep = service.branch_sweep().await?;
    if sweep.expired + sweep.rearmed > 0 {
        tracing::info!(
            expired = sweep.expired,
            rearmed = sweep.rearmed,
            "branch deadlines after restart"
        );
    }
    let state = AppState {
        service: Arc::new(service),
        auth: Arc::new(TokenAuth::new(tokens)),
    };
    let app = router(state, Group::ALL);
    let addr = config.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::unavailable(format!("cannot listen on {addr}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::unavailable(format!("cannot read the bound address: {e}")))?;
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
    }
    println!("ctx listening on http://{}", server.addr);
    let _ = std::io::stdout().flush();
    server
        .run(shutdown_signal())
        .await
        .map_err(|e| Error::unavailable(format!("server failed: {e}")))
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
    write_secret(&file, &token)
        .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", file.display())))?;
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
