//! Token protection: when a token is configured, every request that is not
//! a read (`GET`, `HEAD`, `OPTIONS`) must carry `Authorization: Bearer
//! <token>`, and with [`crate::Config::token_for_reads`] every request
//! does. The comparison takes time independent of where the presented
//! token first differs (`subtle`); only its length may show.
//!
//! The router puts this only in front of the API: `GET /healthz` and the
//! page's static files stay open (they show no figures; the page asks for
//! the token and sends it with its own requests).

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::AppState;

/// Middleware: checks the bearer token on writes, and on reads too when
/// they are protected.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.token() else {
        return next.run(request).await;
    };
    if is_read(request.method()) && !state.token_for_reads() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| bearer_token(value.as_bytes()));
    match presented {
        Some(presented) if tokens_match(presented, token.as_bytes()) => next.run(request).await,
        _ => ApiError::Unauthorized.into_response(),
    }
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let scheme = header.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = header[7..].trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Constant-time equality (for equal lengths; a length mismatch returns at
/// once, which reveals only the length).
fn tokens_match(presented: &[u8], expected: &[u8]) -> bool {
    presented.ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_parsed_case_insensitively() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(tokens_match(b"s3cret", b"s3cret"));
        assert!(!tokens_match(b"s3cres", b"s3cret"));
        assert!(!tokens_match(b"s3cre", b"s3cret"));
        assert!(!tokens_match(b"", b"s3cret"));
    }
}
