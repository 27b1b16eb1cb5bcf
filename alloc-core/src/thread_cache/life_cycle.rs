//! A thread cache's life: `Fresh` (no slab touched) → `Active` (registered
//! with the runtime; the pthread key destructor will flush it) → `Dead`
//! (flushed at exit). A dead thread — one whose later thread-exit
//! destructors still allocate — is served straight from the slabs, without
//! caching. Also here: following the thread's node, flushing everything
//! (`purge`, exit, migration), and what statistics readers see.

use core::ptr;
use core::sync::atomic::Ordering::Relaxed;

use super::sheaves::SlotView;
use super::ThreadCache;
use crate::arena;
use crate::cache::{self, cache, CacheCounters, ClassDepot};
use crate::node::NodeId;
use crate::runtime;
use crate::size_class::SizeClass;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ThreadState {
    Fresh,
    Active,
    Dead,
}

impl ThreadCache {
    /// Returns every cached object of this thread to barns and slabs, keeping
    /// the thread registered (used by `purge`).
    pub fn flush_all(&self) {
        if self.state.get() != ThreadState::Active {
            return;
        }
        let _guard = SlowPathGuard::enter(self);
        if self.uses_cpu_caches() {
            // Per-CPU mode: the thread holds no sheaves; the CPUs do.
            crate::percpu::drain_all();
            return;
        }
        // A thread that moved since its last slow path gives everything
        // back and starts over on the node it is on now.
        match crate::topology::node_of_current_cpu() {
            Some(node) if node != self.node.get() => self.move_to_node(node),
            _ => self.give_back_all(),
        }
    }

    /// Hands every sheaf and remote batch back to the barns and slabs.
    fn give_back_all(&self) {
        let node = self.node.get();
        for class in SizeClass::all() {
            // A class without a record holds no sheaf (`ThreadCache`
            // invariant).
            if let Some(sheaves) = self.sheaves(class) {
                sheaves.give_back(&ClassDepot::of(class), node);
            }
        }
    }

    /// Checks the thread's node (at least once per slow path). If the
    /// thread moved to another node, its sheaves go back to the old node
    /// first: their objects must not be handed out on the new one.
    #[inline]
    pub(super) fn follow_node(&self) {
        let Some(node) = crate::topology::node_of_current_cpu() else {
            return;
        };
        if node != self.node.get() {
            self.move_to_node(node);
        }
    }

    #[cold]
    fn move_to_node(&self, node: NodeId) {
        self.give_back_all();
        self.node.set(node);
        self.node_base.set(arena::node_base(node));
        crate::topology::count_migration();
    }

    /// Flushes everything and unregisters; the thread is `Dead` afterwards.
    /// Called by the runtime's pthread key destructor.
    pub(crate) fn on_thread_exit(&self) {
        if self.state.get() != ThreadState::Active {
            return;
        }
        if !self.uses_cpu_caches() {
            self.flush_all();
        }
        // Per-CPU mode: the thread holds no sheaves, nothing to flush; from
        // now on (later thread-exit destructors) it allocates uncached.
        self.rseq.set(core::ptr::null_mut());
        self.gs.release();
        runtime::unregister(self);
        self.node_span.set(0);
        self.state.set(ThreadState::Dead);
    }

    /// Moves the counters of every class into the caches and zeroes them
    /// (under the registry lock, so no reader counts them twice).
    pub(crate) fn fold_counters(&self) {
        for class in SizeClass::all() {
            let (allocs, frees) = self.hot(class).take_counts();
            let counters = &cache(class).counters;
            CacheCounters::add(&counters.allocs_folded, allocs);
            CacheCounters::add(&counters.frees_folded, frees);
            if let Some(cold) = self.cold(class) {
                cold.slow_allocs.publish(&counters.slow_path_allocs);
                cold.slow_frees.publish(&counters.slow_path_frees);
                cold.spare_trades.swaps.publish(&counters.spare_swaps);
            }
        }
    }

    /// What a reader on another thread may see of `class` (racy by design:
    /// every field is a relaxed atomic written only by the owner).
    pub(crate) fn view(&self, class: SizeClass) -> SlotView {
        let hot = self.hot(class).view();
        let Some(cold) = self.cold(class) else {
            return hot;
        };
        SlotView {
            slow_allocs: cold.slow_allocs.pending(),
            slow_frees: cold.slow_frees.pending(),
            spare_swaps: cold.spare_trades.swaps.pending(),
            ..hot
        }
    }

    /// `os::current_thread()` of the owning thread (0 before it attaches).
    pub(crate) fn owner_thread(&self) -> usize {
        self.owner_thread.load(Relaxed)
    }

    pub(super) fn ensure_active(&self) -> bool {
        match self.state.get() {
            ThreadState::Active => true,
            ThreadState::Dead => false,
            ThreadState::Fresh => self.attach(),
        }
    }

    /// Per-CPU mode, when something else has set the thread's GS base:
    /// from now on the thread runs sheaves of its own (it holds none while
    /// on the CPUs', so there is nothing to move).
    #[cold]
    pub(super) fn leave_cpu_caches(&self) {
        self.rseq.set(core::ptr::null_mut());
        self.gs.release();
        self.node_span.set(arena::node_span());
        crate::percpu::count_gs_taken();
    }

    #[cold]
    fn attach(&self) -> bool {
        if !runtime::ensure_init() {
            return false;
        }
        let node = crate::topology::node_for_new_thread();
        self.node.set(node);
        self.node_base.set(arena::node_base(node));
        self.state.set(ThreadState::Active);
        if crate::percpu::may_use_own_area(crate::os::current_rseq_cpu()) && self.gs.claim() {
            // The CPUs hold the sheaves: the thread's fast paths go
            // straight to the per-CPU ones (its GS base is set), and its
            // hot slots stay empty. The slow paths' sections index the CPU
            // table with the area's CPU id unchecked, so a thread whose
            // area the kernel has not set (a failed registration: glibc
            // aborts such a thread when the process registered, but the id
            // is checked anyway), or whose GS base something else uses,
            // runs on sheaves of its own instead.
            self.rseq.set(crate::os::rseq_area());
        } else {
            self.node_span.set(arena::node_span());
        }
        self.owner_thread
            .store(crate::os::current_thread(), Relaxed);
        runtime::register(self);
        true
    }
}

/// Takes one object straight from the slabs of `node` (no thread cache),
/// counted as an allocation of no thread.
pub fn uncached_alloc(node: NodeId, class: SizeClass) -> *mut u8 {
    let object = slab_alloc_one(node, class);
    if object.is_null() {
        count_failure(class);
    } else {
        CacheCounters::add(&cache(class).counters.allocs_folded, 1);
    }
    object
}

/// Counts an allocation of `class` that returns null because the OS
/// refused memory: once per failed allocation, by the two entries that
/// return one (`ThreadCache::alloc_slow` and [`uncached_alloc`]), whatever
/// the steps inside tried.
#[cold]
pub(crate) fn count_failure(class: SizeClass) {
    CacheCounters::add(&cache(class).counters.alloc_failures, 1);
}

/// One object straight from the slabs of `node`, not counted (the caller
/// counts it).
pub(crate) fn slab_alloc_one(node: NodeId, class: SizeClass) -> *mut u8 {
    if !runtime::ensure_init() {
        return ptr::null_mut();
    }
    let mut object = [ptr::null_mut()];
    if cache::refill_from_slabs(node, class, &mut object) == 0 {
        return ptr::null_mut();
    }
    let [object] = object;
    object
}

/// Returns one object straight to its home slab (no thread cache), counted
/// as a free of no thread.
///
/// # Safety
///
/// 1. `object` was allocated for `class` by this allocator and is no
///    longer used.
pub unsafe fn uncached_free(class: SizeClass, object: *mut u8) {
    // SAFETY: duty 1.
    unsafe { slab_free_one(class, object) };
    CacheCounters::add(&cache(class).counters.frees_folded, 1);
}

/// Returns one object straight to its home slab, not counted (the caller
/// counts it).
///
/// # Safety
///
/// 1. As [`uncached_free`].
pub(crate) unsafe fn slab_free_one(class: SizeClass, object: *mut u8) {
    let Some(home) = arena::home_node(object as usize) else {
        crate::invariant!(false, "free of a pointer outside the arena");
        return;
    };
    // SAFETY: duty 1: a free object of `class` whose home is `home`.
    unsafe { cache::flush_to_slabs(home, class, &[object]) };
}

/// Debug-build guard against re-entering the allocator from its own slow
/// path (which would mean something on it allocates), and check that a
/// slow path releases every lock it took.
pub(super) struct SlowPathGuard<'a> {
    #[cfg(debug_assertions)]
    owner: &'a ThreadCache,
    #[cfg(debug_assertions)]
    held_at_entry: u32,
    #[cfg(not(debug_assertions))]
    _owner: core::marker::PhantomData<&'a ThreadCache>,
}

impl<'a> SlowPathGuard<'a> {
    #[inline(always)]
    pub(super) fn enter(owner: &'a ThreadCache) -> Self {
        #[cfg(debug_assertions)]
        {
            crate::invariant!(
                !owner.in_slow_path.replace(true),
                "allocator re-entered from its own slow path"
            );
            Self {
                owner,
                held_at_entry: crate::sync::held_by_this_thread(),
            }
        }
        #[cfg(not(debug_assertions))]
        {
            let _ = owner;
            Self {
                _owner: core::marker::PhantomData,
            }
        }
    }
}

impl Drop for SlowPathGuard<'_> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        {
            crate::invariant!(
                crate::sync::held_by_this_thread() == self.held_at_entry,
                "a slow path returned holding a lock"
            );
            self.owner.in_slow_path.set(false);
        }
    }
}
