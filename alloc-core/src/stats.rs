//! Statistics: plain-value snapshots of the caches (types declared once in
//! `counters.rs`), assembled at read time from each cache's slow-path
//! counters, its barns and slab lists on every node, and the per-thread
//! fast-path counters of every live thread.
//!
//! Reading takes each barn and slab-list lock briefly and the registry lock
//! while thread counters are summed; it never allocates, so it may run on
//! any thread, including the control-plane sidecar.

use core::sync::atomic::Ordering::Relaxed;

use crate::cache::{self, cache};
use crate::large::LARGE;
use crate::node::NodeId;
use crate::os;
use crate::runtime;
use crate::size_class::{SizeClass, NUM_CLASSES};
use crate::slab::slab_bytes;
use crate::thread_cache::SlotView;
use crate::tuner::{Decision, Tuning};

pub use crate::counters::{CacheStats, NodeStats};

/// A cache's snapshot reads as the sum of its nodes' too: `stats.slabs`
/// is `stats.all_nodes.slabs`.
impl core::ops::Deref for CacheStats {
    type Target = NodeStats;
    fn deref(&self) -> &NodeStats {
        &self.all_nodes
    }
}

impl CacheStats {
    /// The class this snapshot describes.
    pub fn class(&self) -> Option<SizeClass> {
        SizeClass::from_index(self.class_index)
    }
}

/// Reads a snapshot of `class`'s cache.
pub fn cache_stats(class: SizeClass) -> CacheStats {
    let mut stats = read_locked_parts(class);
    runtime::with_threads(|threads| {
        read_folded(class, &mut stats);
        for thread in threads {
            add_thread(&mut stats, thread.view(class));
        }
    });
    finish(class, &mut stats);
    stats
}

/// Reads a snapshot of every cache into `out` (indexed by class), walking
/// the thread registry once for all of them: what a scrape of every cache
/// costs is one pass over the threads, not one per cache.
pub fn cache_stats_all(out: &mut [CacheStats; NUM_CLASSES]) {
    // `SizeClass::all()` yields every class in index order, one per entry.
    for (stats, class) in out.iter_mut().zip(SizeClass::all()) {
        *stats = read_locked_parts(class);
    }
    runtime::with_threads(|threads| {
        for (stats, class) in out.iter_mut().zip(SizeClass::all()) {
            read_folded(class, stats);
        }
        for thread in threads {
            for (stats, class) in out.iter_mut().zip(SizeClass::all()) {
                add_thread(stats, thread.view(class));
            }
        }
    });
    for (stats, class) in out.iter_mut().zip(SizeClass::all()) {
        finish(class, stats);
    }
}

/// Everything but the live threads' counters: the cache's own counters,
/// its barns and slab lists (each lock taken briefly, one at a time).
fn read_locked_parts(class: SizeClass) -> CacheStats {
    let cache = cache(class);
    let counters = &cache.counters;
    let (last_decision, last_decision_ms_ago) = match cache.last_decision() {
        Some((decision, at_ms)) => (decision, os::monotonic_ms().saturating_sub(at_ms).max(1)),
        None => (Decision::default(), 0),
    };
    let tuning = cache.tuning();
    let mut stats = CacheStats {
        class_index: class.index(),
        object_size: class.object_size() as u64,
        sheaf_capacity: cache.sheaf_capacity(class),
        sheaf_capacity_pinned: u32::from(tuning == Tuning::Pinned),
        tuning,
        last_decision,
        last_decision_ms_ago,
        sheaf_capacity_in_use_min: u32::MAX,
        ..CacheStats::default()
    };
    counters.read_events(&mut stats);
    for node in NodeId::all() {
        let node_stats = node_stats(node, class);
        if let Some(entry) = stats.per_node.get_mut(node.index()) {
            *entry = node_stats;
        }
        stats.all_nodes.accumulate(&node_stats);
    }
    // Free-running counters, summed as the table sums counters.
    stats.remote_frees = crate::cache::remote_frees(class).read(&mut stats.remote_frees_by_node);
    stats
}

/// The counts folded in by exited threads, and the counters threads keep
/// on their own until they exit (slow paths, spare swaps), which hold the
/// exited threads' counts. Read under the registry lock (inside
/// `with_threads`), so a thread that exits during the read is counted
/// once: either folded here or still on the registry; read outside it, a
/// total could go back (see `SlowPathCount`).
fn read_folded(class: SizeClass, stats: &mut CacheStats) {
    let counters = &cache(class).counters;
    stats.allocations = counters.allocs_folded.load(Relaxed);
    stats.frees = counters.frees_folded.load(Relaxed);
    stats.slow_path_allocs = counters.slow_path_allocs.load(Relaxed);
    stats.slow_path_frees = counters.slow_path_frees.load(Relaxed);
    stats.spare_swaps = counters.spare_swaps.load(Relaxed);
}

fn node_stats(node: NodeId, class: SizeClass) -> NodeStats {
    let node_class = cache::node_class(node, class);
    let (full, empty, barn_objects) = {
        let barn = node_class.barn.lock();
        let (full, empty) = barn.counts();
        (full, empty, barn.objects_held())
    };
    let slabs = node_class.slabs.lock().counts();
    NodeStats {
        barn_full_sheaves: u64::from(full),
        barn_empty_sheaves: u64::from(empty),
        barn_objects,
        slabs: slabs.slabs,
        empty_slabs: slabs.empty_slabs,
        slab_free_objects: slabs.free_objects,
        bytes_held: slabs.slabs.saturating_mul(slab_bytes(class) as u64),
        bytes_returned: slabs.bytes_returned,
        return_failures: slabs.return_failures,
    }
}

fn add_thread(stats: &mut CacheStats, view: SlotView) {
    stats.allocations = stats.allocations.wrapping_add(view.allocs);
    stats.frees = stats.frees.wrapping_add(view.frees);
    stats.slow_path_allocs = stats.slow_path_allocs.wrapping_add(view.slow_allocs);
    stats.slow_path_frees = stats.slow_path_frees.wrapping_add(view.slow_frees);
    stats.spare_swaps = stats.spare_swaps.wrapping_add(view.spare_swaps);
    stats.thread_main_objects = stats
        .thread_main_objects
        .saturating_add(u64::from(view.main_len));
    if view.capacity > 0 {
        stats.sheaf_capacity_in_use_min = stats.sheaf_capacity_in_use_min.min(view.capacity);
        stats.sheaf_capacity_in_use_max = stats.sheaf_capacity_in_use_max.max(view.capacity);
    }
}

/// The readings derived from the others.
fn finish(class: SizeClass, stats: &mut CacheStats) {
    if crate::percpu::mode() == crate::percpu::CacheMode::PerCpu {
        let view = crate::percpu::view(class);
        // What the CPUs' pops and pushes counted (the threads count the
        // rest).
        stats.allocations = stats.allocations.wrapping_add(view.counts.allocs);
        stats.frees = stats.frees.wrapping_add(view.counts.frees);
        stats.thread_main_objects = stats.thread_main_objects.saturating_add(view.objects);
        if view.max_capacity > 0 {
            stats.sheaf_capacity_in_use_min =
                stats.sheaf_capacity_in_use_min.min(view.min_capacity);
            stats.sheaf_capacity_in_use_max =
                stats.sheaf_capacity_in_use_max.max(view.max_capacity);
        }
    }
    if stats.sheaf_capacity_in_use_max == 0 {
        stats.sheaf_capacity_in_use_min = 0;
    }
    stats.live_objects = (stats.allocations as i64).wrapping_sub(stats.frees as i64);
    stats.live_bytes = stats
        .live_objects
        .saturating_mul(class.object_size() as i64);
}

/// A snapshot of the direct mappings (objects above the largest class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LargeStats {
    /// Mappings made.
    pub allocations: u64,
    /// Mappings released.
    pub frees: u64,
    /// Mappings live now.
    pub live_objects: i64,
    /// Bytes mapped now.
    pub bytes_held: u64,
    /// Bytes unmapped since start.
    pub bytes_returned: u64,
    /// Mappings the OS refused.
    pub alloc_failures: u64,
    /// Reallocations done with `mremap`.
    pub remaps: u64,
}

/// Reads the direct-mapping counters.
pub fn large_stats() -> LargeStats {
    let allocations = LARGE.allocs.load(Relaxed);
    let frees = LARGE.frees.load(Relaxed);
    LargeStats {
        allocations,
        frees,
        live_objects: (allocations as i64).wrapping_sub(frees as i64),
        bytes_held: LARGE.bytes_held.load(Relaxed),
        bytes_returned: LARGE.bytes_returned.load(Relaxed),
        alloc_failures: LARGE.failures.load(Relaxed),
        remaps: LARGE.remaps.load(Relaxed),
    }
}

/// Where the objects of one cache on one node are, checked against the
/// slab metadata (every slab list invariant is verified on the way; a
/// violation aborts with a message).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeAudit {
    /// Slabs of this cache on this node.
    pub slabs: u64,
    /// Objects out of the slabs: held by users, or in some sheaf.
    pub objects_out_of_slabs: u64,
    /// Free objects in the slabs.
    pub slab_free_objects: u64,
    /// Free objects in this node's barn.
    pub barn_objects: u64,
}

/// Audits `class` on `node`. At quiescence (no object live, every thread's
/// sheaves flushed or exited) `objects_out_of_slabs == barn_objects`: every
/// free object is in exactly one place.
pub fn audit(class: SizeClass, node: NodeId) -> NodeAudit {
    let node_class = cache::node_class(node, class);
    let barn = node_class.barn.lock();
    barn.check_invariants();
    let barn_objects = barn.objects_held();
    drop(barn);
    let slabs = node_class.slabs.lock();
    let objects_out_of_slabs = slabs.check_invariants(node, class);
    let counts = slabs.counts();
    NodeAudit {
        slabs: counts.slabs,
        objects_out_of_slabs,
        slab_free_objects: counts.free_objects,
        barn_objects,
    }
}
