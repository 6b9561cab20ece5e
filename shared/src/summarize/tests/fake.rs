//! The fake LLM server the model-backed summarizers are tested against:
//! it answers with the replies a test gives, in order, and records each
//! request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
/// What the fake server answers to one request.
#[derive(Clone)]
pub(super) enum Reply {
    /// A status, headers and a body.
    With(u16, Vec<(&'static str, String)>, String),
    /// Never answers (the client's timeout fires).
    Hang,
}

pub(super) fn ok(body: Value) -> Reply {
    Reply::With(200, Vec::new(), body.to_string())
}

/// One request the fake server received.
#[derive(Debug, Clone)]
pub(super) struct Received {
    pub(super) path: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Value,
}

#[derive(Clone, Default)]
pub(super) struct Fake {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Fake {
    /// Serves `replies` in order on 127.0.0.1 (the last one again when
    /// they run out); returns the base URL.
    pub(super) async fn start(replies: Vec<Reply>) -> (Fake, String) {
        let fake = Fake {
            replies: Arc::new(Mutex::new(replies.into())),
            ..Fake::default()
        };
        let app = Router::new().fallback(answer).with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (fake, format!("http://{addr}"))
    }

    pub(super) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn answer(State(fake): State<Fake>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    fake.received.lock().unwrap().push(Received {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = {
        let mut q = fake.replies.lock().unwrap();
        if q.len() > 1 {
            q.pop_front().unwrap()
        } else {
            q.front().cloned().unwrap()
        }
    };
    match reply {
        Reply::With(status, headers, body) => {
            let mut resp = (StatusCode::from_u16(status).unwrap(), body).into_response();
            resp.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            for (k, v) in headers {
                resp.headers_mut().insert(k, v.parse().unwrap());
            }
            resp
        }
        Reply::Hang => std::future::pending().await,
    }
}
