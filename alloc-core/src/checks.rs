//! Misuse detection (feature `checks`, off by default).
//!
//! With the feature on, the engine keeps, per node, a bitmap with one bit
//! per 8-byte granule of the arena (set while an object starting there is
//! handed out) and a class tag per 64 KiB chunk (which class's slab owns
//! it). Every allocation sets its bit; every free checks, before the object
//! is cached anywhere, that
//!
//! * the pointer lies in the arena (else: "free of a pointer sheafalloc
//!   never handed out");
//! * its chunk belongs to a slab of the class the layout names (else:
//!   "dealloc with the layout of another cache");
//! * it is the start of a slot (else: "free of an interior pointer");
//! * its bit is set (else: "double free").
//!
//! and clears the bit. A failed check writes one line naming the pointer
//! and the cache to stderr, without allocating, and aborts. The cost is two
//! atomic operations and a few loads per allocation and free; leave it off
//! in production, turn it on to hunt memory bugs. Directly mapped objects
//! (above 256 KiB) are checked only for not lying in the arena.

use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::arena::{self, CHUNK_SHIFT};
use crate::node::{NodeId, MAX_NODES};
use crate::os;
use crate::size_class::SizeClass;
use crate::slab::slab_order;

static BITMAPS: [AtomicUsize; MAX_NODES] = [const { AtomicUsize::new(0) }; MAX_NODES];
static TAGS: [AtomicUsize; MAX_NODES] = [const { AtomicUsize::new(0) }; MAX_NODES];

/// Reserves the bitmap and tag table of a node (at arena initialisation).
pub(crate) fn reserve(node: usize, span: usize) -> bool {
    let (Some(bitmap_slot), Some(tags_slot)) = (BITMAPS.get(node), TAGS.get(node)) else {
        return false;
    };
    let Some(bitmap) = os::reserve(span / 64, os::page_size()) else {
        return false;
    };
    let Some(tags) = os::reserve(span >> CHUNK_SHIFT, os::page_size()) else {
        return false;
    };
    bitmap_slot.store(bitmap.as_ptr() as usize, Ordering::Relaxed);
    tags_slot.store(tags.as_ptr() as usize, Ordering::Relaxed);
    true
}

/// Commits the bitmap and tags covering chunks `[start, end)` of `node`.
pub(crate) fn commit(node: NodeId, start: u32, end: u32) -> bool {
    let page = os::page_size();
    let commit_range = |base: usize, from: usize, to: usize| {
        // The page size is a power of two: the mask cannot wrap.
        let from = from & !page.wrapping_sub(1);
        let (Some(to), Some(start)) = (to.checked_next_multiple_of(page), base.checked_add(from))
        else {
            return false;
        };
        let Some(bytes) = to.checked_sub(from) else {
            return false;
        };
        core::ptr::NonNull::new(start as *mut u8).is_some_and(|p| os::commit(p, bytes))
    };
    const CHUNK_BITS_BYTES: usize = (1usize << CHUNK_SHIFT) / 64;
    let bitmap = node.entry(&BITMAPS).load(Ordering::Relaxed);
    let tags = node.entry(&TAGS).load(Ordering::Relaxed);
    // Cannot wrap: chunk indices are below the node's chunk limit (at most
    // 2^20), so the byte offsets are below 2^30.
    commit_range(
        bitmap,
        (start as usize).wrapping_mul(CHUNK_BITS_BYTES),
        (end as usize).wrapping_mul(CHUNK_BITS_BYTES),
    ) && commit_range(tags, start as usize, end as usize)
}

fn tag(node: NodeId, chunk: u32) -> &'static AtomicU8 {
    let tags = node.entry(&TAGS).load(Ordering::Relaxed) as *const AtomicU8;
    // SAFETY: the tag table covers every chunk of the node's region and is
    // committed for every chunk below its lane region's bump pointer
    // (`commit`), which any chunk holding a slab is; AtomicU8 has the
    // layout of u8.
    unsafe { &*tags.add(chunk as usize) }
}

/// Marks the chunks of a new slab as owned by `class` (or 0 = no class).
pub(crate) fn tag_run(node: NodeId, first_chunk: u32, class: Option<SizeClass>) {
    // Cannot wrap: a class index is below `NUM_CLASSES` (101), and the run's
    // chunks lie below the node's chunk limit (at most 2^20).
    let value = class.map_or(0, |c| (c.index() as u8).wrapping_add(1));
    let chunks = class.map_or(1, |c| 1u32 << slab_order(c));
    for chunk in first_chunk..first_chunk.wrapping_add(chunks) {
        tag(node, chunk).store(value, Ordering::Release);
    }
}

/// Clears the tags of a slab of `class` that goes back to the arena.
pub(crate) fn untag_run(node: NodeId, first_chunk: u32, class: SizeClass) {
    // Cannot wrap: the run's chunks lie below the node's chunk limit.
    for chunk in first_chunk..first_chunk.wrapping_add(1u32 << slab_order(class)) {
        tag(node, chunk).store(0, Ordering::Release);
    }
}

fn bit(node: NodeId, ptr: usize) -> (&'static AtomicU64, u64) {
    // Cannot wrap: `ptr` lies in `node`'s region (callers found `node` with
    // `arena::home_node`).
    let granule = ptr.wrapping_sub(arena::node_base(node)) >> 3;
    let words = node.entry(&BITMAPS).load(Ordering::Relaxed) as *const AtomicU64;
    // SAFETY: the bitmap covers the node's region (one bit per 8 bytes) and
    // is committed for every chunk that holds a slab.
    (unsafe { &*words.add(granule / 64) }, 1u64 << (granule % 64))
}

/// Records that `ptr` (an object of `class` just handed out) is live.
pub fn on_alloc(ptr: *mut u8, class: SizeClass) {
    let Some(node) = arena::home_node(ptr as usize) else {
        fail(b"allocation outside the arena", ptr, class);
    };
    let (word, mask) = bit(node, ptr as usize);
    if word.fetch_or(mask, Ordering::AcqRel) & mask != 0 {
        fail(
            b"internal error: a live object was handed out again",
            ptr,
            class,
        );
    }
}

/// Checks a free of `ptr` with a layout of `class` (see the module doc) and
/// records it; aborts on misuse.
pub fn on_free(ptr: *mut u8, class: SizeClass) {
    let Some(node) = arena::home_node(ptr as usize) else {
        fail(b"free of a pointer sheafalloc never handed out", ptr, class);
    };
    let chunk = arena::chunk_index(node, ptr as usize);
    if !arena::is_carved(node, chunk) {
        fail(b"free of a pointer sheafalloc never handed out", ptr, class);
    }
    let owner = tag(node, chunk).load(Ordering::Acquire);
    if owner == 0 {
        fail(b"free of a pointer sheafalloc never handed out", ptr, class);
    }
    // Cannot wrap: `owner != 0` (checked above).
    if usize::from(owner.wrapping_sub(1)) != class.index() {
        fail(b"dealloc with the layout of another cache", ptr, class);
    }
    // Cannot wrap: a slab is at least one chunk, and the slab starts at or
    // below `ptr`.
    let slab_base = ptr as usize & !crate::slab::slab_bytes(class).wrapping_sub(1);
    let first = slab_base.wrapping_add(crate::colour::offset(class, slab_base));
    let offset = (ptr as usize).checked_sub(first);
    if offset.and_then(|offset| offset.checked_rem(class.stride())) != Some(0) {
        fail(b"free of an interior pointer", ptr, class);
    }
    let (word, mask) = bit(node, ptr as usize);
    if word.fetch_and(!mask, Ordering::AcqRel) & mask == 0 {
        fail(
            b"double free (or free of an object never allocated)",
            ptr,
            class,
        );
    }
}

/// Checks that a pointer freed as a direct mapping is not an arena object.
pub fn on_free_large(ptr: *mut u8, size: usize) {
    if arena::home_node(ptr as usize).is_some() {
        let class = SizeClass::for_layout(size.min(crate::size_class::MAX_CLASS_SIZE), 8)
            .unwrap_or(SizeClass::from_index(0).unwrap_or_else(|| os::abort()));
        fail(
            b"dealloc of a slab object with the layout of a direct mapping",
            ptr,
            class,
        );
    }
}

/// Writes `sheafalloc: <what>: pointer 0x... (cache size-N)` and aborts.
#[cold]
fn fail(what: &[u8], ptr: *mut u8, class: SizeClass) -> ! {
    let mut line = [0u8; 200];
    let mut len = 0;
    // Appends what fits; the rest of a long line is cut off.
    let mut put = |bytes: &[u8]| {
        for &byte in bytes {
            let Some(slot) = line.get_mut(len) else {
                return;
            };
            *slot = byte;
            // Cannot wrap: `len < line.len()` (a slot was found).
            len = len.wrapping_add(1);
        }
    };
    put(b"sheafalloc: ");
    put(what);
    put(b": pointer 0x");
    // Hex digits from the right, one nibble each.
    let mut rest = ptr as usize;
    let mut digits = [0u8; 16];
    for digit in digits.iter_mut().rev() {
        *digit = b"0123456789abcdef".get(rest & 0xF).copied().unwrap_or(b'?');
        rest >>= 4;
    }
    let first = digits.iter().position(|d| *d != b'0').unwrap_or(15);
    put(digits.get(first..).unwrap_or(&digits));
    put(b" (cache ");
    put(class.name().as_str().as_bytes());
    put(b")\n");
    os::write_stderr(line.get(..len).unwrap_or(&line));
    os::abort()
}
