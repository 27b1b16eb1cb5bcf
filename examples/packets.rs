//! The demo: a packet-buffer workload on sheafalloc, with its caches shown.
//!
//! Two threads play a network stack for a few seconds: the "RX" thread
//! allocates 2112-byte packet buffers (1500-byte MTU plus headroom and
//! shared info) and small 256-byte headers in bursts of 64 (a NAPI budget),
//! and hands them to a "TX completion" thread that frees them. Then it
//! prints throughput, the busiest caches, and what `purge()` gives back.

use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const BURST: usize = 64;

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!("sheafalloc demo: RX thread allocates packet buffers in bursts of {BURST}, TX thread frees them ({seconds} s)");
    let (tx, rx) = mpsc::sync_channel::<Vec<(Vec<u8>, Box<[u8; 256]>)>>(64);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let producer = std::thread::spawn(move || {
        let mut packets = 0u64;
        let mut sequence = 0u8;
        while Instant::now() < deadline {
            let burst: Vec<_> = (0..BURST)
                .map(|_| {
                    sequence = sequence.wrapping_add(1);
                    let mut buffer = Vec::with_capacity(2112);
                    buffer.resize(1500, sequence);
                    (buffer, Box::new([sequence; 256]))
                })
                .collect();
            packets += BURST as u64;
            if tx.send(burst).is_err() {
                break;
            }
        }
        packets
    });
    let consumer = std::thread::spawn(move || {
        let mut bytes = 0u64;
        for burst in rx {
            for (buffer, header) in burst {
                assert_eq!(buffer[1499], header[255], "payload and header disagree");
                bytes += buffer.len() as u64;
            }
        }
        bytes
    });
    let packets = producer.join().expect("producer");
    let bytes = consumer.join().expect("consumer");
    let rate = packets as f64 / seconds as f64;
    println!(
        "moved {packets} packets ({:.1} M packets/s, {:.2} GB/s of payload)",
        rate / 1e6,
        bytes as f64 / seconds as f64 / 1e9
    );

    println!(
        "\n{:<12} {:>14} {:>14} {:>10} {:>10} {:>10} {:>8}",
        "cache", "allocations", "frees", "barn hit%", "refills", "flushes", "capacity"
    );
    let mut caches = sheafalloc::caches();
    caches.sort_by_key(|c| std::cmp::Reverse(c.allocations));
    for cache in caches.iter().take(6) {
        let gets = cache.barn_get_hits + cache.barn_get_misses;
        let hit = if gets == 0 {
            0.0
        } else {
            100.0 * cache.barn_get_hits as f64 / gets as f64
        };
        println!(
            "{:<12} {:>14} {:>14} {:>9.1}% {:>10} {:>10} {:>8}",
            cache.name,
            cache.allocations,
            cache.frees,
            hit,
            cache.slab_refills,
            cache.slab_flushes,
            cache.sheaf_capacity
        );
    }
    let before = sheafalloc::resident_bytes().unwrap_or(0);
    let report = sheafalloc::purge();
    let after = sheafalloc::resident_bytes().unwrap_or(0);
    println!(
        "\nRSS {} KiB; purge() returned {} KiB to the OS; RSS now {} KiB",
        before >> 10,
        report.bytes_returned >> 10,
        after >> 10
    );
}
