//! One thread's sheaves of one size class: the fast-path [`HotSlot`], the
//! sheaves behind it ([`ColdSlot`]: main, spare, remote batch), and the
//! slow paths that trade them through the exchange protocol.
//!
//! Everything here works on a [`ClassSheaves`] view and a [`Depot`]; it
//! knows nothing of thread-locals, the registry or the static caches, so
//! the loom models run exactly this code on barns and slabs of their own.

use core::cell::Cell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use crate::counters::CacheCounters;
use crate::exchange::{self, Depot};
use crate::node::NodeId;
use crate::sheaf::Sheaf;

/// The fast-path state of one class in one thread.
///
/// Invariants: if the class's main sheaf is installed, `objects` points to
/// its object array, `len <= ` the sheaf's capacity is its true length (the
/// header's `len` is stale until stashed), and `capacity <=` the sheaf's
/// capacity (lower when the cache's capacity was lowered since the sheaf
/// was installed: `clamp_capacity`); otherwise `len == capacity == 0` and
/// `objects` is null. Written only by
/// the owning thread; the fields are atomics only so that a statistics
/// reader on another thread may load them without a data race (relaxed
/// loads and stores: plain moves on x86-64, no read-modify-write).
#[repr(C, align(32))]
pub struct HotSlot {
    len: AtomicU32,
    capacity: AtomicU32,
    objects: AtomicPtr<*mut u8>,
    allocs: AtomicU64,
    frees: AtomicU64,
}

// A class's hot slot is at its `SizeClass::record_offset` in the array, the
// same offset as its record in a CPU's cache (also 32 bytes).
const _: () = assert!(core::mem::size_of::<HotSlot>() == crate::size_class::RECORD_STRIDE);

impl HotSlot {
    /// A slot with no sheaf installed.
    pub const fn new() -> Self {
        Self {
            len: AtomicU32::new(0),
            capacity: AtomicU32::new(0),
            objects: AtomicPtr::new(ptr::null_mut()),
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
        }
    }

    /// HOT PATH (alloc): pop from the main sheaf, or `None` if it is empty
    /// or missing. Budget: no atomic RMW, no lock, no call, one branch.
    #[inline(always)]
    pub fn pop(&self) -> Option<*mut u8> {
        let len = self.len.load(Relaxed).checked_sub(1)?;
        // SAFETY: `len < capacity`, and `objects[..len + 1]` are valid
        // entries of the installed main sheaf (HotSlot invariant).
        let object = unsafe { *self.objects.load(Relaxed).add(len as usize) };
        self.len.store(len, Relaxed);
        self.allocs
            .store(self.allocs.load(Relaxed).wrapping_add(1), Relaxed);
        Some(object)
    }

    /// HOT PATH (free): push onto the main sheaf if it has room. Budget: no
    /// atomic RMW, no lock, no call, one well-predicted branch.
    #[inline(always)]
    pub fn push(&self, object: *mut u8) -> bool {
        let len = self.len.load(Relaxed);
        if len >= self.capacity.load(Relaxed) {
            return false;
        }
        // SAFETY: `len < capacity <=` the installed main sheaf's capacity
        // `<=` its storage, so the entry lies in its object storage
        // (HotSlot and Sheaf invariants).
        unsafe { *self.objects.load(Relaxed).add(len as usize) = object };
        self.len.store(len.wrapping_add(1), Relaxed);
        self.frees
            .store(self.frees.load(Relaxed).wrapping_add(1), Relaxed);
        true
    }

    /// Lowers the fast-path capacity to at most `capacity` (from any
    /// thread; see `ClassSheaves::install` for the other side).
    #[cfg(not(loom))]
    pub(crate) fn clamp_capacity(&self, capacity: u32) {
        self.capacity.fetch_min(capacity, SeqCst);
    }

    /// Counts an allocation made without `pop` (per-CPU mode).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn count_alloc(&self) {
        self.allocs
            .store(self.allocs.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Allocations and frees of this class the thread has made (since its
    /// last `take_counts`).
    pub(crate) fn counts(&self) -> ClassCounts {
        ClassCounts {
            allocs: self.allocs.load(Relaxed),
            frees: self.frees.load(Relaxed),
        }
    }

    /// Counts a free that did not go through `push` (remote, straight to
    /// the slabs, or per-CPU mode).
    #[inline(always)]
    pub(crate) fn count_free(&self) {
        self.frees
            .store(self.frees.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Moves the allocation and free counts out (zeroing them).
    #[cfg(not(loom))]
    pub(crate) fn take_counts(&self) -> (u64, u64) {
        (self.allocs.swap(0, Relaxed), self.frees.swap(0, Relaxed))
    }

    /// What a reader on another thread may see (racy by design).
    #[cfg(not(loom))]
    pub(crate) fn view(&self) -> SlotView {
        SlotView {
            allocs: self.allocs.load(Relaxed),
            frees: self.frees.load(Relaxed),
            capacity: self.capacity.load(Relaxed),
            main_len: self.len.load(Relaxed),
            slow_allocs: 0,
            slow_frees: 0,
            spare_swaps: 0,
        }
    }

    /// Capacity of the installed main sheaf (0 if none).
    pub fn capacity(&self) -> u32 {
        self.capacity.load(Relaxed)
    }

    /// Objects in the installed main sheaf.
    pub fn len(&self) -> u32 {
        self.len.load(Relaxed)
    }

    /// True when no object is in the main sheaf (or none is installed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for HotSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// A thread's allocation and free counts of one class ([`HotSlot`]), as a
/// slow path reads them: the frees do not count a free in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Allocations of the class.
    pub allocs: u64,
    /// Frees of the class.
    pub frees: u64,
}

/// What a statistics reader may see of one slot.
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SlotView {
    pub allocs: u64,
    pub frees: u64,
    pub capacity: u32,
    pub main_len: u32,
    /// Slow paths and spare swaps the thread counted (since it attached;
    /// they reach the cache's shared counters when it exits).
    pub slow_allocs: u64,
    pub slow_frees: u64,
    pub spare_swaps: u64,
}

/// The sheaves of one class in one thread, owned by the thread: only it
/// reads or writes these cells (and the counts, which readers may load).
pub struct ColdSlot {
    main: Cell<*mut Sheaf>,
    spare: Cell<*mut Sheaf>,
    /// Objects freed by this thread whose home is another node, waiting to
    /// be handed over in one batch (`node` of the sheaf = their home).
    pub(super) remote: Cell<*mut Sheaf>,
    /// Slow paths of this class the thread took ([`SlowPathCount`]). The
    /// loom models run no thread cache, hence no slow path counts.
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) slow_allocs: SlowPathCount,
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) slow_frees: SlowPathCount,
    /// This thread's trades with the spare sheaf of this class (of its own
    /// sheaves, or in per-CPU mode of the CPU's).
    pub(crate) spare_trades: SpareTrades,
}

impl ColdSlot {
    /// No sheaves.
    pub const fn new() -> Self {
        Self {
            main: Cell::new(ptr::null_mut()),
            spare: Cell::new(ptr::null_mut()),
            remote: Cell::new(ptr::null_mut()),
            slow_allocs: SlowPathCount::new(),
            slow_frees: SlowPathCount::new(),
            spare_trades: SpareTrades::new(),
        }
    }
}

/// One thread's trades with the spare sheaf of one class: its count of
/// spare swaps (most slow paths are spare swaps), and which kind its last
/// trade of the class was, with the thread's allocation counts around it.
///
/// # Why the last trade matters: bursts that straddle the boundary
///
/// With main holding `L` objects and a full spare, a burst of `B > L`
/// allocations empties main and swaps the spare in; its `B` frees fill
/// that sheaf again after `B - L`, and the free that finds it full swaps
/// the empty one back, which takes the last `L`. The thread is where it
/// started: two slow paths per burst, for ever, at any capacity (raising
/// the capacity does not change `L`). So a free that finds main full right
/// after an allocation's swap *splits* instead ([`Self::split`]): the
/// most recently freed objects go into the empty spare, which becomes
/// main, and the rest wait as the spare. Any other trade (a barn trade, a
/// refill) keeps the plain swap, so a producer's or a consumer's stream
/// trades whole sheaves as before.
///
/// How many main keeps depends on what the thread knows of the burst.
/// When the swap followed one of its free-side trades (the previous burst
/// ended in a free's swap or split), the allocations between the two are
/// `L`, those since the swap `B - L`: the burst is known. If it fits the
/// capacity, main keeps what leaves it at `(B + C) / 2` once the burst's
/// frees still to come (`B` less the thread's frees since the swap) are
/// in: the next burst comes out of main, and bursts that vary a little
/// have slack both ways. Counting the frees to come, not assuming them,
/// matters when the spare the allocation swapped in was not full (a split
/// leaves it part full): with `S < C` objects in it, the burst's frees
/// fill main after `C - S + B - L` of them, and a split that kept `B - L`
/// (all a full spare needs) left main at `S` after the burst and the spare
/// at `L`, the two lengths traded places every burst, and every burst took
/// two slow paths (bursts of 256 at capacity 256 with sheaves of 187 and
/// 128 ran so for seconds in per-CPU mode, until the auto-tuner raised
/// the capacity). A burst larger than the
/// capacity crosses into the other sheaf whatever the lengths; there a
/// split costs a third more slow paths than the plain swaps, so it swaps.
/// When the burst is not known (the first burst after another kind of
/// trade), main keeps `B - L`, at least half the capacity, if `B - L` is
/// at most three quarters of it, and otherwise swaps; the swap is a
/// free-side trade, so the next burst is known.
pub struct SpareTrades {
    /// Spare swaps (splits among them). The loom models run no thread
    /// cache, hence no counts.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) swaps: SlowPathCount,
    last: Cell<LastTrade>,
    /// Whether an allocation of the thread took a sheaf of objects from
    /// the barn or the slabs since its last put of a full main
    /// ([`Self::put_keep`]).
    took_full: Cell<bool>,
    /// Whether the thread had taken a sheaf of objects before its last
    /// put too: the get-and-put cycle repeats.
    put_after_take: Cell<bool>,
    /// The counts below are [`Mark`]s: the low 32 bits of the thread's
    /// counts of the class, compared by wrapping differences (a
    /// difference of 2^32 or more, which only a thread that goes that
    /// long without a trade of the class reaches, reads as a small one:
    /// one decision misjudged, never an error). Every thread has one
    /// record per class in its static TLS, which the C library writes in
    /// full at each thread's start, so each byte here is paid per thread.
    ///
    /// The thread's allocations of the class ([`HotSlot::counts`]) at its
    /// last spare swap (an allocation's or a free's).
    allocs_at_swap: Cell<Mark>,
    /// After an allocation's swap: the thread's allocations between its
    /// previous trade, if that was a free's swap or split, and this swap
    /// (`L` above); [`UNKNOWN`] where unknown.
    allocs_before_swap: Cell<Mark>,
    /// The thread's frees of the class at its last allocation's swap.
    frees_at_swap: Cell<Mark>,
    /// The thread's allocations of the class at its last put of a full
    /// main; [`UNKNOWN`] before the first.
    allocs_at_put: Cell<Mark>,
}

/// The low 32 bits of a thread's count of a class ([`SpareTrades`]).
type Mark = u32;

/// A [`Mark`] not known.
const UNKNOWN: Mark = Mark::MAX;

/// The mark of count `count`.
const fn mark(count: u64) -> Mark {
    count as Mark
}

/// `count - at`, as a count: wrapping in the marks' 32 bits.
fn since(count: u64, at: Mark) -> u64 {
    u64::from(mark(count).wrapping_sub(at))
}

/// The kind of a thread's last trade of a class ([`SpareTrades`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum LastTrade {
    /// A barn trade, a refill, a flush, or none yet.
    Elsewhere,
    /// An allocation swapped the spare in.
    AllocSwap,
    /// A free swapped the spare in or split main.
    FreeSwap,
}

impl SpareTrades {
    const fn new() -> Self {
        Self {
            swaps: SlowPathCount::new(),
            last: Cell::new(LastTrade::Elsewhere),
            took_full: Cell::new(false),
            put_after_take: Cell::new(false),
            allocs_at_swap: Cell::new(0),
            allocs_before_swap: Cell::new(UNKNOWN),
            frees_at_swap: Cell::new(0),
            allocs_at_put: Cell::new(UNKNOWN),
        }
    }

    /// An allocation swapped a spare with objects in; `counts` are the
    /// class's counts where the sheaves are: the thread's
    /// ([`HotSlot::counts`]), or in per-CPU mode the CPU's
    /// (`percpu::counts`).
    pub(crate) fn alloc_swapped(&self, counts: ClassCounts) {
        self.swaps.count();
        let before = match self.last.get() {
            // Below `UNKNOWN` unless the difference is 2^32 - 1 exactly
            // (then unknown, which it nearly is).
            LastTrade::FreeSwap => mark(since(counts.allocs, self.allocs_at_swap.get())),
            LastTrade::Elsewhere | LastTrade::AllocSwap => UNKNOWN,
        };
        self.allocs_before_swap.set(before);
        self.last.set(LastTrade::AllocSwap);
        self.allocs_at_swap.set(mark(counts.allocs));
        self.frees_at_swap.set(mark(counts.frees));
    }

    /// A free swapped or split (counted as a spare swap), the thread's
    /// allocation count of the class being `allocs`.
    pub(crate) fn free_swapped(&self, allocs: u64) {
        self.swaps.count();
        self.last.set(LastTrade::FreeSwap);
        self.allocs_at_swap.set(mark(allocs));
    }

    /// An allocation found both sheaves empty and takes a sheaf of objects
    /// from the barn or the slabs.
    pub(crate) fn alloc_took_full(&self) {
        self.last.set(LastTrade::Elsewhere);
        self.took_full.set(true);
    }

    /// A free found both sheaves full: main goes to the barn (all of it,
    /// or what [`Self::put_keep`] did not keep), the thread's allocation
    /// count of the class being `allocs`.
    pub(crate) fn put_main(&self, allocs: u64) {
        self.last.set(LastTrade::Elsewhere);
        self.put_after_take.set(self.took_full.replace(false));
        self.allocs_at_put.set(mark(allocs));
    }

    /// When a free finds both sheaves of `capacity` full, whether main
    /// keeps some of its objects (how many) and sends only the rest to the
    /// barn, the thread's allocation count of the class being `allocs`.
    ///
    /// A thread whose bursts run between one and two capacities can hold a
    /// burst in its two sheaves, but whole-sheaf trades move what it holds
    /// by a capacity at a time: holding `H` objects at the start of a burst
    /// of `B > H`, it takes a full sheaf from the barn (`H + C`), and its
    /// frees then overflow both sheaves and send one back (`H` again), two
    /// barn trades besides the two spare swaps in every burst, for ever.
    /// Keeping part of main at the put moves `H` by less than a capacity,
    /// so the next burst fits. Due only when the thread took a sheaf of
    /// objects since its previous put and before it (the cycle repeats: a
    /// thread whose allocations and frees only wander, as larson's, took
    /// more slow paths with partial puts on every take-then-put), and the
    /// allocation count at the previous put measures the burst: for a
    /// burst up to 7/4 of the capacity, main sends
    /// `(2C - B) / 2` objects (at least one) to the barn and keeps the rest,
    /// so the thread holds about `C + B / 2` (between `B` and `2C`) after
    /// the burst's frees; a larger burst trades whole sheaves.
    pub(crate) fn put_keep(&self, allocs: u64, capacity: u32) -> Option<u32> {
        let at_put = self.allocs_at_put.get();
        if !self.took_full.get() || !self.put_after_take.get() || at_put == UNKNOWN || capacity < 2
        {
            return None;
        }
        // A count that went back reads as large: a whole put.
        let burst = since(allocs, at_put);
        let capacity_64 = u64::from(capacity);
        // `capacity <= SHEAF_CAPACITY_MAX`: no product wraps; below,
        // `burst <= 7/4 capacity`, so the subtraction does not either.
        if burst > capacity_64.wrapping_mul(7) / 4 {
            return None;
        }
        let sent = (capacity_64.wrapping_mul(2).wrapping_sub(burst) / 2)
            .clamp(1, capacity_64.wrapping_sub(1));
        // `sent < capacity`: the cast is exact.
        Some(capacity.wrapping_sub(sent as u32))
    }

    /// Whether a free that finds a main of `capacity` full and the spare
    /// empty splits main rather than swapping, the class's counts (as in
    /// `alloc_swapped`) being `counts` now (not counting this free); if so, how many
    /// objects the new main keeps (from 1 to `capacity - 1`; never due
    /// below capacity 2). Due only right after an allocation's swap:
    ///
    /// - If the burst is known (the swap followed a free-side trade), a
    ///   split is due if it fits the capacity. Main keeps what leaves it
    ///   halfway between the burst and the capacity after the burst's
    ///   frees still to come (this one, and the burst less the frees since
    ///   the swap): the next burst's allocations come from main, with
    ///   slack either way for bursts that vary.
    /// - Otherwise, if the thread allocated at most three quarters of the
    ///   capacity since the swap; main keeps what was allocated since, at
    ///   least half the capacity (rounded up).
    ///
    /// A larger burst leaves main no room for its own last frees after any
    /// split, and a plain swap costs less. A count that went back (the
    /// counts were folded into the cache at a flush) reads as large: no
    /// split.
    pub(crate) fn split(&self, counts: ClassCounts, capacity: u32) -> Option<u32> {
        if self.last.get() != LastTrade::AllocSwap || capacity < 2 {
            return None;
        }
        let since_swap = since(counts.allocs, self.allocs_at_swap.get());
        let before_swap = self.allocs_before_swap.get();
        let capacity_64 = u64::from(capacity);
        // Below, `burst <= capacity <= SHEAF_CAPACITY_MAX` and
        // `since_swap <= burst`: no operation wraps.
        let keep = if before_swap != UNKNOWN {
            let burst = since_swap.saturating_add(u64::from(before_swap));
            if burst > capacity_64 {
                return None;
            }
            // The burst's objects not yet freed, this one among them (a
            // count that went back reads as large: none).
            let freed = since(counts.frees, self.frees_at_swap.get());
            let to_come = burst.saturating_sub(freed);
            (burst.wrapping_add(capacity_64) / 2).saturating_sub(to_come)
        } else {
            if since_swap > capacity_64.wrapping_mul(3) / 4 {
                return None;
            }
            since_swap.max(capacity_64.wrapping_sub(capacity_64 / 2))
        };
        // `keep <= capacity` here: the cast is exact.
        Some((keep as u32).clamp(1, capacity.wrapping_sub(1)))
    }
}

/// One thread's count of slow-path events of one kind and class (slow
/// paths, spare swaps). It only grows while the thread lives, and reaches
/// the cache's shared counter when the thread exits ([`Self::publish`]).
///
/// Written only by the owning thread (a relaxed load and store, no
/// read-modify-write): a shared counter's `lock add` on every slow path
/// was the costliest instruction of a cross-node free (every remote free
/// takes the slow path), since a locked instruction waits for the
/// thread's earlier stores to leave its store buffer, and in a hand-off
/// those are stores to lines the other core holds.
///
/// Readers (statistics, the tuner) add every live thread's count to the
/// shared counter, reading both under the registry lock, under which a
/// thread's exit publishes its count and leaves the registry: each event
/// is counted once, and a total never goes back. (Moving the count into
/// the shared counter every few events while the thread lived did not
/// keep that promise: a reader that loaded the shared counter before a
/// move, and the thread's count after it, missed the batch, and the next
/// snapshot read less than the one before.)
#[cfg_attr(loom, allow(dead_code))]
pub struct SlowPathCount(AtomicU64);

#[cfg_attr(loom, allow(dead_code))]
impl SlowPathCount {
    const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Counts one event.
    #[inline]
    pub(crate) fn count(&self) {
        self.0.store(self.0.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// The events counted and not yet published (racy by design, for
    /// readers on other threads; under the registry lock, exact).
    pub(crate) fn pending(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Adds the count to `shared` and zeroes it (the owner, at exit,
    /// under the registry lock).
    pub(crate) fn publish(&self, shared: &AtomicU64) {
        let pending = self.0.swap(0, Relaxed);
        if pending > 0 {
            CacheCounters::add(shared, pending);
        }
    }
}

impl Default for ColdSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// Splits a full main sheaf with an empty spare ([`SpareTrades::split`]):
/// the `keep` most recently freed of `main`'s objects move into `spare`,
/// which is to be installed as the main sheaf; `main` keeps the rest and
/// becomes the spare.
///
/// # Safety
///
/// 1. The caller owns both sheaves (detached from any slot other threads
///    can reach), and they hold objects of the same class and home.
pub(crate) unsafe fn split(main: NonNull<Sheaf>, spare: NonNull<Sheaf>, keep: u32) {
    // SAFETY: duty 1: owned by the caller, two distinct sheaves.
    let (main, spare) = unsafe { (&mut *main.as_ptr(), &mut *spare.as_ptr()) };
    main.move_top_to(spare, keep);
}

/// One thread's view of its sheaves of one class.
///
/// Invariants (with the depot's class `c` and the thread's node `n`):
/// `main` and `spare`, when not null, are owned sheaves of class `c` whose
/// objects' home is `n`; the hot slot mirrors `main` (HotSlot invariant);
/// `remote`, when not null, is an owned sheaf whose objects' home is its
/// `node`, which is not `n` while it holds objects.
#[derive(Clone, Copy)]
pub struct ClassSheaves<'a> {
    pub(super) hot: &'a HotSlot,
    pub(super) cold: &'a ColdSlot,
}

impl<'a> ClassSheaves<'a> {
    /// The view of a slot pair owned by the calling thread.
    pub fn new(hot: &'a HotSlot, cold: &'a ColdSlot) -> Self {
        Self { hot, cold }
    }

    /// HOT PATH (alloc), see [`HotSlot::pop`].
    #[inline(always)]
    pub fn pop(self) -> Option<*mut u8> {
        self.hot.pop()
    }

    /// HOT PATH (free) of an object whose home is the thread's node, see
    /// [`HotSlot::push`].
    #[inline(always)]
    pub fn push(self, object: *mut u8) -> bool {
        self.hot.push(object)
    }

    /// Slow path of allocation on `node`: main is empty or missing. Returns
    /// null only if the OS refuses memory.
    pub fn alloc_slow<D: Depot>(self, depot: &D, node: NodeId) -> *mut u8 {
        self.sync_capacity(depot);
        if let Some(object) = self.pop() {
            return object;
        }
        let Some(main) = self.main_sheaf(depot, node) else {
            // Counted as a failure by the caller (`ThreadCache::alloc_slow`).
            return ptr::null_mut();
        };
        // 1. The spare has objects: swap.
        let spare = self.cold.spare.get();
        // SAFETY: the spare is owned by this thread (ColdSlot).
        if !spare.is_null() && unsafe { (*spare).len } > 0 {
            self.cold.spare.set(main.as_ptr());
            self.install(depot, spare);
            self.cold.spare_trades.alloc_swapped(self.hot.counts());
            return self.pop().unwrap_or(ptr::null_mut());
        }
        self.cold.spare_trades.alloc_took_full();
        // 2. Trade the empty main for a full sheaf at the barn.
        // SAFETY: main is owned, stashed and empty (`pop` failed), of this
        // class and node.
        let main = match unsafe { exchange::take_full(depot, node, main) } {
            Ok(full) => {
                self.install(depot, full.as_ptr());
                self.sync_capacity(depot);
                return self.pop().unwrap_or(ptr::null_mut());
            }
            Err(main) => main,
        };
        // 3. Refill the main sheaf from the slabs, in bulk.
        // SAFETY: main is still ours (the barn had nothing to trade).
        exchange::refill(depot, node, unsafe { &mut *main.as_ptr() });
        self.install(depot, main.as_ptr());
        self.pop().unwrap_or(ptr::null_mut())
    }

    /// Slow path of freeing an object whose home is the thread's `node`:
    /// main is full or missing.
    ///
    /// # Safety
    ///
    /// 1. `object` is a free object of the depot's class whose home is
    ///    `node`, no longer used.
    pub unsafe fn free_slow<D: Depot>(self, depot: &D, node: NodeId, object: *mut u8) {
        self.sync_capacity(depot);
        if self.push(object) {
            return;
        }
        let Some(main) = self.main_sheaf(depot, node) else {
            // SAFETY: duty 1.
            return unsafe { self.free_to_slabs(depot, node, object) };
        };
        // A main sheaf created just now has room; only a full one goes on.
        if self.push(object) {
            return;
        }
        let spare = self.cold.spare.get();
        let trades = &self.cold.spare_trades;
        // This free is not counted yet, and frees do not move the
        // allocations: one count for every decision below.
        let counts = self.hot.counts();
        let allocs = counts.allocs;
        // SAFETY: the spare is owned by this thread.
        let spare_room = NonNull::new(spare).map(|s| unsafe {
            let s = s.as_ref();
            (s.len, s.capacity.saturating_sub(s.len))
        });
        // SAFETY: main is owned by this thread.
        let main_len = unsafe { main.as_ref() }.len;
        let split_keep = spare_room
            .filter(|&(len, _)| len == 0)
            .and_then(|_| trades.split(counts, main_len));
        if let (Some(spare), Some(keep)) = (NonNull::new(spare), split_keep) {
            // 1. Right after an allocation's swap: split (`SpareTrades`).
            // SAFETY: main and spare are owned, stashed, of this class and
            // node; only this thread touches them.
            unsafe { split(main, spare, keep) };
            self.cold.spare.set(main.as_ptr());
            self.install(depot, spare.as_ptr());
            trades.free_swapped(allocs);
            // The new main keeps fewer than `main_len`, but another thread
            // may have lowered the capacity since (`install` applies it).
            // SAFETY: duty 1.
            return unsafe { self.push_or_free_to_slabs(depot, node, object) };
        } else if spare_room.is_none_or(|(_, room)| room > 0) {
            // 2. A spare with room (or a new, empty one): swap.
            let empty = NonNull::new(spare)
                .or_else(|| exchange::empty_sheaf(depot, node, depot.sheaf_capacity()));
            if let Some(empty) = empty {
                self.cold.spare.set(main.as_ptr());
                self.install(depot, empty.as_ptr());
                self.sync_capacity(depot);
                trades.free_swapped(allocs);
                // SAFETY: duty 1.
                return unsafe { self.push_or_free_to_slabs(depot, node, object) };
            }
        } else {
            // 3. Both full: main goes to the barn, part of it where the
            // thread's bursts would trade whole sheaves with the barn in
            // every burst (`SpareTrades::put_keep`), else all of it, for an
            // empty sheaf.
            let keep = trades.put_keep(allocs, main_len);
            trades.put_main(allocs);
            if let Some(keep) = keep {
                if let Some(fresh) = exchange::empty_sheaf(depot, node, depot.sheaf_capacity()) {
                    // SAFETY: main is owned and stashed, `fresh` ours and
                    // empty, both of this class and node.
                    unsafe { split(main, fresh, keep) };
                    self.install(depot, fresh.as_ptr());
                    self.sync_capacity(depot);
                    // SAFETY: no longer installed: ours, with the older
                    // `main_len - keep > 0` objects; not touched again.
                    unsafe { exchange::dispose_part(depot, node, main) };
                    // SAFETY: duty 1.
                    return unsafe { self.push_or_free_to_slabs(depot, node, object) };
                }
            }
            // SAFETY: main is owned, stashed, full (len > 0), of this class
            // and node.
            if let Ok(empty) = unsafe { exchange::put_full(depot, node, main) } {
                self.uninstall();
                let empty =
                    empty.or_else(|| exchange::empty_sheaf(depot, node, depot.sheaf_capacity()));
                if let Some(empty) = empty {
                    self.install(depot, empty.as_ptr());
                    self.sync_capacity(depot);
                    // SAFETY: duty 1.
                    return unsafe { self.push_or_free_to_slabs(depot, node, object) };
                }
                // SAFETY: duty 1.
                return unsafe { self.free_to_slabs(depot, node, object) };
            }
            // The barn is at its limit: main is still ours.
        }
        // 4. Flush the main sheaf to the slabs and start it over.
        // SAFETY: main is owned and stashed; its objects are free objects
        // of this class whose home is `node`.
        unsafe { exchange::flush(depot, node, &mut *main.as_ptr()) };
        self.install(depot, main.as_ptr());
        let pushed = self.push(object);
        crate::invariant!(pushed, "push into a flushed sheaf failed");
    }

    /// Pushes one object onto the installed main sheaf, or frees it
    /// straight to the slabs if that has no room (another thread may have
    /// lowered the capacity since it was installed).
    ///
    /// # Safety
    ///
    /// 1. As `free_slow`.
    unsafe fn push_or_free_to_slabs<D: Depot>(self, depot: &D, node: NodeId, object: *mut u8) {
        if !self.push(object) {
            // SAFETY: duty 1.
            unsafe { self.free_to_slabs(depot, node, object) };
        }
    }

    /// Frees one object straight to the slabs (no sheaf could take it).
    ///
    /// # Safety
    ///
    /// 1. As `free_slow`.
    unsafe fn free_to_slabs<D: Depot>(self, depot: &D, node: NodeId, object: *mut u8) {
        // SAFETY: duty 1.
        unsafe { depot.flush(node, &[object]) };
        self.hot.count_free();
    }

    /// Hands every sheaf and the remote batch back to the barns, slabs and
    /// pool: the thread holds nothing of this class afterwards.
    pub fn give_back<D: Depot>(self, depot: &D, node: NodeId) {
        self.stash();
        let main = self.cold.main.replace(ptr::null_mut());
        let spare = self.cold.spare.replace(ptr::null_mut());
        self.uninstall();
        for sheaf in [main, spare] {
            if let Some(sheaf) = NonNull::new(sheaf) {
                // SAFETY: owned by this thread until now, stashed, objects
                // of this class whose home is `node` (ClassSheaves
                // invariant); not touched again.
                unsafe { exchange::dispose(depot, node, sheaf) };
            }
        }
        self.release_remote(depot, node);
    }

    /// The installed main sheaf, stashed; creates one if there is none.
    fn main_sheaf<D: Depot>(self, depot: &D, node: NodeId) -> Option<NonNull<Sheaf>> {
        self.stash();
        if let Some(main) = NonNull::new(self.cold.main.get()) {
            return Some(main);
        }
        let sheaf = exchange::empty_sheaf(depot, node, depot.sheaf_capacity())?;
        self.install(depot, sheaf.as_ptr());
        Some(sheaf)
    }

    /// Writes the hot length back into the main sheaf's header.
    fn stash(self) {
        let main = self.cold.main.get();
        if !main.is_null() {
            // SAFETY: main is owned by this thread.
            unsafe { (*main).len = self.hot.len.load(Relaxed) };
        }
    }

    /// Makes `sheaf` (owned, stashed) the main sheaf.
    ///
    /// The fast-path capacity is the sheaf's, lowered to the depot's if
    /// that is lower: a capacity another thread lowers meanwhile (and clamps
    /// every hot slot to, see `runtime::clamp_threads`) is never undone
    /// here. The store comes before the load, both `SeqCst`: either this
    /// load sees the new capacity, or the clamp comes after this store.
    fn install<D: Depot>(self, depot: &D, sheaf: *mut Sheaf) {
        self.cold.main.set(sheaf);
        // SAFETY: the caller hands us an owned sheaf.
        let (objects, capacity, len) =
            unsafe { ((*sheaf).objects_ptr(), (*sheaf).capacity, (*sheaf).len) };
        self.hot.objects.store(objects, Relaxed);
        self.hot.len.store(len, Relaxed);
        self.hot.capacity.store(capacity, SeqCst);
        let target = depot.sheaf_capacity();
        if target < capacity {
            self.hot.capacity.store(target, SeqCst);
        }
    }

    fn uninstall(self) {
        self.cold.main.set(ptr::null_mut());
        self.hot.len.store(0, Relaxed);
        self.hot.capacity.store(0, Relaxed);
        self.hot.objects.store(ptr::null_mut(), Relaxed);
    }

    /// Applies the depot's current capacity to main and spare, returning
    /// objects above a smaller capacity to the slabs, and moving a sheaf
    /// whose storage is too small for a larger one into a larger sheaf
    /// (`exchange::fit`).
    fn sync_capacity<D: Depot>(self, depot: &D) {
        let target = depot.sheaf_capacity();
        if let Some(main) = NonNull::new(self.cold.main.get()) {
            // SAFETY: owned by this thread.
            if unsafe { main.as_ref() }.capacity != target {
                self.stash();
                // SAFETY: owned and stashed; only the returned sheaf is
                // used from here (installed at once).
                let main = unsafe { exchange::fit(depot, main, target) };
                self.install(depot, main.as_ptr());
            }
        }
        if let Some(spare) = NonNull::new(self.cold.spare.get()) {
            // SAFETY: owned by this thread; only the returned sheaf is kept
            // (`fit` leaves a sheaf already at `target` alone).
            let spare = unsafe { exchange::fit(depot, spare, target) };
            self.cold.spare.set(spare.as_ptr());
        }
    }

    /// Capacity of the installed main sheaf (0 if none).
    pub fn main_capacity(self) -> u32 {
        self.hot.capacity()
    }

    /// Capacity of the spare sheaf (0 if none).
    pub fn spare_capacity(self) -> u32 {
        let spare = self.cold.spare.get();
        if spare.is_null() {
            0
        } else {
            // SAFETY: owned by this thread.
            unsafe { (*spare).capacity }
        }
    }

    /// Objects held in main, spare and the remote batch.
    pub fn objects_held(self) -> u32 {
        let count = |sheaf: *mut Sheaf| {
            if sheaf.is_null() {
                0
            } else {
                // SAFETY: owned by this thread.
                unsafe { (*sheaf).len }
            }
        };
        self.hot
            .len()
            .saturating_add(count(self.cold.spare.get()))
            .saturating_add(count(self.cold.remote.get()))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn main_keeps_part_at_a_put_only_after_taking_a_full_sheaf_in_a_burst_it_can_hold() {
        let trades = SpareTrades::new();
        // No put yet: the burst is unknown; a whole put.
        assert_eq!(trades.put_keep(100, 227), None);
        // A put with no take before it, then a take: the cycle has not
        // repeated yet, a whole put.
        trades.put_main(500);
        trades.alloc_took_full();
        assert_eq!(trades.put_keep(756, 227), None);
        trades.put_main(1000);
        // No sheaf taken since the put: a whole put.
        assert_eq!(trades.put_keep(1256, 227), None);
        // A burst of 256 at 227 that took a full sheaf: main sends
        // (454 - 256) / 2 = 99 to the barn and keeps 128.
        trades.alloc_took_full();
        assert_eq!(trades.put_keep(1256, 227), Some(128));
        // Up to 7/4 of the capacity (397): sends 28, keeps 199; above, a
        // whole put; a count that went back reads as large.
        assert_eq!(trades.put_keep(1397, 227), Some(199));
        assert_eq!(trades.put_keep(1398, 227), None);
        assert_eq!(trades.put_keep(999, 227), None);
        // A short burst: at most capacity - 1 sent, at least one kept.
        assert_eq!(trades.put_keep(1000, 227), Some(1));
        assert_eq!(trades.put_keep(1003, 2), Some(1));
        assert_eq!(trades.put_keep(1001, 1), None);
        // The put itself ends the burst: the next needs a new full sheaf.
        trades.put_main(1256);
        assert_eq!(trades.put_keep(1512, 227), None);
        trades.alloc_took_full();
        assert_eq!(trades.put_keep(1512, 227), Some(128));
    }

    #[test]
    fn a_split_is_due_only_right_after_an_allocations_swap_and_keeps_what_the_burst_took() {
        let trades = SpareTrades::new();
        let shared = AtomicU64::new(0);
        let counts = |allocs, frees| ClassCounts { allocs, frees };
        assert_eq!(trades.split(counts(0, 0), 32), None);
        trades.alloc_swapped(counts(1000, 0));
        // 20 taken since the swap, of a main of 32: main keeps 20.
        assert_eq!(trades.split(counts(1020, 20), 32), Some(20));
        // Fewer than half: half (rounded up) all the same.
        assert_eq!(trades.split(counts(1005, 5), 32), Some(16));
        assert_eq!(trades.split(counts(1005, 5), 31), Some(16));
        // Up to three quarters; more, or a count that went back (folded
        // into the cache since): a plain swap.
        assert_eq!(trades.split(counts(1024, 24), 32), Some(24));
        assert_eq!(trades.split(counts(1025, 25), 32), None);
        assert_eq!(trades.split(counts(3, 0), 32), None);
        // Small capacities: never the whole sheaf, never due at 1 (the
        // swapping allocation itself is counted after the swap).
        assert_eq!(trades.split(counts(1001, 1), 2), Some(1));
        assert_eq!(trades.split(counts(1001, 1), 1), None);
        trades.free_swapped(1030);
        assert_eq!(trades.split(counts(1031, 30), 32), None);
        // The burst after a free's trade: 4 allocations, the swap (of a
        // full spare), 26 more; main (6 left) is full after 26 frees. 26
        // is above three quarters of 32, but the burst of 30 fits the
        // capacity: main keeps what leaves it at (30 + 32) / 2 after the 4
        // frees to come.
        trades.alloc_swapped(counts(1034, 500));
        assert_eq!(trades.split(counts(1060, 526), 32), Some(27));
        // A burst of 20 (4 before the swap, 16 since): 26 - 4.
        assert_eq!(trades.split(counts(1050, 516), 32), Some(22));
        // A burst of exactly the capacity ends with main full; one above
        // the capacity swaps.
        assert_eq!(trades.split(counts(1062, 528), 32), Some(28));
        assert_eq!(trades.split(counts(1063, 529), 32), None);
        // The same burst of 32 after a swap of a spare of 30, not 32: main
        // is full after 30 frees, 2 are to come. Keeping the 28 taken since
        // the swap would end the burst at 30 in main and 2 in the spare,
        // and the next burst would swap again; main keeps 30 and ends full.
        assert_eq!(trades.split(counts(1062, 530), 32), Some(30));
        // More frees than the burst (the thread freed other objects too):
        // nothing to come, and never the whole sheaf.
        assert_eq!(trades.split(counts(1062, 600), 32), Some(31));
        // A known burst above the capacity swaps even if little of it came
        // after the swap: 40 before it, 10 since.
        trades.free_swapped(1100);
        trades.alloc_swapped(counts(1140, 600));
        assert_eq!(trades.split(counts(1150, 610), 32), None);
        // After a swap that followed no free-side trade (here an
        // allocation's swap), the burst is unknown: three quarters bound it.
        trades.alloc_swapped(counts(1200, 700));
        assert_eq!(trades.split(counts(1224, 724), 32), Some(24));
        assert_eq!(trades.split(counts(1225, 725), 32), None);
        trades.alloc_swapped(counts(0, 0));
        trades.alloc_took_full();
        assert_eq!(trades.split(counts(1, 0), 32), None);
        // Every swap, splits among them, reaches the counter.
        trades.swaps.publish(&shared);
        assert_eq!(shared.load(Relaxed), 7);
    }

    #[test]
    fn slow_paths_reach_the_shared_counter_only_at_publish() {
        let count = SlowPathCount::new();
        let shared = AtomicU64::new(5);
        for n in 1..=100 {
            count.count();
            assert_eq!((count.pending(), shared.load(Relaxed)), (n, 5));
        }
        count.publish(&shared);
        assert_eq!((count.pending(), shared.load(Relaxed)), (0, 105));
        count.publish(&shared);
        assert_eq!(shared.load(Relaxed), 105, "nothing pending, nothing added");
    }
}
