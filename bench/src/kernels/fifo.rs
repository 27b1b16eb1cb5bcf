//! FIFO batches: 4096 objects of one size allocated, then freed in
//! allocation order (first in, first out), repeated.
//!
//! Unlike `pairs`, the batch overflows any per-thread cache of a few hundred
//! objects, so refills from and flushes to the shared structures are part of
//! the cost; freeing in FIFO order (not LIFO) defeats a cache that only
//! keeps the most recently freed objects warm.

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::time::Instant;

use super::alloc_touch;

/// Objects per batch.
pub const BATCH: usize = 4096;
/// The small object size (a socket-buffer head).
pub const SMALL: usize = 256;
/// The packet-buffer size (1500-byte MTU + headroom + shared info).
pub const PACKET: usize = 2112;

/// Runs `batches` batches of `size`-byte objects with `a`; returns
/// nanoseconds per object (one allocation plus one free).
#[inline(never)]
pub fn run<A: GlobalAlloc>(a: &A, size: usize, batches: usize) -> f64 {
    let layout = black_box(Layout::from_size_align(size, 8).expect("a valid layout"));
    // The pointer array comes from the binary's global allocator (the
    // harness's is `System`), once, before the clock starts.
    let mut objects = vec![std::ptr::null_mut::<u8>(); BATCH];
    let start = Instant::now();
    for _ in 0..batches {
        for (i, slot) in objects.iter_mut().enumerate() {
            *slot = alloc_touch(a, layout, i as u8);
        }
        for &object in black_box(&objects) {
            // SAFETY: each pointer came from `a.alloc(layout)` in the loop
            // above and is freed once, with the same layout.
            unsafe { a.dealloc(object, layout) };
        }
    }
    start.elapsed().as_nanos() as f64 / (batches * BATCH) as f64
}
