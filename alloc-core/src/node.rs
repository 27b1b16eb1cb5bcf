//! NUMA nodes as the allocator sees them: [`NodeId`] and the node count.
//!
//! The engine starts as one node and learns the node count once, at
//! initialisation, from `SHEAFALLOC_NUMA_NODES` (simulated nodes, a test and
//! benchmark aid) or else from `/sys/devices/system/node/online`. Both are
//! read without allocating. Each node owns one region of the arena, its own
//! barns and its own slab lists.

use core::sync::atomic::{AtomicU32, Ordering};

/// Most nodes the engine can manage; higher node numbers fold onto these.
pub const MAX_NODES: usize = 16;

/// A NUMA node index, `0..node_count()`.
///
/// Invariant: `self.0 < MAX_NODES as u16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeId(u16);

impl NodeId {
    /// Node 0, where every thread lives on a single-node host.
    pub const ZERO: NodeId = NodeId(0);

    /// The node with index `index`, if it is below [`MAX_NODES`].
    pub const fn new(index: usize) -> Option<Self> {
        if index < MAX_NODES {
            Some(NodeId(index as u16))
        } else {
            None
        }
    }

    /// The node index.
    #[inline(always)]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Every node in use, lowest first.
    pub fn all() -> impl Iterator<Item = NodeId> {
        // `node_count() <= MAX_NODES` already; the `min` makes the type
        // invariant local to this line.
        (0..node_count().min(MAX_NODES)).map(|i| NodeId(i as u16))
    }

    /// This node's entry of a per-node table. Never out of bounds, and no
    /// bounds check. (The per-node tables live in layers that loom builds
    /// leave out.)
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn entry<T>(self, table: &[T; MAX_NODES]) -> &T {
        // SAFETY: `get_unchecked` needs an in-bounds index: `self.index() <
        // MAX_NODES` (NodeId invariant, kept by every constructor above:
        // `new` checks it, `ZERO` is 0, `all` stops below `MAX_NODES`), and
        // the table has `MAX_NODES` entries.
        unsafe { table.get_unchecked(self.index()) }
    }
}

static NODE_COUNT: AtomicU32 = AtomicU32::new(1);
static SIMULATED: AtomicU32 = AtomicU32::new(0);

/// Number of nodes in use (1 until initialisation says otherwise).
#[inline]
pub fn node_count() -> usize {
    NODE_COUNT.load(Ordering::Relaxed) as usize
}

/// True when the nodes are simulated by `SHEAFALLOC_NUMA_NODES`.
pub fn nodes_are_simulated() -> bool {
    SIMULATED.load(Ordering::Relaxed) != 0
}

/// Decides the node count; called once by the runtime's initialisation
/// before any node other than 0 is used.
#[cfg(not(loom))]
pub(crate) fn discover_node_count() -> usize {
    let count = match crate::os::env(c"SHEAFALLOC_NUMA_NODES").and_then(crate::os::parse_decimal) {
        Some(n) if n >= 1 => {
            SIMULATED.store(1, Ordering::Relaxed);
            (n as usize).min(MAX_NODES)
        }
        _ => online_nodes_from_sys().unwrap_or(1),
    };
    NODE_COUNT.store(count as u32, Ordering::Relaxed);
    count
}

/// Highest online node + 1, from a list like `0` or `0-1` or `0,2-3`.
#[cfg(not(loom))]
fn online_nodes_from_sys() -> Option<usize> {
    let mut buf = [0u8; 256];
    let len = crate::os::read_small_file(c"/sys/devices/system/node/online", &mut buf)?;
    let last_range = buf
        .get(..len)?
        .trim_ascii()
        .split(|b| *b == b',')
        .next_back()?;
    let last = last_range.split(|b| *b == b'-').next_back()?;
    let highest = crate::os::parse_decimal(last)? as usize;
    Some(highest.saturating_add(1).min(MAX_NODES))
}
