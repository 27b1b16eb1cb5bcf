//! Heap objects that carry their own size, so whichever thread ends up
//! holding one can free it: the first 4 bytes hold the size, the next byte a
//! tag the receiver checks, and the rest of the first 64 bytes (a packet
//! header's worth) is written too.
//!
//! They come from `std::alloc::alloc`, that is from the binary's global
//! allocator, as a `Vec` or `Box` would.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};

/// Bytes written into every new object (at most its size).
pub const HEADER: usize = 64;
/// The smallest object size (room for the size and the tag).
pub const MIN_SIZE: usize = 8;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size.max(MIN_SIZE), 8).expect("object sizes are small")
}

/// Allocates `size` bytes (at least `MIN_SIZE`), writes the header with
/// `tag`; aborts if the allocator fails.
#[inline]
pub fn new(size: usize, tag: u8) -> *mut u8 {
    let layout = layout(size);
    // SAFETY: the layout has a non-zero size.
    let object = unsafe { alloc(layout) };
    if object.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `object` is a fresh block of `layout.size() >= MIN_SIZE`
    // bytes, 8-aligned, that only this thread knows about; the writes stay
    // within `min(HEADER, layout.size())` bytes.
    unsafe {
        object.cast::<u32>().write(layout.size() as u32);
        if layout.size() >= HEADER {
            // A constant length: a few vector stores, no call.
            object.add(4).write_bytes(tag, HEADER - 4);
        } else {
            object.add(4).write_bytes(tag, layout.size() - 4);
        }
    }
    object
}

/// The tag written by `new`.
///
/// # Safety
///
/// `object` must come from `new` and not be freed yet; its writes must be
/// visible to this thread (handed over with Release/Acquire).
#[inline]
pub unsafe fn tag(object: *mut u8) -> u8 {
    // SAFETY: per the contract, byte 4 of the live object was written.
    unsafe { object.add(4).read() }
}

/// Fills the whole object with `byte` after its size field (touching every
/// page it spans, as a real payload would).
///
/// # Safety
///
/// As for [`tag`], and no other thread may access the object meanwhile.
pub unsafe fn fill(object: *mut u8, byte: u8) {
    // SAFETY: per the contract the object is live and ours; its size field
    // is valid and the write stays within it.
    unsafe {
        let size = object.cast::<u32>().read() as usize;
        object.add(4).write_bytes(byte, size - 4);
    }
}

/// Frees an object made by `new`, whatever its size.
///
/// # Safety
///
/// `object` must come from `new`, be freed only once, and its header
/// writes must be visible to this thread.
#[inline]
pub unsafe fn free(object: *mut u8) {
    // SAFETY: per the contract the size field at offset 0 is valid.
    let size = unsafe { object.cast::<u32>().read() } as usize;
    // SAFETY: `new` allocated `object` with exactly this layout.
    unsafe { dealloc(object, layout(size)) };
}
