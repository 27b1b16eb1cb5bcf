//! Torture: N threads perform random alloc / realloc / free of random
//! layouts (small, large, over-aligned), hand objects to one another, and
//! verify every object's contents (a pattern of address, size and a
//! generation) before each realloc and free. Then the accounting invariant
//! is checked for every cache on every node: at quiescence, the objects out
//! of the slabs are exactly the objects in barns plus the objects still
//! live (every free object is in exactly one place).
//!
//! A plain `main`: it runs once on the real topology, then re-runs itself
//! with `SHEAFALLOC_NUMA_NODES=4`. `SHEAFALLOC_TORTURE_SECS` sets the length
//! of each run (default 12; the same binary soaks for hours with a larger
//! value); `SHEAFALLOC_SEED` replays a seed.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use sheafalloc_core::SizeClass;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const THREADS: usize = 4;

struct Object {
    addr: usize,
    layout: Layout,
    generation: u64,
}

fn random_layout(rng: &mut common::Rng) -> Layout {
    let size = match rng.below(1000) {
        0..=599 => 1 + rng.below(512) as usize,
        600..=899 => 513 + rng.below(16 * 1024) as usize,
        900..=979 => 16 * 1024 + rng.below(240 * 1024) as usize,
        _ => 256 * 1024 + rng.below(2 << 20) as usize,
    };
    let align = match rng.below(20) {
        0 => 1 << (5 + rng.below(8)),  // 32 B .. 4 KiB
        1 => 1 << (13 + rng.below(5)), // 8 KiB .. 128 KiB
        _ => 1 << rng.below(4),        // 1 .. 8
    };
    Layout::from_size_align(size, align).unwrap()
}

fn verify(object: &Object) {
    // SAFETY: the object is live with this layout (the caller's table).
    let result = unsafe {
        common::check(
            object.addr as *const u8,
            object.layout.size(),
            object.generation,
        )
    };
    if let Err(index) = result {
        panic!(
            "object {:#x} {:?} gen {} corrupted at byte {index}",
            object.addr, object.layout, object.generation
        );
    }
}

fn worker(
    id: usize,
    seed: u64,
    inbox: mpsc::Receiver<Vec<Object>>,
    outboxes: Vec<mpsc::Sender<Vec<Object>>>,
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
) {
    let allocator = sheafalloc::SheafAlloc::new();
    let mut rng = common::Rng::new(seed ^ ((id as u64 + 1) << 32));
    let mut generation = (id as u64) << 48;
    let mut table: Vec<Object> = Vec::new();
    let mut count = 0u64;
    let free = |object: Object| {
        verify(&object);
        // SAFETY: live object with this layout, freed once.
        unsafe { allocator.dealloc(object.addr as *mut u8, object.layout) };
    };
    while !stop.load(Ordering::Relaxed) {
        count += 1;
        match rng.below(100) {
            0..=44 => {
                let layout = random_layout(&mut rng);
                // SAFETY: non-zero size.
                let ptr = unsafe {
                    if rng.below(8) == 0 {
                        allocator.alloc_zeroed(layout)
                    } else {
                        allocator.alloc(layout)
                    }
                };
                assert!(!ptr.is_null(), "allocation of {layout:?} failed");
                assert_eq!(ptr as usize % layout.align(), 0, "{layout:?} misaligned");
                generation += 1;
                // SAFETY: just allocated.
                unsafe { common::fill(ptr, layout.size(), generation) };
                table.push(Object {
                    addr: ptr as usize,
                    layout,
                    generation,
                });
            }
            45..=59 if !table.is_empty() => {
                let index = rng.below(table.len() as u64) as usize;
                let object = &mut table[index];
                verify(object);
                let new_size = if rng.below(2) == 0 {
                    1 + rng.below(object.layout.size() as u64) as usize
                } else {
                    object.layout.size() + 1 + rng.below(8192) as usize
                };
                // SAFETY: live object of this layout; new size non-zero.
                let ptr =
                    unsafe { allocator.realloc(object.addr as *mut u8, object.layout, new_size) };
                assert!(!ptr.is_null());
                assert_eq!(ptr as usize % object.layout.align(), 0);
                let kept = object.layout.size().min(new_size);
                for i in common::positions(object.layout.size()).take_while(|&i| i < kept) {
                    // SAFETY: `kept` bytes are valid in the new block.
                    let byte = unsafe { *ptr.add(i) };
                    assert_eq!(
                        byte,
                        common::pattern_byte(
                            object.addr,
                            object.layout.size(),
                            object.generation,
                            i
                        ),
                        "realloc lost byte {i}"
                    );
                }
                generation += 1;
                // SAFETY: `new_size` bytes valid.
                unsafe { common::fill(ptr, new_size, generation) };
                *object = Object {
                    addr: ptr as usize,
                    layout: Layout::from_size_align(new_size, object.layout.align()).unwrap(),
                    generation,
                };
            }
            60..=89 if !table.is_empty() => {
                let index = rng.below(table.len() as u64) as usize;
                free(table.swap_remove(index));
            }
            90..=94 if table.len() > 16 => {
                let take = 1 + rng.below(table.len() as u64 / 2) as usize;
                let batch: Vec<Object> = table.drain(..take).collect();
                let peer = (id + 1 + rng.below(THREADS as u64 - 1) as usize) % THREADS;
                if let Err(mpsc::SendError(back)) = outboxes[peer].send(batch) {
                    table.extend(back);
                }
            }
            _ => {
                while let Ok(batch) = inbox.try_recv() {
                    table.extend(batch);
                }
            }
        }
        while table.len() > 2000 {
            free(table.swap_remove(rng.below(table.len() as u64) as usize));
        }
        if count % 4096 == 0 {
            ops.fetch_add(4096, Ordering::Relaxed);
        }
    }
    drop(outboxes);
    for object in table {
        free(object);
    }
    while let Ok(batch) = inbox.recv_timeout(Duration::from_secs(10)) {
        for object in batch {
            free(object);
        }
    }
}

/// Every cache on every node: objects out of the slabs = objects in barns +
/// objects live. Allocates nothing while it checks.
fn check_accounting(failures: &mut Vec<(usize, i64, i64)>) {
    sheafalloc::flush_thread_cache();
    for class in SizeClass::all() {
        let mut out_minus_barn = 0i64;
        for node in sheafalloc_core::NodeId::all() {
            let audit = sheafalloc_core::stats::audit(class, node);
            out_minus_barn += audit.objects_out_of_slabs as i64 - audit.barn_objects as i64;
        }
        let live = sheafalloc_core::stats::cache_stats(class).live_objects;
        if out_minus_barn != live && failures.len() < failures.capacity() {
            failures.push((class.object_size(), out_minus_barn, live));
        }
    }
}

fn run(label: &str) {
    let secs = std::env::var("SHEAFALLOC_TORTURE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12u64);
    let seed = common::seed(0x7047_7572);
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..THREADS).map(|_| mpsc::channel::<Vec<Object>>()).unzip();
    let workers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(id, inbox)| {
            let (outboxes, stop, ops) = (senders.clone(), Arc::clone(&stop), Arc::clone(&ops));
            std::thread::spawn(move || worker(id, seed, inbox, outboxes, stop, ops))
        })
        .collect();
    drop(senders);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::park_timeout(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("torture worker failed");
    }
    let ops = ops.load(Ordering::Relaxed);
    assert!(ops > 10_000, "too little work: {ops}");
    let mut failures = Vec::with_capacity(128);
    check_accounting(&mut failures);
    assert!(
        failures.is_empty(),
        "accounting broken (object size, out - barn, live): {failures:?}"
    );
    let topology = sheafalloc::topology();
    println!(
        "torture ({label}, {} node(s)): {ops} operations on {THREADS} threads in {secs} s, contents and accounting verified",
        topology.nodes.len()
    );
}

fn main() {
    if std::env::var("SHEAFALLOC_NUMA_NODES").is_ok() {
        run("simulated nodes");
        return;
    }
    run("real topology");
    let status = Command::new(std::env::current_exe().unwrap())
        .env("SHEAFALLOC_NUMA_NODES", "4")
        .status()
        .expect("re-run with 4 simulated nodes");
    assert!(
        status.success(),
        "torture with 4 simulated nodes failed: {status}"
    );
    println!("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
