//! Agents' live context against a real `ctx serve`, in each mode (SQLite +
//! files, memory, and the aws backends on the emulator when expected):
//! settings and their bad input, the window per thread, save / history /
//! session file / restore after a clear, the working-context cache (bad
//! snapshots refused by field, a valid one restored from the cache, a
//! refresh at turn ends), another tenant's agent as absent, and the CLI's
//! `ctx context` / `ctx agent` commands.

use ctx_tests::{Http, Server};
use serde_json::{Value, json};

/// The checkpoint of one user message in `thread` of `agent`.
fn message_body(agent: &str, thread: &str, text: &str) -> Value {
    json!({
        "commit_type": "delta",
        "format": "openai-chat-v1",
        "delta": json!([{ "role": "user", "content": text }]).to_string(),
        "template": "tpl",
        "principal": agent,
        "checkpoint": "turn_boundary",
        "thread_id": thread,
    })
}

async fn say(c: &Http, agent: &str, thread: &str, parent: Option<&str>, text: &str) -> String {
    let mut body = message_body(agent, thread, text);
    if let Some(p) = parent {
        body["parent"] = json!(p);
    }
    let v = c.ok("POST", "/v1/commits", Some(&body)).await;
    v["id"].as_str().expect("id").to_owned()
}

async fn window_texts(c: &Http, agent: &str, query: &str) -> Vec<String> {
    let w = c
        .ok("GET", &format!("/v1/agents/{agent}/window{query}"), None)
        .await;
    let Some(art) = w["artifact_ref"].as_str() else {
        return Vec::new();
    };
    let bytes = c.bytes(&format!("/v1/artifacts/{art}")).await;
    let v: Value = serde_json::from_slice(&bytes).expect("json messages");
    v.as_array()
        .expect("array")
        .iter()
        .map(|m| m["content"].as_str().expect("text").to_owned())
        .collect()
}

async fn all(server: &Server) {
    let c = server.client();
    let a = "agent-e2e";
    // Settings: defaults, bad input by field, a change.
    let s = c.ok("GET", &format!("/v1/agents/{a}"), None).await;
    assert_eq!(s["window_seconds"], 86_400);
    assert_eq!(s["persist_working_context"], false);
    for bad in [json!(0), json!(-1), json!(400_000_000_i64)] {
        let (status, e) = c
            .call(
                "PATCH",
                &format!("/v1/agents/{a}"),
                Some(&json!({ "window_seconds": bad })),
            )
            .await
            .expect("sent");
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["field"], "window_seconds");
    }
    let s = c
        .ok(
            "PATCH",
            &format!("/v1/agents/{a}"),
            Some(&json!({ "window_seconds": 3600, "persist_working_context": true })),
        )
        .await;
    assert_eq!(
        (
            s["window_seconds"].clone(),
            s["persist_working_context"].clone()
        ),
        (json!(3600), json!(true))
    );
    // Bodies of only optional fields may be absent or null, never an array.
    for (method, path) in [
        ("PATCH", format!("/v1/agents/{a}")),
        ("POST", format!("/v1/agents/{a}/working-context/restore")),
        ("PUT", format!("/v1/agents/{a}/working-context")),
    ] {
        let (status, e) = c
            .call(method, &path, Some(&json!([null, null])))
            .await
            .expect("sent");
        assert_eq!(
            (status, e["error"]["field"].clone()),
            (400, json!("body")),
            "{method} {path}"
        );
    }
    let (status, _) = c
        .call("PATCH", &format!("/v1/agents/{a}"), Some(&Value::Null))
        .await
        .expect("sent");
    assert_eq!(status, 200);
    // A fresh agent: empty window, empty history, a rebuilt empty context.
    let w = c.ok("GET", &format!("/v1/agents/{a}/window"), None).await;
    assert_eq!(w["commits"], json!([]));
    assert_eq!(w["artifact_ref"], Value::Null);
    let h = c.ok("GET", &format!("/v1/agents/{a}/saves"), None).await;
    assert_eq!(h["saves"], json!([]));
    let r = c
        .ok(
            "POST",
            &format!("/v1/agents/{a}/working-context/restore"),
            Some(&json!({})),
        )
        .await;
    assert_eq!(r["source"], "rebuilt");
    assert_eq!(r["snapshot"]["messages"], json!([]));

    // Two threads.
    let one = say(&c, a, "t1", None, "one").await;
    say(&c, a, "t2", Some(&one), "two").await;
    assert_eq!(window_texts(&c, a, "").await, ["one", "two"]);
    assert_eq!(window_texts(&c, a, "?thread_id=t2").await, ["two"]);
    let w = c
        .ok(
            "GET",
            &format!("/v1/agents/{a}/window?format=anthropic-messages-v1"),
            None,
        )
        .await;
    assert_eq!(w["format"], "anthropic-messages-v1");
    assert_eq!(w["message_count"], 2);
    let (status, e) = c
        .call(
            "GET",
            &format!("/v1/agents/{a}/window?format=NOT%20A%20FORMAT"),
            None,
        )
        .await
        .expect("sent");
    assert_eq!(
        (status, e["error"]["field"].clone()),
        (400, json!("format"))
    );

    // The cache was refreshed at those turn ends.
    let r = c
        .ok(
            "POST",
            &format!("/v1/agents/{a}/working-context/restore"),
            Some(&json!({})),
        )
        .await;
    assert_eq!(r["source"], "cache", "{r}");
    let texts: Vec<&str> = r["snapshot"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(texts, ["one", "two"]);

    // Save, history, session file.
    let (status, save) = c
        .call(
            "POST",
            &format!("/v1/agents/{a}/saves"),
            Some(&json!({ "description": "e2e" })),
        )
        .await
        .expect("sent");
    assert_eq!(status, 201, "{save}");
    let id = save["save_id"].as_str().expect("save_id").to_owned();
    assert_eq!(save["message_count"], 2);
    assert!(!save["summary"].as_str().expect("summary").is_empty());
    let h = c.ok("GET", &format!("/v1/agents/{a}/saves"), None).await;
    assert_eq!(h["saves"], json!([save]));
    let file = c
        .ok("GET", &format!("/v1/agents/{a}/saves/{id}"), None)
        .await;
    assert_eq!(file["session_id"], json!(id));
    assert_eq!(file["messages"].as_array().expect("messages").len(), 2);
    let unknown = format!("sav-{}", "0".repeat(32));
    for path in [
        format!("/v1/agents/{a}/saves/{unknown}"),
        format!("/v1/agents/other-agent/saves/{id}"),
    ] {
        let (status, _) = c.call("GET", &path, None).await.expect("sent");
        assert_eq!(status, 404, "{path}");
    }
    let (status, _) = c
        .call(
            "POST",
            &format!("/v1/agents/{a}/saves/{unknown}/restore"),
            None,
        )
        .await
        .expect("sent");
    assert_eq!(status, 404);
    let (status, e) = c
        .call("GET", &format!("/v1/agents/{a}/saves/not-a-save"), None)
        .await
        .expect("sent");
    assert_eq!(
        (status, e["error"]["field"].clone()),
        (400, json!("save_id"))
    );

    // Clear, then restore the save into the window.
    let cleared = c.ok("POST", &format!("/v1/agents/{a}/clear"), None).await;
    assert!(cleared["last_clear"].is_string());
    assert!(window_texts(&c, a, "").await.is_empty());
    let w = c.ok("GET", &format!("/v1/agents/{a}/window"), None).await;
    assert_eq!(w["reason"], "clear");
    let restored = c
        .ok("POST", &format!("/v1/agents/{a}/saves/{id}/restore"), None)
        .await;
    assert_eq!(restored["commits"].as_array().expect("commits").len(), 2);
    assert_eq!(restored["commits"][0]["tags"]["restored_from"], json!(id));
    let mut texts = window_texts(&c, a, "").await;
    texts.sort();
    assert_eq!(texts, ["one", "two"]);

    // The working-context cache: bad snapshots by field, then a valid one.
    let good = json!({
        "schema_version": 1, "agent_id": a, "epoch_id": 9, "last_compaction_ts": 1738100000.0,
        "messages": [
            {"role": "system", "content": "You are careful."},
            {"role": "assistant", "content": "ok", "reasoning_content": "think",
             "tool_payload": {"tool_calls": []}, "media_urls": ["https://example.invalid/x.png"]}
        ]
    });
    for (patch, field) in [
        (json!({"schema_version": 2}), "schema_version"),
        (json!({"agent_id": "someone-else"}), "agent_id"),
        (
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}),
            "messages[0].content",
        ),
    ] {
        let mut body = good.clone();
        for (k, v) in patch.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (status, e) = c
            .call(
                "PUT",
                &format!("/v1/agents/{a}/working-context"),
                Some(&body),
            )
            .await
            .expect("sent");
        assert_eq!(status, 400, "{field}: {e}");
        assert_eq!(e["error"]["field"], field, "{e}");
    }
    let stored = c
        .ok(
            "PUT",
            &format!("/v1/agents/{a}/working-context"),
            Some(&good),
        )
        .await;
    assert_eq!(stored["epoch_id"], 9);
    let r = c
        .ok(
            "POST",
            &format!("/v1/agents/{a}/working-context/restore"),
            Some(&json!({})),
        )
        .await;
    assert_eq!(r["source"], "cache");
    assert_eq!(r["snapshot"], good);
    let (status, e) = c
        .call(
            "POST",
            &format!("/v1/agents/{a}/working-context/restore"),
            Some(&json!({"raw_tail_turns": 1_000_000})),
        )
        .await
        .expect("sent");
    assert_eq!(
        (status, e["error"]["field"].clone()),
        (400, json!("raw_tail_turns"))
    );
}

/// Another tenant asking for this agent sees it as absent.
async fn other_tenant_sees_nothing(server: &Server) {
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "add", "team-agents-b", "--data"])
        .arg(&server.data)
        .output()
        .expect("ctx tokens add");
    assert!(out.status.success());
    let b = server.client_as(String::from_utf8(out.stdout).expect("utf-8").trim());
    let a = "agent-e2e";
    let mine = server
        .client()
        .ok("GET", &format!("/v1/agents/{a}/saves"), None)
        .await;
    let id = mine["saves"][0]["save_id"]
        .as_str()
        .expect("a save")
        .to_owned();
    let (status, _) = b
        .call("GET", &format!("/v1/agents/{a}/saves/{id}"), None)
        .await
        .expect("sent");
    assert_eq!(status, 404);
    let (status, _) = b
        .call("POST", &format!("/v1/agents/{a}/saves/{id}/restore"), None)
        .await
        .expect("sent");
    assert_eq!(status, 404);
    let h = b.ok("GET", &format!("/v1/agents/{a}/saves"), None).await;
    assert_eq!(h["saves"], json!([]));
    let w = b.ok("GET", &format!("/v1/agents/{a}/window"), None).await;
    assert_eq!(w["commits"], json!([]));
    let s = b.ok("GET", &format!("/v1/agents/{a}"), None).await;
    assert_eq!(
        (s["window_seconds"].clone(), s["last_clear"].clone()),
        (json!(86_400), Value::Null)
    );
}

/// The CLI mirrors the routes: `ctx context …` and `ctx agent …`.
fn cli(server: &Server) {
    let a = "agent-cli";
    let run = |args: &[&str]| -> Value {
        let (code, out) = server.cli(args);
        assert_eq!(code, 0, "ctx {args:?}");
        serde_json::from_slice(&out).unwrap_or_else(|_| {
            panic!(
                "ctx {args:?} prints JSON: {}",
                String::from_utf8_lossy(&out)
            )
        })
    };
    let s = run(&["agent", "set", a, "--window-seconds", "7200"]);
    assert_eq!(s["window_seconds"], 7200);
    assert_eq!(run(&["agent", "show", a])["window_seconds"], 7200);
    let (code, _) = server.cli(&["agent", "set", a, "--window-seconds", "0"]);
    assert_eq!(code, 2, "bad input exits 2");
    let delta = server.data.join("agent-cli-delta.txt");
    std::fs::write(&delta, "hello from the cli\n").expect("write the delta");
    let (code, _) = server.cli(&[
        "checkpoint",
        delta.to_str().expect("utf-8 path"),
        "--principal",
        a,
        "--thread",
        "t",
        "--trigger",
        "turn_boundary",
    ]);
    assert_eq!(code, 0);
    let w = run(&["context", "window", "--agent", a]);
    assert_eq!(w["commits"].as_array().expect("commits").len(), 1);
    let w = run(&["context", "window", "--agent", a, "--thread", "elsewhere"]);
    assert_eq!(w["commits"], json!([]));
    let save = run(&[
        "context",
        "save",
        "--agent",
        a,
        "--description",
        "from the cli",
    ]);
    let id = save["save_id"].as_str().expect("save_id").to_owned();
    let h = run(&["context", "history", "--agent", a]);
    assert_eq!(h["saves"][0]["save_id"], json!(id));
    let cleared = run(&["context", "clear", "--agent", a]);
    assert!(cleared["last_clear"].is_string());
    assert_eq!(
        run(&["context", "window", "--agent", a])["commits"],
        json!([])
    );
    let restored = run(&["context", "restore", "--agent", a, &id]);
    assert_eq!(restored["commits"].as_array().expect("commits").len(), 1);
    assert_eq!(
        run(&["context", "window", "--agent", a])["commits"]
            .as_array()
            .expect("commits")
            .len(),
        1
    );
    let r = run(&["agent", "restore", a]);
    assert_eq!(r["source"], "rebuilt");
    let (code, _) = server.cli(&[
        "context",
        "restore",
        "--agent",
        a,
        &format!("sav-{}", "0".repeat(32)),
    ]);
    assert_eq!(code, 3, "not found exits 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_the_embedded_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    all(&server).await;
    other_tenant_sees_nothing(&server).await;
    other_tenant_sees_no_assembly(&server).await;
    cli(&server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_the_memory_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    all(&Server::start_with(dir.path(), &["--store", "memory"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_the_aws_backends() {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(server) = Server::start_aws(dir.path()) {
        all(&server).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_and_settings_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = "agent-restart";
    let (cleared, save) = {
        let server = Server::start(dir.path());
        let c = server.client();
        say(&c, a, "t", None, "before").await;
        let cleared = c.ok("POST", &format!("/v1/agents/{a}/clear"), None).await;
        say(&c, a, "t", None, "after").await;
        c.ok(
            "PATCH",
            &format!("/v1/agents/{a}"),
            Some(&json!({"window_seconds": 600})),
        )
        .await;
        let save = c
            .ok("POST", &format!("/v1/agents/{a}/saves"), Some(&json!({})))
            .await;
        server.kill();
        (cleared, save)
    };
    let server = Server::start(dir.path());
    let c = server.client();
    let s = c.ok("GET", &format!("/v1/agents/{a}"), None).await;
    assert_eq!(s["last_clear"], cleared["last_clear"]);
    assert_eq!(s["window_seconds"], 600);
    assert_eq!(window_texts(&c, a, "").await, ["after"]);
    let h = c.ok("GET", &format!("/v1/agents/{a}/saves"), None).await;
    assert_eq!(h["saves"], json!([save]));
}

/// The Python `mcp` package's stdio client calls `ctx mcp`'s six agent
/// context tools against a real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_manages_an_agents_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let c = server.client();
    let a = "agent-mcp";
    let one = say(&c, a, "t1", None, "one").await;
    say(&c, a, "t2", Some(&one), "two").await;
    let Some(v) = server.mcp_client("agent_context.py", &[], &[("AGENT", a)]) else {
        return;
    };
    for tool in [
        "context_assemble",
        "context_clear",
        "context_history",
        "context_restore",
        "context_save",
        "context_window",
        "working_context_restore",
    ] {
        assert!(
            v["tools"].as_array().expect("tools").contains(&json!(tool)),
            "{tool} listed"
        );
    }
    assert_eq!(v["window"]["message_count"], 2);
    assert_eq!(v["thread"]["message_count"], 1);
    assert_eq!(v["save"]["description"], "via mcp");
    assert_eq!(v["history"]["saves"][0]["save_id"], v["save"]["save_id"]);
    assert_eq!(v["cleared_window"]["commits"], json!([]));
    assert_eq!(
        v["restore"]["commits"].as_array().expect("commits").len(),
        2
    );
    assert_eq!(v["restored_window"]["message_count"], 2);
    assert_eq!(v["working"]["source"], "rebuilt");
    assert_eq!(
        v["working"]["snapshot"]["messages"][0]["content"],
        "You are tested."
    );
    // The assembled context of thread t1: the other thread in the status
    // preamble, then t1's window (its message restored after the clear).
    let asm = &v["assembled"];
    assert_eq!(asm["thread_id"], "t1");
    assert_eq!(asm["status"]["threads"][0]["thread_id"], "t2", "{asm}");
    assert_eq!(asm["window"]["message_count"], 1);
    assert_eq!(asm["conversation"]["message_count"], 2);
    assert_eq!(v["no_thread_is_error"], true);
    assert_eq!(v["bad_is_error"], true);
    assert!(
        v["bad_text"].as_str().expect("text").contains("save id"),
        "{v}"
    );
}

// Context assembly for an LLM call (seed 001): system prompt, docs, thread
// and process status, then the thread's rolling window. Each seed test is
// a scenario run on both hosts: the embedded store and the aws backends.

/// A message in `thread` of `agent` at `created_at` (RFC 3339), in
/// `session` when given.
async fn say_at(
    c: &Http,
    agent: &str,
    thread: &str,
    text: &str,
    created_at: Option<&str>,
    session: Option<&str>,
) -> Value {
    let mut body = message_body(agent, thread, text);
    if let Some(t) = created_at {
        body["created_at"] = json!(t);
    }
    if let Some(s) = session {
        body["session_id"] = json!(s);
    }
    c.ok("POST", "/v1/commits", Some(&body)).await
}

async fn assemble(c: &Http, agent: &str, query: &str) -> Value {
    c.ok("GET", &format!("/v1/agents/{agent}/context?{query}"), None)
        .await
}

/// The assembled conversation as (role, text) pairs (openai-chat-v1).
fn conversation(v: &Value) -> Vec<(String, String)> {
    assert_eq!(v["conversation"]["format"], "openai-chat-v1", "{v}");
    let msgs: Value = serde_json::from_str(
        v["conversation"]["text"]
            .as_str()
            .expect("UTF-8 conversation"),
    )
    .expect("a JSON conversation");
    msgs.as_array()
        .expect("an array")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().expect("role").to_owned(),
                m["content"].as_str().expect("text content").to_owned(),
            )
        })
        .collect()
}

async fn put_doc(server: &Server, ws: &str, path: &str, bytes: Vec<u8>) {
    let resp = reqwest::Client::new()
        .put(format!("{}/v1/workspaces/{ws}/files/{path}", server.url))
        .bearer_auth(&server.token)
        .body(bytes)
        .send()
        .await
        .expect("sent");
    assert_eq!(resp.status().as_u16(), 200, "PUT {ws}/{path}");
}

async fn bad(c: &Http, method: &str, path: &str, body: Option<&Value>, field: &str) {
    let (status, e) = c.call(method, path, body).await.expect("sent");
    assert_eq!(
        (status, e["error"]["field"].clone()),
        (400, json!(field)),
        "{method} {path}: {e}"
    );
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Seed step 1: the agent's system prompt (a setting) opens the context as a system
/// message; cleared, it is gone; bad prompts are refused by field with
/// nothing written.
async fn test_context_includes_system_prompt(server: &Server) {
    let c = server.client();
    let a = "agent-asm-prompt";
    say_at(&c, a, "t", "hello", None, None).await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["system_prompt"], Value::Null);
    assert_eq!(conversation(&v), [("user".into(), "hello".into())]);
    let prompt = "You are the release agent.\nShip nothing on Fridays.";
    let s = c
        .ok(
            "PATCH",
            &format!("/v1/agents/{a}"),
            Some(&json!({ "system_prompt": prompt })),
        )
        .await;
    assert_eq!(s["system_prompt"], prompt);
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["system_prompt"], prompt);
    assert_eq!(
        conversation(&v),
        [
            ("system".into(), prompt.into()),
            ("user".into(), "hello".into())
        ]
    );
    assert_eq!(v["conversation"]["message_count"], 2);
    // In a format whose system prompt is not a message, it still leads.
    let v = assemble(&c, a, "thread_id=t&format=anthropic-messages-v1").await;
    let text = v["conversation"]["text"].as_str().expect("text");
    assert!(
        text.find("release agent").expect("the prompt") < text.find("hello").expect("the window"),
        "{text}"
    );
    // Bad prompts name the field and change nothing.
    for p in ["x".repeat(65_537), "bell\u{7}".to_owned()] {
        bad(
            &c,
            "PATCH",
            &format!("/v1/agents/{a}"),
            Some(&json!({ "system_prompt": p })),
            "system_prompt",
        )
        .await;
    }
    assert_eq!(
        assemble(&c, a, "thread_id=t").await["system_prompt"],
        prompt
    );
    // Empty clears it.
    c.ok(
        "PATCH",
        &format!("/v1/agents/{a}"),
        Some(&json!({ "system_prompt": "" })),
    )
    .await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["system_prompt"], Value::Null);
    assert_eq!(conversation(&v), [("user".into(), "hello".into())]);
    // The thread is required and checked; the format must be known.
    bad(
        &c,
        "GET",
        &format!("/v1/agents/{a}/context"),
        None,
        "thread_id",
    )
    .await;
    bad(
        &c,
        "GET",
        &format!("/v1/agents/{a}/context?thread_id=%01"),
        None,
        "thread_id",
    )
    .await;
    bad(
        &c,
        "GET",
        &format!("/v1/agents/{a}/context?thread_id=t&format=no-such-format"),
        None,
        "format",
    )
    .await;
}

/// Seed step 2: the files of the agent's docs workspace follow the system prompt,
/// by path; a long file is cut and one that is not text left out, and
/// both are said.
async fn test_context_includes_agent_docs(server: &Server) {
    let c = server.client();
    let a = "agent-asm-docs";
    put_doc(server, "asm-docs", "guide.md", b"Deploy with ctx.".to_vec()).await;
    put_doc(
        server,
        "asm-docs",
        "api/notes.md",
        b"Routes are v1.".to_vec(),
    )
    .await;
    say_at(&c, a, "t", "what now?", None, None).await;
    bad(
        &c,
        "PATCH",
        &format!("/v1/agents/{a}"),
        Some(&json!({ "docs_workspace": "../up" })),
        "docs_workspace",
    )
    .await;
    let s = c
        .ok(
            "PATCH",
            &format!("/v1/agents/{a}"),
            Some(&json!({ "docs_workspace": "asm-docs", "system_prompt": "Be exact." })),
        )
        .await;
    assert_eq!(s["docs_workspace"], "asm-docs");
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["docs"]["workspace"], "asm-docs");
    let files: Vec<(&str, &str)> = v["docs"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        files,
        [
            ("api/notes.md", "Routes are v1."),
            ("guide.md", "Deploy with ctx.")
        ]
    );
    assert_eq!(v["docs"]["truncated"], false);
    let conv = conversation(&v);
    assert_eq!(conv[0], ("system".into(), "Be exact.".into()));
    assert_eq!(conv[1].0, "system");
    assert!(
        conv[1].1.starts_with("Agent docs (workspace asm-docs):"),
        "{}",
        conv[1].1
    );
    let (notes, guide) = (
        conv[1].1.find("Routes are v1.").expect("notes"),
        conv[1].1.find("Deploy with ctx.").expect("guide"),
    );
    assert!(notes < guide);
    assert_eq!(conv[2], ("user".into(), "what now?".into()));
    // Bounded: a long file is cut at 32 KiB, bytes that are not text are
    // left out, and the answer says so.
    let long = "0123456789abcdef".repeat(3 * 1024);
    put_doc(server, "asm-docs", "long.md", long.clone().into_bytes()).await;
    put_doc(server, "asm-docs", "logo.bin", vec![0xff, 0xfe, 0x00, 0x80]).await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["docs"]["truncated"], true);
    let long_doc = v["docs"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "long.md")
        .expect("long.md")
        .clone();
    assert_eq!(long_doc["truncated"], true);
    assert_eq!(long_doc["size"], long.len());
    assert_eq!(long_doc["text"].as_str().unwrap(), &long[..32 * 1024]);
    assert_eq!(
        v["docs"]["omitted"],
        json!([{ "path": "logo.bin", "reason": "not UTF-8 text" }])
    );
    let docs_text = &conversation(&v)[1].1;
    assert!(
        docs_text.contains("[cut: the first 32768 of 49152 bytes]"),
        "{docs_text}"
    );
    assert!(docs_text.contains("[left out: logo.bin (not UTF-8 text)]"));
}

/// Seed step 3: the status preamble: the agent's other active threads with their
/// last activity, the active folded branches of its sessions with budget
/// used, and the processes registered as running; registration's bad
/// input is refused by field.
async fn test_context_includes_thread_status(server: &Server) {
    let c = server.client();
    let a = "agent-asm-status";
    let now = ctx_core::Clock::now(&ctx_core::clock::SystemClock);
    let t2 = rfc3339(now - chrono::Duration::minutes(30));
    let t3 = rfc3339(now - chrono::Duration::minutes(10));
    say_at(&c, a, "mine", "the current thread", None, Some("asm-sess")).await;
    say_at(&c, a, "t2", "older work", Some(&t2), None).await;
    say_at(&c, a, "t3", "newer work", Some(&t3), None).await;
    let v = assemble(&c, a, "thread_id=mine").await;
    let threads: Vec<(&str, &str)> = v["status"]["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            (
                t["thread_id"].as_str().unwrap(),
                t["last_activity"].as_str().unwrap(),
            )
        })
        .collect();
    let same_time = |a: &str, b: &str| {
        chrono::DateTime::parse_from_rfc3339(a).unwrap()
            == chrono::DateTime::parse_from_rfc3339(b).unwrap()
    };
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert_eq!(
        (threads[0].0, threads[1].0),
        ("t3", "t2"),
        "most recent first"
    );
    assert!(same_time(threads[0].1, &t3) && same_time(threads[1].1, &t2));
    assert_eq!(v["status"]["branches"], json!([]));
    assert_eq!(v["status"]["processes"], json!([]));
    // A folded branch of the agent's session, and two processes.
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": "asm-sess", "description": "look up the API", "budget": 5000})),
        )
        .await;
    let br = b["branch_id"].as_str().expect("branch_id").to_owned();
    let p = c
        .ok(
            "PUT",
            &format!("/v1/agents/{a}/processes/build-1"),
            Some(&json!({"description": "cargo build --release", "thread_id": "mine"})),
        )
        .await;
    assert_eq!(p["process_id"], "build-1");
    let started = rfc3339(now - chrono::Duration::minutes(5));
    c.ok(
        "PUT",
        &format!("/v1/agents/{a}/processes/deploy:eu"),
        Some(
            &json!({"description": "deploying eu-west", "started_at": started,
            "expires_at": rfc3339(now + chrono::Duration::hours(1))}),
        ),
    )
    .await;
    let v = assemble(&c, a, "thread_id=mine").await;
    let s = &v["status"];
    assert_eq!(s["branches"].as_array().expect("branches").len(), 1, "{s}");
    assert_eq!(s["branches"][0]["branch_id"], json!(br));
    assert_eq!(s["branches"][0]["budget"], 5000);
    assert_eq!(s["branches"][0]["tokens_used"], 0);
    let procs: Vec<&str> = s["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["process_id"].as_str().unwrap())
        .collect();
    assert_eq!(procs, ["build-1", "deploy:eu"]);
    let text = s["text"].as_str().expect("status text");
    for needle in [
        "Other active threads:",
        "- t3: last activity",
        "- t2: last activity",
        &br,
        "0 of 5000 tokens used",
        "Running processes:",
        "build-1: cargo build --release",
        "deploy:eu: deploying eu-west",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    let conv = conversation(&v);
    assert_eq!(conv[0], ("system".into(), text.into()));
    assert_eq!(conv[1], ("user".into(), "the current thread".into()));
    // The listing and removal of processes.
    let l = c
        .ok("GET", &format!("/v1/agents/{a}/processes"), None)
        .await;
    assert_eq!(l["processes"].as_array().expect("list").len(), 2);
    let (status, _) = c
        .call("DELETE", &format!("/v1/agents/{a}/processes/build-1"), None)
        .await
        .expect("sent");
    assert_eq!(status, 204);
    let (status, e) = c
        .call("DELETE", &format!("/v1/agents/{a}/processes/build-1"), None)
        .await
        .expect("sent");
    assert_eq!(status, 404, "{e}");
    let v = assemble(&c, a, "thread_id=mine").await;
    assert_eq!(v["status"]["processes"][0]["process_id"], "deploy:eu");
    assert_eq!(v["status"]["processes"].as_array().unwrap().len(), 1);
    // Bad registrations name the field and write nothing.
    let path = format!("/v1/agents/{a}/processes/p");
    bad(
        &c,
        "PUT",
        &format!("/v1/agents/{a}/processes/bad%20id"),
        Some(&json!({"description": "x"})),
        "process_id",
    )
    .await;
    bad(
        &c,
        "PUT",
        &path,
        Some(&json!({"description": ""})),
        "description",
    )
    .await;
    bad(
        &c,
        "PUT",
        &path,
        Some(&json!({"description": "x".repeat(1025)})),
        "description",
    )
    .await;
    bad(
        &c,
        "PUT",
        &path,
        Some(&json!({"description": "x", "thread_id": ""})),
        "thread_id",
    )
    .await;
    bad(
        &c,
        "PUT",
        &path,
        Some(
            &json!({"description": "x", "expires_at": rfc3339(now - chrono::Duration::minutes(1))}),
        ),
        "expires_at",
    )
    .await;
    bad(&c, "PUT", &path, Some(&json!(["x"])), "body").await;
    let l = c
        .ok("GET", &format!("/v1/agents/{a}/processes"), None)
        .await;
    assert_eq!(l["processes"].as_array().expect("list").len(), 1);
}

/// Seed step 4: the thread's rolling window ends the context: this thread's
/// messages, oldest first, after the preamble; another thread's are not
/// in it.
async fn test_context_includes_rolling_window_messages(server: &Server) {
    let c = server.client();
    let a = "agent-asm-window";
    for m in ["first", "second", "third"] {
        say_at(&c, a, "t", m, None, None).await;
    }
    say_at(&c, a, "other", "elsewhere", None, None).await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["window"]["commits"].as_array().expect("commits").len(), 3);
    assert_eq!(v["window"]["message_count"], 3);
    let conv = conversation(&v);
    assert_eq!(conv.len(), 4, "{conv:?}");
    assert_eq!(conv[0].0, "system");
    assert!(
        conv[0].1.contains("- other: last activity"),
        "{}",
        conv[0].1
    );
    let tail: Vec<&str> = conv[1..].iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(tail, ["first", "second", "third"]);
    assert!(
        !v["conversation"]["text"]
            .as_str()
            .unwrap()
            .contains("\"elsewhere\"")
    );
    // In another format, and the thread of the other messages.
    let v = assemble(&c, a, "thread_id=t&format=anthropic-messages-v1").await;
    assert_eq!(v["conversation"]["format"], "anthropic-messages-v1");
    let msgs: Value = serde_json::from_str(v["conversation"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(msgs.as_array().unwrap().len(), 4);
    let v = assemble(&c, a, "thread_id=other").await;
    let conv = conversation(&v);
    assert_eq!(conv.last().unwrap().1, "elsewhere");
    assert!(conv[0].1.contains("- t: last activity"));
    // A thread with no messages yet: the preamble alone.
    let v = assemble(&c, a, "thread_id=new").await;
    assert_eq!(v["window"]["commits"], json!([]));
    assert!(conversation(&v).iter().all(|(r, _)| r == "system"));
}

/// Seed step 5: the window starts at max(last clear, now - window_seconds): a
/// message older than the window is not in the context, nor one from
/// before a clear; neither is deleted.
async fn test_context_window_bounded_by_clear_time_or_rolling_window(server: &Server) {
    let c = server.client();
    let a = "agent-asm-bounds";
    c.ok(
        "PATCH",
        &format!("/v1/agents/{a}"),
        Some(&json!({ "window_seconds": 3600 })),
    )
    .await;
    let now = ctx_core::Clock::now(&ctx_core::clock::SystemClock);
    let old = say_at(
        &c,
        a,
        "t",
        "two hours ago",
        Some(&rfc3339(now - chrono::Duration::hours(2))),
        None,
    )
    .await;
    say_at(
        &c,
        a,
        "t",
        "ten minutes ago",
        Some(&rfc3339(now - chrono::Duration::minutes(10))),
        None,
    )
    .await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["window"]["reason"], "window");
    let texts: Vec<String> = conversation(&v).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts, ["ten minutes ago"]);
    c.ok("POST", &format!("/v1/agents/{a}/clear"), None).await;
    say_at(&c, a, "t", "after the clear", None, None).await;
    let v = assemble(&c, a, "thread_id=t").await;
    assert_eq!(v["window"]["reason"], "clear");
    let texts: Vec<String> = conversation(&v).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts, ["after the clear"]);
    // Nothing was deleted.
    let id = old["id"].as_str().expect("id");
    c.ok("GET", &format!("/v1/commits/{id}"), None).await;
}

/// Another tenant asking for the agent's context sees none of it, and
/// cannot remove its processes.
async fn other_tenant_sees_no_assembly(server: &Server) {
    let a = "agent-asm-tenant";
    let c = server.client();
    say_at(&c, a, "t", "private", None, None).await;
    c.ok(
        "PATCH",
        &format!("/v1/agents/{a}"),
        Some(&json!({ "system_prompt": "secret prompt" })),
    )
    .await;
    c.ok(
        "PUT",
        &format!("/v1/agents/{a}/processes/p1"),
        Some(&json!({ "description": "secret job" })),
    )
    .await;
    let out = std::process::Command::new(ctx_tests::ctx_bin())
        .args(["tokens", "add", "team-asm-b", "--data"])
        .arg(&server.data)
        .output()
        .expect("ctx tokens add");
    assert!(out.status.success());
    let b = server.client_as(String::from_utf8(out.stdout).expect("utf-8").trim());
    let v = b
        .ok("GET", &format!("/v1/agents/{a}/context?thread_id=t"), None)
        .await;
    assert_eq!(v["system_prompt"], Value::Null);
    assert_eq!(v["window"]["commits"], json!([]));
    assert_eq!(v["status"]["processes"], json!([]));
    assert!(!v.to_string().contains("secret"), "{v}");
    let (status, _) = b
        .call("DELETE", &format!("/v1/agents/{a}/processes/p1"), None)
        .await
        .expect("sent");
    assert_eq!(status, 404);
    let l = c
        .ok("GET", &format!("/v1/agents/{a}/processes"), None)
        .await;
    assert_eq!(l["processes"].as_array().expect("list").len(), 1);
}

/// Each seed test as a test on the embedded store and one on the aws
/// backends (on the emulator when it is expected).
macro_rules! on_both_hosts {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().expect("tempdir");
                    super::$name(&ctx_tests::Server::start(dir.path())).await;
                }
            )*
        }
        mod aws {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().expect("tempdir");
                    if let Some(server) = ctx_tests::Server::start_aws(dir.path()) {
                        super::$name(&server).await;
                    }
                }
            )*
        }
    };
}

on_both_hosts!(
    test_context_includes_system_prompt,
    test_context_includes_agent_docs,
    test_context_includes_thread_status,
    test_context_includes_rolling_window_messages,
    test_context_window_bounded_by_clear_time_or_rolling_window,
);
