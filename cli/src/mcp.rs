//! `ctx mcp`: a Model Context Protocol server over stdio exposing the
//! context-folding tools `branch_create`, `branch_return` and
//! `branch_status`, `read_context` (seed 002's first-turn context of a
//! workspace), and an agent's live context (`context_window`,
//! `context_clear`, `context_save`, `context_history`, `context_restore`,
//! `working_context_restore`), each forwarded to a ctx server over HTTP.
//!
//! It speaks the small part of MCP a tool server needs — JSON-RPC 2.0 over
//! newline-delimited stdio: `initialize`, `ping`, `tools/list`,
//! `tools/call` and notifications (ignored) — written here rather than
//! pulling in an SDK crate, to keep the build small; the Python `mcp`
//! package's stdio client is the test of conformance (tests/mcp).
//!
//! A tool's arguments are read as the route's request type
//! (`ctx_core::wire`) exactly as the server would read them, and its
//! result is the typed response, serialized.

use ctx_core::api::extract::parse_json;
use ctx_core::wire::{BranchCreateRequest, BranchReturnRequest};
use ctx_core::{Error, Result};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::client::Client;
use crate::commands::branch_id;

/// Protocol versions this server speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// The names of the tools, as `tools/list` gives them.
pub const TOOL_NAMES: &[&str] = &[
    "branch_create",
    "branch_return",
    "branch_status",
    "read_context",
    "context_window",
    "context_clear",
    "context_save",
    "context_history",
    "context_restore",
    "working_context_restore",
];

/// The tools, as `tools/list` describes them.
pub fn tools() -> Value {
    json!([
        {
            "name": "branch_create",
            "description": "Start an isolated context branch for a subtask. The branch sees only its description and prompt; only the result you return with branch_return goes back to the main context. Returns {branch_id, budget_allocated, depth}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": "The session the branch belongs to."},
                    "description": {"type": "string", "maxLength": 500, "description": "What the subtask is."},
                    "prompt": {"type": "string", "maxLength": 10000, "description": "The subtask's instructions."},
                    "budget": {"type": "integer", "minimum": 1, "description": "Token budget (default 8192, max 32768)."},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "description": "Seconds until it times out (default 300, max 600)."},
                    "parent_branch": {"type": "string", "description": "Nest under this active branch (br-…)."}
                },
                "required": ["session_id", "description"]
            }
        },
        {
            "name": "branch_return",
            "description": "Return from a branch: the message (secrets scrubbed) is appended to the parent context; active child branches are returned first. Returns {success, tokens_used, message}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "branch_id": {"type": "string", "description": "The branch (br-…)."},
                    "message": {"type": "string", "maxLength": 50000, "description": "The result to hand back."}
                },
                "required": ["branch_id", "message"]
            }
        },
        {
            "name": "branch_status",
            "description": "A branch's status (created | active | completed | timeout | failed), depth, budget used / total, description, created_at, completed_at. With session_id instead: the session's active branch, or {branch_id: null, status: \"No active branch found\"}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "branch_id": {"type": "string", "description": "The branch (br-…)."},
                    "session_id": {"type": "string", "description": "A session, for its active branch."}
                }
            }
        },
        {
            "name": "read_context",
            "description": "Call this first: the first-turn context of an image's workspace, in loading order. Returns {tastes: {default, genres, conflicts: [{point, files}]}, brief: {raw, intent, tastes}, notes: {summary, truncated}, recent_log (last 10, newest first), recent_gaps (last 10, newest first)}. Taste conflicts are for you to raise with the photographer, not to resolve.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "image_id": {"type": "string", "maxLength": 64, "description": "The image (its workspace id)."}
                },
                "required": ["image_id"]
            }
        },
        {
            "name": "context_window",
            "description": "Your live context: the messages of your commits since max(last clear, now - window_seconds), oldest first, for one thread or all. Returns {since, reason: clear|window, until, commits, message_count, token_count, artifact_ref, format, truncated}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The agent (its principal)."},
                    "thread_id": {"type": "string", "description": "Only this thread."},
                    "format": {"type": "string", "description": "The format wanted (default: the newest commit's)."}
                },
                "required": ["agent"]
            }
        },
        {
            "name": "context_clear",
            "description": "Start the agent's window now, for every thread. Deletes nothing. Returns {last_clear}.",
            "inputSchema": {
                "type": "object",
                "properties": {"agent": {"type": "string", "description": "The agent."}},
                "required": ["agent"]
            }
        },
        {
            "name": "context_save",
            "description": "Save every thread's window as a session file with a summary; does not clear. Returns {save_id, timestamp, description, summary, message_count, window_start, window_end, artifact_ref}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The agent."},
                    "description": {"type": "string", "maxLength": 1024, "description": "What to call the save."}
                },
                "required": ["agent"]
            }
        },
        {
            "name": "context_history",
            "description": "The agent's saves, newest first: {saves: [{save_id, timestamp, description, summary, message_count, ...}]}.",
            "inputSchema": {
                "type": "object",
                "properties": {"agent": {"type": "string", "description": "The agent."}},
                "required": ["agent"]
            }
        },
        {
            "name": "context_restore",
            "description": "Load a save's messages back into the window (one commit per thread, now, tagged restored_from). Returns {save_id, commits}.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The agent."},
                    "save_id": {"type": "string", "description": "The save (sav-…)."}
                },
                "required": ["agent", "save_id"]
            }
        },
        {
            "name": "working_context_restore",
            "description": "Restore the agent's working context after a restart: the cached snapshot when valid, else a rebuild (system prompt, episodic and semantic memory, the raw tail of the latest chain) with the reason. Returns {source: cache|rebuilt, reason, snapshot, artifact_ref}. Queues and in-flight tool calls are not restored.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The agent."},
                    "system_prompt": {"type": "string", "description": "The system prompt of a rebuild."},
                    "max_episodic": {"type": "integer", "minimum": 0, "maximum": 100},
                    "max_semantic": {"type": "integer", "minimum": 0, "maximum": 100},
                    "raw_tail_turns": {"type": "integer", "minimum": 0, "maximum": 1000}
                },
                "required": ["agent"]
            }
        }
    ])
}

/// The request fields `keys` of a tool's arguments, without nulls or
/// anything else a model may add, read as the server reads a body.
fn body_of<T: serde::de::DeserializeOwned>(args: &Value, keys: &[&str]) -> Result<T> {
    let mut body = serde_json::Map::new();
    for key in keys {
        if let Some(v) = args.get(*key).filter(|v| !v.is_null()) {
            body.insert((*key).to_owned(), v.clone());
        }
    }
    parse_json(Value::Object(body).to_string().as_bytes())
}

fn agent_arg(args: &Value) -> Result<ctx_core::Principal> {
    str_arg(args, "agent")?
        .parse()
        .map_err(|e: Error| e.with_field("agent"))
}

fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid(name, format!("the argument {name} (a string) is required")))
}

fn to_value(v: &impl Serialize) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| Error::internal(format!("cannot encode the result: {e}")))
}

/// Runs one tool against the server.
///
/// # Errors
/// `Invalid` for unknown tools or arguments; the server's error.
pub async fn call_tool(client: &Client, name: &str, args: &Value) -> Result<Value> {
    match name {
        "branch_create" => {
            // The request's fields, without nulls or anything else a model
            // may add, read as the server reads a body.
            let mut body = serde_json::Map::new();
            for key in [
                "session_id",
                "description",
                "prompt",
                "budget",
                "timeout_seconds",
                "parent_branch",
            ] {
                if let Some(v) = args.get(key).filter(|v| !v.is_null()) {
                    body.insert(key.to_owned(), v.clone());
                }
            }
            let req: BranchCreateRequest = parse_json(Value::Object(body).to_string().as_bytes())?;
            to_value(&client.branch_create(&req).await?)
        }
        "branch_return" => {
            let id = str_arg(args, "branch_id")?;
            let req = BranchReturnRequest {
                message: str_arg(args, "message")?.to_owned(),
            };
            to_value(&client.branch_return(&branch_id(id)?, &req).await?)
        }
        "branch_status" => {
            let status = match (
                args.get("branch_id").and_then(Value::as_str),
                args.get("session_id").and_then(Value::as_str),
            ) {
                (Some(b), _) => client.branch_status(&branch_id(b)?).await?,
                (None, Some(s)) => client.branch_status_of_session(&s.parse()?).await?,
                (None, None) => {
                    return Err(Error::invalid("branch_id", "give branch_id or session_id"));
                }
            };
            to_value(&status)
        }
        "read_context" => {
            let ws: ctx_core::workspace::WorkspaceId = str_arg(args, "image_id")?
                .parse()
                .map_err(|e: Error| e.with_field("image_id"))?;
            to_value(&client.read_context(&ws).await?)
        }
        "context_window" => {
            let thread = args.get("thread_id").and_then(Value::as_str);
            let format = args.get("format").and_then(Value::as_str);
            to_value(
                &client
                    .context_window(&agent_arg(args)?, thread, format)
                    .await?,
            )
        }
        "context_clear" => to_value(&client.clear_context(&agent_arg(args)?).await?),
        "context_save" => {
            let req: ctx_core::wire::SaveRequest = body_of(args, &["description"])?;
            to_value(&client.save_context(&agent_arg(args)?, &req).await?)
        }
        "context_history" => to_value(&client.context_history(&agent_arg(args)?).await?),
        "context_restore" => {
            let id: ctx_core::wire::SaveId = str_arg(args, "save_id")?
                .parse()
                .map_err(|e: Error| e.with_field("save_id"))?;
            to_value(&client.restore_save(&agent_arg(args)?, &id).await?)
        }
        "working_context_restore" => {
            let req: ctx_core::wire::RestoreRequest = body_of(
                args,
                &[
                    "system_prompt",
                    "max_episodic",
                    "max_semantic",
                    "raw_tail_turns",
                ],
            )?;
            to_value(
                &client
                    .restore_working_context(&agent_arg(args)?, &req)
                    .await?,
            )
        }
        other => Err(Error::invalid(
            "name",
            format!("there is no tool called {other:?}"),
        )),
    }
}

/// Answers one JSON-RPC message; `None` for notifications.
pub async fn handle(client: &Client, msg: &Value) -> Option<Value> {
    let id = msg.get("id").cloned()?;
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let version = asked
                .filter(|v| PROTOCOL_VERSIONS.contains(v))
                .unwrap_or(PROTOCOL_VERSIONS[0]);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "ctx", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "On the first turn, read_context(image_id) gives the workspace's tastes, brief, notes, recent log and gaps. Context folding: run a subtask in a branch (branch_create), checkpoint its work into the branch's chain_ref, and hand back only a short result (branch_return)."
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools() })),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            if !TOOL_NAMES.contains(&name) {
                Err((-32602, format!("unknown tool {name:?}")))
            } else {
                // Tool failures are results with isError, so the model sees them.
                Ok(match call_tool(client, name, &args).await {
                    Ok(v) => json!({
                        "content": [{"type": "text", "text": v.to_string()}],
                        "structuredContent": v,
                        "isError": false
                    }),
                    Err(e) => json!({
                        "content": [{"type": "text", "text": format!("{}: {}", e.kind, e.message)}],
                        "isError": true
                    }),
                })
            }
        }
        other => Err((-32601, format!("method {other:?} not found"))),
    };
    Some(match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    })
}

/// Serves MCP on stdin/stdout until stdin closes.
///
/// # Errors
/// `Unavailable` when stdout cannot be written.
pub async fn serve(client: Client) -> Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let write_err = |e: std::io::Error| Error::unavailable(format!("cannot write to stdout: {e}"));
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| Error::unavailable(format!("cannot read stdin: {e}")))?
    {
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(msg) => handle(&client, &msg).await,
            Err(e) => Some(json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")}})),
        };
        if let Some(r) = reply {
            out.write_all(format!("{r}\n").as_bytes())
                .await
                .map_err(write_err)?;
            out.flush().await.map_err(write_err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        // Never contacted by these calls.
        Client::new("http://127.0.0.1:9", None)
    }

    #[tokio::test]
    async fn the_protocol_subset_answers_as_json_rpc() {
        let c = client();
        let init = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await
        .unwrap();
        assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(init["result"]["serverInfo"]["name"], "ctx");
        let newer = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "initialize",
                    "params": {"protocolVersion": "2099-01-01"}}),
        )
        .await
        .unwrap();
        assert_eq!(newer["result"]["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert_eq!(
            handle(
                &c,
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            )
            .await,
            None
        );
        let list = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": "x", "method": "tools/list"}),
        )
        .await
        .unwrap();
        let names: Vec<_> = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, TOOL_NAMES);
        assert_eq!(list["id"], "x");
        let unknown = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
        )
        .await
        .unwrap();
        assert_eq!(unknown["error"]["code"], -32601);
        let bad_tool = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "rm_rf", "arguments": {}}}),
        )
        .await
        .unwrap();
        assert_eq!(bad_tool["error"]["code"], -32602);
        // A tool's own failure is a result with isError, not a protocol error.
        let missing = handle(
            &c,
            &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                    "params": {"name": "branch_return", "arguments": {"branch_id": "br-x"}}}),
        )
        .await
        .unwrap();
        assert_eq!(missing["result"]["isError"], true);
        assert!(
            missing["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("message"),
            "{missing}"
        );
    }
}
