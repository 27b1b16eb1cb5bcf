//! Soak: many threads allocate bursts of packet-sized objects, hand half of
//! each burst to another thread and free the rest, as fast as they can, for
//! a number of operations. Every object carries a tag derived from its
//! address and a generation in its first and last eight bytes (small ones:
//! in every byte), written at allocation and verified by whichever thread
//! frees it — an object handed out twice, overlapping another, or freed
//! into the wrong place shows as a tag mismatch.
//!
//! An operation is one allocation or one verified free. CI runs a short
//! soak (`SHEAFALLOC_SOAK_OPS`, default 10^8, 8 threads) in the debug
//! build and in the release build; `scripts/soak.sh` runs the long mode:
//! 10^9 operations or more over `SHEAFALLOC_SOAK_THREADS` threads (default
//! 8), in release, and prints the rate.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Packet-like sizes, plus any size below 4 KiB one time in four.
const SIZES: [usize; 4] = [64, 256, 1500, 2112];

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// An object in flight: address, size, generation.
#[derive(Clone, Copy)]
struct Tagged {
    addr: usize,
    size: usize,
    generation: u64,
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("valid layout")
}

fn tag(addr: usize, generation: u64) -> u64 {
    (addr as u64 ^ generation).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Tagged {
    /// Writes the tag into a fresh object.
    fn write(self) {
        let tag = tag(self.addr, self.generation);
        let ptr = self.addr as *mut u8;
        if self.size < 16 {
            // SAFETY: the object has `size` bytes.
            unsafe { ptr.write_bytes(tag as u8, self.size) };
            return;
        }
        // SAFETY: at least 16 bytes, 8-aligned: the first and last words
        // are inside the object (the last may be unaligned).
        unsafe {
            (ptr as *mut u64).write(tag);
            (ptr.add(self.size - 8) as *mut u64).write_unaligned(!tag);
        }
    }

    /// True if the object still carries its tag.
    fn intact(self) -> bool {
        let tag = tag(self.addr, self.generation);
        let ptr = self.addr as *const u8;
        if self.size < 16 {
            // SAFETY: the object has `size` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, self.size) };
            return bytes.iter().all(|&b| b == tag as u8);
        }
        // SAFETY: as in `write`.
        unsafe {
            (ptr as *const u64).read() == tag
                && (ptr.add(self.size - 8) as *const u64).read_unaligned() == !tag
        }
    }
}

fn worker(
    id: u64,
    seed: u64,
    target: u64,
    ops: &AtomicU64,
    inbox: mpsc::Receiver<Vec<Tagged>>,
    peers: Vec<mpsc::SyncSender<Vec<Tagged>>>,
) {
    let allocator = sheafalloc::SheafAlloc::new();
    let mut rng = common::Rng::new(seed ^ (id + 1).wrapping_mul(0x2545_F491));
    let mut generation = id << 48;
    let free = |object: Tagged| {
        assert!(
            object.intact(),
            "object {:#x} of {} bytes lost its tag",
            object.addr,
            object.size
        );
        // SAFETY: allocated with this layout, not freed yet.
        unsafe { allocator.dealloc(object.addr as *mut u8, layout(object.size)) };
    };
    while ops.load(Ordering::Relaxed) < target {
        let burst = 16 + rng.below(241) as usize;
        let mut mine = Vec::with_capacity(burst);
        for _ in 0..burst {
            let size = if rng.below(4) == 0 {
                1 + rng.below(4096) as usize
            } else {
                SIZES[rng.below(SIZES.len() as u64) as usize]
            };
            generation += 1;
            // SAFETY: non-zero size.
            let addr = unsafe { allocator.alloc(layout(size)) } as usize;
            assert_ne!(addr, 0, "allocation of {size} bytes failed");
            let object = Tagged {
                addr,
                size,
                generation,
            };
            object.write();
            mine.push(object);
        }
        let theirs = mine.split_off(burst / 2);
        let peer = &peers[rng.below(peers.len() as u64) as usize];
        let mut local = 0;
        if let Err(mpsc::TrySendError::Full(back) | mpsc::TrySendError::Disconnected(back)) =
            peer.try_send(theirs)
        {
            local += back.len();
            back.into_iter().for_each(free);
        }
        local += mine.len();
        mine.into_iter().for_each(free);
        while let Ok(objects) = inbox.try_recv() {
            local += objects.len();
            objects.into_iter().for_each(free);
        }
        // `burst` allocations and `local` verified frees.
        let step = (burst + local) as u64;
        ops.fetch_add(step, Ordering::Relaxed);
    }
    drop(peers);
    while let Ok(objects) = inbox.recv_timeout(Duration::from_secs(10)) {
        objects.into_iter().for_each(free);
    }
}

/// A plain `main` (no test harness): its threads are the only ones, so at
/// the end every free object of the packet caches must be in a barn or a
/// slab (`assert_quiescent`), with none stranded in a harness thread.
fn main() {
    let threads = env_number("SHEAFALLOC_SOAK_THREADS").unwrap_or(8).max(2);
    let target = env_number("SHEAFALLOC_SOAK_OPS").unwrap_or(100_000_000);
    let seed = common::seed(0x50a6);
    let before: Vec<_> = sheafalloc::cache_stats().collect();
    let ops = Arc::new(AtomicU64::new(0));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::sync_channel::<Vec<Tagged>>(4))
        .unzip();
    let started = Instant::now();
    let workers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(id, inbox)| {
            let peers: Vec<_> = senders
                .iter()
                .enumerate()
                .filter(|(peer, _)| *peer != id)
                .map(|(_, sender)| sender.clone())
                .collect();
            let ops = Arc::clone(&ops);
            std::thread::spawn(move || worker(id as u64, seed, target, &ops, inbox, peers))
        })
        .collect();
    drop(senders);
    for worker in workers {
        worker.join().expect("a soak thread failed");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ops = ops.load(Ordering::Relaxed);
    eprintln!(
        "soak: {ops} operations (allocations and verified frees) over {threads} threads in {elapsed:.1} s: {:.1} M operations/s",
        ops as f64 / elapsed / 1e6
    );
    assert!(ops >= target, "{ops} < {target}");
    // Every object came back: the threads have exited (their counters are
    // folded) and freed everything they allocated.
    let after: Vec<_> = sheafalloc::cache_stats().collect();
    for (b, a) in before.iter().zip(&after) {
        let live = (a.allocations - b.allocations) as i64 - (a.frees - b.frees) as i64;
        assert!(
            live.abs() <= 2 * threads as i64,
            "size-{}: {live} objects unaccounted for",
            a.object_size
        );
    }
    for size in SIZES {
        let name = format!(
            "size-{}",
            sheafalloc::cache_stats()
                .find(|stats| stats.object_size as usize >= size)
                .expect("a class")
                .object_size
        );
        common::assert_quiescent(&name, 0);
    }
    println!("test result: ok. 1 passed; 0 failed");
}
