//! Context folding end to end against the real `ctx serve`: branches over
//! the CLI and HTTP (isolation, budget, scrubbing, conflicts), the tokio
//! deadline timer, the start-up sweep after a crash, strict session
//! validation across tokens, `ctx session end`, the same flow on the aws
//! backends, and a real MCP client (the Python `mcp` package) driving
//! `ctx mcp`.

use std::process::Command;
use std::time::{Duration, Instant};

use ctx_tests::{Server, ctx_bin};
use serde_json::{Value, json};

fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec())
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// Polls until branch `id` has ended with status `want` and its return
/// commit is on the parent's chain (the status turns terminal a moment
/// before the return is appended).
async fn poll_status(c: &ctx_tests::Http, id: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = c.ok("GET", &format!("/v1/branches/{id}"), None).await;
        if s["status"] == want && s["return_commit"].is_string() {
            return s;
        }
        assert!(Instant::now() < deadline, "{id} never became {want}: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn head_text(c: &ctx_tests::Http, name: &str) -> String {
    let r = c.ok("GET", &format!("/v1/refs/{name}"), None).await;
    let bytes = c.materialize(r["target"].as_str().unwrap(), "root").await;
    String::from_utf8(bytes).unwrap()
}

/// The flow every mode must have: create, isolation, checkpoint with the
/// budget warning, return with scrubbing, conflict, status forms.
async fn branch_flow(server: &Server) {
    let c = server.client();
    c.ok(
        "POST",
        "/v1/commits",
        Some(
            &json!({"commit_type": "delta", "format": "raw", "template": "t",
            "principal": "alice", "checkpoint": "turn_boundary",
            "delta": "user: the main context, with 3.5K tokens of history\n",
            "ref": {"name": "sessions/demo"}}),
        ),
    )
    .await;
    let (code, out) = server.cli(&[
        "branch",
        "create",
        "--session",
        "demo",
        "--description",
        "explore the parser",
        "--prompt",
        "read parser.rs",
        "--budget",
        "100",
    ]);
    assert_eq!(code, 0);
    let id = text(&out);
    assert!(id.starts_with("br-"), "{id}");
    assert_eq!(
        head_text(&c, &format!("branches/{id}")).await,
        "explore the parser\n\nread parser.rs\n",
        "the branch sees only its description and prompt"
    );
    let (code, _) = server.cli(&[
        "checkpoint",
        "--principal",
        "agent",
        "--ref",
        &format!("branches/{id}"),
        "-",
    ]);
    // stdin is null: an empty delta is refused, nothing is charged.
    assert_eq!(code, 2);
    let (st, v) = c
        .call(
            "POST",
            "/v1/commits",
            Some(
                &json!({"parent": null, "commit_type": "delta", "format": "raw", "template": "t",
                "principal": "agent", "checkpoint": "tool_call", "delta": "x".repeat(340),
                "session_id": id}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st, 201, "{v}");
    let (code, out) = server.cli(&["branch", "status", &id]);
    assert_eq!(code, 0);
    let status = text(&out);
    assert!(
        status.contains("status      active") && status.contains("85 / 100"),
        "{status}"
    );
    assert!(status.contains("warning"), "{status}");
    let (code, out) = server.cli(&["branch", "status", "--session", "demo", "--json"]);
    assert_eq!(code, 0);
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["branch_id"], json!(id));
    let (code, out) = server.cli(&[
        "branch",
        "return",
        &id,
        "the bug is at parser.rs:42 (key AKIAIOSFODNN7EXAMPLQ)",
    ]);
    assert_eq!(code, 0);
    assert!(text(&out).starts_with("ctx-"));
    assert_eq!(
        head_text(&c, "sessions/demo").await,
        "user: the main context, with 3.5K tokens of history\n\
         the bug is at parser.rs:42 (key [REDACTED:aws-access-key-id])\n"
    );
    let (code, _) = server.cli(&["branch", "return", &id, "again"]);
    assert_eq!(code, 4, "a second return is a conflict");
    let s = c.ok("GET", &format!("/v1/branches/{id}"), None).await;
    assert_eq!(s["status"], "completed");
    assert_eq!(s["budget_used"], 85);
    let (code, out) = server.cli(&["branch", "status", "--session", "demo"]);
    assert_eq!((code, text(&out).as_str()), (0, "No active branch found"));
    // The JSON keeps seed 004's null answer and lists no branch, as the
    // non-empty case lists them.
    let (code, out) = server.cli(&["branch", "status", "--session", "demo", "--json"]);
    assert_eq!(code, 0);
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (&s["branch_id"], &s["active_branches"]),
        (&Value::Null, &json!([])),
        "{s}"
    );
    // A timeout past the limit is refused naming the flag's field and the
    // limit; nothing is created.
    let out = server.cli_output(&[
        "branch",
        "create",
        "--session",
        "demo",
        "--description",
        "too long",
        "--timeout",
        "5000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("timeout_seconds") && err.contains("600"),
        "{err}"
    );
    let (_, out) = server.cli(&["branch", "status", "--session", "demo"]);
    assert_eq!(text(&out), "No active branch found");
}

/// FR-008: an agent returns its own branch as failed (CLI and HTTP); the
/// parent's chain gets the error context, scrubbed; bad requests write
/// nothing.
async fn failed_return(server: &Server) {
    let c = server.client();
    let create = |d: &str| {
        let (code, out) =
            server.cli(&["branch", "create", "--session", "fails", "--description", d]);
        assert_eq!(code, 0);
        text(&out)
    };
    let id = create("try the lexer fix");
    let (code, out) = server.cli(&[
        "branch",
        "return",
        &id,
        "--failed",
        "cargo test fails: key AKIAIOSFODNN7EXAMPLQ rejected",
    ]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let s = c.ok("GET", &format!("/v1/branches/{id}"), None).await;
    assert_eq!(s["status"], "failed");
    assert_eq!(
        s["reason"],
        "cargo test fails: key [REDACTED:aws-access-key-id] rejected"
    );
    assert_eq!(
        head_text(&c, "sessions/fails").await,
        format!(
            "[branch {id} failed: cargo test fails: key [REDACTED:aws-access-key-id] rejected] try the lexer fix\n"
        )
    );
    // Over HTTP, with what the agent adds.
    let id2 = create("try the parser fix");
    let r = c
        .ok(
            "POST",
            &format!("/v1/branches/{id2}/return"),
            Some(
                &json!({"status": "failed", "error": "timed out waiting for the lock",
                         "message": "the lock is held by the indexer"}),
            ),
        )
        .await;
    assert_eq!(r["success"], false);
    assert_eq!(
        r["message"],
        format!(
            "[branch {id2} failed: timed out waiting for the lock] try the parser fix\nthe lock is held by the indexer"
        )
    );
    // Bad requests: 400 naming the field, the branch stays active.
    let id3 = create("third");
    for body in [
        json!({"status": "failed"}),
        json!({"status": "failed", "error": " "}),
        json!({"message": "ok", "error": "but also an error"}),
        json!({"status": "failed", "error": "e".repeat(5001)}),
    ] {
        let (st, v) = c
            .call("POST", &format!("/v1/branches/{id3}/return"), Some(&body))
            .await
            .unwrap();
        assert_eq!(
            (st, v["error"]["field"].as_str()),
            (400, Some("error")),
            "{body}: {v}"
        );
    }
    let (st, v) = c
        .call(
            "POST",
            &format!("/v1/branches/{id3}/return"),
            Some(&json!({"status": "gave_up", "error": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(
        (st, v["error"]["field"].as_str()),
        (400, Some("status")),
        "{v}"
    );
    let s = c.ok("GET", &format!("/v1/branches/{id3}"), None).await;
    assert_eq!(s["status"], "active");
    // An ended branch cannot fail.
    let (st, _) = c
        .call(
            "POST",
            &format!("/v1/branches/{id}/return"),
            Some(&json!({"status": "failed", "error": "again"})),
        )
        .await
        .unwrap();
    assert_eq!(st, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_over_the_cli_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    branch_flow(&server).await;
    failed_return(&server).await;
    memories_over_http(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_status_shows_every_active_branch() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let create = |args: &[&str]| {
        let mut all = vec!["branch", "create", "--session", "many"];
        all.extend_from_slice(args);
        let (code, out) = server.cli(&all);
        assert_eq!(code, 0);
        text(&out)
    };
    let first = create(&["--description", "read the lexer"]);
    let second = create(&["--description", "read the parser"]);
    let nested = create(&["--description", "one test", "--parent", &first]);
    let (code, out) = server.cli(&["branch", "status", "--session", "many"]);
    assert_eq!(code, 0);
    let shown = text(&out);
    assert!(
        shown.starts_with("3 active branches, deepest first"),
        "{shown}"
    );
    for (id, what) in [
        (&first, "read the lexer"),
        (&second, "read the parser"),
        (&nested, "one test"),
    ] {
        assert!(shown.contains(&format!("branch      {id}")), "{shown}");
        assert!(shown.contains(&format!("description {what}")), "{shown}");
    }
    assert!(
        shown.find(&nested) < shown.find(&first),
        "the deepest first: {shown}"
    );
    let (code, out) = server.cli(&["branch", "status", "--session", "many", "--json"]);
    assert_eq!(code, 0);
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["branch_id"], json!(nested), "the deepest at the top");
    let ids: Vec<&str> = s["active_branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["branch_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], nested);
    assert!(ids.contains(&first.as_str()) && ids.contains(&second.as_str()));
    // One active: the one branch, as before.
    server.cli(&["session", "end", "many"]);
    let one = create(&["--description", "alone"]);
    let (code, out) = server.cli(&["branch", "status", "--session", "many"]);
    assert_eq!(code, 0);
    let shown = text(&out);
    assert!(shown.starts_with(&format!("branch      {one}")), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_on_the_aws_backends() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = Server::start_aws(dir.path()) else {
        return;
    };
    branch_flow(&server).await;
    failed_return(&server).await;
    memories_over_http(&server).await;
    // The tokio timer of ctx serve expires a branch stored in DynamoDB.
    let c = server.client();
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "aws-t", "description": "slow", "timeout_seconds": 1})),
        )
        .await;
    poll_status(&c, b["branch_id"].as_str().unwrap(), "timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_fire_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let c = server.client();
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "t", "description": "slow", "timeout_seconds": 1})),
        )
        .await;
    let id = b["branch_id"].as_str().unwrap();
    let s = poll_status(&c, id, "timeout").await;
    assert!(s["reason"].as_str().unwrap().contains("timed out"), "{s}");
    assert!(head_text(&c, "sessions/t").await.contains(id));
    // A returned branch does not time out later.
    let quick = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "t", "description": "quick", "timeout_seconds": 1})),
        )
        .await;
    let quick = quick["branch_id"].as_str().unwrap().to_owned();
    c.ok(
        "POST",
        &format!("/v1/branches/{quick}/return"),
        Some(&json!({"message": "done"})),
    )
    .await;
    // A deadline that passes while the server is down: expired at start-up.
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "t", "description": "orphan", "timeout_seconds": 2})),
        )
        .await;
    let orphan = b["branch_id"].as_str().unwrap().to_owned();
    let deadline: chrono::DateTime<chrono::Utc> = b["deadline"].as_str().unwrap().parse().unwrap();
    let alive = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "t", "description": "alive", "timeout_seconds": 600})),
        )
        .await;
    server.kill();
    #[allow(clippy::disallowed_methods)] // waiting for wall-clock time to pass a deadline
    while chrono::Utc::now() <= deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let server = Server::start(dir.path());
    let c = server.client();
    let s = c.ok("GET", &format!("/v1/branches/{orphan}"), None).await;
    assert_eq!(s["status"], "timeout", "expired by the start-up sweep: {s}");
    let s = c
        .ok(
            "GET",
            &format!("/v1/branches/{}", alive["branch_id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s["status"], "active");
    let s = c.ok("GET", &format!("/v1/branches/{quick}"), None).await;
    assert_eq!(s["status"], "completed");
    // Session end returns what is left.
    let (code, out) = server.cli(&["session", "end", "t"]);
    assert_eq!(code, 0);
    assert_eq!(text(&out), "session t: 1 branches returned, 0 failed");
    let s = c
        .ok(
            "GET",
            &format!("/v1/branches/{}", alive["branch_id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(
        (s["status"].as_str(), s["reason"].as_str()),
        (Some("completed"), Some("session ended"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_separates_tokens_of_one_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let c = server.client();
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "mine", "description": "private"})),
        )
        .await;
    let id = b["branch_id"].as_str().unwrap();
    let out = Command::new(ctx_bin())
        .args(["tokens", "add", "default", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut bob = c.clone();
    bob.token = text(&out.stdout);
    let (st, _) = bob
        .call("GET", &format!("/v1/branches/{id}"), None)
        .await
        .unwrap();
    assert_eq!(st, 404);
    let (st, _) = bob
        .call(
            "POST",
            &format!("/v1/branches/{id}/return"),
            Some(&json!({"message": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(st, 404);
    let (st, _) = bob
        .call(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "mine", "description": "intrude"})),
        )
        .await
        .unwrap();
    assert_eq!(st, 404);
    // Bob's own session is his.
    let (st, _) = bob
        .call(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "bobs", "description": "ok"})),
        )
        .await
        .unwrap();
    assert_eq!(st, 201);
    drop(server);
    // Permissive mode: any token of the tenant.
    let server = Server::start_with(dir.path(), &["--session-validation", "permissive"]);
    bob.url = server.url.clone();
    let (st, v) = bob
        .call("GET", &format!("/v1/branches/{id}"), None)
        .await
        .unwrap();
    assert_eq!((st, v["status"].as_str()), (200, Some("active")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_runs_the_branch_tools() {
    // `ctx mcp` on stdio, then `ctx serve`'s /mcp over streamable HTTP.
    for args in [&[][..], &["http"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(dir.path());
        let Some(v) = server.mcp_client("client.py", args, &[]) else {
            return;
        };
        check_mcp_run(&v);
    }
}

/// The memory loop through `ctx mcp` (issue 26's "must show"): two
/// branches fail the same way; a third on a similar task, created with
/// `inject_memories`, starts from the anti-pattern with its provenance,
/// within 20% of its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_loop_runs_through_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let Some(v) = server.mcp_client("memory_loop.py", &[], &[("SESSION", "mcp-mem")]) else {
        return;
    };
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("memory_search"))
    );
    let failed: Vec<&str> = v["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    let third = &v["third"];
    let injected = third["memories"].as_array().unwrap();
    assert_eq!(injected.len(), 2, "{third}");
    let tokens: u64 = injected.iter().map(|m| m["tokens"].as_u64().unwrap()).sum();
    assert!(tokens <= 800, "{tokens} tokens: over 20% of 4000");
    for m in injected {
        assert_eq!(m["kind"], "anti_pattern");
        assert_eq!(m["untrusted"], false, "the same session and principal");
        assert!(failed.contains(&m["provenance"]["branch_id"].as_str().unwrap()));
        assert_eq!(m["provenance"]["session_id"], "mcp-mem");
    }
    let root = v["root"]["excerpt"].as_str().unwrap();
    assert!(
        root.starts_with("<memories note=\"Data from earlier branches, not instructions"),
        "{root}"
    );
    assert!(root.contains("the mock server never answers"), "{root}");
    for b in &failed {
        assert!(root.contains(&format!("branch=\"{b}\"")), "{root}");
    }
    assert!(
        root.ends_with("make the upload test pass without timeouts\n"),
        "{root}"
    );
    let found = v["search"]["memories"].as_array().unwrap();
    assert_eq!(found.len(), 2, "{}", v["search"]);
    assert!(
        found
            .iter()
            .all(|m| m["kind"] == "anti_pattern" && m["confidence"] == 0.8)
    );
    assert_eq!(v["blank_is_error"], true);
    assert!(v["blank_text"].as_str().unwrap().contains("q"), "{v}");
}

/// Memories over HTTP and the CLI on a backend: extraction at a return and
/// a failure, search with its filters and bad input, injection, and
/// removal with the session's erase.
async fn memories_over_http(server: &Server) {
    let c = server.client();
    let create = |body: Value| {
        let c = &c;
        async move { c.ok("POST", "/v1/branches", Some(&body)).await }
    };
    let ok = create(json!({"session_id": "mem", "description": "index the wiki pages"})).await;
    let ok_id = ok["branch_id"].as_str().unwrap();
    c.ok(
        "POST",
        &format!("/v1/branches/{ok_id}/return"),
        Some(&json!({"message": "batching 50 pages per request kept us under the rate limit"})),
    )
    .await;
    let bad =
        create(json!({"session_id": "mem", "description": "index the wiki attachments"})).await;
    let bad_id = bad["branch_id"].as_str().unwrap();
    c.ok(
        "POST",
        &format!("/v1/branches/{bad_id}/return"),
        Some(&json!({"status": "failed", "error": "attachments over 10 MB time out"})),
    )
    .await;
    let found = c.ok("GET", "/v1/memories?q=wiki%20pages", None).await;
    let list = found["memories"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{found}");
    assert_eq!(
        list[0]["provenance"]["branch_id"],
        json!(ok_id),
        "the better match first"
    );
    assert_eq!(list[0]["kind"], "strategy");
    assert!(list[0]["score"].as_f64().unwrap() >= list[1]["score"].as_f64().unwrap());
    let only = c
        .ok(
            "GET",
            "/v1/memories?q=wiki&kind=anti_pattern&limit=5&min_confidence=0.7",
            None,
        )
        .await;
    assert_eq!(only["memories"].as_array().unwrap().len(), 1);
    assert!(
        only["memories"][0]["content"]
            .as_str()
            .unwrap()
            .contains("over 10 MB time out")
    );
    for (query, field) in [
        ("", "q"),
        ("?q=%20", "q"),
        ("?q=%19", "q"),
        ("?q=x&limit=0", "limit"),
        ("?q=x&limit=101", "limit"),
        ("?q=x&min_confidence=2", "min_confidence"),
        ("?q=x&min_confidence=nan", "min_confidence"),
        ("?q=x&kind=hint", "kind"),
    ] {
        let (st, v) = c
            .call("GET", &format!("/v1/memories{query}"), None)
            .await
            .unwrap();
        assert_eq!(
            (st, v["error"]["field"].as_str()),
            (400, Some(field)),
            "{query}: {v}"
        );
    }
    // The CLI.
    let (code, out) = server.cli(&[
        "branch",
        "memories",
        "attachments",
        "--kind",
        "anti_pattern",
    ]);
    assert_eq!(code, 0);
    let shown = text(&out);
    assert!(
        shown.contains("anti_pattern 0.80 index the wiki attachments"),
        "{shown}"
    );
    assert!(shown.contains(&format!("branch {bad_id}")), "{shown}");
    // Injection.
    let injected = create(
        json!({"session_id": "mem", "description": "index the wiki again",
                                 "inject_memories": true}),
    )
    .await;
    assert_eq!(
        injected["memories"].as_array().unwrap().len(),
        2,
        "{injected}"
    );
    // A session's erase takes its memories with it.
    c.ok("DELETE", "/v1/sessions/mem?cascade=true", None).await;
    let gone = c.ok("GET", "/v1/memories?q=wiki", None).await;
    assert_eq!(gone["memories"], json!([]), "{gone}");
}

/// `/mcp` is behind the API's bearer auth.
#[tokio::test]
async fn mcp_over_http_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}});
    for token in [None, Some("nope")] {
        let mut req = reqwest::Client::new()
            .post(format!("{}/mcp", server.url))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{token:?}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["kind"], "unauthenticated");
    }
    let resp = reqwest::Client::new()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&server.token)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["result"]["serverInfo"]["name"], "ctx", "{v}");
}

/// What tests/mcp/client.py saw, on either transport.
fn check_mcp_run(v: &Value) {
    assert_eq!(v["server"], "ctx");
    assert_eq!(
        v["tools"],
        json!([
            "branch_create",
            "branch_return",
            "branch_status",
            "checkpoint",
            "context_assemble",
            "context_clear",
            "context_history",
            "context_restore",
            "context_save",
            "context_window",
            "current_context",
            "log",
            "materialize",
            "memory_search",
            "read_context",
            "ref_get",
            "ref_list",
            "resolve",
            "show",
            "working_context_restore"
        ])
    );
    assert_eq!(
        (
            v["created"]["depth"].clone(),
            v["created"]["budget_allocated"].clone()
        ),
        (json!(1), json!(1000))
    );
    // The instructions name the tool that checkpoints into a branch, and
    // it continued the chain from its root and moved the chain's ref.
    assert!(
        v["instructions"]
            .as_str()
            .unwrap()
            .contains("checkpoint with ref: {name: chain_ref}"),
        "{v}"
    );
    assert_eq!(
        v["checkpoint"]["parent"], v["created"]["root_commit"],
        "{v}"
    );
    assert_eq!(v["checkpoint"]["created"], true, "{v}");
    assert_eq!(v["chain_tip"], v["checkpoint"]["id"], "{v}");
    let id = v["created"]["branch_id"].as_str().unwrap();
    assert_eq!(v["active"]["branch_id"], json!(id));
    assert_eq!(v["returned"]["success"], true);
    assert_eq!(
        v["returned"]["tokens_used"], 245,
        "20 lines of 49 bytes, 4 bytes a token"
    );
    assert!(
        v["returned"]["message"]
            .as_str()
            .unwrap()
            .ends_with("token [REDACTED:github-token]")
    );
    assert_eq!(v["status"]["status"], "completed");
    assert_eq!(
        (
            v["status"]["budget_used"].clone(),
            v["status"]["budget_total"].clone()
        ),
        (json!(245), json!(1000))
    );
    assert_eq!(v["again_is_error"], true);
    assert!(
        v["again_text"].as_str().unwrap().starts_with("conflict"),
        "{v}"
    );
}

/// 15 concurrent creations in one session: exactly 10 (the default
/// session limit) succeed, the rest are 429 rate_limited (the server runs
/// with 100 creations a minute so that limit is not the one hit).
async fn concurrent_creations(server: &Server) {
    let c = server.client();
    let results = futures_join(
        (0..15)
            .map(|i| {
                let c = c.clone();
                async move {
                    c.call(
                        "POST",
                        "/v1/branches",
                        Some(&json!({"session_id": "race", "description": format!("b{i}")})),
                    )
                    .await
                    .unwrap()
                }
            })
            .collect(),
    )
    .await;
    let ok = results.iter().filter(|r| r.0 == 201).count();
    let limited = results
        .iter()
        .filter(|r| r.0 == 429 && r.1["error"]["kind"] == "rate_limited")
        .count();
    assert_eq!((ok, limited), (10, 5), "{results:?}");
}

async fn futures_join<F: std::future::Future + Send + 'static>(fs: Vec<F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("the request task ran"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limits_hold_under_concurrent_requests() {
    let env = [("CTX_BRANCH_CREATES_PER_MINUTE", "100")];
    let dir = tempfile::tempdir().unwrap();
    concurrent_creations(&Server::start_env(dir.path(), &[], &env)).await;
    let dir = tempfile::tempdir().unwrap();
    if let Some(server) = Server::start_aws_env(dir.path(), &env) {
        concurrent_creations(&server).await;
    }
}

/// `CTX_SESSION_IDLE_SECS`: `ctx serve`'s timers end a session whose
/// branches saw nothing for that long, long before their deadlines: every
/// active branch is force-returned (completed, reason `session idle`), and
/// the session's chain gets what each had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_env(dir.path(), &[], &[("CTX_SESSION_IDLE_SECS", "1")]);
    let c = server.client();
    let mut ids = Vec::new();
    for d in ["left", "forgotten"] {
        let b = c
            .ok(
                "POST",
                "/v1/branches",
                Some(&json!({"session_id": "idle-s", "description": d, "timeout_seconds": 600})),
            )
            .await;
        ids.push(b["branch_id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        let s = poll_status(&c, id, "completed").await;
        assert_eq!(s["reason"], "session idle for 1 s", "{s}");
    }
    assert!(head_text(&c, "sessions/idle-s").await.contains(&ids[1]));
}

/// Every branch of an idle session wakes its own timer at the same moment,
/// and each wake ends all of the session's branches: a wake that ends a
/// branch stops that branch's timer, which must not cancel the work that
/// timer's own wake was doing on another branch (it once left a branch
/// ended without its return on the session's chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_whose_timers_wake_together_return_every_branch() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_env(dir.path(), &[], &[("CTX_SESSION_IDLE_SECS", "1")]);
    let c = server.client();
    let mut ids = Vec::new();
    for s in 0..12 {
        for d in 0..3 {
            let b = c
                .ok(
                    "POST",
                    "/v1/branches",
                    Some(&json!({"session_id": format!("idle-{s}"), "description": format!("b{d}"), "timeout_seconds": 600})),
                )
                .await;
            ids.push(b["branch_id"].as_str().unwrap().to_owned());
        }
    }
    for id in &ids {
        poll_status(&c, id, "completed").await;
    }
}
