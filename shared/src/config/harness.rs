//! The test harness's variables ([`HARNESS`]: `CTX_TEST_*`, `CTX_BENCH_*`,
//! …), which steer the tests and the benchmarks, not ctx itself, and the
//! emulator's configuration the aws tests run on.
//!
//! [`harness_var`] and [`harness_flag`] are built in every configuration
//! because the benchmarks, which build without the `conformance` feature,
//! read `CTX_BENCH_QUICK` with them; [`Config::emulator_from_env`] only
//! under `cfg(test)` or the `conformance` feature.

use super::env_var;
use super::settings::HARNESS;
#[cfg(all(feature = "aws", any(test, feature = "conformance")))]
use super::{Config, StoreKind, settings::CTX_TEST_AWS};

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

#[cfg(all(feature = "aws", any(test, feature = "conformance")))]
impl Config {
    /// The emulator's configuration for a test (the aws store, from the
    /// exports of `localstack/emulator start`), or `None` (said on stderr)
    /// when no emulator is expected here. With `CTX_TEST_AWS=1` (tests/run,
    /// CI) a missing or unreachable emulator panics: nothing is silently
    /// skipped.
    ///
    /// # Panics
    /// As above, so that the calling test fails.
    pub fn emulator_from_env() -> Option<Config> {
        let required = harness_flag(CTX_TEST_AWS.var);
        let Some(url) = env_var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL is UTF-8") else {
            assert!(
                !required,
                "{CTX_TEST_AWS}=1 but AWS_ENDPOINT_URL is not set: start the emulator (tests/run does)"
            );
            eprintln!(
                "NOT RUN: this test needs the AWS emulator; tests/run starts it ({CTX_TEST_AWS}=1)"
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
