//! The timed workloads, their names and units, and how big each run is.

pub mod prodcons;

pub use sheafalloc_bench::kernels::{alloc_touch, fifo, layouts, pairs};
pub use sheafalloc_bench::sync::{pingpong, ring, spin};

use std::alloc::GlobalAlloc;

use crate::peers::{Peer, Visit};

/// A timed workload (callgrind is not one: it counts, see `callgrind.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Single-thread alloc+free pairs of mixed small sizes.
    Pairs,
    /// 4096 × 256 B allocated, then freed in allocation order.
    Fifo,
    /// One producer thread allocates, one consumer thread frees.
    ProdCons,
}

/// The timed workloads, in report order.
pub const ALL: [Workload; 3] = [Workload::Pairs, Workload::Fifo, Workload::ProdCons];

/// How much work one measurement does.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Alloc+free pairs per `Pairs` measurement.
    pub pairs: usize,
    /// Batches of 4096 objects per `Fifo` measurement.
    pub fifo_batches: usize,
    /// Objects handed over per `ProdCons` measurement.
    pub prodcons_objects: usize,
    /// Ping-pong batches (each `PINGPONG_TRIPS` round trips) per round.
    pub pingpong_batches: usize,
}

impl Scale {
    /// The default run: a few minutes in all.
    pub const FULL: Scale = Scale {
        pairs: 30_000_000,
        fifo_batches: 3_000,
        prodcons_objects: 5_000_000,
        pingpong_batches: 41,
    };

    /// `--quick`: the whole run in under a minute.
    pub const QUICK: Scale = Scale {
        pairs: 15_000_000,
        fifo_batches: 1_500,
        prodcons_objects: 3_000_000,
        pingpong_batches: 21,
    };

    /// A tiny run of everything, untimed, to fault pages in and start
    /// each allocator's background machinery before the first round.
    pub const WARMUP: Scale = Scale {
        pairs: 200_000,
        fifo_batches: 20,
        prodcons_objects: 50_000,
        pingpong_batches: 3,
    };
}

impl Workload {
    /// The name used by `--only`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Pairs => "pairs",
            Workload::Fifo => "fifo",
            Workload::ProdCons => "prodcons",
        }
    }

    /// The report's heading.
    pub fn title(self) -> &'static str {
        match self {
            Workload::Pairs => {
                "alloc+free pairs, sizes cycling 16..512 B, one thread (ns per pair)"
            }
            Workload::Fifo => "4096 × 256 B allocated, then freed in FIFO order (ns per object)",
            Workload::ProdCons => {
                "producer → SPSC ring → consumer, 256 B and 2112 B, 2 threads (million objects/s)"
            }
        }
    }

    /// The unit of the measured value.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Pairs => "ns/pair",
            Workload::Fifo => "ns/object",
            Workload::ProdCons => "Mobj/s",
        }
    }

    /// Whether a larger value is better (throughput) or worse (time).
    pub fn higher_is_better(self) -> bool {
        matches!(self, Workload::ProdCons)
    }

    /// Runs one measurement of this workload with `peer`.
    pub fn measure(self, peer: Peer, scale: &Scale) -> f64 {
        peer.visit(Measure {
            workload: self,
            scale,
        })
    }
}

/// One measurement, as generic code for `Peer::visit`.
struct Measure<'a> {
    workload: Workload,
    scale: &'a Scale,
}

impl Visit for Measure<'_> {
    type Output = f64;
    fn visit<A: GlobalAlloc + Sync>(self, a: &A) -> f64 {
        match self.workload {
            Workload::Pairs => pairs::run(a, self.scale.pairs),
            Workload::Fifo => fifo::run(a, fifo::SMALL, self.scale.fifo_batches),
            Workload::ProdCons => prodcons::run(a, self.scale.prodcons_objects),
        }
    }
}
