//! Serving: binds the socket in the caller's thread (so errors and the
//! bound address come back at once), then runs axum on a dedicated OS
//! thread with a current-thread tokio runtime. [`ControlHandle`] stops it:
//! graceful first (open requests finish), then a hard stop after
//! [`SHUTDOWN_GRACE`].

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use tokio::sync::{oneshot, Notify};

use crate::config::{Config, ConfigError};
use crate::{router, AppState};

/// How long a graceful shutdown may wait for open connections before the
/// server thread stops anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

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
/// [`AppState`] with the config's token).
///
/// Refuses a non-loopback address without a token.
pub fn spawn(config: Config) -> Result<ControlHandle, SpawnError> {
    let state = AppState::new(config.token.clone());
    spawn_router(&config, router(state))
}

/// Starts the sidecar if `SHEAFALLOC_CONTROL_ADDR` is set (`Ok(None)`
/// otherwise), with the token from `SHEAFALLOC_CONTROL_TOKEN`.
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
    let listener = TcpListener::bind(config.addr).map_err(|source| SpawnError::Bind {
        addr: config.addr,
        source,
    })?;
    let bind_error = |source| SpawnError::Bind {
        addr: config.addr,
        source,
    };
    let addr = listener.local_addr().map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .thread_name("sheafalloc-control-blocking")
        .build()
        .map_err(SpawnError::Runtime)?;
    let (shutdown, shutdown_signal) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("sheafalloc-control".to_owned())
        .spawn(move || runtime.block_on(serve(listener, app, shutdown_signal)))
        .map_err(SpawnError::Runtime)?;
    Ok(ControlHandle {
        addr,
        shutdown: Some(shutdown),
        thread: Some(thread),
    })
}

/// The server loop: graceful shutdown on the signal (or when the handle is
/// gone), with a hard deadline.
async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown_signal: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let stopping = Arc::new(Notify::new());
    let stopping_signal = Arc::clone(&stopping);
    let graceful = axum::serve(listener, app).with_graceful_shutdown(async move {
        // A dropped sender also means stop.
        let _ = shutdown_signal.await;
        stopping_signal.notify_one();
    });
    tokio::select! {
        result = graceful => result,
        () = async {
            stopping.notified().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => Ok(()),
    }
}
