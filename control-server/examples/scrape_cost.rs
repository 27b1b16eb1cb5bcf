//! What one `/metrics` scrape costs a busy process: with every one of the
//! 97 caches in use by each of 64 threads, it counts the allocations the
//! sidecar makes per scrape and times the scrape, fresh (a new exposition
//! each time) and from the sidecar's cache.
//!
//! ```text
//! cargo run --release -p sheafalloc-control --example scrape_cost -- [--threads 64] [--scrapes 200]
//! ```
//!
//! Allocations are counted by a wrapper around sheafalloc (this process's
//! global allocator): a process-wide count, minus what the measuring
//! thread (the HTTP client) allocates itself. The 64 threads hold one
//! object of every class and wait, so the rest is the sidecar's. The build
//! of the text alone (`exposition::render`, no HTTP) is also measured on
//! the measuring thread.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use sheafalloc_control::client::Client;
use sheafalloc_control::{spawn, Config};
use sheafalloc_core::SizeClass;

/// sheafalloc, counting every allocation.
struct Counting;

static INNER: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Allocations of this thread (const, no destructor: touching it
    /// never allocates).
    static MINE: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    let _ = MINE.try_with(|mine| mine.set(mine.get() + 1));
}

// SAFETY: every method forwards to sheafalloc's with the same arguments,
// so its guarantees are sheafalloc's; the counting touches only an atomic
// and a const thread-local without a destructor, neither of which
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's duties for `alloc` are passed on unchanged.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator (so from sheafalloc) with
        // `layout`, as `realloc` requires of the caller.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from sheafalloc with `layout`.
        unsafe { INNER.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn mine() -> u64 {
    MINE.with(Cell::get)
}

struct Options {
    threads: usize,
    scrapes: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        threads: 64,
        scrapes: 200,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            args.next()
                .and_then(|value| value.parse().ok())
                .filter(|value| *value > 0)
                .ok_or(format!("{name} needs a positive number"))
        };
        match arg.as_str() {
            "--threads" => options.threads = number("--threads")?,
            "--scrapes" => options.scrapes = number("--scrapes")?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// Per-scrape figures.
#[derive(Default)]
struct Samples {
    allocations: Vec<u64>,
    micros: Vec<f64>,
}

impl Samples {
    fn report(&mut self, what: &str) {
        self.allocations.sort_unstable();
        self.micros.sort_by(f64::total_cmp);
        let middle = self.allocations.len() / 2;
        println!(
            "{what:<44} allocations median {:>6} (min {}, max {}); time median {:>8.1} µs (min {:.1}, max {:.1})",
            self.allocations[middle],
            self.allocations[0],
            self.allocations[self.allocations.len() - 1],
            self.micros[middle],
            self.micros[0],
            self.micros[self.micros.len() - 1],
        );
    }
}

/// `scrapes` scrapes of `client`: the allocations made by everything but
/// this thread, and the time of each.
fn measure(client: &Client, scrapes: usize) -> (Samples, usize) {
    let mut samples = Samples::default();
    let mut bytes = 0;
    for _ in 0..scrapes {
        let (all, own) = (ALLOCATIONS.load(Ordering::Relaxed), mine());
        let started = Instant::now();
        let text = client.metrics().expect("a scrape");
        let took = started.elapsed();
        let others = (ALLOCATIONS.load(Ordering::Relaxed) - all) - (mine() - own);
        bytes = text.len();
        samples.allocations.push(others);
        samples.micros.push(took.as_secs_f64() * 1e6);
    }
    (samples, bytes)
}

fn main() {
    let options = options().unwrap_or_else(|message| {
        eprintln!("scrape_cost: {message}\nusage: scrape_cost [--threads N] [--scrapes N]");
        std::process::exit(2);
    });
    let classes: Vec<usize> = SizeClass::all().map(SizeClass::object_size).collect();
    // Every thread holds an object of every class, then waits.
    let ready = Arc::new(Barrier::new(options.threads + 1));
    let done = Arc::new(Barrier::new(options.threads + 1));
    let threads: Vec<_> = (0..options.threads)
        .map(|_| {
            let (ready, done, classes) = (Arc::clone(&ready), Arc::clone(&done), classes.clone());
            std::thread::spawn(move || {
                let held: Vec<Vec<u8>> = classes.iter().map(|&size| vec![1u8; size]).collect();
                ready.wait();
                done.wait();
                drop(held);
            })
        })
        .collect();
    ready.wait();

    let fresh = spawn(
        Config::new("127.0.0.1:0".parse().expect("an address"))
            .with_metrics_max_age(Duration::ZERO),
    )
    .expect("the sidecar starts");
    let cached =
        spawn(Config::new("127.0.0.1:0".parse().expect("an address"))).expect("the sidecar starts");
    let fresh_client = Client::new(&fresh.url()).expect("an address");
    let cached_client = Client::new(&cached.url()).expect("an address");
    let view = fresh_client.caches().expect("GET /v1/caches");
    let in_use = view
        .caches
        .iter()
        .filter(|cache| cache.sheaf_capacity_in_use_max > 0)
        .count();
    println!(
        "{} threads hold a sheaf of {in_use} of {} caches; {} threads live in all",
        options.threads,
        view.caches.len(),
        view.threads.live
    );
    // Warm up: first-use allocations of the sidecar, the client, the
    // connection pool.
    measure(&fresh_client, 10);
    measure(&cached_client, 10);

    let (mut scrapes, bytes) = measure(&fresh_client, options.scrapes);
    let samples = fresh_client
        .metrics()
        .map(|text| text.lines().filter(|line| !line.starts_with('#')).count())
        .unwrap_or(0);
    println!("exposition: {bytes} bytes, {samples} samples");
    scrapes.report("GET /metrics, fresh exposition (over HTTP)");
    let (mut from_cache, _) = measure(&cached_client, options.scrapes);
    from_cache.report("GET /metrics, from the 1 s cache (over HTTP)");

    let mut render = Samples::default();
    for _ in 0..options.scrapes {
        let own = mine();
        let started = Instant::now();
        let text = sheafalloc_control::exposition::render();
        let took = started.elapsed();
        render.allocations.push(mine() - own);
        render.micros.push(took.as_secs_f64() * 1e6);
        std::hint::black_box(text);
    }
    render.report("exposition::render alone (snapshot + text)");

    done.wait();
    for thread in threads {
        thread.join().expect("a holder thread");
    }
}
