//! Test tooling for the aws backends, compiled only for tests and with the
//! `conformance` feature: [`RequestCounter`], an SDK interceptor that
//! counts requests per service and operation (the request-count report and
//! its bench), and [`FaultyHttpClient`], which wraps the HTTP client and
//! fails a share of calls as a [`FaultPlan`] says (fault-injection tests;
//! plug it in through `AwsHooks::faults`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, Metadata};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;

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

impl FaultyHttpClient {
    /// Wraps `inner`, failing calls as `plan` says.
    pub fn new(inner: SharedHttpClient, plan: Arc<FaultPlan>) -> Self {
        FaultyHttpClient { inner, plan }
    }
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
