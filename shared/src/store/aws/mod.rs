//! The AWS backends: artifacts in S3 ([`S3BlobStore`]), metadata in one
//! DynamoDB table ([`DynamoMetaStore`]), through the official AWS SDK.
//!
//! Configuration comes from the SDK's usual variables (credentials,
//! `AWS_REGION`, `AWS_ENDPOINT_URL` for an emulator) plus the bucket and
//! table of [`AwsConfig`] (`crate::config::Config::aws`). Against an
//! emulator S3 is addressed path-style.
//!
//! # Layout
//! Each store this backend offers, and what they share:
//! - [`S3BlobStore`] (`s3`): artifacts.
//! - [`DynamoMetaStore`] (`meta`): commits, timelines, refs, the cache; it
//!   is the `TokenStore` too (`tokens`).
//! - [`DynamoBranchStore`] (`branches`): branch records and limits.
//! - [`table`]: the DynamoDB table in one place: every key (the S3 keys
//!   too), the items and the DynamoDB plumbing the stores share; `retry`:
//!   every `TransactWriteItems`, under the one retry policy, its end
//!   (cancellation reasons read by name) mapped to an error in one place.
//! - `testing` (tests and the `conformance` feature): the request counter
//!   and the fault-injecting HTTP client; `report`: the request-count
//!   report built on them; [`calls`]: every SDK call as the IAM action and
//!   resource it needs (the IAM test).

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;

use crate::error::{Error, Result};

mod agents;
mod backfill;
mod branches;
mod cache;
#[cfg(any(test, feature = "conformance"))]
pub mod calls;
mod commits;
mod erase_tenant;
mod lifecycle;
mod meta;
mod refs;
#[cfg(any(test, feature = "conformance"))]
pub mod report;
mod retry;
mod s3;
pub mod sfn;
mod summaries;
pub mod table;
#[cfg(any(test, feature = "conformance"))]
pub mod testing;
mod tokens;

pub use branches::DynamoBranchStore;
pub use meta::DynamoMetaStore;
pub use s3::S3BlobStore;
#[cfg(any(test, feature = "conformance"))]
pub use testing::{FaultPlan, FaultyHttpClient, RequestCounter};

/// Where the aws backends keep their data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    /// The artifact bucket.
    pub bucket: String,
    /// The metadata table.
    pub table: String,
    /// Path-style S3 addressing (emulators); see `CTX_S3_PATH_STYLE` in
    /// `crate::config`.
    pub path_style: bool,
}

/// Optional hooks for building the clients.
#[derive(Debug, Default, Clone)]
pub struct AwsHooks {
    /// An interceptor on every S3 and DynamoDB client (e.g. the tests'
    /// request counter).
    pub interceptor: Option<SharedInterceptor>,
    /// Fail a share of HTTP calls as this plan says (see
    /// [`FaultyHttpClient`]); tests and the `conformance` feature only.
    #[cfg(any(test, feature = "conformance"))]
    pub faults: Option<std::sync::Arc<FaultPlan>>,
    /// The first retry backoff (the SDK's default when `None`); tests with
    /// injected faults shorten it.
    pub initial_backoff: Option<Duration>,
}

/// The rustls (ring) HTTPS client every SDK client uses.
pub fn https_client() -> SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// How an AWS SDK client retries and how long it waits: one shape for
/// every client (S3, DynamoDB, Step Functions, Bedrock), turned into the
/// SDK's configuration by [`SdkPolicy::retry_config`], the one place a
/// `RetryConfig` is built. The SDK's standard mode retries throttling, 5xx
/// and network errors with exponential backoff and jitter; what it leaves
/// is [`sdk_error`]'s to classify. (DynamoDB transactions cancelled by a
/// conflict are retried on top of it by `retry`'s policy.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdkPolicy {
    /// Attempts of one call in all, the first included.
    pub attempts: u32,
    /// The first backoff and the largest; the SDK's defaults when `None`.
    pub backoff: Option<(Duration, Duration)>,
    /// The limit of one attempt.
    pub attempt_timeout: Duration,
    /// The limit of one call, its retries included; none when `None`.
    pub operation_timeout: Option<Duration>,
}

impl SdkPolicy {
    /// The store clients' (S3, DynamoDB, Step Functions): 5 attempts with
    /// the SDK's backoff, 10 s each, 30 s in all.
    pub const STORES: SdkPolicy = SdkPolicy {
        attempts: 5,
        backoff: None,
        attempt_timeout: Duration::from_secs(10),
        operation_timeout: Some(Duration::from_secs(30)),
    };

    /// The SDK's standard retry mode under this policy.
    pub fn retry_config(&self) -> RetryConfig {
        let retry = RetryConfig::standard().with_max_attempts(self.attempts);
        match self.backoff {
            Some((first, most)) => retry.with_initial_backoff(first).with_max_backoff(most),
            None => retry,
        }
    }

    /// The SDK's time limits under this policy.
    pub fn timeout_config(&self) -> TimeoutConfig {
        let mut limits = TimeoutConfig::builder().operation_attempt_timeout(self.attempt_timeout);
        limits.set_operation_timeout(self.operation_timeout);
        limits.build()
    }

    /// The SDK configuration from the environment (credentials, region,
    /// `AWS_ENDPOINT_URL`) under this policy, over `http`.
    pub async fn load(&self, http: SharedHttpClient) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .retry_config(self.retry_config())
            .timeout_config(self.timeout_config())
            .load()
            .await
    }
}

/// Builds both stores from the environment's SDK configuration.
///
/// # Errors
/// `Invalid` for missing configuration.
pub async fn connect(
    config: &AwsConfig,
    hooks: AwsHooks,
) -> Result<(S3BlobStore, DynamoMetaStore)> {
    #[allow(unused_mut)] // Only fault injection replaces it.
    let mut http = https_client();
    #[cfg(any(test, feature = "conformance"))]
    if let Some(plan) = &hooks.faults {
        http = SharedHttpClient::new(FaultyHttpClient::new(http, plan.clone()));
    }
    let policy = SdkPolicy {
        backoff: hooks.initial_backoff.map(|d| (d, d * 8)),
        ..SdkPolicy::STORES
    };
    let sdk = policy.load(http).await;
    let mut s3 = aws_sdk_s3::config::Builder::from(&sdk).force_path_style(config.path_style);
    let mut ddb = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if let Some(i) = &hooks.interceptor {
        s3.push_interceptor(i.clone());
        ddb.push_interceptor(i.clone());
    }
    #[cfg(any(test, feature = "conformance"))]
    if let Some(i) = calls::CallLog::interceptor() {
        s3.push_interceptor(i.clone());
        ddb.push_interceptor(i);
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

/// A DynamoDB write error that can say the write's condition did not hold.
pub(crate) trait ConditionFailed {
    /// `ConditionalCheckFailedException`.
    fn condition_failed(&self) -> bool;
}

macro_rules! condition_failed {
    ($($error:ty),*) => {$(
        impl ConditionFailed for $error {
            fn condition_failed(&self) -> bool {
                self.is_conditional_check_failed_exception()
            }
        }
    )*};
}

condition_failed!(
    aws_sdk_dynamodb::operation::put_item::PutItemError,
    aws_sdk_dynamodb::operation::update_item::UpdateItemError,
    aws_sdk_dynamodb::operation::delete_item::DeleteItemError
);

/// A conditional write's outcome: `Some(output)` when it applied, `None`
/// when its condition did not hold; any other failure is [`sdk_error`]
/// naming `what`.
pub(crate) fn conditional<T, E>(
    result: std::result::Result<T, SdkError<E, HttpResponse>>,
    what: &str,
) -> Result<Option<T>>
where
    E: ConditionFailed + std::error::Error + Send + Sync + 'static,
    SdkError<E, HttpResponse>: aws_smithy_types::error::metadata::ProvideErrorMetadata,
{
    match result {
        Ok(out) => Ok(Some(out)),
        Err(e)
            if e.as_service_error()
                .is_some_and(ConditionFailed::condition_failed) =>
        {
            Ok(None)
        }
        Err(e) => Err(sdk_error(what, e)),
    }
}

/// Classifies an SDK failure: network trouble, throttling and 5xx are
/// `Unavailable` (retryable); anything else is a bug or misconfiguration.
pub(crate) fn sdk_error<E>(what: &str, e: SdkError<E, HttpResponse>) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
    SdkError<E, HttpResponse>: aws_smithy_types::error::metadata::ProvideErrorMetadata,
{
    use aws_smithy_types::error::metadata::ProvideErrorMetadata;
    let code = e.code().unwrap_or("").to_owned();
    let detail = aws_smithy_types::error::display::DisplayErrorContext(&e).to_string();
    let retryable = match &e {
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(s) => {
            code.contains("Throttl")
                || code.contains("SlowDown")
                || code.contains("ProvisionedThroughputExceeded")
                || code.contains("RequestLimitExceeded")
                || code == "InternalServerError"
                || code == "InternalError"
                || code == "ServiceUnavailable"
                || s.raw().status().is_server_error()
        }
        _ => false,
    };
    if retryable {
        Error::unavailable(format!("{what} failed, retry later: {detail}"))
    } else {
        Error::internal(format!("{what} failed: {detail}"))
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod policy_tests {
    use std::time::Duration;

    use super::SdkPolicy;

    #[test]
    fn the_sdk_policy_is_what_the_clients_get() {
        let stores = SdkPolicy::STORES.retry_config();
        assert_eq!(stores.max_attempts(), 5);
        let timeouts = SdkPolicy::STORES.timeout_config();
        assert_eq!(
            (
                timeouts.operation_attempt_timeout(),
                timeouts.operation_timeout()
            ),
            (Some(Duration::from_secs(10)), Some(Duration::from_secs(30)))
        );
        let d = Duration::from_millis(5);
        let short = SdkPolicy {
            backoff: Some((d, d * 8)),
            operation_timeout: None,
            ..SdkPolicy::STORES
        };
        let retry = short.retry_config();
        assert_eq!((retry.initial_backoff(), retry.max_backoff()), (d, d * 8));
        assert_eq!(short.timeout_config().operation_timeout(), None);
    }
}

#[cfg(test)]
mod classify_tests {
    use aws_sdk_s3::operation::list_object_versions::ListObjectVersionsError;
    use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
    use aws_smithy_runtime_api::client::result::SdkError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    use crate::ErrorKind;

    fn failure(status: u16, code: Option<&str>) -> SdkError<ListObjectVersionsError, HttpResponse> {
        let mut meta = ErrorMetadata::builder();
        if let Some(code) = code {
            meta = meta.code(code);
        }
        SdkError::service_error(
            ListObjectVersionsError::generic(meta.build()),
            HttpResponse::new(
                StatusCode::try_from(status).unwrap(),
                SdkBody::from("<html>500 Internal Server Error</html>"),
            ),
        )
    }

    /// A 5xx is transient whatever its body says: S3 and DynamoDB answer
    /// 500 and 503 under load, and a proxy or an emulator may answer one
    /// with no parseable error code at all.
    #[test]
    fn a_server_error_without_a_code_is_retryable() {
        for status in [500, 502, 503] {
            let e = super::sdk_error("S3 ListObjectVersions", failure(status, None));
            assert_eq!(e.kind, ErrorKind::Unavailable, "{status}: {e}");
        }
    }

    #[test]
    fn a_client_error_is_not_retryable_but_throttling_is() {
        let e = super::sdk_error("S3 ListObjectVersions", failure(403, Some("AccessDenied")));
        assert_eq!(e.kind, ErrorKind::Internal, "{e}");
        let e = super::sdk_error(
            "S3 ListObjectVersions",
            failure(400, Some("ThrottlingException")),
        );
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
    }
}
