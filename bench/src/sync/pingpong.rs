//! The core-to-core round trip: two threads ping-pong an `AtomicU64`.
//!
//! Printed beside each producer/consumer round, because on a 2-vCPU virtual
//! machine cross-thread figures swing 2-5x when the host places the vCPUs
//! far apart (or on one physical core): a slow round trip explains a slow
//! producer/consumer round.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::spin::Backoff;
use crate::summary::median;

/// Round trips per timed batch.
pub const TRIPS: u64 = 2_000;

/// The value alone on its cache line.
#[repr(align(128))]
struct Flag(AtomicU64);

/// Waits until `flag` holds `value`.
#[inline]
fn wait_for(flag: &AtomicU64, value: u64) {
    let mut backoff = Backoff::new();
    while flag.load(Ordering::Acquire) != value {
        backoff.snooze();
    }
}

/// Times `batches` batches of `TRIPS` round trips; returns the median
/// nanoseconds per round trip (the first batch, thread start-up included,
/// is dropped).
pub fn round_trip_ns(batches: usize) -> f64 {
    round_trip_ns_with(batches, TRIPS)
}

/// As [`round_trip_ns`] with `trips` round trips per batch: small batches
/// keep the cost bounded when the two threads share one CPU (each round
/// trip then takes a scheduler switch, about 10 µs).
pub fn round_trip_ns_with(batches: usize, trips: u64) -> f64 {
    let batches = batches.max(2);
    let trips = trips.max(1);
    let total = batches as u64 * trips;
    let flag = Flag(AtomicU64::new(0));
    let flag = &flag.0;
    std::thread::scope(|s| {
        s.spawn(move || {
            // The responder answers each odd value v with v + 1.
            for trip in 0..total {
                wait_for(flag, 2 * trip + 1);
                flag.store(2 * trip + 2, Ordering::Release);
            }
        });
        let mut per_trip = Vec::with_capacity(batches);
        let mut trip = 0u64;
        for _ in 0..batches {
            let start = Instant::now();
            for _ in 0..trips {
                flag.store(2 * trip + 1, Ordering::Release);
                wait_for(flag, 2 * trip + 2);
                trip += 1;
            }
            per_trip.push(start.elapsed().as_nanos() as f64 / trips as f64);
        }
        median(&per_trip[1..])
    })
}
