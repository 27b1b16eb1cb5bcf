//! Where sheaves' memory comes from: the pool, one part per lane.
//!
//! Sheaf memory comes from the OS in blocks, never from the global
//! allocator; a sheaf that is no longer needed goes back to a free list of
//! its storage size and is reused.
//!
//! # Why per lane
//!
//! A CPU writes its main sheaf's pointer array on every push and reads it
//! on every pop, from one end to the other in each burst. Two sheaves
//! carved one after the other lie in the same page, the end of one next
//! to the start of the other. When two CPUs each hold one of them as main,
//! the CPU's prefetchers, following one array to its end, pull in the
//! lines of the other's beside it, and those lines then move between the
//! two cores in every burst, although neither CPU ever touches the
//! other's objects. How much that costs depends on how far apart the host
//! placed the cores: next to nothing where a core-to-core round trip takes
//! 50 ns, about half the throughput of a churn of 256 buffers where it
//! takes 370 ns (`docs/PERFORMANCE.md`, "Sheaves that share a page").
//!
//! So each [lane](crate::lane) carves its sheaves from blocks of its own,
//! and a sheaf remembers the lane that carved it ([`Sheaf::lane`]) and goes
//! back to that lane's free list. Two CPUs of different lanes never hold
//! sheaves of one page unless a sheaf moved between them (a hand-off's
//! sheaves do, by design: one CPU fills what the other empties). A take
//! looks at its own lane's free list, then at the other lanes' (so the
//! pool never carves while a free sheaf of that size exists: as much
//! memory as one shared pool), and only then carves.

use core::ptr::{self, NonNull};

use crate::lane::{Lane, LANES};
use crate::node::NodeId;
use crate::os;
use crate::sheaf::{Sheaf, SHEAF_CAPACITY_MAX, SHEAF_STORAGE_MIN};
use crate::size_class::SizeClass;
use crate::sync::{LockRank, Mutex};

/// Storage sizes: every power of two from `SHEAF_STORAGE_MIN` to
/// `SHEAF_CAPACITY_MAX`.
const TIERS: usize =
    (SHEAF_CAPACITY_MAX.trailing_zeros() - SHEAF_STORAGE_MIN.trailing_zeros()) as usize + 1;

#[cfg(not(loom))]
const POOL_BLOCK_BYTES: usize = 256 * 1024;
/// Under loom each model execution makes its own pool: keep it small.
#[cfg(loom)]
const POOL_BLOCK_BYTES: usize = 4096;

const _: () = assert!(
    POOL_BLOCK_BYTES >= core::mem::size_of::<Sheaf>() + Sheaf::bytes_for(SHEAF_CAPACITY_MAX)
);

/// The free list a sheaf of `storage` entries belongs to.
fn tier(storage: u32) -> usize {
    (storage
        .trailing_zeros()
        .saturating_sub(SHEAF_STORAGE_MIN.trailing_zeros()) as usize)
        .min(TIERS - 1)
}

/// Free-list pool of sheaf storage, fed by OS mappings, one part per lane.
///
/// Invariant: every sheaf on `lanes[l].free[t]` is owned by the pool, was
/// carved by lane `l` (its `lane` field) and has the storage of tier `t`
/// (`SHEAF_STORAGE_MIN << t` entries); `lanes[l].cursor..lanes[l].end` is
/// mapped memory of a block of lane `l` not yet handed out.
pub struct SheafPool {
    inner: Mutex<PoolInner>,
}

struct PoolInner {
    lanes: [LanePart; LANES],
    /// The newest mapped block (of any lane); each block's first word
    /// links the one mapped before it (its first sheaf-aligned slot is not
    /// handed out).
    blocks: *mut u8,
    mapped_bytes: u64,
    sheaves: u64,
}

/// One lane's part of the pool.
#[derive(Clone, Copy)]
struct LanePart {
    /// Free sheaves carved by this lane, one list per storage size.
    free: [*mut Sheaf; TIERS],
    /// What is left of this lane's newest block.
    cursor: usize,
    end: usize,
}

// SAFETY: the raw pointers in `PoolInner` point to pool-owned memory that is
// only touched under the pool's lock.
unsafe impl Send for PoolInner {}

impl LanePart {
    const EMPTY: LanePart = LanePart {
        free: [ptr::null_mut(); TIERS],
        cursor: 0,
        end: 0,
    };

    /// Pops a free sheaf of `tier`, if the lane has one.
    fn pop(&mut self, tier: usize) -> Option<*mut Sheaf> {
        let list = self.free.get_mut(tier)?;
        let head = NonNull::new(*list)?;
        // SAFETY: sheaves on a free list are pool-owned (invariant).
        *list = unsafe { (*head.as_ptr()).next };
        Some(head.as_ptr())
    }
}

impl PoolInner {
    /// Carves `size` bytes for `lane`, mapping a new block for it when its
    /// current one has no room; `None` if the OS refuses memory.
    fn carve(&mut self, lane: Lane, size: usize) -> Option<*mut Sheaf> {
        let part = lane_part(&mut self.lanes, lane);
        if part.end.wrapping_sub(part.cursor) < size {
            let block = os::map(POOL_BLOCK_BYTES, os::page_size())?;
            // SAFETY: a fresh, page-aligned mapping of POOL_BLOCK_BYTES:
            // its first word is ours to write.
            unsafe { block.as_ptr().cast::<*mut u8>().write(self.blocks) };
            self.blocks = block.as_ptr();
            self.mapped_bytes = self.mapped_bytes.wrapping_add(POOL_BLOCK_BYTES as u64);
            let part = lane_part(&mut self.lanes, lane);
            part.cursor = (block.as_ptr() as usize).wrapping_add(core::mem::size_of::<Sheaf>());
            part.end = (block.as_ptr() as usize).wrapping_add(POOL_BLOCK_BYTES);
        }
        self.sheaves = self.sheaves.wrapping_add(1);
        let part = lane_part(&mut self.lanes, lane);
        let sheaf = part.cursor as *mut Sheaf;
        part.cursor = part.cursor.wrapping_add(size);
        Some(sheaf)
    }
}

/// `lane`'s part of the pool.
#[inline]
fn lane_part(lanes: &mut [LanePart; LANES], lane: Lane) -> &mut LanePart {
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    unsafe { lanes.get_unchecked_mut(lane.index()) }
}

impl SheafPool {
    const EMPTY: PoolInner = PoolInner {
        lanes: [LanePart::EMPTY; LANES],
        blocks: ptr::null_mut(),
        mapped_bytes: 0,
        sheaves: 0,
    };

    /// An empty pool.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            inner: Mutex::new(LockRank::Pool, Self::EMPTY),
        }
    }

    /// An empty pool (not `const` under loom, whose locks are not).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(LockRank::Pool, Self::EMPTY),
        }
    }

    /// Takes an empty sheaf for `class` and `node` with `capacity` (and
    /// the storage [`Sheaf::storage_for`] gives it), for a CPU of `lane`:
    /// a free one of `lane`'s, else of another lane's, else a new one
    /// carved from `lane`'s block; `None` if the OS refuses memory.
    pub fn take(
        &self,
        class: SizeClass,
        node: NodeId,
        capacity: u32,
        lane: Lane,
    ) -> Option<NonNull<Sheaf>> {
        let storage = Sheaf::storage_for(capacity);
        let tier = tier(storage);
        let (raw, carved_by) = {
            let mut inner = self.inner.lock();
            // The own lane first, then every lane in turn (the own one
            // again, empty by then).
            let free = core::iter::once(lane).chain(Lane::all()).find_map(|from| {
                lane_part(&mut inner.lanes, from)
                    .pop(tier)
                    .map(|sheaf| (sheaf, from))
            });
            match free {
                Some(found) => found,
                None => (inner.carve(lane, Sheaf::bytes_for(storage))?, lane),
            }
        };
        // SAFETY: `raw` is pool memory now owned by the caller: a free
        // sheaf of this storage carved by `carved_by` (invariant), or
        // `bytes_for(storage)` fresh bytes carved by `lane`, aligned for
        // `Sheaf` (blocks are page-aligned, every size a multiple of 64).
        unsafe { Sheaf::init(raw, class, node, capacity, storage, carved_by) };
        NonNull::new(raw)
    }

    /// Gives back an empty sheaf, to the free list of the lane that carved
    /// it.
    ///
    /// # Safety
    ///
    /// 1. `sheaf` came from `take` of this pool, is empty, and the caller
    ///    owns it and will not touch it again.
    pub unsafe fn give(&self, sheaf: NonNull<Sheaf>) {
        let (tier, lane) = {
            // SAFETY: duty 1: the caller owns the sheaf.
            let sheaf = unsafe { sheaf.as_ref() };
            (tier(sheaf.storage()), sheaf.lane())
        };
        let mut inner = self.inner.lock();
        if let Some(list) = lane_part(&mut inner.lanes, lane).free.get_mut(tier) {
            // SAFETY: duty 1: the caller hands over ownership; the sheaf
            // joins the list of its lane and storage (pool invariant).
            unsafe { (*sheaf.as_ptr()).next = *list };
            *list = sheaf.as_ptr();
        }
    }

    /// Bytes mapped for sheaves, and sheaves carved, since start.
    pub fn usage(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        (inner.mapped_bytes, inner.sheaves)
    }

    /// The lock, for the fork handlers.
    #[cfg(not(loom))]
    pub(crate) fn raw_lock(&self) -> &crate::sync::RawLock {
        self.inner.raw()
    }
}

/// A pool that goes away unmaps its blocks (the engine's pool is a static
/// and never does; pools of tests and models do). Every sheaf it handed
/// out goes with them.
impl Drop for SheafPool {
    fn drop(&mut self) {
        let mut inner = self.inner.lock();
        let mut block = inner.blocks;
        inner.blocks = ptr::null_mut();
        drop(inner);
        while let Some(live) = NonNull::new(block) {
            // SAFETY: the first word of each block links the previous one
            // (written when it was mapped).
            block = unsafe { live.as_ptr().cast::<*mut u8>().read() };
            // SAFETY: `live` is a mapping of POOL_BLOCK_BYTES made by
            // `os::map` in `carve`; `&mut self` means no one can take a
            // sheaf from it any more.
            unsafe { os::unmap(live, POOL_BLOCK_BYTES) };
        }
    }
}

impl Default for SheafPool {
    fn default() -> Self {
        Self::new()
    }
}

/// The process-wide sheaf pool.
#[cfg(not(loom))]
pub static SHEAF_POOL: SheafPool = SheafPool::new();

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn lane(index: u32) -> Lane {
        Lane::of_cpu(index)
    }

    #[test]
    fn each_size_is_reused_for_its_own() {
        let pool = SheafPool::new();
        let class = SizeClass::FIRST;
        let small = pool.take(class, NodeId::ZERO, 60, lane(0)).unwrap();
        let large = pool.take(class, NodeId::ZERO, 1000, lane(0)).unwrap();
        // SAFETY: both taken above: ours.
        let (s, l) = unsafe { (small.as_ref(), large.as_ref()) };
        assert_eq!(
            (s.storage(), s.capacity, l.storage(), l.capacity),
            (64, 60, 1024, 1000)
        );
        // Carved one after the other by one lane: each gets the bytes of
        // its storage.
        assert_eq!(
            large.as_ptr() as usize - small.as_ptr() as usize,
            Sheaf::bytes_for(64)
        );
        // SAFETY: empty, ours, not used again.
        unsafe { pool.give(large) };
        // A sheaf of another size does not take the freed large one...
        let other = pool.take(class, NodeId::ZERO, 64, lane(0)).unwrap();
        assert_ne!(other, large);
        // ...one of its size does.
        assert_eq!(pool.take(class, NodeId::ZERO, 513, lane(0)).unwrap(), large);
        let (mapped, carved) = pool.usage();
        assert_eq!((mapped, carved), (POOL_BLOCK_BYTES as u64, 3));
    }

    #[test]
    fn lanes_carve_from_blocks_of_their_own() {
        let pool = SheafPool::new();
        let class = SizeClass::FIRST;
        let page = os::page_size();
        // Taken in turns, as two CPUs filling their caches at start do.
        let mut taken = Vec::new();
        for _ in 0..8 {
            for cpu in 0..2 {
                let sheaf = pool.take(class, NodeId::ZERO, 256, lane(cpu)).unwrap();
                // SAFETY: just taken: ours.
                assert_eq!(unsafe { sheaf.as_ref() }.lane(), lane(cpu));
                taken.push((cpu, sheaf.as_ptr() as usize));
            }
        }
        // No page holds sheaves of both lanes.
        for &(cpu, at) in &taken {
            for &(other, there) in &taken {
                if cpu != other {
                    let pages = |a: usize| a / page..=(a + Sheaf::bytes_for(256) - 1) / page;
                    let (mine, theirs) = (pages(at), pages(there));
                    assert!(
                        mine.end() < theirs.start() || theirs.end() < mine.start(),
                        "lane {cpu}'s sheaf at {at:#x} shares a page with lane {other}'s at {there:#x}"
                    );
                }
            }
        }
        assert_eq!(pool.usage(), (2 * POOL_BLOCK_BYTES as u64, 16));
    }

    #[test]
    fn a_sheaf_goes_back_to_its_lane_and_others_reuse_it_before_carving() {
        let pool = SheafPool::new();
        let class = SizeClass::FIRST;
        let first = pool.take(class, NodeId::ZERO, 64, lane(1)).unwrap();
        let second = pool.take(class, NodeId::ZERO, 64, lane(1)).unwrap();
        // SAFETY: empty, ours, not used again.
        unsafe { pool.give(first) };
        // SAFETY: as above.
        unsafe { pool.give(second) };
        // Lane 1 gets its own back, newest first.
        let again = pool.take(class, NodeId::ZERO, 64, lane(1)).unwrap();
        assert_eq!(again, second);
        // Lane 0 has none free: it takes lane 1's rather than carve, and
        // the sheaf keeps the lane that carved it.
        let borrowed = pool.take(class, NodeId::ZERO, 64, lane(0)).unwrap();
        assert_eq!(borrowed, first);
        // SAFETY: just taken: ours.
        assert_eq!(unsafe { borrowed.as_ref() }.lane(), lane(1));
        assert_eq!(pool.usage().1, 2);
        // Given back, it goes to lane 1's list: lane 1 finds it.
        // SAFETY: empty, ours, not used again.
        unsafe { pool.give(borrowed) };
        assert_eq!(pool.take(class, NodeId::ZERO, 64, lane(1)).unwrap(), first);
        // With nothing free anywhere, lane 0 carves from a block of its own.
        let carved = pool.take(class, NodeId::ZERO, 64, lane(0)).unwrap();
        // SAFETY: just taken: ours.
        assert_eq!(unsafe { carved.as_ref() }.lane(), lane(0));
        assert_eq!(pool.usage(), (2 * POOL_BLOCK_BYTES as u64, 3));
    }
}
