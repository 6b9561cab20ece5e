//! The facade as a binding uses it: calls by threads that block, calls
//! spawned for async callers, two openers of one directory, bad input.

use std::sync::Arc;

use bytes::Bytes;
use ctx_embedded::{Embedded, Request, Response};
use serde_json::{Value, json};

fn post(target: &str, body: &Value) -> Request {
    Request {
        method: "POST".into(),
        target: target.into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(body.to_string()),
    }
}

fn get(target: &str) -> Request {
    Request {
        method: "GET".into(),
        target: target.into(),
        ..Request::default()
    }
}

fn json_of(r: &Response) -> Value {
    serde_json::from_slice(&r.body).expect("a JSON answer")
}

fn turn(text: &str, parent: Option<&str>) -> Value {
    json!({
        "commit_type": "delta", "format": "raw", "template": "t",
        "principal": "alice", "checkpoint": "turn_boundary",
        "delta": format!("user: {text}\n"),
        "ref": {"name": "sessions/s", "expected": parent},
        "parent": parent,
    })
}

#[test]
fn a_fresh_directory_answers_every_operation_as_the_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = Embedded::open(dir.path(), None).unwrap();
    let first = db.call(post("/v1/commits", &turn("one", None)));
    assert_eq!(
        first.status,
        201,
        "{:?}",
        String::from_utf8_lossy(&first.body)
    );
    let id = json_of(&first)["id"].as_str().unwrap().to_owned();
    let second = db.call(post("/v1/commits", &turn("two", Some(&id))));
    assert_eq!(second.status, 201);
    let tip = json_of(&second)["id"].as_str().unwrap().to_owned();
    let r = db.call(get("/v1/refs/sessions/s"));
    assert_eq!(json_of(&r)["target"], tip.as_str());
    let read = db.call(post(
        "/v1/read",
        &json!({"ref": "sessions/s", "stop": "root"}),
    ));
    assert_eq!(json_of(&read)["content"], "user: one\nuser: two\n");
    // A stale compare-and-swap is the API's 409, naming where the ref is.
    let stale = db.call(post("/v1/commits", &turn("late", Some(&id))));
    assert_eq!(stale.status, 409);
    assert_eq!(json_of(&stale)["current"], tip.as_str());
    // Headers come through (a workspace file's version).
    let put = db.call(Request {
        method: "PUT".into(),
        target: "/v1/workspaces/w/files/notes.md".into(),
        headers: vec![],
        body: Bytes::from_static(b"# notes\n"),
    });
    assert_eq!(put.status, 200);
    let file = db.call(get("/v1/workspaces/w/files/notes.md"));
    assert_eq!(&file.body[..], b"# notes\n");
    assert!(
        file.headers.iter().any(|(k, _)| k == "etag"),
        "{:?}",
        file.headers
    );
}

#[test]
fn bad_input_is_the_apis_400_naming_the_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Embedded::open(dir.path(), None).unwrap();
    let mut body = turn("one", None);
    body["principal"] = json!("no spaces allowed");
    let r = db.call(post("/v1/commits", &body));
    assert_eq!(r.status, 400);
    assert_eq!(json_of(&r)["error"]["field"], "principal");
    let not_json = db.call(Request {
        body: Bytes::from_static(b"{nope"),
        ..post("/v1/commits", &json!({}))
    });
    assert_eq!(not_json.status, 400);
    assert_eq!(json_of(&not_json)["error"]["field"], "body");
    // A request HTTP cannot carry is a 400 too, not a panic.
    let odd = db.call(get("/v1/refs/a b"));
    assert_eq!(odd.status, 400);
    let none = db.call(get("/v1/refs/sessions/s"));
    assert_eq!(none.status, 404);
}

#[test]
fn threads_call_at_once_and_an_async_caller_awaits_on_its_own_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Embedded::open(dir.path(), None).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let mut body = turn(&format!("{t}-{i}"), None);
                    body["ref"] = json!({"name": format!("sessions/t{t}-{i}")});
                    let r = db.call(post("/v1/commits", &body));
                    assert_eq!(r.status, 201);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let refs = db.call(get("/v1/refs?prefix=sessions/t&limit=1000"));
    assert_eq!(json_of(&refs)["refs"].as_array().unwrap().len(), 100);
    // Another runtime (as a binding's event loop has) awaits the handle.
    let other = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = other.block_on(db.spawn(get("/healthz"))).unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]));
    // And a callback gets the answer off the runtime's async workers.
    let (tx, rx) = std::sync::mpsc::channel();
    db.call_then(get("/healthz"), move |r| tx.send(r.status).unwrap());
    assert_eq!(rx.recv().unwrap(), 200);
}

#[test]
fn two_openers_of_one_directory_see_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    let a = Embedded::open(dir.path(), None).unwrap();
    let b = Embedded::open(dir.path(), None).unwrap();
    let first = a.call(post("/v1/commits", &turn("one", None)));
    let id = json_of(&first)["id"].as_str().unwrap().to_owned();
    let seen = b.call(get(&format!("/v1/commits/{id}")));
    assert_eq!(seen.status, 200);
    // And their compare-and-swaps exclude each other.
    let mine = b.call(post("/v1/commits", &turn("b", Some(&id))));
    assert_eq!(mine.status, 201);
    let theirs = a.call(post("/v1/commits", &turn("a", Some(&id))));
    assert_eq!(theirs.status, 409);
    // Another tenant sees none of it.
    let other = Embedded::open(dir.path(), Some("other")).unwrap();
    assert_eq!(other.call(get(&format!("/v1/commits/{id}"))).status, 404);
}
