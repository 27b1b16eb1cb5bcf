//! Caches: one per size class (the kernel's `kmem_cache`).
//!
//! A [`Cache`] owns the live `sheaf_capacity` and the counters of its class;
//! the per-node parts (a [`Barn`] and a [`SlabList`] for every node) live in
//! [`NodeClass`]. All of it is static and const-initialised, so it exists
//! before the first allocation.
//!
//! # Counters
//!
//! Counters here are atomics updated only on slow paths (barn exchanges,
//! refills, flushes). Allocations and frees are counted per thread with
//! plain stores (see `thread_cache.rs`) and folded in when the thread exits
//! and when statistics are read.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

pub use crate::counters::{CacheCounters, RemoteFrees};

use crate::barn::Barn;
use crate::exchange::Depot;
use crate::lane::Lane;
use crate::node::{NodeId, MAX_NODES};
use crate::os;
use crate::sheaf::SHEAF_CAPACITY_MAX;
use crate::sheaf::{SheafPool, SHEAF_POOL};
use crate::size_class::{SizeClass, NUM_CLASSES};
use crate::slab::{SlabList, EMPTY_DECAY_MS};
use crate::sync::{LockRank, Mutex};
use crate::tuner::{Decision, Tuning};

/// Default sheaf capacity for a class, by object size: 64 / 64 / 32 / 8 / 2
/// objects for under 256 B / under 1 KiB / under 4 KiB / up to 32 KiB /
/// above.
///
/// The kernel 7.0 kmalloc defaults (60 / 26 / 12 / 4) were the start; ours
/// are larger below 4 KiB so that a burst of 64 objects (a NAPI budget)
/// fits in a thread's main and spare sheaves and never visits the shared
/// barn in steady state. Measured: two threads churning bursts of 64 × 256 B
/// ran ~2x faster at 64 than at 26 (the barn lock bounced between cores).
/// Kernel sheaves are per CPU; ours are per thread, so the memory they can
/// hold (two sheaves per class used) is bounded per thread, not per CPU.
pub fn default_sheaf_capacity(class: SizeClass) -> u32 {
    match class.object_size() {
        0..=1023 => 64,
        1024..=4095 => 32,
        4096..=32768 => 8,
        _ => 2,
    }
}

/// One size class's cache: the live capacity, how it is chosen, and the
/// counters.
///
/// The tuning word holds the capacity (0: never set, use the default) and
/// `PINNED`, set while a capacity set by hand holds (the tuner leaves the
/// cache alone). One word, so that a pin always wins: the tuner changes the
/// capacity only by a compare-and-swap from the unpinned value its decision
/// started from ([`apply_decision`]), which fails once a pin has been
/// stored.
///
/// Invariant: the tuning word's capacity (without `PINNED`) is 0 or
/// within `1..=max_sheaf_capacity(class)`.
///
/// The tuning fields sit on a cache line of their own, apart from the
/// counters every slow path bumps: every slow path also reads the
/// capacity, and would otherwise miss on a line another core just wrote.
#[derive(Debug)]
#[repr(C)]
pub struct Cache {
    tuning: Padded<CacheTuning>,
    /// Slow-path counters.
    pub counters: CacheCounters,
}

#[derive(Debug)]
struct CacheTuning {
    /// The capacity, `| PINNED` while pinned.
    setting: AtomicU32,
    /// The tuner's last decision (`tuner::Decision::pack`), 0 if none.
    last_decision: AtomicU64,
    /// When it was made (`os::monotonic_ms`).
    last_decision_ms: AtomicU64,
}

impl Cache {
    const fn new() -> Self {
        Self {
            tuning: Padded(CacheTuning {
                setting: AtomicU32::new(0),
                last_decision: AtomicU64::new(0),
                last_decision_ms: AtomicU64::new(0),
            }),
            counters: CacheCounters::new(),
        }
    }

    /// The sheaf capacity threads apply at their next exchange.
    #[inline]
    pub fn sheaf_capacity(&self, class: SizeClass) -> u32 {
        effective_capacity(class, self.tuning.setting.load(Ordering::SeqCst))
    }

    /// How the capacity is chosen now.
    pub fn tuning(&self) -> Tuning {
        if self.tuning.setting.load(Ordering::Relaxed) & PINNED != 0 {
            Tuning::Pinned
        } else if autotune_enabled() {
            Tuning::Auto
        } else {
            Tuning::Off
        }
    }

    /// The tuner's last decision and when it was made, if any.
    pub fn last_decision(&self) -> Option<(Decision, u64)> {
        match self.tuning.last_decision.load(Ordering::Relaxed) {
            0 => None,
            word => Some((
                Decision::unpack(word),
                self.tuning.last_decision_ms.load(Ordering::Relaxed),
            )),
        }
    }
}

/// The bit of a cache's tuning word that pins its capacity (no capacity
/// comes near it: they are at most [`SHEAF_CAPACITY_MAX`]).
const PINNED: u32 = 1 << 31;
const _: () = assert!(SHEAF_CAPACITY_MAX < PINNED);

/// The capacity a tuning word stands for.
fn effective_capacity(class: SizeClass, setting: u32) -> u32 {
    match setting & !PINNED {
        0 => default_sheaf_capacity(class),
        n => n,
    }
}

static AUTOTUNE: AtomicBool = AtomicBool::new(true);

/// Whether the auto-tuner runs (`SHEAFALLOC_AUTOTUNE=off` turns it off at
/// start-up; [`set_autotune`] at run time).
pub fn autotune_enabled() -> bool {
    AUTOTUNE.load(Ordering::Relaxed)
}

/// Turns the auto-tuner on or off for the whole process. Pinned caches
/// stay pinned either way.
pub fn set_autotune(enabled: bool) {
    AUTOTUNE.store(enabled, Ordering::Relaxed);
}

/// Most bytes of objects one sheaf may hold: a thread holds at most two
/// sheaves per class (main and spare), so this bounds what one thread can
/// pin in one cache at 1 MiB. It is also what keeps the largest classes
/// small: a 256 KiB object gets at most 2 per sheaf, not 256.
pub const SHEAF_BYTES_MAX: usize = 512 * 1024;

/// The largest capacity `class` accepts: `SHEAF_BYTES_MAX` worth of its
/// objects, within `1..=SHEAF_CAPACITY_MAX`.
pub fn max_sheaf_capacity(class: SizeClass) -> u32 {
    let by_bytes = SHEAF_BYTES_MAX
        .checked_div(class.object_size())
        .unwrap_or(0);
    if by_bytes == 0 {
        1
    } else if by_bytes >= SHEAF_CAPACITY_MAX as usize {
        SHEAF_CAPACITY_MAX
    } else {
        by_bytes as u32
    }
}

/// Why a capacity change was refused: the value is outside
/// `MIN..=max`, where `max` is the class's byte-bounded maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityOutOfRange {
    /// The value asked for.
    pub requested: u64,
    /// The largest capacity this class accepts ([`max_sheaf_capacity`]).
    pub max: u32,
    /// Slot size of the class, for the message.
    pub object_size: usize,
}

impl CapacityOutOfRange {
    /// Smallest allowed capacity.
    pub const MIN: u32 = 1;
    /// Largest capacity any class accepts (small classes).
    pub const MAX: u32 = SHEAF_CAPACITY_MAX;
}

impl core::fmt::Display for CapacityOutOfRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "sheaf_capacity {} is outside the allowed range {}..={} for size-{} (at most {} objects per sheaf, and at most {} KiB of objects)",
            self.requested,
            Self::MIN,
            self.max,
            self.object_size,
            Self::MAX,
            SHEAF_BYTES_MAX / 1024
        )
    }
}

/// Stores a capacity set by hand and pins it (the auto-tuner leaves the
/// cache alone until [`release_sheaf_capacity`]). `runtime::
/// set_sheaf_capacity` is the public entry: it also clamps live threads.
pub(crate) fn store_pinned_capacity(
    class: SizeClass,
    capacity: u64,
) -> Result<u32, CapacityOutOfRange> {
    let capacity = checked_capacity(class, capacity)?;
    cache(class)
        .tuning
        .setting
        .store(capacity | PINNED, Ordering::SeqCst);
    Ok(capacity)
}

/// Hands `class`'s capacity back to the auto-tuner (it goes on from the
/// current value).
pub fn release_sheaf_capacity(class: SizeClass) {
    cache(class)
        .tuning
        .setting
        .fetch_and(!PINNED, Ordering::SeqCst);
}

/// Applies an auto-tuner decision to an unpinned cache: stores the new
/// capacity, counts the adjustment and records the decision. Returns false
/// (and changes nothing) if the cache was pinned meanwhile, or its capacity
/// is no longer the decision's `from` (set by hand and handed back since):
/// the capacity moves by one compare-and-swap from that unpinned value, so
/// a pin stored at any moment before it makes it fail, and one stored after
/// it replaces its result.
pub fn apply_decision(class: SizeClass, decision: Decision, now_ms: u64) -> bool {
    let cache = cache(class);
    let Ok(capacity) = checked_capacity(class, u64::from(decision.to)) else {
        return false;
    };
    let setting = cache.tuning.setting.load(Ordering::SeqCst);
    if setting & PINNED != 0 || effective_capacity(class, setting) != decision.from {
        return false;
    }
    if cache
        .tuning
        .setting
        .compare_exchange(setting, capacity, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    cache
        .tuning
        .last_decision
        .store(decision.pack(), Ordering::Relaxed);
    cache
        .tuning
        .last_decision_ms
        .store(now_ms, Ordering::Relaxed);
    CacheCounters::add(&cache.counters.capacity_adjustments, 1);
    true
}

fn checked_capacity(class: SizeClass, capacity: u64) -> Result<u32, CapacityOutOfRange> {
    let max = max_sheaf_capacity(class);
    if capacity < u64::from(CapacityOutOfRange::MIN) || capacity > u64::from(max) {
        return Err(CapacityOutOfRange {
            requested: capacity,
            max,
            object_size: class.object_size(),
        });
    }
    Ok(capacity as u32)
}

/// The per-node state of one class: its barn and its slabs, on separate
/// cache lines so that barn traffic and slab traffic do not collide.
pub struct NodeClass {
    /// Full and empty sheaves.
    pub barn: Padded<Mutex<Barn>>,
    /// The slabs.
    pub slabs: Padded<Mutex<SlabList>>,
}

/// Aligns its content to a cache line.
#[derive(Debug)]
#[repr(align(64))]
pub struct Padded<T>(pub T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

static NODE_CLASSES: [[NodeClass; NUM_CLASSES]; MAX_NODES] = [const {
    [const {
        NodeClass {
            barn: Padded(Mutex::new(LockRank::Barn, Barn::new())),
            slabs: Padded(Mutex::new(LockRank::Slabs, SlabList::new())),
        }
    }; NUM_CLASSES]
}; MAX_NODES];

static CACHES: [Cache; NUM_CLASSES] = [const { Cache::new() }; NUM_CLASSES];

// The caches' tuning words and counters stay dense (25 KiB for the 101
// classes: every busy class's slow paths write its counters, so the pages
// they share are resident); the remote-free matrices live apart.
const _: () = assert!(core::mem::size_of::<Cache>() <= 256);

/// Every class's remote frees by node pair ([`RemoteFrees`]: apart from
/// [`CACHES`], and written only where frees cross nodes).
static REMOTE_FREES: [RemoteFrees; NUM_CLASSES] = [const { RemoteFrees::new() }; NUM_CLASSES];

/// The remote-free matrix of `class`.
#[inline]
pub fn remote_frees(class: SizeClass) -> &'static RemoteFrees {
    // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
    unsafe { REMOTE_FREES.get_unchecked(class.index()) }
}

/// The cache of `class`.
#[inline(always)]
pub fn cache(class: SizeClass) -> &'static Cache {
    // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
    unsafe { CACHES.get_unchecked(class.index()) }
}

/// The barn and slabs of `class` on `node`.
#[inline]
pub fn node_class(node: NodeId, class: SizeClass) -> &'static NodeClass {
    // SAFETY: `node.index() < MAX_NODES` (NodeId invariant) and
    // `class.index() < NUM_CLASSES` (SizeClass invariant).
    unsafe {
        NODE_CLASSES
            .get_unchecked(node.index())
            .get_unchecked(class.index())
    }
}

/// The engine's [`Depot`] of one class: its barns and slabs in the static
/// tables, the process-wide sheaf pool, the cache's capacity and counters.
#[derive(Clone, Copy, Debug)]
pub struct ClassDepot {
    class: SizeClass,
    cache: &'static Cache,
    /// The barn lane its sheaves go to and come from: that of the CPU
    /// the calling thread runs on at each exchange (`None`), or a given
    /// CPU's ([`ClassDepot::for_cpu`]).
    lane: Option<Lane>,
}

impl ClassDepot {
    /// The depot of `class`, for the calling thread's own sheaves: each
    /// exchange uses the lane of the CPU the thread is on.
    #[inline]
    pub fn of(class: SizeClass) -> Self {
        Self {
            class,
            cache: cache(class),
            lane: None,
        }
    }

    /// The depot of `class` for the sheaves of CPU `cpu`, whichever CPU
    /// calls: a drain of another CPU's cache puts that CPU's sheaves on
    /// its lane, where it looks first, not on the drainer's (where it
    /// could take them back only as another lane's surplus).
    #[inline]
    pub fn for_cpu(class: SizeClass, cpu: u32) -> Self {
        Self {
            lane: Some(Lane::of_cpu(cpu)),
            ..Self::of(class)
        }
    }

    /// This depot, with its barn trades on `lane`'s stacks (a remote batch
    /// goes to the lane of its objects).
    #[inline]
    pub fn on_lane(&self, lane: Lane) -> Self {
        Self {
            lane: Some(lane),
            ..*self
        }
    }
}

// SAFETY: (1) nothing here allocates or panics: static tables, futex locks
// and OS mappings; (2) `barn` is the class's barn on `node`, and the slab
// lists hand out each free object once (SlabList invariants); (3) the slab
// list lock nests only the arena lock, which ranks above it.
unsafe impl Depot for ClassDepot {
    fn class(&self) -> SizeClass {
        self.class
    }

    #[inline]
    fn barn(&self, node: NodeId) -> &Mutex<Barn> {
        &node_class(node, self.class).barn
    }

    #[inline]
    fn lane(&self) -> Lane {
        self.lane.unwrap_or_else(Lane::current)
    }

    fn refill(&self, node: NodeId, out: &mut [*mut u8]) -> usize {
        refill_from_slabs(node, self.class, out)
    }

    unsafe fn flush(&self, node: NodeId, objects: &[*mut u8]) {
        // SAFETY: duty 1 of `Depot::flush` is duty 1 of `flush_to_slabs`.
        unsafe { flush_to_slabs(node, self.class, objects) }
    }

    fn pool(&self) -> &SheafPool {
        &SHEAF_POOL
    }

    #[inline]
    fn sheaf_capacity(&self) -> u32 {
        self.cache.sheaf_capacity(self.class)
    }

    fn counters(&self) -> &CacheCounters {
        &self.cache.counters
    }

    fn remote_frees(&self) -> &RemoteFrees {
        remote_frees(self.class)
    }
}

/// Returns objects to their slabs on `node` and counts the flush.
///
/// # Safety
///
/// 1. Every object is a free object of `class` whose home is `node`, owned
///    by the caller, listed once.
pub unsafe fn flush_to_slabs(node: NodeId, class: SizeClass, objects: &[*mut u8]) {
    if objects.is_empty() {
        return;
    }
    let now = os::monotonic_ms();
    let mut slabs = node_class(node, class).slabs.lock();
    // SAFETY: duty 1 of our caller is duty 1 and 2 of `flush`.
    unsafe { slabs.flush(node, class, objects, now) };
    drop(slabs);
    let counters = &cache(class).counters;
    CacheCounters::add(&counters.slab_flushes, 1);
    CacheCounters::add(&counters.flushed_objects, objects.len() as u64);
}

/// Fills `out` from `node`'s slabs of `class`; counts the refill.
pub fn refill_from_slabs(node: NodeId, class: SizeClass, out: &mut [*mut u8]) -> usize {
    let lane = Lane::current();
    let filled = node_class(node, class)
        .slabs
        .lock()
        .refill(node, class, lane, out);
    let counters = &cache(class).counters;
    CacheCounters::add(&counters.slab_refills, 1);
    CacheCounters::add(&counters.refilled_objects, filled as u64);
    filled
}

static DECAY: os::Every = os::Every::new();

/// About once per decay period, lets every slab list return slabs that have
/// stayed empty (called from slow paths, with `now` from
/// [`os::monotonic_ms`]; takes no lock that is held).
pub fn maybe_decay(now: u64) {
    if !DECAY.claim(now, EMPTY_DECAY_MS) {
        return;
    }
    for node in NodeId::all() {
        for class in SizeClass::all() {
            let slabs = &node_class(node, class).slabs;
            if slabs.raw().try_lock() {
                // SAFETY: `try_lock` just acquired the lock for this thread.
                unsafe {
                    slabs.get_unchecked().decay(node, class, now);
                    slabs.raw().unlock();
                }
            }
        }
    }
}

/// Locks every barn, then every slab list, each in table order: the lock
/// order of `sync::LockRank` (fork prepare).
pub(crate) fn lock_all_for_fork() {
    for node_class in NODE_CLASSES.iter().flatten() {
        node_class.barn.raw().lock();
    }
    for node_class in NODE_CLASSES.iter().flatten() {
        node_class.slabs.raw().lock();
    }
}

/// Unlocks what `lock_all_for_fork` locked.
///
/// # Safety
///
/// 1. The calling thread called `lock_all_for_fork` and has not unlocked.
pub(crate) unsafe fn unlock_all_after_fork() {
    for node_class in NODE_CLASSES.iter().flatten() {
        // SAFETY: duty 1: this thread holds both locks.
        unsafe {
            node_class.slabs.raw().unlock();
            node_class.barn.raw().unlock();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::tuner::Reason;

    /// The 32 KiB class (default capacity 8, at most 16), which no other
    /// unit test tunes or pins.
    fn class() -> SizeClass {
        SizeClass::all()
            .find(|class| class.object_size() == 32 * 1024)
            .expect("a 32 KiB class")
    }

    fn raise(from: u32, to: u32) -> Decision {
        Decision {
            from,
            to,
            reason: Reason::SlowPathShare,
            signal: 20,
        }
    }

    #[test]
    fn a_pin_wins_over_the_tuner_and_auto_hands_the_cache_back() {
        let class = class();
        let cache = cache(class);
        let default = default_sheaf_capacity(class);
        assert_eq!((default, max_sheaf_capacity(class)), (8, 16));

        // Unpinned: a decision made from the current capacity applies.
        assert_eq!(cache.sheaf_capacity(class), default);
        assert!(apply_decision(class, raise(default, 16), 1));
        assert_eq!(cache.sheaf_capacity(class), 16);
        assert_eq!(cache.last_decision().map(|(d, _)| d.to), Some(16));

        // A decision made before a pin, applied after it: refused, even
        // when its `from` is the pinned value.
        assert_eq!(store_pinned_capacity(class, 12), Ok(12));
        assert!(!apply_decision(class, raise(12, 16), 2));
        assert!(!apply_decision(class, raise(16, 8), 2));
        assert_eq!(cache.sheaf_capacity(class), 12);
        assert_eq!(cache.tuning(), Tuning::Pinned);

        // Handed back: the tuner goes on from the pinned value, and a
        // decision taken from the capacity before the pin is stale.
        release_sheaf_capacity(class);
        assert_ne!(cache.tuning(), Tuning::Pinned);
        assert_eq!(cache.sheaf_capacity(class), 12);
        assert!(!apply_decision(class, raise(16, 8), 3));
        assert!(apply_decision(class, raise(12, 16), 3));
        assert_eq!(cache.sheaf_capacity(class), 16);

        // Out of range: refused, nothing changes.
        assert!(!apply_decision(class, raise(16, 17), 4));
        assert_eq!(store_pinned_capacity(class, 17).map_err(|e| e.max), Err(16));
        assert_eq!(cache.sheaf_capacity(class), 16);
        assert_ne!(cache.tuning(), Tuning::Pinned);
    }
}
