//! The agent routes (group [`super::Group::Agents`]): settings, the rolling
//! window, clear, saves (history, session files, restore) and the
//! working-context cache.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::error::ErrorBody;
use super::extract::{Body, Path, Query, parse_json, path_id};
use super::{ApiResult, AppState};
use crate::agent::{SaveId, SaveRecord, check_process_id};
use crate::auth::Caller;
use crate::commit::{check_text, limits};
use crate::error::Error;
use crate::format::FormatId;
use crate::id::Principal;
use crate::service::NewProcess;
use crate::wire::{
    AgentSettings, AssembledContextResponse, Cleared, PatchAgentRequest, ProcessList,
    PutProcessRequest, RestoreRequest, RestoreResponse, Restored, RunningProcess, SaveList,
    SaveRequest, SessionFile, Window, WorkingContextSnapshot, WorkingContextStored,
};

fn agent(s: &str) -> Result<Principal, Error> {
    path_id("agent", s)
}

/// A body whose fields are all optional: absent, empty or `null` is `{}`;
/// anything else must be a JSON object (serde would read a struct from an
/// array too).
fn optional_object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = bytes.trim_ascii();
    if text.is_empty() || text == b"null" {
        return parse_json(b"{}");
    }
    object(text)
}

/// A body that must be a JSON object (serde would read a struct from an
/// array too).
fn object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    if bytes.trim_ascii().first() != Some(&b'{') {
        return Err(Error::invalid("body", "the body must be a JSON object"));
    }
    parse_json(bytes)
}

/// An agent's settings (the defaults for an agent never configured).
#[utoipa::path(get, path = "/v1/agents/{agent}", tag = "agents",
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The settings", body = AgentSettings),
        (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn get_agent(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<axum::Json<AgentSettings>> {
    let a = agent(&a)?;
    Ok(axum::Json(
        s.service.agent_settings(&caller.tenant, &a).await?.into(),
    ))
}

/// Changes an agent's settings: the rolling window's length, whether its
/// working-context cache is refreshed at safe boundaries, the system prompt
/// and the docs workspace of its assembled context.
#[utoipa::path(patch, path = "/v1/agents/{agent}", tag = "agents", request_body = Option<PatchAgentRequest>,
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The settings as changed", body = AgentSettings),
        (status = 400, description = "`window_seconds` not positive or over ten years, `system_prompt` over 64 KiB or with control characters, `docs_workspace` not a workspace id, or a malformed request (nothing written)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn patch_agent(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<axum::Json<AgentSettings>> {
    let a = agent(&a)?;
    let req: PatchAgentRequest = optional_object(&body)?;
    Ok(axum::Json(
        s.service
            .patch_agent(&caller.tenant, &a, &req.into())
            .await?
            .into(),
    ))
}

/// Moves the agent's clear marker to now: every thread's window starts
/// there. Deletes nothing.
#[utoipa::path(post, path = "/v1/agents/{agent}/clear", tag = "agents",
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The new marker", body = Cleared),
        (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn clear(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<axum::Json<Cleared>> {
    let a = agent(&a)?;
    Ok(axum::Json(Cleared {
        last_clear: s.service.clear_context(&caller.tenant, &a).await?,
    }))
}

/// The agent's live context: the messages of its commits created after
/// max(last_clear, now - window_seconds), for one thread or all, oldest
/// first, joined in `format`.
#[utoipa::path(get, path = "/v1/agents/{agent}/window", tag = "agents",
    params(("agent" = Principal, Path),
        ("thread_id" = Option<String>, Query, min_length = 1, max_length = 256, pattern = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$",
            description = "One thread (default: every thread): 1 to 256 bytes, no control characters but tab and newline"),
        ("format" = Option<FormatId>, Query, description = "Default: the newest commit's")),
    responses((status = 200, description = "The window", body = Window),
        (status = 400, description = "A malformed `thread_id` or `format`, or commits that cannot be turned into it", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn window(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<Window>> {
    let a = agent(&a)?;
    let thread = q.optional_with("thread_id", |v| {
        Ok::<_, std::convert::Infallible>(v.to_owned())
    })?;
    if let Some(t) = &thread {
        check_text("thread_id", t, limits::SHORT_TEXT)?;
    }
    let format: Option<FormatId> = q.optional("format")?;
    Ok(axum::Json(
        s.service
            .context_window(&caller.tenant, &a, thread.as_deref(), format)
            .await?
            .into(),
    ))
}

/// Saves every thread's window as a session file with a summary (the
/// configured summarizer's; `(summary generation failed)` when it fails).
/// Does not clear.
#[utoipa::path(post, path = "/v1/agents/{agent}/saves", tag = "agents", request_body = Option<SaveRequest>,
    params(("agent" = Principal, Path)),
    responses((status = 201, description = "The save", body = SaveRecord),
        (status = 400, description = "A malformed `description`", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn save(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<Response> {
    let a = agent(&a)?;
    let req: SaveRequest = optional_object(&body)?;
    let rec = s
        .service
        .save_context(&caller.tenant, &a, req.description)
        .await?;
    Ok((StatusCode::CREATED, axum::Json(rec)).into_response())
}

/// The agent's saves, newest first.
#[utoipa::path(get, path = "/v1/agents/{agent}/saves", tag = "agents",
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The saves", body = SaveList),
        (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn list_saves(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<axum::Json<SaveList>> {
    let a = agent(&a)?;
    Ok(axum::Json(SaveList {
        saves: s.service.context_history(&caller.tenant, &a).await?,
    }))
}

/// One save's session file (the messages included).
#[utoipa::path(get, path = "/v1/agents/{agent}/saves/{save_id}", tag = "agents",
    params(("agent" = Principal, Path), ("save_id" = SaveId, Path)),
    responses((status = 200, description = "The session file", body = SessionFile),
        (status = 400, description = "`save_id` is not a save id", body = ErrorBody),
        (status = 404, description = "No such save", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn get_save(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<axum::Json<SessionFile>> {
    let a = agent(&a)?;
    let id: SaveId = path_id("save_id", &id)?;
    Ok(axum::Json(
        s.service.context_save_file(&caller.tenant, &a, &id).await?,
    ))
}

/// Loads a save's messages back into the window: one commit per thread at
/// the current time, tagged `restored_from`.
#[utoipa::path(post, path = "/v1/agents/{agent}/saves/{save_id}/restore", tag = "agents",
    params(("agent" = Principal, Path), ("save_id" = SaveId, Path)),
    responses((status = 200, description = "The commits written", body = Restored),
        (status = 400, description = "`save_id` is not a save id", body = ErrorBody),
        (status = 404, description = "No such save", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn restore_save(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<axum::Json<Restored>> {
    let a = agent(&a)?;
    let id: SaveId = path_id("save_id", &id)?;
    Ok(axum::Json(Restored {
        save_id: id,
        commits: s.service.restore_save(&caller.tenant, &a, &id).await?,
    }))
}

/// Stores a working-context snapshot as the agent's cache.
#[utoipa::path(put, path = "/v1/agents/{agent}/working-context", tag = "agents", request_body = WorkingContextSnapshot,
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "Stored", body = WorkingContextStored),
        (status = 400, description = "A wrong `schema_version`, an `agent_id` that is not the route's agent, or malformed `messages` (nothing written)", body = ErrorBody),
        (status = 413, description = "Over the artifact limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn put_working_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<axum::Json<WorkingContextStored>> {
    let a = agent(&a)?;
    let req: WorkingContextSnapshot = object(&body)?;
    let artifact_ref = s
        .service
        .put_working_context(&caller.tenant, &a, &req)
        .await?;
    Ok(axum::Json(WorkingContextStored {
        epoch_id: req.epoch_id,
        artifact_ref,
    }))
}

/// Restores the agent's working context: the cache when it is valid, else
/// a rebuild from its memory (system prompt, episodic, semantic, raw tail),
/// stored as the new cache, with the reason the cache was rejected.
#[utoipa::path(post, path = "/v1/agents/{agent}/working-context/restore", tag = "agents", request_body = Option<RestoreRequest>,
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The working context and where it came from", body = RestoreResponse),
        (status = 400, description = "An option out of range", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn restore_working_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<axum::Json<RestoreResponse>> {
    let a = agent(&a)?;
    let req: RestoreRequest = optional_object(&body)?;
    Ok(axum::Json(
        s.service
            .restore_working_context(&caller.tenant, &a, &req.into())
            .await?
            .into(),
    ))
}

/// Registers (or replaces) a process running for the agent: the status
/// preamble of its assembled context lists it until it is removed or
/// expires.
#[utoipa::path(put, path = "/v1/agents/{agent}/processes/{process_id}", tag = "agents", request_body = PutProcessRequest,
    params(("agent" = Principal, Path),
        ("process_id" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$",
            description = "The caller's id for it: 1 to 128 of A-Z, a-z, 0-9, '.', '_', ':' and '-'")),
    responses((status = 200, description = "The process as registered", body = RunningProcess),
        (status = 400, description = "A bad `process_id`, `description`, `thread_id` or `expires_at`, or `processes` when 64 others run (nothing written)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn put_process(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
    Body(body): Body,
) -> ApiResult<axum::Json<RunningProcess>> {
    let a = agent(&a)?;
    check_process_id(&id)?;
    let req: PutProcessRequest = object(&body)?;
    let p = s
        .service
        .put_process(
            &caller.tenant,
            &a,
            &id,
            NewProcess {
                description: req.description,
                started_at: req.started_at,
                thread_id: req.thread_id,
                expires_at: req.expires_at,
            },
        )
        .await?;
    Ok(axum::Json(RunningProcess::new(id, p)))
}

/// Removes a registered process.
#[utoipa::path(delete, path = "/v1/agents/{agent}/processes/{process_id}", tag = "agents",
    params(("agent" = Principal, Path),
        ("process_id" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$")),
    responses((status = 204, description = "Removed"),
        (status = 400, description = "A bad `process_id`", body = ErrorBody),
        (status = 404, description = "No such process (or it expired)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn delete_process(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let a = agent(&a)?;
    s.service.delete_process(&caller.tenant, &a, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The processes registered for the agent and still running, by id.
#[utoipa::path(get, path = "/v1/agents/{agent}/processes", tag = "agents",
    params(("agent" = Principal, Path)),
    responses((status = 200, description = "The processes", body = ProcessList),
        (status = 400, description = "`agent` is not a principal", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn list_processes(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<axum::Json<ProcessList>> {
    let a = agent(&a)?;
    let processes = s
        .service
        .list_processes(&caller.tenant, &a)
        .await?
        .into_iter()
        .map(|(id, p)| RunningProcess::new(id, p))
        .collect();
    Ok(axum::Json(ProcessList { processes }))
}

/// The context of an LLM call for the agent and a thread, in seed 001's
/// order: the system prompt, the agent's docs (its docs workspace's files,
/// bounded; what was cut is said), a thread and process status preamble
/// (its other active threads, the active folded branches of its sessions,
/// its running processes) and the thread's rolling window; as sections
/// and as one conversation in `format`.
#[utoipa::path(get, path = "/v1/agents/{agent}/context", tag = "agents",
    params(("agent" = Principal, Path),
        ("thread_id" = String, Query, min_length = 1, max_length = 256, pattern = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$",
            description = "The thread: 1 to 256 bytes, no control characters but tab and newline"),
        ("format" = Option<FormatId>, Query, description = "The conversation's format (default: the window's, else openai-chat-v1)")),
    responses((status = 200, description = "The assembled context", body = AssembledContextResponse),
        (status = 400, description = "A missing or malformed `thread_id`, an unknown `format`, or a window that cannot be turned into it", body = ErrorBody),
        (status = 413, description = "The conversation is over 4 MiB (read the window's artifact instead)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn assemble(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<AssembledContextResponse>> {
    let a = agent(&a)?;
    let thread = q
        .optional_with("thread_id", |v| {
            Ok::<_, std::convert::Infallible>(v.to_owned())
        })?
        .ok_or_else(|| Error::invalid("thread_id", "the query parameter thread_id is required"))?;
    check_text("thread_id", &thread, limits::SHORT_TEXT)?;
    let format: Option<FormatId> = q.optional("format")?;
    Ok(axum::Json(
        s.service
            .assemble_context(&caller.tenant, &a, &thread, format)
            .await?
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use utoipa::OpenApi;

    #[test]
    fn bodies_of_only_optional_fields_are_optional_in_the_document() {
        let doc = serde_json::to_value(super::super::ApiDoc::openapi()).unwrap();
        for (path, method) in [
            ("/v1/agents/{agent}", "patch"),
            ("/v1/agents/{agent}/saves", "post"),
            ("/v1/agents/{agent}/working-context/restore", "post"),
        ] {
            let body = &doc["paths"][path][method]["requestBody"];
            assert_ne!(body["required"], true, "{method} {path}: {body}");
        }
        let body = &doc["paths"]["/v1/agents/{agent}/working-context"]["put"]["requestBody"];
        assert_eq!(body["required"], true);
    }
}
