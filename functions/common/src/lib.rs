//! # ctx-lambda
//!
//! What every ctx Lambda shares. A function's `main` is one line,
//! `ctx_lambda::run(Function::Checkpoint).await`: the configuration read
//! once ([`Config::from_env`]), the backends its routes use built once
//! ([`Backends::build`] with [`Function::needs`]), then its routes of the
//! shared router served through `lambda_http` (or, for the directly
//! invoked `branch-expire` and `summarizer`, their event handlers).
//!
//! # Layout
//! - [`Function`]: the functions, the route groups each serves and what it
//!   builds (template.yaml is tested against it).
//! - [`JwtClaimsAuth`]: the tenant (and principal) from the claims API
//!   Gateway's JWT authorizer put in the request context.
//! - [`app`] / [`run`]: building and serving a function.
//! - [`expire`]: `branch-expire`, the handler the branch-timer state
//!   machine invokes.
//! - [`summarize`]: `summarizer`, the handler the EventBridge schedule
//!   invokes.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{Authenticator, Caller};
use ctx_core::bootstrap::{Backends, Needs};
use ctx_core::config::{Config, StoreKind};
use ctx_core::service::{BatchOptions, Wake};
use ctx_core::store::aws::sfn::TimerInput;
use ctx_core::{Error, ErrorKind, Result, Service, SystemClock};
use lambda_http::request::RequestContext;

/// A ctx Lambda function: one binary each, named as in template.yaml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Function {
    /// `checkpoint`: artifacts, checkpoint, refs.
    Checkpoint,
    /// `materialize`.
    Materialize,
    /// `resolve`.
    Resolve,
    /// `history`: show, history, update-metadata, health, OpenAPI.
    History,
    /// `branch`: context folding (branches, session end).
    Branch,
    /// `branch-expire`: invoked by the branch-timer state machine at a
    /// branch's deadline, not by API Gateway.
    BranchExpire,
    /// `summarizer`: invoked by an EventBridge schedule to fill in missing
    /// summaries, not by API Gateway.
    Summarizer,
}

impl Function {
    /// Every function.
    pub const ALL: &'static [Function] = &[
        Function::Checkpoint,
        Function::Materialize,
        Function::Resolve,
        Function::History,
        Function::Branch,
        Function::BranchExpire,
        Function::Summarizer,
    ];

    /// Its binary's name (template.yaml's `BuildProperties.Binary`).
    pub fn name(self) -> &'static str {
        match self {
            Function::Checkpoint => "checkpoint",
            Function::Materialize => "materialize",
            Function::Resolve => "resolve",
            Function::History => "history",
            Function::Branch => "branch",
            Function::BranchExpire => "branch-expire",
            Function::Summarizer => "summarizer",
        }
    }

    /// The route groups it serves behind API Gateway (none for the
    /// directly invoked `branch-expire` and `summarizer`).
    pub fn groups(self) -> &'static [Group] {
        match self {
            Function::Checkpoint => &[
                Group::Checkpoint,
                Group::Artifacts,
                Group::Refs,
                Group::Workspaces,
                Group::Agents,
            ],
            Function::Materialize => &[Group::Materialize],
            Function::Resolve => &[Group::Resolve],
            Function::History => &[Group::History, Group::Meta],
            Function::Branch => &[Group::Branches],
            Function::BranchExpire | Function::Summarizer => &[],
        }
    }

    /// Whether it serves the context browser's pages (`/ui`,
    /// [`ctx_core::ui`]) beside its API routes: `history`, which serves the
    /// other routes without a token (health, the OpenAPI document).
    pub fn serves_ui(self) -> bool {
        self == Function::History
    }

    /// Whether it is invoked directly (by the branch-timer state machine or
    /// the summary schedule) rather than by API Gateway.
    pub fn is_invoked(self) -> bool {
        matches!(self, Function::BranchExpire | Function::Summarizer)
    }

    /// Whether template.yaml gives it `CTX_SUMMARIZER` (and its crate
    /// links the Bedrock summarizer): `checkpoint` (compact), `history`
    /// (summarize) and `summarizer`. The others, the branch functions
    /// among them, summarize extractively (a branch's memory).
    pub fn summarizes(self) -> bool {
        matches!(
            self,
            Function::Checkpoint | Function::History | Function::Summarizer
        )
    }

    /// What it builds beside the commit stores (and the summarizer every
    /// service has): context folding for `checkpoint`, `branch`,
    /// `branch-expire` and `summarizer` (whose retention erases sessions,
    /// their branches with them); nothing else (no tokens, no tokio
    /// timers: deadlines are Step Functions executions).
    pub fn needs(self) -> Needs {
        match self {
            Function::BranchExpire | Function::Summarizer => Needs::FOLDING,
            f => Needs::routes(f.groups()),
        }
    }
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Function {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Function::ALL
            .iter()
            .copied()
            .find(|f| f.name() == s)
            .ok_or_else(|| Error::invalid("function", format!("no function is called {s:?}")))
    }
}

/// Reads the caller from the JWT authorizer's claims: the tenant from the
/// claim [`Config::tenant_claim`] names (`CTX_TENANT_CLAIM`, default
/// `tenant`), the principal from `sub`.
#[derive(Debug, Clone)]
pub struct JwtClaimsAuth {
    tenant_claim: String,
    principal_claim: String,
}

impl JwtClaimsAuth {
    /// Uses `tenant_claim` for the tenant.
    pub fn new(tenant_claim: impl Into<String>) -> Self {
        JwtClaimsAuth {
            tenant_claim: tenant_claim.into(),
            principal_claim: "sub".to_owned(),
        }
    }
}

fn unauthenticated(message: String) -> Error {
    Error::new(ErrorKind::Unauthenticated, message).with_field("authorization")
}

#[async_trait]
impl Authenticator for JwtClaimsAuth {
    async fn authenticate(&self, parts: &Parts) -> Result<Caller> {
        let claims = match parts.extensions.get::<RequestContext>() {
            Some(RequestContext::ApiGatewayV2(ctx)) => ctx
                .authorizer
                .as_ref()
                .and_then(|a| a.jwt.as_ref())
                .map(|j| &j.claims),
            _ => None,
        };
        let claims = claims.ok_or_else(|| {
            unauthenticated(
                "no JWT claims on the request: the route must sit behind the JWT authorizer".into(),
            )
        })?;
        let tenant = claims.get(&self.tenant_claim).ok_or_else(|| {
            unauthenticated(format!(
                "the token has no {:?} claim naming the tenant",
                self.tenant_claim
            ))
        })?;
        let tenant = tenant.parse().map_err(|e: Error| {
            unauthenticated(format!(
                "the token's tenant claim is not a tenant: {}",
                e.message
            ))
        })?;
        let principal = claims
            .get(&self.principal_claim)
            .filter(|p| !p.is_empty())
            .cloned();
        Ok(Caller { tenant, principal })
    }
}

/// The router of `function` over `service`, authenticating with `auth`
/// (no routes for `branch-expire`).
pub fn app(
    function: Function,
    service: Arc<Service>,
    auth: Arc<dyn Authenticator>,
) -> axum::Router {
    let app = router(AppState { service, auth }, function.groups());
    if function.serves_ui() {
        app.merge(ctx_core::ui::routes())
    } else {
        app
    }
}

/// What `branch-expire` does with the event the branch-timer state machine
/// sends (the execution's input, [`TimerInput`]): at the branch's deadline
/// force-returns it with status timeout if it is still active; before it,
/// with `CTX_SESSION_IDLE_SECS`, force-returns an idle session's branches.
/// Answers `{"outcome": …, "branch_id": …, "next": …}`: `next` is when the
/// state machine waits until and asks again (RFC 3339, `null` when the
/// timer is done).
///
/// # Errors
/// `Invalid` for an event that is not a timer input; `Unavailable` when
/// storage fails (Step Functions retries).
pub async fn expire(service: &Service, event: serde_json::Value) -> Result<serde_json::Value> {
    let input: TimerInput = serde_json::from_value(event).map_err(|e| {
        Error::invalid(
            "event",
            format!("the event is not a branch timer input: {e}"),
        )
    })?;
    let (outcome, next) = match service.branch_wake(&input.tenant, &input.branch_id).await? {
        Wake::Later(at) => (
            serde_json::json!("not_due"),
            Some(TimerInput::new(&input.tenant, &input.branch_id, at).deadline),
        ),
        Wake::Expired(e) => (serde_json::json!(e), None),
        Wake::Idle(ended) => (
            serde_json::json!({ "session_idle": {
                "returned": ended.returned, "failed": ended.failed } }),
            None,
        ),
    };
    tracing::info!(branch = %input.branch_id, %outcome, ?next, "branch timer");
    Ok(serde_json::json!({ "outcome": outcome, "branch_id": input.branch_id, "next": next }))
}

/// The event an EventBridge schedule delivers: only the fields that say
/// what it is are read.
#[derive(Debug, serde::Deserialize)]
struct ScheduledEvent {
    #[serde(rename = "detail-type")]
    detail_type: String,
    source: String,
    #[serde(default)]
    id: String,
}

/// How long before the Lambda's deadline the summarizer stops claiming
/// commits: a tenth of the time left, at least [`MIN_MARGIN`]; the calls
/// in flight finish within it.
pub fn stop_claiming_at(now: DateTime<Utc>, deadline: DateTime<Utc>) -> DateTime<Utc> {
    let left = deadline - now;
    deadline - (left / 10).max(MIN_MARGIN)
}

/// The least time [`stop_claiming_at`] leaves before the deadline.
pub const MIN_MARGIN: chrono::Duration = chrono::Duration::seconds(10);

/// What `summarizer` does with the event its EventBridge schedule sends:
/// a summary batch over every tenant with work ([`Service::summarize_batch`]),
/// claiming nothing new after [`stop_claiming_at`] the Lambda's `deadline`.
/// Answers the batch's [`BatchReport`](ctx_core::service::BatchReport) as JSON.
///
/// # Errors
/// `Invalid` naming `event` for anything but a scheduled event
/// (`"detail-type": "Scheduled Event"`, `"source": "aws.events"`);
/// `Unavailable` when storage fails (commits already summarized stay so).
pub async fn summarize(
    service: &Service,
    event: serde_json::Value,
    deadline: DateTime<Utc>,
) -> Result<serde_json::Value> {
    let not_scheduled = |why: String| {
        Error::invalid(
            "event",
            format!("the summarizer runs on an EventBridge schedule only: {why}"),
        )
    };
    let event: ScheduledEvent = serde_json::from_value(event)
        .map_err(|e| not_scheduled(format!("the event is not a scheduled event: {e}")))?;
    if event.detail_type != "Scheduled Event" || event.source != "aws.events" {
        return Err(not_scheduled(format!(
            "its detail-type is {:?} and its source {:?}, not \"Scheduled Event\" from \"aws.events\"",
            event.detail_type, event.source
        )));
    }
    let stop = stop_claiming_at(service.clock().now(), deadline);
    let report = service
        .summarize_batch(&BatchOptions {
            // Every tenant, as much as the time allows.
            tenant: None,
            limit: usize::MAX,
            deadline: Some(stop),
            ..BatchOptions::default()
        })
        .await?;
    tracing::info!(
        event = %event.id,
        summarized = report.summarized,
        failed = report.failed,
        skipped_human = report.skipped_human,
        skipped_claimed = report.skipped_claimed,
        calls = report.calls,
        tokens = report.tokens,
        deadline_reached = report.deadline_reached,
        %deadline,
        stopped_claiming_at = %stop,
        "summary batch"
    );
    serde_json::to_value(&report)
        .map_err(|e| Error::internal(format!("the batch report does not serialize: {e}")))
}

/// Logs to stdout (CloudWatch), in plain text (CloudWatch shows colour
/// codes as text) with no timestamp (CloudWatch stamps each line), with
/// the filter `CTX_LOG` (default `info`); spans and metrics over OTLP when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the ADOT collector layer's
/// `http://localhost:4318`), as service `ctx-<function>`.
fn init_telemetry(function: Function, config: &Config) -> ctx_telemetry::Telemetry {
    ctx_telemetry::init(
        &format!("ctx-{}", function.name()),
        config.log.as_deref(),
        ctx_telemetry::Logs {
            default_filter: "info",
            ansi: false,
            time: false,
            stdout: true,
        },
        config.otlp_endpoint.as_deref(),
    )
}

/// The retention pass the summarizer runs after its batch, on the same
/// schedule: erases every tenant's sessions idle for longer than its
/// `CTX_RETENTION_DAYS` (pins and forks kept). Answers what it erased, per
/// tenant.
///
/// # Errors
/// `Unavailable` when storage fails (what was erased stays erased).
pub async fn retain(
    service: &Service,
    policy: &ctx_core::config::Retention,
) -> Result<serde_json::Value> {
    let reports = service
        .apply_retention_all(|t| policy.keep_days_for(t))
        .await?;
    let mut out = serde_json::Map::new();
    for (tenant, r) in reports {
        tracing::info!(
            %tenant,
            sessions = r.erased.len(),
            commits = r.removed.commits,
            artifacts = r.removed.artifacts,
            pinned = r.pinned.len(),
            forked = r.forked.len(),
            "retention"
        );
        out.insert(
            tenant.to_string(),
            serde_json::to_value(&r).map_err(|e| {
                Error::internal(format!("a retention report does not serialize: {e}"))
            })?,
        );
    }
    Ok(serde_json::Value::Object(out))
}

/// The whole of a function's `main`: the configuration from the
/// environment (on the aws store), logging, the backends `function` needs
/// built once, then serving its routes through `lambda_http` (or, for
/// `branch-expire` and `summarizer`, [`expire`] and [`summarize`] as plain
/// Lambda handlers).
///
/// # Errors
/// When the configuration is incomplete or invalid, or the runtime fails.
pub async fn run(function: Function) -> Result<(), lambda_http::Error> {
    let config = Config {
        store: StoreKind::Aws,
        // Never the hot result cache, whatever the environment says: it
        // stores results in background tasks, which a frozen Lambda may
        // never finish (template.yaml sets CTX_HOT_CACHE_BYTES=0 too).
        hot_cache_bytes: 0,
        ..Config::from_env()?
    };
    // Exported before each answer: a Lambda is frozen once it answers.
    let telemetry = Arc::new(init_telemetry(function, &config));
    let backends = Backends::build(&config, function.needs()).await?;
    let service = Arc::new(backends.into_service(Arc::new(SystemClock)));
    if function.is_invoked() {
        let retention = config.retention.clone();
        return lambda_http::lambda_runtime::run(lambda_http::service_fn(
            move |event: lambda_http::LambdaEvent<serde_json::Value>| {
                let service = service.clone();
                let retention = retention.clone();
                let telemetry = telemetry.clone();
                async move {
                    let answer = match function {
                        Function::Summarizer => {
                            let deadline = DateTime::<Utc>::from(event.context.deadline());
                            match summarize(&service, event.payload, deadline).await {
                                Ok(mut report) => retain(&service, &retention).await.map(|r| {
                                    report["retention"] = r;
                                    report
                                }),
                                Err(e) => Err(e),
                            }
                        }
                        _ => expire(&service, event.payload).await,
                    };
                    telemetry.flush().await;
                    answer.map_err(|e| lambda_http::Error::from(e.to_string()))
                }
            },
        ))
        .await;
    }
    let auth = Arc::new(JwtClaimsAuth::new(config.tenant_claim.clone()));
    let app = app(function, service, auth).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let telemetry = telemetry.clone();
            async move {
                let response = next.run(req).await;
                telemetry.flush().await;
                response
            }
        },
    ));
    lambda_http::run(app).await
}
