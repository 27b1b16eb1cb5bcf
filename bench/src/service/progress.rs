//! The measurement window shared by every timed workload.
//!
//! Workers count their completed operations in counters of their own (one
//! writer each, on separate cache lines, so counting costs a plain store)
//! and poll `stopped()` between bursts. The main thread sleeps through a
//! warm-up, reads the sum and the time, sleeps through the measured
//! duration, reads them again and then tells the workers to stop: start-up,
//! warm-up and draining at the end are outside the window.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a run warms up and then measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Untimed seconds before the window opens.
    pub warmup: f64,
    /// Measured seconds.
    pub seconds: f64,
}

/// A counter alone on its cache line.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded(AtomicU64);

/// The counters of one run.
#[derive(Debug)]
pub struct Progress {
    counters: Box<[Padded]>,
    open: AtomicBool,
    stop: AtomicBool,
}

/// What the window saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Operations completed inside the window.
    pub operations: u64,
    /// Its length in seconds.
    pub seconds: f64,
}

impl Window {
    /// Million operations per second.
    pub fn millions_per_second(&self) -> f64 {
        self.per_second() / 1e6
    }

    /// Operations per second.
    pub fn per_second(&self) -> f64 {
        self.operations as f64 / self.seconds
    }

    /// Nanoseconds per operation.
    pub fn nanoseconds_per_operation(&self) -> f64 {
        self.seconds * 1e9 / self.operations as f64
    }
}

impl Progress {
    /// Counters for `workers` workers, all zero.
    pub fn new(workers: usize) -> Self {
        Self {
            counters: (0..workers).map(|_| Padded::default()).collect(),
            open: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        }
    }

    /// Worker `worker` has now completed `total` operations in all. Only
    /// that worker may call this for its index.
    #[inline]
    pub fn record(&self, worker: usize, total: u64) {
        self.counters[worker].0.store(total, Ordering::Relaxed);
    }

    /// Whether the window has closed (workers should finish).
    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether the window has opened (the warm-up is over): for what a
    /// worker observes of the window alone, besides its count.
    #[inline]
    pub fn opened(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Tells the workers to finish now (also on an early error).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Operations completed so far by all workers.
    pub fn total(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Sleeps through the warm-up and the window, then stops the workers;
    /// returns what the window saw. Call on a thread that is not a worker.
    pub fn measure(&self, budget: &Budget) -> Window {
        std::thread::sleep(Duration::from_secs_f64(budget.warmup));
        super::global::window_edge();
        let (start, before) = (Instant::now(), self.total());
        self.open.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs_f64(budget.seconds));
        let (seconds, after) = (start.elapsed().as_secs_f64(), self.total());
        super::global::window_edge();
        self.stop();
        Window {
            operations: after - before,
            seconds,
        }
    }
}
