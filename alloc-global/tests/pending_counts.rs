//! Events a thread counts on its own until it exits (slow paths, spare
//! swaps) are in every statistics snapshot while the thread lives, and
//! none is lost or counted twice when its exit adds them to the cache's
//! shared counters. In both modes: per-CPU spare swaps are counted by the
//! thread that made them.

use std::alloc::Layout;
use std::sync::mpsc;

mod common;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A class nothing else in this test allocates.
const CACHE: &str = "size-7168";
const SIZE: usize = 7000;

/// The most spare swaps the worker below makes (three rounds, each at
/// most one swap on the way out and one on the way back per sheaf).
const MOST_SWAPS: u64 = 32;

#[test]
fn a_live_threads_pending_spare_swaps_are_in_the_snapshot() {
    let capacity = sheafalloc::cache(CACHE)
        .expect("the cache exists")
        .sheaf_capacity as usize;
    let before = sheafalloc::cache(CACHE).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let layout = Layout::from_size_align(SIZE, 8).unwrap();
        // Three times: take three sheaves' worth, then give them back. The
        // frees fill main and then swap in the empty spare.
        for round in 0..3u8 {
            common::take_and_give_back(&GLOBAL, layout, 3 * capacity, SIZE, round);
        }
        done_tx.send(()).unwrap();
        // Live (and holding its pending counts) until the reader is done.
        exit_rx.recv().unwrap();
    });
    done_rx.recv().unwrap();
    let live = sheafalloc::cache(CACHE).unwrap();
    exit_tx.send(()).unwrap();
    worker.join().expect("the worker failed");
    let after = sheafalloc::cache(CACHE).unwrap();

    let swaps_live = live.spare_swaps - before.spare_swaps;
    let swaps_after = after.spare_swaps - before.spare_swaps;
    eprintln!(
        "{:?} mode, capacity {capacity}: {swaps_live} spare swaps while the thread lived, {swaps_after} after it exited",
        sheafalloc::cache_mode()
    );
    assert!(
        (1..MOST_SWAPS).contains(&swaps_live),
        "{swaps_live} spare swaps seen while the thread lived: expected 1 to {}, \
         all of them counted by the thread alone",
        MOST_SWAPS - 1
    );
    assert_eq!(
        swaps_after, swaps_live,
        "the thread's exit must fold its pending swaps in, once"
    );
    let slow_live = (live.slow_path_allocs + live.slow_path_frees)
        - (before.slow_path_allocs + before.slow_path_frees);
    let slow_after = (after.slow_path_allocs + after.slow_path_frees)
        - (before.slow_path_allocs + before.slow_path_frees);
    assert!(slow_live >= swaps_live, "every spare swap is a slow path");
    assert_eq!(slow_after, slow_live, "slow paths, folded in once");
}
