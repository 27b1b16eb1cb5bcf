//! The `suite` subcommand: runs every allocator's `wl-*` binary on each
//! network-service workload, interleaved round by round (every allocator
//! once per round, the order rotated by one allocator each round), logs
//! every run to a results file as it goes, and then makes the report from
//! that file (`regenerate`), as `sheafalloc-bench report` does.

pub(crate) mod binaries;
mod chart;
mod host_states;
mod jobs;
pub mod readme;
pub mod regenerate;
mod results_log;
mod sections;
pub(crate) mod spawn;
mod table;
mod targets;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::service::{self, catalog::Workload};

use crate::options::{SuiteOptions, SuitePart};
use crate::quiet_gate::ThisMachine;
use jobs::Job;
use results_log::{At, Header, Writer};

/// Runs the suite as `options` say; progress on stderr, report on stdout
/// and under `bench/results/`.
pub fn run(options: &SuiteOptions) {
    let started = Instant::now();
    let binaries = match binaries::locate() {
        Ok(binaries) => binaries,
        Err(error) => {
            eprintln!("sheafalloc-bench suite: {error}");
            std::process::exit(1);
        }
    };
    let machine = crate::machine::describe();
    eprintln!("machine: {}", machine.markdown());
    let mut notes = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    for part in &options.parts {
        match *part {
            SuitePart::Workload(workload) => jobs.push(Job::plain(workload)),
            SuitePart::Numa if machine.cpus >= 2 => jobs.push(Job::numa((0, machine.cpus - 1))),
            SuitePart::Numa => notes.push("NUMA comparison skipped: it needs two CPUs.".into()),
            SuitePart::Callgrind => {}
        }
    }
    if jobs.iter().any(|j| j.workload.is_http()) {
        if let Err(error) = service::http::wrk::check_installed() {
            eprintln!("sheafalloc-bench suite: {error}");
            std::process::exit(1);
        }
    }
    let (commit, dirty) =
        crate::machine::source_commit().map_or((None, false), |(c, d)| (Some(c), d));
    let header = Header {
        format: results_log::FORMAT,
        command: crate::command_line(),
        commit,
        dirty,
        started_unix: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        machine,
        load_average: crate::machine::load_average(),
        quick: options.quick,
        rounds: options.rounds,
        partial: options.partial,
    };
    let path = results_dir().join(format!("{}.jsonl", file_stem(options)));
    let mut log = match Writer::create(&path, &header) {
        Ok(log) => log,
        Err(error) => {
            eprintln!("sheafalloc-bench suite: {error}");
            std::process::exit(1);
        }
    };
    for (index, job) in jobs.iter().enumerate() {
        log.job(index, job);
    }
    for round in 1..=options.rounds {
        for (index, job) in jobs.iter_mut().enumerate() {
            run_round(job, index, &binaries, round, options, &mut log);
            eprintln!(
                "[{:.0} s] {}",
                started.elapsed().as_secs_f64(),
                progress_line(job, round, options.rounds)
            );
        }
    }
    if options.parts.contains(&SuitePart::Callgrind) {
        eprintln!("[{:.0} s] callgrind", started.elapsed().as_secs_f64());
        let n = if options.quick {
            crate::callgrind::QUICK
        } else {
            crate::callgrind::FULL
        };
        log.callgrind(&crate::command_line(), &crate::callgrind::measure_all(n));
    }
    log.end(started.elapsed().as_secs_f64(), &notes);
    let request = regenerate::Request {
        results: log.path().to_owned(),
        readmes: Vec::new(),
        regions: None,
        print: true,
    };
    if let Err(error) = regenerate::run(&request) {
        eprintln!("sheafalloc-bench suite: {error}");
        std::process::exit(1);
    }
    eprintln!(
        "results in {}; `sheafalloc-bench report {}` regenerates the report and the README tables",
        log.path().display(),
        log.path().display()
    );
}

/// snmalloc's count from the last `snmalloc-valgrind` build's section of
/// `results/latest.md`, if there is one.
pub(super) fn snmalloc_valgrind_note() -> String {
    let tag = "callgrind-snmalloc-valgrind";
    let row = crate::results_file::section(tag).and_then(|section| {
        section
            .lines()
            .find(|line| line.starts_with("| snmalloc |"))
            .map(str::to_owned)
    });
    match row {
        Some(row) => format!(
            "snmalloc counted by a `--features snmalloc-valgrind` build (its QEMU workaround), \
             from `results/latest.md`:\n\n| allocator | instructions per pair | Ir(n1) | Ir(n2) | \
             vs system | vs best peer |\n|---|---:|---:|---:|---:|---:|\n{row}\n\n"
        ),
        None => {
            "No `snmalloc-valgrind` count in `results/latest.md` yet (see bench/README.md).\n\n"
                .into()
        }
    }
}

/// `bench/results/`.
pub fn results_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/results"))
}

/// `suite`, `suite-quick` or `suite-partial`.
fn file_stem(options: &SuiteOptions) -> &'static str {
    match (options.partial, options.quick) {
        (true, _) => "suite-partial",
        (false, true) => "suite-quick",
        (false, false) => "suite",
    }
}

/// One round of one job: every allocator (each variant, alternating their
/// order from round to round) once, in the round's order.
fn run_round(
    job: &mut Job,
    job_index: usize,
    binaries: &[(Peer, PathBuf)],
    round: usize,
    options: &SuiteOptions,
    log: &mut Writer,
) {
    let mut variants: Vec<usize> = (0..job.variants.len()).collect();
    if round % 2 == 0 {
        variants.reverse();
    }
    for (slot, peer) in peers::round_order(round).into_iter().enumerate() {
        let Some((_, binary)) = binaries.iter().find(|(p, _)| *p == peer) else {
            continue;
        };
        for &v in &variants {
            let variant = &job.variants[v];
            let mut args = vec![job.workload.name().to_owned()];
            if options.quick {
                args.push("--quick".into());
            }
            if let Some(warmup) = options.warmup {
                args.push("--warmup".into());
                args.push(warmup.to_string());
            }
            if let Some((a, b)) = variant.cpus {
                args.push("--cpus".into());
                args.push(format!("{a},{b}"));
            }
            let invocation = spawn::Invocation {
                binary,
                args,
                numa_nodes: variant.numa_nodes,
                env: Vec::new(),
                limit: time_limit(job.workload, options.quick)
                    + Duration::from_secs_f64(options.warmup.unwrap_or(0.0)),
            };
            let mut outcome = match options.gate {
                Some(gate) if job.workload.cross_thread() => {
                    gate.run(&mut ThisMachine::new(), || spawn::run(&invocation))
                }
                _ => spawn::run(&invocation),
            };
            if let Err(error) = &outcome {
                eprintln!("round {round}: {} failed: {error}", peer.name());
            }
            log.outcome(
                At {
                    job: job_index,
                    variant: v,
                    round,
                    slot,
                },
                peer,
                &outcome,
            );
            if let Ok(record) = &mut outcome {
                record.set("round", round).set("slot", slot);
            }
            job.outcomes[v][jobs::index(peer)].push(outcome);
        }
    }
}

/// The longest a run may take before it is killed.
fn time_limit(workload: Workload, quick: bool) -> Duration {
    let request = service::Request {
        workload,
        quick,
        seconds: None,
        warmup: None,
        cpus: None,
        calls: None,
    };
    let budget = request.budget();
    Duration::from_secs_f64(budget.warmup + budget.seconds + 60.0)
}

/// `round 2/5 tx-1to1: sheaf 12.31 sys 4.52 ... Mobj/s; round trip ns 85 90 ...`
fn progress_line(job: &Job, round: usize, rounds: usize) -> String {
    let mut line = format!("round {round}/{rounds} {}:", job.name());
    let last = |v: usize, peer: Peer, key: &str| {
        job.outcomes[v][jobs::index(peer)]
            .last()
            .and_then(|o| o.as_ref().ok())
            .map_or(f64::NAN, |r| r.number(key))
    };
    for (v, variant) in job.variants.iter().enumerate() {
        if !variant.label.is_empty() {
            line.push_str(&format!(" [{}]", variant.label));
        }
        for peer in peers::ALL {
            line.push_str(&format!(
                " {} {:.2}",
                crate::short(peer),
                last(v, peer, "value")
            ));
        }
    }
    line.push_str(&format!(" {}", job.workload.unit()));
    if job.workload.cross_thread() {
        line.push_str("; round trip ns");
        for v in 0..job.variants.len() {
            for peer in peers::ALL {
                line.push_str(&format!(" {:.0}", last(v, peer, "rtt_ns")));
            }
        }
    }
    line
}
