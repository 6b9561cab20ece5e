//! The commit routes (groups [`super::Group::Checkpoint`],
//! [`super::Group::History`], [`super::Group::Materialize`] and
//! [`super::Group::Resolve`]): checkpoint, show, update-metadata, history,
//! the summary queue, summarize, compact, materialize and resolve.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::error::ErrorBody;
use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState};
use crate::auth::Caller;
use crate::body_text::BodyText;
use crate::commit::Commit;
use crate::error::Error;
use crate::id::{BranchId, CommitId, Principal};
use crate::service::{
    BatchArtifact, BatchDone, BatchEntry, BudgetNotice, Delta, Limits, NewBatch, NewCommit,
    NewRefMove, ReadOf, ReadTarget, RefTarget, Service,
};
use crate::store::check_batch_size;
use crate::wire::{
    BatchRequest, BatchResponse, CheckpointRequest, CompactRequest, CompactResponse,
    HistoryResponse, MaterializeRequest, MaterializeResponse, MissingSummaryList,
    READ_CONTENT_BYTES, ReadRequest, ReadResponse, ResolveResponse, SummarizeRequest,
    UpdateMetadataRequest,
};

/// The response header a checkpoint into a branch carries from 80% of its
/// budget (and when it exhausted it).
pub const BUDGET_WARNING: &str = "ctx-budget-warning";

/// The response header, one per warning, a checkpoint stored as written
/// although it looks wrong carries (a runtime's tool result that answers
/// no tool use in the chain).
pub const CHECKPOINT_WARNING: &str = "ctx-warning";

/// Records `req` as `POST /v1/commits` does: converted by `new_commit`,
/// errors about the delta naming the field it was sent in.
///
/// # Errors
/// As [`Service::checkpoint`].
pub async fn submit_checkpoint(
    service: &Service,
    tenant: &crate::id::TenantId,
    req: CheckpointRequest,
) -> Result<crate::service::Checkpointed, Error> {
    // The service names an inline delta `delta`; it may have come as
    // `delta_base64`.
    let field = delta_field(&req);
    let new = new_commit(req, service.limits())?;
    service
        .checkpoint(tenant, new)
        .await
        .map_err(|e| match e.field.as_deref() {
            Some("delta") if field != "delta" => e.with_field(field),
            _ => e,
        })
}

/// The request field that carries the delta.
fn delta_field(req: &CheckpointRequest) -> &'static str {
    match (&req.artifact_ref, &req.delta, &req.delta_base64) {
        (None, None, Some(_)) => "delta_base64",
        (Some(_), None, None) => "artifact_ref",
        _ => "delta",
    }
}

/// The commit `req` asks for: exactly one of `artifact_ref`, `delta` and
/// `delta_base64` becomes its [`Delta`]. A checkpoint whose ref is
/// `branches/<br-…>`, or whose session is a `br-…` id, writes into that
/// branch's chain and counts against its budget.
///
/// # Errors
/// `Invalid` for none or several deltas, or bad base64; `TooLarge` for an
/// inline delta over the artifact limit.
fn new_commit(req: CheckpointRequest, limits: &Limits) -> Result<NewCommit, Error> {
    let delta = match (req.artifact_ref, req.delta, req.delta_base64) {
        (Some(art), None, None) => Delta::Stored(art),
        (None, Some(text), None) => {
            limits.check_artifact_size("delta", text.len())?;
            // No copy: the text may still share the request body.
            Delta::Inline(text.into_bytes())
        }
        (None, None, Some(b64)) => Delta::Inline(decode_base64("delta_base64", b64, limits)?),
        _ => {
            return Err(Error::invalid(
                "delta",
                "give exactly one of artifact_ref, delta and delta_base64",
            ));
        }
    };
    let branch = req
        .ref_move
        .as_ref()
        .and_then(|m| crate::branch::branch_of_ref(&m.name))
        .or_else(|| {
            req.session_id
                .as_ref()
                .and_then(|s| s.as_str().parse::<BranchId>().ok())
        });
    Ok(NewCommit {
        parent: req.parent,
        commit_type: req.commit_type,
        format: req.format,
        delta,
        template: req.template,
        principal: req.principal,
        machine: req.machine,
        session_id: req.session_id.map(|s| s.as_str().to_owned()),
        checkpoint: req.checkpoint,
        ticket_id: req.ticket_id,
        thread_id: req.thread_id,
        summary: req.summary,
        message_count: req.message_count,
        token_count: req.token_count,
        created_at: req.created_at,
        tags: req.tags,
        ref_move: req.ref_move,
        branch,
    })
}

/// Records a checkpoint: 201 with the new commit, or 200 with the stored one
/// when the same checkpoint (same `created_at`) was recorded before. Into a
/// branch's chain (`ref: branches/br-…`) it counts against the budget: the
/// `ctx-budget-warning` header from 80%, a forced return at 100%, then 409.
/// A `ctx-warning` header per thing stored as written although it looks
/// wrong (a runtime transcript's tool result answering no tool use).
#[utoipa::path(post, path = "/v1/commits", tag = "commits", request_body = CheckpointRequest,
    responses((status = 201, description = "Recorded", body = Commit,
            headers(("ctx-budget-warning" = String, description = "Into a branch at 80% of its budget or more"))),
        (status = 200, description = "Recorded before", body = Commit),
        (status = 400, description = "A malformed request, or a parent, artifact or format that does not exist", body = ErrorBody),
        (status = 404, description = "The branch of the ref does not exist", body = ErrorBody),
        (status = 409, description = "The ref moved (`current` says where to), or the branch ended", body = ErrorBody),
        (status = 413, description = "The delta or the body over its limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn checkpoint(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<CheckpointRequest>,
) -> ApiResult<Response> {
    let done = submit_checkpoint(&s.service, &caller.tenant, req).await?;
    let crate::service::Checkpointed {
        commit,
        created,
        budget: notice,
        warnings,
    } = done;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = (status, axum::Json(commit)).into_response();
    add_notices(&mut resp, notice.as_ref(), &warnings);
    Ok(resp)
}

/// Adds a checkpoint's notices to its response: the budget warning of a
/// checkpoint into a branch at 80%+ of its budget (or the one that
/// exhausted it), and one `ctx-warning` per thing stored as written
/// although it looks wrong (as ASCII).
fn add_notices(resp: &mut Response, budget: Option<&BudgetNotice>, warnings: &[String]) {
    if let Some(n) = budget
        && let Ok(v) = axum::http::HeaderValue::from_str(&n.message)
    {
        resp.headers_mut().insert(BUDGET_WARNING, v);
    }
    for w in warnings {
        let ascii: String = w
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(v) = axum::http::HeaderValue::from_str(&ascii) {
            resp.headers_mut().append(CHECKPOINT_WARNING, v);
        }
    }
}

/// Records `req` as `POST /v1/batch` does: each commit converted as a
/// checkpoint's is (errors naming `commits[i].<field>`, the field its
/// delta was sent in), each artifact decoded, each ref move's target
/// taken from `target` or `target_in_batch`.
///
/// # Errors
/// As [`Service::batch`]; `Invalid` for a commit with both `parent` and
/// `parent_in_batch`, an artifact with none or both of `text` and
/// `base64` (or bad base64), a ref move with none or both of `target` and
/// `target_in_batch`.
pub async fn submit_batch(
    service: &Service,
    tenant: &crate::id::TenantId,
    req: BatchRequest,
) -> Result<BatchDone, Error> {
    let limits = service.limits();
    let BatchRequest {
        artifacts,
        commits,
        refs,
    } = req;
    check_batch_size(commits.len(), refs.len())?;
    let mut batch = NewBatch::default();
    for (i, a) in artifacts.into_iter().enumerate() {
        let bytes = match (a.text, a.base64) {
            (Some(text), None) => {
                limits.check_artifact_size(&format!("artifacts[{i}].text"), text.len())?;
                text.into_bytes()
            }
            (None, Some(b64)) => decode_base64(&format!("artifacts[{i}].base64"), b64, limits)?,
            _ => {
                return Err(Error::invalid(
                    format!("artifacts[{i}]"),
                    format!("give exactly one of text and base64 for artifacts[{i}]"),
                ));
            }
        };
        batch.artifacts.push(BatchArtifact {
            artifact_ref: a.artifact_ref,
            bytes,
        });
    }
    let mut delta_fields = Vec::with_capacity(commits.len());
    for (i, c) in commits.into_iter().enumerate() {
        let (req, parent_in_batch) = c.into_parts();
        if parent_in_batch.is_some() && req.parent.is_some() {
            return Err(Error::invalid(
                format!("commits[{i}].parent_in_batch"),
                format!("commits[{i}] gives both parent and parent_in_batch; give one"),
            ));
        }
        let field = delta_field(&req);
        delta_fields.push(field);
        let new = new_commit(req, limits).map_err(|e| match e.field.clone() {
            Some(f) => e.with_field(format!("commits[{i}].{f}")),
            None => e,
        })?;
        batch.commits.push(BatchEntry {
            new,
            parent_in_batch,
        });
    }
    for (i, r) in refs.into_iter().enumerate() {
        let target = match (r.target, r.target_in_batch) {
            (Some(id), None) => RefTarget::Commit(id),
            (None, Some(k)) => RefTarget::InBatch(k),
            _ => {
                return Err(Error::invalid(
                    format!("refs[{i}].target"),
                    format!("give exactly one of target and target_in_batch for refs[{i}]"),
                ));
            }
        };
        batch.refs.push(NewRefMove {
            name: r.name,
            expected: r.expected,
            target,
        });
    }
    service.batch(tenant, batch).await.map_err(|e| {
        // The service names an inline delta `delta`; it may have come as
        // `delta_base64`.
        let renamed = e.field.as_deref().and_then(|f| {
            let (i, rest) = f.strip_prefix("commits[")?.split_once("].")?;
            let i: usize = i.parse().ok()?;
            (rest == "delta" && delta_fields.get(i).copied()? != "delta")
                .then(|| format!("commits[{i}].{}", delta_fields[i]))
        });
        match renamed {
            Some(f) => e.with_field(f),
            None => e,
        }
    })
}

/// Decodes base64 `b64` of request field `field`, refusing it over the
/// artifact limit before decoding.
fn decode_base64(field: &str, b64: BodyText, limits: &Limits) -> Result<bytes::Bytes, Error> {
    // The decoded size, exactly: padding is not bytes.
    let padding = b64
        .as_bytes()
        .iter()
        .rev()
        .take_while(|&&b| b == b'=')
        .count()
        .min(2);
    let decoded = (b64.len() / 4 * 3).saturating_sub(padding);
    limits.check_artifact_size(field, decoded)?;
    // In place in the request body's buffer when it can be.
    crate::body_text::decode_base64(b64)
        .map_err(|e| Error::invalid(field, format!("{field} is not valid base64: {e}")))
}

/// Writes a batch: the commits (each as a checkpoint, its parent an
/// existing commit or an earlier one of the batch), the artifacts they and
/// the caller name (inline, each by its hash) and the ref moves (each by
/// compare-and-swap), as ONE atomic write: a 4xx writes nothing. At most
/// 14 commits, and 7 × commits + refs at most 100 (one DynamoDB
/// transaction), on every backend. 201 when a commit was new; 200 when
/// every commit existed (a retry: nothing is written twice, and a ref
/// already at its target is left alone) or for ref moves alone.
#[utoipa::path(post, path = "/v1/batch", tag = "commits", request_body = BatchRequest,
    responses((status = 201, description = "Written; at least one commit is new", body = BatchResponse,
            headers(("ctx-budget-warning" = String, description = "A commit into a branch at 80% of its budget or more"))),
        (status = 200, description = "Written with no new commit: a retry, or ref moves alone", body = BatchResponse),
        (status = 400, description = "A malformed request naming the field (`artifacts[i].ref`, `commits[i].…`, `refs[i].…`), or a parent, artifact, ref target or format that does not exist", body = ErrorBody),
        (status = 409, description = "A ref moved (`field` is `refs[i].expected`, `current` says where it points), or a branch ended; nothing is written", body = ErrorBody),
        (status = 413, description = "Too many commits or refs for one transaction, an artifact over its limit, or the body over its limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn batch(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<BatchRequest>,
) -> ApiResult<Response> {
    let done = submit_batch(&s.service, &caller.tenant, req).await?;
    let status = if done.commits.iter().any(|c| c.created) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let budget = done.commits.iter().rev().find_map(|c| c.budget.clone());
    let warnings: Vec<String> = done
        .commits
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.warnings.iter().map(move |w| format!("commits[{i}]: {w}")))
        .collect();
    let body = BatchResponse {
        commits: done.commits.into_iter().map(|c| c.commit).collect(),
        refs: done.refs,
    };
    let mut resp = (status, axum::Json(body)).into_response();
    add_notices(&mut resp, budget.as_ref(), &warnings);
    Ok(resp)
}

/// One commit.
#[utoipa::path(get, path = "/v1/commits/{ctx}", tag = "commits",
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit", body = Commit),
        (status = 400, description = "`ctx` is not a commit id", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(s.service.show(&caller.tenant, &id).await?))
}

/// Changes a commit's summary (null clears it) and replaces its tags.
#[utoipa::path(patch, path = "/v1/commits/{ctx}", tag = "commits", request_body = UpdateMetadataRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit as changed", body = Commit),
        (status = 400, description = "A malformed request", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn update_metadata(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<UpdateMetadataRequest>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .update_metadata(&caller.tenant, &id, req.summary, req.tags)
            .await?,
    ))
}

/// The commits from `ctx` towards the root, newest first.
#[utoipa::path(get, path = "/v1/commits/{ctx}/history", tag = "commits",
    params(("ctx" = CommitId, Path),
        ("depth" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 50, at most 1000)")),
    responses((status = 200, description = "The commits, newest first", body = HistoryResponse),
        (status = 400, description = "`ctx` is not a commit id, or `depth` is out of range", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn history(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Query,
) -> ApiResult<axum::Json<HistoryResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    let depth = q.optional_with("depth", str::parse::<usize>)?.unwrap_or(50);
    let commits = s.service.history(&caller.tenant, &id, depth).await?;
    Ok(axum::Json(HistoryResponse { commits }))
}

/// Commits lacking a summary, oldest first, with their summary queue state
/// (claimed, failed, retry time). Only `missing_summary=true` is listed.
#[utoipa::path(get, path = "/v1/commits", tag = "commits",
    params(("missing_summary" = crate::wire::MissingSummaryFilter, Query, description = "`true`: the commits lacking a summary (the only listing there is)"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 100, at most 1000)"),
        ("cursor" = Option<String>, Query, pattern = r"^-?[0-9]{1,18}\.ctx-[0-9a-f]{32}$", description = "The `next_cursor` of the previous page")),
    responses((status = 200, description = "The commits, oldest first", body = MissingSummaryList),
        (status = 400, description = "`missing_summary` is not true, or `limit` or `cursor` is malformed", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn missing_summaries(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<MissingSummaryList>> {
    let missing = q.optional_with("missing_summary", str::parse::<bool>)?;
    if missing != Some(true) {
        return Err(Error::invalid(
            "missing_summary",
            "listing commits needs missing_summary=true (only commits lacking a summary are listed)",
        )
        .into());
    }
    let limit = q
        .optional_with("limit", str::parse::<usize>)?
        .unwrap_or(100);
    let cursor = q.optional_with("cursor", str::parse::<crate::store::SummaryCursor>)?;
    let page = s
        .service
        .missing_summaries(&caller.tenant, cursor.as_ref(), limit)
        .await?;
    Ok(axum::Json(page.into()))
}

/// Summarizes one commit now (its back-off ignored) and returns it.
#[utoipa::path(post, path = "/v1/commits/{ctx}/summarize", tag = "commits", request_body = SummarizeRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The commit with its new summary", body = Commit),
        (status = 400, description = "A malformed request", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 409, description = "It has a summary and `force` is not set, or another run is summarizing it", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody),
        (status = 503, description = "No summarizer is configured, or it failed (recorded as `summary_error`)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn summarize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<SummarizeRequest>,
) -> ApiResult<axum::Json<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .summarize_one(&caller.tenant, &id, req.force)
            .await?,
    ))
}

/// Re-compacts the context at `ctx`: summarizes it (from its nearest
/// compaction) and records the summary as a compaction commit whose parent
/// is `ctx`, in the chain's format; a materialize of the new commit starts
/// at the summary, `stop: root` still reaches the original history.
#[utoipa::path(post, path = "/v1/commits/{ctx}/compact", tag = "commits", request_body = CompactRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 201, description = "The compaction was recorded", body = CompactResponse),
        (status = 200, description = "The same compaction was recorded before", body = CompactResponse),
        (status = 400, description = "A malformed request or an unknown summarizer", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 409, description = "The ref moved", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody),
        (status = 503, description = "The summarizer failed; nothing was recorded", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn compact(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<CompactRequest>,
) -> ApiResult<Response> {
    let id: CommitId = path_id("ctx", &id)?;
    let summarizer = s.service.summarizer_named(req.summarizer.as_deref())?;
    let done = s
        .service
        .compact(&caller.tenant, &id, summarizer.as_ref(), req.ref_move)
        .await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = CompactResponse {
        commit: done.commit,
        replaced_messages: done.replaced_messages,
        replaced_tokens: done.replaced_tokens,
    };
    Ok((status, axum::Json(body)).into_response())
}

/// Rebuilds the context at `ctx` from its stop point; cached per (commit, stop, format).
#[utoipa::path(post, path = "/v1/commits/{ctx}/materialize", tag = "commits", request_body = MaterializeRequest,
    params(("ctx" = CommitId, Path)),
    responses((status = 200, description = "The context", body = MaterializeResponse),
        (status = 400, description = "A malformed request, a stop that is not an ancestor, or a format that cannot be produced", body = ErrorBody),
        (status = 404, description = "No such commit", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn materialize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<MaterializeRequest>,
) -> ApiResult<axum::Json<MaterializeResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(axum::Json(
        s.service
            .materialize(
                &caller.tenant,
                &id,
                req.stop.unwrap_or_default(),
                req.format,
            )
            .await?
            .into(),
    ))
}

/// Reads the context at a ref's tip (or at a commit) in one request: the
/// commit, its materialization (as `POST /v1/commits/{ctx}/materialize`
/// makes it; with `delta`, the commit's own artifact instead) and, up to
/// 1 MiB, its bytes inline; a larger context is downloaded from
/// `artifact_ref`.
#[utoipa::path(post, path = "/v1/read", tag = "commits", request_body = ReadRequest,
    responses((status = 200, description = "The context", body = ReadResponse),
        (status = 400, description = "Neither or both of `ref` and `commit`, a stop that is not an ancestor, a format that cannot be produced, a delta read with a format, or a depth out of range or on a context read", body = ErrorBody),
        (status = 404, description = "No such ref or commit", body = ErrorBody),
        (status = 410, description = "A delta the read needs was evicted: the message names the compaction to read from", body = ErrorBody),
        (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn read(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<ReadRequest>,
) -> ApiResult<axum::Json<ReadResponse>> {
    let target = match (req.ref_name, req.commit) {
        (Some(name), None) => ReadTarget::Ref(name),
        (None, Some(id)) => ReadTarget::Commit(id),
        (Some(_), Some(_)) => {
            return Err(Error::invalid("commit", "give `ref` or `commit`, not both").into());
        }
        (None, None) => return Err(Error::invalid("ref", "give `ref` or `commit`").into()),
    };
    let depth = match req.depth {
        None => None,
        Some(_) if !req.delta => {
            return Err(Error::invalid("depth", "only a delta read takes a depth").into());
        }
        Some(d @ 1..=1000) => Some(d as usize),
        Some(_) => return Err(Error::invalid("depth", "depth is 1 to 1000").into()),
    };
    let of = match (req.delta, req.stop, req.format) {
        (false, stop, format) => ReadOf::Context {
            stop: stop.unwrap_or_default(),
            format,
        },
        (true, stop, None) => ReadOf::Delta { stop, depth },
        (true, _, Some(_)) => {
            return Err(Error::invalid("format", "a delta read has no format").into());
        }
    };
    let read = s
        .service
        .read(&caller.tenant, target, of, READ_CONTENT_BYTES)
        .await?;
    let (content, content_base64) = read
        .bytes
        .as_deref()
        .map_or((None, None), ReadResponse::content_fields);
    Ok(axum::Json(ReadResponse {
        commit: read.commit,
        parent: read.parent,
        result: read.materialization.result,
        cached: read.materialization.cached,
        content,
        content_base64,
    }))
}

/// What did `principal` know at `at`: the newest commit at or before it.
#[utoipa::path(get, path = "/v1/resolve", tag = "commits",
    params(("principal" = Principal, Query),
        ("at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "RFC 3339; default now")),
    responses((status = 200, description = "The commit", body = ResolveResponse),
        (status = 400, description = "`principal` or `at` missing or malformed", body = ErrorBody),
        (status = 404, description = "No commit of `principal` at or before `at`", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn resolve(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<axum::Json<ResolveResponse>> {
    let principal: Principal = q.required("principal")?;
    let at = q.optional_with("at", |v| {
        chrono::DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&chrono::Utc))
    })?;
    let id = s.service.resolve(&caller.tenant, &principal, at).await?;
    Ok(axum::Json(ResolveResponse { id }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::format::FormatId;

    /// A checkpoint of `delta_base64` under an artifact limit of `max` bytes.
    fn checkpoint_b64(b64: &str, max: usize) -> Result<NewCommit, Error> {
        let limits = Limits {
            max_artifact_bytes: max,
            ..Limits::default()
        };
        new_commit(
            CheckpointRequest {
                delta: None,
                delta_base64: Some(b64.into()),
                ..CheckpointRequest::new("p".parse().unwrap(), "t", FormatId::raw(), "")
            },
            &limits,
        )
    }

    #[test]
    fn the_base64_limit_is_on_the_decoded_bytes_exactly() {
        use base64::Engine as _;
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
        // 4 bytes encode as 8 characters with two '=': at the limit of 4.
        for n in [4, 3, 2, 1] {
            let new = checkpoint_b64(&b64(n), 4).unwrap();
            assert_eq!(new.delta, Delta::Inline(Bytes::from(vec![7u8; n])), "{n}");
        }
        let e = checkpoint_b64(&b64(5), 4).unwrap_err();
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (crate::ErrorKind::TooLarge, Some("delta_base64"))
        );
        assert!(e.message.contains("5 bytes"), "{}", e.message);
    }
}
