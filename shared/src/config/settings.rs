//! Every `CTX_*` variable, declared once: a `pub const` [`Setting`] named
//! after it (its name is `stringify!`'d from that constant), with its
//! `ctx serve` flag, its default and meaning as docs/config.md's Config
//! table states them, and how [`Config`] reads it. Everything that names a
//! variable (reading the environment, error messages, `ctx serve`'s flags,
//! the docs-table test) takes the name from its constant.

use std::path::PathBuf;
use std::time::Duration;

use super::summarizer::Secret;
use super::{Config, inline_limit, parse, parse_interval, secs};
use crate::error::{Error, Result};

/// How a setting's value is laid over a [`Config`]: given the variable's
/// name (for errors) and its value (never empty).
pub(super) type Read = fn(&mut Config, &'static str, &str) -> Result<()>;

/// One environment variable: its name, its default and what it sets.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The variable.
    pub var: &'static str,
    /// The `ctx serve` flag that sets it too, if any.
    pub flag: Option<&'static str>,
    /// Its default, as written in docs/config.md.
    pub default: &'static str,
    /// What it sets, as written in docs/config.md.
    pub meaning: &'static str,
    /// How [`Config`] reads it; `None` for the test harness's variables,
    /// which are no setting of ctx itself.
    pub(super) read: Option<Read>,
}

impl Setting {
    /// The flag without its leading `--`, as clap's `long` takes it.
    ///
    /// # Panics
    /// For a setting without a flag (`ctx serve`'s tests build every flag).
    pub const fn long(&self) -> &'static str {
        match self.flag {
            Some(flag) => match flag.split_at_checked(2) {
                Some((_, long)) => long,
                None => panic!("a flag starts with --"),
            },
            None => panic!("this setting has no flag"),
        }
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.var)
    }
}

/// Declares each variable once: a `pub const` [`Setting`] per entry, named
/// as the variable, and the table listing them in order.
macro_rules! settings {
    (
        $(#[$table_doc:meta])*
        $table:ident = [
            $(
                $var:ident {
                    $(flag: $flag:literal,)?
                    default: $default:literal,
                    meaning: $meaning:literal,
                    $(read: $read:expr,)?
                }
            )*
        ];
    ) => {
        $(
            #[doc = $meaning]
            pub const $var: Setting = Setting {
                var: stringify!($var),
                flag: settings!(@option $($flag)?),
                default: $default,
                meaning: $meaning,
                read: settings!(@read $($read)?),
            };
        )*
        $(#[$table_doc])*
        pub const $table: &[Setting] = &[$($var),*];
    };
    (@option) => { None };
    (@option $flag:literal) => { Some($flag) };
    (@read) => { None };
    (@read $read:expr) => { Some({ let read: Read = $read; read }) };
}

settings! {
    /// Every variable [`Config`] reads, in docs/config.md's order (which
    /// is also the order they are read in).
    SETTINGS = [
        CTX_DATA {
            flag: "--data",
            default: "`.ctx`",
            meaning: "the data directory of `ctx serve` and `ctx tokens` (artifacts, SQLite, the token file)",
            read: |c, _, v| {
                c.data = PathBuf::from(v);
                Ok(())
            },
        }
        CTX_ADDR {
            flag: "--addr",
            default: "`127.0.0.1:7878`",
            meaning: "the address `ctx serve` listens on",
            read: |c, n, v| {
                c.addr = parse(n, v, "an address like 127.0.0.1:7878")?;
                Ok(())
            },
        }
        CTX_SESSION_VALIDATION {
            flag: "--session-validation",
            default: "`strict`",
            meaning: "`strict`: only the principal (token) that opened a session touches its branches; `permissive`: any caller of the tenant",
            read: |c, n, v| {
                c.branching.validation = Config::parse_validation(n, v)?;
                Ok(())
            },
        }
        CTX_BRANCH_MAX_DEPTH {
            default: "3",
            meaning: "the deepest branch (a session's first branch is 1)",
            read: |c, n, v| {
                c.branching.max_depth = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_BRANCH_MAX_PER_SESSION {
            default: "10",
            meaning: "active branches per session",
            read: |c, n, v| {
                c.branching.limits.active_per_session = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_BRANCH_MAX_PER_TENANT {
            default: "100",
            meaning: "active branches per tenant",
            read: |c, n, v| {
                c.branching.limits.active_per_tenant = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_BRANCH_CREATES_PER_MINUTE {
            default: "5",
            meaning: "branch creations per session per minute",
            read: |c, n, v| {
                c.branching.limits.creations_per_minute = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_SESSION_END_TIMEOUT_SECS {
            default: "30",
            meaning: "how long session end waits for its branches before marking the rest failed",
            read: |c, n, v| {
                c.branching.session_end_timeout = secs(n, v)?;
                Ok(())
            },
        }
        CTX_SESSION_IDLE_SECS {
            default: "120",
            meaning: "a session whose active branches saw nothing for this long (no checkpoint into their chains, no new branch) has them force-returned as at session end, reason `session idle for N s`, so a session that stops without calling session end still ends; 0: never (each branch waits for its own timeout)",
            read: |c, n, v| {
                let idle = secs(n, v)?;
                c.branching.session_idle = (!idle.is_zero()).then_some(idle);
                Ok(())
            },
        }
        CTX_MEMORY_EXTRACT {
            default: "`true`",
            meaning: "extract a memory when a branch ends (a strategy from a completed branch, an anti-pattern from a failed or timed-out one; its description by the summarizer of `CTX_SUMMARIZER`, extractive by default); `false`: none",
            read: |c, n, v| {
                c.branching.memory.extract = parse(n, v, "true or false")?;
                Ok(())
            },
        }
        CTX_MEMORY_INJECTION_RATIO {
            default: "0.2",
            meaning: "the share of a branch's budget its injected memories may take (`inject_memories`), above 0 and at most 1",
            read: |c, n, v| {
                let r: f64 = parse(n, v, "a number above 0 and at most 1")?;
                if !(r > 0.0 && r <= 1.0) {
                    return Err(Error::invalid(n, format!("{n}={v:?} is not above 0 and at most 1")));
                }
                c.branching.memory.injection_ratio = r;
                Ok(())
            },
        }
        CTX_MEMORY_MAX_ITEMS {
            default: "10",
            meaning: "memories injected into a branch at most (0 to 100)",
            read: |c, n, v| {
                let k: usize = parse(n, v, "a number from 0 to 100")?;
                if k > crate::branch::memories::MAX_SEARCH_LIMIT {
                    return Err(Error::invalid(n, format!("{n}={v:?} is over 100")));
                }
                c.branching.memory.max_items = k;
                Ok(())
            },
        }
        CTX_MEMORY_MIN_CONFIDENCE {
            default: "0.7",
            meaning: "only memories at least this confident (0 to 1) are injected",
            read: |c, n, v| {
                let m: f64 = parse(n, v, "a number from 0 to 1")?;
                if !(0.0..=1.0).contains(&m) {
                    return Err(Error::invalid(n, format!("{n}={v:?} is not from 0 to 1")));
                }
                c.branching.memory.min_confidence = m;
                Ok(())
            },
        }
        CTX_MEMORY_INJECTION_GUARD {
            default: "`block`",
            meaning: "a memory matching a prompt-injection pattern is logged and, with `block`, left out of an injection; `log` injects it (marked as data, like every memory)",
            read: |c, n, v| {
                c.branching.memory.guard = v
                    .parse()
                    .map_err(|e: Error| Error::invalid(n, format!("{n}={v:?}: {}", e.message)))?;
                Ok(())
            },
        }
        CTX_MAX_CONNECTIONS {
            default: "512",
            meaning: "connections `ctx serve` holds open at once (at most the open-file limit less 64); at the cap it closes idle ones first and lets the rest wait in the listen backlog",
            read: |c, n, v| {
                c.server.max_connections = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_HEADER_READ_TIMEOUT_SECS {
            default: "30",
            meaning: "how long `ctx serve` waits for a request's head, from the moment it waits for one (a new connection, or after a response); then the connection is closed",
            read: |c, n, v| {
                c.server.header_read_timeout = secs(n, v)?;
                Ok(())
            },
        }
        CTX_IDLE_TIMEOUT_SECS {
            default: "15",
            meaning: "how long `ctx serve` keeps a connection with no request in progress open",
            read: |c, n, v| {
                c.server.idle_timeout = secs(n, v)?;
                Ok(())
            },
        }
        CTX_BODY_READ_TIMEOUT_SECS {
            default: "120",
            meaning: "how long `ctx serve` waits for a whole request body; a slower body fails and its connection is closed",
            read: |c, n, v| {
                c.server.body_read_timeout = secs(n, v)?;
                Ok(())
            },
        }
        CTX_MAX_ARTIFACT_BYTES {
            default: "67108864",
            meaning: "the largest artifact (an uploaded body or an inline delta) in bytes (64 MiB); a JSON body may hold its base64 plus 1 MiB; larger ones get 413 naming this limit",
            read: |c, n, v| {
                c.max_artifact_bytes = parse(n, v, "a number of bytes")?;
                Ok(())
            },
        }
        CTX_DOWNLOAD_URL_BYTES {
            default: "4194304",
            meaning: "the largest artifact `GET /v1/artifacts/{art}` answers with its bytes where the store hands out URLs (aws); a larger one answers 303 with a presigned S3 GET URL (4 MiB: in base64 it fits a 6 MB Lambda response), unless `ctx serve` still holds it in its hot cache; the embedded stores always answer the bytes",
            read: |c, n, v| {
                c.download_url_bytes = parse(n, v, "a number of bytes")?;
                Ok(())
            },
        }
        CTX_INLINE_DELTA_BYTES {
            default: "65536",
            meaning: "on the embedded stores, the largest delta (or summary, or snapshot) a checkpoint stores inline in its commit's SQLite row instead of as a blob file, in bytes; 0 stores none inline; at most 262144 (the aws store uses `CTX_DYNAMODB_INLINE_DELTA_BYTES`)",
            read: |c, n, v| {
                c.inline_delta_bytes = inline_limit(n, v)?;
                Ok(())
            },
        }
        CTX_DYNAMODB_INLINE_DELTA_BYTES {
            default: "768",
            meaning: "on the aws store, the largest delta (or summary, or snapshot) a checkpoint stores inline in its commit's DynamoDB item instead of as an S3 object, in bytes; 0 stores none inline; at most 262144 (an item holds 400 KB); the default is the cost model's choice (docs/cost.md, `python3 tools/cost/model.py`): above it a delta costs less in S3 than in write units",
            read: |c, n, v| {
                c.dynamodb_inline_delta_bytes = inline_limit(n, v)?;
                Ok(())
            },
        }
        CTX_CACHE_BYTES {
            default: "1073741824",
            meaning: "the embedded store's budget for cached materializations and translations in bytes (1 GiB); least recently used ones are evicted past it and rebuilt on demand, and a result built on its parent's replaces it; 0: no budget (on AWS the `cache/` prefix's lifecycle rule expires them instead)",
            read: |c, n, v| {
                c.cache_bytes = parse(n, v, "a number of bytes")?;
                Ok(())
            },
        }
        CTX_HOT_CACHE_BYTES {
            default: "67108864",
            meaning: "bytes of recent materializations a process keeps in memory (64 MiB), answering repeats and extending the parent's result without re-reading it, while storing each result in the background; 0 turns this off (every result is stored before it is answered; the Lambdas run with 0)",
            read: |c, n, v| {
                c.hot_cache_bytes = parse(n, v, "a number of bytes")?;
                Ok(())
            },
        }
        CTX_GC_GRACE_SECS {
            default: "86400",
            meaning: "garbage collection never removes an artifact or staged upload younger than this (24 h), so one written by a checkpoint in flight is safe",
            read: |c, n, v| {
                c.gc_grace = secs(n, v)?;
                Ok(())
            },
        }
        CTX_BACKUP_RETENTION_DAYS {
            default: "0",
            meaning: "how long the deployment's backups keep what an erase removes, stated in every erase's answer as `backups_until` (template.yaml sets 35: DynamoDB point-in-time recovery); 0 states none (embedded mode keeps no backup)",
            read: |c, n, v| {
                c.backup_retention_days = parse(n, v, "a number of days")?;
                Ok(())
            },
        }
        CTX_MAX_IN_FLIGHT_BYTES {
            default: "268435456",
            meaning: "request-body bytes `ctx serve` holds at once (256 MiB); a request beyond it gets 503 with `Retry-After` before its body is read (Lambdas: API Gateway's 10 MB limit applies instead)",
            read: |c, n, v| {
                c.server.max_in_flight_bytes = parse(n, v, "a number of bytes")?;
                Ok(())
            },
        }
        CTX_BUCKET {
            default: "(required with the aws store)",
            meaning: "the S3 bucket of artifacts",
            read: |c, _, v| {
                c.bucket = Some(v.to_owned());
                Ok(())
            },
        }
        CTX_TABLE {
            default: "(required with the aws store)",
            meaning: "the DynamoDB table of metadata and branches",
            read: |c, _, v| {
                c.table = Some(v.to_owned());
                Ok(())
            },
        }
        CTX_S3_PATH_STYLE {
            default: "true when `AWS_ENDPOINT_URL` is set",
            meaning: "path-style S3 addressing (`true` or `false`), as emulators need",
            read: |c, n, v| {
                c.s3_path_style = match v {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => {
                        return Err(Error::invalid(
                            n,
                            format!("{n}={v:?} is not true or false"),
                        ));
                    }
                };
                Ok(())
            },
        }
        CTX_BRANCH_TIMER_ARN {
            default: "(none)",
            meaning: "the branch-timer state machine: with the aws store, branch deadlines are its executions; without it `ctx serve` uses tokio timers and a Lambda enforces no deadlines",
            read: |c, _, v| {
                c.branch_timer_arn = Some(v.to_owned());
                Ok(())
            },
        }
        CTX_TENANT_CLAIM {
            default: "`tenant`",
            meaning: "the JWT claim naming the caller's tenant (Lambdas)",
            read: |c, _, v| {
                c.tenant_claim = v.to_owned();
                Ok(())
            },
        }
        CTX_SUMMARIZE_EVERY {
            flag: "--summarize-every",
            default: "off",
            meaning: "how often `ctx serve` fills in missing summaries of every tenant (`30s`, `5m`, `1h`; `off`)",
            read: |c, n, v| {
                c.summarize_every = parse_interval(n, v)?;
                Ok(())
            },
        }
        CTX_RETENTION_DAYS {
            default: "0",
            meaning: "retention: erase sessions whose newest commit is older than this many days (0 = keep forever); per-tenant overrides after commas (`30,acme=7,beta=0`)",
            read: |c, n, v| {
                c.retention.parse_days(n, v)?;
                Ok(())
            },
        }
        CTX_RETENTION_EVERY {
            default: "1h",
            meaning: "how often `ctx serve` applies retention to every tenant (`30s`, `5m`, `1h`; `off`); on AWS it runs with the summarizer's schedule",
            read: |c, n, v| {
                c.retention.every = parse_interval(n, v)?;
                Ok(())
            },
        }
        CTX_LOG {
            default: "`warn` (ctx), `info` (Lambdas)",
            meaning: "the log filter (`tracing` directives, e.g. `ctx_core=debug`)",
            read: |c, _, v| {
                c.log = Some(v.to_owned());
                Ok(())
            },
        }
        OTEL_EXPORTER_OTLP_ENDPOINT {
            default: "(none: no export)",
            meaning: "`ctx serve` and the Lambdas export spans (one per operation, its store calls as children; tenant, principal, op and sizes, never content) and metrics (`ctx.checkpoints`, `ctx.operation.duration`, `ctx.materialize.bytes`, `ctx.summarizer.queue_depth`, `ctx.branch.budget.used`) over OTLP/HTTP with protobuf to this collector, e.g. `http://127.0.0.1:4318` (the ADOT Lambda layer's); `http://` only, as the exporter carries no TLS (the collector beside the process forwards over TLS). The SDK's own `OTEL_` variables apply (docs/telemetry.md). On AWS, the template parameter `OtlpEndpoint`",
            read: |c, n, v| {
                let rest = v.strip_prefix("http://").ok_or_else(|| {
                    Error::invalid(
                        n,
                        format!("{n}={v:?} is not an http:// URL: the exporter sends plain OTLP/HTTP to a collector beside the process (e.g. http://127.0.0.1:4318), which forwards over TLS itself"),
                    )
                })?;
                if rest.is_empty() || rest.starts_with('/') {
                    return Err(Error::invalid(n, format!("{n}={v:?} names no host")));
                }
                c.otlp_endpoint = Some(v.to_owned());
                Ok(())
            },
        }
        CTX_SUMMARIZER {
            default: "`extractive`",
            meaning: "what writes missing summaries: `extractive` (no model: the user's ask, the tools run, the assistant's conclusion), `openai` (any OpenAI-compatible chat completions endpoint: OpenAI, Ollama, vLLM, llama.cpp, LiteLLM), `anthropic` (Messages API), `bedrock` (Converse API, IAM auth; needs the `aws` feature)",
            read: |c, _, v| {
                c.summarizer.kind = v.parse()?;
                Ok(())
            },
        }
        CTX_SUMMARIZER_URL {
            default: "`https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic)",
            meaning: "the model endpoint's base URL (`openai` posts to `{base}/chat/completions`, `anthropic` to `{base}/v1/messages`)",
            read: |c, n, v| {
                if !(v.starts_with("http://") || v.starts_with("https://")) {
                    return Err(Error::invalid(
                        n,
                        format!("{n}={v:?} is not an http:// or https:// URL"),
                    ));
                }
                c.summarizer.url = v.trim_end_matches('/').to_owned();
                Ok(())
            },
        }
        CTX_SUMMARIZER_MODEL {
            default: "(required with a model backend)",
            meaning: "the model (`gpt-4o-mini`, `llama3.2`, `claude-haiku-4-5`, a Bedrock model id); recorded in the `summary_by` tag",
            read: |c, _, v| {
                c.summarizer.model = v.to_owned();
                Ok(())
            },
        }
        CTX_SUMMARIZER_API_KEY {
            default: "(none; required by `anthropic` and by `openai` at its default URL)",
            meaning: "the endpoint's API key (`Authorization: Bearer` for openai, `x-api-key` for anthropic); never logged",
            read: |c, _, v| {
                c.summarizer.api_key = Some(Secret::new(v));
                Ok(())
            },
        }
        CTX_SUMMARIZER_TIMEOUT_SECS {
            default: "60",
            meaning: "how long one model request may take",
            read: |c, n, v| {
                let secs: u64 = parse(n, v, "a number of seconds")?;
                if secs == 0 {
                    return Err(Error::invalid(
                        n,
                        format!("{n}=\"0\" is not a positive number of seconds"),
                    ));
                }
                c.summarizer.timeout = Duration::from_secs(secs);
                Ok(())
            },
        }
        CTX_SUMMARIZER_RETRIES {
            default: "3",
            meaning: "retries of a model request after a timeout, a connection error, 429 or 5xx (exponential backoff, honouring `Retry-After`)",
            read: |c, n, v| {
                c.summarizer.retries = parse(n, v, "a number")?;
                Ok(())
            },
        }
        CTX_SUMMARIZER_MAX_INPUT_TOKENS {
            default: "8000",
            meaning: "the most a model reads of one commit (estimated as characters / 4); a longer delta is cut to its head and tail",
            read: |c, n, v| {
                c.summarizer.max_input_tokens = parse(n, v, "a number")?;
                if c.summarizer.max_input_tokens < 100 {
                    return Err(Error::invalid(
                        n,
                        format!("{n}={v:?} is below the least useful budget, 100"),
                    ));
                }
                Ok(())
            },
        }
    ];
}

settings! {
    /// The variables that steer the test harness and the benchmarks, not
    /// ctx itself (listed in docs/config.md's table as "tests").
    HARNESS = [
        CTX_TEST_AWS {
            default: "(unset)",
            meaning: "tests: `1` makes the aws tests fail, not skip, without the emulator (tests/run sets it)",
        }
        CTX_TEST_MCP {
            default: "(unset)",
            meaning: "tests: `1` makes the MCP test fail, not skip, without its Python client (tests/run sets it)",
        }
        CTX_TEST_IAM {
            default: "(unset)",
            meaning: "tests: `1` makes the IAM test fail, not skip, without its evaluator's npm packages (tests/run sets it)",
        }
        CTX_BIN {
            default: "`target/<profile>/ctx`",
            meaning: "tests: the `ctx` binary the end-to-end tests run",
        }
        CTX_CRASH_KILLS {
            default: "24",
            meaning: "tests: how many times the crash test kills the server",
        }
        CTX_CRASH_SEED {
            default: "(a fixed seed)",
            meaning: "tests: replays a crash-test run",
        }
        CTX_BENCH_QUICK {
            default: "(unset)",
            meaning: "benchmarks: `1` runs the quick smoke sizes (like `-- --quick`)",
        }
        CTX_EMULATOR_PID {
            default: "(set by `localstack/emulator start`)",
            meaning: "tests: the emulator processes `localstack/emulator stop` stops",
        }
    ];
}
