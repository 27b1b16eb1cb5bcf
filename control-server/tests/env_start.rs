//! The `control` feature of `sheafalloc` starts the sidecar before `main`
//! when `SHEAFALLOC_CONTROL_ADDR` is set. This test binary links sheafalloc
//! with that feature; each test runs a copy of this binary as a child
//! process with the variables set, reads the line the constructor prints to
//! stderr, and talks to the child's sidecar.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sheafalloc_control::client::{Client, ClientError};

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
            .env_remove("SHEAFALLOC_CONTROL_TOKEN_FILE")
            .env_remove("SHEAFALLOC_CONTROL_TOKEN_READS")
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

    /// The URL the child's sidecar listens on (its first control-plane
    /// line must say so).
    fn url(&self) -> String {
        let line = self.control_line();
        line.strip_prefix("sheafalloc: control plane listening on ")
            .unwrap_or_else(|| panic!("unexpected line: {line}"))
            .to_owned()
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

fn client(url: &str) -> Client {
    Client::new(url)
        .expect("the printed URL is an address")
        .with_timeout(Duration::from_secs(20))
}

#[test]
fn the_variable_starts_the_sidecar_before_main() {
    let child = ChildProcess::start(&[("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0")]);
    let url = child.url();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let client = client(&url);
    let health = client.get("/healthz").unwrap();
    assert_eq!(
        (health.status, health.body.as_str()),
        (200, r#"{"status":"ok"}"#)
    );
    // The child's own allocator answers: it has live threads.
    assert!(client.caches().unwrap().threads.live >= 1);
    // Writes are open without a token on loopback.
    assert!(client.purge().is_ok());
    child.finish();
}

#[test]
fn the_token_variable_protects_writes() {
    let child = ChildProcess::start(&[
        ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
        ("SHEAFALLOC_CONTROL_TOKEN", "s3cret"),
    ]);
    let url = child.url();
    let refused = client(&url).purge().unwrap_err();
    assert!(
        matches!(refused, ClientError::Status { status: 401, .. }),
        "{refused}"
    );
    let authorized = client(&url).with_token(Some("s3cret".to_owned()));
    assert!(authorized.purge().is_ok());
    // Reads stay open unless asked otherwise.
    assert!(client(&url).caches().is_ok());
    child.finish();
}

/// A token file in a fresh directory, removed at drop.
struct TokenFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl TokenFile {
    fn new(name: &str, mode: u32) -> Self {
        let dir =
            std::env::temp_dir().join(format!("sheafalloc-env-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "from-a-file\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        Self { dir, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn the_token_file_variable_protects_reads_too_when_asked() {
    let file = TokenFile::new("ok", 0o600);
    let child = ChildProcess::start(&[
        ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
        ("SHEAFALLOC_CONTROL_TOKEN_FILE", file.path()),
        ("SHEAFALLOC_CONTROL_TOKEN_READS", "1"),
    ]);
    let url = child.url();
    let anonymous = client(&url);
    let refused = anonymous.caches().unwrap_err();
    assert!(
        matches!(refused, ClientError::Status { status: 401, .. }),
        "{refused}"
    );
    assert_eq!(anonymous.get("/metrics").unwrap().status, 401);
    assert_eq!(anonymous.get("/healthz").unwrap().status, 200);
    let authorized = client(&url).with_token(Some("from-a-file".to_owned()));
    assert_eq!(
        authorized.caches().unwrap().caches.len(),
        sheafalloc_core::size_class::NUM_CLASSES
    );
    assert!(authorized.purge().is_ok());
    child.finish();
}

#[test]
fn a_token_file_others_can_read_or_a_missing_one_stops_the_sidecar_with_the_reason() {
    let open = TokenFile::new("open", 0o644);
    let missing = open.dir.join("missing");
    let missing = missing.to_str().unwrap();
    for (path, expected) in [(open.path(), "chmod 600"), (missing, "No such file")] {
        let child = ChildProcess::start(&[
            ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
            ("SHEAFALLOC_CONTROL_TOKEN_FILE", path),
        ]);
        let line = child.control_line();
        assert!(
            line.starts_with("sheafalloc: control plane not started: "),
            "{path}: {line}"
        );
        assert!(line.contains("SHEAFALLOC_CONTROL_TOKEN_FILE"), "{line}");
        assert!(line.contains(expected), "{line}");
        child.finish();
    }
}

#[test]
fn a_refused_configuration_is_reported_and_the_process_goes_on() {
    for (env, expected) in [
        (
            &[("SHEAFALLOC_CONTROL_ADDR", "0.0.0.0:0")][..],
            "SHEAFALLOC_CONTROL_TOKEN",
        ),
        (
            &[("SHEAFALLOC_CONTROL_ADDR", "not-an-address")],
            "SHEAFALLOC_CONTROL_ADDR",
        ),
        (
            &[
                ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
                ("SHEAFALLOC_CONTROL_TOKEN_READS", "1"),
            ],
            "SHEAFALLOC_CONTROL_TOKEN_READS",
        ),
        (
            &[
                ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
                ("SHEAFALLOC_CONTROL_TOKEN_READS", "maybe"),
            ],
            "SHEAFALLOC_CONTROL_TOKEN_READS",
        ),
        (
            &[
                ("SHEAFALLOC_CONTROL_ADDR", "127.0.0.1:0"),
                ("SHEAFALLOC_CONTROL_TOKEN", "a"),
                ("SHEAFALLOC_CONTROL_TOKEN_FILE", "/etc/hostname"),
            ],
            "set one of them",
        ),
    ] {
        let child = ChildProcess::start(env);
        let line = child.control_line();
        assert!(
            line.starts_with("sheafalloc: control plane not started: "),
            "{env:?}: {line}"
        );
        assert!(line.contains(expected), "{env:?}: {line}");
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
    let client = client(&child.url());
    let topology = client.topology().unwrap();
    assert_eq!(topology.node_count, 2, "{topology:?}");
    assert!(topology.nodes_are_simulated, "{topology:?}");
    assert_eq!(topology.nodes.len(), 2, "{topology:?}");
    let text = client.metrics().unwrap();
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
