//! `sheafalloc-bench tuning`: does the auto-tuner pay? Runs `wl-sheafalloc`
//! on the workloads the tuner is for, in these configurations:
//!
//! * `auto` — as shipped: the tuner on, default capacities to start from;
//! * `defaults` — `SHEAFALLOC_AUTOTUNE=off`: the default capacities, fixed;
//! * `fixed-C` for C in 16, 32, 64, 128, 256 — the tuner off and every
//!   class below 4 KiB pinned at C (`SHEAFALLOC_CAPACITY`; larger classes
//!   keep their defaults), the static sweep the tuner is measured against.
//!
//! Every round runs every configuration once per workload, the order
//! rotated by one configuration each round; each run warms up long enough
//! for the tuner to settle (default 8 s; it ticks twice a second) and then
//! measures. The report gives, per workload, the median of each
//! configuration, the best fixed capacity, and `auto` against it and
//! against `defaults`; with it, what the tuner chose and how many changes
//! it made. Every run goes to `bench/results/tuning.jsonl` as it ends.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use sheafalloc_bench::peers::Peer;
use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::catalog::Workload;
use sheafalloc_bench::summary;

use crate::options::TuningOptions;
use crate::suite::{binaries, spawn};

/// Fixed capacities of the sweep.
const FIXED: [u32; 5] = [16, 32, 64, 128, 256];

/// The workloads the tuner is for (the list: hand-off steady and
/// bursty, churn at several burst sizes, larson, the HTTP service).
const DEFAULT_WORKLOADS: [Workload; 9] = [
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
];

/// One configuration of the allocator.
#[derive(Clone, Debug, PartialEq)]
struct Config {
    name: String,
    env: Vec<(String, String)>,
}

fn configs() -> Vec<Config> {
    let mut configs = vec![
        Config {
            name: "auto".into(),
            env: Vec::new(),
        },
        Config {
            name: "defaults".into(),
            env: vec![("SHEAFALLOC_AUTOTUNE".into(), "off".into())],
        },
    ];
    for capacity in FIXED {
        configs.push(Config {
            name: format!("fixed-{capacity}"),
            env: vec![
                ("SHEAFALLOC_AUTOTUNE".into(), "off".into()),
                ("SHEAFALLOC_CAPACITY".into(), capacity_list(capacity)),
            ],
        });
    }
    configs
}

/// `size-8=C,size-16=C,...` for every class below 4 KiB (capped at the
/// class's byte bound, which only bites above 2 KiB).
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

/// Whether a larger value is better (throughput) or a smaller one (time).
fn higher_is_better(workload: Workload) -> bool {
    !matches!(
        workload,
        Workload::Pairs | Workload::Fifo256 | Workload::Fifo2112
    )
}

struct Outcome {
    config: usize,
    value: f64,
    record: Record,
}

/// Runs the sweep; progress on stderr, report on stdout and in
/// `bench/results/tuning.md`.
pub fn run(options: &TuningOptions) {
    let binary = match binaries::locate() {
        Ok(found) => found
            .into_iter()
            .find(|(peer, _)| *peer == Peer::Sheaf)
            .map(|(_, path)| path),
        Err(error) => {
            eprintln!("sheafalloc-bench tuning: {error}");
            std::process::exit(1);
        }
    };
    let Some(binary) = binary else {
        eprintln!("sheafalloc-bench tuning: wl-sheafalloc not found");
        std::process::exit(1);
    };
    let workloads = options
        .only
        .clone()
        .unwrap_or_else(|| DEFAULT_WORKLOADS.to_vec());
    let configs = configs();
    let dir = crate::suite::results_dir();
    let log_path = dir.join("tuning.jsonl");
    let mut log = std::fs::File::create(&log_path).ok();
    let machine = crate::machine::describe();
    let commit = crate::machine::source_commit().map(|(c, dirty)| {
        if dirty {
            format!("{c} (with uncommitted changes)")
        } else {
            c
        }
    });
    let mut results: Vec<Vec<Outcome>> = workloads.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for (w, &workload) in workloads.iter().enumerate() {
            for slot in 0..configs.len() {
                let c = (slot + round) % configs.len();
                let config = &configs[c];
                let args = vec![
                    workload.name().to_owned(),
                    "--warmup".into(),
                    options.warmup.to_string(),
                    "--seconds".into(),
                    options.seconds.to_string(),
                ];
                let outcome = spawn::run(&spawn::Invocation {
                    binary: &binary,
                    args,
                    numa_nodes: None,
                    env: config.env.clone(),
                    limit: Duration::from_secs_f64(options.warmup + options.seconds + 60.0),
                });
                match outcome {
                    Ok(record) => {
                        let value = record.number("value");
                        eprintln!(
                            "round {}/{} {} {}: {value} {} (tuned: {})",
                            round + 1,
                            options.rounds,
                            workload.name(),
                            config.name,
                            workload.unit(),
                            record.get("sheaf_tuned").unwrap_or("-"),
                        );
                        if let Some(log) = log.as_mut() {
                            let _ = writeln!(
                                log,
                                "{{\"round\":{},\"workload\":\"{}\",\"config\":\"{}\",\"line\":\"{}\"}}",
                                round + 1,
                                workload.name(),
                                config.name,
                                record.line().replace('\\', "\\\\").replace('"', "\\\"")
                            );
                        }
                        results[w].push(Outcome {
                            config: c,
                            value,
                            record,
                        });
                    }
                    Err(error) => eprintln!("round {}: {} failed: {error}", round + 1, config.name),
                }
            }
        }
    }
    let report = report(
        options,
        &workloads,
        &configs,
        &results,
        &machine.markdown(),
        commit.as_deref(),
    );
    print!("{report}");
    let path: PathBuf = dir.join("tuning.md");
    if let Err(error) = std::fs::write(&path, &report) {
        eprintln!(
            "sheafalloc-bench tuning: writing {}: {error}",
            path.display()
        );
    }
}

fn report(
    options: &TuningOptions,
    workloads: &[Workload],
    configs: &[Config],
    results: &[Vec<Outcome>],
    machine: &str,
    commit: Option<&str>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Auto-tuned against fixed capacities\n");
    let _ = writeln!(
        out,
        "`sheafalloc-bench tuning --rounds {} --warmup {} --seconds {}`; commit {}; {machine}.\n",
        options.rounds,
        options.warmup,
        options.seconds,
        commit.unwrap_or("unknown")
    );
    let _ = writeln!(
        out,
        "Medians over rounds. `fixed-C`: the tuner off, every class below 4 KiB at C. \
         `auto / best fixed` above 0.98 meets the target (within 2%); above 1 is better. \
         Time units: lower is better, and the ratios are inverted so above 1 still means better.\n"
    );
    let mut header = String::from("| workload | unit |");
    let mut rule = String::from("|---|---|");
    for config in configs {
        let _ = write!(header, " {} |", config.name);
        rule.push_str("---:|");
    }
    header.push_str(" best fixed | auto / best fixed | auto / defaults | what auto chose |");
    rule.push_str("---|---:|---:|---|");
    let _ = writeln!(out, "{header}\n{rule}");
    for (workload, outcomes) in workloads.iter().zip(results) {
        let higher = higher_is_better(*workload);
        let median = |c: usize| -> Option<f64> {
            let values: Vec<f64> = outcomes
                .iter()
                .filter(|o| o.config == c && o.value.is_finite())
                .map(|o| o.value)
                .collect();
            (!values.is_empty()).then(|| summary::median(&values))
        };
        let medians: Vec<Option<f64>> = (0..configs.len()).map(median).collect();
        let better = |a: f64, b: f64| if higher { a / b } else { b / a };
        let mut row = format!("| {} | {} |", workload.name(), workload.unit());
        for value in &medians {
            match value {
                Some(v) => {
                    let _ = write!(row, " {v:.2} |");
                }
                None => row.push_str(" – |"),
            }
        }
        let best_fixed = (2..configs.len())
            .filter_map(|c| medians[c].map(|v| (c, v)))
            .max_by(|a, b| better(a.1, b.1).total_cmp(&1.0));
        let auto = medians[0];
        let defaults = medians[1];
        match (best_fixed, auto) {
            (Some((c, best)), Some(auto)) => {
                let _ = write!(row, " {} | {:.3} |", configs[c].name, better(auto, best));
            }
            _ => row.push_str(" – | – |"),
        }
        match (auto, defaults) {
            (Some(auto), Some(defaults)) => {
                let _ = write!(row, " {:.3} |", better(auto, defaults));
            }
            _ => row.push_str(" – |"),
        }
        let chosen = outcomes
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
    out
}
