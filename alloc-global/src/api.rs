//! The public statistics and tuning API.
//!
//! Reading statistics allocates only the returned `Vec`/`String`s, after the
//! engine's locks are released: it is safe to call from any thread, at any
//! rate.

use core::fmt;

use sheafalloc_core::size_class::SizeClass;
use sheafalloc_core::stats;

pub use sheafalloc_core::stats::LargeStats;
pub use sheafalloc_core::tuner::{Decision as TunerDecision, Reason as TunerReason, Tuning};

/// A snapshot of one size-class cache (see the field docs of
/// `sheafalloc_core::CacheStats`, which this extends with the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSnapshot {
    /// Cache name, `size-<object size>`, e.g. `size-256`.
    pub name: String,
    /// The raw counters and gauges.
    pub stats: stats::CacheStats,
}

impl core::ops::Deref for CacheSnapshot {
    type Target = stats::CacheStats;
    fn deref(&self) -> &stats::CacheStats {
        &self.stats
    }
}

fn snapshot(class: SizeClass) -> CacheSnapshot {
    let stats = stats::cache_stats(class);
    CacheSnapshot {
        name: class.name().as_str().to_owned(),
        stats,
    }
}

/// A snapshot of every cache, smallest object size first.
pub fn caches() -> Vec<CacheSnapshot> {
    SizeClass::all().map(snapshot).collect()
}

/// Snapshots of every cache without names, computed lazily: iterating
/// allocates nothing, so a caller that measures allocation counts does not
/// disturb them.
pub fn cache_stats() -> impl Iterator<Item = stats::CacheStats> {
    SizeClass::all().map(stats::cache_stats)
}

/// A snapshot of the cache named `name` (`"size-256"`), if it exists.
pub fn cache(name: &str) -> Option<CacheSnapshot> {
    SizeClass::from_name(name).map(snapshot)
}

/// Counters of the objects too large for a size class (direct mappings).
pub fn large() -> LargeStats {
    stats::large_stats()
}

/// Why `set_sheaf_capacity` refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetCapacityError {
    /// No cache has this name.
    UnknownCache(String),
    /// The capacity is outside `min..=max` (`max` is the cache's own
    /// limit: at most 1024 objects and 512 KiB of objects per sheaf).
    OutOfRange {
        /// The value asked for.
        requested: u64,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed for this cache.
        max: u32,
    },
}

impl fmt::Display for SetCapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownCache(name) => write!(f, "no cache named {name:?}"),
            Self::OutOfRange {
                requested,
                min,
                max,
            } => {
                write!(
                    f,
                    "sheaf_capacity {requested} is outside the allowed range {min}..={max}"
                )
            }
        }
    }
}

impl std::error::Error for SetCapacityError {}

/// Smallest and largest sheaf capacity any cache accepts; a cache's own
/// maximum may be lower ([`sheaf_capacity_range`]).
pub const SHEAF_CAPACITY_RANGE: (u32, u32) = (
    sheafalloc_core::CapacityOutOfRange::MIN,
    sheafalloc_core::CapacityOutOfRange::MAX,
);

/// The capacities cache `name` accepts: `1..=max`, where `max` keeps a
/// sheaf within 1024 objects and 512 KiB of objects (`None`: no such cache).
pub fn sheaf_capacity_range(name: &str) -> Option<(u32, u32)> {
    let class = SizeClass::from_name(name)?;
    Some((
        SHEAF_CAPACITY_RANGE.0,
        sheafalloc_core::cache::max_sheaf_capacity(class),
    ))
}

/// Sets the sheaf capacity of cache `name` and **pins** it: the auto-tuner
/// leaves the cache alone until [`release_sheaf_capacity`]. A lower
/// capacity reaches every live thread's fast path at once (its next free
/// above the new capacity takes the slow path, which trims its sheaves); a
/// higher one is applied at each thread's next sheaf exchange. The range is
/// `1..=max`, where `max` keeps a sheaf within 1024 objects and 512 KiB of
/// objects ([`sheaf_capacity_range`]).
pub fn set_sheaf_capacity(name: &str, capacity: u64) -> Result<(), SetCapacityError> {
    let class = class_named(name)?;
    sheafalloc_core::set_sheaf_capacity(class, capacity).map_err(|e| SetCapacityError::OutOfRange {
        requested: e.requested,
        min: SHEAF_CAPACITY_RANGE.0,
        max: e.max,
    })
}

/// Hands cache `name` back to the auto-tuner (it goes on from the current
/// capacity). The opposite of [`set_sheaf_capacity`].
pub fn release_sheaf_capacity(name: &str) -> Result<(), SetCapacityError> {
    sheafalloc_core::release_sheaf_capacity(class_named(name)?);
    Ok(())
}

/// How cache `name`'s capacity is chosen now: by the auto-tuner, pinned by
/// hand, or fixed because the tuner is off (`None`: no such cache).
pub fn tuning(name: &str) -> Option<Tuning> {
    let class = SizeClass::from_name(name)?;
    Some(sheafalloc_core::cache::cache(class).tuning())
}

/// Turns the auto-tuner on or off for the whole process (it starts on
/// unless `SHEAFALLOC_AUTOTUNE=off`). Pinned caches stay pinned.
pub fn set_autotune(enabled: bool) {
    sheafalloc_core::cache::set_autotune(enabled);
}

/// Whether the auto-tuner is on.
pub fn autotune_enabled() -> bool {
    sheafalloc_core::cache::autotune_enabled()
}

pub use sheafalloc_core::percpu::CacheMode;

/// Which sheaves the engine runs: per CPU (restartable sequences, where
/// glibc registered rseq, on x86-64, with membarrier) or per thread (the
/// fallback). Decided at the first allocation.
pub fn cache_mode() -> CacheMode {
    sheafalloc_core::percpu::mode()
}

/// Why the per-thread fallback is in force (`None` in per-CPU mode).
pub fn cache_mode_reason() -> Option<&'static str> {
    sheafalloc_core::percpu::fallback_reason()
}

/// CPUs that have per-CPU sheaves (0 in per-thread mode).
pub fn cpus_with_caches() -> usize {
    sheafalloc_core::percpu::cpus_with_caches()
}

/// CPUs that keep what they free of other CPUs' objects now, because
/// such objects cross between CPUs all the time there, instead of sending
/// them back to the CPU that allocated them (per-CPU mode; 0 in per-thread
/// mode, where every thread keeps what it frees).
pub fn cpus_keeping_lanes() -> usize {
    sheafalloc_core::percpu::cpus_keeping_lanes()
}

/// Switches of CPUs between sending other CPUs' objects back and keeping
/// them, since start ([`cpus_keeping_lanes`]).
pub fn lane_steering_switches() -> u64 {
    sheafalloc_core::percpu::lane_steering_switches()
}

/// Auto-tuner ticks run since start (about two a second while the process
/// allocates and the tuner is on).
pub fn tuner_ticks() -> u64 {
    sheafalloc_core::runtime::tuner_ticks()
}

fn class_named(name: &str) -> Result<SizeClass, SetCapacityError> {
    SizeClass::from_name(name).ok_or_else(|| SetCapacityError::UnknownCache(name.to_owned()))
}

/// Capacity of the main sheaf the calling thread has installed for cache
/// `name` right now (`Some(0)` if it has none yet; `None` for an unknown
/// name). Shows when a `set_sheaf_capacity` reached this thread.
pub fn thread_sheaf_capacity(name: &str) -> Option<u32> {
    let class = SizeClass::from_name(name)?;
    Some(crate::with_thread_cache(|cache| cache.main_capacity(class)).unwrap_or(0))
}

/// What `purge` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PurgeReport {
    /// Bytes of slab memory returned to the OS.
    pub bytes_returned: u64,
}

/// Returns free memory to the OS now: flushes the calling thread's sheaves,
/// empties every barn into the slabs, and returns every empty slab's pages.
/// Other threads' sheaves (at most two per class each) are left alone.
pub fn purge() -> PurgeReport {
    crate::with_thread_cache(|cache| cache.flush_all());
    PurgeReport {
        bytes_returned: sheafalloc_core::runtime::purge(),
    }
}

/// Flushes the calling thread's sheaves to the barns and slabs (what thread
/// exit does), keeping the thread ready to allocate again.
pub fn flush_thread_cache() {
    crate::with_thread_cache(|cache| cache.flush_all());
}

/// Live threads with a cache, and threads that ever had one.
pub fn thread_counts() -> (u64, u64) {
    sheafalloc_core::runtime::thread_counts()
}

/// How many per-class records threads hold, and what they cost: a thread
/// takes one for a size class on its first slow path of that class (out of
/// its TLS, which the C library writes in full at every thread's start)
/// and gives them back when it exits.
pub fn thread_records() -> ThreadRecords {
    sheafalloc_core::runtime::thread_records()
}

pub use sheafalloc_core::thread_cache::RecordUsage as ThreadRecords;

/// This process's resident set size in bytes (from `/proc/self/statm`).
pub fn resident_bytes() -> Option<usize> {
    sheafalloc_core::os::resident_bytes()
}

pub use sheafalloc_core::stats::NodeAudit;

/// Audits cache `name` on allocator node `node`: walks its slabs and barn,
/// verifies their invariants, and says where the objects are (see
/// [`NodeAudit`]). `None` for an unknown cache or node.
pub fn audit(name: &str, node: usize) -> Option<NodeAudit> {
    let class = SizeClass::from_name(name)?;
    let node = sheafalloc_core::NodeId::new(node)
        .filter(|n| n.index() < sheafalloc_core::node::node_count())?;
    Some(stats::audit(class, node))
}
