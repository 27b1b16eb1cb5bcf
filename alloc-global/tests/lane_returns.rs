//! What a CPU frees of another CPU's objects goes back to that CPU's lane.
//!
//! Each node's arena region is split into one region per lane, and a CPU's
//! slabs come from its lane's region: an object's lane is its address. In
//! per-CPU mode the fast path's push takes only the CPU's own lane's
//! objects; another lane's go into the remote batch, as another node's do,
//! and each full batch goes to its lane's barn stack. So the CPU that
//! allocated them gets them back, and no two CPUs hold buffers in the same
//! pages (where hardware prefetchers would move lines between the cores).
//!
//! In per-thread mode (CI's second run, without rseq) a thread keeps what
//! it frees, whatever its lane: the test checks that nothing is counted as
//! sent back there, and that slabs still come from the allocating CPU's
//! region.

mod common;

use common::{allocate_on, free_on};

use std::collections::HashSet;

use sheafalloc_core::lane::Lane;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A cache no other code in this test binary uses.
const CACHE: &str = "size-3072";
const SIZE: usize = 3000;
/// Its sheaf (and batch) capacity during the test.
const CAPACITY: u64 = 8;
/// Objects handed from CPU 0 to CPU 1: four batches.
const OBJECTS: u64 = 4 * CAPACITY;

fn lane_returns(cache: &str) -> u64 {
    sheafalloc::cache(cache)
        .expect("the cache exists")
        .lane_returns
}

fn lane_of(object: usize) -> Lane {
    sheafalloc_core::arena::home_lane(object)
}

/// Runs `f` on a thread of its own and returns what it returns.
fn on_a_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(f).join().expect("the thread"))
}

#[test]
fn objects_freed_on_another_cpu_go_back_to_their_lane() {
    if !common::two_cpus_and_capacity(CACHE, CAPACITY) {
        return;
    }

    // CPU 0 allocates; its objects come from lane 0's region.
    let handed = on_a_thread(|| allocate_on(0, SIZE, OBJECTS));
    for &object in &handed {
        assert_eq!(lane_of(object), Lane::of_cpu(0), "{object:#x}");
    }

    // CPU 1 allocates its own first: those come from lane 1's region, in
    // both modes (a refill takes the slabs of the CPU it runs on). Then it
    // frees CPU 0's.
    let (own, returned) = on_a_thread(|| {
        let own = allocate_on(1, SIZE, CAPACITY);
        let before = lane_returns(CACHE);
        free_on(1, SIZE, &handed);
        (own, lane_returns(CACHE) - before)
    });
    for &object in &own {
        assert_eq!(lane_of(object), Lane::of_cpu(1), "{object:#x}");
    }
    match sheafalloc::cache_mode() {
        sheafalloc::CacheMode::PerCpu => {
            // Full batches went back when the next object found the batch
            // full: all but the last.
            assert!(
                (OBJECTS - CAPACITY..=OBJECTS).contains(&returned),
                "{returned} of {OBJECTS} objects sent back to their lane"
            );
            // CPU 0 takes them back from its lane's barn stack: after what
            // its main sheaf held (objects of this class that other code of
            // this binary freed there), its next allocations are the objects it
            // handed over.
            let again = on_a_thread(|| allocate_on(0, SIZE, OBJECTS));
            let handed: HashSet<usize> = handed.iter().copied().collect();
            let back = again
                .iter()
                .filter(|&object| handed.contains(object))
                .count() as u64;
            assert!(
                back >= returned,
                "CPU 0's allocations after the hand-off: {back} of its own objects, \
                 {returned} sent back"
            );
            for &object in &again {
                assert_eq!(lane_of(object), Lane::of_cpu(0), "{object:#x}");
            }
            on_a_thread(|| free_on(0, SIZE, &again));
        }
        sheafalloc::CacheMode::PerThread => {
            assert_eq!(returned, 0, "a thread keeps what it frees");
        }
    }
    on_a_thread(|| free_on(1, SIZE, &own));
}
