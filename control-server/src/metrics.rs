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
use sheafalloc_core::cache::default_sheaf_capacity;
use sheafalloc_core::node::{node_count, nodes_are_simulated, NodeId};
use sheafalloc_core::stats::{large_stats, CacheStats, LargeStats, NodeStats};
use sheafalloc_core::{runtime, SizeClass, StatField, StatKind};

use crate::caches::snapshot_all;
use crate::error::ApiError;
use crate::AppState;

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
        for field in CacheStats::FIELDS {
            add(field.metric, field.help, &["cache"]);
        }
        for field in NodeStats::FIELDS {
            add(field.metric, field.help, &["cache", "node"]);
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
        let mut families = Vec::new();
        collect_caches(&caches, &mut families);
        collect_nodes(&caches, node_count(), &mut families);
        collect_remote_frees(&caches, node_count(), &mut families);
        collect_global(large_stats(), runtime::thread_counts(), &mut families);
        families
    }
}

/// Whether a cache gets series (see "Which caches appear").
fn is_reported(class: SizeClass, stats: &CacheStats) -> bool {
    stats.allocations > 0
        || stats.all_nodes.slabs > 0
        || stats.all_nodes.bytes_returned > 0
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

/// A family for one statistic of the counter table.
fn family_of<S>(field: &StatField<S>) -> Family {
    match field.kind {
        StatKind::Counter => Family::counter(field.metric, field.help),
        StatKind::Gauge => Family::gauge(field.metric, field.help),
    }
}

fn collect_caches(caches: &[(SizeClass, CacheStats)], families: &mut Vec<MetricFamily>) {
    let names: Vec<_> = caches.iter().map(|(class, _)| class.name()).collect();
    for field in CacheStats::FIELDS {
        let mut family = family_of(field);
        for ((_, stats), name) in caches.iter().zip(&names) {
            family.sample(&[("cache", name.as_str())], (field.read)(stats) as f64);
        }
        family.finish_into(families);
    }
}

/// The per-node statistics of the caches whose memory is anywhere (one
/// series per cache and node; sums over nodes are left to PromQL).
fn collect_nodes(
    caches: &[(SizeClass, CacheStats)],
    nodes: usize,
    families: &mut Vec<MetricFamily>,
) {
    let mut labels = Vec::new();
    for (class, stats) in caches {
        let all = &stats.all_nodes;
        if all.slabs == 0 && all.bytes_returned == 0 && all.barn_empty_sheaves == 0 {
            continue;
        }
        for (node, node_stats) in stats.per_node.iter().enumerate().take(nodes) {
            labels.push((class.name(), node.to_string(), node_stats));
        }
    }
    for field in NodeStats::FIELDS {
        let mut family = family_of(field);
        for (cache, node, stats) in &labels {
            family.sample(
                &[("cache", cache.as_str()), ("node", node.as_str())],
                (field.read)(stats) as f64,
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
        let mut names: Vec<&str> = CacheStats::FIELDS.iter().map(|f| f.metric).collect();
        names.extend(NodeStats::FIELDS.iter().map(|f| f.metric));
        names.extend(GLOBAL_GAUGES.iter().map(|(name, _)| *name));
        names.extend(GLOBAL_COUNTERS.iter().map(|(name, _)| *name));
        names.extend([NODE_REMOTE_FREES.0, NODE_INFO.0]);
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "duplicate metric names");
        for name in &names {
            assert!(name.starts_with("sheafalloc_"), "{name}");
        }
        for (name, _) in GLOBAL_COUNTERS {
            assert!(name.ends_with("_total"), "{name}");
        }
        for (name, _) in GLOBAL_GAUGES {
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
