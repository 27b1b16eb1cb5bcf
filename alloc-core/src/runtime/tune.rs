//! The periodic tick of the engine and the auto-tuner's part of it.
//!
//! `periodic` runs from allocation slow paths; at most once per
//! [`TICK_MS`] one of them (whoever wins a compare-and-swap on the due
//! time) does the work: the slab decay, and one tuner tick. No thread of
//! its own: an idle process needs no tuning, and a busy one takes slow
//! paths all the time.
//!
//! A tuner tick reads every cache's slow-path counters (atomics), takes one
//! pass over the thread registry to add up allocations and frees, hands
//! each unpinned cache's sample to `tuner::decide`, and applies what it
//! decides ([`enact`]). A lower capacity is pushed into every live
//! thread's fast path at once ([`clamp_threads`]); a higher one is picked
//! up at each thread's next exchange, which a thread that needs it reaches
//! within one sheaf of operations, and empties the class's barns into the
//! slabs ([`regather`]), so that the sheaves of the new capacity gather
//! whole slabs.

use core::sync::atomic::{AtomicU64, Ordering};

use super::registry::with_threads;
use crate::cache::{self, cache, ClassDepot};
use crate::exchange;
use crate::node::NodeId;
use crate::os;
use crate::size_class::{SizeClass, NUM_CLASSES};
use crate::sync::{LockRank, Mutex};
use crate::tuner::{self, Bounds, Decision, Sample, TunerState};

/// How often the tick runs.
pub const TICK_MS: u64 = 500;

/// Counter values at the previous tick.
#[derive(Clone, Copy, Default)]
struct Seen {
    operations: u64,
    slow_paths: u64,
    barn_hits: u64,
    barn_misses: u64,
}

/// The tuner's memory between ticks, and the lane steering's
/// ([`steer_lanes`]).
struct Book {
    last_ms: u64,
    seen: [Seen; NUM_CLASSES],
    states: [TunerState; NUM_CLASSES],
    lanes_last_ms: u64,
    lanes: crate::percpu::steer::Book,
}

static BOOK: Mutex<Book> = Mutex::new(
    LockRank::Tuner,
    Book {
        last_ms: 0,
        seen: [Seen {
            operations: 0,
            slow_paths: 0,
            barn_hits: 0,
            barn_misses: 0,
        }; NUM_CLASSES],
        states: [TunerState::new(); NUM_CLASSES],
        lanes_last_ms: 0,
        lanes: crate::percpu::steer::new_book(),
    },
);

static NEXT_TICK: os::Every = os::Every::new();
static TICKS: AtomicU64 = AtomicU64::new(0);

/// Tuner ticks run since start.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// The tuner's lock, for the fork handlers.
pub(super) fn book_lock() -> &'static crate::sync::RawLock {
    BOOK.raw()
}

/// Runs the periodic work if it is due (from slow paths, holding no lock).
pub fn periodic() {
    // One clock read for both (a slow path runs this every time).
    let now = os::monotonic_ms();
    cache::maybe_decay(now);
    if !NEXT_TICK.claim(now, TICK_MS) {
        return;
    }
    periodic_tick(now);
}

/// The tick's work, out of line: its frame (the tuner's reads of every
/// class) takes 3.5 KB of stack, and inlined into the slow paths it made
/// every thread's first slow path touch one more page of its stack, which
/// a thread that then sits idle keeps.
#[cold]
#[inline(never)]
fn periodic_tick(now: u64) {
    steer_lanes(now);
    if cache::autotune_enabled() {
        tick(now);
    }
}

/// One lane steering tick at `now_ms` (`percpu::steer`; part of the
/// periodic work whether or not the tuner is on, and called directly by
/// tests): each CPU returns or keeps other lanes' objects from what it saw
/// since the last tick. A tick less than [`TICK_MS`] after the last one
/// is skipped. Returns how many CPUs switched.
pub fn steer_lanes(now_ms: u64) -> usize {
    if crate::percpu::mode() != crate::percpu::CacheMode::PerCpu {
        return 0;
    }
    let Some(mut book) = BOOK.try_lock() else {
        return 0;
    };
    let last_ms = book.lanes_last_ms;
    let first = last_ms == 0;
    if !first && (now_ms < last_ms || now_ms.wrapping_sub(last_ms) < TICK_MS) {
        return 0;
    }
    book.lanes_last_ms = now_ms;
    let elapsed_ms = if first {
        TICK_MS
    } else {
        now_ms.wrapping_sub(last_ms)
    };
    crate::percpu::steer::steer(&mut book.lanes, elapsed_ms)
}

/// One tuner tick at `now_ms` (also called directly by tests).
pub fn tick(now_ms: u64) {
    let Some(mut book) = BOOK.try_lock() else {
        return;
    };
    TICKS.fetch_add(1, Ordering::Relaxed);
    // Operations and slow paths: what exited threads folded in, and what
    // every live thread counts on its own, read under the registry lock
    // (so each is counted once; see `SlowPathCount`).
    let mut operations = [0u64; NUM_CLASSES];
    let mut slow_paths = [0u64; NUM_CLASSES];
    with_threads(|threads| {
        let totals = operations.iter_mut().zip(slow_paths.iter_mut());
        for (class, (operations, slow_paths)) in SizeClass::all().zip(totals) {
            let counters = &cache(class).counters;
            let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
            *operations = load(&counters.allocs_folded).wrapping_add(load(&counters.frees_folded));
            *slow_paths =
                load(&counters.slow_path_allocs).wrapping_add(load(&counters.slow_path_frees));
        }
        for thread in threads {
            let totals = operations.iter_mut().zip(slow_paths.iter_mut());
            for (class, (operations, slow_paths)) in SizeClass::all().zip(totals) {
                let view = thread.view(class);
                *operations = operations
                    .wrapping_add(view.allocs)
                    .wrapping_add(view.frees);
                *slow_paths = slow_paths
                    .wrapping_add(view.slow_allocs)
                    .wrapping_add(view.slow_frees);
            }
        }
    });
    if crate::percpu::mode() == crate::percpu::CacheMode::PerCpu {
        // What the CPUs' pops and pushes counted.
        for (class, operations) in SizeClass::all().zip(operations.iter_mut()) {
            *operations = operations.wrapping_add(crate::percpu::view(class).counts.operations());
        }
    }
    let elapsed_ms = now_ms.saturating_sub(book.last_ms);
    let first = book.last_ms == 0;
    book.last_ms = now_ms;
    let Book { seen, states, .. } = &mut *book;
    let per_class = SizeClass::all()
        .zip(operations.into_iter().zip(slow_paths))
        .zip(seen.iter_mut().zip(states.iter_mut()));
    for ((class, (operations, slow_paths)), (seen, state)) in per_class {
        let counters = &cache(class).counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let now = Seen {
            operations,
            slow_paths,
            barn_hits: load(&counters.barn_get_hits).wrapping_add(load(&counters.barn_put_hits)),
            barn_misses: load(&counters.barn_get_misses)
                .wrapping_add(load(&counters.barn_put_misses)),
        };
        let before = core::mem::replace(seen, now);
        if first || cache(class).tuning() != tuner::Tuning::Auto {
            continue;
        }
        let sample = Sample {
            elapsed_ms,
            operations: now.operations.wrapping_sub(before.operations),
            slow_paths: now.slow_paths.wrapping_sub(before.slow_paths),
            barn_hits: now.barn_hits.wrapping_sub(before.barn_hits),
            barn_misses: now.barn_misses.wrapping_sub(before.barn_misses),
        };
        let bounds = Bounds {
            min: cache::default_sheaf_capacity(class),
            max: cache::max_sheaf_capacity(class),
        };
        let capacity = cache(class).sheaf_capacity(class);
        if let Some(decision) = tuner::decide(state, capacity, sample, bounds) {
            enact(class, decision, now_ms);
        }
    }
}

/// Applies the tuner's `decision` for `class` at `now_ms`: a lower
/// capacity reaches every live thread's fast path at once
/// ([`clamp_threads`]); a higher one reaches each thread at its next
/// exchange, and the class's barns are emptied into the slabs
/// ([`regather`]). False, with nothing done, if a pin or another change
/// came first (`cache::apply_decision`).
pub(crate) fn enact(class: SizeClass, decision: Decision, now_ms: u64) -> bool {
    if !cache::apply_decision(class, decision, now_ms) {
        return false;
    }
    if decision.to < decision.from {
        clamp_threads(class, decision.to);
    } else {
        regather(class);
    }
    true
}

/// Empties every barn of `class`, whose capacity was just raised, into the
/// slabs (the objects of its full sheaves; the sheaves go to the pool), so
/// that the sheaves of the new capacity are gathered from whole slabs.
///
/// Why: the objects a steady load keeps in circulation (a hand-off's
/// packets, say) are gathered while the capacity is still low. The sheaves
/// filled at the old capacity that sink to the bottom of a barn's stacks
/// never move again, and they hold the rest of the slabs whose other
/// objects circulate; so the circulating sheaves hold parts of slabs, and
/// the runs of consecutive objects that the hardware prefetchers follow
/// are cut short. On `handoff-1to1` the share of packets one slot on from
/// the last read 0.85–0.95 auto-tuned against 0.96 at a fixed capacity;
/// with the barns emptied at each raise, 0.96 (docs/PERFORMANCE.md,
/// "Regathered at each raise"). Emptied, the next refills take whole
/// slabs' objects at the new capacity. Costs one pass over the barns per
/// raise, which the tuner's cooldowns make rare. The sheaves the threads
/// (or the CPUs) hold keep their objects: emptying them too made the
/// hand-off slower where the vCPUs sit close.
fn regather(class: SizeClass) {
    let depot = ClassDepot::of(class);
    for node in NodeId::all() {
        exchange::drain_barn(&depot, node);
    }
}

/// Lowers the fast-path capacity of `class` in every live thread to at
/// most `capacity`, at once: the next free above it takes the slow path,
/// which trims the thread's sheaves to the cache's capacity.
pub fn clamp_threads(class: SizeClass, capacity: u32) {
    if crate::percpu::mode() == crate::percpu::CacheMode::PerCpu {
        // The CPUs hold the sheaves: empty them; the next sheaf each CPU
        // installs has the new capacity. (A thread that could not use its
        // rseq area holds sheaves of its own: clamped below.)
        crate::percpu::drain_class(Some(class));
    }
    with_threads(|threads| {
        for thread in threads {
            thread.clamp_capacity(class, capacity);
        }
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::exchange::Depot;
    use crate::tuner::Reason;

    /// The 16 KiB class, which no other unit test fills, tunes or pins.
    fn class() -> SizeClass {
        SizeClass::all()
            .find(|class| class.object_size() == 16 * 1024 && !class.is_aligned_twin())
            .expect("a 16 KiB class")
    }

    fn change(from: u32, to: u32) -> Decision {
        Decision {
            from,
            to,
            reason: if to > from {
                Reason::BarnMisses
            } else {
                Reason::Idle
            },
            signal: 500,
        }
    }

    /// Full sheaves in node 0's barn of `class`, and free objects in its
    /// slabs.
    fn barn_and_slabs(class: SizeClass) -> (u32, u64) {
        let node_class = cache::node_class(NodeId::ZERO, class);
        let full = node_class.barn.lock().counts().0;
        let free = node_class.slabs.lock().counts().free_objects;
        (full, free)
    }

    /// Puts a sheaf of `capacity` objects, refilled from the slabs, into
    /// node 0's barn; returns how many objects it holds.
    fn put_a_full_sheaf(depot: &ClassDepot, capacity: u32) -> u32 {
        let node = NodeId::ZERO;
        let sheaf = exchange::empty_sheaf(depot, node, capacity).expect("memory for a sheaf");
        // SAFETY: a new empty sheaf of this class and node: ours alone.
        exchange::refill(depot, node, unsafe { &mut *sheaf.as_ptr() });
        // SAFETY: as above; refilled, not yet handed over.
        let held = unsafe { (*sheaf.as_ptr()).len };
        // SAFETY: ours, holding free objects of this class whose home is
        // node 0; handed over on `Ok`.
        match unsafe { exchange::put_full(depot, node, sheaf) } {
            // SAFETY: the barn's empty sheaf, now ours.
            Ok(Some(empty)) => unsafe { depot.pool().give(empty) },
            Ok(None) => {}
            Err(_) => panic!("the barn refused its first full sheaf"),
        }
        held
    }

    #[test]
    fn a_raise_empties_the_barns_into_the_slabs_and_a_lowering_leaves_them() {
        assert!(crate::runtime::ensure_init());
        let class = class();
        let depot = ClassDepot::of(class);
        let default = cache::default_sheaf_capacity(class);
        assert!(default >= 2 && cache::max_sheaf_capacity(class) >= 2 * default);
        assert_eq!(cache(class).sheaf_capacity(class), default);

        let held = put_a_full_sheaf(&depot, default);
        assert_eq!(held, default, "refilled to its capacity");
        let (full, free) = barn_and_slabs(class);
        assert!(full >= 1, "the barn holds the sheaf");

        // Lowered: the barn keeps its sheaves (they are fitted when taken).
        assert!(enact(class, change(default, default / 2), 1));
        assert_eq!(cache(class).sheaf_capacity(class), default / 2);
        assert_eq!(barn_and_slabs(class), (full, free));

        // Raised: every full sheaf's objects are back in the slabs.
        assert!(enact(class, change(default / 2, 2 * default), 2));
        assert_eq!(cache(class).sheaf_capacity(class), 2 * default);
        let (full_after, free_after) = barn_and_slabs(class);
        assert_eq!(full_after, 0, "the barn was emptied");
        assert!(
            free_after >= free + u64::from(held),
            "the sheaf's {held} objects went back to the slabs ({free} -> {free_after} free)"
        );

        // A stale decision is refused and empties nothing.
        let held_again = put_a_full_sheaf(&depot, 2 * default);
        assert!(held_again > 0);
        assert!(!enact(class, change(default, 4 * default), 3));
        assert_eq!(barn_and_slabs(class).0, 1);
    }
}
