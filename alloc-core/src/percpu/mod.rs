//! Per-CPU sheaves: the kernel's design, in user space, with restartable
//! sequences.
//!
//! Each CPU has a [`CpuCache`]: for every size class a *main* sheaf, a
//! *spare* and a *remote* batch (objects freed on this CPU whose home is
//! another node), each slot a pointer to a sheaf (the shared empty sheaf
//! when there is none). A thread allocates by popping from its current
//! CPU's main sheaf and frees by pushing onto it, in one restartable
//! critical section each (`cs.rs`); it holds no sheaves of its own, so a
//! thread that goes idle holds nothing, and the memory sheaves hold is
//! bounded by CPUs, not by threads.
//!
//! # When it is used
//!
//! Where glibc registered an rseq area for the process (glibc ≥ 2.35 on
//! Linux, unless `GLIBC_TUNABLES=glibc.pthread.rseq=0`; not under valgrind
//! or rr), on x86-64 with AVX (the spare swap's 32-byte commit) and with
//! FSGSBASE enabled by the kernel (5.9 or later: each thread points its GS
//! base at its CPU's cache, which the pop and push address), when the
//! kernel offers
//! `membarrier(PRIVATE_EXPEDITED_RSEQ)` (needed to drain another CPU's
//! sheaves), when every possible CPU id is below `MAX_CPUS`
//! (`/sys/devices/system/cpu/possible`: the sections index the CPU table
//! without a bound test), and unless `SHEAFALLOC_PERCPU=off`. Elsewhere
//! the per-thread sheaves of `thread_cache` run, unchanged. [`mode`] says
//! which, [`fallback_reason`] why.
//!
//! # Slow paths and drains
//!
//! Exchanges (`slow.rs`) detach and install sheaves with a critical
//! section that replaces one slot if it still holds the sheaf the caller
//! saw; the caller owns what it replaced (a main sheaf with its length and
//! capacity, which live in the slot while it is main, written back). Another thread (purge, the slab
//! decay, the auto-tuner lowering a capacity) empties a CPU's cache with
//! [`drain`]: it puts a stand-in in the CPU's table entry (every section
//! misses on it), restarts every section on that CPU with `membarrier`
//! (one that read the entry before has committed), and then owns the
//! slots: it takes their sheaves and
//! leaves the empty sheaf.

pub(crate) mod counts;
#[cfg(target_arch = "x86_64")]
mod cs;
mod drain;
mod gs;
mod slow;
pub mod steer;

use core::cell::UnsafeCell;
use core::mem::offset_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

use crate::lane::Lane;
use crate::node::NodeId;
use crate::os;
use crate::sheaf::Sheaf;
use crate::size_class::{SizeClass, NUM_CLASSES};
use crate::topology::MAX_CPUS;

pub use drain::{drain, drain_all, drain_class};
pub use gs::{count_taken as count_gs_taken, threads_with_gs_taken, Follow, ThreadGs};
pub use slow::{alloc_slow, free_slow, CountedBy};
pub use steer::{cpus_keeping as cpus_keeping_lanes, switches as lane_steering_switches};

/// One CPU's sheaves.
///
/// Invariants: every slot holds a valid sheaf: `empty_sheaf` or a sheaf
/// of the slot's class owned by the slot; the length and capacity in a
/// class's `word` are its main sheaf's (0 and 0 for the empty sheaf; the
/// capacity is 0 at every instant the slot holds the empty sheaf, even
/// half-way through a drain, so no push can write into it), and that
/// sheaf's header holds stale values until it leaves the slot, when they
/// are written back; a spare's or remote batch's header is its own. Main
/// and spare sheaves hold objects whose home is `node`; a remote batch
/// holds objects whose home is its own `node`. Slots change only in a
/// restartable section running on this CPU that found this cache in the
/// CPU's table entry, or reached it through the thread's GS base and found
/// `owner` to be this CPU's (`cs.rs`), or in a drain (`drain.rs`), which
/// first sets `owner` to `NO_OWNER` and puts `DRAINING` in that entry.
#[repr(C, align(64))]
pub struct CpuCache {
    /// Nonzero in the stand-ins ([`NO_CACHE`], [`DRAINING`]), which the
    /// sections off the fast path test; 0 in a CPU's own cache.
    pub(crate) stopped: AtomicU8,
    /// Whose pops and pushes may use this cache through their GS base:
    /// [`owner_of`] its CPU; [`NO_OWNER`] while a drain empties it and in
    /// the stand-ins (which no CPU owns).
    pub(crate) owner: AtomicU32,
    /// The node whose objects the main and spare sheaves hold (a drain
    /// changes it, when the topology moved the CPU to another node).
    node: AtomicU8,
    /// The CPU's lane (fixed: its number modulo `LANES`).
    lane: Lane,
    /// `node`'s arena region, `[node_base, node_base + node_span)`: the
    /// slow path's push, which keeps another lane's object here (span 0:
    /// every such push misses).
    pub(crate) node_base: AtomicUsize,
    pub(crate) node_span: AtomicUsize,
    /// The fast path's push range, `[lane_base, lane_base + lane_span)`:
    /// the lane's region of `node`'s arena, so the push takes only objects
    /// of this CPU's lane, while the CPU returns other lanes' objects; the
    /// node's region while it keeps them (`steer`). Span 0: every push
    /// misses.
    pub(crate) lane_base: AtomicUsize,
    pub(crate) lane_span: AtomicUsize,
    classes: [ClassSlots; NUM_CLASSES],
    /// Each class's remote batch (out of the class's record, which only
    /// the free's slow path reads).
    remotes: [AtomicPtr<Sheaf>; NUM_CLASSES],
    /// Each class's floor of its operations count (`counts`).
    pub(crate) operations_floor: [AtomicU64; NUM_CLASSES],
    /// Whether the CPU keeps other lanes' objects (`steer::LaneFrees`);
    /// written with the push range, while the cache is held.
    keeps_lanes: AtomicBool,
    /// Objects of other lanes of its node this CPU met in its slow paths:
    /// those it sent back, or while it keeps them, those in the full
    /// sheaves it gave away. Read by the steering tick.
    pub(crate) foreign: AtomicU64,
}

/// One class's slots in a CPU's cache, 32 bytes and 32-aligned: the main
/// sheaf, the spare, and the main sheaf's length, room and the class's
/// operations in one word with the sum of the length's jumps beside it
/// (`counts`), so a pop or push reads this record and the object, never
/// the sheaf's header, and counts itself in its commit. The spare swap
/// and the main sheaf's replace commit the whole record with one 32-byte
/// store (`cs::swap_spare`, `cs::replace_main`); the word and the jumps
/// are 16-aligned, so a reader loads them in one access
/// (`counts::load_pair`).
#[repr(C, align(32))]
pub(crate) struct ClassSlots {
    main: AtomicPtr<Sheaf>,
    spare: AtomicPtr<Sheaf>,
    pub(crate) word: AtomicU64,
    pub(crate) jumps: AtomicU64,
}

// A class's record is at its `SizeClass::record_offset` from the first
// record, the same offset as its hot slot in a thread (also 32 bytes), so
// where both attempts inline the lookup table's value addresses both.
const _: () = assert!(core::mem::size_of::<ClassSlots>() == crate::size_class::RECORD_STRIDE);

impl ClassSlots {
    /// Every slot the empty sheaf.
    const fn empty() -> Self {
        Self {
            main: AtomicPtr::new(empty_sheaf()),
            spare: AtomicPtr::new(empty_sheaf()),
            word: AtomicU64::new(0),
            jumps: AtomicU64::new(0),
        }
    }
}

/// Which slot of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Main,
    Spare,
    Remote,
}

/// Byte offset of the first class's record in a [`CpuCache`]: the
/// sections add it as a constant displacement to
/// [`SizeClass::record_offset`].
pub(crate) const CLASSES_OFFSET: usize = offset_of!(CpuCache, classes);

/// Byte offset of the first class's remote batch in a [`CpuCache`].
const REMOTES_OFFSET: usize = offset_of!(CpuCache, remotes);

impl Slot {
    /// Byte offset of the slot of `class` in a [`CpuCache`].
    #[inline(always)]
    pub(crate) fn offset(self, class: SizeClass) -> usize {
        // Cannot wrap: the record and the remote slot lie inside the cache.
        let record = CLASSES_OFFSET.wrapping_add(class.record_offset());
        match self {
            Slot::Main => record.wrapping_add(offset_of!(ClassSlots, main)),
            Slot::Spare => record.wrapping_add(offset_of!(ClassSlots, spare)),
            Slot::Remote => REMOTES_OFFSET.wrapping_add(class.index().wrapping_mul(8)),
        }
    }
}

impl CpuCache {
    /// The slots of `class`.
    pub(crate) fn class(&self, class: SizeClass) -> &ClassSlots {
        // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
        unsafe { self.classes.get_unchecked(class.index()) }
    }

    /// The slot of `class`.
    pub(crate) fn slot(&self, slot: Slot, class: SizeClass) -> &AtomicPtr<Sheaf> {
        match slot {
            Slot::Main => &self.class(class).main,
            Slot::Spare => &self.class(class).spare,
            // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
            Slot::Remote => unsafe { self.remotes.get_unchecked(class.index()) },
        }
    }

    /// The node of this CPU's sheaves.
    pub(crate) fn node(&self) -> NodeId {
        NodeId::new(usize::from(self.node.load(Ordering::Acquire))).unwrap_or(NodeId::ZERO)
    }

    /// The CPU's lane.
    pub(crate) fn lane(&self) -> Lane {
        self.lane
    }

    /// What the CPU does with other lanes' objects now.
    pub(crate) fn lane_frees(&self) -> steer::LaneFrees {
        if self.keeps_lanes.load(Ordering::Acquire) {
            steer::LaneFrees::Keep
        } else {
            steer::LaneFrees::Return
        }
    }

    /// Makes `node` this cache's node (its sheaves must be empty: a new
    /// cache, or one a drain holds).
    pub(crate) fn set_node(&self, node: NodeId) {
        self.node.store(node.index() as u8, Ordering::Release);
        self.node_base
            .store(crate::arena::node_base(node), Ordering::Release);
        self.node_span
            .store(crate::arena::node_span(), Ordering::Release);
        self.set_push_range();
    }

    /// Makes the CPU return or keep other lanes' objects (the cache must
    /// be new, or held: no section reads the push range meanwhile).
    pub(crate) fn set_lane_frees(&self, frees: steer::LaneFrees) {
        self.keeps_lanes
            .store(frees == steer::LaneFrees::Keep, Ordering::Release);
        self.set_push_range();
    }

    /// Whether `address` lies in the fast path's push range (a hint: a
    /// steering switch or a drain may change the range at any time; the
    /// push section reads it again).
    #[inline]
    pub(crate) fn in_push_range(&self, address: usize) -> bool {
        address.wrapping_sub(self.lane_base.load(Ordering::Relaxed))
            < self.lane_span.load(Ordering::Relaxed)
    }

    /// Sets the push range from the node and what the CPU does with other
    /// lanes' objects.
    fn set_push_range(&self) {
        let node = self.node();
        let (base, span) = match self.lane_frees() {
            steer::LaneFrees::Return => (
                crate::arena::lane_base(node, self.lane),
                crate::arena::lane_span(),
            ),
            steer::LaneFrees::Keep => (crate::arena::node_base(node), crate::arena::node_span()),
        };
        self.lane_base.store(base, Ordering::Release);
        self.lane_span.store(span, Ordering::Release);
    }
}

/// Entries of [`CPU_CACHES`]: one per CPU id the engine serves, and
/// [`NO_CPU`] (for the tests' stand-in area).
const TABLE_LEN: usize = MAX_CPUS + 1;

/// The CPU id of the tests' stand-in rseq area (`no_rseq`): its table
/// entry is [`NO_CACHE`] for good.
const NO_CPU: u32 = MAX_CPUS as u32;

/// What a cache's `owner` holds for CPU `cpu`: the id mixed with a key, so
/// that a GS base pointing at memory that is not a cache (something else
/// set it after this engine claimed it) cannot pass the sections' check by
/// holding a small integer, and zeroed memory never does.
pub(crate) const fn owner_of(cpu: u32) -> u32 {
    cpu ^ OWNER_KEY
}

/// The key of [`owner_of`] (the sections apply it to the CPU id they read).
pub(crate) const OWNER_KEY: u32 = 0x5EAF_0000;

/// A cache's `owner` when no CPU's pops and pushes may use it (a stand-in,
/// or a cache being drained): no CPU id an rseq area can hold (below
/// `MAX_CPUS`, the stand-in area's [`NO_CPU`], or -1 before registration)
/// maps to it.
pub(crate) const NO_OWNER: u32 = 0;
const _: () = assert!(owner_of(0) != NO_OWNER && owner_of(NO_CPU) != NO_OWNER);
const _: () = assert!(owner_of(u32::MAX) != NO_OWNER && (MAX_CPUS as u32) < 0x1_0000);

/// The cache each CPU's sections use: its own ([`OWNED`]) once made and
/// while no drain empties it; [`NO_CACHE`] before it is made (and for good
/// at entry [`NO_CPU`]); [`DRAINING`] while a drain empties it.
///
/// The sections index it with the CPU id of the thread's rseq area without
/// a bound test: per-CPU mode is only chosen when every CPU id the kernel
/// may report is below `MAX_CPUS` (`init`), a thread uses its own area
/// only once the kernel set its CPU id (attach), and every other thread
/// runs no section (its area is null: `ThreadCache::rseq`). The tests run
/// sections with a stand-in area whose id is `NO_CPU`.
pub(crate) static CPU_CACHES: [AtomicPtr<CpuCache>; TABLE_LEN] =
    [const { AtomicPtr::new(ptr::addr_of!(NO_CACHE).cast_mut()) }; TABLE_LEN];

/// Each CPU's own cache, once made (null before); never changes after.
static OWNED: [AtomicPtr<CpuCache>; MAX_CPUS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_CPUS];

/// A stand-in cache: every slot the empty sheaf, so pops (length 0) and
/// pushes (spans 0, capacity 0) miss without a test of their own, and
/// stopped, which the other sections test. Never written.
const fn stand_in() -> CpuCache {
    CpuCache {
        stopped: AtomicU8::new(1),
        owner: AtomicU32::new(NO_OWNER),
        node: AtomicU8::new(0),
        lane: Lane::ZERO,
        node_base: AtomicUsize::new(0),
        node_span: AtomicUsize::new(0),
        lane_base: AtomicUsize::new(0),
        lane_span: AtomicUsize::new(0),
        classes: [const { ClassSlots::empty() }; NUM_CLASSES],
        remotes: [const { AtomicPtr::new(empty_sheaf()) }; NUM_CLASSES],
        operations_floor: [const { AtomicU64::new(0) }; NUM_CLASSES],
        keeps_lanes: AtomicBool::new(false),
        foreign: AtomicU64::new(0),
    }
}

/// What a CPU without a cache of its own has, so the sections follow a
/// table entry without a null test.
static NO_CACHE: CpuCache = stand_in();

/// What a CPU's table entry holds while a drain empties its cache: every
/// section run on that CPU misses, so the drainer has the cache alone.
static DRAINING: CpuCache = stand_in();

fn no_cache() -> *mut CpuCache {
    ptr::addr_of!(NO_CACHE).cast_mut()
}

pub(super) fn draining() -> *mut CpuCache {
    ptr::addr_of!(DRAINING).cast_mut()
}

/// Whether `cpu`'s sections use `cache` now (false while it is drained).
pub(crate) fn in_use(cpu: u32, cache: &CpuCache) -> bool {
    CPU_CACHES
        .get(cpu as usize)
        .is_some_and(|entry| ptr::eq(entry.load(Ordering::Acquire), cache))
}

/// An rseq area for the tests, which check that every section misses on
/// the stand-in caches from any thread: laid out as `struct rseq`, with
/// CPU id [`NO_CPU`], so every section run with it finds [`NO_CACHE`].
/// The kernel never sees it; the sections' only write to it is `rseq_cs`
/// (any thread, any time: nothing reads it). A thread with no area of its
/// own in use runs no section at all.
#[cfg(test)]
#[repr(C, align(32))]
struct RseqStandIn(UnsafeCell<[u32; 8]>);

// SAFETY: the only writes are the sections' stores of `rseq_cs`, whose
// value nobody reads; `cpu_id` is never written.
#[cfg(test)]
unsafe impl Sync for RseqStandIn {}

#[cfg(test)]
static NO_RSEQ: RseqStandIn = RseqStandIn(UnsafeCell::new([0, NO_CPU, 0, 0, 0, 0, 0, 0]));

/// The stand-in rseq area (see `RseqStandIn`).
#[cfg(test)]
pub const fn no_rseq() -> *mut u8 {
    UnsafeCell::raw_get(ptr::addr_of!(NO_RSEQ.0)).cast()
}

/// Whether a thread may run the sections with its own rseq area, whose CPU
/// id is `cpu` (the kernel's, read from the area): per-CPU mode is in
/// force and the kernel has set the id (a thread whose registration failed
/// reads a negative id).
pub(crate) fn may_use_own_area(cpu: Option<u32>) -> bool {
    mode() == CacheMode::PerCpu && cpu.is_some_and(|cpu| (cpu as usize) < MAX_CPUS)
}

/// The cache `cpu` made, if it made one (in use or being drained).
pub(crate) fn published(cpu: usize) -> Option<&'static CpuCache> {
    let cache = OWNED.get(cpu)?.load(Ordering::Acquire);
    // SAFETY: published caches live for the process.
    NonNull::new(cache).map(|cache| unsafe { &*cache.as_ptr() })
}

/// A sheaf that is always empty and has no room: what a slot holds when it
/// has no sheaf, so every section can follow a slot without a null check.
/// Never written: a pop finds it empty, a push finds it full, and nobody
/// owns it.
struct EmptySheaf(UnsafeCell<Sheaf>);

// SAFETY: the empty sheaf is never written (see above), so sharing it is
// sharing a constant.
unsafe impl Sync for EmptySheaf {}

static EMPTY: EmptySheaf = EmptySheaf(UnsafeCell::new(Sheaf::EMPTY));

/// The shared empty sheaf.
pub(crate) const fn empty_sheaf() -> *mut Sheaf {
    UnsafeCell::raw_get(ptr::addr_of!(EMPTY.0))
}

/// Which caches the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Per-CPU sheaves with restartable sequences.
    PerCpu,
    /// Per-thread sheaves (rseq or membarrier unavailable, or turned off).
    PerThread,
}

impl CacheMode {
    /// The name reports use: `per-cpu` or `per-thread`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PerCpu => "per-cpu",
            Self::PerThread => "per-thread",
        }
    }
}

const UNDECIDED: u8 = 0;
const PER_CPU: u8 = 1;
const PER_THREAD: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The mode in force (per-thread until initialisation decided).
pub fn mode() -> CacheMode {
    if MODE.load(Ordering::Acquire) == PER_CPU {
        CacheMode::PerCpu
    } else {
        CacheMode::PerThread
    }
}

/// Why per-CPU mode is not in force, for reports (`None` when it is).
pub fn fallback_reason() -> Option<&'static str> {
    match FALLBACK.load(Ordering::Acquire) {
        0 => None,
        1 => Some("SHEAFALLOC_PERCPU=off"),
        2 => Some("no rseq area registered by glibc"),
        3 => Some("membarrier(PRIVATE_EXPEDITED_RSEQ) unavailable"),
        5 => Some("simulated nodes given to threads round-robin (more nodes than CPUs)"),
        6 => Some("possible CPU ids unknown, or above 1024"),
        7 => Some("no AVX (the spare swap commits 32 bytes in one store)"),
        8 => Some("threads cannot set their GS base (no FSGSBASE, or a kernel before 5.9)"),
        _ => Some("not x86-64"),
    }
}
static FALLBACK: AtomicU8 = AtomicU8::new(0);

/// Decides the mode, once, during the engine's initialisation (after
/// `os::init_rseq`).
pub(crate) fn init() {
    if MODE.load(Ordering::Acquire) != UNDECIDED {
        return;
    }
    let reason = if matches!(
        os::env(c"SHEAFALLOC_PERCPU"),
        Some(b"off" | b"0" | b"false")
    ) {
        1
    } else if crate::topology::threads_round_robin() {
        5
    } else if !cfg!(target_arch = "x86_64") {
        4
    } else if !has_avx() {
        7
    } else if !os::gs_base_writable() {
        8
    } else if os::possible_cpu_ids().is_none_or(|ids| ids > MAX_CPUS) {
        6
    } else if !os::rseq_available() {
        2
    } else if !os::membarrier_register_rseq() {
        3
    } else {
        0
    };
    FALLBACK.store(reason, Ordering::Release);
    MODE.store(
        if reason == 0 { PER_CPU } else { PER_THREAD },
        Ordering::Release,
    );
}

/// A fork child: no drain runs in it (only the forking thread exists, and
/// it was in `fork()`), so every CPU gets its own cache back in its table
/// entry (one a drain had half emptied is safe as it is: `drain.rs`); and
/// the membarrier registration belongs to the address space, which is
/// new.
pub(crate) fn after_fork_in_child() {
    if MODE.load(Ordering::Acquire) != PER_CPU {
        return;
    }
    for (cpu, (entry, owned)) in CPU_CACHES.iter().zip(&OWNED).enumerate() {
        let cache = owned.load(Ordering::Acquire);
        if !cache.is_null() {
            // SAFETY: published caches live for the process.
            unsafe {
                (*cache)
                    .owner
                    .store(owner_of(cpu as u32), Ordering::Release)
            };
            entry.store(cache, Ordering::Release);
        }
    }
    if !os::membarrier_register_rseq() {
        // Without membarrier no drain is safe: stop draining (memory stays
        // in the CPUs' sheaves, bounded by CPUs).
        FALLBACK.store(3, Ordering::Release);
    }
}

/// Whether drains may run (membarrier registered).
pub(crate) fn can_drain() -> bool {
    FALLBACK.load(Ordering::Acquire) == 0
}

/// HOT PATH (alloc, per-CPU mode): pop from the main sheaf of `class` of
/// the cache the thread's GS base points at, if it is the current CPU's
/// cache; `None` if it is not (the thread moved, or a drain holds it), or
/// the sheaf is empty.
///
/// # Safety
///
/// 1. `rseq` is the calling thread's registered rseq area, per-CPU mode is
///    in force, and the thread's GS base points at a live `CpuCache` (the
///    thread claimed it: [`ThreadGs::claim`]).
#[inline(always)]
pub unsafe fn pop(rseq: *mut u8, class: SizeClass) -> Option<*mut u8> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: duty 1; a cache's slots hold valid sheaves while its
        // `owner` is its CPU's (CpuCache invariant).
        let object = unsafe { cs::pop(rseq, class.record_offset()) };
        NonNull::new(object).map(NonNull::as_ptr)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rseq, class);
        None
    }
}

/// HOT PATH (free, per-CPU mode): push onto the main sheaf of `class` of
/// the cache the thread's GS base points at if it is the current CPU's,
/// the object's home is that CPU's lane of its node and the sheaf has
/// room.
///
/// # Safety
///
/// 1. As [`pop`]; `object` is a free object of `class`.
#[inline(always)]
pub unsafe fn push(rseq: *mut u8, class: SizeClass, object: *mut u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: duty 1, as in `pop`. The section tests the object's home
        // against the cache's lane region: an address outside it (another
        // lane, another node, or outside the arena) misses, and the slow
        // path sorts it.
        unsafe {
            cs::push::<{ cs::LANE_BASE }, { cs::LANE_SPAN }>(rseq, class.record_offset(), object)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rseq, class, object);
        false
    }
}

/// The slow path's push: as [`push`], for an object of any lane of the
/// CPU's node (one the slow path keeps here rather than sending it back to
/// its lane).
///
/// # Safety
///
/// As [`push`].
#[inline]
pub(crate) unsafe fn push_on_node(rseq: *mut u8, class: SizeClass, object: *mut u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: as in `push`, against the node's region.
        unsafe {
            cs::push::<{ cs::NODE_BASE }, { cs::NODE_SPAN }>(rseq, class.record_offset(), object)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rseq, class, object);
        false
    }
}

/// A free whose push missed, first thing: push onto the remote batch of
/// `class` of the cache the thread's GS base points at, if it is the
/// current CPU's, the object's home is the batch's (another lane's or
/// another node's object, sent back to it) and the batch has room. One
/// section, and no slow path counted: a CPU that frees what another CPU
/// allocated (the consumer of a hand-off) pays this for each such free.
///
/// # Safety
///
/// As [`push`].
#[inline(always)]
pub unsafe fn push_batch(rseq: *mut u8, class: SizeClass, object: *mut u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: as in `push`; a remote slot holds the empty sheaf (span
        // 0) or a batch whose header records its objects' region.
        unsafe { cs::push_batch(rseq, Slot::Remote.offset(class), object) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rseq, class, object);
        false
    }
}

/// What [`swap_spare`] requires of the spare.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpareHas {
    /// Objects (an allocation found main empty).
    Objects,
    /// Room for one more (a free found main full).
    Room,
}

/// Swaps the current CPU's main and spare sheaves of `class` in one
/// section if the spare has the cache's `capacity` and `has` what the
/// caller needs (see `cs::swap_spare`); true if it did.
///
/// # Safety
///
/// 1. As [`pop`].
#[inline]
pub(crate) unsafe fn swap_spare(
    rseq: *mut u8,
    class: SizeClass,
    capacity: u32,
    has: SpareHas,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !has_avx() {
            return false;
        }
        // SAFETY: duty 1, as in `pop`; the CPU has AVX (just tested).
        unsafe {
            cs::swap_spare(
                rseq,
                CPU_CACHES.as_ptr(),
                class.record_offset(),
                capacity,
                has,
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rseq, class, capacity, has);
        false
    }
}

/// Whether the CPU has AVX and the OS saves its registers (CPUID leaf 1:
/// OSXSAVE and AVX; XCR0: the SSE and AVX state), which the spare swap's
/// 32-byte commit needs. Per-CPU mode requires it.
pub(crate) fn has_avx() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        const UNKNOWN: u8 = 0;
        const YES: u8 = 1;
        const NO: u8 = 2;
        static AVX: AtomicU8 = AtomicU8::new(UNKNOWN);
        match AVX.load(Ordering::Relaxed) {
            YES => return true,
            NO => return false,
            _ => {}
        }
        // CPUID leaf 1 exists on every x86-64 CPU.
        let ecx = core::arch::x86_64::__cpuid(1).ecx;
        let (osxsave, avx) = (ecx & (1 << 27) != 0, ecx & (1 << 28) != 0);
        let yes = osxsave && avx && {
            let xcr0: u32;
            // SAFETY: `xgetbv` with ECX = 0 reads XCR0; OSXSAVE says the OS
            // enabled it. It touches no memory.
            unsafe {
                core::arch::asm!(
                    "xgetbv",
                    in("ecx") 0u32,
                    out("eax") xcr0,
                    out("edx") _,
                    options(nomem, nostack, preserves_flags),
                );
            }
            xcr0 & 0b110 == 0b110
        };
        AVX.store(if yes { YES } else { NO }, Ordering::Relaxed);
        yes
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The cache of `cpu`, made (with every slot empty) if it has none.
/// `None` only if the OS refuses memory.
pub(crate) fn cache_of(cpu: u32) -> Option<&'static CpuCache> {
    // Entry `NO_CPU` keeps `NO_CACHE` (`OWNED` has no entry for it).
    let owned = OWNED.get(cpu as usize)?;
    if let Some(cache) = published(cpu as usize) {
        return Some(cache);
    }
    let bytes = core::mem::size_of::<CpuCache>().next_multiple_of(os::page_size());
    let block = os::map(bytes, os::page_size())?;
    let cache = block.as_ptr().cast::<CpuCache>();
    let node = crate::topology::node_of_cpu(cpu);
    // SAFETY: a fresh mapping, page-aligned, large enough for a CpuCache,
    // owned by this call until published below. The fields are atomics and
    // integers: writing each initialises it.
    unsafe {
        for class in SizeClass::all() {
            let slots = block
                .as_ptr()
                .add(Slot::Main.offset(class))
                .cast::<ClassSlots>();
            slots.write(ClassSlots::empty());
            let remote = block.as_ptr().add(Slot::Remote.offset(class));
            remote
                .cast::<AtomicPtr<Sheaf>>()
                .write(AtomicPtr::new(empty_sheaf()));
            ptr::addr_of_mut!((*cache).operations_floor)
                .cast::<AtomicU64>()
                .add(class.index())
                .write(AtomicU64::new(0));
        }
        ptr::addr_of_mut!((*cache).stopped).write(AtomicU8::new(0));
        ptr::addr_of_mut!((*cache).owner).write(AtomicU32::new(owner_of(cpu)));
        ptr::addr_of_mut!((*cache).node).write(AtomicU8::new(0));
        ptr::addr_of_mut!((*cache).lane).write(Lane::of_cpu(cpu));
        ptr::addr_of_mut!((*cache).node_base).write(AtomicUsize::new(0));
        ptr::addr_of_mut!((*cache).node_span).write(AtomicUsize::new(0));
        ptr::addr_of_mut!((*cache).lane_base).write(AtomicUsize::new(0));
        ptr::addr_of_mut!((*cache).lane_span).write(AtomicUsize::new(0));
        ptr::addr_of_mut!((*cache).keeps_lanes).write(AtomicBool::new(false));
        ptr::addr_of_mut!((*cache).foreign).write(AtomicU64::new(0));
        (*cache).set_node(node);
    }
    match owned.compare_exchange(ptr::null_mut(), cache, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // The sections use it from now on. Nothing else writes an
            // entry holding `NO_CACHE` (a drain starts only from the
            // owned cache), so this cannot fail.
            if let Some(entry) = CPU_CACHES.get(cpu as usize) {
                let _ =
                    entry.compare_exchange(no_cache(), cache, Ordering::AcqRel, Ordering::Acquire);
            }
            // SAFETY: published; lives for the process.
            Some(unsafe { &*cache })
        }
        Err(_) => {
            // SAFETY: our mapping was never published.
            unsafe { os::unmap(block, bytes) };
            published(cpu as usize)
        }
    }
}

/// What readers see of one class in the per-CPU caches, in one walk over
/// the CPUs: the allocations and frees the CPUs' pops and pushes made (what
/// the threads count on their own, the slow paths' and the remote
/// batches', is not in it), objects in main sheaves, and the smallest and
/// largest capacity of a main sheaf in use (racy by design).
pub(crate) struct ClassView {
    pub(crate) counts: counts::Counts,
    pub(crate) objects: u64,
    pub(crate) min_capacity: u32,
    pub(crate) max_capacity: u32,
}

/// The per-CPU caches' [`ClassView`] of `class`.
pub(crate) fn view(class: SizeClass) -> ClassView {
    let mut view = ClassView {
        counts: counts::Counts::default(),
        objects: 0,
        min_capacity: u32::MAX,
        max_capacity: 0,
    };
    for cpu in 0..MAX_CPUS {
        let Some(cache) = published(cpu) else {
            continue;
        };
        view.counts = view.counts.plus(counts::of(cache, class));
        let slots = cache.class(class);
        if slots.main.load(Ordering::Acquire) == empty_sheaf() {
            continue;
        }
        // A racy snapshot of a word the owning CPU's sections write whole.
        let word = slots.word.load(Ordering::Relaxed);
        let (len, capacity) = (counts::len(word), counts::capacity(word));
        view.objects = view.objects.saturating_add(u64::from(len));
        view.min_capacity = view.min_capacity.min(capacity);
        view.max_capacity = view.max_capacity.max(capacity);
    }
    if view.max_capacity == 0 {
        view.min_capacity = 0;
    }
    view
}

/// The node the calling thread allocates on in per-CPU mode: its current
/// CPU's.
pub fn current_node() -> NodeId {
    let Some(cpu) = os::current_cpu_fast() else {
        return NodeId::ZERO;
    };
    match published(cpu as usize) {
        Some(cache) => cache.node(),
        None => crate::topology::node_of_cpu(cpu),
    }
}

/// Capacity of the current CPU's main sheaf of `class` (0 if none).
pub fn current_main_capacity(class: SizeClass) -> u32 {
    let Some(cache) = os::current_cpu_fast().and_then(|cpu| published(cpu as usize)) else {
        return 0;
    };
    // A racy snapshot of a word the CPU's sections write whole.
    counts::capacity(cache.class(class).word.load(Ordering::Relaxed))
}

/// CPUs with a cache.
pub fn cpus_with_caches() -> usize {
    (0..MAX_CPUS)
        .filter(|&cpu| published(cpu).is_some())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the mode, a section run with the stand-in area or on the
    /// stand-in cache misses, and no slot of the stand-in cache changes.
    #[test]
    fn the_stand_ins_miss_every_section() {
        // The pop and push address the cache through GS: point this
        // thread's at the stand-in (a test thread of its own, so the base
        // is no other test's).
        let on_gs = std::thread::spawn(|| {
            let mut object = [0u64; 8];
            let object = object.as_mut_ptr().cast::<u8>();
            #[cfg(target_arch = "x86_64")]
            if os::gs_base_writable() {
                // SAFETY: checked just above; this thread is the test's own
                // and nothing else uses its GS base.
                unsafe { os::set_gs_base(no_cache() as usize) };
                for class in SizeClass::all() {
                    // SAFETY: the GS base points at the stand-in cache; the
                    // rseq area is the stand-in (or, for the CPU id, any).
                    unsafe {
                        assert_eq!(pop(no_rseq(), class), None, "{class:?}");
                        assert!(!push(no_rseq(), class, object), "{class:?}");
                        let own = os::rseq_area();
                        if !own.is_null() {
                            assert_eq!(pop(own, class), None, "{class:?}");
                            assert!(!push(own, class, object), "{class:?}");
                        }
                    }
                }
                return true;
            }
            let _ = object;
            false
        });
        for class in SizeClass::all() {
            // SAFETY: the stand-in area and the static table (per-CPU mode
            // need not be in force for the stand-in).
            unsafe {
                for has in [SpareHas::Objects, SpareHas::Room] {
                    assert!(!swap_spare(no_rseq(), class, 0, has), "{class:?}");
                }
            }
        }
        let _ = on_gs.join().expect("the GS sections' checks failed");
        for class in SizeClass::all() {
            for slot in [Slot::Main, Slot::Spare, Slot::Remote] {
                assert_eq!(
                    NO_CACHE.slot(slot, class).load(Ordering::Relaxed),
                    empty_sheaf()
                );
            }
        }
        assert!(published(NO_CPU as usize).is_none());
        assert!(
            cache_of(NO_CPU).is_none(),
            "the stand-in's entry stays NO_CACHE"
        );
    }
}
