//! Process-wide set-up and the hooks the OS calls back: one-time
//! initialisation, the registry of live thread caches, the thread-exit key,
//! the fork handlers, and `purge`.
//!
//! # Initialisation
//!
//! The first slow path of the first thread runs [`ensure_init`]: it learns
//! the node count, reserves the arena, creates the pthread key whose
//! destructor flushes a thread's cache at exit, and registers the fork
//! handlers. None of it allocates through the global allocator (glibc's own
//! bookkeeping for keys and fork handlers uses glibc's malloc). Concurrent
//! first callers wait for the winner.
//!
//! # Fork
//!
//! The prepare handler takes every lock of the engine in a fixed order
//! (registry, pool, every barn and slab list, every arena); parent and child
//! release them. In the child only the forking thread exists: the registry
//! is reset to that thread alone (after folding the others' counters), so
//! threads the child creates later register cleanly. Objects cached by the
//! parent's other threads stay unused in the child, as in every allocator.

use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicU8, Ordering};

use crate::arena;
use crate::cache;
use crate::node::{self, NodeId};

use crate::os;
use crate::sheaf::SHEAF_POOL;
use crate::size_class::SizeClass;
use crate::sync::Mutex;
use crate::thread_cache::ThreadCache;

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const READY: u8 = 2;
const FAILED: u8 = 3;

static INIT_STATE: AtomicU8 = AtomicU8::new(UNINIT);
static mut EXIT_KEY: Option<os::ThreadExitKey> = None;

/// Initialises the engine once; true when it is usable.
#[inline]
pub fn ensure_init() -> bool {
    match INIT_STATE.load(Ordering::Acquire) {
        READY => true,
        FAILED => false,
        _ => init_slow(),
    }
}

#[cold]
#[inline(never)]
fn init_slow() -> bool {
    if INIT_STATE
        .compare_exchange(UNINIT, RUNNING, Ordering::Acquire, Ordering::Acquire)
        .is_ok()
    {
        let ok = init_once();
        INIT_STATE.store(if ok { READY } else { FAILED }, Ordering::Release);
        return ok;
    }
    loop {
        match INIT_STATE.load(Ordering::Acquire) {
            READY => return true,
            FAILED => return false,
            _ => os::yield_now(),
        }
    }
}

fn init_once() -> bool {
    let nodes = node::discover_node_count();
    crate::topology::init_simulated();
    if !arena::init(nodes) {
        os::write_stderr(
            b"sheafalloc: could not reserve address space for the arena; allocations will fail\n",
        );
        return false;
    }
    let Some(key) = os::thread_exit_key(thread_exit) else {
        os::write_stderr(b"sheafalloc: pthread_key_create failed; allocations will fail\n");
        return false;
    };
    // SAFETY: written once, here, before INIT_STATE becomes READY (Release);
    // read only after observing READY (Acquire).
    unsafe { EXIT_KEY = Some(key) };
    if !os::at_fork(fork_prepare, fork_parent, fork_child) {
        os::write_stderr(
            b"sheafalloc: pthread_atfork failed; fork() from a multi-threaded process is unsafe\n",
        );
    }
    true
}

unsafe extern "C" fn thread_exit(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    // SAFETY: the value is the address of the exiting thread's cache, set by
    // `register`; the thread's TLS outlives its pthread key destructors.
    let cache = unsafe { &*(value as *const ThreadCache) };
    cache.on_thread_exit();
}

/// The live thread caches, linked through their registry fields.
///
/// Invariant: `head` starts a doubly linked list of the caches of every
/// `Active` thread; links are touched only under this mutex.
struct Registry {
    head: *mut ThreadCache,
    threads: u64,
    threads_ever: u64,
}

// SAFETY: the registry only links caches whose link fields are guarded by
// the registry mutex.
unsafe impl Send for Registry {}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    head: ptr::null_mut(),
    threads: 0,
    threads_ever: 0,
});

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
        registry.threads += 1;
        registry.threads_ever += 1;
    }
    // SAFETY: EXIT_KEY was set before READY, which `attach` observed.
    if let Some(key) = unsafe { EXIT_KEY } {
        key.set(this.cast());
    }
}

pub(crate) fn unregister(cache: &ThreadCache) {
    let mut registry = REGISTRY.lock();
    cache.fold_counters();
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
    registry.threads -= 1;
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

/// Live threads with a cache, and threads that ever had one.
pub fn thread_counts() -> (u64, u64) {
    let registry = REGISTRY.lock();
    (registry.threads, registry.threads_ever)
}

/// Returns free memory to the OS now: empties every barn into the slabs and
/// returns every empty slab. Objects cached in threads' own sheaves stay
/// (each thread flushes its own: see `ThreadCache::flush_all`). Returns the
/// bytes returned.
pub fn purge() -> u64 {
    if INIT_STATE.load(Ordering::Acquire) != READY {
        return 0;
    }
    let mut returned = 0;
    for node in NodeId::all() {
        for class in SizeClass::all() {
            let node_class = cache::node_class(node, class);
            loop {
                let (full, empty) = {
                    let mut barn = node_class.barn.lock();
                    (barn.take_full(), barn.take_empty())
                };
                if full.is_none() && empty.is_none() {
                    break;
                }
                if let Some(full) = full {
                    // SAFETY: the barn handed the sheaf to us; its objects
                    // are free objects of this node and class.
                    unsafe {
                        let sheaf = &mut *full.as_ptr();
                        cache::flush_to_slabs(node, class, sheaf.held());
                        sheaf.len = 0;
                        SHEAF_POOL.give(full);
                    }
                }
                if let Some(empty) = empty {
                    // SAFETY: owned and empty.
                    unsafe { SHEAF_POOL.give(empty) };
                }
            }
            returned += node_class.slabs.lock().release_empty(node, class);
        }
    }
    returned
}

extern "C" fn fork_prepare() {
    FORKING_THREAD.store(os::current_thread(), Ordering::Relaxed);
    REGISTRY.raw().lock();
    SHEAF_POOL.raw_lock().lock();
    cache::lock_all_for_fork();
    arena::lock_all_for_fork();
}

extern "C" fn fork_parent() {
    // SAFETY: this thread took every one of these locks in `fork_prepare`.
    unsafe {
        arena::unlock_all_after_fork();
        cache::unlock_all_after_fork();
        SHEAF_POOL.raw_lock().unlock();
        REGISTRY.raw().unlock();
    }
}

static FORKING_THREAD: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

extern "C" fn fork_child() {
    let forking_thread = FORKING_THREAD.load(Ordering::Relaxed);
    let mut survivor: *mut ThreadCache = ptr::null_mut();
    // SAFETY: we are the only thread of the child and hold the registry
    // lock (taken in `fork_prepare`), so the list is ours to rewrite.
    unsafe {
        let registry = REGISTRY.get_unchecked();
        let mut cursor = registry.head;
        let mut survivor_registered = false;
        while !cursor.is_null() {
            let next = (*cursor).registry_next.load(Ordering::Relaxed);
            if (*cursor).owner_thread() == forking_thread {
                survivor = cursor;
                survivor_registered = true;
            } else {
                (*cursor).fold_counters();
            }
            cursor = next;
        }
        registry.head = ptr::null_mut();
        registry.threads = 0;
        if survivor_registered {
            (*survivor)
                .registry_prev
                .store(ptr::null_mut(), Ordering::Relaxed);
            (*survivor)
                .registry_next
                .store(ptr::null_mut(), Ordering::Relaxed);
            registry.head = survivor;
            registry.threads = 1;
        }
        arena::unlock_all_after_fork();
        cache::unlock_all_after_fork();
        SHEAF_POOL.raw_lock().unlock();
        REGISTRY.raw().unlock();
    }
}
