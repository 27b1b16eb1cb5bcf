//! TCP request/response over loopback with tokio: a server and 1,000
//! client connections in one runtime with two worker threads.
//!
//! Each client sends a small HTTP-like request (about 200 bytes, built with
//! `format!`), framed by a 2-byte length, and waits for the answer. The
//! server reads each request into a new `Vec`, parses the path out of it
//! into a `String`, formats a JSON-ish body and a response around it (about
//! 300 bytes) and writes it back. So every request allocates on both sides
//! several objects of a few hundred bytes, besides what tokio itself
//! allocates, all through the binary's global allocator. Reports requests
//! answered per second.

use std::io::{ErrorKind, Result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

use super::os;
use super::progress::{Budget, Progress, Window};

/// Concurrent connections.
pub const CONNECTIONS: usize = 1000;
/// Runtime worker threads.
pub const WORKERS: usize = 2;
/// Longest wait for every connection to be up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Padding that brings a request to about 200 bytes.
const PAD: &str = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789\
                   abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz";

/// The outcome of a run.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Requests answered inside the window.
    pub window: Window,
    /// Connections that were open.
    pub connections: usize,
    /// Client connections that ended in an error.
    pub failed: usize,
    /// Seconds taken to open every connection.
    pub connect_seconds: f64,
}

/// Runs the benchmark with `connections` connections.
pub fn run(budget: &Budget, connections: usize) -> Result<Outcome> {
    os::raise_nofile(2 * connections as u64 + 256);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_io()
        .enable_time()
        .build()?;
    let progress = Arc::new(Progress::new(connections));
    let connected = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let clients = runtime.block_on(async {
        let socket = TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(4096)?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        let clients: Vec<_> = (0..connections)
            .map(|id| tokio::spawn(client(id, address, progress.clone(), connected.clone())))
            .collect();
        while connected.load(Ordering::Relaxed) < connections {
            if started.elapsed() > CONNECT_TIMEOUT || clients.iter().any(|c| c.is_finished()) {
                progress.stop();
                return Err(std::io::Error::other(format!(
                    "only {} of {connections} connections came up",
                    connected.load(Ordering::Relaxed)
                )));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(clients)
    });
    let clients = match clients {
        Ok(clients) => clients,
        Err(error) => {
            runtime.shutdown_timeout(Duration::from_secs(1));
            return Err(error);
        }
    };
    let connect_seconds = started.elapsed().as_secs_f64();
    let window = progress.measure(budget);
    let failed = runtime.block_on(async {
        let mut failed = 0;
        for client in clients {
            if !matches!(client.await, Ok(Ok(()))) {
                failed += 1;
            }
        }
        failed
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(Outcome {
        window,
        connections,
        failed,
        connect_seconds,
    })
}

/// One client connection: request, wait for the answer, again, until the
/// window closes.
async fn client(
    id: usize,
    address: SocketAddr,
    progress: Arc<Progress>,
    connected: Arc<AtomicUsize>,
) -> Result<()> {
    let mut stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    connected.fetch_add(1, Ordering::Relaxed);
    let (reader, mut writer) = stream.split();
    let mut reader = BufReader::with_capacity(1024, reader);
    let mut answered = 0u64;
    while !progress.stopped() {
        let request = format!(
            "GET /items/{id}/{answered} HTTP/1.1\r\nhost: bench.local\r\nx-pad: {PAD}\r\n\r\n"
        );
        writer.write_all(&frame(request.as_bytes())).await?;
        let len = reader.read_u16().await?;
        let mut response = vec![0u8; usize::from(len)];
        reader.read_exact(&mut response).await?;
        if !response.starts_with(b"HTTP/1.1 200 OK") {
            return Err(std::io::Error::other("bad response"));
        }
        answered += 1;
        progress.record(id, answered);
    }
    Ok(())
}

/// One server connection: answers until the client closes.
async fn serve(mut stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    let (reader, mut writer) = stream.split();
    let mut reader = BufReader::with_capacity(1024, reader);
    loop {
        let len = match reader.read_u16().await {
            Ok(len) => len,
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut request = vec![0u8; usize::from(len)];
        reader.read_exact(&mut request).await?;
        let request = String::from_utf8(request).map_err(std::io::Error::other)?;
        let path: String = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let body = format!(
            "{{\"path\":\"{path}\",\"status\":\"ok\",\"items\":[{}],\"server\":\"sheafalloc-bench\"}}",
            (0..24).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        );
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        writer.write_all(&frame(response.as_bytes())).await?;
    }
}

/// `payload` behind its length as 2 big-endian bytes, in a new `Vec`.
fn frame(payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).expect("messages are small");
    let mut out = Vec::with_capacity(2 + payload.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}
