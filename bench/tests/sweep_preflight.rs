//! A sweep whose workloads need wrk (the HTTP services) refuses to start
//! without it, before any run: otherwise a sweep of most of an hour comes
//! back with those rows empty. The real `sheafalloc-bench` binary, with a
//! `PATH` on which no wrk can be found.

use std::process::Command;

#[test]
fn a_sweep_of_http_rows_without_wrk_stops_before_its_first_run() {
    let empty = std::env::temp_dir().join(format!("sheafalloc-no-wrk-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("a temporary directory");
    for sweep in ["modes", "tuning"] {
        let output = Command::new(env!("CARGO_BIN_EXE_sheafalloc-bench"))
            .args([sweep, "--rounds", "1", "--only", "http-orders"])
            .env("PATH", &empty)
            .output()
            .expect("sheafalloc-bench runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{sweep}: {stderr}");
        assert!(
            stderr.contains(&format!("sheafalloc-bench {sweep}: wrk not found")),
            "{sweep}: {stderr}"
        );
        assert!(!stderr.contains("round 1/1"), "{sweep} ran: {stderr}");
    }
    let _ = std::fs::remove_dir(&empty);
}
