//! A real HTTP service under a real load generator: an axum server on a
//! tokio runtime of two worker threads, on 127.0.0.1, loaded by `wrk` (a
//! separate process: 2 threads, 64 connections).
//!
//! * `POST /orders`: parses a JSON list of 40 orders (about 4 KiB),
//!   prices it and answers with the serialised quote;
//! * `GET /catalog`: builds a 200-item catalog and answers with it
//!   serialised (about 40 KiB).
//!
//! Before the load, the process asks each endpoint once over a plain TCP
//! connection and checks the answer against [`shop`] computed locally; after
//! it, the run is rejected if wrk saw a non-2xx answer or a socket error,
//! or if the server answered fewer requests than wrk counted. Reports wrk's
//! requests per second, and the server process's peak RSS (`VmHWM`: the
//! whole run, start-up included).

pub mod shop;
pub mod wrk;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};

use super::os;

/// Runtime worker threads of the server.
pub const WORKERS: usize = 2;

/// Which endpoint the load hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /orders`.
    Orders,
    /// `GET /catalog`.
    Catalog,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Endpoint::Orders => "/orders",
            Endpoint::Catalog => "/catalog",
        }
    }
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// What wrk reported for the measured run.
    pub load: wrk::Report,
    /// Requests the server answered (warm-up and checks included).
    pub served: u64,
    /// RSS before the server started, bytes.
    pub baseline_rss: u64,
    /// Peak RSS of this process over the whole run, bytes.
    pub peak_rss: u64,
    /// RSS after the load, bytes.
    pub final_rss: u64,
}

/// Requests answered, counted by the handlers.
#[derive(Debug, Default)]
struct Served(AtomicU64);

impl Served {
    fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The service's routes.
fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/orders", post(orders))
        .route("/catalog", get(catalog))
        .with_state(served)
}

async fn orders(
    State(served): State<Arc<Served>>,
    Json(request): Json<shop::OrderRequest>,
) -> Json<shop::Quote> {
    served.count();
    Json(shop::price(&request))
}

async fn catalog(State(served): State<Arc<Served>>) -> Json<shop::Catalog> {
    served.count();
    Json(shop::catalog())
}

/// The service, running on its own runtime.
#[derive(Debug)]
pub struct Server {
    runtime: tokio::runtime::Runtime,
    address: SocketAddr,
    served: Arc<Served>,
}

impl Server {
    /// Starts the service on 127.0.0.1 (a port the OS picks).
    pub fn start() -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let served = Arc::new(Served::default());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(SocketAddr::from((
                [127, 0, 0, 1],
                0,
            ))))
            .map_err(|e| format!("bind: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let app = router(served.clone());
        runtime.spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            runtime,
            address,
            served,
        })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served.0.load(Ordering::Relaxed)
    }

    /// Asks `endpoint` once over a plain connection and checks the answer
    /// against the same work done locally.
    pub fn check(&self, endpoint: Endpoint) -> Result<(), String> {
        check_answer(self.address, endpoint)
    }

    /// Stops the runtime (open connections are dropped).
    pub fn stop(self) {
        self.runtime.shutdown_timeout(Duration::from_secs(1));
    }
}

/// Runs the service and the load: `warmup` whole seconds of load first
/// (none if 0), then `seconds` measured.
pub fn run(endpoint: Endpoint, warmup: u64, seconds: u64) -> Result<Outcome, String> {
    wrk::check_installed()?;
    let baseline_rss = os::rss_bytes().unwrap_or(0);
    let server = Server::start()?;
    server.check(endpoint)?;
    let body = serde_json::to_string(&shop::order_request()).map_err(|e| e.to_string())?;
    let script = match endpoint {
        Endpoint::Orders => Some(wrk::post_json_script(&body)),
        Endpoint::Catalog => None,
    };
    let load = |seconds| {
        wrk::run(&wrk::Load {
            url: format!("http://{}{}", server.address(), endpoint.path()),
            seconds,
            script: script.as_deref(),
        })
    };
    if warmup > 0 {
        load(warmup)?;
    }
    let before = server.served();
    // Under sheafalloc, its counters are read at both edges of the
    // measured load, so the result line gives what the window alone did.
    super::global::window_edge();
    let report = load(seconds);
    super::global::window_edge();
    let report = report?;
    let during = server.served() - before;
    let peak_rss = os::peak_rss_bytes().unwrap_or(0);
    let final_rss = os::rss_bytes().unwrap_or(0);
    let served = server.served();
    server.stop();
    if report.non_2xx != 0 || report.socket_errors != 0 {
        return Err(format!(
            "wrk saw {} non-2xx answers and {} socket errors",
            report.non_2xx, report.socket_errors
        ));
    }
    if during < report.requests {
        return Err(format!(
            "wrk counted {} responses, the server answered {during}",
            report.requests
        ));
    }
    Ok(Outcome {
        load: report,
        served,
        baseline_rss,
        peak_rss,
        final_rss,
    })
}

/// Asks `endpoint` once over a plain connection and checks the answer.
fn check_answer(address: SocketAddr, endpoint: Endpoint) -> Result<(), String> {
    let request_body = match endpoint {
        Endpoint::Orders => {
            serde_json::to_string(&shop::order_request()).map_err(|e| e.to_string())?
        }
        Endpoint::Catalog => String::new(),
    };
    let method = match endpoint {
        Endpoint::Orders => "POST",
        Endpoint::Catalog => "GET",
    };
    let answer = exchange(address, method, endpoint.path(), &request_body)
        .map_err(|e| format!("checking {}: {e}", endpoint.path()))?;
    let matches = match endpoint {
        Endpoint::Orders => serde_json::from_str::<shop::Quote>(&answer)
            .is_ok_and(|quote| quote == shop::price(&shop::order_request())),
        Endpoint::Catalog => {
            serde_json::from_str::<shop::Catalog>(&answer).is_ok_and(|c| c == shop::catalog())
        }
    };
    if matches {
        Ok(())
    } else {
        Err(format!(
            "{} answered something else than expected: {}",
            endpoint.path(),
            answer.chars().take(200).collect::<String>()
        ))
    }
}

/// One HTTP/1.1 request on a fresh connection; returns the body of a 200.
fn exchange(address: SocketAddr, method: &str, path: &str, body: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("no end of headers")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "status line {:?}",
            head.lines().next().unwrap_or("")
        ));
    }
    Ok(body.to_owned())
}
