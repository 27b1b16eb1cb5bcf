//! The counter table: every per-cache statistic, declared once.
//!
//! Each line of the tables below names one statistic — its field, its
//! metric name, its kind and its help text — and that one line generates:
//!
//! * for an *event* (something the engine counts as it happens): an
//!   `AtomicU64` in [`CacheCounters`], bumped on slow paths;
//! * a field of the plain-value snapshot [`CacheStats`] (or [`NodeStats`]
//!   for what lives per node: barns and slabs), which is what the control
//!   plane serialises as JSON (with the `serde` feature);
//! * an entry of [`CacheStats::FIELDS`] / [`NodeStats::FIELDS`]: name, kind,
//!   help and a reader, from which the control plane builds its Prometheus
//!   metric families.
//!
//! Adding an event counter is one line in `events`; bump it with
//! [`CacheCounters::add`] where it happens. A *reading* (a value computed
//! when the snapshot is taken, e.g. live objects) is one line in `readings`
//! plus the line of `stats.rs` that computes it.
//!
//! This module only declares; `stats.rs` fills the snapshots.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::node::{NodeId, MAX_NODES};

/// How a statistic behaves, for exporters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatKind {
    /// Only grows (Prometheus counter; its metric name ends in `_total`).
    Counter,
    /// Describes the moment of the read (Prometheus gauge).
    Gauge,
}

/// One statistic of a snapshot type `S`, as exporters see it.
pub struct StatField<S> {
    /// The field (and JSON key).
    pub field: &'static str,
    /// The metric name, `sheafalloc_` included.
    pub metric: &'static str,
    /// Counter or gauge.
    pub kind: StatKind,
    /// One-line help text (the metric's HELP).
    pub help: &'static str,
    /// Reads the value from a snapshot.
    pub read: fn(&S) -> i64,
}

impl<S> core::fmt::Debug for StatField<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StatField")
            .field("field", &self.field)
            .field("metric", &self.metric)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The value types of snapshots: conversion to the exporters' common type
/// and field-wise sums, neither of which can panic.
pub trait StatValue: Copy {
    /// The value as `i64`, saturated.
    fn to_i64(self) -> i64;
    /// `self + other`, wrapping (counters are free-running).
    fn sum(self, other: Self) -> Self;
}

impl StatValue for u64 {
    fn to_i64(self) -> i64 {
        i64::try_from(self).unwrap_or(i64::MAX)
    }
    fn sum(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

impl StatValue for u32 {
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
    fn sum(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

impl StatValue for i64 {
    fn to_i64(self) -> i64 {
        self
    }
    fn sum(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

macro_rules! kind {
    (counter) => {
        StatKind::Counter
    };
    (gauge) => {
        StatKind::Gauge
    };
}

/// One cache's remote frees by `[from node][home node]`, counted when a
/// batch is handed to its home node.
///
/// Kept apart from [`CacheCounters`] (the depot gives both): the matrix is
/// 2 KiB per cache and stays zero on a one-node machine, and inside each
/// cache's counters it spread the 97 caches' slow-path counters over 224
/// KiB, every page of which a busy process then wrote (resident memory).
/// Apart, the counters fit in 25 KiB and the matrices' pages are never
/// written where no free crosses nodes.
#[derive(Debug)]
pub struct RemoteFrees([[AtomicU64; MAX_NODES]; MAX_NODES]);

impl RemoteFrees {
    /// All zero.
    pub const fn new() -> Self {
        Self([const { [const { AtomicU64::new(0) }; MAX_NODES] }; MAX_NODES])
    }

    /// Counts `count` objects freed on `from` and handed to `home`.
    #[inline]
    pub fn add(&self, from: NodeId, home: NodeId, count: u32) {
        if let Some(counter) = self
            .0
            .get(from.index())
            .and_then(|row| row.get(home.index()))
        {
            counter.fetch_add(u64::from(count), Ordering::Relaxed);
        }
    }

    /// The count of `[from][home]`.
    pub fn get(&self, from: NodeId, home: NodeId) -> u64 {
        self.0
            .get(from.index())
            .and_then(|row| row.get(home.index()))
            .map_or(0, |counter| counter.load(Ordering::Relaxed))
    }

    /// Copies the matrix into `out`; returns the sum of its counts
    /// (wrapping, as counters sum).
    pub fn read(&self, out: &mut [[u64; MAX_NODES]; MAX_NODES]) -> u64 {
        let mut total = 0u64;
        for (row, counts) in self.0.iter().zip(out.iter_mut()) {
            for (counter, count) in row.iter().zip(counts.iter_mut()) {
                *count = counter.load(Ordering::Relaxed);
                total = total.wrapping_add(*count);
            }
        }
        total
    }
}

impl Default for RemoteFrees {
    fn default() -> Self {
        Self::new()
    }
}

/// Generates a snapshot struct, its `FIELDS` table and (with `counters`)
/// the atomic counters behind its events. See the module docs.
macro_rules! stat_table {
    (
        $(#[$snapshot_meta:meta])*
        pub struct $snapshot:ident;
        $(#[$counters_meta:meta])*
        counters $counters:ident;
        events { $( $event:ident => $event_metric:literal, $event_help:literal; )* }
        $($rest:tt)*
    ) => {
        stat_table! {
            $(#[$snapshot_meta])*
            pub struct $snapshot;
            events { $( $event => $event_metric, $event_help; )* }
            $($rest)*
        }

        $(#[$counters_meta])*
        #[derive(Debug, Default)]
        pub struct $counters {
            $( #[doc = $event_help] pub $event: AtomicU64, )*
            /// Allocations folded in from threads that exited, plus those
            /// served without a thread cache.
            pub allocs_folded: AtomicU64,
            /// Frees folded in, as `allocs_folded`.
            pub frees_folded: AtomicU64,
        }

        impl $counters {
            /// All zero.
            pub const fn new() -> Self {
                Self {
                    $( $event: AtomicU64::new(0), )*
                    allocs_folded: AtomicU64::new(0),
                    frees_folded: AtomicU64::new(0),
                }
            }

            /// Adds `n` to a counter (slow paths only).
            #[inline]
            pub fn add(counter: &AtomicU64, n: u64) {
                counter.fetch_add(n, Ordering::Relaxed);
            }

            /// Copies every event counter into `snapshot`.
            pub fn read_events(&self, snapshot: &mut $snapshot) {
                $( snapshot.$event = self.$event.load(Ordering::Relaxed); )*
            }
        }
    };
    (
        $(#[$snapshot_meta:meta])*
        pub struct $snapshot:ident;
        events { $( $event:ident => $event_metric:literal, $event_help:literal; )* }
        readings { $( $reading:ident: $ty:ty => $kind:ident $metric:literal, $help:literal; )* }
        extra { $( $(#[$extra_meta:meta])* $extra:ident: $extra_ty:ty, )* }
    ) => {
        $(#[$snapshot_meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(default))]
        pub struct $snapshot {
            $( #[doc = $help] pub $reading: $ty, )*
            $( #[doc = $event_help] pub $event: u64, )*
            $( $(#[$extra_meta])* pub $extra: $extra_ty, )*
        }

        impl $snapshot {
            /// Every statistic of the table, in declaration order.
            pub const FIELDS: &'static [StatField<$snapshot>] = &[
                $(
                    StatField {
                        field: stringify!($reading),
                        metric: concat!("sheafalloc_", $metric),
                        kind: kind!($kind),
                        help: $help,
                        read: |s| StatValue::to_i64(s.$reading),
                    },
                )*
                $(
                    StatField {
                        field: stringify!($event),
                        metric: concat!("sheafalloc_", $event_metric),
                        kind: StatKind::Counter,
                        help: $event_help,
                        read: |s| StatValue::to_i64(s.$event),
                    },
                )*
            ];

            /// Adds every table field of `other` to this one (field-wise
            /// sum; the `extra` fields are left alone).
            pub fn accumulate(&mut self, other: &Self) {
                $( self.$reading = StatValue::sum(self.$reading, other.$reading); )*
                $( self.$event = StatValue::sum(self.$event, other.$event); )*
            }
        }
    };
}

stat_table! {
    /// Where one cache's free memory sits on one node (or, as
    /// `CacheStats::all_nodes`, summed over nodes): its barn and its slabs.
    pub struct NodeStats;
    events {}
    readings {
        barn_full_sheaves: u64 => gauge "barn_full_sheaves",
            "Full sheaves waiting in the barn.";
        barn_empty_sheaves: u64 => gauge "barn_empty_sheaves",
            "Empty sheaves waiting in the barn.";
        barn_objects: u64 => gauge "barn_objects",
            "Free objects in the barn's full sheaves.";
        slabs: u64 => gauge "slabs",
            "Slabs held (full, partial and empty).";
        empty_slabs: u64 => gauge "empty_slabs",
            "Empty slabs held (returned to the OS after the decay period).";
        slab_free_objects: u64 => gauge "slab_free_objects",
            "Free objects in slabs.";
        bytes_held: u64 => gauge "held_bytes",
            "Bytes of memory committed to the slabs.";
        bytes_returned: u64 => counter "returned_bytes_total",
            "Bytes the slabs returned to the OS.";
        return_failures: u64 => counter "return_failures_total",
            "Times the OS refused to take pages back (the slabs were kept, intact).";
    }
    extra {}
}

stat_table! {
    /// A snapshot of one size-class cache. Counters only grow; gauges
    /// describe the moment of the read.
    pub struct CacheStats;
    /// The event counters of one cache, bumped on slow paths. Each only
    /// grows.
    counters CacheCounters;
    events {
        spare_swaps => "spare_swaps_total",
            "Main and spare sheaves swapped (main empty on alloc, full on free; a free right after an allocation's swap splits main with the spare instead, counted here too).";
        barn_get_hits => "barn_get_hits_total",
            "Full sheaves taken from a barn.";
        barn_get_misses => "barn_get_misses_total",
            "Times a barn had no full sheaf (a slab refill followed).";
        barn_lane_steals => "barn_lane_steals_total",
            "Full sheaves taken from another CPU lane's surplus (objects freed on one CPU, used on another, as in a hand-off); counted among the barn's hits.";
        lane_returns => "lane_returned_objects_total",
            "Objects freed on a CPU of another lane (a thread that moved between the allocation and the free, or another thread) and sent back to their lane's barn stack in batches (per-CPU mode).";
        barn_put_hits => "barn_put_hits_total",
            "Full sheaves stored in a barn.";
        barn_put_misses => "barn_put_misses_total",
            "Times a barn was at its limit (a slab flush followed).";
        slab_refills => "slab_refills_total",
            "Bulk refills of a sheaf from slabs.";
        refilled_objects => "slab_refilled_objects_total",
            "Objects moved from slabs into sheaves.";
        slab_flushes => "slab_flushes_total",
            "Flushes from sheaves (or single frees) to slabs.";
        flushed_objects => "slab_flushed_objects_total",
            "Objects moved from sheaves to slabs.";
        sheaf_resizes => "sheaf_resizes_total",
            "Sheaves resized after a capacity change.";
        alloc_failures => "alloc_failures_total",
            "Allocations that failed because the OS refused memory.";
        slow_path_allocs => "slow_path_allocations_total",
            "Allocations that missed the fast path (main sheaf empty or missing); a high share of allocations says the sheaf capacity is small for the bursts.";
        slow_path_frees => "slow_path_frees_total",
            "Frees that missed the fast path: main sheaf full; in per-thread mode also every free of another node's object; in per-CPU mode a free of another node's or lane's object only where its batch is full or for another home.";
        capacity_adjustments => "capacity_adjustments_total",
            "Sheaf capacity changes made by the auto-tuner.";
    }
    readings {
        object_size: u64 => gauge "object_size_bytes",
            "Slot size of the cache in bytes.";
        sheaf_capacity: u32 => gauge "sheaf_capacity",
            "Sheaf capacity threads apply at their next exchange.";
        sheaf_capacity_pinned: u32 => gauge "sheaf_capacity_pinned",
            "1 while the capacity is pinned by hand (the auto-tuner leaves it), else 0.";
        sheaf_capacity_in_use_min: u32 => gauge "sheaf_capacity_in_use_min",
            "Smallest capacity of a main sheaf installed in a live thread (0: none installed).";
        sheaf_capacity_in_use_max: u32 => gauge "sheaf_capacity_in_use_max",
            "Largest capacity of a main sheaf installed in a live thread.";
        allocations: u64 => counter "allocations_total",
            "Allocations served (all threads, living and exited).";
        frees: u64 => counter "frees_total",
            "Frees received.";
        live_objects: i64 => gauge "live_objects",
            "Objects allocated and not yet freed.";
        live_bytes: i64 => gauge "live_bytes",
            "Bytes of slots allocated and not yet freed (live objects times the slot size).";
        remote_frees: u64 => counter "remote_frees_total",
            "Frees of objects whose home node was not the freeing thread's (counted when handed home in a batch).";
        thread_main_objects: u64 => gauge "thread_main_objects",
            "Free objects in live threads' main sheaves.";
    }
    extra {
        /// How the capacity is chosen: `auto`, `pinned` or `off`.
        tuning: crate::tuner::Tuning,
        /// The auto-tuner's last decision for this cache (`reason: none`
        /// before the first).
        last_decision: crate::tuner::Decision,
        /// Milliseconds since that decision (0 before the first).
        last_decision_ms_ago: u64,
        /// The class (index into the size-class table).
        #[cfg_attr(feature = "serde", serde(skip))]
        class_index: usize,
        /// Barns and slabs summed over every node.
        #[cfg_attr(feature = "serde", serde(flatten))]
        all_nodes: NodeStats,
        /// Barns and slabs of each node (`..node_count()` are in use).
        #[cfg_attr(feature = "serde", serde(skip))]
        per_node: [NodeStats; MAX_NODES],
        /// Remote frees by `[from node][home node]`.
        #[cfg_attr(feature = "serde", serde(skip))]
        remote_frees_by_node: [[u64; MAX_NODES]; MAX_NODES],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_table<S>(fields: &[StatField<S>]) {
        for (i, field) in fields.iter().enumerate() {
            assert!(field.metric.starts_with("sheafalloc_"), "{field:?}");
            assert_eq!(
                field.metric.ends_with("_total"),
                field.kind == StatKind::Counter,
                "counters and only counters end in _total: {field:?}"
            );
            assert!(!field.help.is_empty(), "{field:?}");
            for other in &fields[i + 1..] {
                assert_ne!(field.field, other.field);
                assert_ne!(field.metric, other.metric);
            }
        }
    }

    #[test]
    fn tables_follow_the_naming_rules() {
        check_table(CacheStats::FIELDS);
        check_table(NodeStats::FIELDS);
        for cache in CacheStats::FIELDS {
            assert!(
                NodeStats::FIELDS
                    .iter()
                    .all(|node| node.metric != cache.metric),
                "{cache:?} is declared per cache and per node"
            );
        }
    }

    #[test]
    fn remote_frees_count_by_node_pair_and_sum() {
        let remote = RemoteFrees::new();
        let (a, b) = (NodeId::new(0).unwrap(), NodeId::new(1).unwrap());
        remote.add(a, b, 5);
        remote.add(a, b, 2);
        remote.add(b, a, 1);
        assert_eq!(
            (remote.get(a, b), remote.get(b, a), remote.get(a, a)),
            (7, 1, 0)
        );
        let mut out = [[0u64; MAX_NODES]; MAX_NODES];
        assert_eq!(remote.read(&mut out), 8);
        assert_eq!((out[0][1], out[1][0], out[1][1]), (7, 1, 0));
    }

    #[test]
    fn readers_read_their_own_field() {
        let counters = CacheCounters::new();
        CacheCounters::add(&counters.barn_get_misses, 7);
        let mut stats = CacheStats {
            live_objects: -3,
            ..CacheStats::default()
        };
        counters.read_events(&mut stats);
        let read = |name: &str| {
            let field = CacheStats::FIELDS.iter().find(|f| f.field == name).unwrap();
            (field.read)(&stats)
        };
        assert_eq!(read("barn_get_misses"), 7);
        assert_eq!(read("barn_get_hits"), 0);
        assert_eq!(read("live_objects"), -3);
        let node = NodeStats {
            bytes_held: u64::MAX,
            ..NodeStats::default()
        };
        let held = NodeStats::FIELDS.iter().find(|f| f.field == "bytes_held");
        assert_eq!((held.unwrap().read)(&node), i64::MAX, "saturates");
    }
}
