//! Every `CTX_*` setting in one [`Config`], read once and passed down.
//!
//! A Lambda reads it with [`Config::from_env`]; `ctx serve` does too and
//! then lays its flags (`--data`, `--addr`, `--store`,
//! `--session-validation`) over it. Nothing outside this module reads the
//! process environment; [`SETTINGS`] lists every variable with its default
//! and meaning, and the one Config table (docs/config.md) is checked against
//! it.
//!
//! Empty values count as unset. A value that does not parse is an
//! `Invalid` error whose field is the variable's name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::branch::{FoldingConfig, Validation};
use crate::error::{Error, Result};
use crate::id::TenantId;

/// One environment variable: its name, its default and what it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The variable.
    pub var: &'static str,
    /// The `ctx serve` flag that sets it too, if any.
    pub flag: Option<&'static str>,
    /// Its default, as written in docs/config.md.
    pub default: &'static str,
    /// What it sets, as written in docs/config.md.
    pub meaning: &'static str,
}

const fn setting(
    var: &'static str,
    flag: Option<&'static str>,
    default: &'static str,
    meaning: &'static str,
) -> Setting {
    Setting {
        var,
        flag,
        default,
        meaning,
    }
}

/// Every variable [`Config`] reads, in docs/config.md's order.
pub const SETTINGS: &[Setting] = &[
    setting(
        "CTX_DATA",
        Some("--data"),
        "`.ctx`",
        "the data directory of `ctx serve` and `ctx tokens` (artifacts, SQLite, the token file)",
    ),
    setting(
        "CTX_ADDR",
        Some("--addr"),
        "`127.0.0.1:7878`",
        "the address `ctx serve` listens on",
    ),
    setting(
        "CTX_SESSION_VALIDATION",
        Some("--session-validation"),
        "`strict`",
        "`strict`: only the principal (token) that opened a session touches its branches; `permissive`: any caller of the tenant",
    ),
    setting(
        "CTX_BRANCH_MAX_DEPTH",
        None,
        "3",
        "the deepest branch (a session's first branch is 1)",
    ),
    setting(
        "CTX_BRANCH_MAX_PER_SESSION",
        None,
        "10",
        "active branches per session",
    ),
    setting(
        "CTX_BRANCH_MAX_PER_TENANT",
        None,
        "100",
        "active branches per tenant",
    ),
    setting(
        "CTX_BRANCH_CREATES_PER_MINUTE",
        None,
        "5",
        "branch creations per session per minute",
    ),
    setting(
        "CTX_SESSION_END_TIMEOUT_SECS",
        None,
        "30",
        "how long session end waits for its branches before marking the rest failed",
    ),
    setting(
        "CTX_MAX_CONNECTIONS",
        None,
        "512",
        "connections `ctx serve` holds open at once (at most the open-file limit less 64); at the cap it closes idle ones first and lets the rest wait in the listen backlog",
    ),
    setting(
        "CTX_HEADER_READ_TIMEOUT_SECS",
        None,
        "30",
        "how long `ctx serve` waits for a request's head, from the moment it waits for one (a new connection, or after a response); then the connection is closed",
    ),
    setting(
        "CTX_IDLE_TIMEOUT_SECS",
        None,
        "15",
        "how long `ctx serve` keeps a connection with no request in progress open",
    ),
    setting(
        "CTX_BODY_READ_TIMEOUT_SECS",
        None,
        "120",
        "how long `ctx serve` waits for a whole request body; a slower body fails and its connection is closed",
    ),
    setting(
        "CTX_MAX_ARTIFACT_BYTES",
        None,
        "67108864",
        "the largest artifact (an uploaded body or an inline delta) in bytes (64 MiB); a JSON body may hold its base64 plus 1 MiB; larger ones get 413 naming this limit",
    ),
    setting(
        "CTX_INLINE_DELTA_BYTES",
        None,
        "16384",
        "the largest delta (or summary, or snapshot) a checkpoint stores inline with its commit's metadata (the SQLite row, the DynamoDB item) instead of as a blob, in bytes; 0 stores none inline; at most 262144 (a DynamoDB item holds 400 KB)",
    ),
    setting(
        "CTX_CACHE_BYTES",
        None,
        "1073741824",
        "the embedded store's budget for cached materializations and translations in bytes (1 GiB); least recently used ones are evicted past it and rebuilt on demand; 0: no budget (on AWS the `cache/` prefix's lifecycle rule expires them instead)",
    ),
    setting(
        "CTX_HOT_CACHE_BYTES",
        None,
        "67108864",
        "bytes of recent materializations a process keeps in memory (64 MiB), answering repeats and extending the parent's result without re-reading it, while storing each result in the background; 0 turns this off (every result is stored before it is answered; the Lambdas run with 0)",
    ),
    setting(
        "CTX_GC_GRACE_SECS",
        None,
        "86400",
        "garbage collection never removes an artifact or staged upload younger than this (24 h), so one written by a checkpoint in flight is safe",
    ),
    setting(
        "CTX_MAX_IN_FLIGHT_BYTES",
        None,
        "268435456",
        "request-body bytes `ctx serve` holds at once (256 MiB); a request beyond it gets 503 with `Retry-After` before its body is read (Lambdas: API Gateway's 10 MB limit applies instead)",
    ),
    setting(
        "CTX_BUCKET",
        None,
        "(required with the aws store)",
        "the S3 bucket of artifacts",
    ),
    setting(
        "CTX_TABLE",
        None,
        "(required with the aws store)",
        "the DynamoDB table of metadata and branches",
    ),
    setting(
        "CTX_S3_PATH_STYLE",
        None,
        "true when `AWS_ENDPOINT_URL` is set",
        "path-style S3 addressing (`true` or `false`), as emulators need",
    ),
    setting(
        "CTX_BRANCH_TIMER_ARN",
        None,
        "(none)",
        "the branch-timer state machine: with the aws store, branch deadlines are its executions; without it `ctx serve` uses tokio timers and a Lambda enforces no deadlines",
    ),
    setting(
        "CTX_TENANT_CLAIM",
        None,
        "`tenant`",
        "the JWT claim naming the caller's tenant (Lambdas)",
    ),
    setting(
        "CTX_SUMMARIZE_EVERY",
        Some("--summarize-every"),
        "off",
        "how often `ctx serve` fills in missing summaries of every tenant (`30s`, `5m`, `1h`; `off`)",
    ),
    setting(
        "CTX_RETENTION_DAYS",
        None,
        "0",
        "retention: erase sessions whose newest commit is older than this many days (0 = keep forever); per-tenant overrides after commas (`30,acme=7,beta=0`)",
    ),
    setting(
        "CTX_RETENTION_EVERY",
        None,
        "1h",
        "how often `ctx serve` applies retention to every tenant (`30s`, `5m`, `1h`; `off`); on AWS it runs with the summarizer's schedule",
    ),
    setting(
        "CTX_LOG",
        None,
        "`warn` (ctx), `info` (Lambdas)",
        "the log filter (`tracing` directives, e.g. `ctx_core=debug`)",
    ),
    setting(
        "CTX_SUMMARIZER",
        None,
        "`extractive`",
        "what writes missing summaries: `extractive` (no model: the user's ask, the tools run, the assistant's conclusion), `openai` (any OpenAI-compatible chat completions endpoint: OpenAI, Ollama, vLLM, llama.cpp, LiteLLM), `anthropic` (Messages API), `bedrock` (Converse API, IAM auth; needs the `aws` feature)",
    ),
    setting(
        "CTX_SUMMARIZER_URL",
        None,
        "`https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic)",
        "the model endpoint's base URL (`openai` posts to `{base}/chat/completions`, `anthropic` to `{base}/v1/messages`)",
    ),
    setting(
        "CTX_SUMMARIZER_MODEL",
        None,
        "(required with a model backend)",
        "the model (`gpt-4o-mini`, `llama3.2`, `claude-haiku-4-5`, a Bedrock model id); recorded in the `summary_by` tag",
    ),
    setting(
        "CTX_SUMMARIZER_API_KEY",
        None,
        "(none; required by `anthropic` and by `openai` at its default URL)",
        "the endpoint's API key (`Authorization: Bearer` for openai, `x-api-key` for anthropic); never logged",
    ),
    setting(
        "CTX_SUMMARIZER_TIMEOUT_SECS",
        None,
        "60",
        "how long one model request may take",
    ),
    setting(
        "CTX_SUMMARIZER_RETRIES",
        None,
        "3",
        "retries of a model request after a timeout, a connection error, 429 or 5xx (exponential backoff, honouring `Retry-After`)",
    ),
    setting(
        "CTX_SUMMARIZER_MAX_INPUT_TOKENS",
        None,
        "8000",
        "the most a model reads of one commit (estimated as characters / 4); a longer delta is cut to its head and tail",
    ),
];

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
    /// Its name, as `--store` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Local => "local",
            StoreKind::Memory => "memory",
            StoreKind::Aws => "aws",
        }
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `CTX_SUMMARIZE_EVERY` / `--summarize-every`: the interval of the
    /// embedded summary batch; `None` (the default) for none.
    pub summarize_every: Option<Duration>,
    /// `CTX_RETENTION_DAYS` / `CTX_RETENTION_EVERY`: retention by age.
    pub retention: Retention,
    /// Context folding: `CTX_BRANCH_*`, `CTX_SESSION_VALIDATION` /
    /// `--session-validation`, `CTX_SESSION_END_TIMEOUT_SECS`.
    pub folding: FoldingConfig,
    /// `CTX_MAX_ARTIFACT_BYTES`: the largest artifact, and so the body
    /// limits of the API.
    pub max_artifact_bytes: usize,
    /// `CTX_INLINE_DELTA_BYTES`: the largest artifact a checkpoint stores
    /// inline with its commit (0: none).
    pub inline_delta_bytes: usize,
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

/// Which summarizer backend writes missing summaries (`CTX_SUMMARIZER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SummarizerKind {
    /// No model: a deterministic line from the delta itself.
    #[default]
    Extractive,
    /// An OpenAI-compatible chat completions endpoint (the
    /// `summarize-http` feature).
    OpenAi,
    /// The Anthropic Messages API (the `summarize-http` feature).
    Anthropic,
    /// Bedrock's Converse API (the `summarize-bedrock` feature).
    Bedrock,
}

impl SummarizerKind {
    /// Its name, as `CTX_SUMMARIZER` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizerKind::Extractive => "extractive",
            SummarizerKind::OpenAi => "openai",
            SummarizerKind::Anthropic => "anthropic",
            SummarizerKind::Bedrock => "bedrock",
        }
    }
}

impl std::str::FromStr for SummarizerKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "extractive" => Ok(SummarizerKind::Extractive),
            "openai" => Ok(SummarizerKind::OpenAi),
            "anthropic" => Ok(SummarizerKind::Anthropic),
            "bedrock" => Ok(SummarizerKind::Bedrock),
            _ => Err(Error::invalid(
                "CTX_SUMMARIZER",
                format!("CTX_SUMMARIZER={s:?} is not extractive, openai, anthropic or bedrock"),
            )),
        }
    }
}

impl std::fmt::Display for SummarizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret (an API key): its `Debug` shows only that it is set, so it
/// cannot leak through a logged `Config`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The default base URL of the `openai` summarizer.
pub const DEFAULT_OPENAI_URL: &str = "https://api.openai.com/v1";
/// The default base URL of the `anthropic` summarizer.
pub const DEFAULT_ANTHROPIC_URL: &str = "https://api.anthropic.com";

/// The summarizer's settings (`CTX_SUMMARIZER*`), checked when read: a
/// model backend has its model, and its key where the endpoint needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizerConfig {
    /// `CTX_SUMMARIZER`: the backend.
    pub kind: SummarizerKind,
    /// `CTX_SUMMARIZER_URL`: the endpoint's base URL, without a trailing
    /// slash (the backend's default when unset; unused by `extractive` and
    /// `bedrock`).
    pub url: String,
    /// `CTX_SUMMARIZER_MODEL`: the model (empty for `extractive`).
    pub model: String,
    /// `CTX_SUMMARIZER_API_KEY`: the key, if the endpoint takes one.
    pub api_key: Option<Secret>,
    /// `CTX_SUMMARIZER_TIMEOUT_SECS`: one request's time limit.
    pub timeout: Duration,
    /// `CTX_SUMMARIZER_RETRIES`: retries after a transient failure.
    pub retries: u32,
    /// The first retry's wait, doubled on each further retry (not a
    /// variable: tests shorten it).
    pub backoff: Duration,
    /// The longest wait between retries; a `Retry-After` asking for more
    /// ends the retries (the batch tries again on a later run).
    pub max_backoff: Duration,
    /// `CTX_SUMMARIZER_MAX_INPUT_TOKENS`: the most a model reads of one
    /// commit.
    pub max_input_tokens: u64,
    /// The most a model writes in one summary (not a variable).
    pub max_output_tokens: u32,
}

impl Default for SummarizerConfig {
    fn default() -> Self {
        SummarizerConfig {
            kind: SummarizerKind::Extractive,
            url: String::new(),
            model: String::new(),
            api_key: None,
            timeout: Duration::from_secs(60),
            retries: 3,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_input_tokens: 8000,
            max_output_tokens: 400,
        }
    }
}

impl SummarizerConfig {
    /// Reads `CTX_SUMMARIZER*` through `get` (`None`: unset) and checks
    /// that the chosen backend has what it needs.
    ///
    /// # Errors
    /// `Invalid` naming the variable that does not parse or is missing.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<SummarizerConfig> {
        let mut c = SummarizerConfig::default();
        if let Some(v) = get("CTX_SUMMARIZER") {
            c.kind = v.parse()?;
        }
        if let Some(v) = get("CTX_SUMMARIZER_TIMEOUT_SECS") {
            let secs: u64 = parse("CTX_SUMMARIZER_TIMEOUT_SECS", &v, "a number of seconds")?;
            if secs == 0 {
                return Err(Error::invalid(
                    "CTX_SUMMARIZER_TIMEOUT_SECS",
                    "CTX_SUMMARIZER_TIMEOUT_SECS=\"0\" is not a positive number of seconds",
                ));
            }
            c.timeout = Duration::from_secs(secs);
        }
        if let Some(v) = get("CTX_SUMMARIZER_RETRIES") {
            c.retries = parse("CTX_SUMMARIZER_RETRIES", &v, "a number")?;
        }
        if let Some(v) = get("CTX_SUMMARIZER_MAX_INPUT_TOKENS") {
            c.max_input_tokens = parse("CTX_SUMMARIZER_MAX_INPUT_TOKENS", &v, "a number")?;
            if c.max_input_tokens < 100 {
                return Err(Error::invalid(
                    "CTX_SUMMARIZER_MAX_INPUT_TOKENS",
                    format!(
                        "CTX_SUMMARIZER_MAX_INPUT_TOKENS={v:?} is below the least useful budget, 100"
                    ),
                ));
            }
        }
        c.api_key = get("CTX_SUMMARIZER_API_KEY").map(Secret);
        let default_url = match c.kind {
            SummarizerKind::OpenAi => DEFAULT_OPENAI_URL,
            SummarizerKind::Anthropic => DEFAULT_ANTHROPIC_URL,
            SummarizerKind::Extractive | SummarizerKind::Bedrock => "",
        };
        let url = get("CTX_SUMMARIZER_URL");
        if let Some(v) = &url
            && !(v.starts_with("http://") || v.starts_with("https://"))
        {
            return Err(Error::invalid(
                "CTX_SUMMARIZER_URL",
                format!("CTX_SUMMARIZER_URL={v:?} is not an http:// or https:// URL"),
            ));
        }
        c.url = url
            .as_deref()
            .unwrap_or(default_url)
            .trim_end_matches('/')
            .to_owned();
        if c.kind != SummarizerKind::Extractive {
            c.model = get("CTX_SUMMARIZER_MODEL").ok_or_else(|| {
                Error::invalid(
                    "CTX_SUMMARIZER_MODEL",
                    format!(
                        "CTX_SUMMARIZER={} needs the model in CTX_SUMMARIZER_MODEL",
                        c.kind
                    ),
                )
            })?;
        }
        let needs_key = match c.kind {
            SummarizerKind::Anthropic => true,
            SummarizerKind::OpenAi => c.url == DEFAULT_OPENAI_URL,
            SummarizerKind::Extractive | SummarizerKind::Bedrock => false,
        };
        if needs_key && c.api_key.is_none() {
            return Err(Error::invalid(
                "CTX_SUMMARIZER_API_KEY",
                format!(
                    "CTX_SUMMARIZER={} at {} needs a key in CTX_SUMMARIZER_API_KEY",
                    c.kind, c.url
                ),
            ));
        }
        Ok(c)
    }
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
            summarize_every: None,
            retention: Retention::default(),
            folding: FoldingConfig::default(),
            max_artifact_bytes: crate::commit::limits::DEFAULT_MAX_ARTIFACT,
            inline_delta_bytes: crate::commit::limits::DEFAULT_INLINE_DELTA,
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
        let mut c = Config::default();
        if let Some(v) = get("CTX_DATA") {
            c.data = PathBuf::from(v);
        }
        if let Some(v) = get("CTX_ADDR") {
            c.addr = parse("CTX_ADDR", &v, "an address like 127.0.0.1:7878")?;
        }
        c.bucket = get("CTX_BUCKET");
        c.table = get("CTX_TABLE");
        c.s3_path_style = match get("CTX_S3_PATH_STYLE").as_deref() {
            Some("true" | "1") => true,
            Some("false" | "0") => false,
            Some(v) => {
                return Err(Error::invalid(
                    "CTX_S3_PATH_STYLE",
                    format!("CTX_S3_PATH_STYLE={v:?} is not true or false"),
                ));
            }
            None => get("AWS_ENDPOINT_URL").is_some(),
        };
        c.branch_timer_arn = get("CTX_BRANCH_TIMER_ARN");
        if let Some(v) = get("CTX_TENANT_CLAIM") {
            c.tenant_claim = v;
        }
        c.log = get("CTX_LOG");
        if let Some(v) = get("CTX_SUMMARIZE_EVERY") {
            c.summarize_every = parse_interval("CTX_SUMMARIZE_EVERY", &v)?;
        }
        if let Some(v) = get("CTX_RETENTION_DAYS") {
            c.retention.parse_days("CTX_RETENTION_DAYS", &v)?;
        }
        if let Some(v) = get("CTX_RETENTION_EVERY") {
            c.retention.every = parse_interval("CTX_RETENTION_EVERY", &v)?;
        }
        let f = &mut c.folding;
        let num = |name: &str, into: &mut u32| -> Result<()> {
            if let Some(v) = get(name) {
                *into = parse(name, &v, "a number")?;
            }
            Ok(())
        };
        num("CTX_BRANCH_MAX_DEPTH", &mut f.max_depth)?;
        num(
            "CTX_BRANCH_MAX_PER_SESSION",
            &mut f.limits.active_per_session,
        )?;
        num("CTX_BRANCH_MAX_PER_TENANT", &mut f.limits.active_per_tenant)?;
        num(
            "CTX_BRANCH_CREATES_PER_MINUTE",
            &mut f.limits.creations_per_minute,
        )?;
        if let Some(v) = get("CTX_SESSION_END_TIMEOUT_SECS") {
            f.session_end_timeout = Duration::from_secs(parse(
                "CTX_SESSION_END_TIMEOUT_SECS",
                &v,
                "a number of seconds",
            )?);
        }
        if let Some(v) = get("CTX_SESSION_VALIDATION") {
            f.validation = Self::parse_validation("CTX_SESSION_VALIDATION", &v)?;
        }
        if let Some(v) = get("CTX_MAX_ARTIFACT_BYTES") {
            c.max_artifact_bytes = parse("CTX_MAX_ARTIFACT_BYTES", &v, "a number of bytes")?;
        }
        if let Some(v) = get("CTX_INLINE_DELTA_BYTES") {
            c.inline_delta_bytes = parse("CTX_INLINE_DELTA_BYTES", &v, "a number of bytes")?;
            if c.inline_delta_bytes > crate::commit::limits::MAX_INLINE_DELTA {
                return Err(Error::invalid(
                    "CTX_INLINE_DELTA_BYTES",
                    format!(
                        "CTX_INLINE_DELTA_BYTES={v} is more than {} bytes: with a commit's \
                         metadata a DynamoDB item holds at most 400 KB",
                        crate::commit::limits::MAX_INLINE_DELTA
                    ),
                ));
            }
        }
        if let Some(v) = get("CTX_CACHE_BYTES") {
            c.cache_bytes = parse("CTX_CACHE_BYTES", &v, "a number of bytes")?;
        }
        if let Some(v) = get("CTX_HOT_CACHE_BYTES") {
            c.hot_cache_bytes = parse("CTX_HOT_CACHE_BYTES", &v, "a number of bytes")?;
        }
        if let Some(v) = get("CTX_GC_GRACE_SECS") {
            c.gc_grace =
                Duration::from_secs(parse("CTX_GC_GRACE_SECS", &v, "a number of seconds")?);
        }
        let server = &mut c.server;
        if let Some(v) = get("CTX_MAX_CONNECTIONS") {
            server.max_connections = parse("CTX_MAX_CONNECTIONS", &v, "a number")?;
        }
        if let Some(v) = get("CTX_MAX_IN_FLIGHT_BYTES") {
            server.max_in_flight_bytes = parse("CTX_MAX_IN_FLIGHT_BYTES", &v, "a number of bytes")?;
        }
        for (name, into) in [
            (
                "CTX_HEADER_READ_TIMEOUT_SECS",
                &mut server.header_read_timeout,
            ),
            ("CTX_IDLE_TIMEOUT_SECS", &mut server.idle_timeout),
            ("CTX_BODY_READ_TIMEOUT_SECS", &mut server.body_read_timeout),
        ] {
            if let Some(v) = get(name) {
                *into = Duration::from_secs(parse(name, &v, "a number of seconds")?);
            }
        }
        c.summarizer = SummarizerConfig::from_vars(get)?;
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
        env_var("CTX_LOG").ok().flatten()
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
            bucket: required(&self.bucket, "CTX_BUCKET")?,
            table: required(&self.table, "CTX_TABLE")?,
            path_style: self.s3_path_style,
        })
    }

    /// The emulator's configuration for a test (the aws store, from the
    /// exports of `localstack/emulator start`), or `None` (said on stderr)
    /// when no emulator is expected here. With `CTX_TEST_AWS=1` (tests/run,
    /// CI) a missing or unreachable emulator panics: nothing is silently
    /// skipped.
    ///
    /// # Panics
    /// As above, so that the calling test fails.
    #[cfg(all(feature = "aws", any(test, feature = "conformance")))]
    pub fn emulator_from_env() -> Option<Config> {
        let required = harness_flag("CTX_TEST_AWS");
        let Some(url) = env_var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL is UTF-8") else {
            assert!(
                !required,
                "CTX_TEST_AWS=1 but AWS_ENDPOINT_URL is not set: start the emulator (tests/run does)"
            );
            eprintln!(
                "NOT RUN: this test needs the AWS emulator; tests/run starts it (CTX_TEST_AWS=1)"
            );
            return None;
        };
        let dynamodb =
            env_var("AWS_ENDPOINT_URL_DYNAMODB").expect("AWS_ENDPOINT_URL_DYNAMODB is UTF-8");
        for url in std::iter::once(url).chain(dynamodb) {
            let addr = url.trim_start_matches("http://").trim_end_matches('/');
            assert!(
                std::net::TcpStream::connect(addr).is_ok(),
                "the AWS emulator at {url} is unreachable"
            );
        }
        let config = Config {
            store: StoreKind::Aws,
            ..Config::from_env().expect("the emulator's configuration parses")
        };
        config
            .aws()
            .expect("CTX_BUCKET and CTX_TABLE are set with AWS_ENDPOINT_URL");
        Some(config)
    }
}

/// The variables that steer the test harness and the benchmarks, not ctx
/// itself (listed in docs/config.md's table as "tests").
pub const HARNESS: &[Setting] = &[
    setting(
        "CTX_TEST_AWS",
        None,
        "(unset)",
        "tests: `1` makes the aws tests fail, not skip, without the emulator (tests/run sets it)",
    ),
    setting(
        "CTX_TEST_MCP",
        None,
        "(unset)",
        "tests: `1` makes the MCP test fail, not skip, without its Python client (tests/run sets it)",
    ),
    setting(
        "CTX_BIN",
        None,
        "`target/<profile>/ctx`",
        "tests: the `ctx` binary the end-to-end tests run",
    ),
    setting(
        "CTX_CRASH_KILLS",
        None,
        "24",
        "tests: how many times the crash test kills the server",
    ),
    setting(
        "CTX_CRASH_SEED",
        None,
        "(a fixed seed)",
        "tests: replays a crash-test run",
    ),
    setting(
        "CTX_BENCH_QUICK",
        None,
        "(unset)",
        "benchmarks: `1` runs the quick smoke sizes (like `-- --quick`)",
    ),
    setting(
        "CTX_EMULATOR_PID",
        None,
        "(set by `localstack/emulator start`)",
        "tests: the emulator processes `localstack/emulator stop` stops",
    ),
];

/// The value of a test-harness variable (one of [`HARNESS`]); `None` when
/// unset or empty.
///
/// # Panics
/// For a name not in [`HARNESS`] (a typo would silently read nothing) or a
/// value that is not UTF-8.
pub fn harness_var(name: &str) -> Option<String> {
    assert!(
        HARNESS.iter().any(|s| s.var == name),
        "{name} is not a harness variable (config::HARNESS)"
    );
    env_var(name).unwrap_or_else(|e| panic!("{}", e.message))
}

/// Whether a test-harness variable is `1`.
///
/// # Panics
/// As [`harness_var`].
pub fn harness_flag(name: &str) -> bool {
    harness_var(name).as_deref() == Some("1")
}

#[cfg(test)]
mod tests;
