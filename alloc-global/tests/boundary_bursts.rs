//! Bursts that straddle the boundary between the main and the spare sheaf.
//!
//! With main holding `L` objects and a full spare, a burst of `B > L`
//! allocations empties main and swaps the spare in; its frees fill that
//! sheaf after `B - L`, and a plain swap then would put the empty sheaf back
//! for the last `L`: the thread would be where it started, and would take
//! two slow paths in every burst for ever, at any capacity. A free right
//! after an allocation's swap splits main with the spare instead, main
//! keeping what the burst took since the swap, and the bursts settle: one
//! of a third of the capacity (which a split in halves also settles), one
//! of three quarters (which it would not), and one of more than three
//! quarters that fits the capacity (which a split bounded by three
//! quarters of the capacity since the swap did not). The thread reads a
//! burst as its allocations since its last free-side trade; here the first
//! burst follows allocations the test keeps, so it reads as larger than
//! the capacity and may end in a plain swap; from the third on the bursts
//! run without a slow path. And bursts settle after the capacity is raised in the middle
//! of one, as the auto-tuner may: in per-CPU mode the drain leaves the
//! CPU's sheaves at lengths that a plain swap kept crossing twice a burst
//! (128 slow paths in 64 bursts). Asked of the CPU's sheaves in per-CPU
//! mode (the thread pinned, alone with its cache) and of the thread's own
//! without rseq (CI's second run); every object's contents are checked
//! before it is freed.

mod common;

use std::alloc::{alloc, dealloc, Layout};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// The sheaf capacity, what main keeps before the bursts (`LEFT < burst`),
/// and how many bursts.
const CAPACITY: usize = 32;
const LEFT: usize = 4;
const BURSTS: u64 = 64;

/// One cache of this test (each test has its own, which no other code in
/// this binary uses).
#[derive(Clone, Copy)]
struct Cache {
    name: &'static str,
    size: usize,
}

impl Cache {
    fn layout(self) -> Layout {
        Layout::from_size_align(self.size, 8).expect("a valid layout")
    }
}

/// Slow paths (allocations and frees) and spare swaps of `cache`.
fn slow_paths(cache: Cache) -> (u64, u64) {
    let cache = sheafalloc::cache(cache.name).expect("the cache exists");
    (
        cache.slow_path_allocs + cache.slow_path_frees,
        cache.spare_swaps,
    )
}

/// Allocates `count` objects of `cache`, each filled with `generation`'s
/// pattern.
fn allocate(cache: Cache, count: usize, generation: u64) -> Vec<*mut u8> {
    (0..count)
        .map(|_| {
            // SAFETY: a non-zero-size layout.
            let object = unsafe { alloc(cache.layout()) };
            assert!(!object.is_null());
            // SAFETY: the object has `cache.size` bytes.
            unsafe { common::fill(object, cache.size, generation) };
            object
        })
        .collect()
}

/// Checks every object's pattern, then frees them in order.
fn check_and_free(cache: Cache, objects: Vec<*mut u8>, generation: u64) {
    for object in objects {
        // SAFETY: filled with this generation by `allocate`, not freed.
        let checked = unsafe { common::check(object, cache.size, generation) };
        assert_eq!(checked, Ok(()), "object {object:p} corrupted");
        // SAFETY: allocated with this layout, no longer used.
        unsafe { dealloc(object, cache.layout()) };
    }
}

/// One test, so that the cases run one after the other: in per-CPU mode a
/// capacity change drains the CPU's whole cache (every class misses while
/// it runs), and an allocation of another thread of the CPU in one of
/// these classes would move its sheaves' lengths.
#[test]
fn bursts_across_the_main_and_spare_boundary_settle_without_slow_paths() {
    assert_eq!(sheafalloc::cache_mode(), common::expected_mode());
    // The tuner would change the capacities under the test.
    sheafalloc::set_autotune(false);
    // A third of the capacity: a split in halves would settle it too.
    bursts_across_the_boundary(
        Cache {
            name: "size-640",
            size: 600,
        },
        12,
        2,
    );
    // Three quarters: main must keep what the burst took since the swap.
    bursts_across_the_boundary(
        Cache {
            name: "size-768",
            size: 760,
        },
        24,
        2,
    );
    // More than three quarters, but the whole burst fits the capacity.
    // The first burst reads as larger than the capacity (the test's kept
    // allocations count in it) and ends in a plain swap; the second's size
    // is known, and main keeps its part after the swap (without that, a
    // plain swap took two slow paths in every burst here).
    bursts_across_the_boundary(
        Cache {
            name: "size-1024",
            size: 1000,
        },
        30,
        2,
    );
    bursts_above_the_capacity_stop_trading_with_the_barn(
        Cache {
            name: "size-1536",
            size: 1500,
        },
        40,
    );
    bursts_settle_after_a_capacity_raise_in_the_middle_of_one(
        Cache {
            name: "size-896",
            size: 880,
        },
        12,
    );
}

/// A capacity raised in the middle of a burst (the auto-tuner's raises
/// come at any point of a thread's burst) leaves the sheaves at whatever
/// lengths the drain and resize made; the bursts must settle.
fn bursts_settle_after_a_capacity_raise_in_the_middle_of_one(cache: Cache, burst: usize) {
    sheafalloc::set_sheaf_capacity(cache.name, CAPACITY as u64).expect("a valid capacity");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                common::pin_to_cpu(0);
                for generation in 0..8 {
                    let objects = allocate(cache, burst, generation);
                    check_and_free(cache, objects, generation);
                }
                // One object in, the capacity doubles, the rest follow.
                let mut objects = allocate(cache, 1, 8);
                sheafalloc::set_sheaf_capacity(cache.name, 2 * CAPACITY as u64)
                    .expect("a valid capacity");
                objects.extend(allocate(cache, burst - 1, 8));
                check_and_free(cache, objects, 8);
                // A few bursts to settle (the resize, a swap, a split).
                for generation in 9..12 {
                    let objects = allocate(cache, burst, generation);
                    check_and_free(cache, objects, generation);
                }
                let start = slow_paths(cache);
                for generation in 12..12 + BURSTS {
                    let objects = allocate(cache, burst, generation);
                    check_and_free(cache, objects, generation);
                }
                assert_eq!(
                    slow_paths(cache),
                    start,
                    "{BURSTS} bursts after the raise took no slow path (a plain swap \
                     can take two in each for ever)"
                );
            })
            .join()
            .expect("the bursts' thread");
    });
}

/// Barn trades (gets and puts, hits and misses) of `cache`.
fn barn_trades(cache: Cache) -> u64 {
    let c = sheafalloc::cache(cache.name).expect("the cache exists");
    c.barn_get_hits + c.barn_get_misses + c.barn_put_hits + c.barn_put_misses
}

/// Bursts between one and two capacities, from a thread that holds fewer
/// objects than a burst (34 for bursts of 40): whole-sheaf trades keep what
/// it holds at that count modulo the capacity (2, 34, 66 at capacity 32), so
/// every burst of 40 would take a full sheaf from the barn and give one
/// back (four slow paths, for ever). Main keeping part of its objects at
/// the put moves the thread to a count that holds the burst: after a few
/// bursts, no barn trade, and no more than the two spare swaps per burst
/// that a burst larger than one sheaf needs.
fn bursts_above_the_capacity_stop_trading_with_the_barn(cache: Cache, burst: usize) {
    assert!(CAPACITY < burst && burst <= 7 * CAPACITY / 4);
    on_cpu_0_with_full_sheaves(cache, || {
        // 64 held, then 30 kept: 34 held.
        let kept = allocate(cache, 30, 1);
        let start = (slow_paths(cache), barn_trades(cache));
        for generation in 0..4 {
            let objects = allocate(cache, burst, 2 + generation);
            check_and_free(cache, objects, 2 + generation);
        }
        let settled = (slow_paths(cache), barn_trades(cache));
        for generation in 4..BURSTS {
            let objects = allocate(cache, burst, 2 + generation);
            check_and_free(cache, objects, 2 + generation);
        }
        let end = (slow_paths(cache), barn_trades(cache));
        check_and_free(cache, kept, 1);
        assert!(
            settled.1 > start.1,
            "the first bursts traded with the barn: {start:?} → {settled:?}"
        );
        assert_eq!(
            end.1,
            settled.1,
            "the {} bursts after the first 4 traded no sheaf with the barn \
                     (whole-sheaf trades: two in each)",
            BURSTS - 4
        );
        assert!(
            end.0 .0 - settled.0 .0 <= 2 * (BURSTS - 4),
            "at most two slow paths per burst after the first 4: {settled:?} → {end:?}"
        );
    });
}

/// Runs `body` on a thread pinned to CPU 0 (alone with its CPU's cache in
/// per-CPU mode) after setting `cache` to `CAPACITY` and filling its main
/// and spare sheaves (two sheaves' worth allocated and freed).
fn on_cpu_0_with_full_sheaves(cache: Cache, body: impl FnOnce() + Send) {
    sheafalloc::set_sheaf_capacity(cache.name, CAPACITY as u64).expect("a valid capacity");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                common::pin_to_cpu(0);
                check_and_free(cache, allocate(cache, 2 * CAPACITY, 0), 0);
                body();
            })
            .join()
            .expect("the bursts' thread");
    });
}

/// Main at `LEFT` and a full spare, then `BURSTS` bursts of `burst`, of
/// which those after the first `settle` take no slow path.
fn bursts_across_the_boundary(cache: Cache, burst: usize, settle: u64) {
    assert!(LEFT < burst && burst <= CAPACITY);
    on_cpu_0_with_full_sheaves(cache, || {
        // Main keeps `LEFT`: the first burst crosses into the spare.
        let kept = allocate(cache, CAPACITY - LEFT, 1);
        let start = slow_paths(cache);
        let mut after_first = start;
        let mut settled = start;
        for generation in 0..BURSTS {
            let objects = allocate(cache, burst, 2 + generation);
            check_and_free(cache, objects, 2 + generation);
            if generation == 0 {
                after_first = slow_paths(cache);
            }
            if generation + 1 == settle {
                settled = slow_paths(cache);
            }
        }
        let end = slow_paths(cache);
        check_and_free(cache, kept, 1);
        assert!(
            after_first.0 >= start.0 + 2 && after_first.1 >= start.1 + 2,
            "the first burst crossed the boundary (an allocation's swap, \
                     then the free's split): {start:?} → {after_first:?}"
        );
        assert_eq!(
            end,
            settled,
            "the {} bursts after the first {settle} took no slow path and \
                     traded no sheaf (a plain swap would take two in each)",
            BURSTS - settle
        );
    });
}
