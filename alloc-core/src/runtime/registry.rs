//! The registry of live thread caches: threads register on their first
//! slow path and unregister at exit (folding their counters into the
//! caches); statistics readers walk it under its lock.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::sync::{LockRank, Mutex};
use crate::thread_cache::records::RecordPool;
use crate::thread_cache::RecordUsage;
use crate::thread_cache::{ColdSlot, ThreadCache};

/// The live thread caches, linked through their registry fields, and the
/// pool of their per-class records.
///
/// Invariant: `head` starts a doubly linked list of the caches of every
/// `Active` thread; links are touched only under this mutex. Every record
/// a thread holds came from `records` and goes back there when it leaves
/// the list.
pub(super) struct Registry {
    pub(super) head: *mut ThreadCache,
    pub(super) threads: u64,
    threads_ever: u64,
    pub(super) records: RecordPool,
}

// SAFETY: the registry only links caches whose link fields are guarded by
// the registry mutex.
unsafe impl Send for Registry {}

pub(super) static REGISTRY: Mutex<Registry> = Mutex::new(
    LockRank::Registry,
    Registry {
        head: ptr::null_mut(),
        threads: 0,
        threads_ever: 0,
        records: RecordPool::new(),
    },
);

pub(crate) fn register(cache: &ThreadCache) {
    let this = cache as *const ThreadCache as *mut ThreadCache;
    {
        let mut registry = REGISTRY.lock();
        cache
            .registry_prev
            .store(ptr::null_mut(), Ordering::Relaxed);
        cache.registry_next.store(registry.head, Ordering::Relaxed);
        if !registry.head.is_null() {
            // SAFETY: registered caches are live (they unregister at exit)
            // and their links are guarded by the lock we hold.
            unsafe {
                (*registry.head)
                    .registry_prev
                    .store(this, Ordering::Relaxed)
            };
        }
        registry.head = this;
        registry.threads = registry.threads.wrapping_add(1);
        registry.threads_ever = registry.threads_ever.wrapping_add(1);
    }
    if let Some(key) = super::init::exit_key() {
        key.set(this.cast());
    }
}

pub(crate) fn unregister(cache: &ThreadCache) {
    let mut registry = REGISTRY.lock();
    cache.fold_counters();
    // SAFETY: we hold the registry lock; the counts are folded just now,
    // the exiting thread gave its sheaves back before, and it leaves the
    // registry below, so it takes no record again.
    unsafe { cache.give_back_records(&mut registry.records) };
    let prev = cache.registry_prev.load(Ordering::Relaxed);
    let next = cache.registry_next.load(Ordering::Relaxed);
    // SAFETY: neighbours are registered, live, and guarded by the lock.
    unsafe {
        if prev.is_null() {
            registry.head = next;
        } else {
            (*prev).registry_next.store(next, Ordering::Relaxed);
        }
        if !next.is_null() {
            (*next).registry_prev.store(prev, Ordering::Relaxed);
        }
    }
    registry.threads = registry.threads.saturating_sub(1);
}

/// Runs `read` with an iterator over every live thread cache, under the
/// registry lock: threads cannot exit (and fold their counters) meanwhile,
/// so counters read inside `read` are neither lost nor counted twice.
/// `read` must not allocate (threads take this lock on their first slow
/// path).
pub(crate) fn with_threads<R>(read: impl FnOnce(&mut dyn Iterator<Item = &ThreadCache>) -> R) -> R {
    let registry = REGISTRY.lock();
    let mut threads = ThreadIter {
        cursor: registry.head,
        _registry: core::marker::PhantomData,
    };
    read(&mut threads)
}

struct ThreadIter<'a> {
    cursor: *mut ThreadCache,
    _registry: core::marker::PhantomData<&'a Registry>,
}

impl<'a> Iterator for ThreadIter<'a> {
    type Item = &'a ThreadCache;
    fn next(&mut self) -> Option<&'a ThreadCache> {
        if self.cursor.is_null() {
            return None;
        }
        // SAFETY: registered caches stay live while registered, and the
        // registry lock (held for the iterator's lifetime by `with_threads`)
        // keeps them registered.
        let cache = unsafe { &*self.cursor };
        self.cursor = cache.registry_next.load(Ordering::Relaxed);
        Some(cache)
    }
}

/// Takes a record for a thread's class from the pool and stores it in
/// `slot`, the thread's place for it, before the registry lock is
/// released, so a reader walking the threads sees it whole. `None` if the
/// OS refuses memory for one.
pub(crate) fn take_thread_record(slot: &AtomicPtr<ColdSlot>) -> Option<NonNull<ColdSlot>> {
    let mut registry = REGISTRY.lock();
    let record = registry.records.take()?;
    slot.store(record.as_ptr(), Ordering::Relaxed);
    Some(record)
}

/// How many per-class thread records there are and what they cost (see
/// `thread_cache::records`).
pub fn thread_records() -> RecordUsage {
    REGISTRY.lock().records.usage()
}

/// Live threads with a cache, and threads that ever had one.
pub fn thread_counts() -> (u64, u64) {
    let registry = REGISTRY.lock();
    (registry.threads, registry.threads_ever)
}
