//! The per-thread cache: for every size class a *main* and a *spare* sheaf.
//!
//! `alloc-global` keeps one [`ThreadCache`] per thread in a const-initialised
//! `thread_local!` without destructor. The module splits by concern:
//!
//! * this file — the cache itself and its fast paths (`pop`, `push`), and
//!   the entry points of the slow paths;
//! * [`sheaves`] — one class's slots and the slow paths that trade sheaves
//!   through the exchange protocol (`crate::exchange`), live capacity;
//! * [`remote`] — batching frees whose home is another node;
//! * `life_cycle` — attach, node changes, flush, exit, counters for readers.
//!
//! # Layout
//!
//! The fast path touches one 32-byte [`HotSlot`] per class: the main sheaf's
//! length, capacity and object array are copied into it while the sheaf is
//! installed, so popping and pushing need no pointer chase to the sheaf
//! header. The header's `len` is written back ("stashed") before the sheaf
//! moves. A slot with `capacity == 0` has no sheaf: both fast paths fail and
//! the slow path sets things up; a new thread starts that way, with no
//! initialisation at all.
//!
//! # Counters
//!
//! `allocs` and `frees` sit in the hot slot and are bumped with a relaxed
//! load and store (a plain add on x86-64): no atomic read-modify-write on
//! the fast path. Exiting threads fold them into the cache.

#[cfg(not(loom))]
mod life_cycle;
#[cfg(not(loom))]
pub(crate) mod records;
pub mod remote;
pub mod sheaves;

pub use sheaves::{ClassSheaves, ColdSlot, HotSlot};

#[cfg(not(loom))]
pub use records::RecordUsage;

#[cfg(not(loom))]
pub use engine::ThreadCache;
#[cfg(not(loom))]
pub(crate) use life_cycle::{count_failure, slab_alloc_one, slab_free_one};
#[cfg(not(loom))]
pub use life_cycle::{uncached_alloc, uncached_free};
#[cfg(not(loom))]
pub(crate) use sheaves::SlotView;

#[cfg(not(loom))]
mod engine {
    use core::cell::Cell;
    use core::ptr::{self, NonNull};
    use core::sync::atomic::Ordering::Relaxed;
    use core::sync::atomic::{AtomicPtr, AtomicUsize};

    use super::life_cycle::{SlowPathGuard, ThreadState};
    use super::{ClassSheaves, ColdSlot, HotSlot};
    use crate::arena;
    use crate::cache::ClassDepot;
    use crate::node::NodeId;
    use crate::percpu::{Follow, ThreadGs};
    use crate::runtime;
    use crate::size_class::{SizeClass, NUM_CLASSES};

    /// One thread's sheaves and counters.
    ///
    /// Invariants: `node_span == 0` unless the state is `Active`; while
    /// `Active`, `[node_base, node_base + node_span)` is the arena region
    /// of `node`, the thread is on the runtime's registry, and every sheaf
    /// in its records holds objects of its class whose home is `node`
    /// (remote batches: their own node). A class's hot slot holds a sheaf
    /// only while the class has a record. `cold[class]` is null or a
    /// record of the registry's pool ([`super::records`]) that this thread
    /// holds until it unregisters; it is written only by the owner, under
    /// the registry lock. The registry links are touched only under the
    /// registry lock.
    pub struct ThreadCache {
        pub(super) hot: [HotSlot; NUM_CLASSES],
        pub(super) node_base: Cell<usize>,
        pub(super) node_span: Cell<usize>,
        pub(super) node: Cell<NodeId>,
        pub(super) state: Cell<ThreadState>,
        #[cfg(debug_assertions)]
        pub(super) in_slow_path: Cell<bool>,
        /// Each class's record, taken on the thread's first slow path of
        /// the class (null before): out of the static TLS, which the C
        /// library writes in full at every thread's start.
        pub(super) cold: [AtomicPtr<ColdSlot>; NUM_CLASSES],
        /// The thread's rseq area while it uses the CPUs' caches (set at
        /// attach, in per-CPU mode), else null: the fast paths then use the
        /// hot slots.
        ///
        /// Invariant: non-null only while `gs` is set (claimed before this
        /// is set, released after it is cleared), so a non-null area is
        /// all the pop and push sections need. The fast paths' one
        /// thread-local load: it both picks the mode and gives the
        /// sections their area (a separate flag cost a load, and a compare
        /// with an immediate that does not fuse with its branch, per
        /// operation).
        pub(super) rseq: Cell<*mut u8>,
        /// Per-CPU mode, attached: the GS base the thread set, at which the
        /// pop and push sections find its CPU's cache (they run only while
        /// it is set; otherwise the hot slots serve).
        pub(super) gs: ThreadGs,
        pub(super) owner_thread: AtomicUsize,
        pub(crate) registry_prev: AtomicPtr<ThreadCache>,
        pub(crate) registry_next: AtomicPtr<ThreadCache>,
    }

    // Every thread pays for every byte of this in its static TLS, which
    // the C library writes in full at the thread's start: 10,592 bytes
    // while the per-class records lived here (256 idle threads then held
    // 6.1 MiB, now 4.3 with the tuner's tick out of the slow paths' frame
    // too). Raise the bound only for a cost that is worth it
    // in every thread of every service.
    const _: () = assert!(core::mem::size_of::<ThreadCache>() <= 4160);

    impl ThreadCache {
        /// A fresh cache: no sheaves, nothing registered.
        pub const fn new() -> Self {
            Self {
                hot: [const { HotSlot::new() }; NUM_CLASSES],
                node_base: Cell::new(0),
                node_span: Cell::new(0),
                node: Cell::new(NodeId::ZERO),
                state: Cell::new(ThreadState::Fresh),
                #[cfg(debug_assertions)]
                in_slow_path: Cell::new(false),
                cold: [const { AtomicPtr::new(ptr::null_mut()) }; NUM_CLASSES],
                rseq: Cell::new(ptr::null_mut()),
                gs: ThreadGs::new(),
                owner_thread: AtomicUsize::new(0),
                registry_prev: AtomicPtr::new(ptr::null_mut()),
                registry_next: AtomicPtr::new(ptr::null_mut()),
            }
        }

        /// Whether the thread runs on the CPUs' caches (per-CPU mode)
        /// rather than on sheaves of its own.
        #[inline(always)]
        pub(super) fn uses_cpu_caches(&self) -> bool {
            self.cpu_area().is_some()
        }

        /// The thread's rseq area while it uses the CPUs' caches.
        #[inline(always)]
        fn cpu_area(&self) -> Option<NonNull<u8>> {
            NonNull::new(self.rseq.get())
        }

        #[inline(always)]
        pub(super) fn hot(&self, class: SizeClass) -> &HotSlot {
            // SAFETY: `record_offset() == index() * size_of::<HotSlot>()`
            // with `index() < NUM_CLASSES` (SizeClass invariant; the size is
            // asserted at `HotSlot`), so the slot lies inside the array. By the
            // offset, not the index: where the class reached this point
            // through a merge of paths, the compiler would otherwise mask
            // the offset's low bits back off.
            unsafe { &*self.hot.as_ptr().byte_add(class.record_offset()) }
        }

        /// The thread's record of `class`, if it took one. Called by the
        /// owner, or by a reader holding the registry lock (under which
        /// the owner neither takes nor gives back records).
        #[inline]
        pub(super) fn cold(&self, class: SizeClass) -> Option<&ColdSlot> {
            let record = self.cold_slot(class).load(Relaxed);
            // SAFETY: null, or a record this thread holds until it
            // unregisters (invariant), which the callers do not outlive.
            unsafe { record.as_ref() }
        }

        /// Where the thread keeps its record of `class`.
        #[inline]
        fn cold_slot(&self, class: SizeClass) -> &AtomicPtr<ColdSlot> {
            // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
            unsafe { self.cold.get_unchecked(class.index()) }
        }

        /// The thread's record of `class`, taken from the registry's pool
        /// on its first slow path of the class; `None` only if the OS
        /// refuses memory for one (the caller serves the object
        /// uncached).
        #[inline]
        fn cold_or_take(&self, class: SizeClass) -> Option<&ColdSlot> {
            if let Some(record) = self.cold(class) {
                return Some(record);
            }
            // Written under the registry lock, by the owner (invariant).
            let record = runtime::take_thread_record(self.cold_slot(class))?;
            // SAFETY: ours until this thread unregisters.
            Some(unsafe { &*record.as_ptr() })
        }

        /// The class's sheaves, where the thread has a record of it.
        #[inline]
        pub(super) fn sheaves(&self, class: SizeClass) -> Option<ClassSheaves<'_>> {
            Some(ClassSheaves::new(self.hot(class), self.cold(class)?))
        }

        /// Gives every record back to the registry's pool (with the
        /// registry lock held, once the counts are folded).
        ///
        /// # Safety
        ///
        /// 1. The caller holds the registry lock and gives the records to
        ///    its pool; the thread's counts are folded, and its sheaves
        ///    given back (or, in a forked child, lost with the thread),
        ///    and it takes no record again (it is leaving the registry).
        pub(crate) unsafe fn give_back_records(&self, pool: &mut super::records::RecordPool) {
            for slot in &self.cold {
                if let Some(record) = NonNull::new(slot.swap(ptr::null_mut(), Relaxed)) {
                    // SAFETY: duty 1: a record of this pool, given up.
                    unsafe { pool.give(record) };
                }
            }
        }

        /// HOT PATH (alloc): pop from the thread's main sheaf, or (per-CPU
        /// mode) from the current CPU's; `None` if it is empty or missing.
        /// Budget: no atomic RMW, no lock, no call. In per-CPU mode the
        /// thread's hot slots stay empty, so the per-thread attempt fails on
        /// its first branch; in per-thread mode the per-CPU attempt is only
        /// reached on the way to the slow path.
        #[inline(always)]
        pub fn pop(&self, class: SizeClass) -> Option<*mut u8> {
            match self.cpu_area() {
                Some(rseq) => Self::pop_on_cpu(rseq, class),
                None => self.hot(class).pop(),
            }
        }

        #[inline(always)]
        fn pop_per_cpu(&self, class: SizeClass) -> Option<*mut u8> {
            Self::pop_on_cpu(self.cpu_area()?, class)
        }

        /// The per-CPU pop with the thread's area `rseq` (`cpu_area`).
        #[inline(always)]
        fn pop_on_cpu(rseq: NonNull<u8>, class: SizeClass) -> Option<*mut u8> {
            // Counted by the CPU, in the section's commit.
            // SAFETY: `rseq` is this thread's area (`cpu_area`), set at
            // attach in per-CPU mode once the kernel set its CPU id, and
            // the GS base points at a live cache (claimed before it was
            // set: `rseq`'s invariant).
            unsafe { crate::percpu::pop(rseq.as_ptr(), class) }
        }

        /// HOT PATH (free): push onto the thread's main sheaf, or (per-CPU
        /// mode) the current CPU's, if the object's home is this node and
        /// the sheaf has room; false otherwise. Budget: as `pop` (in per-CPU
        /// mode `node_span` is 0, so the per-thread locality test fails).
        ///
        /// # Safety
        ///
        /// 1. `object` was returned by allocation for `class` (of this
        ///    allocator) and is no longer used: a pushed pointer is handed
        ///    out again.
        #[inline(always)]
        pub unsafe fn push(&self, class: SizeClass, object: *mut u8) -> bool {
            match self.cpu_area() {
                // SAFETY: duty 1.
                Some(rseq) => unsafe { Self::push_on_cpu(rseq, class, object) },
                None => {
                    (object as usize).wrapping_sub(self.node_base.get()) < self.node_span.get()
                        && self.hot(class).push(object)
                }
            }
        }

        /// # Safety
        ///
        /// 1. As [`ThreadCache::push`].
        #[inline(always)]
        unsafe fn push_per_cpu(&self, class: SizeClass, object: *mut u8) -> bool {
            // SAFETY: duty 1.
            self.cpu_area()
                .is_some_and(|rseq| unsafe { Self::push_on_cpu(rseq, class, object) })
        }

        /// The per-CPU push with the thread's area `rseq` (`cpu_area`).
        ///
        /// # Safety
        ///
        /// 1. As [`ThreadCache::push`].
        #[inline(always)]
        unsafe fn push_on_cpu(rseq: NonNull<u8>, class: SizeClass, object: *mut u8) -> bool {
            // SAFETY: as in `pop_on_cpu`; duty 1. Counted by the CPU, in
            // the section's commit.
            unsafe { crate::percpu::push(rseq.as_ptr(), class, object) }
        }

        /// A free whose push missed, first thing: onto the CPU's remote
        /// batch if the object's home (another lane's or another node's)
        /// is the batch's (`percpu::push_batch`). False if the thread uses
        /// no CPU cache. Out of the fast path's function, so that function
        /// saves no register for a call.
        ///
        /// # Safety
        ///
        /// 1. As [`ThreadCache::push`].
        #[inline(always)]
        unsafe fn push_batch_per_cpu(&self, class: SizeClass, object: *mut u8) -> bool {
            let Some(rseq) = self.cpu_area() else {
                return false;
            };
            // SAFETY: as in `pop_on_cpu`; duty 1.
            if !unsafe { crate::percpu::push_batch(rseq.as_ptr(), class, object) } {
                return false;
            }
            self.hot(class).count_free();
            true
        }

        /// Slow path of allocation: main is empty or missing. Returns null
        /// only if the OS refuses memory.
        #[cold]
        #[inline(never)]
        pub fn alloc_slow(&self, class: SizeClass) -> *mut u8 {
            if !self.ensure_active() {
                return super::uncached_alloc(self.node.get(), class);
            }
            if self.follow_cpu() {
                // The thread had moved: its pop missed on the old CPU's
                // cache, not on an empty sheaf.
                if let Some(object) = self.pop_per_cpu(class) {
                    return object;
                }
            }
            let _guard = SlowPathGuard::enter(self);
            let Some(cold) = self.cold_or_take(class) else {
                return super::uncached_alloc(self.node.get(), class);
            };
            cold.slow_allocs.count();
            let object = if let Some(rseq) = self.cpu_area() {
                // SAFETY: the thread's rseq area, in per-CPU mode.
                let (object, counted) = unsafe {
                    crate::percpu::alloc_slow(rseq.as_ptr(), class, &self.gs, &cold.spare_trades)
                };
                if !object.is_null() && counted == crate::percpu::CountedBy::Caller {
                    self.hot(class).count_alloc();
                }
                object
            } else {
                self.follow_node();
                ClassSheaves::new(self.hot(class), cold)
                    .alloc_slow(&ClassDepot::of(class), self.node.get())
            };
            if object.is_null() {
                super::count_failure(class);
            }
            runtime::periodic();
            object
        }

        /// Slow path of free: main is full or missing, or the object is
        /// remote.
        ///
        /// # Safety
        ///
        /// 1. `object` was returned by allocation for `class` (of this
        ///    allocator) and is no longer used.
        #[cold]
        #[inline(never)]
        pub unsafe fn dealloc_slow(&self, class: SizeClass, object: *mut u8) {
            // Another lane's or node's object, going back to its home in
            // the CPU's remote batch: one section, not a slow path (the
            // consumer of a hand-off frees every object this way). Not
            // for an object of the push range, which missed because main
            // was full: the batch would not take it, and its header is a
            // line the slow path need not read.
            // SAFETY: duty 1.
            if !self.gs.in_push_range(object) && unsafe { self.push_batch_per_cpu(class, object) } {
                return;
            }
            if !self.ensure_active() {
                // SAFETY: duty 1.
                return unsafe { super::uncached_free(class, object) };
            }
            if self.follow_cpu()
                // SAFETY: duty 1 (as in `alloc_slow`: the thread had moved).
                && unsafe {
                    self.push_per_cpu(class, object) || self.push_batch_per_cpu(class, object)
                }
            {
                return;
            }
            let _guard = SlowPathGuard::enter(self);
            let Some(cold) = self.cold_or_take(class) else {
                // SAFETY: duty 1.
                return unsafe { super::uncached_free(class, object) };
            };
            cold.slow_frees.count();
            if let Some(rseq) = self.cpu_area() {
                // SAFETY: the thread's rseq area, in per-CPU mode; duty 1.
                let counted = unsafe {
                    crate::percpu::free_slow(
                        rseq.as_ptr(),
                        class,
                        object,
                        &self.gs,
                        &cold.spare_trades,
                    )
                };
                if counted == crate::percpu::CountedBy::Caller {
                    self.hot(class).count_free();
                }
                return;
            }
            self.follow_node();
            let depot = ClassDepot::of(class);
            let node = self.node.get();
            let sheaves = ClassSheaves::new(self.hot(class), cold);
            match arena::home_node(object as usize) {
                // SAFETY: duty 1; the object's home is this thread's node.
                Some(home) if home == node => unsafe { sheaves.free_slow(&depot, node, object) },
                // Never cache an object on a node that is not its home:
                // batch it for its home node.
                // SAFETY: duty 1; `home` differs from `node`.
                Some(home) => unsafe { sheaves.free_remote(&depot, node, object, home) },
                None => crate::invariant!(false, "free of a pointer outside the arena"),
            }
        }

        /// Per-CPU mode: points the thread's GS base at the cache of the
        /// CPU it is on now; true if that moved it (an operation that
        /// missed on the old cache is worth trying again). If something
        /// else set the base, the thread gives up the CPUs' sheaves and
        /// runs sheaves of its own from now on.
        #[inline(always)]
        fn follow_cpu(&self) -> bool {
            if !self.uses_cpu_caches() {
                return false;
            }
            match self.gs.follow_cpu() {
                Follow::Moved => true,
                Follow::Stayed => false,
                Follow::Foreign => {
                    self.leave_cpu_caches();
                    false
                }
            }
        }

        /// Lowers the fast-path capacity of `class` to at most `capacity`
        /// (from any thread): the owner's next free above it takes the slow
        /// path, which trims its sheaves to the cache's capacity.
        pub(crate) fn clamp_capacity(&self, class: SizeClass, capacity: u32) {
            self.hot(class).clamp_capacity(capacity);
        }

        /// Sheaf capacity of the installed main sheaf of `class` in this
        /// thread (0 if none is installed).
        pub fn main_capacity(&self, class: SizeClass) -> u32 {
            if self.uses_cpu_caches() {
                return crate::percpu::current_main_capacity(class);
            }
            self.hot(class).capacity()
        }

        /// The node this thread allocates on (per-CPU mode: its current
        /// CPU's).
        pub fn node(&self) -> NodeId {
            if self.uses_cpu_caches() {
                return crate::percpu::current_node();
            }
            self.node.get()
        }
    }

    impl Default for ThreadCache {
        fn default() -> Self {
            Self::new()
        }
    }
}
