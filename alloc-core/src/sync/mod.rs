//! Synchronisation primitives that never allocate, and the lock order.
//!
//! [`RawLock`] is a three-state futex mutex (Drepper, "Futexes Are Tricky"):
//! const-constructible, fork-safe when held across `fork()` by the forking
//! thread, and free of the global allocator. `std::sync::Mutex` and
//! parking_lot are not used on allocation paths: parking_lot allocates its
//! parking table on first contention.
//!
//! Every lock has a [`LockRank`]; in debug builds each acquisition is
//! checked against the locks the thread already holds (`lockdep`), so a
//! path that could deadlock with another — or with the fork handlers, which
//! take every lock — aborts the test that runs it, the first time it runs,
//! whether or not the deadlock happens.
//!
//! # Under loom
//!
//! With `--cfg loom` the lock is built on loom's atomics (a contended lock
//! yields to loom instead of sleeping on a futex) and a [`Mutex`]'s value
//! sits in loom's `UnsafeCell`, so the models in `tests/loom.rs` check the
//! real lock and every access to a barn through it. Lock ranks are not
//! checked under loom (its threads share one OS thread's thread-locals).

mod lock;
#[cfg(all(debug_assertions, not(loom)))]
mod lockdep;
mod rank;

pub use lock::{Mutex, MutexGuard, RawLock};
pub use rank::LockRank;

/// The held-lock checks of debug builds (no-ops in release and loom).
pub(crate) mod order {
    use super::LockRank;

    /// Checks that `rank` (lock at `address`) may be taken now; records it.
    #[inline(always)]
    pub(crate) fn acquire(rank: LockRank, address: usize) {
        #[cfg(all(debug_assertions, not(loom)))]
        super::lockdep::acquire(rank, address);
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = (rank, address);
    }

    /// Records a lock taken without waiting (`try_lock`): it cannot
    /// deadlock, so only what is taken while it is held is checked.
    #[inline(always)]
    pub(crate) fn acquired_without_waiting(rank: LockRank, address: usize) {
        #[cfg(all(debug_assertions, not(loom)))]
        super::lockdep::record(rank, address);
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = (rank, address);
    }

    /// Records the release of a lock of `rank`.
    #[inline(always)]
    pub(crate) fn release(rank: LockRank) {
        #[cfg(all(debug_assertions, not(loom)))]
        super::lockdep::release(rank);
        #[cfg(not(all(debug_assertions, not(loom))))]
        let _ = rank;
    }

    /// Locks of any rank the calling thread holds (debug builds; 0 in
    /// release). For assertions such as "no lock is held here".
    pub fn held_by_this_thread() -> u32 {
        #[cfg(all(debug_assertions, not(loom)))]
        return super::lockdep::held();
        #[cfg(not(all(debug_assertions, not(loom))))]
        0
    }
}

pub use order::held_by_this_thread;
