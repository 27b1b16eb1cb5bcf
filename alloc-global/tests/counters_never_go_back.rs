//! A cache's event counters only grow, in every snapshot, while threads
//! count slow paths and spare swaps of their own: a Prometheus counter that
//! goes back is read as a restart, and a rate over it is garbage.
//!
//! A reader that took the cache's shared counter before a thread added its
//! pending count to it, and the thread's pending count after the thread
//! cleared it, missed that batch: the snapshot after one that had counted
//! it was lower. This test reads snapshots as fast as it can while a
//! thread takes slow paths, in whichever mode the process runs.

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};

mod common;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A class nothing else in this test allocates.
const CACHE: &str = "size-6144";
const SIZE: usize = 6000;
const ROUNDS: usize = 3000;

/// The counters a thread keeps on its own before they reach the cache.
fn counted(stats: &sheafalloc::CacheSnapshot) -> [u64; 3] {
    [
        stats.slow_path_allocs,
        stats.slow_path_frees,
        stats.spare_swaps,
    ]
}

#[test]
fn slow_path_and_spare_swap_counters_never_decrease() {
    let capacity = sheafalloc::cache(CACHE)
        .expect("the cache exists")
        .sheaf_capacity as usize;
    let done = AtomicBool::new(false);
    let (reads, first, last) = std::thread::scope(|s| {
        s.spawn(|| {
            let layout = Layout::from_size_align(SIZE, 8).unwrap();
            // Each round takes three sheaves' worth and gives them back:
            // spare swaps and barn trades both ways, every round.
            for round in 0..ROUNDS {
                common::take_and_give_back(&GLOBAL, layout, 3 * capacity, 64, round as u8);
            }
            done.store(true, Ordering::Release);
        });
        let first = counted(&sheafalloc::cache(CACHE).unwrap());
        let mut previous = first;
        let mut reads = 0u64;
        let mut check = |now: [u64; 3], reads: u64| {
            for (name, (before, after)) in ["slow_path_allocs", "slow_path_frees", "spare_swaps"]
                .iter()
                .zip(previous.iter().zip(now.iter()))
            {
                assert!(
                    after >= before,
                    "{name} went back from {before} to {after} after {reads} reads \
                     ({:?} mode)",
                    sheafalloc::cache_mode()
                );
            }
            previous = now;
        };
        while !done.load(Ordering::Acquire) {
            check(counted(&sheafalloc::cache(CACHE).unwrap()), reads);
            reads += 1;
        }
        // The worker is done: everything it counted is in this read (the
        // reader may have been descheduled for all of the worker's run, so
        // the reads in the loop alone need not have seen any of it).
        check(counted(&sheafalloc::cache(CACHE).unwrap()), reads);
        (reads, first, previous)
    });
    eprintln!(
        "{:?} mode: {reads} snapshots while the worker ran, slow paths {:?} → {:?}",
        sheafalloc::cache_mode(),
        first,
        last
    );
    // Each round's first allocation finds the sheaves of the round before
    // back in place, but a round takes three sheaves' worth: at least one
    // allocation and one free per round miss main, and swap the spare.
    let rounds = ROUNDS as u64;
    assert!(
        last[0] - first[0] >= rounds
            && last[1] - first[1] >= rounds
            && last[2] - first[2] >= rounds,
        "every round's slow paths and spare swaps are counted: {first:?} → {last:?}"
    );
}
