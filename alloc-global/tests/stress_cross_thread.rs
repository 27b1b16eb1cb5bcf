//! Multi-thread stress with cross-thread frees. Every object is filled with
//! a pattern derived from its address, size and a generation, and checked
//! by the thread that frees it (usually another one).
//!
//! Runs `SHEAFALLOC_STRESS_THREADS` threads (default 4) for
//! `SHEAFALLOC_STRESS_SECS` seconds (default 25), or — the long mode of
//! `scripts/soak.sh` — until `SHEAFALLOC_STRESS_OBJECTS` objects have been
//! allocated, verified and freed.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// An object in flight: address, layout, generation.
struct Object {
    addr: usize,
    layout: Layout,
    generation: u64,
}

fn random_layout(rng: &mut common::Rng) -> Layout {
    let size = match rng.below(100) {
        0..=59 => 1 + rng.below(256) as usize,
        60..=84 => 257 + rng.below(4096) as usize,
        85..=96 => 4097 + rng.below(60_000) as usize,
        _ => 64 * 1024 + rng.below(400_000) as usize,
    };
    let align = if rng.below(10) == 0 {
        1 << rng.below(13)
    } else {
        8
    };
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn objects_freed_on_other_threads_keep_their_contents() {
    let secs = common::stress_secs(25);
    let target_objects = env_number("SHEAFALLOC_STRESS_OBJECTS");
    let threads = env_number("SHEAFALLOC_STRESS_THREADS").unwrap_or(4).max(2) as usize;
    let seed = common::seed(0x5eaf);
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::sync_channel::<Vec<Object>>(8))
        .unzip();
    // Counted from here: everything allocated below is freed by the end,
    // except the `after` vector.
    let mut before = Vec::with_capacity(128);
    before.extend(sheafalloc::cache_stats());

    let workers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(id, inbox)| {
            let outboxes = senders.clone();
            let stop = Arc::clone(&stop);
            let checked = Arc::clone(&checked);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let allocator = sheafalloc::SheafAlloc::new();
                let mut rng = common::Rng::new(seed ^ ((id as u64 + 1) * 0x1234_5678));
                let mut generation = (id as u64) << 48;
                let mut kept: Vec<Object> = Vec::new();
                let free = |object: Object, checked: &AtomicU64| {
                    // SAFETY: the object is live with this layout.
                    let result = unsafe {
                        common::check(
                            object.addr as *const u8,
                            object.layout.size(),
                            object.generation,
                        )
                    };
                    if let Err(index) = result {
                        panic!(
                            "object {:#x} {:?} corrupted at byte {index}",
                            object.addr, object.layout
                        );
                    }
                    // SAFETY: live, allocated with this layout.
                    unsafe { allocator.dealloc(object.addr as *mut u8, object.layout) };
                    checked.fetch_add(1, Ordering::Relaxed);
                };
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    // Allocate a batch, keep some, ship the rest to a peer.
                    let mut batch = Vec::with_capacity(64);
                    for _ in 0..64 {
                        let layout = random_layout(&mut rng);
                        generation += 1;
                        // SAFETY: non-zero size.
                        let ptr = unsafe { allocator.alloc(layout) };
                        assert!(!ptr.is_null(), "allocation of {layout:?} failed");
                        assert_eq!(ptr as usize % layout.align(), 0);
                        // SAFETY: freshly allocated `layout.size()` bytes.
                        unsafe { common::fill(ptr, layout.size(), generation) };
                        batch.push(Object {
                            addr: ptr as usize,
                            layout,
                            generation,
                        });
                    }
                    let peer = (id + 1 + rng.below(threads as u64 - 1) as usize) % threads;
                    let shipped = batch.split_off(32);
                    kept.extend(batch);
                    if let Err(
                        mpsc::TrySendError::Full(back) | mpsc::TrySendError::Disconnected(back),
                    ) = outboxes[peer].try_send(shipped)
                    {
                        kept.extend(back);
                    }
                    // Free what peers sent us, and some of our own.
                    while let Ok(objects) = inbox.try_recv() {
                        for object in objects {
                            free(object, &checked);
                        }
                    }
                    while kept.len() > 512 {
                        let index = rng.below(kept.len() as u64) as usize;
                        free(kept.swap_remove(index), &checked);
                    }
                }
                drop(outboxes);
                for object in kept {
                    free(object, &checked);
                }
                // Drain until every peer has stopped sending.
                while let Ok(objects) = inbox.recv_timeout(Duration::from_secs(5)) {
                    for object in objects {
                        free(object, &checked);
                    }
                }
            })
        })
        .collect();
    drop(senders);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    loop {
        let done = match target_objects {
            Some(target) => checked.load(Ordering::Relaxed) >= target,
            None => Instant::now() >= deadline,
        };
        if done {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker panicked");
    }
    let checked = checked.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "{checked} objects allocated, verified and freed across {threads} threads in {elapsed:.1} s ({:.2} M/s)",
        checked as f64 / elapsed / 1e6
    );
    assert!(checked > 10_000, "too little work done: {checked}");

    // Every object the workers allocated came back: per cache, live objects
    // are where they were before (the workers have exited and folded their
    // counters).
    let mut after = Vec::with_capacity(128);
    after.extend(sheafalloc::cache_stats());
    for (b, a) in before.iter().zip(&after) {
        let worker_allocs = a.allocations - b.allocations;
        let worker_frees = a.frees - b.frees;
        // This thread allocated the `after` vector, and the channels made
        // before `before` (one per thread) were freed meanwhile; a lost
        // count in the engine would show as hundreds.
        assert!(
            (worker_allocs as i64 - worker_frees as i64).abs() <= 2 * threads as i64,
            "size-{}: {} allocations vs {} frees",
            a.object_size,
            worker_allocs,
            worker_frees
        );
    }
    let large = sheafalloc::large();
    assert!(
        large.allocations > 0 && large.live_objects.abs() <= 4,
        "{large:?}"
    );
}
