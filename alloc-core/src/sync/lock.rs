//! A futex-based mutex with a rank, and a data-carrying wrapper.

use core::ops::{Deref, DerefMut};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU32, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, Ordering};

use super::order;
use super::LockRank;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A mutual-exclusion lock without data.
///
/// Invariant: `state` is `UNLOCKED`, `LOCKED` (held, nobody sleeps) or
/// `CONTENDED` (held, sleepers may exist and must be woken on unlock).
/// `rank` never changes; see [`LockRank`] for the order locks are taken in.
#[derive(Debug)]
pub struct RawLock {
    state: AtomicU32,
    rank: LockRank,
}

impl RawLock {
    /// An unlocked lock of `rank`.
    #[cfg(not(loom))]
    pub const fn new(rank: LockRank) -> Self {
        Self {
            state: AtomicU32::new(UNLOCKED),
            rank,
        }
    }

    /// An unlocked lock of `rank` (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new(rank: LockRank) -> Self {
        Self {
            state: AtomicU32::new(UNLOCKED),
            rank,
        }
    }

    /// The lock's rank.
    pub fn rank(&self) -> LockRank {
        self.rank
    }

    fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// Acquires the lock, spinning briefly and then sleeping on the futex.
    #[inline]
    pub fn lock(&self) {
        order::acquire(self.rank, self.address());
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    #[cfg(not(loom))]
    fn lock_contended(&self) {
        for _ in 0..64 {
            core::hint::spin_loop();
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            crate::os::futex_wait(&self.state, CONTENDED);
        }
    }

    /// Under loom: the same state machine, with "sleep on the futex"
    /// replaced by a yield (a futex wait may return spuriously, so this is
    /// one of its behaviours) and without the spin phase.
    #[cfg(loom)]
    fn lock_contended(&self) {
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            loom::thread::yield_now();
        }
    }

    /// Tries to acquire the lock without waiting.
    #[inline]
    pub fn try_lock(&self) -> bool {
        let acquired = self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if acquired {
            order::acquired_without_waiting(self.rank, self.address());
        }
        acquired
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// 1. The calling thread holds the lock (acquired by `lock`/`try_lock`
    ///    and not yet released).
    #[inline]
    pub unsafe fn unlock(&self) {
        order::release(self.rank);
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            #[cfg(not(loom))]
            crate::os::futex_wake(&self.state, 1);
        }
    }

    /// Forces the lock to the unlocked state.
    ///
    /// # Safety
    ///
    /// 1. No thread may hold the lock or be inside its critical section:
    ///    used only in a `fork()` child, for locks a thread of the parent
    ///    (which does not exist in the child) may have held at the fork.
    #[cfg(not(loom))]
    pub unsafe fn force_unlock(&self) {
        self.state.store(UNLOCKED, Ordering::Release);
    }

    /// True while some thread holds the lock (for assertions only).
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}

#[cfg(not(loom))]
use core::cell::UnsafeCell;
#[cfg(loom)]
use loom::cell::UnsafeCell;

/// A value guarded by a [`RawLock`].
///
/// Invariant: `value` is only reached through a [`MutexGuard`], which exists
/// only while `lock` is held by the guard's thread (or through
/// `get_unchecked`, whose caller proves exclusive access otherwise).
#[derive(Debug)]
pub struct Mutex<T> {
    lock: RawLock,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `lock` (type invariant), so
// sharing the wrapper between threads only ever moves `T` between threads.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: moving the wrapper moves the owned `T`.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new unlocked value guarded by a lock of `rank`.
    #[cfg(not(loom))]
    pub const fn new(rank: LockRank, value: T) -> Self {
        Self {
            lock: RawLock::new(rank),
            value: UnsafeCell::new(value),
        }
    }

    /// A new unlocked value guarded by a lock of `rank`.
    #[cfg(loom)]
    pub fn new(rank: LockRank, value: T) -> Self {
        Self {
            lock: RawLock::new(rank),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks and returns a guard that unlocks on drop.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.lock.lock();
        MutexGuard::new(self)
    }

    /// Locks if the lock is free, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.lock.try_lock().then(|| MutexGuard::new(self))
    }

    /// The raw lock, for fork handlers that hold every lock across `fork()`.
    pub fn raw(&self) -> &RawLock {
        &self.lock
    }

    /// Direct access to the value.
    ///
    /// # Safety
    ///
    /// 1. The caller holds `self.raw()` or is otherwise the only thread that
    ///    can touch the value (e.g. a `fork()` child before it unlocks), and
    ///    uses the reference only while that lasts.
    #[cfg(not(loom))]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_unchecked(&self) -> &mut T {
        // SAFETY: duty 1 of the caller gives exclusive access.
        unsafe { &mut *self.value.get() }
    }
}

/// Proof that a [`Mutex`] is held; unlocks on drop.
///
/// Under loom it also holds loom's access token for the value, so loom
/// checks that every access happens under the lock.
pub struct MutexGuard<'a, T> {
    owner: &'a Mutex<T>,
    #[cfg(loom)]
    access: loom::cell::MutPtr<T>,
}

impl<'a, T> MutexGuard<'a, T> {
    fn new(owner: &'a Mutex<T>) -> Self {
        Self {
            owner,
            #[cfg(loom)]
            access: owner.value.get_mut(),
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        #[cfg(not(loom))]
        // SAFETY: the guard exists only while the lock is held (type
        // invariant of `Mutex`), so no other reference is live.
        return unsafe { &*self.owner.value.get() };
        #[cfg(loom)]
        // SAFETY: as above; loom's token is held for the guard's life.
        unsafe {
            &*self.access.deref()
        }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        return unsafe { &mut *self.owner.value.get() };
        #[cfg(loom)]
        // SAFETY: as above.
        unsafe {
            self.access.deref()
        }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard's thread acquired the lock in `Mutex::lock` or
        // `Mutex::try_lock`.
        unsafe { self.owner.lock.unlock() }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn lock_serialises_increments() {
        let counter = Arc::new(Mutex::new(LockRank::Leaf, 0u64));
        let threads: std::vec::Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                thread::spawn(move || {
                    for _ in 0..50_000 {
                        *counter.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*counter.lock(), 200_000);
    }

    #[test]
    fn try_lock_fails_while_held() {
        let lock = RawLock::new(LockRank::Leaf);
        lock.lock();
        assert!(!lock.try_lock());
        // SAFETY: this thread holds the lock.
        unsafe { lock.unlock() };
        assert!(lock.try_lock());
        // SAFETY: acquired just above.
        unsafe { lock.unlock() };
        assert!(!lock.is_locked());
    }

    #[test]
    fn held_locks_are_counted_in_debug_builds() {
        let outer = Mutex::new(LockRank::Barn, ());
        let inner = Mutex::new(LockRank::Pool, ());
        let before = crate::sync::held_by_this_thread();
        {
            let _outer = outer.lock();
            let _inner = inner.lock();
            let expected = if cfg!(debug_assertions) { 2 } else { 0 };
            assert_eq!(crate::sync::held_by_this_thread() - before, expected);
        }
        assert_eq!(crate::sync::held_by_this_thread(), before);
    }
}
