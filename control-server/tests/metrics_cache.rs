//! `/metrics` is served from one exposition per interval: within the
//! interval every scrape gets the same text, whatever the allocator did
//! meanwhile, so a flood of scrapes costs one snapshot per interval.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{client, sample, Client};
use sheafalloc_control::{spawn, Config};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A class this file's threads allocate and nothing else here uses.
const CACHE: &str = "size-7168";

fn allocations(client: &Client, metrics: &str) -> (f64, u64) {
    let series = format!(r#"sheafalloc_allocations_total{{cache="{CACHE}"}}"#);
    let scraped = sample(metrics, &series).unwrap_or(0.0);
    (scraped, client.cache(CACHE).unwrap().allocations)
}

fn allocate(count: usize) {
    let objects: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8; 7000]).collect();
    std::hint::black_box(&objects);
}

#[test]
fn within_the_interval_every_scrape_gets_the_same_exposition() {
    let config =
        Config::new("127.0.0.1:0".parse().unwrap()).with_metrics_max_age(Duration::from_secs(3600));
    let handle = spawn(config).unwrap();
    let client = client(&handle);
    let first = client.metrics().unwrap();
    allocate(1000);
    let second = client.metrics().unwrap();
    assert_eq!(first, second, "rebuilt within the interval");
    let (scraped, live) = allocations(&client, &second);
    assert!(
        live as f64 >= scraped + 1000.0,
        "the JSON is live: {live} vs {scraped}"
    );

    // Without the cache, every scrape is fresh.
    let uncached =
        spawn(Config::new("127.0.0.1:0".parse().unwrap()).with_metrics_max_age(Duration::ZERO))
            .unwrap();
    let uncached = common::client(&uncached);
    let before = uncached.metrics().unwrap();
    allocate(1000);
    let after = uncached.metrics().unwrap();
    let (before, _) = allocations(&uncached, &before);
    let (after, _) = allocations(&uncached, &after);
    assert!(after >= before + 1000.0, "{before} -> {after}");
}

#[test]
fn a_flood_of_scrapes_builds_one_exposition_per_interval() {
    let handle = common::sidecar(None);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The figures move all the time, so every build differs from the last.
    let worker = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                allocate(10);
            }
        })
    };
    let started = Instant::now();
    let scrapers: Vec<_> = (0..4)
        .map(|_| {
            let client = client(&handle);
            std::thread::spawn(move || {
                (0..150)
                    .map(|_| client.metrics().expect("a scrape"))
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let mut bodies = BTreeSet::new();
    let mut scrapes = 0;
    for scraper in scrapers {
        for body in scraper.join().unwrap() {
            scrapes += 1;
            bodies.insert(body);
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    worker.join().unwrap();
    // One build per started second of the flood, at most (plus the one
    // that may straddle its start).
    let intervals = elapsed.as_secs() + 2;
    assert!(
        bodies.len() as u64 <= intervals,
        "{} different expositions for {scrapes} scrapes in {elapsed:?}",
        bodies.len()
    );
    assert_eq!(scrapes, 600);

    // And a scrape after the interval sees the new figures.
    let client = client(&handle);
    let seen = client.metrics().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        allocate(100);
        let now = client.metrics().unwrap();
        if now != seen {
            let (old, _) = allocations(&client, &seen);
            let (new, _) = allocations(&client, &now);
            assert!(new > old, "{old} -> {new}");
            break;
        }
        assert!(Instant::now() < deadline, "the exposition never refreshed");
        std::thread::sleep(Duration::from_millis(50));
    }
}
