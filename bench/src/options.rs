//! The command line: subcommands and flags.

use crate::peers::{self, Peer};
use crate::quiet_gate::QuietGate;
use crate::workloads::{self, Workload};
use sheafalloc_bench::service::catalog::Workload as ServiceWorkload;

/// Usage text for `--help` and errors.
pub const USAGE: &str = "\
usage:
  sheafalloc-bench [--rounds N] [--quick] [--only PART[,PART...]]
      the comparison: every part, allocators interleaved round by round;
      PART is pairs, fifo, prodcons or callgrind (default: all)
  sheafalloc-bench callgrind [--quick]
      only the callgrind instruction counts (needs valgrind)
  sheafalloc-bench handlers [--quick] [--snmalloc PATH]
      instructions and simulated cache misses per call of the HTTP
      handlers (json-orders, json-catalog) under callgrind, every
      allocator's wl-* binary; PATH: a wl-snmalloc built with
      --features snmalloc-valgrind; writes bench/results/handlers.md
  sheafalloc-bench pairs ALLOCATOR N
      N alloc+free pairs with one allocator (what callgrind runs)
  sheafalloc-bench suite [--quick] [--rounds N] [--only PART[,PART...]]
      the network-service suite: runs the wl-ALLOCATOR binaries found next
      to this one, interleaved round by round, the allocator order rotated
      every round; PART is a workload name (`wl-system --list`), numa or
      callgrind (default: all); logs every run to bench/results/suite.jsonl
      and makes suite.md and suite.svg from it (suite-quick.* with --quick,
      suite-partial.* with --only)
      --warmup S sets every run's warm-up (a steady state, e.g. 3)
      --quiet-below NS [--quiet-wait S] gates every cross-thread run: it
      waits (at most S seconds, default 120) for a core-to-core round trip
      of at most NS, and is rerun (3 runs at most) while its own round
      trip is above NS; the tuning and modes sweeps take the same flags
  sheafalloc-bench tuning [--rounds N] [--warmup S] [--fixed-warmup S] [--seconds S]
          [--confirm PAIRS [--against CONFIG]] [--only W,...]
      the capacity sweep: wl-sheafalloc auto-tuned, with the tuner off at
      the default capacities, and at fixed capacities 16..1024 for every
      class below 4 KiB; configurations interleaved and rotated each round
      (default 3 rounds, 8 s warm-up, 2 s measured); --fixed-warmup S
      gives the configurations with the tuner off (nothing to settle)
      a warm-up of their own; --confirm PAIRS then runs, per workload,
      auto and the sweep's best fixed capacity back to back PAIRS times
      (order alternating) and reports each pair's ratio, free of the
      bias of picking the best of several noisy medians (--against
      CONFIG names the configuration instead, e.g. fixed-256); writes
      bench/results/tuning.jsonl and tuning.md
  sheafalloc-bench modes [--rounds N] [--warmup S] [--seconds S] [--only W,...]
      wl-sheafalloc with per-CPU sheaves (as shipped) against per-thread
      sheaves (SHEAFALLOC_PERCPU=off), interleaved and rotated each round;
      writes bench/results/modes.jsonl and modes.md
  sheafalloc-bench tuning|modes --replay RESULTS.jsonl
      remakes a sweep's report (and, for a full run, its README table)
      from its results file, without running anything
  sheafalloc-bench tuning|modes ... --resume
      with the options of an interrupted sweep: keeps the runs its results
      file recorded and runs only the rest (refused if the file was made
      by other options, or the code changed since its commit)
  sheafalloc-bench tuning|modes --merge PART.jsonl,PART.jsonl,...
      merges partial sweeps (--only) that together cover every workload
      once into bench/results/tuning.jsonl (or modes.jsonl), then makes
      its report and README table as --replay does
  sheafalloc-bench report [RESULTS.jsonl] [--readme FILE]... [--no-readme]
          [--region NAME]...
      regenerates the report and chart of a results file (default:
      bench/results/suite.jsonl, else suite-quick.jsonl) and the generated
      tables of bench/README.md (or of each FILE given); with --region,
      only the regions named (provenance, targets, summary, host-states)

The table goes to stdout and to bench/results/latest.md; progress to stderr.";

/// One part of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A timed workload.
    Timed(Workload),
    /// Instructions per alloc+free pair under callgrind.
    Callgrind,
}

/// Options of the comparison run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Rounds over all allocators (at least 1).
    pub rounds: usize,
    /// Short run (under a minute).
    pub quick: bool,
    /// The parts to run, in report order.
    pub parts: Vec<Part>,
}

impl RunOptions {
    /// Whether `workload` is one of the parts.
    pub fn runs(&self, workload: Workload) -> bool {
        self.parts.contains(&Part::Timed(workload))
    }
}

/// What to do.
#[derive(Clone, Debug)]
pub enum Command {
    /// The comparison.
    Run(RunOptions),
    /// Only callgrind.
    Callgrind {
        /// Smaller iteration counts.
        quick: bool,
    },
    /// The handlers under callgrind.
    Handlers {
        /// Smaller call counts.
        quick: bool,
        /// The `wl-snmalloc` to count instead of the one next to this.
        snmalloc: Option<std::path::PathBuf>,
    },
    /// The pairs loop alone, for callgrind.
    Pairs {
        /// The allocator.
        peer: Peer,
        /// Pairs to run.
        n: usize,
    },
    /// The network-service suite.
    Suite(SuiteOptions),
    /// The capacity sweep: sheafalloc auto-tuned against fixed capacities.
    Tuning(SweepOptions),
    /// `sheafalloc-bench modes`.
    Modes(SweepOptions),
    /// The report generator.
    Report {
        /// The results file (`None`: the default one).
        results: Option<std::path::PathBuf>,
        /// READMEs to update (`None`: bench/README.md).
        readmes: Option<Vec<std::path::PathBuf>>,
        /// Only these generated regions (`None`: every one).
        regions: Option<Vec<String>>,
    },
    /// Print usage.
    Help,
}

/// One part of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuitePart {
    /// A workload run by every `wl-*` binary.
    Workload(ServiceWorkload),
    /// TX completion 1→1 pinned to CPUs 0 and 1, two simulated nodes
    /// against one.
    Numa,
    /// Instructions per alloc+free pair under callgrind.
    Callgrind,
}

/// Options of the suite.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Rounds over all allocators (at least 1).
    pub rounds: usize,
    /// Short run (under two minutes).
    pub quick: bool,
    /// The parts, in report order.
    pub parts: Vec<SuitePart>,
    /// Whether `--only` chose the parts.
    pub partial: bool,
    /// Warm-up seconds of every run, if not the workloads' defaults.
    pub warmup: Option<f64>,
    /// The gate in front of every cross-thread run, if asked for.
    pub gate: Option<QuietGate>,
}

/// Options of a configuration sweep (`sheafalloc-bench tuning`, `modes`).
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Rounds over all configurations.
    pub rounds: usize,
    /// Warm-up seconds of every run (the tuner settles meanwhile).
    pub warmup: f64,
    /// Warm-up seconds of a configuration with the tuner off, which has
    /// nothing to settle but a steady state (`None`: `warmup`).
    pub fixed_warmup: Option<f64>,
    /// Measured seconds of every run.
    pub seconds: f64,
    /// The workloads (`None`: the default set).
    pub only: Option<Vec<ServiceWorkload>>,
    /// Remake the report from this results file instead of running.
    pub replay: Option<std::path::PathBuf>,
    /// Merge these partial sweeps' results files into the whole sweep's
    /// (`sweep_merge`) and make its report, instead of running.
    pub merge: Option<Vec<std::path::PathBuf>>,
    /// Continue the interrupted sweep in the results file (`sweep_resume`)
    /// instead of starting afresh.
    pub resume: bool,
    /// The gate in front of every cross-thread run, if asked for.
    pub gate: Option<QuietGate>,
    /// Pairs of the paired confirmation after the sweep (`tuning`: `auto`
    /// against the best fixed capacity, back to back); 0: none.
    pub confirm: usize,
    /// The configuration the confirmation runs against, instead of the
    /// sweep's pick (`--against fixed-256`).
    pub against: Option<String>,
}

fn parse_sweep(args: &[String], modes: bool) -> Result<Command, String> {
    let mut options = SweepOptions {
        rounds: 3,
        // The tuner needs time to settle; the modes only a steady state.
        warmup: if modes { 2.0 } else { 8.0 },
        seconds: 2.0,
        fixed_warmup: None,
        only: None,
        replay: None,
        merge: None,
        resume: false,
        gate: None,
        confirm: 0,
        against: None,
    };
    let mut gate = GateFlags::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if gate.parse(arg, &mut args)? {
            continue;
        }
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--rounds" => options.rounds = parse_rounds(args.next())?,
            "--warmup" => options.warmup = parse_seconds("--warmup", args.next())?,
            "--seconds" => options.seconds = parse_seconds("--seconds", args.next())?.max(0.1),
            "--fixed-warmup" => {
                options.fixed_warmup = Some(parse_seconds("--fixed-warmup", args.next())?);
            }
            "--confirm" if !modes => {
                let value = args.next().ok_or("--confirm needs a number of pairs")?;
                options.confirm = value
                    .parse()
                    .map_err(|_| format!("--confirm: {value:?} is not a number of pairs"))?;
            }
            "--against" if !modes => {
                let value = args
                    .next()
                    .ok_or("--against needs a configuration's name")?;
                options.against = Some(value.clone());
            }
            "--only" => {
                let value = args.next().ok_or("--only needs workload names")?;
                let workloads = value
                    .split(',')
                    .map(|name| {
                        ServiceWorkload::from_name(name)
                            .ok_or_else(|| format!("unknown workload {name:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                options.only = Some(workloads);
            }
            "--replay" => {
                let file = args.next().ok_or("--replay needs a results file")?;
                options.replay = Some(file.into());
            }
            "--resume" => options.resume = true,
            "--merge" => {
                let value = args.next().ok_or("--merge needs results files")?;
                options.merge = Some(value.split(',').map(Into::into).collect());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    options.gate = gate.finish()?;
    if options.merge.is_some() && (options.replay.is_some() || options.only.is_some()) {
        return Err("--merge makes the whole sweep: give neither --replay nor --only".into());
    }
    if options.resume && (options.merge.is_some() || options.replay.is_some()) {
        return Err(
            "--resume runs what an interrupted sweep left: give neither --replay nor --merge"
                .into(),
        );
    }
    if options.against.is_some() && options.confirm == 0 {
        return Err(
            "--against names what the confirmation runs against: give --confirm PAIRS too".into(),
        );
    }
    Ok(if modes {
        Command::Modes(options)
    } else {
        Command::Tuning(options)
    })
}

/// Default rounds of the suite.
pub const SUITE_ROUNDS: usize = 7;
/// Rounds of the suite with `--quick`.
pub const SUITE_QUICK_ROUNDS: usize = 5;

/// Every part of the suite, in report order.
pub fn suite_parts() -> Vec<SuitePart> {
    let mut parts: Vec<SuitePart> = ServiceWorkload::ALL
        .into_iter()
        .filter(|&w| w != ServiceWorkload::TxPinned)
        .map(SuitePart::Workload)
        .collect();
    parts.push(SuitePart::Numa);
    parts.push(SuitePart::Callgrind);
    parts
}

/// The value of `--rounds`: a number of at least 1.
fn parse_rounds(value: Option<&String>) -> Result<usize, String> {
    let value = value.ok_or("--rounds needs a number")?;
    let n: usize = value
        .parse()
        .map_err(|_| format!("bad --rounds {value:?}"))?;
    if n == 0 {
        return Err("--rounds must be at least 1".into());
    }
    Ok(n)
}

/// The value of `--warmup` or `--seconds`: seconds, `0..3600`.
fn parse_seconds(flag: &str, value: Option<&String>) -> Result<f64, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a number of seconds"))?;
    let seconds: f64 = value.parse().map_err(|_| format!("bad {flag} {value:?}"))?;
    if !(0.0..3600.0).contains(&seconds) {
        return Err(format!("{flag} {seconds} is out of range"));
    }
    Ok(seconds)
}

fn parse_suite(args: &[String]) -> Result<Command, String> {
    let mut rounds = None;
    let mut warmup = None;
    let mut quick = false;
    let mut only: Option<Vec<SuitePart>> = None;
    let mut gate = GateFlags::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if gate.parse(arg, &mut args)? {
            continue;
        }
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--quick" => quick = true,
            "--rounds" => rounds = Some(parse_rounds(args.next())?),
            "--warmup" => warmup = Some(parse_seconds("--warmup", args.next())?),
            "--only" => {
                let value = args.next().ok_or("--only needs a part name")?;
                let mut wanted = Vec::new();
                for name in value.split(',') {
                    wanted.push(match name {
                        "numa" => SuitePart::Numa,
                        "callgrind" => SuitePart::Callgrind,
                        _ => ServiceWorkload::from_name(name)
                            .filter(|&w| w != ServiceWorkload::TxPinned)
                            .map(SuitePart::Workload)
                            .ok_or_else(|| format!("unknown suite part {name:?}"))?,
                    });
                }
                only = Some(wanted);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let default_rounds = if quick {
        SUITE_QUICK_ROUNDS
    } else {
        SUITE_ROUNDS
    };
    let partial = only.is_some();
    let parts = suite_parts()
        .into_iter()
        .filter(|p| only.as_ref().is_none_or(|only| only.contains(p)))
        .collect();
    Ok(Command::Suite(SuiteOptions {
        rounds: rounds.unwrap_or(default_rounds),
        quick,
        parts,
        partial,
        warmup,
        gate: gate.finish()?,
    }))
}

/// `--quiet-below NS` and `--quiet-wait S`, shared by the suite and the
/// sweeps.
#[derive(Default)]
struct GateFlags {
    below_ns: Option<f64>,
    wait: Option<f64>,
}

impl GateFlags {
    /// Takes `arg` (and its value from `rest`) if it is a gate flag.
    fn parse<'a>(
        &mut self,
        arg: &str,
        rest: &mut impl Iterator<Item = &'a String>,
    ) -> Result<bool, String> {
        match arg {
            "--quiet-below" => {
                let value = rest.next().ok_or("--quiet-below needs nanoseconds")?;
                let ns: f64 = value
                    .parse()
                    .map_err(|_| format!("bad --quiet-below {value:?}"))?;
                if !(10.0..=1_000_000.0).contains(&ns) {
                    return Err(format!(
                        "--quiet-below {ns} is out of range (10..=1000000 ns)"
                    ));
                }
                self.below_ns = Some(ns);
            }
            "--quiet-wait" => self.wait = Some(parse_seconds("--quiet-wait", rest.next())?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn finish(self) -> Result<Option<QuietGate>, String> {
        match (self.below_ns, self.wait) {
            (None, Some(_)) => Err("--quiet-wait needs --quiet-below".into()),
            (None, None) => Ok(None),
            (Some(below_ns), wait) => Ok(Some(QuietGate {
                below_ns,
                max_wait: std::time::Duration::from_secs_f64(wait.unwrap_or(DEFAULT_QUIET_WAIT_S)),
            })),
        }
    }
}

/// How long a gated run waits for a quiet probe, by default.
pub const DEFAULT_QUIET_WAIT_S: f64 = 120.0;

fn parse_report(args: &[String]) -> Result<Command, String> {
    let (mut results, mut readmes): (Option<std::path::PathBuf>, Option<Vec<_>>) = (None, None);
    let mut regions: Option<Vec<String>> = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--readme" => {
                let file = args.next().ok_or("--readme needs a file")?;
                readmes.get_or_insert_with(Vec::new).push(file.into());
            }
            "--no-readme" => readmes = Some(Vec::new()),
            "--region" => {
                let name = args.next().ok_or("--region needs a region name")?;
                regions.get_or_insert_with(Vec::new).push(name.clone());
            }
            other if other.starts_with('-') => return Err(format!("unknown argument {other:?}")),
            file if results.is_none() => results = Some(file.into()),
            other => return Err(format!("a second results file {other:?}")),
        }
    }
    Ok(Command::Report {
        results,
        readmes,
        regions,
    })
}

/// Default rounds of the comparison.
pub const DEFAULT_ROUNDS: usize = 9;
/// Default rounds with `--quick`.
pub const QUICK_ROUNDS: usize = 5;

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    match args.first().map(String::as_str) {
        Some("pairs") => {
            let [_, peer, n] = args else {
                return Err("pairs takes ALLOCATOR N".into());
            };
            let peer = Peer::from_name(peer)
                .ok_or_else(|| format!("unknown allocator {peer:?}; known: {}", peers::names()))?;
            let n = n.parse().map_err(|_| format!("bad count {n:?}"))?;
            Ok(Command::Pairs { peer, n })
        }
        Some("suite") => parse_suite(&args[1..]),
        Some("tuning") => parse_sweep(&args[1..], false),
        Some("modes") => parse_sweep(&args[1..], true),
        Some("report") => parse_report(&args[1..]),
        Some("handlers") => parse_handlers(&args[1..]),
        Some("callgrind") => match &args[1..] {
            [] => Ok(Command::Callgrind { quick: false }),
            [flag] if flag == "--quick" => Ok(Command::Callgrind { quick: true }),
            _ => Err("callgrind takes only --quick".into()),
        },
        _ => parse_run(args),
    }
}

fn parse_handlers(args: &[String]) -> Result<Command, String> {
    let (mut quick, mut snmalloc) = (false, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--snmalloc" => {
                let path = args.next().ok_or("--snmalloc needs a path")?;
                snmalloc = Some(std::path::PathBuf::from(path));
            }
            other => return Err(format!("handlers: unknown argument {other:?}")),
        }
    }
    Ok(Command::Handlers { quick, snmalloc })
}

fn parse_run(args: &[String]) -> Result<Command, String> {
    let mut rounds = None;
    let mut quick = false;
    let mut parts = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--quick" => quick = true,
            "--rounds" => rounds = Some(parse_rounds(args.next())?),
            "--only" => {
                let value = args.next().ok_or("--only needs a part name")?;
                parts = Some(parse_parts(value)?);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let default_rounds = if quick { QUICK_ROUNDS } else { DEFAULT_ROUNDS };
    Ok(Command::Run(RunOptions {
        rounds: rounds.unwrap_or(default_rounds),
        quick,
        parts: parts.unwrap_or_else(all_parts),
    }))
}

/// Every part, in report order.
fn all_parts() -> Vec<Part> {
    let mut parts: Vec<Part> = workloads::ALL.into_iter().map(Part::Timed).collect();
    parts.push(Part::Callgrind);
    parts
}

fn parse_parts(list: &str) -> Result<Vec<Part>, String> {
    let mut wanted = Vec::new();
    for name in list.split(',') {
        let part = if name == "callgrind" {
            Part::Callgrind
        } else {
            let workload = workloads::ALL
                .into_iter()
                .find(|w| w.name() == name)
                .ok_or_else(|| {
                    format!("unknown part {name:?}; known: pairs, fifo, prodcons, callgrind")
                })?;
            Part::Timed(workload)
        };
        wanted.push(part);
    }
    // Report order, whatever the order given.
    Ok(all_parts()
        .into_iter()
        .filter(|p| wanted.contains(p))
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_sweeps() {
        let Ok(Command::Modes(modes)) = parse(&args(&["modes", "--only", "larson,pairs"])) else {
            panic!("modes parses");
        };
        assert_eq!(modes.warmup, 2.0);
        assert_eq!(
            modes.only,
            Some(vec![ServiceWorkload::Larson, ServiceWorkload::Pairs])
        );
        let Ok(Command::Tuning(tuning)) = parse(&args(&["tuning", "--rounds", "2"])) else {
            panic!("tuning parses");
        };
        assert_eq!((tuning.rounds, tuning.warmup, tuning.only), (2, 8.0, None));
        assert_eq!(tuning.fixed_warmup, None);
        let Ok(Command::Tuning(tuning)) = parse(&args(&["tuning", "--fixed-warmup", "3"])) else {
            panic!("tuning parses with --fixed-warmup");
        };
        assert_eq!((tuning.warmup, tuning.fixed_warmup), (8.0, Some(3.0)));
        assert!(parse(&args(&["tuning", "--fixed-warmup"])).is_err());
        let Ok(Command::Tuning(tuning)) = parse(&args(&["tuning", "--confirm", "4"])) else {
            panic!("tuning parses with --confirm");
        };
        assert_eq!(tuning.confirm, 4);
        assert!(parse(&args(&["tuning", "--confirm", "x"])).is_err());
        assert!(parse(&args(&["modes", "--confirm", "4"])).is_err());
        let Ok(Command::Tuning(tuning)) = parse(&args(&[
            "tuning",
            "--confirm",
            "4",
            "--against",
            "fixed-256",
        ])) else {
            panic!("tuning parses with --against");
        };
        assert_eq!(tuning.against.as_deref(), Some("fixed-256"));
        assert!(parse(&args(&["tuning", "--against"])).is_err());
        // Without pairs to run it would do nothing: refused, not ignored.
        assert!(parse(&args(&["tuning", "--against", "fixed-256"])).is_err());
        assert!(parse(&args(&["modes", "--only", "nonesuch"])).is_err());
    }

    #[test]
    fn parses_handlers() {
        let Ok(Command::Handlers { quick, snmalloc }) = parse(&args(&[
            "handlers",
            "--quick",
            "--snmalloc",
            "/x/wl-snmalloc",
        ])) else {
            panic!("handlers parses");
        };
        assert!(quick);
        assert_eq!(snmalloc, Some(std::path::PathBuf::from("/x/wl-snmalloc")));
        assert!(parse(&args(&["handlers", "--snmalloc"])).is_err());
        assert!(parse(&args(&["handlers", "--nope"])).is_err());
    }

    #[test]
    fn parses_report() {
        let Ok(Command::Report {
            results,
            readmes,
            regions,
        }) = parse(&args(&[
            "report", "r.jsonl", "--readme", "a.md", "--readme", "b.md",
        ]))
        else {
            panic!("report parses");
        };
        assert_eq!(results, Some("r.jsonl".into()));
        assert_eq!(readmes, Some(vec!["a.md".into(), "b.md".into()]));
        assert_eq!(regions, None);
        let Ok(Command::Report {
            results,
            readmes,
            regions,
        }) = parse(&args(&["report", "--no-readme", "--region", "host-states"]))
        else {
            panic!("report --no-readme parses");
        };
        assert_eq!((results, readmes), (None, Some(vec![])));
        assert_eq!(regions, Some(vec!["host-states".to_owned()]));
        assert!(parse(&args(&["report", "--region"])).is_err());
        assert!(parse(&args(&["report", "a", "b"])).is_err());
    }

    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_suite() {
        let Ok(Command::Suite(all)) = parse(&args(&["suite", "--quick"])) else {
            panic!("suite --quick parses");
        };
        assert!(all.quick && !all.partial);
        assert_eq!(all.rounds, SUITE_QUICK_ROUNDS);
        assert_eq!(all.parts, suite_parts());
        assert!(!all
            .parts
            .contains(&SuitePart::Workload(ServiceWorkload::TxPinned)));
        let Ok(Command::Suite(some)) =
            parse(&args(&["suite", "--only", "numa,tcp-rr", "--rounds", "6"]))
        else {
            panic!("suite --only parses");
        };
        assert!(some.partial);
        assert_eq!(some.rounds, 6);
        assert_eq!(
            some.parts,
            vec![SuitePart::Workload(ServiceWorkload::TcpRr), SuitePart::Numa]
        );
        assert!(parse(&args(&["suite", "--only", "tx-pinned"])).is_err());
        let Ok(Command::Suite(old_names)) = parse(&args(&["suite", "--only", "churn-256,bursty"]))
        else {
            panic!("earlier churn names still parse");
        };
        assert_eq!(old_names.parts.len(), 2);
        assert!(parse(&args(&["suite", "--rounds", "0"])).is_err());
        assert_eq!(some.gate, None);
    }

    #[test]
    fn parses_the_quiet_gate() {
        let Ok(Command::Suite(gated)) = parse(&args(&["suite", "--quiet-below", "1000"])) else {
            panic!("suite --quiet-below parses");
        };
        let gate = gated.gate.expect("a gate");
        assert_eq!(gate.below_ns, 1000.0);
        assert_eq!(gate.max_wait.as_secs_f64(), DEFAULT_QUIET_WAIT_S);
        let Ok(Command::Modes(modes)) = parse(&args(&[
            "modes",
            "--quiet-wait",
            "30",
            "--quiet-below",
            "500",
            "--rounds",
            "2",
        ])) else {
            panic!("modes with a gate parses");
        };
        let gate = modes.gate.expect("a gate");
        assert_eq!((gate.below_ns, gate.max_wait.as_secs()), (500.0, 30));
        assert_eq!(modes.rounds, 2);
        for bad in [
            &["suite", "--quiet-wait", "30"][..],
            &["suite", "--quiet-below"],
            &["suite", "--quiet-below", "fast"],
            &["tuning", "--quiet-below", "0"],
            &["tuning", "--quiet-below", "500", "--quiet-wait", "-1"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} is refused");
        }
    }
}
