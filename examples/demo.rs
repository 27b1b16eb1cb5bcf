//! The demo: the same request/response service run twice under built-in
//! load — once with sheafalloc (one line), once with the system allocator —
//! printing throughput and memory side by side. While the sheafalloc run
//! goes, its control plane answers at the printed URL.
//!
//! Usage: `demo [seconds-per-run] [connections]` (default 12 s, 1000).

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sheafalloc_examples::report::mib;

struct Run {
    rate: f64,
    requests: u64,
    peak_rss: u64,
    rss_after: u64,
    rss_after_purge: Option<u64>,
}

fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    exe.with_file_name(name)
}

fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9187)
}

/// The number of caches the control plane on `port` lists, once it answers.
fn control_plane_caches(port: u16) -> Option<usize> {
    let client = sheafalloc_control::client::Client::new(&port.to_string())
        .ok()?
        .with_timeout(Duration::from_secs(2));
    client.caches().ok().map(|caches| caches.caches.len())
}

fn run(binary: &str, seconds: u64, connections: usize, control_port: Option<u16>) -> Run {
    let path = sibling(binary);
    let mut command = Command::new(&path);
    command
        .arg(connections.to_string())
        .arg(seconds.to_string())
        .stdout(Stdio::piped());
    if let Some(port) = control_port {
        command.env("SHEAFALLOC_CONTROL_ADDR", format!("127.0.0.1:{port}"));
    }
    let mut child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "cannot start {}: {e} (build all example binaries first)",
            path.display()
        )
    });
    if let Some(port) = control_port {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut shown = false;
        while Instant::now() < deadline && !shown {
            if let Some(caches) = control_plane_caches(port) {
                println!("  control plane live at http://127.0.0.1:{port}/v1/caches ({caches} caches), metrics at http://127.0.0.1:{port}/metrics");
                shown = true;
            } else {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if !shown {
            println!("  (control plane did not answer on port {port})");
        }
    }
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("read service output");
    let status = child.wait().expect("service exit");
    assert!(status.success(), "{binary} failed: {status}");
    // Every JSON line the service printed, merged.
    let mut value = serde_json::Map::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        if let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(line) {
            value.extend(fields);
        }
    }
    let number = |key: &str| value.get(key).and_then(|v| v.as_u64());
    Run {
        rate: value
            .get("rate")
            .and_then(|v| v.as_f64())
            .expect("the service reported no result"),
        requests: number("requests").unwrap_or(0),
        peak_rss: number("peak_rss").unwrap_or(0),
        rss_after: number("rss_after").unwrap_or(0),
        rss_after_purge: number("rss_after_purge"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(12);
    let connections: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    println!("sheafalloc demo: a loopback TCP request/response service, {connections} connections, {seconds} s per allocator");
    println!("(each request allocates its buffer, a parsed header and a response; both runs are the same program, one line apart)\n");

    println!("[1/2] sheafalloc");
    let port = free_loopback_port();
    let sheaf = run("demo-service-sheafalloc", seconds, connections, Some(port));
    println!("  {:.0} requests/s\n", sheaf.rate);
    println!("[2/2] system allocator");
    let system = run("demo-service-system", seconds, connections, None);
    println!("  {:.0} requests/s\n", system.rate);

    println!("{:<22} {:>14} {:>14}", "", "sheafalloc", "system");
    println!(
        "{:<22} {:>14.0} {:>14.0}",
        "requests/s", sheaf.rate, system.rate
    );
    println!(
        "{:<22} {:>14} {:>14}",
        "requests checked", sheaf.requests, system.requests
    );
    println!(
        "{:<22} {:>14} {:>14}",
        "peak RSS",
        mib(sheaf.peak_rss),
        mib(system.peak_rss)
    );
    println!(
        "{:<22} {:>14} {:>14}",
        "RSS after load",
        mib(sheaf.rss_after),
        mib(system.rss_after)
    );
    if let Some(purged) = sheaf.rss_after_purge {
        println!(
            "{:<22} {:>14} {:>14}",
            "RSS after purge()",
            mib(purged),
            "-"
        );
    }
    println!(
        "(sheafalloc's RSS includes its control-plane sidecar: a thread with its own runtime)"
    );
    println!(
        "\nthroughput ratio sheafalloc / system: {:.2}x",
        sheaf.rate / system.rate.max(1.0)
    );
    println!(
        "(2 vCPUs shared by client and server: figures swing between runs; compare the ratio)"
    );
}
