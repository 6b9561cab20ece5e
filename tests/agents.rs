//! Agents' live context against a real `ctx serve`, in each mode (SQLite +
//! files, memory, and the aws backends on the emulator when expected):
//! settings and their bad input, the window per thread, save / history /
//! session file / restore after a clear, the working-context cache (bad
//! snapshots refused by field, a valid one restored from the cache, a
//! refresh at turn ends), another tenant's agent as absent, and the CLI's
//! `ctx context` / `ctx agent` commands.

use ctx_tests::{Http, Server};
use serde_json::{Value, json};

async fn say(c: &Http, agent: &str, thread: &str, parent: Option<&str>, text: &str) -> String {
    let mut body = json!({
        "commit_type": "delta",
        "format": "openai-chat-v1",
        "delta": json!([{ "role": "user", "content": text }]).to_string(),
        "template": "tpl",
        "principal": agent,
        "checkpoint": "turn_boundary",
        "thread_id": thread,
    });
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
    assert_eq!(v["bad_is_error"], true);
    assert!(
        v["bad_text"].as_str().expect("text").contains("save id"),
        "{v}"
    );
}
