//! The Prometheus text exposition (format 0.0.4) of one statistics
//! snapshot: [`render`].
//!
//! # One snapshot, one pass, one string
//!
//! A scrape takes one snapshot of every cache (`cache_stats_all`: one
//! pass over the thread registry for all 101 caches) and writes the text
//! straight into one `String`. A `prometheus::Collector` did this before;
//! it built a `MetricFamily`, a `Metric` and two `String`s per label for
//! every sample — 15,210 allocations per scrape with 97 caches in use by
//! 64 threads — only to print them. Writing the text directly costs 22
//! (the snapshot's box, the string as it grows, the list of caches
//! reported, the process figures; `examples/scrape_cost.rs` measures it).
//! The format is checked by `promtool` and a real Prometheus
//! (`scripts/check-prometheus.sh`).
//!
//! # Names and series
//!
//! Every statistic comes from the core's tables (`CacheStats::FIELDS`,
//! `NodeStats::FIELDS`): nothing is listed here by hand, except the
//! process-wide figures below. Counters end in `_total`, sizes are bytes.
//! Each fact is one set of series, never two: per-cache figures carry
//! `cache`; the figures of barns and slabs, which live per node, carry
//! `cache` and `node` and have no per-cache total (sum them in PromQL:
//! `sum by (cache) (sheafalloc_held_bytes)`); remote frees carry `cache`,
//! `node` (the objects' home) and `from_node`, and their per-cache sum,
//! which the JSON shows as `remote_frees`, is not exported again.
//!
//! # Which caches appear
//!
//! A cache gets series once it has been used (an allocation, a slab) or
//! its capacity was changed from the default; from then on it stays (its
//! counters never go back to zero). The caches nobody uses — often half of
//! the 101 — would otherwise double the size of every scrape with zeros.
//! `GET /v1/caches` always lists every cache.

use core::fmt::Write;

use sheafalloc_core::cache::default_sheaf_capacity;
use sheafalloc_core::node::{node_count, nodes_are_simulated, NodeId};
use sheafalloc_core::size_class::NUM_CLASSES;
use sheafalloc_core::stats::{cache_stats_all, large_stats, CacheStats, NodeStats};
use sheafalloc_core::{runtime, SizeClass, StatKind};

use crate::process;

/// Remote frees by destination; only pairs with frees appear.
pub const NODE_REMOTE_FREES: (&str, &str) = (
    "sheafalloc_node_remote_frees_total",
    "Frees of objects whose home is `node`, made by threads on `from_node` and handed home in batches.",
);

/// Statistics of the tables that are sums of a finer family written here
/// (so exporting them would give every fact twice).
const SUMS_OF_FINER_FAMILIES: &[&str] = &["remote_frees"];

/// Process-wide figures (no `cache` label): name, help, kind.
pub const GLOBAL: &[(&str, &str, StatKind)] = &[
    (
        "sheafalloc_nodes",
        "NUMA nodes the allocator uses.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_threads",
        "Live threads with a thread cache.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_threads_started_total",
        "Threads that ever registered a thread cache.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_large_live_objects",
        "Direct mappings (objects above the largest class) live now.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_large_held_bytes",
        "Bytes of direct mappings now.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_large_allocations_total",
        "Direct mappings made.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_large_frees_total",
        "Direct mappings released.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_large_returned_bytes_total",
        "Bytes of direct mappings unmapped.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_large_alloc_failures_total",
        "Direct mappings the OS refused.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_large_remaps_total",
        "Reallocations done with mremap.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_autotune_enabled",
        "1 while the auto-tuner is on for the process (SHEAFALLOC_AUTOTUNE), else 0.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_per_cpu_caches",
        "1 when the engine runs per-CPU sheaves (restartable sequences), 0 for the per-thread fallback.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_cpus_with_caches",
        "CPUs that have per-CPU sheaves (0 in per-thread mode).",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_cpus_keeping_other_lanes",
        "CPUs that keep the objects of other CPUs they free, because such objects cross between CPUs continuously there; the others send them back to the CPU that allocated them.",
        StatKind::Gauge,
    ),
    (
        "sheafalloc_lane_steering_switches_total",
        "Switches of CPUs between sending other CPUs' objects back and keeping them; a fast rise means a cross-CPU flow near the threshold.",
        StatKind::Counter,
    ),
    (
        "sheafalloc_tuner_ticks_total",
        "Auto-tuner ticks run: about two a second while the process allocates and the tuner is on.",
        StatKind::Counter,
    ),
];

/// One series per node.
pub const NODE_INFO: (&str, &str) = (
    "sheafalloc_node_info",
    "One series per node the allocator uses (value 1); `simulated` tells whether SHEAFALLOC_NUMA_NODES simulates it.",
);

/// The build.
pub const BUILD_INFO: (&str, &str) = (
    "sheafalloc_build_info",
    "The sheafalloc build serving these metrics (value 1): its version and whether it is a debug build.",
);

/// Every family name this module can write (tests check them).
pub fn family_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = CacheStats::FIELDS
        .iter()
        .filter(|field| !SUMS_OF_FINER_FAMILIES.contains(&field.field))
        .map(|field| field.metric)
        .collect();
    names.extend(NodeStats::FIELDS.iter().map(|field| field.metric));
    names.extend(GLOBAL.iter().map(|(name, _, _)| *name));
    names.extend([NODE_REMOTE_FREES.0, NODE_INFO.0, BUILD_INFO.0]);
    names.extend(process::FAMILIES.iter().map(|(name, _, _)| *name));
    names
}

/// Takes one snapshot and writes its exposition.
pub fn render() -> String {
    let mut all = Box::new([CacheStats::default(); NUM_CLASSES]);
    cache_stats_all(&mut all);
    let caches: Vec<(SizeClass, &CacheStats)> = SizeClass::all()
        .zip(all.iter())
        .filter(|(class, stats)| is_reported(*class, stats))
        .collect();
    let mut out = Exposition::with_capacity(64 * 1024 + caches.len() * 4 * 1024);
    write_caches(&mut out, &caches);
    write_nodes(&mut out, &caches, node_count());
    write_remote_frees(&mut out, &caches, node_count());
    write_global(&mut out);
    process::write(&mut out);
    out.text
}

/// Whether a cache gets series (see "Which caches appear").
fn is_reported(class: SizeClass, stats: &CacheStats) -> bool {
    stats.allocations > 0
        || stats.slabs > 0
        || stats.bytes_returned > 0
        || stats.sheaf_capacity != default_sheaf_capacity(class)
}

/// Whether a cache's barns or slabs hold or held memory on some node.
fn has_node_memory(stats: &CacheStats) -> bool {
    stats.slabs > 0 || stats.bytes_returned > 0 || stats.barn_empty_sheaves > 0
}

fn write_caches(out: &mut Exposition, caches: &[(SizeClass, &CacheStats)]) {
    let names: Vec<_> = caches.iter().map(|(class, _)| class.name()).collect();
    for field in CacheStats::FIELDS {
        if SUMS_OF_FINER_FAMILIES.contains(&field.field) {
            continue;
        }
        let mut family = out.family(field.metric, field.help, field.kind);
        for ((_, stats), name) in caches.iter().zip(&names) {
            family.sample(&[("cache", name.as_str())], (field.read)(stats));
        }
    }
}

fn write_nodes(out: &mut Exposition, caches: &[(SizeClass, &CacheStats)], nodes: usize) {
    let rows: Vec<_> = caches
        .iter()
        .filter(|(_, stats)| has_node_memory(stats))
        .flat_map(|(class, stats)| {
            let name = class.name();
            stats
                .per_node
                .iter()
                .enumerate()
                .take(nodes)
                .map(move |(node, node_stats)| (name, NodeLabel(node), node_stats))
        })
        .collect();
    for field in NodeStats::FIELDS {
        let mut family = out.family(field.metric, field.help, field.kind);
        for (cache, node, stats) in &rows {
            family.sample(
                &[("cache", cache.as_str()), ("node", node.as_str())],
                (field.read)(stats),
            );
        }
    }
}

fn write_remote_frees(out: &mut Exposition, caches: &[(SizeClass, &CacheStats)], nodes: usize) {
    let (name, help) = NODE_REMOTE_FREES;
    let mut family = out.family(name, help, StatKind::Counter);
    for (class, stats) in caches {
        if stats.remote_frees == 0 {
            continue;
        }
        let cache = class.name();
        for (from, row) in stats.remote_frees_by_node.iter().enumerate().take(nodes) {
            for (to, &count) in row.iter().enumerate().take(nodes) {
                if count == 0 {
                    continue;
                }
                let (to, from) = (NodeLabel(to), NodeLabel(from));
                family.sample(
                    &[
                        ("cache", cache.as_str()),
                        ("from_node", from.as_str()),
                        ("node", to.as_str()),
                    ],
                    i64::try_from(count).unwrap_or(i64::MAX),
                );
            }
        }
    }
}

fn write_global(out: &mut Exposition) {
    let large = large_stats();
    let (live_threads, threads_ever) = runtime::thread_counts();
    let saturate = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let values = [
        node_count() as i64,
        saturate(live_threads),
        saturate(threads_ever),
        large.live_objects,
        saturate(large.bytes_held),
        saturate(large.allocations),
        saturate(large.frees),
        saturate(large.bytes_returned),
        saturate(large.alloc_failures),
        saturate(large.remaps),
        i64::from(sheafalloc_core::cache::autotune_enabled()),
        i64::from(sheafalloc_core::percpu::mode() == sheafalloc_core::percpu::CacheMode::PerCpu),
        saturate(sheafalloc_core::percpu::cpus_with_caches() as u64),
        saturate(sheafalloc_core::percpu::cpus_keeping_lanes() as u64),
        saturate(sheafalloc_core::percpu::lane_steering_switches()),
        saturate(runtime::tuner_ticks()),
    ];
    for ((name, help, kind), value) in GLOBAL.iter().zip(values) {
        out.family(name, help, *kind).sample(&[], value);
    }
    let simulated = if nodes_are_simulated() {
        "true"
    } else {
        "false"
    };
    let mut info = out.family(NODE_INFO.0, NODE_INFO.1, StatKind::Gauge);
    for node in NodeId::all() {
        let node = NodeLabel(node.index());
        info.sample(&[("node", node.as_str()), ("simulated", simulated)], 1);
    }
    let debug = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    out.family(BUILD_INFO.0, BUILD_INFO.1, StatKind::Gauge)
        .sample(
            &[("version", env!("CARGO_PKG_VERSION")), ("debug", debug)],
            1,
        );
}

/// A node index as label text, without allocating.
struct NodeLabel(usize);

impl NodeLabel {
    fn as_str(&self) -> &'static str {
        const DIGITS: [&str; 16] = [
            "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
        ];
        DIGITS.get(self.0).copied().unwrap_or("?")
    }
}

/// The text being written.
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    fn with_capacity(bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
        }
    }

    /// Starts a family; its `HELP` and `TYPE` lines are written with its
    /// first sample (a family without samples is left out).
    pub(crate) fn family<'a>(
        &'a mut self,
        name: &'static str,
        help: &'static str,
        kind: StatKind,
    ) -> Family<'a> {
        Family {
            out: self,
            name,
            help,
            kind,
            started: false,
        }
    }
}

/// One metric family of an [`Exposition`].
pub(crate) struct Family<'a> {
    out: &'a mut Exposition,
    name: &'static str,
    help: &'static str,
    kind: StatKind,
    started: bool,
}

impl Family<'_> {
    /// Writes `name{labels} value`.
    pub(crate) fn sample(&mut self, labels: &[(&str, &str)], value: i64) {
        let text = &mut self.out.text;
        if !self.started {
            self.started = true;
            text.push_str("# HELP ");
            text.push_str(self.name);
            text.push(' ');
            escape_help(text, self.help);
            text.push_str("\n# TYPE ");
            text.push_str(self.name);
            text.push_str(match self.kind {
                StatKind::Counter => " counter\n",
                StatKind::Gauge => " gauge\n",
            });
        }
        text.push_str(self.name);
        if !labels.is_empty() {
            text.push('{');
            for (index, (name, value)) in labels.iter().enumerate() {
                if index > 0 {
                    text.push(',');
                }
                text.push_str(name);
                text.push_str("=\"");
                escape_label_value(text, value);
                text.push('"');
            }
            text.push('}');
        }
        // Writing to a String cannot fail.
        let _ = writeln!(text, " {value}");
    }
}

/// HELP text: backslash and newline escaped.
fn escape_help(text: &mut String, help: &str) {
    for character in help.chars() {
        match character {
            '\\' => text.push_str("\\\\"),
            '\n' => text.push_str("\\n"),
            other => text.push(other),
        }
    }
}

/// Label values: backslash, double quote and newline escaped.
fn escape_label_value(text: &mut String, value: &str) {
    for character in value.chars() {
        match character {
            '\\' => text.push_str("\\\\"),
            '"' => text.push_str("\\\""),
            '\n' => text.push_str("\\n"),
            other => text.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions_and_are_distinct() {
        let names = family_names();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "duplicate metric names");
        for name in &names {
            assert!(
                name.starts_with("sheafalloc_") || name.starts_with("process_"),
                "{name}"
            );
        }
        for (name, _, kind) in GLOBAL {
            assert_eq!(
                name.ends_with("_total"),
                *kind == StatKind::Counter,
                "{name}"
            );
        }
        for field in SUMS_OF_FINER_FAMILIES {
            assert!(
                CacheStats::FIELDS.iter().any(|f| f.field == *field),
                "{field} is not in the table any more"
            );
        }
    }

    #[test]
    fn samples_are_escaped_and_families_without_samples_left_out() {
        let mut out = Exposition::with_capacity(0);
        out.family("sheafalloc_empty", "nothing", StatKind::Gauge);
        out.family(
            "sheafalloc_x_total",
            "a \\ and\na newline",
            StatKind::Counter,
        )
        .sample(&[("cache", "a\"b\\c\nd")], 7);
        out.family("sheafalloc_plain", "plain", StatKind::Gauge)
            .sample(&[], -3);
        assert_eq!(
            out.text,
            "# HELP sheafalloc_x_total a \\\\ and\\na newline\n\
             # TYPE sheafalloc_x_total counter\n\
             sheafalloc_x_total{cache=\"a\\\"b\\\\c\\nd\"} 7\n\
             # HELP sheafalloc_plain plain\n\
             # TYPE sheafalloc_plain gauge\n\
             sheafalloc_plain -3\n"
        );
    }

    #[test]
    fn remote_frees_are_labelled_by_home_and_freeing_node() {
        let class = SizeClass::from_name("size-64").unwrap();
        let mut stats = CacheStats {
            remote_frees: 5,
            ..CacheStats::default()
        };
        stats.remote_frees_by_node[1][0] = 5;
        let mut out = Exposition::with_capacity(0);
        write_remote_frees(&mut out, &[(class, &stats)], 2);
        assert!(
            out.text.contains(
                r#"sheafalloc_node_remote_frees_total{cache="size-64",from_node="1",node="0"} 5"#
            ),
            "{}",
            out.text
        );
        assert_eq!(
            out.text
                .matches("sheafalloc_node_remote_frees_total{")
                .count(),
            1
        );
    }

    #[test]
    fn a_tuned_cache_appears_with_its_capacity_and_the_build_is_described() {
        // This unit-test process runs on the system allocator: no cache is
        // used, so only a changed capacity makes one appear.
        let class = SizeClass::from_name("size-45056").unwrap();
        sheafalloc_core::set_sheaf_capacity(class, 3).unwrap();
        let text = render();
        assert!(
            text.contains("sheafalloc_sheaf_capacity{cache=\"size-45056\"} 3\n"),
            "{text}"
        );
        assert!(!text.contains("sheafalloc_remote_frees_total"), "{text}");
        assert!(text.contains("\nsheafalloc_nodes "), "{text}");
        assert!(text.contains("sheafalloc_node_info{node=\"0\",simulated="));
        let build = format!(
            "sheafalloc_build_info{{version=\"{}\",debug=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            cfg!(debug_assertions)
        );
        assert!(text.contains(&build), "{text}");
        // Every family is declared once.
        let declared: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .collect();
        let unique: std::collections::BTreeSet<&&str> = declared.iter().collect();
        assert_eq!(unique.len(), declared.len());
    }
}
