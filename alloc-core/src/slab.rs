//! Slabs: runs of chunks holding objects of one size class on one node.
//!
//! A slab hands out objects in two ways: first from its intrusive free list
//! (objects that came back), then by carving never-used objects off its
//! start (`carved` counts them), so a fresh slab needs no initialisation.
//! When the last object of a slab comes back, its free list is dropped and
//! the slab is carved afresh: a refill from an empty slab computes
//! addresses instead of chasing links through cold memory.
//! Each `(node, class)` pair keeps a [`SlabList`]: partial slabs (some
//! objects free), per [`Lane`] of CPUs, and empty slabs waiting to be reused
//! or returned to the OS.
//! Full slabs are in no list; a free into one puts it back on the partial
//! list.
//!
//! # Returning memory
//!
//! A slab whose objects all came back is *empty*. Empty slabs are kept in
//! FIFO order with the time they became empty. Policy: the newest
//! [`EMPTY_SLABS_KEPT`] empty slabs of a list stay (warm, for the next
//! refill); any other slab empty for longer than [`EMPTY_DECAY_MS`] has its
//! pages returned with `madvise(MADV_DONTNEED)` and its run given back to
//! the arena. The check runs on the slow paths of the list's class and,
//! about once per decay period, for every list (see `cache::maybe_decay`);
//! [`SlabList::release_empty`] (used by `purge`) returns all of them now.

use core::ptr::{self, NonNull};

use crate::arena::{self, CHUNK_BYTES};
use crate::colour;
use crate::lane::{Lane, LANES};
use crate::node::NodeId;
use crate::os;
use crate::size_class::SizeClass;

/// "No slab" in index links.
pub(crate) const NIL: u32 = u32::MAX;
/// Empty slabs per list that are never returned by decay.
pub const EMPTY_SLABS_KEPT: u32 = 1;
/// How long a slab must stay empty before decay returns it to the OS.
pub const EMPTY_DECAY_MS: u64 = 1000;

/// Where a slab is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum SlabState {
    /// A free run of the arena (no class).
    Released = 0,
    /// Every object is out (in a sheaf or live); in no list.
    Full = 1,
    /// Some objects out, some free; on the partial list.
    Partial = 2,
    /// No object out; on the empty list.
    Empty = 3,
}

/// An object on a slab's free list: its first word links to the next.
#[repr(C)]
pub(crate) struct FreeObject {
    next: *mut FreeObject,
}

/// Metadata of the slab that starts at a chunk (side table, one entry per
/// chunk; only the first chunk of a run is used).
///
/// Invariants, for a slab of class `c` on node `n`:
/// * `carved <= capacity` and `in_use <= carved`;
/// * the free list holds exactly `carved - in_use` distinct objects of the
///   slab, none of which is in a sheaf or live;
/// * `state` matches the list the slab is on (`Full` is on none).
///
/// Guarded by the `SlabList` lock of `(n, c)` while the slab belongs to the
/// class, and by the arena lock of `n` while it is a free run.
#[repr(C)]
pub(crate) struct SlabMeta {
    free: *mut FreeObject,
    empty_since_ms: u64,
    carved: u32,
    in_use: u32,
    capacity: u32,
    prev: u32,
    pub(crate) next: u32,
    class: u8,
    state: SlabState,
    order: u8,
    lane: Lane,
}

impl SlabMeta {
    /// Resets the entry for a run that goes back to the arena.
    pub(crate) fn reset_released(&mut self, order: u8) {
        self.free = ptr::null_mut();
        self.carved = 0;
        self.in_use = 0;
        self.capacity = 0;
        self.prev = NIL;
        self.next = NIL;
        self.state = SlabState::Released;
        self.order = order;
        self.lane = Lane::ZERO;
        self.empty_since_ms = 0;
    }
}

/// Slab size and order for a class: the smallest power-of-two run of at
/// least 64 KiB that holds at least 8 objects.
pub fn slab_order(class: SizeClass) -> usize {
    // `(CHUNK_BYTES << order) / stride >= 8` is `8 * stride <= CHUNK_BYTES
    // << order`, without a division (the product cannot saturate: strides
    // are at most 256 KiB).
    let eight_objects = class.stride().saturating_mul(8);
    (0..arena::MAX_SLAB_ORDER)
        .find(|&order| eight_objects <= CHUNK_BYTES << order)
        .unwrap_or(arena::MAX_SLAB_ORDER)
}

// Colouring assumes that every class it colours has one-chunk slabs (and
// `colour::offset` numbers slabs by that size); the tests check the classes.
const _: () = assert!(CHUNK_BYTES == colour::COLOURED_SLAB_BYTES);

/// Bytes of one slab of `class`.
pub fn slab_bytes(class: SizeClass) -> usize {
    CHUNK_BYTES << slab_order(class)
}

/// Objects one slab of `class` holds: its bytes over the class's stride
/// (less any colour offset's room, which colouring takes from the spare
/// bytes past the last object).
pub fn objects_per_slab(class: SizeClass) -> usize {
    slab_bytes(class).checked_div(class.stride()).unwrap_or(0)
}

/// Counts a list reports to the cache statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabCounts {
    /// Slabs this list holds (full, partial and empty).
    pub slabs: u64,
    /// Empty slabs among them.
    pub empty_slabs: u64,
    /// Bytes returned to the OS by this list since start.
    pub bytes_returned: u64,
    /// Slabs returned to the OS since start.
    pub slabs_returned: u64,
    /// Times a return to the OS failed (the slab was kept).
    pub return_failures: u64,
    /// Free objects sitting in this list's slabs (free lists + uncarved).
    pub free_objects: u64,
}

/// Which partial slabs of another lane a refill may take
/// ([`SlabList::refill`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carving {
    /// Only one carved to its end: its free objects came back.
    Done,
    /// Any, the one the other lane is still carving included.
    Any,
}

/// Slabs of each other lane's partial list a refill looks at for one
/// carved to its end before it takes one still being carved.
const STEAL_SCAN: usize = 4;

/// Slabs of the empty list a refill looks at for one of its lane's region.
const EMPTY_SCAN: usize = 8;

/// The slabs of one size class on one node.
///
/// Partial slabs are kept per [`Lane`]: a slab on `partial[l]` gives its
/// objects to CPUs of lane `l`, so two CPUs do not carve neighbouring
/// objects out of one slab.
///
/// Invariants: `partial[l]` links exactly the slabs in state `Partial`
/// whose `lane` is `l`, `empty_head..empty_tail` (newest first) exactly
/// those in state `Empty`, and `counts.slabs` counts every slab of the list
/// in any state.
pub struct SlabList {
    partial: [u32; LANES],
    empty_head: u32,
    empty_tail: u32,
    counts: SlabCounts,
}

impl SlabList {
    /// A list with no slabs.
    pub const fn new() -> Self {
        Self {
            partial: [NIL; LANES],
            empty_head: NIL,
            empty_tail: NIL,
            counts: SlabCounts {
                slabs: 0,
                empty_slabs: 0,
                bytes_returned: 0,
                slabs_returned: 0,
                return_failures: 0,
                free_objects: 0,
            },
        }
    }

    /// The list's counters.
    pub fn counts(&self) -> SlabCounts {
        self.counts
    }

    /// Fills `out` with up to `out.len()` objects of `class` from `node`'s
    /// slabs for a CPU of `lane`; returns how many. Fewer than asked only
    /// when the arena is exhausted (or the OS refused memory).
    ///
    /// Slabs are tried in this order: `lane`'s partial slabs, an empty
    /// slab of `lane`'s region of the arena, a new slab from that region;
    /// and only when that region has none left, another region's empty
    /// slab, another lane's partial slab (one carved to its end first),
    /// and a new slab from another lane's region.
    ///
    /// So a lane's objects come from its own region, where no other CPU's
    /// are: a CPU whose buffers sit in the pages next to another CPU's
    /// pays a line transfer each time a prefetcher runs into the other's
    /// (docs/PERFORMANCE.md, "Neighbours on two CPUs"), and a per-CPU
    /// cache sends what it frees of another lane's objects back to that
    /// lane, by their address (`percpu`). What it costs: free objects in
    /// another lane's slabs wait for that lane's CPUs, so memory is taken
    /// from the OS while they wait (at most one set of partial slabs per
    /// lane in use; empty slabs go back to the OS after
    /// [`EMPTY_DECAY_MS`]).
    pub fn refill(
        &mut self,
        node: NodeId,
        class: SizeClass,
        lane: Lane,
        out: &mut [*mut u8],
    ) -> usize {
        let mut filled = 0;
        while filled < out.len() {
            let own = *self.partial_head(lane);
            let slab = if own != NIL {
                own
            } else if let Some(slab) = self.empty_slab(node, Some(lane)) {
                self.unlink_empty(node, slab);
                self.push_partial(node, slab, lane);
                slab
            } else if let Some(slab) = self.new_slab(node, class, lane, lane) {
                slab
            } else if let Some(slab) = self
                .empty_slab(node, None)
                .or_else(|| self.other_lanes_partial(node, Carving::Done))
                .or_else(|| self.other_lanes_partial(node, Carving::Any))
            {
                self.unlink_empty_or_partial(node, slab);
                self.push_partial(node, slab, lane);
                slab
            } else if let Some(slab) = Lane::all()
                .filter(|&region| region != lane)
                .find_map(|region| self.new_slab(node, class, lane, region))
            {
                slab
            } else {
                break;
            };
            let Some(rest) = out.get_mut(filled..) else {
                break;
            };
            // Cannot wrap: `take_from` fills at most `rest.len()`, so
            // `filled <= out.len()`.
            filled = filled.wrapping_add(self.take_from(node, class, slab, rest));
        }
        filled
    }

    /// An empty slab: of `region`'s part of the arena, among the first
    /// [`EMPTY_SCAN`] of the empty list, or with `None` the newest of any.
    fn empty_slab(&self, node: NodeId, region: Option<Lane>) -> Option<u32> {
        let mut slab = self.empty_head;
        for _ in 0..EMPTY_SCAN {
            if slab == NIL {
                return None;
            }
            if region.is_none_or(|region| arena::lane_of_chunk(slab) == region) {
                return Some(slab);
            }
            // SAFETY: `slab` is on this list's empty list, so its entry is
            // committed and guarded by the list's lock, which the caller's
            // `&mut self` (refill) holds (SlabMeta guard rule).
            slab = unsafe { (*arena::meta(node, slab)).next };
        }
        None
    }

    /// Takes `slab` off the empty list or off its lane's partial list.
    fn unlink_empty_or_partial(&mut self, node: NodeId, slab: u32) {
        // SAFETY: `slab` is on one of this list's lists; lock held.
        let state = unsafe { (*arena::meta(node, slab)).state };
        if state == SlabState::Empty {
            self.unlink_empty(node, slab);
        } else {
            self.unlink_partial(node, slab);
        }
    }

    /// A partial slab of any lane's list (every slab on the lists of the
    /// lane calling [`Self::refill`] has been tried already) that `carving`
    /// accepts: with [`Carving::Done`], one carved to its end, found among
    /// the first [`STEAL_SCAN`] slabs of each list.
    fn other_lanes_partial(&mut self, node: NodeId, carving: Carving) -> Option<u32> {
        for &head in &self.partial {
            let mut slab = head;
            for _ in 0..STEAL_SCAN {
                if slab == NIL {
                    break;
                }
                // SAFETY: `slab` is on one of this list's partial lists, so
                // its entry is committed and guarded by the list's lock,
                // which `&mut self` proves is held (SlabMeta guard rule).
                let meta = unsafe { &*arena::meta(node, slab) };
                if carving == Carving::Any || meta.carved == meta.capacity {
                    return Some(slab);
                }
                slab = meta.next;
            }
        }
        None
    }

    /// Takes objects from `slab` (on the partial list) into `out`.
    fn take_from(
        &mut self,
        node: NodeId,
        class: SizeClass,
        slab: u32,
        out: &mut [*mut u8],
    ) -> usize {
        // SAFETY: `slab` belongs to this list, whose lock `&mut self` proves
        // is held (SlabMeta guard rule); its entry is committed.
        let meta = unsafe { &mut *arena::meta(node, slab) };
        let base = arena::chunk_address(node, slab);
        // Coloured classes carve from an offset of a few lines (see
        // `colour`); the free list holds whatever addresses came back.
        let first = base.wrapping_add(colour::offset(class, base));
        let stride = class.stride();
        // The free list first (carving never adds to it), then never-used
        // objects off the slab's start.
        let mut taken = 0usize;
        for slot in out.iter_mut() {
            *slot = if !meta.free.is_null() {
                let object = meta.free;
                // SAFETY: objects on the free list are free objects of this
                // slab (SlabMeta invariant) whose first word holds the link.
                meta.free = unsafe { (*object).next };
                object.cast()
            } else if meta.carved < meta.capacity {
                // Cannot wrap: `carved < capacity`, so the object lies
                // inside the slab (a colour leaves room for `capacity`
                // objects), and the count stays within `capacity`.
                let object = first.wrapping_add((meta.carved as usize).wrapping_mul(stride));
                meta.carved = meta.carved.wrapping_add(1);
                object as *mut u8
            } else {
                break;
            };
            // Cannot wrap: at most `out.len()`.
            taken = taken.wrapping_add(1);
        }
        // Cannot wrap: every object taken was free, so `in_use + taken <=
        // carved <= capacity`, and it was one of the list's `free_objects`.
        meta.in_use = meta.in_use.wrapping_add(taken as u32);
        self.counts.free_objects = self.counts.free_objects.wrapping_sub(taken as u64);
        if meta.free.is_null() && meta.carved == meta.capacity {
            self.unlink_partial(node, slab);
            meta.state = SlabState::Full;
        }
        taken
    }

    /// Returns objects of `class` whose home is `node` to their slabs.
    ///
    /// # Safety
    ///
    /// 1. Every pointer in `objects` was handed out by `refill` of this list
    ///    (same node and class) and is not live or in any sheaf any more.
    /// 2. No pointer appears twice, nor is already free.
    pub unsafe fn flush(
        &mut self,
        node: NodeId,
        class: SizeClass,
        objects: &[*mut u8],
        now_ms: u64,
    ) {
        // Cannot wrap: a slab is at least one chunk.
        let slab_mask = !slab_bytes(class).wrapping_sub(1);
        for &object in objects {
            let slab = arena::chunk_index(node, object as usize & slab_mask);
            // SAFETY: by duty 1 the object came from a slab of this list, so
            // the entry is committed and guarded by our lock.
            let meta = unsafe { &mut *arena::meta(node, slab) };
            let free = object.cast::<FreeObject>();
            // SAFETY: by duties 1 and 2 the object is free and owned by no
            // one, so its first word may hold the free-list link.
            unsafe { free.write(FreeObject { next: meta.free }) };
            meta.free = free;
            // Cannot wrap: by duties 1 and 2 the object was out of its
            // slab, counted in `in_use`, and not among the list's
            // `free_objects`, which count at most the slabs' capacities.
            meta.in_use = meta.in_use.wrapping_sub(1);
            self.counts.free_objects = self.counts.free_objects.wrapping_add(1);
            if meta.state == SlabState::Full {
                let lane = meta.lane;
                self.push_partial(node, slab, lane);
            }
            if meta.in_use == 0 {
                // Every object is back: forget the free list and carve the
                // slab afresh next time. Refilling then computes addresses
                // instead of chasing links through cold object memory.
                meta.free = ptr::null_mut();
                meta.carved = 0;
                self.unlink_partial(node, slab);
                self.push_empty(node, slab, now_ms);
            }
        }
        self.decay(node, class, now_ms);
    }

    /// Returns to the OS every empty slab beyond the kept ones that has been
    /// empty for [`EMPTY_DECAY_MS`].
    pub fn decay(&mut self, node: NodeId, class: SizeClass, now_ms: u64) {
        while self.counts.empty_slabs > u64::from(EMPTY_SLABS_KEPT) {
            let oldest = self.empty_tail;
            // SAFETY: `oldest` is on this list's empty list; lock held.
            let since = unsafe { (*arena::meta(node, oldest)).empty_since_ms };
            if now_ms.saturating_sub(since) < EMPTY_DECAY_MS {
                break;
            }
            if !self.release_slab(node, class, oldest) {
                break;
            }
        }
    }

    /// Returns every empty slab to the OS now; returns the bytes returned.
    pub fn release_empty(&mut self, node: NodeId, class: SizeClass) -> u64 {
        let before = self.counts.bytes_returned;
        while self.empty_tail != NIL {
            if !self.release_slab(node, class, self.empty_tail) {
                break;
            }
        }
        // `bytes_returned` is a free-running counter: the wrapping
        // difference is what this call added.
        self.counts.bytes_returned.wrapping_sub(before)
    }

    /// Returns one empty slab's pages to the OS and its run to the arena.
    /// If the OS refuses, the slab stays, intact, on the empty list.
    fn release_slab(&mut self, node: NodeId, class: SizeClass, slab: u32) -> bool {
        let bytes = slab_bytes(class);
        let Some(start) = NonNull::new(arena::chunk_address(node, slab) as *mut u8) else {
            return false;
        };
        if !os::return_to_os(start, bytes) {
            // A free-running counter.
            self.counts.return_failures = self.counts.return_failures.wrapping_add(1);
            return false;
        }
        // SAFETY: the slab is on our empty list; lock held.
        let capacity = unsafe { (*arena::meta(node, slab)).capacity };
        self.unlink_empty(node, slab);
        // Cannot wrap: the slab is one of `slabs`, and being empty, all its
        // `capacity` objects are among `free_objects`. The others are
        // free-running counters.
        self.counts.slabs = self.counts.slabs.wrapping_sub(1);
        self.counts.free_objects = self.counts.free_objects.wrapping_sub(u64::from(capacity));
        self.counts.bytes_returned = self.counts.bytes_returned.wrapping_add(bytes as u64);
        self.counts.slabs_returned = self.counts.slabs_returned.wrapping_add(1);
        #[cfg(feature = "checks")]
        crate::checks::untag_run(node, slab, class);
        arena::give_run(node, slab, slab_order(class));
        true
    }

    /// A new slab from `region`'s part of `node`'s arena, on `lane`'s
    /// partial list.
    fn new_slab(
        &mut self,
        node: NodeId,
        class: SizeClass,
        lane: Lane,
        region: Lane,
    ) -> Option<u32> {
        let order = slab_order(class);
        let capacity = objects_per_slab(class) as u32;
        if capacity == 0 {
            return None;
        }
        let slab = arena::take_run(node, region, order)?;
        // SAFETY: `take_run` handed the run to us: no one else references
        // its entry, and from now on our lock guards it.
        let meta = unsafe { &mut *arena::meta(node, slab) };
        meta.free = ptr::null_mut();
        meta.carved = 0;
        meta.in_use = 0;
        meta.capacity = capacity;
        meta.class = class.index() as u8;
        meta.order = order as u8;
        meta.state = SlabState::Partial;
        meta.prev = NIL;
        meta.next = NIL;
        // Cannot wrap: the counts are bounded by the arena's chunks (at most
        // 2^20 per node) and their capacities.
        self.counts.slabs = self.counts.slabs.wrapping_add(1);
        self.counts.free_objects = self.counts.free_objects.wrapping_add(u64::from(capacity));
        self.push_partial(node, slab, lane);
        #[cfg(feature = "checks")]
        crate::checks::tag_run(node, slab, Some(class));
        Some(slab)
    }

    /// The head of `lane`'s partial list.
    fn partial_head(&mut self, lane: Lane) -> &mut u32 {
        // SAFETY: `lane.index() < LANES` (Lane invariant).
        unsafe { self.partial.get_unchecked_mut(lane.index()) }
    }

    fn push_partial(&mut self, node: NodeId, slab: u32, lane: Lane) {
        let head = self.partial_head(lane);
        // SAFETY: entries of this list's slabs are guarded by our lock.
        unsafe {
            let meta = &mut *arena::meta(node, slab);
            meta.state = SlabState::Partial;
            meta.lane = lane;
            meta.prev = NIL;
            meta.next = *head;
            if *head != NIL {
                (*arena::meta(node, *head)).prev = slab;
            }
        }
        *head = slab;
    }

    fn unlink_partial(&mut self, node: NodeId, slab: u32) {
        // SAFETY: entries of this list's slabs are guarded by our lock.
        unsafe {
            let meta = &mut *arena::meta(node, slab);
            if meta.prev != NIL {
                (*arena::meta(node, meta.prev)).next = meta.next;
            } else {
                *self.partial_head(meta.lane) = meta.next;
            }
            if meta.next != NIL {
                (*arena::meta(node, meta.next)).prev = meta.prev;
            }
            meta.prev = NIL;
            meta.next = NIL;
        }
    }

    fn push_empty(&mut self, node: NodeId, slab: u32, now_ms: u64) {
        // SAFETY: entries of this list's slabs are guarded by our lock.
        unsafe {
            let meta = &mut *arena::meta(node, slab);
            meta.state = SlabState::Empty;
            meta.empty_since_ms = now_ms;
            meta.prev = NIL;
            meta.next = self.empty_head;
            if self.empty_head != NIL {
                (*arena::meta(node, self.empty_head)).prev = slab;
            } else {
                self.empty_tail = slab;
            }
        }
        self.empty_head = slab;
        // Cannot wrap: at most the list's slabs.
        self.counts.empty_slabs = self.counts.empty_slabs.wrapping_add(1);
    }

    fn unlink_empty(&mut self, node: NodeId, slab: u32) {
        // SAFETY: entries of this list's slabs are guarded by our lock.
        unsafe {
            let meta = &mut *arena::meta(node, slab);
            if meta.prev != NIL {
                (*arena::meta(node, meta.prev)).next = meta.next;
            } else {
                self.empty_head = meta.next;
            }
            if meta.next != NIL {
                (*arena::meta(node, meta.next)).prev = meta.prev;
            } else {
                self.empty_tail = meta.prev;
            }
            meta.prev = NIL;
            meta.next = NIL;
        }
        // Cannot wrap: the slab was on the empty list, which `empty_slabs`
        // counts.
        self.counts.empty_slabs = self.counts.empty_slabs.wrapping_sub(1);
    }
}

impl SlabList {
    /// Checks the list against its slabs' metadata (tests and debug):
    /// links match states, counts match the lists, and every slab's
    /// accounting (`in_use <= carved <= capacity`, free list length
    /// `carved - in_use`) holds. Returns the number of objects out of the
    /// slabs (in sheaves or live).
    pub fn check_invariants(&self, node: NodeId, class: SizeClass) -> u64 {
        let mut free_objects = 0u64;
        let mut out = 0u64;
        let mut walk = |head: u32, state: SlabState, lane: Option<Lane>, forward: bool| {
            let mut count = 0u64;
            let mut prev = NIL;
            let mut cursor = head;
            while cursor != NIL {
                // SAFETY: our lock (`&self`) guards the entries of our slabs.
                let meta = unsafe { &*arena::meta(node, cursor) };
                crate::invariant!(meta.state == state, "slab on the wrong list");
                crate::invariant!(
                    lane.is_none_or(|lane| meta.lane == lane),
                    "slab on another lane's list"
                );
                crate::invariant!(meta.prev == prev, "broken back link");
                crate::invariant!(
                    usize::from(meta.class) == class.index(),
                    "slab of another class"
                );
                crate::invariant!(
                    meta.in_use <= meta.carved && meta.carved <= meta.capacity,
                    "slab counts"
                );
                let mut listed = 0u32;
                let mut object = meta.free;
                while !object.is_null() {
                    listed = listed.saturating_add(1);
                    crate::invariant!(listed <= meta.carved, "free list longer than carved");
                    // SAFETY: free-list objects are free objects of this slab.
                    object = unsafe { (*object).next };
                }
                crate::invariant!(
                    meta.carved.checked_sub(meta.in_use) == Some(listed),
                    "free list length"
                );
                free_objects = free_objects
                    .saturating_add(u64::from(meta.capacity.saturating_sub(meta.in_use)));
                out = out.saturating_add(u64::from(meta.in_use));
                count = count.saturating_add(1);
                prev = cursor;
                cursor = if forward { meta.next } else { NIL };
            }
            count
        };
        let partial = Lane::all().fold(0u64, |sum, lane| {
            let head = self.partial.get(lane.index()).copied().unwrap_or(NIL);
            sum.saturating_add(walk(head, SlabState::Partial, Some(lane), true))
        });
        let empty = walk(self.empty_head, SlabState::Empty, None, true);
        crate::invariant!(empty == self.counts.empty_slabs, "empty count");
        crate::invariant!(
            self.empty_head == NIL || {
                // SAFETY: as above.
                unsafe { (*arena::meta(node, self.empty_tail)).next == NIL }
            },
            "empty tail is not last"
        );
        crate::invariant!(
            free_objects == self.counts.free_objects,
            "free object count"
        );
        // Full slabs are on no list: all their objects are out.
        let listed = partial.saturating_add(empty);
        crate::invariant!(listed <= self.counts.slabs, "more listed slabs than held");
        let full = self.counts.slabs.saturating_sub(listed);
        let per_slab = objects_per_slab(class) as u64;
        out.saturating_add(full.saturating_mul(per_slab))
    }
}

impl Default for SlabList {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::vec::Vec;

    fn list_for_test() -> SlabList {
        assert!(crate::runtime::ensure_init());
        SlabList::new()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Random refills and flushes against a shadow set of objects that
        /// are out: objects are distinct, aligned slots inside their slab,
        /// and the list's invariants hold after every step.
        #[test]
        fn refill_and_flush_match_a_shadow_model(class_index in 0usize..crate::size_class::NUM_CLASSES, steps in proptest::collection::vec((any::<bool>(), 1usize..200), 1..60)) {
            // Each case uses its own list on node 0; slabs come from the
            // shared arena, which is what the engine does too.
            let class = SizeClass::from_index(class_index).unwrap();
            let node = NodeId::ZERO;
            let mut list = list_for_test();
            let mut out: Vec<*mut u8> = Vec::new();
            let mut seen: HashSet<usize> = HashSet::new();
            let size = class.stride();
            let slab_mask = !(slab_bytes(class) - 1);
            for (take, count) in steps {
                if take {
                    let mut buffer = std::vec![core::ptr::null_mut(); count];
                    let got = list.refill(node, class, Lane::ZERO, &mut buffer);
                    prop_assert_eq!(got, count, "arena should not run out");
                    for &object in &buffer {
                        let addr = object as usize;
                        prop_assert!(seen.insert(addr), "object {:#x} handed out twice", addr);
                        let slab_base = addr & slab_mask;
                        let first = slab_base + colour::offset(class, slab_base);
                        prop_assert!(addr >= first, "object {:#x} before the slab's first", addr);
                        prop_assert_eq!((addr - first) % size, 0, "object not on a slot boundary");
                        prop_assert_eq!(addr % class.alignment(), 0, "object {:#x} misaligned", addr);
                        prop_assert!(arena::home_node(addr) == Some(node));
                        out.push(object);
                    }
                } else {
                    let n = count.min(out.len());
                    let returned: Vec<*mut u8> = out.drain(..n).collect();
                    for object in &returned {
                        seen.remove(&(*object as usize));
                    }
                    // SAFETY: these objects came from this list and are out.
                    unsafe { list.flush(node, class, &returned, 0) };
                }
                let outstanding = list.check_invariants(node, class);
                prop_assert_eq!(outstanding, out.len() as u64);
            }
            // SAFETY: as above.
            unsafe { list.flush(node, class, &out, 0) };
            prop_assert_eq!(list.check_invariants(node, class), 0);
            let slabs = list.counts().slabs;
            let returned = list.release_empty(node, class);
            prop_assert_eq!(returned, slabs * slab_bytes(class) as u64);
            prop_assert_eq!(list.counts().slabs, 0);
        }
    }

    #[test]
    fn coloured_classes_have_one_chunk_slabs_and_carve_from_their_colour() {
        for class in SizeClass::all().filter(|&class| colour::is_coloured(class)) {
            assert_eq!(
                slab_bytes(class),
                colour::COLOURED_SLAB_BYTES,
                "{}",
                class.name()
            );
        }
        // Slabs of the packet buffer class, taken one after another, start
        // their objects at more than one offset, each the slab's colour.
        let class = SizeClass::for_layout(2112, 8).unwrap();
        let node = NodeId::ZERO;
        let mut list = list_for_test();
        let per_slab = objects_per_slab(class);
        let mut starts = HashSet::new();
        let mut out = Vec::new();
        for _ in 0..4 {
            // A whole slab each time: the list has no partial slab left.
            let mut buffer = std::vec![core::ptr::null_mut(); per_slab];
            assert_eq!(list.refill(node, class, Lane::ZERO, &mut buffer), per_slab);
            let first = buffer[0] as usize;
            let base = first & !(slab_bytes(class) - 1);
            assert_eq!(first - base, colour::offset(class, base));
            assert!(buffer
                .iter()
                .all(|&object| object as usize & !(slab_bytes(class) - 1) == base));
            starts.insert(first - base);
            out.extend(buffer);
        }
        assert!(starts.len() > 1, "every slab started at {starts:?}");
        // SAFETY: handed out just above, returned once.
        unsafe { list.flush(node, class, &out, 0) };
    }

    #[test]
    fn a_lane_takes_its_slabs_from_its_own_region() {
        let class = SizeClass::for_layout(4096, 8).unwrap();
        let node = NodeId::ZERO;
        let (a, b) = (Lane::of_cpu(0), Lane::of_cpu(1));
        let mut list = list_for_test();
        let per_slab = objects_per_slab(class);
        let slab_of = |object: *mut u8| object as usize & !(slab_bytes(class) - 1);
        let lane_of = |object: *mut u8| arena::home_lane(object as usize);
        // Lane a takes two whole slabs (both full, on no list), from its
        // region; then one object of each comes back: both slabs are
        // partial on a's list.
        let mut objects = std::vec![core::ptr::null_mut(); per_slab * 2];
        assert_eq!(list.refill(node, class, a, &mut objects), per_slab * 2);
        assert!(objects.iter().all(|&object| lane_of(object) == a));
        let (first, second) = (objects[0], objects[per_slab]);
        assert_ne!(slab_of(first), slab_of(second));
        // SAFETY: handed out above, returned once.
        unsafe { list.flush(node, class, &[first, second], 0) };
        list.check_invariants(node, class);
        // Lane b has no partial slab: it takes a new slab from its own
        // region, not a's free objects.
        let slabs_before = list.counts().slabs;
        let mut one = [core::ptr::null_mut(); 1];
        assert_eq!(list.refill(node, class, b, &mut one), 1);
        let b_object = one[0];
        assert_eq!(lane_of(b_object), b);
        assert_eq!(list.counts().slabs, slabs_before + 1);
        list.check_invariants(node, class);
        // Lane a gets an object of its partial slabs.
        assert_eq!(list.refill(node, class, a, &mut one), 1);
        assert!(one[0] == first || one[0] == second, "{:?}", one[0]);
        let a_object = one[0];
        // Every object of a comes back: its two slabs are empty. Lane b,
        // asking for more than its slab has left, takes another new slab
        // from its region rather than one of a's empty slabs.
        objects.retain(|&object| object != first && object != second);
        objects.push(a_object);
        // SAFETY: every object of a's handed out above, returned once.
        unsafe { list.flush(node, class, &objects, 0) };
        assert_eq!(list.counts().empty_slabs, 2);
        let mut b_more = std::vec![core::ptr::null_mut(); per_slab];
        assert_eq!(list.refill(node, class, b, &mut b_more), per_slab);
        assert!(b_more.iter().all(|&object| lane_of(object) == b));
        assert_eq!(list.counts().slabs, slabs_before + 2);
        assert_eq!(list.counts().empty_slabs, 2);
        // Lane a takes one of its empty slabs.
        assert_eq!(list.refill(node, class, a, &mut one), 1);
        assert_eq!(lane_of(one[0]), a);
        assert_eq!(list.counts().empty_slabs, 1);
        assert_eq!(list.counts().slabs, slabs_before + 2);
        assert_eq!(list.check_invariants(node, class), per_slab as u64 + 2);
        // Everything back.
        b_more.extend([b_object, one[0]]);
        // SAFETY: the objects still out, each returned once.
        unsafe { list.flush(node, class, &b_more, 0) };
        assert_eq!(list.check_invariants(node, class), 0);
        list.release_empty(node, class);
    }

    #[test]
    fn a_lane_whose_region_is_used_up_takes_slabs_from_another() {
        // The last lane: on a machine with fewer CPUs than lanes no thread
        // of this test binary refills from its region.
        let lane = Lane::of_cpu(LANES as u32 - 1);
        let class = SizeClass::for_layout(4096, 8).unwrap();
        let node = NodeId::ZERO;
        let mut list = list_for_test();
        // Take every run of the region: address space only, never touched.
        let mut runs = Vec::new();
        for order in (0..=arena::MAX_SLAB_ORDER).rev() {
            while let Some(run) = arena::take_run(node, lane, order) {
                runs.push((run, order));
            }
        }
        assert!(!runs.is_empty());
        let mut one = [core::ptr::null_mut(); 1];
        assert_eq!(list.refill(node, class, lane, &mut one), 1);
        let elsewhere = one[0];
        assert_ne!(arena::home_lane(elsewhere as usize), lane);
        // SAFETY: handed out above, returned once.
        unsafe { list.flush(node, class, &[elsewhere], 0) };
        list.release_empty(node, class);
        assert_eq!(list.counts().slabs, 0);
        // Runs given back: the lane carves its own region again.
        for (run, order) in runs {
            arena::give_run(node, run, order);
        }
        assert_eq!(list.refill(node, class, lane, &mut one), 1);
        assert_eq!(arena::home_lane(one[0] as usize), lane);
        // SAFETY: handed out above, returned once.
        unsafe { list.flush(node, class, &one, 0) };
        list.release_empty(node, class);
    }

    #[test]
    fn a_lane_does_not_carve_on_in_a_slab_another_lane_is_carving() {
        // Two CPUs' first refills of the churn's class: 64 objects of
        // 256 B each, four pages of a 256-object slab.
        let class = SizeClass::for_layout(256, 8).unwrap();
        let node = NodeId::ZERO;
        let (a, b) = (Lane::of_cpu(0), Lane::of_cpu(1));
        let mut list = list_for_test();
        let per_slab = objects_per_slab(class);
        assert!(per_slab >= 4 * 64, "{per_slab} objects a slab");
        let slab_of = |object: *mut u8| object as usize & !(slab_bytes(class) - 1);
        let mut a_first = std::vec![core::ptr::null_mut(); 64];
        assert_eq!(list.refill(node, class, a, &mut a_first), 64);
        // Lane b has no slab of its own and there is no empty one; a's
        // slab has free objects, but a is carving it: b takes a new slab.
        let mut b_first = std::vec![core::ptr::null_mut(); 64];
        assert_eq!(list.refill(node, class, b, &mut b_first), 64);
        assert_ne!(slab_of(b_first[0]), slab_of(a_first[0]));
        assert!(b_first.iter().all(|&o| slab_of(o) == slab_of(b_first[0])));
        assert_eq!(list.counts().slabs, 2);
        // Each lane carves on in its own slab, from where it stopped: no
        // page holds objects of both.
        let mut a_next = std::vec![core::ptr::null_mut(); 64];
        let mut b_next = std::vec![core::ptr::null_mut(); 64];
        assert_eq!(list.refill(node, class, a, &mut a_next), 64);
        assert_eq!(list.refill(node, class, b, &mut b_next), 64);
        let pages = |objects: &[*mut u8]| -> HashSet<usize> {
            objects.iter().map(|&o| o as usize >> 12).collect()
        };
        let a_pages = &pages(&a_first) | &pages(&a_next);
        let b_pages = &pages(&b_first) | &pages(&b_next);
        assert!(
            a_pages.is_disjoint(&b_pages),
            "a {a_pages:?}, b {b_pages:?}"
        );
        assert!(a_next.iter().all(|&o| slab_of(o) == slab_of(a_first[0])));
        assert_eq!(list.check_invariants(node, class), 4 * 64, "objects out");
        let all: std::vec::Vec<*mut u8> = [a_first, a_next, b_first, b_next].concat();
        // SAFETY: every object handed out above, returned once.
        unsafe { list.flush(node, class, &all, 0) };
        assert_eq!(list.check_invariants(node, class), 0);
        list.release_empty(node, class);
    }

    #[test]
    fn decay_keeps_the_newest_empty_slab_and_returns_old_ones() {
        let class = SizeClass::for_layout(4096, 8).unwrap();
        let node = NodeId::ZERO;
        let mut list = list_for_test();
        let per_slab = objects_per_slab(class);
        let mut objects = std::vec![core::ptr::null_mut(); per_slab * 3];
        assert_eq!(
            list.refill(node, class, Lane::ZERO, &mut objects),
            per_slab * 3
        );
        // SAFETY: all three slabs' objects come back at time 1000 ms.
        unsafe { list.flush(node, class, &objects, 1000) };
        assert_eq!(list.counts().empty_slabs, 3);
        list.decay(node, class, 1000 + EMPTY_DECAY_MS - 1);
        assert_eq!(list.counts().empty_slabs, 3, "nothing is old enough yet");
        list.decay(node, class, 1000 + EMPTY_DECAY_MS);
        assert_eq!(list.counts().empty_slabs, u64::from(EMPTY_SLABS_KEPT));
        assert_eq!(
            list.counts().slabs_returned,
            3 - u64::from(EMPTY_SLABS_KEPT)
        );
        list.release_empty(node, class);
        assert_eq!(list.counts().slabs, 0);
    }
}
