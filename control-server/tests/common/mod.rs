//! Helpers shared by the integration tests: a sidecar on a loopback port,
//! the crate's own HTTP client pointed at it, assertions on its replies,
//! and a raw socket for the requests no HTTP client would send.
#![allow(dead_code)] // Each test file uses a different subset.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub use sheafalloc_control::client::{Client, Method, Reply};
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

/// The crate's client for `handle`, without a token.
pub fn client(handle: &ControlHandle) -> Client {
    Client::new(&handle.url())
        .expect("the sidecar's URL is an address")
        .with_timeout(REQUEST_TIMEOUT)
}

/// Assertions on a [`Reply`].
pub trait Expect {
    /// The body as JSON.
    fn value(&self) -> serde_json::Value;
    /// Asserts a JSON error `{"error": "..."}` with `status`; returns the
    /// message.
    fn expect_error(&self, status: u16) -> String;
    /// Asserts `status`; returns the reply.
    fn expect_status(self, status: u16) -> Self;
}

impl Expect for Reply {
    fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    fn expect_error(&self, status: u16) -> String {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.content_type().starts_with("application/json"),
            "{self:?}"
        );
        let json = self.value();
        let object = json.as_object().expect("an object");
        assert_eq!(object.len(), 1, "only the error field: {json}");
        object["error"]
            .as_str()
            .expect("error is a string")
            .to_owned()
    }

    fn expect_status(self, status: u16) -> Self {
        assert_eq!(self.status, status, "{self:?}");
        self
    }
}

/// `GET path`, any status.
pub fn get(client: &Client, path: &str) -> Reply {
    client.get(path).expect("the request completes")
}

/// `GET path`, which must answer 200 with JSON.
pub fn get_json(client: &Client, path: &str) -> serde_json::Value {
    get(client, path).expect_status(200).value()
}

/// `PUT path` with a JSON `body`, any status.
pub fn put(client: &Client, path: &str, body: &str) -> Reply {
    client
        .call(Method::PUT, path)
        .json(body)
        .send()
        .expect("the request completes")
}

/// `POST path` with the JSON body `{}`, any status.
pub fn post(client: &Client, path: &str) -> Reply {
    client
        .call(Method::POST, path)
        .json("{}")
        .send()
        .expect("the request completes")
}

/// Sends `request` as raw bytes — for requests that are deliberately not
/// what an HTTP client sends — and returns the status and body (the
/// server is asked to close the connection, so the body ends at EOF).
/// `Host: sidecar` in `request` becomes the sidecar's real address.
pub fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let request = aimed_at(addr, request);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(REQUEST_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(REQUEST_TIMEOUT)).unwrap();
    // The server may answer and close before reading everything we send
    // (that is the point of a 413); a failed write is then expected.
    let _ = stream.write_all(&request);
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

/// `request` with every `Host: sidecar` replaced by `Host: <addr>`, so a
/// raw request names the sidecar the way the Host check wants.
pub fn aimed_at(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    const PLACEHOLDER: &[u8] = b"Host: sidecar\r\n";
    let host = format!("Host: {addr}\r\n").into_bytes();
    let mut aimed = Vec::with_capacity(request.len() + 16);
    let mut rest = request;
    while let Some(at) = rest
        .windows(PLACEHOLDER.len())
        .position(|window| window == PLACEHOLDER)
    {
        aimed.extend_from_slice(&rest[..at]);
        aimed.extend_from_slice(&host);
        rest = &rest[at + PLACEHOLDER.len()..];
    }
    aimed.extend_from_slice(rest);
    aimed
}

/// The value of the sample `name{labels}` in a Prometheus text body.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}
