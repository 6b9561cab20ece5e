//! Formats end to end, through the real `ctx` binary against `ctx serve`:
//! a realistic Claude Code transcript (two compactions, parallel tool uses
//! with usage, a failed tool result, thinking with a signature, an image,
//! summary, file-history-snapshot, attachment and an unknown entry type) is
//! imported with `ctx import claude-code` and exported back byte-identical;
//! default materialization starts at the latest compaction; translation to
//! another runtime's format says its tier.

use ctx_tests::Server;
use serde_json::Value;

const TRANSCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/claude-code-session.jsonl"
);

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

/// Imports `TRANSCRIPT` as alice onto `sessions/parser`; returns the JSON
/// report.
fn import_transcript(server: &Server) -> Value {
    let (code, out) = server.cli(&[
        "import",
        "claude-code",
        TRANSCRIPT,
        "--principal",
        "alice",
        "--ref",
        "sessions/parser",
        "--json",
    ]);
    assert_eq!(code, 0);
    json(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_transcript_imports_and_exports_byte_identical() {
    let original = std::fs::read(TRANSCRIPT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    let report = import_transcript(&server);
    assert_eq!(
        (report["deltas"].as_u64(), report["compactions"].as_u64()),
        (Some(4), Some(2))
    );
    let tip = report["tip"].as_str().unwrap().to_owned();

    // Importing again writes nothing new: the same commits, the same tip.
    let (code, out) = server.cli(&[
        "import",
        "claude-code",
        TRANSCRIPT,
        "--principal",
        "alice",
        "--ref",
        "sessions/parser",
    ]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap().trim(), tip);

    // The whole transcript comes back byte for byte, by id and by ref.
    for rev in [tip.as_str(), "sessions/parser"] {
        let (code, out) = server.cli(&["export", rev, "--format", "claude-code-v1"]);
        assert_eq!(code, 0);
        assert!(
            out == original,
            "export of {rev} differs from the transcript"
        );
    }

    // One output rule for export and materialize: the content on stdout and
    // a line about it on stderr; with --json one object on stdout holding
    // both, nothing on stderr.
    let text = String::from_utf8(original.clone()).unwrap();
    for cmd in ["export", "materialize"] {
        let args = [cmd, "sessions/parser", "--stop", "root"];
        let out = server.cli_output(&args);
        assert_eq!(out.status.code(), Some(0), "{cmd}");
        assert!(out.stdout == original, "{cmd}: the content on stdout");
        let line = String::from_utf8(out.stderr).unwrap();
        assert!(
            line.starts_with("art-") && line.contains(" bytes, "),
            "{cmd}: the line about it on stderr: {line}"
        );
        let out = server.cli_output(&[&args[..], &["--json"]].concat());
        assert_eq!(out.status.code(), Some(0), "{cmd} --json");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "{cmd} --json: nothing on stderr"
        );
        let m = json(&out.stdout);
        assert_eq!(m["content"].as_str(), Some(text.as_str()), "{cmd} --json");
        assert_eq!(m["size"].as_u64(), Some(original.len() as u64));
        assert!(m["artifact_ref"].as_str().unwrap().starts_with("art-"));
        assert!(m.get("output").is_none());
        let path = dir.path().join(format!("{cmd}.jsonl"));
        let out =
            server.cli_output(&[&args[..], &["--json", "-o", path.to_str().unwrap()]].concat());
        assert_eq!(out.status.code(), Some(0), "{cmd} --json -o");
        let m = json(&out.stdout);
        assert_eq!(m["output"].as_str(), path.to_str());
        assert!(
            m.get("content").is_none(),
            "{cmd}: the content went to the file"
        );
        assert!(std::fs::read(&path).unwrap() == original);
    }

    // The chain: compaction commits at both boundaries, types in order.
    let http = server.client();
    let history = http
        .ok("GET", &format!("/v1/commits/{tip}/history?depth=10"), None)
        .await;
    let types: Vec<&str> = history["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "delta",
            "compaction",
            "delta",
            "compaction",
            "delta",
            "delta"
        ]
    );
    let first = &history["commits"][5];
    assert_eq!(first["session_id"], "5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10");
    assert_eq!(first["format"], "claude-code-v1");
    assert!(first["token_count"].as_u64().unwrap() > 0);

    // Default materialization starts at the latest compaction: its
    // compact_boundary line, the summary, then the last turn.
    let (code, out) = server.cli(&["materialize", &tip]);
    assert_eq!(code, 0);
    let start = {
        let text = std::str::from_utf8(&original).unwrap();
        text.rfind("{\"parentUuid\":null,\"isSidechain\":false,\"userType\":\"external\",\"cwd\":\"/home/dev/parser\",\"sessionId\":\"5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10\",\"version\":\"2.0.14\",\"gitBranch\":\"main\",\"type\":\"system\",\"subtype\":\"compact_boundary\"").unwrap()
    };
    assert_eq!(out, original[start..]);

    // Another runtime's format: translated through the canonical model.
    let path = dir.path().join("openai.json");
    // The whole history in `format`, written to `path`, with --json.
    let in_format = |format: &str| {
        server.cli(&[
            "materialize",
            &tip,
            "--stop",
            "root",
            "--format",
            format,
            "-o",
            path.to_str().unwrap(),
            "--json",
        ])
    };
    let (code, out) = in_format("openai-chat-v1");
    assert_eq!(code, 0);
    let m = json(&out);
    assert_eq!(m["tier"], "cross-runtime");
    let messages = json(&std::fs::read(&path).unwrap());
    let tools: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["toolu_01Read", "toolu_01Grep", "toolu_01Edit"]);
    // The same request again is served from the cache.
    let (_, out) = in_format("openai-chat-v1");
    assert_eq!(json(&out)["cached"], true);

    // A format ctx has no codec for, which this context is not in: refused
    // as invalid input (exit 2, the server's 400 naming `format` and the
    // formats it knows: issue 46), never a guess and never a fallback that
    // a mistyped id would get silently.
    let (code, _) = in_format("gemini-contents-v9");
    assert_eq!(code, 2);
    // Raw, which every server has, takes the context as stored.
    let (code, out) = in_format("raw");
    assert_eq!(code, 0);
    assert_eq!(json(&out)["tier"], "raw");
    let raw = std::fs::read(&path).unwrap();
    assert!(raw.starts_with(b"ctx raw fallback: ctx cannot write raw"));
    assert!(
        raw.windows(original.len().min(200))
            .any(|w| w == &original[..original.len().min(200)])
    );

    // A transcript cut mid-line is a log still: it imports with a warning
    // that names its last line, and exports as it was.
    let cut = dir.path().join("cut.jsonl");
    let cut_bytes = &original[..original.len() - 10];
    std::fs::write(&cut, cut_bytes).unwrap();
    let report = imported(&server, &cut, "bob");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings
            .last()
            .unwrap()
            .as_str()
            .unwrap()
            .contains("a last line without a newline"),
        "{report}"
    );
    let (status, _) = http
        .call("GET", "/v1/resolve?principal=bob", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (code, out) = server.cli(&["export", report["tip"].as_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out == cut_bytes, "the cut transcript as it was");
}

/// A real transcript resumed after an interrupted tool call holds a
/// tool_result whose tool_use is not in the file: it imports, byte for
/// byte, with the pairing problem reported as a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_with_an_unpaired_tool_result_imports_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let transcript = concat!(
        r#"{"type":"user","uuid":"a1","sessionId":"s-resumed","timestamp":"2026-11-20T09:00:00.000Z","message":{"role":"user","content":"go on"}}"#,
        "\n",
        r#"{"type":"user","uuid":"a2","sessionId":"s-resumed","timestamp":"2026-11-20T09:00:01.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_interrupted","content":"[Request interrupted by user]","is_error":true}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a3","sessionId":"s-resumed","timestamp":"2026-11-20T09:00:02.000Z","message":{"id":"msg_9","role":"assistant","content":[{"type":"text","text":"Resuming."}]}}"#,
        "\n",
    );
    let path = dir.path().join("resumed.jsonl");
    std::fs::write(&path, transcript).unwrap();
    let (code, out) = server.cli(&[
        "import",
        "claude-code",
        path.to_str().unwrap(),
        "--principal",
        "carol",
        "--json",
    ]);
    assert_eq!(
        code, 0,
        "an unpaired tool_result does not refuse the import"
    );
    let report = json(&out);
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(
        warnings[0].as_str().unwrap().contains("toolu_interrupted"),
        "{report}"
    );
    let tip = report["tip"].as_str().unwrap();
    let (code, out) = server.cli(&["export", tip]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap(), transcript);
}

/// `ctx import claude-code PATH --principal P --json`, which must succeed:
/// its report.
/// Each warning it prints on stderr says once that the lines were stored
/// as written (issue 46, item 10: the server's text said so and the CLI
/// added it again).
fn imported(server: &Server, path: &std::path::Path, principal: &str) -> Value {
    let out = server.cli_output(&[
        "import",
        "claude-code",
        path.to_str().unwrap(),
        "--principal",
        principal,
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for line in err.lines().filter(|l| l.contains("warning")) {
        assert_eq!(line.matches("(stored as written)").count(), 1, "{line}");
    }
    json(&out.stdout)
}

/// A third-party transcript is a log: a line that is no entry Claude
/// Code's format reads (a misspelt `content`, text that is not JSON) and a
/// last line without its newline import with a warning each, are read as no
/// message, and export byte for byte. A refusal is not the answer.
#[tokio::test]
async fn a_transcript_with_lines_that_are_no_entries_imports_with_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let transcript = concat!(
        r#"{"type":"user","uuid":"b1","sessionId":"s-odd","timestamp":"2026-11-20T09:00:00.000Z","message":{"role":"user","content":"hello"}}"#,
        "\n",
        r#"{"type":"user","uuid":"b2","sessionId":"s-odd","message":{"role":"user","contnet":"misspelt"}}"#,
        "\n",
        "not json at all\n",
        r#"{"type":"assistant","uuid":"b3","sessionId":"s-odd","timestamp":"2026-11-20T09:00:02.000Z","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"hi"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"b4","sessionId":"s-odd","timestamp":"2026-11-20T09:00:03.000Z","message":{"role":"user","content":"bye"}}"#,
    );
    let path = dir.path().join("odd.jsonl");
    std::fs::write(&path, transcript).unwrap();
    let report = imported(&server, &path, "carol");
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 3, "{report}");
    assert!(
        warnings[0].contains("(line 2)") && warnings[0].contains("no \"content\""),
        "{report}"
    );
    assert!(
        warnings[1].contains("(line 3)") && warnings[1].contains("not JSON"),
        "{report}"
    );
    assert!(warnings[2].contains("without a newline"), "{report}");
    let tip = report["tip"].as_str().unwrap();
    let (code, out) = server.cli(&["export", tip]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap(), transcript);
    // Translated, the odd lines are no messages; the three entries are.
    let (code, out) = server.cli(&["export", tip, "--format", "anthropic-messages-v1"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let messages: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(messages.as_array().unwrap().len(), 3, "{messages}");
}

/// `ctx compact` re-compacts an imported Claude Code session with the
/// server's summarizer: the ref moves to the new compaction, a materialize
/// starts at its compact_boundary, and the export is the original
/// transcript followed by the boundary and its summary entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recompacted_claude_code_session_still_exports_as_a_transcript() {
    let original = std::fs::read(TRANSCRIPT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let tip = import_transcript(&server)["tip"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, out) = server.cli(&[
        "compact",
        "sessions/parser",
        "--ref",
        "sessions/parser",
        "--json",
    ]);
    assert_eq!(code, 0);
    let done = json(&out);
    assert_eq!(done["commit"]["parent"], tip.as_str());
    assert_eq!(done["commit"]["tags"]["compacted_by"], "extractive:v1");
    let new = done["commit"]["id"].as_str().unwrap();
    let (_, out) = server.cli(&["ref", "get", "sessions/parser", "--json"]);
    assert_eq!(json(&out)["target"], new);

    // A stale ref move is refused (the ref now points at the compaction).
    let (code, _) = server.cli(&["compact", &tip, "--ref", "sessions/parser"]);
    assert_ne!(code, 0);

    let (code, latest) = server.cli(&["materialize", "sessions/parser"]);
    assert_eq!(code, 0);
    let lines: Vec<Value> = latest
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(json)
        .collect();
    assert_eq!(lines.len(), 2, "the boundary and the summary");
    assert_eq!(lines[0]["subtype"], "compact_boundary");
    assert_eq!(lines[1]["isCompactSummary"], true);

    let (code, exported) = server.cli(&["export", "sessions/parser", "--format", "claude-code-v1"]);
    assert_eq!(code, 0);
    assert!(exported.starts_with(&original));
    assert_eq!(&exported[original.len()..], &latest[..]);
}

/// An OpenAI Agents SDK session (Responses API items) through the CLI:
/// checkpointed on a ref, a malformed item refused naming the item and the
/// field with nothing written, materialized natively and for another
/// runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_agents_session_checkpoints_and_translates_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let items = serde_json::json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_o", "name": "get_weather",
         "arguments": "{\"city\":\"Oslo\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_o", "output": "sunny"},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Sunny in Oslo.", "annotations": []}]}
    ]);
    let path = dir.path().join("items.json");
    std::fs::write(&path, items.to_string()).unwrap();
    let checkpoint = |file: &str| {
        server.cli_output(&[
            "checkpoint",
            file,
            "--principal",
            "dana",
            "--format",
            "openai-responses-v1",
            "--ref",
            "openai-agents/oslo",
            "--json",
        ])
    };
    let out = checkpoint(path.to_str().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commit = json(&out.stdout);
    assert_eq!(commit["message_count"], 4);
    // A function call without arguments: refused, the ref not moved.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"type":"function_call","call_id":"c2","name":"get_weather"}]"#,
    )
    .unwrap();
    let out = checkpoint(bad.to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    // With --json the error is one JSON object on stderr.
    let err = json(&out.stderr);
    assert_eq!(err["error"]["field"], "file", "{err}");
    assert!(
        err["error"]["message"].as_str().is_some_and(|m| m.contains(
            "openai-responses-v1 delta: at index 0: a function_call has no \"arguments\""
        )),
        "{err}"
    );
    let (_, tip) = server.cli(&["ref", "get", "openai-agents/oslo", "--json"]);
    assert_eq!(json(&tip)["target"], commit["id"]);
    // Natively: the items as written; for Claude: the call paired with its result.
    let native = dir.path().join("native.json");
    let (code, _) = server.cli(&[
        "materialize",
        "openai-agents/oslo",
        "-o",
        native.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(json(&std::fs::read(&native).unwrap()), items);
    let claude = dir.path().join("claude.json");
    let (code, out) = server.cli(&[
        "materialize",
        "openai-agents/oslo",
        "--format",
        "anthropic-messages-v1",
        "-o",
        claude.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["tier"], "cross-runtime");
    let messages = json(&std::fs::read(&claude).unwrap());
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_o");
}

/// A Claude Code session holding the result of a call that is not in it
/// (a rewind, a compaction, an imported fragment) translates message by
/// message: every other tool pair stays native blocks, the orphan is text
/// saying what it is, and the response's fidelity report names it, on
/// `POST /v1/read`, on materialize (cached too) and on the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_an_orphan_tool_result_translates_per_message_with_a_fidelity_report() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let line = |v: Value| format!("{v}\n");
    let user = |uuid: &str, content: Value| {
        line(
            serde_json::json!({"type": "user", "uuid": uuid, "sessionId": "s-orphan",
            "timestamp": "2026-11-20T09:00:00.000Z", "message": {"role": "user", "content": content}}),
        )
    };
    let assistant = |uuid: &str, id: &str, content: Value| {
        line(
            serde_json::json!({"type": "assistant", "uuid": uuid, "sessionId": "s-orphan",
            "timestamp": "2026-11-20T09:00:01.000Z",
            "message": {"id": id, "role": "assistant", "content": content}}),
        )
    };
    let call = |id: &str| serde_json::json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]);
    let result = |id: &str, out: &str| serde_json::json!([{"type": "tool_result", "tool_use_id": id, "content": out}]);
    let transcript = [
        user("b1", serde_json::json!("What is here?")),
        assistant("b2", "msg_1", call("toolu_a")),
        user("b3", result("toolu_a", "src")),
        user("b4", result("toolu_rewound", "42 rows")),
        assistant("b5", "msg_2", call("toolu_b")),
        user("b6", result("toolu_b", "tests")),
        assistant(
            "b7",
            "msg_3",
            serde_json::json!([{"type": "text", "text": "src and tests."}]),
        ),
    ]
    .concat();
    let path = dir.path().join("orphan.jsonl");
    std::fs::write(&path, &transcript).unwrap();
    let report = imported(&server, &path, "erin");
    let tip = report["tip"].as_str().unwrap().to_owned();

    let http = server.client();
    let read = http
        .ok(
            "POST",
            "/v1/read",
            Some(&serde_json::json!({"commit": tip, "stop": "root", "format": "anthropic-messages-v1"})),
        )
        .await;
    assert_eq!(read["tier"], "cross-runtime", "{read}");
    let messages: Value = serde_json::from_str(read["content"].as_str().unwrap()).unwrap();
    let blocks: Vec<(String, String)> = messages
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| match &m["content"] {
            // A lone text block is written as a string.
            Value::String(text) => vec![serde_json::json!({"type": "text", "text": text})],
            blocks => blocks.as_array().unwrap().clone(),
        })
        .map(|b| {
            let ty = b["type"].as_str().unwrap().to_owned();
            let what = match ty.as_str() {
                "tool_use" => b["id"].as_str().unwrap().to_owned(),
                "tool_result" => b["tool_use_id"].as_str().unwrap().to_owned(),
                _ => b["text"].as_str().unwrap_or_default().to_owned(),
            };
            (ty, what)
        })
        .collect();
    let pairs: Vec<(&str, &str)> = blocks
        .iter()
        .filter(|(ty, _)| ty.starts_with("tool_"))
        .map(|(ty, id)| (ty.as_str(), id.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("tool_use", "toolu_a"),
            ("tool_result", "toolu_a"),
            ("tool_use", "toolu_b"),
            ("tool_result", "toolu_b")
        ],
        "{messages}"
    );
    assert!(
        blocks.iter().any(|(ty, text)| ty == "text"
            && text.contains("toolu_rewound")
            && text.contains("whose call is not in this context")
            && text.contains("42 rows")),
        "{messages}"
    );
    let fidelity = &read["fidelity"];
    assert_eq!(
        (
            &fidelity["kept"],
            &fidelity["converted"],
            &fidelity["dropped"]
        ),
        (&Value::from(6), &Value::from(1), &Value::from(0)),
        "{read}"
    );
    let change = &fidelity["changes"][0];
    assert_eq!(change["kind"], "converted");
    assert_eq!(change["message"], 3);
    assert_eq!(change["tool_use_id"], "toolu_rewound");
    assert!(
        change["at"].as_str().unwrap().ends_with(", line 4"),
        "{change}"
    );
    assert!(
        change["reason"]
            .as_str()
            .unwrap()
            .contains("not in this context"),
        "{change}"
    );

    // Materialize answers the same report, and so does its cache entry.
    for cached in [false, true] {
        let m = http
            .ok(
                "POST",
                &format!("/v1/commits/{tip}/materialize"),
                Some(&serde_json::json!({"stop": "root", "format": "openai-chat-v1"})),
            )
            .await;
        assert_eq!(m["cached"], cached, "{m}");
        assert_eq!(m["tier"], "cross-runtime", "{m}");
        assert_eq!(
            m["fidelity"]["changes"][0]["tool_use_id"], "toolu_rewound",
            "{m}"
        );
        assert_eq!(m["fidelity"]["kept"], 6, "{m}");
    }
    // Natively nothing is translated: no report.
    let m = http
        .ok(
            "POST",
            &format!("/v1/commits/{tip}/materialize"),
            Some(&serde_json::json!({"stop": "root"})),
        )
        .await;
    assert_eq!(m["tier"], "native");
    assert!(m.get("fidelity").is_none(), "{m}");

    // The CLI prints the report under the line about the context.
    let out = server.cli_output(&[
        "materialize",
        &tip,
        "--stop",
        "root",
        "--format",
        "openai-responses-v1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("6 messages kept, 1 converted, 0 dropped") && err.contains("toolu_rewound"),
        "{err}"
    );
}

/// A Codex CLI rollout and a Gemini CLI session file import one commit per
/// turn, export byte for byte, import again to the same tip, and
/// materialize for another runtime with their tool calls paired; either
/// A Codex rollout that compacted imports with a compaction commit at its
/// `compacted` record: the file still exports byte for byte, and a read
/// from the latest compaction starts at Codex's summary.
#[tokio::test]
async fn a_compacted_codex_rollout_imports_with_a_compaction_commit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let fixture = format!("{}/data/codex-rollout.jsonl", env!("CARGO_MANIFEST_DIR"));
    let mut rollout = std::fs::read_to_string(&fixture).unwrap();
    rollout.push_str(concat!(
        r#"{"timestamp":"2026-11-21T14:05:00.000Z","type":"compacted","payload":{"message":"Fixed divide by zero and added its test."}}"#,
        "\n",
        r#"{"timestamp":"2026-11-21T14:05:10.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Now document it."}]}}"#,
        "\n",
        r#"{"timestamp":"2026-11-21T14:05:20.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Documented."}]}}"#,
        "\n",
    ));
    let path = dir.path().join("rollout.jsonl");
    std::fs::write(&path, &rollout).unwrap();
    let (code, out) = server.cli(&[
        "import",
        "codex",
        path.to_str().unwrap(),
        "--ref",
        "sessions/compacted",
        "--json",
    ]);
    assert_eq!(code, 0, "{out:?}");
    let report = json(&out);
    assert_eq!(report["compactions"].as_u64(), Some(1), "{report}");
    assert_eq!(report["deltas"].as_u64(), Some(3), "{report}");
    let (code, out) = server.cli(&["export", "sessions/compacted"]);
    assert_eq!(code, 0);
    assert!(
        out == rollout.as_bytes(),
        "the export is the file:\n{}",
        String::from_utf8_lossy(&out)
    );
    let (code, out) = server.cli(&[
        "materialize",
        "sessions/compacted",
        "--stop",
        "compaction",
        "--format",
        "openai-chat-v1",
    ]);
    assert_eq!(code, 0);
    let messages = json(&out);
    let texts: Vec<String> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[0].contains("Fixed divide by zero"), "{texts:?}");
    assert!(texts[2].contains("Documented."), "{texts:?}");
}

/// A Codex CLI rollout and a Gemini CLI session file import one commit per
/// turn, export byte for byte, import again to the same tip, and
/// materialize for another runtime with their tool calls paired; either
/// file checkpointed whole with `ctx checkpoint --format` is the same bytes.
#[tokio::test]
async fn codex_and_gemini_sessions_import_and_export_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    for (runtime, file, format, turns, calls) in [
        (
            "codex",
            "codex-rollout.jsonl",
            "codex-rollout-v1",
            2,
            vec!["call_Q1shell", "call_Q2patch", "call_Q3test"],
        ),
        (
            "gemini",
            "gemini-cli-session.jsonl",
            "gemini-cli-v1",
            3,
            vec![
                "read_file-1763737206312-0",
                "run_shell_command-1763737211874-0",
                "replace-1763737260015-0",
            ],
        ),
    ] {
        let path = format!("{}/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let original = std::fs::read(&path).unwrap();
        let reference = format!("sessions/{runtime}");
        let args = ["import", runtime, &path, "--ref", &reference, "--json"];
        let (code, out) = server.cli(&args);
        assert_eq!(code, 0, "{runtime}");
        let report = json(&out);
        assert_eq!(report["deltas"].as_u64(), Some(turns), "{report}");
        assert_eq!(
            report["warnings"].as_array().map(Vec::len),
            Some(0),
            "{report}"
        );
        let tip = report["tip"].as_str().unwrap().to_owned();
        let (code, out) = server.cli(&args);
        assert_eq!(code, 0);
        assert_eq!(
            json(&out)["tip"].as_str(),
            Some(tip.as_str()),
            "{runtime}: again"
        );
        let (code, out) = server.cli(&["export", &reference, "--format", format]);
        assert_eq!(code, 0);
        assert!(out == original, "{runtime}: export differs from the file");
        let (code, out) = server.cli(&["show", &tip, "--json"]);
        assert_eq!(code, 0);
        let commit = json(&out);
        assert_eq!(
            (commit["format"].as_str(), commit["principal"].as_str()),
            (Some(format), Some(runtime))
        );

        let out_path = dir.path().join(format!("{runtime}.json"));
        let (code, out) = server.cli(&[
            "materialize",
            &tip,
            "--stop",
            "root",
            "--format",
            "anthropic-messages-v1",
            "-o",
            out_path.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0);
        assert_eq!(json(&out)["tier"], "cross-runtime", "{runtime}");
        let messages = json(&std::fs::read(&out_path).unwrap());
        let results: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        assert_eq!(results, calls, "{runtime}");

        let (code, out) = server.cli(&[
            "checkpoint",
            &path,
            "--format",
            format,
            "--principal",
            runtime,
            "--json",
        ]);
        assert_eq!(code, 0, "{runtime}: checkpoint");
        let whole = json(&out)["id"].as_str().unwrap().to_owned();
        let (code, out) = server.cli(&["export", &whole]);
        assert_eq!(code, 0);
        assert!(
            out == original,
            "{runtime}: a whole-file checkpoint exports as written"
        );
    }
}

/// A session file imported as another runtime's (a Codex rollout through
/// `ctx import claude-code`) holds no message of that runtime: the import
/// says so, names the runtime that reads it, exits 2 and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_file_imported_as_another_runtime_is_refused_naming_the_right_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let files = [
        ("claude-code", "claude-code-session.jsonl"),
        ("codex", "codex-rollout.jsonl"),
        ("gemini", "gemini-cli-session.jsonl"),
    ];
    for (runtime, file) in files {
        let path = format!("{}/data/{file}", env!("CARGO_MANIFEST_DIR"));
        for (wrong, _) in files.iter().filter(|(r, _)| *r != runtime) {
            let reference = format!("sessions/{wrong}-{runtime}");
            let out = server.cli_output(&["import", wrong, &path, "--ref", &reference]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{file} as {wrong}: {stderr}");
            assert!(
                stderr.contains("nothing was imported")
                    && stderr.contains(&format!("ctx import {runtime} {path}")),
                "{file} as {wrong} names the runtime that reads it: {stderr}"
            );
            let (code, _) = server.cli(&["ref", "get", &reference]);
            assert_eq!(code, 3, "{file} as {wrong}: no ref written");
            let (code, _) = server.cli(&["resolve", "--principal", wrong]);
            assert_eq!(code, 3, "{file} as {wrong}: no commit written");
        }
    }
}
