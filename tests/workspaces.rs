//! Workspace files and read_context against a real `ctx serve`, in each
//! mode (SQLite + files, memory, and the aws backends on the emulator when
//! expected): the assembly table over HTTP equals the local-directory
//! assembly (the unit tests pin both), concurrent appends keep every line,
//! a stale If-Match is 412, traversal is 400, another tenant sees 404, and
//! the CLI gives the same JSON from the server and from `--dir`.

use ctx_core::workspace::cases::{Case, Op, cases, write_dirs};
use ctx_core::workspace::context::{Context, assemble};
use ctx_core::workspace::dir::DirSource;
use ctx_tests::Server;
use serde_json::Value;

/// A raw request: (status, headers, body).
async fn raw(
    server: &Server,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", server.url))
        .bearer_auth(token);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.expect("body").to_vec())
}

fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or(Value::Null)
}

async fn apply(server: &Server, ws: &str, case: &Case) {
    for op in &case.ops {
        let (method, path, body) = match op {
            Op::Put {
                tastes,
                path,
                content,
            } => (
                "PUT",
                format!(
                    "/v1/workspaces/{}/files/{path}",
                    if *tastes { "tastes" } else { ws }
                ),
                content.clone(),
            ),
            Op::Append { path, lines } => (
                "POST",
                format!("/v1/workspaces/{ws}/append/{path}"),
                lines.clone(),
            ),
        };
        let (status, _, b) =
            raw(server, &server.token, method, &path, &[], Some(body.into())).await;
        assert_eq!(
            status,
            200,
            "{method} {path}: {}",
            String::from_utf8_lossy(&b)
        );
    }
}

async fn dir_context(case: &Case) -> Context {
    let dir = tempfile::tempdir().expect("tempdir");
    let (w, t) = (dir.path().join("ws"), dir.path().join("tastes"));
    std::fs::create_dir_all(&w).expect("mkdir");
    write_dirs(case, &w, &t);
    assemble(&DirSource::new(&w, Some(t)))
        .await
        .expect("assemble")
}

/// Each case in a workspace of its own, and in a tenant of its own for the
/// tastes: a fresh server per case is slow, so tastes files are cleared.
async fn table(server: &Server) {
    for (i, case) in cases().into_iter().enumerate() {
        // Tastes are per tenant: remove the previous case's.
        let (_, _, list) = raw(
            server,
            &server.token,
            "GET",
            "/v1/workspaces/tastes/files",
            &[],
            None,
        )
        .await;
        for f in json(&list)["files"].as_array().cloned().unwrap_or_default() {
            let p = f["path"].as_str().expect("path");
            let (s, _, _) = raw(
                server,
                &server.token,
                "DELETE",
                &format!("/v1/workspaces/tastes/files/{p}"),
                &[],
                None,
            )
            .await;
            assert_eq!(s, 204);
        }
        let ws = format!("img-{i}");
        apply(server, &ws, &case).await;
        let (status, _, body) = raw(
            server,
            &server.token,
            "GET",
            &format!("/v1/workspaces/{ws}/context"),
            &[],
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let over_http: Context = serde_json::from_slice(&body).expect("a context");
        assert_eq!(over_http, dir_context(&case).await, "case {}", case.name);
        // Byte for byte: the JSON keys come in read_context's order.
        let text = String::from_utf8(body).expect("utf-8");
        let order: Vec<usize> = [
            "\"tastes\"",
            "\"brief\"",
            "\"notes\"",
            "\"recent_log\"",
            "\"recent_gaps\"",
        ]
        .iter()
        .map(|k| text.find(k).expect("every part present"))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    }
}

async fn files_behave(server: &Server) {
    let t = server.token.clone();
    // Versions, ETag, If-Match.
    let (s, h, b) = raw(
        server,
        &t,
        "PUT",
        "/v1/workspaces/w1/files/notes/a.md",
        &[],
        Some(b"v1".to_vec()),
    )
    .await;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let v1 = json(&b)["version"].as_str().expect("version").to_owned();
    assert_eq!(json(&b)["size"], 2);
    assert_eq!(h["etag"].to_str().unwrap(), format!("\"{v1}\""));
    let (s, _, b) = raw(
        server,
        &t,
        "PUT",
        "/v1/workspaces/w1/files/notes/a.md",
        &[("If-Match", &v1)],
        Some(b"v2".to_vec()),
    )
    .await;
    assert_eq!(s, 200);
    let v2 = json(&b)["version"].as_str().expect("version").to_owned();
    let (s, _, b) = raw(
        server,
        &t,
        "PUT",
        "/v1/workspaces/w1/files/notes/a.md",
        &[("If-Match", &format!("\"{v1}\""))],
        Some(b"v3".to_vec()),
    )
    .await;
    assert_eq!(s, 412, "{}", String::from_utf8_lossy(&b));
    assert_eq!(json(&b)["current"], Value::from(v2.clone()));
    assert_eq!(json(&b)["error"]["field"], "If-Match");
    let (s, h, b) = raw(
        server,
        &t,
        "GET",
        "/v1/workspaces/w1/files/notes/a.md",
        &[],
        None,
    )
    .await;
    assert_eq!((s, b.as_slice()), (200, &b"v2"[..]));
    assert_eq!(h["etag"].to_str().unwrap(), format!("\"{v2}\""));
    let (s, _, b) = raw(
        server,
        &t,
        "GET",
        &format!("/v1/commits/{v2}/history"),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        json(&b)["commits"].as_array().map(Vec::len),
        Some(2),
        "every version in history"
    );
    // Listing by prefix.
    raw(
        server,
        &t,
        "PUT",
        "/v1/workspaces/w1/files/brief.md",
        &[],
        Some(b"b".to_vec()),
    )
    .await;
    let (_, _, b) = raw(
        server,
        &t,
        "GET",
        "/v1/workspaces/w1/files?prefix=notes/",
        &[],
        None,
    )
    .await;
    let paths: Vec<_> = json(&b)["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].clone())
        .collect();
    assert_eq!(paths, vec![Value::from("notes/a.md")]);
    // Traversal and bad names: 400 naming the field, nothing written.
    for (method, path, field) in [
        ("PUT", "/v1/workspaces/w1/files/..%2Fescape.md", "path"),
        // (A client resolves a literal `..` or `%2E%2E` segment itself;
        // encoded slashes reach the server.)
        ("PUT", "/v1/workspaces/w1/files/a/..%2Fb.md", "path"),
        ("PUT", "/v1/workspaces/w1/files/%2Fetc%2Fpasswd", "path"),
        ("PUT", "/v1/workspaces/w1/files/a%5Cb", "path"),
        ("GET", "/v1/workspaces/w1/files/a//b", "path"),
        ("POST", "/v1/workspaces/w1/append/..%2Fx", "path"),
        ("PUT", "/v1/workspaces/..%2Fw2/files/a.md", "ws"),
        ("GET", "/v1/workspaces/.../context", "ws"),
        ("PUT", "/v1/workspaces/w1/files/a.md", "If-Match"),
    ] {
        let headers: &[(&str, &str)] = if field == "If-Match" {
            &[("If-Match", "nope")]
        } else {
            &[]
        };
        let (s, _, b) = raw(server, &t, method, path, headers, Some(b"x".to_vec())).await;
        assert_eq!(s, 400, "{method} {path}: {}", String::from_utf8_lossy(&b));
        assert_eq!(json(&b)["error"]["field"], field, "{method} {path}");
    }
    let (_, _, b) = raw(server, &t, "GET", "/v1/workspaces/w1/files", &[], None).await;
    assert_eq!(
        json(&b)["files"].as_array().map(Vec::len),
        Some(2),
        "nothing written: {}",
        json(&b)
    );
    // A line that is not JSON: 400, nothing appended.
    let (s, _, b) = raw(
        server,
        &t,
        "POST",
        "/v1/workspaces/w1/append/log.jsonl",
        &[],
        Some(b"{\"ok\":1}\nnot json".to_vec()),
    )
    .await;
    assert_eq!(
        (s, json(&b)["error"]["field"].clone()),
        (400, Value::from("body"))
    );
    let (s, _, _) = raw(
        server,
        &t,
        "GET",
        "/v1/workspaces/w1/files/log.jsonl",
        &[],
        None,
    )
    .await;
    assert_eq!(s, 404);
    // Delete: stale If-Match 412, then 204, then 404.
    let (s, _, _) = raw(
        server,
        &t,
        "DELETE",
        "/v1/workspaces/w1/files/notes/a.md",
        &[("If-Match", &v1)],
        None,
    )
    .await;
    assert_eq!(s, 412);
    let (s, _, _) = raw(
        server,
        &t,
        "DELETE",
        "/v1/workspaces/w1/files/notes/a.md",
        &[("If-Match", &v2)],
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _, _) = raw(
        server,
        &t,
        "GET",
        "/v1/workspaces/w1/files/notes/a.md",
        &[],
        None,
    )
    .await;
    assert_eq!(s, 404);
}

async fn concurrent_appends(server: &Server) {
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (url, token) = (server.url.clone(), server.token.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                for j in 0..10 {
                    let r = http
                        .post(format!("{url}/v1/workspaces/busy/append/log.jsonl"))
                        .bearer_auth(&token)
                        .body(format!(
                            "{{\"op\":\"a\",\"details\":{{\"i\":{i},\"j\":{j}}}}}\n{{\"op\":\"b\"}}"
                        ))
                        .send()
                        .await
                        .expect("sent");
                    assert_eq!(
                        r.status().as_u16(),
                        200,
                        "{}",
                        r.text().await.unwrap_or_default()
                    );
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("appender");
    }
    let (s, _, b) = raw(
        server,
        &server.token,
        "GET",
        "/v1/workspaces/busy/files/log.jsonl",
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200);
    let text = String::from_utf8(b).expect("utf-8");
    assert_eq!(text.lines().count(), 160);
    for i in 0..8 {
        for j in 0..10 {
            let line =
                format!("{{\"op\":\"a\",\"details\":{{\"i\":{i},\"j\":{j}}}}}\n{{\"op\":\"b\"}}");
            assert!(text.contains(&line), "batch {i}/{j} is whole");
        }
    }
}

async fn other_tenant_sees_404(server: &Server) {
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "add", "team-b", "--data"])
        .arg(&server.data)
        .output()
        .expect("ctx tokens add");
    assert!(out.status.success());
    let b = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    raw(
        server,
        &server.token,
        "PUT",
        "/v1/workspaces/mine/files/brief.md",
        &[],
        Some(b"Tastes: x\nsecret".to_vec()),
    )
    .await;
    let (s, _, _) = raw(
        server,
        &b,
        "GET",
        "/v1/workspaces/mine/files/brief.md",
        &[],
        None,
    )
    .await;
    assert_eq!(s, 404);
    let (s, _, _) = raw(
        server,
        &b,
        "DELETE",
        "/v1/workspaces/mine/files/brief.md",
        &[],
        None,
    )
    .await;
    assert_eq!(s, 404);
    let (s, _, body) = raw(server, &b, "GET", "/v1/workspaces/mine/context", &[], None).await;
    assert_eq!(s, 200);
    let ctx: Context = serde_json::from_slice(&body).expect("context");
    assert_eq!(
        ctx,
        Context::default(),
        "another tenant's workspace is empty to it"
    );
    let (_, _, body) = raw(server, &b, "GET", "/v1/workspaces/mine/files", &[], None).await;
    assert_eq!(json(&body)["files"], Value::Array(vec![]));
}

async fn all(server: &Server) {
    table(server).await;
    files_behave(server).await;
    concurrent_appends(server).await;
}

/// A token of a new tenant `tenant` on a local server.
fn add_tenant(server: &Server, tenant: &str) -> String {
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "add", tenant, "--data"])
        .arg(&server.data)
        .output()
        .expect("ctx tokens add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

/// Runs `ctx` as the tenant of `token`: (exit code, stdout, stderr).
fn cli_as(server: &Server, token: &str, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(args)
        .env("CTX_SERVER", &server.url)
        .env("CTX_TOKEN", token)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("ctx runs");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// For every case, in a tenant of its own: `ctx workspace push` then `ctx
/// read-context WS --json` prints exactly what `ctx read-context --dir
/// --tastes --json` prints; a second push writes nothing; cat, ls and log
/// show what was pushed.
fn cli_server_and_dir_agree(server: &Server) {
    for (i, case) in cases().into_iter().enumerate() {
        let token = add_tenant(server, &format!("cli-{i}"));
        let dir = tempfile::tempdir().expect("tempdir");
        let (w, t) = (dir.path().join("ws"), dir.path().join("tastes"));
        std::fs::create_dir_all(&w).expect("mkdir");
        std::fs::create_dir_all(&t).expect("mkdir");
        write_dirs(&case, &w, &t);
        let (ws_dir, tastes_dir) = (w.to_str().expect("utf-8"), t.to_str().expect("utf-8"));
        let push = [
            "workspace",
            "push",
            ws_dir,
            "--workspace",
            "img",
            "--tastes",
            tastes_dir,
            "--json",
        ];
        let (code, out, err) = cli_as(server, &token, &push);
        assert_eq!(code, 0, "push {}: {err}", case.name);
        let files = case.ops.iter().map(|op| match op {
            Op::Put { tastes, path, .. } => (*tastes, *path),
            Op::Append { path, .. } => (false, *path),
        });
        let distinct: std::collections::BTreeSet<_> = files.collect();
        assert_eq!(
            json(&out)["written"].as_array().map(Vec::len),
            Some(distinct.len()),
            "{}",
            case.name
        );
        let (code, again, _) = cli_as(server, &token, &push);
        assert_eq!(code, 0);
        assert_eq!(
            json(&again)["written"],
            Value::Array(vec![]),
            "{}: a second push writes nothing",
            case.name
        );
        let (code, from_server, err) = cli_as(server, &token, &["read-context", "img", "--json"]);
        assert_eq!(code, 0, "{err}");
        let (code, from_dir, err) = cli_as(
            server,
            "no-server-needed",
            &[
                "read-context",
                "--dir",
                ws_dir,
                "--tastes",
                tastes_dir,
                "--json",
            ],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            String::from_utf8_lossy(&from_server),
            String::from_utf8_lossy(&from_dir),
            "case {}",
            case.name
        );
        // The text form has every part, in order.
        let (code, text, _) = cli_as(server, &token, &["read-context", "img"]);
        assert_eq!(code, 0);
        let text = String::from_utf8(text).expect("utf-8");
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(
            at("== tastes: default ==") < at("== brief")
                && at("== brief") < at("== notes")
                && at("== notes") < at("== recent log")
                && at("== recent log") < at("== recent gaps")
        );
    }
    // cat, ls, log on the last case's workspace.
    let token = add_tenant(server, "cli-files");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.md"), "one\n").expect("write");
    let push = [
        "workspace",
        "push",
        dir.path().to_str().expect("utf-8"),
        "--workspace",
        "img",
    ];
    assert_eq!(cli_as(server, &token, &push).0, 0);
    std::fs::write(dir.path().join("notes.md"), "two\n").expect("write");
    assert_eq!(cli_as(server, &token, &push).0, 0);
    let (code, out, _) = cli_as(server, &token, &["workspace", "cat", "img", "notes.md"]);
    assert_eq!((code, out.as_slice()), (0, &b"two\n"[..]));
    let (code, out, _) = cli_as(server, &token, &["workspace", "ls", "img", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["files"][0]["path"], "notes.md");
    let (code, out, _) = cli_as(
        server,
        &token,
        &["workspace", "log", "img", "notes.md", "--json"],
    );
    assert_eq!(code, 0);
    assert_eq!(
        json(&out)["commits"].as_array().map(Vec::len),
        Some(2),
        "both versions"
    );
    let (code, _, err) = cli_as(
        server,
        &token,
        &["workspace", "cat", "img", "../etc/passwd"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[path]"), "{err}");
    let (code, _, _) = cli_as(server, &token, &["workspace", "cat", "img", "missing.md"]);
    assert_eq!(code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_on_the_embedded_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    all(&server).await;
    other_tenant_sees_404(&server).await;
    cli_server_and_dir_agree(&server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_on_the_memory_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    all(&Server::start_with(dir.path(), &["--store", "memory"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_on_the_aws_backends() {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(server) = Server::start_aws(dir.path()) {
        all(&server).await;
    }
}

/// The Python `mcp` package's stdio client calls `ctx mcp`'s read_context:
/// the tool's result is the server's context for that workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_calls_read_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let case = cases()
        .into_iter()
        .find(|c| c.name == "populated")
        .expect("case");
    apply(&server, "img-mcp", &case).await;
    let Some(v) = server.mcp_client("read_context.py", &[], &[("WORKSPACE", "img-mcp")]) else {
        return;
    };
    assert_eq!(v["required"], serde_json::json!(["image_id"]));
    let ctx: Context = serde_json::from_value(v["context"].clone()).expect("a context");
    assert_eq!(ctx, dir_context(&case).await);
    assert_eq!(ctx.brief.tastes, vec!["underwater", "wildlife"]);
    let fresh: Context = serde_json::from_value(v["fresh"].clone()).expect("a context");
    // A fresh workspace still has the tenant's tastes, and nothing else.
    assert_eq!(
        (fresh.brief, fresh.notes, fresh.recent_log.len()),
        (Default::default(), Default::default(), 0)
    );
    assert_eq!(v["bad_is_error"], true);
    assert!(
        v["bad_text"].as_str().expect("text").starts_with("invalid"),
        "{v}"
    );
}
