//! An axum HTTP service with the one-line swap.
//!
//! `http_service [addr] [seconds]` (default 127.0.0.1:8080, run until
//! killed). Routes: `GET /` (a greeting), `POST /echo` (echoes a JSON
//! body with its length), `GET /stats` (this process's busiest caches).

use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[derive(Deserialize)]
struct Message {
    text: String,
}

#[derive(Serialize)]
struct Echo {
    text: String,
    length: usize,
}

#[derive(Serialize)]
struct CacheLine {
    name: String,
    allocations: u64,
    live_objects: i64,
}

async fn echo(Json(message): Json<Message>) -> Json<Echo> {
    let length = message.text.len();
    Json(Echo {
        text: message.text,
        length,
    })
}

async fn stats() -> Json<Vec<CacheLine>> {
    let mut caches = sheafalloc::caches();
    caches.sort_by_key(|c| std::cmp::Reverse(c.allocations));
    Json(
        caches
            .into_iter()
            .take(8)
            .map(|c| CacheLine {
                allocations: c.allocations,
                live_objects: c.live_objects,
                name: c.name,
            })
            .collect(),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let seconds: Option<u64> = args.next().and_then(|s| s.parse().ok());
    let app = Router::new()
        .route(
            "/",
            get(|| async { "hello from an axum service on sheafalloc\n" }),
        )
        .route("/echo", post(echo))
        .route("/stats", get(stats));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "http_service listening on http://{}",
        listener.local_addr()?
    );
    let server = axum::serve(listener, app);
    match seconds {
        Some(seconds) => {
            let _ = tokio::time::timeout(Duration::from_secs(seconds), server).await;
            Ok(())
        }
        None => server.await,
    }
}
