//! Scrapes racing a hard allocation workload: two threads allocate and free
//! objects of one class as fast as they can while three threads scrape
//! `/metrics` and `/v1/caches`. Every scrape must succeed, counters must
//! never go backwards, nothing may deadlock (every request and every loop
//! is bounded), and at quiesce the cache's counters must equal exactly what
//! the workers did.
//!
//! This file is its own process; the 2816-byte class is used by the workers
//! only (the sidecar's and the HTTP client's buffers never land there,
//! measured), so the counts can be compared exactly.

mod common;

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, get, get_json, sample, Client};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const CACHE: &str = "size-2816";
const OBJECT_BYTES: usize = 2700;
/// Objects allocated, then freed, per round.
const BATCH: usize = 500;
/// Rounds each worker does at least.
const MIN_ROUNDS: u64 = 300;
/// Scrapes that must have completed before the workers may stop, so the
/// scrapes overlap the workload.
const MIN_SCRAPES: u64 = 30;
/// Objects each worker still holds at quiesce.
const KEPT: usize = 777;
/// Longest a worker or scraper runs, whatever happens elsewhere.
const DEADLINE: Duration = Duration::from_secs(90);

fn layout() -> Layout {
    Layout::from_size_align(OBJECT_BYTES, 8).unwrap()
}

/// Allocates and frees in rounds until it has done `MIN_ROUNDS` and the
/// scrapers `MIN_SCRAPES`; returns its rounds and the objects it keeps.
fn work(scrapes: &AtomicU64) -> (u64, Vec<usize>) {
    let started = Instant::now();
    let mut objects = Vec::with_capacity(BATCH);
    let mut rounds = 0;
    while (rounds < MIN_ROUNDS || scrapes.load(Ordering::Relaxed) < MIN_SCRAPES)
        && started.elapsed() < DEADLINE
    {
        for i in 0..BATCH {
            // SAFETY: non-zero size.
            let object = unsafe { alloc(layout()) };
            assert!(!object.is_null());
            // SAFETY: the object has `OBJECT_BYTES` bytes.
            unsafe { object.add(i % OBJECT_BYTES).write(i as u8) };
            objects.push(object);
        }
        for object in objects.drain(..) {
            // SAFETY: allocated above with `layout()`, freed once.
            unsafe { dealloc(object, layout()) };
        }
        rounds += 1;
    }
    // SAFETY: non-zero size.
    let kept = (0..KEPT)
        .map(|_| unsafe { alloc(layout()) } as usize)
        .collect();
    (rounds, kept)
}

/// Scrapes both endpoints until told to stop; checks each answer and that
/// the cache's counters never decrease. Returns the scrapes done.
fn scrape(api: Client, stop: &AtomicBool, scrapes: &AtomicU64) -> u64 {
    let started = Instant::now();
    let mut last_allocations = 0.0;
    let mut last_frees = 0;
    let mut done = 0;
    let series = format!(r#"sheafalloc_allocations_total{{cache="{CACHE}"}}"#);
    while !stop.load(Ordering::Relaxed) && started.elapsed() < DEADLINE {
        let metrics = get(&api, "/metrics");
        assert_eq!(metrics.status, 200, "{metrics:?}");
        // The cache has no series until its first use.
        let allocations = sample(&metrics.body, &series).unwrap_or(0.0);
        assert!(
            allocations >= last_allocations,
            "allocations went backwards"
        );
        last_allocations = allocations;

        let json = get_json(&api, "/v1/caches");
        let cache = json["caches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|cache| cache["name"] == CACHE)
            .expect("the cache")
            .clone();
        let frees = cache["frees"].as_u64().unwrap();
        assert!(frees >= last_frees, "frees went backwards");
        last_frees = frees;
        done += 1;
        scrapes.fetch_add(1, Ordering::Relaxed);
    }
    done
}

fn counters(api: &Client) -> (u64, u64, i64) {
    let json = get_json(api, &format!("/v1/caches/{CACHE}"));
    (
        json["allocations"].as_u64().unwrap(),
        json["frees"].as_u64().unwrap(),
        json["live_objects"].as_i64().unwrap(),
    )
}

#[test]
fn scrapes_race_two_allocating_threads_without_losing_a_count() {
    let handle = sidecar_with_warm_up();
    let api = client(&handle);
    let (allocations_before, frees_before, live_before) = counters(&api);

    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scrapers: Vec<_> = (0..3)
        .map(|_| {
            let (api, stop, scrapes) = (client(&handle), Arc::clone(&stop), Arc::clone(&scrapes));
            std::thread::spawn(move || scrape(api, &stop, &scrapes))
        })
        .collect();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let scrapes = Arc::clone(&scrapes);
            std::thread::spawn(move || work(&scrapes))
        })
        .collect();
    let mut rounds = 0;
    let mut kept = Vec::new();
    for worker in workers {
        let (worker_rounds, worker_kept) = worker.join().expect("a worker failed");
        rounds += worker_rounds;
        kept.extend(worker_kept);
    }
    stop.store(true, Ordering::Relaxed);
    let scraped: u64 = scrapers
        .into_iter()
        .map(|scraper| scraper.join().expect("a scraper failed"))
        .sum();
    assert!(scraped >= MIN_SCRAPES, "{scraped} scrapes");

    // Quiesced: the workers have exited (their counters are folded into
    // the cache) and hold nothing but the kept objects.
    let allocated = rounds * BATCH as u64 + kept.len() as u64;
    let freed = rounds * BATCH as u64;
    let (allocations, frees, live) = counters(&api);
    assert_eq!(allocations - allocations_before, allocated);
    assert_eq!(frees - frees_before, freed);
    assert_eq!(live - live_before, kept.len() as i64);
    assert_eq!(live, allocations as i64 - frees as i64);
    let metrics = get(&api, "/metrics").body;
    let series = |name: &str| sample(&metrics, &format!(r#"{name}{{cache="{CACHE}"}}"#)).unwrap();
    assert_eq!(series("sheafalloc_allocations_total"), allocations as f64);
    assert_eq!(series("sheafalloc_frees_total"), frees as f64);
    assert_eq!(series("sheafalloc_live_objects"), live as f64);

    // This thread frees what the workers kept (cross-thread frees).
    for object in kept {
        // SAFETY: allocated by a worker with `layout()`, freed once.
        unsafe { dealloc(object as *mut u8, layout()) };
    }
    let (allocations_end, frees_end, live_end) = counters(&api);
    assert_eq!(allocations_end, allocations);
    assert_eq!(frees_end - frees, 2 * KEPT as u64);
    assert_eq!(live_end, live_before);
}

/// A sidecar that has served every endpoint once, so its one-time
/// allocations happen before the counts start. It builds a fresh `/metrics`
/// for every scrape (no cache), so every scrape races the workers and the
/// final one sees their exact counts.
fn sidecar_with_warm_up() -> sheafalloc_control::ControlHandle {
    let config = sheafalloc_control::Config::new("127.0.0.1:0".parse().unwrap())
        .with_metrics_max_age(Duration::ZERO);
    let handle = sheafalloc_control::spawn(config).expect("the sidecar starts");
    let api = client(&handle);
    for path in ["/metrics", "/v1/caches", "/v1/topology", "/healthz"] {
        assert_eq!(get(&api, path).status, 200);
    }
    handle
}
