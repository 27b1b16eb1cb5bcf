//! The markdown report: header, one table per part, per-round values.
//!
//! Ratios are "how many times better than the reference": for times and
//! instruction counts `reference / value`, for throughput
//! `value / reference`; above 1 is better. The "best peer" is the best
//! allocator other than sheafalloc on that part.

use std::fmt::Write as _;

use crate::callgrind::Counts;
use crate::machine::Machine;
use crate::options::RunOptions;
use crate::peers::{self, Peer};
use crate::summary::Samples;
use crate::workloads::{Scale, Workload};

/// The results of one timed workload: samples per allocator (`peers::ALL`
/// order) and, for producer/consumer, the round trips beside each round.
#[derive(Clone, Debug)]
pub struct TimedResult {
    /// The workload.
    pub workload: Workload,
    /// One `Samples` per allocator.
    pub samples: Vec<Samples>,
    /// Core-to-core round trip (ns) timed before and after each round's
    /// runs (producer/consumer only).
    pub round_trips: Vec<(f64, f64)>,
}

/// The report's title and context.
pub fn header(command: &str, machine: &Machine, options: &RunOptions, scale: &Scale) -> String {
    let mut out = String::new();
    let order = peers::ALL.map(Peer::name).join(" ");
    let _ = writeln!(out, "# sheafalloc-bench results\n");
    let _ = writeln!(out, "- Command: `{command}`");
    let commit = match crate::machine::source_commit() {
        Some((commit, true)) => format!("`{commit}` with uncommitted changes"),
        Some((commit, false)) => format!("`{commit}`"),
        None => "unknown (not a git tree)".into(),
    };
    let _ = writeln!(out, "- Commit: {commit}");
    let _ = writeln!(out, "- Machine: {}", machine.markdown());
    let _ = writeln!(
        out,
        "- Rounds: {} ({}), interleaved: each round runs every allocator in turn on each part, \
         the order rotated by one allocator per round (round 1: `{order}`)",
        options.rounds,
        if options.quick {
            "quick"
        } else {
            "default size"
        }
    );
    let _ = writeln!(
        out,
        "- Sizes per measurement: {} pairs; {} FIFO batches of 4096; {} producer/consumer objects",
        scale.pairs, scale.fifo_batches, scale.prodcons_objects
    );
    let _ = writeln!(
        out,
        "- Method: the bench's own global allocator is `System`; each allocator is called \
         directly through `GlobalAlloc` from code monomorphised per allocator (sheafalloc's \
         fast paths inlined; the C allocators are FFI calls), with LTO. Every object gets one \
         byte written. Ratios: above 1 means better than the reference (faster, or fewer \
         instructions); best peer = best allocator other than sheafalloc. Spread = (max - min) / median."
    );
    if crate::callgrind::SNMALLOC_VALGRIND {
        let _ = writeln!(
            out,
            "- **Warning**: built with `--features snmalloc-valgrind`; snmalloc's timings are \
             of its QEMU-workaround configuration, not its default one."
        );
    }
    out
}

/// Better-than factor of `value` against `reference`.
pub fn factor(value: f64, reference: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        value / reference
    } else {
        reference / value
    }
}

/// The best value among the peers (sheafalloc excluded).
pub fn best_peer(values: &[(Peer, f64)], higher_is_better: bool) -> f64 {
    let peers = values.iter().filter(|(p, v)| p.is_peer() && v.is_finite());
    let pick = |best: f64, &(_, v): &(Peer, f64)| {
        if (higher_is_better && v > best) || (!higher_is_better && v < best) {
            v
        } else {
            best
        }
    };
    let start = if higher_is_better {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    peers.fold(start, pick)
}

/// The section of one timed workload.
pub fn timed_section(result: &TimedResult) -> String {
    let w = result.workload;
    let hib = w.higher_is_better();
    let medians: Vec<(Peer, f64)> = peers::ALL
        .into_iter()
        .zip(&result.samples)
        .map(|(p, s)| (p, s.median()))
        .collect();
    let system = medians[peers::ALL
        .iter()
        .position(|&p| p == Peer::System)
        .unwrap_or(1)]
    .1;
    let best = best_peer(&medians, hib);
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", w.title());
    let better = if hib { "higher" } else { "lower" };
    let _ = writeln!(
        out,
        "| allocator | median {} ({better} is better) | min–max | spread | vs system | vs best peer |",
        w.unit()
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for ((peer, median), samples) in medians.iter().zip(&result.samples) {
        let _ = writeln!(
            out,
            "| {} | {median:.2} | {:.2}–{:.2} | {:.0}% | {:.2}× | {:.2}× |",
            bold_if_sheaf(*peer),
            samples.min(),
            samples.max(),
            samples.spread() * 100.0,
            factor(*median, system, hib),
            factor(*median, best, hib),
        );
    }
    out.push('\n');
    out.push_str(&rounds_table(result));
    out
}

/// The allocator's name, in bold for sheafalloc.
pub fn bold_if_sheaf(peer: Peer) -> String {
    if peer.is_peer() {
        peer.name().to_owned()
    } else {
        format!("**{}**", peer.name())
    }
}

/// Every round's values (and round trips, where timed).
fn rounds_table(result: &TimedResult) -> String {
    let mut out = String::new();
    let with_rtt = !result.round_trips.is_empty();
    let names = peers::ALL.map(Peer::name).join(" | ");
    let _ = write!(out, "Per round ({}):\n\n| round |", result.workload.unit());
    if with_rtt {
        out.push_str(" round trip ns before / after |");
    }
    let _ = writeln!(out, " {names} |");
    let _ = write!(out, "|---:|");
    if with_rtt {
        out.push_str("---:|");
    }
    let _ = writeln!(out, "{}", "---:|".repeat(peers::ALL.len()));
    let rounds = result.samples.first().map_or(0, |s| s.values().len());
    for round in 0..rounds {
        let _ = write!(out, "| {} |", round + 1);
        if let Some((before, after)) = result.round_trips.get(round) {
            let _ = write!(out, " {before:.0} / {after:.0} |");
        }
        for samples in &result.samples {
            let _ = write!(out, " {:.2} |", samples.values()[round]);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The callgrind section (`command` is the command line that ran it).
pub fn callgrind_section(counts: &Result<Counts, String>, command: &str) -> String {
    let mut out = String::new();
    let build = if crate::callgrind::SNMALLOC_VALGRIND {
        ", `snmalloc-valgrind` build"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "## Instructions per alloc+free pair (callgrind{build})\n"
    );
    let counts = match counts {
        Ok(counts) => counts,
        Err(error) => {
            let _ = writeln!(out, "Not measured: {error}\n");
            return out;
        }
    };
    let (n1, n2) = counts.n;
    let _ = writeln!(
        out,
        "`{command}`, {}: each allocator's `pairs` loop run under `valgrind --tool=callgrind` \
         for n1 = {n1} and n2 = {n2} pairs; per pair = (Ir(n2) - Ir(n1)) / (n2 - n1).\n",
        counts.valgrind
    );
    if crate::callgrind::SNMALLOC_VALGRIND {
        let _ = writeln!(
            out,
            "This binary was built with `--features snmalloc-valgrind`: snmalloc runs with its \
             QEMU workaround (128 KiB minimum chunks instead of 16 KiB) so that valgrind can \
             map its pagemap.\n"
        );
    }
    let per_pair: Vec<(Peer, f64)> = counts
        .rows
        .iter()
        .map(|(p, c)| (*p, c.as_ref().map_or(f64::NAN, |c| c.per_pair(counts.n))))
        .collect();
    let system = per_pair
        .iter()
        .find(|(p, _)| *p == Peer::System)
        .map_or(f64::NAN, |(_, v)| *v);
    let best = best_peer(&per_pair, false);
    let _ = writeln!(
        out,
        "| allocator | instructions per pair | Ir(n1) | Ir(n2) | vs system | vs best peer |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    let mut notes = String::new();
    for ((peer, count), (_, value)) in counts.rows.iter().zip(&per_pair) {
        match count {
            Ok(count) => {
                let _ = writeln!(
                    out,
                    "| {} | {value:.1} | {} | {} | {:.2}× | {:.2}× |",
                    bold_if_sheaf(*peer),
                    count.ir1,
                    count.ir2,
                    system / value,
                    best / value
                );
                for warning in &count.warnings {
                    let _ = writeln!(notes, "- {}: valgrind said `{warning}`", peer.name());
                }
            }
            Err(error) => {
                let _ = writeln!(out, "| {} | failed | | | | |", bold_if_sheaf(*peer));
                let _ = writeln!(notes, "- {} failed:\n\n```\n{error}\n```", peer.name());
            }
        }
    }
    out.push('\n');
    if !notes.is_empty() {
        let _ = writeln!(out, "{notes}");
    }
    out
}
