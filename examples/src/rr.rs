//! A request/response service over loopback TCP, and the load that drives
//! it: the tcp_rr pattern of a network service.
//!
//! Protocol: each frame is a 4-byte big-endian length and a payload. The
//! server reads a request frame into a freshly allocated buffer, parses it
//! into a small header and a body, and answers with a freshly built
//! response (a formatted header plus the body reversed) — allocations a
//! real service makes per request. The client checks every response.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest request the server accepts.
pub const MAX_FRAME: usize = 64 * 1024;

async fn read_frame(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_be_bytes(length) as usize;
    if length > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).await?;
    Ok(Some(payload))
}

async fn write_frame(stream: &mut TcpStream, payload: &[u8]) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    stream.write_all(&frame).await
}

/// Builds the response to one request (allocates, like a real handler).
pub fn respond(request: &[u8]) -> Vec<u8> {
    let split = request
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or(request.len());
    let (header, body) = request.split_at(split);
    let key = String::from_utf8_lossy(header).into_owned();
    let mut response = format!("OK {key} {}\n", body.len()).into_bytes();
    response.extend(body.iter().rev());
    response
}

/// Serves connections until the listener is dropped with the runtime.
pub async fn serve(listener: TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            while let Ok(Some(request)) = read_frame(&mut stream).await {
                let response = respond(&request);
                if write_frame(&mut stream, &response).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// What a load run achieved.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadResult {
    /// Requests answered and checked.
    pub requests: u64,
    /// Seconds the load ran.
    pub seconds: f64,
    /// Connections used.
    pub connections: usize,
}

impl LoadResult {
    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `connections` clients against `addr` for `duration`, each sending a
/// request of a few hundred bytes, waiting for its response and checking it.
pub async fn load(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
) -> std::io::Result<LoadResult> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::with_capacity(connections);
    for id in 0..connections {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        clients.push(tokio::spawn(async move {
            let mut sequence = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sequence += 1;
                let body_len = 64 + (sequence as usize * 37 + id) % 448;
                let mut request = format!("conn-{id}-req-{sequence}\n").into_bytes();
                request.extend((0..body_len).map(|i| b'a' + (i % 26) as u8));
                write_frame(&mut stream, &request).await?;
                let Some(response) = read_frame(&mut stream).await? else {
                    break;
                };
                if response != respond(&request) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "wrong response",
                    ));
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let seconds = start.elapsed().as_secs_f64();
    let requests = done.load(Ordering::Relaxed);
    for client in clients {
        client.await.map_err(std::io::Error::other)??;
    }
    Ok(LoadResult {
        requests,
        seconds,
        connections,
    })
}

/// The demo service: serves on a loopback port and drives itself with
/// `connections` clients for `duration` on a 2-worker runtime. Prints one
/// JSON line with the figures, for the demo driver to read.
pub fn run_demo_service(allocator: &str, connections: usize, duration: Duration) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(serve(listener));
        load(addr, connections, duration).await
    });
    let result = match result {
        Ok(result) => result,
        Err(error) => {
            eprintln!("demo service failed: {error}");
            std::process::exit(1);
        }
    };
    drop(runtime);
    let peak = crate::report::peak_resident_bytes();
    let after = crate::report::resident_bytes();
    println!(
        "{}",
        serde_json::json!({
            "allocator": allocator,
            "requests": result.requests,
            "seconds": result.seconds,
            "rate": result.rate(),
            "connections": result.connections,
            "peak_rss": peak,
            "rss_after": after,
        })
    );
}
