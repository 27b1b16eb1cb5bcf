//! Live tuning: starts the control plane, runs an allocation-heavy load,
//! and changes a cache's sheaf capacity over HTTP while the load runs,
//! printing how throughput, barn misses and slab refills respond.
//!
//! `live_tuning [seconds-per-phase]` (default 3).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-256";

/// One HTTP/1.1 request on loopback; returns status and body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn counter(body: &str, field: &str) -> u64 {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value[field].as_u64().unwrap_or(0)
}

fn main() -> std::io::Result<()> {
    let phase: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let config = sheafalloc_control::Config::new("127.0.0.1:0".parse().expect("addr"));
    let handle = sheafalloc_control::spawn(config).map_err(std::io::Error::other)?;
    let addr = handle.local_addr();
    println!("control plane at {}/v1/caches/{CACHE}", handle.url());

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || {
                // Bursts larger than a sheaf: every burst exchanges sheaves.
                let mut held: Vec<Box<[u8; 256]>> = Vec::with_capacity(512);
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..300u32 {
                        held.push(Box::new([(i + t) as u8; 256]));
                    }
                    done.fetch_add(held.len() as u64, Ordering::Relaxed);
                    held.clear();
                }
            })
        })
        .collect();

    println!(
        "{:>9} {:>12} {:>14} {:>14} {:>12}",
        "capacity", "M allocs/s", "barn misses/s", "refills/s", "in use"
    );
    for capacity in [64u32, 2, 200, 64] {
        let (status, body) = http(
            addr,
            "PUT",
            &format!("/v1/caches/{CACHE}/sheaf_capacity"),
            &format!("{{\"sheaf_capacity\": {capacity}}}"),
        )?;
        assert_eq!(status, 200, "PUT failed: {body}");
        std::thread::sleep(Duration::from_millis(200));
        let (_, before) = http(addr, "GET", &format!("/v1/caches/{CACHE}"), "")?;
        let start = Instant::now();
        let done_before = done.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(phase));
        let seconds = start.elapsed().as_secs_f64();
        let (_, after) = http(addr, "GET", &format!("/v1/caches/{CACHE}"), "")?;
        let rate =
            |field: &str| (counter(&after, field) - counter(&before, field)) as f64 / seconds;
        let value: serde_json::Value = serde_json::from_str(&after).unwrap_or_default();
        println!(
            "{capacity:>9} {:>12.2} {:>14.0} {:>14.0} {:>12}",
            (done.load(Ordering::Relaxed) - done_before) as f64 / seconds / 1e6,
            rate("barn_get_misses"),
            rate("slab_refills"),
            format!(
                "{}..{}",
                value["sheaf_capacity_in_use_min"], value["sheaf_capacity_in_use_max"]
            ),
        );
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker");
    }
    handle.shutdown()?;
    println!("smaller sheaves mean more trips to the barn and the slabs; the knob moved them live, no restart");
    Ok(())
}
