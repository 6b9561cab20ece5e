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

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::request::Parts;
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{Authenticator, Caller};
use ctx_core::store::Stores;
use ctx_core::store::aws::{AwsConfig, AwsHooks, connect};
use ctx_core::{Error, ErrorKind, Result, Service, SystemClock};
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
];

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
    let groups = groups_of(name)?;
    let state = AppState {
        service: Arc::new(Service::new(stores, Arc::new(SystemClock))),
        auth,
    };
    Ok(router(state, groups))
}

/// The whole of a function's `main`: logging, configuration from the
/// environment, stores built once, then serving its routes.
///
/// # Errors
/// When the configuration is incomplete or the runtime fails.
pub async fn run(name: &str) -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CTX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .without_time()
        .init();
    let (blobs, meta) = connect(&AwsConfig::from_env()?, AwsHooks::default()).await?;
    let stores = Stores {
        blobs: Arc::new(blobs),
        meta: Arc::new(meta),
    };
    let app = app(name, stores, Arc::new(JwtClaimsAuth::from_env()))?;
    lambda_http::run(app).await
}
