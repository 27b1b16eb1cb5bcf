//! Live tuning: starts the control plane, runs an allocation-heavy load,
//! and changes a cache's sheaf capacity over HTTP while the load runs,
//! printing how throughput, barn misses and slab refills respond.
//!
//! `live_tuning [seconds-per-phase]` (default 3).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-256";

use sheafalloc_control::client::{CapacitySetting, Client};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let phase: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let config = sheafalloc_control::Config::new("127.0.0.1:0".parse().expect("addr"));
    let handle = sheafalloc_control::spawn(config)?;
    let client = Client::new(&handle.url())?;
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
        "{:>9} {:>12} {:>11} {:>14} {:>14} {:>12}",
        "capacity", "M allocs/s", "slow path", "barn misses/s", "refills/s", "in use"
    );
    for capacity in [64u32, 2, 200, 64] {
        client.set_capacity(CACHE, CapacitySetting::Pinned(u64::from(capacity)))?;
        std::thread::sleep(Duration::from_millis(200));
        let before = client.cache(CACHE)?;
        let start = Instant::now();
        let done_before = done.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(phase));
        let seconds = start.elapsed().as_secs_f64();
        let after = client.cache(CACHE)?;
        let rate = |read: fn(&sheafalloc_control::caches::CacheView) -> u64| {
            read(&after).saturating_sub(read(&before)) as f64 / seconds
        };
        let slow = rate(|cache| cache.slow_path_allocs);
        let allocations = rate(|cache| cache.allocations);
        println!(
            "{capacity:>9} {:>12.2} {:>10.1}% {:>14.0} {:>14.0} {:>12}",
            (done.load(Ordering::Relaxed) - done_before) as f64 / seconds / 1e6,
            slow * 100.0 / allocations.max(1.0),
            rate(|cache| cache.barn_get_misses),
            rate(|cache| cache.slab_refills),
            format!(
                "{}..{}",
                after.sheaf_capacity_in_use_min, after.sheaf_capacity_in_use_max
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
