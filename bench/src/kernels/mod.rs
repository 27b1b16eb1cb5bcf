//! The single-thread allocation loops shared by the in-process harness
//! (each allocator called through `GlobalAlloc`) and the suite (the
//! binary's own global allocator, through [`BinaryAllocator`]).

pub mod fifo;
pub mod pairs;

use std::alloc::{handle_alloc_error, GlobalAlloc, Layout};
use std::hint::black_box;

/// The binary's `#[global_allocator]`, called through `std::alloc` as
/// `Box` and `Vec` call it (with LTO, sheafalloc's fast paths inline into
/// the loop).
#[derive(Clone, Copy, Debug, Default)]
pub struct BinaryAllocator;

// SAFETY: every method forwards to the global allocator with the caller's
// arguments, so the caller's duties are the global allocator's.
unsafe impl GlobalAlloc for BinaryAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees a non-zero size.
        unsafe { std::alloc::alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, object: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `object` came from `alloc` with
        // `layout` and is freed once.
        unsafe { std::alloc::dealloc(object, layout) }
    }
}

/// Allocates `layout` from `a` and writes one byte, so the object's memory
/// is really touched; aborts if the allocator fails.
#[inline(always)]
pub fn alloc_touch<A: GlobalAlloc>(a: &A, layout: Layout, byte: u8) -> *mut u8 {
    // SAFETY: every layout used by the workloads has a non-zero size.
    let object = unsafe { a.alloc(layout) };
    if object.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `object` is a fresh, non-null block of `layout.size() >= 1`
    // bytes that only this thread knows about.
    unsafe { object.write(byte) };
    black_box(object)
}

/// Layouts of `size` bytes with 8-byte alignment (a typical Rust struct),
/// one per size.
pub fn layouts<const N: usize>(sizes: [usize; N]) -> [Layout; N] {
    sizes.map(|size| Layout::from_size_align(size, 8).expect("a valid layout"))
}
