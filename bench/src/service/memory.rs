//! Memory: how much a process holds at its peak and after it frees
//! everything.
//!
//! One thread allocates 256 MiB (128 MiB with `--quick`; requested bytes)
//! of small objects of random sizes, uniform in 16..512 B, writing every
//! byte, then frees them all in random order. RSS (from
//! `/proc/self/statm`) is read before, at the peak, after the frees, and
//! after the allocator's own call to give memory back (`sheafalloc::purge()`, `malloc_trim(0)`, `mi_collect(true)`,
//! jemalloc's arena purge; snmalloc has none).

use std::time::Instant;

use super::global::Global;
use super::object;
use super::os;
use super::rng::Rng;

/// Bytes requested in all.
pub const TOTAL: usize = 256 << 20;
/// Bytes requested in all with `--quick`.
pub const QUICK_TOTAL: usize = 128 << 20;
/// Object sizes, uniform.
pub const SIZES: (usize, usize) = (16, 512);

/// The outcome: RSS in bytes at each point, and the times.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Before the first allocation.
    pub baseline: u64,
    /// With everything allocated.
    pub peak: u64,
    /// After every object was freed.
    pub freed: u64,
    /// After the allocator's release call.
    pub released: u64,
    /// Objects allocated.
    pub objects: usize,
    /// Bytes requested.
    pub requested: usize,
    /// Nanoseconds per allocation (with the writes).
    pub alloc_ns: f64,
    /// Nanoseconds per free.
    pub free_ns: f64,
}

/// Runs the workload, allocating `total` bytes.
pub fn run(global: Global, total: usize) -> Outcome {
    let rss = || os::rss_bytes().unwrap_or(0);
    let mut rng = Rng::new(0x3e3);
    let mean = (SIZES.0 + SIZES.1) / 2;
    let mut objects: Vec<*mut u8> = Vec::with_capacity(total / mean + total / mean / 8);
    let baseline = rss();
    let start = Instant::now();
    let mut requested = 0;
    while requested < total {
        let size = rng.range(SIZES.0, SIZES.1);
        let object = object::new(size, 0);
        // SAFETY: a live object of ours that no other thread knows.
        unsafe { object::fill(object, requested as u8) };
        objects.push(object);
        requested += size;
    }
    let alloc_ns = start.elapsed().as_nanos() as f64 / objects.len() as f64;
    let peak = rss();
    for i in (1..objects.len()).rev() {
        objects.swap(i, rng.range(0, i));
    }
    let count = objects.len();
    let start = Instant::now();
    for object in objects.drain(..) {
        // SAFETY: every object is live, ours, and freed once.
        unsafe { object::free(object) };
    }
    let free_ns = start.elapsed().as_nanos() as f64 / count as f64;
    drop(objects);
    let freed = rss();
    global.release();
    Outcome {
        baseline,
        peak,
        freed,
        released: rss(),
        objects: count,
        requested,
        alloc_ns,
        free_ns,
    }
}
