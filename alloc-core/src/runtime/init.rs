//! One-time initialisation.
//!
//! The first slow path of the first thread runs [`ensure_init`]: it learns
//! the node count, reserves the arena, creates the pthread key whose
//! destructor flushes a thread's cache at exit, and registers the fork
//! handlers. None of it allocates through the global allocator (glibc's own
//! bookkeeping for keys and fork handlers uses glibc's malloc). Concurrent
//! first callers wait for the winner.
//!
//! # A fork in the middle
//!
//! The fork handlers exist only once initialisation has registered them, so
//! a `fork()` by another thread while initialisation runs copies a process
//! whose initialiser does not exist in the child. The state word records
//! the id of the process that started initialising; a waiter that finds
//! another process's id is such a child: it takes over, releases the arena
//! locks the vanished initialiser may have held, and runs the
//! initialisation itself. Every step is idempotent (a step the parent had
//! finished is kept), so the child ends in the same state as the parent.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use core::fmt::Write;

use crate::arena;
use crate::cache;
use crate::capacity_spec;
use crate::message::Message;
use crate::node;
use crate::os;
use crate::thread_cache::ThreadCache;

const UNINIT: u64 = 0;
const RUNNING: u64 = 1;
const READY: u64 = 2;
const FAILED: u64 = 3;
const STATE_BITS: u32 = 8;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

/// `state | pid << STATE_BITS`: the state, and the process that set it.
static INIT: AtomicU64 = AtomicU64::new(UNINIT);
/// The thread-exit key once created; 0 before (`pthread_key_t` values are
/// stored plus one).
static EXIT_KEY: AtomicU64 = AtomicU64::new(0);
static FORK_HANDLERS_REGISTERED: AtomicBool = AtomicBool::new(false);

/// Initialises the engine once; true when it is usable.
#[inline]
pub fn ensure_init() -> bool {
    match INIT.load(Ordering::Acquire) & STATE_MASK {
        READY => true,
        FAILED => false,
        _ => init_slow(),
    }
}

/// True once initialisation succeeded.
pub(super) fn is_ready() -> bool {
    INIT.load(Ordering::Acquire) & STATE_MASK == READY
}

/// True while some thread is initialising (test hook).
#[cfg(feature = "fault-injection")]
pub fn init_in_progress() -> bool {
    INIT.load(Ordering::Acquire) & STATE_MASK == RUNNING
}

fn running_in_this_process() -> u64 {
    RUNNING | (u64::from(os::process_id()) << STATE_BITS)
}

#[cold]
#[inline(never)]
fn init_slow() -> bool {
    let mut seen = UNINIT;
    loop {
        match seen & STATE_MASK {
            READY => return true,
            FAILED => return false,
            RUNNING if seen == running_in_this_process() => {
                os::yield_now();
                seen = INIT.load(Ordering::Acquire);
                continue;
            }
            // UNINIT, or RUNNING by a process that is not this one: this is
            // a child forked while its parent initialised.
            _ => {}
        }
        match INIT.compare_exchange(
            seen,
            running_in_this_process(),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                if seen != UNINIT {
                    // SAFETY: the previous initialiser is a thread of the
                    // parent process: it does not exist here, and this
                    // thread holds no arena lock.
                    unsafe { arena::release_locks_of_vanished_threads() };
                }
                let ok = init_once();
                INIT.store(if ok { READY } else { FAILED }, Ordering::Release);
                return ok;
            }
            Err(now) => seen = now,
        }
    }
}

fn init_once() -> bool {
    let nodes = node::discover_node_count();
    crate::topology::init_simulated();
    crate::percpu::init();
    crate::pop_order::init();
    if !arena::init(nodes) {
        os::write_stderr(
            b"sheafalloc: could not reserve address space for the arena; allocations will fail\n",
        );
        return false;
    }
    os::fault::pause_in_init();
    apply_environment();
    if EXIT_KEY.load(Ordering::Acquire) == 0 {
        let Some(key) = os::thread_exit_key(thread_exit) else {
            os::write_stderr(b"sheafalloc: pthread_key_create failed; allocations will fail\n");
            return false;
        };
        EXIT_KEY.store(u64::from(key.raw()).wrapping_add(1), Ordering::Release);
    }
    if !FORK_HANDLERS_REGISTERED.swap(true, Ordering::AcqRel)
        && !os::at_fork(
            super::fork::prepare,
            super::fork::parent,
            super::fork::child,
        )
    {
        os::write_stderr(
            b"sheafalloc: pthread_atfork failed; fork() from a multi-threaded process is unsafe\n",
        );
    }
    true
}

/// `SHEAFALLOC_AUTOTUNE` and `SHEAFALLOC_CAPACITY`; a bad value is reported
/// on stderr and skipped (the rest applies).
fn apply_environment() {
    match os::env(c"SHEAFALLOC_AUTOTUNE") {
        None | Some(b"on" | b"1" | b"true" | b"yes") => {}
        Some(b"off" | b"0" | b"false" | b"no") => cache::set_autotune(false),
        Some(other) => {
            let mut message = Message::<256>::new();
            message.push(b"sheafalloc: SHEAFALLOC_AUTOTUNE=");
            message.push(other);
            message.push(b" is neither on nor off; the auto-tuner stays on\n");
            message.write_to_stderr();
        }
    }
    let Some(spec) = os::env(c"SHEAFALLOC_CAPACITY") else {
        return;
    };
    for entry in capacity_spec::parse(spec) {
        match entry {
            Ok(entry) => {
                // In range by construction: parse checked it.
                let _ = cache::store_pinned_capacity(entry.class, u64::from(entry.capacity));
            }
            Err(error) => {
                let mut message = Message::<256>::new();
                let _ = writeln!(
                    message,
                    "sheafalloc: SHEAFALLOC_CAPACITY: {error}; entry skipped, the others apply"
                );
                message.write_to_stderr();
            }
        }
    }
}

/// The thread-exit key (set before initialisation reports ready).
pub(super) fn exit_key() -> Option<os::ThreadExitKey> {
    match EXIT_KEY.load(Ordering::Acquire) {
        0 => None,
        // Cannot wrap: `raw != 0` (the arm above).
        raw => os::ThreadExitKey::from_raw(raw.wrapping_sub(1) as u32),
    }
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
