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
use crate::sweep::{quiet_limit, QUIET_RTT_FACTOR};
use sheafalloc_bench::summary::Samples;

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

/// The medians of the *quiet* runs of a cross-thread job: those whose
/// round trip (the worse of the probes before and after the run) was at
/// most [`QUIET_RTT_FACTOR`]× the quietest run of any allocator in the
/// job, i.e. runs taken while the two vCPUs ran at once. `None` for a
/// job without round trips.
pub struct Quiet {
    /// The round trip a run may have to count as quiet.
    pub limit_ns: f64,
    /// sheafalloc's median and number of quiet runs (`None`: it had none).
    pub sheaf: Option<(f64, usize)>,
    /// The best peer by its quiet runs' median, with that median and the
    /// number of its quiet runs; or, if some peers had no quiet run (so
    /// the best of them is unknown and there is no quiet ratio), those.
    pub best: Result<(Peer, f64, usize), Vec<Peer>>,
}

impl Quiet {
    pub fn of(job: &Job) -> Option<Self> {
        let limit_ns = quiet_limit(
            peers::ALL
                .into_iter()
                .flat_map(|peer| job.records(0, peer).map(|r| r.number("rtt_ns"))),
        );
        if !limit_ns.is_finite() {
            return None;
        }
        let median = |peer: Peer| {
            let mut samples = Samples::default();
            for record in job.records(0, peer) {
                let (value, rtt) = (record.number("value"), record.number("rtt_ns"));
                if value.is_finite() && rtt <= limit_ns {
                    samples.push(value);
                }
            }
            let n = samples.values().len();
            (n > 0).then(|| (samples.median(), n))
        };
        let hib = job.workload.higher_is_better();
        let (quiet, missing): (Vec<_>, Vec<_>) = peers::ALL
            .into_iter()
            .filter(|p| p.is_peer())
            .map(|p| (p, median(p)))
            .partition(|(_, m)| m.is_some());
        let best = if missing.is_empty() {
            quiet
                .into_iter()
                .filter_map(|(p, m)| m.map(|(v, n)| (p, v, n)))
                .reduce(|a, b| if hib == (b.1 > a.1) { b } else { a })
                .ok_or_else(Vec::new)
        } else {
            Err(missing.into_iter().map(|(p, _)| p).collect())
        };
        Some(Self {
            limit_ns,
            sheaf: median(Peer::Sheaf),
            best,
        })
    }

    /// The table cell: the ratio and how many runs each side kept.
    fn cell(&self, hib: bool) -> String {
        match (self.sheaf, &self.best) {
            (_, Err(missing)) => {
                let names: Vec<&str> = missing.iter().map(|p| p.name()).collect();
                format!(
                    "no quiet run of {} (≤ {:.0} ns)",
                    names.join(", "),
                    self.limit_ns
                )
            }
            (None, Ok(_)) => format!("no quiet run of sheafalloc (≤ {:.0} ns)", self.limit_ns),
            (Some((sheaf, n)), Ok((peer, best, m))) => format!(
                "{:.2}× ({n} vs {} {m}, ≤ {:.0} ns)",
                factor(sheaf, *best, hib),
                peer.name(),
                self.limit_ns
            ),
        }
    }
}

/// The targets table for the jobs that ran (targets whose workload did
/// not run are listed as not run).
pub fn section(jobs: &[Job]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Targets (sheafalloc vs the best peer, same run)\n");
    let _ = writeln!(
        out,
        "Ratio of medians, above 1 = sheafalloc better; per-round ratios compare \
         sheafalloc with that round's best peer. The result is judged on every run; \
         \"quiet runs only\" repeats the ratio over the runs of each allocator whose \
         round trip (the worse of the probes before and after the run) was at most \
         {QUIET_RTT_FACTOR}× the quietest run of the workload, i.e. taken while the two \
         vCPUs ran at once, with how many runs each side kept.\n"
    );
    let _ = writeln!(
        out,
        "| workload | sheafalloc | best peer | ratio | per-round ratios | target | result | median round trip ns (all runs) | quiet runs only |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---|---:|---|");
    for target in TARGETS {
        let w = target.workload;
        let Some(job) = jobs.iter().find(|j| !j.numa && j.workload == w) else {
            let _ = writeln!(
                out,
                "| {} | | | | | ≥ {:.1}× | not run | | |",
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
                "| {} | {} | – | | | | no peer result | | |",
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
        let quiet = Quiet::of(job).map_or_else(|| "–".to_owned(), |q| q.cell(hib));
        let _ = writeln!(
            out,
            "| {} | {} {} | {} {} | {ratio:.2}× | {range} | ≥ {:.1}× | {} | {} | {quiet} |",
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
                    "| {} peak RSS | {} MiB | {} {} MiB | {relative:.2}× of it | | ≤ {limit:.1}× | {} | | |",
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

#[cfg(test)]
mod tests {
    use super::*;
    use sheafalloc_bench::record::Record;

    fn run(value: f64, rtt: f64) -> Result<Record, String> {
        let line = format!("result workload=handoff-1to1 value={value} rtt_ns={rtt}");
        Ok(Record::parse_line(&line).expect("a result line"))
    }

    fn job(runs: &[(Peer, f64, f64)]) -> Job {
        let mut job = Job::plain(Workload::Handoff1to1);
        for &(peer, value, rtt) in runs {
            job.outcomes[0][super::super::jobs::index(peer)].push(run(value, rtt));
        }
        job
    }

    #[test]
    fn quiet_runs_are_those_near_the_quietest_round_trip() {
        let job = job(&[
            (Peer::Sheaf, 3.0, 450.0),
            (Peer::Sheaf, 10.0, 80.0),
            (Peer::Sheaf, 12.0, 100.0),
            (Peer::Mimalloc, 9.0, 75.0),
            (Peer::Mimalloc, 2.0, 12000.0),
            (Peer::Snmalloc, 8.0, 150.0),
            (Peer::Jemalloc, 20.0, 9000.0),
            (Peer::Jemalloc, 7.0, 120.0),
            (Peer::System, 1.0, 140.0),
        ]);
        let quiet = Quiet::of(&job).expect("the job has round trips");
        assert_eq!(quiet.limit_ns, 150.0);
        assert_eq!(quiet.sheaf, Some((11.0, 2)));
        // jemalloc's fast run was taken with the vCPUs apart: not quiet.
        assert_eq!(quiet.best, Ok((Peer::Mimalloc, 9.0, 1)));
        assert!(quiet.cell(true).starts_with("1.22× (2 vs mimalloc 1"));
    }

    #[test]
    fn a_side_without_a_quiet_run_is_named() {
        let few = job(&[(Peer::Sheaf, 3.0, 450.0), (Peer::Mimalloc, 9.0, 75.0)]);
        let quiet = Quiet::of(&few).expect("the job has round trips");
        assert_eq!(quiet.sheaf, None);
        // Three peers never ran: their best is unknown, so no ratio.
        assert_eq!(
            quiet.best,
            Err(vec![Peer::System, Peer::Jemalloc, Peer::Snmalloc])
        );
        assert!(quiet
            .cell(true)
            .starts_with("no quiet run of system, jemalloc, snmalloc"));
        let all = job(&[
            (Peer::Sheaf, 3.0, 450.0),
            (Peer::Mimalloc, 9.0, 75.0),
            (Peer::Jemalloc, 9.0, 75.0),
            (Peer::Snmalloc, 9.0, 75.0),
            (Peer::System, 9.0, 75.0),
        ]);
        let quiet = Quiet::of(&all).expect("the job has round trips");
        assert!(quiet.cell(true).starts_with("no quiet run of sheafalloc"));
        let no_rtt = Job::plain(Workload::Pairs);
        assert!(Quiet::of(&no_rtt).is_none());
    }
}
