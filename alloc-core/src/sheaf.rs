//! Sheaves: fixed-size arrays of free object pointers, and the pool their
//! storage comes from.
//!
//! A thread allocates by popping from its *main* sheaf and frees by pushing
//! onto it; whole sheaves move between a thread and its node's barn. The
//! storage of every sheaf is sized for [`SHEAF_CAPACITY_MAX`] so that a live
//! capacity change never reallocates one.
//!
//! Sheaf memory comes from the OS through [`SheafPool`], never from the
//! global allocator; a sheaf that is no longer needed goes back to the pool's
//! free list and is reused.

use core::ptr::{self, NonNull};

use crate::node::NodeId;
use crate::os;
use crate::size_class::SizeClass;
use crate::sync::{LockRank, Mutex};

/// Largest sheaf capacity any cache can be set to (4 under loom, so that
/// its models reach every limit in a few steps).
#[cfg(not(loom))]
pub const SHEAF_CAPACITY_MAX: u32 = 256;
/// Largest sheaf capacity any cache can be set to (4 under loom, so that
/// its models reach every limit in a few steps).
#[cfg(loom)]
pub const SHEAF_CAPACITY_MAX: u32 = 4;

/// An array of free objects of one size class, all with the same home node.
///
/// Invariants: `len <= capacity <= SHEAF_CAPACITY_MAX`; `objects[..len]`
/// are distinct free objects of size class `class` whose home is `node`
/// (arena addresses, so never null).
/// A sheaf has exactly one owner at a time (a thread's main, spare or
/// remote slot, a barn stack, or the pool), and only the owner touches it;
/// ownership moves under the barn or pool lock.
#[repr(C, align(64))]
pub struct Sheaf {
    /// Objects held.
    pub len: u32,
    /// Objects it may hold now (the cache's capacity when last synced).
    pub capacity: u32,
    /// Link in a barn stack or the pool's free list.
    pub next: *mut Sheaf,
    /// Home node of the objects.
    pub node: NodeId,
    /// Class of the objects.
    pub class: SizeClass,
    /// Object storage; `objects[..len]` are valid.
    pub objects: [*mut u8; SHEAF_CAPACITY_MAX as usize],
}

impl Sheaf {
    /// The held objects.
    pub fn held(&self) -> &[*mut u8] {
        self.objects.get(..self.len as usize).unwrap_or(&[])
    }

    /// The unused room up to the capacity, to be filled in place and then
    /// counted with [`grow_by`](Self::grow_by).
    pub fn free_storage(&mut self) -> &mut [*mut u8] {
        self.objects
            .get_mut(self.len as usize..self.capacity as usize)
            .unwrap_or(&mut [])
    }

    /// Counts `filled` objects written into [`free_storage`](Self::free_storage).
    pub fn grow_by(&mut self, filled: usize) {
        let room = self.capacity.saturating_sub(self.len) as usize;
        crate::invariant!(filled <= room, "sheaf filled past its capacity");
        self.len = self.len.saturating_add(filled as u32);
    }

    /// Forgets every held object (they were handed elsewhere).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Sets the capacity of an empty sheaf (clamped to the storage).
    pub fn set_capacity(&mut self, capacity: u32) {
        crate::invariant!(self.len == 0, "capacity set on a sheaf with objects");
        self.capacity = capacity.min(SHEAF_CAPACITY_MAX);
    }

    /// Lowers the capacity to `capacity`, first handing every object above
    /// it to `flush` (which must take them: they leave the sheaf); raises
    /// it up to the storage's size.
    pub fn resize(&mut self, capacity: u32, flush: impl FnOnce(&[*mut u8])) {
        let capacity = capacity.min(SHEAF_CAPACITY_MAX);
        if self.len > capacity {
            flush(
                self.objects
                    .get(capacity as usize..self.len as usize)
                    .unwrap_or(&[]),
            );
            self.len = capacity;
        }
        self.capacity = capacity;
    }

    /// Pushes an object; returns false if the sheaf is at capacity.
    pub fn push(&mut self, object: *mut u8) -> bool {
        if self.len >= self.capacity {
            return false;
        }
        let Some(slot) = self.objects.get_mut(self.len as usize) else {
            return false;
        };
        *slot = object;
        // Cannot wrap: `len < capacity` (checked above).
        self.len = self.len.wrapping_add(1);
        true
    }

    /// Pops an object, if any.
    pub fn pop(&mut self) -> Option<*mut u8> {
        let len = self.len.checked_sub(1)?;
        let object = *self.objects.get(len as usize)?;
        self.len = len;
        Some(object)
    }

    /// Checks the invariants that need no other state (tests and debug).
    pub fn check_invariants(&self) {
        crate::invariant!(self.len <= self.capacity, "sheaf len above capacity");
        crate::invariant!(
            self.capacity <= SHEAF_CAPACITY_MAX,
            "sheaf capacity above maximum"
        );
        #[cfg(debug_assertions)]
        {
            let mut rest = self.held();
            while let Some((a, later)) = rest.split_first() {
                crate::invariant!(!a.is_null(), "null object in sheaf");
                for b in later {
                    crate::invariant!(a != b, "object twice in one sheaf");
                }
                rest = later;
            }
        }
    }
}

/// Free-list pool of sheaf storage, fed by OS mappings.
///
/// Invariant: every sheaf on `free` is owned by the pool; `cursor..end` is
/// mapped memory not yet handed out.
pub struct SheafPool {
    inner: Mutex<PoolInner>,
}

struct PoolInner {
    free: *mut Sheaf,
    /// The newest mapped block; each block's first word links the one
    /// mapped before it (its first sheaf-sized slot is not handed out).
    blocks: *mut u8,
    cursor: usize,
    end: usize,
    mapped_bytes: u64,
    sheaves: u64,
}

// SAFETY: the raw pointers in `PoolInner` point to pool-owned memory that is
// only touched under the pool's lock.
unsafe impl Send for PoolInner {}

#[cfg(not(loom))]
const POOL_BLOCK_BYTES: usize = 256 * 1024;
/// Under loom each model execution makes its own pool: keep it small.
#[cfg(loom)]
const POOL_BLOCK_BYTES: usize = 4096;

impl SheafPool {
    const EMPTY: PoolInner = PoolInner {
        free: ptr::null_mut(),
        blocks: ptr::null_mut(),
        cursor: 0,
        end: 0,
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

    /// Takes an empty sheaf for `class` and `node` with `capacity`, or `None`
    /// if the OS refuses memory.
    pub fn take(&self, class: SizeClass, node: NodeId, capacity: u32) -> Option<NonNull<Sheaf>> {
        let raw = {
            let mut inner = self.inner.lock();
            if !inner.free.is_null() {
                let sheaf = inner.free;
                // SAFETY: sheaves on the free list are pool-owned (invariant).
                inner.free = unsafe { (*sheaf).next };
                sheaf
            } else {
                let size = core::mem::size_of::<Sheaf>();
                if inner.end.wrapping_sub(inner.cursor) < size {
                    let block = os::map(POOL_BLOCK_BYTES, os::page_size())?;
                    // SAFETY: a fresh, page-aligned mapping of
                    // POOL_BLOCK_BYTES: its first word is ours to write.
                    unsafe { block.as_ptr().cast::<*mut u8>().write(inner.blocks) };
                    inner.blocks = block.as_ptr();
                    inner.cursor = (block.as_ptr() as usize).wrapping_add(size);
                    inner.end = (block.as_ptr() as usize).wrapping_add(POOL_BLOCK_BYTES);
                    inner.mapped_bytes = inner.mapped_bytes.wrapping_add(POOL_BLOCK_BYTES as u64);
                }
                let sheaf = inner.cursor as *mut Sheaf;
                inner.cursor = inner.cursor.wrapping_add(size);
                inner.sheaves = inner.sheaves.wrapping_add(1);
                sheaf
            }
        };
        // SAFETY: `raw` is pool memory now owned by the caller, aligned for
        // `Sheaf` (blocks are page-aligned, the size is a multiple of 64).
        // Writing the header only: `objects[..0]` needs no initialisation.
        unsafe {
            ptr::addr_of_mut!((*raw).len).write(0);
            ptr::addr_of_mut!((*raw).capacity).write(capacity.min(SHEAF_CAPACITY_MAX));
            ptr::addr_of_mut!((*raw).next).write(ptr::null_mut());
            ptr::addr_of_mut!((*raw).node).write(node);
            ptr::addr_of_mut!((*raw).class).write(class);
        }
        NonNull::new(raw)
    }

    /// Gives back an empty sheaf.
    ///
    /// # Safety
    ///
    /// 1. `sheaf` came from `take` of this pool, is empty, and the caller
    ///    owns it and will not touch it again.
    pub unsafe fn give(&self, sheaf: NonNull<Sheaf>) {
        let mut inner = self.inner.lock();
        // SAFETY: duty 1: the caller hands over ownership.
        unsafe { (*sheaf.as_ptr()).next = inner.free };
        inner.free = sheaf.as_ptr();
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
            // `os::map` in `take`; `&mut self` means no one can take a
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

    #[test]
    fn push_pop_respects_capacity_and_order() {
        let class = SizeClass::from_index(3).unwrap();
        let sheaf = SHEAF_POOL.take(class, NodeId::ZERO, 4).unwrap();
        // SAFETY: we own the sheaf taken above.
        let sheaf_ref = unsafe { &mut *sheaf.as_ptr() };
        let mut cells = [0u8; 5];
        for cell in cells.iter_mut().take(4) {
            assert!(sheaf_ref.push(cell));
        }
        assert!(
            !sheaf_ref.push(&mut cells[4]),
            "fifth push must fail at capacity 4"
        );
        sheaf_ref.check_invariants();
        assert_eq!(sheaf_ref.pop(), Some(&mut cells[3] as *mut u8));
        assert_eq!(sheaf_ref.held().len(), 3);
        while sheaf_ref.pop().is_some() {}
        // SAFETY: empty and owned; not used afterwards.
        unsafe { SHEAF_POOL.give(sheaf) };
        let again = SHEAF_POOL.take(class, NodeId::ZERO, 8).unwrap();
        // SAFETY: freshly taken, owned.
        assert_eq!(unsafe { again.as_ref() }.capacity, 8);
        // SAFETY: empty, owned, not used afterwards.
        unsafe { SHEAF_POOL.give(again) };
    }
}
