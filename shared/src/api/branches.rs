//! The context-folding routes (group [`super::Group::Branches`]):
//! a branch's creation, status and return, a session's end, and the
//! memories of ended branches ([`wire::MemorySearch`](crate::wire::MemorySearch)).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::branch::memories::{MemoryKind, MemoryQuery};
use crate::id::{BranchId, SessionId};
use crate::wire;
use crate::wire::{
    BranchCreateRequest, BranchCreated, BranchReturnRequest, BranchReturned, BranchStatusResponse,
    MemorySearchResponse, SessionEnded,
};

/// This family's routes.
pub(super) fn routes() -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::BranchCreate, _>(branch_create),
        super::route::<wire::BranchStatusOfSession, _>(branch_status_of_session),
        super::route::<wire::GetBranchStatus, _>(branch_status),
        super::route::<wire::BranchReturn, _>(branch_return),
        super::route::<wire::SessionEnd, _>(session_end),
        super::route::<wire::MemorySearch, _>(memory_search),
    ]
}

/// Serves [`BranchCreate`](crate::wire::BranchCreate).
pub(super) async fn branch_create(
    State(s): State<AppState>,
    caller: Caller,
    Json(req): Json<BranchCreateRequest>,
) -> ApiResult<Response> {
    let created: BranchCreated = s.service.branch_create(&caller, req.into()).await?.into();
    Ok((StatusCode::CREATED, Reply(created)).into_response())
}

/// Serves [`BranchStatusOfSession`](crate::wire::BranchStatusOfSession).
pub(super) async fn branch_status_of_session(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<Reply<BranchStatusResponse>> {
    let session = q
        .optional_with("session_id", str::parse::<SessionId>)?
        .ok_or_else(|| {
            crate::error::Error::invalid(
                "session_id",
                "give a branch id (/v1/branches/br-…) or the query parameter session_id",
            )
        })?;
    let active = s
        .service
        .branch_status_of_session(&caller, &session)
        .await?;
    Ok(Reply(BranchStatusResponse::of_session(&session, active)))
}

/// Serves [`GetBranchStatus`](crate::wire::GetBranchStatus).
pub(super) async fn branch_status(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Reply<BranchStatusResponse>> {
    let id: BranchId = path_id("br", &id)?;
    Ok(Reply(s.service.branch_status(&caller, &id).await?.into()))
}

/// Serves [`BranchReturn`](crate::wire::BranchReturn).
pub(super) async fn branch_return(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(req): Json<BranchReturnRequest>,
) -> ApiResult<Reply<BranchReturned>> {
    let id: BranchId = path_id("br", &id)?;
    let returned = match req.failure()? {
        None => s.service.branch_return(&caller, &id, &req.message).await?,
        Some(error) => {
            s.service
                .branch_fail(&caller, &id, error, &req.message)
                .await?
        }
    };
    Ok(Reply(returned.into()))
}

/// Serves [`SessionEnd`](crate::wire::SessionEnd).
pub(super) async fn session_end(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Reply<SessionEnded>> {
    let id: SessionId = id.parse()?;
    Ok(Reply(s.service.session_end(&caller, &id).await?.into()))
}

/// Serves [`MemorySearch`](crate::wire::MemorySearch).
pub(super) async fn memory_search(
    State(s): State<AppState>,
    caller: Caller,
    q: Query,
) -> ApiResult<Reply<MemorySearchResponse>> {
    let text = q
        .optional_with("q", |v| Ok::<_, std::convert::Infallible>(v.to_owned()))?
        .ok_or_else(|| crate::error::Error::invalid("q", "the query parameter q is required"))?;
    let limit = q.optional_with("limit", str::parse::<usize>)?.unwrap_or(10);
    let min_confidence = q
        .optional_with("min_confidence", |v| {
            v.parse::<f64>().map_err(|e| e.to_string()).and_then(|f| {
                if f.is_finite() {
                    Ok(f)
                } else {
                    Err("not a finite number".to_owned())
                }
            })
        })?
        .unwrap_or(0.0);
    let kind = q.optional::<MemoryKind>("kind")?;
    let found = s
        .service
        .memory_search(
            &caller,
            MemoryQuery {
                text,
                limit,
                min_confidence,
                kind,
            },
        )
        .await?;
    Ok(Reply(found.into()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body as AxBody;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use crate::api::{AppState, BUDGET_WARNING, Group, router};
    use crate::auth::{TokenAuth, token_hash};
    use crate::branch::{BranchConfig, Branching, NoTimer, RateLimits, RuleScrubber};
    use crate::clock::{Clock as _, ManualClock, SeededIds};
    use crate::service::Service;
    use crate::store::memory::MemoryBranchStore;
    use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
    use crate::store::{Stores, TokenStore};

    const ALICE: &str = "token-alice";
    const BOB: &str = "token-bob";
    const EVE: &str = "token-eve";

    async fn app() -> axum::Router {
        let meta = Arc::new(MemoryMetaStore::new());
        let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
        for (tok, tenant) in [(ALICE, "acme"), (BOB, "acme"), (EVE, "other")] {
            meta.add_token(&token_hash(tok), &tenant.parse().unwrap(), clock.now())
                .await
                .unwrap();
        }
        let stores = Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: meta.clone(),
        };
        let service = Service::new(stores, clock).with_branching(Branching {
            store: Arc::new(MemoryBranchStore::new()),
            timer: Arc::new(NoTimer),
            scrubber: Arc::new(RuleScrubber::new().unwrap()),
            ids: Arc::new(SeededIds::new(1)),
            config: BranchConfig {
                limits: RateLimits {
                    active_per_session: 3,
                    active_per_tenant: 100,
                    creations_per_minute: 100,
                },
                ..BranchConfig::default()
            },
        });
        router(
            AppState {
                service: Arc::new(service),
                auth: Arc::new(TokenAuth::new(meta)),
            },
            Group::ALL,
        )
    }

    async fn call(
        app: &axum::Router,
        token: &str,
        method: &str,
        uri: &str,
        body: Value,
    ) -> (u16, axum::http::HeaderMap, Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(if body.is_null() {
                AxBody::empty()
            } else {
                AxBody::from(body.to_string())
            })
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn branches_over_http() {
        let app = app().await;
        let (st, _, b) = call(
            &app,
            ALICE,
            "POST",
            "/v1/branches",
            json!({"session_id": "s1", "description": "explore", "prompt": "read it", "budget": 100}),
        )
        .await;
        assert_eq!(st, 201, "{b}");
        let id = b["branch_id"].as_str().unwrap().to_owned();
        assert_eq!(
            (b["depth"].clone(), b["budget_allocated"].clone()),
            (json!(1), json!(100))
        );
        let (st, _, s) = call(
            &app,
            ALICE,
            "GET",
            &format!("/v1/branches/{id}"),
            Value::Null,
        )
        .await;
        assert_eq!((st, s["status"].as_str()), (200, Some("active")));
        let (_, _, s) = call(
            &app,
            ALICE,
            "GET",
            "/v1/branches?session_id=s1",
            Value::Null,
        )
        .await;
        assert_eq!(s["branch_id"], json!(id));
        // Checkpoint into the branch: 85 tokens of 100 → a warning header.
        let (st, h, c) = call(
            &app,
            ALICE,
            "POST",
            "/v1/commits",
            json!({"parent": b["root_commit"], "commit_type": "delta", "format": "raw",
                   "delta": "x".repeat(340), "template": "t", "principal": "alice",
                   "checkpoint": "tool_call",
                   "ref": {"name": b["chain_ref"], "expected": b["root_commit"]}}),
        )
        .await;
        assert_eq!(st, 201, "{c}");
        let warn = h
            .get(BUDGET_WARNING)
            .expect("warning header")
            .to_str()
            .unwrap();
        assert!(warn.contains("85%"), "{warn}");
        // Another principal of the tenant, and another tenant, see nothing.
        for tok in [BOB, EVE] {
            let (st, _, _) =
                call(&app, tok, "GET", &format!("/v1/branches/{id}"), Value::Null).await;
            assert_eq!(st, 404);
            let (st, _, _) = call(
                &app,
                tok,
                "POST",
                &format!("/v1/branches/{id}/return"),
                json!({"message": "x"}),
            )
            .await;
            assert_eq!(st, 404);
        }
        let (st, _, r) = call(
            &app,
            ALICE,
            "POST",
            &format!("/v1/branches/{id}/return"),
            json!({"message": "found it"}),
        )
        .await;
        assert_eq!(
            (st, r["success"].clone(), r["tokens_used"].clone()),
            (200, json!(true), json!(85))
        );
        let (st, _, e) = call(
            &app,
            ALICE,
            "POST",
            &format!("/v1/branches/{id}/return"),
            json!({"message": "again"}),
        )
        .await;
        assert_eq!((st, e["error"]["kind"].as_str()), (409, Some("conflict")));
        let (_, _, s) = call(
            &app,
            ALICE,
            "GET",
            "/v1/branches?session_id=s1",
            Value::Null,
        )
        .await;
        assert_eq!(
            s,
            json!({"branch_id": null, "status": "No active branch found", "session_id": "s1",
                   "active_branches": []})
        );
        let (_, _, one) = call(
            &app,
            ALICE,
            "GET",
            &format!("/v1/branches/{id}"),
            Value::Null,
        )
        .await;
        assert!(one.get("active_branches").is_none(), "by branch id: {one}");
    }

    #[tokio::test]
    async fn limits_bad_input_and_session_end() {
        let app = app().await;
        for i in 0..3 {
            let (st, _, _) = call(
                &app,
                ALICE,
                "POST",
                "/v1/branches",
                json!({"session_id": "s", "description": format!("b{i}")}),
            )
            .await;
            assert_eq!(st, 201);
        }
        let (st, h, e) = call(
            &app,
            ALICE,
            "POST",
            "/v1/branches",
            json!({"session_id": "s", "description": "one too many"}),
        )
        .await;
        assert_eq!(
            (st, e["error"]["kind"].as_str()),
            (429, Some("rate_limited"))
        );
        assert_eq!(h.get("retry-after").unwrap(), "5");
        for (body, field) in [
            (json!({"session_id": "s"}), "description"),
            (
                json!({"session_id": "s", "description": "x".repeat(501)}),
                "description",
            ),
            (
                json!({"session_id": "s", "description": "d", "budget": 0}),
                "budget",
            ),
            (
                json!({"session_id": "s", "description": "d", "timeout_seconds": 0}),
                "timeout_seconds",
            ),
            (
                json!({"session_id": "s", "description": "d", "timeout_seconds": 5000}),
                "timeout_seconds",
            ),
            (
                json!({"session_id": "s", "description": "d", "colour": 1}),
                "colour",
            ),
            (
                json!({"session_id": "s", "description": "d", "parent_branch": "br-1"}),
                "parent_branch",
            ),
        ] {
            let (st, _, e) = call(&app, ALICE, "POST", "/v1/branches", body.clone()).await;
            assert_eq!(
                (st, e["error"]["field"].as_str()),
                (400, Some(field)),
                "{body} → {e}"
            );
        }
        let (_, _, e) = call(
            &app,
            ALICE,
            "POST",
            "/v1/branches",
            json!({"session_id": "s", "description": "d", "timeout_seconds": 5000}),
        )
        .await;
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("5000") && message.contains("600"),
            "names the value and the limit: {e}"
        );
        let (st, _, _) = call(&app, ALICE, "GET", "/v1/branches/br-nope", Value::Null).await;
        assert_eq!(st, 400);
        let (st, _, _) = call(&app, ALICE, "GET", "/v1/branches", Value::Null).await;
        assert_eq!(st, 400);
        let (st, _, e) = call(&app, BOB, "POST", "/v1/sessions/s/end", Value::Null).await;
        assert_eq!(st, 404, "{e}");
        let (st, _, e) = call(&app, ALICE, "POST", "/v1/sessions/s/end", Value::Null).await;
        assert_eq!(st, 200, "{e}");
        assert_eq!(e["returned"].as_array().unwrap().len(), 3);
        assert_eq!(e["failed"], json!([]));
    }

    #[tokio::test]
    async fn whole_numbers_written_as_floats_are_whole_numbers() {
        // JSON has one number type: 100.0 is the integer 100 (schemathesis
        // sends such values); 1.5 or -1 is not a count.
        let app = app().await;
        let (st, _, b) = call(
            &app,
            ALICE,
            "POST",
            "/v1/branches",
            json!({"session_id": "f", "description": "d", "budget": 100.0, "timeout_seconds": 60.0}),
        )
        .await;
        assert_eq!(st, 201, "{b}");
        assert_eq!(
            (b["budget_allocated"].clone(), b["timeout_seconds"].clone()),
            (json!(100), json!(60))
        );
        for (field, v) in [
            ("budget", json!(1.5)),
            ("budget", json!(-1)),
            ("timeout_seconds", json!(1e300)),
        ] {
            let mut body = json!({"session_id": "f", "description": "d"});
            body[field] = v.clone();
            let (st, _, e) = call(&app, ALICE, "POST", "/v1/branches", body).await;
            assert_eq!(
                (st, e["error"]["field"].as_str()),
                (400, Some(field)),
                "{field}={v} → {e}"
            );
        }
    }

    #[tokio::test]
    async fn a_session_id_is_refused_never_altered_in_every_route() {
        let app = app().await;
        // "a\0b" used to become "ab" on create while the other routes looked
        // up "a\0b": one type now refuses it everywhere.
        for bad in ["a\u{0}b", " s", "a b", "a@b", "../x"] {
            let (st, _, e) = call(
                &app,
                ALICE,
                "POST",
                "/v1/branches",
                json!({"session_id": bad, "description": "d"}),
            )
            .await;
            assert_eq!(
                (st, e["error"]["field"].as_str()),
                (400, Some("session_id")),
                "{bad:?} → {e}"
            );
        }
        for uri in [
            "/v1/branches?session_id=a%00b",
            "/v1/branches?session_id=a%20b",
        ] {
            let (st, _, e) = call(&app, ALICE, "GET", uri, Value::Null).await;
            assert_eq!(
                (st, e["error"]["field"].as_str()),
                (400, Some("session_id")),
                "{uri} → {e}"
            );
        }
        for uri in ["/v1/sessions/a%00b/end", "/v1/sessions/a%20b/end"] {
            let (st, _, e) = call(&app, ALICE, "POST", uri, Value::Null).await;
            assert_eq!(
                (st, e["error"]["field"].as_str()),
                (400, Some("session_id")),
                "{uri} → {e}"
            );
        }
        // Nothing was created under a normalised name.
        let (st, _, e) = call(
            &app,
            ALICE,
            "GET",
            "/v1/branches?session_id=ab",
            Value::Null,
        )
        .await;
        assert_eq!((st, &e["branch_id"]), (200, &Value::Null), "{e}");
    }
}
