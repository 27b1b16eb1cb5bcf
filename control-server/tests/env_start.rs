//! The `control` feature of `sheafalloc` starts the sidecar before `main`
//! when `SHEAFALLOC_CONTROL_ADDR` is set. This test binary links sheafalloc
//! with that feature; each test runs a copy of this binary as a child
//! process with the variables set, reads the line the constructor prints to
//! stderr, and talks to the child's sidecar.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// How long the child may take to print its first line.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);
/// How long the child idles at most if the parent never closes its stdin.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

/// The child: idles until its stdin closes (or a bounded time passes), so
/// the parent can talk to the sidecar the constructor started.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn child_idles_until_stdin_closes() {
    let (done, wait) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(CHILD_LIFETIME);
}

/// A child with `env` set, and a channel of its stderr lines.
struct ChildProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl ChildProcess {
    fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--ignored",
                "--exact",
                "child_idles_until_stdin_closes",
                "--nocapture",
            ])
            .env_remove("SHEAFALLOC_CONTROL_ADDR")
            .env_remove("SHEAFALLOC_CONTROL_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("run the test binary as a child");
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The first stderr line that starts with `sheafalloc: control plane`.
    fn control_line(&self) -> String {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("sheafalloc: control plane") => return line,
                Ok(_) => continue,
                Err(error) => panic!("no control-plane line from the child: {error}"),
            }
        }
    }

    /// Closes the child's stdin and waits (bounded) for it to exit.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "child exited with {status}");
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the child did not exit after its stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // Only if `finish` did not reap it (a failed assertion).
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

#[test]
fn the_variable_starts_the_sidecar_before_main() {
    let child = ChildProcess::start(&[("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0")]);
    let line = child.control_line();
    let url = line
        .strip_prefix("sheafalloc: control plane listening on ")
        .unwrap_or_else(|| panic!("unexpected line: {line}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let agent = agent();
    let mut health = agent.get(format!("{url}/healthz")).call().unwrap();
    assert_eq!(health.status().as_u16(), 200);
    assert_eq!(
        health.body_mut().read_to_string().unwrap(),
        r#"{"status":"ok"}"#
    );
    // The child's own allocator answers: it has live threads.
    let mut caches = agent.get(format!("{url}/v1/caches")).call().unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&caches.body_mut().read_to_string().unwrap()).unwrap();
    assert!(json["threads"]["live"].as_u64().unwrap() >= 1);
    // Writes are open without a token on loopback.
    let purge = agent.post(format!("{url}/v1/purge")).send_empty().unwrap();
    assert_eq!(purge.status().as_u16(), 200);
    child.finish();
}

#[test]
fn the_token_variable_protects_writes() {
    let child = ChildProcess::start(&[
        ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
        ("SHEAFALLOC_CONTROL_TOKEN", "s3cret"),
    ]);
    let line = child.control_line();
    let url = line
        .strip_prefix("sheafalloc: control plane listening on ")
        .unwrap_or_else(|| panic!("unexpected line: {line}"));
    let agent = agent();
    let refused = agent.post(format!("{url}/v1/purge")).send_empty().unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let accepted = agent
        .post(format!("{url}/v1/purge"))
        .header("authorization", "Bearer s3cret")
        .send_empty()
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 200);
    child.finish();
}

#[test]
fn a_refused_configuration_is_reported_and_the_process_goes_on() {
    for (addr, expected) in [
        ("0.0.0.0:0", "SHEAFALLOC_CONTROL_TOKEN"),
        ("not-an-address", "SHEAFALLOC_CONTROL_ADDR"),
    ] {
        let child = ChildProcess::start(&[("SHEAFALLOC_CONTROL_ADDR", addr)]);
        let line = child.control_line();
        assert!(
            line.starts_with("sheafalloc: control plane not started: "),
            "{addr}: {line}"
        );
        assert!(line.contains(expected), "{addr}: {line}");
        // The process still runs its main and exits cleanly.
        child.finish();
    }
}

#[test]
fn simulated_nodes_show_in_topology_and_node_labels() {
    let child = ChildProcess::start(&[
        ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
        ("SHEAFALLOC_NUMA_NODES", "2"),
    ]);
    let line = child.control_line();
    let url = line
        .strip_prefix("sheafalloc: control plane listening on ")
        .unwrap_or_else(|| panic!("unexpected line: {line}"));
    let agent = agent();
    let mut topology = agent.get(format!("{url}/v1/topology")).call().unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&topology.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(json["node_count"], 2, "{json}");
    assert_eq!(json["nodes_are_simulated"], true, "{json}");
    assert_eq!(json["nodes"].as_array().unwrap().len(), 2, "{json}");
    let mut metrics = agent.get(format!("{url}/metrics")).call().unwrap();
    let text = metrics.body_mut().read_to_string().unwrap();
    assert!(text.contains("sheafalloc_nodes 2"), "{text}");
    for node in ["0", "1"] {
        assert!(
            text.contains(&format!(
                r#"sheafalloc_node_info{{node="{node}",simulated="true"}} 1"#
            )),
            "node {node}"
        );
    }
    child.finish();
}
