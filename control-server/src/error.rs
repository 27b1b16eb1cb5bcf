//! Errors of the HTTP API: one enum, [`ApiError`], that maps to a status
//! code and a JSON body `{"error": "..."}`, plus the pieces that make every
//! other error response of the sidecar look the same — routing 404s and
//! 405s, axum's extractor rejections, and panics caught in a handler.
//!
//! Nothing here may panic: it runs on the path that reports failures.

use std::any::Any;

use axum::body::{to_bytes, Body};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// The JSON body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
}

/// Every way a request can fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// 400: the request is malformed (bad JSON, wrong field type, bad path).
    BadRequest(String),
    /// 401: a write (or, with reads protected, any request) without a
    /// valid bearer token while a token is set.
    Unauthorized,
    /// 403: a write sent from another site (its `Origin` or
    /// `Sec-Fetch-Site` names one).
    Forbidden(String),
    /// 404: no cache by this name, or no such route.
    NotFound(String),
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 408: the body did not arrive, or the handler did not finish, within
    /// the request timeout ([`crate::config::Limits::request_timeout`]).
    RequestTimeout,
    /// 413: the body is larger than [`crate::MAX_BODY_BYTES`].
    PayloadTooLarge,
    /// 415: a write whose body is not declared `application/json`.
    UnsupportedMediaType,
    /// 421: the `Host` is neither the address the sidecar is bound to nor
    /// a loopback name (DNS rebinding, or a request meant for elsewhere).
    MisdirectedRequest(String),
    /// 422: well-formed but outside what is allowed (a capacity out of range).
    Unprocessable(String),
    /// 500: the sidecar failed (a caught panic, a failed background task).
    Internal(String),
}

impl ApiError {
    /// The HTTP status this error maps to.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::MisdirectedRequest(_) => StatusCode::MISDIRECTED_REQUEST,
            Self::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message of the JSON body.
    pub fn message(&self) -> String {
        match self {
            Self::BadRequest(message)
            | Self::Forbidden(message)
            | Self::MisdirectedRequest(message)
            | Self::NotFound(message)
            | Self::Unprocessable(message)
            | Self::Internal(message) => message.clone(),
            Self::Unauthorized => "this request needs the header `Authorization: Bearer <token>` \
                 with the token of SHEAFALLOC_CONTROL_TOKEN (or SHEAFALLOC_CONTROL_TOKEN_FILE)"
                .to_owned(),
            Self::UnsupportedMediaType => {
                "writes must be sent with `content-type: application/json` \
                 (a purge with the body {})"
                    .to_owned()
            }
            Self::MethodNotAllowed => "method not allowed on this path".to_owned(),
            Self::RequestTimeout => {
                "the request was not complete, or not answered, within the request timeout"
                    .to_owned()
            }
            Self::PayloadTooLarge => {
                format!("request body larger than {} bytes", crate::MAX_BODY_BYTES)
            }
        }
    }
}

impl core::fmt::Display for ApiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.status(), self.message())
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_error(self.status(), self.message());
        if self == Self::Unauthorized {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Builds `{"error": message}` with `status`.
pub(crate) fn json_error(status: StatusCode, message: String) -> Response {
    let body = serde_json::to_vec(&ErrorBody { error: message })
        .unwrap_or_else(|_| br#"{"error":"unprintable error"}"#.to_vec());
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Fallback for paths no route matches.
pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint; see GET /v1/caches, /v1/topology, /metrics".to_owned())
}

/// Largest error body this layer reads back to re-wrap as JSON.
const REWRAP_LIMIT_BYTES: usize = 16 * 1024;

/// Middleware (`map_response`): turns every error response that is not
/// JSON yet — axum's rejections (plain text), the router's bare 405, a
/// body-limit 413 — into `{"error": "..."}`, keeping the status and headers
/// such as `Allow`.
pub(crate) async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match to_bytes(body, REWRAP_LIMIT_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if !text.is_empty() {
        text
    } else if status == StatusCode::METHOD_NOT_ALLOWED {
        ApiError::MethodNotAllowed.message()
    } else {
        status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_lowercase()
    };
    let rewrapped = json_error(status, message);
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let (_, body) = rewrapped.into_parts();
    Response::from_parts(parts, body)
}

/// Response for a panic caught in a handler (tower-http `CatchPanic`): a
/// JSON 500; the sidecar goes on serving.
pub(crate) fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic".to_owned()
    };
    ApiError::Internal(format!("internal error in the control plane: {detail}")).into_response()
}
