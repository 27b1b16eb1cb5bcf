//! Merging the results files of partial sweeps (`--only`) into one whole
//! sweep (`--merge A.jsonl,B.jsonl,...`).
//!
//! A full sweep of every workload can take longer than the host stays in
//! one state; partial sweeps of a few rows each, taken at the same engine,
//! cover the same ground. Merging them writes one results file,
//! `bench/results/{name}.jsonl`, with a header of its own (every workload
//! in the sweep's order, and each part's provenance with the rows it
//! measured) followed by every part's runs unchanged, so the merged file
//! replays like a full run's, and its report and README table are made
//! the same way.
//!
//! The parts must cover every workload of the sweep exactly once: a row
//! measured by two parts, a part with a row the sweep does not have, or a
//! row no part measured is an error that names it. Whether the parts ran
//! one engine is the caller's to say; each part's commit is in the merged
//! provenance.

use std::path::{Path, PathBuf};

use sheafalloc_bench::service::catalog::Workload;

/// One partial sweep's results file, read.
struct Part {
    file: PathBuf,
    provenance: String,
    workloads: Vec<String>,
    runs: Vec<String>,
}

fn read_part(file: &Path) -> Result<Part, String> {
    let (header, runs) = crate::sweep::read_results(file)?;
    let provenance = header["provenance"]
        .as_str()
        .ok_or_else(|| format!("{}: the header has no provenance", file.display()))?
        .to_owned();
    let workloads = header["workloads"]
        .as_array()
        .ok_or_else(|| format!("{}: the header lists no workloads", file.display()))?
        .iter()
        .map(|w| w.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("{}: a workload that is not a name", file.display()))?;
    Ok(Part {
        file: file.to_owned(),
        provenance,
        workloads,
        runs,
    })
}

/// Writes the merge of `files` (partial sweeps of `name`) to `out`, with
/// the rows in the order of `workloads` (every workload of the sweep);
/// an error names what keeps the parts from making one whole sweep.
pub fn merge_into(
    name: &str,
    files: &[PathBuf],
    workloads: &[Workload],
    out: &Path,
) -> Result<(), String> {
    let parts = files
        .iter()
        .map(|f| read_part(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut owner: Vec<Option<usize>> = vec![None; workloads.len()];
    for (p, part) in parts.iter().enumerate() {
        for row in &part.workloads {
            let Some(w) = workloads.iter().position(|w| w.name() == row) else {
                return Err(format!(
                    "{}: row {row} is not one of the {name} sweep's",
                    part.file.display()
                ));
            };
            if let Some(first) = owner[w] {
                return Err(format!(
                    "row {row} is in both {} and {}: keep one",
                    parts[first].file.display(),
                    part.file.display()
                ));
            }
            owner[w] = Some(p);
        }
    }
    let missing: Vec<&str> = workloads
        .iter()
        .zip(&owner)
        .filter(|(_, o)| o.is_none())
        .map(|(w, _)| w.name())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "no part measured {}: the merge would not be a whole sweep",
            missing.join(", ")
        ));
    }
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let sources: Vec<String> = parts
        .iter()
        .map(|part| format!("{}: {}", part.workloads.join(", "), part.provenance))
        .collect();
    let provenance = format!(
        "merged by `sheafalloc-bench {name} --merge {}` from {} partial runs. {}",
        names.join(","),
        parts.len(),
        sources.join(" — ")
    );
    let header = serde_json::json!({
        "kind": "header",
        "stem": name,
        "provenance": provenance,
        "workloads": workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
    });
    let mut text = format!("{header}\n");
    for part in &parts {
        for run in &part.runs {
            text.push_str(run);
            text.push('\n');
        }
    }
    std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))
}

/// [`merge_into`] `bench/results/{name}.jsonl`; returns that path.
pub fn merge(name: &str, files: &[PathBuf], workloads: &[Workload]) -> Result<PathBuf, String> {
    let out = crate::suite::results_dir().join(format!("{name}.jsonl"));
    merge_into(name, files, workloads, &out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::{load, Config};

    const ROWS: [Workload; 3] = [Workload::Handoff1to1, Workload::Larson, Workload::Fifo256];

    fn part(dir: &Path, file: &str, commit: &str, rows: &[&str]) -> PathBuf {
        let header = serde_json::json!({
            "kind": "header", "stem": "tuning-partial",
            "provenance": format!("`x --only {}`; commit {commit}", rows.join(",")),
            "workloads": rows,
        });
        let mut text = format!("{header}\n");
        for (i, row) in rows.iter().enumerate() {
            for (config, value) in [("a", 1.0 + i as f64), ("b", 10.0 + i as f64)] {
                let run = serde_json::json!({
                    "round": 1, "workload": row, "config": config,
                    "line": format!("result workload={row} value={value} rtt_ns=50"),
                });
                text.push_str(&format!("{run}\n"));
            }
        }
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sweep-merge-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn parts_merge_into_one_sweep_in_the_sweeps_order() {
        let dir = scratch("whole");
        let first = part(&dir, "p1.jsonl", "c1", &["fifo-256", "handoff-1to1"]);
        let second = part(&dir, "p2.jsonl", "c2", &["larson"]);
        let out = dir.join("tuning.jsonl");
        merge_into("tuning", &[first, second], &ROWS, &out).expect("a whole sweep");
        let configs = vec![Config::new("a", &[]), Config::new("b", &[])];
        let sweep = load(&out, configs).expect("the merged file replays");
        assert_eq!(sweep.workloads, ROWS.to_vec(), "rows in the sweep's order");
        assert_eq!(
            sweep.stem, "tuning",
            "a full sweep's stem: the README table"
        );
        // Every run kept, under its own row: fifo-256 was p1's first row.
        assert_eq!(sweep.median(2, 0), Some(1.0));
        assert_eq!(sweep.median(0, 1), Some(11.0));
        assert_eq!(sweep.median(1, 1), Some(10.0));
        assert!(sweep.provenance.contains("commit c1") && sweep.provenance.contains("commit c2"));
        assert!(sweep.provenance.contains("larson: `x --only larson`"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_row_twice_missing_or_foreign_is_refused() {
        let dir = scratch("refused");
        let out = dir.join("tuning.jsonl");
        let first = part(&dir, "p1.jsonl", "c1", &["fifo-256", "handoff-1to1"]);
        let again = part(&dir, "p2.jsonl", "c2", &["larson", "fifo-256"]);
        let error = merge_into("tuning", &[first.clone(), again], &ROWS, &out).unwrap_err();
        assert!(error.contains("row fifo-256 is in both"), "{error}");
        let error = merge_into("tuning", std::slice::from_ref(&first), &ROWS, &out).unwrap_err();
        assert!(error.contains("no part measured larson"), "{error}");
        let foreign = part(&dir, "p3.jsonl", "c3", &["larson", "pairs"]);
        let error = merge_into("tuning", &[first, foreign], &ROWS, &out).unwrap_err();
        assert!(error.contains("row pairs is not one of"), "{error}");
        assert!(!out.exists(), "nothing written when the parts do not fit");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
