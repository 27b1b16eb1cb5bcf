//! Lanes: the CPUs folded onto a few slots, so that what a CPU frees comes
//! back to that CPU.
//!
//! Two CPUs that use objects sharing a cache line pay for every write with
//! a line transfer. A barn shared by a node's CPUs would mix them: a full
//! sheaf freed on one CPU and taken by another moves objects whose
//! neighbours stay with the first, and once mixed, the objects stay mixed.
//! So the barn keeps full sheaves per lane (the lane of the CPU that put
//! them) and hands a CPU its own lane's sheaves first, another lane's only
//! from a surplus (see [`crate::barn`]); slabs keep partial slabs per lane
//! so that two CPUs do not carve neighbours out of one slab (see
//! [`crate::slab`]); each node's arena region is split into one region per
//! lane, so an object's lane is arithmetic on its address and a CPU sends
//! what it frees of another lane's back to that lane (see
//! [`crate::arena`], [`crate::percpu`]). A CPU's lane is its number modulo [`LANES`]: with more
//! CPUs than lanes, the CPUs of one lane share it, as every CPU of a node
//! shared the barn before.

/// Number of lanes.
pub const LANES: usize = 8;

/// `cpu & LANE_MASK` is the lane of `cpu`.
const LANE_MASK: u32 = LANES as u32 - 1;

/// A lane, `0..LANES`.
///
/// Invariant: `self.0 < LANES as u8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lane(u8);

impl Lane {
    /// Lane 0: the lane of CPU 0, and of a thread whose CPU is unknown.
    pub const ZERO: Lane = Lane(0);

    /// The lane of CPU `cpu`.
    #[inline]
    pub const fn of_cpu(cpu: u32) -> Lane {
        // `LANES` is a power of two at most 256: the mask keeps the
        // invariant and the value fits a `u8`.
        Lane((cpu & LANE_MASK) as u8)
    }

    /// The lane of lane region number `region` of the arena (regions are
    /// numbered across nodes: the low bits pick the lane; see
    /// [`crate::arena`]).
    #[inline]
    pub const fn of_region(region: usize) -> Lane {
        // The mask keeps the invariant and the value fits a `u8`.
        Lane((region & LANE_MASK as usize) as u8)
    }

    /// The lane of the CPU the calling thread runs on (one load from the
    /// rseq area where glibc registered one, else `getcpu`; lane 0 if
    /// neither answers).
    #[cfg(not(loom))]
    #[inline]
    pub fn current() -> Lane {
        crate::os::current_cpu_fast().map_or(Lane::ZERO, Lane::of_cpu)
    }

    /// The lane index.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Every lane, lowest first.
    pub fn all() -> impl Iterator<Item = Lane> {
        (0..LANES as u8).map(Lane)
    }
}

const _: () = assert!(LANES.is_power_of_two() && LANES <= 256);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cpus_fold_onto_lanes_in_order() {
        assert_eq!(Lane::of_cpu(0), Lane::ZERO);
        assert_eq!(Lane::of_cpu(3).index(), 3);
        assert_eq!(Lane::of_cpu(LANES as u32 + 1).index(), 1);
        assert_eq!(Lane::of_cpu(u32::MAX).index(), LANES - 1);
        assert_eq!(Lane::all().count(), LANES);
        assert!(Lane::current().index() < LANES);
    }
}
