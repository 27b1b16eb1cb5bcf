//! Configuration sweeps of `wl-sheafalloc`: the same binary run under
//! several environments (`tuning`: capacities; `modes`: per-CPU against
//! per-thread sheaves), configurations interleaved and their order rotated
//! by one each round, every run logged to `bench/results/NAME.jsonl` as it
//! ends. Comparing one binary with itself needs no round-trip probe: every
//! configuration sees the same host, a run apart.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use sheafalloc_bench::peers::Peer;
use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::catalog::Workload;
use sheafalloc_bench::summary;

use crate::options::SweepOptions;
use crate::suite::{binaries, spawn};

/// One configuration: a name for the report and the environment it adds.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub name: String,
    pub env: Vec<(String, String)>,
}

impl Config {
    pub fn new(name: &str, env: &[(&str, &str)]) -> Config {
        Config {
            name: name.to_owned(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }
}

/// One run's result.
pub struct Outcome {
    /// Round number, from 1.
    pub round: usize,
    /// Index into the sweep's configurations.
    pub config: usize,
    pub value: f64,
    pub record: Record,
}

/// Every run of a sweep, per workload, and where they came from.
pub struct Sweep {
    pub workloads: Vec<Workload>,
    pub configs: Vec<Config>,
    pub results: Vec<Vec<Outcome>>,
    /// The command line, the commit and the machine, for the report.
    pub provenance: String,
    /// Where results go: `NAME`, or `NAME-partial` for a run of a
    /// subset of the workloads (which leaves the full results and the
    /// README alone).
    pub stem: String,
}

impl Sweep {
    /// The median of configuration `config` for workload number `w`.
    pub fn median(&self, w: usize, config: usize) -> Option<f64> {
        let values: Vec<f64> = self.results[w]
            .iter()
            .filter(|o| o.config == config && o.value.is_finite())
            .map(|o| o.value)
            .collect();
        (!values.is_empty()).then(|| summary::median(&values))
    }

    /// `a` against `b` for workload number `w`, above 1 when `a` is
    /// better whichever way the unit points.
    pub fn better(&self, w: usize, a: f64, b: f64) -> f64 {
        if self.workloads[w].higher_is_better() {
            a / b
        } else {
            b / a
        }
    }
}

/// Runs `configs` on `workloads` (`options.only` if given) for
/// `options.rounds` rounds; progress on stderr, runs logged to
/// `bench/results/{name}.jsonl`.
pub fn run(
    name: &str,
    options: &SweepOptions,
    configs: Vec<Config>,
    default_workloads: &[Workload],
) -> Sweep {
    let binary = match binaries::locate() {
        Ok(found) => found
            .into_iter()
            .find(|(peer, _)| *peer == Peer::Sheaf)
            .map(|(_, path)| path),
        Err(error) => {
            eprintln!("sheafalloc-bench {name}: {error}");
            std::process::exit(1);
        }
    };
    let Some(binary) = binary else {
        eprintln!("sheafalloc-bench {name}: wl-sheafalloc not found");
        std::process::exit(1);
    };
    let workloads = options
        .only
        .clone()
        .unwrap_or_else(|| default_workloads.to_vec());
    let stem = if options.only.is_some() {
        format!("{name}-partial")
    } else {
        name.to_owned()
    };
    let dir = crate::suite::results_dir();
    let mut log = std::fs::File::create(dir.join(format!("{stem}.jsonl"))).ok();
    let commit = crate::machine::source_commit().map_or_else(
        || "unknown".to_owned(),
        |(c, dirty)| {
            if dirty {
                format!("{c} (with uncommitted changes)")
            } else {
                c
            }
        },
    );
    let only = options.only.as_ref().map_or_else(String::new, |only| {
        let names: Vec<&str> = only.iter().map(|w| w.name()).collect();
        format!(" --only {}", names.join(","))
    });
    let provenance = format!(
        "`sheafalloc-bench {name} --rounds {} --warmup {} --seconds {}{only}`; commit {commit}; {}",
        options.rounds,
        options.warmup,
        options.seconds,
        crate::machine::describe().markdown()
    );
    let mut results: Vec<Vec<Outcome>> = workloads.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for (w, &workload) in workloads.iter().enumerate() {
            for slot in 0..configs.len() {
                let c = (slot + round) % configs.len();
                let config = &configs[c];
                let outcome = spawn::run(&spawn::Invocation {
                    binary: &binary,
                    args: vec![
                        workload.name().to_owned(),
                        "--warmup".into(),
                        options.warmup.to_string(),
                        "--seconds".into(),
                        options.seconds.to_string(),
                    ],
                    numa_nodes: None,
                    env: config.env.clone(),
                    limit: Duration::from_secs_f64(options.warmup + options.seconds + 60.0),
                });
                match outcome {
                    Ok(record) => {
                        let value = record.number("value");
                        eprintln!(
                            "round {}/{} {} {}: {value} {} ({})",
                            round + 1,
                            options.rounds,
                            workload.name(),
                            config.name,
                            workload.unit(),
                            record.get("sheaf_cache_mode").unwrap_or("-"),
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
                            round: round + 1,
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
    Sweep {
        workloads,
        configs,
        results,
        provenance,
        stem,
    }
}

/// Prints `report`, writes it to `bench/results/{stem}.md`, and, for a
/// full run, puts it (without its title) in the `{name}` generated region
/// of the root README, if that has one.
pub fn save(name: &str, sweep: &Sweep, report: &str) {
    print!("{report}");
    let path: PathBuf = crate::suite::results_dir().join(format!("{}.md", sweep.stem));
    if let Err(error) = std::fs::write(&path, report) {
        eprintln!(
            "sheafalloc-bench {name}: writing {}: {error}",
            path.display()
        );
    }
    if sweep.stem != name {
        return;
    }
    let body = report
        .split_once('\n')
        .map_or(report, |(_, rest)| rest)
        .trim_start();
    let readme = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
    match crate::suite::readme::update(&readme, &[(name, body.to_owned())]) {
        Ok(names) if !names.is_empty() => eprintln!("updated {} ({name})", readme.display()),
        Ok(_) => {}
        Err(error) => eprintln!("sheafalloc-bench {name}: {error}"),
    }
}
