//! Small-head churn: what a NIC driver's receive path does to an allocator.
//!
//! On each of two threads (two CPUs taking interrupts), a NAPI poll
//! allocates a budget of 64 buffers of one size, writes a header into each,
//! and the stack frees them in arrival order before the next poll. Sizes:
//! 256 B (a socket-buffer head) and 2112 B (1500-byte MTU + headroom +
//! shared info). No object crosses threads. Reports million objects
//! (allocation + free) per second, both threads together.

use std::hint::black_box;

use super::object;
use super::progress::{Budget, Progress, Window};

/// Threads, each churning on its own.
pub const THREADS: usize = 2;
/// Allocations per poll (the NAPI budget).
pub const BURST: usize = 64;

/// Runs the churn with `size`-byte buffers.
pub fn run(size: usize, budget: &Budget) -> Window {
    let progress = Progress::new(THREADS);
    let progress = &progress;
    std::thread::scope(|s| {
        for worker in 0..THREADS {
            s.spawn(move || churn(progress, worker, size));
        }
        progress.measure(budget)
    })
}

fn churn(progress: &Progress, worker: usize, size: usize) {
    let mut burst = [std::ptr::null_mut::<u8>(); BURST];
    let mut done = 0u64;
    while !progress.stopped() {
        for (i, slot) in burst.iter_mut().enumerate() {
            *slot = object::new(size, i as u8);
        }
        for &buffer in black_box(&burst).iter() {
            // SAFETY: allocated just above by this thread, freed once.
            unsafe { object::free(buffer) };
        }
        done += BURST as u64;
        progress.record(worker, done);
    }
}
