//! The report generator (`sheafalloc-bench report`): reads a results file
//! and writes the markdown report and chart beside it, and the generated
//! regions of the READMEs. The suite calls it at the end of every run, so
//! what a run prints is exactly what the file regenerates.

use std::path::{Path, PathBuf};

use super::results_log::{self, Results};
use super::{chart, host_states, readme, table, targets};
use crate::report;

/// What to regenerate.
#[derive(Clone, Debug)]
pub struct Request {
    /// The results file (`*.jsonl`).
    pub results: PathBuf,
    /// READMEs whose generated regions to replace.
    pub readmes: Vec<PathBuf>,
    /// Only these regions (`None`: every one).
    pub regions: Option<Vec<String>>,
    /// Print the report on stdout.
    pub print: bool,
}

/// Regenerates; errors if the results file cannot be read.
pub fn run(request: &Request) -> Result<(), String> {
    let results = results_log::read(&request.results)?;
    let source = file_name(&request.results);
    let stem = request.results.with_extension("");
    let chart_path = stem.with_extension("svg");
    let chart = chart::write(&chart_path, &results.jobs);
    let mut notes = Vec::new();
    match &chart {
        Ok(()) => eprintln!("wrote {}", chart_path.display()),
        Err(error) => notes.push(format!("Chart not written: {error}")),
    }
    let callgrind = results.callgrind.as_ref().map(|(command, counts)| {
        let mut section = report::callgrind_section(counts, command);
        if section.contains("| snmalloc | failed") {
            section.push_str(&super::snmalloc_valgrind_note());
        }
        section
    });
    let chart_file = file_name(&chart_path);
    let mut results_with_notes = results.clone();
    results_with_notes.notes.extend(notes);
    let markdown = table::report(&table::Context {
        results: &results_with_notes,
        callgrind: callgrind.as_deref(),
        chart_file: chart.is_ok().then_some(chart_file.as_str()),
        source: &source,
    });
    if request.print {
        print!("{markdown}");
    }
    let markdown_path = stem.with_extension("md");
    std::fs::write(&markdown_path, &markdown)
        .map_err(|e| format!("{}: {e}", markdown_path.display()))?;
    eprintln!("wrote {}", markdown_path.display());
    let mut regions = readme_regions(&results, &source, &file_name(&markdown_path));
    if let Some(only) = &request.regions {
        for name in only {
            if !regions.iter().any(|(n, _)| n == name) {
                return Err(format!("no generated region {name:?}"));
            }
        }
        regions.retain(|(name, _)| only.iter().any(|o| o == name));
    }
    for path in &request.readmes {
        match readme::update(path, &regions) {
            Ok(names) if names.is_empty() => {
                eprintln!("{}: no generated regions", path.display());
            }
            Ok(names) => eprintln!("updated {} ({})", path.display(), names.join(", ")),
            Err(error) => eprintln!("could not update {error}"),
        }
    }
    Ok(())
}

/// The README regions: where the figures come from, the targets, the
/// summary.
fn readme_regions(
    results: &Results,
    source: &str,
    report_file: &str,
) -> Vec<(&'static str, String)> {
    let h = &results.header;
    let commit = h.commit.as_deref().map_or("unknown".to_owned(), |c| {
        let short = &c[..c.len().min(12)];
        if h.dirty {
            format!("`{short}` (with uncommitted changes)")
        } else {
            format!("`{short}`")
        }
    });
    let provenance = format!(
        "From `bench/results/{source}` (full tables and every round: `bench/results/{report_file}`): \
         commit {commit}, {} rounds ({}), {} with {} vCPUs, kernel {}, load average {} at the \
         start. {}",
        h.rounds,
        if h.quick { "quick" } else { "full" },
        h.machine.cpu,
        h.machine.cpus,
        h.machine.kernel,
        h.load_average,
        round_trip_regime(results),
    );
    let plain: Vec<&super::jobs::Job> = results.jobs.iter().filter(|j| !j.numa).collect();
    let strip_heading = |text: String| {
        text.lines()
            .skip_while(|l| !l.starts_with('|'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let host_states = host_states::table(&results.jobs).map(|table| {
        format!(
            "From `bench/results/{source}` (every round: `bench/results/{report_file}`): commit \
             {commit}, {} rounds, `{}`; medians within each host state, runs in brackets.\n\n{table}",
            h.rounds, h.command
        )
    });
    let mut regions = vec![
        ("provenance", provenance),
        ("targets", strip_heading(targets::section(&results.jobs))),
        ("summary", strip_heading(table::summary(&plain))),
    ];
    // Without a cross-thread run there is no table, and a README keeps
    // the one it has.
    regions.extend(host_states.map(|table| ("host-states", table)));
    regions
}

/// What the cross-thread runs' round trips say about the host during the
/// run, in one sentence.
fn round_trip_regime(results: &Results) -> String {
    let mut all = sheafalloc_bench::summary::Samples::default();
    for job in &results.jobs {
        for variant in 0..job.variants.len() {
            for peer in sheafalloc_bench::peers::ALL {
                for value in job.samples(variant, peer, "rtt_ns").values() {
                    all.push(*value);
                }
            }
        }
    }
    let median = all.median();
    if !median.is_finite() {
        return String::new();
    }
    let fast = all.values().iter().filter(|&&v| v < 1000.0).count();
    let regime = if median < 1000.0 {
        "the threads mostly ran on two vCPUs at once"
    } else {
        "the threads mostly took turns on one vCPU: a busy host, not a quiet period, so \
         cross-thread figures favour batching and are not final"
    };
    format!(
        "Core-to-core round trip over the {} cross-thread runs: median {median:.0} ns, \
         {fast} under 1 µs ({regime}).",
        all.values().len()
    )
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
