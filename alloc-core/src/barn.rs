//! The barn: per node and size class, a stack of full sheaves and a stack of
//! empty ones, each with a limit.
//!
//! A thread whose main and spare sheaves are both empty trades an empty
//! sheaf for a full one here; a thread whose sheaves are both full trades a
//! full one for an empty one. Only when the barn cannot help does the thread
//! go to the slabs, in bulk. Limits follow the kernel's
//! (`MAX_FULL_SHEAVES`, `MAX_EMPTY_SHEAVES`, both 10).

use core::ptr::{self, NonNull};

use crate::sheaf::Sheaf;

/// Most full sheaves a barn keeps.
#[cfg(not(loom))]
pub const BARN_FULL_MAX: u32 = 10;
/// Most empty sheaves a barn keeps.
#[cfg(not(loom))]
pub const BARN_EMPTY_MAX: u32 = 10;
/// Most full sheaves a barn keeps (2 under loom: its models hit the limit).
#[cfg(loom)]
pub const BARN_FULL_MAX: u32 = 2;
/// Most empty sheaves a barn keeps (2 under loom).
#[cfg(loom)]
pub const BARN_EMPTY_MAX: u32 = 2;

/// Full and empty sheaves of one `(node, class)`.
///
/// Invariants: `full` links `full_count <= BARN_FULL_MAX` sheaves, each
/// with `len > 0`; `empty` links `empty_count <= BARN_EMPTY_MAX` sheaves,
/// each with `len == 0`; every sheaf on either stack is owned by the barn
/// and has this barn's node and class. Guarded by the barn's mutex.
pub struct Barn {
    full: *mut Sheaf,
    empty: *mut Sheaf,
    full_count: u32,
    empty_count: u32,
}

// SAFETY: the barn owns the sheaves it links and is only reached through its
// mutex, so moving it between threads moves that ownership.
unsafe impl Send for Barn {}

impl Barn {
    /// An empty barn.
    pub const fn new() -> Self {
        Self {
            full: ptr::null_mut(),
            empty: ptr::null_mut(),
            full_count: 0,
            empty_count: 0,
        }
    }

    /// Full and empty sheaves held.
    pub fn counts(&self) -> (u32, u32) {
        (self.full_count, self.empty_count)
    }

    /// Takes a full sheaf, if any.
    pub fn take_full(&mut self) -> Option<NonNull<Sheaf>> {
        let sheaf = NonNull::new(self.full)?;
        // SAFETY: the barn owns every sheaf on its stacks (invariant).
        self.full = unsafe { sheaf.as_ref().next };
        // Cannot wrap: `full_count` counts the stack, which held `sheaf`.
        self.full_count = self.full_count.wrapping_sub(1);
        Some(sheaf)
    }

    /// Stores a sheaf holding objects; gives it back if the barn is at its
    /// full limit.
    ///
    /// # Safety
    ///
    /// 1. The caller owns `sheaf`, which has `len > 0` and this barn's node
    ///    and class, and hands over ownership on `Ok`.
    pub unsafe fn put_full(&mut self, sheaf: NonNull<Sheaf>) -> Result<(), NonNull<Sheaf>> {
        // SAFETY: duty 1: the caller owns the sheaf.
        let len = unsafe { sheaf.as_ref() }.len;
        crate::invariant!(len > 0, "empty sheaf offered as full");
        if self.full_count >= BARN_FULL_MAX {
            return Err(sheaf);
        }
        // SAFETY: duty 1: we own the sheaf now.
        unsafe { (*sheaf.as_ptr()).next = self.full };
        self.full = sheaf.as_ptr();
        // Cannot wrap: below `BARN_FULL_MAX` (checked above).
        self.full_count = self.full_count.wrapping_add(1);
        Ok(())
    }

    /// Takes an empty sheaf, if any.
    pub fn take_empty(&mut self) -> Option<NonNull<Sheaf>> {
        let sheaf = NonNull::new(self.empty)?;
        // SAFETY: the barn owns every sheaf on its stacks (invariant).
        self.empty = unsafe { sheaf.as_ref().next };
        // Cannot wrap: `empty_count` counts the stack, which held `sheaf`.
        self.empty_count = self.empty_count.wrapping_sub(1);
        Some(sheaf)
    }

    /// Stores an empty sheaf; gives it back if the barn is at its empty
    /// limit.
    ///
    /// # Safety
    ///
    /// 1. The caller owns `sheaf`, which has `len == 0` and this barn's node
    ///    and class, and hands over ownership on `Ok`.
    pub unsafe fn put_empty(&mut self, sheaf: NonNull<Sheaf>) -> Result<(), NonNull<Sheaf>> {
        if self.empty_count >= BARN_EMPTY_MAX {
            return Err(sheaf);
        }
        // SAFETY: duty 1: we own the sheaf now.
        unsafe { (*sheaf.as_ptr()).next = self.empty };
        self.empty = sheaf.as_ptr();
        // Cannot wrap: below `BARN_EMPTY_MAX` (checked above).
        self.empty_count = self.empty_count.wrapping_add(1);
        Ok(())
    }

    /// Objects held in the full sheaves.
    pub fn objects_held(&self) -> u64 {
        let mut total = 0u64;
        let mut cursor = self.full;
        while !cursor.is_null() {
            // SAFETY: the barn owns the sheaves it links (invariant).
            unsafe {
                total = total.saturating_add(u64::from((*cursor).len));
                cursor = (*cursor).next;
            }
        }
        total
    }

    /// Checks the invariants (tests and debug).
    pub fn check_invariants(&self) {
        crate::invariant!(self.full_count <= BARN_FULL_MAX, "barn above full limit");
        crate::invariant!(self.empty_count <= BARN_EMPTY_MAX, "barn above empty limit");
        let mut count = 0u32;
        let mut cursor = self.full;
        while !cursor.is_null() {
            // SAFETY: the barn owns the sheaves it links (invariant).
            let sheaf = unsafe { &*cursor };
            crate::invariant!(sheaf.len > 0, "empty sheaf on the full stack");
            sheaf.check_invariants();
            count = count.saturating_add(1);
            cursor = sheaf.next;
        }
        crate::invariant!(count == self.full_count, "full stack count mismatch");
        let mut count = 0u32;
        let mut cursor = self.empty;
        while !cursor.is_null() {
            // SAFETY: as above.
            let sheaf = unsafe { &*cursor };
            crate::invariant!(sheaf.len == 0, "sheaf with objects on the empty stack");
            count = count.saturating_add(1);
            cursor = sheaf.next;
        }
        crate::invariant!(count == self.empty_count, "empty stack count mismatch");
    }
}

impl Default for Barn {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::node::NodeId;
    use crate::sheaf::SHEAF_POOL;
    use crate::size_class::SizeClass;

    #[test]
    fn limits_hold_and_stacks_are_lifo() {
        let class = SizeClass::from_index(5).unwrap();
        let mut barn = Barn::new();
        let mut cells = [0u8; 64];
        let mut taken = std::vec::Vec::new();
        for (i, cell) in cells
            .iter_mut()
            .enumerate()
            .take(BARN_FULL_MAX as usize + 1)
        {
            let sheaf = SHEAF_POOL.take(class, NodeId::ZERO, 4).unwrap();
            // SAFETY: freshly taken and owned.
            assert!(unsafe { &mut *sheaf.as_ptr() }.push(cell));
            // SAFETY: owned, len 1, right class and node.
            match unsafe { barn.put_full(sheaf) } {
                Ok(()) => assert!(i < BARN_FULL_MAX as usize),
                Err(back) => {
                    assert_eq!(i, BARN_FULL_MAX as usize);
                    taken.push(back);
                }
            }
            barn.check_invariants();
        }
        let top = barn.take_full().unwrap();
        // SAFETY: the barn handed the sheaf to us.
        let top_object = unsafe { top.as_ref() }.held()[0];
        assert_eq!(
            top_object,
            &mut cells[BARN_FULL_MAX as usize - 1] as *mut u8
        );
        taken.push(top);
        while let Some(sheaf) = barn.take_full() {
            taken.push(sheaf);
        }
        assert_eq!(barn.counts(), (0, 0));
        for sheaf in taken {
            // SAFETY: owned; emptied before giving back.
            unsafe {
                (*sheaf.as_ptr()).len = 0;
                SHEAF_POOL.give(sheaf);
            }
        }
    }
}
