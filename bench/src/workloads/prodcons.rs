//! Workload 3: one producer thread allocates, one consumer thread frees.
//!
//! The producer allocates buffers of 256 B and 2112 B (alternating), writes
//! a sequence byte into each and hands it through an SPSC ring (`ring.rs`)
//! to the consumer, which checks the byte and frees the buffer. Every free
//! is therefore a cross-thread (remote) free, the pattern of a network
//! service whose I/O thread allocates what a worker thread releases.

use std::alloc::GlobalAlloc;
use std::time::Instant;

use super::ring::Ring;
use super::spin::Backoff;
use super::{alloc_touch, layouts};

/// The buffer sizes, alternating.
pub const SIZES: [usize; 2] = [256, 2112];

/// Hands `objects` buffers from a producer to a consumer thread with `a`;
/// returns million objects per second (wall clock, thread start included).
#[inline(never)]
pub fn run<A: GlobalAlloc + Sync>(a: &A, objects: usize) -> f64 {
    let layouts = layouts(SIZES);
    let mut ring = Ring::new();
    let (mut producer, mut consumer) = ring.split();
    let start = Instant::now();
    let bad = std::thread::scope(|s| {
        s.spawn(move || {
            for i in 0..objects {
                let object = alloc_touch(a, layouts[i % SIZES.len()], i as u8);
                let mut backoff = Backoff::new();
                while !producer.push(object) {
                    backoff.snooze();
                }
            }
        });
        let consumer = s.spawn(move || {
            let mut bad = 0usize;
            for i in 0..objects {
                let mut backoff = Backoff::new();
                let object = loop {
                    if let Some(object) = consumer.pop() {
                        break object;
                    }
                    backoff.snooze();
                };
                // SAFETY: the producer wrote byte 0 of this live object
                // before publishing it through the ring (Release/Acquire).
                if unsafe { object.read() } != i as u8 {
                    bad += 1;
                }
                // SAFETY: the object came from `a.alloc` with this layout
                // (same sequence number `i`, the ring keeps order) and is
                // freed once, here.
                unsafe { a.dealloc(object, layouts[i % SIZES.len()]) };
            }
            bad
        });
        consumer.join().expect("the consumer does not panic")
    });
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(bad, 0, "objects arrived with the wrong contents");
    objects as f64 / seconds / 1e6
}
