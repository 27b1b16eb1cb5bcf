//! What does a Prometheus scrape every 100 ms cost an allocation-heavy
//! process? Runs the same workload in rounds, alternately with the sidecar
//! serving and scraped every 100 ms and without any sidecar, and prints
//! the throughput ratio (with / without; 1.0 means no cost).
//!
//! ```text
//! cargo run --release -p sheafalloc-control --example overhead -- [--rounds 20] [--round-ms 500] [--threads 2]
//! ```
//!
//! Rounds are interleaved A-B, B-A, ... so slow drifts of the machine hit
//! both sides alike. Two ratios are printed: between the medians of each
//! side, and the median of the per-pair ratios (each pair ran back to
//! back, so it is the more robust one on a shared machine).

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sheafalloc_control::client::Client;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Scrape period, as a Prometheus configured with `scrape_interval: 100ms`.
const SCRAPE_PERIOD: Duration = Duration::from_millis(100);
/// Objects a worker holds at once: enough to pass through sheaf exchanges.
const BATCH: usize = 96;
/// Request sizes of the workload (packet buffers, headers, small structs).
const SIZES: [usize; 6] = [24, 64, 200, 256, 1500, 2112];

struct Options {
    rounds: usize,
    round: Duration,
    threads: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        rounds: 20,
        round: Duration::from_millis(500),
        threads: 2,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|value| value.parse().ok())
                .filter(|value| *value > 0)
                .ok_or(format!("{name} needs a positive number"))
        };
        match arg.as_str() {
            "--rounds" => options.rounds = number("--rounds")? as usize,
            "--round-ms" => options.round = Duration::from_millis(number("--round-ms")?),
            "--threads" => options.threads = number("--threads")? as usize,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(options)
}

/// One worker: allocate a batch of mixed sizes, touch, free; count objects.
fn worker(stop: &AtomicBool) -> u64 {
    let layouts = SIZES.map(|size| Layout::from_size_align(size, 8).expect("a layout"));
    let mut held = [core::ptr::null_mut::<u8>(); BATCH];
    let mut objects = 0u64;
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for (i, slot) in held.iter_mut().enumerate() {
            let layout = layouts[(i + turn) % layouts.len()];
            // SAFETY: every layout has a non-zero size.
            let object = unsafe { alloc(layout) };
            if !object.is_null() {
                // SAFETY: the object has at least one byte.
                unsafe { object.write(i as u8) };
            }
            *slot = object;
        }
        for (i, slot) in held.iter_mut().enumerate() {
            let layout = layouts[(i + turn) % layouts.len()];
            if !slot.is_null() {
                // SAFETY: allocated just above with this layout; freed once.
                unsafe { dealloc(*slot, layout) };
            }
        }
        objects += BATCH as u64;
        turn += 1;
    }
    objects
}

/// GETs `/metrics` every period; returns (scrapes, total scrape time).
fn scraper(client: &Client, stop: &AtomicBool) -> (u64, Duration) {
    let mut scrapes = 0;
    let mut busy = Duration::ZERO;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        if started >= next {
            match client.metrics() {
                Ok(_) => scrapes += 1,
                Err(error) => eprintln!("overhead: a scrape failed: {error}"),
            }
            busy += started.elapsed();
            next += SCRAPE_PERIOD;
        }
        std::thread::sleep(
            Duration::from_millis(5).min(next.saturating_duration_since(Instant::now())),
        );
    }
    (scrapes, busy)
}

struct Round {
    objects_per_second: f64,
    scrapes: u64,
    scrape_time: Duration,
    sidecar_cpu: Duration,
}

fn round(options: &Options, with_sidecar: bool) -> Round {
    // No exposition cache: every scrape builds a fresh one, the worst case
    // for the allocating threads.
    let sidecar = with_sidecar.then(|| {
        sheafalloc_control::spawn(
            sheafalloc_control::Config::new("127.0.0.1:0".parse().expect("an address"))
                .with_metrics_max_age(Duration::ZERO),
        )
        .expect("the sidecar starts")
    });
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = sidecar.as_ref().map(|handle| {
        let client = Client::new(&handle.url()).expect("the sidecar's address");
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || scraper(&client, &stop))
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..options.threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || worker(&stop))
        })
        .collect();
    std::thread::sleep(options.round);
    stop.store(true, Ordering::Relaxed);
    let objects: u64 = workers
        .into_iter()
        .map(|w| w.join().expect("a worker"))
        .sum();
    let elapsed = started.elapsed();
    let (scrapes, scrape_time) = scraper
        .map(|s| s.join().expect("the scraper"))
        .unwrap_or((0, Duration::ZERO));
    let sidecar_cpu = if sidecar.is_some() {
        sidecar_thread_cpu()
    } else {
        Duration::ZERO
    };
    drop(sidecar);
    Round {
        objects_per_second: objects as f64 / elapsed.as_secs_f64(),
        scrapes,
        scrape_time,
        sidecar_cpu,
    }
}

/// CPU time used so far by the sidecar's thread: the scheduler's exact
/// on-CPU nanoseconds from `/proc/self/task/*/schedstat` (zero if
/// unreadable).
fn sidecar_thread_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut total = Duration::ZERO;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // Thread names are cut to 15 bytes: "sheafalloc-cont" is the server
        // thread (and tokio's blocking pool, idle here).
        if comm.trim_end() != "sheafalloc-cont" {
            continue;
        }
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(nanos) = schedstat
            .split_whitespace()
            .next()
            .and_then(|field| field.parse().ok())
        {
            total += Duration::from_nanos(nanos);
        }
    }
    total
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 0 {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    }
}

fn main() {
    let options = options().unwrap_or_else(|message| {
        eprintln!(
            "overhead: {message}\nusage: overhead [--rounds N] [--round-ms MS] [--threads N]"
        );
        std::process::exit(2);
    });
    println!(
        "workload: {} thread(s) allocating and freeing batches of {BATCH} objects of {SIZES:?} bytes",
        options.threads
    );
    println!(
        "{} rounds of {:?} per side, interleaved; scrape every {SCRAPE_PERIOD:?}",
        options.rounds, options.round
    );
    // Warm up: first-touch of slabs, thread caches, the sidecar's code.
    round(&options, true);
    round(&options, false);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let mut pair_ratios = Vec::new();
    let (mut scrapes, mut scrape_time) = (0, Duration::ZERO);
    let (mut sidecar_cpu, mut scraped_time) = (Duration::ZERO, Duration::ZERO);
    for index in 0..options.rounds {
        let order = if index % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair = [0.0; 2];
        for with_sidecar in order {
            let result = round(&options, with_sidecar);
            println!(
                "round {index:>2} {:<8} {:>12.0} objects/s",
                if with_sidecar { "scraped" } else { "plain" },
                result.objects_per_second
            );
            pair[usize::from(with_sidecar)] = result.objects_per_second;
            if with_sidecar {
                with.push(result.objects_per_second);
                scrapes += result.scrapes;
                scrape_time += result.scrape_time;
                sidecar_cpu += result.sidecar_cpu;
                scraped_time += options.round;
            } else {
                without.push(result.objects_per_second);
            }
        }
        pair_ratios.push(pair[1] / pair[0]);
    }
    let (with_median, without_median) = (median(&mut with), median(&mut without));
    println!("median objects/s: scraped {with_median:.0}, plain {without_median:.0}");
    if scrapes > 0 {
        println!(
            "scrapes: {scrapes}, mean {:.2} ms each (client-side, includes the response transfer)",
            scrape_time.as_secs_f64() * 1e3 / scrapes as f64
        );
    }
    if scrapes > 0 && !scraped_time.is_zero() {
        println!(
            "sidecar thread CPU: {:.2} ms per scrape, {:.2}% of one core",
            sidecar_cpu.as_secs_f64() * 1e3 / scrapes as f64,
            sidecar_cpu.as_secs_f64() * 100.0 / scraped_time.as_secs_f64()
        );
    }
    println!(
        "ratio of medians (scraped / plain): {:.4}",
        with_median / without_median
    );
    println!(
        "median of paired ratios (scraped / plain): {:.4}",
        median(&mut pair_ratios)
    );
}
