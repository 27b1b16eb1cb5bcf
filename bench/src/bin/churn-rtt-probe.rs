//! A two-thread churn timed beside the host's core-to-core round trip:
//! the probe behind "Sheaves that share a page" in `docs/PERFORMANCE.md`.
//!
//! ```text
//! churn-rtt-probe [SEGMENTS] [SIZE] [WARMUP_S]
//! # defaults: 4 256 6; run it a dozen times, as shipped and with other
//! # builds or settings in turn, and compare runs whose round trip agrees
//! ```
//!
//! Two threads each churn bursts of 256 buffers of `SIZE` bytes (allocate,
//! write a 64-byte header, free in allocation order reading the size
//! back: the shape of `wl-sheafalloc churn-SIZEx256`) for a warm-up. Then
//! they bounce a cache line between them 20,000 times, which times the
//! round trip between the two CPUs the host gave them now (about 50 ns
//! when they share a core complex, 350 ns and more when they do not), and
//! then each times `SEGMENTS` segments of 20,000 bursts. One line per
//! thread: the round trip, then ns per buffer per segment, with the CPU it
//! ran on. A thread whose partner has finished runs its last segments
//! alone (those read as a thread with no neighbour).
//!
//! No buffer crosses threads, and the burst array is on each thread's
//! stack, so a thread's time depends on its own buffers and sheaves and on
//! what lies next to them: where the round trip is long, a line that the
//! prefetchers pull from the other core costs a round trip each time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use sheafalloc_bench::probe::{arg, burst, HEADER};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const BURST: usize = 256;
const BURSTS_PER_SEGMENT: u32 = 20_000;
const BOUNCES: u64 = 20_000;

/// A counter alone on its cache line pair.
#[repr(align(128))]
struct Ball(AtomicU64);

/// Bounces `ball` with the other thread `BOUNCES` times; ns per round trip.
fn round_trip(ball: &Ball, thread: u64) -> f64 {
    let start = Instant::now();
    for i in 0..BOUNCES {
        let (wait_for, write) = if thread == 0 {
            (2 * i, 2 * i + 1)
        } else {
            (2 * i + 1, 2 * i + 2)
        };
        while ball.0.load(Ordering::Acquire) != wait_for {
            std::hint::spin_loop();
        }
        ball.0.store(write, Ordering::Release);
    }
    start.elapsed().as_nanos() as f64 / BOUNCES as f64
}

fn main() {
    let segments = arg(1, 4);
    let size = arg(2, 256) as usize;
    let warmup = Duration::from_secs(arg(3, 6));
    assert!(size >= HEADER, "SIZE >= {HEADER}");
    let ball = Ball(AtomicU64::new(0));
    let gate = Barrier::new(2);
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (ball, gate) = (&ball, &gate);
            s.spawn(move || {
                let mut buffers = [std::ptr::null_mut::<u8>(); BURST];
                let end = Instant::now() + warmup;
                while Instant::now() < end {
                    burst(&mut buffers, size);
                }
                gate.wait();
                let rtt = round_trip(ball, thread);
                gate.wait();
                let mut line = format!("thread {thread}: round trip {rtt:.0} ns; ns per buffer:");
                for _ in 0..segments {
                    let start = Instant::now();
                    for _ in 0..BURSTS_PER_SEGMENT {
                        burst(&mut buffers, size);
                    }
                    let ns = start.elapsed().as_nanos() as f64
                        / (f64::from(BURSTS_PER_SEGMENT) * BURST as f64);
                    // SAFETY: `sched_getcpu` has no preconditions.
                    let cpu = unsafe { libc::sched_getcpu() };
                    line.push_str(&format!(" {ns:.2} (cpu {cpu})"));
                }
                println!("{line}");
            });
        }
    });
}
