//! A cache's event counters only grow, in every snapshot, while threads
//! count slow paths and spare swaps of their own and (per-CPU mode) the
//! CPUs count allocations and frees in their sections' commits: a
//! Prometheus counter that goes back is read as a restart, and a rate over
//! it is garbage. And once the work is done, allocations and frees are
//! exactly what the worker made, whatever swaps and trades moved the
//! sheaves' lengths meanwhile.
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

/// The counters a thread (or a CPU) keeps on its own before they reach the
/// cache.
const COUNTED: [&str; 5] = [
    "slow_path_allocs",
    "slow_path_frees",
    "spare_swaps",
    "allocations",
    "frees",
];

fn counted(stats: &sheafalloc::CacheSnapshot) -> [u64; 5] {
    [
        stats.slow_path_allocs,
        stats.slow_path_frees,
        stats.spare_swaps,
        stats.allocations,
        stats.frees,
    ]
}

#[test]
fn slow_path_and_spare_swap_counters_never_decrease() {
    let capacity = sheafalloc::cache(CACHE)
        .expect("the cache exists")
        .sheaf_capacity as usize;
    // Before the worker starts (the loop's first read may come after its
    // first rounds).
    let start = counted(&sheafalloc::cache(CACHE).unwrap());
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
        let mut check = |now: [u64; 5], reads: u64| {
            for (name, (before, after)) in COUNTED.iter().zip(previous.iter().zip(now.iter())) {
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
            if reads % 256 == 0 {
                // Drains too (per-CPU mode: every CPU's sheaves taken while
                // the worker runs), which move a main sheaf's length as a
                // swap does.
                let _ = sheafalloc::purge();
            }
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
    // Nothing else allocates this class: every allocation and free the
    // worker made is counted, once.
    let made = (ROUNDS * 3 * capacity) as u64;
    assert_eq!(
        (last[3] - start[3], last[4] - start[4]),
        (made, made),
        "allocations and frees counted ({:?} mode)",
        sheafalloc::cache_mode()
    );
}
