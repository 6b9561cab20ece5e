//! The AWS backends: artifacts in S3 ([`S3BlobStore`]), metadata, tokens
//! and branches in one DynamoDB table ([`DynamoMetaStore`], which is the
//! token store too, and [`DynamoBranchStore`]), through the official AWS
//! SDK.
//!
//! Configuration comes from the environment ([`AwsConfig::from_env`]): the
//! SDK's usual variables (credentials, `AWS_REGION`, `AWS_ENDPOINT_URL` for
//! an emulator) plus `CTX_BUCKET` and `CTX_TABLE`. Against an emulator S3 is
//! addressed path-style.
//!
//! [`RequestCounter`] is an SDK interceptor that counts requests per service
//! and operation (for the request-count bench); [`FaultyHttpClient`] wraps
//! the HTTP client and fails a share of calls, for fault-injection tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, Metadata};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;

use crate::error::{Error, Result};

mod branches;
mod items;
pub mod keys;
mod meta;
pub mod report;
mod s3;
mod tokens;

pub use branches::DynamoBranchStore;
pub use meta::DynamoMetaStore;
pub use s3::S3BlobStore;

/// Where the aws backends keep their data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    /// The artifact bucket.
    pub bucket: String,
    /// The metadata table.
    pub table: String,
    /// Path-style S3 addressing (emulators); true when `AWS_ENDPOINT_URL`
    /// is set unless `CTX_S3_PATH_STYLE=false`.
    pub path_style: bool,
}

impl AwsConfig {
    /// Reads `CTX_BUCKET`, `CTX_TABLE`, `AWS_ENDPOINT_URL` and
    /// `CTX_S3_PATH_STYLE`.
    ///
    /// # Errors
    /// `Invalid` naming the variable that is missing.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`AwsConfig::from_env`], reading variables through `get`.
    ///
    /// # Errors
    /// `Invalid` naming the variable that is missing.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |name: &str| {
            get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                Error::invalid(name, format!("the environment variable {name} is not set"))
            })
        };
        let emulated = get("AWS_ENDPOINT_URL").is_some_and(|v| !v.is_empty());
        let path_style = match get("CTX_S3_PATH_STYLE").as_deref() {
            Some("true" | "1") => true,
            Some("false" | "0") => false,
            _ => emulated,
        };
        Ok(AwsConfig {
            bucket: var("CTX_BUCKET")?,
            table: var("CTX_TABLE")?,
            path_style,
        })
    }
}

/// The emulator's configuration for a test, or `None` (said on stderr)
/// when no emulator is expected here. With `CTX_TEST_AWS=1` (tests/run, CI)
/// a missing or unreachable emulator panics: nothing is silently skipped.
///
/// # Panics
/// As above, so that the calling test fails.
#[cfg(any(test, feature = "conformance"))]
pub fn emulator_from_env() -> Option<AwsConfig> {
    let required = std::env::var("CTX_TEST_AWS").is_ok_and(|v| v == "1");
    let Some(url) = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        assert!(
            !required,
            "CTX_TEST_AWS=1 but AWS_ENDPOINT_URL is not set: start the emulator (tests/run does)"
        );
        eprintln!(
            "NOT RUN: this test needs the AWS emulator; tests/run starts it (CTX_TEST_AWS=1)"
        );
        return None;
    };
    let dynamodb = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").ok();
    for url in std::iter::once(url).chain(dynamodb) {
        let addr = url.trim_start_matches("http://").trim_end_matches('/');
        assert!(
            std::net::TcpStream::connect(addr).is_ok(),
            "the AWS emulator at {url} is unreachable"
        );
    }
    Some(AwsConfig::from_env().expect("CTX_BUCKET and CTX_TABLE are set with AWS_ENDPOINT_URL"))
}

/// Optional hooks for building the clients.
#[derive(Debug, Default, Clone)]
pub struct AwsHooks {
    /// An interceptor on every S3 and DynamoDB client (e.g. a [`RequestCounter`]).
    pub interceptor: Option<SharedInterceptor>,
    /// Fail a share of HTTP calls as this plan says (see [`FaultyHttpClient`]).
    pub faults: Option<Arc<FaultPlan>>,
    /// The first retry backoff (the SDK's default when `None`); tests with
    /// injected faults shorten it.
    pub initial_backoff: Option<Duration>,
}

/// The rustls (ring) HTTPS client every SDK client uses.
pub(crate) fn https_client() -> SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// Builds both stores from the environment's SDK configuration.
///
/// # Errors
/// `Invalid` for missing configuration.
pub async fn connect(
    config: &AwsConfig,
    hooks: AwsHooks,
) -> Result<(S3BlobStore, DynamoMetaStore)> {
    let mut http = https_client();
    if let Some(plan) = &hooks.faults {
        http = SharedHttpClient::new(FaultyHttpClient {
            inner: http,
            plan: plan.clone(),
        });
    }
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config({
            let r = RetryConfig::standard().with_max_attempts(5);
            match hooks.initial_backoff {
                Some(d) => r.with_initial_backoff(d).with_max_backoff(d * 8),
                None => r,
            }
        })
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(10))
                .operation_timeout(Duration::from_secs(30))
                .build(),
        )
        .load()
        .await;
    let mut s3 = aws_sdk_s3::config::Builder::from(&sdk).force_path_style(config.path_style);
    let mut ddb = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if let Some(i) = &hooks.interceptor {
        s3.push_interceptor(i.clone());
        ddb.push_interceptor(i.clone());
    }
    Ok((
        S3BlobStore::new(
            aws_sdk_s3::Client::from_conf(s3.build()),
            config.bucket.clone(),
        ),
        DynamoMetaStore::new(
            aws_sdk_dynamodb::Client::from_conf(ddb.build()),
            config.table.clone(),
        ),
    ))
}

/// Classifies an SDK failure: network trouble, throttling and 5xx are
/// `Unavailable` (retryable); anything else is a bug or misconfiguration.
pub(crate) fn sdk_error<E, R>(
    what: &str,
    e: aws_smithy_runtime_api::client::result::SdkError<E, R>,
) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
    aws_smithy_runtime_api::client::result::SdkError<E, R>:
        aws_smithy_types::error::metadata::ProvideErrorMetadata,
{
    use aws_smithy_runtime_api::client::result::SdkError;
    use aws_smithy_types::error::metadata::ProvideErrorMetadata;
    let code = e.code().unwrap_or("").to_owned();
    let detail = aws_smithy_types::error::display::DisplayErrorContext(&e).to_string();
    let retryable = match &e {
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(s) => {
            let status = format!("{:?}", s.raw());
            code.contains("Throttl")
                || code.contains("SlowDown")
                || code.contains("ProvisionedThroughputExceeded")
                || code.contains("RequestLimitExceeded")
                || code == "InternalServerError"
                || code == "InternalError"
                || code == "ServiceUnavailable"
                || status.contains("status: 5")
        }
        _ => false,
    };
    if retryable {
        Error::unavailable(format!("{what} failed, retry later: {detail}"))
    } else {
        Error::internal(format!("{what} failed: {detail}"))
    }
}

/// Counts SDK requests (every attempt, retries included) per service and
/// operation.
#[derive(Debug, Default, Clone)]
pub struct RequestCounter {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl RequestCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts so far, by (service, operation).
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets every count to zero.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The total of requests to `service` (e.g. `s3`, `dynamodb`).
    pub fn total(&self, service: &str) -> u64 {
        self.snapshot()
            .iter()
            .filter(|((s, _), _)| s.eq_ignore_ascii_case(service))
            .map(|(_, n)| n)
            .sum()
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "ctx-request-counter"
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(m) = cfg.load::<Metadata>() {
            let key = (m.service().to_ascii_lowercase(), m.name().to_owned());
            *self
                .counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_default() += 1;
        }
        Ok(())
    }
}

/// Which calls a [`FaultyHttpClient`] fails, and how: deterministic for a
/// seed.
#[derive(Debug)]
pub struct FaultPlan {
    /// Fail one call in `one_in` (10 for 10%).
    pub one_in: u64,
    state: Mutex<u64>,
    injected: Mutex<BTreeMap<&'static str, u64>>,
}

impl FaultPlan {
    /// Fails about one call in `one_in`, chosen by a PRNG seeded with `seed`.
    pub fn new(one_in: u64, seed: u64) -> Self {
        FaultPlan {
            one_in: one_in.max(1),
            state: Mutex::new(seed | 1),
            injected: Mutex::default(),
        }
    }

    fn next(&self) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// How many faults of each kind were injected.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn record(&self, kind: &'static str) {
        *self
            .injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind)
            .or_default() += 1;
    }
}

/// An HTTP client that fails a share of calls: a synthetic 500, a throttling
/// answer, a timeout before sending, or — the nasty one — a request that
/// reaches the service but whose response is lost.
#[derive(Debug)]
pub struct FaultyHttpClient {
    inner: SharedHttpClient,
    plan: Arc<FaultPlan>,
}

impl HttpClient for FaultyHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            plan: self.plan.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    plan: Arc<FaultPlan>,
}

fn synthetic(
    status: u16,
    body: &'static str,
    header: Option<(&'static str, &'static str)>,
) -> HttpResponse {
    let mut resp = HttpResponse::new(
        status.try_into().expect("a valid status code"),
        SdkBody::from(body),
    );
    if let Some((k, v)) = header {
        resp.headers_mut().insert(k, v);
    }
    resp
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let roll = self.plan.next();
        if !roll.is_multiple_of(self.plan.one_in) {
            return self.inner.call(request);
        }
        let is_s3 = request.headers().get("x-amz-target").is_none();
        match (roll / self.plan.one_in) % 4 {
            0 => {
                self.plan.record("500");
                let body = if is_s3 {
                    "<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                } else {
                    r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}"#
                };
                HttpConnectorFuture::ready(Ok(synthetic(500, body, None)))
            }
            1 => {
                self.plan.record("throttle");
                let resp = if is_s3 {
                    synthetic(
                        503,
                        "<Error><Code>SlowDown</Code><Message>injected</Message></Error>",
                        None,
                    )
                } else {
                    synthetic(
                        400,
                        r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"injected"}"#,
                        Some(("x-amzn-errortype", "ThrottlingException")),
                    )
                };
                HttpConnectorFuture::ready(Ok(resp))
            }
            2 => {
                self.plan.record("timeout before send");
                HttpConnectorFuture::ready(Err(ConnectorError::timeout("injected timeout".into())))
            }
            _ => {
                self.plan.record("response lost");
                let sent = self.inner.call(request);
                HttpConnectorFuture::new(async move {
                    let _ = sent.await;
                    Err(ConnectorError::io("injected: the response was lost".into()))
                })
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
