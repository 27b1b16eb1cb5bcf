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

use super::http::{shop, Endpoint};
use super::progress::{Budget, Window};
use super::single_thread::timed;

/// Handler calls per timed chunk (a few milliseconds).
const CALLS_PER_CHUNK: u64 = 200;

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Length {
    /// Through the warm-up and the window (timed chunks of calls).
    Timed(Budget),
    /// Exactly this many calls after the check, with no warm-up: for
    /// callgrind, which counts two lengths and takes the difference.
    Calls(u64),
}

/// Runs the handler of `endpoint` for `length`; the window counts handler
/// calls. Errs if an answer differs from the expected one.
pub fn run(endpoint: Endpoint, length: Length) -> Result<Window, String> {
    let body = serde_json::to_vec(&shop::order_request()).map_err(|e| e.to_string())?;
    let call = |body: &[u8]| -> Result<Vec<u8>, String> {
        match endpoint {
            Endpoint::Orders => {
                let request: shop::OrderRequest =
                    serde_json::from_slice(body).map_err(|e| e.to_string())?;
                serde_json::to_vec(&shop::price(&request)).map_err(|e| e.to_string())
            }
            Endpoint::Catalog => serde_json::to_vec(&shop::catalog()).map_err(|e| e.to_string()),
        }
    };
    let expected = match endpoint {
        Endpoint::Orders => serde_json::to_vec(&shop::price(&shop::order_request())),
        Endpoint::Catalog => serde_json::to_vec(&shop::catalog()),
    }
    .map_err(|e| e.to_string())?;
    if call(&body)? != expected {
        return Err(format!(
            "{endpoint:?}: the answer differs from the expected one"
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
        return Err(format!("{endpoint:?}: {wrong} answers were wrong"));
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
        for endpoint in [Endpoint::Orders, Endpoint::Catalog] {
            let window = run(endpoint, Length::Timed(budget)).unwrap();
            assert!(window.operations >= CALLS_PER_CHUNK);
            assert_eq!(window.operations % CALLS_PER_CHUNK, 0);
            assert_eq!(run(endpoint, Length::Calls(3)).unwrap().operations, 3);
        }
    }
}
