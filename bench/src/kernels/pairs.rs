//! Alloc+free pairs of mixed small sizes on one thread.
//!
//! The sizes cycle through 16, 32, 48, 64, 96, 128, 256 and 512 bytes; each
//! object is allocated, touched and freed at once, so this measures the
//! allocator's fastest path (thread cache hit on both sides). The size table
//! passes through `black_box`, so the size-to-class computation is real and
//! not folded into constants.

use std::alloc::GlobalAlloc;
use std::hint::black_box;
use std::time::Instant;

use super::{alloc_touch, layouts};

/// The sizes cycled through.
pub const SIZES: [usize; 8] = [16, 32, 48, 64, 96, 128, 256, 512];

/// Runs `pairs` alloc+free pairs with `a`; returns nanoseconds per pair.
#[inline(never)]
pub fn run<A: GlobalAlloc>(a: &A, pairs: usize) -> f64 {
    let layouts = black_box(layouts(SIZES));
    let start = Instant::now();
    for i in 0..pairs {
        let layout = layouts[i % SIZES.len()];
        let object = alloc_touch(a, layout, i as u8);
        // SAFETY: `object` came from `a.alloc(layout)` just above and is
        // freed once, with the same layout.
        unsafe { a.dealloc(object, layout) };
    }
    start.elapsed().as_nanos() as f64 / pairs as f64
}

/// Runs `pairs` alloc+free pairs of one `size` with `a` (what the
/// fast-path instruction budget counts). The layout passes through
/// `black_box` on every iteration, so the size-to-class step runs each
/// time, as for a size not known at compile time.
#[inline(never)]
pub fn run_one_size<A: GlobalAlloc>(a: &A, size: usize, pairs: u64) {
    let layout = std::alloc::Layout::from_size_align(size, 8).expect("a valid layout");
    for i in 0..pairs {
        let layout = black_box(layout);
        let object = alloc_touch(a, layout, i as u8);
        // SAFETY: `object` came from `a.alloc(layout)` just above and is
        // freed once, with the same layout.
        unsafe { a.dealloc(object, layout) };
    }
}
