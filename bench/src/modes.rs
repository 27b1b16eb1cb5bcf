//! `sheafalloc-bench modes`: do per-CPU sheaves cost throughput? Runs
//! `wl-sheafalloc` as shipped (per-CPU sheaves where rseq works) and with
//! `SHEAFALLOC_PERCPU=off` (per-thread sheaves), interleaved and rotated
//! each round (`sweep.rs`), on the hand-off, larson, churn, the HTTP
//! service, single-thread pairs and the idle-threads memory case. The
//! report gives each mode's median, their ratio, the per-round paired
//! ratios, and checks that every run ran in the mode it was meant to.
//!
//! "Beyond noise" is decided, not eyeballed: a third configuration, the
//! control, runs per-thread sheaves again, and each round's per-CPU run
//! and the control's are each paired with that round's per-thread run. An
//! exact sign test on the pairs (`summary::paired_verdict`, 5 % level)
//! says whether per-CPU was slower (or faster) in more rounds than chance
//! gives; the control, identical to per-thread, shows what the same test
//! says of no difference at all on the host of the day.

use std::fmt::Write as _;

use sheafalloc_bench::service::catalog::Workload;

use sheafalloc_bench::summary::{paired_verdict, PairedVerdict};

use crate::options::SweepOptions;
use crate::sweep::{self, Config, Sweep, QUIET_RTT_FACTOR};

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

/// The mode each configuration must run in (what its records must say):
/// per-CPU, per-thread, and the control (per-thread again).
const EXPECTED: [&str; 3] = ["per-cpu", "per-thread", "per-thread"];
const PER_CPU: usize = 0;
const PER_THREAD: usize = 1;
const CONTROL: usize = 2;

fn configs() -> Vec<Config> {
    vec![
        Config::new("per-cpu", &[]),
        Config::new("per-thread", &[("SHEAFALLOC_PERCPU", "off")]),
        Config::new("per-thread-control", &[("SHEAFALLOC_PERCPU", "off")]),
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
         both runs were taken in one host state (round trips before and after each within \
         {QUIET_RTT_FACTOR}× of each other; how many in brackets). Verdict: an exact sign test on those \
         pairs at the 5 % level (wins–losses, p); `within noise` unless per-CPU lost (or won) \
         in more rounds than chance gives. The control runs per-thread sheaves again, and \
         the same test on its pairs with per-thread shows what it says of two identical \
         configurations.\n"
    );
    let _ = writeln!(out, "{}\n", sweep.left_out_note());
    let _ = writeln!(
        out,
        "| workload | unit | per-cpu | per-thread | per-cpu / per-thread | paired ratios | verdict | \
         control / per-thread | control's verdict | modes as expected |\n\
         |---|---|---:|---:|---:|---:|---|---:|---|---|"
    );
    for (w, workload) in sweep.workloads.iter().enumerate() {
        let show = |c: usize| {
            sweep.median(w, c).map_or_else(
                || "–".to_owned(),
                |v| format!("{v:.2}{}", sweep.marks(w, &[c])),
            )
        };
        let ratio = |c: usize| match (sweep.median(w, c), sweep.median(w, PER_THREAD)) {
            (Some(a), Some(b)) => {
                format!(
                    "{:.3}{}",
                    sweep.better(w, a, b),
                    sweep.marks(w, &[c, PER_THREAD])
                )
            }
            _ => "–".into(),
        };
        let mut paired = paired_with_per_thread(sweep, w, PER_CPU);
        paired.sort_by(f64::total_cmp);
        let spread = match (paired.first(), paired.last()) {
            (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2} ({})", paired.len()),
            _ => "no round with both quiet".into(),
        };
        let as_expected = sweep.results[w].iter().all(|o| {
            EXPECTED
                .get(o.config)
                .is_some_and(|&mode| o.record.get("sheaf_cache_mode") == Some(mode))
        });
        let control_ran = sweep.results[w].iter().any(|o| o.config == CONTROL);
        let control_verdict = if control_ran {
            verdict(&paired_with_per_thread(sweep, w, CONTROL))
        } else {
            "not run".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {spread} | {} | {} | {control_verdict} | {} |",
            workload.name(),
            workload.unit(),
            show(PER_CPU),
            show(PER_THREAD),
            ratio(PER_CPU),
            verdict(&paired),
            ratio(CONTROL),
            if as_expected { "yes" } else { "**no**" }
        );
    }
    out
}

/// Each round's ratio of configuration `config`'s run to the per-thread
/// run of the same round ([`Sweep::better`]: above 1 when `config` was
/// better), over the rounds in which both runs were taken in one host
/// state ([`Sweep::paired_runs`]).
fn paired_with_per_thread(sweep: &Sweep, w: usize, config: usize) -> Vec<f64> {
    let mut paired = sweep.paired_runs(w, config, PER_THREAD);
    paired.retain(|r| r.is_finite());
    paired
}

/// The sign test's verdict on `paired` ratios, for the report.
fn verdict(paired: &[f64]) -> String {
    let (verdict, wins, losses, p) = paired_verdict(paired);
    let word = match verdict {
        PairedVerdict::Better => "**better**",
        PairedVerdict::Worse => "**worse**",
        PairedVerdict::WithinNoise => "within noise",
    };
    format!("{word} ({wins}–{losses}, p {p:.2})")
}
