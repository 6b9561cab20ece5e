//! Router tests: the router driven with `oneshot` over memory stores and a
//! manual clock. The bad-input table is also what other hosts are held to.

use axum::body::Body as AxBody;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::api::testing;
use crate::service::Limits;

const TOKEN_A: &str = "token-acme";
const TOKEN_B: &str = "token-other";

struct Harness {
    app: Router,
}

async fn harness() -> Harness {
    Harness {
        app: crate::api::testing::memory_router(&[(TOKEN_A, "acme"), (TOKEN_B, "other")]).await,
    }
}

impl Harness {
    async fn raw(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, Vec<u8>) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(AxBody::from(body)).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, bytes)
    }

    async fn call(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, bytes) = self.raw(method, uri, token, body).await;
        let v = serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, v)
    }

    async fn ok(&self, method: &str, uri: &str, body: Value) -> Value {
        let (s, v) = self.call(method, uri, Some(TOKEN_A), Some(body)).await;
        assert!(s.is_success(), "{method} {uri}: {s} {v}");
        v
    }
}

use testing::checkpoint_body;

#[tokio::test]
async fn openapi_lists_exactly_the_routes_served() {
    let h = harness().await;
    let (status, doc) = h.call("GET", "/v1/openapi.json?all=true", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "put", "post", "patch", "delete"].contains(&method.as_str()) {
                documented.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    documented.sort();
    let mut served: Vec<(String, String)> = routes(&Limits::default())
        .iter()
        .map(|r| (r.method.to_string(), r.openapi_path()))
        .collect();
    served.sort();
    assert_eq!(documented, served);
}

/// A server's own document leaves out what its configuration does not
/// serve: over storage that hands out no URLs, direct uploads (the route
/// still answers, with a 400 that says to POST the bytes); and a
/// compaction's `summarizer` is the names this server takes. `all=true` is
/// the whole contract; an `all` that is not a bool is a 400 naming it.
#[tokio::test]
async fn a_servers_document_is_its_configurations() {
    let h = harness().await;
    let (status, own) = h.call("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        own["paths"].get("/v1/uploads").is_none(),
        "{}",
        own["paths"]
    );
    assert!(own["paths"].get("/v1/artifacts").is_some());
    let summarizer = &own["components"]["schemas"]["CompactRequest"]["properties"]["summarizer"];
    assert_eq!(
        summarizer["enum"],
        json!(["extractive", "extractive:v1", null]),
        "{summarizer}"
    );

    let (status, all) = h.call("GET", "/v1/openapi.json?all=true", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(all["paths"].get("/v1/uploads").is_some());
    let summarizer = &all["components"]["schemas"]["CompactRequest"]["properties"]["summarizer"];
    assert!(summarizer.get("enum").is_none(), "{summarizer}");
    assert_eq!(all, ApiDoc::json());

    let (status, e) = h.call("GET", "/v1/openapi.json?all=yes", None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["field"], "all", "{e}");
}

/// The whole OpenAPI document, byte for byte as `GET /v1/openapi.json`
/// serves it (pretty-printed for a readable diff): any change to a route,
/// a schema or a description shows here.
#[test]
fn the_openapi_document_is_pinned() {
    use utoipa::OpenApi as _;
    let doc = ApiDoc::openapi();
    let served: Value = serde_json::from_str(&doc.to_json().unwrap()).unwrap();
    let pretty = doc.to_pretty_json().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&pretty).unwrap(), served);
    insta::assert_snapshot!("openapi_document", pretty);
}

#[tokio::test]
async fn commits_have_a_pinned_wire_format() {
    let h = harness().await;
    let (status, c) = h
        .call(
            "POST",
            "/v1/commits",
            Some(TOKEN_A),
            Some(checkpoint_body("hello\n", None)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    insta::assert_json_snapshot!("commit_wire_format", c);
    // The same checkpoint again: 200 and the same commit.
    let (status, again) = h
        .call(
            "POST",
            "/v1/commits",
            Some(TOKEN_A),
            Some(checkpoint_body("hello\n", None)),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, c);
}

#[tokio::test]
async fn other_tenants_data_answers_404() {
    let h = harness().await;
    let c = h
        .ok("POST", "/v1/commits", checkpoint_body("secret", None))
        .await;
    let id = c["id"].as_str().unwrap();
    let art = c["artifact_ref"].as_str().unwrap();
    h.ok("PUT", "/v1/refs/main", json!({"target": id})).await;
    for (method, uri, body) in [
        ("GET", format!("/v1/commits/{id}"), None),
        (
            "PATCH",
            format!("/v1/commits/{id}"),
            Some(json!({"summary": "x"})),
        ),
        ("GET", format!("/v1/commits/{id}/history"), None),
        (
            "POST",
            format!("/v1/commits/{id}/materialize"),
            Some(json!({})),
        ),
        ("GET", format!("/v1/artifacts/{art}"), None),
        ("GET", "/v1/refs/main".to_owned(), None),
        ("DELETE", "/v1/refs/main".to_owned(), None),
        ("GET", "/v1/resolve?principal=alice".to_owned(), None),
    ] {
        let (status, v) = h.call(method, &uri, Some(TOKEN_B), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}: {v}");
        assert_eq!(v["error"]["kind"], "not_found");
    }
    let (_, list) = h.call("GET", "/v1/refs", Some(TOKEN_B), None).await;
    assert_eq!(list["refs"], json!([]));
    // A checkpoint naming another tenant's commit as parent is refused:
    // that commit is not found, as one that does not exist.
    let (status, v) = h
        .call(
            "POST",
            "/v1/commits",
            Some(TOKEN_B),
            Some(checkpoint_body("x", Some(id))),
        )
        .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (StatusCode::NOT_FOUND, Some("parent"))
    );
}

/// Every bad input gets a 4xx naming the field, and writes nothing: the
/// shared table, plus what only bearer tokens can get wrong.
#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_writes_nothing() {
    let h = harness().await;
    let mut table = testing::bad_input_table(|c| {
        let token = c.tenant.map(|t| {
            if t == testing::TENANT_A {
                TOKEN_A
            } else {
                TOKEN_B
            }
        });
        let h = &h;
        async move {
            let (status, body) = h.raw(&c.method, &c.uri, token, c.body).await;
            (status.as_u16(), body)
        }
    })
    .await;
    for (name, token) in [("missing token", None), ("wrong token", Some("nope"))] {
        let body = testing::checkpoint_body("x", None);
        let (status, v) = h.call("POST", "/v1/commits", token, Some(body)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        table.push(json!({"case": name, "status": status.as_u16(), "body": v}));
    }
    insta::assert_json_snapshot!("bad_input", table);
}

#[tokio::test]
async fn deleting_a_ref_removes_it_alone() {
    let h = harness().await;
    let a = h
        .ok("POST", "/v1/commits", checkpoint_body("a", None))
        .await;
    let a_id = a["id"].as_str().unwrap();
    let b = h
        .ok("POST", "/v1/commits", checkpoint_body("b", Some(a_id)))
        .await;
    let b_id = b["id"].as_str().unwrap();
    h.ok("PUT", "/v1/refs/sessions/s1", json!({"target": b_id}))
        .await;
    // A stale `expected` is a 409 carrying the tip, and the ref stays.
    let (status, v) = h
        .call(
            "DELETE",
            &format!("/v1/refs/sessions/s1?expected={a_id}"),
            Some(TOKEN_A),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["current"], json!(b_id));
    assert_eq!(v["error"]["field"], "expected");
    let (status, v) = h
        .call(
            "DELETE",
            "/v1/refs/sessions/s1?expected=nope",
            Some(TOKEN_A),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "expected");
    h.ok("GET", "/v1/refs/sessions/s1", json!(null)).await;
    let gone = h
        .ok(
            "DELETE",
            &format!("/v1/refs/sessions/s1?expected={b_id}"),
            json!(null),
        )
        .await;
    assert_eq!(gone["target"], json!(b_id));
    assert_eq!(gone["name"], "sessions/s1");
    let (status, _) = h
        .call("GET", "/v1/refs/sessions/s1", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, v) = h
        .call("DELETE", "/v1/refs/sessions/s1", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a second delete: {v}");
    // The commits stay: the ref alone went.
    h.ok("GET", &format!("/v1/commits/{b_id}"), json!(null))
        .await;
    // Without `expected`, whatever the ref points at goes.
    h.ok("PUT", "/v1/refs/other", json!({"target": a_id})).await;
    let gone = h.ok("DELETE", "/v1/refs/other", json!(null)).await;
    assert_eq!(gone["target"], json!(a_id));
    let list = h.ok("GET", "/v1/refs", json!(null)).await;
    assert_eq!(list["refs"], json!([]));
}

#[tokio::test]
async fn ref_conflicts_carry_the_current_tip() {
    let h = harness().await;
    let a = h
        .ok("POST", "/v1/commits", checkpoint_body("a", None))
        .await;
    let a_id = a["id"].as_str().unwrap();
    let b = h
        .ok("POST", "/v1/commits", checkpoint_body("b", Some(a_id)))
        .await;
    let b_id = b["id"].as_str().unwrap();
    h.ok("PUT", "/v1/refs/sessions/s1", json!({"target": a_id}))
        .await;
    let (status, v) = h
        .call(
            "PUT",
            "/v1/refs/sessions/s1",
            Some(TOKEN_A),
            Some(json!({"target": b_id, "expected": b_id})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(v["current"], json!(a_id));
    assert_eq!(v["error"]["field"], "expected");
    let moved = h
        .ok(
            "PUT",
            "/v1/refs/sessions/s1",
            json!({"target": b_id, "expected": a_id}),
        )
        .await;
    assert_eq!(moved["target"], json!(b_id));
    let list = h.ok("GET", "/v1/refs?prefix=sessions/", json!(null)).await;
    assert_eq!(list["refs"][0]["name"], "sessions/s1");
    assert_eq!(
        list.get("next"),
        None,
        "a page that is not full is the last"
    );
}

#[tokio::test]
async fn refs_are_listed_a_page_at_a_time() {
    let h = harness().await;
    let c = h
        .ok("POST", "/v1/commits", checkpoint_body("paged", None))
        .await;
    let id = c["id"].as_str().unwrap();
    for n in ["r/a", "r/b", "r/c", "r/d", "r/e"] {
        h.ok("PUT", &format!("/v1/refs/{n}"), json!({"target": id}))
            .await;
    }
    let mut seen = Vec::new();
    let mut url = "/v1/refs?prefix=r/&limit=2".to_owned();
    loop {
        let page = h.ok("GET", &url, json!(null)).await;
        seen.extend(
            page["refs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_owned()),
        );
        let Some(next) = page.get("next").and_then(Value::as_str) else {
            break;
        };
        assert_eq!(Some(next), seen.last().map(String::as_str));
        url = format!("/v1/refs?prefix=r/&limit=2&after={next}");
    }
    assert_eq!(seen, ["r/a", "r/b", "r/c", "r/d", "r/e"]);
}

/// History comes a page at a time: `next` names where the next page
/// starts (absent once the root is listed), `cursor` continues from it,
/// and a cursor that is not one is a 400 naming `cursor`.
#[tokio::test]
async fn history_is_paged_with_a_cursor_to_the_root() {
    let h = harness().await;
    let mut ids: Vec<String> = Vec::new();
    for i in 0..5 {
        let parent = ids.last().map(String::as_str);
        let c = h
            .ok(
                "POST",
                "/v1/commits",
                checkpoint_body(&format!("turn {i}\n"), parent),
            )
            .await;
        ids.push(c["id"].as_str().unwrap().to_owned());
    }
    ids.reverse();
    let tip = &ids[0];
    let mut seen = Vec::new();
    let mut url = format!("/v1/commits/{tip}/history?depth=2");
    let mut pages = 0;
    loop {
        let page = h.ok("GET", &url, json!(null)).await;
        pages += 1;
        let commits = page["commits"].as_array().unwrap();
        seen.extend(commits.iter().map(|c| c["id"].as_str().unwrap().to_owned()));
        let Some(next) = page.get("next").and_then(Value::as_str) else {
            assert!(commits.last().unwrap()["parent"].is_null(), "{page}");
            break;
        };
        assert_eq!(
            Some(next),
            commits.last().unwrap()["parent"].as_str(),
            "next is where the next page starts"
        );
        url = format!("/v1/commits/{tip}/history?depth=2&cursor={next}");
    }
    assert_eq!(seen, ids);
    assert_eq!(pages, 3);
    // A page that ends at the root has no next.
    let all = h
        .ok(
            "GET",
            &format!("/v1/commits/{tip}/history?depth=5"),
            json!(null),
        )
        .await;
    assert!(all.get("next").is_none(), "{all}");
    let missing = "ctx-00000000000000000000000000000000";
    for cursor in ["nope", missing] {
        let (status, v) = h
            .call(
                "GET",
                &format!("/v1/commits/{tip}/history?cursor={cursor}"),
                Some(TOKEN_A),
                None,
            )
            .await;
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("cursor")),
            "{cursor}: {v}"
        );
    }
}

#[tokio::test]
async fn artifacts_upload_once_and_download_verified() {
    let h = harness().await;
    let (s1, v1) = {
        let (s, b) = h
            .raw(
                "POST",
                "/v1/artifacts",
                Some(TOKEN_A),
                b"bytes\x00\xff".to_vec(),
            )
            .await;
        (s, serde_json::from_slice::<Value>(&b).unwrap())
    };
    assert_eq!(s1, StatusCode::CREATED);
    assert_eq!(v1["size"], 7);
    let (s2, _) = h
        .raw(
            "POST",
            "/v1/artifacts",
            Some(TOKEN_A),
            b"bytes\x00\xff".to_vec(),
        )
        .await;
    assert_eq!(s2, StatusCode::OK);
    let (s3, bytes) = h
        .raw(
            "GET",
            &format!("/v1/artifacts/{}", v1["ref"].as_str().unwrap()),
            Some(TOKEN_A),
            vec![],
        )
        .await;
    assert_eq!((s3, bytes), (StatusCode::OK, b"bytes\x00\xff".to_vec()));
}

/// A delta that is not valid for its format: 400 naming the format, the
/// offset or index and what was wrong; nothing is stored.
#[tokio::test]
async fn bad_deltas_name_format_and_place_and_store_nothing() {
    use base64::Engine as _;
    let h = harness().await;
    let cbor = {
        let mut out = Vec::new();
        ciborium::into_writer(
            &json!([{"role": "user", "content": [{"kind": "text", "text": "hello there"}]}]),
            &mut out,
        )
        .unwrap();
        out
    };
    let cc_line = r#"{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1"}"#;
    let tool_result = json!([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_missing", "content": "42"}
    ]}]);
    // A Claude Code line that is not UTF-8 is no bad delta: a transcript is
    // a log, and the line is kept as written (format::claude_code).
    let mut body = checkpoint_body("", None);
    body["format"] = json!("claude-code-v1");
    body.as_object_mut().unwrap().remove("delta");
    body["delta_base64"] = json!(
        base64::engine::general_purpose::STANDARD
            .encode([cc_line.as_bytes(), b"\n\xff\n"].concat())
    );
    let (status, v) = h
        .call("POST", "/v1/commits", Some(TOKEN_A), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["message_count"], 1, "{v}");
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "truncated CBOR",
            "bureau-agent-v1",
            json!({"delta_base64": base64::engine::general_purpose::STANDARD.encode(&cbor[..cbor.len() - 4])}),
        ),
        (
            "CBOR of the wrong shape",
            "bureau-agent-v2",
            json!({"delta_base64": base64::engine::general_purpose::STANDARD.encode(&cbor)}),
        ),
        (
            "JSON object instead of an array",
            "anthropic-messages-v1",
            json!({"delta": json!({"role": "user", "content": "hi"}).to_string()}),
        ),
        (
            "array of the wrong shape",
            "openai-chat-v1",
            json!({"delta": json!([{"role": "user", "content": "ok"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]).to_string()}),
        ),
        (
            "tool_result without its tool_use",
            "anthropic-messages-v1",
            json!({"delta": tool_result.to_string()}),
        ),
        (
            "tool message without its tool call",
            "openai-chat-v1",
            json!({"delta": json!([{"role": "tool", "tool_call_id": "call_9", "content": "x"}]).to_string()}),
        ),
        (
            "Responses API item of the wrong shape",
            "openai-responses-v1",
            json!({"delta": json!([{"role": "user", "content": "ok"}, {"type": "function_call", "call_id": "c1", "name": "f"}]).to_string()}),
        ),
    ];
    let mut table = Vec::new();
    for (name, format, delta) in cases {
        let mut body = checkpoint_body("", None);
        body["principal"] = json!("mallory");
        body["format"] = json!(format);
        body.as_object_mut().unwrap().remove("delta");
        for (k, v) in delta.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, v) = h
            .call("POST", "/v1/commits", Some(TOKEN_A), Some(body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(format), "{name}: {msg}");
        assert!(
            msg.contains("byte offset") || msg.contains("index"),
            "{name}: {msg}"
        );
        table.push(json!({"case": name, "body": v}));
    }
    insta::assert_json_snapshot!("bad_deltas", table);
    // Nothing stored: no commit for mallory, no artifact for the bad CBOR.
    let (status, _) = h
        .call("GET", "/v1/resolve?principal=mallory", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let art = crate::ArtifactRef::of(&cbor[..cbor.len() - 4]);
    let (status, _) = h
        .call("GET", &format!("/v1/artifacts/{art}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The same tool_result is fine when the parent's delta left its tool_use
    // unanswered.
    let mut parent = checkpoint_body(
        &json!([{"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_missing", "name": "calc", "input": {}}
        ]}])
        .to_string(),
        None,
    );
    parent["format"] = json!("anthropic-messages-v1");
    let p = h.ok("POST", "/v1/commits", parent).await;
    let mut child = checkpoint_body(&tool_result.to_string(), p["id"].as_str());
    child["format"] = json!("anthropic-messages-v1");
    let c = h.ok("POST", "/v1/commits", child).await;
    assert_eq!(c["message_count"], 1);
}

/// Counts are the server's: a client's token_count never replaces the
/// estimate, and is kept apart as a tag.
#[tokio::test]
async fn token_counts_are_estimated_by_the_server() {
    let h = harness().await;
    let mut b = checkpoint_body(
        &json!([{"role": "user", "content": "12345678"}, {"role": "assistant", "content": "1234"}])
            .to_string(),
        None,
    );
    b["format"] = json!("openai-chat-v1");
    b["token_count"] = json!(999_999);
    b["message_count"] = json!(40);
    let c = h.ok("POST", "/v1/commits", b).await;
    assert_eq!(
        (c["token_count"].clone(), c["message_count"].clone()),
        (json!(3), json!(2))
    );
    assert_eq!(c["tags"]["client_token_count"], "999999");
    // Opaque bytes: chars/4, and the client's message count (the server cannot know).
    let mut raw = checkpoint_body("123456789", None);
    raw["message_count"] = json!(2);
    raw["created_at"] = json!("2026-11-22T10:00:01Z");
    let r = h.ok("POST", "/v1/commits", raw).await;
    assert_eq!(
        (r["token_count"].clone(), r["message_count"].clone()),
        (json!(3), json!(2))
    );
}

/// Text after the JSON body is a 400 naming `body`, and nothing is written.
#[tokio::test]
async fn trailing_text_after_a_json_body_is_refused_and_writes_nothing() {
    let h = harness().await;
    let mut body = checkpoint_body("trailing", None);
    body["principal"] = json!("mallory");
    for tail in [" garbage", "{}", " 1", "\n{\"x\":1}"] {
        let mut bytes = body.to_string().into_bytes();
        bytes.extend_from_slice(tail.as_bytes());
        let (status, b) = h.raw("POST", "/v1/commits", Some(TOKEN_A), bytes).await;
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("body")),
            "{tail:?}: {v}"
        );
    }
    let (status, _) = h
        .call("GET", "/v1/resolve?principal=mallory", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a commit was written");
    let art = crate::ArtifactRef::of(b"trailing");
    let (status, _) = h
        .call("GET", &format!("/v1/artifacts/{art}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the delta was stored");
}

/// Every object a request body may hold, however deeply nested, refuses
/// unknown fields: its schema says `additionalProperties: false` (which
/// utoipa derives from `#[serde(deny_unknown_fields)]`).
#[test]
fn every_request_schema_refuses_unknown_fields() {
    use utoipa::OpenApi as _;
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    fn walk(v: &Value, schemas: &Value, seen: &mut Vec<String>, open: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    let name = r.trim_start_matches("#/components/schemas/").to_owned();
                    if !seen.contains(&name) {
                        seen.push(name.clone());
                        let s = &schemas[&name];
                        if s.get("properties").is_some()
                            && s["additionalProperties"] != json!(false)
                        {
                            open.push(name);
                        }
                        walk(s, schemas, seen, open);
                    }
                }
                for x in m.values() {
                    walk(x, schemas, seen, open);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, schemas, seen, open)),
            _ => {}
        }
    }
    let (mut seen, mut open) = (Vec::new(), Vec::new());
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            walk(&op["requestBody"], schemas, &mut seen, &mut open);
        }
    }
    for name in [
        "CheckpointRequest",
        "RefMove",
        "MaterializeRequest",
        "UpdateMetadataRequest",
        "SetRefRequest",
        "UploadRequest",
        "BranchCreateRequest",
        "BranchReturnRequest",
    ] {
        assert!(
            seen.contains(&name.to_owned()),
            "{name} not found in {seen:?}"
        );
    }
    assert_eq!(
        open,
        Vec::<String>::new(),
        "request schemas that accept unknown fields"
    );
}

/// Every rule (`wire::rules`) constrains fields its type has: a rule
/// naming a field the type lacks would hold of every body and say nothing.
/// A type with rules is `allOf` its fields and its rules in the document.
#[test]
fn every_rule_names_fields_of_its_type() {
    use utoipa::OpenApi as _;
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    fn named(rule: &Value, out: &mut Vec<String>) {
        for item in ["oneOf", "anyOf"]
            .iter()
            .filter_map(|k| rule[k].as_array())
            .flatten()
        {
            if let Some(props) = item["properties"].as_object() {
                out.extend(props.keys().cloned());
            }
            out.extend(
                item["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_str().map(str::to_owned)),
            );
        }
    }
    for (name, rules) in crate::wire::rules::all() {
        let schema = &schemas[name.as_ref()];
        let parts = schema["allOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {schema}"));
        assert_eq!(parts.len(), rules.len() + 1, "{name}");
        assert_eq!(&parts[1..], &rules[..], "{name}");
        let fields = parts[0]["properties"].as_object().expect("the fields");
        let mut used = Vec::new();
        rules.iter().for_each(|r| named(r, &mut used));
        assert!(!used.is_empty(), "{name}: its rules name no field");
        for f in used {
            assert!(
                fields.contains_key(&f),
                "{name}: a rule names {f:?}, not a field"
            );
        }
    }
}

/// The assembled context takes exactly the formats the document lists as
/// `KnownFormat`, and refuses any other naming `format`.
#[tokio::test]
async fn the_assembled_context_takes_the_known_formats_the_document_lists() {
    use utoipa::OpenApi as _;
    let h = harness().await;
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let param = doc["paths"]["/v1/agents/{agent}/context"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "format")
        .unwrap()
        .clone();
    assert_eq!(
        param["schema"]["$ref"], "#/components/schemas/KnownFormat",
        "{param}"
    );
    let known = doc["components"]["schemas"]["KnownFormat"]["enum"]
        .as_array()
        .unwrap()
        .clone();
    assert!(known.len() > 1, "{known:?}");
    for f in &known {
        let uri = format!(
            "/v1/agents/ag/context?thread_id=t&format={}",
            f.as_str().unwrap()
        );
        let (status, v) = h.call("GET", &uri, Some(TOKEN_A), None).await;
        assert_eq!(status, StatusCode::OK, "{f}: {v}");
    }
    let (status, v) = h
        .call(
            "GET",
            "/v1/agents/ag/context?thread_id=t&format=zzz",
            Some(TOKEN_A),
            None,
        )
        .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("format")),
        "{v}"
    );
}

/// An append's body is JSONL, as the document's `JsonLines` says: at least
/// one character that is not JSON's whitespace; a body without one is
/// refused naming `body`, and nothing is appended.
#[tokio::test]
async fn an_append_holds_a_json_value() {
    use utoipa::OpenApi as _;
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let schema = &doc["components"]["schemas"]["JsonLines"];
    let pattern = regex_lite::Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
    assert_eq!(schema["minLength"], 1);
    let h = harness().await;
    let uri = "/v1/workspaces/w/append/log.jsonl";
    for body in ["", " ", "\n", "\t\r\n", "\r\n"] {
        assert!(!pattern.is_match(body), "{body:?}");
        let (status, v) = h
            .raw("POST", uri, Some(TOKEN_A), body.as_bytes().to_vec())
            .await;
        let v: Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("body")),
            "{body:?}: {v}"
        );
    }
    let (status, _) = h
        .call(
            "GET",
            "/v1/workspaces/w/files/log.jsonl",
            Some(TOKEN_A),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "something was appended");
    for body in ["1", "{\"a\": 1}\n", " 2 \n"] {
        assert!(pattern.is_match(body), "{body:?}");
        let (status, v) = h
            .raw("POST", uri, Some(TOKEN_A), body.as_bytes().to_vec())
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{body:?}: {}",
            String::from_utf8_lossy(&v)
        );
    }
}

/// A misspelt `expected` in a checkpoint's ref move is refused, not read as
/// "create only".
#[tokio::test]
async fn a_misspelt_ref_move_field_is_refused() {
    let h = harness().await;
    let root = h
        .ok("POST", "/v1/commits", checkpoint_body("a", None))
        .await;
    let mut b = checkpoint_body("b", root["id"].as_str());
    b["ref"] = json!({"name": "main", "expectd": root["id"]});
    let (status, v) = h.call("POST", "/v1/commits", Some(TOKEN_A), Some(b)).await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("ref.expectd")),
        "{v}"
    );
    let (status, _) = h.call("GET", "/v1/refs/main", Some(TOKEN_A), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the ref was created");
}

/// Real ids match the patterns the document gives their types, and every
/// pattern in the document matches some real id (none is stale).
#[test]
fn real_ids_match_the_documents_patterns() {
    use utoipa::OpenApi as _;
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let tenant: crate::id::TenantId = "acme".parse().unwrap();
    let art = crate::ArtifactRef::of(b"x");
    let commit = CommitId::derive(&tenant, None, &art, 1, "t");
    let branch = crate::id::BranchId::from_bytes([0xab; 16]);
    let ids: Vec<(&str, String)> = vec![
        ("CommitId", commit.to_string()),
        ("ArtifactRef", art.to_string()),
        ("BranchId", branch.to_string()),
        (
            "MemoryId",
            crate::id::MemoryId::of_branch(&tenant, &branch).to_string(),
        ),
        (
            "SaveId",
            crate::agent::SaveId::derive(
                &tenant,
                &"agent".parse().unwrap(),
                crate::clock::micros_to_time(1),
                &art,
            )
            .to_string(),
        ),
        (
            "cursor",
            crate::store::SummaryCursor {
                micros: -1,
                id: commit,
            }
            .to_string(),
        ),
        // What `POST /v1/gc` hands out as `next` after its first page.
        ("gc cursor", "cache.".to_owned()),
        // What a checkpoint's `delta_base64` (and a batch artifact's
        // `base64`) takes.
        (
            "base64 field",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"x"),
        ),
    ];
    let fields = |n: &&str| n.ends_with("cursor") || n.ends_with("field");
    for (name, id) in ids.iter().filter(|(n, _)| !fields(n)) {
        let pattern = schemas[name]["pattern"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no pattern: {}", schemas[name]));
        let re = regex_lite::Regex::new(pattern).unwrap();
        assert!(re.is_match(id), "{name} {id} does not match {pattern}");
    }
    fn patterns(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(p)) = m.get("pattern") {
                    out.push(p.clone());
                }
                m.values().for_each(|x| patterns(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| patterns(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    patterns(&doc, &mut all);
    for p in all {
        let re = regex_lite::Regex::new(&p).unwrap();
        assert!(
            ids.iter().any(|(_, id)| re.is_match(id)),
            "no real id matches the pattern {p}"
        );
    }
}

/// Smaller bad inputs: each a 400 in the JSON error shape naming the field.
#[tokio::test]
async fn small_bad_inputs_name_their_field() {
    let h = harness().await;
    let cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        ("GET", "/v1/commits/%ff", vec![], "ctx"),
        ("GET", "/v1/artifacts/%ff%fe", vec![], "art"),
        ("GET", "/v1/refs/a%ffb", vec![], "name"),
        ("GET", "/v1/resolve?principal=%ff", vec![], "principal"),
        ("GET", "/v1/resolve?principal=a%20b", vec![], "principal"),
        ("GET", "/v1/resolve?principal=a+b", vec![], "principal"),
        ("GET", "/v1/refs?prefix=%c3", vec![], "prefix"),
        ("GET", "/v1/refs?after=a%20b", vec![], "after"),
        (
            "POST",
            "/v1/commits",
            br#"{"commit_type":"delta","format":"raw","template":"t","principal":"alice smith","checkpoint":"turn_boundary","delta":"x"}"#.to_vec(),
            "principal",
        ),
        (
            "POST",
            "/v1/commits",
            br#"{"commit_type":"delta","format":"raw","template":"t","principal":"p","checkpoint":"turn_boundary","delta":"x","message_count":1e400}"#.to_vec(),
            "message_count",
        ),
        (
            "POST",
            "/v1/commits",
            br#"{"commit_type":"delta","format":"raw","template":"t","principal":"p","checkpoint":"turn_boundary","delta":"x","template":"u"}"#.to_vec(),
            "template",
        ),
        (
            "PUT",
            "/v1/refs/main",
            br#"{"target":"ctx-00000000000000000000000000000000","expected":null,"expected":null}"#.to_vec(),
            "expected",
        ),
        ("POST", "/v1/artifacts", vec![], "body"),
    ];
    for (method, uri, body, field) in cases {
        let (status, bytes) = h.raw(method, uri, Some(TOKEN_A), body).await;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "{method} {uri}: {status} not JSON: {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{method} {uri}: {v}"
        );
    }
    // The empty artifact was not stored.
    let empty = crate::ArtifactRef::of(b"");
    let (status, _) = h
        .call(
            "GET",
            &format!("/v1/artifacts/{empty}"),
            Some(TOKEN_A),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A materialized context's message count is the number of messages it
/// holds, also when translation answers parallel tool calls with one
/// `tool` message each (which the canonical model folds into one).
#[tokio::test]
async fn materialized_counts_are_of_what_is_returned() {
    let h = harness().await;
    let mut b = checkpoint_body(
        &json!([
            {"role": "user", "content": "add"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "calc", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "calc", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "2"}
            ]},
            {"role": "assistant", "content": "3"}
        ])
        .to_string(),
        None,
    );
    b["format"] = json!("anthropic-messages-v1");
    let c = h.ok("POST", "/v1/commits", b).await;
    let id = c["id"].as_str().unwrap();
    let m = h
        .ok(
            "POST",
            &format!("/v1/commits/{id}/materialize"),
            json!({"stop": "root", "format": "openai-chat-v1"}),
        )
        .await;
    let (_, bytes) = h
        .raw(
            "GET",
            &format!("/v1/artifacts/{}", m["artifact_ref"].as_str().unwrap()),
            Some(TOKEN_A),
            vec![],
        )
        .await;
    let out: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(out.len(), 5, "{out:?}");
    assert_eq!(m["message_count"], json!(out.len()), "{m}");
    // The same array checkpointed natively counts the same.
    let mut native = checkpoint_body(&serde_json::to_string(&out).unwrap(), None);
    native["format"] = json!("openai-chat-v1");
    native["created_at"] = json!("2026-11-22T10:00:05Z");
    let n = h.ok("POST", "/v1/commits", native).await;
    assert_eq!(n["message_count"], json!(out.len()), "{n}");
}

/// Every operation with a request body (as the OpenAPI document lists them)
/// answers an oversize body with 413 stating the limit in bytes and the
/// setting that raises it; so does an inline delta, plain or base64, over
/// the artifact limit.
#[tokio::test]
async fn every_413_states_the_limit_and_its_setting() {
    use utoipa::OpenApi as _;
    let h = harness().await;
    let limits = Limits {
        max_artifact_bytes: 4096,
        ..Limits::default()
    };
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let mut checked = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            if op.get("requestBody").is_none() {
                continue;
            }
            let uri = path
                .replace("{ctx}", "ctx-0123456789abcdef0123456789abcdef")
                .replace("{br}", "br-0123456789abcdef0123456789abcdef")
                .replace("{name}", "main")
                .replace("{id}", "s1");
            let json = uri != "/v1/artifacts";
            let (limit, body_len) = if json {
                (limits.max_json_bytes(), limits.max_json_bytes() + 1)
            } else {
                (limits.max_artifact_bytes, limits.max_artifact_bytes + 1)
            };
            let method = method.to_uppercase();
            let (status, bytes) = h
                .raw(&method, &uri, Some(TOKEN_A), vec![b' '; body_len])
                .await;
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{method} {uri}: {v}");
            assert!(
                message.contains(&format!("at most {limit} bytes"))
                    && message.contains("CTX_MAX_ARTIFACT_BYTES"),
                "{method} {uri}: {message}"
            );
            assert_eq!(v["error"]["field"], "body", "{method} {uri}");
            checked.push(format!("{method} {uri}"));
        }
    }
    assert!(checked.len() >= 7, "{checked:?}");
    for (field, delta) in [
        ("delta", json!("x".repeat(4097))),
        (
            "delta_base64",
            json!(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                vec![1u8; 4097]
            )),
        ),
    ] {
        let mut body = json!({"commit_type": "delta", "format": "raw", "template": "t",
            "principal": "alice", "checkpoint": "turn_boundary"});
        body[field] = delta;
        let (status, v) = h
            .call("POST", "/v1/commits", Some(TOKEN_A), Some(body))
            .await;
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some(field)),
            "{v}"
        );
        assert!(
            message.contains("at most 4096") && message.contains("CTX_MAX_ARTIFACT_BYTES"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn gc_reports_a_page_and_removes_nothing_young() {
    let h = harness().await;
    let (status, up) = h
        .raw(
            "POST",
            "/v1/artifacts",
            Some(TOKEN_A),
            b"an orphan".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let art: Value = serde_json::from_slice(&up).unwrap();
    let report = h.ok("POST", "/v1/gc", json!({"dry_run": true})).await;
    assert_eq!(report["dry_run"], json!(true));
    assert_eq!(report["scanned"], json!(1));
    assert_eq!(report["young"], json!(1), "{report}");
    assert_eq!(report["removed"], json!([]));
    assert_eq!(report["next"], json!("cache."), "one area per call");
    // Page by page, to the end of the last area; every cursor handed out
    // is one the document allows.
    let doc = serde_json::to_value(<ApiDoc as utoipa::OpenApi>::openapi()).unwrap();
    let pattern = doc["components"]["schemas"]["GcRequest"]["properties"]["cursor"]["pattern"]
        .as_str()
        .unwrap();
    let cursor = regex_lite::Regex::new(pattern).unwrap();
    let mut body = json!({"limit": 1});
    let mut scanned = 0;
    let mut calls = 0;
    loop {
        let page = h.ok("POST", "/v1/gc", body.clone()).await;
        scanned += page["scanned"].as_u64().unwrap();
        calls += 1;
        if page["next"].is_null() {
            break;
        }
        let next = page["next"].as_str().unwrap();
        assert!(cursor.is_match(next), "{next} does not match {pattern}");
        body["cursor"] = page["next"].clone();
    }
    assert_eq!(
        (scanned, calls),
        (1, 4),
        "durable: 1, then empty; cache; staged"
    );
    let (status, _) = h
        .raw(
            "GET",
            &format!("/v1/artifacts/{}", art["ref"].as_str().unwrap()),
            Some(TOKEN_A),
            Vec::new(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "young artifacts stay");
}

/// JSON has one number type: an integer field written as a whole float
/// (`51.0`, which the document's `integer` allows) is that integer; a
/// fraction is still a 400 naming the field.
#[tokio::test]
async fn integers_written_as_whole_floats_are_integers() {
    let h = harness().await;
    let s = h
        .ok("PATCH", "/v1/agents/ag", json!({"window_seconds": 3600.0}))
        .await;
    assert_eq!(s["window_seconds"], json!(3600));
    let stored = h
        .ok(
            "PUT",
            "/v1/agents/ag/working-context",
            json!({"agent_id": "ag", "epoch_id": 2.0, "schema_version": 1.0, "messages": []}),
        )
        .await;
    assert_eq!(stored["epoch_id"], json!(2));
    h.ok(
        "POST",
        "/v1/agents/ag/working-context/restore",
        json!({"raw_tail_turns": 979.0, "max_semantic": 2.0, "max_episodic": 77.0}),
    )
    .await;
    h.ok("POST", "/v1/gc", json!({"dry_run": true, "limit": 5.0}))
        .await;
    let mut body = checkpoint_body("a", None);
    body["message_count"] = json!(2.0);
    body["token_count"] = json!(3.0);
    h.ok("POST", "/v1/commits", body).await;
    // Embedded storage takes no direct uploads: the size was read.
    let (status, e) = h
        .call(
            "POST",
            "/v1/uploads",
            Some(TOKEN_A),
            Some(json!({"artifact_ref": crate::ArtifactRef::of(b"x"), "size": 10.0})),
        )
        .await;
    assert_eq!(
        (status, e["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("body")),
        "{e}"
    );
    for (method, uri, body, field) in [
        (
            "PATCH",
            "/v1/agents/ag",
            json!({"window_seconds": 1.5}),
            "window_seconds",
        ),
        ("POST", "/v1/gc", json!({"limit": 0.5}), "limit"),
        (
            "POST",
            "/v1/agents/ag/working-context/restore",
            json!({"raw_tail_turns": -1.0}),
            "raw_tail_turns",
        ),
    ] {
        let (status, e) = h.call(method, uri, Some(TOKEN_A), Some(body)).await;
        assert_eq!(
            (status, e["error"]["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{method} {uri}: {e}"
        );
    }
}

/// `POST /v1/gc`'s body is optional (the document's `oneOf: [null,
/// GcRequest]`): absent, empty or `null` is the default request.
#[tokio::test]
async fn gc_takes_an_absent_or_null_body() {
    let h = harness().await;
    for body in [&b""[..], b"null", b" null\n", b"{}"] {
        let (status, v) = h.raw("POST", "/v1/gc", Some(TOKEN_A), body.to_vec()).await;
        let v: Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(status, StatusCode::OK, "{body:?}: {v}");
        assert_eq!(v["dry_run"], json!(false), "{body:?}: {v}");
    }
    let (status, _) = h.raw("POST", "/v1/gc", Some(TOKEN_A), b"[]".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// A request naming a commit or artifact that does not exist (a ref's
/// target, an eviction's `before`, a parent, a stop, an `artifact_ref`) is
/// a 404 naming the field, as for any other missing thing; nothing is
/// written.
#[tokio::test]
async fn naming_a_commit_or_artifact_that_does_not_exist_is_404_naming_the_field() {
    let h = harness().await;
    let root = h
        .ok("POST", "/v1/commits", checkpoint_body("a\n", None))
        .await;
    let root_id = root["id"].as_str().unwrap();
    h.ok("PUT", "/v1/refs/main", json!({"target": root_id}))
        .await;
    let missing = "ctx-00000000000000000000000000000000";
    let nowhere = crate::ArtifactRef::of(b"nowhere").to_string();
    let mut stored = checkpoint_body("b\n", None);
    stored.as_object_mut().unwrap().remove("delta");
    stored["artifact_ref"] = json!(nowhere);
    let cases = [
        (
            "PUT",
            "/v1/refs/other".to_owned(),
            json!({"target": missing}),
            "target",
        ),
        (
            "POST",
            "/v1/refs/main/evict".to_owned(),
            json!({"before": missing}),
            "before",
        ),
        (
            "POST",
            "/v1/commits".to_owned(),
            checkpoint_body("b\n", Some(missing)),
            "parent",
        ),
        (
            "POST",
            "/v1/commits".to_owned(),
            stored.clone(),
            "artifact_ref",
        ),
        (
            "POST",
            format!("/v1/commits/{root_id}/materialize"),
            json!({"stop": missing}),
            "stop",
        ),
        (
            "POST",
            "/v1/read".to_owned(),
            json!({"commit": root_id, "delta": true, "stop": missing}),
            "stop",
        ),
        (
            "POST",
            "/v1/batch".to_owned(),
            json!({"commits": [checkpoint_body("c\n", Some(missing))]}),
            "commits[0].parent",
        ),
        (
            "POST",
            "/v1/batch".to_owned(),
            json!({"commits": [stored], "refs": []}),
            "commits[0].artifact_ref",
        ),
        (
            "POST",
            "/v1/batch".to_owned(),
            json!({"refs": [{"name": "other", "target": missing}]}),
            "refs[0].target",
        ),
    ];
    for (method, uri, body, field) in cases {
        let (status, v) = h.call(method, &uri, Some(TOKEN_A), Some(body)).await;
        assert_eq!(
            (
                status,
                v["error"]["kind"].as_str(),
                v["error"]["field"].as_str()
            ),
            (StatusCode::NOT_FOUND, Some("not_found"), Some(field)),
            "{method} {uri}: {v}"
        );
    }
    let (status, _) = h.call("GET", "/v1/refs/other", Some(TOKEN_A), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a ref was written");
}

/// A body whose fields are all optional may be absent, JSON whitespace or
/// `null`; anything else must be a JSON object, so a byte that is
/// whitespace to ASCII but not to JSON (a form feed) is refused naming
/// `body`, as `parse_json` refuses it, on every such route.
#[tokio::test]
async fn an_optional_body_is_empty_only_when_it_is_json_whitespace() {
    let h = harness().await;
    for (method, uri) in [
        ("POST", "/v1/agents/ag/working-context/restore"),
        ("PATCH", "/v1/agents/ag"),
        ("POST", "/v1/agents/ag/saves"),
        ("POST", "/v1/gc"),
    ] {
        for body in [&b""[..], b" \t\r\n", b"null", b" null\n", b"{}"] {
            let (status, v) = h.raw(method, uri, Some(TOKEN_A), body.to_vec()).await;
            assert!(
                status.is_success(),
                "{method} {uri} {body:?}: {status} {}",
                String::from_utf8_lossy(&v)
            );
        }
        for body in [
            &b"\x0c"[..],
            b" \x0c ",
            b"\x0b",
            b"\x0cnull",
            b"[]",
            b"\xff",
        ] {
            let (status, v) = h.raw(method, uri, Some(TOKEN_A), body.to_vec()).await;
            let v: Value = serde_json::from_slice(&v).unwrap();
            assert_eq!(
                (status, v["error"]["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some("body")),
                "{method} {uri} {body:?}: {v}"
            );
        }
    }
}

/// `POST /v1/read`: a ref's tip in one request, its bytes inline as text,
/// or as base64 when they are not UTF-8; the same as materialize answers.
#[tokio::test]
async fn a_read_in_a_format_this_server_does_not_know_is_a_400_naming_format() {
    let h = harness().await;
    let a = h
        .ok("POST", "/v1/commits", checkpoint_body("one\n", None))
        .await;
    let a_id = a["id"].as_str().unwrap();
    for (path, body) in [
        (
            "/v1/read".to_owned(),
            json!({"commit": a_id, "format": "bogus"}),
        ),
        (
            format!("/v1/commits/{a_id}/materialize"),
            json!({"format": "openai-chat"}),
        ),
    ] {
        let (status, e) = h.call("POST", &path, Some(TOKEN_A), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {e}");
        assert_eq!(e["error"]["field"], "format", "{path}: {e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains("openai-chat-v1"), "{path}: {message}");
    }
}

/// Seed 000's wrapper, written to the seed: read its context (null on a
/// fresh start, or a session ref with no commit yet), checkpoint, read
/// again. The first read is the empty context in the asked format with
/// `commit` null, not an error; a wrong commit id is still a 404.
#[tokio::test]
async fn a_fresh_start_and_a_ref_with_no_commit_read_as_the_empty_context() {
    let h = harness().await;
    let fresh = h
        .ok(
            "POST",
            "/v1/read",
            json!({"commit": null, "format": "anthropic-messages-v1"}),
        )
        .await;
    assert_eq!(fresh["commit"], Value::Null, "{fresh}");
    assert_eq!(fresh["content"], json!("[]"));
    assert_eq!(
        (&fresh["message_count"], &fresh["size"]),
        (&json!(0), &json!(2))
    );
    let first = h
        .ok("POST", "/v1/read", json!({"ref": "sessions/new"}))
        .await;
    assert_eq!(first["commit"], Value::Null, "{first}");
    assert_eq!(first["content"], json!(""), "raw when no format is asked");
    assert_eq!(first["message_count"], json!(0));
    // Nothing was written by the reads.
    let (status, _) = h
        .call("GET", "/v1/refs/sessions/new", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let mut body = checkpoint_body("one\n", None);
    body["ref"] = json!({"name": "sessions/new"});
    let c = h.ok("POST", "/v1/commits", body).await;
    let again = h
        .ok("POST", "/v1/read", json!({"ref": "sessions/new"}))
        .await;
    assert_eq!(again["commit"], c["id"], "{again}");
    assert_eq!(again["content"], json!("one\n"));

    let missing = CommitId::from_bytes([3; 16]).to_string();
    let (status, e) = h
        .call(
            "POST",
            "/v1/read",
            Some(TOKEN_A),
            Some(json!({"commit": missing})),
        )
        .await;
    assert_eq!(
        (status, &e["error"]["field"]),
        (StatusCode::NOT_FOUND, &json!("commit"))
    );
}

#[tokio::test]
async fn read_answers_a_refs_context_and_its_bytes_in_one_request() {
    let h = harness().await;
    let a = h
        .ok("POST", "/v1/commits", checkpoint_body("one\n", None))
        .await;
    let a_id = a["id"].as_str().unwrap();
    let b = h
        .ok("POST", "/v1/commits", checkpoint_body("two\n", Some(a_id)))
        .await;
    let b_id = b["id"].as_str().unwrap();
    h.ok("PUT", "/v1/refs/sessions/r", json!({"target": b_id}))
        .await;
    let read = h.ok("POST", "/v1/read", json!({"ref": "sessions/r"})).await;
    assert_eq!(read["commit"], json!(b_id));
    assert_eq!(read["content"], json!("one\ntwo\n"));
    assert!(read.get("content_base64").is_none(), "{read}");
    assert!(
        read.get("parent").is_none(),
        "a context read names no parent: {read}"
    );
    let m = h
        .ok(
            "POST",
            &format!("/v1/commits/{b_id}/materialize"),
            json!({}),
        )
        .await;
    for k in [
        "artifact_ref",
        "size",
        "message_count",
        "token_count",
        "tier",
    ] {
        assert_eq!(read[k], m[k], "{k}");
    }

    let mut bin = checkpoint_body("", Some(b_id));
    bin.as_object_mut().unwrap().remove("delta");
    bin["delta_base64"] = json!("/w==");
    let c = h.ok("POST", "/v1/commits", bin).await;
    let read = h
        .ok(
            "POST",
            "/v1/read",
            json!({"commit": c["id"], "stop": "root"}),
        )
        .await;
    assert!(read.get("content").is_none(), "{read}");
    use base64::Engine as _;
    let want = base64::engine::general_purpose::STANDARD.encode(b"one\ntwo\n\xff");
    assert_eq!(read["content_base64"], json!(want));

    // A delta read: the tip's own artifact, as show and download give it.
    let own = h
        .ok(
            "POST",
            "/v1/read",
            json!({"ref": "sessions/r", "delta": true}),
        )
        .await;
    assert_eq!(own["content"], json!("two\n"));
    assert_eq!(own["artifact_ref"], b["artifact_ref"]);
    assert_eq!(own["size"], json!(4));
    // with its parent (a reader of a chain needs no show for it), and a
    // root's read has none.
    assert_eq!(own["parent"], json!(a_id));
    let root = h
        .ok("POST", "/v1/read", json!({"commit": a_id, "delta": true}))
        .await;
    assert!(root.get("parent").is_none(), "{root}");
}

/// `POST /v1/read` with `delta` and `stop`: the deltas from the stop point
/// to the commit, joined, with the parent of the first of them; nothing is
/// cached. A chain's writer that appends to its snapshot reads the whole
/// snapshot-and-appends in one request.
#[tokio::test]
async fn a_delta_read_from_a_stop_joins_the_deltas_and_names_the_first_ones_parent() {
    let h = harness().await;
    let a = h
        .ok("POST", "/v1/commits", checkpoint_body("below\n", None))
        .await;
    let a_id = a["id"].as_str().unwrap();
    let mut snap = checkpoint_body("doc\n", Some(a_id));
    snap["commit_type"] = json!("snapshot");
    let b = h.ok("POST", "/v1/commits", snap).await;
    let b_id = b["id"].as_str().unwrap();
    let c = h
        .ok("POST", "/v1/commits", checkpoint_body("w1\n", Some(b_id)))
        .await;
    let c_id = c["id"].as_str().unwrap();
    let d = h
        .ok("POST", "/v1/commits", checkpoint_body("w2\n", Some(c_id)))
        .await;
    let d_id = d["id"].as_str().unwrap();

    let read = |stop: &str| json!({"commit": d_id, "delta": true, "stop": stop});
    let joined = h.ok("POST", "/v1/read", read("compaction")).await;
    assert_eq!(joined["commit"], json!(d_id));
    assert_eq!(joined["content"], json!("doc\nw1\nw2\n"));
    assert_eq!(joined["parent"], json!(a_id), "the snapshot's parent");
    assert_eq!(joined["size"], json!(10));
    assert_eq!(joined["cached"], json!(false));
    let from_c = h.ok("POST", "/v1/read", read(c_id)).await;
    assert_eq!(from_c["content"], json!("w2\n"));
    assert_eq!(from_c["parent"], json!(c_id));
    // From the root every commit's own bytes, snapshots too; a depth
    // takes the newest and names where to go on.
    let all = h.ok("POST", "/v1/read", read("root")).await;
    assert_eq!(all["content"], json!("below\ndoc\nw1\nw2\n"));
    assert!(all.get("parent").is_none(), "{all}");
    let mut page = read("root");
    page["depth"] = json!(2);
    let newest = h.ok("POST", "/v1/read", page.clone()).await;
    assert_eq!(newest["content"], json!("w1\nw2\n"));
    assert_eq!(newest["parent"], json!(b_id));
    page["commit"] = newest["parent"].clone();
    let rest = h.ok("POST", "/v1/read", page).await;
    assert_eq!(rest["content"], json!("below\ndoc\n"));
    assert!(rest.get("parent").is_none(), "{rest}");
    let mut capped = read("compaction");
    capped["depth"] = json!(1);
    let one = h.ok("POST", "/v1/read", capped).await;
    assert_eq!(one["content"], json!("w2\n"));
    // Nothing cached: a materialize of the same stop builds its result.
    let m = h
        .ok(
            "POST",
            &format!("/v1/commits/{d_id}/materialize"),
            json!({"stop": "compaction"}),
        )
        .await;
    assert_eq!(m["cached"], json!(false));
    assert_eq!(m["artifact_ref"], joined["artifact_ref"]);
}

/// A request with two `Authorization` headers is refused (a proxy in front
/// may read the other one), whichever of them is valid, and writes nothing.
#[tokio::test]
async fn two_authorization_headers_are_a_400_naming_authorization() {
    let h = harness().await;
    for (first, second) in [(TOKEN_A, "nope"), ("nope", TOKEN_A), (TOKEN_A, TOKEN_B)] {
        let body = serde_json::to_vec(&testing::checkpoint_body("two", None)).unwrap();
        let req = Request::builder()
            .method("POST")
            .uri("/v1/commits")
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {first}"))
            .header("authorization", format!("Bearer {second}"))
            .body(AxBody::from(body))
            .unwrap();
        let resp = h.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{first}, {second}: {v}");
        assert_eq!(v["error"]["field"], "authorization", "{v}");
    }
    let (status, v) = h
        .call("GET", "/v1/resolve?principal=alice", Some(TOKEN_A), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was written: {v}");
}
