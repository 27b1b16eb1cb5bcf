//! Bursts that straddle the boundary between the main and the spare sheaf.
//!
//! With main holding `L` objects and a full spare, a burst of `B > L`
//! allocations empties main and swaps the spare in; its frees fill that
//! sheaf after `B - L`, and a plain swap then would put the empty sheaf back
//! for the last `L`: the thread would be where it started, and would take
//! two slow paths in every burst for ever, at any capacity. A free right
//! after an allocation's swap splits main with the spare instead, so from
//! the second burst on, a burst of up to half the capacity runs without a
//! slow path. Asked of the CPU's sheaves in per-CPU mode (the thread pinned,
//! alone with the cache) and of the thread's own without rseq (CI's second
//! run); every object's contents are checked before it is freed.

mod common;

use std::alloc::{alloc, dealloc, Layout};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A cache no other code in this test binary uses.
const CACHE: &str = "size-640";
const SIZE: usize = 600;
/// The sheaf capacity, what main keeps before the bursts, and the burst:
/// `LEFT < BURST <= CAPACITY / 2`.
const CAPACITY: usize = 32;
const LEFT: usize = 4;
const BURST: usize = 12;
const BURSTS: u64 = 64;

fn layout() -> Layout {
    Layout::from_size_align(SIZE, 8).expect("a valid layout")
}

/// Slow paths (allocations and frees) and spare swaps of `CACHE`.
fn slow_paths() -> (u64, u64) {
    let cache = sheafalloc::cache(CACHE).expect("the cache exists");
    (
        cache.slow_path_allocs + cache.slow_path_frees,
        cache.spare_swaps,
    )
}

/// Allocates `count` objects of `CACHE`, each filled with `generation`'s
/// pattern.
fn allocate(count: usize, generation: u64) -> Vec<*mut u8> {
    (0..count)
        .map(|_| {
            // SAFETY: a non-zero-size layout.
            let object = unsafe { alloc(layout()) };
            assert!(!object.is_null());
            // SAFETY: the object has `SIZE` bytes.
            unsafe { common::fill(object, SIZE, generation) };
            object
        })
        .collect()
}

/// Checks every object's pattern, then frees them in order.
fn check_and_free(objects: Vec<*mut u8>, generation: u64) {
    for object in objects {
        // SAFETY: filled with this generation by `allocate`, not freed.
        let checked = unsafe { common::check(object, SIZE, generation) };
        assert_eq!(checked, Ok(()), "object {object:p} corrupted");
        // SAFETY: allocated with this layout, no longer used.
        unsafe { dealloc(object, layout()) };
    }
}

#[test]
fn a_burst_across_the_main_and_spare_boundary_takes_no_slow_path_after_the_first() {
    assert_eq!(sheafalloc::cache_mode(), common::expected_mode());
    // The tuner would change the capacity under the test.
    sheafalloc::set_autotune(false);
    sheafalloc::set_sheaf_capacity(CACHE, CAPACITY as u64).expect("a valid capacity");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                common::pin_to_cpu(0);
                // Two sheaves' worth out and back: main and spare end full.
                check_and_free(allocate(2 * CAPACITY, 0), 0);
                // Main keeps `LEFT`: the first burst crosses into the spare.
                let kept = allocate(CAPACITY - LEFT, 1);
                let start = slow_paths();
                let mut after_first = start;
                for generation in 0..BURSTS {
                    let burst = allocate(BURST, 2 + generation);
                    check_and_free(burst, 2 + generation);
                    if generation == 0 {
                        after_first = slow_paths();
                    }
                }
                let end = slow_paths();
                check_and_free(kept, 1);
                assert!(
                    after_first.0 >= start.0 + 2 && after_first.1 >= start.1 + 2,
                    "the first burst crossed the boundary (an allocation's swap, \
                     then the free's split): {start:?} → {after_first:?}"
                );
                assert_eq!(
                    end,
                    after_first,
                    "the later {} bursts took no slow path and traded no sheaf \
                     (a plain swap would take two in each)",
                    BURSTS - 1
                );
            })
            .join()
            .expect("the bursts' thread");
    });
}
