//! The exchange protocol: every trade of sheaves between a thread and the
//! layers below it — its node's barn, the slabs, the sheaf pool — in one
//! place, with names. Every caller (allocation and free slow paths, remote
//! batches, thread exit, migration, capacity changes, purge) goes through
//! these operations; none touches a barn by itself.
//!
//! | operation | gives | gets | when |
//! |---|---|---|---|
//! | [`take_full`] | an empty sheaf | a full one | alloc: main and spare empty |
//! | [`take_full_alone`] | — | a full one | alloc, per-CPU mode, when the CPU has no main sheaf |
//! | [`put_full`] | a full sheaf | an empty one, if the barn has one | free: main and spare full |
//! | [`hand_over`] | a full remote batch | an empty one, if any | a batch for another node is full |
//! | [`empty_sheaf`] | — | an empty sheaf (barn, else pool) | a slot needs a sheaf |
//! | [`fit`] | a sheaf | the same at the live capacity, or a larger one | the capacity changed |
//! | [`refill`] / [`flush`] | — / a sheaf's objects | objects / — | the barn could not help |
//! | [`dispose`] | any sheaf | — | exit, migration, shrink, purge |
//! | [`drain_barn`] | — | — | purge: the barn's sheaves go to slabs and pool |
//!
//! A barn keeps its stacks per [`Lane`]: every operation puts on the
//! calling CPU's lane and takes from it first (see [`crate::barn`]).
//!
//! # Locks
//!
//! Each operation holds at most one lock at a time, and never across a call
//! that takes another: a sheaf the barn refuses is given to the pool, or its
//! objects to the slabs, only after the barn's guard is dropped (each guard
//! here is a named local with an explicit `drop`, never a temporary in an
//! `if let` scrutinee, whose guard would live through the body).
//!
//! # What a depot is
//!
//! The operations are generic over [`Depot`]: one size class's view of the
//! layers below (barns of every node, slabs, the pool, the live capacity,
//! the counters). The engine's depot reaches its static caches; the loom
//! models in `tests/loom.rs` give the same operations small barns and slabs
//! of their own, so what they check is this code, not a copy of it.

use core::ptr::NonNull;

use crate::barn::{Barn, Taken};
use crate::counters::{CacheCounters, RemoteFrees};
use crate::lane::Lane;
use crate::node::NodeId;
use crate::sheaf::{Sheaf, SheafPool};
use crate::size_class::SizeClass;
use crate::sync::Mutex;

/// One size class's view of what lies below the thread caches.
///
/// # Safety
///
/// Implementations run inside the allocator. They must:
///
/// 1. never allocate through the global allocator, and never panic;
/// 2. return from `barn(node)` the one barn of this class on `node`, and
///    from `refill` only distinct free objects of this class whose home is
///    `node`, each handed out once until it comes back through `flush`;
/// 3. take locks only in the order of `sync::LockRank` (a `flush` or
///    `refill` is called with no lock held).
pub unsafe trait Depot {
    /// The class.
    fn class(&self) -> SizeClass;
    /// The barn of this class on `node`.
    fn barn(&self, node: NodeId) -> &Mutex<Barn>;
    /// The lane of the calling thread's CPU: which of a barn's stacks it
    /// puts on and takes from first.
    fn lane(&self) -> Lane;
    /// Fills `out` with free objects from `node`'s slabs; returns how many
    /// (fewer only when memory ran out).
    fn refill(&self, node: NodeId, out: &mut [*mut u8]) -> usize;
    /// Returns objects to `node`'s slabs.
    ///
    /// # Safety
    ///
    /// 1. Every object is a free object of this class whose home is `node`,
    ///    owned by the caller and listed once.
    unsafe fn flush(&self, node: NodeId, objects: &[*mut u8]);
    /// Where sheaf storage comes from and goes back to.
    fn pool(&self) -> &SheafPool;
    /// The capacity sheaves of this class should have now.
    fn sheaf_capacity(&self) -> u32;
    /// The class's counters.
    fn counters(&self) -> &CacheCounters;
    /// The class's remote frees by node pair.
    fn remote_frees(&self) -> &RemoteFrees;
}

/// Alloc side: trades `empty` for a full sheaf of `node`'s barn. `Err`
/// gives `empty` back when the barn has no full sheaf (the caller refills
/// from the slabs).
///
/// # Safety
///
/// 1. The caller owns `empty`, which holds no objects and has this class
///    and `node`, and hands it over on `Ok`.
pub unsafe fn take_full<D: Depot>(
    depot: &D,
    node: NodeId,
    empty: NonNull<Sheaf>,
) -> Result<NonNull<Sheaf>, NonNull<Sheaf>> {
    let lane = depot.lane();
    let mut barn = depot.barn(node).lock();
    let Some((full, taken)) = barn.take_full(lane) else {
        drop(barn);
        count_take(depot, None);
        return Err(empty);
    };
    // SAFETY: duty 1.
    let refused = unsafe { barn.put_empty(lane, empty) }.err();
    drop(barn);
    if let Some(refused) = refused {
        // SAFETY: the barn refused the empty sheaf: still ours, empty.
        unsafe { depot.pool().give(refused) };
    }
    count_take(depot, Some(taken));
    order_if_stolen(full, taken);
    Ok(full)
}

/// Takes a full sheaf of `node`'s barn without giving one back (the
/// per-CPU slow path, when the CPU's main slot holds the shared empty
/// sheaf).
pub fn take_full_alone<D: Depot>(depot: &D, node: NodeId) -> Option<NonNull<Sheaf>> {
    let lane = depot.lane();
    let mut barn = depot.barn(node).lock();
    let full = barn.take_full(lane);
    drop(barn);
    count_take(depot, full.map(|(_, taken)| taken));
    full.map(|(sheaf, taken)| {
        order_if_stolen(sheaf, taken);
        sheaf
    })
}

/// Puts a full sheaf just taken from another lane's stack in the pop
/// order this CPU rewards ([`Sheaf::order_for_pops`],
/// [`crate::pop_order`]): the point where a
/// hand-off's objects cross to the CPU that allocates them. A sheaf of the
/// taker's own lane holds what its CPU freed and is left as it is. Called
/// with no lock held.
fn order_if_stolen(full: NonNull<Sheaf>, taken: Taken) {
    if taken == Taken::Stolen {
        // SAFETY: just taken from the barn: the caller owns it, and
        // nothing else reaches it until the caller installs it.
        unsafe { (*full.as_ptr()).order_for_pops(crate::pop_order::stolen()) };
    }
}

/// Counts a take of a full sheaf: a hit (and a steal when it was another
/// lane's), or a miss.
fn count_take<D: Depot>(depot: &D, taken: Option<Taken>) {
    let counters = depot.counters();
    match taken {
        Some(taken) => {
            CacheCounters::add(&counters.barn_get_hits, 1);
            if taken == Taken::Stolen {
                CacheCounters::add(&counters.barn_lane_steals, 1);
            }
        }
        None => CacheCounters::add(&counters.barn_get_misses, 1),
    }
}

/// Free side: stores `full` in `node`'s barn and takes one of its empty
/// sheaves if it has one (`Ok(None)`: the caller needs another). `Err`
/// gives `full` back when the barn is at its limit (the caller flushes).
///
/// # Safety
///
/// 1. The caller owns `full`, which holds objects of this class whose home
///    is `node`, and hands it over on `Ok`.
pub unsafe fn put_full<D: Depot>(
    depot: &D,
    node: NodeId,
    full: NonNull<Sheaf>,
) -> Result<Option<NonNull<Sheaf>>, NonNull<Sheaf>> {
    // SAFETY: duty 1.
    let traded = unsafe { trade_full_for_empty(depot, node, full) };
    let counters = depot.counters();
    match traded {
        Ok(_) => CacheCounters::add(&counters.barn_put_hits, 1),
        Err(_) => CacheCounters::add(&counters.barn_put_misses, 1),
    }
    traded
}

/// Remote frees: a full batch of objects whose home is `home` becomes a
/// full sheaf of `home`'s barn, traded under the same lock for one of its
/// empty sheaves (no object memory touched). `Err` gives the batch back
/// when that barn is at its limit (the caller flushes it to `home`'s
/// slabs).
///
/// # Safety
///
/// 1. The caller owns `batch`, which holds objects of this class whose
///    home is `home`, and hands it over on `Ok`.
pub unsafe fn hand_over<D: Depot>(
    depot: &D,
    home: NodeId,
    batch: NonNull<Sheaf>,
) -> Result<Option<NonNull<Sheaf>>, NonNull<Sheaf>> {
    // SAFETY: duty 1 (counted as any full sheaf put into a barn).
    unsafe { put_full(depot, home, batch) }
}

/// # Safety
///
/// 1. As `put_full`.
unsafe fn trade_full_for_empty<D: Depot>(
    depot: &D,
    node: NodeId,
    full: NonNull<Sheaf>,
) -> Result<Option<NonNull<Sheaf>>, NonNull<Sheaf>> {
    let lane = depot.lane();
    let mut barn = depot.barn(node).lock();
    // SAFETY: duty 1.
    let stored = unsafe { barn.put_full(lane, full) };
    let empty = match stored {
        Ok(()) => Ok(barn.take_empty(lane)),
        Err(full) => Err(full),
    };
    drop(barn);
    empty
}

/// An empty sheaf with `capacity` for `node`: one of the barn's, else a
/// new one from the pool; `None` only if the OS refuses memory.
pub fn empty_sheaf<D: Depot>(depot: &D, node: NodeId, capacity: u32) -> Option<NonNull<Sheaf>> {
    let lane = depot.lane();
    let mut barn = depot.barn(node).lock();
    let from_barn = barn.take_empty(lane);
    drop(barn);
    let Some(sheaf) = from_barn else {
        return depot.pool().take(depot.class(), node, capacity, lane);
    };
    // SAFETY: the barn handed the (empty) sheaf to us; we use only what
    // `fit` returns.
    Some(unsafe { fit(depot, sheaf, capacity) })
}

/// Gives an owned sheaf the capacity `target`: in place when its storage
/// allows (objects above a lower capacity go to the slabs), else by moving
/// its objects into a larger sheaf from the pool, the old one going back
/// to the pool (once per storage size the capacity climbs past). Returns
/// the sheaf to use from now on. If the OS refuses memory for a larger
/// one, the sheaf keeps its storage as its capacity (the next slow path
/// tries again). Counted in `sheaf_resizes` when anything changed.
///
/// # Safety
///
/// 1. The caller owns `sheaf`, whose objects are free objects of this
///    class whose home is the sheaf's node, and touches only the returned
///    sheaf afterwards.
pub unsafe fn fit<D: Depot>(depot: &D, sheaf: NonNull<Sheaf>, target: u32) -> NonNull<Sheaf> {
    // SAFETY: duty 1: ours.
    let old = unsafe { &mut *sheaf.as_ptr() };
    if target > old.storage() {
        if let Some(larger) = depot
            .pool()
            .take(depot.class(), old.node, target, depot.lane())
        {
            // SAFETY: just taken from the pool: ours, and not `sheaf`.
            let new = unsafe { &mut *larger.as_ptr() };
            // `new` has room for `target > storage >= len`: every object
            // moves.
            let len = old.len;
            let moved = old.move_top_to(new, len);
            crate::invariant!(moved == len, "objects lost moving to a larger sheaf");
            // SAFETY: duty 1: ours, emptied (its objects are in `new`),
            // never touched again.
            unsafe { depot.pool().give(sheaf) };
            CacheCounters::add(&depot.counters().sheaf_resizes, 1);
            return larger;
        }
    }
    if old.capacity != target.min(old.storage()) {
        let node = old.node;
        old.resize(target, |excess| {
            // SAFETY: duty 1: the objects above `target` are free objects
            // of this class whose home is `node`, leaving the sheaf now.
            unsafe { depot.flush(node, excess) }
        });
        CacheCounters::add(&depot.counters().sheaf_resizes, 1);
    }
    sheaf
}

/// Fills an owned, empty `sheaf` up to its capacity from `node`'s slabs.
pub fn refill<D: Depot>(depot: &D, node: NodeId, sheaf: &mut Sheaf) {
    let filled = depot.refill(node, sheaf.free_storage());
    sheaf.grow_by(filled);
}

/// Returns every object of an owned `sheaf` to `node`'s slabs.
///
/// # Safety
///
/// 1. The sheaf's objects are free objects of this class whose home is
///    `node`.
pub unsafe fn flush<D: Depot>(depot: &D, node: NodeId, sheaf: &mut Sheaf) {
    // SAFETY: duty 1; the sheaf lists each object once (Sheaf invariant).
    unsafe { depot.flush(node, sheaf.held()) };
    sheaf.clear();
}

/// Sends an owned sheaf away for good: a full one to `node`'s barn, or its
/// objects to the slabs; the empty sheaf to the barn's empty stack, or the
/// pool.
///
/// # Safety
///
/// 1. The caller owns `sheaf`, whose objects are free objects of this
///    class whose home is `node`, and does not touch it again.
pub unsafe fn dispose<D: Depot>(depot: &D, node: NodeId, sheaf: NonNull<Sheaf>) {
    // SAFETY: duty 1.
    unsafe { send_away(depot, node, sheaf, false) }
}

/// As [`dispose`], but a sheaf with any objects goes to the barn's full
/// sheaves, not only a full one: the older part of a main sheaf split
/// where the thread's bursts keep trading whole sheaves with the barn
/// (`SpareTrades::put_keep`).
///
/// # Safety
///
/// 1. As [`dispose`].
pub unsafe fn dispose_part<D: Depot>(depot: &D, node: NodeId, sheaf: NonNull<Sheaf>) {
    // SAFETY: duty 1.
    unsafe { send_away(depot, node, sheaf, true) }
}

/// [`dispose`] and [`dispose_part`].
///
/// # Safety
///
/// 1. As [`dispose`].
unsafe fn send_away<D: Depot>(depot: &D, node: NodeId, sheaf: NonNull<Sheaf>, part: bool) {
    // SAFETY: duty 1: the caller owns the sheaf.
    let (len, capacity) = unsafe { ((*sheaf.as_ptr()).len, (*sheaf.as_ptr()).capacity) };
    let lane = depot.lane();
    if len > 0 {
        if len == capacity || part {
            let mut barn = depot.barn(node).lock();
            // SAFETY: duty 1: owned, non-empty, this node and class.
            let refused = unsafe { barn.put_full(lane, sheaf) }.err();
            drop(barn);
            let counters = depot.counters();
            if refused.is_none() {
                CacheCounters::add(&counters.barn_put_hits, 1);
                return;
            }
            CacheCounters::add(&counters.barn_put_misses, 1);
        }
        // SAFETY: duty 1; still ours (refused or not offered).
        unsafe { flush(depot, node, &mut *sheaf.as_ptr()) };
    }
    let mut barn = depot.barn(node).lock();
    // SAFETY: owned and empty now.
    let refused = unsafe { barn.put_empty(lane, sheaf) }.err();
    drop(barn);
    if let Some(refused) = refused {
        // SAFETY: owned, empty, not touched again (duty 1).
        unsafe { depot.pool().give(refused) };
    }
}

/// Empties `node`'s barn: the objects of its full sheaves go to the slabs,
/// every sheaf to the pool (`purge`).
pub fn drain_barn<D: Depot>(depot: &D, node: NodeId) {
    loop {
        let mut barn = depot.barn(node).lock();
        let full = barn.take_any_full();
        // Lane 0's empties first, then any lane's: every one, in the end.
        let empty = barn.take_empty(Lane::ZERO);
        drop(barn);
        if full.is_none() && empty.is_none() {
            return;
        }
        if let Some(full) = full {
            // SAFETY: the barn handed the sheaf to us; its objects are free
            // objects of this node and class (Barn invariant).
            unsafe {
                flush(depot, node, &mut *full.as_ptr());
                depot.pool().give(full);
            }
        }
        if let Some(empty) = empty {
            // SAFETY: owned and empty (Barn invariant).
            unsafe { depot.pool().give(empty) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::LockRank;
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::vec::Vec;

    /// A depot whose slabs are a list of fake object addresses: what
    /// `fit` flushes lands in `flushed`.
    struct TestDepot {
        barn: Mutex<Barn>,
        pool: SheafPool,
        capacity: AtomicU32,
        counters: CacheCounters,
        remote_frees: RemoteFrees,
        flushed: std::sync::Mutex<Vec<*mut u8>>,
        lane: Lane,
    }

    impl TestDepot {
        fn new(capacity: u32) -> Self {
            Self {
                barn: Mutex::new(LockRank::Barn, Barn::new()),
                pool: SheafPool::new(),
                capacity: AtomicU32::new(capacity),
                counters: CacheCounters::new(),
                remote_frees: RemoteFrees::new(),
                flushed: std::sync::Mutex::new(Vec::new()),
                lane: Lane::ZERO,
            }
        }
    }

    // SAFETY: test-only: objects are fake addresses never dereferenced,
    // each handed out once by the test itself; no lock nests.
    unsafe impl Depot for TestDepot {
        fn class(&self) -> SizeClass {
            SizeClass::FIRST
        }
        fn barn(&self, _node: NodeId) -> &Mutex<Barn> {
            &self.barn
        }
        fn lane(&self) -> Lane {
            self.lane
        }
        fn refill(&self, _node: NodeId, _out: &mut [*mut u8]) -> usize {
            0
        }
        unsafe fn flush(&self, _node: NodeId, objects: &[*mut u8]) {
            self.flushed.lock().unwrap().extend_from_slice(objects);
        }
        fn pool(&self) -> &SheafPool {
            &self.pool
        }
        fn sheaf_capacity(&self) -> u32 {
            self.capacity.load(Relaxed)
        }
        fn counters(&self) -> &CacheCounters {
            &self.counters
        }
        fn remote_frees(&self) -> &RemoteFrees {
            &self.remote_frees
        }
    }

    fn fake(i: usize) -> *mut u8 {
        ((i + 1) * 64) as *mut u8
    }

    /// A sheaf of `capacity` holding `count` fake objects.
    fn filled(depot: &TestDepot, capacity: u32, count: usize) -> NonNull<Sheaf> {
        let sheaf = depot
            .pool
            .take(SizeClass::FIRST, NodeId::ZERO, capacity, Lane::ZERO)
            .unwrap();
        for i in 0..count {
            // SAFETY: just taken: ours.
            assert!(unsafe { (*sheaf.as_ptr()).push(fake(i)) });
        }
        sheaf
    }

    fn resizes(depot: &TestDepot) -> u64 {
        depot.counters.sheaf_resizes.load(Relaxed)
    }

    #[test]
    fn a_raise_past_the_storage_moves_every_object_to_a_larger_sheaf() {
        let depot = TestDepot::new(512);
        let small = filled(&depot, 64, 64);
        // SAFETY: ours; only the returned sheaf is used afterwards.
        let large = unsafe { fit(&depot, small, 512) };
        assert_ne!(large, small, "storage 64 cannot hold 512");
        // SAFETY: returned to us by `fit`.
        let sheaf = unsafe { large.as_ref() };
        assert_eq!((sheaf.storage(), sheaf.capacity, sheaf.len), (512, 512, 64));
        let expected: Vec<*mut u8> = (0..64).map(fake).collect();
        assert_eq!(sheaf.held(), &expected[..], "same objects, same order");
        sheaf.check_invariants();
        assert!(depot.flushed.lock().unwrap().is_empty(), "nothing flushed");
        assert_eq!(resizes(&depot), 1);
        // The small sheaf went back to the pool's list of its size.
        let again = depot
            .pool
            .take(SizeClass::FIRST, NodeId::ZERO, 64, Lane::ZERO)
            .unwrap();
        assert_eq!(again, small);
    }

    #[test]
    fn new_sheaves_come_from_the_pool_part_of_the_depots_lane() {
        let mut depot = TestDepot::new(64);
        depot.lane = Lane::of_cpu(3);
        // The barn has no empty sheaf: a new one, carved by the lane.
        let empty = empty_sheaf(&depot, NodeId::ZERO, 64).unwrap();
        // SAFETY: ours.
        assert_eq!(unsafe { empty.as_ref() }.lane(), Lane::of_cpu(3));
        // A raise past its storage moves into a sheaf of the same lane.
        // SAFETY: ours, empty; only the returned sheaf is used afterwards.
        let larger = unsafe { fit(&depot, empty, 512) };
        assert_ne!(larger, empty);
        // SAFETY: ours.
        assert_eq!(unsafe { larger.as_ref() }.lane(), Lane::of_cpu(3));
    }

    #[test]
    fn a_lower_capacity_flushes_the_objects_above_it_in_place() {
        let depot = TestDepot::new(16);
        let sheaf = filled(&depot, 64, 64);
        // SAFETY: ours; only the returned sheaf is used afterwards.
        let same = unsafe { fit(&depot, sheaf, 16) };
        assert_eq!(same, sheaf);
        // SAFETY: ours.
        let held = unsafe { same.as_ref() };
        assert_eq!((held.capacity, held.len), (16, 16));
        let top: Vec<*mut u8> = (16..64).map(fake).collect();
        assert_eq!(*depot.flushed.lock().unwrap(), top);
        assert_eq!(resizes(&depot), 1);
    }

    #[test]
    fn a_raise_within_the_storage_stays_in_place_and_an_unchanged_one_counts_nothing() {
        let depot = TestDepot::new(64);
        let sheaf = filled(&depot, 40, 40);
        // SAFETY: ours.
        assert_eq!(unsafe { sheaf.as_ref() }.storage(), 64);
        // SAFETY: ours; only the returned sheaf is used afterwards.
        let same = unsafe { fit(&depot, sheaf, 64) };
        assert_eq!(same, sheaf);
        // SAFETY: ours.
        assert_eq!(unsafe { same.as_ref() }.capacity, 64);
        assert_eq!(resizes(&depot), 1);
        // SAFETY: ours.
        let again = unsafe { fit(&depot, same, 64) };
        assert_eq!((again, resizes(&depot)), (same, 1));
    }

    #[test]
    fn a_stolen_full_sheaf_pops_in_the_cpus_order_and_an_own_one_as_freed() {
        // The order this CPU's stolen sheaves pop in, decided before the
        // steal (as the engine's initialisation does; another test may
        // initialise the engine at any time, to the same order).
        crate::pop_order::init();
        // Freed out of address order, as a hand-off's consumer frees.
        let freed = [5, 1, 7, 0, 3, 6, 2, 4];
        let mut depot = TestDepot::new(8);
        // One more than a surplus: after the own lane takes one back, the
        // stack is still one.
        for _ in 0..=crate::barn::STEAL_MIN {
            let sheaf = filled(&depot, 8, 0);
            for i in freed {
                // SAFETY: just taken: ours.
                assert!(unsafe { (*sheaf.as_ptr()).push(fake(i)) });
            }
            // SAFETY: ours, full, this barn's node and class.
            assert!(unsafe { depot.barn.lock().put_full(Lane::ZERO, sheaf) }.is_ok());
        }
        let as_freed: Vec<*mut u8> = freed.into_iter().map(fake).collect();
        // The lane that freed them takes one back: untouched.
        let own = take_full_alone(&depot, NodeId::ZERO).unwrap();
        // SAFETY: ours.
        assert_eq!(unsafe { own.as_ref() }.held(), &as_freed[..]);
        // Another lane steals one: its pops come in address order, in
        // this CPU's direction, the same objects.
        depot.lane = Lane::of_cpu(1);
        assert_ne!(depot.lane, Lane::ZERO);
        let empty = filled(&depot, 8, 0);
        // SAFETY: `empty` is ours, empty, this barn's node and class.
        let stolen = unsafe { take_full(&depot, NodeId::ZERO, empty) }.unwrap();
        assert_eq!(depot.counters.barn_lane_steals.load(Relaxed), 1);
        // SAFETY: ours.
        let sheaf = unsafe { &mut *stolen.as_ptr() };
        let mut popped = Vec::new();
        while let Some(object) = sheaf.pop() {
            popped.push(object);
        }
        let mut expected: Vec<*mut u8> = (0..8).map(fake).collect();
        if crate::pop_order::stolen() == crate::pop_order::PopOrder::Descending {
            expected.reverse();
        }
        assert_eq!(popped, expected);
    }

    #[test]
    fn an_empty_sheaf_from_the_barn_is_fitted_to_the_live_capacity() {
        let depot = TestDepot::new(64);
        let small = filled(&depot, 64, 0);
        // SAFETY: ours, empty, this barn's node and class.
        assert!(unsafe { depot.barn.lock().put_empty(Lane::ZERO, small) }.is_ok());
        depot.capacity.store(1024, Relaxed);
        let empty = empty_sheaf(&depot, NodeId::ZERO, 1024).unwrap();
        // SAFETY: ours.
        let sheaf = unsafe { empty.as_ref() };
        assert_eq!(
            (sheaf.storage(), sheaf.capacity, sheaf.len),
            (1024, 1024, 0)
        );
        assert_eq!(depot.barn.lock().counts(), (0, 0));
    }
}
