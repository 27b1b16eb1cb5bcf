//! The NUMA topology the allocator uses, and its discovery with hwloc.
//!
//! The engine starts as a single node. On a host with more than one online
//! node, a short-lived helper thread started before `main` (feature `hwloc`,
//! on by default) asks hwloc for every NUMA node's CPUs and publishes them
//! to the engine, atomically; threads switch to their CPU's node at their
//! next slow path. Discovery allocates (hwloc builds Rust values), which is
//! why it never runs inside `alloc`/`dealloc`. If hwloc fails, the allocator
//! stays single-node and says so once on stderr.
//!
//! `SHEAFALLOC_NUMA_NODES=N` replaces all of this with N simulated nodes
//! (a test and benchmark aid; see the engine's `topology` module).

use sheafalloc_core::node::{self, NodeId};
use sheafalloc_core::topology::{self as core_topology, MAX_CPUS};

/// What the allocator uses right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Where it came from: `single-node`, `simulated`,
    /// `simulated-round-robin` or `discovered`.
    pub source: &'static str,
    /// True with `SHEAFALLOC_NUMA_NODES`.
    pub simulated: bool,
    /// True when threads are assigned to nodes round-robin (simulated nodes
    /// outnumber CPUs) instead of by CPU.
    pub threads_round_robin: bool,
    /// The nodes, by allocator node index.
    pub nodes: Vec<NodeInfo>,
    /// Threads that moved to another node (and handed back their caches).
    pub migrations: u64,
    /// Times binding slab memory to its node failed.
    pub bind_failures: u64,
}

/// One node as the allocator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// The allocator's node index.
    pub node: usize,
    /// The OS's node number (0 for simulated nodes).
    pub os_node: u32,
    /// CPUs whose threads allocate on this node (empty for round-robin or
    /// before discovery).
    pub cpus: Vec<u32>,
}

/// The topology the allocator uses.
pub fn topology() -> Topology {
    sheafalloc_core::runtime::ensure_init();
    let nodes = NodeId::all()
        .map(|node| {
            let mut bits = [0u64; MAX_CPUS / 64];
            core_topology::cpus_of(node, &mut bits);
            let cpus = (0..MAX_CPUS as u32)
                .filter(|&cpu| {
                    bits.get(cpu as usize / 64)
                        .is_some_and(|word| word & (1 << (cpu % 64)) != 0)
                })
                .collect();
            NodeInfo {
                node: node.index(),
                os_node: core_topology::os_node(node),
                cpus,
            }
        })
        .collect();
    Topology {
        source: core_topology::source().as_str(),
        simulated: node::nodes_are_simulated(),
        threads_round_robin: core_topology::threads_round_robin(),
        nodes,
        migrations: core_topology::migrations(),
        bind_failures: sheafalloc_core::arena::bind_failures(),
    }
}

/// The node the calling thread allocates on.
pub fn thread_node() -> usize {
    crate::with_thread_cache(|cache| cache.node().index()).unwrap_or(0)
}

/// The home node of an object allocated by sheafalloc (`None` for objects
/// outside the arena: direct mappings and foreign pointers).
pub fn home_node<T: ?Sized>(object: *const T) -> Option<usize> {
    sheafalloc_core::arena::home_node(object.cast::<u8>() as usize).map(NodeId::index)
}

/// Why discovery did not publish a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// Simulated nodes are in force.
    Simulated,
    /// Built without the `hwloc` feature.
    NoHwloc,
    /// hwloc failed (the message says how).
    Hwloc(String),
    /// hwloc reported no NUMA node.
    NoNodes,
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Simulated => f.write_str("simulated nodes are in force (SHEAFALLOC_NUMA_NODES)"),
            Self::NoHwloc => f.write_str("built without the hwloc feature"),
            Self::Hwloc(message) => write!(f, "hwloc failed: {message}"),
            Self::NoNodes => f.write_str("hwloc reported no NUMA node"),
        }
    }
}

impl std::error::Error for TopologyError {}

/// Discovers the NUMA topology with hwloc now and publishes it to the
/// allocator. Safe to call from any thread at any time (not from inside an
/// allocator); runs by itself at start-up on multi-node hosts.
pub fn discover_topology() -> Result<Topology, TopologyError> {
    sheafalloc_core::runtime::ensure_init();
    if node::nodes_are_simulated() {
        return Err(TopologyError::Simulated);
    }
    let nodes = discover_with_hwloc()?;
    if nodes.is_empty() {
        return Err(TopologyError::NoNodes);
    }
    let views: Vec<core_topology::DiscoveredNode<'_>> = nodes
        .iter()
        .map(|(os_node, cpus)| core_topology::DiscoveredNode {
            os_node: *os_node,
            cpus,
        })
        .collect();
    core_topology::publish(&views).map_err(|_| TopologyError::Simulated)?;
    Ok(topology())
}

#[cfg(feature = "hwloc")]
fn discover_with_hwloc() -> Result<Vec<(u32, Vec<u32>)>, TopologyError> {
    use hwlocality::object::types::ObjectType;
    use hwlocality::Topology as HwlocTopology;

    let topology = HwlocTopology::new().map_err(|e| TopologyError::Hwloc(e.to_string()))?;
    let mut nodes: Vec<(u32, Vec<u32>)> = topology
        .objects_with_type(ObjectType::NUMANode)
        .map(|object| {
            let os_node = object.os_index().map_or(0, |i| i as u32);
            let cpus = object
                .cpuset()
                .map(|set| set.iter_set().map(|cpu| usize::from(cpu) as u32).collect())
                .unwrap_or_default();
            (os_node, cpus)
        })
        .collect();
    nodes.sort_by_key(|(os_node, _)| *os_node);
    Ok(nodes)
}

#[cfg(not(feature = "hwloc"))]
fn discover_with_hwloc() -> Result<Vec<(u32, Vec<u32>)>, TopologyError> {
    Err(TopologyError::NoHwloc)
}

/// Runs before `main` (from `.init_array`): on a host with more than one
/// online node, starts discovery on a helper thread. Single-node hosts and
/// simulated nodes need none.
#[cfg(feature = "hwloc")]
extern "C" fn discover_at_start() {
    if !sheafalloc_core::runtime::ensure_init()
        || node::nodes_are_simulated()
        || node::node_count() <= 1
    {
        return;
    }
    let spawned = std::thread::Builder::new().name("sheafalloc-topology".into()).spawn(|| {
        if let Err(error) = discover_topology() {
            eprintln!("sheafalloc: NUMA topology discovery failed ({error}); allocating as a single node");
        }
    });
    if spawned.is_err() {
        eprintln!("sheafalloc: could not start topology discovery; allocating as a single node");
    }
}

#[cfg(feature = "hwloc")]
#[used]
#[link_section = ".init_array"]
static DISCOVER_AT_START: extern "C" fn() = discover_at_start;
