//! Waiting for another thread: spin briefly, then yield the CPU.
//!
//! On a 2-vCPU host shared with other work, the thread being waited for may
//! not be running at all; yielding after a short spin lets it run instead of
//! burning its time slice.

/// Spins this many times before starting to yield.
const SPINS_BEFORE_YIELD: u32 = 128;

/// The state of one wait.
#[derive(Debug, Default)]
pub struct Backoff {
    attempts: u32,
}

impl Backoff {
    /// A fresh wait.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits a little: a CPU spin hint at first, then `yield_now`.
    #[inline]
    pub fn snooze(&mut self) {
        if self.attempts < SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        self.attempts = self.attempts.saturating_add(1);
    }
}
