//! `sheafalloc-bench tuning`: does the auto-tuner pay? Runs `wl-sheafalloc`
//! on the workloads the tuner is for, in these configurations:
//!
//! * `auto` — as shipped: the tuner on, default capacities to start from;
//! * `defaults` — `SHEAFALLOC_AUTOTUNE=off`: the default capacities, fixed;
//! * `fixed-C` for C in 16, 32, …, 1024 — the tuner off and every
//!   class below 4 KiB pinned at C (`SHEAFALLOC_CAPACITY`; larger classes
//!   keep their defaults), the static sweep the tuner is measured against.
//!
//! Every round runs every configuration once per workload, the order
//! rotated by one configuration each round; each run warms up long enough
//! for the tuner to settle (default 8 s; it ticks twice a second) and then
//! measures. The report gives, per workload, the median of each
//! configuration, the best fixed capacity, and `auto` against it and
//! against `defaults`; with it, what the tuner chose and how many changes
//! it made. Every run goes to `bench/results/tuning.jsonl` as it ends
//! (the runner is `sweep.rs`).

use std::fmt::Write as _;

use sheafalloc_bench::service::catalog::Workload;

use crate::options::SweepOptions;
use crate::sweep::{self, Config, Sweep};
use sheafalloc_bench::summary;

/// The target: `auto` at least this fraction of the best fixed capacity
/// (within 2%).
const TARGET: f64 = 0.98;

/// Fixed capacities of the sweep.
const FIXED: [u32; 7] = [16, 32, 64, 128, 256, 512, 1024];

/// The workloads the tuner is for (the list: hand-off steady and
/// bursty, churn at several burst sizes, larson, the HTTP service).
const DEFAULT_WORKLOADS: [Workload; 10] = [
    Workload::Handoff1to1,
    Workload::Handoff4to4,
    Workload::Bursty,
    Workload::Churn {
        size: 256,
        burst: 100,
    },
    Workload::Churn {
        size: 256,
        burst: 256,
    },
    Workload::Churn {
        size: 2112,
        burst: 100,
    },
    Workload::Fifo256,
    Workload::Larson,
    Workload::HttpOrders,
    Workload::HttpCatalog,
];

fn configs() -> Vec<Config> {
    let mut configs = vec![
        Config::new("auto", &[]),
        Config::new("defaults", &[("SHEAFALLOC_AUTOTUNE", "off")]),
    ];
    for capacity in FIXED {
        let list = capacity_list(capacity);
        configs.push(Config::new(
            &format!("fixed-{capacity}"),
            &[
                ("SHEAFALLOC_AUTOTUNE", "off"),
                ("SHEAFALLOC_CAPACITY", &list),
            ],
        ));
    }
    configs
}

/// `size-8=C,size-16=C,...` for every class below 4 KiB (capped at the
/// class's byte bound: 1024 objects up to 512 B, fewer above).
fn capacity_list(capacity: u32) -> String {
    sheafalloc::caches()
        .iter()
        .filter(|cache| cache.object_size < 4096)
        .map(|cache| {
            let max = sheafalloc::sheaf_capacity_range(&cache.name).map_or(capacity, |r| r.1);
            format!("{}={}", cache.name, capacity.min(max))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs the sweep; progress on stderr, report on stdout and in
/// `bench/results/tuning.md`.
pub fn run(options: &SweepOptions) {
    let configs = configs();
    let against = options.against.as_ref().map(|name| {
        configs
            .iter()
            .position(|c| &c.name == name)
            .unwrap_or_else(|| {
                let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
                eprintln!(
                    "sheafalloc-bench tuning: --against {name:?}: no such configuration ({})",
                    names.join(", ")
                );
                std::process::exit(2);
            })
    });
    let challenger = |sweep: &Sweep, w: usize| against.or_else(|| best_fixed_config(sweep, w));
    let sweep = sweep::run_or_replay("tuning", options, configs, &DEFAULT_WORKLOADS, &challenger);
    sweep::save("tuning", &sweep, &report(&sweep));
}

fn report(sweep: &Sweep) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Auto-tuned against fixed capacities\n");
    let _ = writeln!(out, "{}.\n", sweep.provenance);
    let _ = writeln!(
        out,
        "Medians over rounds. `fixed-C`: the tuner off, every class below 4 KiB at C. \
         `auto / best fixed` above {TARGET} meets the target (within 2%); above 1 is better. \
         Time units: lower is better, and the ratios are inverted so above 1 still means better.\n"
    );
    let _ = writeln!(out, "{}\n", sweep.left_out_note());
    out.push_str(&table_head(
        sweep,
        &[("workload", "---"), ("unit", "---")],
        &[
            ("best fixed", "---"),
            ("auto / best fixed", "---:"),
            ("auto / defaults", "---:"),
            ("what auto chose", "---"),
        ],
    ));
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let medians: Vec<Option<f64>> = (0..sweep.configs.len())
            .map(|c| sweep.median(w, c))
            .collect();
        let mut row = format!("| {} | {} |", workload.name(), workload.unit());
        for (c, value) in medians.iter().enumerate() {
            match value {
                Some(v) => {
                    let _ = write!(row, " {v:.2}{} |", sweep.marks(w, &[c]));
                }
                None => row.push_str(" – |"),
            }
        }
        let best_fixed = best_fixed_config(sweep, w).and_then(|c| medians[c].map(|v| (c, v)));
        let (auto, defaults) = (medians[0], medians[1]);
        match (best_fixed, auto) {
            (Some((c, best)), Some(auto)) => {
                let _ = write!(
                    row,
                    " {} | {:.3}{} |",
                    sweep.configs[c].name,
                    sweep.better(w, auto, best),
                    sweep.marks(w, &[0, c])
                );
            }
            _ => row.push_str(" – | – |"),
        }
        match (auto, defaults) {
            (Some(auto), Some(defaults)) => {
                let _ = write!(
                    row,
                    " {:.3}{} |",
                    sweep.better(w, auto, defaults),
                    sweep.marks(w, &[0, 1])
                );
            }
            _ => row.push_str(" – |"),
        }
        let chosen = sweep.results[w]
            .iter()
            .filter(|o| o.config == 0)
            .filter_map(|o| {
                Some(format!(
                    "{} ({} changes)",
                    o.record.get("sheaf_tuned").unwrap_or("none"),
                    o.record.get("sheaf_capacity_adjustments")?
                ))
            })
            .next_back()
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(row, " {chosen} |");
        out.push_str(&row);
    }
    out.push_str(&window_work(sweep));
    out.push_str(&memory(sweep));
    out.push_str(&confirmation(sweep));
    out
}

/// The fixed configuration with the best median for workload number `w`
/// (configurations 2 and up are the fixed capacities).
fn best_fixed_config(sweep: &Sweep, w: usize) -> Option<usize> {
    (2..sweep.configs.len())
        .filter_map(|c| sweep.median(w, c).map(|v| (c, v)))
        .max_by(|a, b| sweep.better(w, a.1, b.1).total_cmp(&1.0))
        .map(|(c, _)| c)
}

/// The header and rule of a table with a column per configuration
/// (right-aligned) between the `lead` and `tail` columns, each given as
/// its title and its rule cell.
fn table_head(sweep: &Sweep, lead: &[(&str, &str)], tail: &[(&str, &str)]) -> String {
    let configs = sweep.configs.iter().map(|c| (c.name.as_str(), "---:"));
    let columns: Vec<(&str, &str)> = lead
        .iter()
        .copied()
        .chain(configs)
        .chain(tail.iter().copied())
        .collect();
    let header: String = columns
        .iter()
        .map(|(title, _)| format!(" {title} |"))
        .collect();
    let rule: String = columns.iter().map(|(_, cell)| format!("{cell}|")).collect();
    format!("|{header}\n|{rule}\n")
}

/// The fourth table (with `--confirm`): `auto` against the best fixed
/// capacity in pairs of runs taken back to back.
fn confirmation(sweep: &Sweep) -> String {
    if sweep.confirmations.iter().all(Vec::is_empty) {
        return String::new();
    }
    let mut out = format!(
        "\nPaired confirmation: after the sweep, `auto` and the best fixed capacity of the \
         first table (or the configuration `--against` named, as `against` says) \
         ran back to back, the order alternating pair by pair, and each pair \
         gives one ratio (above 1: `auto` better). Picking the best of {} noisy medians \
         favours the fixed side by about one run's noise (the winner's curse); the median \
         of pair ratios has no such bias. A pair counts only if its two runs share one host \
         state (every round trip recorded before and after both runs within {}× of the \
         smallest; with the vCPUs apart for both, it counts too); others are left out.\n\n\
         | workload | against | pairs used | pair ratios | median | within 2% |\n\
         |---|---|---:|---|---:|---|\n",
        FIXED.len(),
        sweep::QUIET_RTT_FACTOR,
    );
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let Some(other) = sweep.confirmations[w]
            .iter()
            .find(|o| o.config != 0)
            .map(|o| o.config)
        else {
            continue;
        };
        let (ratios, left_out) = sweep.pair_ratios(w);
        let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        let (median, verdict) = if ratios.is_empty() {
            ("–".to_owned(), "no pair in one host state")
        } else {
            let m = summary::median(&ratios);
            (format!("{m:.3}"), if m >= TARGET { "yes" } else { "no" })
        };
        let left = if left_out > 0 {
            format!(" ({left_out} left out)")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {}{left} | {} | {median} | {verdict} |",
            workload.name(),
            sweep.configs[other].name,
            ratios.len(),
            listed.join(", "),
        );
    }
    out
}

/// Slow-path work per 1000 allocations in a run's measured window: slow
/// paths (allocations and frees), barn trades (gets and puts, hits and
/// misses) and slab refills and flushes, from the `sheaf_window_*`
/// counters; NaN for a run without them (or, slow paths, from before they
/// were recorded).
fn work_per_1000(record: &sheafalloc_bench::record::Record) -> [f64; 3] {
    let n = |key: &str| record.number(&format!("sheaf_window_{key}"));
    let allocations = n("allocations");
    let trades =
        n("barn_get_hits") + n("barn_get_misses") + n("barn_put_hits") + n("barn_put_misses");
    let slabs = n("refills") + n("flushes");
    [n("slow_paths"), trades, slabs].map(|count| 1000.0 * count / allocations)
}

/// The second table: what each configuration's steady state costs in
/// slow-path work, counted, so it does not swing with the host as the
/// throughput does (the same runs and medians as the first table).
fn window_work(sweep: &Sweep) -> String {
    let mut out = String::from(
        "\nSlow-path work in the measured window, per 1000 allocations (medians of the same \
         runs): slow paths / barn trades / slab refills and flushes. Counted, not timed, so the host's \
         swings do not move it: where `auto` matches the best fixed capacity here, its \
         steady state is that capacity's, and a gap in the first table is the host's. \
         `–`: no window counters (a workload without a timed window, or an older \
         results file).\n\n",
    );
    out.push_str(&table_head(sweep, &[("workload", "---")], &[]));
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let mut row = format!("| {} |", workload.name());
        for c in 0..sweep.configs.len() {
            let work: Vec<[f64; 3]> = sweep
                .used(w, c)
                .iter()
                .map(|o| work_per_1000(&o.record))
                .filter(|work| work[1].is_finite())
                .collect();
            if work.is_empty() {
                row.push_str(" – |");
                continue;
            }
            let cells: Vec<String> = (0..3)
                .map(|k| {
                    let values: Vec<f64> = work
                        .iter()
                        .map(|run| run[k])
                        .filter(|v| v.is_finite())
                        .collect();
                    if values.is_empty() {
                        "–".to_owned()
                    } else {
                        format!("{:.2}", summary::median(&values))
                    }
                })
                .collect();
            let _ = write!(row, " {} |", cells.join(" / "));
        }
        let _ = writeln!(out, "{row}");
    }
    out
}

/// One cache's sheaf as the tuner left it in a run.
#[derive(Debug, PartialEq, Eq)]
struct ChosenSheaf {
    cache: String,
    capacity: u64,
    /// Bytes of objects the sheaf holds when full.
    bytes: u64,
    /// Whether the capacity is within the cache's own maximum
    /// ([`sheafalloc::sheaf_capacity_range`]: 1024 objects and 512 KiB of
    /// them).
    within_bound: bool,
}

/// The largest sheaf `auto` chose in a run, from its `sheaf_tuned` list
/// (`size-N:C/...`); `None` for a run whose tuner changed nothing.
fn largest_sheaf(record: &sheafalloc_bench::record::Record) -> Option<ChosenSheaf> {
    record
        .get("sheaf_tuned")?
        .split('/')
        .filter_map(|entry| {
            let (cache, capacity) = entry.split_once(':')?;
            let capacity: u64 = capacity.parse().ok()?;
            let size: u64 = cache.strip_prefix("size-")?.parse().ok()?;
            let within_bound = sheafalloc::sheaf_capacity_range(cache)
                .is_some_and(|(_, max)| capacity <= u64::from(max));
            Some(ChosenSheaf {
                cache: cache.to_owned(),
                capacity,
                bytes: capacity * size,
                within_bound,
            })
        })
        .max_by_key(|sheaf| sheaf.bytes)
}

/// The third table: what each configuration holds from the OS for its
/// caches at the end of a run (`sheaf_held_kib`, medians of the same runs
/// as the first table), and the largest sheaf `auto` chose in any run
/// against the byte bound a sheaf may pin.
fn memory(sweep: &Sweep) -> String {
    let mut out = String::from(
        "\nMemory held for the caches at the end of a run, MiB (slabs taken from the OS, \
         `sheaf_held_kib`; medians of the same runs), and the largest sheaf `auto` chose in \
         any run, in KiB of objects: no sheaf may pin more than 1024 objects or 512 KiB of \
         them (`sheaf_capacity_range`). `–`: an older results file without the field.\n\n",
    );
    out.push_str(&table_head(
        sweep,
        &[("workload", "---")],
        &[
            ("auto / defaults", "---:"),
            ("auto's largest sheaf", "---"),
            ("within the bound", "---"),
        ],
    ));
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let mut row = format!("| {} |", workload.name());
        let held: Vec<Option<f64>> = (0..sweep.configs.len())
            .map(|c| sweep.median_of(w, c, |o| o.record.number("sheaf_held_kib") / 1024.0))
            .collect();
        for value in &held {
            match value {
                Some(v) => {
                    let _ = write!(row, " {v:.1} |");
                }
                None => row.push_str(" – |"),
            }
        }
        match (held[0], held[1]) {
            (Some(auto), Some(defaults)) if defaults > 0.0 => {
                let _ = write!(row, " {:.2} |", auto / defaults);
            }
            _ => row.push_str(" – |"),
        }
        let auto_runs = sweep.results[w].iter().filter(|o| o.config == 0);
        let sheaves: Vec<_> = auto_runs.filter_map(|o| largest_sheaf(&o.record)).collect();
        match sheaves.iter().max_by_key(|sheaf| sheaf.bytes) {
            Some(largest) => {
                let all_within = sheaves.iter().all(|sheaf| sheaf.within_bound);
                let _ = writeln!(
                    row,
                    " {} at {}: {:.0} KiB | {} |",
                    largest.cache,
                    largest.capacity,
                    largest.bytes as f64 / 1024.0,
                    if all_within { "yes" } else { "**no**" }
                );
            }
            None => {
                let _ = writeln!(row, " none raised | yes |");
            }
        }
        out.push_str(&row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{largest_sheaf, ChosenSheaf};
    use sheafalloc_bench::record::Record;

    fn record(tuned: &str) -> Record {
        Record::parse_line(&format!(
            "result workload=bursty allocator=sheafalloc value=1 sheaf_tuned={tuned}"
        ))
        .expect("a result line")
    }

    fn sheaf(cache: &str, capacity: u64, size: u64, within_bound: bool) -> ChosenSheaf {
        ChosenSheaf {
            cache: cache.to_owned(),
            capacity,
            bytes: capacity * size,
            within_bound,
        }
    }

    #[test]
    fn the_largest_sheaf_is_the_one_with_the_most_bytes_not_objects() {
        let largest = largest_sheaf(&record("size-64:1024/size-2304:227/size-256:1024"));
        assert_eq!(largest, Some(sheaf("size-2304", 227, 2304, true)));
    }

    #[test]
    fn a_capacity_above_the_caches_maximum_is_out_of_the_bound() {
        // 256 × 2304 B = 576 KiB, above the 512 KiB a sheaf may pin.
        let largest = largest_sheaf(&record("size-2304:256/size-64:16"));
        assert_eq!(largest, Some(sheaf("size-2304", 256, 2304, false)));
        assert_eq!(largest_sheaf(&record("none")), None);
    }
}
