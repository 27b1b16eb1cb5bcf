//! The allocators under comparison, and a way to run generic code on each.
//!
//! Every workload is a generic function over `A: GlobalAlloc`, so each
//! allocator gets its own monomorphised copy: sheafalloc's
//! `#[inline(always)]` fast paths are inlined into the loop exactly as they
//! would be behind `#[global_allocator]`, and the C allocators are FFI calls
//! either way. The bench's own global allocator stays `System`.
//!
//! Without the `peers` feature only the names remain (the workload binaries
//! of sheafalloc and the system allocator need no more).

#[cfg(feature = "peers")]
use std::alloc::{GlobalAlloc, System};

#[cfg(feature = "peers")]
static SHEAF: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();
#[cfg(feature = "peers")]
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "peers")]
static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[cfg(feature = "peers")]
static SNMALLOC: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc::new();

/// One allocator under comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// This project.
    Sheaf,
    /// `std::alloc::System` (glibc malloc here).
    System,
    /// The `mimalloc` crate.
    Mimalloc,
    /// The `tikv-jemallocator` crate.
    Jemalloc,
    /// The `snmalloc-rs` crate.
    Snmalloc,
}

/// All allocators, in the order each round runs them.
pub const ALL: [Peer; 5] = [
    Peer::Sheaf,
    Peer::System,
    Peer::Mimalloc,
    Peer::Jemalloc,
    Peer::Snmalloc,
];

/// Generic code to run with one allocator (a generic closure, by hand).
#[cfg(feature = "peers")]
pub trait Visit {
    /// What the code returns.
    type Output;
    /// Runs the code with allocator `a`.
    fn visit<A: GlobalAlloc + Sync>(self, a: &A) -> Self::Output;
}

impl Peer {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Sheaf => "sheafalloc",
            Peer::System => "system",
            Peer::Mimalloc => "mimalloc",
            Peer::Jemalloc => "jemalloc",
            Peer::Snmalloc => "snmalloc",
        }
    }

    /// The allocator called `name`, if any.
    pub fn from_name(name: &str) -> Option<Peer> {
        ALL.into_iter().find(|peer| peer.name() == name)
    }

    /// Whether this is one of the allocators sheafalloc is compared with.
    pub fn is_peer(self) -> bool {
        self != Peer::Sheaf
    }

    /// Runs `code` monomorphised for this allocator.
    #[cfg(feature = "peers")]
    pub fn visit<V: Visit>(self, code: V) -> V::Output {
        match self {
            Peer::Sheaf => code.visit(&SHEAF),
            Peer::System => code.visit(&System),
            Peer::Mimalloc => code.visit(&MIMALLOC),
            Peer::Jemalloc => code.visit(&JEMALLOC),
            Peer::Snmalloc => code.visit(&SNMALLOC),
        }
    }
}

/// The allocators in the order round `round` (from 1) runs them:
/// [`ALL`] rotated left by `round - 1`, so each allocator goes first in
/// turn and none always runs right after another.
pub fn round_order(round: usize) -> Vec<Peer> {
    let mut order = ALL.to_vec();
    order.rotate_left(round.saturating_sub(1) % ALL.len());
    order
}

/// Comma-separated names of all allocators (for help text and errors).
pub fn names() -> String {
    ALL.map(Peer::name).join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_the_order_every_round() {
        assert_eq!(round_order(1), ALL.to_vec());
        assert_eq!(round_order(2)[0], Peer::System);
        assert_eq!(round_order(5)[0], Peer::Snmalloc);
        assert_eq!(round_order(6), round_order(1));
        for round in 1..=5 {
            let mut order = round_order(round);
            order.sort_by_key(|p| p.name());
            let mut all = ALL.to_vec();
            all.sort_by_key(|p| p.name());
            assert_eq!(order, all, "every allocator once per round");
        }
    }
}
