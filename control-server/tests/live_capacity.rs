//! A capacity change over HTTP reaches the sheaves of threads that are
//! allocating right now: worker threads churn objects of one class while
//! the test PUTs a new capacity and polls GET until every live thread's
//! main sheaf has it.
//!
//! This file is its own process, and its workers are the only threads that
//! use the 5632-byte class: the sidecar's, the test harness's and the HTTP
//! client's buffers never land there (measured; the test checks that no
//! thread holds a sheaf of the class before the workers start), so
//! `in_use_min/max` describe exactly the workers' sheaves.

mod common;

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, get, put, sidecar, Client, Expect};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-5632";
const OBJECT_BYTES: usize = 5500;
/// More objects than any capacity of this cache (`..=93`, 512 KiB of
/// 5632-byte objects): every batch passes through
/// the slow paths, where threads apply the cache's capacity.
const BATCH: usize = 300;
/// Longest a worker runs, whatever happens to the test thread.
const WORKER_DEADLINE: Duration = Duration::from_secs(60);
/// Longest the test waits for a capacity to reach every worker.
const POLL_DEADLINE: Duration = Duration::from_secs(30);

/// Stops the workers when dropped (also when an assertion fails).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn churn(stop: &AtomicBool) -> u64 {
    let layout = Layout::from_size_align(OBJECT_BYTES, 8).unwrap();
    let started = Instant::now();
    let mut objects = Vec::with_capacity(BATCH);
    let mut batches = 0;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < WORKER_DEADLINE {
        for i in 0..BATCH {
            // SAFETY: `layout` has a non-zero size.
            let object = unsafe { alloc(layout) };
            assert!(!object.is_null());
            // SAFETY: the object has `OBJECT_BYTES` bytes.
            unsafe { object.write(i as u8) };
            objects.push(object);
        }
        for object in objects.drain(..) {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { dealloc(object, layout) };
        }
        batches += 1;
    }
    batches
}

/// Polls the cache until `done` holds for it; returns the last view.
fn poll_until(
    api: &Client,
    url: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + POLL_DEADLINE;
    loop {
        let json = get(api, url).expect_status(200).value();
        if done(&json) {
            return json;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not reached within {POLL_DEADLINE:?}; last view: {json}"
        );
        std::thread::yield_now();
    }
}

fn in_use(json: &serde_json::Value) -> (u64, u64) {
    (
        json["sheaf_capacity_in_use_min"].as_u64().unwrap(),
        json["sheaf_capacity_in_use_max"].as_u64().unwrap(),
    )
}

#[test]
fn capacity_in_use_follows_a_put_under_a_live_workload() {
    let handle = sidecar(None);
    let api = client(&handle);
    let cache_url = format!("/v1/caches/{CACHE}");
    let capacity_url = format!("{cache_url}/sheaf_capacity");
    let initial = get(&api, &cache_url).value();
    let default_capacity = initial["sheaf_capacity"].as_u64().unwrap();
    assert_eq!(in_use(&initial), (0, 0), "no thread uses {CACHE} yet");

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || churn(&stop))
        })
        .collect();

    // Both workers hold a main sheaf at the default capacity.
    poll_until(&api, &cache_url, "workers running", |json| {
        in_use(json) == (default_capacity, default_capacity)
            && json["allocations"].as_u64().unwrap() >= 2 * BATCH as u64
    });

    for target in [9u64, 2, 90] {
        assert_ne!(target, default_capacity);
        let before = get(&api, &cache_url).value();
        let reply = put(
            &api,
            &capacity_url,
            &format!(r#"{{"sheaf_capacity": {target}}}"#),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.value()["sheaf_capacity"], target);
        // Per-thread mode: a lower capacity reaches the workers' fast
        // paths at once, their sheaves are resized at their next exchange.
        // Per-CPU mode: the CPUs' sheaves are drained, and the next ones
        // have the new capacity.
        let per_thread = sheafalloc::cache_mode() == sheafalloc::CacheMode::PerThread;
        let after = poll_until(
            &api,
            &cache_url,
            &format!("capacity {target} in every worker's sheaves"),
            |json| {
                in_use(json) == (target, target)
                    && (!per_thread
                        || json["sheaf_resizes"].as_u64() > before["sheaf_resizes"].as_u64())
            },
        );
        assert_eq!(after["sheaf_capacity"], target);
        assert!(
            after["allocations"].as_u64() > before["allocations"].as_u64(),
            "the workload kept running"
        );
    }

    stop.store(true, Ordering::Relaxed);
    let batches: u64 = workers
        .into_iter()
        .map(|worker| worker.join().unwrap())
        .sum();
    assert!(batches > 0);
    // Exited threads hold no sheaves (per-CPU mode: threads never do; the
    // CPUs' sheaves stay, bounded by CPUs, at the last capacity).
    let done = get(&api, &cache_url).value();
    if sheafalloc::cache_mode() == sheafalloc::CacheMode::PerThread {
        assert_eq!(in_use(&done), (0, 0), "{done}");
    } else {
        let (min, max) = in_use(&done);
        assert!(max == 0 || (min, max) == (90, 90), "{done}");
    }
    let restore = format!(r#"{{"sheaf_capacity": {default_capacity}}}"#);
    assert_eq!(put(&api, &capacity_url, &restore).status, 200);
}
