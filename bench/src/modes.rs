//! `sheafalloc-bench modes`: do per-CPU sheaves cost throughput? Runs
//! `wl-sheafalloc` as shipped (per-CPU sheaves where rseq works) and with
//! `SHEAFALLOC_PERCPU=off` (per-thread sheaves), interleaved and rotated
//! each round (`sweep.rs`), on the hand-off, larson, churn, the HTTP
//! service, single-thread pairs and the idle-threads memory case. The
//! report gives each mode's median, their ratio, the per-round paired
//! ratios (the spread is the noise), and checks that every run ran in the
//! mode it was meant to.

use std::fmt::Write as _;

use sheafalloc_bench::service::catalog::Workload;

use crate::options::SweepOptions;
use crate::sweep::{self, Config, Sweep};

const DEFAULT_WORKLOADS: [Workload; 10] = [
    Workload::Handoff1to1,
    Workload::Handoff4to4,
    Workload::Bursty,
    Workload::Larson,
    Workload::Churn {
        size: 256,
        burst: 100,
    },
    Workload::Churn {
        size: 2112,
        burst: 100,
    },
    Workload::HttpOrders,
    Workload::HttpCatalog,
    Workload::Pairs,
    Workload::IdleThreads,
];

/// The mode each configuration must run in (what its records must say).
const EXPECTED: [&str; 2] = ["per-cpu", "per-thread"];

fn configs() -> Vec<Config> {
    vec![
        Config::new("per-cpu", &[]),
        Config::new("per-thread", &[("SHEAFALLOC_PERCPU", "off")]),
    ]
}

/// Runs the comparison; progress on stderr, report on stdout and in
/// `bench/results/modes.md`.
pub fn run(options: &SweepOptions) {
    let sweep = sweep::run_or_replay("modes", options, configs(), &DEFAULT_WORKLOADS, &|_, _| {
        None
    });
    sweep::save("modes", &sweep, &report(&sweep));
}

fn report(sweep: &Sweep) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Per-CPU against per-thread sheaves\n");
    let _ = writeln!(out, "{}.\n", sweep.provenance);
    let _ = writeln!(
        out,
        "Medians over rounds; `per-cpu / per-thread` above 1 means per-CPU is better \
         (for time and memory units the ratio is inverted). Paired ratios: each round's \
         per-CPU run against the per-thread run of the same round, over the rounds in which \
         both runs were quiet (how many in brackets).\n"
    );
    let _ = writeln!(out, "{}\n", sweep.left_out_note());
    let _ = writeln!(
        out,
        "| workload | unit | per-cpu | per-thread | per-cpu / per-thread | paired ratios | modes as expected |\n\
         |---|---|---:|---:|---:|---:|---|"
    );
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let (cpu, thread) = (sweep.median(w, 0), sweep.median(w, 1));
        let show = |v: Option<f64>, c: usize| {
            v.map_or_else(
                || "–".to_owned(),
                |v| format!("{v:.2}{}", sweep.marks(w, &[c])),
            )
        };
        let ratio = match (cpu, thread) {
            (Some(a), Some(b)) => {
                format!("{:.3}{}", sweep.better(w, a, b), sweep.marks(w, &[0, 1]))
            }
            _ => "–".into(),
        };
        let outcomes = &sweep.results[w];
        let mut paired: Vec<f64> = outcomes
            .iter()
            .filter(|o| o.config == 0 && sweep.is_quiet(w, o))
            .filter_map(|a| {
                let b = outcomes
                    .iter()
                    .find(|b| b.config == 1 && b.round == a.round && sweep.is_quiet(w, b))?;
                Some(sweep.better(w, a.value, b.value))
            })
            .filter(|r| r.is_finite())
            .collect();
        paired.sort_by(f64::total_cmp);
        let spread = match (paired.first(), paired.last()) {
            (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2} ({})", paired.len()),
            _ => "no round with both quiet".into(),
        };
        let as_expected = outcomes
            .iter()
            .all(|o| o.record.get("sheaf_cache_mode") == Some(EXPECTED[o.config]));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {ratio} | {spread} | {} |",
            workload.name(),
            workload.unit(),
            show(cpu, 0),
            show(thread, 1),
            if as_expected { "yes" } else { "**no**" }
        );
    }
    out
}
