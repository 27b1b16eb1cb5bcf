//! The targets sheafalloc is held to, and whether a run met them.
//!
//! Every target compares sheafalloc with the best of the four peers
//! (glibc, mimalloc, jemalloc, snmalloc) on the same workload in the same
//! run: ratio = sheafalloc's median / the best peer's median (inverted for
//! times, so above 1 is always better). The HTTP service has a second
//! condition: sheafalloc's peak RSS at most 1.2× the smallest peak RSS of
//! any peer.

use std::fmt::Write as _;

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::service::catalog::Workload;

use super::jobs::Job;
use super::table::{medians, num};
use crate::report::factor;

/// One target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The workload.
    pub workload: Workload,
    /// The smallest acceptable ratio to the best peer.
    pub at_least: f64,
    /// Largest acceptable peak RSS relative to the leanest peer, if any.
    pub peak_rss_at_most: Option<f64>,
}

const fn target(workload: Workload, at_least: f64) -> Target {
    Target {
        workload,
        at_least,
        peak_rss_at_most: None,
    }
}

const fn http(workload: Workload) -> Target {
    Target {
        workload,
        at_least: 1.1,
        peak_rss_at_most: Some(1.2),
    }
}

/// The targets, in report order.
pub const TARGETS: [Target; 10] = [
    target(Workload::Handoff1to1, 1.5),
    target(Workload::Handoff4to4, 1.3),
    target(Workload::Bursty, 1.5),
    http(Workload::HttpOrders),
    http(Workload::HttpCatalog),
    target(Workload::Larson, 1.0),
    target(Workload::Pairs, 1.0),
    target(Workload::Fifo256, 1.0),
    target(Workload::Fifo2112, 1.0),
    // RSS growth with 256 idle threads: at most the best peer's (a ratio
    // of at least 1, lower being better).
    target(Workload::IdleThreads, 1.0),
];

/// The best peer's median of `key` and its name (lowest when
/// `higher_is_better` is false).
pub fn best_peer_of(job: &Job, key: &str, higher_is_better: bool) -> Option<(Peer, f64)> {
    medians(job, 0, key)
        .into_iter()
        .filter(|(p, v)| p.is_peer() && v.is_finite())
        .reduce(|best, next| {
            let better = if higher_is_better {
                next.1 > best.1
            } else {
                next.1 < best.1
            };
            if better {
                next
            } else {
                best
            }
        })
}

/// Per-round ratios of sheafalloc to the round's best peer (same round,
/// so the same quiet or busy period).
pub fn round_ratios(job: &Job) -> Vec<f64> {
    let hib = job.workload.higher_is_better();
    let rounds = job.outcomes[0].iter().map(Vec::len).max().unwrap_or(0);
    (0..rounds)
        .filter_map(|round| {
            let value = |peer: Peer| {
                job.outcomes[0][super::jobs::index(peer)]
                    .get(round)
                    .and_then(|o| o.as_ref().ok())
                    .map(|r| r.number("value"))
                    .filter(|v| v.is_finite())
            };
            let sheaf = value(Peer::Sheaf)?;
            let best = peers::ALL
                .into_iter()
                .filter(|p| p.is_peer())
                .filter_map(value)
                .reduce(|a, b| if hib == (b > a) { b } else { a })?;
            Some(factor(sheaf, best, hib))
        })
        .collect()
}

/// The targets table for the jobs that ran (targets whose workload did
/// not run are listed as not run).
pub fn section(jobs: &[Job]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Targets (sheafalloc vs the best peer, same run)\n");
    let _ = writeln!(
        out,
        "Ratio of medians, above 1 = sheafalloc better; per-round ratios compare \
         sheafalloc with that round's best peer.\n"
    );
    let _ = writeln!(
        out,
        "| workload | sheafalloc | best peer | ratio | per-round ratios | target | result | median round trip ns (all runs) |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---|---:|");
    for target in TARGETS {
        let w = target.workload;
        let Some(job) = jobs.iter().find(|j| !j.numa && j.workload == w) else {
            let _ = writeln!(
                out,
                "| {} | | | | | ≥ {:.1}× | not run | |",
                w.name(),
                target.at_least
            );
            continue;
        };
        let hib = w.higher_is_better();
        let sheaf = job.samples(0, Peer::Sheaf, "value").median();
        let Some((best, best_value)) = best_peer_of(job, "value", hib) else {
            let _ = writeln!(
                out,
                "| {} | {} | – | | | | no peer result | |",
                w.name(),
                num(sheaf)
            );
            continue;
        };
        let ratio = factor(sheaf, best_value, hib);
        let per_round = round_ratios(job);
        let range = if per_round.is_empty() {
            "–".to_owned()
        } else {
            let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{lo:.2}–{hi:.2}")
        };
        let rtt = all_round_trips(job);
        let _ = writeln!(
            out,
            "| {} | {} {} | {} {} | {ratio:.2}× | {range} | ≥ {:.1}× | {} | {} |",
            w.name(),
            num(sheaf),
            w.unit(),
            best.name(),
            num(best_value),
            target.at_least,
            verdict(ratio >= target.at_least),
            if rtt.is_finite() {
                format!("{rtt:.0}")
            } else {
                "–".into()
            },
        );
        if let Some(limit) = target.peak_rss_at_most {
            let sheaf_rss = job.samples(0, Peer::Sheaf, "peak_rss_mib").median();
            if let Some((leanest, leanest_rss)) = best_peer_of(job, "peak_rss_mib", false) {
                let relative = sheaf_rss / leanest_rss;
                let _ = writeln!(
                    out,
                    "| {} peak RSS | {} MiB | {} {} MiB | {relative:.2}× of it | | ≤ {limit:.1}× | {} | |",
                    w.name(),
                    num(sheaf_rss),
                    leanest.name(),
                    num(leanest_rss),
                    verdict(relative <= limit),
                );
            }
        }
    }
    out.push('\n');
    out
}

/// The median round trip over every run of the job (all allocators).
fn all_round_trips(job: &Job) -> f64 {
    let mut all = sheafalloc_bench::summary::Samples::default();
    for peer in peers::ALL {
        for value in job.samples(0, peer, "rtt_ns").values() {
            all.push(*value);
        }
    }
    all.median()
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**missed**"
    }
}
