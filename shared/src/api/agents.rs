//! The agent routes (group [`super::Group::Agents`]): settings, the rolling
//! window, clear, saves (history, session files, restore) and the
//! working-context cache.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::extract::{Body, Path, Query, parse_json, path_id};
use super::{ApiResult, AppState, Reply};
use crate::agent::{SaveId, check_process_id};
use crate::auth::Caller;
use crate::commit::{check_text, limits};
use crate::error::Error;
use crate::format::FormatId;
use crate::id::Principal;
use crate::service::NewProcess;
use crate::wire;
use crate::wire::{
    AgentSettings, AssembledContextResponse, Cleared, PatchAgentRequest, ProcessList,
    PutProcessRequest, RestoreRequest, RestoreResponse, Restored, RunningProcess, SaveList,
    SaveRequest, SessionFile, Window, WorkingContextSnapshot, WorkingContextStored,
};

/// This family's routes.
pub(super) fn routes() -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::GetAgent, _>(get_agent),
        super::route::<wire::PatchAgent, _>(patch_agent),
        super::route::<wire::ClearContext, _>(clear),
        super::route::<wire::ContextWindow, _>(window),
        super::route::<wire::SaveContext, _>(save),
        super::route::<wire::ListSaves, _>(list_saves),
        super::route::<wire::GetSave, _>(get_save),
        super::route::<wire::RestoreSave, _>(restore_save),
        super::route::<wire::PutWorkingContext, _>(put_working_context),
        super::route::<wire::RestoreWorkingContext, _>(restore_working_context),
        super::route::<wire::ListProcesses, _>(list_processes),
        super::route::<wire::PutProcess, _>(put_process),
        super::route::<wire::DeleteProcess, _>(delete_process),
        super::route::<wire::AssembleContext, _>(assemble),
    ]
}

fn agent(s: &str) -> Result<Principal, Error> {
    path_id("agent", s)
}

/// A body whose fields are all optional: absent, JSON whitespace or `null`
/// is `{}`; anything else must be a JSON object (serde would read a struct
/// from an array too). Only JSON's whitespace counts: a form feed, which
/// is whitespace to ASCII, is not, and such a body is refused.
fn optional_object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = trim_json_whitespace(bytes);
    if text.is_empty() || text == b"null" {
        return parse_json(b"{}");
    }
    object(bytes)
}

/// `bytes` without JSON's whitespace (space, tab, newline, carriage
/// return) at either end.
fn trim_json_whitespace(bytes: &[u8]) -> &[u8] {
    let json_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = bytes
        .iter()
        .position(|b| !json_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !json_space(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// A body that must be a JSON object (serde would read a struct from an
/// array too).
fn object<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    if trim_json_whitespace(bytes).first() != Some(&b'{') {
        return Err(Error::invalid("body", "the body must be a JSON object"));
    }
    parse_json(bytes)
}

/// Serves [`GetAgent`](crate::wire::GetAgent).
pub(super) async fn get_agent(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<Reply<AgentSettings>> {
    let a = agent(&a)?;
    Ok(Reply(
        s.service.agent_settings(&caller.tenant, &a).await?.into(),
    ))
}

/// Serves [`PatchAgent`](crate::wire::PatchAgent).
pub(super) async fn patch_agent(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<Reply<AgentSettings>> {
    let a = agent(&a)?;
    let req: PatchAgentRequest = optional_object(&body)?;
    Ok(Reply(
        s.service
            .patch_agent(&caller.tenant, &a, &req.into())
            .await?
            .into(),
    ))
}

/// Serves [`ClearContext`](crate::wire::ClearContext).
pub(super) async fn clear(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<Reply<Cleared>> {
    let a = agent(&a)?;
    Ok(Reply(Cleared {
        last_clear: s.service.clear_context(&caller.tenant, &a).await?,
    }))
}

/// Serves [`ContextWindow`](crate::wire::ContextWindow).
pub(super) async fn window(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    q: Query,
) -> ApiResult<Reply<Window>> {
    let a = agent(&a)?;
    let thread = q.optional_with("thread_id", |v| {
        Ok::<_, std::convert::Infallible>(v.to_owned())
    })?;
    if let Some(t) = &thread {
        check_text("thread_id", t, limits::SHORT_TEXT)?;
    }
    let format: Option<FormatId> = q.optional("format")?;
    Ok(Reply(
        s.service
            .context_window(&caller.tenant, &a, thread.as_deref(), format)
            .await?
            .into(),
    ))
}

/// Serves [`SaveContext`](crate::wire::SaveContext).
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
    Ok((StatusCode::CREATED, Reply(wire::SaveRecord::from(rec))).into_response())
}

/// Serves [`ListSaves`](crate::wire::ListSaves).
pub(super) async fn list_saves(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<Reply<SaveList>> {
    let a = agent(&a)?;
    Ok(Reply(SaveList {
        saves: s
            .service
            .context_history(&caller.tenant, &a)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    }))
}

/// Serves [`GetSave`](crate::wire::GetSave).
pub(super) async fn get_save(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<Reply<SessionFile>> {
    let a = agent(&a)?;
    let id: SaveId = path_id("save_id", &id)?;
    Ok(Reply(
        s.service
            .context_save_file(&caller.tenant, &a, &id)
            .await?
            .into(),
    ))
}

/// Serves [`RestoreSave`](crate::wire::RestoreSave).
pub(super) async fn restore_save(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<Reply<Restored>> {
    let a = agent(&a)?;
    let id: SaveId = path_id("save_id", &id)?;
    Ok(Reply(Restored {
        save_id: id,
        commits: s
            .service
            .restore_save(&caller.tenant, &a, &id)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    }))
}

/// Serves [`PutWorkingContext`](crate::wire::PutWorkingContext).
pub(super) async fn put_working_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<Reply<WorkingContextStored>> {
    let a = agent(&a)?;
    let req: WorkingContextSnapshot = object(&body)?;
    let epoch_id = req.epoch_id;
    let artifact_ref = s
        .service
        .put_working_context(&caller.tenant, &a, &req.into())
        .await?;
    Ok(Reply(WorkingContextStored {
        epoch_id,
        artifact_ref,
    }))
}

/// Serves [`RestoreWorkingContext`](crate::wire::RestoreWorkingContext).
pub(super) async fn restore_working_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    Body(body): Body,
) -> ApiResult<Reply<RestoreResponse>> {
    let a = agent(&a)?;
    let req: RestoreRequest = optional_object(&body)?;
    Ok(Reply(
        s.service
            .restore_working_context(&caller.tenant, &a, &req.into())
            .await?
            .into(),
    ))
}

/// Serves [`PutProcess`](crate::wire::PutProcess).
pub(super) async fn put_process(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
    Body(body): Body,
) -> ApiResult<Reply<RunningProcess>> {
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
    Ok(Reply(RunningProcess::from(
        crate::agent::RunningProcess::new(id, p),
    )))
}

/// Serves [`DeleteProcess`](crate::wire::DeleteProcess).
pub(super) async fn delete_process(
    State(s): State<AppState>,
    caller: Caller,
    Path((a, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let a = agent(&a)?;
    s.service.delete_process(&caller.tenant, &a, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Serves [`ListProcesses`](crate::wire::ListProcesses).
pub(super) async fn list_processes(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
) -> ApiResult<Reply<ProcessList>> {
    let a = agent(&a)?;
    let processes = s
        .service
        .list_processes(&caller.tenant, &a)
        .await?
        .into_iter()
        .map(|(id, p)| RunningProcess::from(crate::agent::RunningProcess::new(id, p)))
        .collect();
    Ok(Reply(ProcessList { processes }))
}

/// Serves [`AssembleContext`](crate::wire::AssembleContext).
pub(super) async fn assemble(
    State(s): State<AppState>,
    caller: Caller,
    Path(a): Path<String>,
    q: Query,
) -> ApiResult<Reply<AssembledContextResponse>> {
    let a = agent(&a)?;
    let thread = q
        .optional_with("thread_id", |v| {
            Ok::<_, std::convert::Infallible>(v.to_owned())
        })?
        .ok_or_else(|| Error::invalid("thread_id", "the query parameter thread_id is required"))?;
    check_text("thread_id", &thread, limits::SHORT_TEXT)?;
    let format: Option<FormatId> = q.optional("format")?;
    Ok(Reply(
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
