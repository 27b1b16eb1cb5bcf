//! A live capacity change reaches threads that are allocating right now,
//! growing and shrinking, without losing objects.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-256";

/// The tests of this file change capacities, and in per-CPU mode a lower
/// capacity drains every CPU's cache: while a drain holds a CPU's cache
/// stopped (for as long as its thread is descheduled, on a loaded host),
/// the slow paths there go straight to the slabs. One test at a time, so
/// one test's drains cannot empty the sheaves another is watching.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    // A failed test must not fail the others: a poisoned lock is still a
    // lock.
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::yield_now();
    }
}

#[test]
fn capacity_changes_reach_allocating_threads() {
    let _serial = one_at_a_time();
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
                    // Bursts larger than two sheaves of any capacity set
                    // here (at most 200), then frees: the main sheaf runs
                    // empty and full in every burst, so the
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
    if sheafalloc::cache_mode() == sheafalloc::CacheMode::PerThread {
        // Each worker resizes its own sheaves at each of the 4 changes.
        assert!(
            after.sheaf_resizes >= before.sheaf_resizes + 8,
            "resizes: {}",
            after.sheaf_resizes
        );
    }
    // (Per-CPU sheaves are emptied by a drain when the capacity falls and
    // replaced by sheaves of the new capacity, so how many are resized in
    // place depends on timing; the `seen` waits above are the proof.)
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
    let _serial = one_at_a_time();
    let err = sheafalloc::set_sheaf_capacity("size-512", 0).unwrap_err();
    assert_eq!(
        err,
        sheafalloc::SetCapacityError::OutOfRange {
            requested: 0,
            min: 1,
            max: 1024
        }
    );
    assert!(err.to_string().contains("1..=1024"));
    assert!(sheafalloc::set_sheaf_capacity("size-512", 1025).is_err());
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

/// A thread whose working set fits its main sheaf never takes a slow path,
/// so it would never exchange a sheaf: a lower capacity still reaches it
/// at once (its fast-path capacity is clamped), and its next free above the
/// new capacity trims its sheaves.
#[test]
fn a_lower_capacity_reaches_a_thread_that_stays_on_the_fast_path() {
    let _serial = one_at_a_time();
    const QUIET: &str = "size-3584";
    let stop = Arc::new(AtomicBool::new(false));
    let warmed = Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, warmed) = (Arc::clone(&stop), Arc::clone(&warmed));
        std::thread::spawn(move || {
            // Fill the main sheaf once (allocate and free a burst), then
            // cycle one object: pop and push on the same sheaf forever.
            let burst: Vec<Box<[u8; 3500]>> = (0..20).map(|_| Box::new([7u8; 3500])).collect();
            drop(burst);
            warmed.store(true, Ordering::Release);
            let mut cycles = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let object = std::hint::black_box(Box::new([9u8; 3500]));
                assert_eq!(object[3499], 9);
                drop(object);
                cycles += 1;
            }
            cycles
        })
    };
    wait_until("the worker is warmed up", || warmed.load(Ordering::Acquire));
    let before = sheafalloc::cache(QUIET).unwrap();
    assert!(before.sheaf_capacity_in_use_max >= 20, "{before:?}");
    sheafalloc::set_sheaf_capacity(QUIET, 4).unwrap();
    // No exchange is needed for the worker's fast path to see it.
    wait_until("the worker's fast path uses capacity 4", || {
        sheafalloc::cache(QUIET).unwrap().sheaf_capacity_in_use_max == 4
    });
    stop.store(true, Ordering::Relaxed);
    let cycles = worker.join().unwrap();
    assert!(cycles > 0);
    let after = sheafalloc::cache(QUIET).unwrap();
    assert!(
        after.flushed_objects > before.flushed_objects,
        "its sheaves were trimmed: {before:?} -> {after:?}"
    );
    sheafalloc::release_sheaf_capacity(QUIET).unwrap();
}
