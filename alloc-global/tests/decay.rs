//! Slabs that stay empty go back to the OS by themselves (no `purge()`):
//! after the decay period, the next slow paths return them.

use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[test]
fn empty_slabs_are_returned_after_the_decay_period() {
    let objects: Vec<Box<[u8; 4096]>> = (0..16 * 1024)
        .map(|i| Box::new([(i % 255) as u8; 4096]))
        .collect();
    let peak = sheafalloc::resident_bytes().unwrap();
    let held = sheafalloc::cache("size-4096").unwrap().bytes_held;
    assert!(
        held >= 64 << 20,
        "64 MiB of 4 KiB objects should hold 64 MiB, held {held}"
    );
    assert!(objects
        .iter()
        .enumerate()
        .all(|(i, o)| o[4095] == (i % 255) as u8));
    drop(objects);
    sheafalloc::flush_thread_cache();
    let start = Instant::now();
    // The decay is time-based: keep the allocator's slow paths running (as
    // a live service would) until it has returned the slabs, or give up.
    let returned = loop {
        let cache = sheafalloc::cache("size-4096").unwrap();
        if cache.bytes_returned >= (60 << 20) {
            break cache.bytes_returned;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "nothing returned after 15 s: {cache:?}"
        );
        let burst: Vec<Box<[u8; 300]>> = (0..1000).map(|_| Box::new([1; 300])).collect();
        drop(burst);
        std::thread::yield_now();
    };
    let elapsed = start.elapsed();
    let rss = sheafalloc::resident_bytes().unwrap();
    eprintln!(
        "returned {} MiB after {elapsed:?}; RSS {} MiB -> {} MiB",
        returned >> 20,
        peak >> 20,
        rss >> 20
    );
    assert!(
        elapsed >= Duration::from_millis(900),
        "returned before the decay period: {elapsed:?}"
    );
    assert!(rss < peak / 2, "RSS {rss} did not drop from {peak}");
}
