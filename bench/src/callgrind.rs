//! Instructions per alloc+free pair, counted with `valgrind --tool=callgrind`.
//!
//! The driver runs this same executable (`pairs ALLOCATOR N`) under
//! callgrind twice per allocator, for `n1` and `n2` pairs, and reports
//! `(Ir(n2) - Ir(n1)) / (n2 - n1)`: start-up, first-touch and teardown cost
//! the same in both runs and cancel out. Instruction counts are exact and
//! unaffected by the noisy shared host, but they ignore cache misses,
//! branch mispredictions and atomics' real cost.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::peers::{self, Peer};

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
        (self.ir2 as f64 - self.ir1 as f64) / (n2 - n1) as f64
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
    let valgrind = crate::machine::output_of("valgrind", &["--version"]);
    if valgrind == "unknown" {
        return Err("valgrind not found on PATH".into());
    }
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
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .args(["pairs", peer.name(), &n.to_string()])
        .output()
        .map_err(|e| format!("running valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let mut error = format!(
            "valgrind exited with {} for `pairs {} {n}`; its output (stack frames cut):\n{}",
            output.status,
            peer.name(),
            brief(&stderr)
        );
        if stderr.contains("Failed to initialise snmalloc") {
            error.push_str(SNMALLOC_HINT);
        }
        return Err(error);
    }
    let warnings = stderr
        .lines()
        .filter(|line| line.to_ascii_lowercase().contains("warning"))
        .map(|line| strip_pid(line).to_owned())
        .collect();
    let text = std::fs::read_to_string(&out_file)
        .map_err(|e| format!("reading {}: {e}", out_file.display()))?;
    let total = parse_total(&text)
        .ok_or_else(|| format!("no summary:/totals: line in {}", out_file.display()))?;
    Ok((total, warnings))
}

/// Valgrind's output without the banner and long stack traces: the
/// program's own lines, valgrind's messages, and the first three frames of
/// each trace (each line at most 160 characters).
fn brief(stderr: &str) -> String {
    let mut lines = Vec::new();
    let mut frames = 0;
    for line in stderr
        .lines()
        .skip_while(|l| !l.contains("Command:"))
        .skip(1)
    {
        let message = strip_pid(line).trim_end();
        let is_frame =
            message.trim_start().starts_with("at 0x") || message.trim_start().starts_with("by 0x");
        frames = if is_frame { frames + 1 } else { 0 };
        if message.is_empty() || frames > 3 {
            continue;
        }
        lines.push(message.chars().take(160).collect::<String>());
    }
    lines.join("\n")
}

/// Drops valgrind's `==PID== ` prefix.
fn strip_pid(line: &str) -> &str {
    match line
        .strip_prefix("==")
        .and_then(|rest| rest.split_once("== "))
    {
        Some((_, message)) => message,
        None => line,
    }
}

/// The instruction total of a callgrind output file: the first number of
/// its `summary:` line, or else of its `totals:` line.
pub fn parse_total(text: &str) -> Option<u64> {
    let first_number = |prefix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse().ok())
    };
    first_number("summary:").or_else(|| first_number("totals:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_summary_then_totals() {
        assert_eq!(
            parse_total("events: Ir\nsummary: 12345\ntotals: 9\n"),
            Some(12345)
        );
        assert_eq!(parse_total("events: Ir\ntotals: 77 3\n"), Some(77));
        assert_eq!(parse_total("events: Ir\n"), None);
    }

    #[test]
    fn strips_pid_prefix() {
        assert_eq!(strip_pid("==123== Warning: x"), "Warning: x");
        assert_eq!(strip_pid("plain"), "plain");
    }
}
