//! The Model Context Protocol server of ctx, on the official Rust SDK
//! (`rmcp`): `ctx mcp` serves it over stdio, forwarding each tool call to a
//! ctx server over HTTP, and `ctx serve` serves it at `/mcp` (streamable
//! HTTP, stateless: one JSON answer per POST) behind the API's bearer
//! auth, each call made as the caller with the caller's token.
//!
//! The tools: context folding (`branch_create`, `branch_return`,
//! `branch_status`), `read_context` (the first-turn context of a
//! workspace), and an agent's live context (`context_window`,
//! `context_clear`, `context_save`, `context_history`, `context_restore`,
//! `working_context_restore`). A tool's arguments are read as the route's request type
//! (`ctx_core::wire`) exactly as the server would read them, and its
//! result is the typed response, serialized; a tool's failure is a result
//! with `isError`, so the model sees it.

use ctx_core::api::extract::parse_json;
use ctx_core::wire::{BranchCreateRequest, BranchReturnRequest};
use ctx_core::{Error, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde::Serialize;
use serde_json::{Value, json};

use crate::client::Client;
use crate::commands::branch_id;

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

/// What the model is told on `initialize`.
const INSTRUCTIONS: &str = "On the first turn, read_context(image_id) gives the workspace's tastes, brief, notes, recent log and gaps. Context folding: run a subtask in a branch (branch_create), checkpoint its work into the branch's chain_ref, and hand back only a short result (branch_return).";

/// Where a tool call's [`Client`] comes from.
#[derive(Clone)]
enum Calls {
    /// `ctx mcp`: one client, its token from the command line.
    Fixed(std::sync::Arc<Client>),
    /// `ctx serve`'s `/mcp`: the server itself (one connection pool for
    /// every call), with the bearer token of the HTTP request that carried
    /// the call.
    Loopback(std::sync::Arc<Client>),
}

/// The MCP server: the tools of [`tools`], run by [`call_tool`].
#[derive(Clone)]
pub struct CtxMcp {
    calls: Calls,
    tools: std::sync::Arc<Vec<Tool>>,
}

impl CtxMcp {
    fn new(calls: Calls) -> Self {
        let tools: Vec<Tool> = serde_json::from_value(tools()).expect("the tool list is valid MCP");
        CtxMcp {
            calls,
            tools: std::sync::Arc::new(tools),
        }
    }

    /// For `ctx mcp`: every call through `client`.
    pub fn forwarding(client: Client) -> Self {
        Self::new(Calls::Fixed(std::sync::Arc::new(client)))
    }

    /// For `/mcp` in `ctx serve`: every call to the server `server` (a
    /// client without a token) as the HTTP request's bearer.
    pub fn loopback(server: std::sync::Arc<Client>) -> Self {
        Self::new(Calls::Loopback(server))
    }

    fn client(&self, context: &RequestContext<RoleServer>) -> std::sync::Arc<Client> {
        match &self.calls {
            Calls::Fixed(c) => c.clone(),
            Calls::Loopback(server) => {
                let token = context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|p| p.headers.get(axum::http::header::AUTHORIZATION))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::to_owned);
                std::sync::Arc::new(server.with_token(token))
            }
        }
    }
}

impl ServerHandler for CtxMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ctx", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if !TOOL_NAMES.contains(&name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(match call_tool(&self.client(&context), name, &args).await {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "{}: {}",
                e.kind, e.message
            ))]),
        }
        .into())
    }
}

/// Serves MCP on stdin/stdout until stdin closes.
///
/// # Errors
/// `Unavailable` when the transport fails.
pub async fn serve(client: Client) -> Result<()> {
    let running = CtxMcp::forwarding(client)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::unavailable(format!("MCP on stdio: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::unavailable(format!("MCP on stdio: {e}")))?;
    Ok(())
}

/// The streamable HTTP endpoint `ctx serve` mounts at `/mcp` (stateless,
/// JSON answers), its tool calls made to the server at `base`; `host` is
/// accepted in `Host` headers beside the loopback names. Authentication is
/// the caller's: wrap it in the API's bearer check.
pub fn http_service(
    base: String,
    host: String,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    CtxMcp,
    rmcp::transport::streamable_http_server::session::never::NeverSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
    };
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    config.allowed_hosts.push(host);
    let server = std::sync::Arc::new(Client::new(&base, None));
    StreamableHttpService::new(
        move || Ok(CtxMcp::loopback(server.clone())),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Speaks JSON-RPC lines to a [`CtxMcp`] served on an in-memory pipe.
    async fn exchange(messages: &[Value]) -> Vec<Value> {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(theirs);
        // Never contacted by these calls.
        let server = CtxMcp::forwarding(Client::new("http://127.0.0.1:9", None));
        tokio::spawn(async move {
            if let Ok(running) = server.serve((read, write)).await {
                let _ = running.waiting().await;
            }
        });
        let (r, mut w) = tokio::io::split(ours);
        let mut lines = BufReader::new(r).lines();
        let mut answers = Vec::new();
        for m in messages {
            w.write_all(format!("{m}\n").as_bytes()).await.unwrap();
            if m.get("id").is_some() {
                let line = lines.next_line().await.unwrap().expect("an answer");
                answers.push(serde_json::from_str(&line).unwrap());
            }
        }
        answers
    }

    #[tokio::test]
    async fn the_sdk_server_answers_the_protocol() {
        let a = exchange(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": "x", "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                   "params": {"name": "rm_rf", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "branch_return", "arguments": {"branch_id": "br-x"}}}),
        ])
        .await;
        assert_eq!(a[0]["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(a[0]["result"]["serverInfo"]["name"], "ctx");
        let names: Vec<_> = a[1]["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, TOOL_NAMES);
        assert_eq!(a[1]["id"], "x");
        assert_eq!(a[2]["error"]["code"], -32602, "{}", a[2]);
        // A tool's own failure is a result with isError, not a protocol error.
        assert_eq!(a[3]["result"]["isError"], true, "{}", a[3]);
        assert!(
            a[3]["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("message"),
            "{}",
            a[3]
        );
    }
}
