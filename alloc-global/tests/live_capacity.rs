//! A live capacity change reaches threads that are allocating right now,
//! growing and shrinking, without losing objects.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-256";

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::yield_now();
    }
}

#[test]
fn capacity_changes_reach_allocating_threads() {
    let before = sheafalloc::cache(CACHE).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Vec<AtomicU32>> = Arc::new((0..2).map(|_| AtomicU32::new(0)).collect());
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let stop = Arc::clone(&stop);
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut live: Vec<Box<[u8; 256]>> = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Bursts larger than any capacity (256) then frees: the
                    // main sheaf runs empty and full in every burst, so the
                    // thread exchanges sheaves (where a new capacity applies).
                    for _ in 0..600 {
                        live.push(Box::new([(i % 251) as u8; 256]));
                        i += 1;
                    }
                    for object in live.drain(..) {
                        assert!(object.iter().all(|b| *b == object[0]));
                    }
                    seen[t].store(
                        sheafalloc::thread_sheaf_capacity(CACHE).unwrap(),
                        Ordering::Relaxed,
                    );
                }
            })
        })
        .collect();
    for capacity in [8u32, 200, 1, 26] {
        sheafalloc::set_sheaf_capacity(CACHE, u64::from(capacity)).unwrap();
        wait_until(&format!("both workers use capacity {capacity}"), || {
            seen.iter().all(|s| s.load(Ordering::Relaxed) == capacity)
        });
        assert_eq!(sheafalloc::cache(CACHE).unwrap().sheaf_capacity, capacity);
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    let after = sheafalloc::cache(CACHE).unwrap();
    assert!(
        after.sheaf_resizes >= before.sheaf_resizes + 8,
        "resizes: {}",
        after.sheaf_resizes
    );
    assert!(
        after.flushed_objects > before.flushed_objects,
        "shrinking must flush objects"
    );
    // Bursts of 600 overflow any sheaf: some allocations took the slow
    // path (every exchange is one), never more than were made.
    let allocations = after.allocations - before.allocations;
    let slow = after.slow_path_allocs - before.slow_path_allocs;
    assert!(
        slow > 0 && slow <= allocations,
        "{slow} slow of {allocations}"
    );
    assert!(
        (after.live_objects - before.live_objects).abs() <= 8,
        "objects lost: {after:?}"
    );
}

#[test]
fn bad_capacity_requests_are_refused_with_the_range() {
    let err = sheafalloc::set_sheaf_capacity("size-512", 0).unwrap_err();
    assert_eq!(
        err,
        sheafalloc::SetCapacityError::OutOfRange {
            requested: 0,
            min: 1,
            max: 256
        }
    );
    assert!(err.to_string().contains("1..=256"));
    assert!(sheafalloc::set_sheaf_capacity("size-512", 257).is_err());
    assert_eq!(
        sheafalloc::set_sheaf_capacity("size-255", 8),
        Err(sheafalloc::SetCapacityError::UnknownCache(
            "size-255".into()
        ))
    );
    assert!(sheafalloc::set_sheaf_capacity("size-512", 256).is_ok());
    // A sheaf holds at most 512 KiB of objects: 2 of the largest class.
    assert_eq!(
        sheafalloc::sheaf_capacity_range("size-262144"),
        Some((1, 2))
    );
    let err = sheafalloc::set_sheaf_capacity("size-262144", 3).unwrap_err();
    assert_eq!(
        err,
        sheafalloc::SetCapacityError::OutOfRange {
            requested: 3,
            min: 1,
            max: 2
        }
    );
    assert!(sheafalloc::set_sheaf_capacity("size-262144", 2).is_ok());
    sheafalloc::set_sheaf_capacity("size-512", 26).unwrap();
}
