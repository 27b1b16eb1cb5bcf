//! A thread's GS segment base: where its pops and pushes find its CPU's
//! cache.
//!
//! In per-CPU mode each thread points its GS base at the `CpuCache` of the
//! CPU it was on at its last slow path, and the pop and push sections
//! (`cs.rs`) address that cache as `gs:[offset]`, checking inside the
//! section that the cache's `owner` is the current CPU's. This file owns
//! the base: claiming it at attach, moving it when the thread has moved,
//! and giving it up if something else in the process sets it.
//!
//! The engine never reads memory through a GS base it did not set: the
//! thread remembers the base it set ([`ThreadGs`]), and compares it with the
//! register before following it. A base that changed under the engine (a
//! component that uses GS for itself) makes the thread give up per-CPU
//! sheaves and run sheaves of its own; until its next slow path its
//! sections read the other component's memory, which is why per-CPU mode
//! is documented as owning the GS base of its threads (README,
//! "Per-CPU sheaves").
//!
//! The kernel saves and restores the base with the thread, copies it into
//! threads the thread creates (their first slow path moves it if needed)
//! and into a `fork()` child (whose caches are at the same addresses). It
//! never changes it across signals: a handler's allocations use the same
//! cache, and a section it interrupted restarts.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use super::{cache_of, in_use, mode, no_cache, owner_of, CacheMode, CpuCache};
use crate::node::NodeId;
use crate::os;

/// The GS base this engine set for the calling thread (0: none; its pops
/// and pushes run the sections only while it is set, which the thread's
/// rseq area records for them: `ThreadCache::rseq` is non-null only
/// while this is set).
///
/// Invariant: when nonzero, it is the address of a live `CpuCache` (a CPU's
/// own, or the `NO_CACHE` stand-in), and it was the thread's GS base when
/// last set. The register may differ since: set by something else, or by
/// a signal handler's slow path that ran between the two writes of
/// `set` (then it holds one of this engine's caches); [`ThreadGs::follow_cpu`]
/// tells the two apart before following anything. Only the owning thread
/// (and its signal handlers) reads or writes it.
pub struct ThreadGs(Cell<usize>);

/// What [`ThreadGs::follow_cpu`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// The base points at the current CPU's cache already (or there is
    /// none to point at): a miss was the sheaf's.
    Stayed,
    /// The base now points at the current CPU's cache: the thread had
    /// moved (or a drain had held the cache), and an operation that missed
    /// is worth trying again.
    Moved,
    /// The register no longer holds the base this engine set: something
    /// else uses GS. The thread no longer uses it (the record is released:
    /// [`ThreadGs::release`]).
    Foreign,
}

impl ThreadGs {
    /// No base set.
    pub const fn new() -> Self {
        Self(Cell::new(0))
    }

    /// Makes the calling thread's GS base point at a live cache (the
    /// stand-in `NO_CACHE`: its first slow path points it at its CPU's) if
    /// the base is free for this engine: 0, or one of its caches (a thread
    /// starts with its creator's base). False if something else in the
    /// process uses it, or not in per-CPU mode: the thread then runs
    /// sheaves of its own.
    pub fn claim(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            if mode() != CacheMode::PerCpu {
                return false;
            }
            // SAFETY: per-CPU mode is only chosen where `gs_base_writable`.
            let base = unsafe { os::gs_base() };
            if base != 0 && !is_cache(base) {
                return false;
            }
            self.set(no_cache() as usize);
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// The node of the cache the base was last pointed at (node 0 while
    /// none: the stand-in's). Only a guess at where the thread is now.
    pub fn node(&self) -> NodeId {
        match self.0.get() {
            0 => NodeId::ZERO,
            // SAFETY: a nonzero record is a live cache (invariant).
            base => unsafe { (*(base as *const CpuCache)).node() },
        }
    }

    /// Whether `object` lies in the push range of the cache the thread's
    /// GS base points at, which the pop and push use (a hint, as
    /// [`CpuCache::in_push_range`]); false while the base is not set.
    #[inline]
    pub fn in_push_range(&self, object: *mut u8) -> bool {
        match self.0.get() {
            0 => false,
            // SAFETY: a set base points at a live cache (ThreadGs
            // invariant: caches and stand-ins are never freed).
            base => unsafe { (*(base as *const CpuCache)).in_push_range(object as usize) },
        }
    }

    /// Stops using the base (thread exit). The register keeps its value: a
    /// live cache, harmless, and never followed again by this thread.
    pub fn release(&self) {
        self.0.set(0);
    }

    /// Points the base at the cache of the CPU the thread is on now, if the
    /// cache it points at is not that CPU's; see [`Follow`]. Call only
    /// while the base is set (claimed, not released).
    #[inline]
    pub fn follow_cpu(&self) -> Follow {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: set only in per-CPU mode, where `gs_base_writable`.
            let register = unsafe { os::gs_base() };
            if register != self.0.get() {
                // A signal handler's slow path that ran between `set`'s two
                // writes leaves the register and the record apart, with
                // the register on one of this engine's caches: the
                // record follows. Any other value is someone else's.
                if !is_cache(register) {
                    self.release();
                    return Follow::Foreign;
                }
                self.0.set(register);
            }
            let Some(cpu) = os::current_rseq_cpu() else {
                return Follow::Stayed;
            };
            let now = self.0.get() as *const CpuCache;
            // SAFETY: the base this engine set is a live cache (invariant).
            if unsafe { (*now).owner.load(Ordering::Relaxed) } == owner_of(cpu) {
                return Follow::Stayed;
            }
            match cache_of(cpu).filter(|cache| in_use(cpu, cache)) {
                Some(cache) => {
                    self.point_at(cache);
                    Follow::Moved
                }
                None => Follow::Stayed,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Follow::Stayed
    }

    /// Points the base (set: claimed, not released) at `cache`, a CPU's own,
    /// where the retries of a slow path look.
    pub(super) fn point_at(&self, cache: &'static CpuCache) {
        let base = ptr::from_ref(cache) as usize;
        if self.0.get() != base {
            self.set(base);
        }
    }

    /// Sets the register and the record of it.
    fn set(&self, base: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: per-CPU mode (where `gs_base_writable`) is the only
        // caller's context; the base is free for this engine (claimed, and
        // checked unchanged since) and `base` is a live cache.
        unsafe {
            os::set_gs_base(base)
        };
        self.0.set(base);
    }
}

impl Default for ThreadGs {
    fn default() -> Self {
        Self::new()
    }
}

/// Threads that gave up the CPUs' sheaves because something else set
/// their GS base.
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// Counts a thread whose GS base something else set (it now runs sheaves
/// of its own), and says so on stderr the first time: per-CPU mode owns the
/// GS base of its threads, and a process whose other code uses GS should
/// run with `SHEAFALLOC_PERCPU=off`.
pub fn count_taken() {
    if TAKEN.fetch_add(1, Ordering::Relaxed) == 0 {
        os::write_stderr(
            b"sheafalloc: something else set a thread's GS base, which per-CPU sheaves use; \
              that thread now runs sheaves of its own (set SHEAFALLOC_PERCPU=off if this \
              process uses GS)\n",
        );
    }
}

/// Threads that gave up the CPUs' sheaves because something else set their
/// GS base.
pub fn threads_with_gs_taken() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

/// Whether `base` is the address of a cache of this engine.
fn is_cache(base: usize) -> bool {
    base == no_cache() as usize
        || base == super::draining() as usize
        || super::OWNED
            .iter()
            .any(|owned| owned.load(Ordering::Acquire) as usize == base)
}
