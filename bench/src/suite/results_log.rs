//! The suite's results file: JSON lines, one per fact, written as the run
//! goes (an interrupted run keeps what it measured) and read back by the
//! report generator. The markdown report, the chart and the README tables
//! are all made from this file, never from the run's memory.
//!
//! Lines, in order: one `header` (command, commit, machine, options), one
//! `job` per workload, one `outcome` per run (round, position in the
//! round's allocator order, the workload binary's whole result line or its
//! error), at most one `callgrind` (instruction counts), one `end`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::catalog::Workload;

use super::jobs::{self, Job};
use crate::callgrind::{Count, Counts};
use crate::machine::Machine;

/// Bumped when the meaning of a line changes.
pub const FORMAT: u32 = 1;

/// What the whole run was.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: u32,
    /// The command line.
    pub command: String,
    /// `git rev-parse HEAD` of the bench's tree when the run started.
    pub commit: Option<String>,
    /// Whether tracked files differed from that commit.
    pub dirty: bool,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// Where it ran.
    pub machine: Machine,
    /// Load average at the start (1, 5, 15 minutes).
    pub load_average: String,
    /// `--quick`.
    pub quick: bool,
    /// Rounds asked for.
    pub rounds: usize,
    /// Whether `--only` chose the workloads.
    pub partial: bool,
}

/// One line of the file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(Header),
    Job {
        index: usize,
        name: String,
        cpus: Option<(usize, usize)>,
    },
    Outcome {
        job: usize,
        variant: usize,
        round: usize,
        slot: usize,
        allocator: String,
        fields: Option<BTreeMap<String, String>>,
        error: Option<String>,
    },
    Callgrind {
        command: String,
        counts: Result<CallgrindCounts, String>,
    },
    End {
        seconds: f64,
        load_average: String,
        notes: Vec<String>,
    },
}

/// [`Counts`] as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct CallgrindCounts {
    n: (u64, u64),
    valgrind: String,
    rows: Vec<CallgrindRow>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct CallgrindRow {
    allocator: String,
    count: Result<(u64, u64, Vec<String>), String>,
}

/// The file being written.
#[derive(Debug)]
pub struct Writer {
    file: File,
    path: PathBuf,
}

impl Writer {
    /// Creates (replaces) the file at `path` and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut writer = Self {
            file,
            path: path.to_owned(),
        };
        writer.line(&Line::Header(header.clone()));
        Ok(writer)
    }

    /// Declares job `index`.
    pub fn job(&mut self, index: usize, job: &Job) {
        let cpus = job.numa.then(|| job.variants[0].cpus).flatten();
        self.line(&Line::Job {
            index,
            name: job.name().to_owned(),
            cpus,
        });
    }

    /// Records one run.
    pub fn outcome(&mut self, at: At, peer: Peer, outcome: &Result<Record, String>) {
        let (fields, error) = match outcome {
            Ok(record) => (
                Some(
                    record
                        .fields()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                None,
            ),
            Err(error) => (None, Some(error.clone())),
        };
        self.line(&Line::Outcome {
            job: at.job,
            variant: at.variant,
            round: at.round,
            slot: at.slot,
            allocator: peer.name().to_owned(),
            fields,
            error,
        });
    }

    /// Records the instruction counts.
    pub fn callgrind(&mut self, command: &str, counts: &Result<Counts, String>) {
        let counts = counts
            .as_ref()
            .map_err(Clone::clone)
            .map(|c| CallgrindCounts {
                n: c.n,
                valgrind: c.valgrind.clone(),
                rows: c
                    .rows
                    .iter()
                    .map(|(peer, count)| CallgrindRow {
                        allocator: peer.name().to_owned(),
                        count: count
                            .as_ref()
                            .map(|c| (c.ir1, c.ir2, c.warnings.clone()))
                            .map_err(Clone::clone),
                    })
                    .collect(),
            });
        self.line(&Line::Callgrind {
            command: command.to_owned(),
            counts,
        });
    }

    /// Closes the run.
    pub fn end(&mut self, seconds: f64, notes: &[String]) {
        self.line(&Line::End {
            seconds,
            load_average: crate::machine::load_average(),
            notes: notes.to_vec(),
        });
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn line(&mut self, line: &Line) {
        let text = serde_json::to_string(line).expect("results lines serialise");
        if let Err(e) = writeln!(self.file, "{text}").and_then(|()| self.file.flush()) {
            eprintln!("could not write {}: {e}", self.path.display());
        }
    }
}

/// Where a run sits in the suite.
#[derive(Clone, Copy, Debug)]
pub struct At {
    /// Job index.
    pub job: usize,
    /// Variant of the job.
    pub variant: usize,
    /// Round, from 1.
    pub round: usize,
    /// Position in the round's allocator order, from 0.
    pub slot: usize,
}

/// A results file, read back.
#[derive(Clone, Debug)]
pub struct Results {
    /// The header.
    pub header: Header,
    /// The jobs with every run's outcome (a record gains `round` and `slot`).
    pub jobs: Vec<Job>,
    /// The callgrind command and counts, if counted.
    pub callgrind: Option<(String, Result<Counts, String>)>,
    /// Seconds the run took (`None`: it did not finish).
    pub seconds: Option<f64>,
    /// Load average at the end.
    pub final_load_average: Option<String>,
    /// Remarks made by the run.
    pub notes: Vec<String>,
}

/// Reads a results file.
pub fn read(path: &Path) -> Result<Results, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = None;
    let mut results_jobs: Vec<Job> = Vec::new();
    let mut callgrind = None;
    let (mut seconds, mut final_load_average, mut notes) = (None, None, Vec::new());
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), number + 1);
        let parsed: Line = serde_json::from_str(&line).map_err(|e| format!("{}: {e}", at()))?;
        match parsed {
            Line::Header(h) => {
                if h.format != FORMAT {
                    return Err(format!("{}: format {} (expected {FORMAT})", at(), h.format));
                }
                header = Some(h);
            }
            Line::Job { index, name, cpus } => {
                if index != results_jobs.len() {
                    return Err(format!("{}: job {index} out of order", at()));
                }
                let job = if name == "numa" {
                    Job::numa(cpus.unwrap_or((0, 1)))
                } else {
                    Job::plain(
                        Workload::from_name(&name)
                            .ok_or_else(|| format!("{}: unknown workload {name:?}", at()))?,
                    )
                };
                results_jobs.push(job);
            }
            Line::Outcome {
                job,
                variant,
                round,
                slot,
                allocator,
                fields,
                error,
            } => {
                let peer = Peer::from_name(&allocator)
                    .ok_or_else(|| format!("{}: unknown allocator {allocator:?}", at()))?;
                let target = results_jobs
                    .get_mut(job)
                    .and_then(|j| j.outcomes.get_mut(variant))
                    .ok_or_else(|| format!("{}: no job {job} variant {variant}", at()))?;
                let outcome = match (fields, error) {
                    (Some(fields), _) => {
                        let mut record = Record::new();
                        for (key, value) in fields {
                            record.set(&key, value);
                        }
                        record.set("round", round).set("slot", slot);
                        Ok(record)
                    }
                    (None, error) => Err(error.unwrap_or_default()),
                };
                target[jobs::index(peer)].push(outcome);
            }
            Line::Callgrind { command, counts } => {
                callgrind = Some((command, counts.and_then(|c| counts_from(c, &at()))));
            }
            Line::End {
                seconds: s,
                load_average,
                notes: n,
            } => {
                seconds = Some(s);
                final_load_average = Some(load_average);
                notes = n;
            }
        }
    }
    Ok(Results {
        header: header.ok_or_else(|| format!("{}: no header line", path.display()))?,
        jobs: results_jobs,
        callgrind,
        seconds,
        final_load_average,
        notes,
    })
}

fn counts_from(stored: CallgrindCounts, at: &str) -> Result<Counts, String> {
    let mut rows = Vec::new();
    for row in stored.rows {
        let peer = Peer::from_name(&row.allocator)
            .ok_or_else(|| format!("{at}: unknown allocator {:?}", row.allocator))?;
        rows.push((
            peer,
            row.count
                .map(|(ir1, ir2, warnings)| Count { ir1, ir2, warnings }),
        ));
    }
    // Rows in `peers::ALL` order, whatever the file's.
    rows.sort_by_key(|(peer, _)| jobs::index(*peer));
    debug_assert!(rows.len() <= peers::ALL.len());
    Ok(Counts {
        n: stored.n,
        valgrind: stored.valgrind,
        rows,
    })
}
