//! The commit routes (groups [`super::Group::Checkpoint`],
//! [`super::Group::History`], [`super::Group::Materialize`] and
//! [`super::Group::Resolve`]): checkpoint, show, update-metadata, history,
//! the summary queue, summarize, compact, materialize and resolve.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::body_text::BodyText;
use crate::error::Error;
use crate::id::{BranchId, CommitId, Principal};
use crate::service::{
    BatchDone, BatchEntry, BudgetNotice, Delta, Limits, NewBatch, NewCommit, NewRefMove, ReadOf,
    ReadTarget, RefTarget, Service,
};
use crate::store::check_batch_size;
use crate::wire;
use crate::wire::{
    BatchRequest, BatchResponse, CheckpointRequest, Commit, CompactRequest, CompactResponse,
    HistoryResponse, MaterializeRequest, MaterializeResponse, MissingSummaryList,
    READ_CONTENT_BYTES, ReadRequest, ReadResponse, ResolveResponse, SummarizeRequest,
    UpdateMetadataRequest,
};

/// This family's routes.
pub(super) fn routes() -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::Checkpoint, _>(checkpoint),
        super::route::<wire::Batch, _>(batch),
        super::route::<wire::GetCommit, _>(show),
        super::route::<wire::UpdateMetadata, _>(update_metadata),
        super::route::<wire::History, _>(history),
        super::route::<wire::MissingSummaries, _>(missing_summaries),
        super::route::<wire::Summarize, _>(summarize),
        super::route::<wire::Compact, _>(compact),
        super::route::<wire::Materialize, _>(materialize),
        super::route::<wire::Read, _>(read),
        super::route::<wire::Resolve, _>(resolve),
    ]
}

/// The response header a checkpoint into a branch carries from 80% of its
/// budget (and when it exhausted it).
pub const BUDGET_WARNING: &str = "ctx-budget-warning";

/// The response header, one per warning, a checkpoint stored as written
/// although it looks wrong carries (a runtime's tool result that answers
/// no tool use in the chain).
pub const CHECKPOINT_WARNING: &str = "ctx-warning";

/// Records `req` as [`Checkpoint`](crate::wire::Checkpoint) does: converted by `new_commit`,
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
        commit_type: req.commit_type.into(),
        format: req.format,
        delta,
        template: req.template,
        principal: req.principal,
        machine: req.machine,
        session_id: req.session_id,
        checkpoint: req.checkpoint.into(),
        ticket_id: req.ticket_id,
        thread_id: req.thread_id,
        summary: req.summary,
        message_count: req.message_count,
        token_count: req.token_count,
        created_at: req.created_at,
        tags: req.tags,
        ref_move: req.ref_move.map(Into::into),
        branch,
    })
}

/// Serves [`Checkpoint`](crate::wire::Checkpoint).
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
    let mut resp = (status, Reply(Commit::from(commit))).into_response();
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

/// Records `req` as [`Batch`](crate::wire::Batch) does: each commit converted as a
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
        batch.artifacts.push(crate::service::ClaimedArtifact {
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
            on_stale: r.on_stale.into(),
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

/// Serves [`Batch`](crate::wire::Batch).
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
        commits: done.commits.into_iter().map(|c| c.commit.into()).collect(),
        refs: done.refs.into_iter().map(|r| r.map(Into::into)).collect(),
    };
    let mut resp = (status, Reply(body)).into_response();
    add_notices(&mut resp, budget.as_ref(), &warnings);
    Ok(resp)
}

/// Serves [`GetCommit`](crate::wire::GetCommit).
pub(super) async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Reply<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(Reply(s.service.show(&caller.tenant, &id).await?.into()))
}

/// Serves [`UpdateMetadata`](crate::wire::UpdateMetadata).
pub(super) async fn update_metadata(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<UpdateMetadataRequest>,
) -> ApiResult<Reply<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(Reply(
        s.service
            .update_metadata(&caller.tenant, &id, req.summary, req.tags)
            .await?
            .into(),
    ))
}

/// Serves [`History`](crate::wire::History).
pub(super) async fn history(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Query,
) -> ApiResult<Reply<HistoryResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    let depth = q.optional_with("depth", str::parse::<usize>)?.unwrap_or(50);
    let cursor: Option<CommitId> = q.optional("cursor")?;
    let (commits, next) = s
        .service
        .history_page(&caller.tenant, &id, cursor.as_ref(), depth)
        .await?;
    Ok(Reply(HistoryResponse {
        commits: commits.into_iter().map(Into::into).collect(),
        next,
    }))
}

/// Serves [`MissingSummaries`](crate::wire::MissingSummaries).
pub(super) async fn missing_summaries(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<Reply<MissingSummaryList>> {
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
    Ok(Reply(page.into()))
}

/// Serves [`Summarize`](crate::wire::Summarize).
pub(super) async fn summarize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<SummarizeRequest>,
) -> ApiResult<Reply<Commit>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(Reply(
        s.service
            .summarize_one(&caller.tenant, &id, req.force)
            .await?
            .into(),
    ))
}

/// Serves [`Compact`](crate::wire::Compact).
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
        .compact(
            &caller.tenant,
            &id,
            summarizer.as_ref(),
            req.ref_move.map(Into::into),
        )
        .await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = CompactResponse {
        commit: done.commit.into(),
        replaced_messages: done.replaced_messages,
        replaced_tokens: done.replaced_tokens,
    };
    Ok((status, Reply(body)).into_response())
}

/// Serves [`Materialize`](crate::wire::Materialize).
pub(super) async fn materialize(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<MaterializeRequest>,
) -> ApiResult<Reply<MaterializeResponse>> {
    let id: CommitId = path_id("ctx", &id)?;
    Ok(Reply(
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

/// Serves [`Read`](crate::wire::Read).
pub(super) async fn read(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<ReadRequest>,
) -> ApiResult<Reply<ReadResponse>> {
    let target = match (req.ref_name, req.commit) {
        (Some(name), None) => ReadTarget::Ref(name),
        (None, Some(Some(id))) => ReadTarget::Commit(id),
        (None, Some(None)) => ReadTarget::Fresh,
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
    Ok(Reply(ReadResponse {
        commit: read.commit,
        parent: read.parent,
        result: read.materialization.result.into(),
        cached: read.materialization.cached,
        content,
        content_base64,
    }))
}

/// Serves [`Resolve`](crate::wire::Resolve).
pub(super) async fn resolve(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<Reply<ResolveResponse>> {
    let principal: Principal = q.required("principal")?;
    let at = q.optional_with("at", |v| {
        chrono::DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&chrono::Utc))
    })?;
    let id = s.service.resolve(&caller.tenant, &principal, at).await?;
    Ok(Reply(ResolveResponse { id }))
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
