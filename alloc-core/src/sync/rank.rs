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
//! | 0 `Registry` | the thread registry | nothing (readers only load counters) |
//! | 1 `Topology` | topology publication | nothing |
//! | 2 `Barn` | a barn, per node and class | nothing |
//! | 3 `Slabs` | a slab list, per node and class | `Arena` (new slabs, returned runs) |
//! | 4 `Arena` | a node's arena bookkeeping | nothing |
//! | 5 `Pool` | the sheaf pool | nothing |
//! | 6 `Leaf` | locks of tests and tools outside the engine | nothing |

/// Where a lock stands in the order (lower ranks are taken first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockRank {
    /// The registry of live thread caches.
    Registry = 0,
    /// Publication of a discovered topology.
    Topology = 1,
    /// A barn (per node and size class).
    Barn = 2,
    /// A slab list (per node and size class).
    Slabs = 3,
    /// A node's arena bookkeeping.
    Arena = 4,
    /// The sheaf pool.
    Pool = 5,
    /// A lock no engine lock is ever taken under (tests, tools).
    Leaf = 6,
}

impl LockRank {
    /// Number of ranks.
    pub const COUNT: usize = 7;

    /// The rank's name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
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
            0 => Self::Registry,
            1 => Self::Topology,
            2 => Self::Barn,
            3 => Self::Slabs,
            4 => Self::Arena,
            5 => Self::Pool,
            6 => Self::Leaf,
            _ => return None,
        })
    }
}
