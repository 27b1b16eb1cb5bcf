//! Sheaves: arrays of free object pointers, and the pool their storage
//! comes from.
//!
//! A thread allocates by popping from its *main* sheaf and frees by pushing
//! onto it; whole sheaves move between a thread and its node's barn.
//!
//! A sheaf's storage is sized by the capacity it was made for, rounded up
//! to a power of two (at least [`SHEAF_STORAGE_MIN`], at most
//! [`SHEAF_CAPACITY_MAX`]): a sheaf of the default 64 objects is 576
//! bytes, one the auto-tuner raised to 1024 is 8 KiB. A capacity change
//! within the storage is done in place ([`Sheaf::resize`]); a raise above
//! it moves the objects into a larger sheaf (`exchange::fit`), which
//! happens once per tier the capacity crosses.
//!
//! Sheaf memory comes from the OS through [`SheafPool`] (`sheaf_pool.rs`),
//! never from the global allocator; a sheaf that is no longer needed goes
//! back to the pool's free list of its size and lane and is reused.

use core::ptr;

use crate::lane::Lane;
use crate::node::NodeId;
use crate::pop_order::PopOrder;
use crate::size_class::SizeClass;

pub use crate::sheaf_pool::SheafPool;
#[cfg(not(loom))]
pub use crate::sheaf_pool::SHEAF_POOL;

/// Largest sheaf capacity any cache can be set to (4 under loom, so that
/// its models reach every limit in a few steps). A power of two.
#[cfg(not(loom))]
pub const SHEAF_CAPACITY_MAX: u32 = 1024;
/// Largest sheaf capacity any cache can be set to (4 under loom, so that
/// its models reach every limit in a few steps). A power of two.
#[cfg(loom)]
pub const SHEAF_CAPACITY_MAX: u32 = 4;

/// Smallest storage a sheaf is made with (a power of two): smaller
/// capacities share it.
#[cfg(not(loom))]
pub const SHEAF_STORAGE_MIN: u32 = 8;
/// Smallest storage a sheaf is made with (a power of two).
#[cfg(loom)]
pub const SHEAF_STORAGE_MIN: u32 = 1;

const _: () = assert!(SHEAF_CAPACITY_MAX.is_power_of_two() && SHEAF_STORAGE_MIN.is_power_of_two());
const _: () = assert!(SHEAF_STORAGE_MIN <= SHEAF_CAPACITY_MAX);

/// An array of free objects of one size class, all with the same home node.
///
/// Invariants: `len <= capacity <= storage <= SHEAF_CAPACITY_MAX`, and
/// `storage` entries of object storage follow the header in the sheaf's
/// memory (a pool sheaf's block holds [`Sheaf::bytes_for`]`(storage)`
/// bytes; the shared empty stand-in has `storage == 0`); `objects[..len]`
/// are distinct free objects of size class `class` whose home is `node`
/// (arena addresses, so never null); `lane` is the lane whose pool part
/// carved the sheaf, fixed for its life.
/// A sheaf has exactly one owner at a time (a thread's main, spare or
/// remote slot, a barn stack, or the pool), and only the owner touches it;
/// ownership moves under the barn or pool lock.
#[repr(C, align(64))]
pub struct Sheaf {
    /// Objects held.
    pub len: u32,
    /// Objects it may hold now (the cache's capacity when last synced,
    /// lowered to the storage).
    pub capacity: u32,
    /// Link in a barn stack or the pool's free list.
    pub next: *mut Sheaf,
    /// Home node of the objects.
    pub node: NodeId,
    /// Class of the objects.
    pub class: SizeClass,
    /// The lane whose pool part carved the sheaf, and whose free list it
    /// goes back to (`sheaf_pool`).
    lane: Lane,
    /// Of a per-CPU remote batch: the start of the arena region of its
    /// objects' home (their lane's region of their node), which the
    /// batch's push tests an object's address against, and whose lane's
    /// barn stack the batch goes to. Set when the batch is installed;
    /// stale in a former batch, where nothing reads it.
    pub batch_region_base: usize,
    /// Of a per-CPU remote batch: the length of that region. 0 in a sheaf
    /// the pool hands out and in the empty sheaf (no object passes).
    pub batch_region_span: usize,
    /// Entries of object storage after the header (fixed when made).
    storage: u32,
    /// Start of the object storage; `storage` entries, `[..len]` valid.
    pub(crate) objects: [*mut u8; 0],
}

impl Sheaf {
    /// The shared empty stand-in's header: no storage, capacity 0 (for
    /// the per-CPU caches, which the loom build leaves out).
    #[cfg(not(loom))]
    pub(crate) const EMPTY: Sheaf = Sheaf {
        len: 0,
        capacity: 0,
        next: ptr::null_mut(),
        node: NodeId::ZERO,
        class: SizeClass::FIRST,
        lane: Lane::ZERO,
        batch_region_base: 0,
        batch_region_span: 0,
        storage: 0,
        objects: [],
    };

    /// Storage a sheaf made for `capacity` gets: the next power of two,
    /// within `SHEAF_STORAGE_MIN..=SHEAF_CAPACITY_MAX`.
    pub const fn storage_for(capacity: u32) -> u32 {
        let capacity = if capacity < SHEAF_STORAGE_MIN {
            SHEAF_STORAGE_MIN
        } else if capacity > SHEAF_CAPACITY_MAX {
            SHEAF_CAPACITY_MAX
        } else {
            capacity
        };
        capacity.next_power_of_two()
    }

    /// Bytes of a sheaf with `storage` entries: the header and the
    /// entries, rounded up to the sheaf's alignment.
    pub const fn bytes_for(storage: u32) -> usize {
        // Cannot wrap: `storage` is a `u32` entry count, far below
        // `usize::MAX / 8`.
        let bytes =
            core::mem::offset_of!(Sheaf, objects).wrapping_add((storage as usize).wrapping_mul(8));
        let align = core::mem::align_of::<Sheaf>();
        let rounded = bytes.div_ceil(align).wrapping_mul(align);
        if rounded < core::mem::size_of::<Sheaf>() {
            core::mem::size_of::<Sheaf>()
        } else {
            rounded
        }
    }

    /// Entries of object storage: the most `capacity` can be without
    /// moving the objects to a larger sheaf.
    pub fn storage(&self) -> u32 {
        self.storage
    }

    /// The lane that carved the sheaf.
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Writes the header of an empty sheaf for `class` and `node` with
    /// `capacity` (lowered to `storage`) at `raw` (the pool's `take`).
    ///
    /// # Safety
    ///
    /// 1. `raw` is writable memory owned by the caller, aligned for
    ///    `Sheaf`, [`Sheaf::bytes_for`]`(storage)` bytes long;
    /// 2. `lane` is the lane whose pool part carved `raw` (a sheaf keeps
    ///    it for life: the free list it goes back to).
    pub(crate) unsafe fn init(
        raw: *mut Sheaf,
        class: SizeClass,
        node: NodeId,
        capacity: u32,
        storage: u32,
        lane: Lane,
    ) {
        // SAFETY: duty 1; writing the header only: `objects[..0]` needs no
        // initialisation.
        unsafe {
            ptr::addr_of_mut!((*raw).len).write(0);
            ptr::addr_of_mut!((*raw).capacity).write(capacity.min(storage));
            ptr::addr_of_mut!((*raw).next).write(ptr::null_mut());
            ptr::addr_of_mut!((*raw).node).write(node);
            ptr::addr_of_mut!((*raw).class).write(class);
            ptr::addr_of_mut!((*raw).lane).write(lane);
            ptr::addr_of_mut!((*raw).batch_region_base).write(0);
            ptr::addr_of_mut!((*raw).batch_region_span).write(0);
            ptr::addr_of_mut!((*raw).storage).write(storage);
        }
    }

    /// The first entry of the object storage, for the fast paths, which
    /// index it below the length they keep.
    pub fn objects_ptr(&mut self) -> *mut *mut u8 {
        ptr::addr_of_mut!(self.objects).cast()
    }

    /// The held objects.
    pub fn held(&self) -> &[*mut u8] {
        let len = self.len.min(self.storage) as usize;
        // SAFETY: `storage` entries follow the header (invariant) and the
        // first `len <= storage` are initialised object pointers.
        unsafe { core::slice::from_raw_parts(ptr::addr_of!(self.objects).cast(), len) }
    }

    /// The unused room up to the capacity, to be filled in place and then
    /// counted with [`grow_by`](Self::grow_by).
    pub fn free_storage(&mut self) -> &mut [*mut u8] {
        let end = self.capacity.min(self.storage) as usize;
        let start = (self.len as usize).min(end);
        // SAFETY: `storage` entries follow the header (invariant), owned
        // with the sheaf; `start..end` lies within them. Entries past
        // `len` hold zeros from the OS or pointers written before: both
        // are initialised values of a raw pointer.
        unsafe {
            core::slice::from_raw_parts_mut(self.objects_ptr().add(start), end.wrapping_sub(start))
        }
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

    /// Sets the capacity of an empty sheaf (lowered to the storage).
    pub fn set_capacity(&mut self, capacity: u32) {
        crate::invariant!(self.len == 0, "capacity set on a sheaf with objects");
        self.capacity = capacity.min(self.storage);
    }

    /// Lowers the capacity to `capacity`, first handing every object above
    /// it to `flush` (which must take them: they leave the sheaf); raises
    /// it up to the storage's size.
    pub fn resize(&mut self, capacity: u32, flush: impl FnOnce(&[*mut u8])) {
        let capacity = capacity.min(self.storage);
        if self.len > capacity {
            flush(self.held().get(capacity as usize..).unwrap_or(&[]));
            self.len = capacity;
        }
        self.capacity = capacity;
    }

    /// Orders the held objects so that pops return them in address order,
    /// `order` (the array sorted the other way). A full sheaf stolen from
    /// another lane's barn stack carries a hand-off's objects in the order
    /// the other CPU freed them, and its pops would run that order
    /// backwards; in address order the prefetchers fetch the next
    /// objects' lines from the other core ahead of their use
    /// (docs/PERFORMANCE.md, "The hand-off's packets in address order";
    /// which direction is the CPU's: [`crate::pop_order`]).
    /// `sort_unstable_by` neither allocates nor panics (the order of
    /// addresses is total); already ordered, it takes one pass.
    pub fn order_for_pops(&mut self, order: PopOrder) {
        let len = self.len.min(self.storage) as usize;
        // SAFETY: `storage` entries follow the header (invariant) and the
        // first `len <= storage` are initialised object pointers; `&mut
        // self` makes them ours alone.
        let held = unsafe { core::slice::from_raw_parts_mut(self.objects_ptr(), len) };
        match order {
            PopOrder::Ascending => held.sort_unstable_by(|a, b| b.cmp(a)),
            PopOrder::Descending => held.sort_unstable(),
        }
    }

    /// Pushes an object; returns false if the sheaf is at capacity.
    pub fn push(&mut self, object: *mut u8) -> bool {
        // The room above `len` up to the capacity: empty at capacity.
        let Some(slot) = self.free_storage().first_mut() else {
            return false;
        };
        *slot = object;
        // Cannot wrap: `len < capacity` (checked above).
        self.len = self.len.wrapping_add(1);
        true
    }

    /// Moves the top `count` held objects (the most recently pushed, in
    /// their order) onto `to`, as many as `to` has room for; returns how
    /// many moved. `to` must hold objects of the same class and home.
    pub fn move_top_to(&mut self, to: &mut Sheaf, count: u32) -> u32 {
        let room = to.free_storage();
        let moved = count.min(self.len).min(room.len() as u32);
        let from = self.len.wrapping_sub(moved) as usize;
        // `from..len` are held objects (`moved <= len`), and `room` has at
        // least `moved` entries.
        if let (Some(slots), Some(top)) = (room.get_mut(..moved as usize), self.held().get(from..))
        {
            slots.copy_from_slice(top);
        }
        to.grow_by(moved as usize);
        self.len = from as u32;
        moved
    }

    /// Pops an object, if any.
    pub fn pop(&mut self) -> Option<*mut u8> {
        let object = *self.held().last()?;
        self.len = self.len.wrapping_sub(1);
        Some(object)
    }

    /// Checks the invariants that need no other state (tests and debug).
    pub fn check_invariants(&self) {
        crate::invariant!(self.len <= self.capacity, "sheaf len above capacity");
        crate::invariant!(
            self.capacity <= self.storage && self.storage <= SHEAF_CAPACITY_MAX,
            "sheaf capacity above its storage or the maximum"
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn order_for_pops_makes_the_pops_walk_the_addresses_either_way() {
        let pool = SheafPool::new();
        let mut sheaf = pool
            .take(SizeClass::FIRST, NodeId::ZERO, 16, Lane::ZERO)
            .unwrap();
        // SAFETY: taken above: ours, and not aliased.
        let sheaf = unsafe { sheaf.as_mut() };
        // Stand-ins for objects: distinct, non-null, never dereferenced,
        // pushed out of order (as a hand-off's consumer frees them).
        let object = |i: usize| (0x1000 + 64 * i) as *mut u8;
        let freed = [5, 1, 7, 0, 3, 6, 2, 4];
        for (order, expected) in [
            (PopOrder::Ascending, [0, 1, 2, 3, 4, 5, 6, 7]),
            (PopOrder::Descending, [7, 6, 5, 4, 3, 2, 1, 0]),
        ] {
            for i in freed {
                assert!(sheaf.push(object(i)));
            }
            sheaf.order_for_pops(order);
            let mut popped = Vec::new();
            while let Some(popped_object) = sheaf.pop() {
                popped.push(popped_object);
            }
            assert_eq!(popped, expected.map(object), "{order:?}");
            sheaf.check_invariants();
        }
    }

    #[test]
    fn move_top_to_moves_the_most_recent_objects_in_order_up_to_the_room() {
        let pool = SheafPool::new();
        let class = SizeClass::FIRST;
        let mut from = pool.take(class, NodeId::ZERO, 16, Lane::ZERO).unwrap();
        let mut to = pool.take(class, NodeId::ZERO, 16, Lane::ZERO).unwrap();
        // SAFETY: both taken above: ours, and not aliased.
        let (from, to) = unsafe { (from.as_mut(), to.as_mut()) };
        // Stand-ins for objects: distinct, non-null, never dereferenced.
        let object = |i: usize| (0x1000 + 64 * i) as *mut u8;
        for i in 0..10 {
            assert!(from.push(object(i)));
        }
        assert!(to.push(object(100)));

        assert_eq!(from.move_top_to(to, 4), 4);
        assert_eq!(from.held(), (0..6).map(object).collect::<Vec<_>>());
        let mut expected = vec![object(100)];
        expected.extend((6..10).map(object));
        assert_eq!(to.held(), expected);

        // Bounded by what `from` holds, then by the room `to` has left.
        to.resize(7, |above| assert!(above.is_empty()));
        assert_eq!(from.move_top_to(to, 100), 2);
        assert_eq!((from.len, to.len), (4, 7));
        assert_eq!(to.held()[5..], [object(4), object(5)]);
        from.check_invariants();
        to.check_invariants();
        assert_eq!(to.move_top_to(from, 0), 0);
    }

    #[test]
    fn storage_comes_in_powers_of_two_and_whole_lines() {
        assert_eq!(Sheaf::storage_for(0), SHEAF_STORAGE_MIN);
        assert_eq!(Sheaf::storage_for(64), 64);
        assert_eq!(Sheaf::storage_for(65), 128);
        assert_eq!(Sheaf::storage_for(227), 256);
        assert_eq!(
            Sheaf::storage_for(SHEAF_CAPACITY_MAX + 1),
            SHEAF_CAPACITY_MAX
        );
        // The header (24 bytes) and the entries, in whole 64-byte lines.
        assert_eq!(Sheaf::bytes_for(8), 128);
        assert_eq!(Sheaf::bytes_for(64), 576);
        assert_eq!(Sheaf::bytes_for(1024), 8256);
    }

    #[test]
    fn push_pop_respects_capacity_and_order() {
        let class = SizeClass::from_index(3).unwrap();
        let sheaf = SHEAF_POOL.take(class, NodeId::ZERO, 4, Lane::ZERO).unwrap();
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
        let again = SHEAF_POOL.take(class, NodeId::ZERO, 8, Lane::ZERO).unwrap();
        // SAFETY: freshly taken, owned.
        assert_eq!(unsafe { again.as_ref() }.capacity, 8);
        // SAFETY: empty, owned, not used afterwards.
        unsafe { SHEAF_POOL.give(again) };
    }
}
