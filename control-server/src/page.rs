//! `GET /`: the live page — an HTML page, its script and its style sheet,
//! compiled into the binary (`src/page/`). No external assets: it works
//! offline and loads nothing from elsewhere.
//!
//! The page holds no figures itself: its script polls `GET /v1/caches`
//! (rates, slow-path share and barn hit rate over the refresh interval,
//! live vs held bytes, capacity, tuning state when the JSON has it) and
//! changes a capacity with `PUT /v1/caches/{name}/sheaf_capacity`, as any
//! client does: same origin, `content-type: application/json`, and the
//! bearer token if one is entered. So it stays open when reads need the
//! token (it asks for the token instead).
//!
//! Every answer carries a Content-Security-Policy that allows scripts,
//! styles and requests from this origin only and no framing (the capacity
//! form cannot be overlaid by another site), with `nosniff` and no
//! referrer.

use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};

/// The page.
pub const INDEX_HTML: &str = include_str!("page/index.html");
/// Its script.
pub const SCRIPT_JS: &str = include_str!("page/page.js");
/// Its style sheet.
pub const STYLE_CSS: &str = include_str!("page/page.css");

/// What the page may load and who may frame it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// `GET /`.
pub(crate) async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

/// `GET /page.js`.
pub(crate) async fn script() -> Response {
    asset(SCRIPT_JS, "text/javascript; charset=utf-8")
}

/// `GET /page.css`.
pub(crate) async fn style() -> Response {
    asset(STYLE_CSS, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // Small and compiled in: revalidating costs nothing, and a new build's
    // page is never hidden behind an old one.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        assert!(INDEX_HTML.contains(r#"<script src="/page.js" defer></script>"#));
        assert!(INDEX_HTML.contains(r#"<link rel="stylesheet" href="/page.css">"#));
        for text in [INDEX_HTML, SCRIPT_JS, STYLE_CSS] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("//cdn"), "no external assets");
        }
        // The script speaks to the API of this crate.
        assert!(SCRIPT_JS.contains("/v1/caches"));
        assert!(SCRIPT_JS.contains("\"content-type\"] = \"application/json\""));
    }
}
