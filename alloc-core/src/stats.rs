//! Statistics: a plain-value snapshot of one cache, assembled at read time
//! from the cache's slow-path counters, its barns and slab lists on every
//! node, and the per-thread fast-path counters of every live thread.
//!
//! Reading takes each barn and slab-list lock briefly and the registry lock
//! while thread counters are summed; it never allocates, so it may run on
//! any thread, including the control-plane sidecar.

use core::sync::atomic::Ordering::Relaxed;

use crate::cache::{self, cache};
use crate::large::LARGE;
use crate::node::{NodeId, MAX_NODES};
use crate::runtime;
use crate::size_class::SizeClass;
use crate::slab::slab_bytes;

/// A snapshot of one size-class cache. Counters only grow; gauges
/// (`live_objects`, `slabs`, `bytes_held`, ...) describe the moment of the
/// read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// The class (index into the table).
    pub class_index: usize,
    /// Slot size in bytes.
    pub object_size: u64,
    /// Capacity threads apply at their next sheaf exchange.
    pub sheaf_capacity: u32,
    /// Smallest capacity of a main sheaf installed in a live thread right
    /// now (0 if no thread holds one).
    pub sheaf_capacity_in_use_min: u32,
    /// Largest such capacity.
    pub sheaf_capacity_in_use_max: u32,
    /// Allocations served (all threads, living and exited).
    pub allocations: u64,
    /// Frees received.
    pub frees: u64,
    /// Objects allocated and not yet freed (`allocations - frees`).
    pub live_objects: i64,
    /// Main/spare swaps.
    pub spare_swaps: u64,
    /// Full sheaves taken from a barn.
    pub barn_get_hits: u64,
    /// Times the barn had no full sheaf (a slab refill followed).
    pub barn_get_misses: u64,
    /// Full sheaves stored in a barn.
    pub barn_put_hits: u64,
    /// Times the barn was at its limit (a slab flush followed).
    pub barn_put_misses: u64,
    /// Bulk refills from slabs.
    pub slab_refills: u64,
    /// Objects moved from slabs to sheaves.
    pub refilled_objects: u64,
    /// Flushes to slabs.
    pub slab_flushes: u64,
    /// Objects moved to slabs.
    pub flushed_objects: u64,
    /// Frees of objects whose home node was not the freeing thread's
    /// (counted when handed over in a batch).
    pub remote_frees: u64,
    /// The same by `[from node][to node]`.
    pub remote_frees_by_node: [[u64; MAX_NODES]; MAX_NODES],
    /// Sheaves resized after a capacity change.
    pub sheaf_resizes: u64,
    /// Allocations that failed because the OS refused memory.
    pub alloc_failures: u64,
    /// Allocations served by a thread's slow path (main sheaf empty or
    /// missing). `allocations - slow_path_allocs` were fast-path hits; a
    /// high share here says the sheaf capacity is too small for the bursts.
    pub slow_path_allocs: u64,
    /// Frees that took the slow path (main sheaf full, or a remote object).
    pub slow_path_frees: u64,
    /// Full sheaves waiting in barns (all nodes).
    pub barn_full_sheaves: u64,
    /// Empty sheaves waiting in barns.
    pub barn_empty_sheaves: u64,
    /// Free objects in barns' full sheaves.
    pub barn_objects: u64,
    /// Free objects in live threads' main sheaves.
    pub thread_main_objects: u64,
    /// Slabs held (full, partial, empty).
    pub slabs: u64,
    /// Empty slabs held (returned to the OS after the decay period).
    pub empty_slabs: u64,
    /// Free objects in slabs.
    pub slab_free_objects: u64,
    /// Bytes of address space committed to this cache's slabs.
    pub bytes_held: u64,
    /// Bytes returned to the OS since start.
    pub bytes_returned: u64,
    /// Times the OS refused to take pages back (slabs kept, intact).
    pub return_failures: u64,
}

impl CacheStats {
    /// The class this snapshot describes.
    pub fn class(&self) -> Option<SizeClass> {
        SizeClass::from_index(self.class_index)
    }
}

/// Reads a snapshot of `class`'s cache.
pub fn cache_stats(class: SizeClass) -> CacheStats {
    let cache = cache(class);
    let counters = &cache.counters;
    let mut stats = CacheStats {
        class_index: class.index(),
        object_size: class.object_size() as u64,
        sheaf_capacity: cache.sheaf_capacity(class),
        ..CacheStats::default()
    };
    for node in NodeId::all() {
        let node_class = cache::node_class(node, class);
        {
            let barn = node_class.barn.lock();
            let (full, empty) = barn.counts();
            stats.barn_full_sheaves += u64::from(full);
            stats.barn_empty_sheaves += u64::from(empty);
            stats.barn_objects += barn.objects_held();
        }
        let slabs = node_class.slabs.lock().counts();
        stats.slabs += slabs.slabs;
        stats.empty_slabs += slabs.empty_slabs;
        stats.slab_free_objects += slabs.free_objects;
        stats.bytes_returned += slabs.bytes_returned;
        stats.return_failures += slabs.return_failures;
    }
    stats.bytes_held = stats.slabs * slab_bytes(class) as u64;
    let (allocations, frees, min, max, main_objects) = runtime::with_threads(|threads| {
        let mut allocations = counters.allocs_folded.load(Relaxed);
        let mut frees = counters.frees_folded.load(Relaxed);
        let (mut min, mut max, mut main_objects) = (u32::MAX, 0, 0u64);
        for thread in threads {
            let view = thread.view(class);
            allocations += view.allocs;
            frees += view.frees;
            main_objects += u64::from(view.main_len);
            if view.capacity > 0 {
                min = min.min(view.capacity);
                max = max.max(view.capacity);
            }
        }
        (
            allocations,
            frees,
            if max == 0 { 0 } else { min },
            max,
            main_objects,
        )
    });
    stats.allocations = allocations;
    stats.frees = frees;
    stats.live_objects = allocations as i64 - frees as i64;
    stats.sheaf_capacity_in_use_min = min;
    stats.sheaf_capacity_in_use_max = max;
    stats.thread_main_objects = main_objects;
    stats.spare_swaps = counters.spare_swaps.load(Relaxed);
    stats.barn_get_hits = counters.barn_get_hits.load(Relaxed);
    stats.barn_get_misses = counters.barn_get_misses.load(Relaxed);
    stats.barn_put_hits = counters.barn_put_hits.load(Relaxed);
    stats.barn_put_misses = counters.barn_put_misses.load(Relaxed);
    stats.slab_refills = counters.slab_refills.load(Relaxed);
    stats.refilled_objects = counters.refilled_objects.load(Relaxed);
    stats.slab_flushes = counters.slab_flushes.load(Relaxed);
    stats.flushed_objects = counters.flushed_objects.load(Relaxed);
    for (from, row) in counters.remote_frees.iter().enumerate() {
        for (to, count) in row.iter().enumerate() {
            let count = count.load(Relaxed);
            stats.remote_frees_by_node[from][to] = count;
            stats.remote_frees += count;
        }
    }
    stats.sheaf_resizes = counters.sheaf_resizes.load(Relaxed);
    stats.alloc_failures = counters.alloc_failures.load(Relaxed);
    stats.slow_path_allocs = counters.slow_path_allocs.load(Relaxed);
    stats.slow_path_frees = counters.slow_path_frees.load(Relaxed);
    stats
}

/// A snapshot of the direct mappings (objects above the largest class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
        live_objects: allocations as i64 - frees as i64,
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
