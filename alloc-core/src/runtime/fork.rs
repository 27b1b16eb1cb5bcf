//! The `pthread_atfork` handlers.
//!
//! The prepare handler takes every lock of the engine in the order of
//! `sync::LockRank` — tuner, registry, topology, every barn, every slab
//! list, every arena, the sheaf pool — so no other thread is inside the engine
//! when `fork()` copies the process; since every other path takes its
//! locks in the same order, none can hold one the handler still waits for
//! while waiting for one the handler holds. Parent and child release them.
//!
//! In the child only the forking thread exists: the registry is reset to
//! that thread alone (after folding the others' counters), so threads the
//! child creates later register cleanly. Objects cached by the parent's
//! other threads stay unused in the child, as in every allocator.

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::registry::REGISTRY;
use crate::arena;
use crate::cache;
use crate::os;
use crate::sheaf::SHEAF_POOL;
use crate::thread_cache::ThreadCache;

static FORKING_THREAD: AtomicUsize = AtomicUsize::new(0);

pub(super) extern "C" fn prepare() {
    FORKING_THREAD.store(os::current_thread(), Ordering::Relaxed);
    super::tune::book_lock().lock();
    REGISTRY.raw().lock();
    crate::topology::publish_lock().lock();
    cache::lock_all_for_fork();
    arena::lock_all_for_fork();
    SHEAF_POOL.raw_lock().lock();
}

/// Releases what `prepare` took.
///
/// # Safety
///
/// 1. The calling thread ran `prepare` and has not released since.
unsafe fn release_all() {
    // SAFETY: duty 1: this thread holds every one of these locks.
    unsafe {
        SHEAF_POOL.raw_lock().unlock();
        arena::unlock_all_after_fork();
        cache::unlock_all_after_fork();
        crate::topology::publish_lock().unlock();
        REGISTRY.raw().unlock();
        super::tune::book_lock().unlock();
    }
}

pub(super) extern "C" fn parent() {
    // SAFETY: `fork()` runs this in the thread that ran `prepare`.
    unsafe { release_all() };
}

pub(super) extern "C" fn child() {
    let forking_thread = FORKING_THREAD.load(Ordering::Relaxed);
    // SAFETY: we are the only thread of the child and hold the registry
    // lock (taken in `prepare`), so the list is ours to rewrite.
    unsafe {
        let registry = REGISTRY.get_unchecked();
        let mut survivor: *mut ThreadCache = ptr::null_mut();
        let mut cursor = registry.head;
        while !cursor.is_null() {
            let next = (*cursor).registry_next.load(Ordering::Relaxed);
            if (*cursor).owner_thread() == forking_thread {
                survivor = cursor;
            } else {
                (*cursor).fold_counters();
                // The thread does not exist in the child: its records go
                // back to the pool (the objects in its sheaves are lost
                // with it, as before). `give_back_records`' duty: we hold
                // the registry lock, its counts are folded just above, and
                // a thread that is gone takes no record again.
                (*cursor).give_back_records(&mut registry.records);
            }
            cursor = next;
        }
        registry.head = survivor;
        registry.threads = 0;
        if !survivor.is_null() {
            (*survivor)
                .registry_prev
                .store(ptr::null_mut(), Ordering::Relaxed);
            (*survivor)
                .registry_next
                .store(ptr::null_mut(), Ordering::Relaxed);
            registry.threads = 1;
        }
        // `fork()` runs this in the thread that ran `prepare`.
        release_all();
    }
    crate::percpu::after_fork_in_child();
}
