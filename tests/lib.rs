//! Helpers for the end-to-end tests: start the real `ctx` binary, talk to
//! it over HTTP, run CLI commands against it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `ctx` binary: `$CTX_BIN`, or `target/<profile>/ctx` next to this
/// test executable (cargo builds it for the ctx-cli integration tests).
pub fn ctx_bin() -> PathBuf {
    if let Some(p) = ctx_core::config::harness_var("CTX_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executables live in target/<profile>/deps");
    let bin = profile_dir.join("ctx");
    assert!(
        bin.exists(),
        "{} is missing: run the tests with `cargo nextest run --workspace` (or set CTX_BIN)",
        bin.display()
    );
    bin
}

/// A `ctx serve` child process on 127.0.0.1 with a port of its own.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The token of the default tenant.
    pub token: String,
    /// The data directory.
    pub data: PathBuf,
}

impl Server {
    /// Starts `ctx serve --data DATA --addr 127.0.0.1:0` and waits until it
    /// says where it listens.
    pub fn start(data: &Path) -> Server {
        Self::start_with(data, &[])
    }

    /// Starts `ctx serve --store aws` against the emulator, with a token
    /// for a tenant no earlier run used (the emulator's table is shared).
    /// `None` (printed) when aws tests are not expected here; with
    /// `CTX_TEST_AWS=1` a missing or unreachable emulator panics.
    pub fn start_aws(data: &Path) -> Option<Server> {
        Self::start_aws_env(data, &[])
    }

    /// [`Server::start_aws`] with environment variables for the server.
    #[allow(clippy::disallowed_methods)] // a unique tenant name, not logic under test
    pub fn start_aws_env(data: &Path, env: &[(&str, &str)]) -> Option<Server> {
        if !aws_expected() {
            return None;
        }
        let mut server = Self::start_env(data, &["--store", "aws"], env);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_nanos();
        let tenant = format!("e2e-{}-{nanos}", std::process::id());
        let out = Command::new(ctx_bin())
            .args(["tokens", "add", &tenant, "--data"])
            .arg(data)
            .output()
            .expect("ctx tokens add runs");
        assert!(out.status.success(), "ctx tokens add failed");
        server.token = String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        Some(server)
    }

    /// Starts `ctx serve` with extra arguments.
    pub fn start_with(data: &Path, extra: &[&str]) -> Server {
        Self::start_env(data, extra, &[])
    }

    /// Starts `ctx serve` with extra arguments and environment variables.
    pub fn start_env(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(ctx_bin())
            .args(["serve", "--data"])
            .arg(data)
            .args(["--addr", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ctx serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            assert!(
                Instant::now() < deadline,
                "ctx serve did not say where it listens"
            );
            let line = lines
                .next()
                .expect("ctx serve printed its address before exiting")
                .expect("readable stdout");
            if let Some(addr) = line.strip_prefix("ctx listening on ") {
                break addr.trim().to_owned();
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let token = std::fs::read_to_string(data.join("token"))
            .expect("ctx serve wrote its token")
            .trim()
            .to_owned();
        Server {
            child,
            url,
            token,
            data: data.to_owned(),
        }
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL the server");
        self.child.wait().expect("reap the server");
    }

    /// An HTTP client for this server.
    pub fn client(&self) -> Http {
        Http {
            http: reqwest::Client::new(),
            url: self.url.clone(),
            token: self.token.clone(),
        }
    }

    /// An HTTP client for this server acting with `token`.
    pub fn client_as(&self, token: &str) -> Http {
        Http {
            token: token.to_owned(),
            ..self.client()
        }
    }

    /// Runs the MCP client script `tests/mcp/<script>` (the Python `mcp`
    /// package's client, driving `ctx mcp` or `/mcp`) against this server
    /// with `args`, and `env` beside `CTX_BIN`, `CTX_SERVER` and
    /// `CTX_TOKEN`: what it printed, as JSON. `None` when the `mcp` package
    /// is not installable here (an error with `CTX_TEST_MCP=1`, as
    /// [`mcp_python`] says).
    pub fn mcp_client(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Value> {
        let (python, here) = mcp_python()?;
        let out = Command::new(python)
            .arg(here.join(script))
            .args(args)
            .env("CTX_BIN", ctx_bin())
            .env("CTX_SERVER", &self.url)
            .env("CTX_TOKEN", &self.token)
            .envs(env.iter().copied())
            .output()
            .expect("the MCP client runs");
        assert!(
            out.status.success(),
            "MCP client {script} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(serde_json::from_slice(&out.stdout).expect("the client prints JSON"))
    }

    /// Runs a `ctx` client command against this server (stdin empty); its
    /// whole output, stderr included.
    pub fn cli_output(&self, args: &[&str]) -> std::process::Output {
        Command::new(ctx_bin())
            .args(args)
            .env("CTX_SERVER", &self.url)
            .env("CTX_TOKEN", &self.token)
            .stdin(Stdio::null())
            .output()
            .expect("ctx runs")
    }

    /// Runs a `ctx` client command against this server; (exit code, stdout).
    pub fn cli(&self, args: &[&str]) -> (i32, Vec<u8>) {
        let out = Command::new(ctx_bin())
            .args(args)
            .env("CTX_SERVER", &self.url)
            .env("CTX_TOKEN", &self.token)
            .stdin(Stdio::null())
            .output()
            .expect("ctx runs");
        if !out.status.success() {
            eprintln!("ctx {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        (out.status.code().unwrap_or(-1), out.stdout)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` that holds `needle` (the "no byte left" check
/// of the erase tests).
pub fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                found.push(path.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// [`files_holding`] once the server's background writes have settled: a
/// result answered from the hot cache is stored after the answer, and its
/// parent's entry then superseded (removed), so a snapshot taken at once
/// can list a file that goes a moment later. The same list twice, 100 ms
/// apart (at most 10 s of waiting).
pub fn files_holding_settled(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut last = files_holding(dir, needle);
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = files_holding(dir, needle);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// The Python `mcp` package's interpreter (tests/mcp/setup installs it once)
/// and the folder of the MCP client scripts; `None` (said on stderr) when
/// it cannot be installed here, which `CTX_TEST_MCP=1` makes a failure.
pub fn mcp_python() -> Option<(String, PathBuf)> {
    let required = ctx_core::config::harness_flag("CTX_TEST_MCP");
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp");
    let setup = Command::new(here.join("setup"))
        .output()
        .expect("tests/mcp/setup runs");
    if !setup.status.success() {
        let why = String::from_utf8_lossy(&setup.stderr).to_string();
        assert!(
            !required,
            "CTX_TEST_MCP=1 but the mcp package could not be installed: {why}"
        );
        eprintln!("NOT RUN: the Python mcp package is not installable here: {why}");
        return None;
    }
    let python = String::from_utf8(setup.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    Some((python, here))
}

/// Whether tests against the AWS emulator should run: yes when
/// `AWS_ENDPOINT_URL` is set (and then it must answer); with
/// `CTX_TEST_AWS=1` it must be set.
pub fn aws_expected() -> bool {
    ctx_core::config::Config::emulator_from_env().is_some()
}

/// A JSON-over-HTTP client with the server's token.
#[derive(Clone)]
pub struct Http {
    http: reqwest::Client,
    /// The base URL.
    pub url: String,
    /// The bearer token.
    pub token: String,
}

impl Http {
    /// Sends `body` (JSON) and returns the status and JSON response.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), reqwest::Error> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("valid method");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await?;
        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, v))
    }

    /// Like [`Http::call`], asserting a 2xx.
    pub async fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = self.call(method, path, body).await.expect("request sent");
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// Raw bytes of a GET.
    pub async fn bytes(&self, path: &str) -> Vec<u8> {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("request sent");
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp.bytes().await.expect("body").to_vec()
    }

    /// Materializes `id` with `stop` and returns the bytes.
    pub async fn materialize(&self, id: &str, stop: &str) -> Vec<u8> {
        let m = self
            .ok(
                "POST",
                &format!("/v1/commits/{id}/materialize"),
                Some(&serde_json::json!({ "stop": stop })),
            )
            .await;
        self.bytes(&format!(
            "/v1/artifacts/{}",
            m["artifact_ref"].as_str().expect("artifact_ref")
        ))
        .await
    }
}

/// A small deterministic PRNG (xorshift64*), so failures can be replayed
/// from the printed seed.
pub struct Rng(u64);

impl Rng {
    /// Seeded; 0 is mapped to a fixed non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}
