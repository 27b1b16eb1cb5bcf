//! Every endpoint and every error case, over a real loopback socket, with
//! sheafalloc as this process's allocator.

mod common;

use std::alloc::{alloc, dealloc, Layout};

use axum::routing::get as route_get;
use axum::Router;
use common::{client, get, get_json, post, put, raw, sample, sidecar, Expect, Method};
use sheafalloc_control::{harden, spawn_router, Config};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[test]
fn healthz_answers_ok() {
    let handle = sidecar(None);
    let reply = get(&client(&handle), "/healthz");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.value(), serde_json::json!({"status": "ok"}));
    assert_eq!(client(&handle).health().unwrap().status, "ok");
}

#[test]
fn caches_list_every_class_with_live_counters() {
    let handle = sidecar(None);
    let api = client(&handle);
    let url = "/v1/caches";
    let before = get_json(&api, url);
    let caches = before["caches"].as_array().expect("caches array");
    assert_eq!(caches.len(), sheafalloc_core::SizeClass::all().count());
    let names: Vec<&str> = caches.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names[0], "size-8");
    assert!(names.contains(&"size-2304"));
    let sizes: Vec<u64> = caches
        .iter()
        .map(|c| c["object_size"].as_u64().unwrap())
        .collect();
    // Smallest first; an aligned twin (same size) right after its class.
    assert!(sizes.windows(2).all(|pair| pair[0] <= pair[1]), "ascending");
    let twin = names
        .iter()
        .position(|&name| name == "aligned-4096")
        .unwrap();
    assert_eq!(names[twin - 1], "size-4096");
    assert!(before["threads"]["live"].as_u64().unwrap() >= 1);
    for field in [
        "allocations",
        "slow_path_allocs",
        "live_objects",
        "live_bytes",
        "bytes_held",
        "sheaf_capacity",
        "sheaf_capacity_max",
    ] {
        assert!(caches[0].get(field).is_some(), "{field} missing");
    }

    // This thread allocates 1000 objects of the 2304-byte class and keeps
    // them: the cache must count at least those.
    let allocations = |json: &serde_json::Value| {
        json["caches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "size-2304")
            .unwrap()["allocations"]
            .as_u64()
            .unwrap()
    };
    let layout = Layout::from_size_align(2112, 8).unwrap();
    // SAFETY: `layout` has a non-zero size.
    let objects: Vec<*mut u8> = (0..1000).map(|_| unsafe { alloc(layout) }).collect();
    assert!(objects.iter().all(|object| !object.is_null()));
    let after = get_json(&api, url);
    assert!(allocations(&after) >= allocations(&before) + 1000);
    // The typed view reads the same answer.
    let typed = api.caches().unwrap();
    let cache = typed.caches.iter().find(|c| c.name == "size-2304").unwrap();
    assert!(cache.allocations >= allocations(&before) + 1000);
    assert_eq!(
        cache.sheaf_capacity_max, 227,
        "512 KiB of 2304-byte objects"
    );
    for object in objects {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { dealloc(object, layout) };
    }
}

#[test]
fn one_cache_by_name() {
    let handle = sidecar(None);
    let json = get_json(&client(&handle), "/v1/caches/size-256");
    assert_eq!(json["name"], "size-256");
    assert_eq!(json["object_size"], 256);
    let capacity = json["sheaf_capacity"].as_u64().unwrap();
    assert!((1..=1024).contains(&capacity));
}

#[test]
fn unknown_caches_and_paths_are_json_404s() {
    let handle = sidecar(None);
    let api = client(&handle);
    for path in [
        "/v1/caches/size-255",
        "/v1/caches/nonsense",
        "/v1/caches/size-0256",
        "/v1/caches/size-99999999999",
        "/nope",
        "/v1/caches/size-256/nope",
    ] {
        let reply = get(&api, path);
        let message = reply.expect_error(404);
        assert!(!message.is_empty(), "{path}");
    }
    // A name that is not even UTF-8 is a bad request.
    get(&api, "/v1/caches/%FF").expect_error(400);
    let reply = put(
        &api,
        "/v1/caches/size-255/sheaf_capacity",
        r#"{"sheaf_capacity": 8}"#,
    );
    assert!(reply.expect_error(404).contains("size-255"));
    // The typed client escapes what it puts in a path.
    let error = api.cache("../healthz").unwrap_err().to_string();
    assert!(
        error.contains("404") && error.contains("..%2Fhealthz"),
        "{error}"
    );
}

#[test]
fn capacity_changes_and_its_bad_inputs() {
    let handle = sidecar(None);
    let api = client(&handle);
    // A class no other test of this file changes.
    let url = "/v1/caches/size-40960/sheaf_capacity";
    let cache_url = "/v1/caches/size-40960";
    let original = get_json(&api, cache_url)["sheaf_capacity"]
        .as_u64()
        .unwrap();

    let reply = put(&api, url, r#"{"sheaf_capacity": 3}"#);
    assert_eq!(reply.status, 200, "{reply:?}");
    let json = reply.value();
    assert_eq!(json["name"], "size-40960");
    assert_eq!(json["sheaf_capacity"], 3);
    assert_eq!(json["previous_sheaf_capacity"], original);
    assert_eq!(get_json(&api, cache_url)["sheaf_capacity"], 3);

    // 40 KiB objects: at most 12 fit the 512 KiB a sheaf may hold.
    for out_of_range in ["0", "13", "1025", "-5", "100000000000000000000", "1e30"] {
        let body = format!(r#"{{"sheaf_capacity": {out_of_range}}}"#);
        let message = put(&api, url, &body).expect_error(422);
        assert!(
            message.contains("1..=12 for size-40960") && message.contains("512 KiB"),
            "{out_of_range}: {message}"
        );
    }
    assert_eq!(put(&api, url, r#"{"sheaf_capacity": 12}"#).status, 200);
    // The largest class: two 256 KiB objects per sheaf, not 256.
    let largest = "/v1/caches/size-262144/sheaf_capacity";
    let message = put(&api, largest, r#"{"sheaf_capacity": 256}"#).expect_error(422);
    assert!(message.contains("1..=2 for size-262144"), "{message}");
    assert_eq!(put(&api, url, r#"{"sheaf_capacity": 3}"#).status, 200);
    for malformed in [
        r#"{"sheaf_capacity": "#,
        "",
        "not json",
        r#"{"sheaf_capacity": "64"}"#,
        r#"{"sheaf_capacity": 1.5}"#,
        r#"{"capacity": 64}"#,
        r#"{"sheaf_capacity": 64, "extra": 1}"#,
        r#"[64]"#,
        r#"{"sheaf_capacity": null}"#,
    ] {
        let message = put(&api, url, malformed).expect_error(400);
        assert!(!message.is_empty(), "{malformed}");
    }
    // None of the refused requests changed anything.
    assert_eq!(get_json(&api, cache_url)["sheaf_capacity"], 3);
    // A number pins the cache; "auto" hands it back to the tuner, which
    // goes on from the capacity it had; other words are refused.
    assert_eq!(get_json(&api, cache_url)["tuning"], "pinned");
    let reply = put(&api, url, r#"{"sheaf_capacity": "auto"}"#);
    assert_eq!(reply.status, 200, "{reply:?}");
    let changed: serde_json::Value = reply.json().expect("a JSON answer");
    assert_eq!(changed["tuning"], "auto");
    assert_eq!(changed["sheaf_capacity"], 3);
    assert_eq!(get_json(&api, cache_url)["tuning"], "auto");
    let message = put(&api, url, r#"{"sheaf_capacity": "manual"}"#).expect_error(400);
    assert!(message.contains("\"auto\""), "{message}");
    let restore = format!(r#"{{"sheaf_capacity": {original}}}"#);
    assert_eq!(put(&api, url, &restore).status, 200);
}

#[test]
fn bodies_over_four_kib_get_413() {
    let handle = sidecar(None);
    let api = client(&handle);
    let url = "/v1/caches/size-256/sheaf_capacity";
    let capacity = get_json(&api, "/v1/caches/size-256")["sheaf_capacity"].clone();
    // Valid JSON, padded past the limit with whitespace.
    let padded = format!(r#"{{"sheaf_capacity": {capacity}{}}}"#, " ".repeat(5000));
    put(&api, url, &padded).expect_error(413);
    // Exactly at the limit is accepted.
    let body = format!(r#"{{"sheaf_capacity": {capacity}}}"#);
    let at_limit = format!("{body}{}", " ".repeat(4096 - body.len()));
    assert_eq!(put(&api, url, &at_limit).status, 200);
    // The limit holds for endpoints that ignore their body.
    let big = vec![b'x'; 8192];
    let mut request = format!(
        "POST /v1/purge HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    request.extend_from_slice(&big);
    let (status, body) = raw(handle.local_addr(), &request);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("\"error\""), "{body}");
    // And for chunked bodies with no declared length.
    let chunk = " ".repeat(3000);
    let request = format!(
        "PUT /v1/caches/size-256/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
        len = chunk.len()
    );
    let (status, body) = raw(handle.local_addr(), request.as_bytes());
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("\"error\""), "{body}");
}

#[test]
fn wrong_methods_are_json_405s_with_allow() {
    let handle = sidecar(None);
    let api = client(&handle);
    let reply = api
        .call(Method::DELETE, "/v1/caches")
        .send()
        .expect("the request completes");
    reply.expect_error(405);
    assert!(
        reply.header("allow").unwrap_or("").contains("GET"),
        "{reply:?}"
    );
    post(&api, "/healthz").expect_error(405);
    post(&api, "/metrics").expect_error(405);
    post(&api, "/").expect_error(405);
    get(&api, "/v1/purge").expect_error(405);
    get(&api, "/v1/caches/size-256/sheaf_capacity").expect_error(405);
    put(&api, "/v1/caches/size-256", "{}").expect_error(405);
}

#[test]
fn topology_reports_nodes_and_host_cpus() {
    let handle = sidecar(None);
    let json = get_json(&client(&handle), "/v1/topology");
    let node_count = json["node_count"].as_u64().unwrap();
    assert!(node_count >= 1);
    assert_eq!(json["nodes"].as_array().unwrap().len() as u64, node_count);
    assert_eq!(
        json["nodes_are_simulated"].as_bool(),
        Some(sheafalloc_core::node::nodes_are_simulated())
    );
    // Which sheaves run, in the JSON and the metrics alike.
    let mode = sheafalloc::cache_mode();
    assert_eq!(json["cache_mode"], mode.as_str(), "{json}");
    assert_eq!(
        json["cache_mode_reason"].as_str(),
        sheafalloc::cache_mode_reason(),
        "{json}"
    );
    let metrics = client(&handle).metrics().expect("metrics");
    let per_cpu = f64::from(u8::from(mode == sheafalloc::CacheMode::PerCpu));
    assert_eq!(
        common::sample(&metrics, "sheafalloc_per_cpu_caches"),
        Some(per_cpu),
        "{metrics}"
    );
    let host = &json["host"];
    assert!(host["error"].is_null(), "hwloc failed: {host}");
    let cpus = host["cpus"].as_array().unwrap();
    assert!(!cpus.is_empty());
    assert!(!host["numa_nodes"].as_array().unwrap().is_empty());
    if !json["nodes_are_simulated"].as_bool().unwrap() {
        // Real nodes carry the CPU sets of the host's nodes.
        assert!(json["nodes"][0]["cpus"].is_array(), "{json}");
    }
}

#[test]
fn purge_returns_the_memory_of_freed_objects() {
    let handle = sidecar(None);
    let api = client(&handle);
    let cache_url = "/v1/caches/size-14336";
    let before = get_json(&api, cache_url);
    // A thread fills many slabs of one class, frees everything and exits,
    // which hands its sheaves to the barn and the slabs.
    std::thread::spawn(|| {
        let layout = Layout::from_size_align(14_000, 8).unwrap();
        // SAFETY: non-zero size.
        let objects: Vec<*mut u8> = (0..4000).map(|_| unsafe { alloc(layout) }).collect();
        for object in objects {
            assert!(!object.is_null());
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { dealloc(object, layout) };
        }
    })
    .join()
    .unwrap();
    let reply = post(&api, "/v1/purge");
    assert_eq!(reply.status, 200, "{reply:?}");
    let returned = reply.value()["bytes_returned"].as_u64().unwrap();
    let after = get_json(&api, cache_url);
    let returned_by_cache =
        after["bytes_returned"].as_u64().unwrap() - before["bytes_returned"].as_u64().unwrap();
    // 4000 objects of 14 KiB are about 55 MiB; barely any of it can stay
    // cached in the exited thread's sheaves.
    assert!(returned_by_cache >= 40 << 20, "{returned_by_cache}");
    assert!(returned >= 1, "{returned}");
    // An empty body is taken as {}; anything else is refused.
    let empty = api.call(Method::POST, "/v1/purge").json("").send().unwrap();
    assert_eq!(empty.status, 200, "{empty:?}");
    for bad in [r#"{"all": true}"#, "[]", "null"] {
        let reply = api
            .call(Method::POST, "/v1/purge")
            .json(bad)
            .send()
            .unwrap();
        reply.expect_error(400);
    }
    assert!(api.purge().is_ok());
}

#[test]
fn metrics_are_prometheus_text() {
    let handle = sidecar(None);
    let api = client(&handle);
    let reply = get(&api, "/metrics");
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .content_type()
            .starts_with("text/plain; version=0.0.4"),
        "{}",
        reply.content_type()
    );
    let text = &reply.body;
    assert!(text.contains("# TYPE sheafalloc_allocations_total counter"));
    assert!(text.contains("# TYPE sheafalloc_slow_path_allocations_total counter"));
    assert!(text.contains("# TYPE sheafalloc_live_bytes gauge"));
    assert!(text.contains("# TYPE sheafalloc_held_bytes gauge"));
    assert!(text.contains(&format!(
        "sheafalloc_build_info{{version=\"{}\",",
        env!("CARGO_PKG_VERSION")
    )));
    assert!(sample(text, "process_resident_memory_bytes").unwrap() > 0.0);
    let allocations =
        sample(text, r#"sheafalloc_allocations_total{cache="size-8"}"#).expect("the size-8 series");
    assert!(
        allocations > 0.0,
        "this process has allocated 8-byte objects"
    );
    let nodes = sample(text, "sheafalloc_nodes").expect("node count");
    assert!(nodes >= 1.0);
    assert!(text.contains(r#"sheafalloc_node_info{node="0",simulated="#));
    assert!(text.contains(r#",node="0"}"#), "a per-node series");
    // Memory of barns and slabs is per node only: no per-cache duplicate.
    assert!(
        sample(text, r#"sheafalloc_held_bytes{cache="size-8",node="0"}"#).is_some(),
        "{text}"
    );
    assert!(sample(text, r#"sheafalloc_held_bytes{cache="size-8"}"#).is_none());
    assert!(!text.contains("sheafalloc_remote_frees_total{"));
    // Each series appears once.
    let series: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series))
        .collect();
    let unique: std::collections::BTreeSet<&&str> = series.iter().collect();
    assert_eq!(unique.len(), series.len(), "a series appears twice");
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        assert!(
            line.starts_with("sheafalloc_") || line.starts_with("process_"),
            "{line}"
        );
    }
    // Every metric family's TYPE line declares a counter only for _total.
    for line in text.lines().filter(|line| line.starts_with("# TYPE ")) {
        let mut words = line.split_whitespace().skip(2);
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        assert_eq!(name.ends_with("_total"), kind == "counter", "{line}");
    }
    // When promtool is installed (the project's setup installs it), it must
    // accept the exposition as is. scripts/check-prometheus.sh runs it
    // unconditionally.
    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut promtool) => {
            use std::io::Write;
            promtool
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let output = promtool.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Err(error) => eprintln!("promtool not run ({error}); see scripts/check-prometheus.sh"),
    }
}

#[test]
fn unused_caches_appear_in_metrics_once_tuned() {
    let handle = sheafalloc_control::spawn(
        Config::new("127.0.0.1:0".parse().unwrap()).with_metrics_max_age(std::time::Duration::ZERO),
    )
    .unwrap();
    let api = client(&handle);
    let metrics_url = "/metrics";
    let json = get_json(&api, "/v1/caches");
    let names: Vec<String> = json["caches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cache| cache["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names.len(),
        sheafalloc_core::size_class::NUM_CLASSES,
        "JSON lists every cache"
    );
    // Some caches are unused in this process, and have no series: take the
    // largest of them.
    let before = get(&api, metrics_url).body;
    let capacity_series = |name: &str| format!(r#"sheafalloc_sheaf_capacity{{cache="{name}"}}"#);
    let unused = names
        .iter()
        .rev()
        .find(|name| sample(&before, &capacity_series(name)).is_none())
        .expect("a cache without series");
    let reply = put(
        &api,
        &format!("/v1/caches/{unused}/sheaf_capacity"),
        r#"{"sheaf_capacity": 1}"#,
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let after = get(&api, metrics_url).body;
    assert_eq!(
        sample(&after, &capacity_series(unused)),
        Some(1.0),
        "{unused}"
    );
}

#[test]
fn head_requests_work_on_reads() {
    let handle = sidecar(None);
    let api = client(&handle);
    for path in ["/healthz", "/v1/caches/size-256", "/"] {
        let reply = api.call(Method::HEAD, path).send().unwrap();
        assert_eq!((reply.status, reply.body.as_str()), (200, ""), "{path}");
    }
}

#[test]
fn garbage_requests_do_not_stop_the_service() {
    let handle = sidecar(None);
    for garbage in [
        &b"\x00\x01\x02 garbage\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /v1/caches/size-256 HTTP/1.1\r\nHost: sidecar\r\nContent-Length: nope\r\n\r\n",
        b"PUT /v1/caches/size-256/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 100\r\n\r\n{",
    ] {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(handle.local_addr()).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let _ = stream.write_all(&common::aimed_at(handle.local_addr(), garbage));
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }
    let reply = get(&client(&handle), "/healthz");
    assert_eq!(reply.status, 200);
}

#[test]
fn a_panicking_handler_gets_a_json_500_and_the_server_goes_on() {
    let routes = Router::new()
        .route(
            "/boom",
            route_get(|| async {
                if std::hint::black_box(true) {
                    panic!("deliberate panic in a test handler");
                }
                "unreachable"
            }),
        )
        .route("/fine", route_get(|| async { "fine" }));
    let config = Config::new("127.0.0.1:0".parse().unwrap());
    let handle = spawn_router(&config, harden(routes)).unwrap();
    let api = client(&handle);
    for _ in 0..3 {
        let message = get(&api, "/boom").expect_error(500);
        assert!(message.contains("deliberate panic"), "{message}");
        let reply = get(&api, "/fine");
        assert_eq!((reply.status, reply.body.as_str()), (200, "fine"));
    }
    handle.shutdown().expect("the server thread ends cleanly");
}

#[test]
fn shutdown_stops_listening() {
    let handle = sidecar(None);
    let addr = handle.local_addr();
    assert_eq!(get(&client(&handle), "/healthz").status, 200);
    handle.shutdown().expect("clean shutdown");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "nothing listens on {addr} any more"
    );
}

#[test]
fn a_taken_port_is_a_bind_error() {
    let first = sidecar(None);
    let error = sheafalloc_control::spawn(Config::new(first.local_addr())).unwrap_err();
    assert!(
        matches!(error, sheafalloc_control::SpawnError::Bind { .. }),
        "{error}"
    );
}

#[test]
fn the_page_and_its_assets_are_served_from_here_only() {
    let handle = sidecar(None);
    let api = client(&handle);
    let page = get(&api, "/").expect_status(200);
    assert!(page.content_type().starts_with("text/html"), "{page:?}");
    assert!(page.body.contains("<table id=\"caches\">"));
    let policy = page.header("content-security-policy").unwrap();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let script = get(&api, "/page.js").expect_status(200);
    assert!(script.content_type().starts_with("text/javascript"));
    assert_eq!(script.body, sheafalloc_control::page::SCRIPT_JS);
    let style = get(&api, "/page.css").expect_status(200);
    assert!(style.content_type().starts_with("text/css"));
    // Nothing the page loads lives elsewhere.
    for body in [&page.body, &script.body, &style.body] {
        assert!(!body.contains("https://") && !body.contains("http://"));
    }
}
