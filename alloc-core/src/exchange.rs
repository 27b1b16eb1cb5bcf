//! The exchange protocol: every trade of sheaves between a thread and the
//! layers below it — its node's barn, the slabs, the sheaf pool — in one
//! place, with names. Every caller (allocation and free slow paths, remote
//! batches, thread exit, migration, capacity changes, purge) goes through
//! these operations; none touches a barn by itself.
//!
//! | operation | gives | gets | when |
//! |---|---|---|---|
//! | [`take_full`] | an empty sheaf | a full one | alloc: main and spare empty |
//! | [`take_full_alone`] | — | a full one | alloc, per-CPU mode (the empty main is detached on its own) |
//! | [`put_full`] | a full sheaf | an empty one, if the barn has one | free: main and spare full |
//! | [`hand_over`] | a full remote batch | an empty one, if any | a batch for another node is full |
//! | [`empty_sheaf`] | — | an empty sheaf (barn, else pool) | a slot needs a sheaf |
//! | [`refill`] / [`flush`] | — / a sheaf's objects | objects / — | the barn could not help |
//! | [`dispose`] | any sheaf | — | exit, migration, shrink, purge |
//! | [`drain_barn`] | — | — | purge: the barn's sheaves go to slabs and pool |
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

use crate::barn::Barn;
use crate::counters::CacheCounters;
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
    let counters = depot.counters();
    let mut barn = depot.barn(node).lock();
    let Some(full) = barn.take_full() else {
        drop(barn);
        CacheCounters::add(&counters.barn_get_misses, 1);
        return Err(empty);
    };
    // SAFETY: duty 1.
    let refused = unsafe { barn.put_empty(empty) }.err();
    drop(barn);
    if let Some(refused) = refused {
        // SAFETY: the barn refused the empty sheaf: still ours, empty.
        unsafe { depot.pool().give(refused) };
    }
    CacheCounters::add(&counters.barn_get_hits, 1);
    Ok(full)
}

/// Takes a full sheaf of `node`'s barn without giving one back (the
/// per-CPU slow path detaches its empty main sheaf separately).
pub fn take_full_alone<D: Depot>(depot: &D, node: NodeId) -> Option<NonNull<Sheaf>> {
    let mut barn = depot.barn(node).lock();
    let full = barn.take_full();
    drop(barn);
    let counters = depot.counters();
    match full {
        Some(_) => CacheCounters::add(&counters.barn_get_hits, 1),
        None => CacheCounters::add(&counters.barn_get_misses, 1),
    }
    full
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
    let mut barn = depot.barn(node).lock();
    // SAFETY: duty 1.
    let stored = unsafe { barn.put_full(full) };
    let empty = match stored {
        Ok(()) => Ok(barn.take_empty()),
        Err(full) => Err(full),
    };
    drop(barn);
    empty
}

/// An empty sheaf with `capacity` for `node`: one of the barn's, else a
/// new one from the pool; `None` only if the OS refuses memory.
pub fn empty_sheaf<D: Depot>(depot: &D, node: NodeId, capacity: u32) -> Option<NonNull<Sheaf>> {
    let mut barn = depot.barn(node).lock();
    let from_barn = barn.take_empty();
    drop(barn);
    let Some(sheaf) = from_barn else {
        return depot.pool().take(depot.class(), node, capacity);
    };
    // SAFETY: the barn handed the (empty) sheaf to us.
    unsafe { (*sheaf.as_ptr()).set_capacity(capacity) };
    Some(sheaf)
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
    // SAFETY: duty 1: the caller owns the sheaf.
    let (len, capacity) = unsafe { ((*sheaf.as_ptr()).len, (*sheaf.as_ptr()).capacity) };
    if len > 0 {
        if len == capacity {
            let mut barn = depot.barn(node).lock();
            // SAFETY: duty 1: owned, non-empty, this node and class.
            let refused = unsafe { barn.put_full(sheaf) }.err();
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
    let refused = unsafe { barn.put_empty(sheaf) }.err();
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
        let full = barn.take_full();
        let empty = barn.take_empty();
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
