//! The context browser: a web page served at `/ui` from the same process
//! and origin as the API, by `ctx serve` (and by any host that merges
//! [`routes`] into its router). It is static: an HTML shell, one script and
//! one stylesheet, compiled into the binary, so nothing is fetched from
//! anywhere else at run time. The page calls the v1 API with the bearer
//! token the user enters once; the token stays in the tab's session storage
//! and never goes in a URL.
//!
//! Every path under `/ui` that is not an asset answers the shell, so each
//! view has a stable URL (`/ui/commit/ctx-…`, `/ui/chain?ref=…`) that the
//! script reads on load.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The page's shell, script and stylesheet.
const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// What the browser may do with the page: only this origin's script,
/// styles, images and API; no frames, no inline script, no plugins.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The routes API Gateway sends to the function that serves the browser
/// (method, API Gateway path): `/ui` and everything under it, with no
/// authorizer (the pages are public; the API calls they make carry the
/// token).
pub const GATEWAY_ROUTES: &[(&str, &str)] = &[("GET", "/ui"), ("GET", "/ui/{view+}")];

/// The routes of the browser: `/ui`, `/ui/assets/{file}` and the views' paths.
pub fn routes() -> Router {
    Router::new()
        .route("/ui", get(shell))
        .route("/ui/", get(shell))
        .route("/ui/assets/{file}", get(asset))
        .route("/ui/{*view}", get(shell))
}

fn page(status: StatusCode, content_type: &'static str, body: &'static str) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // The binary is the version: a new one may bring new assets.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

async fn shell() -> Response {
    page(StatusCode::OK, "text/html; charset=utf-8", INDEX)
}

async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => page(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT),
        "app.css" => page(StatusCode::OK, "text/css; charset=utf-8", STYLE),
        _ => page(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "no such asset\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn get(path: &str) -> (StatusCode, String, String) {
        let resp = routes()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let kind = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            resp.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("script-src 'self'")
        );
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, kind, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn every_view_path_answers_the_shell_and_the_assets_their_types() {
        for path in ["/ui", "/ui/", "/ui/commit/ctx-0", "/ui/chain", "/ui/a/b/c"] {
            let (status, kind, body) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(kind.starts_with("text/html"), "{path}");
            assert!(body.contains("/ui/assets/app.js"), "{path}");
        }
        assert!(
            get("/ui/assets/app.js")
                .await
                .1
                .starts_with("text/javascript")
        );
        assert!(get("/ui/assets/app.css").await.1.starts_with("text/css"));
        assert_eq!(get("/ui/assets/nope.js").await.0, StatusCode::NOT_FOUND);
    }
}
