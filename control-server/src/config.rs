//! Where the sidecar listens and who may use it: [`Config`], read from
//! code or from the environment (`SHEAFALLOC_CONTROL_ADDR`, the token from
//! `SHEAFALLOC_CONTROL_TOKEN` or `SHEAFALLOC_CONTROL_TOKEN_FILE`,
//! `SHEAFALLOC_CONTROL_TOKEN_READS`), the rules checked before anything
//! binds (a non-loopback address needs a token; protected reads need one
//! too), and the [`Limits`] that bound what any client can make the
//! sidecar hold.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable naming the address to listen on; when set, the
/// `control` feature of `sheafalloc` starts the sidecar at process start.
pub const ADDR_ENV: &str = "SHEAFALLOC_CONTROL_ADDR";
/// Environment variable holding the bearer token writes must present.
pub const TOKEN_ENV: &str = "SHEAFALLOC_CONTROL_TOKEN";
/// Environment variable naming a file that holds the token (readable by
/// its owner only); the alternative to [`TOKEN_ENV`].
pub const TOKEN_FILE_ENV: &str = "SHEAFALLOC_CONTROL_TOKEN_FILE";
/// Environment variable that, set to `1` (or `true`, `yes`), makes reads
/// need the token too ([`Config::token_for_reads`]).
pub const TOKEN_READS_ENV: &str = "SHEAFALLOC_CONTROL_TOKEN_READS";
/// How long a built `/metrics` exposition is served again before the
/// next scrape builds a fresh one ([`Config::metrics_max_age`]).
pub const METRICS_MAX_AGE: Duration = Duration::from_secs(1);
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
    /// Whether reads (`GET`, `HEAD`) need the token too. `GET /healthz`
    /// and the page's static files (`GET /`) stay open: they show no
    /// figures. Needs a token.
    pub token_for_reads: bool,
    /// How long one built `/metrics` exposition is served to every scrape
    /// before the next one is built ([`METRICS_MAX_AGE`] by default; zero
    /// builds one per scrape). A flood of scrapes costs one snapshot per
    /// interval, not one per request.
    pub metrics_max_age: Duration,
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
            .field("token_for_reads", &self.token_for_reads)
            .field("metrics_max_age", &self.metrics_max_age)
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
    /// Reads were to need the token, but there is none.
    ReadsNeedATokenButNoneIsSet,
    /// Both `SHEAFALLOC_CONTROL_TOKEN` and `SHEAFALLOC_CONTROL_TOKEN_FILE`
    /// are set.
    TwoTokens,
    /// The token file is missing, unreadable, not a regular file or empty.
    TokenFile {
        /// The path given.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// The token file may be read by its group or by others.
    TokenFileReadableByOthers {
        /// The path given.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token holds characters a client cannot send in an
    /// `Authorization` header (only visible ASCII is allowed).
    BadToken,
    /// An environment variable has a value that means nothing.
    BadValue {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// The values it takes.
        expected: &'static str,
    },
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
            Self::ReadsNeedATokenButNoneIsSet => write!(
                f,
                "{TOKEN_READS_ENV} asks for the token on reads, but no token is set \
                 ({TOKEN_ENV} or {TOKEN_FILE_ENV})"
            ),
            Self::TwoTokens => write!(
                f,
                "both {TOKEN_ENV} and {TOKEN_FILE_ENV} are set; set one of them"
            ),
            Self::TokenFile { path, reason } => {
                write!(f, "{TOKEN_FILE_ENV}={}: {reason}", path.display())
            }
            Self::TokenFileReadableByOthers { path, mode } => write!(
                f,
                "{TOKEN_FILE_ENV}={}: the file has mode {mode:04o}, so its group or others \
                 can read the token; make it readable by its owner only (chmod 600)",
                path.display()
            ),
            Self::BadToken => write!(
                f,
                "the token may hold only visible ASCII characters (no spaces or \
                 control characters), or clients cannot send it"
            ),
            Self::BadValue {
                variable,
                value,
                expected,
            } => write!(f, "{variable}={value:?} is not one of {expected}"),
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
            token_for_reads: false,
            metrics_max_age: METRICS_MAX_AGE,
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

    /// Reads the token from `path`, which must be a regular file readable
    /// by its owner only (mode `0600` or `0400`); surrounding whitespace,
    /// such as the final newline, is not part of the token.
    pub fn with_token_file(self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Ok(self.with_token(crate::token::read_token_file(path.as_ref())?))
    }

    /// Makes reads need the token too (see [`Config::token_for_reads`]).
    pub fn with_token_for_reads(mut self, token_for_reads: bool) -> Self {
        self.token_for_reads = token_for_reads;
        self
    }

    /// Serves one built `/metrics` exposition for `max_age` (see
    /// [`Config::metrics_max_age`]).
    pub fn with_metrics_max_age(mut self, max_age: Duration) -> Self {
        self.metrics_max_age = max_age;
        self
    }

    /// Reads `SHEAFALLOC_CONTROL_ADDR`, the token (`SHEAFALLOC_CONTROL_TOKEN`
    /// or `SHEAFALLOC_CONTROL_TOKEN_FILE`, not both) and
    /// `SHEAFALLOC_CONTROL_TOKEN_READS`. `Ok(None)` when the address
    /// variable is unset or empty (the sidecar is off). The result has
    /// passed [`Config::check`].
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        let Some(addr) = std::env::var_os(ADDR_ENV) else {
            return Ok(None);
        };
        let addr = addr.to_string_lossy();
        if addr.trim().is_empty() {
            return Ok(None);
        }
        let mut config = Self::new(parse_addr(&addr)?);
        if let Some(token) = crate::token::token_from_env()? {
            config = config.with_token(token);
        }
        config.token_for_reads = crate::token::reads_need_token_from_env()?;
        config.check()?;
        Ok(Some(config))
    }

    /// The rules checked before binding: a non-loopback address needs a
    /// token, so do protected reads, and the token must be sendable in a
    /// header.
    pub fn check(&self) -> Result<(), ConfigError> {
        match &self.token {
            None if !is_loopback(self.addr.ip()) => {
                Err(ConfigError::NonLoopbackWithoutToken(self.addr))
            }
            None if self.token_for_reads => Err(ConfigError::ReadsNeedATokenButNoneIsSet),
            Some(token) if !crate::token::is_sendable(token) => Err(ConfigError::BadToken),
            _ => Ok(()),
        }
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
    fn protected_reads_need_a_token() {
        let config = Config::new("127.0.0.1:0".parse().unwrap()).with_token_for_reads(true);
        assert_eq!(
            config.check(),
            Err(ConfigError::ReadsNeedATokenButNoneIsSet)
        );
        assert!(config.with_token("s3cret").check().is_ok());
    }

    #[test]
    fn tokens_must_be_sendable_in_a_header() {
        let config = Config::new("127.0.0.1:0".parse().unwrap());
        for bad in ["two words", "tab\there", "caf\u{e9}", "nul\0"] {
            assert_eq!(
                config.clone().with_token(bad).check(),
                Err(ConfigError::BadToken),
                "{bad:?}"
            );
        }
        assert!(config.with_token("A-Za-z0-9._~+/=!").check().is_ok());
    }

    #[test]
    fn debug_output_hides_the_token() {
        let config = Config::default().with_token("s3cret");
        assert!(!format!("{config:?}").contains("s3cret"));
    }
}
