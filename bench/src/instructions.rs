//! Counting a program's instructions with `valgrind --tool=callgrind`.
//!
//! Counts are exact and unaffected by a noisy shared host, so they can be
//! asserted in CI; they ignore cache misses, branch mispredictions and the
//! real cost of atomics. To count one operation, run the program twice
//! with different repetition counts and take the difference (start-up,
//! first touch and teardown cancel out): see [`per_operation`].

use std::path::Path;
use std::process::Command;

/// One program run under callgrind.
#[derive(Clone, Debug)]
pub struct Run {
    /// Instructions executed (callgrind's `Ir` total).
    pub instructions: u64,
    /// Valgrind's warnings (`==PID==` prefix removed).
    pub warnings: Vec<String>,
}

/// `valgrind --version`, or `None` if valgrind cannot be run.
pub fn valgrind_version() -> Option<String> {
    let out = Command::new("valgrind").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs `program args` under callgrind, writing its profile to
/// `out_file`; returns the instruction total and the warnings, or an error
/// with valgrind's output (stack frames cut).
pub fn count(program: &Path, args: &[String], out_file: &Path) -> Result<Run, String> {
    let (text, warnings) = profile(program, args, out_file, &[])?;
    let instructions = parse_total(&text)
        .ok_or_else(|| format!("no summary:/totals: line in {}", out_file.display()))?;
    Ok(Run {
        instructions,
        warnings,
    })
}

/// Runs `program args` under callgrind with its cache simulation
/// (`--cache-sim=yes`: first-level and last-level caches shaped like the
/// host's); returns every event's total (`Ir`, `D1mr`, `DLmw`, ...) and
/// the warnings.
pub fn count_with_caches(
    program: &Path,
    args: &[String],
    out_file: &Path,
) -> Result<(Events, Vec<String>), String> {
    let (text, warnings) = profile(program, args, out_file, &["--cache-sim=yes"])?;
    let events = parse_events(&text)
        .ok_or_else(|| format!("no events:/summary: lines in {}", out_file.display()))?;
    Ok((events, warnings))
}

/// Event totals of one run, by callgrind's event names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Events(pub Vec<(String, u64)>);

impl Events {
    /// The total of `name` (0 if the run did not record it).
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |&(_, v)| v)
    }
}

/// Runs callgrind and returns its profile's text and the warnings.
fn profile(
    program: &Path,
    args: &[String],
    out_file: &Path,
    valgrind_args: &[&str],
) -> Result<(String, Vec<String>), String> {
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .args(valgrind_args)
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("running valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "valgrind exited with {} for `{}`; its output (stack frames cut):\n{}",
            output.status,
            args.join(" "),
            brief(&stderr)
        ));
    }
    let warnings = stderr
        .lines()
        .filter(|line| line.to_ascii_lowercase().contains("warning"))
        .map(|line| strip_pid(line).to_owned())
        .collect();
    let text = std::fs::read_to_string(out_file)
        .map_err(|e| format!("reading {}: {e}", out_file.display()))?;
    // Best effort: the profile is no longer needed.
    let _ = std::fs::remove_file(out_file);
    Ok((text, warnings))
}

/// Instructions per operation from two runs of `n1` and `n2` operations.
pub fn per_operation((n1, ir1): (u64, u64), (n2, ir2): (u64, u64)) -> f64 {
    (ir2 as f64 - ir1 as f64) / (n2 as f64 - n1 as f64)
}

/// Valgrind's output without the banner and long stack traces: the
/// program's own lines, valgrind's messages, and the first three frames of
/// each trace (each line at most 160 characters).
pub fn brief(stderr: &str) -> String {
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
pub fn strip_pid(line: &str) -> &str {
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

/// Every event's total of a callgrind output file: the names of its
/// `events:` line with the numbers of its `summary:` (or `totals:`) line.
pub fn parse_events(text: &str) -> Option<Events> {
    let line = |prefix: &str| text.lines().find_map(|line| line.strip_prefix(prefix));
    let names = line("events:")?.split_whitespace();
    let totals = line("summary:").or_else(|| line("totals:"))?;
    let values = totals.split_whitespace().map(|v| v.parse::<u64>().ok());
    let events: Option<Vec<(String, u64)>> = names
        .zip(values)
        .map(|(n, v)| Some((n.to_owned(), v?)))
        .collect();
    events.filter(|e| !e.is_empty()).map(Events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_event() {
        let text = "events: Ir Dr D1mr\nsummary: 100 40 7\n";
        let events = parse_events(text).unwrap();
        assert_eq!((events.get("Ir"), events.get("D1mr")), (100, 7));
        assert_eq!(events.get("DLmw"), 0);
        assert_eq!(parse_events("events: Ir\n"), None);
        assert_eq!(parse_events("events: Ir\nsummary: x\n"), None);
    }

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

    #[test]
    fn subtracts_the_fixed_cost() {
        assert_eq!(per_operation((100, 10_500), (1100, 60_500)), 50.0);
    }
}
