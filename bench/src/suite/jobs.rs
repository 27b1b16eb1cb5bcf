//! What the suite runs: jobs (one per workload, one for the NUMA
//! comparison), their variants, and every run's outcome.

use sheafalloc_bench::peers::{self, Peer};
use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::catalog::Workload;
use sheafalloc_bench::summary::Samples;

/// One way to run a job's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Label in tables (`""` for a plain job).
    pub label: &'static str,
    /// `SHEAFALLOC_NUMA_NODES` (removed when `None`).
    pub numa_nodes: Option<u32>,
    /// `--cpus` of the run.
    pub cpus: Option<(usize, usize)>,
}

/// One job: a workload, its variants, and the outcome of every run.
#[derive(Clone, Debug)]
pub struct Job {
    /// The workload every variant runs.
    pub workload: Workload,
    /// Whether this is the NUMA comparison.
    pub numa: bool,
    /// The variants (two for NUMA: same node, cross node).
    pub variants: Vec<Variant>,
    /// `outcomes[variant][peer index]`: one per round.
    pub outcomes: Vec<Vec<Vec<Result<Record, String>>>>,
}

impl Job {
    /// A plain job: every allocator runs `workload` once per round.
    pub fn plain(workload: Workload) -> Self {
        Self::with_variants(
            workload,
            false,
            vec![Variant {
                label: "",
                numa_nodes: None,
                cpus: None,
            }],
        )
    }

    /// The NUMA comparison: TX completion 1→1 with the two threads pinned
    /// to `cpus`, first with one simulated node, then with two (the CPUs
    /// then lie on different nodes).
    pub fn numa(cpus: (usize, usize)) -> Self {
        Self::with_variants(
            Workload::TxPinned,
            true,
            vec![
                Variant {
                    label: "same node",
                    numa_nodes: Some(1),
                    cpus: Some(cpus),
                },
                Variant {
                    label: "cross node",
                    numa_nodes: Some(2),
                    cpus: Some(cpus),
                },
            ],
        )
    }

    fn with_variants(workload: Workload, numa: bool, variants: Vec<Variant>) -> Self {
        let outcomes = variants
            .iter()
            .map(|_| peers::ALL.map(|_| Vec::new()).to_vec())
            .collect();
        Self {
            workload,
            numa,
            variants,
            outcomes,
        }
    }

    /// The name in progress lines.
    pub fn name(&self) -> &'static str {
        if self.numa {
            "numa"
        } else {
            self.workload.name()
        }
    }

    /// The successful records of `peer` in `variant`, in round order.
    pub fn records(&self, variant: usize, peer: Peer) -> impl Iterator<Item = &Record> {
        self.outcomes[variant][index(peer)]
            .iter()
            .filter_map(|o| o.as_ref().ok())
    }

    /// The samples of field `key` of `peer` in `variant`.
    pub fn samples(&self, variant: usize, peer: Peer, key: &str) -> Samples {
        let mut samples = Samples::default();
        for record in self.records(variant, peer) {
            let value = record.number(key);
            if value.is_finite() {
                samples.push(value);
            }
        }
        samples
    }

    /// Every failed run's error text.
    pub fn failures(&self) -> impl Iterator<Item = &String> {
        self.outcomes
            .iter()
            .flatten()
            .flatten()
            .filter_map(|o| o.as_ref().err())
    }
}

/// The position of `peer` in `peers::ALL`.
pub fn index(peer: Peer) -> usize {
    peers::ALL
        .iter()
        .position(|&p| p == peer)
        .expect("every peer is in ALL")
}
