//! A futex-based mutex and a data-carrying wrapper.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::os;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A mutual-exclusion lock without data.
///
/// Invariant: `state` is `UNLOCKED`, `LOCKED` (held, nobody sleeps) or
/// `CONTENDED` (held, sleepers may exist and must be woken on unlock).
#[derive(Debug)]
pub struct RawLock {
    state: AtomicU32,
}

impl RawLock {
    /// An unlocked lock.
    pub const fn new() -> Self {
        Self {
            state: AtomicU32::new(UNLOCKED),
        }
    }

    /// Acquires the lock, spinning briefly and then sleeping on the futex.
    #[inline]
    pub fn lock(&self) {
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
            os::futex_wait(&self.state, CONTENDED);
        }
    }

    /// Tries to acquire the lock without waiting.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// 1. The calling thread holds the lock (acquired by `lock`/`try_lock`
    ///    and not yet released).
    #[inline]
    pub unsafe fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            os::futex_wake(&self.state, 1);
        }
    }

    /// Forces the lock to the unlocked state.
    ///
    /// # Safety
    ///
    /// 1. No thread may be inside the critical section: used only in a
    ///    `fork()` child for locks that the forking thread acquired in the
    ///    prepare handler.
    pub unsafe fn force_unlock(&self) {
        self.state.store(UNLOCKED, Ordering::Release);
    }

    /// True while some thread holds the lock (for assertions only).
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}

impl Default for RawLock {
    fn default() -> Self {
        Self::new()
    }
}

/// A value guarded by a [`RawLock`].
///
/// Invariant: `value` is only reached through a [`MutexGuard`], which exists
/// only while `lock` is held by the guard's thread.
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
    /// A new unlocked value.
    pub const fn new(value: T) -> Self {
        Self {
            lock: RawLock::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks and returns a guard that unlocks on drop.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.lock.lock();
        MutexGuard { owner: self }
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
    ///    can touch the value (e.g. a `fork()` child before it unlocks).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_unchecked(&self) -> &mut T {
        // SAFETY: duty 1 of the caller gives exclusive access.
        unsafe { &mut *self.value.get() }
    }
}

/// Proof that a [`Mutex`] is held; unlocks on drop.
pub struct MutexGuard<'a, T> {
    owner: &'a Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while the lock is held (type
        // invariant of `Mutex`), so no other reference is live.
        unsafe { &*self.owner.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        unsafe { &mut *self.owner.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard's thread acquired the lock in `Mutex::lock`.
        unsafe { self.owner.lock.unlock() }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn lock_serialises_increments() {
        let counter = Arc::new(Mutex::new(0u64));
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
        let lock = RawLock::new();
        lock.lock();
        assert!(!lock.try_lock());
        // SAFETY: this thread holds the lock.
        unsafe { lock.unlock() };
        assert!(lock.try_lock());
        // SAFETY: acquired just above.
        unsafe { lock.unlock() };
        assert!(!lock.is_locked());
    }
}
