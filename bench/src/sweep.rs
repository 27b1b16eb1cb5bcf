//! Configuration sweeps of `wl-sheafalloc`: the same binary run under
//! several environments (`tuning`: capacities; `modes`: per-CPU against
//! per-thread sheaves), configurations interleaved and their order rotated
//! by one each round, every run logged to `bench/results/NAME.jsonl` as it
//! ends. Cross-thread workloads record a core-to-core round trip beside
//! each run, and on this kind of host it swings 2–100× from one run to the
//! next when the host moves the vCPUs apart; the medians therefore leave
//! out the runs of a workload whose round trip was more than
//! [`QUIET_RTT_FACTOR`]× the workload's quietest (a configuration with no
//! quiet run keeps all its runs), and the reports say how many.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use sheafalloc_bench::peers::Peer;
use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::catalog::Workload;
use sheafalloc_bench::summary;

use crate::options::SweepOptions;
use crate::quiet_gate::ThisMachine;
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

    /// Whether the configuration turns the auto-tuner off: its capacities
    /// do not move, and its warm-up needs only a steady state.
    pub fn tuner_off(&self) -> bool {
        self.env
            .iter()
            .any(|(key, value)| key == "SHEAFALLOC_AUTOTUNE" && value == "off")
    }

    /// The warm-up seconds of this configuration's runs.
    pub fn warmup(&self, options: &SweepOptions) -> f64 {
        match options.fixed_warmup {
            Some(fixed) if self.tuner_off() => fixed,
            _ => options.warmup,
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
    /// Per workload, the runs of a paired confirmation after the sweep
    /// (`confirm`): pair `round` ran configuration 0 and the challenger
    /// back to back, in alternating order. Empty without `--confirm`.
    pub confirmations: Vec<Vec<Outcome>>,
    /// The command line, the commit and the machine, for the report.
    pub provenance: String,
    /// Where results go: `NAME`, or `NAME-partial` for a run of a
    /// subset of the workloads (which leaves the full results and the
    /// README alone). A replay of a kept copy (`NAME-COMMIT.jsonl`, whose
    /// header says `NAME`) takes the copy's own name, so it too leaves the
    /// README alone.
    pub stem: String,
    /// Where the report goes: `bench/results/{stem}.md` for a run; for a
    /// replay, beside the replayed file (`X.jsonl` → `X.md`), so replaying
    /// a kept copy never overwrites the report of another run.
    pub report_path: PathBuf,
}

/// A run is quiet if its round trip is at most this many times the
/// quietest of its workload's runs.
pub const QUIET_RTT_FACTOR: f64 = 2.0;

/// Marks a median without a quiet run, and a ratio with such a median.
pub const MARK: &str = "*";

/// The round trip above which a run counts as noisy, from the round trips
/// of all the runs it is compared with: [`QUIET_RTT_FACTOR`]× the quietest
/// (infinite when none has a round trip).
pub fn quiet_limit(round_trips: impl IntoIterator<Item = f64>) -> f64 {
    QUIET_RTT_FACTOR
        * round_trips
            .into_iter()
            .filter(|rtt| rtt.is_finite() && *rtt > 0.0)
            .fold(f64::INFINITY, f64::min)
}

/// Whether `runs` were all taken in one host state: every round trip they
/// recorded, before and after each run, within [`QUIET_RTT_FACTOR`]× of
/// the smallest (runs without a probe, single-thread workloads, always
/// are).
pub fn same_host_state(runs: &[&Outcome]) -> bool {
    let trips: Vec<f64> = runs
        .iter()
        .flat_map(|o| [o.record.number("rtt_ns"), o.record.number("rtt_after_ns")])
        .collect();
    let limit = quiet_limit(trips.iter().copied());
    trips.iter().all(|&rtt| !rtt.is_finite() || rtt <= limit)
}

/// Whether `outcome` was quiet under `limit`; a run without a round trip
/// counts as quiet.
fn quiet_under(outcome: &Outcome, limit: f64) -> bool {
    let rtt = outcome.record.number("rtt_ns");
    !rtt.is_finite() || rtt <= limit
}

impl Sweep {
    /// The round trip above which a run of workload number `w` counts as
    /// noisy (infinite for a workload without a round-trip probe).
    fn noisy_above(&self, w: usize) -> f64 {
        quiet_limit(self.results[w].iter().map(|o| o.record.number("rtt_ns")))
    }

    /// The runs of configuration `config` for workload number `w` the
    /// medians use: the quiet ones, or all if none was quiet.
    pub fn used(&self, w: usize, config: usize) -> Vec<&Outcome> {
        let runs: Vec<&Outcome> = self.results[w]
            .iter()
            .filter(|o| o.config == config && o.value.is_finite())
            .collect();
        let limit = self.noisy_above(w);
        let quiet: Vec<&Outcome> = runs
            .iter()
            .copied()
            .filter(|o| quiet_under(o, limit))
            .collect();
        if quiet.is_empty() {
            runs
        } else {
            quiet
        }
    }

    /// Whether configuration `config` had a quiet run of workload number
    /// `w` (always, for a workload without a round-trip probe). Without
    /// one its median is over runs that mix placements, and a ratio with
    /// it compares different host states: the reports mark both.
    pub fn has_quiet(&self, w: usize, config: usize) -> bool {
        let limit = self.noisy_above(w);
        self.results[w]
            .iter()
            .filter(|o| o.config == config && o.value.is_finite())
            .any(|o| quiet_under(o, limit))
    }

    /// [`MARK`] if any of `configs` had no quiet run of workload `w`: for
    /// one configuration's median, or a ratio of several.
    pub fn marks(&self, w: usize, configs: &[usize]) -> &'static str {
        if configs.iter().all(|&c| self.has_quiet(w, c)) {
            ""
        } else {
            MARK
        }
    }

    /// Runs of workload number `w` the medians leave out (noisy periods).
    pub fn left_out(&self, w: usize) -> usize {
        let used: usize = (0..self.configs.len()).map(|c| self.used(w, c).len()).sum();
        let finite = self.results[w]
            .iter()
            .filter(|o| o.value.is_finite())
            .count();
        finite.saturating_sub(used)
    }

    /// A sentence for the reports: how many runs were left out, and why.
    pub fn left_out_note(&self) -> String {
        let per_workload: Vec<String> = (0..self.workloads.len())
            .filter_map(|w| {
                let n = self.left_out(w);
                (n > 0).then(|| format!("{} {n}", self.workloads[w].name()))
            })
            .collect();
        let rule = format!(
            "Runs whose core-to-core round trip was more than {QUIET_RTT_FACTOR}× the quietest \
             of their workload are left out of the medians (a configuration without a quiet \
             run keeps all of its runs, and its median and every ratio with it are marked \
             `{MARK}`: they compare different host states and say nothing about the \
             configurations)"
        );
        if per_workload.is_empty() {
            format!("{rule}; none was left out.")
        } else {
            format!("{rule}; left out: {}.", per_workload.join(", "))
        }
    }

    /// The median of configuration `config` for workload number `w`, over
    /// the runs [`Sweep::used`] keeps.
    pub fn median(&self, w: usize, config: usize) -> Option<f64> {
        self.median_of(w, config, |o| o.value)
    }

    /// The median of `value` (a number each run gives, such as a field of
    /// its record) over the same runs as [`Sweep::median`], skipping runs
    /// for which it is not a number (a field an older results file
    /// lacks); `None` if no run gives one.
    pub fn median_of(
        &self,
        w: usize,
        config: usize,
        value: impl Fn(&Outcome) -> f64,
    ) -> Option<f64> {
        let values: Vec<f64> = self
            .used(w, config)
            .into_iter()
            .map(value)
            .filter(|v| v.is_finite())
            .collect();
        (!values.is_empty()).then(|| summary::median(&values))
    }

    /// The confirmation's pairs of workload number `w` whose two runs were
    /// taken in one host state ([`same_host_state`]): each pair's ratio of
    /// configuration 0 to the challenger ([`Sweep::better`], so above 1
    /// when configuration 0 is better), in pair order; and how many pairs
    /// were left out (the state changed, or a run is missing). Unlike the
    /// medians, a pair with the vCPUs apart for both runs counts: it
    /// compares the two configurations as well as a close pair does.
    pub fn pair_ratios(&self, w: usize) -> (Vec<f64>, usize) {
        self.round_pairs(
            w,
            &self.confirmations[w],
            |o| o.config == 0,
            |o| o.config != 0,
        )
    }

    /// The main rounds' pairs of configuration `a`'s run of workload
    /// number `w` with configuration `b`'s, over the rounds whose two runs
    /// were taken in one host state: each pair's ratio of `a` to `b`
    /// ([`Sweep::better`]), in round order.
    pub fn paired_runs(&self, w: usize, a: usize, b: usize) -> Vec<f64> {
        self.round_pairs(w, &self.results[w], |o| o.config == a, |o| o.config == b)
            .0
    }

    /// Each round of `runs` (of workload number `w`) whose run `is_a`
    /// picks and run `is_b` picks were taken in one host state
    /// ([`same_host_state`]): the ratio of the first to the second
    /// ([`Sweep::better`]), in round order; and how many rounds were left
    /// out (the state changed, or a run is missing). Unlike the medians, a
    /// pair with the vCPUs apart for both runs counts: it compares the two
    /// configurations as well as a close pair does.
    fn round_pairs(
        &self,
        w: usize,
        runs: &[Outcome],
        is_a: impl Fn(&Outcome) -> bool,
        is_b: impl Fn(&Outcome) -> bool,
    ) -> (Vec<f64>, usize) {
        let mut rounds: Vec<usize> = runs.iter().map(|o| o.round).collect();
        rounds.sort_unstable();
        rounds.dedup();
        let mut ratios = Vec::new();
        let mut left_out = 0;
        for round in rounds {
            let pick = |is: &dyn Fn(&Outcome) -> bool| {
                runs.iter()
                    .find(|o| o.round == round && is(o) && o.value.is_finite())
            };
            match (pick(&is_a), pick(&is_b)) {
                (Some(a), Some(b)) if same_host_state(&[a, b]) => {
                    ratios.push(self.better(w, a.value, b.value));
                }
                _ => left_out += 1,
            }
        }
        (ratios, left_out)
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
    challenger: &dyn Fn(&Sweep, usize) -> Option<usize>,
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
    // Before any run: without wrk every HTTP run fails, and a sweep of an
    // hour would come back with those rows empty.
    if workloads.iter().any(|w| w.is_http()) {
        if let Err(error) = sheafalloc_bench::service::http::wrk::check_installed() {
            eprintln!("sheafalloc-bench {name}: {error}");
            std::process::exit(1);
        }
    }
    let stem = if options.only.is_some() {
        format!("{name}-partial")
    } else {
        name.to_owned()
    };
    let dir = crate::suite::results_dir();
    let path = dir.join(format!("{stem}.jsonl"));
    let commit = crate::machine::commit_label();
    let only = options.only.as_ref().map_or_else(String::new, |only| {
        let names: Vec<&str> = only.iter().map(|w| w.name()).collect();
        format!(" --only {}", names.join(","))
    });
    let (gate_flags, gate_words) = options.gate.map_or_else(
        || (String::new(), String::new()),
        |gate| {
            (
                format!(
                    " --quiet-below {} --quiet-wait {}",
                    gate.below_ns,
                    gate.max_wait.as_secs_f64()
                ),
                format!("; {}", gate.describe()),
            )
        },
    );
    let fixed_warmup = options
        .fixed_warmup
        .map_or_else(String::new, |s| format!(" --fixed-warmup {s}"));
    let confirm_flag = match (options.confirm, &options.against) {
        (0, _) => String::new(),
        (pairs, None) => format!(" --confirm {pairs}"),
        (pairs, Some(against)) => format!(" --confirm {pairs} --against {against}"),
    };
    let command = format!(
        "sheafalloc-bench {name} --rounds {} --warmup {}{fixed_warmup} --seconds {}{confirm_flag}{only}{gate_flags}",
        options.rounds, options.warmup, options.seconds,
    );
    let names: Vec<String> = workloads.iter().map(|w| w.name().to_owned()).collect();
    // Resuming: the recorded runs, taken out as the loops reach them.
    let mut resumed = options.resume.then(|| {
        crate::sweep_resume::prepare(&path, &command, &names, configs.clone()).unwrap_or_else(
            |error| {
                eprintln!("sheafalloc-bench {name} --resume: {error}");
                std::process::exit(1);
            },
        )
    });
    let provenance = resumed.as_ref().map_or_else(
        || {
            format!(
                "`{command}`; commit {commit}; {}{gate_words}",
                crate::machine::describe().markdown()
            )
        },
        |r| r.provenance.clone(),
    );
    let mut log = std::fs::File::create(&path).ok();
    if let Some(log) = log.as_mut() {
        let header = serde_json::json!({
            "kind": "header",
            "stem": stem,
            "provenance": provenance,
            "workloads": names,
        });
        let _ = writeln!(log, "{header}");
        if let Some(r) = &resumed {
            // The recorded runs, as they were (the old header left out).
            let runs = r.text.split_once('\n').map_or("", |(_, runs)| runs);
            let _ = log.write_all(runs.as_bytes());
        }
    }
    let mut results: Vec<Vec<Outcome>> = workloads.iter().map(|_| Vec::new()).collect();
    let runner = Runner {
        binary: &binary,
        options,
    };
    for round in 0..options.rounds {
        for (w, &workload) in workloads.iter().enumerate() {
            for slot in 0..configs.len() {
                let c = (slot + round) % configs.len();
                if let Some(r) = resumed.as_mut() {
                    let recorded = &mut r.sweep.results[w];
                    if let Some(outcome) = crate::sweep_resume::take(recorded, round + 1, c) {
                        results[w].push(outcome);
                        continue;
                    }
                }
                let label = format!("round {}/{}", round + 1, options.rounds);
                if let Some(outcome) = runner.run(&label, workload, &configs, c, round + 1) {
                    log_run(log.as_mut(), workload, &configs[c], &outcome, None);
                    results[w].push(outcome);
                }
            }
        }
    }
    let mut sweep = Sweep {
        confirmations: workloads.iter().map(|_| Vec::new()).collect(),
        workloads,
        configs,
        results,
        provenance,
        report_path: dir.join(format!("{stem}.md")),
        stem,
    };
    if options.confirm > 0 {
        let recorded = resumed.map(|r| r.sweep.confirmations);
        confirm(&mut sweep, &runner, log.as_mut(), challenger, recorded);
    }
    sweep
}

/// Runs one configuration of one workload (behind the gate, for a
/// cross-thread workload) and says so on stderr.
struct Runner<'a> {
    binary: &'a std::path::Path,
    options: &'a SweepOptions,
}

impl Runner<'_> {
    fn run(
        &self,
        label: &str,
        workload: Workload,
        configs: &[Config],
        c: usize,
        round: usize,
    ) -> Option<Outcome> {
        let config = &configs[c];
        let warmup = config.warmup(self.options);
        let invocation = spawn::Invocation {
            binary: self.binary,
            args: vec![
                workload.name().to_owned(),
                "--warmup".into(),
                warmup.to_string(),
                "--seconds".into(),
                self.options.seconds.to_string(),
            ],
            numa_nodes: None,
            env: config.env.clone(),
            limit: Duration::from_secs_f64(warmup + self.options.seconds + 60.0),
        };
        let outcome = match self.options.gate {
            Some(gate) if workload.cross_thread() => {
                gate.run(&mut ThisMachine::new(), || spawn::run(&invocation))
            }
            _ => spawn::run(&invocation),
        };
        match outcome {
            Ok(record) => {
                let value = record.number("value");
                eprintln!(
                    "{label} {} {}: {value} {} ({})",
                    workload.name(),
                    config.name,
                    workload.unit(),
                    record.get("sheaf_cache_mode").unwrap_or("-"),
                );
                Some(Outcome {
                    round,
                    config: c,
                    value,
                    record,
                })
            }
            Err(error) => {
                eprintln!(
                    "{label}: {} {} failed: {error}",
                    workload.name(),
                    config.name
                );
                None
            }
        }
    }
}

/// One line of the results file: a run of the sweep, or (`stage`) of its
/// confirmation.
fn log_run(
    log: Option<&mut std::fs::File>,
    workload: Workload,
    config: &Config,
    outcome: &Outcome,
    stage: Option<&str>,
) {
    let Some(log) = log else { return };
    let mut line = serde_json::json!({
        "round": outcome.round,
        "workload": workload.name(),
        "config": config.name,
        "line": outcome.record.line(),
    });
    if let Some(stage) = stage {
        line["stage"] = stage.into();
    }
    let _ = writeln!(log, "{line}");
}

/// The stage name of a confirmation's runs in the results file.
const CONFIRM_STAGE: &str = "confirm";

/// The paired confirmation: for each workload whose `challenger` (picked
/// from the sweep's medians) exists, `options.confirm` pairs of runs of
/// configuration 0 and the challenger back to back, the order alternating
/// pair by pair. A sweep's best configuration is the best of several
/// noisy medians, so it is biased upwards (the winner's curse); a pair's
/// ratio, its two runs taken in the same minute, is not.
fn confirm(
    sweep: &mut Sweep,
    runner: &Runner<'_>,
    mut log: Option<&mut std::fs::File>,
    challenger: &dyn Fn(&Sweep, usize) -> Option<usize>,
    mut recorded: Option<Vec<Vec<Outcome>>>,
) {
    let pairs = runner.options.confirm;
    for w in 0..sweep.workloads.len() {
        let Some(other) = challenger(sweep, w) else {
            continue;
        };
        let workload = sweep.workloads[w];
        for pair in 0..pairs {
            let order = if pair % 2 == 0 {
                [0, other]
            } else {
                [other, 0]
            };
            for c in order {
                if let Some(recorded) = recorded.as_mut() {
                    if let Some(outcome) = crate::sweep_resume::take(&mut recorded[w], pair + 1, c)
                    {
                        sweep.confirmations[w].push(outcome);
                        continue;
                    }
                }
                let label = format!("confirm {}/{pairs}", pair + 1);
                if let Some(outcome) = runner.run(&label, workload, &sweep.configs, c, pair + 1) {
                    log_run(
                        log.as_deref_mut(),
                        workload,
                        &sweep.configs[c],
                        &outcome,
                        Some(CONFIRM_STAGE),
                    );
                    sweep.confirmations[w].push(outcome);
                }
            }
        }
    }
}

/// The sweep `options` ask for: merged from `--merge`'s files, read back
/// from `--replay`'s, or run.
pub fn run_or_replay(
    name: &str,
    options: &SweepOptions,
    configs: Vec<Config>,
    default_workloads: &[Workload],
    challenger: &dyn Fn(&Sweep, usize) -> Option<usize>,
) -> Sweep {
    if let Some(files) = &options.merge {
        let merged = crate::sweep_merge::merge(name, files, default_workloads)
            .and_then(|path| load(&path, configs));
        return merged.unwrap_or_else(|error| {
            eprintln!("sheafalloc-bench {name} --merge: {error}");
            std::process::exit(1);
        });
    }
    match &options.replay {
        Some(file) => load(file, configs).unwrap_or_else(|error| {
            eprintln!("sheafalloc-bench {name} --replay: {error}");
            std::process::exit(1);
        }),
        None => run(name, options, configs, default_workloads, challenger),
    }
}

/// A results file's header line (the JSON object `run` writes first:
/// stem, provenance, workloads) and its other non-empty lines, one per
/// run, as written.
pub fn read_results(path: &std::path::Path) -> Result<(serde_json::Value, Vec<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_results(path, &text)
}

/// [`read_results`] of a file's `text`, already read (`path` names it in
/// errors).
pub fn parse_results(
    path: &std::path::Path,
    text: &str,
) -> Result<(serde_json::Value, Vec<String>), String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: serde_json::Value = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .filter(|h: &serde_json::Value| h["kind"] == "header")
        .ok_or_else(|| {
            format!(
                "{}: line 1: no header line (a file written before --replay existed?)",
                path.display()
            )
        })?;
    Ok((header, lines.map(str::to_owned).collect()))
}

/// A sweep read back from its results file (`--replay`): the header line
/// `run` writes first (stem, provenance, workloads), then one line per run.
pub fn load(path: &std::path::Path, configs: Vec<Config>) -> Result<Sweep, String> {
    let (header, lines) = read_results(path)?;
    let bad = |n: usize, what: &str| format!("{}: line {n}: {what}", path.display());
    let field = |key: &str| header[key].as_str().map(str::to_owned);
    let workloads = header["workloads"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().and_then(Workload::from_name))
                .collect::<Vec<_>>()
        })
        .ok_or_else(|| bad(1, "the header lists no workloads"))?;
    let mut results: Vec<Vec<Outcome>> = workloads.iter().map(|_| Vec::new()).collect();
    let mut confirmations: Vec<Vec<Outcome>> = workloads.iter().map(|_| Vec::new()).collect();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 2;
        let run: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(n, &e.to_string()))?;
        let (Some(round), Some(workload), Some(config), Some(result)) = (
            run["round"].as_u64(),
            run["workload"].as_str(),
            run["config"].as_str(),
            run["line"].as_str(),
        ) else {
            return Err(bad(n, "a run needs round, workload, config and line"));
        };
        let w = workloads
            .iter()
            .position(|x| x.name() == workload)
            .ok_or_else(|| bad(n, &format!("workload {workload:?} is not in the header")))?;
        let config = configs
            .iter()
            .position(|c| c.name == config)
            .ok_or_else(|| bad(n, &format!("unknown configuration {config:?}")))?;
        let record = Record::parse_line(result).ok_or_else(|| bad(n, "no result line"))?;
        let outcome = Outcome {
            round: round as usize,
            config,
            value: record.number("value"),
            record,
        };
        match run["stage"].as_str() {
            None => results[w].push(outcome),
            Some(CONFIRM_STAGE) => confirmations[w].push(outcome),
            Some(other) => return Err(bad(n, &format!("unknown stage {other:?}"))),
        }
    }
    Ok(Sweep {
        confirmations,
        workloads,
        configs,
        results,
        provenance: field("provenance").ok_or_else(|| bad(1, "no provenance"))?,
        stem: replay_stem(path, field("stem").ok_or_else(|| bad(1, "no stem"))?),
        report_path: path.with_extension("md"),
    })
}

/// The stem of a replayed sweep: the one its header records if the file
/// still has that name (`modes.jsonl`), else the file's own (a kept copy).
fn replay_stem(path: &std::path::Path, recorded: String) -> String {
    match path.file_stem().and_then(|s| s.to_str()) {
        Some(own) if own != recorded => own.to_owned(),
        _ => recorded,
    }
}

/// Prints `report`, writes it to the sweep's `report_path`, and, for a
/// full run, puts it (without its title) in the `{name}` generated region
/// of the root README, if that has one.
pub fn save(name: &str, sweep: &Sweep, report: &str) {
    print!("{report}");
    let path = &sweep.report_path;
    if let Err(error) = std::fs::write(path, report) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(config: usize, value: f64, rtt: &str) -> Outcome {
        let line = format!("result workload=handoff-1to1 value={value} rtt_ns={rtt}");
        Outcome {
            round: 1,
            config,
            value,
            record: Record::parse_line(&line).expect("a result line"),
        }
    }

    fn sweep(results: Vec<Outcome>) -> Sweep {
        Sweep {
            workloads: vec![Workload::Handoff1to1],
            configs: vec![Config::new("a", &[]), Config::new("b", &[])],
            results: vec![results],
            confirmations: vec![Vec::new()],
            provenance: String::new(),
            stem: "test".into(),
            report_path: PathBuf::from("test.md"),
        }
    }

    #[test]
    fn only_configurations_with_the_tuner_off_take_the_fixed_warm_up() {
        let auto = Config::new("auto", &[]);
        let fixed = Config::new(
            "fixed-64",
            &[
                ("SHEAFALLOC_AUTOTUNE", "off"),
                ("SHEAFALLOC_CAPACITY", "size-8=64"),
            ],
        );
        let mut options = SweepOptions {
            rounds: 1,
            warmup: 12.0,
            fixed_warmup: None,
            seconds: 2.0,
            only: None,
            replay: None,
            merge: None,
            resume: false,
            gate: None,
            confirm: 0,
            against: None,
        };
        assert_eq!(
            (auto.warmup(&options), fixed.warmup(&options)),
            (12.0, 12.0)
        );
        options.fixed_warmup = Some(3.0);
        assert_eq!((auto.warmup(&options), fixed.warmup(&options)), (12.0, 3.0));
        assert!(!Config::new("on", &[("SHEAFALLOC_AUTOTUNE", "on")]).tuner_off());
    }

    #[test]
    fn medians_leave_out_runs_of_a_noisy_period() {
        // Config a: one quiet run (rtt 70) and one taken while the vCPUs
        // were apart (rtt 9650, a third of the throughput).
        let s = sweep(vec![
            outcome(0, 12.0, "70"),
            outcome(0, 4.0, "9650"),
            outcome(1, 10.0, "75"),
            outcome(1, 11.0, "139"),
        ]);
        assert_eq!(s.median(0, 0), Some(12.0));
        assert_eq!(s.median(0, 1), Some(10.5), "139 <= 2 x 70: kept");
        assert_eq!(s.left_out(0), 1);
        assert!(s.left_out_note().contains("handoff-1to1 1"));
    }

    #[test]
    fn a_configuration_without_a_quiet_run_keeps_all_of_them() {
        let s = sweep(vec![
            outcome(0, 12.0, "70"),
            outcome(1, 4.0, "9650"),
            outcome(1, 6.0, "8000"),
        ]);
        assert_eq!(s.median(0, 1), Some(5.0));
        assert_eq!(s.left_out(0), 0);
        assert!(s.left_out_note().ends_with("none was left out."));
        // ... and is marked as such, so no ratio with it passes for a
        // comparison of configurations.
        assert!(s.has_quiet(0, 0) && !s.has_quiet(0, 1));
        assert_eq!((s.marks(0, &[0]), s.marks(0, &[1])), ("", MARK));
        assert_eq!(s.marks(0, &[0, 1]), MARK);
    }

    #[test]
    fn a_confirmation_pair_counts_only_if_its_runs_share_one_host_state() {
        let mut s = sweep(vec![outcome(0, 10.0, "70"), outcome(1, 10.0, "72")]);
        let run = |round: usize, config: usize, value: f64, before: &str, after: &str| {
            let line = format!(
                "result workload=handoff-1to1 value={value} rtt_ns={before} rtt_after_ns={after}"
            );
            Outcome {
                round,
                config,
                value,
                record: Record::parse_line(&line).expect("a result line"),
            }
        };
        s.confirmations[0] = vec![
            // Pair 1: a then b, both close: a / b = 0.9.
            run(1, 0, 9.0, "70", "66"),
            run(1, 1, 10.0, "80", "64"),
            // Pair 2: b then a, both apart: 1.1 (counts: one state).
            run(2, 1, 3.0, "320", "310"),
            run(2, 0, 3.3, "305", "325"),
            // Pair 3: a close, b apart: left out.
            run(3, 0, 10.0, "70", "64"),
            run(3, 1, 3.0, "9000", "9100"),
            // Pair 4: both began close, but b ended apart: left out.
            run(4, 0, 10.0, "66", "64"),
            run(4, 1, 7.0, "64", "318"),
            // Pair 5: a's run failed: left out.
            run(5, 1, 10.0, "70", "70"),
        ];
        let (ratios, left_out) = s.pair_ratios(0);
        assert_eq!(left_out, 3);
        assert_eq!(ratios.len(), 2);
        assert!((ratios[0] - 0.9).abs() < 1e-9 && (ratios[1] - 1.1).abs() < 1e-9);
        // Without probes (a single-thread workload) every pair counts.
        let plain = |config: usize| outcome(config, 5.0, "nan");
        assert!(same_host_state(&[&plain(0), &plain(1)]));
    }

    #[test]
    fn a_results_file_reads_back_into_the_same_sweep() {
        let path = std::env::temp_dir().join(format!("sweep-load-{}.jsonl", std::process::id()));
        let header = serde_json::json!({
            "kind": "header", "stem": "modes", "provenance": "`x`; commit c",
            "workloads": ["handoff-1to1", "pairs"],
        });
        let run = |round: u32, workload: &str, config: &str, value: f64| {
            serde_json::json!({
                "round": round, "workload": workload, "config": config,
                "line": format!("result workload={workload} value={value} rtt_ns=70"),
            })
        };
        let mut confirmed = run(1, "pairs", "b", 8.0);
        confirmed["stage"] = CONFIRM_STAGE.into();
        let text = format!(
            "{header}\n{}\n{}\n{}\n{confirmed}\n",
            run(1, "handoff-1to1", "b", 3.0),
            run(1, "pairs", "a", 7.5),
            run(2, "handoff-1to1", "a", 4.0),
        );
        std::fs::write(&path, text).unwrap();
        let configs = vec![Config::new("a", &[]), Config::new("b", &[])];
        let s = load(&path, configs.clone()).expect("the file reads back");
        // A copy under another name keeps that name: its replay leaves the
        // README's table (which `save` fills only for stem "modes") alone.
        assert_eq!(s.stem, format!("sweep-load-{}", std::process::id()));
        let dir = std::env::temp_dir().join(format!("sweep-load-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let named = dir.join("modes.jsonl");
        std::fs::copy(&path, &named).unwrap();
        assert_eq!(load(&named, configs.clone()).unwrap().stem, "modes");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            s.report_path,
            path.with_extension("md"),
            "the report goes beside the file"
        );
        assert_eq!(s.provenance, "`x`; commit c");
        assert_eq!(s.workloads.len(), 2);
        assert_eq!((s.median(0, 0), s.median(0, 1)), (Some(4.0), Some(3.0)));
        assert_eq!(s.median(1, 0), Some(7.5));
        assert_eq!(s.results[0][1].round, 2);
        // The confirmation's run goes to its own list, not the medians.
        assert_eq!(s.median(1, 1), None);
        assert_eq!(s.confirmations[1].len(), 1);
        assert_eq!(s.confirmations[1][0].value, 8.0);
        // An unknown stage is an error, not a run of the sweep.
        let mut odd = run(1, "pairs", "a", 1.0);
        odd["stage"] = "later".into();
        std::fs::write(&path, format!("{header}\n{odd}\n")).unwrap();
        assert!(load(&path, configs.clone())
            .err()
            .unwrap()
            .contains("unknown stage"));
        // A run of a configuration the sweep does not have is an error.
        std::fs::write(&path, format!("{header}\n{}\n", run(1, "pairs", "c", 1.0))).unwrap();
        let error = load(&path, configs.clone()).err().unwrap();
        assert!(
            error.contains("line 2") && error.contains("\"c\""),
            "{error}"
        );
        // So is a file without the header.
        std::fs::write(&path, format!("{}\n", run(1, "pairs", "a", 1.0))).unwrap();
        assert!(load(&path, configs).err().unwrap().contains("no header"));
        let _ = std::fs::remove_file(&path);
    }
}
