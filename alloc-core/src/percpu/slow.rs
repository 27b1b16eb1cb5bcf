//! The slow paths of the per-CPU caches: what a thread does when the pop
//! or push of its CPU's main sheaf fails.
//!
//! Every change to a CPU's slots is a `cs::replace` that succeeds only on
//! that CPU, while no drain holds the cache, if the slot still holds the
//! sheaf the thread saw; the thread then owns what it replaced, and gives it
//! on through the exchange protocol (`crate::exchange`) or parks it in an
//! empty slot. Sheaves to install are prepared outside the sections (barn
//! trades take locks, refills touch slabs); one that cannot be installed
//! (the thread moved to another CPU, or another thread got there first)
//! goes back the same way. After a few failed attempts — a drain is
//! emptying the cache, or the thread keeps moving — the object comes
//! straight from (or goes straight to) the slabs, as for a thread without a
//! cache.

use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use super::{cache_of, empty_sheaf, steer, CpuCache, Slot, SpareHas, ThreadGs};
use crate::cache::{CacheCounters, ClassDepot};
use crate::exchange::{self, Depot};
use crate::lane::Lane;
use crate::node::NodeId;
use crate::os;
use crate::sheaf::Sheaf;
use crate::size_class::SizeClass;
use crate::thread_cache::sheaves::{self, ClassCounts, SpareTrades};

/// Attempts before an operation goes straight to the slabs.
const ATTEMPTS: usize = 8;

/// One thread's view of one CPU during a slow path.
struct Here<'a> {
    rseq: *mut u8,
    cpu: u32,
    cache: &'a CpuCache,
    class: SizeClass,
}

impl Here<'_> {
    /// The CPU the thread is on now, its cache made if need be, following a
    /// topology change first, and the thread's GS base pointed at it (where
    /// the slow path's retries of the pop and push look); `None` if the
    /// cache is being drained (or cannot be made).
    fn now(rseq: *mut u8, class: SizeClass, gs: &ThreadGs) -> Option<Self> {
        let cpu = os::current_cpu_fast()?;
        let cache = cache_of(cpu)?;
        if !super::in_use(cpu, cache) {
            return None;
        }
        let node = crate::topology::node_of_cpu(cpu);
        if node != cache.node() {
            super::drain::move_to_node(cpu, cache, node);
        }
        gs.point_at(cache);
        Some(Self {
            rseq,
            cpu,
            cache,
            class,
        })
    }

    fn node(&self) -> NodeId {
        self.cache.node()
    }

    /// Whether the CPU's remote batch holds objects of a home other than
    /// `home` (a hint: other threads of this CPU may change it).
    fn batch_holds_another_home(&self, home: Home) -> bool {
        real(self.load(Slot::Remote)).is_some_and(|batch| {
            // SAFETY: a slot's sheaf stays valid memory (sheaves are never
            // unmapped); its header's fields are read as hints, as
            // `free_slow` reads the spare's.
            let (base, len) = unsafe {
                let batch = batch.as_ptr();
                (
                    core::ptr::read_volatile(&(*batch).batch_region_base),
                    core::ptr::read_volatile(&(*batch).len),
                )
            };
            len > 0 && base != crate::arena::lane_base(home.node, home.lane)
        })
    }

    /// Whether the CPU sends other lanes' objects back now (`steer`).
    fn returns_lanes(&self) -> bool {
        self.cache.lane_frees() == super::steer::LaneFrees::Return
    }

    /// Counts, for the steering tick, the objects of a batch this CPU sends
    /// away (detached: the caller's) if they are another lane's of its
    /// node.
    fn count_returned_foreign(&self, batch: *mut Sheaf) {
        let Some(batch) = real(batch) else {
            return;
        };
        // SAFETY: detached by the caller: its header is the caller's.
        let (node, len) = unsafe { ((*batch.as_ptr()).node, (*batch.as_ptr()).len) };
        if node == self.node() {
            self.cache
                .foreign
                .fetch_add(u64::from(len), Ordering::Relaxed);
        }
    }

    /// Counts, for the steering tick, another lane's objects in a main
    /// sheaf this CPU gives away (detached: the caller's) while it keeps
    /// such objects: an estimate from a sample of its pointers
    /// ([`steer::estimate_foreign`]), once per sheaf of objects, only while
    /// keeping (then no batch counts them). A full scan cost the consumer
    /// of a hand-off, the side that sets its pace, about 1,800 instructions
    /// per 256-object sheaf.
    fn count_kept_foreign(&self, sheaf: NonNull<Sheaf>) {
        if self.returns_lanes() {
            return;
        }
        let base = crate::arena::lane_base(self.node(), self.cache.lane());
        let span = crate::arena::lane_span();
        // SAFETY: detached by the caller: the sheaf and its pointers are
        // the caller's to read.
        let held = unsafe { (*sheaf.as_ptr()).held() };
        let foreign = steer::estimate_foreign(held, base, span);
        if foreign > 0 {
            self.cache.foreign.fetch_add(foreign, Ordering::Relaxed);
        }
    }

    fn load(&self, slot: Slot) -> *mut Sheaf {
        self.cache.slot(slot, self.class).load(Ordering::Acquire)
    }

    /// Replaces `expected` with `new` in `slot`; true if the caller now
    /// owns `expected` (and the slot owns `new`). A main sheaf taken out
    /// gets its length and capacity back from the slot into its header.
    fn replace(&self, slot: Slot, expected: *mut Sheaf, new: *mut Sheaf) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let table = super::CPU_CACHES.as_ptr();
            let offset = slot.offset(self.class);
            if slot != Slot::Main {
                // SAFETY: `rseq` is the thread's area (the callers' duty),
                // `cpu < MAX_CPUS` (it has a cache), and `new` is a valid
                // sheaf the caller owns (or the empty sheaf).
                return unsafe {
                    super::cs::replace(self.rseq, table, self.cpu, offset, expected, new)
                };
            }
            // SAFETY: `new` is the caller's (or the empty sheaf, whose
            // header reads 0 and 0): its header is its own, its length at
            // most its capacity, at most `SHEAF_CAPACITY_MAX` (Sheaf
            // invariant).
            let new_bits = unsafe { super::counts::sheaf_bits((*new).len, (*new).capacity) };
            // SAFETY: as above, for the main slot, with `new`'s length and
            // capacity; the CPU has AVX (per-CPU mode requires it).
            let old = unsafe {
                super::cs::replace_main(self.rseq, table, self.cpu, offset, expected, new, new_bits)
            };
            let Some(old) = old else {
                return false;
            };
            if let Some(owned) = real(expected) {
                // SAFETY: taken out of the slot by the commit: ours.
                unsafe {
                    (*owned.as_ptr()).len = super::counts::len(old);
                    (*owned.as_ptr()).capacity = super::counts::capacity(old);
                }
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (slot, expected, new);
            false
        }
    }

    /// Installs an owned sheaf as main where a trade left the empty sheaf;
    /// parks it if another thread of this CPU installed one first, or the
    /// thread moved.
    fn install_main<D: Depot>(&self, depot: &D, sheaf: NonNull<Sheaf>) {
        if !self.replace(Slot::Main, empty_sheaf(), sheaf.as_ptr()) {
            self.park(depot, sheaf.as_ptr());
        }
    }

    /// Puts an owned sheaf in the spare slot if that is free; otherwise
    /// sends it away (barn, slabs, pool).
    fn park<D: Depot>(&self, depot: &D, sheaf: *mut Sheaf) {
        let Some(owned) = real(sheaf) else {
            return;
        };
        if self.load(Slot::Spare) == empty_sheaf()
            && self.replace(Slot::Spare, empty_sheaf(), owned.as_ptr())
        {
            return;
        }
        // SAFETY: owned (taken out of a slot, or prepared by this thread);
        // its objects' home is its own node.
        unsafe { exchange::dispose(depot, (*owned.as_ptr()).node, owned) };
    }
}

/// `sheaf`, unless it is the shared empty sheaf (which nobody owns).
fn real(sheaf: *mut Sheaf) -> Option<NonNull<Sheaf>> {
    if sheaf == empty_sheaf() {
        None
    } else {
        NonNull::new(sheaf)
    }
}

/// Sets an owned sheaf to the depot's capacity (objects above a lower one
/// go to the slabs; a sheaf too small for a higher one is moved into a
/// larger one, see `exchange::fit`). Returns the sheaf to use from now on.
#[must_use]
pub(super) fn sync_capacity<D: Depot>(depot: &D, sheaf: NonNull<Sheaf>) -> NonNull<Sheaf> {
    // SAFETY: owned by the caller, whose objects are of this class at the
    // sheaf's node; the caller uses only the returned sheaf. (`fit` leaves
    // a sheaf already at the capacity alone.)
    unsafe { exchange::fit(depot, sheaf, depot.sheaf_capacity()) }
}

/// The single-section spare swap (`cs::swap_spare`), counted in `trades`
/// (the calling thread's trades of the class's spare); false where it does
/// not apply (then the replace-based steps below run).
///
/// # Safety
///
/// 1. As [`alloc_slow`].
unsafe fn swap_in_spare(
    rseq: *mut u8,
    class: SizeClass,
    depot: &ClassDepot,
    has: SpareHas,
    trades: &SpareTrades,
    counts: ClassCounts,
) -> bool {
    // SAFETY: duty 1.
    let swapped = unsafe { super::swap_spare(rseq, class, depot.sheaf_capacity(), has) };
    if swapped {
        count_swap(has, trades, counts);
    }
    swapped
}

/// Counts a spare swap of an allocation (`Objects`) or a free (`Room`);
/// `counts` are the class's counts on the CPU ([`cpu_counts`]).
fn count_swap(has: SpareHas, trades: &SpareTrades, counts: ClassCounts) {
    match has {
        SpareHas::Objects => trades.alloc_swapped(counts),
        SpareHas::Room => trades.free_swapped(counts.allocs),
    }
}

/// The counts of `class` on the CPU the thread is on, which the spare-trade
/// decisions read (the sheaves they decide about are the CPU's; zero where
/// the CPU has no cache yet).
fn cpu_counts(class: SizeClass) -> ClassCounts {
    let counts = os::current_cpu_fast()
        .and_then(|cpu| super::published(cpu as usize))
        .map(|cache| super::counts::of(cache, class))
        .unwrap_or_default();
    ClassCounts {
        allocs: counts.allocs,
        frees: counts.frees,
    }
}

/// What served an operation of a slow path: the CPU's main sheaf (a pop or
/// push, which the CPU counted), or the thread (which counts it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CountedBy {
    /// A pop or push of the CPU's main sheaf.
    Cpu,
    /// Anything else: the caller counts it.
    Caller,
}

/// Slow path of allocation in per-CPU mode: the current CPU's main sheaf of
/// `class` is empty. Null only if the OS refuses memory; with who counts
/// the allocation. Spare swaps are
/// counted in `trades`, the calling thread's for the class (no locked add
/// per swap: see `SlowPathCount`), with the class's counts on the CPU;
/// the thread's GS base `gs` follows the CPU the path finds it on.
///
/// # Safety
///
/// 1. `rseq` is the calling thread's registered rseq area, and per-CPU
///    mode is in force.
pub unsafe fn alloc_slow(
    rseq: *mut u8,
    class: SizeClass,
    gs: &ThreadGs,
    trades: &SpareTrades,
) -> (*mut u8, CountedBy) {
    let depot = ClassDepot::of(class);
    let counts = cpu_counts(class);
    for attempt in 0..ATTEMPTS {
        // The caller's pop missed on this CPU's cache just now (after its
        // GS base followed the thread): the first round goes straight on.
        if attempt > 0 {
            // SAFETY: duty 1.
            if let Some(object) = unsafe { super::pop(rseq, class) } {
                return (object, CountedBy::Cpu);
            }
        }
        // 0. The spare has objects and the cache's capacity: one section
        // swaps it in.
        // SAFETY: duty 1.
        if unsafe { swap_in_spare(rseq, class, &depot, SpareHas::Objects, trades, counts) } {
            continue;
        }
        let Some(here) = Here::now(rseq, class, gs) else {
            break;
        };
        let node = here.node();
        let main = here.load(Slot::Main);
        // 1. The spare has objects: swap it in.
        let spare = here.load(Slot::Spare);
        // SAFETY: a slot's sheaf stays allocated; `len` is read as a hint
        // (whoever detaches it reads it again as its owner).
        if real(spare).is_some() && unsafe { core::ptr::read_volatile(&(*spare).len) } > 0 {
            if here.replace(Slot::Spare, spare, empty_sheaf()) {
                // Ours now (detached above); `fit` may move its objects
                // into a larger sheaf.
                let spare =
                    real(spare).map_or(spare, |owned| sync_capacity(&depot, owned).as_ptr());
                if here.replace(Slot::Main, main, spare) {
                    count_swap(SpareHas::Objects, trades, counts);
                    here.park(&depot, main);
                } else {
                    here.park(&depot, spare);
                }
            }
            continue;
        }
        // 2. A full sheaf from the barn, else 3. one refilled from the slabs.
        trades.alloc_took_full();
        if let Some(owned) = real(main) {
            // Main is a sheaf of its own: detached, it is traded for a full
            // one under one barn lock.
            // SAFETY: duty 1.
            if unsafe { trade_empty_main(&here, &depot, owned) } {
                continue;
            }
            return (core::ptr::null_mut(), CountedBy::Caller);
        }
        let full = match exchange::take_full_alone(&depot, node) {
            Some(full) => full,
            None => {
                let Some(empty) = exchange::empty_sheaf(&depot, node, depot.sheaf_capacity())
                else {
                    break;
                };
                // SAFETY: ours, empty, from the barn or the pool.
                let Some(full) = (unsafe { refilled(&depot, node, empty) }) else {
                    return (core::ptr::null_mut(), CountedBy::Caller);
                };
                full
            }
        };
        let full = sync_capacity(&depot, full);
        if here.replace(Slot::Main, main, full.as_ptr()) {
            here.park(&depot, main);
        } else {
            // SAFETY: still ours: the replace did not happen.
            unsafe { exchange::dispose(&depot, node, full) };
        }
    }
    let node = os::current_cpu_fast().map_or(NodeId::ZERO, crate::topology::node_of_cpu);
    // Counted by the caller, as every allocation of this thread that no
    // pop served.
    (
        crate::thread_cache::slab_alloc_one(node, class),
        CountedBy::Caller,
    )
}

/// Slow path of free in per-CPU mode: the current CPU's main sheaf is full,
/// or the object's home is another node.
///
/// # Safety
///
/// 1. As [`alloc_slow`].
/// 2. `object` is a free object of `class` of this allocator, no longer
///    used.
pub unsafe fn free_slow(
    rseq: *mut u8,
    class: SizeClass,
    object: *mut u8,
    gs: &ThreadGs,
    trades: &SpareTrades,
) -> CountedBy {
    let depot = ClassDepot::of(class);
    let Some(home) = Home::of(object) else {
        crate::invariant!(false, "free of a pointer outside the arena");
        return CountedBy::Caller;
    };
    let counts = cpu_counts(class);
    // The caller tried the remote batch (`push_batch`) after the push,
    // unless the object lies in the CPU's push range (then main was full,
    // and the batch, another home's, would not take it).
    for attempt in 0..ATTEMPTS {
        // An object of the CPU's push range: retry the push (a swap or a
        // trade made room), or, first time round, swap in a spare with
        // room before looking up the CPU, as `alloc_slow` does: most slow
        // frees end there (larson: about 87 %).
        let in_range = gs.in_push_range(object);
        // SAFETY: duties 1 and 2.
        if in_range && attempt > 0 && unsafe { super::push(rseq, class, object) } {
            return CountedBy::Cpu;
        }
        // Not right after this thread's allocation swapped, when an empty
        // spare splits main instead (`SpareTrades`).
        let split_keep = trades.split(counts, depot.sheaf_capacity());
        let swapped_first = in_range && attempt == 0 && split_keep.is_none();
        if swapped_first
            // SAFETY: duty 1.
            && unsafe { swap_in_spare(rseq, class, &depot, SpareHas::Room, trades, counts) }
        {
            continue;
        }
        let Some(here) = Here::now(rseq, class, gs) else {
            break;
        };
        let node = here.node();
        // Another lane's object goes back unless the CPU keeps them now
        // (`steer`), or the batch holds another home's.
        let returned_lane = home.lane != here.cache.lane() && here.returns_lanes();
        if home.node != node || (returned_lane && !here.batch_holds_another_home(home)) {
            // Another node's object, or another lane's: back to its home
            // in the remote batch.
            // SAFETY: duties 1 and 2.
            if unsafe { free_remote(&here, &depot, object, home) } {
                return CountedBy::Caller;
            }
            continue;
        }
        // Kept here: this lane's object (the caller's push missed just
        // now, as in `alloc_slow`), or another lane's while the batch holds
        // objects of another home (sending it back would flush a batch per
        // free where the frees come from many lanes).
        // SAFETY: duties 1 and 2.
        if (attempt > 0 || returned_lane) && unsafe { super::push_on_node(rseq, class, object) } {
            return CountedBy::Cpu;
        }
        // 0. A spare with room and the cache's capacity: one section swaps
        // it in (unless that was tried above, in this round). Not right
        // after this thread's allocation swapped (`split_keep`).
        if split_keep.is_none()
            && !swapped_first
            // SAFETY: duty 1.
            && unsafe { swap_in_spare(rseq, class, &depot, SpareHas::Room, trades, counts) }
        {
            continue;
        }
        let main = here.load(Slot::Main);
        let spare = here.load(Slot::Spare);
        // SAFETY: as in `alloc_slow`: hints only.
        let (spare_len, spare_capacity) = real(spare).map_or((0, 0), |s| unsafe {
            (
                core::ptr::read_volatile(&(*s.as_ptr()).len),
                core::ptr::read_volatile(&(*s.as_ptr()).capacity),
            )
        });
        if let (Some(full), Some(empty), 0, Some(keep)) =
            (real(main), real(spare), spare_len, split_keep)
        {
            // 1. Right after an allocation's swap: split.
            split_main(&here, &depot, full, empty, keep, trades, counts.allocs);
            continue;
        }
        if real(spare).is_none() || spare_len < spare_capacity {
            // 2. A spare with room (or a new, empty one): swap it in.
            let with_room = match real(spare) {
                Some(spare) if here.replace(Slot::Spare, spare.as_ptr(), empty_sheaf()) => spare,
                Some(_) => continue,
                None => match exchange::empty_sheaf(&depot, node, depot.sheaf_capacity()) {
                    Some(empty) => empty,
                    None => break,
                },
            };
            let with_room = sync_capacity(&depot, with_room);
            if here.replace(Slot::Main, main, with_room.as_ptr()) {
                count_swap(SpareHas::Room, trades, counts);
                here.park(&depot, main);
            } else {
                here.park(&depot, with_room.as_ptr());
            }
            continue;
        }
        // 3. Both full: the main sheaf goes to the barn (or the slabs), an
        // empty one takes its place; where the thread's bursts would trade
        // whole sheaves with the barn in every burst, main keeps part of
        // its objects (`SpareTrades::put_keep`).
        let keep = trades.put_keep(counts.allocs, depot.sheaf_capacity());
        trades.put_main(counts.allocs);
        if let (Some(full), None) = (real(main), keep) {
            // Detached, main is traded for an empty sheaf under one barn
            // lock.
            if trade_full_main(&here, &depot, full) {
                continue;
            }
            break;
        }
        let Some(empty) = exchange::empty_sheaf(&depot, node, depot.sheaf_capacity()) else {
            break;
        };
        if let (Some(full), Some(keep)) = (real(main), keep) {
            put_part_of_main(&here, &depot, full, empty, keep);
            continue;
        }
        if here.replace(Slot::Main, main, empty.as_ptr()) {
            if let Some(full) = real(main) {
                here.count_kept_foreign(full);
                // SAFETY: ours now; objects of this class at home `node`.
                // Other threads of this CPU may have popped from it since
                // it was seen full: `dispose` takes it as it is.
                unsafe { exchange::dispose(&depot, node, full) };
            }
        } else {
            // SAFETY: ours, empty.
            unsafe { exchange::dispose(&depot, node, empty) };
        }
    }
    // Straight to its home slab (a drain is emptying this CPU's cache, or
    // the thread keeps moving). Counted by the caller as a free; a remote
    // one is counted here, as a batch of one.
    let node = os::current_cpu_fast().map_or(NodeId::ZERO, crate::topology::node_of_cpu);
    if home.node != node {
        depot.remote_frees().add(node, home.node, 1);
    }
    // SAFETY: duty 2.
    unsafe { crate::thread_cache::slab_free_one(class, object) };
    CountedBy::Caller
}

/// An owned, empty `sheaf` of this class and `node` filled from the
/// slabs; `None` (the sheaf sent away) if the OS refused memory for every
/// object.
///
/// # Safety
///
/// 1. The caller owns `sheaf`, which is empty and has this class and
///    `node`, and uses only what this returns.
unsafe fn refilled(
    depot: &ClassDepot,
    node: NodeId,
    sheaf: NonNull<Sheaf>,
) -> Option<NonNull<Sheaf>> {
    // SAFETY: duty 1: ours, empty.
    exchange::refill(depot, node, unsafe { &mut *sheaf.as_ptr() });
    // SAFETY: as above.
    if unsafe { (*sheaf.as_ptr()).len } > 0 {
        return Some(sheaf);
    }
    // SAFETY: duty 1: ours, still empty.
    unsafe { exchange::dispose(depot, node, sheaf) };
    None
}

/// Step 2 of [`alloc_slow`] where main is a sheaf of its own: detaches it
/// and trades it, empty, for a full sheaf of the barn under one lock
/// (`exchange::take_full`), or refills it from the slabs when the barn has
/// none; then installs the full sheaf (or parks it, if another thread of
/// the CPU installed one first). Taking the full sheaf first and parking
/// the empty one after would lock the barn twice per trade, and in a
/// hand-off the lock's line crosses between the producer's and the
/// consumer's CPUs on every acquisition. False only if the barn had no
/// full sheaf and the OS refused memory for every object (the caller's
/// caller, `ThreadCache::alloc_slow`, counts the failure); true
/// also when main was no longer in its slot, or went back as it was.
///
/// # Safety
///
/// 1. As [`alloc_slow`].
unsafe fn trade_empty_main(here: &Here<'_>, depot: &ClassDepot, main: NonNull<Sheaf>) -> bool {
    if !here.replace(Slot::Main, main.as_ptr(), empty_sheaf()) {
        return true;
    }
    // SAFETY: detached by the replace: the header is ours.
    let (len, node) = unsafe { ((*main.as_ptr()).len, (*main.as_ptr()).node) };
    if len > 0 {
        // Another thread of this CPU freed into it since the pop missed.
        here.install_main(depot, main);
        return true;
    }
    // SAFETY: ours and empty, of this class and the CPU's node.
    let full = match unsafe { exchange::take_full(depot, node, main) } {
        Ok(full) => full,
        // SAFETY: given back by the barn: ours, empty, this class and node.
        Err(empty) => match unsafe { refilled(depot, node, sync_capacity(depot, empty)) } {
            Some(full) => full,
            None => return false,
        },
    };
    here.install_main(depot, sync_capacity(depot, full));
    true
}

/// Step 3 of [`free_slow`] where main keeps none of its objects: detaches
/// the full main sheaf and trades it for an empty one of the barn under one
/// lock (`exchange::put_full`; a barn at its limit sends the objects to the
/// slabs and the sheaf is used again), then installs the empty sheaf. One
/// lock per trade, as in [`trade_empty_main`]. False only if the OS
/// refused memory for an empty sheaf.
fn trade_full_main(here: &Here<'_>, depot: &ClassDepot, main: NonNull<Sheaf>) -> bool {
    if !here.replace(Slot::Main, main.as_ptr(), empty_sheaf()) {
        return true;
    }
    // SAFETY: detached by the replace: the header is ours.
    let (len, capacity, node) = unsafe {
        let sheaf = &*main.as_ptr();
        (sheaf.len, sheaf.capacity, sheaf.node)
    };
    if len < capacity {
        // Another thread of this CPU allocated from it since the push
        // missed: it has room again.
        here.install_main(depot, main);
        return true;
    }
    here.count_kept_foreign(main);
    // SAFETY: ours (detached), full of objects of this class at home
    // `node`.
    let empty = match unsafe { exchange::put_full(depot, node, main) } {
        Ok(Some(empty)) => empty,
        Ok(None) => match exchange::empty_sheaf(depot, node, depot.sheaf_capacity()) {
            Some(empty) => empty,
            None => return false,
        },
        Err(refused) => {
            // SAFETY: still ours; objects of this class at home `node`.
            unsafe { exchange::flush(depot, node, &mut *refused.as_ptr()) };
            refused
        }
    };
    here.install_main(depot, sync_capacity(depot, empty));
    true
}

/// Step 1 of [`free_slow`]: splits the CPU's full main sheaf with its
/// empty spare (`SpareTrades::split`). Both are detached; main's `keep`
/// most recently freed objects move into the spare, which goes back as
/// main, and main, with the rest, goes back as the spare. A slot another
/// thread of this CPU filled meanwhile, or a move to another CPU, sends a
/// sheaf to [`Here::park`] instead.
fn split_main(
    here: &Here<'_>,
    depot: &ClassDepot,
    main: NonNull<Sheaf>,
    spare: NonNull<Sheaf>,
    keep: u32,
    trades: &SpareTrades,
    allocs: u64,
) {
    if !here.replace(Slot::Spare, spare.as_ptr(), empty_sheaf()) {
        return;
    }
    let spare = sync_capacity(depot, spare);
    if !split_off_main(here, depot, main, spare, keep) {
        here.park(depot, spare.as_ptr());
        return;
    }
    trades.free_swapped(allocs);
    here.park(depot, main.as_ptr());
}

/// Step 3 of [`free_slow`] where main keeps part of its objects
/// (`SpareTrades::put_keep`): main's `keep` most recently freed objects
/// move into `empty`, which goes back as main, and main, with the rest,
/// goes to the barn.
fn put_part_of_main(
    here: &Here<'_>,
    depot: &ClassDepot,
    main: NonNull<Sheaf>,
    empty: NonNull<Sheaf>,
    keep: u32,
) {
    if !split_off_main(here, depot, main, empty, keep) {
        // SAFETY: ours and empty, from `exchange::empty_sheaf`.
        unsafe { exchange::dispose(depot, here.node(), empty) };
        return;
    }
    here.count_kept_foreign(main);
    // SAFETY: ours (detached), objects of this class at home `node`; other
    // threads of this CPU may have popped from it before it was detached:
    // any length goes.
    unsafe { exchange::dispose_part(depot, here.node(), main) };
}

/// Detaches the CPU's main sheaf `main`, moves its `keep` most recently
/// freed objects into `into` (the caller's, detached, of this class and
/// node) and installs `into` as main; a slot another thread of this CPU
/// filled meanwhile, or a move to another CPU, sends `into` to
/// [`Here::park`] instead. False, with nothing moved and both sheaves
/// where they were, if `main` was no longer in its slot; true when `main`
/// is the caller's, with the rest of its objects.
fn split_off_main(
    here: &Here<'_>,
    depot: &ClassDepot,
    main: NonNull<Sheaf>,
    into: NonNull<Sheaf>,
    keep: u32,
) -> bool {
    if !here.replace(Slot::Main, main.as_ptr(), empty_sheaf()) {
        return false;
    }
    // SAFETY: `main` detached by the replace above, `into` the caller's:
    // both hold objects of this class whose home is the CPU's node.
    unsafe { sheaves::split(main, into, keep) };
    if !here.replace(Slot::Main, empty_sheaf(), into.as_ptr()) {
        here.park(depot, into.as_ptr());
    }
    true
}

/// Batches an object whose home is another node, or another lane of this
/// node, in the CPU's remote slot; a batch that is full or for another
/// home is handed over and a fresh one installed. True once the object is
/// batched (or sent home).
///
/// # Safety
///
/// 1. As [`free_slow`].
unsafe fn free_remote(here: &Here<'_>, depot: &ClassDepot, object: *mut u8, home: Home) -> bool {
    // SAFETY: duty 1.
    if unsafe { super::push_batch(here.rseq, here.class, object) } {
        return true;
    }
    let batch = here.load(Slot::Remote);
    let Some(fresh) = depot.pool().take(
        depot.class(),
        home.node,
        depot.sheaf_capacity(),
        depot.lane(),
    ) else {
        // No memory for a batch: send the object home alone.
        // SAFETY: duty 2: a free object whose home is `home.node`.
        unsafe { depot.flush(home.node, &[object]) };
        count_returned(depot, here.node(), home, 1);
        return true;
    };
    // SAFETY: ours, never installed: the header is ours to write.
    unsafe {
        (*fresh.as_ptr()).batch_region_base = crate::arena::lane_base(home.node, home.lane);
        (*fresh.as_ptr()).batch_region_span = crate::arena::lane_span();
    }
    if here.replace(Slot::Remote, batch, fresh.as_ptr()) {
        here.count_returned_foreign(batch);
        hand_over(depot, here.node(), batch);
    } else {
        // SAFETY: ours, empty, never installed.
        unsafe { depot.pool().give(fresh) };
    }
    false
}

/// Sends a detached remote batch home (to its lane's stack of the home
/// barn as a full sheaf, else to the home slabs) and gives its sheaf back.
pub(super) fn hand_over(depot: &ClassDepot, from: NodeId, batch: *mut Sheaf) {
    let Some(batch) = real(batch) else {
        return;
    };
    // SAFETY: the caller owns the detached batch.
    let (home, len, capacity) = unsafe {
        let sheaf = &*batch.as_ptr();
        (
            Home {
                node: sheaf.node,
                lane: crate::arena::home_lane(sheaf.batch_region_base),
            },
            sheaf.len,
            sheaf.capacity,
        )
    };
    if len == 0 {
        // SAFETY: owned and empty.
        unsafe { depot.pool().give(batch) };
        return;
    }
    count_returned(depot, from, home, len);
    if len == capacity {
        let to_lane = depot.on_lane(home.lane);
        // SAFETY: owned, objects of the class whose home is `home`.
        if let Ok(next) = unsafe { exchange::hand_over(&to_lane, home.node, batch) } {
            if let Some(next) = next {
                // SAFETY: the barn handed us an empty sheaf.
                unsafe { depot.pool().give(next) };
            }
            return;
        }
    }
    // SAFETY: owned; its objects' home is `home`.
    unsafe {
        exchange::flush(depot, home.node, &mut *batch.as_ptr());
        depot.pool().give(batch);
    }
}

/// Counts `objects` freed on a CPU of node `from` going back to `home`: as
/// remote frees when that is another node, as lane returns when it is
/// another lane of the same node.
fn count_returned(depot: &ClassDepot, from: NodeId, home: Home, objects: u32) {
    if home.node == from {
        CacheCounters::add(&depot.counters().lane_returns, u64::from(objects));
    } else {
        depot.remote_frees().add(from, home.node, objects);
    }
}

/// Where a free object goes back to: its home node, and the lane of that
/// node whose region of the arena holds it (`crate::arena`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Home {
    node: NodeId,
    lane: Lane,
}

impl Home {
    /// The home of `object`, or `None` if it lies outside the arena.
    fn of(object: *mut u8) -> Option<Home> {
        let address = object as usize;
        Some(Home {
            node: crate::arena::home_node(address)?,
            lane: crate::arena::home_lane(address),
        })
    }
}
