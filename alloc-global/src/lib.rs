//! sheafalloc: a Rust global allocator for high-rate network services,
//! built like Linux SLUB "sheaves", with statistics and a live tuning knob.
//!
//! Adopt it with one line:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();
//!
//! fn main() {
//!     let mut packets: Vec<Vec<u8>> = Vec::new();
//!     for i in 0..1000 {
//!         packets.push(vec![i as u8; 256]);
//!     }
//!     let stats = sheafalloc::cache("size-256").expect("the 256-byte cache exists");
//!     assert!(stats.allocations >= 1000);
//!     println!("{}: {} live objects", stats.name, stats.live_objects);
//! }
//! ```
//!
//! # Layers
//!
//! `sheafalloc-core` holds the engine (size classes, slabs, sheaves, barns,
//! caches, statistics). This crate holds the `GlobalAlloc` implementation —
//! the per-thread cache in a const `thread_local!`, the fast paths, the
//! dispatch to direct mappings and `realloc` — and the public statistics and
//! tuning API.
#![warn(missing_docs)]
// No panic can start inside the allocator (see the same lints in
// `sheafalloc-core`): no indexing, slicing or arithmetic that can panic, no
// `unwrap`/`expect`/`panic!`/`unreachable!`. Tests may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::panic,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::panic_in_result_fn
    )
)]

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;

use sheafalloc_core::large;
use sheafalloc_core::size_class::SizeClass;
use sheafalloc_core::thread_cache::{uncached_alloc, uncached_free, ThreadCache};
use sheafalloc_core::NodeId;

mod api;
#[cfg(feature = "control")]
mod control;
mod topology;

pub use api::*;
pub use topology::{
    discover_topology, home_node, thread_node, topology, NodeInfo, Topology, TopologyError,
};

thread_local! {
    /// The calling thread's sheaves. Const-initialised and without `Drop`:
    /// touching it never allocates or registers a destructor; thread exit is
    /// handled by the engine's pthread key.
    static THREAD_CACHE: ThreadCache = const { ThreadCache::new() };
}

/// The global allocator. Install it with
/// `#[global_allocator] static GLOBAL: SheafAlloc = SheafAlloc::new();`.
///
/// Every instance shares the same process-wide engine: the type carries no
/// state.
#[derive(Clone, Copy, Debug, Default)]
pub struct SheafAlloc {
    _private: (),
}

impl SheafAlloc {
    /// The allocator (a `const fn`, for the `static`).
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

// SAFETY: `alloc` returns null or a block of at least `layout.size()` bytes
// aligned to `layout.align()` that no one else uses (size classes guarantee
// the size and alignment; see `SizeClass::for_layout`); `dealloc` accepts
// exactly those blocks with the same layout; `realloc` preserves the
// contents up to the smaller size. Nothing here unwinds.
unsafe impl GlobalAlloc for SheafAlloc {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // HOT PATH: one size/align check, one table load, a thread-local pop.
        // No atomic RMW, no lock, no call.
        if let Some(class) = SizeClass::for_small_layout(layout.size(), layout.align()) {
            if let Some(object) = pop_fast(class) {
                // SAFETY: a sheaf lists objects, never null (`Sheaf`
                // invariant), and the per-CPU pop turns its miss (null)
                // into `None`. Said here so that the caller's null test
                // (`handle_alloc_error`) folds away where this inlines.
                unsafe { core::hint::assert_unchecked(!object.is_null()) };
                return object;
            }
        }
        alloc_slow(layout)
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // HOT PATH: the class comes from the layout (no memory read); push
        // onto the main sheaf if the object is local and the sheaf has room.
        if let Some(class) = SizeClass::for_small_layout(layout.size(), layout.align()) {
            // SAFETY: `ptr` was allocated with `layout` (so for `class`)
            // and is no longer used: the caller's `dealloc` contract.
            if unsafe { push_fast(ptr, class) } {
                return;
            }
            // SAFETY: as above. A tail call: this function saves nothing
            // for it.
            return unsafe { free_class_slow(ptr, class) };
        }
        // SAFETY: forwarded from our caller.
        unsafe { dealloc_slow(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match SizeClass::for_layout(layout.size(), layout.align()) {
            Some(_) => {
                // SAFETY: forwarded from our caller.
                let object = unsafe { self.alloc(layout) };
                if !object.is_null() {
                    // SAFETY: the object has room for `layout.size()` bytes.
                    unsafe { ptr::write_bytes(object, 0, layout.size()) };
                }
                object
            }
            // Fresh mappings are zero already: no memset.
            None => large::alloc(layout.size(), layout.align()),
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // HOT PATH (a `String` or `Vec` growing through the small classes):
        // both sizes in the lookup table, each looked up once, with one
        // bound test for both.
        if let Some((old_class, new_class)) =
            SizeClass::for_small_pair(layout.size(), new_size, align)
        {
            if old_class == new_class {
                // Same slot size: the object already has room.
                return ptr;
            }
            // SAFETY: forwarded from our caller; `old_class` and `new_class`
            // are the classes of the two layouts.
            return unsafe { self.move_to_class(ptr, layout, new_size, old_class, new_class) };
        }
        // SAFETY: forwarded from our caller.
        unsafe { self.realloc_other(ptr, layout, new_size) }
    }
}

impl SheafAlloc {
    /// Moves a small object to another small class. A copy of at most 32
    /// bytes is done inline (two overlapping loads and stores), not by a
    /// call to `memcpy`.
    ///
    /// Every call this path makes is its last act (a tail call): the
    /// allocation's miss, a copy through `memcpy` and the free's miss each
    /// hand the rest of the move to an out-of-line function. So when the
    /// pop and the push hit, `realloc` makes no call: it saves only the
    /// callee-saved registers the inlined sections need (three, against
    /// seven before), and it looks each class up once.
    ///
    /// # Safety
    ///
    /// 1. `realloc`'s contract for `ptr`, `layout` and `new_size`.
    /// 2. `old_class` is the class of `layout` and `new_class` that of
    ///    `new_size` with `layout.align()`, both by the lookup table.
    #[inline(always)]
    unsafe fn move_to_class(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        old_class: SizeClass,
        new_class: SizeClass,
    ) -> *mut u8 {
        // Both slots have room for the smaller slot's size (duty 2), so a
        // copy may round the bytes kept up to it: the extra bytes are slack
        // of the old slot, copied as `MaybeUninit`.
        let slot = old_class.object_size().min(new_class.object_size());
        if slot > 32 {
            // SAFETY: duty 1.
            return unsafe { move_with_memcpy(ptr, layout, new_size) };
        }
        let Some(new_ptr) = pop_fast(new_class) else {
            // SAFETY: duty 1; the classes are the layouts' (duty 2).
            return unsafe { move_small_slow(ptr, old_class, new_class) };
        };
        // SAFETY: distinct live blocks of at least `slot` bytes each (duty
        // 2), `8 <= slot <= 32`.
        unsafe { copy_small(ptr, new_ptr, slot) };
        // SAFETY: `ptr` is an object of `old_class` (duty 2) that the caller
        // gave up (duty 1); its bytes are in `new_ptr` now.
        if unsafe { push_fast(ptr, old_class) } {
            return new_ptr;
        }
        // SAFETY: as above.
        unsafe { free_slow_and_return(ptr, old_class, new_ptr) }
    }

    /// `realloc` of everything else: large or over-aligned layouts, and a
    /// small object growing past the lookup table.
    ///
    /// # Safety
    ///
    /// `realloc`'s contract.
    #[inline(never)]
    unsafe fn realloc_other(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        let old_class = SizeClass::for_layout(layout.size(), align);
        let new_class = SizeClass::for_layout(new_size, align);
        if old_class.is_some() && old_class == new_class {
            // Same slot size: the object already has room.
            return ptr;
        }
        if old_class.is_none() && new_class.is_none() && align <= sheafalloc_core::os::page_size() {
            // SAFETY: `ptr` is a direct mapping of `layout.size()` bytes with
            // at most page alignment (our caller's duty and the check above).
            let moved = unsafe { large::realloc(ptr, layout.size(), new_size) };
            if !moved.is_null() {
                return moved;
            }
        }
        // SAFETY: forwarded from our caller.
        unsafe { self.move_object(ptr, layout, new_size, None) }
    }

    /// Allocates `new_size` bytes, copies what the object keeps and frees
    /// it: the end of every `realloc` that moves. `small_copy` is the
    /// length of an inline copy (8 to 32 bytes); without it, `memcpy`
    /// copies the smaller of the two sizes.
    ///
    /// # Safety
    ///
    /// 1. `realloc`'s contract for `ptr`, `layout` and `new_size`.
    /// 2. With `small_copy`, both the old block and a block for `new_size`
    ///    with `layout.align()` have at least that many bytes, and it lies
    ///    in `8..=32`.
    #[inline(always)]
    unsafe fn move_object(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        small_copy: Option<usize>,
    ) -> *mut u8 {
        // SAFETY: duty 1: a valid layout (non-zero size that does not
        // overflow when rounded to its alignment).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: forwarded from our caller.
        let new_ptr = unsafe { self.alloc(new_layout) };
        if new_ptr.is_null() {
            return new_ptr;
        }
        // SAFETY: the blocks are distinct live allocations; the inline copy
        // stays within `len` bytes, which both have (duty 2), and `memcpy`
        // within the smaller size, which both hold. `ptr` is freed with its
        // own layout (duty 1).
        unsafe {
            match small_copy {
                Some(len) => copy_small(ptr, new_ptr, len),
                None => ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size)),
            }
            self.dealloc(ptr, layout);
        }
        new_ptr
    }
}

/// HOT PATH (alloc): an object of `class` from the thread's main sheaf
/// (or, in per-CPU mode, its CPU's), seen by the misuse checks when they
/// are built; `None` if the sheaf is empty.
#[inline(always)]
fn pop_fast(class: SizeClass) -> Option<*mut u8> {
    let Ok(Some(object)) = THREAD_CACHE.try_with(|cache| cache.pop(class)) else {
        return None;
    };
    #[cfg(feature = "checks")]
    sheafalloc_core::checks::on_alloc(object, class);
    Some(object)
}

/// HOT PATH (free): pushes `ptr` onto the thread's (or CPU's) main sheaf
/// of `class` if it is local and the sheaf has room; false otherwise, and
/// the caller frees it by the slow path. The misuse checks, when built, see
/// the free here, in either case.
///
/// # Safety
///
/// 1. `ptr` was allocated by this allocator for `class` and is no longer
///    used.
#[inline(always)]
unsafe fn push_fast(ptr: *mut u8, class: SizeClass) -> bool {
    #[cfg(feature = "checks")]
    sheafalloc_core::checks::on_free(ptr, class);
    let pushed = THREAD_CACHE.try_with(|cache| {
        // SAFETY: duty 1.
        unsafe { cache.push(class, ptr) }
    });
    matches!(pushed, Ok(true))
}

/// A small move that copies through `memcpy`, out of line so that
/// `realloc` reaches it by a tail call.
///
/// # Safety
///
/// `realloc`'s contract for `ptr`, `layout` and `new_size`.
#[inline(never)]
unsafe fn move_with_memcpy(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: forwarded from our caller.
    unsafe { SheafAlloc::new().move_object(ptr, layout, new_size, None) }
}

/// A small move of at most 32 bytes whose allocation missed the fast path:
/// allocate through the slow path, copy, free. Null (and `ptr` untouched)
/// only if the OS refuses memory.
///
/// # Safety
///
/// 1. `ptr` is a live object of `old_class` that the caller gives up once
///    this returns non-null.
/// 2. The smaller of the two classes' slots is at most 32 bytes.
#[cold]
#[inline(never)]
unsafe fn move_small_slow(ptr: *mut u8, old_class: SizeClass, new_class: SizeClass) -> *mut u8 {
    let new_ptr = alloc_class(new_class);
    if new_ptr.is_null() {
        return new_ptr;
    }
    let slot = old_class.object_size().min(new_class.object_size());
    // SAFETY: distinct live blocks with at least `slot` bytes each, and
    // `8 <= slot <= 32` (duty 2; no slot is smaller than 8 bytes).
    unsafe { copy_small(ptr, new_ptr, slot) };
    #[cfg(feature = "checks")]
    sheafalloc_core::checks::on_free(ptr, old_class);
    // SAFETY: `ptr` is given up (duty 1).
    unsafe { free_class(ptr, old_class) };
    new_ptr
}

/// Frees `ptr` through the slow path and returns `moved`: the end of a
/// small move whose free missed, reached by a tail call.
///
/// # Safety
///
/// 1. As [`free_class`].
#[cold]
#[inline(never)]
unsafe fn free_slow_and_return(ptr: *mut u8, class: SizeClass, moved: *mut u8) -> *mut u8 {
    // SAFETY: duty 1.
    unsafe { free_class(ptr, class) };
    moved
}

/// Copies `len` bytes, `8 <= len <= 32`, from `src` to `dst` with two
/// overlapping loads and two stores (of 8 bytes up to 16, else of 16).
///
/// # Safety
///
/// 1. `src` and `dst` are valid for `len` bytes and do not overlap, and
///    `8 <= len <= 32`.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: duty 1; `len` is at least the word's size in each branch.
    unsafe {
        if len <= 16 {
            copy_head_and_tail::<u64>(src, dst, len);
        } else {
            copy_head_and_tail::<u128>(src, dst, len);
        }
    }
}

/// Copies `len` bytes as the first and the last `size_of::<W>()` bytes
/// (overlapping when `len` is less than twice that), both loaded before
/// either is stored, as `MaybeUninit` (the bytes may be uninitialised).
///
/// # Safety
///
/// 1. `src` and `dst` are valid for `len` bytes and do not overlap, and
///    `size_of::<W>() <= len <= 2 * size_of::<W>()`.
#[inline(always)]
unsafe fn copy_head_and_tail<W>(src: *const u8, dst: *mut u8, len: usize) {
    use core::mem::{size_of, MaybeUninit};
    // Cannot wrap: `len >= size_of::<W>()` (duty 1).
    let tail = len.wrapping_sub(size_of::<W>());
    // SAFETY: duty 1: both accesses of each block lie within its `len`
    // bytes (the tail ends at `len`); unaligned accesses of `MaybeUninit`.
    unsafe {
        let head_word = src.cast::<MaybeUninit<W>>().read_unaligned();
        let tail_word = src.add(tail).cast::<MaybeUninit<W>>().read_unaligned();
        dst.cast::<MaybeUninit<W>>().write_unaligned(head_word);
        dst.add(tail)
            .cast::<MaybeUninit<W>>()
            .write_unaligned(tail_word);
    }
}

/// Everything the fast path does not handle: an empty main sheaf, a class
/// the lookup table does not cover, over-aligned and large layouts.
#[cold]
#[inline(never)]
fn alloc_slow(layout: Layout) -> *mut u8 {
    match SizeClass::for_layout(layout.size(), layout.align()) {
        Some(class) => alloc_class(class),
        None => large::alloc(layout.size(), layout.align()),
    }
}

/// An object of `class` by whatever path has one (the main sheaf, the
/// thread's slow path, or the slabs when the thread-local is gone).
fn alloc_class(class: SizeClass) -> *mut u8 {
    let object = THREAD_CACHE
        .try_with(|cache| cache.pop(class).unwrap_or_else(|| cache.alloc_slow(class)))
        .unwrap_or_else(|_| uncached_alloc(NodeId::ZERO, class));
    #[cfg(feature = "checks")]
    if !object.is_null() {
        sheafalloc_core::checks::on_alloc(object, class);
    }
    object
}

/// # Safety
///
/// 1. `ptr` was allocated by this allocator with `layout` and is no longer
///    used.
#[cold]
#[inline(never)]
unsafe fn dealloc_slow(ptr: *mut u8, layout: Layout) {
    match SizeClass::for_layout(layout.size(), layout.align()) {
        Some(class) => {
            if SizeClass::for_small_layout(layout.size(), layout.align()).is_some() {
                // The fast path tried this push (and the misuse checks
                // saw the free) already: straight to the slow path.
                // SAFETY: duty 1: `ptr` is a free object of `class`.
                return unsafe { free_class_slow(ptr, class) };
            }
            #[cfg(feature = "checks")]
            sheafalloc_core::checks::on_free(ptr, class);
            // SAFETY: duty 1: `ptr` is a free object of `class`.
            unsafe { free_class(ptr, class) }
        }
        None => {
            #[cfg(feature = "checks")]
            sheafalloc_core::checks::on_free_large(ptr, layout.size());
            // SAFETY: duty 1: a direct mapping of `layout.size()` bytes.
            unsafe { large::dealloc(ptr, layout.size()) }
        }
    }
}

/// Frees `ptr`, an object of `class` whose fast-path push just missed, by
/// the thread's slow path (or the slabs when the thread-local is gone).
///
/// # Safety
///
/// 1. `ptr` was allocated by this allocator for `class` and is no longer
///    used.
#[cold]
#[inline(never)]
unsafe fn free_class_slow(ptr: *mut u8, class: SizeClass) {
    // SAFETY: duty 1.
    let done = THREAD_CACHE.try_with(|cache| unsafe { cache.dealloc_slow(class, ptr) });
    if done.is_err() {
        // SAFETY: duty 1.
        unsafe { uncached_free(class, ptr) }
    }
}

/// Frees `ptr`, an object of `class`, by whatever path takes it (the main
/// sheaf, the thread's slow path, or the slabs when the thread-local is
/// gone). The misuse checks, when built, have seen it already.
///
/// # Safety
///
/// 1. `ptr` was allocated by this allocator for `class` and is no longer
///    used.
unsafe fn free_class(ptr: *mut u8, class: SizeClass) {
    let done = THREAD_CACHE.try_with(|cache| {
        // SAFETY: duty 1.
        if !unsafe { cache.push(class, ptr) } {
            // SAFETY: duty 1.
            unsafe { cache.dealloc_slow(class, ptr) }
        }
    });
    if done.is_err() {
        // SAFETY: duty 1.
        unsafe { uncached_free(class, ptr) }
    }
}

/// Runs `f` with the calling thread's cache (for the API module).
fn with_thread_cache<R>(f: impl FnOnce(&ThreadCache) -> R) -> Option<R> {
    THREAD_CACHE.try_with(f).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_small_copies_exactly_len_bytes() {
        let src: [u8; 40] = core::array::from_fn(|i| i as u8 + 1);
        for len in 8..=32 {
            let mut dst = [0xEEu8; 40];
            // SAFETY: both buffers hold 40 bytes, more than `len`, and are
            // distinct.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr(), len) };
            assert_eq!(dst[..len], src[..len], "len {len}");
            assert!(
                dst[len..].iter().all(|&b| b == 0xEE),
                "len {len} wrote past its end"
            );
        }
    }

    /// The out-of-line ends of a small move (allocation missed; free
    /// missed) keep the bytes and free the old object: the next allocation
    /// of its class may hand it out again (with the misuse checks built,
    /// as the tests are, handing out an object still marked live aborts).
    #[test]
    fn the_slow_ends_of_a_small_move_keep_the_bytes_and_free_the_old_object() {
        let allocator = SheafAlloc::new();
        let (old_layout, new_size) = (Layout::from_size_align(24, 8).unwrap(), 40);
        let old_class = SizeClass::for_small_layout(24, 8).unwrap();
        let new_class = SizeClass::for_small_layout(new_size, 8).unwrap();
        assert_ne!(old_class, new_class);
        let fill = |ptr: *mut u8, seed: u8| {
            for i in 0..24 {
                // SAFETY: the object holds at least 24 bytes.
                unsafe { ptr.add(i).write(seed.wrapping_add(i as u8)) };
            }
        };
        let kept = |ptr: *mut u8, seed: u8| {
            // SAFETY: the object holds at least 24 bytes.
            (0..24).all(|i| unsafe { ptr.add(i).read() } == seed.wrapping_add(i as u8))
        };
        for round in 0..64u8 {
            // SAFETY: non-zero layouts; each pointer is live when used.
            unsafe {
                let old = allocator.alloc(old_layout);
                assert!(!old.is_null());
                fill(old, round);
                let moved = move_small_slow(old, old_class, new_class);
                assert!(!moved.is_null() && moved != old);
                assert!(kept(moved, round), "round {round}: bytes lost");
                let again = allocator.alloc(old_layout);
                assert!(!again.is_null());
                fill(again, round ^ 0x5A);
                let moved_again = allocator.alloc(Layout::from_size_align(new_size, 8).unwrap());
                fill(moved_again, round ^ 0x33);
                // As `move_to_class` does before a free that may miss.
                #[cfg(feature = "checks")]
                sheafalloc_core::checks::on_free(again, old_class);
                assert_eq!(
                    free_slow_and_return(again, old_class, moved_again),
                    moved_again
                );
                assert!(
                    kept(moved, round),
                    "round {round}: the move was overwritten"
                );
                allocator.dealloc(moved, Layout::from_size_align(new_size, 8).unwrap());
                allocator.dealloc(moved_again, Layout::from_size_align(new_size, 8).unwrap());
            }
        }
    }

    #[test]
    fn realloc_through_the_small_classes_keeps_every_byte() {
        let allocator = SheafAlloc::new();
        let mut layout = Layout::from_size_align(1, 1).unwrap();
        // SAFETY: a non-zero layout; every pointer below is the live one.
        let mut ptr = unsafe { allocator.alloc(layout) };
        assert!(!ptr.is_null());
        // SAFETY: `ptr` holds one byte.
        unsafe { ptr.write(0xA5) };
        // Grow by odd steps through every small class and past the lookup
        // table, then shrink back: each step keeps the bytes written so far.
        let sizes = (1..=40)
            .map(|i| i * 211)
            .chain((1..40).rev().map(|i| i * 211));
        for new_size in sizes {
            // SAFETY: `ptr` was allocated with `layout`; `new_size` is not 0.
            let moved = unsafe { allocator.realloc(ptr, layout, new_size) };
            assert!(!moved.is_null());
            let kept = layout.size().min(new_size);
            for i in 0..kept {
                let expected = if i == 0 { 0xA5 } else { (i % 251) as u8 };
                // SAFETY: `moved` holds at least `kept` bytes.
                let byte = unsafe { moved.add(i).read() };
                assert_eq!(byte, expected, "byte {i} at size {new_size}");
            }
            for i in kept.max(1)..new_size {
                // SAFETY: `moved` holds `new_size` bytes.
                unsafe { moved.add(i).write((i % 251) as u8) };
            }
            ptr = moved;
            layout = Layout::from_size_align(new_size, 1).unwrap();
        }
        // SAFETY: `ptr` is live with `layout`.
        unsafe { allocator.dealloc(ptr, layout) };
    }
}
