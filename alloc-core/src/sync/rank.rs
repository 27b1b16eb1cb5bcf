//! The total lock order of the engine.
//!
//! A thread may take a lock only if every lock it already holds has a lower
//! rank, or the same rank at a lower address (locks of one rank live in
//! arrays — a barn per node and class — and are taken in array order). The
//! fork prepare handler takes every lock in exactly this order; every other
//! path takes a subset, so none can wait on the forking thread while it
//! waits on them.
//!
//! | rank | lock | nests inside it |
//! |---|---|---|
//! | 0 `Tuner` | the auto-tuner's and the lane steering's book (taken with `try_lock` by the periodic tick) | `Registry` (one pass over the threads); `Barn`, then `Slabs` or `Pool`, one at a time (a lowering drains the CPUs' sheaves, a raise empties the barns: `runtime::tune::enact`) |
//! | 1 `Registry` | the thread registry, and the pool of threads' per-class records (taken on a thread's first slow path of a class) | nothing (readers only load or clamp per-thread atomics; a new record comes from a mapping) |
//! | 2 `Topology` | topology publication | nothing |
//! | 3 `Barn` | a barn, per node and class | nothing |
//! | 4 `Slabs` | a slab list, per node and class | `Arena` (new slabs, returned runs) |
//! | 5 `Arena` | a node's arena bookkeeping | nothing |
//! | 6 `Pool` | the sheaf pool | nothing |
//! | 7 `Leaf` | locks of tests and tools outside the engine | nothing |

/// Where a lock stands in the order (lower ranks are taken first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockRank {
    /// The auto-tuner's state between ticks.
    Tuner = 0,
    /// The registry of live thread caches, and their records' pool.
    Registry = 1,
    /// Publication of a discovered topology.
    Topology = 2,
    /// A barn (per node and size class).
    Barn = 3,
    /// A slab list (per node and size class).
    Slabs = 4,
    /// A node's arena bookkeeping.
    Arena = 5,
    /// The sheaf pool.
    Pool = 6,
    /// A lock no engine lock is ever taken under (tests, tools).
    Leaf = 7,
}

impl LockRank {
    /// Number of ranks.
    pub const COUNT: usize = 8;

    /// The rank's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tuner => "tuner",
            Self::Registry => "registry",
            Self::Topology => "topology",
            Self::Barn => "barn",
            Self::Slabs => "slabs",
            Self::Arena => "arena",
            Self::Pool => "pool",
            Self::Leaf => "leaf",
        }
    }

    /// The rank with number `index`, if any.
    pub const fn from_index(index: usize) -> Option<Self> {
        Some(match index {
            0 => Self::Tuner,
            1 => Self::Registry,
            2 => Self::Topology,
            3 => Self::Barn,
            4 => Self::Slabs,
            5 => Self::Arena,
            6 => Self::Pool,
            7 => Self::Leaf,
            _ => return None,
        })
    }
}
