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
/// `workloads` with the checkout's code.
pub fn prepare(
    path: &Path,
    command: &str,
    workloads: &[String],
    configs: Vec<Config>,
) -> Result<Resumed, String> {
    prepare_with(path, command, workloads, configs, check_same_code)
}

/// [`prepare`], with `same_code` to say whether the checkout's code is the
/// recorded commit's.
fn prepare_with(
    path: &Path,
    command: &str,
    workloads: &[String],
    configs: Vec<Config>,
    mut same_code: impl FnMut(&str) -> Result<(), String>,
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
    let (header, _) = sweep::parse_results(path, &text)?;
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
    same_code(commit)?;
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

    /// A results file as `sweep::run` writes it: the header, then `runs`.
    fn results_file(name: &str, command: &str, runs: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("{name}-{}.jsonl", std::process::id()));
        let header = serde_json::json!({
            "kind": "header",
            "stem": "tuning",
            "provenance": format!("`{command}`; commit abc123; a machine"),
            "workloads": ["handoff-1to1"],
        });
        std::fs::write(&path, format!("{header}\n{runs}")).expect("a temporary file");
        path
    }

    fn run_line(round: usize, config: &str, value: f64) -> String {
        let line = format!("result workload=handoff-1to1 value={value}");
        format!(
            "{}\n",
            serde_json::json!({"round": round, "workload": "handoff-1to1", "config": config, "line": line})
        )
    }

    fn configs() -> Vec<Config> {
        vec![Config::new("auto", &[]), Config::new("fixed-64", &[])]
    }

    #[test]
    fn a_file_cut_off_mid_run_resumes_with_its_whole_runs_and_loses_the_torn_one() {
        let command = "sheafalloc-bench tuning --rounds 2";
        let runs = format!(
            "{}{}{{\"round\":2,\"workload\":\"handoff-1",
            run_line(1, "auto", 20.0),
            run_line(1, "fixed-64", 18.0)
        );
        let path = results_file("resume-torn", command, &runs);
        let workloads = vec!["handoff-1to1".to_owned()];
        let mut asked = None;
        let resumed = prepare_with(&path, command, &workloads, configs(), |commit| {
            asked = Some(commit.to_owned());
            Ok(())
        })
        .expect("resumable");
        assert_eq!(
            asked.as_deref(),
            Some("abc123"),
            "the recorded commit is checked"
        );
        let mut recorded = resumed
            .sweep
            .results
            .into_iter()
            .next()
            .expect("one workload");
        assert_eq!(recorded.len(), 2, "the two whole runs, not the torn one");
        assert_eq!(take(&mut recorded, 1, 1).map(|o| o.value), Some(18.0));
        assert!(resumed
            .provenance
            .starts_with(&format!("`{command}`; commit abc123")));
        assert!(
            resumed.provenance.contains("interrupted after 2 runs"),
            "{}",
            resumed.provenance
        );
        let on_disk = std::fs::read_to_string(&path).expect("still there");
        assert!(
            on_disk.ends_with('\n') && !on_disk.contains("handoff-1\""),
            "torn line kept"
        );
        assert_eq!(resumed.text, on_disk);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn another_command_other_workloads_or_other_code_are_refused_by_name() {
        let command = "sheafalloc-bench tuning --rounds 2";
        let path = results_file("resume-refused", command, &run_line(1, "auto", 20.0));
        let workloads = vec!["handoff-1to1".to_owned()];
        let same = |_: &str| Ok(());
        let other = "sheafalloc-bench tuning --rounds 3";
        let error = prepare_with(&path, other, &workloads, configs(), same)
            .err()
            .expect("refused");
        assert!(
            error.contains("--rounds 2") && error.contains("--rounds 3"),
            "{error}"
        );
        let error = prepare_with(&path, command, &["larson".to_owned()], configs(), same)
            .err()
            .expect("refused");
        assert!(
            error.contains("handoff-1to1") && error.contains("larson"),
            "{error}"
        );
        let changed = |commit: &str| Err(format!("code changed since {commit}"));
        let error = prepare_with(&path, command, &workloads, configs(), changed)
            .err()
            .expect("refused");
        assert_eq!(error, "code changed since abc123");
        let _ = std::fs::remove_file(&path);
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
