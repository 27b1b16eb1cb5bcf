//! The HTTP service's handler work without HTTP: the same JSON parsing,
//! pricing, building and serialising as `POST /orders` and `GET /catalog`
//! (`http::shop`), on one thread, with no runtime, sockets or load
//! generator.
//!
//! Beside the `http-*` workloads it splits a service's figure in two: what
//! the allocator does to the handlers' own code (these), and what the
//! runtime, the sockets and the threads add (the difference). Single-thread
//! runs are also far steadier on a shared host than a server and `wrk`
//! sharing two vCPUs.
//!
//! Every answer is checked: its length against the one computed before the
//! window (the work is deterministic), and the first answer byte for byte.

use super::http::shop;
use super::progress::{Budget, Window};
use super::single_thread::timed;

/// Handler calls per timed chunk (a few milliseconds).
const CALLS_PER_CHUNK: u64 = 200;

/// Which handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    /// Parse a 40-order body, price it, serialise the quote.
    Orders,
    /// Build a 200-item catalog and serialise it.
    Catalog,
}

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Length {
    /// Through the warm-up and the window (timed chunks of calls).
    Timed(Budget),
    /// Exactly this many calls after the check, with no warm-up: for
    /// callgrind, which counts two lengths and takes the difference.
    Calls(u64),
}

/// Runs `handler` for `length`; the window counts handler calls. Errs if
/// an answer differs from the expected one.
pub fn run(handler: Handler, length: Length) -> Result<Window, String> {
    let body = serde_json::to_vec(&shop::order_request()).map_err(|e| e.to_string())?;
    let call = |body: &[u8]| -> Result<Vec<u8>, String> {
        match handler {
            Handler::Orders => {
                let request: shop::OrderRequest =
                    serde_json::from_slice(body).map_err(|e| e.to_string())?;
                serde_json::to_vec(&shop::price(&request)).map_err(|e| e.to_string())
            }
            Handler::Catalog => serde_json::to_vec(&shop::catalog()).map_err(|e| e.to_string()),
        }
    };
    let expected = match handler {
        Handler::Orders => serde_json::to_vec(&shop::price(&shop::order_request())),
        Handler::Catalog => serde_json::to_vec(&shop::catalog()),
    }
    .map_err(|e| e.to_string())?;
    if call(&body)? != expected {
        return Err(format!(
            "{handler:?}: the answer differs from the expected one"
        ));
    }
    let mut wrong = 0u64;
    let mut calls = |n: u64| {
        for _ in 0..n {
            match call(&body) {
                Ok(answer) if answer.len() == expected.len() => {}
                _ => wrong += 1,
            }
        }
    };
    let window = match length {
        Length::Timed(budget) => timed(&budget, CALLS_PER_CHUNK, || calls(CALLS_PER_CHUNK)),
        Length::Calls(n) => {
            let start = std::time::Instant::now();
            calls(n);
            Window {
                operations: n,
                seconds: start.elapsed().as_secs_f64(),
            }
        }
    };
    if wrong != 0 {
        return Err(format!("{handler:?}: {wrong} answers were wrong"));
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_handlers_run_and_count_calls() {
        let budget = Budget {
            warmup: 0.0,
            seconds: 0.01,
        };
        for handler in [Handler::Orders, Handler::Catalog] {
            let window = run(handler, Length::Timed(budget)).unwrap();
            assert!(window.operations >= CALLS_PER_CHUNK);
            assert_eq!(window.operations % CALLS_PER_CHUNK, 0);
            assert_eq!(run(handler, Length::Calls(3)).unwrap().operations, 3);
        }
    }
}
