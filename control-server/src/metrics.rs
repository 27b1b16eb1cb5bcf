//! `GET /metrics`: Prometheus text exposition, built at scrape time.
//!
//! [`SnapshotCollector`] is a `prometheus::Collector` that holds no
//! values: every `collect` takes a fresh snapshot of every cache (and of
//! each node's barns and slabs) and builds the metric families from it, so
//! the allocator's fast path never pays for the exporter.
//!
//! # Names
//!
//! All names start with `sheafalloc_`; counters end in `_total`, sizes are
//! in bytes and end in `_bytes`. Per-cache metrics carry the label `cache`
//! (`size-256`); per-node metrics add `node` (the allocator's node index,
//! as in `GET /v1/topology`). The table below is the single list; the
//! README repeats it for readers.
//!
//! # Which caches appear
//!
//! A cache gets series once it has been used (an allocation, a slab) or
//! its capacity was changed from the default; from then on it stays (its
//! counters never go back to zero). The caches nobody uses — often half of
//! the 97 — would otherwise double the size and cost of every scrape with
//! zeros. `GET /v1/caches` always lists every cache.

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use sheafalloc_core::cache::{default_sheaf_capacity, node_class};
use sheafalloc_core::node::{node_count, nodes_are_simulated, NodeId};
use sheafalloc_core::slab::slab_bytes;
use sheafalloc_core::stats::{large_stats, CacheStats, LargeStats};
use sheafalloc_core::{runtime, SizeClass};

use crate::caches::snapshot_all;
use crate::error::ApiError;
use crate::AppState;

/// How a per-cache metric reads its value from a snapshot.
#[derive(Clone, Copy)]
enum CacheValue {
    Counter(fn(&CacheStats) -> u64),
    Gauge(fn(&CacheStats) -> i64),
}

/// One per-cache metric: name, help, reader.
struct CacheMetric {
    name: &'static str,
    help: &'static str,
    value: CacheValue,
}

const fn counter(
    name: &'static str,
    help: &'static str,
    read: fn(&CacheStats) -> u64,
) -> CacheMetric {
    CacheMetric {
        name,
        help,
        value: CacheValue::Counter(read),
    }
}

const fn gauge(
    name: &'static str,
    help: &'static str,
    read: fn(&CacheStats) -> i64,
) -> CacheMetric {
    CacheMetric {
        name,
        help,
        value: CacheValue::Gauge(read),
    }
}

fn gauge_value(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

// Values go out as f64 (the exposition format's type): exact up to 2^53.

/// Every per-cache metric (label `cache`).
const CACHE_METRICS: &[CacheMetric] = &[
    counter(
        "sheafalloc_allocations_total",
        "Allocations served by the cache.",
        |s| s.allocations,
    ),
    counter(
        "sheafalloc_frees_total",
        "Frees received by the cache.",
        |s| s.frees,
    ),
    gauge(
        "sheafalloc_live_objects",
        "Objects allocated and not yet freed.",
        |s| s.live_objects,
    ),
    gauge(
        "sheafalloc_object_size_bytes",
        "Slot size of the cache.",
        |s| gauge_value(s.object_size),
    ),
    gauge(
        "sheafalloc_sheaf_capacity",
        "Sheaf capacity threads apply at their next exchange.",
        |s| i64::from(s.sheaf_capacity),
    ),
    gauge(
        "sheafalloc_sheaf_capacity_in_use_min",
        "Smallest capacity of a main sheaf installed in a live thread (0: none installed).",
        |s| i64::from(s.sheaf_capacity_in_use_min),
    ),
    gauge(
        "sheafalloc_sheaf_capacity_in_use_max",
        "Largest capacity of a main sheaf installed in a live thread.",
        |s| i64::from(s.sheaf_capacity_in_use_max),
    ),
    counter(
        "sheafalloc_spare_swaps_total",
        "Main and spare sheaf swaps.",
        |s| s.spare_swaps,
    ),
    counter(
        "sheafalloc_barn_get_hits_total",
        "Full sheaves taken from a barn.",
        |s| s.barn_get_hits,
    ),
    counter(
        "sheafalloc_barn_get_misses_total",
        "Times a barn had no full sheaf (a slab refill followed).",
        |s| s.barn_get_misses,
    ),
    counter(
        "sheafalloc_barn_put_hits_total",
        "Full sheaves stored in a barn.",
        |s| s.barn_put_hits,
    ),
    counter(
        "sheafalloc_barn_put_misses_total",
        "Times a barn was at its limit (a slab flush followed).",
        |s| s.barn_put_misses,
    ),
    counter(
        "sheafalloc_slab_refills_total",
        "Bulk refills of a sheaf from slabs.",
        |s| s.slab_refills,
    ),
    counter(
        "sheafalloc_slab_refilled_objects_total",
        "Objects moved from slabs into sheaves.",
        |s| s.refilled_objects,
    ),
    counter("sheafalloc_slab_flushes_total", "Flushes to slabs.", |s| {
        s.slab_flushes
    }),
    counter(
        "sheafalloc_slab_flushed_objects_total",
        "Objects moved from sheaves to slabs.",
        |s| s.flushed_objects,
    ),
    counter(
        "sheafalloc_remote_frees_total",
        "Frees of objects whose home node was not the freeing thread's node.",
        |s| s.remote_frees,
    ),
    counter(
        "sheafalloc_sheaf_resizes_total",
        "Sheaves resized after a capacity change.",
        |s| s.sheaf_resizes,
    ),
    counter(
        "sheafalloc_alloc_failures_total",
        "Allocations that failed because the OS refused memory.",
        |s| s.alloc_failures,
    ),
    counter(
        "sheafalloc_slow_path_allocations_total",
        "Allocations that missed the fast path (main sheaf empty); a high share of allocations means the sheaf capacity is small for the bursts.",
        |s| s.slow_path_allocs,
    ),
    counter(
        "sheafalloc_slow_path_frees_total",
        "Frees that missed the fast path (main sheaf full, or a remote object).",
        |s| s.slow_path_frees,
    ),
    gauge(
        "sheafalloc_barn_full_sheaves",
        "Full sheaves waiting in barns (all nodes).",
        |s| gauge_value(s.barn_full_sheaves),
    ),
    gauge(
        "sheafalloc_barn_empty_sheaves",
        "Empty sheaves waiting in barns (all nodes).",
        |s| gauge_value(s.barn_empty_sheaves),
    ),
    gauge(
        "sheafalloc_barn_objects",
        "Free objects in barns' full sheaves.",
        |s| gauge_value(s.barn_objects),
    ),
    gauge(
        "sheafalloc_thread_main_objects",
        "Free objects in live threads' main sheaves.",
        |s| gauge_value(s.thread_main_objects),
    ),
    gauge(
        "sheafalloc_slabs",
        "Slabs held (full, partial and empty).",
        |s| gauge_value(s.slabs),
    ),
    gauge("sheafalloc_empty_slabs", "Empty slabs held.", |s| {
        gauge_value(s.empty_slabs)
    }),
    gauge(
        "sheafalloc_slab_free_objects",
        "Free objects in slabs.",
        |s| gauge_value(s.slab_free_objects),
    ),
    gauge(
        "sheafalloc_held_bytes",
        "Bytes committed to the cache's slabs.",
        |s| gauge_value(s.bytes_held),
    ),
    counter(
        "sheafalloc_returned_bytes_total",
        "Bytes returned to the OS.",
        |s| s.bytes_returned,
    ),
    counter(
        "sheafalloc_return_failures_total",
        "Times the OS refused to take pages back.",
        |s| s.return_failures,
    ),
];

/// Per-node metrics (labels `cache`, `node`).
const NODE_METRICS: &[(&str, &str)] = &[
    (
        "sheafalloc_node_barn_full_sheaves",
        "Full sheaves in the node's barn.",
    ),
    (
        "sheafalloc_node_barn_empty_sheaves",
        "Empty sheaves in the node's barn.",
    ),
    ("sheafalloc_node_slabs", "Slabs the node holds."),
    (
        "sheafalloc_node_held_bytes",
        "Bytes committed to the node's slabs.",
    ),
    (
        "sheafalloc_node_slab_free_objects",
        "Free objects in the node's slabs.",
    ),
];
const NODE_RETURNED: (&str, &str) = (
    "sheafalloc_node_returned_bytes_total",
    "Bytes the node's slabs returned to the OS.",
);
/// Remote frees by destination (labels `cache`, `node` = the objects' home
/// node, `from_node` = the freeing thread's node); only pairs with frees.
const NODE_REMOTE_FREES: (&str, &str) = (
    "sheafalloc_node_remote_frees_total",
    "Frees of objects whose home is `node`, made by threads on `from_node` and handed home in batches.",
);

/// Process-wide gauges and counters (no `cache` label).
const GLOBAL_GAUGES: &[(&str, &str)] = &[
    ("sheafalloc_nodes", "NUMA nodes the allocator uses."),
    ("sheafalloc_threads", "Live threads with a thread cache."),
    (
        "sheafalloc_large_live_objects",
        "Direct mappings (objects above the largest class) live now.",
    ),
    (
        "sheafalloc_large_held_bytes",
        "Bytes of direct mappings now.",
    ),
];
const GLOBAL_COUNTERS: &[(&str, &str)] = &[
    (
        "sheafalloc_threads_started_total",
        "Threads that ever registered a thread cache.",
    ),
    (
        "sheafalloc_large_allocations_total",
        "Direct mappings made.",
    ),
    ("sheafalloc_large_frees_total", "Direct mappings released."),
    (
        "sheafalloc_large_returned_bytes_total",
        "Bytes of direct mappings unmapped.",
    ),
    (
        "sheafalloc_large_alloc_failures_total",
        "Direct mappings the OS refused.",
    ),
    (
        "sheafalloc_large_remaps_total",
        "Reallocations done with mremap.",
    ),
];
const NODE_INFO: (&str, &str) = (
    "sheafalloc_node_info",
    "One series per node the allocator uses (value 1); `simulated` tells whether SHEAFALLOC_NUMA_NODES simulates it.",
);

/// The Prometheus collector over the allocator's statistics.
pub struct SnapshotCollector {
    descs: Vec<Desc>,
}

impl core::fmt::Debug for SnapshotCollector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SnapshotCollector")
            .field("metrics", &self.descs.len())
            .finish()
    }
}

impl Default for SnapshotCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotCollector {
    /// The collector (descriptors only; values are read at collect time).
    pub fn new() -> Self {
        let mut descs = Vec::new();
        let mut add = |name: &str, help: &str, labels: &[&str]| {
            let labels = labels.iter().map(|label| (*label).to_owned()).collect();
            if let Ok(desc) =
                Desc::new(name.to_owned(), help.to_owned(), labels, Default::default())
            {
                descs.push(desc);
            }
        };
        for metric in CACHE_METRICS {
            add(metric.name, metric.help, &["cache"]);
        }
        for (name, help) in NODE_METRICS.iter().chain([&NODE_RETURNED]) {
            add(name, help, &["cache", "node"]);
        }
        add(
            NODE_REMOTE_FREES.0,
            NODE_REMOTE_FREES.1,
            &["cache", "node", "from_node"],
        );
        for (name, help) in GLOBAL_GAUGES.iter().chain(GLOBAL_COUNTERS) {
            add(name, help, &[]);
        }
        add(NODE_INFO.0, NODE_INFO.1, &["node", "simulated"]);
        Self { descs }
    }
}

impl Collector for SnapshotCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut caches = snapshot_all();
        caches.retain(|(class, stats)| is_reported(*class, stats));
        let nodes = node_snapshot(&caches);
        let mut families = Vec::new();
        collect_caches(&caches, &mut families);
        collect_nodes(&nodes, &mut families);
        collect_remote_frees(&caches, node_count(), &mut families);
        collect_global(large_stats(), runtime::thread_counts(), &mut families);
        families
    }
}

/// Whether a cache gets series (see "Which caches appear").
fn is_reported(class: SizeClass, stats: &CacheStats) -> bool {
    stats.allocations > 0
        || stats.slabs > 0
        || stats.bytes_returned > 0
        || stats.sheaf_capacity != default_sheaf_capacity(class)
}

/// Builds one metric family sample by sample.
///
/// The families are assembled directly (not through `IntCounterVec` and
/// friends, whose label hashing and per-child atomics would cost several
/// times more per scrape), with the same `prometheus::proto` calls the
/// crate's own metric types use.
struct Family {
    family: MetricFamily,
    metrics: Vec<Metric>,
    kind: MetricType,
}

impl Family {
    fn new(name: &str, help: &str, kind: MetricType) -> Self {
        let mut family = MetricFamily::default();
        family.set_name(name.to_owned());
        family.set_help(help.to_owned());
        family.set_field_type(kind);
        Self {
            family,
            metrics: Vec::new(),
            kind,
        }
    }

    fn counter(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::COUNTER)
    }

    fn gauge(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::GAUGE)
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let labels = labels
            .iter()
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name((*name).to_owned());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect();
        let mut metric = Metric::from_label(labels);
        if self.kind == MetricType::COUNTER {
            let mut counter = Counter::default();
            counter.set_value(value);
            metric.set_counter(counter);
        } else {
            let mut gauge = Gauge::default();
            gauge.set_value(value);
            metric.set_gauge(gauge);
        }
        self.metrics.push(metric);
    }

    /// Adds the family if it has samples (an empty family is not valid
    /// exposition).
    fn finish_into(mut self, families: &mut Vec<MetricFamily>) {
        if !self.metrics.is_empty() {
            self.family.set_metric(self.metrics);
            families.push(self.family);
        }
    }
}

fn collect_caches(caches: &[(SizeClass, CacheStats)], families: &mut Vec<MetricFamily>) {
    let names: Vec<_> = caches.iter().map(|(class, _)| class.name()).collect();
    for metric in CACHE_METRICS {
        let mut family = match metric.value {
            CacheValue::Counter(_) => Family::counter(metric.name, metric.help),
            CacheValue::Gauge(_) => Family::gauge(metric.name, metric.help),
        };
        for ((_, stats), name) in caches.iter().zip(&names) {
            let value = match metric.value {
                CacheValue::Counter(read) => read(stats) as f64,
                CacheValue::Gauge(read) => read(stats) as f64,
            };
            family.sample(&[("cache", name.as_str())], value);
        }
        family.finish_into(families);
    }
}

/// One cache on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NodeCacheStats {
    class: SizeClass,
    node: usize,
    barn_full_sheaves: u64,
    barn_empty_sheaves: u64,
    slabs: u64,
    held_bytes: u64,
    slab_free_objects: u64,
    returned_bytes: u64,
}

/// Reads each node's barn and slab counts for the caches that have been
/// used (taking each lock briefly, as `cache_stats` does).
fn node_snapshot(caches: &[(SizeClass, CacheStats)]) -> Vec<NodeCacheStats> {
    let mut out = Vec::new();
    for (class, stats) in caches {
        if stats.slabs == 0 && stats.bytes_returned == 0 && stats.barn_empty_sheaves == 0 {
            continue;
        }
        for node in NodeId::all() {
            let node_class = node_class(node, *class);
            let (full, empty) = node_class.barn.lock().counts();
            let slabs = node_class.slabs.lock().counts();
            out.push(NodeCacheStats {
                class: *class,
                node: node.index(),
                barn_full_sheaves: u64::from(full),
                barn_empty_sheaves: u64::from(empty),
                slabs: slabs.slabs,
                held_bytes: slabs.slabs.saturating_mul(slab_bytes(*class) as u64),
                slab_free_objects: slabs.free_objects,
                returned_bytes: slabs.bytes_returned,
            });
        }
    }
    out
}

fn collect_nodes(nodes: &[NodeCacheStats], families: &mut Vec<MetricFamily>) {
    let labels: Vec<_> = nodes
        .iter()
        .map(|stats| (stats.class.name(), stats.node.to_string()))
        .collect();
    let readers: [fn(&NodeCacheStats) -> u64; 5] = [
        |n| n.barn_full_sheaves,
        |n| n.barn_empty_sheaves,
        |n| n.slabs,
        |n| n.held_bytes,
        |n| n.slab_free_objects,
    ];
    let families_and_readers = NODE_METRICS
        .iter()
        .map(|(name, help)| Family::gauge(name, help))
        .zip(readers)
        .chain([(
            Family::counter(NODE_RETURNED.0, NODE_RETURNED.1),
            (|n| n.returned_bytes) as fn(&NodeCacheStats) -> u64,
        )]);
    for (mut family, read) in families_and_readers {
        for (stats, (cache, node)) in nodes.iter().zip(&labels) {
            family.sample(
                &[("cache", cache.as_str()), ("node", node.as_str())],
                read(stats) as f64,
            );
        }
        family.finish_into(families);
    }
}

fn collect_remote_frees(
    caches: &[(SizeClass, CacheStats)],
    nodes: usize,
    families: &mut Vec<MetricFamily>,
) {
    let mut family = Family::counter(NODE_REMOTE_FREES.0, NODE_REMOTE_FREES.1);
    for (class, stats) in caches {
        if stats.remote_frees == 0 {
            continue;
        }
        let name = class.name();
        for (from, row) in stats.remote_frees_by_node.iter().enumerate().take(nodes) {
            for (to, &count) in row.iter().enumerate().take(nodes) {
                if count == 0 {
                    continue;
                }
                let (to, from) = (to.to_string(), from.to_string());
                family.sample(
                    &[
                        ("cache", name.as_str()),
                        ("from_node", from.as_str()),
                        ("node", to.as_str()),
                    ],
                    count as f64,
                );
            }
        }
    }
    family.finish_into(families);
}

fn collect_global(large: LargeStats, threads: (u64, u64), families: &mut Vec<MetricFamily>) {
    let gauges = [
        node_count() as f64,
        threads.0 as f64,
        large.live_objects as f64,
        large.bytes_held as f64,
    ];
    for ((name, help), value) in GLOBAL_GAUGES.iter().zip(gauges) {
        let mut family = Family::gauge(name, help);
        family.sample(&[], value);
        family.finish_into(families);
    }
    let counters = [
        threads.1,
        large.allocations,
        large.frees,
        large.bytes_returned,
        large.alloc_failures,
        large.remaps,
    ];
    for ((name, help), value) in GLOBAL_COUNTERS.iter().zip(counters) {
        let mut family = Family::counter(name, help);
        family.sample(&[], value as f64);
        family.finish_into(families);
    }
    let mut info = Family::gauge(NODE_INFO.0, NODE_INFO.1);
    let simulated = if nodes_are_simulated() {
        "true"
    } else {
        "false"
    };
    for node in NodeId::all() {
        let node = node.index().to_string();
        info.sample(&[("node", node.as_str()), ("simulated", simulated)], 1.0);
    }
    info.finish_into(families);
}

/// Content type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let families = state.registry().gather();
    let mut text = Vec::with_capacity(256 * 1024);
    TextEncoder::new()
        .encode(&families, &mut text)
        .map_err(|error| ApiError::Internal(format!("cannot encode metrics: {error}")))?;
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions() {
        let mut names: Vec<&str> = CACHE_METRICS.iter().map(|m| m.name).collect();
        names.extend(NODE_METRICS.iter().map(|(name, _)| *name));
        names.extend(GLOBAL_GAUGES.iter().map(|(name, _)| *name));
        names.extend(GLOBAL_COUNTERS.iter().map(|(name, _)| *name));
        names.extend([NODE_RETURNED.0, NODE_REMOTE_FREES.0, NODE_INFO.0]);
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "duplicate metric names");
        for name in &names {
            assert!(name.starts_with("sheafalloc_"), "{name}");
        }
        for metric in CACHE_METRICS {
            let is_counter = matches!(metric.value, CacheValue::Counter(_));
            assert_eq!(
                metric.name.ends_with("_total"),
                is_counter,
                "{}",
                metric.name
            );
        }
        for (name, _) in GLOBAL_COUNTERS {
            assert!(name.ends_with("_total"), "{name}");
        }
        for (name, _) in GLOBAL_GAUGES.iter().chain(NODE_METRICS) {
            assert!(!name.ends_with("_total"), "{name}");
        }
    }

    #[test]
    fn remote_frees_are_labelled_by_home_and_freeing_node() {
        let class = SizeClass::from_name("size-64").unwrap();
        let mut stats = CacheStats {
            remote_frees: 5,
            ..CacheStats::default()
        };
        stats.remote_frees_by_node[1][0] = 5;
        let mut families = Vec::new();
        collect_remote_frees(&[(class, stats)], 2, &mut families);
        let mut text = Vec::new();
        TextEncoder::new().encode(&families, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains(
                r#"sheafalloc_node_remote_frees_total{cache="size-64",from_node="1",node="0"} 5"#
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("sheafalloc_node_remote_frees_total{").count(),
            1
        );
    }

    #[test]
    fn the_collector_registers_and_reports_the_caches_in_use() {
        // This unit-test process runs on the system allocator: no cache is
        // used, so only a changed capacity makes one appear.
        let class = SizeClass::from_name("size-45056").unwrap();
        sheafalloc_core::set_sheaf_capacity(class, 3).unwrap();
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(SnapshotCollector::new()))
            .expect("the collector's descriptors are valid and distinct");
        let families = registry.gather();
        let family = |name: &str| families.iter().find(|family| family.name() == name);
        let capacity = family("sheafalloc_sheaf_capacity").expect("capacity family");
        let caches: Vec<&str> = capacity
            .get_metric()
            .iter()
            .map(|metric| metric.get_label()[0].value())
            .collect();
        assert_eq!(caches, ["size-45056"]);
        assert_eq!(capacity.get_metric()[0].get_gauge().get_value(), 3.0);
        assert!(family("sheafalloc_nodes").is_some());
        assert!(family("sheafalloc_node_info").is_some());
    }
}
