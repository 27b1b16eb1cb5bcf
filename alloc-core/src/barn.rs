//! The barn: per node and size class, a stack of full sheaves and a stack
//! of empty ones per [`Lane`], each with a limit.
//!
//! A thread whose main and spare sheaves are both empty trades an empty
//! sheaf for a full one here; a thread whose sheaves are both full trades a
//! full one for an empty one. Only when the barn cannot help does the thread
//! go to the slabs, in bulk. Limits follow the kernel's
//! (`MAX_FULL_SHEAVES`, `MAX_EMPTY_SHEAVES`, both 10), per lane.
//!
//! A full sheaf goes on the stack of the lane that put it, and a lane takes
//! its own sheaves back first: objects freed on a CPU return to that CPU,
//! and two CPUs do not end up using neighbours in one cache line (see
//! [`crate::lane`]). Another lane's sheaves are taken only from a surplus,
//! a stack at least [`STEAL_MIN`] deep: sheaves a CPU keeps putting and
//! never takes back (the consumer of a hand-off) go to the CPU that runs
//! short (the producer), while the few a CPU holds between its own bursts
//! stay its own. Empty sheaves go back to their lane too (a sheaf's
//! pointer array is lines its CPU last wrote), but any lane takes another's
//! empties before asking the pool.

use core::ptr::{self, NonNull};

use crate::lane::{Lane, LANES};
use crate::sheaf::Sheaf;

/// Most full sheaves a barn keeps per lane.
#[cfg(not(loom))]
pub const BARN_FULL_MAX: u32 = 10;
/// Most empty sheaves a barn keeps per lane.
#[cfg(not(loom))]
pub const BARN_EMPTY_MAX: u32 = 10;
/// Most full sheaves a barn keeps per lane (2 under loom: its models hit
/// the limit).
#[cfg(loom)]
pub const BARN_FULL_MAX: u32 = 2;
/// Most empty sheaves a barn keeps per lane (2 under loom).
#[cfg(loom)]
pub const BARN_EMPTY_MAX: u32 = 2;
/// Depth from which another lane's full sheaves are a surplus that any lane
/// may take: half the limit. Below it, they are what their CPU freed in its
/// last bursts and will ask for in its next.
pub const STEAL_MIN: u32 = if BARN_FULL_MAX / 2 > 1 {
    BARN_FULL_MAX / 2
} else {
    1
};

/// A stack of sheaves linked through `Sheaf::next`, with its depth.
#[derive(Clone, Copy)]
struct Stack {
    top: *mut Sheaf,
    count: u32,
}

impl Stack {
    const EMPTY: Stack = Stack {
        top: ptr::null_mut(),
        count: 0,
    };
}

/// Full and empty sheaves of one `(node, class)`.
///
/// Invariants: for every lane `l`, `full[l]` links `full[l].count <=
/// BARN_FULL_MAX` sheaves, each with `len > 0`, and `empty[l]` links
/// `empty[l].count <= BARN_EMPTY_MAX` sheaves, each with `len == 0`; every
/// sheaf on a stack is owned by the barn and has this barn's node and
/// class. Guarded by the barn's mutex.
pub struct Barn {
    full: [Stack; LANES],
    empty: [Stack; LANES],
}

// SAFETY: the barn owns the sheaves it links and is only reached through its
// mutex, so moving it between threads moves that ownership.
unsafe impl Send for Barn {}

/// Where a full sheaf taken from a barn came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The taker's own lane.
    Own,
    /// Another lane's surplus.
    Stolen,
}

impl Barn {
    /// An empty barn.
    pub const fn new() -> Self {
        Self {
            full: [Stack::EMPTY; LANES],
            empty: [Stack::EMPTY; LANES],
        }
    }

    /// Full and empty sheaves held (all lanes).
    pub fn counts(&self) -> (u32, u32) {
        let sum = |stacks: &[Stack; LANES]| {
            stacks
                .iter()
                .fold(0u32, |sum, stack| sum.saturating_add(stack.count))
        };
        (sum(&self.full), sum(&self.empty))
    }

    /// Full sheaves held on `lane`'s stack.
    pub fn full_on(&self, lane: Lane) -> u32 {
        lane_of(&self.full, lane).count
    }

    /// Empty sheaves held on `lane`'s stack.
    pub fn empty_on(&self, lane: Lane) -> u32 {
        lane_of(&self.empty, lane).count
    }

    /// Takes a full sheaf for `lane`: its own if it has one, else the top
    /// of the deepest other stack if that one is a surplus
    /// ([`STEAL_MIN`] deep).
    pub fn take_full(&mut self, lane: Lane) -> Option<(NonNull<Sheaf>, Taken)> {
        take_own_first(&mut self.full, lane, STEAL_MIN)
    }

    /// Takes a full sheaf of any lane (the deepest stack's top): draining.
    pub fn take_any_full(&mut self) -> Option<NonNull<Sheaf>> {
        let deepest = deepest(&self.full)?;
        pop(lane_of_mut(&mut self.full, deepest))
    }

    /// Stores a sheaf holding objects on `lane`'s stack; gives it back if
    /// that stack is at the full limit.
    ///
    /// # Safety
    ///
    /// 1. The caller owns `sheaf`, which has `len > 0` and this barn's node
    ///    and class, and hands over ownership on `Ok`.
    pub unsafe fn put_full(
        &mut self,
        lane: Lane,
        sheaf: NonNull<Sheaf>,
    ) -> Result<(), NonNull<Sheaf>> {
        // SAFETY: duty 1: the caller owns the sheaf.
        let len = unsafe { sheaf.as_ref() }.len;
        crate::invariant!(len > 0, "empty sheaf offered as full");
        // SAFETY: duty 1.
        unsafe { push(lane_of_mut(&mut self.full, lane), sheaf, BARN_FULL_MAX) }
    }

    /// Takes an empty sheaf for `lane`: its own if it has one, else any
    /// other lane's (the deepest stack's top).
    pub fn take_empty(&mut self, lane: Lane) -> Option<NonNull<Sheaf>> {
        take_own_first(&mut self.empty, lane, 1).map(|(sheaf, _)| sheaf)
    }

    /// Stores an empty sheaf on `lane`'s stack; gives it back if that stack
    /// is at the empty limit.
    ///
    /// # Safety
    ///
    /// 1. The caller owns `sheaf`, which has `len == 0` and this barn's node
    ///    and class, and hands over ownership on `Ok`.
    pub unsafe fn put_empty(
        &mut self,
        lane: Lane,
        sheaf: NonNull<Sheaf>,
    ) -> Result<(), NonNull<Sheaf>> {
        // SAFETY: duty 1.
        unsafe { push(lane_of_mut(&mut self.empty, lane), sheaf, BARN_EMPTY_MAX) }
    }

    /// Objects held in the full sheaves.
    pub fn objects_held(&self) -> u64 {
        let mut total = 0u64;
        for stack in &self.full {
            let mut cursor = stack.top;
            while !cursor.is_null() {
                // SAFETY: the barn owns the sheaves it links (invariant).
                unsafe {
                    total = total.saturating_add(u64::from((*cursor).len));
                    cursor = (*cursor).next;
                }
            }
        }
        total
    }

    /// Checks the invariants (tests and debug).
    pub fn check_invariants(&self) {
        for stack in &self.full {
            crate::invariant!(stack.count <= BARN_FULL_MAX, "barn above full limit");
            let mut count = 0u32;
            let mut cursor = stack.top;
            while !cursor.is_null() {
                // SAFETY: the barn owns the sheaves it links (invariant).
                let sheaf = unsafe { &*cursor };
                crate::invariant!(sheaf.len > 0, "empty sheaf on a full stack");
                sheaf.check_invariants();
                count = count.saturating_add(1);
                cursor = sheaf.next;
            }
            crate::invariant!(count == stack.count, "full stack count mismatch");
        }
        for stack in &self.empty {
            crate::invariant!(stack.count <= BARN_EMPTY_MAX, "barn above empty limit");
            let mut count = 0u32;
            let mut cursor = stack.top;
            while !cursor.is_null() {
                // SAFETY: as above.
                let sheaf = unsafe { &*cursor };
                crate::invariant!(sheaf.len == 0, "sheaf with objects on an empty stack");
                count = count.saturating_add(1);
                cursor = sheaf.next;
            }
            crate::invariant!(count == stack.count, "empty stack count mismatch");
        }
    }
}

/// `lane`'s stack of a per-lane table.
#[inline]
fn lane_of(stacks: &[Stack; LANES], lane: Lane) -> &Stack {
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    unsafe { stacks.get_unchecked(lane.index()) }
}

/// `lane`'s stack of a per-lane table, to change.
#[inline]
fn lane_of_mut(stacks: &mut [Stack; LANES], lane: Lane) -> &mut Stack {
    // SAFETY: `lane.index() < LANES` (Lane invariant).
    unsafe { stacks.get_unchecked_mut(lane.index()) }
}

/// Pops `lane`'s stack of a per-lane table if it holds a sheaf, else the
/// deepest other stack if it is at least `other_min` deep.
fn take_own_first(
    stacks: &mut [Stack; LANES],
    lane: Lane,
    other_min: u32,
) -> Option<(NonNull<Sheaf>, Taken)> {
    if let Some(sheaf) = pop(lane_of_mut(stacks, lane)) {
        return Some((sheaf, Taken::Own));
    }
    let deepest = lane_of_mut(stacks, deepest(stacks)?);
    if deepest.count < other_min {
        return None;
    }
    pop(deepest).map(|sheaf| (sheaf, Taken::Stolen))
}

/// The lane whose stack is deepest, if any holds a sheaf.
fn deepest(stacks: &[Stack; LANES]) -> Option<Lane> {
    Lane::all()
        .filter(|&lane| lane_of(stacks, lane).count > 0)
        .max_by_key(|&lane| lane_of(stacks, lane).count)
}

/// Pops the top of a barn stack.
fn pop(stack: &mut Stack) -> Option<NonNull<Sheaf>> {
    let sheaf = NonNull::new(stack.top)?;
    // SAFETY: the barn owns every sheaf on its stacks (invariant).
    stack.top = unsafe { sheaf.as_ref().next };
    // Cannot wrap: `count` counts the stack, which held `sheaf`.
    stack.count = stack.count.wrapping_sub(1);
    Some(sheaf)
}

/// Pushes an owned sheaf onto a barn stack below `limit`; gives it back at
/// the limit.
///
/// # Safety
///
/// 1. The caller owns `sheaf` and hands over ownership on `Ok`.
unsafe fn push(stack: &mut Stack, sheaf: NonNull<Sheaf>, limit: u32) -> Result<(), NonNull<Sheaf>> {
    if stack.count >= limit {
        return Err(sheaf);
    }
    // SAFETY: duty 1: we own the sheaf now.
    unsafe { (*sheaf.as_ptr()).next = stack.top };
    stack.top = sheaf.as_ptr();
    // Cannot wrap: below `limit` (checked above).
    stack.count = stack.count.wrapping_add(1);
    Ok(())
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
    use std::vec::Vec;

    /// A sheaf of class 5 holding the one object `cell`.
    fn sheaf_with(cell: *mut u8) -> NonNull<Sheaf> {
        let class = SizeClass::from_index(5).unwrap();
        let sheaf = SHEAF_POOL.take(class, NodeId::ZERO, 4, Lane::ZERO).unwrap();
        // SAFETY: freshly taken and owned.
        assert!(unsafe { &mut *sheaf.as_ptr() }.push(cell));
        sheaf
    }

    fn object_of(sheaf: NonNull<Sheaf>) -> *mut u8 {
        // SAFETY: the test owns the sheaf.
        unsafe { sheaf.as_ref() }.held()[0]
    }

    fn give_back(sheaves: Vec<NonNull<Sheaf>>) {
        for sheaf in sheaves {
            // SAFETY: owned; emptied before giving back.
            unsafe {
                (*sheaf.as_ptr()).len = 0;
                SHEAF_POOL.give(sheaf);
            }
        }
    }

    #[test]
    fn each_lane_has_its_limit_and_a_lifo_stack() {
        let lane = Lane::of_cpu(1);
        let mut barn = Barn::new();
        let mut cells = [0u8; 64];
        let mut taken = Vec::new();
        for (i, cell) in cells
            .iter_mut()
            .enumerate()
            .take(BARN_FULL_MAX as usize + 1)
        {
            // SAFETY: owned, len 1, right class and node.
            match unsafe { barn.put_full(lane, sheaf_with(cell)) } {
                Ok(()) => assert!(i < BARN_FULL_MAX as usize),
                Err(back) => {
                    assert_eq!(i, BARN_FULL_MAX as usize);
                    taken.push(back);
                }
            }
            barn.check_invariants();
        }
        // Another lane still has room of its own.
        // SAFETY: as above.
        assert!(unsafe { barn.put_full(Lane::ZERO, sheaf_with(&mut cells[40])) }.is_ok());
        assert_eq!(barn.counts(), (BARN_FULL_MAX + 1, 0));
        let (top, from) = barn.take_full(lane).unwrap();
        assert_eq!(from, Taken::Own);
        assert_eq!(
            object_of(top),
            &mut cells[BARN_FULL_MAX as usize - 1] as *mut u8
        );
        taken.push(top);
        while let Some(sheaf) = barn.take_any_full() {
            taken.push(sheaf);
        }
        assert_eq!(barn.counts(), (0, 0));
        barn.check_invariants();
        give_back(taken);
    }

    #[test]
    fn a_lane_takes_its_own_first_and_another_only_from_a_surplus() {
        let (mine, other) = (Lane::of_cpu(0), Lane::of_cpu(1));
        let mut barn = Barn::new();
        let mut cells = [0u8; 64];
        let mut taken = Vec::new();
        // The other lane holds one sheaf short of a surplus: not taken.
        for cell in cells.iter_mut().take(STEAL_MIN as usize - 1) {
            // SAFETY: owned, len 1, right class and node.
            assert!(unsafe { barn.put_full(other, sheaf_with(cell)) }.is_ok());
        }
        assert!(barn.take_full(mine).is_none());
        // Our own sheaf comes first, even with the other lane deeper.
        // SAFETY: as above.
        assert!(unsafe { barn.put_full(other, sheaf_with(&mut cells[20])) }.is_ok());
        // SAFETY: as above.
        assert!(unsafe { barn.put_full(mine, sheaf_with(&mut cells[30])) }.is_ok());
        let (own, from) = barn.take_full(mine).unwrap();
        assert_eq!(
            (object_of(own), from),
            (&mut cells[30] as *mut u8, Taken::Own)
        );
        taken.push(own);
        // Now the other lane is a surplus: its top is taken, once.
        let (stolen, from) = barn.take_full(mine).unwrap();
        assert_eq!(
            (object_of(stolen), from),
            (&mut cells[20] as *mut u8, Taken::Stolen)
        );
        taken.push(stolen);
        assert_eq!(barn.full_on(other), STEAL_MIN - 1);
        assert!(barn.take_full(mine).is_none());
        // The other lane's CPU still gets every one of its own.
        while let Some((sheaf, from)) = barn.take_full(other) {
            assert_eq!(from, Taken::Own);
            taken.push(sheaf);
        }
        assert_eq!(barn.counts(), (0, 0));
        give_back(taken);
    }

    #[test]
    fn empties_go_back_to_their_lane_and_any_lane_takes_them_before_the_pool() {
        let class = SizeClass::from_index(5).unwrap();
        let (mine, other) = (Lane::of_cpu(0), Lane::of_cpu(1));
        let mut barn = Barn::new();
        let ours = SHEAF_POOL.take(class, NodeId::ZERO, 4, Lane::ZERO).unwrap();
        let theirs = SHEAF_POOL.take(class, NodeId::ZERO, 4, Lane::ZERO).unwrap();
        // SAFETY: both freshly taken, owned and empty.
        unsafe {
            assert!(barn.put_empty(other, theirs).is_ok());
            assert!(barn.put_empty(mine, ours).is_ok());
        }
        assert_eq!((barn.empty_on(mine), barn.empty_on(other)), (1, 1));
        assert_eq!(barn.take_empty(mine), Some(ours));
        // None of our own left: the other lane's, not the pool's.
        assert_eq!(barn.take_empty(mine), Some(theirs));
        assert_eq!(barn.take_empty(mine), None);
        for _ in 0..BARN_EMPTY_MAX {
            let sheaf = SHEAF_POOL.take(class, NodeId::ZERO, 4, Lane::ZERO).unwrap();
            // SAFETY: owned and empty.
            assert!(unsafe { barn.put_empty(mine, sheaf) }.is_ok());
        }
        // SAFETY: owned and empty; refused at our lane's limit, kept at
        // another's.
        unsafe {
            assert_eq!(barn.put_empty(mine, ours), Err(ours));
            assert!(barn.put_empty(other, ours).is_ok());
        }
        barn.check_invariants();
        let mut taken = std::vec![theirs];
        while let Some(sheaf) = barn.take_empty(other) {
            taken.push(sheaf);
        }
        assert_eq!(taken.len(), BARN_EMPTY_MAX as usize + 2);
        assert_eq!(barn.counts(), (0, 0));
        give_back(taken);
    }
}
