//! Requests a browser sends on behalf of another site: refused.
//!
//! A sidecar on loopback is reachable from every web page a local browser
//! opens. Two attacks follow, and three checks stop them:
//!
//! * **DNS rebinding** — a page at `http://evil.example:9187/` makes its
//!   name resolve to 127.0.0.1 and then reads the sidecar as its own
//!   origin. The browser still sends `Host: evil.example:9187`, so every
//!   request whose `Host` (and absolute-form authority, if any) is not the
//!   bound address or a loopback name at the bound port gets **421**
//!   ([`check_host`], applied by the server loop, which knows the bound
//!   address). When bound to an unspecified address (`0.0.0.0`, `::`),
//!   any IP literal at the bound port is accepted: only names can be
//!   rebound.
//! * **Cross-site writes** (CSRF) — a page posts a form or a `fetch` with
//!   `mode: "no-cors"` to `http://127.0.0.1:9187/v1/purge`; such "simple"
//!   requests are sent without a preflight. A state-changing request
//!   (anything but `GET`, `HEAD`, `OPTIONS`) whose `Origin` is not the
//!   sidecar's own (`http://` + its `Host`), or whose `Sec-Fetch-Site` says
//!   `cross-site` or `same-site`, gets **403**; and a write must declare
//!   `content-type: application/json`, which no simple request can, so a
//!   browser always preflights it (and the sidecar answers no preflight)
//!   — otherwise **415** ([`check_writes`]). Clients that are not browsers
//!   send no `Origin`, and pass.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The fetch-metadata header modern browsers add to every request.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// Middleware of the server loop: 421 unless the request names the
/// sidecar (see the module docs).
pub(crate) async fn check_host(bound: SocketAddr, request: Request, next: Next) -> Response {
    match host_problem(bound, request.headers(), request.uri()) {
        Some(problem) => ApiError::MisdirectedRequest(problem).into_response(),
        None => next.run(request).await,
    }
}

/// Why the request does not name the sidecar at `bound`, if it does not.
fn host_problem(bound: SocketAddr, headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let mut hosts = headers.get_all(HOST).iter();
    let Some(host) = hosts.next() else {
        return Some("the request has no Host header".to_owned());
    };
    if hosts.next().is_some() {
        return Some("the request has more than one Host header".to_owned());
    }
    let host = String::from_utf8_lossy(host.as_bytes());
    if !host_is_allowed(&host, bound) {
        return Some(format!(
            "Host {host:?} does not name this control plane; use {bound}, \
             localhost:{port}, 127.0.0.1:{port} or [::1]:{port}",
            port = bound.port()
        ));
    }
    if let Some(authority) = uri.authority() {
        if !host_is_allowed(authority.as_str(), bound) {
            return Some(format!(
                "the request target names {authority:?}, not this control plane"
            ));
        }
    }
    None
}

/// Whether `host` (a `Host` value: `name[:port]`, `[v6][:port]`) names
/// the sidecar bound at `bound`.
pub(crate) fn host_is_allowed(host: &str, bound: SocketAddr) -> bool {
    let Some((name, port)) = split_host(host) else {
        return false;
    };
    if port != bound.port() {
        return false;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let Ok(ip) = name.parse::<IpAddr>() else {
        return false;
    };
    let ip = ip.to_canonical();
    ip.is_loopback() || ip == bound.ip().to_canonical() || bound.ip().is_unspecified()
}

/// Splits `name[:port]` or `[v6][:port]` into the name (without brackets)
/// and the port (80 when absent: the sidecar speaks plain HTTP).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let host = host.trim();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        if !name.contains(':') {
            return None;
        }
        match after {
            "" => (name, None),
            _ => (name, Some(after.strip_prefix(':')?)),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return None;
    }
    let port = match port {
        None => 80,
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            port.parse().ok()?
        }
        Some(_) => return None,
    };
    Some((name, port))
}

/// Route middleware: a state-changing request must come from the
/// sidecar's own origin (or from no browser at all) and carry JSON (see
/// the module docs).
pub(crate) async fn check_writes(request: Request, next: Next) -> Response {
    if is_safe(request.method()) {
        return next.run(request).await;
    }
    if let Some(problem) = foreign_origin(request.headers()) {
        return ApiError::Forbidden(problem).into_response();
    }
    if !declares_json(request.headers()) {
        return ApiError::UnsupportedMediaType.into_response();
    }
    next.run(request).await
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Why the request comes from another site, if it does.
fn foreign_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get(SEC_FETCH_SITE) {
        let site = site.as_bytes();
        if site.eq_ignore_ascii_case(b"cross-site") || site.eq_ignore_ascii_case(b"same-site") {
            return Some(format!(
                "writes from other sites are refused (Sec-Fetch-Site: {})",
                String::from_utf8_lossy(site)
            ));
        }
    }
    let origin = headers.get(ORIGIN)?;
    let origin = String::from_utf8_lossy(origin.as_bytes());
    let host = headers
        .get(HOST)
        .map(|host| String::from_utf8_lossy(host.as_bytes()).into_owned())
        .unwrap_or_default();
    if origin_is(&origin, &host) {
        None
    } else {
        Some(format!(
            "writes from other origins are refused: Origin {origin:?} is not http://{host}"
        ))
    }
}

/// Whether `origin` is `http://<host>`, the same name and port (ports
/// compared as numbers, so `:80` may be left out on either side).
fn origin_is(origin: &str, host: &str) -> bool {
    let Some(authority) = origin
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .and_then(|_| origin.get(7..))
    else {
        return false;
    };
    match (split_host(authority), split_host(host)) {
        (Some((origin_name, origin_port)), Some((host_name, host_port))) => {
            origin_port == host_port && origin_name.eq_ignore_ascii_case(host_name)
        }
        _ => false,
    }
}

/// Whether the body is declared `application/json` (parameters such as
/// `charset` allowed, names case-insensitive).
fn declares_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    let value = String::from_utf8_lossy(value.as_bytes());
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn bound(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_names_and_the_bound_address_are_allowed_at_the_bound_port() {
        let loopback = bound("127.0.0.1:9187");
        for host in [
            "127.0.0.1:9187",
            "localhost:9187",
            "LocalHost:9187",
            "[::1]:9187",
            "127.0.0.2:9187",
            "[::ffff:127.0.0.1]:9187",
        ] {
            assert!(host_is_allowed(host, loopback), "{host}");
        }
        for host in [
            "evil.example:9187",
            "localhost:9188",
            "localhost",
            "127.0.0.1",
            "127.0.0.1:",
            "127.0.0.1:+9187",
            "127.0.0.1:9187:1",
            "::1:9187",
            "[::1:9187",
            "[127.0.0.1]:9187",
            "10.0.0.1:9187",
            "localhost.:9187",
            "localhost.evil.example:9187",
            ":9187",
            "",
        ] {
            assert!(!host_is_allowed(host, loopback), "{host}");
        }
        let port_80 = bound("127.0.0.1:80");
        assert!(host_is_allowed("localhost", port_80));
        assert!(host_is_allowed("[::1]", port_80));
    }

    #[test]
    fn other_addresses_allow_themselves_and_unspecified_ones_any_ip() {
        let specific = bound("192.0.2.7:9187");
        assert!(host_is_allowed("192.0.2.7:9187", specific));
        assert!(host_is_allowed("localhost:9187", specific));
        assert!(!host_is_allowed("192.0.2.8:9187", specific));
        assert!(!host_is_allowed("sidecar.example:9187", specific));
        let any = bound("0.0.0.0:9187");
        assert!(host_is_allowed("192.0.2.8:9187", any));
        assert!(host_is_allowed("[2001:db8::1]:9187", any));
        assert!(!host_is_allowed("sidecar.example:9187", any));
        assert!(!host_is_allowed("192.0.2.8:9186", any));
    }

    #[test]
    fn a_missing_host_or_a_foreign_absolute_target_is_misdirected() {
        let at = bound("127.0.0.1:9187");
        let mut headers = HeaderMap::new();
        let uri: Uri = "/healthz".parse().unwrap();
        assert!(host_problem(at, &headers, &uri).is_some());
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:9187"));
        assert_eq!(host_problem(at, &headers, &uri), None);
        let absolute: Uri = "http://evil.example:9187/healthz".parse().unwrap();
        assert!(host_problem(at, &headers, &absolute).is_some());
        let own: Uri = "http://localhost:9187/healthz".parse().unwrap();
        assert_eq!(host_problem(at, &headers, &own), None);
    }

    #[test]
    fn only_the_own_origin_may_write() {
        assert!(origin_is("http://127.0.0.1:9187", "127.0.0.1:9187"));
        assert!(origin_is("HTTP://LOCALHOST:9187", "localhost:9187"));
        assert!(origin_is("http://localhost", "localhost:80"));
        assert!(origin_is("http://[::1]:9187", "[::1]:9187"));
        for (origin, host) in [
            ("http://evil.example", "127.0.0.1:9187"),
            ("http://localhost:9187", "127.0.0.1:9187"),
            ("https://127.0.0.1:9187", "127.0.0.1:9187"),
            ("http://127.0.0.1:9188", "127.0.0.1:9187"),
            ("null", "127.0.0.1:9187"),
            ("http://127.0.0.1:9187/", "127.0.0.1:9187"),
            ("http://127.0.0.1:9187", ""),
        ] {
            assert!(!origin_is(origin, host), "{origin} for {host}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:9187"));
        assert_eq!(foreign_origin(&headers), None, "no Origin: not a browser");
        headers.insert(SEC_FETCH_SITE, HeaderValue::from_static("same-origin"));
        assert_eq!(foreign_origin(&headers), None);
        headers.insert(SEC_FETCH_SITE, HeaderValue::from_static("cross-site"));
        assert!(foreign_origin(&headers).is_some());
    }

    #[test]
    fn writes_must_declare_json() {
        let mut headers = HeaderMap::new();
        assert!(!declares_json(&headers));
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            (" application/json ;x=y", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
            ("application/json-patch+json", false),
            ("", false),
        ] {
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            assert_eq!(declares_json(&headers), json, "{value:?}");
        }
    }
}
