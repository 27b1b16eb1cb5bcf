//! The HTTP client of the control plane (feature `client`): the one piece
//! of code that speaks to a sidecar, used by `sheafctl`, the examples and
//! the tests. It is built on ureq (plain HTTP/1.1, no TLS: the sidecar
//! serves loopback, or a private address behind a token).
//!
//! [`Client`] has a typed method per endpoint, which sends what the API
//! asks for (`content-type: application/json` on writes, `{}` for a purge,
//! the bearer token when one is set, the cache name percent-encoded in the
//! path) and turns any answer but a 2xx into [`ClientError::Status`] with
//! the server's message. [`Client::call`] builds any other request — any
//! method, path, headers and body — and returns the [`Reply`] whatever its
//! status, for tests that check refusals.
//!
//! ```no_run
//! use sheafalloc_control::client::{CapacitySetting, Client};
//!
//! let client = Client::new("127.0.0.1:9187")?;
//! let caches = client.caches()?;
//! let busiest = caches.caches.iter().max_by_key(|cache| cache.allocations).unwrap();
//! println!("{}: {} allocations", busiest.name, busiest.allocations);
//! client.set_capacity("size-256", CapacitySetting::Pinned(64))?;
//! # Ok::<(), sheafalloc_control::client::ClientError>(())
//! ```

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use ureq::http::HeaderMap;
pub use ureq::http::Method;

use crate::caches::{CacheView, CapacityChanged, LargeView, ThreadsView};
use crate::config::DEFAULT_PORT;
use crate::error::ErrorBody;
use crate::health::Health;
use crate::purge::Purged;
use crate::topology::TopologyView;

/// How long one request may take by default (connect, send, answer).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Largest answer read (`/metrics` of a busy process is a few hundred KiB).
const MAX_REPLY_BYTES: u64 = 64 * 1024 * 1024;

/// A control plane at one address.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The address is not `HOST:PORT`, `http://HOST:PORT` or a port.
    BadAddress(String),
    /// The request could not be built (a header value with a newline, a
    /// path that is not a path).
    BadRequest(String),
    /// No answer: refused, reset, timed out.
    Transport {
        /// `METHOD url`.
        request: String,
        /// What went wrong.
        message: String,
    },
    /// The server answered with an error status.
    Status {
        /// `METHOD path`.
        request: String,
        /// The status.
        status: u16,
        /// The server's `error` message (or the body, if it is not JSON).
        message: String,
    },
    /// A 2xx answer that is not what the endpoint returns.
    UnexpectedAnswer {
        /// `METHOD path`.
        request: String,
        /// Why it could not be read.
        message: String,
    },
}

impl core::fmt::Display for ClientError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadAddress(message) | Self::BadRequest(message) => f.write_str(message),
            Self::Transport { request, message } => write!(f, "{request}: {message}"),
            Self::Status {
                request,
                status,
                message,
            } => write!(f, "{request}: {status}: {message}"),
            Self::UnexpectedAnswer { request, message } => {
                write!(f, "{request}: unexpected answer: {message}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// A capacity to set: a number, or back to the auto-tuner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacitySetting {
    /// Pin the capacity to this many objects per sheaf.
    Pinned(u64),
    /// Hand the capacity back to the auto-tuner (`"auto"`), where the
    /// sidecar has one.
    Auto,
}

impl core::str::FromStr for CapacitySetting {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        text.parse()
            .map(Self::Pinned)
            .map_err(|_| format!("{text:?} is neither a capacity (a number) nor \"auto\""))
    }
}

/// One cache as a client sees it: the typed view, and the tuning state if
/// the sidecar reports one (`"auto"`, `"pinned"`, `"off"`; `None` where it
/// does not, so clients show it as unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheReport {
    /// Name, limit and every counter.
    pub view: CacheView,
    /// The `tuning` field of the JSON, when present.
    pub tuning: Option<String>,
}

impl core::ops::Deref for CacheReport {
    type Target = CacheView;
    fn deref(&self) -> &CacheView {
        &self.view
    }
}

impl CacheReport {
    /// Reads a cache object of the JSON.
    fn from_json(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Ok(Self {
            view: CacheView::deserialize(value)?,
            tuning: value.get("tuning").map(|tuning| match tuning {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
        })
    }
}

/// Body of `GET /v1/caches`, as [`CacheReport`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caches {
    /// Every cache, smallest object size first.
    pub caches: Vec<CacheReport>,
    /// Direct mappings.
    pub large: LargeView,
    /// Threads.
    pub threads: ThreadsView,
}

/// An answer, whatever its status.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body (invalid UTF-8 replaced).
    pub body: String,
}

impl Reply {
    /// A header's value, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The `content-type`, or `""`.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.body)
    }

    /// The `error` of a JSON error body.
    pub fn error_message(&self) -> Option<String> {
        self.json::<ErrorBody>().ok().map(|body| body.error)
    }
}

/// A request being built by [`Client::call`].
#[derive(Debug)]
#[must_use = "a call does nothing until sent"]
pub struct Call<'a> {
    client: &'a Client,
    method: Method,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    with_token: bool,
}

impl Call<'_> {
    /// Adds a header (a `host` header replaces the one from the address).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `body` as it is, with no content type unless one is added.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sends `body` with `content-type: application/json`.
    pub fn json(self, body: impl Into<Vec<u8>>) -> Self {
        self.header("content-type", "application/json").body(body)
    }

    /// Leaves the client's token out of this request.
    pub fn without_token(mut self) -> Self {
        self.with_token = false;
        self
    }

    /// Sends the request; any answer is a [`Reply`].
    pub fn send(self) -> Result<Reply, ClientError> {
        let url = format!("{}{}", self.client.base, self.path);
        let describe = format!("{} {url}", self.method);
        let mut builder = ureq::http::Request::builder()
            .method(self.method.clone())
            .uri(&url)
            .header("accept", "application/json");
        if let (true, Some(token)) = (self.with_token, &self.client.token) {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in &self.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let bad =
            |error: ureq::http::Error| ClientError::BadRequest(format!("{describe}: {error}"));
        let response = match self.body {
            Some(body) => self.client.agent.run(builder.body(body).map_err(bad)?),
            None => self.client.agent.run(builder.body(()).map_err(bad)?),
        };
        let transport = |error: ureq::Error| ClientError::Transport {
            request: describe.clone(),
            message: error.to_string(),
        };
        let mut response = response.map_err(transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_BYTES)
            .read_to_vec()
            .map_err(transport)?;
        Ok(Reply {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    /// Sends the request and parses a 2xx JSON answer; any other answer
    /// is [`ClientError::Status`] with the server's message.
    fn expect<T: DeserializeOwned>(self) -> Result<T, ClientError> {
        let request = format!("{} {}", self.method, self.path);
        let reply = self.send()?.expect_success(&request)?;
        reply.json().map_err(|error| ClientError::UnexpectedAnswer {
            request,
            message: error.to_string(),
        })
    }
}

impl Reply {
    fn expect_success(self, request: &str) -> Result<Self, ClientError> {
        if (200..300).contains(&self.status) {
            return Ok(self);
        }
        let message = self
            .error_message()
            .unwrap_or_else(|| self.body.trim().to_owned());
        Err(ClientError::Status {
            request: request.to_owned(),
            status: self.status,
            message,
        })
    }
}

impl Client {
    /// A client of the control plane at `addr`: `HOST:PORT`, `[V6]:PORT`,
    /// `http://HOST:PORT` (a trailing `/` is fine) or a bare port (on
    /// 127.0.0.1). The host is sent as given, so a name such as
    /// `localhost` is what the server sees in `Host`.
    pub fn new(addr: &str) -> Result<Self, ClientError> {
        Ok(Self {
            base: base_url(addr)?,
            token: None,
            agent: agent(DEFAULT_TIMEOUT),
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request (`None` or
    /// empty: none).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|token| !token.is_empty());
        self
    }

    /// Gives up on a request after `timeout` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.agent = agent(timeout);
        self
    }

    /// `http://HOST:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Starts any request to `path` (sent as given: it must be a path
    /// with its leading `/`, already percent-encoded where it needs to be).
    pub fn call(&self, method: Method, path: &str) -> Call<'_> {
        Call {
            client: self,
            method,
            path: path.to_owned(),
            headers: Vec::new(),
            body: None,
            with_token: true,
        }
    }

    /// `GET path`, whatever the answer.
    pub fn get(&self, path: &str) -> Result<Reply, ClientError> {
        self.call(Method::GET, path).send()
    }

    /// `GET /healthz`.
    pub fn health(&self) -> Result<Health, ClientError> {
        self.call(Method::GET, "/healthz").expect()
    }

    /// `GET /v1/caches`.
    pub fn caches(&self) -> Result<Caches, ClientError> {
        let value: serde_json::Value = self.call(Method::GET, "/v1/caches").expect()?;
        let unexpected = |message: String| ClientError::UnexpectedAnswer {
            request: "GET /v1/caches".to_owned(),
            message,
        };
        let caches = value
            .get("caches")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| unexpected("no caches array".to_owned()))?
            .iter()
            .map(CacheReport::from_json)
            .collect::<Result<_, _>>()
            .map_err(|error| unexpected(error.to_string()))?;
        let field = |name: &str| value.get(name).cloned().unwrap_or_default();
        Ok(Caches {
            caches,
            large: serde_json::from_value(field("large"))
                .map_err(|error| unexpected(error.to_string()))?,
            threads: serde_json::from_value(field("threads"))
                .map_err(|error| unexpected(error.to_string()))?,
        })
    }

    /// `GET /v1/caches/{name}`.
    pub fn cache(&self, name: &str) -> Result<CacheReport, ClientError> {
        let path = format!("/v1/caches/{}", encode_segment(name));
        let value: serde_json::Value = self.call(Method::GET, &path).expect()?;
        CacheReport::from_json(&value).map_err(|error| ClientError::UnexpectedAnswer {
            request: format!("GET {path}"),
            message: error.to_string(),
        })
    }

    /// `PUT /v1/caches/{name}/sheaf_capacity`.
    pub fn set_capacity(
        &self,
        name: &str,
        capacity: CapacitySetting,
    ) -> Result<CapacityChanged, ClientError> {
        let path = format!("/v1/caches/{}/sheaf_capacity", encode_segment(name));
        let body = match capacity {
            CapacitySetting::Pinned(capacity) => format!(r#"{{"sheaf_capacity": {capacity}}}"#),
            CapacitySetting::Auto => r#"{"sheaf_capacity": "auto"}"#.to_owned(),
        };
        self.call(Method::PUT, &path).json(body).expect()
    }

    /// `POST /v1/purge` (body `{}`).
    pub fn purge(&self) -> Result<Purged, ClientError> {
        self.call(Method::POST, "/v1/purge").json("{}").expect()
    }

    /// `GET /v1/topology`.
    pub fn topology(&self) -> Result<TopologyView, ClientError> {
        self.call(Method::GET, "/v1/topology").expect()
    }

    /// `GET /metrics`: the Prometheus text.
    pub fn metrics(&self) -> Result<String, ClientError> {
        let reply = self
            .call(Method::GET, "/metrics")
            .send()?
            .expect_success("GET /metrics")?;
        Ok(reply.body)
    }
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .proxy(None)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .allow_non_standard_methods(true)
        .user_agent(concat!("sheafalloc-control/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// `http://host:port` for the forms [`Client::new`] takes.
fn base_url(addr: &str) -> Result<String, ClientError> {
    let text = addr.trim();
    let bad = |why: &str| {
        ClientError::BadAddress(format!(
            "{text:?} is not an address like 127.0.0.1:{DEFAULT_PORT} or http://localhost:{DEFAULT_PORT}: {why}"
        ))
    };
    if let Ok(port) = text.parse::<u16>() {
        return Ok(format!("http://127.0.0.1:{port}"));
    }
    let authority = match text.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => return Err(bad(&format!("the scheme {scheme:?} is not http"))),
        None => text,
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad("expected only a host and a port"));
    }
    authority
        .parse::<ureq::http::uri::Authority>()
        .map_err(|error| bad(&error.to_string()))?;
    let port = match authority.rsplit_once(':') {
        Some((_, port)) if !authority.ends_with(']') => Some(port),
        _ => None,
    };
    if port.is_some_and(|port| port.parse::<u16>().is_err()) {
        return Err(bad("the port is not a number up to 65535"));
    }
    Ok(format!("http://{authority}"))
}

/// Percent-encodes one path segment (everything but RFC 3986's unreserved
/// characters).
pub fn encode_segment(segment: &str) -> String {
    let mut encoded = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_become_base_urls() {
        for (addr, base) in [
            ("9187", "http://127.0.0.1:9187"),
            ("127.0.0.1:9187", "http://127.0.0.1:9187"),
            ("localhost:1", "http://localhost:1"),
            ("http://[::1]:9187/", "http://[::1]:9187"),
            (" HTTP://host.example:80 ", "http://host.example:80"),
        ] {
            assert_eq!(base_url(addr).as_deref(), Ok(base), "{addr}");
        }
        for bad in [
            "",
            "https://127.0.0.1:9187",
            "http://127.0.0.1:9187/v1",
            "user@host:1",
            "a b:1",
            "127.0.0.1:99999",
        ] {
            assert!(
                matches!(base_url(bad), Err(ClientError::BadAddress(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(encode_segment("size-256"), "size-256");
        assert_eq!(encode_segment("../healthz"), "..%2Fhealthz");
        assert_eq!(encode_segment("a b?c#d%"), "a%20b%3Fc%23d%25");
        assert_eq!(encode_segment("é"), "%C3%A9");
    }

    #[test]
    fn capacities_parse_as_numbers_or_auto() {
        assert_eq!("64".parse(), Ok(CapacitySetting::Pinned(64)));
        assert_eq!("AUTO".parse(), Ok(CapacitySetting::Auto));
        assert!("-1".parse::<CapacitySetting>().is_err());
        assert!("sixty".parse::<CapacitySetting>().is_err());
    }

    #[test]
    fn tuning_is_read_when_present_and_unknown_when_absent() {
        let view = CacheView::new(
            sheafalloc_core::SizeClass::from_name("size-64").unwrap(),
            &sheafalloc_core::CacheStats::default(),
        );
        let mut json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["tuning"], "auto", "this sidecar reports it");
        // An older sidecar's answer, without the field.
        json.as_object_mut().unwrap().remove("tuning");
        let report = CacheReport::from_json(&json).unwrap();
        assert_eq!(
            (report.name.as_str(), report.tuning.as_deref()),
            ("size-64", None)
        );
        json["tuning"] = "auto".into();
        let report = CacheReport::from_json(&json).unwrap();
        assert_eq!(report.tuning.as_deref(), Some("auto"));
        assert_eq!(report.view, view);
    }
}
