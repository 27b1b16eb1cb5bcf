//! Helpers shared by the integration tests: a sidecar on a loopback port
//! and a real HTTP client (ureq) with timeouts.
#![allow(dead_code)] // Each test file uses a different subset.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use sheafalloc_control::{spawn, Config, ControlHandle};

/// Every request gives up after this long: a hung server fails the test
/// instead of hanging it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A sidecar on `127.0.0.1:<free port>`.
pub fn sidecar(token: Option<&str>) -> ControlHandle {
    let mut config = Config::new("127.0.0.1:0".parse().unwrap());
    if let Some(token) = token {
        config = config.with_token(token);
    }
    spawn(config).expect("the sidecar starts on loopback")
}

/// A client that returns 4xx/5xx responses instead of errors.
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .build()
        .into()
}

/// A response reduced to what the tests look at.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub allow: Option<String>,
    pub www_authenticate: Option<String>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    /// Asserts a JSON error `{"error": "..."}` with `status`; returns the
    /// message.
    pub fn expect_error(&self, status: u16) -> String {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.content_type.starts_with("application/json"),
            "{self:?}"
        );
        let json = self.json();
        let object = json.as_object().expect("an object");
        assert_eq!(object.len(), 1, "only the error field: {json}");
        object["error"]
            .as_str()
            .expect("error is a string")
            .to_owned()
    }
}

fn reply(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut response = response.expect("the request completes");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type").unwrap_or_default();
    let allow = header("allow");
    let www_authenticate = header("www-authenticate");
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .expect("a UTF-8 body");
    Reply {
        status,
        content_type,
        allow,
        www_authenticate,
        body,
    }
}

pub fn get(agent: &ureq::Agent, url: &str) -> Reply {
    reply(agent.get(url).call())
}

pub fn delete(agent: &ureq::Agent, url: &str) -> Reply {
    reply(agent.delete(url).call())
}

pub fn put(agent: &ureq::Agent, url: &str, body: &str, token: Option<&str>) -> Reply {
    let mut request = agent.put(url).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    reply(request.send(body))
}

pub fn post(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Reply {
    let mut request = agent.post(url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    reply(request.send_empty())
}

/// Sends `request` as raw bytes and returns the status and body (the
/// server is asked to close the connection, so the body ends at EOF).
pub fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(REQUEST_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(REQUEST_TIMEOUT)).unwrap();
    // The server may answer and close before reading everything we send
    // (that is the point of a 413); a failed write is then expected.
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The value of the sample `name{labels}` in a Prometheus text body.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}
