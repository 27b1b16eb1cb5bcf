//! Which node each CPU belongs to, and which node the calling thread is on.
//!
//! # Sources, in order of trust
//!
//! * `SHEAFALLOC_NUMA_NODES=N` (a test and benchmark aid): N *simulated*
//!   nodes. The CPUs are split into N contiguous blocks; with fewer CPUs
//!   than nodes, threads are assigned round-robin instead (and keep their
//!   node for life). Memory binding is skipped; everything else is real.
//! * A published topology: `publish` takes each node's CPU list from a
//!   discoverer that runs off the hot path (in `sheafalloc`, hwlocality on a
//!   helper thread at start-up) and makes it visible atomically.
//! * Until then, every thread is on node 0: the allocator works as a single
//!   node before discovery finishes (its arena regions for every online
//!   node are reserved from the start).
//!
//! # Reading it on the slow path
//!
//! The map is an array of atomics indexed by CPU; `generation` is bumped
//! (Release) after each publication, so a reader that sees the new
//! generation (Acquire) sees the whole map. The current CPU comes from the
//! rseq area (one load) or `getcpu`. Never allocates.

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use crate::node::{node_count, nodes_are_simulated, NodeId, MAX_NODES};
use crate::os;
use crate::sync::{LockRank, RawLock};

/// CPUs the map can describe; higher CPU numbers count as node 0.
pub const MAX_CPUS: usize = 1024;
const UNKNOWN: u8 = u8::MAX;

static CPU_NODE: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(UNKNOWN) }; MAX_CPUS];
static OS_NODE: [AtomicU32; MAX_NODES] = [const { AtomicU32::new(0) }; MAX_NODES];
static GENERATION: AtomicU32 = AtomicU32::new(0);
static SOURCE: AtomicU8 = AtomicU8::new(TopologySource::SingleNode as u8);
static ROUND_ROBIN: AtomicU8 = AtomicU8::new(0);
static PUBLISH_LOCK: RawLock = RawLock::new(LockRank::Topology);

/// The publication lock, for the fork handlers.
pub(crate) fn publish_lock() -> &'static RawLock {
    &PUBLISH_LOCK
}

/// Where the allocator's topology came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TopologySource {
    /// Nothing published (yet): every thread on node 0.
    SingleNode = 0,
    /// `SHEAFALLOC_NUMA_NODES`: simulated nodes, CPUs split among them.
    Simulated = 1,
    /// `SHEAFALLOC_NUMA_NODES` with more nodes than CPUs: threads
    /// round-robin.
    SimulatedRoundRobin = 2,
    /// Published by a discoverer (hwloc).
    Discovered = 3,
}

impl TopologySource {
    /// A short name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SingleNode => "single-node",
            Self::Simulated => "simulated",
            Self::SimulatedRoundRobin => "simulated-round-robin",
            Self::Discovered => "discovered",
        }
    }
}

/// The current source.
pub fn source() -> TopologySource {
    match SOURCE.load(Ordering::Acquire) {
        1 => TopologySource::Simulated,
        2 => TopologySource::SimulatedRoundRobin,
        3 => TopologySource::Discovered,
        _ => TopologySource::SingleNode,
    }
}

/// True once a discoverer published the real topology (memory binding
/// waits for it).
pub fn is_discovered() -> bool {
    source() == TopologySource::Discovered
}

/// Bumped after every publication; threads compare it on slow paths.
#[inline]
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Acquire)
}

/// Sets up simulated nodes; called once by the runtime's initialisation.
pub(crate) fn init_simulated() {
    os::init_rseq();
    if !nodes_are_simulated() {
        return;
    }
    let nodes = node_count();
    let cpus = os::cpu_count().min(MAX_CPUS);
    if cpus < nodes {
        ROUND_ROBIN.store(1, Ordering::Relaxed);
        SOURCE.store(TopologySource::SimulatedRoundRobin as u8, Ordering::Release);
    } else {
        for (cpu, entry) in CPU_NODE.iter().enumerate().take(cpus) {
            // Cannot wrap: `cpu < MAX_CPUS` and `nodes <= MAX_NODES`. The
            // divisor `cpus` is above `cpu`, so never zero.
            let node = cpu.wrapping_mul(nodes).checked_div(cpus).unwrap_or(0);
            entry.store(node as u8, Ordering::Relaxed);
        }
        SOURCE.store(TopologySource::Simulated as u8, Ordering::Release);
    }
    GENERATION.fetch_add(1, Ordering::Release);
}

/// One node as a discoverer sees it.
#[derive(Clone, Copy, Debug)]
pub struct DiscoveredNode<'a> {
    /// The OS's node number.
    pub os_node: u32,
    /// The CPUs of the node.
    pub cpus: &'a [u32],
}

/// Why a publication was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishError {
    /// Simulated nodes are in force; real ones are not applied.
    Simulated,
    /// No node given.
    Empty,
}

/// Publishes a discovered topology: node `i` of the list becomes `NodeId(i)`
/// when `i` is below the node count reserved at start-up; nodes beyond it
/// fold onto the last reserved node. Threads switch at their next slow
/// path. Call it off the hot path (it takes a lock and writes the map).
pub fn publish(nodes: &[DiscoveredNode<'_>]) -> Result<(), PublishError> {
    if nodes_are_simulated() {
        return Err(PublishError::Simulated);
    }
    if nodes.is_empty() {
        return Err(PublishError::Empty);
    }
    PUBLISH_LOCK.lock();
    let last_reserved = node_count().saturating_sub(1);
    for (index, node) in nodes.iter().enumerate() {
        let id = index.min(last_reserved);
        if index < MAX_NODES {
            if let Some(os_node) = OS_NODE.get(id) {
                os_node.store(node.os_node, Ordering::Relaxed);
            }
        }
        for &cpu in node.cpus {
            if let Some(entry) = CPU_NODE.get(cpu as usize) {
                entry.store(id as u8, Ordering::Relaxed);
            }
        }
    }
    SOURCE.store(TopologySource::Discovered as u8, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::Release);
    // SAFETY: locked above by this thread.
    unsafe { PUBLISH_LOCK.unlock() };
    Ok(())
}

/// The OS node number behind `node`.
pub fn os_node(node: NodeId) -> u32 {
    if nodes_are_simulated() {
        return 0;
    }
    node.entry(&OS_NODE).load(Ordering::Relaxed)
}

/// The node of `cpu` in the current map (node 0 if unknown).
pub fn node_of_cpu(cpu: u32) -> NodeId {
    match CPU_NODE
        .get(cpu as usize)
        .map(|e| e.load(Ordering::Relaxed))
    {
        Some(index) if (index as usize) < node_count() => {
            NodeId::new(index as usize).unwrap_or(NodeId::ZERO)
        }
        _ => NodeId::ZERO,
    }
}

/// Whether threads keep a node for life (round-robin simulated nodes).
pub fn threads_round_robin() -> bool {
    ROUND_ROBIN.load(Ordering::Relaxed) != 0
}

/// The node a thread on the current CPU belongs to now, or `None` when a
/// thread's node does not follow its CPU (single node, round-robin).
pub fn node_of_current_cpu() -> Option<NodeId> {
    if node_count() <= 1 || threads_round_robin() || source() == TopologySource::SingleNode {
        return None;
    }
    os::current_cpu_fast().map(node_of_cpu)
}

/// The node to give a thread that starts now.
pub(crate) fn node_for_new_thread() -> NodeId {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    if threads_round_robin() {
        let index = (NEXT.fetch_add(1, Ordering::Relaxed) as usize)
            .checked_rem(node_count())
            .unwrap_or(0);
        return NodeId::new(index).unwrap_or(NodeId::ZERO);
    }
    node_of_current_cpu().unwrap_or(NodeId::ZERO)
}

/// How slab memory is bound to its node: off for one node and for
/// simulated nodes; otherwise `SHEAFALLOC_NUMA_BIND` = `strict` (only the
/// node), `advisory` (the default: prefer the node, spill elsewhere rather
/// than fail) or `off`. Nothing is bound before the topology is published.
pub fn bind_mode() -> os::NumaBindMode {
    static MODE: AtomicU8 = AtomicU8::new(0);
    match MODE.load(Ordering::Relaxed) {
        1 => return os::NumaBindMode::Off,
        2 => return os::NumaBindMode::Advisory,
        3 => return os::NumaBindMode::Strict,
        _ => {}
    }
    let mode = if nodes_are_simulated() || node_count() <= 1 {
        os::NumaBindMode::Off
    } else {
        match os::env(c"SHEAFALLOC_NUMA_BIND") {
            Some(b"strict") => os::NumaBindMode::Strict,
            Some(b"off") => os::NumaBindMode::Off,
            _ => os::NumaBindMode::Advisory,
        }
    };
    let code = match mode {
        os::NumaBindMode::Off => 1,
        os::NumaBindMode::Advisory => 2,
        os::NumaBindMode::Strict => 3,
    };
    MODE.store(code, Ordering::Relaxed);
    mode
}

/// What the allocator uses, for reports: node count, source and, per node,
/// its OS number and CPUs (written into `cpus_out[node]` as a bitmap of
/// `MAX_CPUS` bits). Allocates nothing.
pub fn cpus_of(node: NodeId, out: &mut [u64; MAX_CPUS / 64]) {
    *out = [0; MAX_CPUS / 64];
    for (cpu, entry) in CPU_NODE.iter().enumerate() {
        let index = entry.load(Ordering::Relaxed);
        if index != UNKNOWN && index as usize == node.index() {
            if let Some(word) = out.get_mut(cpu / 64) {
                *word |= 1 << (cpu % 64);
            }
        }
    }
}

static MIGRATIONS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Counts a thread that moved to another node (its caches were handed back
/// to the old node).
pub(crate) fn count_migration() {
    MIGRATIONS.fetch_add(1, Ordering::Relaxed);
}

/// Threads that moved to another node since start.
pub fn migrations() -> u64 {
    MIGRATIONS.load(Ordering::Relaxed)
}
