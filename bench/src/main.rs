//! `sheafalloc-bench`: compares sheafalloc with the system allocator,
//! mimalloc, jemalloc and snmalloc in one run, allocators interleaved round
//! by round, and reports medians, spreads and ratios (see `options::USAGE`).
//!
//! Build and run with the workspace's release profile (fat LTO):
//! `cargo run --release -p sheafalloc-bench -- --quick`.

mod callgrind;
mod counters;
mod handlers;
mod machine;
mod modes;
mod options;
mod quiet_gate;
mod report;
mod results_file;
mod suite;
mod sweep;
mod sweep_merge;
mod sweep_resume;
mod tuning;
mod workloads;

use sheafalloc_bench::{peers, summary};

use std::time::Instant;

use options::{Command, Part, RunOptions};
use peers::Peer;
use report::TimedResult;
use summary::Samples;
use workloads::{pingpong, Scale, Workload};

/// Tag of the callgrind section in the results file (a build with the
/// `snmalloc-valgrind` feature keeps its counts in a section of its own).
const CALLGRIND_TAG: &str = if callgrind::SNMALLOC_VALGRIND {
    "callgrind-snmalloc-valgrind"
} else {
    "callgrind"
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match options::parse(&args) {
        Ok(command) => command,
        Err(error) => {
            eprintln!("sheafalloc-bench: {error}\n\n{}", options::USAGE);
            std::process::exit(2);
        }
    };
    match command {
        Command::Help => println!("{}", options::USAGE),
        Command::Pairs { peer, n } => {
            let ns = Workload::Pairs.measure(
                peer,
                &Scale {
                    pairs: n,
                    ..Scale::WARMUP
                },
            );
            println!("{} {n} pairs: {ns:.2} ns/pair", peer.name());
        }
        Command::Callgrind { quick } => {
            let section = callgrind_section(quick);
            print!("{section}");
            results_file::save_section(CALLGRIND_TAG, &section);
        }
        Command::Handlers { quick, snmalloc } => handlers::run(quick, snmalloc),
        Command::Run(options) => run(&options),
        Command::Suite(options) => suite::run(&options),
        Command::Tuning(options) => tuning::run(&options),
        Command::Modes(options) => modes::run(&options),
        Command::Report {
            results,
            readmes,
            regions,
        } => report_command(results, readmes, regions),
    }
}

/// `sheafalloc-bench report`: regenerates a results file's report and the
/// README tables.
fn report_command(
    results: Option<std::path::PathBuf>,
    readmes: Option<Vec<std::path::PathBuf>>,
    regions: Option<Vec<String>>,
) {
    let dir = suite::results_dir();
    let results = results.unwrap_or_else(|| {
        let full = dir.join("suite.jsonl");
        if full.is_file() {
            full
        } else {
            dir.join("suite-quick.jsonl")
        }
    });
    let readmes = readmes.unwrap_or_else(|| {
        vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/README.md"
        ))]
    });
    eprintln!("report from {}", results.display());
    let request = suite::regenerate::Request {
        results,
        readmes,
        regions,
        print: false,
    };
    if let Err(error) = suite::regenerate::run(&request) {
        eprintln!("sheafalloc-bench report: {error}");
        std::process::exit(1);
    }
}

/// The command line as typed (program path included).
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Counts instructions under callgrind and formats the section.
fn callgrind_section(quick: bool) -> String {
    let n = if quick {
        callgrind::QUICK
    } else {
        callgrind::FULL
    };
    let counts = callgrind::measure_all(n);
    report::callgrind_section(&counts, &command_line())
}

/// The comparison run.
fn run(options: &RunOptions) {
    let started = Instant::now();
    let scale = if options.quick {
        Scale::QUICK
    } else {
        Scale::FULL
    };
    let machine = machine::describe();
    eprintln!("machine: {}", machine.markdown());
    let timed: Vec<Workload> = workloads::ALL
        .into_iter()
        .filter(|&w| options.runs(w))
        .collect();

    eprintln!("warm-up");
    for &workload in &timed {
        for peer in peers::ALL {
            workload.measure(peer, &Scale::WARMUP);
        }
    }

    let mut results: Vec<TimedResult> = timed
        .iter()
        .map(|&workload| TimedResult {
            workload,
            samples: vec![Samples::default(); peers::ALL.len()],
            round_trips: Vec::new(),
        })
        .collect();
    for round in 1..=options.rounds {
        for result in &mut results {
            run_round(result, round, options.rounds, &scale);
        }
    }

    let mut report = report::header(&command_line(), &machine, options, &scale);
    for result in &results {
        report.push('\n');
        report.push_str(&report::timed_section(result));
    }
    if options.parts.contains(&Part::Callgrind) {
        report.push('\n');
        let section = callgrind_section(options.quick);
        report.push_str(&results_file::tagged(CALLGRIND_TAG, &section));
    }
    if !timed.is_empty() {
        report.push('\n');
        report.push_str(&counters::section());
    }
    report.push_str(&format!(
        "\nWhole run: {:.0} s.\n",
        started.elapsed().as_secs_f64()
    ));
    print!("{report}");
    results_file::save_whole(&report);
}

/// One round of one workload: every allocator once, in the round's order
/// (`peers::ALL` rotated by one allocator per round).
fn run_round(result: &mut TimedResult, round: usize, rounds: usize, scale: &Scale) {
    let workload = result.workload;
    let with_rtt = workload == Workload::ProdCons;
    let before = if with_rtt {
        pingpong::round_trip_ns(scale.pingpong_batches)
    } else {
        f64::NAN
    };
    let mut line = format!("round {round}/{rounds} {}:", workload.name());
    let mut values = [f64::NAN; peers::ALL.len()];
    for peer in peers::round_order(round) {
        let value = workload.measure(peer, scale);
        let index = peers::ALL.iter().position(|&p| p == peer).unwrap_or(0);
        values[index] = value;
        line.push_str(&format!(" {} {value:.2}", short(peer)));
    }
    for (samples, value) in result.samples.iter_mut().zip(values) {
        samples.push(value);
    }
    line.push_str(&format!(" {}", workload.unit()));
    if with_rtt {
        let after = pingpong::round_trip_ns(scale.pingpong_batches);
        result.round_trips.push((before, after));
        line.push_str(&format!("; round trip {before:.0}/{after:.0} ns"));
    }
    eprintln!("{line}");
}

/// A short name for progress lines and round orders.
pub fn short(peer: Peer) -> &'static str {
    match peer {
        Peer::Sheaf => "sheaf",
        Peer::System => "sys",
        Peer::Mimalloc => "mi",
        Peer::Jemalloc => "je",
        Peer::Snmalloc => "sn",
    }
}
