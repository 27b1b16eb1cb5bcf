//! Running `wrk` (the HTTP load generator, a separate process) against the
//! service, and reading its report.

use std::path::PathBuf;
use std::process::Command;

/// wrk's threads (its event loops).
pub const THREADS: usize = 2;
/// Open connections, spread over wrk's threads.
pub const CONNECTIONS: usize = 64;

/// One load run.
#[derive(Clone, Debug)]
pub struct Load<'a> {
    /// `http://127.0.0.1:PORT/path`.
    pub url: String,
    /// Whole seconds (wrk takes no fractions).
    pub seconds: u64,
    /// A Lua script (method, headers, body), if any.
    pub script: Option<&'a str>,
}

/// What wrk reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Responses received.
    pub requests: u64,
    /// The run's length as wrk measured it, in seconds.
    pub seconds: f64,
    /// wrk's `Requests/sec`.
    pub requests_per_second: f64,
    /// Responses whose status was not 2xx or 3xx.
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors, added up.
    pub socket_errors: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// Whether `wrk` can be run, with a hint if not.
pub fn check_installed() -> Result<(), String> {
    match Command::new("wrk").arg("--version").output() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "wrk not found ({e}): install it with `apt-get install wrk` \
             (`bash scripts/bench.sh` does)"
        )),
    }
}

/// Runs wrk once; errors if it fails or its report cannot be read.
pub fn run(load: &Load<'_>) -> Result<Report, String> {
    let script = match load.script {
        Some(text) => {
            let path = script_path();
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    let mut command = Command::new("wrk");
    command
        .arg(format!("-t{THREADS}"))
        .arg(format!("-c{CONNECTIONS}"))
        .arg(format!("-d{}s", load.seconds.max(1)))
        .arg("--timeout")
        .arg("5s")
        .arg("--latency");
    if let Some(path) = &script {
        command.arg("-s").arg(path);
    }
    let output = command.arg(&load.url).output();
    if let Some(path) = &script {
        // Best effort: a leftover script in the temp dir is harmless.
        let _ = std::fs::remove_file(path);
    }
    let output = output.map_err(|e| format!("running wrk: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "wrk exited with {}: {} {}",
            output.status,
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse(&stdout).ok_or_else(|| format!("could not read wrk's report:\n{stdout}"))
}

fn script_path() -> PathBuf {
    std::env::temp_dir().join(format!("sheafalloc-bench-wrk-{}.lua", std::process::id()))
}

/// A Lua script that makes every request a `POST` of `body` as JSON.
pub fn post_json_script(body: &str) -> String {
    format!(
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.body = [==[{body}]==]\n"
    )
}

/// Reads wrk's report (`--latency` output).
pub fn parse(text: &str) -> Option<Report> {
    let mut report = Report::default();
    let mut seen = (false, false);
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            report.requests_per_second = rest.trim().parse().ok()?;
            seen.1 = true;
        } else if let Some((count, rest)) = line.split_once(" requests in ") {
            report.requests = count.trim().parse().ok()?;
            let duration = rest.split(',').next()?.trim();
            report.seconds = seconds(duration)?;
            seen.0 = true;
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            report.non_2xx = rest.trim().parse().ok()?;
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            report.socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(rest) = line.strip_prefix("50%") {
            report.p50_ms = milliseconds(rest.trim())?;
        } else if let Some(rest) = line.strip_prefix("99%") {
            report.p99_ms = milliseconds(rest.trim())?;
        }
    }
    (seen == (true, true)).then_some(report)
}

/// `1.00s`, `2.5m`, `300.00ms` → seconds.
fn seconds(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    Some(match unit {
        "us" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    })
}

/// A wrk latency (`812.00us`, `1.20ms`, `2.00s`) → milliseconds.
fn milliseconds(text: &str) -> Option<f64> {
    seconds(text).map(|s| s * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Running 1s test @ http://127.0.0.1:40000/catalog
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.10ms    1.20ms  20.00ms   80.00%
    Req/Sec    10.20k     1.00k   12.00k    70.00%
  Latency Distribution
     50%  812.00us
     75%    3.50ms
     90%    4.80ms
     99%    7.25ms
  20400 requests in 1.00s, 900.00MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  20380.12
Transfer/sec:    899.00MB
";

    #[test]
    fn reads_a_report() {
        let report = parse(SAMPLE).expect("a full report");
        assert_eq!(report.requests, 20400);
        assert_eq!(report.seconds, 1.0);
        assert_eq!(report.requests_per_second, 20380.12);
        assert_eq!(report.non_2xx, 3);
        assert_eq!(report.socket_errors, 3);
        assert!((report.p50_ms - 0.812).abs() < 1e-9);
        assert_eq!(report.p99_ms, 7.25);
        assert_eq!(parse("Running 1s test\n"), None);
    }

    #[test]
    fn writes_a_post_script() {
        let script = post_json_script("{\"a\":[1]}");
        assert!(script.contains("wrk.method = \"POST\""));
        assert!(script.contains("[==[{\"a\":[1]}]==]"));
    }
}
