//! A CPU that frees another CPU's objects all the time keeps them; once
//! that flow stops, it sends them back to their lane again.
//!
//! In per-CPU mode a CPU sends what it frees of another lane's objects
//! back (see `lane_returns.rs`). Where such objects cross between CPUs
//! continuously, that only makes every object come back cold, so the
//! periodic tick turns it off for that CPU (`percpu::steer`). The test
//! drives the tick itself, with a clock of its own far ahead of the real
//! one (so the periodic work of the allocator's slow paths, whose ticks
//! then look older than the last, never steers in between).
//!
//! In per-thread mode (CI's second run) nothing steers: every thread
//! keeps what it frees.

mod common;

use common::{allocate_on, free_on};

use sheafalloc_core::percpu::steer::{FLOW_PER_SEC, SETTLED_TICKS};
use sheafalloc_core::runtime::{steer_lanes, TICK_MS};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A cache no other code in this test binary uses.
const CACHE: &str = "size-2560";
const SIZE: usize = 2500;
/// Its sheaf (and batch) capacity during the test.
const CAPACITY: u64 = 8;
/// Objects CPU 1 frees of CPU 0's in one tick: the flow of a second, in
/// a tick of half a second.
const FLOW: u64 = FLOW_PER_SEC;
/// A few batches, far below the flow.
const TRICKLE: u64 = 8 * CAPACITY;

fn lane_returns() -> u64 {
    sheafalloc::cache(CACHE)
        .expect("the cache exists")
        .lane_returns
}

/// The test's clock: far ahead of the monotonic clock the allocator's own
/// ticks read.
struct Clock(u64);

impl Clock {
    fn tick(&mut self) -> usize {
        self.0 += TICK_MS;
        steer_lanes(self.0)
    }
}

/// CPU 0 allocates `count` objects and CPU 1 frees them; returns how many
/// went back to CPU 0's lane meanwhile.
fn hand_from_cpu_0_to_cpu_1(count: u64) -> u64 {
    let objects = std::thread::scope(|s| s.spawn(|| allocate_on(0, SIZE, count)).join().unwrap());
    let before = lane_returns();
    std::thread::scope(|s| s.spawn(|| free_on(1, SIZE, &objects)).join().unwrap());
    lane_returns() - before
}

#[test]
fn a_cpu_keeps_other_lanes_objects_while_they_flow_and_returns_them_after() {
    if !common::two_cpus_and_capacity(CACHE, CAPACITY) {
        return;
    }
    let mut clock = Clock(1 << 50);

    if sheafalloc::cache_mode() == sheafalloc::CacheMode::PerThread {
        assert_eq!(clock.tick(), 0);
        assert_eq!(
            hand_from_cpu_0_to_cpu_1(FLOW),
            0,
            "a thread keeps what it frees"
        );
        assert_eq!(clock.tick(), 0, "nothing to steer");
        assert_eq!(sheafalloc::cpus_keeping_lanes(), 0);
        return;
    }

    // Start from every CPU returning: whatever start-up flowed, ticks
    // without a flow bring each back within the longest wait.
    for _ in 0..(2 * sheafalloc_core::percpu::steer::CALM_TICKS_MAX) {
        clock.tick();
        if sheafalloc::cpus_keeping_lanes() == 0 {
            break;
        }
    }
    assert_eq!(sheafalloc::cpus_keeping_lanes(), 0);
    // And settled, so the first flow waits the least.
    for _ in 0..SETTLED_TICKS {
        clock.tick();
    }
    let switches = sheafalloc::lane_steering_switches();

    // A trickle goes back, and turns nothing off.
    let returned = hand_from_cpu_0_to_cpu_1(TRICKLE);
    assert!(
        returned >= TRICKLE - CAPACITY,
        "{returned} of {TRICKLE} sent back"
    );
    assert_eq!(clock.tick(), 0);
    assert_eq!(sheafalloc::cpus_keeping_lanes(), 0);

    // A flow of a second's worth within one tick: CPU 1 keeps from now on.
    let returned = hand_from_cpu_0_to_cpu_1(FLOW);
    assert!(
        returned >= FLOW - CAPACITY,
        "{returned} of {FLOW} sent back"
    );
    assert_eq!(clock.tick(), 1, "CPU 1 switches, CPU 0 saw no flow");
    assert_eq!(sheafalloc::cpus_keeping_lanes(), 1);
    assert_eq!(sheafalloc::lane_steering_switches(), switches + 1);
    let returned = hand_from_cpu_0_to_cpu_1(TRICKLE);
    assert_eq!(returned, 0, "CPU 1 keeps CPU 0's objects");

    // The flow stopped: after the wait (two calm ticks), CPU 1 sends them
    // back again.
    assert_eq!(clock.tick(), 0, "one calm tick is not enough");
    assert_eq!(clock.tick(), 1);
    assert_eq!(sheafalloc::cpus_keeping_lanes(), 0);
    let returned = hand_from_cpu_0_to_cpu_1(TRICKLE);
    assert!(
        returned >= TRICKLE - CAPACITY,
        "{returned} of {TRICKLE} sent back"
    );
}
