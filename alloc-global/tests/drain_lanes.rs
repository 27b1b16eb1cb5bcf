//! Sheaves taken from a CPU go back to that CPU's barn lane.
//!
//! A barn keeps full sheaves per lane (CPUs folded onto a few slots) and
//! hands a CPU its own lane's first; another lane's only from a surplus.
//! A drain of CPU 1's cache may run on CPU 0 (`set_sheaf_capacity`, the
//! auto-tuner, `purge`, the decay): the sheaves it takes must land on CPU
//! 1's lane, so that CPU 1's next allocation takes them back from the barn,
//! instead of finding its lane empty and carving the slabs again while CPU
//! 0 is left holding its objects.
//!
//! In per-thread mode (CI's second run, without rseq) no CPU's cache is
//! drained from outside; the same question is asked of a thread that
//! flushes its own sheaves: they go to its CPU's lane and come back to it.

mod common;

use std::alloc::{alloc, dealloc, Layout};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A cache no other code in this test binary uses.
const CACHE: &str = "size-5120";
const SIZE: usize = 5000;
/// Its capacity while the sheaf fills, and after the drain lowers it.
const CAPACITY: u64 = 8;
const LOWER: u64 = 4;

/// The barn counters of `CACHE`: full sheaves taken (own lane or
/// another's surplus), lookups that found none, steals, sheaves stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Barn {
    get_hits: u64,
    get_misses: u64,
    steals: u64,
    put_hits: u64,
}

fn barn() -> Barn {
    let cache = sheafalloc::cache(CACHE).expect("the cache exists");
    Barn {
        get_hits: cache.barn_get_hits,
        get_misses: cache.barn_get_misses,
        steals: cache.barn_lane_steals,
        put_hits: cache.barn_put_hits,
    }
}

fn layout() -> Layout {
    Layout::from_size_align(SIZE, 8).expect("a valid layout")
}

/// On `cpu`: allocates `CAPACITY` objects, writes them, checks and frees
/// them: the main sheaf of `CACHE` ends full, with no barn trade.
fn fill_main_sheaf(cpu: usize) {
    common::pin_to_cpu(cpu);
    let mut objects = Vec::with_capacity(CAPACITY as usize);
    for generation in 0..CAPACITY {
        // SAFETY: a non-zero-size layout.
        let object = unsafe { alloc(layout()) };
        assert!(!object.is_null());
        // SAFETY: the object has `SIZE` bytes.
        unsafe { common::fill(object, SIZE, generation) };
        objects.push((object, generation));
    }
    for (object, generation) in objects {
        // SAFETY: filled above with this generation.
        let checked = unsafe { common::check(object, SIZE, generation) };
        assert_eq!(checked, Ok(()), "object {object:p} corrupted");
        // SAFETY: allocated above with this layout, no longer used.
        unsafe { dealloc(object, layout()) };
    }
}

/// On `cpu`: one allocation of `CACHE` (its main sheaf is gone: a slow
/// path), written and freed.
fn allocate_once(cpu: usize) {
    common::pin_to_cpu(cpu);
    // SAFETY: a non-zero-size layout.
    let object = unsafe { alloc(layout()) };
    assert!(!object.is_null());
    // SAFETY: the object has `SIZE` bytes; freed with its layout.
    unsafe {
        common::fill(object, SIZE, 99);
        assert_eq!(common::check(object, SIZE, 99), Ok(()));
        dealloc(object, layout());
    }
}

#[test]
fn drained_sheaves_go_back_to_the_lane_of_their_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        // One CPU has one lane: there is nothing to mix up.
        eprintln!("one CPU: no other lane to drain from");
        return;
    }
    assert_eq!(sheafalloc::cache_mode(), common::expected_mode());
    // The tuner would change capacities under the test.
    sheafalloc::set_autotune(false);
    sheafalloc::set_sheaf_capacity(CACHE, CAPACITY).expect("a valid capacity");
    common::pin_to_cpu(0);

    let (before, after) = match sheafalloc::cache_mode() {
        sheafalloc::CacheMode::PerCpu => {
            std::thread::scope(|scope| {
                scope.spawn(|| fill_main_sheaf(1)).join().expect("filler");
            });
            // The filler has exited: in per-CPU mode its objects stay in
            // CPU 1's main sheaf. From CPU 0, a lower capacity drains
            // every CPU's sheaves of the cache; CPU 1's main sheaf
            // (trimmed to the new capacity, so full) goes to the barn.
            let before = barn();
            sheafalloc::set_sheaf_capacity(CACHE, LOWER).expect("a valid capacity");
            std::thread::scope(|scope| {
                scope.spawn(|| allocate_once(1)).join().expect("allocator");
            });
            (before, barn())
        }
        sheafalloc::CacheMode::PerThread => {
            // The thread holds its sheaves: it flushes them on CPU 1 and
            // allocates again there.
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        fill_main_sheaf(1);
                        let before = barn();
                        sheafalloc::flush_thread_cache();
                        allocate_once(1);
                        (before, barn())
                    })
                    .join()
                    .expect("allocator")
            })
        }
    };
    assert!(
        after.put_hits > before.put_hits,
        "the full sheaf went to the barn: {before:?} → {after:?}"
    );
    assert_eq!(
        (
            after.get_hits - before.get_hits,
            after.get_misses - before.get_misses,
            after.steals - before.steals
        ),
        (1, 0, 0),
        "CPU 1 took its own sheaf back from its lane (one hit, no miss, no steal): \
         {before:?} → {after:?}"
    );
}
