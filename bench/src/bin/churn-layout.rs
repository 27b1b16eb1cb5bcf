//! Where a churn's buffers sit, and what that costs when the allocator's
//! work is the same: the probe behind the tuning sweep's churn rows.
//!
//! ```text
//! churn-layout [BURST] [SIZE] [WARMUP_S] [STAGED_S]
//! # defaults: 256 256 12 0; run it as shipped (auto-tuned), with
//! # SHEAFALLOC_AUTOTUNE=off SHEAFALLOC_CAPACITY=size-256=256 (pinned from
//! # the start), and with SHEAFALLOC_AUTOTUNE=off and STAGED_S=4: size-256
//! # pinned at 64 for 4 s, then raised to 256 by `set_sheaf_capacity`
//! ```
//!
//! Two threads each allocate a burst of `BURST` buffers of `SIZE` bytes,
//! write a 64-byte header into each and free them in allocation order
//! (the shape of `wl-sheafalloc churn-SIZExBURST`), for a warm-up; then
//! 200,000 bursts are timed. For each thread it prints the time per
//! buffer, how often the scheduler moved it between CPUs in the warm-up,
//! and where one burst's buffers lie: distinct 4 KiB pages, the
//! span from the lowest to the highest address, how many neighbours in
//! allocation order are adjacent in memory, and how the pages fall on the
//! L2's physical page colours (frame numbers from `/proc/self/pagemap`,
//! as root); then how many pages hold buffers of both threads' last
//! bursts, and how many of the first thread's pages lie next to one of
//! the other's. Across the timed window it
//! prints the class's own counters: when they show no slow path in either
//! run, both ran the same instructions, and a difference in time is the
//! buffers' placement.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use sheafalloc_bench::probe::{arg, burst, HEADER};
use sheafalloc_bench::service::migrations;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const THREADS: usize = 2;
const TIMED_BURSTS: u32 = 200_000;

/// The distinct 4 KiB pages that hold `addresses`, in ascending order.
fn pages(addresses: &[usize]) -> Vec<usize> {
    let mut pages: Vec<usize> = addresses.iter().map(|a| a >> 12).collect();
    pages.sort_unstable();
    pages.dedup();
    pages
}

/// Where one burst's buffers lie; `slot` is the class's object size (the
/// distance between neighbours in a slab).
fn placement(addresses: &[usize], slot: usize) -> String {
    let pages = pages(addresses);
    let low = addresses.iter().min().copied().unwrap_or(0);
    let high = addresses.iter().max().copied().unwrap_or(0);
    let adjacent = addresses
        .windows(2)
        .filter(|w| w[0].abs_diff(w[1]) == slot)
        .count();
    format!(
        "{} pages, span {} KiB, {adjacent} of {} neighbours adjacent",
        pages.len(),
        (high - low) / 1024,
        addresses.len().saturating_sub(1)
    )
}

/// How one burst's pages fall on the physical page colours of a 1 MiB,
/// 16-way L2 (address bits 12–15 of the page frame: 16 colours), read from
/// `/proc/self/pagemap` (frame numbers need root; otherwise unavailable).
/// Pages of one colour share one sixteenth of the L2's sets.
fn colours(addresses: &[usize]) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let pages = pages(addresses);
    let Ok(mut map) = std::fs::File::open("/proc/self/pagemap") else {
        return "page colours unavailable".into();
    };
    let mut per_colour = [0u32; 16];
    for page in &pages {
        let mut entry = [0u8; 8];
        if map.seek(SeekFrom::Start(*page as u64 * 8)).is_err()
            || map.read_exact(&mut entry).is_err()
        {
            return "page colours unavailable".into();
        }
        let frame = u64::from_le_bytes(entry) & ((1 << 55) - 1);
        if frame == 0 {
            return "page colours unavailable (frame numbers need root)".into();
        }
        per_colour[(frame & 15) as usize] += 1;
    }
    let used = per_colour.iter().filter(|&&n| n > 0).count();
    let most = per_colour.iter().max().copied().unwrap_or(0);
    format!("L2 page colours: {used} of 16 used, at most {most} pages on one")
}

/// 4 KiB pages that hold buffers of more than one thread's last burst,
/// and the first thread's pages next to a page of another's: a hardware
/// prefetcher that runs ahead of a thread's buffers may pull lines of the
/// other thread's, and every such line then moves between the cores
/// (`neighbour-probe` measures what that costs with no allocator).
fn shared_pages(bursts: &[Vec<usize>]) -> String {
    let all: Vec<Vec<usize>> = bursts.iter().map(|burst| pages(burst)).collect();
    // The first burst's pages for which another burst `touches` them.
    let count = |touches: &dyn Fn(usize, &[usize]) -> bool| {
        all.first().map_or(0, |first| {
            first
                .iter()
                .filter(|&&page| all.iter().skip(1).any(|other| touches(page, other)))
                .count()
        })
    };
    let holds = |pages: &[usize], page: usize| pages.binary_search(&page).is_ok();
    let shared = count(&|page, other| holds(other, page));
    let beside = count(&|page, other| {
        holds(other, page.wrapping_sub(1)) || holds(other, page.wrapping_add(1))
    });
    format!(
        "pages holding buffers of both threads' last bursts: {shared}; \
         the first thread's pages next to one of the other's: {beside}"
    )
}

fn main() {
    let burst_len = arg(1, 256) as usize;
    let size = arg(2, 256) as usize;
    let warmup = Duration::from_secs(arg(3, 12));
    let staged = arg(4, 0);
    assert!(
        size >= HEADER && burst_len >= 1,
        "SIZE >= {HEADER}, BURST >= 1"
    );
    // The cache of the smallest objects that hold SIZE bytes.
    let (class, slot) = sheafalloc::caches()
        .into_iter()
        .find(|c| c.object_size >= size as u64)
        .map(|c| {
            let slot = c.object_size as usize;
            (c.name, slot)
        })
        .expect("SIZE fits a size class");
    if staged > 0 {
        sheafalloc::set_sheaf_capacity(&class, 64).expect("64 fits every small class");
    }
    let gate = Barrier::new(THREADS + 1);
    let bursts = std::sync::Mutex::new(Vec::new());
    let before = std::thread::scope(|s| {
        for thread in 0..THREADS {
            let gate = &gate;
            let bursts = &bursts;
            s.spawn(move || {
                let mut buffers = vec![std::ptr::null_mut::<u8>(); burst_len];
                let end = Instant::now() + warmup;
                while Instant::now() < end {
                    for _ in 0..1000 {
                        burst(&mut buffers, size);
                    }
                }
                let moves = migrations::this_thread_total()
                    .map_or("not counted by this kernel".into(), |n| n.to_string());
                gate.wait(); // warmed up
                gate.wait(); // counters read
                let start = Instant::now();
                for _ in 0..TIMED_BURSTS {
                    burst(&mut buffers, size);
                }
                let ns = start.elapsed().as_nanos() as f64;
                burst(&mut buffers, size);
                let addresses: Vec<usize> = buffers.iter().map(|&p| p as usize).collect();
                println!(
                    "thread {thread}: {:.2} ns per buffer; moves between CPUs in the warm-up: {moves}; \
                     one burst: {}; {}",
                    ns / (f64::from(TIMED_BURSTS) * burst_len as f64),
                    placement(&addresses, slot),
                    colours(&addresses)
                );
                bursts.lock().expect("no thread panicked").push(addresses);
            });
        }
        if staged > 0 {
            std::thread::sleep(Duration::from_secs(staged));
            sheafalloc::set_sheaf_capacity(&class, 256).expect("256 fits a small class");
        }
        gate.wait();
        let before = sheafalloc::cache(&class).expect("the class exists");
        gate.wait();
        before
    });
    let after = sheafalloc::cache(&class).expect("the class exists");
    println!(
        "{}",
        shared_pages(&bursts.into_inner().expect("no thread panicked"))
    );
    let window = |count: fn(&sheafalloc::CacheSnapshot) -> u64| count(&after) - count(&before);
    println!(
        "{class} at capacity {} ({:?}), timed window: {} allocations, {} slow paths, \
         {} spare swaps, {} barn trades, {} slab refills and flushes",
        after.sheaf_capacity,
        after.tuning,
        window(|c| c.allocations),
        window(|c| c.slow_path_allocs + c.slow_path_frees),
        window(|c| c.spare_swaps),
        window(|c| c.barn_get_hits + c.barn_get_misses + c.barn_put_hits + c.barn_put_misses),
        window(|c| c.slab_refills + c.slab_flushes),
    );
}
