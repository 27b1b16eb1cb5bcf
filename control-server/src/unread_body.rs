//! Connection reuse after an answer that left the request body unread.
//!
//! Many answers go out before the body is read: a 401 from the token
//! check, a 421 from the `Host` check, a 404 or 405, a 413 for a declared
//! length above the limit, or a `GET` handler that ignores a body sent
//! with it. Hyper cannot reuse such a connection (the unread bytes would be
//! taken for the next request), so it closes it once the answer is out.
//! Without a word about that in the answer, a client that pools
//! connections may send its next request on the socket the server is
//! closing, and see "peer disconnected" instead of an answer.
//!
//! [`close_if_body_unread`] watches the body; when the handler is done and
//! the body was not read to its end, the answer carries `connection:
//! close`, so the client opens a new connection for its next request.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header::{HeaderValue, CONNECTION};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// Middleware: `connection: close` on an answer to a request whose body
/// was not read to its end.
pub(crate) async fn close_if_body_unread(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        // No body: nothing can be left unread.
        return next.run(Request::from_parts(parts, body)).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let watched = Body::new(Watched {
        inner: body,
        ended: Arc::clone(&ended),
    });
    let mut response = next.run(Request::from_parts(parts, watched)).await;
    if !ended.load(Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that records when it has been read to its end.
struct Watched {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            // An error or a pending read: not at the end.
            Poll::Ready(Some(Err(_))) | Poll::Pending => false,
        };
        if ended {
            self.ended.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::{get, post};
    use axum::{middleware, Router};
    use tower::ServiceExt;

    use super::*;

    fn app() -> Router {
        Router::new()
            .route("/ignores", get(|| async { "ok" }))
            .route("/reads", post(|body: Bytes| async move { body }))
            .layer(middleware::from_fn(close_if_body_unread))
    }

    async fn connection_header(request: Request) -> Option<String> {
        let response = app().oneshot(request).await.unwrap();
        response
            .headers()
            .get(CONNECTION)
            .map(|value| value.to_str().unwrap().to_owned())
    }

    fn request(method: &str, path: &str, body: &'static str) -> Request {
        Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from(body))
            .unwrap()
    }

    #[tokio::test]
    async fn an_unread_body_closes_the_connection() {
        assert_eq!(
            connection_header(request("GET", "/ignores", "x")).await,
            Some("close".to_owned())
        );
        // No route: the body is never read either.
        assert_eq!(
            connection_header(request("POST", "/nowhere", "{}")).await,
            Some("close".to_owned())
        );
    }

    #[tokio::test]
    async fn a_read_body_or_none_keeps_it_open() {
        assert_eq!(
            connection_header(request("POST", "/reads", "{}")).await,
            None
        );
        assert_eq!(
            connection_header(request("GET", "/ignores", "")).await,
            None
        );
    }
}
