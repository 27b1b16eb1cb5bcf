//! Running one workload process, with a time limit, and reading its result
//! line.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sheafalloc_bench::record::Record;

/// One process to run.
#[derive(Clone, Debug)]
pub struct Invocation<'a> {
    /// The binary.
    pub binary: &'a Path,
    /// Its arguments.
    pub args: Vec<String>,
    /// `SHEAFALLOC_NUMA_NODES` for the process (removed when `None`).
    pub numa_nodes: Option<u32>,
    /// More environment for the process (sheafalloc's tuning variables are
    /// removed unless given here, so a run never inherits them).
    pub env: Vec<(String, String)>,
    /// Killed after this long.
    pub limit: Duration,
}

/// Runs the process; returns its result line, or an error text that
/// includes the end of its stderr.
pub fn run(invocation: &Invocation<'_>) -> Result<Record, String> {
    let mut command = Command::new(invocation.binary);
    command
        .args(&invocation.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match invocation.numa_nodes {
        Some(n) => command.env("SHEAFALLOC_NUMA_NODES", n.to_string()),
        None => command.env_remove("SHEAFALLOC_NUMA_NODES"),
    };
    command
        .env_remove("SHEAFALLOC_CAPACITY")
        .env_remove("SHEAFALLOC_AUTOTUNE");
    for (name, value) in &invocation.env {
        command.env(name, value);
    }
    let name = invocation
        .binary
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting {name}: {e}"))?;
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() > invocation.limit => {
                // Best effort: it may have exited just now.
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "killed after {:.0} s",
                    invocation.limit.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("waiting: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let failure = |why: String| {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{name} {}: {why}; stderr: {}",
            invocation.args.join(" "),
            tail.join(" | ")
        )
    };
    match status {
        Ok(status) if status.success() => {
            Record::parse_output(&stdout).ok_or_else(|| failure("no result line on stdout".into()))
        }
        Ok(status) => Err(failure(format!("exited with {status}"))),
        Err(why) => Err(failure(why)),
    }
}

/// Reads a pipe to its end on a thread of its own (so a chatty child never
/// blocks on a full pipe).
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            // A read error leaves what was read so far.
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}
