//! The arena: one contiguous reservation of address space, one region per
//! node, each split into one sub-region per [`Lane`], carved into 64 KiB
//! chunks; and the side table of slab metadata.
//!
//! # Why one reservation
//!
//! The home node of any object is pure arithmetic on its address:
//! `(ptr - base) >> node_shift`, and so is its home lane, the next
//! `log2(LANES)` bits down. Finding an object's slab is arithmetic too,
//! because a slab of `2^order` chunks starts on a `2^order`-chunk boundary:
//! `ptr & !(slab_bytes - 1)`. None of them needs to read memory.
//!
//! # Lane regions
//!
//! A slab for a CPU of lane `l` comes from `l`'s region of the node (while
//! that has room), so an object's lane is where it was carved, and a CPU's
//! free path tells its own lane's objects from another's with the same one
//! range test that tells its node's from another node's. Each lane region
//! has its own bump pointer and free runs; a lane whose region is used up
//! takes runs from the others'.
//!
//! # Runs
//!
//! A *run* is `2^order` chunks (order 0..=[`MAX_SLAB_ORDER`]) aligned to its
//! size; a slab occupies exactly one run. Runs come from a bump pointer that
//! commits address space as it goes, or from per-order free lists of runs
//! that slabs gave back (their pages already returned to the OS). Gaps left
//! by aligning the bump pointer go to the free lists, and a larger free run
//! is split when a smaller order has none. Runs are not merged again: memory
//! still goes back to the OS, only address space stays fragmented.
//!
//! # Locks
//!
//! Each node's `ArenaInner` is guarded by its own mutex; callers may hold a
//! slab-list lock while taking it (never the reverse).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::lane::{Lane, LANES};
use crate::node::{NodeId, MAX_NODES};
use crate::os;
use crate::slab::{SlabMeta, NIL};
use crate::sync::{LockRank, Mutex};

/// log2 of the chunk size.
pub const CHUNK_SHIFT: u32 = 16;
/// The unit of address space handed to slabs: 64 KiB.
pub const CHUNK_BYTES: usize = 1 << CHUNK_SHIFT;
/// Largest run order: `2^5` chunks = 2 MiB.
pub const MAX_SLAB_ORDER: usize = 5;
const ORDERS: usize = MAX_SLAB_ORDER + 1;

/// Per-node region sizes tried at start-up, largest first.
const NODE_SPAN_SHIFTS: [u32; 6] = [36, 34, 32, 31, 30, 28];

static ARENA_BASE: AtomicUsize = AtomicUsize::new(0);
static BIND_FAILURES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Times binding slab memory to its node failed (see `topology::bind_mode`).
pub fn bind_failures() -> u64 {
    BIND_FAILURES.load(Ordering::Relaxed)
}
static NODE_SHIFT: AtomicU32 = AtomicU32::new(0);

/// Everything an arena region needs, per node.
struct NodeArena {
    /// Address of this node's `SlabMeta` table (set once at init).
    meta: AtomicUsize,
    /// Mirror of each lane region's `LaneRuns::bump` for lock-free readers
    /// (only grows).
    bump: [AtomicU32; LANES],
    inner: Mutex<ArenaInner>,
}

/// Bookkeeping of one node's region: one [`LaneRuns`] per lane region.
struct ArenaInner {
    lanes: [LaneRuns; LANES],
}

/// Bookkeeping of one lane's region of a node, chunks `start..limit` of
/// the node's region.
///
/// Invariants: `start <= bump <= limit`; every chunk in `start..bump` is
/// committed, with its metadata entry (the table's bytes up to
/// `meta_committed_end` are), and belongs to exactly one slab or one free
/// run; each `free_runs[o]` list links (through `SlabMeta::next`) runs of
/// order `o` of this region whose pages hold no data.
struct LaneRuns {
    start: u32,
    bump: u32,
    limit: u32,
    meta_committed_end: usize,
    free_runs: [u32; ORDERS],
    free_run_count: [u32; ORDERS],
}

impl LaneRuns {
    const UNSET: LaneRuns = LaneRuns {
        start: 0,
        bump: 0,
        limit: 0,
        meta_committed_end: 0,
        free_runs: [NIL; ORDERS],
        free_run_count: [0; ORDERS],
    };
}

static NODE_ARENAS: [NodeArena; MAX_NODES] = [const {
    NodeArena {
        meta: AtomicUsize::new(0),
        bump: [const { AtomicU32::new(0) }; LANES],
        inner: Mutex::new(
            LockRank::Arena,
            ArenaInner {
                lanes: [LaneRuns::UNSET; LANES],
            },
        ),
    }
}; MAX_NODES];

/// log2 of [`LANES`]: a node's region splits into `2^LANE_BITS` lane
/// regions.
const LANE_BITS: u32 = LANES.trailing_zeros();

/// Reserves the regions of `node_count` nodes. Called by the runtime's
/// initialisation; a second call (a child that redoes an initialisation
/// its parent was in the middle of) keeps a reservation already made.
pub(crate) fn init(node_count: usize) -> bool {
    if ARENA_BASE.load(Ordering::Acquire) != 0 {
        return true;
    }
    let meta_entry = core::mem::size_of::<SlabMeta>();
    for shift in NODE_SPAN_SHIFTS {
        let span = 1usize << shift;
        let chunks = span >> CHUNK_SHIFT;
        let (Some(total), Some(meta_bytes)) =
            (span.checked_mul(node_count), chunks.checked_mul(meta_entry))
        else {
            continue;
        };
        let Some(base) = os::reserve(total, span) else {
            continue;
        };
        // A power of two of at least 2^12 chunks: the lanes split it evenly.
        let lane_chunks = (chunks >> LANE_BITS) as u32;
        for arena in NODE_ARENAS.iter().take(node_count) {
            let Some(meta) = os::reserve(meta_bytes, os::page_size()) else {
                return false;
            };
            arena.meta.store(meta.as_ptr() as usize, Ordering::Relaxed);
            let mut inner = arena.inner.lock();
            for (lane, (runs, bump)) in inner.lanes.iter_mut().zip(&arena.bump).enumerate() {
                // Cannot wrap: `lane < LANES`, and the products are at most
                // the node's chunks (at most 2^20).
                let start = lane_chunks.wrapping_mul(lane as u32);
                *runs = LaneRuns {
                    start,
                    bump: start,
                    limit: start.wrapping_add(lane_chunks),
                    meta_committed_end: (start as usize).wrapping_mul(meta_entry),
                    ..LaneRuns::UNSET
                };
                bump.store(start, Ordering::Relaxed);
            }
        }
        #[cfg(feature = "checks")]
        for node in 0..node_count {
            if !crate::checks::reserve(node, span) {
                return false;
            }
        }
        NODE_SHIFT.store(shift, Ordering::Relaxed);
        ARENA_BASE.store(base.as_ptr() as usize, Ordering::Release);
        return true;
    }
    false
}

/// Start of the arena (0 before initialisation).
#[inline(always)]
pub fn base() -> usize {
    ARENA_BASE.load(Ordering::Relaxed)
}

/// Bytes of address space per node.
#[inline(always)]
pub fn node_span() -> usize {
    let shift = NODE_SHIFT.load(Ordering::Relaxed);
    if shift == 0 {
        0
    } else {
        1usize << shift
    }
}

/// Start of `node`'s region.
#[inline(always)]
pub fn node_base(node: NodeId) -> usize {
    // Cannot wrap: `node.index() < MAX_NODES` (16) and a span is at most
    // 2^36 bytes, and the base is a user-space address; within the arena
    // (`node.index() < node_count()`) the sum is an address the arena's
    // reservation covers.
    base().wrapping_add(node.index().wrapping_mul(node_span()))
}

/// Bytes of address space per lane region of a node.
#[inline(always)]
pub fn lane_span() -> usize {
    node_span() >> LANE_BITS
}

/// Start of `lane`'s region of `node`.
#[inline(always)]
pub fn lane_base(node: NodeId, lane: Lane) -> usize {
    // Cannot wrap: the lane region lies inside the node's region.
    node_base(node).wrapping_add(lane.index().wrapping_mul(lane_span()))
}

/// Home lane of an address of the arena (`home_node(ptr)` is `Some`): the
/// lane whose region of the node holds it.
#[inline]
pub fn home_lane(ptr: usize) -> Lane {
    let shift = NODE_SHIFT.load(Ordering::Relaxed).saturating_sub(LANE_BITS);
    // Cannot wrap for an arena address (at or above the base); any other
    // gives some lane, which callers do not use.
    Lane::of_region(ptr.wrapping_sub(base()) >> shift)
}

/// Home node of an arena address, or `None` if the address is outside the
/// arena (directly mapped objects, foreign pointers).
#[inline]
pub fn home_node(ptr: usize) -> Option<NodeId> {
    let base = base();
    let span = node_span();
    if span == 0 {
        return None;
    }
    let index = ptr.checked_sub(base)? >> NODE_SHIFT.load(Ordering::Relaxed);
    if index < crate::node::node_count() {
        NodeId::new(index)
    } else {
        None
    }
}

/// Chunk index of `ptr` within `node`'s region; `ptr` must lie in that
/// region (`home_node(ptr) == Some(node)`).
#[inline]
pub(crate) fn chunk_index(node: NodeId, ptr: usize) -> u32 {
    // Cannot wrap: `ptr` lies in `node`'s region, at or above its base.
    (ptr.wrapping_sub(node_base(node)) >> CHUNK_SHIFT) as u32
}

/// Address of chunk `index` of `node`; `index` must be below the node's
/// chunk limit.
#[inline]
pub(crate) fn chunk_address(node: NodeId, index: u32) -> usize {
    // Cannot wrap: a chunk below the limit lies inside `node`'s region.
    node_base(node).wrapping_add((index as usize) << CHUNK_SHIFT)
}

/// `node`'s arena.
#[inline(always)]
fn node_arena(node: NodeId) -> &'static NodeArena {
    node.entry(&NODE_ARENAS)
}

/// The metadata entry of chunk `index` of `node`.
///
/// The pointer is valid (committed) for every chunk below the node's bump
/// pointer; the caller must hold the lock that guards the entry (see
/// `SlabMeta`).
#[inline]
pub(crate) fn meta(node: NodeId, index: u32) -> *mut SlabMeta {
    let table = node_arena(node).meta.load(Ordering::Relaxed) as *mut SlabMeta;
    table.wrapping_add(index as usize)
}

/// Takes a run of `2^order` chunks from `lane`'s region of `node`; its
/// pages read as zero. `None` when that region has no room left.
pub(crate) fn take_run(node: NodeId, lane: Lane, order: usize) -> Option<u32> {
    let mut inner = node_arena(node).inner.lock();
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    let runs = unsafe { inner.lanes.get_unchecked_mut(lane.index()) };
    if let Some(run) = pop_free(node, runs, order) {
        return Some(run);
    }
    if let Some(run) = bump_run(node, lane, runs, order) {
        return Some(run);
    }
    // Split the smallest larger free run.
    for larger in order.saturating_add(1)..ORDERS {
        if let Some(run) = pop_free(node, runs, larger) {
            // Keep the first `2^order` chunks; the upper halves, largest
            // first, go back to the free lists.
            for upper in (order..larger).rev() {
                // Cannot wrap: the upper half lies inside the run of order
                // `larger`, below the chunk limit (at most 2^20).
                push_free(node, runs, run.wrapping_add(1 << upper), upper);
            }
            return Some(run);
        }
    }
    None
}

/// Gives back a run whose pages were already returned to the OS (or never
/// touched).
pub(crate) fn give_run(node: NodeId, run: u32, order: usize) {
    let mut inner = node_arena(node).inner.lock();
    // SAFETY: `index() < LANES` (Lane invariant).
    let runs = unsafe { inner.lanes.get_unchecked_mut(lane_of_chunk(run).index()) };
    if !(runs.start..runs.limit).contains(&run) {
        crate::invariant!(false, "run outside the node's region");
        return;
    }
    push_free(node, runs, run, order);
}

/// Chunks per lane region (0 before initialisation).
fn lane_chunks() -> u32 {
    // At most 2^20 chunks per node: fits.
    (lane_span() >> CHUNK_SHIFT) as u32
}

/// The lane whose region holds chunk `chunk` of a node's region.
pub(crate) fn lane_of_chunk(chunk: u32) -> Lane {
    Lane::of_region(chunk.checked_div(lane_chunks()).unwrap_or(0) as usize)
}

fn pop_free(node: NodeId, runs: &mut LaneRuns, order: usize) -> Option<u32> {
    let (head, count) = free_list(runs, order)?;
    let run = *head;
    if run == NIL {
        return None;
    }
    // SAFETY: `run` is below the bump pointer (free-list invariant), so its
    // metadata entry is committed; free runs' entries are guarded by the
    // arena lock, which `runs` (inside the lock's data) proves we hold.
    let entry = unsafe { &mut *meta(node, run) };
    *head = entry.next;
    // Cannot wrap: the count is the length of the list, which held `run`.
    *count = count.wrapping_sub(1);
    entry.next = NIL;
    Some(run)
}

fn push_free(node: NodeId, runs: &mut LaneRuns, run: u32, order: usize) {
    let Some((head, count)) = free_list(runs, order) else {
        crate::invariant!(false, "run order above MAX_SLAB_ORDER");
        return;
    };
    // SAFETY: as in `pop_free`: the run lies below the bump pointer and the
    // arena lock is held.
    let entry = unsafe { &mut *meta(node, run) };
    entry.reset_released(order as u8);
    entry.next = *head;
    *head = run;
    // Cannot wrap: the list holds distinct runs of a region of at most
    // 2^20 chunks.
    *count = count.wrapping_add(1);
}

/// The head and length of the free list of `order` (`None` above
/// `MAX_SLAB_ORDER`).
fn free_list(runs: &mut LaneRuns, order: usize) -> Option<(&mut u32, &mut u32)> {
    Some((
        runs.free_runs.get_mut(order)?,
        runs.free_run_count.get_mut(order)?,
    ))
}

fn bump_run(node: NodeId, lane: Lane, runs: &mut LaneRuns, order: usize) -> Option<u32> {
    let run_chunks = 1u32.checked_shl(order as u32)?;
    let start = runs.bump;
    // `run_chunks` is a power of two, so `mask` cannot wrap.
    let mask = run_chunks.wrapping_sub(1);
    let aligned = start.checked_add(mask)? & !mask;
    let end = aligned.checked_add(run_chunks)?;
    if end > runs.limit {
        return None;
    }
    // Cannot wrap: `start <= aligned < end`.
    let chunks = end.wrapping_sub(start);
    // Commit the address space and the metadata entries for [start, end).
    let region = NonNull::new(chunk_address(node, start) as *mut u8)?;
    if !os::commit(region, (chunks as usize) << CHUNK_SHIFT) {
        return None;
    }
    if !commit_meta(node, runs, end) {
        return None;
    }
    #[cfg(feature = "checks")]
    if !crate::checks::commit(node, start, end) {
        return None;
    }
    // Memory committed before the topology is known stays unbound (the
    // kernel places it on first touch): binding it to node 0's OS node
    // would pin every early slab to one node for good.
    let mode = crate::topology::bind_mode();
    if mode != os::NumaBindMode::Off && crate::topology::is_discovered() {
        let bytes = (chunks as usize) << CHUNK_SHIFT;
        if !os::bind_to_node(region, bytes, crate::topology::os_node(node), mode) {
            BIND_FAILURES.fetch_add(1, Ordering::Relaxed);
            if mode == os::NumaBindMode::Strict {
                return None;
            }
        }
    }
    runs.bump = end;
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    unsafe { node_arena(node).bump.get_unchecked(lane.index()) }.store(end, Ordering::Release);
    // Hand the alignment gap to the free lists as aligned runs: at each
    // position the largest run that is aligned there and fits before
    // `aligned` (order 0, one chunk, always does).
    let mut gap = start;
    while gap < aligned {
        // Cannot wrap: `gap < aligned`.
        let room = aligned.wrapping_sub(gap);
        let largest = (gap.trailing_zeros() as usize).min(MAX_SLAB_ORDER);
        let order = (0..=largest)
            .rev()
            .find(|&order| (1u32 << order) <= room)
            .unwrap_or(0);
        push_free(node, runs, gap, order);
        // Cannot wrap: `gap + 2^order <= aligned`.
        gap = gap.wrapping_add(1 << order);
    }
    Some(aligned)
}

/// Commits the metadata entries of chunks up to `chunks` (exclusive) of
/// `runs`' region.
fn commit_meta(node: NodeId, runs: &mut LaneRuns, chunks: u32) -> bool {
    let entry = core::mem::size_of::<SlabMeta>();
    let Some(needed) = (chunks as usize).checked_mul(entry) else {
        return false;
    };
    if needed <= runs.meta_committed_end {
        return true;
    }
    let step = 64 * 1024;
    let page = os::page_size();
    let table = node_arena(node).meta.load(Ordering::Relaxed);
    let (Some(target), Some(limit)) = (
        needed.checked_next_multiple_of(step),
        (runs.limit as usize)
            .checked_mul(entry)
            .and_then(|limit| limit.checked_next_multiple_of(page)),
    ) else {
        return false;
    };
    let target = target.min(limit);
    // The first page may be shared with the region below's entries:
    // committing it again is harmless. The page size is a power of two:
    // the mask cannot wrap.
    let from = runs.meta_committed_end & !page.wrapping_sub(1);
    let (Some(start), Some(bytes)) = (table.checked_add(from), target.checked_sub(from)) else {
        return false;
    };
    let Some(start) = NonNull::new(start as *mut u8) else {
        return false;
    };
    if !os::commit(start, bytes) {
        return false;
    }
    runs.meta_committed_end = target;
    true
}

/// Forces every arena lock open.
///
/// # Safety
///
/// 1. Runs in a `fork()` child in which no thread holds an arena lock; a
///    lock found held belonged to a parent's thread that is not here.
pub(crate) unsafe fn release_locks_of_vanished_threads() {
    for arena in &NODE_ARENAS {
        // SAFETY: duty 1.
        unsafe { arena.inner.raw().force_unlock() };
    }
}

/// Locks every node's arena (fork prepare handler).
pub(crate) fn lock_all_for_fork() {
    for arena in &NODE_ARENAS {
        arena.inner.raw().lock();
    }
}

/// Unlocks what `lock_all_for_fork` locked.
///
/// # Safety
///
/// 1. The calling thread called `lock_all_for_fork` and has not unlocked.
pub(crate) unsafe fn unlock_all_after_fork() {
    for arena in &NODE_ARENAS {
        // SAFETY: duty 1: this thread holds every arena lock.
        unsafe { arena.inner.raw().unlock() };
    }
}

/// True if chunk `chunk` of `node`'s region was ever carved for a slab
/// (it lies below its lane region's bump pointer).
pub fn is_carved(node: NodeId, chunk: u32) -> bool {
    let lane = lane_of_chunk(chunk);
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    let bump = unsafe { node_arena(node).bump.get_unchecked(lane.index()) };
    // Cannot wrap: `lane < LANES` and the product is at most the node's
    // chunks.
    let start = lane_chunks().wrapping_mul(lane.index() as u32);
    (start..bump.load(Ordering::Acquire)).contains(&chunk)
}

/// Chunks carved from `node`'s region so far, and chunks sitting in free runs.
pub fn usage(node: NodeId) -> (u64, u64) {
    let inner = node_arena(node).inner.lock();
    inner
        .lanes
        .iter()
        .fold((0u64, 0u64), |(carved, free), runs| {
            let free = runs
                .free_run_count
                .iter()
                .enumerate()
                .fold(free, |free, (order, &count)| {
                    free.saturating_add(u64::from(count) << order)
                });
            (
                carved.saturating_add(u64::from(runs.bump.saturating_sub(runs.start))),
                free,
            )
        })
}
