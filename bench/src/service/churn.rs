//! Same-thread churn: what a NIC driver's receive path does to an
//! allocator.
//!
//! On each of two threads (two CPUs taking interrupts), a poll allocates a
//! burst of buffers of one size, writes a header into each, and the stack
//! frees them in arrival order before the next poll. Sizes: 256 B (a
//! socket-buffer head) and 2112 B (1500-byte MTU + headroom + shared info).
//! Bursts: 64 (a NAPI budget, which the default sheaf capacities were
//! sized for), and 16, 100 and 256, which equal no default capacity: 100
//! and 256 overflow a thread's two sheaves of 2112-byte buffers, 256
//! overflows those of 256-byte heads too. No object crosses threads.
//! Reports million objects (allocation + free) per second, both threads
//! together.

use std::hint::black_box;

use super::object;
use super::progress::{Budget, Progress, Window};

/// Threads, each churning on its own.
pub const THREADS: usize = 2;
/// The largest burst.
pub const MAX_BURST: usize = 256;

/// Runs the churn with bursts of `burst` buffers of `size` bytes.
pub fn run(size: usize, burst: usize, budget: &Budget) -> Window {
    assert!((1..=MAX_BURST).contains(&burst));
    let progress = Progress::new(THREADS);
    let progress = &progress;
    std::thread::scope(|s| {
        for worker in 0..THREADS {
            s.spawn(move || churn(progress, worker, size, burst));
        }
        progress.measure(budget)
    })
}

fn churn(progress: &Progress, worker: usize, size: usize, burst: usize) {
    let mut buffers = [std::ptr::null_mut::<u8>(); MAX_BURST];
    let buffers = &mut buffers[..burst];
    let mut done = 0u64;
    while !progress.stopped() {
        for (i, slot) in buffers.iter_mut().enumerate() {
            *slot = object::new(size, i as u8);
        }
        for &buffer in black_box(&*buffers).iter() {
            // SAFETY: allocated just above by this thread, freed once.
            unsafe { object::free(buffer) };
        }
        done += burst as u64;
        progress.record(worker, done);
    }
}
