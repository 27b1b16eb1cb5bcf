//! `GET /metrics`: the Prometheus text exposition ([`crate::exposition`]),
//! served from a short-lived cache.
//!
//! # Why a cache
//!
//! Building the exposition snapshots every cache, which walks the thread
//! registry under its lock and takes each barn and slab-list lock briefly:
//! the allocating threads' slow paths wait for those. A scrape every few
//! seconds costs nothing measurable, but anything that can reach the port
//! could send thousands of `GET /metrics` a second. So one built
//! exposition is served to every scrape for
//! [`crate::Config::metrics_max_age`] (1 s by default): however many
//! requests arrive, the allocator pays for at most one snapshot per
//! interval. Prometheus scrapes far less often than that, so it always sees
//! a fresh one; two scrapes within the interval see the same figures.
//!
//! The sidecar's runtime has one thread and the build does not await, so
//! requests that find the cache stale do not build it twice: the first one
//! builds and stores it before the next one runs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::Response;

use crate::AppState;

/// Content type of the text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The last exposition built, and when.
#[derive(Debug)]
pub(crate) struct ExpositionCache {
    max_age: Duration,
    last: Mutex<Option<(Instant, Bytes)>>,
}

impl ExpositionCache {
    pub(crate) fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            last: Mutex::new(None),
        }
    }

    /// The cached exposition if it is younger than the maximum age, else a
    /// freshly built one (then cached).
    pub(crate) fn get(&self) -> Bytes {
        // A poisoned lock only means a build panicked; the slot is still
        // a valid `Option`.
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((built, text)) = last.as_ref() {
            if built.elapsed() < self.max_age {
                return text.clone();
            }
        }
        let text = Bytes::from(crate::exposition::render());
        *last = Some((Instant::now(), text.clone()));
        text
    }
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let mut response = Response::new(Body::from(state.expositions().get()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exposition_is_reused_within_its_age_and_rebuilt_after() {
        let cache = ExpositionCache::new(Duration::from_secs(3600));
        let first = cache.get();
        let class = sheafalloc_core::SizeClass::from_name("size-36864").unwrap();
        sheafalloc_core::set_sheaf_capacity(class, 5).unwrap();
        // Same bytes, same buffer: not rebuilt although a figure changed.
        let second = cache.get();
        assert_eq!(first.as_ptr(), second.as_ptr());
        assert!(!String::from_utf8_lossy(&second).contains("size-36864"));
        let uncached = ExpositionCache::new(Duration::ZERO);
        let fresh = uncached.get();
        assert!(String::from_utf8_lossy(&fresh)
            .contains("sheafalloc_sheaf_capacity{cache=\"size-36864\"} 5\n"));
        assert_ne!(uncached.get().as_ptr(), fresh.as_ptr());
    }
}
