//! `suite --quiet-wait S`: before each cross-thread run, wait (up to S
//! seconds) until a core-to-core round trip shows the two vCPUs running at
//! once. On this kind of host the placement changes every few seconds to
//! minutes, and a run taken with the vCPUs apart measures the host, not
//! the allocator. Every allocator waits by the same rule, so the wait
//! selects no allocator's runs; the run still times its own round trips
//! before and after, and each record says how long it waited.

use std::time::Duration;

/// A round trip at most this long means the two threads ran on two vCPUs
/// at once (70–200 ns on this host; several µs when they take turns).
pub const QUIET_NS: f64 = 200.0;

/// Pause between probes.
const PAUSE: Duration = Duration::from_secs(1);

/// What a wait found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wait {
    /// Seconds spent waiting (probes and pauses).
    pub waited: f64,
    /// The last round trip measured, in ns.
    pub rtt_ns: f64,
    /// Whether it was quiet (false: the limit ran out).
    pub quiet: bool,
}

/// Probes the host's round trip until it is quiet or `limit` has passed.
pub fn wait_for_quiet(limit: Duration) -> Wait {
    let started = std::time::Instant::now();
    wait_until(
        || sheafalloc_bench::sync::pingpong::round_trip_ns_with(11, 200),
        std::thread::sleep,
        || started.elapsed(),
        limit,
    )
}

/// The rule, with the probe, the pause and the clock passed in.
fn wait_until(
    mut probe: impl FnMut() -> f64,
    mut pause: impl FnMut(Duration),
    elapsed: impl Fn() -> Duration,
    limit: Duration,
) -> Wait {
    loop {
        let rtt_ns = probe();
        let quiet = rtt_ns <= QUIET_NS;
        if quiet || elapsed() + PAUSE > limit {
            return Wait {
                waited: elapsed().as_secs_f64(),
                rtt_ns,
                quiet,
            };
        }
        pause(PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Runs the rule on scripted round trips with a clock that only the
    /// pauses (and 30 ms per probe) move.
    fn scripted(rtts: &[f64], limit_s: u64) -> (Wait, usize) {
        let now = Cell::new(Duration::ZERO);
        let probes = Cell::new(0);
        let wait = wait_until(
            || {
                let i = probes.get();
                probes.set(i + 1);
                now.set(now.get() + Duration::from_millis(30));
                rtts[i.min(rtts.len() - 1)]
            },
            |d| now.set(now.get() + d),
            || now.get(),
            Duration::from_secs(limit_s),
        );
        (wait, probes.get())
    }

    #[test]
    fn a_quiet_host_is_not_waited_for() {
        let (wait, probes) = scripted(&[80.0], 60);
        assert!(wait.quiet && probes == 1 && wait.waited < 0.1, "{wait:?}");
    }

    #[test]
    fn it_waits_until_the_round_trip_is_quiet() {
        let (wait, probes) = scripted(&[12000.0, 450.0, 9000.0, 150.0, 80.0], 60);
        assert_eq!(probes, 4);
        assert!(wait.quiet);
        assert_eq!(wait.rtt_ns, 150.0);
        assert!((3.0..3.2).contains(&wait.waited), "{wait:?}");
    }

    #[test]
    fn it_gives_up_at_the_limit() {
        let (wait, probes) = scripted(&[12000.0], 5);
        assert!(!wait.quiet);
        assert!(wait.waited <= 5.0, "{wait:?}");
        assert!(probes >= 4, "{probes} probes in 5 s");
    }
}
