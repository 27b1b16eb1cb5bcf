//! Requests another web site can make a local browser send, over a real
//! loopback socket: a foreign `Host` (DNS rebinding) gets 421 on every
//! path, a write with a foreign `Origin` (or `Sec-Fetch-Site`) gets 403, a
//! write that is not declared JSON gets 415 — and none of them changes
//! anything. The sidecar's own origin, and clients that send no `Origin`,
//! pass.

mod common;

use common::{client, get, raw, sidecar, Expect, Method};

/// A capacity no default has, to see whether a refused write changed it.
const PROBE: &str = "size-3072";

/// Held by each test while it reads and writes `PROBE`'s capacity: the
/// tests of this binary run in parallel, and one of them writes a capacity
/// and restores it while another compares before with after.
static PROBE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock_probe() -> std::sync::MutexGuard<'static, ()> {
    PROBE_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_host_that_does_not_name_the_sidecar_is_misdirected_everywhere() {
    let handle = sidecar(None);
    let port = handle.local_addr().port();
    let api = client(&handle);
    let _probe = lock_probe();
    let before = api.cache(PROBE).unwrap().sheaf_capacity;
    for host in [
        format!("evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "localhost".to_owned(),
        format!("10.1.2.3:{port}"),
        format!("[::1]:{port}:1"),
    ] {
        for path in ["/", "/v1/caches", "/metrics", "/healthz", "/nope"] {
            let reply = api
                .call(Method::GET, path)
                .header("host", host.clone())
                .send()
                .unwrap();
            let message = reply.expect_error(421);
            assert!(message.contains("Host"), "{host} {path}: {message}");
        }
        let reply = api
            .call(Method::PUT, &format!("/v1/caches/{PROBE}/sheaf_capacity"))
            .header("host", host.clone())
            .json(r#"{"sheaf_capacity": 7}"#)
            .send()
            .unwrap();
        reply.expect_error(421);
    }
    assert_eq!(api.cache(PROBE).unwrap().sheaf_capacity, before);

    // Every loopback name at the bound port is fine.
    for host in [
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let reply = api
            .call(Method::GET, "/healthz")
            .header("host", host.clone())
            .send()
            .unwrap();
        assert_eq!(reply.status, 200, "{host}: {reply:?}");
    }
    let by_name = sheafalloc_control::client::Client::new(&format!("localhost:{port}")).unwrap();
    assert_eq!(by_name.health().unwrap().status, "ok");

    // No Host at all (HTTP/1.0), a foreign absolute-form target, and two
    // Host headers.
    let addr = handle.local_addr();
    let (status, body) = raw(addr, b"GET /healthz HTTP/1.0\r\n\r\n");
    assert_eq!(status, 421, "{body}");
    let (status, body) = raw(
        addr,
        b"GET http://evil.example/v1/caches HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 421, "{body}");
    let (status, body) = raw(
        addr,
        b"GET /v1/caches HTTP/1.1\r\nHost: sidecar\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert!(matches!(status, 400 | 421), "{status}: {body}");
}

#[test]
fn writes_from_other_origins_are_forbidden() {
    let handle = sidecar(None);
    let port = handle.local_addr().port();
    let api = client(&handle);
    let _probe = lock_probe();
    let before = api.cache(PROBE).unwrap().sheaf_capacity;
    let capacity_path = format!("/v1/caches/{PROBE}/sheaf_capacity");
    for origin in [
        "http://evil.example".to_owned(),
        format!("http://evil.example:{port}"),
        format!("http://localhost:{port}"), // Host is 127.0.0.1:port: another origin
        format!("https://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        "null".to_owned(),
    ] {
        let reply = api
            .call(Method::PUT, &capacity_path)
            .header("origin", origin.clone())
            .json(r#"{"sheaf_capacity": 7}"#)
            .send()
            .unwrap();
        let message = reply.expect_error(403);
        assert!(message.contains("Origin"), "{origin}: {message}");
        let reply = api
            .call(Method::POST, "/v1/purge")
            .header("origin", origin.clone())
            .json("{}")
            .send()
            .unwrap();
        reply.expect_error(403);
    }
    for site in ["cross-site", "same-site"] {
        let reply = api
            .call(Method::POST, "/v1/purge")
            .header("sec-fetch-site", site)
            .json("{}")
            .send()
            .unwrap();
        reply.expect_error(403);
    }
    assert_eq!(api.cache(PROBE).unwrap().sheaf_capacity, before);

    // The sidecar's own origin may write, as its page does; so may a
    // client that sends no Origin.
    let reply = api
        .call(Method::PUT, &capacity_path)
        .header("origin", format!("http://127.0.0.1:{port}"))
        .header("sec-fetch-site", "same-origin")
        .json(r#"{"sheaf_capacity": 7}"#)
        .send()
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    let reply = api
        .call(Method::PUT, &capacity_path)
        .json(format!(r#"{{"sheaf_capacity": {before}}}"#))
        .send()
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    // Reads are not writes: a foreign Origin on a GET is answered (the
    // browser keeps the answer from the other site by CORS).
    let reply = api
        .call(Method::GET, "/v1/caches")
        .header("origin", "http://evil.example")
        .send()
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("access-control-allow-origin"), None);
}

#[test]
fn writes_must_be_declared_json() {
    let handle = sidecar(None);
    let api = client(&handle);
    let _probe = lock_probe();
    let before = api.cache(PROBE).unwrap().sheaf_capacity;
    let capacity_path = format!("/v1/caches/{PROBE}/sheaf_capacity");
    // What an HTML form or a no-cors fetch can send without a preflight.
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/json-seq"),
    ] {
        let mut put = api.call(Method::PUT, &capacity_path);
        let mut purge = api.call(Method::POST, "/v1/purge");
        if let Some(content_type) = content_type {
            put = put.header("content-type", content_type);
            purge = purge.header("content-type", content_type);
        }
        let message = put
            .body(r#"{"sheaf_capacity": 7}"#)
            .send()
            .unwrap()
            .expect_error(415);
        assert!(message.contains("application/json"), "{message}");
        purge.send().unwrap().expect_error(415);
    }
    // A bodiless purge without a content type too.
    let (status, body) = raw(
        handle.local_addr(),
        b"POST /v1/purge HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 415, "{body}");
    assert_eq!(api.cache(PROBE).unwrap().sheaf_capacity, before);
    // Parameters and case do not matter.
    let reply = api
        .call(Method::POST, "/v1/purge")
        .header("content-type", "Application/JSON; charset=utf-8")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(get(&api, "/healthz").status, 200);
}
