//! Instructions per alloc+free pair, counted with `valgrind --tool=callgrind`.
//!
//! The driver runs this same executable (`pairs ALLOCATOR N`) under
//! callgrind twice per allocator, for `n1` and `n2` pairs, and reports
//! `(Ir(n2) - Ir(n1)) / (n2 - n1)`: start-up, first-touch and teardown cost
//! the same in both runs and cancel out. Instruction counts are exact and
//! unaffected by the noisy shared host, but they ignore cache misses,
//! branch mispredictions and atomics' real cost.

use std::path::{Path, PathBuf};

use crate::peers::{self, Peer};
use sheafalloc_bench::instructions;

/// Iteration counts of a default run.
pub const FULL: (u64, u64) = (100_000, 1_100_000);
/// Iteration counts of a `--quick` run.
pub const QUICK: (u64, u64) = (20_000, 220_000);

/// Why snmalloc fails under valgrind, and the way around it.
const SNMALLOC_HINT: &str = "\n\nsnmalloc maps its 256 GiB pagemap at start-up and valgrind's \
address-space manager refuses mappings that large. To count it, build with \
`--features snmalloc-valgrind` (snmalloc's QEMU workaround: 128 KiB chunks, \
32 GiB pagemap) into another target dir and run that binary's `callgrind`.";

/// Whether this binary's snmalloc has the QEMU workaround (see Cargo.toml).
pub const SNMALLOC_VALGRIND: bool = cfg!(feature = "snmalloc-valgrind");

/// One allocator's counts.
#[derive(Clone, Debug)]
pub struct Count {
    /// Total instructions of the `n1` run.
    pub ir1: u64,
    /// Total instructions of the `n2` run.
    pub ir2: u64,
    /// Valgrind warnings printed by either run (deduplicated).
    pub warnings: Vec<String>,
}

impl Count {
    /// Instructions per pair.
    pub fn per_pair(&self, (n1, n2): (u64, u64)) -> f64 {
        instructions::per_operation((n1, self.ir1), (n2, self.ir2))
    }
}

/// The counts of every allocator (an error text where a run failed).
#[derive(Clone, Debug)]
pub struct Counts {
    /// The two iteration counts.
    pub n: (u64, u64),
    /// `valgrind --version`.
    pub valgrind: String,
    /// Per allocator, in `peers::ALL` order.
    pub rows: Vec<(Peer, Result<Count, String>)>,
}

/// Counts every allocator; progress goes to stderr.
pub fn measure_all(n: (u64, u64)) -> Result<Counts, String> {
    let valgrind = instructions::valgrind_version().ok_or("valgrind not found on PATH")?;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir =
        std::env::temp_dir().join(format!("sheafalloc-bench-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut rows = Vec::new();
    for peer in peers::ALL {
        eprintln!("callgrind: {} ({} and {} pairs)", peer.name(), n.0, n.1);
        let count = count_pair(&exe, &dir, peer, n);
        if let Err(error) = &count {
            eprintln!("callgrind: {} failed: {error}", peer.name());
        }
        rows.push((peer, count));
    }
    // Best effort: a leftover temp dir is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Counts { n, valgrind, rows })
}

fn count_pair(exe: &Path, dir: &Path, peer: Peer, (n1, n2): (u64, u64)) -> Result<Count, String> {
    let (ir1, mut warnings) = count_one(exe, dir, peer, n1)?;
    let (ir2, more) = count_one(exe, dir, peer, n2)?;
    for warning in more {
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
    Ok(Count { ir1, ir2, warnings })
}

/// Runs `exe pairs PEER N` under callgrind; returns the total instructions
/// and the warnings valgrind printed.
fn count_one(exe: &Path, dir: &Path, peer: Peer, n: u64) -> Result<(u64, Vec<String>), String> {
    let out_file: PathBuf = dir.join(format!("callgrind.{}.{n}.out", peer.name()));
    let args = ["pairs".to_owned(), peer.name().to_owned(), n.to_string()];
    match instructions::count(exe, &args, &out_file) {
        Ok(run) => Ok((run.instructions, run.warnings)),
        Err(mut error) => {
            if error.contains("Failed to initialise snmalloc") {
                error.push_str(SNMALLOC_HINT);
            }
            Err(error)
        }
    }
}
