//! The command line: subcommands and flags.

use crate::peers::{self, Peer};
use crate::workloads::{self, Workload};

/// Usage text for `--help` and errors.
pub const USAGE: &str = "\
usage:
  sheafalloc-bench [--rounds N] [--quick] [--only PART[,PART...]]
      the comparison: every part, allocators interleaved round by round;
      PART is pairs, fifo, prodcons or callgrind (default: all)
  sheafalloc-bench callgrind [--quick]
      only the callgrind instruction counts (needs valgrind)
  sheafalloc-bench pairs ALLOCATOR N
      N alloc+free pairs with one allocator (what callgrind runs)

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
    /// The pairs loop alone, for callgrind.
    Pairs {
        /// The allocator.
        peer: Peer,
        /// Pairs to run.
        n: usize,
    },
    /// Print usage.
    Help,
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
        Some("callgrind") => match &args[1..] {
            [] => Ok(Command::Callgrind { quick: false }),
            [flag] if flag == "--quick" => Ok(Command::Callgrind { quick: true }),
            _ => Err("callgrind takes only --quick".into()),
        },
        _ => parse_run(args),
    }
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
            "--rounds" => {
                let value = args.next().ok_or("--rounds needs a number")?;
                let n: usize = value
                    .parse()
                    .map_err(|_| format!("bad --rounds {value:?}"))?;
                if n == 0 {
                    return Err("--rounds must be at least 1".into());
                }
                rounds = Some(n);
            }
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
