//! Objects too large (above `MAX_CLASS_SIZE`) or too aligned for a size
//! class: mapped directly from the OS, one mapping each, page-granular.
//!
//! Nothing is recorded per object: `dealloc` receives the layout, so the
//! mapping's length is `round_up(size, page)` and its start is the pointer.
//! Memory is fresh from the OS, hence zeroed: `alloc_zeroed` needs no
//! memset. `realloc` of a page-aligned mapping uses `mremap`, which grows or
//! shrinks in place when it can and otherwise moves the pages without
//! copying them.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::os;

/// Counters of the direct mappings.
#[derive(Debug, Default)]
pub struct LargeCounters {
    /// Mappings made.
    pub allocs: AtomicU64,
    /// Mappings released.
    pub frees: AtomicU64,
    /// Bytes mapped right now.
    pub bytes_held: AtomicU64,
    /// Bytes unmapped since start.
    pub bytes_returned: AtomicU64,
    /// Mappings the OS refused.
    pub failures: AtomicU64,
    /// Reallocations done by `mremap`.
    pub remaps: AtomicU64,
}

/// The process-wide counters of direct mappings.
pub static LARGE: LargeCounters = LargeCounters {
    allocs: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    bytes_held: AtomicU64::new(0),
    bytes_returned: AtomicU64::new(0),
    failures: AtomicU64::new(0),
    remaps: AtomicU64::new(0),
};

/// Bytes a direct mapping of `size` occupies, or `None` on overflow.
#[inline]
pub fn mapped_bytes(size: usize) -> Option<usize> {
    size.max(1).checked_next_multiple_of(os::page_size())
}

/// Maps a block for `size` bytes aligned to `align`; null on failure.
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    let Some(bytes) = mapped_bytes(size) else {
        return ptr::null_mut();
    };
    if bytes > isize::MAX as usize {
        return ptr::null_mut();
    }
    match os::map(bytes, align.max(os::page_size())) {
        Some(block) => {
            LARGE.allocs.fetch_add(1, Relaxed);
            LARGE.bytes_held.fetch_add(bytes as u64, Relaxed);
            block.as_ptr()
        }
        None => {
            LARGE.failures.fetch_add(1, Relaxed);
            ptr::null_mut()
        }
    }
}

/// Unmaps a block made by [`alloc`].
///
/// # Safety
///
/// 1. `ptr` was returned by [`alloc`] with this `size` and is not used
///    again.
pub unsafe fn dealloc(ptr: *mut u8, size: usize) {
    let (Some(block), Some(bytes)) = (NonNull::new(ptr), mapped_bytes(size)) else {
        return;
    };
    // SAFETY: duty 1: this is exactly the mapping `alloc` made.
    unsafe { os::unmap(block, bytes) };
    LARGE.frees.fetch_add(1, Relaxed);
    LARGE.bytes_held.fetch_sub(bytes as u64, Relaxed);
    LARGE.bytes_returned.fetch_add(bytes as u64, Relaxed);
}

/// Resizes a page-aligned block made by [`alloc`]; null if the OS refuses
/// (the old block is then untouched).
///
/// # Safety
///
/// 1. `ptr` was returned by [`alloc`] with `old_size` and an alignment of
///    at most one page; on success it must not be used again.
pub unsafe fn realloc(ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
    let (Some(block), Some(old_bytes), Some(new_bytes)) = (
        NonNull::new(ptr),
        mapped_bytes(old_size),
        mapped_bytes(new_size),
    ) else {
        return ptr::null_mut();
    };
    if old_bytes == new_bytes {
        return ptr;
    }
    // SAFETY: duty 1.
    match unsafe { os::remap(block, old_bytes, new_bytes) } {
        Some(moved) => {
            LARGE.remaps.fetch_add(1, Relaxed);
            LARGE.bytes_held.fetch_add(new_bytes as u64, Relaxed);
            LARGE.bytes_held.fetch_sub(old_bytes as u64, Relaxed);
            moved.as_ptr()
        }
        None => {
            LARGE.failures.fetch_add(1, Relaxed);
            ptr::null_mut()
        }
    }
}
