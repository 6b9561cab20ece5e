//! The lifecycle routes (group [`super::Group::Refs`]): erasing a session,
//! evicting a ref's old deltas, and the pins retention respects.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::MethodRouter;

use super::extract::{Json, Path, Query, path_id};
use super::{ApiResult, AppState, Reply};
use crate::auth::Caller;
use crate::error::Error;
use crate::id::{Principal, RefName, SessionId};
use crate::wire;
use crate::wire::{Erased, EvictRequest, Evicted, PinChanged, PinList};

/// This family's routes.
pub(super) fn routes() -> Vec<super::RouteDef> {
    vec![
        super::route::<wire::EvictRef, _>(evict_ref).wrap(suffix_guarded),
        super::route::<wire::EraseSession, _>(erase_session),
        super::route::<wire::ErasePrincipal, _>(erase_principal),
        super::route::<wire::ListPins, _>(list_pins),
        super::route::<wire::SetPin, _>(set_pin),
        super::route::<wire::DeletePin, _>(delete_pin),
    ]
}

/// Serves [`EraseSession`](crate::wire::EraseSession).
pub(super) async fn erase_session(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: Query,
) -> ApiResult<Reply<Erased>> {
    let id: SessionId = path_id("id", &id)?;
    let erased = s.service.erase_session(&caller.tenant, &id, cascade(&q)?);
    Ok(Reply(erased.await?.into()))
}

/// Serves [`ErasePrincipal`](crate::wire::ErasePrincipal).
pub(super) async fn erase_principal(
    State(s): State<AppState>,
    caller: Caller,
    Path(who): Path<String>,
    q: Query,
) -> ApiResult<Reply<Erased>> {
    let who: Principal = path_id("principal", &who)?;
    let erased = s
        .service
        .erase_principal(&caller.tenant, &who, cascade(&q)?);
    Ok(Reply(erased.await?.into()))
}

/// An erase's `cascade` parameter (default false).
fn cascade(q: &Query) -> crate::error::Result<bool> {
    Ok(q.optional_with("cascade", str::parse::<bool>)?
        .unwrap_or(false))
}

/// Serves [`EvictRef`](crate::wire::EvictRef).
pub(super) async fn evict_ref(
    State(s): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    Json(req): Json<EvictRequest>,
) -> ApiResult<Reply<Evicted>> {
    // Served on the route of the greedy `{*name}`: the name is what
    // precedes the suffix.
    let op = <wire::EvictRef as wire::Operation>::INFO;
    let suffix = op
        .suffix()
        .expect("eviction's path goes on after the ref's name");
    let Some(name) = path.strip_suffix(suffix) else {
        return Err(Error::not_found(format!(
            "route POST {}{path} (POST a ref's {})",
            refs_prefix(),
            op.openapi_path()
        ))
        .into());
    };
    let name: RefName = path_id("name", name)?;
    Ok(Reply(
        s.service
            .evict(&caller.tenant, &name, &req.before, req.force)
            .await?
            .into(),
    ))
}

/// Where the paths of refs by name start (`GetRef`'s path up to its
/// `{*name}`).
fn refs_prefix() -> &'static str {
    let path = <wire::GetRef as wire::Operation>::PATH;
    path.strip_suffix("{*name}")
        .expect("a ref's path ends with its name")
}

/// Whether `path` is eviction's: a ref's path with eviction's suffix.
fn is_evict(path: &str) -> bool {
    let op = <wire::EvictRef as wire::Operation>::INFO;
    op.suffix().is_some_and(|s| path.ends_with(s))
}

/// `m` behind the guard of every route on the refs' greedy path: the path
/// with eviction's suffix takes only POST, every other one only GET,
/// PUT and DELETE (the ref), so each answers 405 for the other's methods
/// before its body is read. (A ref whose last segment is the suffix is
/// therefore not reachable by name over HTTP; `list_refs` lists it.)
pub(super) fn suffix_guarded(m: MethodRouter<AppState>) -> MethodRouter<AppState> {
    m.route_layer(axum::middleware::from_fn(refs_suffix_guard))
}

async fn refs_suffix_guard(req: Request, next: Next) -> Response {
    if is_evict(req.uri().path()) != (req.method() == Method::POST) {
        return super::method_not_allowed(req.method().clone(), req.uri().clone()).await;
    }
    next.run(req).await
}

/// The `Allow` header of a path on the refs' greedy route, where one axum
/// route serves two documented paths: the ref's methods, or POST alone for
/// eviction.
pub(super) fn refs_allow(path: &str) -> Option<&'static str> {
    match path.strip_prefix(refs_prefix()) {
        Some(name) if !name.is_empty() => Some(if is_evict(path) {
            "POST"
        } else {
            "GET,HEAD,PUT,DELETE"
        }),
        _ => None,
    }
}

/// Serves [`ListPins`](crate::wire::ListPins).
pub(super) async fn list_pins(
    State(s): State<AppState>,
    caller: Caller,
) -> ApiResult<Reply<PinList>> {
    Ok(Reply(PinList {
        pins: s
            .service
            .pins(&caller.tenant)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    }))
}

/// The pin a route names. Its name is at most [`wire::PinName::max_bytes`]
/// of either kind, as the document says (`PinName`): a schema cannot make
/// the name's limit depend on the kind.
fn pin_of(kind: &str, name: &str) -> crate::error::Result<crate::store::Pin> {
    let pin = crate::store::Pin::parse(kind, name).map_err(|e| {
        let field = if e.field.as_deref() == Some("kind") {
            "kind"
        } else {
            "name"
        };
        e.with_field(field)
    })?;
    let max = wire::PinName::max_bytes();
    if name.len() > max {
        return Err(Error::invalid(
            "name",
            format!(
                "a pin's name is at most {max} bytes (a session id's limit), of either kind; \
                 this {kind} name is {}",
                name.len()
            ),
        ));
    }
    Ok(pin)
}

/// Serves [`SetPin`](crate::wire::SetPin).
pub(super) async fn set_pin(
    State(s): State<AppState>,
    caller: Caller,
    Path((kind, name)): Path<(String, String)>,
) -> ApiResult<Reply<PinChanged>> {
    pin(&s, &caller, &kind, &name, true).await
}

/// Serves [`DeletePin`](crate::wire::DeletePin).
pub(super) async fn delete_pin(
    State(s): State<AppState>,
    caller: Caller,
    Path((kind, name)): Path<(String, String)>,
) -> ApiResult<Reply<PinChanged>> {
    pin(&s, &caller, &kind, &name, false).await
}

/// Pins (or unpins) the session or ref `kind`/`name`.
async fn pin(
    s: &AppState,
    caller: &Caller,
    kind: &str,
    name: &str,
    pinned: bool,
) -> ApiResult<Reply<PinChanged>> {
    let pin = pin_of(kind, name)?;
    let changed = s.service.set_pin(&caller.tenant, &pin, pinned).await?;
    Ok(Reply(PinChanged {
        pin: pin.into(),
        pinned,
        changed,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body as AxBody;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use crate::api::testing::checkpoint_body;
    use crate::api::{AppState, Group, router};
    use crate::auth::{TokenAuth, token_hash};
    use crate::clock::{Clock as _, ManualClock};
    use crate::service::Service;
    use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
    use crate::store::{Stores, TokenStore};

    const A: &str = "token-acme";
    const B: &str = "token-other";

    async fn app() -> axum::Router {
        let meta = Arc::new(MemoryMetaStore::new());
        let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
        for (tok, tenant) in [(A, "acme"), (B, "other")] {
            meta.add_token(&token_hash(tok), &tenant.parse().unwrap(), clock.now())
                .await
                .unwrap();
        }
        let stores = Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: meta.clone(),
        };
        router(
            AppState {
                service: Arc::new(Service::new(stores, clock)),
                auth: Arc::new(TokenAuth::new(meta)),
            },
            Group::ALL,
        )
    }

    async fn call(
        app: &axum::Router,
        method: &str,
        uri: &str,
        tok: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {tok}"))
            .header("content-type", "application/json")
            .body(AxBody::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            ))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn commit(
        app: &axum::Router,
        session: &str,
        delta: &str,
        parent: Option<&str>,
    ) -> String {
        let mut body = checkpoint_body(delta, parent);
        body["session_id"] = json!(session);
        let (st, c) = call(app, "POST", "/v1/commits", A, Some(body)).await;
        assert_eq!(st, 201, "{c}");
        c["id"].as_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn erase_answers_409_for_forks_404_for_other_tenants_and_400_for_bad_ids() {
        let app = app().await;
        let a0 = commit(&app, "s-a", "canary ", None).await;
        let fork = commit(&app, "s-b", "fork ", Some(&a0)).await;

        let (st, e) = call(&app, "DELETE", "/v1/sessions/s-a", B, None).await;
        assert_eq!(st, 404, "another tenant's session: {e}");
        for (uri, field) in [
            ("/v1/sessions/bad%20id", "id"),
            ("/v1/sessions/s-a?cascade=maybe", "cascade"),
            ("/v1/pins/tenant/x", "kind"),
            ("/v1/pins/ref/a..b", "name"),
        ] {
            let method = if uri.starts_with("/v1/pins") {
                "PUT"
            } else {
                "DELETE"
            };
            let (st, e) = call(&app, method, uri, A, None).await;
            assert_eq!(st, 400, "{uri}: {e}");
            assert_eq!(e["error"]["field"], field, "{uri}: {e}");
        }
        let (st, e) = call(&app, "DELETE", "/v1/sessions/s-a", A, None).await;
        assert_eq!(st, 409, "{e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(&fork), "{e}");
        // It says how to go on in the API's words and the CLI's (issue 46:
        // CLI users were told "cascade=true").
        assert!(message.contains("?cascade=true"), "{message}");
        assert!(message.contains("--cascade"), "{message}");
        let (st, _) = call(&app, "GET", &format!("/v1/commits/{a0}"), A, None).await;
        assert_eq!(st, 200, "nothing removed");

        let (st, r) = call(&app, "DELETE", "/v1/sessions/s-a?cascade=true", A, None).await;
        assert_eq!(st, 200, "{r}");
        assert_eq!(r["commits"], 2);
        assert_eq!(r["cascaded"], 1);
        assert_eq!(r["artifacts"], 2);
        for id in [&a0, &fork] {
            let (st, _) = call(&app, "GET", &format!("/v1/commits/{id}"), A, None).await;
            assert_eq!(st, 404);
        }
        let (st, _) = call(&app, "DELETE", "/v1/sessions/s-a", A, None).await;
        assert_eq!(st, 404, "already erased");
    }

    #[tokio::test]
    async fn a_principal_erase_answers_409_404_400_and_removes_its_commits() {
        let app = app().await;
        let mut body = checkpoint_body("team secret ", None);
        body["principal"] = json!("team/bot@x");
        let (st, c) = call(&app, "POST", "/v1/commits", A, Some(body)).await;
        assert_eq!(st, 201, "{c}");
        let root = c["id"].as_str().unwrap().to_owned();
        // alice continues the bot's chain.
        let fork = commit(&app, "s-1", "alice turn ", Some(&root)).await;
        let uri = "/v1/principals/team%2Fbot%40x";

        let (st, e) = call(&app, "DELETE", uri, B, None).await;
        assert_eq!(st, 404, "another tenant's principal: {e}");
        for (uri, field) in [
            ("/v1/principals/bad%20name", "principal"),
            ("/v1/principals/alice?cascade=2", "cascade"),
        ] {
            let (st, e) = call(&app, "DELETE", uri, A, None).await;
            assert_eq!(st, 400, "{uri}: {e}");
            assert_eq!(e["error"]["field"], field, "{uri}: {e}");
        }
        let (st, e) = call(&app, "DELETE", uri, A, None).await;
        assert_eq!(st, 409, "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(&fork),
            "{e}"
        );
        let (st, _) = call(&app, "GET", &format!("/v1/commits/{root}"), A, None).await;
        assert_eq!(st, 200, "nothing removed");

        let (st, r) = call(&app, "DELETE", &format!("{uri}?cascade=true"), A, None).await;
        assert_eq!(st, 200, "{r}");
        assert_eq!(
            (r["commits"].as_u64(), r["cascaded"].as_u64()),
            (Some(2), Some(1))
        );
        for id in [&root, &fork] {
            let (st, _) = call(&app, "GET", &format!("/v1/commits/{id}"), A, None).await;
            assert_eq!(st, 404);
        }
        let (st, _) = call(&app, "DELETE", uri, A, None).await;
        assert_eq!(st, 404, "already erased");
    }

    #[tokio::test]
    async fn pins_are_set_listed_and_removed() {
        let app = app().await;
        let (st, p) = call(&app, "PUT", "/v1/pins/session/s-1", A, None).await;
        assert_eq!(st, 200);
        assert_eq!(
            p,
            json!({"pin": {"kind": "session", "name": "s-1"}, "pinned": true, "changed": true})
        );
        let (_, p) = call(&app, "PUT", "/v1/pins/ref/sessions/s-2/head", A, None).await;
        assert_eq!(
            p["pin"],
            json!({"kind": "ref", "name": "sessions/s-2/head"})
        );
        let (_, l) = call(&app, "GET", "/v1/pins", A, None).await;
        assert_eq!(
            l["pins"],
            json!([{"kind": "session", "name": "s-1"}, {"kind": "ref", "name": "sessions/s-2/head"}])
        );
        let (_, l) = call(&app, "GET", "/v1/pins", B, None).await;
        assert_eq!(l["pins"], json!([]));
        let (st, p) = call(&app, "DELETE", "/v1/pins/session/s-1", A, None).await;
        assert_eq!((st, &p["changed"]), (200, &json!(true)));
        let (_, p) = call(&app, "DELETE", "/v1/pins/session/s-1", A, None).await;
        assert_eq!(p["changed"], false);
    }

    /// A pin's name is at most 191 bytes of either kind (a session id's
    /// limit), as the document's `PinName` says: a longer ref name is
    /// refused naming `name`, to pin and to unpin alike.
    #[tokio::test]
    async fn a_pins_name_is_at_most_191_bytes_of_either_kind() {
        let app = app().await;
        let name = |n: usize| format!("r/{}", "x".repeat(n - 2));
        for kind in ["session", "ref"] {
            for method in ["PUT", "DELETE"] {
                let (st, p) = call(
                    &app,
                    method,
                    &format!("/v1/pins/{kind}/{}", name(191)),
                    A,
                    None,
                )
                .await;
                assert_eq!(st, 200, "{method} {kind}: {p}");
                let (st, p) = call(
                    &app,
                    method,
                    &format!("/v1/pins/{kind}/{}", name(192)),
                    A,
                    None,
                )
                .await;
                assert_eq!(
                    (st, p["error"]["field"].as_str()),
                    (400, Some("name")),
                    "{method} {kind}: {p}"
                );
            }
        }
        let (_, l) = call(&app, "GET", "/v1/pins", A, None).await;
        assert_eq!(l["pins"], json!([]));
    }

    #[tokio::test]
    async fn evict_answers_410_across_evicted_deltas_and_4xx_for_bad_input() {
        let app = app().await;
        let d0 = commit(&app, "s-e", "d0 ", None).await;
        let d1 = commit(&app, "s-e", "d1 ", Some(&d0)).await;
        let mut body = checkpoint_body("SUMMARY ", Some(&d1));
        body["commit_type"] = json!("compaction");
        let (st, c) = call(&app, "POST", "/v1/commits", A, Some(body)).await;
        assert_eq!(st, 201, "{c}");
        let c = c["id"].as_str().unwrap().to_owned();
        let d2 = commit(&app, "s-e", "d2 ", Some(&c)).await;
        let (st, _) = call(
            &app,
            "PUT",
            "/v1/refs/sessions/s-e",
            A,
            Some(json!({"target": d2})),
        )
        .await;
        assert_eq!(st, 200);

        // Bad input: 4xx naming the field, nothing evicted.
        for (uri, tok, body, status, field) in [
            (
                "/v1/refs/sessions/s-e/evict",
                A,
                json!({"before": d1}),
                400,
                Some("before"),
            ),
            (
                "/v1/refs/sessions/s-e/evict",
                A,
                json!({"before": "ctx-nope"}),
                400,
                Some("before"),
            ),
            (
                "/v1/refs/sessions/s-e/evict",
                A,
                json!({}),
                400,
                Some("before"),
            ),
            (
                "/v1/refs/a..b/evict",
                A,
                json!({"before": c}),
                400,
                Some("name"),
            ),
            (
                "/v1/refs/sessions/none/evict",
                A,
                json!({"before": c}),
                404,
                None,
            ),
            (
                "/v1/refs/sessions/s-e/evict",
                B,
                json!({"before": c}),
                404,
                None,
            ),
            (
                "/v1/refs/sessions/s-e",
                A,
                json!({"before": c}),
                405,
                Some("method"),
            ),
        ] {
            let (st, e) = call(&app, "POST", uri, tok, Some(body.clone())).await;
            assert_eq!(st, status, "{uri} {body}: {e}");
            if let Some(f) = field {
                assert_eq!(e["error"]["field"], f, "{uri} {body}: {e}");
            }
        }
        // The suffix takes only POST; a ref's path takes no POST.
        for (method, uri) in [
            ("PUT", "/v1/refs/sessions/s-e/evict"),
            ("GET", "/v1/refs/sessions/s-e/evict"),
            ("DELETE", "/v1/refs/sessions/s-e/evict"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(uri)
                .header("authorization", format!("Bearer {A}"))
                .body(AxBody::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status().as_u16(), 405, "{method} {uri}");
            assert_eq!(resp.headers()["allow"], "POST", "{method} {uri}");
        }
        for (method, uri, allow) in [
            ("OPTIONS", "/v1/refs/sessions/s-e/evict", "POST"),
            ("PATCH", "/v1/refs/sessions/s-e", "GET,HEAD,PUT,DELETE"),
            ("POST", "/v1/refs/sessions/s-e", "GET,HEAD,PUT,DELETE"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(uri)
                .header("authorization", format!("Bearer {A}"))
                .body(AxBody::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status().as_u16(), 405, "{method} {uri}");
            assert_eq!(resp.headers()["allow"], allow, "{method} {uri}");
        }
        let (st, r) = call(&app, "GET", "/v1/refs/sessions/s-e", A, None).await;
        assert_eq!(
            (st, &r["target"]),
            (200, &json!(d2)),
            "the ref still answers"
        );
        let root = json!({"stop": "root"});
        let uri = format!("/v1/commits/{d2}/materialize");
        let (st, m) = call(&app, "POST", &uri, A, Some(root.clone())).await;
        assert_eq!(st, 200, "nothing evicted yet: {m}");

        // The compaction was written by hand: it may not stand for d0 and
        // d1, so the eviction asks for `force` and writes nothing.
        let (st, r) = call(
            &app,
            "POST",
            "/v1/refs/sessions/s-e/evict",
            A,
            Some(json!({"before": c})),
        )
        .await;
        assert_eq!((st, &r["error"]["field"]), (409, &json!("force")), "{r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&d0) && msg.contains(&d1), "{msg}");
        let (st, m) = call(&app, "POST", &uri, A, Some(root.clone())).await;
        assert_eq!(st, 200, "nothing evicted by the 409: {m}");

        let (st, r) = call(
            &app,
            "POST",
            "/v1/refs/sessions/s-e/evict",
            A,
            Some(json!({"before": c, "force": true})),
        )
        .await;
        assert_eq!(st, 200, "{r}");
        assert_eq!(
            (&r["before"], &r["commits"], &r["kept"]),
            (&json!(c), &json!(2), &json!([]))
        );

        let (st, e) = call(&app, "POST", &uri, A, Some(root)).await;
        assert_eq!(st, 410, "{e}");
        assert_eq!(e["error"]["kind"], "gone");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&d0) && msg.contains(&c), "{msg}");
        let (st, m) = call(&app, "POST", &uri, A, Some(json!({}))).await;
        assert_eq!(
            (st, &m["size"]),
            (200, &json!("SUMMARY d2 ".len())),
            "the default: {m}"
        );
        let (st, h) = call(
            &app,
            "GET",
            &format!("/v1/commits/{d2}/history?depth=10"),
            A,
            None,
        )
        .await;
        assert_eq!(st, 200);
        assert_eq!(h["commits"].as_array().unwrap().len(), 4, "{h}");
    }
}
