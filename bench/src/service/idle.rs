//! Idle threads: how much memory threads keep after they went quiet.
//!
//! 256 threads each handle one burst — 64 packet buffers of 2112 B and
//! 256 socket-buffer heads of 256 B, every byte written, all freed — and
//! then wait, alive, on a barrier. RSS (`/proc/self/statm`) is read before
//! the threads start and once all of them are idle; the result is the
//! growth in MiB (lower is better). An allocator that caches per thread
//! strands up to its per-thread caches in every idle thread; one that
//! caches per CPU holds at most its per-CPU caches.

use std::sync::{Arc, Barrier};

use super::os;

/// Threads that go idle.
pub const THREADS: usize = 256;

/// The outcome.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// RSS before the threads started, bytes.
    pub before: u64,
    /// RSS with every thread idle, bytes.
    pub idle: u64,
    /// Bytes written and checked by the threads' bursts.
    pub checked: u64,
}

/// One thread's burst: allocate, write, check, free.
fn burst(seed: u8) -> u64 {
    let packets: Vec<Vec<u8>> = (0..64).map(|i| vec![seed ^ i as u8; 2112]).collect();
    let heads: Vec<Vec<u8>> = (0..256)
        .map(|i| vec![seed.wrapping_add(i as u8); 256])
        .collect();
    let mut checked = 0u64;
    for (i, packet) in packets.iter().enumerate() {
        assert!(
            packet.iter().all(|&b| b == seed ^ i as u8),
            "packet corrupted"
        );
        checked += packet.len() as u64;
    }
    for (i, head) in heads.iter().enumerate() {
        assert!(
            head.iter().all(|&b| b == seed.wrapping_add(i as u8)),
            "head corrupted"
        );
        checked += head.len() as u64;
    }
    checked
}

/// Runs the workload.
pub fn run() -> Outcome {
    let before = os::rss_bytes().unwrap_or(0);
    let idle = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (idle, done) = (Arc::clone(&idle), Arc::clone(&done));
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let checked = burst(t as u8);
                    idle.wait();
                    done.wait();
                    checked
                })
                .expect("a thread starts")
        })
        .collect();
    idle.wait();
    let at_idle = os::rss_bytes().unwrap_or(0);
    done.wait();
    let checked = threads
        .into_iter()
        .map(|thread| thread.join().expect("a thread failed"))
        .sum();
    Outcome {
        before,
        idle: at_idle,
        checked,
    }
}
