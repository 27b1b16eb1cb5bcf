//! `GET /v1/topology`: the NUMA nodes as the allocator uses them (count,
//! whether `SHEAFALLOC_NUMA_NODES` simulates them) next to the host's NUMA
//! nodes and their CPU sets as hwloc discovers them.
//!
//! # Discovery
//!
//! hwloc builds its topology with allocations and system calls, so it runs
//! once, on tokio's blocking pool, the first time the resource is read; the
//! result is kept. If discovery fails (no hwloc, a restricted `/sys`, a
//! panic inside the binding) the answer still comes: nodes without CPU sets
//! and an `error` field saying why.
//!
//! When the nodes are real (not simulated), allocator node `i` is the
//! host's NUMA node with OS index `i` (the engine counts nodes as the
//! highest online node + 1), so its CPU set is that node's. Simulated nodes
//! have no CPU set of their own.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sheafalloc_core::node::{node_count, nodes_are_simulated};

use crate::AppState;

/// Body of `GET /v1/topology`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyView {
    /// Nodes the allocator uses.
    pub node_count: usize,
    /// True when `SHEAFALLOC_NUMA_NODES` simulates them.
    pub nodes_are_simulated: bool,
    /// The allocator's nodes, `0..node_count`.
    pub nodes: Vec<NodeView>,
    /// Which sheaves the engine runs: `per-cpu` (restartable sequences) or
    /// `per-thread` (the fallback).
    #[serde(default)]
    pub cache_mode: String,
    /// Why the per-thread fallback is in force (absent in per-CPU mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_mode_reason: Option<String>,
    /// CPUs with per-CPU sheaves so far.
    #[serde(default)]
    pub cpus_with_caches: usize,
    /// CPUs that keep the objects of other CPUs they free (cross-CPU flow
    /// there is continuous) instead of sending them back.
    #[serde(default)]
    pub cpus_keeping_lanes: usize,
    /// The host as hwloc sees it.
    pub host: HostTopology,
}

/// One node of the allocator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// Node index (the `node` label of the metrics).
    pub node: usize,
    /// CPUs of the node, when known (real nodes with a working hwloc).
    pub cpus: Option<Vec<usize>>,
}

/// The host's NUMA layout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTopology {
    /// Every CPU the process may see, when known.
    pub cpus: Option<Vec<usize>>,
    /// The host's NUMA nodes (empty if discovery failed).
    pub numa_nodes: Vec<HostNode>,
    /// Why discovery failed, if it did.
    pub error: Option<String>,
}

/// One NUMA node of the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostNode {
    /// The OS's node number.
    pub os_index: Option<usize>,
    /// The node's CPUs (none for a memory-only node).
    pub cpus: Vec<usize>,
    /// Memory of the node in bytes (0 when hwloc cannot tell).
    pub memory_bytes: u64,
}

/// `GET /v1/topology`.
pub(crate) async fn topology(State(state): State<AppState>) -> Json<TopologyView> {
    let host = state
        .host_topology()
        .get_or_init(|| async {
            match tokio::task::spawn_blocking(discover_host).await {
                Ok(host) => host,
                Err(error) => HostTopology {
                    error: Some(format!("topology discovery failed: {error}")),
                    ..HostTopology::default()
                },
            }
        })
        .await
        .clone();
    Json(view(node_count(), nodes_are_simulated(), host))
}

/// Puts the allocator's nodes next to the host's.
fn view(node_count: usize, simulated: bool, host: HostTopology) -> TopologyView {
    let nodes = (0..node_count)
        .map(|node| NodeView {
            node,
            cpus: if simulated {
                None
            } else {
                host.numa_nodes
                    .iter()
                    .find(|host_node| host_node.os_index == Some(node))
                    .map(|host_node| host_node.cpus.clone())
            },
        })
        .collect();
    TopologyView {
        node_count,
        nodes_are_simulated: simulated,
        nodes,
        cache_mode: sheafalloc_core::percpu::mode().as_str().to_owned(),
        cache_mode_reason: sheafalloc_core::percpu::fallback_reason().map(str::to_owned),
        cpus_with_caches: sheafalloc_core::percpu::cpus_with_caches(),
        cpus_keeping_lanes: sheafalloc_core::percpu::cpus_keeping_lanes(),
        host,
    }
}

/// Most CPUs listed per set (a guard against a malformed, infinite set).
const MAX_CPUS: usize = 1 << 16;

/// Asks hwloc (blocking; may allocate freely: this is the sidecar).
fn discover_host() -> HostTopology {
    use hwlocality::object::types::ObjectType;
    use hwlocality::Topology;

    let topology = match Topology::new() {
        Ok(topology) => topology,
        Err(error) => {
            return HostTopology {
                error: Some(format!("hwloc could not load the topology: {error}")),
                ..HostTopology::default()
            }
        }
    };
    let cpu_list = |set: &hwlocality::cpu::cpuset::CpuSet| -> Vec<usize> {
        set.iter_set().take(MAX_CPUS).map(usize::from).collect()
    };
    let numa_nodes = topology
        .objects_with_type(ObjectType::NUMANode)
        .map(|node| HostNode {
            os_index: node.os_index(),
            cpus: node.cpuset().map(|set| cpu_list(&set)).unwrap_or_default(),
            memory_bytes: node.total_memory(),
        })
        .collect();
    HostTopology {
        cpus: Some(cpu_list(&topology.cpuset())),
        numa_nodes,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_with_two_nodes() -> HostTopology {
        HostTopology {
            cpus: Some(vec![0, 1, 2, 3]),
            numa_nodes: vec![
                HostNode {
                    os_index: Some(0),
                    cpus: vec![0, 1],
                    memory_bytes: 1,
                },
                HostNode {
                    os_index: Some(1),
                    cpus: vec![2, 3],
                    memory_bytes: 1,
                },
            ],
            error: None,
        }
    }

    #[test]
    fn real_nodes_take_the_cpu_sets_of_the_host_nodes() {
        let view = view(2, false, host_with_two_nodes());
        assert_eq!(view.nodes[1].cpus, Some(vec![2, 3]));
    }

    #[test]
    fn simulated_nodes_have_no_cpu_set() {
        let view = view(4, true, host_with_two_nodes());
        assert_eq!(view.nodes.len(), 4);
        assert!(view.nodes.iter().all(|node| node.cpus.is_none()));
    }

    #[test]
    fn failed_discovery_still_lists_the_nodes() {
        let host = HostTopology {
            error: Some("no hwloc".to_owned()),
            ..HostTopology::default()
        };
        let view = view(1, false, host);
        assert_eq!(view.nodes.len(), 1);
        assert_eq!(view.nodes[0].cpus, None);
        assert_eq!(view.host.error.as_deref(), Some("no hwloc"));
    }

    #[test]
    fn hwloc_finds_this_host() {
        let host = discover_host();
        assert_eq!(host.error, None);
        let cpus = host.cpus.expect("a CPU set");
        assert!(!cpus.is_empty());
        assert!(!host.numa_nodes.is_empty());
    }
}
