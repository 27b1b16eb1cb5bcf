//! Cross-thread runs grouped by the host's state during each run.
//!
//! A 2-vCPU virtual machine's core-to-core round trip (`rtt_ns`, the worse
//! of the probes before and after a run) falls into three bands, and each
//! band orders the allocators differently:
//!
//! * **close**, at most 150 ns: both vCPUs running, sharing a core's caches
//!   (the ~70 ns state of the AMD host);
//! * **apart**, 150 ns to 1 µs: both running, on cores farther apart
//!   (~400–500 ns; ~200 ns on the Intel host);
//! * **taking turns**, above 1 µs: one physical CPU for both, each round
//!   trip a scheduler switch (5–12 µs); a producer then fills the ring
//!   before its consumer runs, and an allocator that reuses an object on
//!   the same CPU gains.
//!
//! Medians over all runs mix the bands in proportions the host chose; this
//! table compares allocators only within one band.

use std::fmt::Write as _;

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::summary::Samples;

use super::jobs::Job;
use super::table::num;
use crate::report::factor;

/// The bands, by upper bound in ns (inclusive) and name.
pub const BANDS: [(f64, &str); 3] = [
    (150.0, "close (≤ 150 ns)"),
    (1000.0, "apart (150 ns – 1 µs)"),
    (f64::INFINITY, "taking turns (> 1 µs)"),
];

/// The band of a round trip; `None` when there is none.
pub fn band(rtt_ns: f64) -> Option<usize> {
    if !rtt_ns.is_finite() || rtt_ns <= 0.0 {
        return None;
    }
    BANDS.iter().position(|&(upper, _)| rtt_ns <= upper)
}

/// The values of `peer`'s runs of `job` (first variant) in band `b`.
fn in_band(job: &Job, peer: Peer, b: usize) -> Samples {
    let mut samples = Samples::default();
    for record in job.records(0, peer) {
        let value = record.number("value");
        if value.is_finite() && band(record.number("rtt_ns")) == Some(b) {
            samples.push(value);
        }
    }
    samples
}

/// sheafalloc against the best peer within one band, among the peers
/// that had a run in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Versus {
    /// sheafalloc's median over the best peer's (above 1: better).
    pub ratio: f64,
    /// The best peer that ran in the band.
    pub best: Peer,
    /// The peers without a run in the band (any of them might be better).
    pub missing: Vec<Peer>,
}

/// `None` unless sheafalloc and at least one peer had a run in band `b`.
pub fn versus_best(job: &Job, b: usize) -> Option<Versus> {
    let hib = job.workload.higher_is_better();
    let sheaf = in_band(job, Peer::Sheaf, b).median();
    if !sheaf.is_finite() {
        return None;
    }
    let mut best: Option<(Peer, f64)> = None;
    let mut missing = Vec::new();
    for peer in peers::ALL.into_iter().filter(|&p| p != Peer::Sheaf) {
        let value = in_band(job, peer, b).median();
        if !value.is_finite() {
            missing.push(peer);
            continue;
        }
        let better = match best {
            None => true,
            Some((_, b)) if hib => value > b,
            Some((_, b)) => value < b,
        };
        if better {
            best = Some((peer, value));
        }
    }
    best.map(|(peer, value)| Versus {
        ratio: factor(sheaf, value, hib),
        best: peer,
        missing,
    })
}

/// The table (no heading), or `None` if no cross-thread job has a run
/// with a round trip.
pub fn table(jobs: &[Job]) -> Option<String> {
    let names = peers::ALL.map(Peer::name).join(" | ");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | host state | {names} | sheafalloc vs best peer in this state |"
    );
    let _ = writeln!(out, "|---|---|{}---:|", "---:|".repeat(peers::ALL.len()));
    let mut rows = 0;
    for job in jobs.iter().filter(|j| !j.numa && j.workload.cross_thread()) {
        for (b, &(_, name)) in BANDS.iter().enumerate() {
            let cells: Vec<Samples> = peers::ALL.map(|p| in_band(job, p, b)).to_vec();
            if cells.iter().all(|s| s.values().is_empty()) {
                continue;
            }
            let _ = write!(out, "| {} | {name} |", job.workload.name());
            for samples in &cells {
                let cell = match samples.values().len() {
                    0 => "–".to_owned(),
                    n => format!("{} ({n})", num(samples.median())),
                };
                let _ = write!(out, " {cell} |");
            }
            let versus = versus_best(job, b).map_or_else(
                || "–".to_owned(),
                |v| {
                    let mut cell = format!("{:.2}× ({})", v.ratio, v.best.name());
                    if !v.missing.is_empty() {
                        let names: Vec<&str> = v.missing.iter().map(|p| p.name()).collect();
                        cell.push_str(&format!("; no run of {}", names.join(", ")));
                    }
                    cell
                },
            );
            let _ = writeln!(out, " {versus} |");
            rows += 1;
        }
    }
    (rows > 0).then_some(out)
}

/// The report's section: heading, what the bands mean, the table.
pub fn section(jobs: &[Job]) -> String {
    let Some(table) = table(jobs) else {
        return String::new();
    };
    format!(
        "## Cross-thread runs by host state\n\n\
         Each run falls in a band by its round trip (the worse of its two probes); medians \
         within the band, runs in brackets. Close: both vCPUs running and sharing a core's \
         caches; apart: both running, farther apart; taking turns: one physical CPU for both, \
         which favours allocators that reuse an object on the CPU that freed it. The ratio is \
         against the best peer that ran in the band; peers without a run there are named.\n\n{table}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sheafalloc_bench::record::Record;
    use sheafalloc_bench::service::catalog::Workload;

    fn job(runs: &[(Peer, f64, f64)]) -> Job {
        let mut job = Job::plain(Workload::Handoff1to1);
        for &(peer, value, rtt) in runs {
            let line = format!("result workload=handoff-1to1 value={value} rtt_ns={rtt}");
            job.outcomes[0][super::super::jobs::index(peer)]
                .push(Ok(Record::parse_line(&line).expect("a result line")));
        }
        job
    }

    #[test]
    fn bands_split_at_150_ns_and_1_us() {
        assert_eq!(band(66.0), Some(0));
        assert_eq!(band(150.0), Some(0));
        assert_eq!(band(151.0), Some(1));
        assert_eq!(band(1000.0), Some(1));
        assert_eq!(band(9875.0), Some(2));
        assert_eq!(band(f64::NAN), None);
    }

    #[test]
    fn compares_within_a_band_only() {
        // Taking turns, mimalloc is fastest; close, sheafalloc is.
        let job = job(&[
            (Peer::Sheaf, 13.0, 71.0),
            (Peer::Sheaf, 3.5, 9700.0),
            (Peer::System, 1.0, 75.0),
            (Peer::System, 1.2, 9800.0),
            (Peer::Mimalloc, 10.0, 72.0),
            (Peer::Mimalloc, 11.0, 9900.0),
            (Peer::Jemalloc, 5.0, 90.0),
            (Peer::Jemalloc, 2.0, 9600.0),
            (Peer::Snmalloc, 9.0, 65.0),
            (Peer::Snmalloc, 4.0, 10300.0),
        ]);
        let close = versus_best(&job, 0).expect("every allocator ran close");
        assert_eq!((close.best, close.missing.len()), (Peer::Mimalloc, 0));
        assert!((close.ratio - 1.3).abs() < 1e-9);
        let turns = versus_best(&job, 2).expect("every allocator took turns");
        assert_eq!(turns.best, Peer::Mimalloc);
        assert!((turns.ratio - 3.5 / 11.0).abs() < 1e-9);
        // Nobody ran apart: no ratio, and no row.
        assert_eq!(versus_best(&job, 1), None);
        let table = table(std::slice::from_ref(&job)).expect("a table");
        assert_eq!(
            table.lines().count(),
            4,
            "header, rule, two bands:\n{table}"
        );
        assert!(table.contains("| handoff-1to1 | close (≤ 150 ns) | 13.00 (1) |"));
    }

    #[test]
    fn a_band_names_the_peers_that_did_not_run_in_it() {
        let job = job(&[
            (Peer::Sheaf, 13.0, 71.0),
            (Peer::Mimalloc, 10.0, 72.0),
            (Peer::Snmalloc, 20.0, 9000.0),
        ]);
        let close = versus_best(&job, 0).expect("sheafalloc and mimalloc ran close");
        assert_eq!(close.best, Peer::Mimalloc);
        assert_eq!(
            close.missing,
            vec![Peer::System, Peer::Jemalloc, Peer::Snmalloc]
        );
        // Taking turns only snmalloc ran: nothing to compare.
        assert_eq!(versus_best(&job, 2), None);
        let text = table(std::slice::from_ref(&job)).expect("a table");
        assert!(text.contains(
            "| 10.00 (1) | – | – | 1.30× (mimalloc); no run of system, jemalloc, snmalloc |"
        ));
        assert!(text.contains("| – | – | – | – | 20.00 (1) | – |"));
        assert!(table(&[Job::plain(Workload::Pairs)]).is_none());
    }
}
