//! Resuming an interrupted sweep (`--resume`): a full `tuning` sweep takes
//! about two hours, and a host shut down near its end should not cost the
//! whole of it.
//!
//! The results file already holds every run that ended (each is written
//! as it ends), so resuming reads it back, checks that it was made by the
//! same command on the same engine, and runs only what is missing: the
//! sweep's loops go through the same rounds, configurations and
//! confirmation pairs in the same order, and take a recorded run wherever
//! one exists instead of running it again. The file keeps its runs; its
//! header's provenance gains a note of where the sweep was resumed, so
//! the report says the runs were not all taken in one sitting.
//!
//! Refused, with the reason: a file made by another command line (other
//! rounds, warm-ups, gate or workloads), or at a commit whose code differs
//! from the checkout's, committed or not (documents, results and this
//! driver's own modules may differ: they are not built into the workload
//! binaries). A last line cut off mid-write (the process
//! killed while writing it) is dropped, and the run it was is run again.

use std::path::Path;

use crate::sweep::{self, Config, Outcome, Sweep};

/// What a resumed sweep starts from.
pub struct Resumed {
    /// The runs already recorded, per workload (main rounds, then the
    /// confirmation's), taken out one by one as the loops reach them.
    pub sweep: Sweep,
    /// The header's provenance with the resumption noted.
    pub provenance: String,
    /// The header line and the recorded runs, to write back before the
    /// new runs are appended.
    pub text: String,
}

/// Reads the interrupted sweep at `path` and checks it may be resumed by
/// `command` (the command line as the provenance quotes it) on
/// `workloads` at commit `commit`.
pub fn prepare(
    path: &Path,
    command: &str,
    workloads: &[String],
    configs: Vec<Config>,
) -> Result<Resumed, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (text, torn) = drop_torn_line(&text);
    if torn {
        eprintln!(
            "{}: the last line was cut off mid-write; its run will be run again",
            path.display()
        );
        std::fs::write(path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let (header, _) = sweep::read_results(path)?;
    let recorded = header["provenance"].as_str().unwrap_or_default();
    check_command(recorded, command)?;
    let listed: Vec<String> = header["workloads"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if listed != workloads {
        return Err(format!(
            "{}: its workloads are {}, this sweep's are {}",
            path.display(),
            listed.join(","),
            workloads.join(",")
        ));
    }
    let commit = recorded_commit(recorded)
        .ok_or_else(|| format!("{}: the provenance names no commit", path.display()))?;
    check_same_code(commit)?;
    let sweep = sweep::load(path, configs)?;
    let runs: usize = sweep
        .results
        .iter()
        .chain(&sweep.confirmations)
        .map(Vec::len)
        .sum();
    let now = crate::machine::commit_label();
    let provenance = format!(
        "{recorded}; interrupted after {runs} runs and resumed at commit {now} on {}",
        crate::machine::describe().markdown()
    );
    Ok(Resumed {
        sweep,
        provenance,
        text,
    })
}

/// `text` without a last line that has no line end (a write cut off), and
/// whether there was one.
fn drop_torn_line(text: &str) -> (String, bool) {
    if text.is_empty() || text.ends_with('\n') {
        return (text.to_owned(), false);
    }
    let kept = text.rfind('\n').map_or("", |end| &text[..=end]);
    (kept.to_owned(), true)
}

/// Whether the recorded provenance was made by `command` (it starts with
/// the command line in backquotes).
fn check_command(recorded: &str, command: &str) -> Result<(), String> {
    let quoted = format!("`{command}`;");
    if recorded.starts_with(&quoted) {
        return Ok(());
    }
    let theirs = recorded.split('`').nth(1).unwrap_or("an unknown command");
    Err(format!(
        "the results file was made by `{theirs}`, not `{command}`: resume with the same options"
    ))
}

/// The commit a provenance names (`...; commit HASH; ...`).
fn recorded_commit(provenance: &str) -> Option<&str> {
    let (_, rest) = provenance.split_once("; commit ")?;
    rest.split([';', ' ']).next().filter(|c| !c.is_empty())
}

/// Refuses unless what the benchmark runs is `commit`'s: no change since
/// it, committed or not, outside documents, results and this driver's own
/// modules ([`crate::machine::code_changed_since`]).
fn check_same_code(commit: &str) -> Result<(), String> {
    if crate::machine::code_changed_since(commit)? {
        return Err(format!(
            "the results were taken at commit {commit}, and the code the workloads run has \
             changed since: start the sweep again"
        ));
    }
    Ok(())
}

/// Takes the recorded run of configuration `config` in round `round` out
/// of `recorded` (one workload's runs of one stage), if there is one.
pub fn take(recorded: &mut Vec<Outcome>, round: usize, config: usize) -> Option<Outcome> {
    let at = recorded
        .iter()
        .position(|o| o.round == round && o.config == config)?;
    Some(recorded.remove(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sheafalloc_bench::record::Record;

    #[test]
    fn a_line_cut_off_mid_write_is_dropped_and_a_whole_file_kept() {
        let whole = "{\"kind\":\"header\"}\n{\"round\":1}\n";
        assert_eq!(drop_torn_line(whole), (whole.to_owned(), false));
        let torn = format!("{whole}{{\"round\":2,\"wor");
        assert_eq!(drop_torn_line(&torn), (whole.to_owned(), true));
        assert_eq!(drop_torn_line("{\"kind\""), (String::new(), true));
    }

    #[test]
    fn only_the_same_command_line_may_resume() {
        let recorded = "`sheafalloc-bench tuning --rounds 3 --warmup 8 --seconds 2`; \
                        commit 5b53783bb190af09e91cd55e67e58bdaeaf414d4; AMD EPYC";
        assert!(check_command(
            recorded,
            "sheafalloc-bench tuning --rounds 3 --warmup 8 --seconds 2"
        )
        .is_ok());
        let error = check_command(
            recorded,
            "sheafalloc-bench tuning --rounds 5 --warmup 8 --seconds 2",
        )
        .unwrap_err();
        assert!(
            error.contains("--rounds 3") && error.contains("--rounds 5"),
            "{error}"
        );
        // A prefix of the recorded command is another command.
        assert!(check_command(recorded, "sheafalloc-bench tuning --rounds 3").is_err());
        assert_eq!(
            recorded_commit(recorded),
            Some("5b53783bb190af09e91cd55e67e58bdaeaf414d4")
        );
        assert_eq!(
            recorded_commit("`x`; commit abc (with uncommitted changes); m"),
            Some("abc")
        );
        assert_eq!(recorded_commit("`x`; no commit here"), None);
    }

    #[test]
    fn a_recorded_run_is_taken_once_and_only_for_its_round_and_configuration() {
        let run = |round, config| Outcome {
            round,
            config,
            value: 1.0,
            record: Record::parse_line("result value=1").expect("a result line"),
        };
        let mut recorded = vec![run(1, 0), run(1, 1), run(2, 0)];
        assert!(take(&mut recorded, 2, 1).is_none());
        let taken = take(&mut recorded, 1, 1).expect("round 1, configuration 1 was recorded");
        assert_eq!((taken.round, taken.config), (1, 1));
        assert!(take(&mut recorded, 1, 1).is_none(), "taken twice");
        assert_eq!(recorded.len(), 2);
    }
}
