//! Request limits: a body larger than [`crate::MAX_BODY_BYTES`] gets 413,
//! and a request not answered within the request timeout gets 408.
//!
//! A declared `Content-Length` above the limit is refused here, before any
//! handler runs; a chunked body is cut at the limit when a handler reads it
//! (axum's `DefaultBodyLimit`, installed next to this middleware), which
//! also answers 413.
//!
//! The limits of the connection itself (count, header size, header and
//! write timeouts) are applied by the server loop (`crate::server`).

use std::time::Duration;

use axum::extract::Request;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Middleware: 413 for a declared body above the limit.
pub(crate) async fn limit_body(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > crate::MAX_BODY_BYTES as u64) {
        return ApiError::PayloadTooLarge.into_response();
    }
    next.run(request).await
}

/// Middleware: 408 when reading the body and running the handler take
/// longer than `limit` (a client that declares a body and sends less, or
/// sends it slowly). The handler's future is dropped; the connection closes
/// after the answer because its body was not read to the end.
pub(crate) async fn request_timeout(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_elapsed) => ApiError::RequestTimeout.into_response(),
    }
}
