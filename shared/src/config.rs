//! Every `CTX_*` setting in one [`Config`], read once and passed down.
//!
//! A Lambda reads it with [`Config::from_env`]; `ctx serve` does too and
//! then lays its flags (`--data`, `--addr`, `--store`,
//! `--session-validation`) over it. Nothing outside this module reads the
//! process environment.
//!
//! Each variable is declared once, in `settings`: a `pub const` [`Setting`]
//! named as the variable ([`CTX_DATA`], …) with its flag, default, meaning
//! and reader. [`Config::from_vars`] reads [`SETTINGS`] in order, error
//! messages and `ctx serve`'s flags take the names from the constants, and
//! the one Config table (docs/config.md) is checked against the table. The
//! summarizer's settings and checks are in `summarizer`, the test
//! harness's variables and the emulator's configuration in `harness`.
//!
//! Empty values count as unset. A value that does not parse is an
//! `Invalid` error whose field is the variable's name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::branch::{BranchConfig, Validation};
use crate::error::{Error, Result};
use crate::id::TenantId;

mod harness;
mod settings;
mod summarizer;

pub use harness::{harness_flag, harness_var};
pub use settings::*;
pub use summarizer::{
    DEFAULT_ANTHROPIC_URL, DEFAULT_OPENAI_URL, Secret, SummarizerConfig, SummarizerKind,
};

/// Which backends hold the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// Filesystem CAS + SQLite under the data directory (durable).
    #[default]
    Local,
    /// Everything in memory; lost when the process stops.
    Memory,
    /// S3 + DynamoDB ([`Config::bucket`], [`Config::table`] and the AWS
    /// SDK's own variables). Needs the `aws` feature.
    Aws,
}

impl StoreKind {
    /// Every kind.
    pub const ALL: [StoreKind; 3] = [StoreKind::Local, StoreKind::Memory, StoreKind::Aws];

    /// Its name, as `--store` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Local => "local",
            StoreKind::Memory => "memory",
            StoreKind::Aws => "aws",
        }
    }

    /// What it is, in a line (`ctx serve --help`).
    pub fn describe(self) -> &'static str {
        match self {
            StoreKind::Local => "Filesystem CAS + SQLite under the data directory (durable)",
            StoreKind::Memory => "Everything in memory; lost when the server stops",
            StoreKind::Aws => {
                "S3 + DynamoDB as configured by the environment (CTX_BUCKET, CTX_TABLE, the AWS \
                 SDK's variables); tokens stay in the data directory. Needs a build with the \
                 `aws` feature"
            }
        }
    }
}

impl std::str::FromStr for StoreKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        StoreKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "store",
                    format!("store {s:?} is none of local, memory and aws"),
                )
            })
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The default of `CTX_CACHE_BYTES`: 1 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;
/// The default of `CTX_HOT_CACHE_BYTES`: 64 MiB.
pub const DEFAULT_HOT_CACHE_BYTES: u64 = 64 << 20;
/// The default of `CTX_GC_GRACE_SECS`: 24 h.
pub const DEFAULT_GC_GRACE_SECS: u64 = 86_400;

/// Every setting of a ctx process. [`Config::default`] is the documented
/// defaults; [`Config::from_env`] lays the environment over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `CTX_DATA` / `--data`: the data directory.
    pub data: PathBuf,
    /// `CTX_ADDR` / `--addr`: where `ctx serve` listens.
    pub addr: SocketAddr,
    /// `--store`: the backends (a Lambda always uses [`StoreKind::Aws`]).
    pub store: StoreKind,
    /// `CTX_BUCKET`: the artifact bucket of the aws store.
    pub bucket: Option<String>,
    /// `CTX_TABLE`: the metadata table of the aws store.
    pub table: Option<String>,
    /// `CTX_S3_PATH_STYLE`: path-style S3 addressing; defaults to whether
    /// `AWS_ENDPOINT_URL` (an emulator) is set.
    pub s3_path_style: bool,
    /// `CTX_BRANCH_TIMER_ARN`: the branch-timer state machine.
    pub branch_timer_arn: Option<String>,
    /// `CTX_TENANT_CLAIM`: the JWT claim naming the tenant.
    pub tenant_claim: String,
    /// `CTX_LOG`: the log filter; `None` for the binary's default.
    pub log: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the OpenTelemetry collector spans and
    /// metrics are exported to (`ctx serve`, the Lambdas); `None`: no
    /// export. Checked here, read again by the exporter (crate
    /// `ctx-telemetry`), which also reads the SDK's other `OTEL_` variables.
    pub otlp_endpoint: Option<String>,
    /// `CTX_SUMMARIZE_EVERY` / `--summarize-every`: the interval of the
    /// embedded summary batch; `None` (the default) for none.
    pub summarize_every: Option<Duration>,
    /// `CTX_RETENTION_DAYS` / `CTX_RETENTION_EVERY`: retention by age.
    pub retention: Retention,
    /// Context folding: `CTX_BRANCH_*`, `CTX_SESSION_VALIDATION` /
    /// `--session-validation`, `CTX_SESSION_END_TIMEOUT_SECS`.
    pub branching: BranchConfig,
    /// `CTX_MAX_ARTIFACT_BYTES`: the largest artifact, and so the body
    /// limits of the API.
    pub max_artifact_bytes: usize,
    /// `CTX_INLINE_DELTA_BYTES`: the largest artifact a checkpoint stores
    /// inline with its commit on the embedded stores (0: none).
    pub inline_delta_bytes: usize,
    /// `CTX_DYNAMODB_INLINE_DELTA_BYTES`: the same on the aws store, whose
    /// write units make a different trade-off (see [`Config::inline_limit`]).
    pub dynamodb_inline_delta_bytes: usize,
    /// `CTX_DOWNLOAD_URL_BYTES`: the largest artifact a download answers
    /// with its bytes where the store hands out URLs (S3); a larger one is
    /// a presigned GET.
    pub download_url_bytes: u64,
    /// `CTX_BACKUP_RETENTION_DAYS`: how long backups keep what an erase
    /// removes (0: no backups).
    pub backup_retention_days: u64,
    /// `CTX_CACHE_BYTES`: the embedded cache budget in bytes (0: none).
    pub cache_bytes: u64,
    /// `CTX_HOT_CACHE_BYTES`: bytes of recent materializations held in
    /// memory, stored in the background (0: none, stored before answering).
    pub hot_cache_bytes: u64,
    /// `CTX_GC_GRACE_SECS`: the age below which garbage collection keeps
    /// every artifact.
    pub gc_grace: Duration,
    /// How `ctx serve` protects itself from slow, idle and large clients:
    /// `CTX_MAX_CONNECTIONS`, `CTX_*_TIMEOUT_SECS`, `CTX_MAX_IN_FLIGHT_BYTES`.
    pub server: ServerLimits,
    /// Who writes missing summaries: `CTX_SUMMARIZER*`.
    pub summarizer: SummarizerConfig,
}

/// The limits `ctx serve` puts on connections and request bodies. A Lambda
/// needs none of them: API Gateway bounds connections, time and body size
/// (10 MB) before a request reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// `CTX_MAX_CONNECTIONS`: connections held open at once.
    pub max_connections: usize,
    /// `CTX_HEADER_READ_TIMEOUT_SECS`: the wait for a request head, from
    /// the moment the server waits for one.
    pub header_read_timeout: Duration,
    /// `CTX_IDLE_TIMEOUT_SECS`: how long a connection with no request in
    /// progress stays open.
    pub idle_timeout: Duration,
    /// `CTX_BODY_READ_TIMEOUT_SECS`: the wait for a whole request body.
    pub body_read_timeout: Duration,
    /// `CTX_MAX_IN_FLIGHT_BYTES`: request-body bytes held at once.
    pub max_in_flight_bytes: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 512,
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(15),
            body_read_timeout: Duration::from_secs(120),
            max_in_flight_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The default of `CTX_DATA`.
pub const DEFAULT_DATA: &str = ".ctx";
/// The default of `CTX_ADDR`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7878";
/// The default of `CTX_TENANT_CLAIM`.
pub const DEFAULT_TENANT_CLAIM: &str = "tenant";

impl Default for Config {
    fn default() -> Self {
        Config {
            data: PathBuf::from(DEFAULT_DATA),
            addr: DEFAULT_ADDR
                .parse()
                .expect("the default address is a socket address"),
            store: StoreKind::default(),
            bucket: None,
            table: None,
            s3_path_style: false,
            branch_timer_arn: None,
            tenant_claim: DEFAULT_TENANT_CLAIM.to_owned(),
            log: None,
            otlp_endpoint: None,
            summarize_every: None,
            retention: Retention::default(),
            branching: BranchConfig::default(),
            max_artifact_bytes: crate::commit::limits::DEFAULT_MAX_ARTIFACT,
            inline_delta_bytes: crate::commit::limits::DEFAULT_INLINE_DELTA,
            dynamodb_inline_delta_bytes: crate::commit::limits::DEFAULT_DYNAMODB_INLINE_DELTA,
            download_url_bytes: crate::commit::limits::DEFAULT_DOWNLOAD_URL,
            backup_retention_days: 0,
            cache_bytes: DEFAULT_CACHE_BYTES,
            hot_cache_bytes: DEFAULT_HOT_CACHE_BYTES,
            gc_grace: Duration::from_secs(DEFAULT_GC_GRACE_SECS),
            server: ServerLimits::default(),
            summarizer: SummarizerConfig::default(),
        }
    }
}

/// Retention by age: how many days a tenant's idle sessions are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Days kept for tenants without an override; 0 keeps forever.
    pub keep_days: u32,
    /// Per-tenant overrides.
    pub per_tenant: std::collections::BTreeMap<TenantId, u32>,
    /// How often `ctx serve` applies it; `None` for never.
    pub every: Option<Duration>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_days: 0,
            per_tenant: Default::default(),
            every: Some(Duration::from_secs(3600)),
        }
    }
}

impl Retention {
    /// The days kept for `tenant` (0 = forever).
    pub fn keep_days_for(&self, tenant: &TenantId) -> u32 {
        self.per_tenant
            .get(tenant)
            .copied()
            .unwrap_or(self.keep_days)
    }

    /// Parses `N` or `N,tenant=M,...` (the default first, then overrides).
    ///
    /// # Errors
    /// `Invalid` naming `name`.
    pub fn parse_days(&mut self, name: &str, value: &str) -> Result<()> {
        let bad = |why: &str| {
            Error::invalid(
                name,
                format!("{name}={value:?}: {why}; give days like 30 or 30,acme=7"),
            )
        };
        let mut parts = value.split(',').map(str::trim);
        let first = parts.next().unwrap_or("");
        self.keep_days = first
            .parse()
            .map_err(|_| bad("the default is not a number"))?;
        for p in parts {
            let (t, d) = p
                .split_once('=')
                .ok_or_else(|| bad("an override is not tenant=days"))?;
            let tenant: TenantId = t
                .parse()
                .map_err(|_| bad("an override names no valid tenant"))?;
            let days: u32 = d
                .parse()
                .map_err(|_| bad("an override's days is not a number"))?;
            self.per_tenant.insert(tenant, days);
        }
        Ok(())
    }
}

/// Reads one variable of the process environment: `None` when unset or
/// empty.
///
/// # Errors
/// `Invalid` naming the variable when its value is not UTF-8.
#[allow(clippy::disallowed_methods)] // the one place the environment is read
fn env_var(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) if v.is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid(
            name,
            format!("the environment variable {name} is not valid UTF-8"),
        )),
    }
}

/// Parses `name`'s value with `FromStr`, saying what was expected.
fn parse<T: std::str::FromStr>(name: &str, value: &str, what: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| Error::invalid(name, format!("{name}={value:?} is not {what}")))
}

/// Parses an inline-delta limit (`CTX_INLINE_DELTA_BYTES`,
/// `CTX_DYNAMODB_INLINE_DELTA_BYTES`): a number of bytes up to
/// [`MAX_INLINE_DELTA`](crate::commit::limits::MAX_INLINE_DELTA).
fn inline_limit(name: &str, value: &str) -> Result<usize> {
    let max = crate::commit::limits::MAX_INLINE_DELTA;
    let bytes = parse(name, value, "a number of bytes")?;
    if bytes > max {
        return Err(Error::invalid(
            name,
            format!(
                "{name}={value} is more than {max} bytes: with a commit's metadata a DynamoDB \
                 item holds at most 400 KB"
            ),
        ));
    }
    Ok(bytes)
}

/// Parses `name`'s value as a whole number of seconds.
fn secs(name: &str, value: &str) -> Result<Duration> {
    parse(name, value, "a number of seconds").map(Duration::from_secs)
}

/// An interval such as `30s`, `5m`, `1h` or `1d` (`off`: none), for the
/// setting `name`.
///
/// # Errors
/// `Invalid` naming `name`: no unit, not a whole number, zero, or over a
/// week.
pub fn parse_interval(name: &str, value: &str) -> Result<Option<Duration>> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let bad = || {
        Error::invalid(
            name,
            format!("{name}={value:?} is not an interval like 30s, 5m, 1h or 1d (or off)"),
        )
    };
    let split = v.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = v.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(bad()),
    };
    if secs == 0 || secs > 7 * 86_400 {
        return Err(Error::invalid(
            name,
            format!("{name}={value:?} is out of range: give 1s to 7d (or off)"),
        ));
    }
    Ok(Some(Duration::from_secs(secs)))
}

impl Config {
    /// The largest delta a checkpoint stores inline with its commit on
    /// the configured store: `CTX_DYNAMODB_INLINE_DELTA_BYTES` on aws,
    /// where an inline delta is paid in write units on every item and
    /// index entry that carries it, `CTX_INLINE_DELTA_BYTES` on the
    /// embedded stores, where it saves a file per delta.
    pub fn inline_limit(&self) -> usize {
        match self.store {
            StoreKind::Aws => self.dynamodb_inline_delta_bytes,
            StoreKind::Local | StoreKind::Memory => self.inline_delta_bytes,
        }
    }

    /// The documented defaults overlaid with the process environment (the
    /// variables in [`SETTINGS`], and `AWS_ENDPOINT_URL` for the default
    /// of `CTX_S3_PATH_STYLE`).
    ///
    /// # Errors
    /// `Invalid` naming the variable whose value does not parse (or is not
    /// UTF-8).
    pub fn from_env() -> Result<Config> {
        let mut vars = Vec::new();
        for name in SETTINGS.iter().map(|s| s.var).chain(["AWS_ENDPOINT_URL"]) {
            if let Some(v) = env_var(name)? {
                vars.push((name, v));
            }
        }
        Self::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        })
    }

    /// Like [`Config::from_env`], reading each variable through `get`
    /// (`None` or an empty value: unset).
    ///
    /// # Errors
    /// `Invalid` naming the variable whose value does not parse.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let get = |name: &str| get(name).filter(|v| !v.is_empty());
        let mut c = Config {
            s3_path_style: get("AWS_ENDPOINT_URL").is_some(),
            ..Config::default()
        };
        for setting in SETTINGS {
            let read = setting
                .read
                .expect("every setting of SETTINGS has a reader (tested)");
            if let Some(v) = get(setting.var) {
                read(&mut c, setting.var, &v)?;
            }
        }
        c.summarizer.check()?;
        Ok(c)
    }

    /// Parses a session-validation value (`strict` or `permissive`) given
    /// by `source` (a variable or a flag), naming it in the error.
    ///
    /// # Errors
    /// `Invalid` with field `source` for any other value.
    pub fn parse_validation(source: &str, value: &str) -> Result<Validation> {
        value.parse().map_err(|e: Error| Error {
            field: Some(source.to_owned()),
            ..e
        })
    }

    /// `CTX_LOG` alone, for a binary that sets up logging before it parses
    /// its command line (the rest of the configuration may not apply to
    /// the command it then runs).
    pub fn log_from_env() -> Option<String> {
        env_var(CTX_LOG.var).ok().flatten()
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` alone, checked as [`Config::from_env`]
    /// checks it, for a binary that sets up its exporter before it parses
    /// its command line; `None` when unset or empty.
    ///
    /// # Errors
    /// `Invalid` naming the variable for a value that is not an `http://`
    /// URL.
    pub fn otlp_endpoint_from_env() -> Result<Option<String>> {
        let setting = OTEL_EXPORTER_OTLP_ENDPOINT;
        let Some(v) = env_var(setting.var)? else {
            return Ok(None);
        };
        let mut c = Config::default();
        if let Some(read) = setting.read {
            read(&mut c, setting.var, &v)?;
        }
        Ok(c.otlp_endpoint)
    }

    /// Where the aws store keeps its data.
    ///
    /// # Errors
    /// `Invalid` naming `CTX_BUCKET` or `CTX_TABLE` when it is not set.
    #[cfg(feature = "aws")]
    pub fn aws(&self) -> Result<crate::store::aws::AwsConfig> {
        let required = |value: &Option<String>, name: &str| {
            value.clone().ok_or_else(|| {
                Error::invalid(name, format!("the environment variable {name} is not set"))
            })
        };
        Ok(crate::store::aws::AwsConfig {
            bucket: required(&self.bucket, CTX_BUCKET.var)?,
            table: required(&self.table, CTX_TABLE.var)?,
            path_style: self.s3_path_style,
        })
    }
}

#[cfg(test)]
mod tests;
