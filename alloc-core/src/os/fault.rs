//! Fault injection for the OS mapping calls (feature `fault-injection`).
//!
//! Tests arm a countdown: after `skip` more successful calls of the chosen
//! kind, the next `count` calls fail as if the kernel had refused them. With
//! the feature off every check is a constant `false` and compiles away.

#[cfg(feature = "fault-injection")]
use core::sync::atomic::{AtomicU64, Ordering};

/// Which OS operation a fault is injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum FaultPoint {
    /// Making reserved address space usable (`mprotect`), i.e. new slabs.
    Commit = 0,
    /// Fresh mappings: large objects and metadata blocks.
    Map = 1,
    /// Returning pages to the OS (`madvise(MADV_DONTNEED)`).
    Return = 2,
}

#[cfg(feature = "fault-injection")]
static SKIP: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
#[cfg(feature = "fault-injection")]
static FAIL: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// Arms `point`: the next `skip` calls succeed, then `count` calls fail.
#[cfg(feature = "fault-injection")]
pub fn inject(point: FaultPoint, skip: u64, count: u64) {
    if let Some((skips, fails)) = countdown(point) {
        skips.store(skip, Ordering::SeqCst);
        fails.store(count, Ordering::SeqCst);
    }
}

/// Disarms every fault point.
#[cfg(feature = "fault-injection")]
pub fn clear() {
    for (fails, skips) in FAIL.iter().zip(&SKIP) {
        fails.store(0, Ordering::SeqCst);
        skips.store(0, Ordering::SeqCst);
    }
}

/// The skip and fail countdowns of `point` (always present: the tables
/// have an entry per `FaultPoint`).
#[cfg(feature = "fault-injection")]
fn countdown(point: FaultPoint) -> Option<(&'static AtomicU64, &'static AtomicU64)> {
    Some((SKIP.get(point as usize)?, FAIL.get(point as usize)?))
}

/// True if this call of `point` must fail.
#[cfg(feature = "fault-injection")]
pub(crate) fn should_fail(point: FaultPoint) -> bool {
    let Some((skips, fails)) = countdown(point) else {
        return false;
    };
    if fails.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let skipped = skips
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| s.checked_sub(1))
        .is_ok();
    if skipped {
        return false;
    }
    fails
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
        .is_ok()
}

/// Without the feature no call ever fails artificially.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn should_fail(_point: FaultPoint) -> bool {
    false
}

#[cfg(feature = "fault-injection")]
static INIT_PAUSE_MS: AtomicU64 = AtomicU64::new(0);

/// Makes the next one-time initialisation pause for `ms` milliseconds in
/// its middle (after the arena is reserved), so a test can `fork()` while
/// another thread is initialising.
#[cfg(feature = "fault-injection")]
pub fn pause_next_init(ms: u64) {
    INIT_PAUSE_MS.store(ms, Ordering::SeqCst);
}

/// The pause `pause_next_init` asked for, once.
#[cfg(not(loom))]
pub(crate) fn pause_in_init() {
    #[cfg(feature = "fault-injection")]
    {
        let ms = INIT_PAUSE_MS.swap(0, Ordering::SeqCst);
        if ms > 0 {
            super::sleep_ms(ms);
        }
    }
}
