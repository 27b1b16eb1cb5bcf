//! The per-thread cache: for every size class a *main* and a *spare* sheaf.
//!
//! `alloc-global` keeps one [`ThreadCache`] per thread in a const-initialised
//! `thread_local!` without destructor; this module holds everything it does.
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
//! the fast path. They are atomics only so that a statistics reader on
//! another thread may read them without a data race; only the owning thread
//! writes them. Exiting threads fold them into the cache.
//!
//! # Life cycle
//!
//! `Fresh` (no slab touched) → `Active` (registered with the runtime; the
//! pthread key destructor will flush it) → `Dead` (flushed at exit). A dead
//! thread — one whose later thread-exit destructors still allocate — is
//! served straight from the slabs, without caching.

use core::cell::Cell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::arena;
use crate::cache::{self, cache, node_class, CacheCounters};
use crate::node::NodeId;
use crate::runtime;
use crate::sheaf::{Sheaf, SHEAF_POOL};
use crate::size_class::{SizeClass, NUM_CLASSES};

/// The fast-path state of one class in one thread.
///
/// Invariants: if the class's main sheaf is installed, `objects` points to
/// its object array, `capacity` equals its capacity and `len <= capacity`
/// is its true length (the header's `len` is stale until stashed);
/// otherwise `len == capacity == 0` and `objects` is null. Written only by
/// the owning thread.
#[repr(C, align(32))]
pub struct HotSlot {
    len: AtomicU32,
    capacity: AtomicU32,
    objects: AtomicPtr<*mut u8>,
    allocs: AtomicU64,
    frees: AtomicU64,
}

impl HotSlot {
    const fn new() -> Self {
        Self {
            len: AtomicU32::new(0),
            capacity: AtomicU32::new(0),
            objects: AtomicPtr::new(ptr::null_mut()),
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
        }
    }
}

/// The sheaves of one class in one thread (owned by the thread).
struct ColdSlot {
    main: Cell<*mut Sheaf>,
    spare: Cell<*mut Sheaf>,
    /// Objects freed by this thread whose home is another node, waiting to
    /// be handed over in one batch (`node` of the sheaf = their home).
    remote: Cell<*mut Sheaf>,
}

impl ColdSlot {
    const fn new() -> Self {
        Self {
            main: Cell::new(ptr::null_mut()),
            spare: Cell::new(ptr::null_mut()),
            remote: Cell::new(ptr::null_mut()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ThreadState {
    Fresh,
    Active,
    Dead,
}

/// One thread's sheaves and counters.
///
/// Invariants: `node_span == 0` unless the state is `Active`; while
/// `Active`, `[node_base, node_base + node_span)` is the arena region of
/// `node`, the thread is on the runtime's registry, and every sheaf in
/// `cold` holds objects of its class whose home is `node`. The registry
/// links are touched only under the registry lock.
pub struct ThreadCache {
    hot: [HotSlot; NUM_CLASSES],
    node_base: Cell<usize>,
    node_span: Cell<usize>,
    node: Cell<NodeId>,
    state: Cell<ThreadState>,
    #[cfg(debug_assertions)]
    in_slow_path: Cell<bool>,
    cold: [ColdSlot; NUM_CLASSES],
    owner_thread: core::sync::atomic::AtomicUsize,
    pub(crate) registry_prev: AtomicPtr<ThreadCache>,
    pub(crate) registry_next: AtomicPtr<ThreadCache>,
}

/// What a statistics reader may see of a live thread's class.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ThreadClassView {
    pub allocs: u64,
    pub frees: u64,
    pub capacity: u32,
    pub main_len: u32,
}

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
            cold: [const { ColdSlot::new() }; NUM_CLASSES],
            owner_thread: core::sync::atomic::AtomicUsize::new(0),
            registry_prev: AtomicPtr::new(ptr::null_mut()),
            registry_next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline(always)]
    fn hot(&self, class: SizeClass) -> &HotSlot {
        // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
        unsafe { self.hot.get_unchecked(class.index()) }
    }

    #[inline(always)]
    fn cold(&self, class: SizeClass) -> &ColdSlot {
        // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
        unsafe { self.cold.get_unchecked(class.index()) }
    }

    /// HOT PATH (alloc): pop from the main sheaf, or `None` if it is empty
    /// or missing. Budget: no atomic RMW, no lock, no call, one branch.
    /// (Objects in sheaves are never null, but `Option` on the length alone
    /// spares the caller a null test.)
    #[inline(always)]
    pub fn pop(&self, class: SizeClass) -> Option<*mut u8> {
        let slot = self.hot(class);
        let len = slot.len.load(Relaxed);
        if len == 0 {
            return None;
        }
        let len = len - 1;
        // SAFETY: `len < capacity` and `objects[..len + 1]` are valid entries
        // of the installed main sheaf (HotSlot invariant).
        let object = unsafe { *slot.objects.load(Relaxed).add(len as usize) };
        slot.len.store(len, Relaxed);
        slot.allocs
            .store(slot.allocs.load(Relaxed).wrapping_add(1), Relaxed);
        Some(object)
    }

    /// HOT PATH (free): push onto the main sheaf if the object's home is
    /// this thread's node and the sheaf has room; false otherwise. Budget:
    /// no atomic RMW, no lock, no call, two well-predicted branches.
    #[inline(always)]
    pub fn push(&self, class: SizeClass, object: *mut u8) -> bool {
        if (object as usize).wrapping_sub(self.node_base.get()) >= self.node_span.get() {
            return false;
        }
        let slot = self.hot(class);
        let len = slot.len.load(Relaxed);
        if len >= slot.capacity.load(Relaxed) {
            return false;
        }
        // SAFETY: `len < capacity <= SHEAF_CAPACITY_MAX`, so the entry lies
        // in the installed main sheaf's array (HotSlot invariant).
        unsafe { *slot.objects.load(Relaxed).add(len as usize) = object };
        slot.len.store(len + 1, Relaxed);
        slot.frees
            .store(slot.frees.load(Relaxed).wrapping_add(1), Relaxed);
        true
    }

    /// Slow path of allocation: main is empty or missing. Returns null only
    /// if the OS refuses memory.
    #[cold]
    #[inline(never)]
    pub fn alloc_slow(&self, class: SizeClass) -> *mut u8 {
        if !self.ensure_active() {
            return uncached_alloc(self.node.get(), class);
        }
        let _guard = SlowPathGuard::enter(self);
        CacheCounters::add(&cache(class).counters.slow_path_allocs, 1);
        self.follow_node();
        self.sync_capacity(class);
        if let Some(object) = self.pop(class) {
            return object;
        }
        let counters = &cache(class).counters;
        let Some(main) = self.main_sheaf(class) else {
            CacheCounters::add(&counters.alloc_failures, 1);
            return ptr::null_mut();
        };
        // 1. The spare has objects: swap.
        let spare = self.cold(class).spare.get();
        // SAFETY: the spare is owned by this thread (ColdSlot).
        if !spare.is_null() && unsafe { (*spare).len } > 0 {
            self.cold(class).spare.set(main.as_ptr());
            self.install(class, spare);
            CacheCounters::add(&counters.spare_swaps, 1);
            return self.pop(class).unwrap_or(ptr::null_mut());
        }
        // 2. Trade the empty main for a full sheaf at the barn.
        let node = self.node.get();
        let mut barn = node_class(node, class).barn.lock();
        if let Some(full) = barn.take_full() {
            // SAFETY: main is owned by this thread, empty, of this barn's
            // node and class.
            let leftover = unsafe { barn.put_empty(main) }.err();
            drop(barn);
            if let Some(empty) = leftover {
                // SAFETY: we own the empty sheaf the barn refused.
                unsafe { SHEAF_POOL.give(empty) };
            }
            CacheCounters::add(&counters.barn_get_hits, 1);
            self.install(class, full.as_ptr());
            self.sync_capacity(class);
            return self.pop(class).unwrap_or(ptr::null_mut());
        }
        drop(barn);
        CacheCounters::add(&counters.barn_get_misses, 1);
        // 3. Refill the main sheaf from the slabs, in bulk.
        // SAFETY: main is owned by this thread and installed; its `len` was
        // stashed by `main_sheaf` and is zero.
        let sheaf = unsafe { &mut *main.as_ptr() };
        let capacity = sheaf.capacity as usize;
        let filled = cache::refill_from_slabs(node, class, &mut sheaf.objects[..capacity]);
        sheaf.len = filled as u32;
        self.install(class, main.as_ptr());
        cache::maybe_decay();
        self.pop(class).unwrap_or(ptr::null_mut())
    }

    /// Slow path of free: main is full or missing, or the object is remote.
    ///
    /// # Safety
    ///
    /// 1. `object` was returned by allocation for `class` (of this
    ///    allocator) and is no longer used.
    #[cold]
    #[inline(never)]
    pub unsafe fn dealloc_slow(&self, class: SizeClass, object: *mut u8) {
        if !self.ensure_active() {
            // SAFETY: duty 1.
            return unsafe { uncached_free(class, object) };
        }
        let _guard = SlowPathGuard::enter(self);
        self.follow_node();
        let counters = &cache(class).counters;
        CacheCounters::add(&counters.slow_path_frees, 1);
        let home = arena::home_node(object as usize);
        match home {
            Some(home) if home == self.node.get() => {}
            // Never cache an object on a node that is not its home: batch it
            // for its home node.
            // SAFETY: duty 1.
            Some(home) => return unsafe { self.remote_free(class, object, home) },
            None => {
                crate::invariant!(false, "free of a pointer outside the arena");
                return;
            }
        }
        self.sync_capacity(class);
        if self.push(class, object) {
            return;
        }
        let Some(main) = self.main_sheaf(class) else {
            // SAFETY: duty 1.
            return unsafe { uncached_free(class, object) };
        };
        // A main sheaf created just now (none was installed, e.g. after the
        // pool ran dry below) has room; only a full one goes further.
        if self.push(class, object) {
            return;
        }
        let spare = self.cold(class).spare.get();
        // SAFETY: the spare is owned by this thread.
        if spare.is_null() || unsafe { (*spare).len } == 0 {
            let empty = if spare.is_null() {
                self.new_sheaf(class)
            } else {
                NonNull::new(spare)
            };
            if let Some(empty) = empty {
                self.cold(class).spare.set(main.as_ptr());
                self.install(class, empty.as_ptr());
                CacheCounters::add(&counters.spare_swaps, 1);
                let pushed = self.push(class, object);
                crate::invariant!(pushed, "push into an empty sheaf failed");
                return;
            }
        } else {
            // Both full: hand main to the barn and take an empty one.
            let node = self.node.get();
            let mut barn = node_class(node, class).barn.lock();
            // SAFETY: main is owned, full (len > 0), of this node and class.
            if unsafe { barn.put_full(main) }.is_ok() {
                let empty = barn.take_empty();
                drop(barn);
                self.uninstall(class);
                CacheCounters::add(&counters.barn_put_hits, 1);
                if let Some(empty) = empty.or_else(|| self.new_sheaf(class)) {
                    self.install(class, empty.as_ptr());
                    self.sync_capacity(class);
                    if self.push(class, object) {
                        return;
                    }
                }
                // SAFETY: duty 1.
                return unsafe { uncached_free(class, object) };
            }
            drop(barn);
            CacheCounters::add(&counters.barn_put_misses, 1);
        }
        // Flush the main sheaf to the slabs and start it over.
        // SAFETY: main is owned and stashed; its objects are free objects of
        // this class whose home is our node.
        unsafe {
            let sheaf = &mut *main.as_ptr();
            cache::flush_to_slabs(self.node.get(), class, sheaf.held());
            sheaf.len = 0;
        }
        self.install(class, main.as_ptr());
        let pushed = self.push(class, object);
        crate::invariant!(pushed, "push into a flushed sheaf failed");
    }

    /// Returns every cached object of this thread to barns and slabs, keeping
    /// the thread registered (used by `purge`).
    pub fn flush_all(&self) {
        if self.state.get() != ThreadState::Active {
            return;
        }
        let _guard = SlowPathGuard::enter(self);
        // A thread that moved since its last slow path gives everything
        // back and starts over on the node it is on now.
        match crate::topology::node_of_current_cpu() {
            Some(node) if node != self.node.get() => self.move_to_node(node),
            _ => self.give_back_all(),
        }
    }

    /// Hands every sheaf and remote batch back to the barns and slabs.
    fn give_back_all(&self) {
        for class in SizeClass::all() {
            self.stash(class);
            let main = self.cold(class).main.replace(ptr::null_mut());
            let spare = self.cold(class).spare.replace(ptr::null_mut());
            self.uninstall(class);
            for sheaf in [main, spare] {
                if let Some(sheaf) = NonNull::new(sheaf) {
                    self.dispose(class, sheaf);
                }
            }
            self.release_remote(class);
        }
    }

    /// Checks the thread's node (at least once per slow path). If the
    /// thread moved to another node, its sheaves go back to the old node
    /// first: their objects must not be handed out on the new one.
    #[inline]
    fn follow_node(&self) {
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

    /// Batches an object for its home node; a full batch (or one for
    /// another node) is handed over in one operation.
    ///
    /// # Safety
    ///
    /// 1. `object` is a free object of `class` whose home is `home`, no
    ///    longer used.
    unsafe fn remote_free(&self, class: SizeClass, object: *mut u8, home: NodeId) {
        let slot = self.hot(class);
        slot.frees
            .store(slot.frees.load(Relaxed).wrapping_add(1), Relaxed);
        let cold = self.cold(class);
        // SAFETY: the batch is owned by this thread.
        if !cold.remote.get().is_null() && unsafe { (*cold.remote.get()).node } != home {
            // Objects for another node are waiting: send them first.
            self.send_remote(class);
        }
        let mut batch = cold.remote.get();
        if batch.is_null() {
            match SHEAF_POOL.take(class, home, cache(class).sheaf_capacity(class)) {
                Some(sheaf) => {
                    batch = sheaf.as_ptr();
                    cold.remote.set(batch);
                }
                None => {
                    // No memory for a batch: send the object home alone.
                    // SAFETY: duty 1.
                    unsafe { cache::flush_to_slabs(home, class, &[object]) };
                    self.count_remote(class, home, 1);
                    return;
                }
            }
        }
        // SAFETY: owned by this thread and empty if its node differed (it
        // was sent above), so it may be retargeted; it has room (full
        // batches are sent at once below).
        let pushed = unsafe {
            (*batch).node = home;
            (*batch).push(object)
        };
        crate::invariant!(pushed, "remote batch overflow");
        // SAFETY: as above.
        if unsafe { (*batch).len >= (*batch).capacity } {
            self.send_remote(class);
        }
    }

    /// Hands the remote batch of `class` to its home node: a full batch
    /// becomes a full sheaf in the home barn if it has room, traded under
    /// the same lock for one of the barn's empty sheaves, which becomes the
    /// next batch (no object memory touched, no trip to the pool); otherwise
    /// the objects go to the home slabs and the emptied sheaf stays as the
    /// next batch. The slot keeps an empty batch (or none).
    fn send_remote(&self, class: SizeClass) {
        let cold = self.cold(class);
        let Some(batch) = NonNull::new(cold.remote.get()) else {
            return;
        };
        // SAFETY: the batch is owned by this thread's slot.
        let sheaf = unsafe { &mut *batch.as_ptr() };
        let home = sheaf.node;
        let count = sheaf.len;
        if count == 0 {
            return;
        }
        self.count_remote(class, home, count);
        if sheaf.len == sheaf.capacity {
            let mut barn = node_class(home, class).barn.lock();
            // SAFETY: owned, non-empty, objects of `class` whose home is
            // `home` (the barn's node and class).
            if unsafe { barn.put_full(batch) }.is_ok() {
                let next = barn.take_empty();
                drop(barn);
                let next = next.map_or(ptr::null_mut(), |empty| {
                    // SAFETY: the barn handed the empty sheaf to us.
                    unsafe { (*empty.as_ptr()).capacity = cache(class).sheaf_capacity(class) };
                    empty.as_ptr()
                });
                cold.remote.set(next);
                return;
            }
        }
        // SAFETY: the objects are free objects of `class` at home `home`.
        unsafe { cache::flush_to_slabs(home, class, sheaf.held()) };
        sheaf.len = 0;
        sheaf.capacity = cache(class).sheaf_capacity(class);
    }

    /// Sends the remote batch and gives its (empty) sheaf back to the pool.
    fn release_remote(&self, class: SizeClass) {
        self.send_remote(class);
        if let Some(empty) = NonNull::new(self.cold(class).remote.replace(ptr::null_mut())) {
            // SAFETY: owned and empty after `send_remote`.
            unsafe { SHEAF_POOL.give(empty) };
        }
    }

    fn count_remote(&self, class: SizeClass, home: NodeId, count: u32) {
        let counters = &cache(class).counters;
        CacheCounters::add(
            &counters.remote_frees[self.node.get().index()][home.index()],
            u64::from(count),
        );
    }

    /// Flushes everything and unregisters; the thread is `Dead` afterwards.
    /// Called by the runtime's pthread key destructor.
    pub(crate) fn on_thread_exit(&self) {
        if self.state.get() != ThreadState::Active {
            return;
        }
        self.flush_all();
        runtime::unregister(self);
        self.node_span.set(0);
        self.state.set(ThreadState::Dead);
    }

    /// Moves the counters of every class into the caches and zeroes them
    /// (under the registry lock, so no reader counts them twice).
    pub(crate) fn fold_counters(&self) {
        for class in SizeClass::all() {
            let slot = self.hot(class);
            let counters = &cache(class).counters;
            CacheCounters::add(&counters.allocs_folded, slot.allocs.swap(0, Relaxed));
            CacheCounters::add(&counters.frees_folded, slot.frees.swap(0, Relaxed));
        }
    }

    /// What a reader on another thread may see of `class` (racy by design:
    /// every field is a relaxed atomic written only by the owner).
    pub(crate) fn view(&self, class: SizeClass) -> ThreadClassView {
        let slot = self.hot(class);
        ThreadClassView {
            allocs: slot.allocs.load(Relaxed),
            frees: slot.frees.load(Relaxed),
            capacity: slot.capacity.load(Relaxed),
            main_len: slot.len.load(Relaxed),
        }
    }

    /// Sheaf capacity of the installed main sheaf of `class` in this thread
    /// (0 if none is installed).
    pub fn main_capacity(&self, class: SizeClass) -> u32 {
        self.hot(class).capacity.load(Relaxed)
    }

    /// `os::current_thread()` of the owning thread (0 before it attaches).
    pub(crate) fn owner_thread(&self) -> usize {
        self.owner_thread.load(Relaxed)
    }

    /// The node this thread allocates on.
    pub fn node(&self) -> NodeId {
        self.node.get()
    }

    fn ensure_active(&self) -> bool {
        match self.state.get() {
            ThreadState::Active => true,
            ThreadState::Dead => false,
            ThreadState::Fresh => self.attach(),
        }
    }

    #[cold]
    fn attach(&self) -> bool {
        if !runtime::ensure_init() {
            return false;
        }
        let node = crate::topology::node_for_new_thread();
        self.node.set(node);
        self.node_base.set(arena::node_base(node));
        self.node_span.set(arena::node_span());
        self.state.set(ThreadState::Active);
        self.owner_thread
            .store(crate::os::current_thread(), Relaxed);
        runtime::register(self);
        true
    }

    /// The installed main sheaf, stashed; creates one if there is none.
    fn main_sheaf(&self, class: SizeClass) -> Option<NonNull<Sheaf>> {
        self.stash(class);
        if let Some(main) = NonNull::new(self.cold(class).main.get()) {
            return Some(main);
        }
        let sheaf = self.new_sheaf(class)?;
        self.install(class, sheaf.as_ptr());
        Some(sheaf)
    }

    fn new_sheaf(&self, class: SizeClass) -> Option<NonNull<Sheaf>> {
        let node = self.node.get();
        let capacity = cache(class).sheaf_capacity(class);
        let from_barn = node_class(node, class).barn.lock().take_empty();
        let sheaf = from_barn.or_else(|| SHEAF_POOL.take(class, node, capacity))?;
        // SAFETY: the sheaf is ours now.
        unsafe { (*sheaf.as_ptr()).capacity = capacity };
        Some(sheaf)
    }

    /// Writes the hot length back into the main sheaf's header.
    fn stash(&self, class: SizeClass) {
        let main = self.cold(class).main.get();
        if !main.is_null() {
            // SAFETY: main is owned by this thread.
            unsafe { (*main).len = self.hot(class).len.load(Relaxed) };
        }
    }

    /// Makes `sheaf` (owned, stashed) the main sheaf of `class`.
    fn install(&self, class: SizeClass, sheaf: *mut Sheaf) {
        self.cold(class).main.set(sheaf);
        let slot = self.hot(class);
        // SAFETY: the caller hands us an owned sheaf.
        unsafe {
            slot.objects.store((*sheaf).objects.as_mut_ptr(), Relaxed);
            slot.capacity.store((*sheaf).capacity, Relaxed);
            slot.len.store((*sheaf).len, Relaxed);
        }
    }

    fn uninstall(&self, class: SizeClass) {
        self.cold(class).main.set(ptr::null_mut());
        let slot = self.hot(class);
        slot.len.store(0, Relaxed);
        slot.capacity.store(0, Relaxed);
        slot.objects.store(ptr::null_mut(), Relaxed);
    }

    /// Applies the cache's current capacity to main and spare, returning
    /// objects above a smaller capacity to the slabs.
    fn sync_capacity(&self, class: SizeClass) {
        let target = cache(class).sheaf_capacity(class);
        let main = self.cold(class).main.get();
        // SAFETY: main and spare are owned by this thread.
        if !main.is_null() && unsafe { (*main).capacity } != target {
            self.stash(class);
            self.resize(class, main, target);
            self.install(class, main);
        }
        let spare = self.cold(class).spare.get();
        // SAFETY: as above.
        if !spare.is_null() && unsafe { (*spare).capacity } != target {
            self.resize(class, spare, target);
        }
    }

    fn resize(&self, class: SizeClass, sheaf: *mut Sheaf, target: u32) {
        // SAFETY: the caller owns the (stashed) sheaf.
        let sheaf = unsafe { &mut *sheaf };
        if sheaf.len > target {
            // SAFETY: the objects above `target` are free objects of this
            // class and node, owned through the sheaf.
            unsafe {
                cache::flush_to_slabs(
                    sheaf.node,
                    class,
                    &sheaf.objects[target as usize..sheaf.len as usize],
                )
            };
            sheaf.len = target;
        }
        sheaf.capacity = target;
        CacheCounters::add(&cache(class).counters.sheaf_resizes, 1);
    }

    /// Sends an owned sheaf away: a full one to the barn (or the slabs), an
    /// empty one to the barn's empty stack (or the pool).
    fn dispose(&self, class: SizeClass, sheaf: NonNull<Sheaf>) {
        let node = self.node.get();
        // SAFETY: the caller owns the stashed sheaf.
        let sheaf_ref = unsafe { &mut *sheaf.as_ptr() };
        let barn = &node_class(node, class).barn;
        if sheaf_ref.len > 0 {
            // SAFETY: owned, non-empty, this node and class.
            if sheaf_ref.len == sheaf_ref.capacity && unsafe { barn.lock().put_full(sheaf) }.is_ok()
            {
                return;
            }
            // SAFETY: the held objects are free objects of this node/class.
            unsafe { cache::flush_to_slabs(node, class, sheaf_ref.held()) };
            sheaf_ref.len = 0;
        }
        // SAFETY: owned and empty.
        if let Err(sheaf) = unsafe { barn.lock().put_empty(sheaf) } {
            // SAFETY: owned, empty, not used again.
            unsafe { SHEAF_POOL.give(sheaf) };
        }
    }
}

impl Default for ThreadCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Takes one object straight from the slabs of `node` (no thread cache).
pub fn uncached_alloc(node: NodeId, class: SizeClass) -> *mut u8 {
    if !runtime::ensure_init() {
        return ptr::null_mut();
    }
    let mut object = [ptr::null_mut()];
    if cache::refill_from_slabs(node, class, &mut object) == 0 {
        return ptr::null_mut();
    }
    CacheCounters::add(&cache(class).counters.allocs_folded, 1);
    object[0]
}

/// Returns one object straight to its home slab (no thread cache).
///
/// # Safety
///
/// 1. `object` was allocated for `class` by this allocator and is no
///    longer used.
pub unsafe fn uncached_free(class: SizeClass, object: *mut u8) {
    let Some(home) = arena::home_node(object as usize) else {
        crate::invariant!(false, "free of a pointer outside the arena");
        return;
    };
    // SAFETY: duty 1: a free object of `class` whose home is `home`.
    unsafe { cache::flush_to_slabs(home, class, &[object]) };
    CacheCounters::add(&cache(class).counters.frees_folded, 1);
}

/// Debug-build guard against re-entering the allocator from its own slow
/// path (which would mean something on it allocates).
struct SlowPathGuard<'a> {
    #[cfg(debug_assertions)]
    owner: &'a ThreadCache,
    #[cfg(not(debug_assertions))]
    _owner: core::marker::PhantomData<&'a ThreadCache>,
}

impl<'a> SlowPathGuard<'a> {
    #[inline(always)]
    fn enter(owner: &'a ThreadCache) -> Self {
        #[cfg(debug_assertions)]
        {
            crate::invariant!(
                !owner.in_slow_path.replace(true),
                "allocator re-entered from its own slow path"
            );
            Self { owner }
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
        self.owner.in_slow_path.set(false);
    }
}
