//! The `suite` subcommand: runs every allocator's `wl-*` binary on each
//! network-service workload, interleaved round by round (every allocator
//! once per round, in `peers::ALL` order), and writes the report and chart.

mod binaries;
mod chart;
mod jobs;
mod sections;
mod spawn;
mod table;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::service::{self, catalog::Workload};

use crate::options::{SuiteOptions, SuitePart};
use jobs::Job;

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
    for round in 1..=options.rounds {
        for job in &mut jobs {
            run_round(job, &binaries, round, options);
            eprintln!(
                "[{:.0} s] {}",
                started.elapsed().as_secs_f64(),
                progress_line(job, round, options.rounds)
            );
        }
    }
    if options.parts.contains(&SuitePart::Callgrind) {
        eprintln!("[{:.0} s] callgrind", started.elapsed().as_secs_f64());
    }
    let callgrind = options.parts.contains(&SuitePart::Callgrind).then(|| {
        let mut section = crate::callgrind_section(options.quick);
        if section.contains("| snmalloc | failed") {
            section.push_str(&snmalloc_valgrind_note());
        }
        section
    });
    let stem = file_stem(options);
    let chart_file = format!("{stem}.svg");
    let chart = chart::write(&results_dir().join(&chart_file), &jobs);
    match &chart {
        Ok(()) => eprintln!("wrote {}", results_dir().join(&chart_file).display()),
        Err(error) => notes.push(format!("Chart not written: {error}")),
    }
    let report = table::report(&table::Context {
        command: crate::command_line(),
        machine: &machine,
        options,
        jobs: &jobs,
        callgrind: callgrind.as_deref(),
        chart_file: chart.is_ok().then_some(chart_file.as_str()),
        notes: &notes,
        seconds: started.elapsed().as_secs_f64(),
    });
    print!("{report}");
    let path = results_dir().join(format!("{stem}.md"));
    match std::fs::create_dir_all(results_dir()).and_then(|()| std::fs::write(&path, &report)) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

/// snmalloc's count from the last `snmalloc-valgrind` build's section of
/// `results/latest.md`, if there is one.
fn snmalloc_valgrind_note() -> String {
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
fn results_dir() -> PathBuf {
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
/// order from round to round) once.
fn run_round(job: &mut Job, binaries: &[(Peer, PathBuf)], round: usize, options: &SuiteOptions) {
    let mut order: Vec<usize> = (0..job.variants.len()).collect();
    if round % 2 == 0 {
        order.reverse();
    }
    for (peer_index, (peer, binary)) in binaries.iter().enumerate() {
        for &v in &order {
            let variant = &job.variants[v];
            let mut args = vec![job.workload.name().to_owned()];
            if options.quick {
                args.push("--quick".into());
            }
            if let Some((a, b)) = variant.cpus {
                args.push("--cpus".into());
                args.push(format!("{a},{b}"));
            }
            let outcome = spawn::run(&spawn::Invocation {
                binary,
                args,
                numa_nodes: variant.numa_nodes,
                limit: time_limit(job.workload, options.quick),
            });
            if let Err(error) = &outcome {
                eprintln!("round {round}: {} failed: {error}", peer.name());
            }
            job.outcomes[v][peer_index].push(outcome);
        }
    }
}

/// The longest a run may take before it is killed.
fn time_limit(workload: Workload, quick: bool) -> Duration {
    let request = service::Request {
        workload,
        quick,
        seconds: None,
        cpus: None,
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
