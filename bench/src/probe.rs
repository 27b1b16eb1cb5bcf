//! What the churn probes (`churn-layout`, `churn-rtt-probe`) share: their
//! numeric arguments and the burst they time.

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;

/// Bytes written into every buffer of a burst (a packet header).
pub const HEADER: usize = 64;

/// Positional argument `n` as a number, `default` if absent; panics on
/// anything that is not a number.
pub fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map(|s| s.parse().expect("arguments are numbers"))
        .unwrap_or(default)
}

/// One burst through the binary's global allocator: allocate a buffer of
/// `size >= HEADER` bytes for each slot of `buffers`, write the header
/// (size, then a tag), free them in allocation order reading the size
/// back, as `service/object.rs` does.
pub fn burst(buffers: &mut [*mut u8], size: usize) {
    assert!(size >= HEADER, "a buffer holds the header");
    let layout = Layout::from_size_align(size, 8).expect("a valid size");
    for slot in buffers.iter_mut() {
        // SAFETY: `layout` has a non-zero size.
        let object = unsafe { alloc(layout) };
        assert!(!object.is_null(), "out of memory");
        // SAFETY: a fresh block of `size >= HEADER` bytes, 8-aligned.
        unsafe {
            object.cast::<u32>().write(size as u32);
            object.add(4).write_bytes(0x5a, HEADER - 4);
        }
        *slot = object;
    }
    for &object in black_box(&*buffers).iter() {
        // SAFETY: written above; freed once, with the layout it came from.
        unsafe {
            let size = object.cast::<u32>().read() as usize;
            dealloc(object, Layout::from_size_align_unchecked(size, 8));
        }
    }
}
