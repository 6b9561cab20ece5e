//! # ctx-lambda
//!
//! What every ctx Lambda shares. A function's `main` is one line:
//! `ctx_lambda::run("checkpoint").await` — configuration from the
//! environment, stores built once, and the function's own routes of the
//! shared router served through `lambda_http`.
//!
//! # Layout
//! - [`FUNCTIONS`]: which route groups each function serves (template.yaml
//!   is tested against it).
//! - [`JwtClaimsAuth`]: the tenant (and principal) from the claims API
//!   Gateway's JWT authorizer put in the request context.
//! - [`app`] / [`run`]: building and serving a function's router.
//! - [`expire`] / [`run_expire`]: `branch-expire`, the handler the
//!   branch-timer state machine invokes.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::request::Parts;
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{Authenticator, Caller};
use ctx_core::branch::ops::Expired;
use ctx_core::branch::sfn::{SfnTimer, TimerInput};
use ctx_core::branch::{BranchTimer, Folding, FoldingConfig, NoTimer, RuleScrubber};
use ctx_core::store::Stores;
use ctx_core::store::aws::DynamoBranchStore;
use ctx_core::store::aws::{AwsConfig, AwsHooks, DynamoMetaStore, connect};
use ctx_core::{Error, ErrorKind, OsRandom, Result, Service, SystemClock};
use lambda_http::request::RequestContext;

/// Each function and the route groups it serves.
pub const FUNCTIONS: &[(&str, &[Group])] = &[
    (
        "checkpoint",
        &[Group::Checkpoint, Group::Artifacts, Group::Refs],
    ),
    ("materialize", &[Group::Materialize]),
    ("resolve", &[Group::Resolve]),
    ("history", &[Group::History, Group::Meta]),
    ("branch", &[Group::Branches]),
];

/// Functions not behind API Gateway: `branch-expire`, invoked by the
/// branch-timer state machine.
pub const INVOKED: &[&str] = &["branch-expire"];

/// The groups of function `name`.
///
/// # Errors
/// `Invalid` for an unknown function.
pub fn groups_of(name: &str) -> Result<&'static [Group]> {
    FUNCTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, g)| *g)
        .ok_or_else(|| Error::invalid("function", format!("no function is called {name:?}")))
}

/// Reads the caller from the JWT authorizer's claims: the tenant from the
/// claim named by `CTX_TENANT_CLAIM` (default `tenant`).
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

    /// Reads `CTX_TENANT_CLAIM`.
    pub fn from_env() -> Self {
        Self::new(std::env::var("CTX_TENANT_CLAIM").unwrap_or_else(|_| "tenant".to_owned()))
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

/// The router of function `name` over `stores`, authenticating by claims.
///
/// # Errors
/// `Invalid` for an unknown function.
pub fn app(name: &str, stores: Stores, auth: Arc<dyn Authenticator>) -> Result<axum::Router> {
    app_with(name, Service::new(stores, Arc::new(SystemClock)), auth)
}

/// The router of function `name` over `service`.
///
/// # Errors
/// `Invalid` for an unknown function.
pub fn app_with(
    name: &str,
    service: Service,
    auth: Arc<dyn Authenticator>,
) -> Result<axum::Router> {
    let groups = groups_of(name)?;
    let state = AppState {
        service: Arc::new(service),
        auth,
    };
    Ok(router(state, groups))
}

/// Context folding on AWS: branches in the metadata table, deadlines as
/// executions of the state machine `CTX_BRANCH_TIMER_ARN`, limits and
/// session validation from the environment (`FoldingConfig::from_env`).
///
/// # Errors
/// `Invalid` for a bad setting; `Internal` if the scrubber's rules do not
/// compile (branches then fail closed by not starting).
pub async fn folding_from_env(meta: &DynamoMetaStore, table: &str) -> Result<Folding> {
    let timer: Arc<dyn BranchTimer> = match std::env::var("CTX_BRANCH_TIMER_ARN") {
        Ok(arn) if !arn.is_empty() => {
            Arc::new(SfnTimer::new(SfnTimer::client_from_env().await, arn))
        }
        _ => {
            tracing::warn!("CTX_BRANCH_TIMER_ARN is not set: branch deadlines are not enforced");
            Arc::new(NoTimer)
        }
    };
    Ok(Folding {
        store: Arc::new(DynamoBranchStore::new(
            meta.client().clone(),
            table.to_owned(),
        )),
        timer,
        scrubber: Arc::new(RuleScrubber::new()?),
        ids: Arc::new(OsRandom),
        config: FoldingConfig::from_env()?,
    })
}

async fn service_from_env() -> Result<Service> {
    let config = AwsConfig::from_env()?;
    let (blobs, meta) = connect(&config, AwsHooks::default()).await?;
    let folding = folding_from_env(&meta, &config.table).await?;
    let stores = Stores {
        blobs: Arc::new(blobs),
        meta: Arc::new(meta),
    };
    Ok(Service::new(stores, Arc::new(SystemClock)).with_folding(folding))
}

/// What `branch-expire` does with the event the branch-timer state machine
/// sends (the execution's input, [`TimerInput`]): force-returns the branch
/// with status timeout if it is still active. Answers `{"outcome": …}`.
///
/// # Errors
/// `Invalid` for an event that is not a timer input; `Unavailable` when the
/// deadline has not come yet by this clock (Step Functions retries) or
/// storage fails.
pub async fn expire(service: &Service, event: serde_json::Value) -> Result<serde_json::Value> {
    let input: TimerInput = serde_json::from_value(event).map_err(|e| {
        Error::invalid(
            "event",
            format!("the event is not a branch timer input: {e}"),
        )
    })?;
    let outcome = service
        .branch_expire(&input.tenant, &input.branch_id)
        .await?;
    if outcome == Expired::NotDue {
        return Err(Error::unavailable(format!(
            "branch {} is not due until {}; retry",
            input.branch_id, input.deadline
        )));
    }
    tracing::info!(branch = %input.branch_id, ?outcome, "branch deadline");
    Ok(serde_json::json!({ "outcome": outcome, "branch_id": input.branch_id }))
}

/// The whole of `branch-expire`'s `main`: a plain Lambda handler (not
/// HTTP) around [`expire`].
///
/// # Errors
/// When the configuration is incomplete or the runtime fails.
pub async fn run_expire() -> Result<(), lambda_http::Error> {
    init_tracing();
    let service = Arc::new(service_from_env().await?);
    lambda_http::lambda_runtime::run(lambda_http::service_fn(
        move |event: lambda_http::LambdaEvent<serde_json::Value>| {
            let service = service.clone();
            async move {
                expire(&service, event.payload)
                    .await
                    .map_err(|e| lambda_http::Error::from(e.to_string()))
            }
        },
    ))
    .await
}

fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CTX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .without_time()
        .init();
}

/// The whole of a function's `main`: logging, configuration from the
/// environment, stores built once, then serving its routes.
///
/// # Errors
/// When the configuration is incomplete or the runtime fails.
pub async fn run(name: &str) -> Result<(), lambda_http::Error> {
    init_tracing();
    let service = service_from_env().await?;
    let app = app_with(name, service, Arc::new(JwtClaimsAuth::from_env()))?;
    lambda_http::run(app).await
}
