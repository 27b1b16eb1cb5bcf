//! Where the sidecar listens and which token guards writes: [`Config`],
//! read from code or from the environment (`SHEAFALLOC_CONTROL_ADDR`,
//! `SHEAFALLOC_CONTROL_TOKEN`), the one safety rule checked before
//! anything binds (a non-loopback address needs a token), and the
//! [`Limits`] that bound what any client can make the sidecar hold.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Environment variable naming the address to listen on; when set, the
/// `control` feature of `sheafalloc` starts the sidecar at process start.
pub const ADDR_ENV: &str = "SHEAFALLOC_CONTROL_ADDR";
/// Environment variable holding the bearer token writes must present.
pub const TOKEN_ENV: &str = "SHEAFALLOC_CONTROL_TOKEN";
/// The port used when an address names none: `127.0.0.1:9187`.
pub const DEFAULT_PORT: u16 = 9187;

/// How to run the sidecar.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// Address to bind. Port 0 picks a free port; the handle tells which.
    pub addr: SocketAddr,
    /// Bearer token for writes (`PUT`, `POST`). `None`: writes are open,
    /// which [`Config::check`] allows only on a loopback address.
    pub token: Option<String>,
    /// Bounds on connections, time and header sizes.
    pub limits: Limits,
}

/// What a client can make the sidecar hold, and for how long. Every
/// connection costs at most a read buffer of about
/// [`max_header_bytes`](Self::max_header_bytes) (at least 8 KiB), a body of
/// at most [`crate::MAX_BODY_BYTES`] and one response; there are at most
/// [`max_connections`](Self::max_connections) of them, and none lives
/// longer than a timeout while the client sends nothing useful or stops
/// reading.
///
/// ```
/// use std::time::Duration;
/// let mut limits = sheafalloc_control::config::Limits::default();
/// limits.header_read_timeout = Duration::from_secs(2);
/// let config =
///     sheafalloc_control::Config::new("127.0.0.1:0".parse().unwrap()).with_limits(limits);
/// assert_eq!(config.limits.max_connections, 256);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Connections served at once. A connection accepted beyond this gets
    /// a fixed `503` with `Connection: close` (written without waiting)
    /// and is closed. Default 256.
    pub max_connections: usize,
    /// Longest time to receive a complete request head (request line and
    /// headers), counted from the connection's start or from the end of the
    /// previous response: it closes idle connections, idle keep-alive
    /// connections and clients that send the head slowly. Default 10 s.
    pub header_read_timeout: Duration,
    /// Longest time from a complete head to the response: reading the body
    /// and running the handler. Past it the answer is 408 and the
    /// connection closes. Default 10 s.
    pub request_timeout: Duration,
    /// Longest time a response write may stay blocked because the client
    /// does not read; the connection is then closed. Default 10 s.
    pub write_timeout: Duration,
    /// Largest request head (request line and headers) in bytes; a larger
    /// head, a long path included, gets 431 and the connection closes.
    /// Default 8 KiB. A connection's read buffer is this, but at least
    /// 8 KiB.
    pub max_header_bytes: usize,
}

impl Limits {
    /// Headers accepted in one request (fixed; more get 431).
    pub const MAX_HEADERS: usize = 100;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_header_bytes: 8 * 1024,
        }
    }
}

impl core::fmt::Debug for Config {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Config")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for Config {
    /// `127.0.0.1:9187`, no token.
    fn default() -> Self {
        Self::new(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            DEFAULT_PORT,
        ))
    }
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `SHEAFALLOC_CONTROL_ADDR` (or the address given) does not parse.
    BadAddress {
        /// The text given.
        value: String,
        /// Why it failed.
        reason: String,
    },
    /// A non-loopback address without a token.
    NonLoopbackWithoutToken(SocketAddr),
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadAddress { value, reason } => write!(
                f,
                "{ADDR_ENV}={value:?} is not an address like 127.0.0.1:{DEFAULT_PORT}: {reason}"
            ),
            Self::NonLoopbackWithoutToken(addr) => write!(
                f,
                "refusing to listen on {addr}, which is not a loopback address, \
                 without {TOKEN_ENV}: set a token (writes then need \
                 `Authorization: Bearer <token>`) or bind 127.0.0.1"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Listen on `addr`, no token, default [`Limits`].
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            token: None,
            limits: Limits::default(),
        }
    }

    /// Uses `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Requires `Authorization: Bearer <token>` on writes. An empty token
    /// counts as none.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.token = if token.is_empty() { None } else { Some(token) };
        self
    }

    /// Reads `SHEAFALLOC_CONTROL_ADDR` and `SHEAFALLOC_CONTROL_TOKEN`.
    /// `Ok(None)` when the address variable is unset or empty (the sidecar
    /// is off). The result has passed [`Config::check`].
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        let Some(addr) = std::env::var_os(ADDR_ENV) else {
            return Ok(None);
        };
        let addr = addr.to_string_lossy();
        if addr.trim().is_empty() {
            return Ok(None);
        }
        let mut config = Self::new(parse_addr(&addr)?);
        if let Some(token) = std::env::var_os(TOKEN_ENV) {
            config = config.with_token(token.to_string_lossy());
        }
        config.check()?;
        Ok(Some(config))
    }

    /// The rule checked before binding: a non-loopback address needs a
    /// token.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.token.is_none() && !is_loopback(self.addr.ip()) {
            return Err(ConfigError::NonLoopbackWithoutToken(self.addr));
        }
        Ok(())
    }
}

/// True for 127.0.0.0/8, `::1` and IPv4-mapped loopback.
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Parses `host:port`, `[v6]:port`, or a bare port (on 127.0.0.1). Host
/// names resolve; the first address wins.
pub fn parse_addr(text: &str) -> Result<SocketAddr, ConfigError> {
    let text = text.trim();
    let bad = |reason: String| ConfigError::BadAddress {
        value: text.to_owned(),
        reason,
    };
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    match text.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| bad("the name resolves to no address".to_owned())),
        Err(error) => Err(bad(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_in_every_accepted_form() {
        assert_eq!(
            parse_addr("9187").unwrap(),
            "127.0.0.1:9187".parse().unwrap()
        );
        assert_eq!(
            parse_addr(" [::1]:80 ").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        assert!(parse_addr("localhost:1").unwrap().ip().is_loopback());
        assert!(matches!(
            parse_addr("not an address"),
            Err(ConfigError::BadAddress { .. })
        ));
    }

    #[test]
    fn non_loopback_needs_a_token() {
        let open = Config::new("0.0.0.0:0".parse().unwrap());
        assert_eq!(
            open.check(),
            Err(ConfigError::NonLoopbackWithoutToken(open.addr))
        );
        assert!(open.clone().with_token("s3cret").check().is_ok());
        assert!(open.with_token("").check().is_err());
        let mapped = Config::new("[::ffff:127.0.0.1]:0".parse().unwrap());
        assert!(mapped.check().is_ok());
    }

    #[test]
    fn default_limits_are_the_documented_ones() {
        let limits = Config::default().limits;
        assert_eq!(limits.max_connections, 256);
        assert_eq!(limits.header_read_timeout, Duration::from_secs(10));
        assert_eq!(limits.request_timeout, Duration::from_secs(10));
        assert_eq!(limits.write_timeout, Duration::from_secs(10));
        assert_eq!(limits.max_header_bytes, 8192);
        assert_eq!(Limits::MAX_HEADERS, 100);
    }

    #[test]
    fn debug_output_hides_the_token() {
        let config = Config::default().with_token("s3cret");
        assert!(!format!("{config:?}").contains("s3cret"));
    }
}
