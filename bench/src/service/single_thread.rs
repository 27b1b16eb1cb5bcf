//! The single-thread loops of [`crate::kernels`] run with the binary's own
//! global allocator, timed over the run's window: alloc+free pairs of
//! 16..512 B, and FIFO batches of 4096 objects.
//!
//! The loop runs in chunks: chunks through the warm-up are not counted;
//! then chunks run until the window's length has passed, and the report is
//! the time per operation over the counted chunks.

use std::time::Instant;

use super::progress::{Budget, Window};
use crate::kernels::{fifo, pairs, BinaryAllocator};

/// Pairs per chunk (a few milliseconds).
const PAIRS_PER_CHUNK: usize = 500_000;
/// FIFO batches per chunk.
const BATCHES_PER_CHUNK: usize = 40;

/// Alloc+free pairs; the window counts pairs.
pub fn pairs(budget: &Budget) -> Window {
    timed(budget, PAIRS_PER_CHUNK as u64, || {
        pairs::run(&BinaryAllocator, PAIRS_PER_CHUNK);
    })
}

/// FIFO batches of `size`-byte objects; the window counts objects.
pub fn fifo(size: usize, budget: &Budget) -> Window {
    timed(budget, (BATCHES_PER_CHUNK * fifo::BATCH) as u64, || {
        fifo::run(&BinaryAllocator, size, BATCHES_PER_CHUNK);
    })
}

/// Runs `chunk` (which does `per_chunk` operations) through the warm-up,
/// then through the window.
pub(crate) fn timed(budget: &Budget, per_chunk: u64, mut chunk: impl FnMut()) -> Window {
    let warmup = Instant::now();
    loop {
        chunk();
        if warmup.elapsed().as_secs_f64() >= budget.warmup {
            break;
        }
    }
    let start = Instant::now();
    let mut operations = 0;
    loop {
        chunk();
        operations += per_chunk;
        let seconds = start.elapsed().as_secs_f64();
        if seconds >= budget.seconds {
            return Window {
                operations,
                seconds,
            };
        }
    }
}
