//! The suite's markdown report: summary, one section per workload, memory,
//! NUMA, sheafalloc's counters, callgrind.

use std::fmt::Write as _;

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::service::catalog::Workload;

use super::jobs::Job;
use super::sections;
use crate::machine::Machine;
use crate::options::SuiteOptions;
use crate::report::{best_peer, bold_if_sheaf, factor};

/// Everything the report shows.
pub struct Context<'a> {
    /// The command line.
    pub command: String,
    /// Where it ran.
    pub machine: &'a Machine,
    /// The options.
    pub options: &'a SuiteOptions,
    /// The jobs and their outcomes.
    pub jobs: &'a [Job],
    /// The callgrind section, if counted.
    pub callgrind: Option<&'a str>,
    /// The chart's file name (same folder), if written.
    pub chart_file: Option<&'a str>,
    /// Remarks (skipped parts, chart errors).
    pub notes: &'a [String],
    /// Seconds the whole run took.
    pub seconds: f64,
}

/// The whole report.
pub fn report(cx: &Context<'_>) -> String {
    let mut out = header(cx);
    let plain: Vec<&Job> = cx.jobs.iter().filter(|j| !j.numa).collect();
    if !plain.is_empty() {
        out.push_str(&summary(&plain));
    }
    if let Some(chart) = cx.chart_file {
        let _ = writeln!(out, "![throughput relative to system]({chart})\n");
    }
    for job in &plain {
        if job.workload == Workload::Memory {
            out.push_str(&sections::memory(job));
        } else {
            out.push_str(&detail(job));
        }
    }
    for job in cx.jobs.iter().filter(|j| j.numa) {
        out.push_str(&sections::numa(job));
    }
    out.push_str(&sections::counters(cx.jobs));
    if let Some(callgrind) = cx.callgrind {
        out.push_str(callgrind);
        out.push('\n');
    }
    let failures: Vec<&String> = cx.jobs.iter().flat_map(Job::failures).collect();
    if !failures.is_empty() || !cx.notes.is_empty() {
        let _ = writeln!(out, "## Notes and failed runs\n");
        for line in cx.notes.iter().chain(failures) {
            let _ = writeln!(out, "- {line}");
        }
        out.push('\n');
    }
    let _ = writeln!(out, "Whole run: {:.0} s.", cx.seconds);
    out
}

fn header(cx: &Context<'_>) -> String {
    let mut out = String::new();
    let order = peers::ALL.map(Peer::name).join(" ");
    let _ = writeln!(out, "# sheafalloc network-service suite\n");
    let _ = writeln!(out, "- Command: `{}`", cx.command);
    let _ = writeln!(out, "- Machine: {}", cx.machine.markdown());
    let _ = writeln!(
        out,
        "- Rounds: {} ({}); each round runs `{order}` in turn on each workload, one fresh \
         process per run. Measured window per run: {} s ({} s for tcp-rr) after a warm-up.",
        cx.options.rounds,
        if cx.options.quick { "quick" } else { "full" },
        if cx.options.quick { "0.1" } else { "1" },
        if cx.options.quick { "1" } else { "3" },
    );
    let _ = writeln!(
        out,
        "- Method: each allocator is the `#[global_allocator]` of its own binary \
         (`wl-sheafalloc`, `wl-system`, ...; release profile, fat LTO), so std, tokio and \
         the sockets allocate through it. Values are medians over rounds; spread = \
         (max - min) / median; ratios above 1 mean better than the reference; best peer = \
         best allocator other than sheafalloc. Round trip = two threads ping-ponging an \
         atomic, timed in the same process just before a cross-thread run: on a \
         virtual machine it shows how far apart the host placed the vCPUs during that \
         run, which moves cross-thread throughput by 2-5x."
    );
    let jemalloc_debug = cx
        .jobs
        .iter()
        .flat_map(|job| job.records(0, Peer::Jemalloc))
        .find_map(|r| r.get("jemalloc_config_debug"))
        .unwrap_or("not read");
    let _ = writeln!(
        out,
        "- Peer builds: `debug = 0` for the C allocators' crates (root `Cargo.toml`), no \
         debug feature enabled; jemalloc's `config.debug` at run time: {jemalloc_debug}."
    );
    out.push('\n');
    out
}

/// A number with a precision that suits its size.
pub(super) fn num(value: f64) -> String {
    if !value.is_finite() {
        "–".into()
    } else if value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else if value.abs() >= 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Medians of `value` per peer, in `peers::ALL` order.
pub(super) fn medians(job: &Job, variant: usize, key: &str) -> Vec<(Peer, f64)> {
    peers::ALL
        .into_iter()
        .map(|p| (p, job.samples(variant, p, key).median()))
        .collect()
}

fn system_of(values: &[(Peer, f64)]) -> f64 {
    values
        .iter()
        .find(|(p, _)| *p == Peer::System)
        .map_or(f64::NAN, |(_, v)| *v)
}

fn summary(jobs: &[&Job]) -> String {
    let mut out = String::new();
    let names = peers::ALL.map(Peer::name).join(" | ");
    let _ = writeln!(out, "## Summary (medians)\n");
    let _ = writeln!(
        out,
        "| workload | unit | {names} | sheafalloc vs system | sheafalloc vs best peer |"
    );
    let _ = writeln!(
        out,
        "|---|---|{}---:|---:|",
        "---:|".repeat(peers::ALL.len())
    );
    for job in jobs {
        let w = job.workload;
        let values = medians(job, 0, "value");
        let hib = w.higher_is_better();
        let (system, best) = (system_of(&values), best_peer(&values, hib));
        let sheaf = values[0].1;
        let unit = if w == Workload::Memory {
            "MiB RSS after free (lower is better)"
        } else {
            w.unit()
        };
        let _ = write!(out, "| {} | {unit} |", w.name());
        for (_, value) in &values {
            let _ = write!(out, " {} |", num(*value));
        }
        let _ = writeln!(
            out,
            " {:.2}× | {:.2}× |",
            factor(sheaf, system, hib),
            factor(sheaf, best, hib)
        );
    }
    out.push('\n');
    out
}

/// One workload: medians, spreads, ratios, then every round.
fn detail(job: &Job) -> String {
    let w = job.workload;
    let hib = w.higher_is_better();
    let values = medians(job, 0, "value");
    let (system, best) = (system_of(&values), best_peer(&values, hib));
    let mut out = String::new();
    let _ = writeln!(out, "## {}: {} ({})\n", w.name(), w.title(), w.unit());
    let _ = writeln!(
        out,
        "| allocator | median | min–max | spread | vs system | vs best peer |{}",
        if w.cross_thread() {
            " median round trip ns |"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|{}",
        if w.cross_thread() { "---:|" } else { "" }
    );
    for (peer, median) in &values {
        let samples = job.samples(0, *peer, "value");
        let _ = write!(
            out,
            "| {} | {} | {}–{} | {:.0}% | {:.2}× | {:.2}× |",
            bold_if_sheaf(*peer),
            num(*median),
            num(samples.min()),
            num(samples.max()),
            samples.spread() * 100.0,
            factor(*median, system, hib),
            factor(*median, best, hib),
        );
        if w.cross_thread() {
            let _ = write!(out, " {:.0} |", job.samples(0, *peer, "rtt_ns").median());
        }
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&rounds(job, 0));
    out
}

/// Every round's value (with its round trip, for cross-thread workloads).
pub(super) fn rounds(job: &Job, variant: usize) -> String {
    let mut out = String::new();
    let rtt = job.workload.cross_thread();
    let names = peers::ALL.map(Peer::name).join(" | ");
    let _ = writeln!(
        out,
        "Per round{}:\n\n| round | {names} |",
        if rtt { " (value / round trip ns)" } else { "" }
    );
    let _ = writeln!(out, "|---:|{}", "---:|".repeat(peers::ALL.len()));
    let rounds = job.outcomes[variant]
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    for round in 0..rounds {
        let _ = write!(out, "| {} |", round + 1);
        for runs in &job.outcomes[variant] {
            let cell = match runs.get(round) {
                Some(Ok(r)) if rtt => {
                    format!("{} / {:.0}", num(r.number("value")), r.number("rtt_ns"))
                }
                Some(Ok(r)) => num(r.number("value")),
                Some(Err(_)) => "failed".into(),
                None => String::new(),
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Medians of `value` relative to system, per plain throughput job (for
/// the chart): `(workload name, [ratio per peer])`.
pub fn ratios_vs_system(jobs: &[Job]) -> Vec<(&'static str, Vec<f64>)> {
    jobs.iter()
        .filter(|j| !j.numa && j.workload.higher_is_better())
        .map(|job| {
            let values = medians(job, 0, "value");
            let system = system_of(&values);
            (
                job.workload.name(),
                values.iter().map(|(_, v)| v / system).collect(),
            )
        })
        .collect()
}
