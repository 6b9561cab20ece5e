//! The operator's tenant erase, `ctx tenants erase`, against real stores:
//! two tenants, a canary in one's deltas and summary, materialized (cached)
//! and translated; erased on a stopped server's data directory, the
//! canary is in no file of it (SQLite's database and write-ahead log
//! included), the other tenant still materializes, the erased tenant's
//! token is refused, and a re-run erases nothing; killed with SIGKILL
//! while it removes the bytes, a second run finishes. The same on the aws
//! store against the emulator: no S3 object or DynamoDB item of the tenant
//! remains.

use ctx_core::store::Lifecycle;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use ctx_tests::{Http, Server, ctx_bin, files_holding};
use serde_json::{Value, json};

const CANARY: &str = "CANARY-4b7d-tenant-erase-do-not-keep";

/// Runs `ctx` with `args` (no server involved).
fn ctx(args: &[&str]) -> Output {
    Command::new(ctx_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("ctx runs")
}

/// A token for `tenant` in the data directory.
fn token_for(data: &Path, tenant: &str) -> String {
    let out = ctx(&["tokens", "add", tenant, "--data", data.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Two commits (the canary in the first when `canary`), a summary, a ref,
/// a materialization and a translation; the tip.
async fn fill(http: &Http, text: &str) -> String {
    let mut parent: Option<String> = None;
    for (i, delta) in [format!("user: {text}\n"), "assistant: noted\n".into()]
        .into_iter()
        .enumerate()
    {
        let mut body = json!({
            "commit_type": "delta", "format": "raw", "template": "t",
            "principal": "agent", "checkpoint": "turn_boundary",
            "session_id": "s", "delta": delta,
            "created_at": format!("2026-11-22T00:00:{i:02}Z"),
        });
        if let Some(p) = &parent {
            body["parent"] = json!(p);
        }
        let c = http.ok("POST", "/v1/commits", Some(&body)).await;
        parent = Some(c["id"].as_str().unwrap().to_owned());
    }
    let tip = parent.unwrap();
    http.ok(
        "PATCH",
        &format!("/v1/commits/{tip}"),
        Some(&json!({"summary": format!("about {text}")})),
    )
    .await;
    http.ok("PUT", "/v1/refs/sessions/s", Some(&json!({"target": tip})))
        .await;
    for format in [None, Some("openai-chat-v1")] {
        let mut body = json!({"stop": "root"});
        if let Some(f) = format {
            body["format"] = json!(f);
        }
        http.ok(
            "POST",
            &format!("/v1/commits/{tip}/materialize"),
            Some(&body),
        )
        .await;
    }
    tip
}

/// The bytes of `ctx.db` and its write-ahead log and shared memory.
fn sqlite_bytes(data: &Path) -> u64 {
    std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("ctx.db"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn erased(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_tenant_leaves_no_byte_behind_and_the_other_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let server = Server::start(dir.path());
    let acme = server.client_as(&token_for(dir.path(), "acme"));
    let other_token = token_for(dir.path(), "other");
    let other = server.client_as(&other_token);
    let gone = fill(&acme, CANARY).await;
    let kept = fill(&other, "unrelated").await;
    assert!(
        files_holding(dir.path(), CANARY.as_bytes()).len() >= 3,
        "the canary is stored before the erase"
    );

    // A running server holds the data directory: refused, nothing erased.
    let out = ctx(&["tenants", "erase", "acme", "--data", &data, "--yes"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    // Without --yes: a usage error, nothing erased.
    server.kill();
    let out = ctx(&["tenants", "erase", "acme", "--data", &data]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    // A malformed tenant: a usage error naming it.
    let out = ctx(&["tenants", "erase", "Acme!", "--data", &data, "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tenant"));

    let db_before = sqlite_bytes(dir.path());
    let e = erased(&ctx(&[
        "tenants", "erase", "acme", "--data", &data, "--yes", "--json",
    ]));
    assert!(
        sqlite_bytes(dir.path()) < db_before,
        "the database and its log shrink ({db_before} bytes before)"
    );
    assert_eq!(e["tenant"], "acme", "{e}");
    assert_eq!(e["tokens"], 1, "{e}");
    assert_eq!(e["commits"], 2, "{e}");
    assert_eq!(e["refs"], 1, "{e}");
    assert_eq!(e["cache"], 2, "{e}");
    // The joined result and the translation (the small deltas were
    // inline with their commits: rows, counted with the other records).
    assert_eq!(e["blobs"], 2, "{e}");
    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "the canary survives in {left:?}");
    assert!(
        !dir.path().join("cas").join("acme").exists(),
        "the tenant's directory is gone"
    );

    let server = Server::start(dir.path());
    let (status, _) = server
        .client_as(&other_token)
        .call("GET", &format!("/v1/commits/{gone}"), None)
        .await
        .unwrap();
    assert_eq!(status, 404);
    assert_eq!(
        server
            .client_as(&other_token)
            .materialize(&kept, "root")
            .await,
        b"user: unrelated\nassistant: noted\n"
    );
    let mut acme = acme.clone();
    acme.url.clone_from(&server.url);
    let (status, _) = acme.call("GET", "/v1/refs", None).await.unwrap();
    assert_eq!(status, 401, "the erased tenant's token is revoked");
    server.kill();

    // Again: nothing left, said plainly, exit 0.
    let out = ctx(&["tenants", "erase", "acme", "--data", &data, "--yes"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "tenant acme had nothing to erase"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_tenant_on_aws_leaves_no_object_or_item() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = Server::start_aws(dir.path()) else {
        return;
    };
    let data = dir.path().to_str().unwrap().to_owned();
    let http = server.client();
    // The tenant start_aws made a token for (the one not "default").
    let listed: Value =
        serde_json::from_slice(&ctx(&["tokens", "list", "--json", "--data", &data]).stdout)
            .unwrap();
    let tenant = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tenant"].as_str())
        .find(|t| *t != "default")
        .expect("start_aws added a token")
        .to_owned();
    let other_tenant = format!("{tenant}-other");
    let other = server.client_as(&token_for(dir.path(), &other_tenant));
    fill(&http, CANARY).await;
    let kept = fill(&other, "unrelated").await;
    server.kill();

    // The one-time backfill reads the tenant's two commits and rewrites
    // their index entries (idempotent: they are there already).
    let out = ctx(&["tenants", "backfill-index", "--tenant", &tenant, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&b["commits"], &b["branches"], &b["gone"]),
        (&json!(2), &json!(0), &json!(0)),
        "{b}"
    );
    // Two session entries, a child, two artifact users, the registry.
    assert_eq!(b["entries"], 6, "{b}");

    let e = erased(&ctx(&[
        "tenants", "erase", &tenant, "--aws", "--data", &data, "--yes", "--json",
    ]));
    assert_eq!(e["tokens"], 1, "{e}");
    assert_eq!(e["commits"], 2, "{e}");
    assert_eq!(e["refs"], 1, "{e}");
    assert_eq!(e["cache"], 2, "{e}");
    // The two results; the small deltas were inline with their commits'
    // items.
    assert_eq!(e["blobs"], 2, "{e}");

    // Nothing of the tenant is left under its key prefixes: erasing again
    // through the stores themselves finds nothing to remove.
    let config = ctx_core::config::Config::emulator_from_env()
        .expect("the emulator is running")
        .aws()
        .unwrap();
    let (blobs, meta) =
        ctx_core::store::aws::connect(&config, ctx_core::store::aws::AwsHooks::default())
            .await
            .unwrap();
    use ctx_core::store::BlobStore as _;
    let t: ctx_core::TenantId = tenant.parse().unwrap();
    assert_eq!(meta.erase_tenant(&t, usize::MAX).await.unwrap().total(), 0);
    assert_eq!(blobs.erase_tenant(&t, usize::MAX).await.unwrap(), 0);

    // The other tenant still materializes.
    let server = Server::start_with(dir.path(), &["--store", "aws"]);
    let other = server.client_as(&other.token);
    assert_eq!(
        other.materialize(&kept, "root").await,
        b"user: unrelated\nassistant: noted\n"
    );
    let out = ctx(&[
        "tenants", "erase", &tenant, "--aws", "--data", &data, "--yes",
    ]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("tenant {tenant} had nothing to erase")
    );
}

/// The shard directories left under `dir`.
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, Iterator::count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_killed_part_way_is_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let server = Server::start(dir.path());
    let acme = server.client_as(&token_for(dir.path(), "acme"));
    let other = server.client_as(&token_for(dir.path(), "other"));
    fill(&acme, CANARY).await;
    let kept = fill(&other, "unrelated").await;
    server.kill();
    // Many more artifacts of the tenant, laid out as the store lays them
    // out (`cas/<tenant>/<2 hex>/<64 hex>`), so that removing its bytes
    // takes long enough to be killed part-way.
    let cas = dir.path().join("cas").join("acme");
    for i in 0..4_000u32 {
        let body = format!("{CANARY} filler {i}");
        let hex = ctx_core::Hash::of(body.as_bytes()).to_hex();
        let shard = cas.join(&hex[..2]);
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join(&hex), body).unwrap();
    }
    let shards = entries(&cas);
    assert_eq!(shards, 256);

    let mut child = Command::new(ctx_bin())
        .args(["tenants", "erase", "acme", "--data", &data, "--yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // SIGKILL once the first shard directory is gone (its records are
    // erased by then: bytes go after them), well before the last.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while entries(&cas) == shards {
        assert!(
            std::time::Instant::now() < deadline,
            "the erase never reached the bytes"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the erase ended before it removed a shard"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = entries(&cas);
    eprintln!("killed with {left} of {shards} shard directories left");
    assert!(
        left > 0,
        "the erase finished before the kill: the test did not interrupt it"
    );

    // The re-run: the records went in the first run, the rest of the
    // bytes go now.
    let e = erased(&ctx(&[
        "tenants", "erase", "acme", "--data", &data, "--yes", "--json",
    ]));
    assert_eq!(e["commits"], 0, "{e}");
    assert_eq!(e["tokens"], 0, "{e}");
    assert!(e["blobs"].as_u64().unwrap() > 0, "{e}");
    assert!(!cas.exists());
    let left = files_holding(dir.path(), CANARY.as_bytes());
    assert!(left.is_empty(), "the canary survives in {left:?}");
    let server = Server::start(dir.path());
    assert_eq!(
        other.clone().on(&server).materialize(&kept, "root").await,
        b"user: unrelated\nassistant: noted\n"
    );
}

trait On {
    fn on(self, server: &Server) -> Self;
}

impl On for Http {
    /// The same client against a restarted server.
    fn on(mut self, server: &Server) -> Self {
        self.url.clone_from(&server.url);
        self
    }
}
