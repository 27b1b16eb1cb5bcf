//! Serving: binds the socket in the caller's thread (so errors and the
//! bound address come back at once), then serves the axum router with
//! hyper's HTTP/1 on a dedicated OS thread with a current-thread tokio
//! runtime. [`ControlHandle`] stops it: graceful first (open requests
//! finish), then a hard stop after [`SHUTDOWN_GRACE`].
//!
//! The accept loop applies the connection [`Limits`]: at most
//! `max_connections` connections are served at once (a connection beyond
//! that gets a fixed 503 and is closed at once), each has a header read
//! timeout (idle and slow clients), a request timeout (408) and a write
//! timeout (clients that do not read), and a bounded request head. It also
//! answers only requests whose `Host` names the bound address or a
//! loopback name (421 otherwise; see [`crate::cross_site`]), and an answer
//! that left the request body unread says `connection: close` (see
//! [`crate::unread_body`]).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::{middleware, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, Semaphore};

use crate::config::{Config, ConfigError, Limits};
use crate::conn::WriteDeadline;
use crate::error::ErrorBody;
use crate::{cross_site, limits, router, unread_body, AppState};

/// How long a graceful shutdown may wait for open connections before the
/// server thread stops anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Pause of the accept loop after an accept error that is not about one
/// connection (out of file descriptors or memory), so it does not spin.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Connections the kernel queues for the accept loop (capped by
/// `net.core.somaxconn`).
pub const LISTEN_BACKLOG: u32 = 1024;

/// hyper's smallest allowed read buffer.
const MIN_READ_BUFFER_BYTES: usize = 8 * 1024;

/// Why the sidecar did not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The configuration was refused (bad address, non-loopback without a
    /// token).
    Config(ConfigError),
    /// Binding the address failed.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The tokio runtime or the thread could not be created.
    Runtime(std::io::Error),
}

impl core::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Config(error) => error.fmt(f),
            Self::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            Self::Runtime(error) => write!(f, "cannot start the server thread: {error}"),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(error) => Some(error),
            Self::Bind { source, .. } => Some(source),
            Self::Runtime(error) => Some(error),
        }
    }
}

impl From<ConfigError> for SpawnError {
    fn from(error: ConfigError) -> Self {
        Self::Config(error)
    }
}

/// A running sidecar. Dropping it shuts the server down (gracefully, then
/// hard after [`SHUTDOWN_GRACE`]) and joins its thread; keep it alive for as
/// long as the sidecar should serve.
#[derive(Debug)]
pub struct ControlHandle {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl ControlHandle {
    /// The address actually bound (port 0 in the config becomes a real
    /// port here).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<local_addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits for its thread. Errors if the server
    /// loop failed or its thread panicked.
    pub fn shutdown(mut self) -> std::io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> std::io::Result<()> {
        if let Some(shutdown) = self.shutdown.take() {
            // The server may have stopped already; then there is no one to
            // tell.
            let _ = shutdown.send(());
        }
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the server thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for ControlHandle {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Starts the sidecar with the standard API ([`router`] over a fresh
/// [`AppState`] made from the config: its token, protected reads, metrics
/// cache).
///
/// Refuses a non-loopback address without a token.
pub fn spawn(config: Config) -> Result<ControlHandle, SpawnError> {
    let state = AppState::from_config(&config);
    spawn_router(&config, router(state))
}

/// Starts the sidecar if `SHEAFALLOC_CONTROL_ADDR` is set (`Ok(None)`
/// otherwise), as [`Config::from_env`] reads the environment (the token
/// from `SHEAFALLOC_CONTROL_TOKEN` or `SHEAFALLOC_CONTROL_TOKEN_FILE`).
pub fn spawn_from_env() -> Result<Option<ControlHandle>, SpawnError> {
    match Config::from_env()? {
        Some(config) => spawn(config).map(Some),
        None => Ok(None),
    }
}

/// Serves any router on the sidecar's thread: binds `config.addr` now,
/// then serves until the handle says stop. [`spawn`] is this with
/// [`router`]; tests use it to serve extra routes behind
/// [`crate::harden`].
///
/// Refuses a non-loopback address without a token, as [`spawn`] does.
pub fn spawn_router(config: &Config, app: Router) -> Result<ControlHandle, SpawnError> {
    config.check()?;
    let bind_error = |source| SpawnError::Bind {
        addr: config.addr,
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .thread_name("sheafalloc-control-blocking")
        .build()
        .map_err(SpawnError::Runtime)?;
    let listener = {
        // The listener registers with this runtime's I/O driver.
        let _context = runtime.enter();
        listen(config.addr).map_err(bind_error)?
    };
    let addr = listener.local_addr().map_err(bind_error)?;
    let (shutdown, shutdown_signal) = oneshot::channel::<()>();
    let limits = config.limits;
    let thread = std::thread::Builder::new()
        .name("sheafalloc-control".to_owned())
        .spawn(move || runtime.block_on(serve(listener, addr, app, limits, shutdown_signal)))
        .map_err(SpawnError::Runtime)?;
    Ok(ControlHandle {
        addr,
        shutdown: Some(shutdown),
        thread: Some(thread),
    })
}

/// Binds and listens with a backlog of [`LISTEN_BACKLOG`] (the standard
/// library's listener uses 128, which a burst of connections overflows:
/// the kernel then drops SYNs and those clients wait a second or more to
/// retry). Call inside the runtime's context.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As the standard library does on Unix: a restarted process can bind
    // its port again at once (two listeners on one port stay impossible).
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The server loop: accepts within the connection cap, serves each
/// connection on its own task with the [`Limits`], and on the signal (or
/// when the handle is gone) stops accepting, lets open connections finish
/// and stops hard after [`SHUTDOWN_GRACE`].
async fn serve(
    listener: TcpListener,
    bound: SocketAddr,
    app: Router,
    limits: Limits,
    mut shutdown_signal: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let request_timeout = limits.request_timeout;
    let app = app
        .layer(middleware::from_fn(move |request, next| {
            limits::request_timeout(request_timeout, request, next)
        }))
        .layer(middleware::from_fn(move |request, next| {
            cross_site::check_host(bound, request, next)
        }))
        .layer(middleware::from_fn(unread_body::close_if_body_unread));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_headers(Limits::MAX_HEADERS)
        .max_buf_size(limits.max_header_bytes.max(MIN_READ_BUFFER_BYTES));
    let permits = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let refusal = refusal_response(limits.max_connections);
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // A dropped sender also means stop.
            _ = &mut shutdown_signal => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) if is_about_one_connection(&error) => continue,
            Err(_) => {
                // Out of file descriptors or memory: the pending connection
                // stays queued; try again shortly, still obeying the signal.
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_ERROR_BACKOFF) => continue,
                    _ = &mut shutdown_signal => break,
                }
            }
        };
        let Some(permit) = free_slot(&permits).await else {
            refuse(stream, &refusal);
            continue;
        };
        // Small answers go out at once; a failure here changes nothing.
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(WriteDeadline::new(stream, limits.write_timeout));
        let connection =
            graceful.watch(http.serve_connection(io, TowerToHyperService::new(app.clone())));
        tokio::spawn(async move {
            // A connection ends with an error whenever a client misbehaves
            // (bad head, timeout, reset); there is no one to tell.
            let _ = connection.await;
            drop(permit);
        });
    }
    // New connections are refused by the OS from here on.
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {}
    }
    Ok(())
}

/// Times the accept loop lets the connection tasks run before it refuses a
/// connection for want of a slot.
const SLOT_RETRIES: usize = 4;

/// A connection slot, if one is free now or after letting the connection
/// tasks run a few times: after a burst, the slots may be held by
/// connections whose clients are gone but whose tasks have not yet seen it
/// (the accept loop ran first). Connections that are really open keep
/// theirs, and the new one is refused without waiting for them.
async fn free_slot(permits: &Arc<Semaphore>) -> Option<tokio::sync::OwnedSemaphorePermit> {
    for _ in 0..SLOT_RETRIES {
        if let Ok(permit) = Arc::clone(permits).try_acquire_owned() {
            return Some(permit);
        }
        // Runs the ready tasks, after one poll of the I/O driver.
        tokio::task::yield_now().await;
    }
    Arc::clone(permits).try_acquire_owned().ok()
}

/// Accept errors that concern only the connection being accepted.
fn is_about_one_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted, WouldBlock};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    )
}

/// The fixed answer to a connection over the cap: 503, `Retry-After: 1`,
/// `Connection: close`, and a JSON error body.
fn refusal_response(max_connections: usize) -> Vec<u8> {
    let body = serde_json::to_string(&ErrorBody {
        error: format!(
            "the control plane serves at most {max_connections} connections at once; retry later"
        ),
    })
    .unwrap_or_else(|_| r#"{"error":"too many connections"}"#.to_owned());
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap without waiting for it: one
/// non-blocking write of the refusal (a fresh socket's buffer always has
/// room for it), a non-blocking read of what the client already sent (so
/// the close is a FIN rather than a reset when the request is in), close.
fn refuse(stream: tokio::net::TcpStream, refusal: &[u8]) {
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let _ = (&stream).write(refusal);
    let mut discard = [0_u8; 2048];
    let _ = (&stream).read(&mut discard);
}
