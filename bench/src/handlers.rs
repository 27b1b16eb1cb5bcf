//! Instructions and simulated cache misses per call of the HTTP services'
//! handlers (`json-orders`, `json-catalog`), counted with
//! `valgrind --tool=callgrind --cache-sim=yes` for every allocator.
//!
//! Each `wl-ALLOCATOR json-* --calls N` runs twice, for `n1` and `n2`
//! calls; per call is `(X(n2) - X(n1)) / (n2 - n1)` for every event, so
//! start-up and first touch cancel out. The counts are exact and do not
//! move with the host's noise, which is what the wall-clock runs of the
//! same handlers cannot give here. sheafalloc runs in its per-thread mode:
//! valgrind has no rseq.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sheafalloc_bench::instructions::{self, Events};
use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::service::catalog::Workload;

/// Calls of the two runs of a default count.
pub const FULL: (u64, u64) = (10, 60);
/// Calls of the two runs of a `--quick` count.
pub const QUICK: (u64, u64) = (3, 13);

/// The handlers counted.
const HANDLERS: [Workload; 2] = [Workload::JsonOrders, Workload::JsonCatalog];

/// What one call costs one allocator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerCall {
    /// Instructions.
    pub instructions: f64,
    /// First-level instruction-cache misses.
    pub i1_misses: f64,
    /// First-level data-cache misses, reads and writes.
    pub d1_misses: f64,
    /// Last-level data-cache misses, reads and writes.
    pub ll_misses: f64,
}

impl PerCall {
    /// Per call, from the event totals of runs of `n.0` and `n.1` calls.
    pub fn between(n: (u64, u64), first: &Events, second: &Events) -> PerCall {
        let per = |names: &[&str]| {
            let total = |e: &Events| names.iter().map(|name| e.get(name)).sum::<u64>();
            instructions::per_operation((n.0, total(first)), (n.1, total(second)))
        };
        // A miss count can come out a little below 0 where the shorter
        // run's start-up missed more; such a count is shown as 0.
        let misses = |names: &[&str]| per(names).max(0.0);
        PerCall {
            instructions: per(&["Ir"]),
            i1_misses: misses(&["I1mr"]),
            d1_misses: misses(&["D1mr", "D1mw"]),
            ll_misses: misses(&["DLmr", "DLmw"]),
        }
    }
}

/// Counts every handler with every allocator and writes
/// `bench/results/handlers.md`; `snmalloc` replaces the `wl-snmalloc`
/// found next to this binary (the default build cannot run under
/// valgrind: see `callgrind.rs`).
pub fn run(quick: bool, snmalloc: Option<PathBuf>) {
    let n = if quick { QUICK } else { FULL };
    let binaries = match crate::suite::binaries::locate() {
        Ok(found) => found,
        Err(error) => {
            eprintln!("sheafalloc-bench handlers: {error}");
            std::process::exit(1);
        }
    };
    let valgrind = instructions::valgrind_version().unwrap_or_else(|| {
        eprintln!("sheafalloc-bench handlers: valgrind not found on PATH");
        std::process::exit(1);
    });
    let dir = std::env::temp_dir().join(format!("sheafalloc-handlers-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("sheafalloc-bench handlers: {}: {error}", dir.display());
        std::process::exit(1);
    }
    let mut rows = Vec::new();
    for workload in HANDLERS {
        for (peer, default_path) in &binaries {
            let path = match (&snmalloc, peer) {
                (Some(path), Peer::Snmalloc) => path.clone(),
                _ => default_path.clone(),
            };
            eprintln!(
                "handlers: {} {} ({} and {} calls)",
                workload.name(),
                peer.name(),
                n.0,
                n.1
            );
            let per_call = count(&path, &dir, workload, n);
            if let Err(error) = &per_call {
                eprintln!(
                    "handlers: {} {} failed: {error}",
                    workload.name(),
                    peer.name()
                );
            }
            rows.push((workload, *peer, per_call));
        }
    }
    // Best effort: a leftover temp dir is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    let provenance = format!(
        "`{}`; commit {}; {valgrind}; {}{}",
        crate::command_line(),
        crate::machine::commit_label(),
        crate::machine::describe().markdown(),
        snmalloc.map_or_else(String::new, |p| format!("; snmalloc from {}", p.display())),
    );
    let report = report(&provenance, n, &rows);
    print!("{report}");
    let path = crate::suite::results_dir().join(if quick {
        "handlers-quick.md"
    } else {
        "handlers.md"
    });
    if let Err(error) = std::fs::write(&path, &report) {
        eprintln!(
            "sheafalloc-bench handlers: writing {}: {error}",
            path.display()
        );
    }
}

/// One allocator's count of one handler.
fn count(program: &Path, dir: &Path, workload: Workload, n: (u64, u64)) -> Result<PerCall, String> {
    let run = |calls: u64| {
        let args = [
            workload.name().to_owned(),
            "--calls".to_owned(),
            calls.to_string(),
        ];
        let out = dir.join(format!("callgrind.{}.{calls}.out", workload.name()));
        instructions::count_with_caches(program, &args, &out).map(|(events, _)| events)
    };
    let first = run(n.0)?;
    let second = run(n.1)?;
    Ok(PerCall::between(n, &first, &second))
}

/// The markdown report: one table per handler.
pub fn report(
    provenance: &str,
    n: (u64, u64),
    rows: &[(Workload, Peer, Result<PerCall, String>)],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# The HTTP handlers under callgrind\n");
    let _ = writeln!(out, "{provenance}.\n");
    let _ = writeln!(
        out,
        "Per handler call: the difference between runs of {} and {} calls, divided by {}. \
         Caches as callgrind simulates them (`--cache-sim=yes`); sheafalloc in its per-thread \
         mode (valgrind has no rseq). `vs sheafalloc`: the allocator's instructions over \
         sheafalloc's (above 1: sheafalloc runs fewer).\n",
        n.0,
        n.1,
        n.1 - n.0
    );
    for workload in HANDLERS {
        let _ = writeln!(out, "## {}: {}\n", workload.name(), workload.title());
        let _ = writeln!(
            out,
            "| allocator | instructions / call | vs sheafalloc | I1 misses | D1 misses | LL misses |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        let sheaf = rows.iter().find_map(|(w, p, r)| match r {
            Ok(c) if *w == workload && *p == Peer::Sheaf => Some(c.instructions),
            _ => None,
        });
        for peer in peers::ALL {
            let Some((_, _, result)) = rows.iter().find(|(w, p, _)| *w == workload && *p == peer)
            else {
                continue;
            };
            match result {
                Ok(c) => {
                    let ratio =
                        sheaf.map_or("–".to_owned(), |s| format!("{:.3}", c.instructions / s));
                    let _ = writeln!(
                        out,
                        "| {} | {:.0} | {ratio} | {:.0} | {:.0} | {:.0} |",
                        peer.name(),
                        c.instructions,
                        c.i1_misses,
                        c.d1_misses,
                        c.ll_misses
                    );
                }
                Err(error) => {
                    let first = error.lines().next().unwrap_or("failed");
                    let _ = writeln!(out, "| {} | failed: {first} | | | | |", peer.name());
                }
            }
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(list: &[(&str, u64)]) -> Events {
        Events(list.iter().map(|&(n, v)| (n.to_owned(), v)).collect())
    }

    #[test]
    fn per_call_is_the_difference_over_the_extra_calls() {
        let first = events(&[
            ("Ir", 1_000),
            ("I1mr", 5),
            ("D1mr", 10),
            ("D1mw", 20),
            ("DLmr", 1),
        ]);
        let second = events(&[
            ("Ir", 6_000),
            ("I1mr", 15),
            ("D1mr", 60),
            ("D1mw", 70),
            ("DLmr", 11),
        ]);
        let c = PerCall::between((10, 60), &first, &second);
        assert_eq!(c.instructions, 100.0);
        assert_eq!(c.i1_misses, 0.2);
        assert_eq!(c.d1_misses, 2.0);
        assert_eq!(c.ll_misses, 0.2);
    }

    #[test]
    fn the_report_compares_with_sheafalloc_and_names_failures() {
        let c = |instructions| PerCall {
            instructions,
            i1_misses: 1.0,
            d1_misses: 2.0,
            ll_misses: 3.0,
        };
        let rows = vec![
            (Workload::JsonOrders, Peer::Sheaf, Ok(c(200.0))),
            (Workload::JsonOrders, Peer::Mimalloc, Ok(c(250.0))),
            (
                Workload::JsonOrders,
                Peer::Snmalloc,
                Err("Failed to initialise snmalloc".into()),
            ),
        ];
        let text = report("`x`; commit c", (10, 60), &rows);
        assert!(
            text.contains("| mimalloc | 250 | 1.250 | 1 | 2 | 3 |"),
            "{text}"
        );
        assert!(text.contains("| sheafalloc | 200 | 1.000 |"), "{text}");
        assert!(
            text.contains("| snmalloc | failed: Failed to initialise snmalloc |"),
            "{text}"
        );
    }
}
