//! Waiting for the two vCPUs to run at once before a cross-thread run.
//!
//! On a 2-vCPU virtual machine the host sometimes runs both vCPUs at once
//! (a core-to-core round trip of 70–500 ns) and sometimes lets them take
//! turns on one physical CPU (about 10 µs), and the second state moves a
//! hand-off's throughput 2–5× and reorders the allocators (one that reuses
//! a freed object on the same CPU wins while the two threads share one).
//! Rotating the order and filtering afterwards keeps comparisons honest
//! but, in a busy period, leaves few runs to compare.
//!
//! The gate uses the quiet minutes instead: before each cross-thread run
//! it times round trips until one is below the limit (waiting at most a
//! bound), runs, and when the run's own probes (before and after its
//! window) say the vCPUs were apart, runs it again, a bounded number of
//! times. Every attempt is kept: the run it reports carries the values and
//! round trips of the attempts it replaced, and a run still noisy after
//! the last attempt is reported as it is (the report's own quiet filter
//! still applies).

use std::time::{Duration, Instant};

use sheafalloc_bench::record::Record;

/// Attempts at a quiet run, the first included.
pub const ATTEMPTS: usize = 3;
/// Time between two probes while waiting.
const PROBE_EVERY: Duration = Duration::from_millis(250);

/// The gate's settings (`--quiet-below NS`, `--quiet-wait S`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuietGate {
    /// A round trip at or below this many nanoseconds counts as quiet.
    pub below_ns: f64,
    /// The longest wait for a quiet probe before one attempt.
    pub max_wait: Duration,
}

/// What waiting for a quiet probe found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waited {
    /// Whether a probe was quiet before the bound.
    pub quiet: bool,
    /// The last probe's round trip, ns.
    pub last_ns: f64,
    /// How long the wait took.
    pub waited: Duration,
}

/// A clock and a probe, so the gate's decisions can be replayed from a
/// recorded sequence of round trips.
pub trait Host {
    /// Times a core-to-core round trip, ns.
    fn round_trip_ns(&mut self) -> f64;
    /// Waits `pause` (the host keeps running meanwhile).
    fn pause(&mut self, pause: Duration);
    /// Time since the gate started.
    fn elapsed(&self) -> Duration;
}

/// This machine: the ping-pong probe, a real sleep, a real clock.
pub struct ThisMachine {
    started: Instant,
}

impl ThisMachine {
    /// The machine, its clock started now.
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
        }
    }
}

impl Default for ThisMachine {
    fn default() -> Self {
        Self::new()
    }
}

impl Host for ThisMachine {
    fn round_trip_ns(&mut self) -> f64 {
        // As the workloads' own probe: 10 timed batches of 200, under 30 ms
        // even when the two threads share a CPU.
        sheafalloc_bench::sync::pingpong::round_trip_ns_with(11, 200)
    }

    fn pause(&mut self, pause: Duration) {
        std::thread::sleep(pause);
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl QuietGate {
    /// Whether a round trip of `ns` is quiet (a missing one is not).
    pub fn is_quiet(&self, ns: f64) -> bool {
        ns.is_finite() && ns <= self.below_ns
    }

    /// Probes until a round trip is quiet or `max_wait` has passed.
    pub fn wait(&self, host: &mut impl Host) -> Waited {
        let start = host.elapsed();
        loop {
            let ns = host.round_trip_ns();
            let waited = host.elapsed().saturating_sub(start);
            if self.is_quiet(ns) || waited >= self.max_wait {
                return Waited {
                    quiet: self.is_quiet(ns),
                    last_ns: ns,
                    waited,
                };
            }
            host.pause(PROBE_EVERY);
        }
    }

    /// Runs `run` behind the gate: waits for a quiet probe, runs, and runs
    /// again (at most [`ATTEMPTS`] in all) while the run's own round trip
    /// (`rtt_ns`, the worse of its probes) is not quiet. Returns the last
    /// run, with the gate's fields added:
    ///
    /// * `gate_ns`: the limit;
    /// * `gate_attempts`: runs made;
    /// * `gate_wait_s`: seconds spent waiting for quiet probes;
    /// * `gate_quiet`: whether the reported run was quiet;
    /// * `gate_replaced`: `value@rtt` of every run it replaced, `;`-separated
    ///   (`-` if none).
    ///
    /// A failed run is returned at once, as it is.
    pub fn run(
        &self,
        host: &mut impl Host,
        mut run: impl FnMut() -> Result<Record, String>,
    ) -> Result<Record, String> {
        let mut waited = Duration::ZERO;
        let mut replaced: Vec<String> = Vec::new();
        let mut attempt = 0;
        loop {
            attempt += 1;
            waited += self.wait(host).waited;
            let mut record = run()?;
            let rtt = record.number("rtt_ns");
            let quiet = self.is_quiet(rtt);
            if quiet || attempt >= ATTEMPTS {
                record
                    .set_f64("gate_ns", self.below_ns, 0)
                    .set("gate_attempts", attempt)
                    .set_f64("gate_wait_s", waited.as_secs_f64(), 1)
                    .set("gate_quiet", quiet)
                    .set(
                        "gate_replaced",
                        if replaced.is_empty() {
                            "-".to_owned()
                        } else {
                            replaced.join(";")
                        },
                    );
                return Ok(record);
            }
            replaced.push(format!("{}@{rtt:.0}", record.get("value").unwrap_or("?")));
        }
    }

    /// The gate's words in a report's provenance.
    pub fn describe(&self) -> String {
        format!(
            "cross-thread runs gated: each waited (at most {:.0} s) for a core-to-core round trip \
             ≤ {:.0} ns and was rerun (at most {ATTEMPTS} runs) while its own was above it",
            self.max_wait.as_secs_f64(),
            self.below_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded host: probes answer from `probes` in turn (the last one
    /// repeats), each probe takes 20 ms and each pause its length.
    struct Recorded {
        probes: Vec<f64>,
        next: usize,
        now: Duration,
    }

    impl Recorded {
        fn new(probes: &[f64]) -> Self {
            Self {
                probes: probes.to_vec(),
                next: 0,
                now: Duration::ZERO,
            }
        }
    }

    impl Host for Recorded {
        fn round_trip_ns(&mut self) -> f64 {
            self.now += Duration::from_millis(20);
            let ns = self.probes[self.next.min(self.probes.len() - 1)];
            self.next += 1;
            ns
        }
        fn pause(&mut self, pause: Duration) {
            self.now += pause;
        }
        fn elapsed(&self) -> Duration {
            self.now
        }
    }

    fn gate() -> QuietGate {
        QuietGate {
            below_ns: 1000.0,
            max_wait: Duration::from_secs(10),
        }
    }

    fn result(value: f64, rtt: f64) -> Result<Record, String> {
        Ok(Record::parse_line(&format!("result value={value} rtt_ns={rtt}")).expect("a line"))
    }

    #[test]
    fn waits_through_busy_probes_for_a_quiet_one() {
        let mut host = Recorded::new(&[9800.0, 11000.0, 450.0, 70.0]);
        let waited = gate().wait(&mut host);
        assert!(waited.quiet);
        assert_eq!(waited.last_ns, 450.0);
        assert_eq!(host.next, 3, "stops at the first quiet probe");
        // Two pauses and three probes.
        assert_eq!(waited.waited, Duration::from_millis(2 * 250 + 3 * 20));
    }

    #[test]
    fn gives_up_waiting_after_the_bound() {
        let mut host = Recorded::new(&[9800.0]);
        let waited = gate().wait(&mut host);
        assert!(!waited.quiet);
        assert!(waited.waited >= Duration::from_secs(10));
        assert!(waited.waited < Duration::from_secs(11));
    }

    #[test]
    fn a_quiet_run_is_kept_at_once() {
        let mut host = Recorded::new(&[70.0]);
        let mut runs = 0;
        let record = gate()
            .run(&mut host, || {
                runs += 1;
                result(13.4, 66.0)
            })
            .expect("a record");
        assert_eq!(runs, 1);
        assert_eq!(record.get("gate_attempts"), Some("1"));
        assert_eq!(record.get("gate_quiet"), Some("true"));
        assert_eq!(record.get("gate_replaced"), Some("-"));
        assert_eq!(record.number("value"), 13.4);
    }

    #[test]
    fn a_noisy_run_is_rerun_and_kept_in_the_record() {
        let mut host = Recorded::new(&[70.0]);
        let mut answers = vec![result(3.7, 10474.0), result(11.2, 495.0)].into_iter();
        let record = gate()
            .run(&mut host, || answers.next().expect("two runs"))
            .expect("a record");
        assert_eq!(record.get("gate_attempts"), Some("2"));
        assert_eq!(record.get("gate_quiet"), Some("true"));
        assert_eq!(record.get("gate_replaced"), Some("3.7@10474"));
        assert_eq!(record.number("value"), 11.2);
    }

    #[test]
    fn the_last_attempt_is_reported_even_if_noisy() {
        let mut host = Recorded::new(&[70.0]);
        let mut runs = 0;
        let record = gate()
            .run(&mut host, || {
                runs += 1;
                result(runs as f64, 9700.0)
            })
            .expect("a record");
        assert_eq!(runs, ATTEMPTS);
        assert_eq!(record.get("gate_quiet"), Some("false"));
        assert_eq!(record.get("gate_replaced"), Some("1@9700;2@9700"));
        assert_eq!(record.number("value"), ATTEMPTS as f64);
    }

    #[test]
    fn a_run_without_a_round_trip_is_not_quiet_and_a_failure_stops() {
        assert!(!gate().is_quiet(f64::NAN));
        let mut host = Recorded::new(&[70.0]);
        let mut runs = 0;
        let outcome = gate().run(&mut host, || {
            runs += 1;
            Err("exited with 1".to_owned())
        });
        assert_eq!(outcome.err().as_deref(), Some("exited with 1"));
        assert_eq!(runs, 1);
    }
}
