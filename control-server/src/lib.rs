//! The HTTP sidecar of sheafalloc: per-cache statistics as JSON and as
//! Prometheus metrics, live tuning of each cache's sheaf capacity, the NUMA
//! topology, and a purge, served by axum on its own OS thread with a
//! current-thread tokio runtime.
//!
//! # Layers
//!
//! This crate sits above `sheafalloc-core` and reads only its public
//! statistics and tuning functions (`stats`, `set_sheaf_capacity`,
//! `runtime::purge`, `node`); it never depends on `sheafalloc`. The
//! `control` feature of `sheafalloc` calls [`spawn_from_env`] at process
//! start when `SHEAFALLOC_CONTROL_ADDR` is set.
//!
//! The sidecar allocates like any Rust code (through whatever global
//! allocator the process installs); it runs on its own thread, never inside
//! the allocator.
//!
//! # Endpoints
//!
//! | method, path | does |
//! |---|---|
//! | `GET /` | the live page (with `/page.js`, `/page.css`; no external assets) |
//! | `GET /v1/caches` | every cache with its counters, plus direct mappings and threads |
//! | `GET /v1/caches/{name}` | one cache (`size-256`) |
//! | `PUT /v1/caches/{name}/sheaf_capacity` | body `{"sheaf_capacity": N}`, `1..=sheaf_capacity_max`; live |
//! | `GET /v1/topology` | the allocator's nodes and the host's NUMA nodes with CPU sets |
//! | `POST /v1/purge` | body `{}`; returns free memory to the OS now |
//! | `GET /metrics` | Prometheus text, names prefixed `sheafalloc_` (cached 1 s) |
//! | `GET /healthz` | liveness |
//!
//! Errors are JSON `{"error": "..."}` with the matching status (400, 401,
//! 403, 404, 405, 408, 413, 415, 421, 422, 500).
//!
//! # Who may ask
//!
//! A served sidecar answers only requests that name it (`Host`: the bound
//! address or a loopback name; 421 otherwise), takes writes only from its
//! own origin (403) and only as JSON (415), and with a token configured
//! needs `Authorization: Bearer <token>` on writes, and on reads too if
//! asked ([`Config::token_for_reads`]). See [`cross_site`] and [`Config`].
//!
//! # Limits
//!
//! What a client can make the sidecar hold is bounded: connections at once,
//! the request head's size, the body (4 KiB), and the time a connection may
//! spend idle, sending its head, sending its body or not reading the
//! answer. See [`Limits`] for the values and [`Config::with_limits`].
//!
//! # Example
//!
//! The router is a plain `axum::Router`: call it without a socket.
//!
//! ```
//! use axum::body::{to_bytes, Body};
//! use axum::http::{Request, StatusCode};
//! use sheafalloc_control::{router, AppState};
//! use tower::ServiceExt; // for `oneshot`
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! runtime.block_on(async {
//!     let app = router(AppState::new(None));
//!     let request = Request::get("/healthz").body(Body::empty()).unwrap();
//!     let response = app.oneshot(request).await.unwrap();
//!     assert_eq!(response.status(), StatusCode::OK);
//!     let body = to_bytes(response.into_body(), 1024).await.unwrap();
//!     assert_eq!(&body[..], br#"{"status":"ok"}"#);
//! });
//! ```
//!
//! To serve on a socket, [`spawn`] a [`Config`] and keep the handle:
//!
//! ```no_run
//! let handle = sheafalloc_control::spawn(sheafalloc_control::Config::default())?;
//! println!("control plane on {}", handle.url());
//! # Ok::<(), sheafalloc_control::SpawnError>(())
//! ```
#![warn(missing_docs)]

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{middleware, Router};
use tower_http::catch_panic::CatchPanicLayer;

mod auth;
pub mod caches;
#[cfg(feature = "client")]
pub mod client;
pub mod config;
mod conn;
pub mod cross_site;
pub mod error;
pub mod exposition;
pub mod health;
mod limits;
pub mod metrics;
pub mod page;
mod process;
pub mod purge;
pub mod server;
pub mod state;
pub mod token;
pub mod topology;
mod unread_body;

pub use config::{Config, ConfigError, Limits};
pub use error::{ApiError, ErrorBody};
pub use server::{spawn, spawn_from_env, spawn_router, ControlHandle, SpawnError};
pub use state::AppState;

/// Largest request body accepted, in bytes; larger ones get 413.
pub const MAX_BODY_BYTES: usize = 4096;

/// The API: every endpoint over `state`, with [`harden`] applied.
///
/// The token check (and, for writes, the origin and content-type checks of
/// [`cross_site`]) guard the API; the page's static files and `/healthz`
/// show no figures and stay open. The `Host` check needs the bound address,
/// so the server loop adds it ([`spawn`], [`spawn_router`]).
pub fn router(state: AppState) -> Router {
    let open = Router::new()
        .route("/", get(page::index))
        .route("/page.js", get(page::script))
        .route("/page.css", get(page::style))
        .route("/healthz", get(health::healthz));
    // The write checks wrap each write handler, not the whole route, so a
    // wrong method still gets its 405.
    let write = || middleware::from_fn(cross_site::check_writes);
    let api = Router::new()
        .route("/v1/caches", get(caches::list))
        .route("/v1/caches/{name}", get(caches::show))
        .route(
            "/v1/caches/{name}/sheaf_capacity",
            put(caches::set_capacity).route_layer(write()),
        )
        .route("/v1/topology", get(topology::topology))
        .route("/v1/purge", post(purge::purge).route_layer(write()))
        .route("/metrics", get(metrics::metrics))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .with_state(state);
    harden(open.merge(api))
}

/// Wraps any routes the way the API is wrapped: JSON 404 for unknown
/// paths, every error response as `{"error": "..."}` (405s keep their
/// `Allow` header), bodies above [`MAX_BODY_BYTES`] refused with 413, and a
/// panic in a handler answered with a JSON 500 while the server goes on.
pub fn harden(routes: Router) -> Router {
    routes
        .fallback(error::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(limits::limit_body))
        .layer(middleware::map_response(error::json_errors))
        .layer(CatchPanicLayer::custom(error::panic_response))
}

/// Maps an axum extractor rejection (its status and text) to an
/// [`ApiError`].
pub(crate) fn rejection_to_error(status: StatusCode, text: String) -> ApiError {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        StatusCode::NOT_FOUND => ApiError::NotFound(text),
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::Unprocessable(text),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType,
        status if status.is_server_error() => ApiError::Internal(text),
        _ => ApiError::BadRequest(text),
    }
}
