//! The workloads of the suite: names (as typed on the command line), titles
//! and units, shared by the workload binaries and the driver.

/// One workload of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Bursts of `burst` × `size` B allocated then freed, on two threads.
    Churn {
        /// Buffer size in bytes.
        size: usize,
        /// Buffers per burst.
        burst: usize,
    },
    /// One sender, one completer (SPSC ring, 256 B + 2112 B).
    Tx1to1,
    /// Two threads, each sending to and completing for the other.
    Tx2to2,
    /// Packets of 64/256/1500/2112 B, one producer → one consumer, MPMC ring.
    Handoff1to1,
    /// The same, 4 producers → 4 consumers.
    Handoff4to4,
    /// The same with bursts of 64..=256 packets, 2 → 2.
    Bursty,
    /// axum service under wrk: `POST /orders`.
    HttpOrders,
    /// axum service under wrk: `GET /catalog`.
    HttpCatalog,
    /// `HttpOrders`' handler work on one thread, no HTTP.
    JsonOrders,
    /// `HttpCatalog`'s handler work on one thread, no HTTP.
    JsonCatalog,
    /// Loopback TCP request/response, tokio, 1,000 connections.
    TcpRr,
    /// Loopback UDP echo.
    UdpEcho,
    /// Mixed sizes with hand-off (Larson).
    Larson,
    /// Single-thread alloc+free pairs, 16..512 B.
    Pairs,
    /// FIFO batches of 4096 × 256 B.
    Fifo256,
    /// FIFO batches of 4096 × 2112 B.
    Fifo2112,
    /// Peak RSS and RSS after freeing 256 MiB of small objects.
    Memory,
    /// RSS growth after 256 threads handled one burst each and went idle.
    IdleThreads,
    /// `Tx1to1` with both threads pinned (`--cpus A,B`): the NUMA
    /// alien-path benchmark.
    TxPinned,
}

/// The churn shapes, with their names.
const CHURN: [(usize, usize, &str); 11] = [
    (256, 16, "churn-256x16"),
    (256, 64, "churn-256x64"),
    (256, 100, "churn-256x100"),
    (256, 256, "churn-256x256"),
    (2112, 16, "churn-2112x16"),
    (2112, 64, "churn-2112x64"),
    (2112, 100, "churn-2112x100"),
    (2112, 256, "churn-2112x256"),
    (2048, 64, "churn-2048x64"),
    (4096, 16, "churn-4096x16"),
    (4096, 100, "churn-4096x100"),
];

/// Names that earlier versions of the suite used, and what they mean now.
const ALIASES: [(&str, Workload); 2] = [
    (
        "churn-256",
        Workload::Churn {
            size: 256,
            burst: 64,
        },
    ),
    (
        "churn-2112",
        Workload::Churn {
            size: 2112,
            burst: 64,
        },
    ),
];

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 29] = [
        Workload::Handoff1to1,
        Workload::Handoff4to4,
        Workload::Bursty,
        Workload::HttpOrders,
        Workload::HttpCatalog,
        Workload::JsonOrders,
        Workload::JsonCatalog,
        Workload::Larson,
        Workload::Pairs,
        Workload::Fifo256,
        Workload::Fifo2112,
        Workload::Churn {
            size: 256,
            burst: 16,
        },
        Workload::Churn {
            size: 256,
            burst: 64,
        },
        Workload::Churn {
            size: 256,
            burst: 100,
        },
        Workload::Churn {
            size: 256,
            burst: 256,
        },
        Workload::Churn {
            size: 2112,
            burst: 16,
        },
        Workload::Churn {
            size: 2112,
            burst: 64,
        },
        Workload::Churn {
            size: 2112,
            burst: 100,
        },
        Workload::Churn {
            size: 2112,
            burst: 256,
        },
        Workload::Churn {
            size: 2048,
            burst: 64,
        },
        Workload::Churn {
            size: 4096,
            burst: 16,
        },
        Workload::Churn {
            size: 4096,
            burst: 100,
        },
        Workload::Tx1to1,
        Workload::Tx2to2,
        Workload::TcpRr,
        Workload::UdpEcho,
        Workload::Memory,
        Workload::IdleThreads,
        Workload::TxPinned,
    ];

    /// The name on the command line and in result lines.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Churn { size, burst } => CHURN
                .iter()
                .find(|&&(s, b, _)| (s, b) == (size, burst))
                .map_or("churn-other", |&(_, _, name)| name),
            Workload::Tx1to1 => "tx-1to1",
            Workload::Tx2to2 => "tx-2to2",
            Workload::Handoff1to1 => "handoff-1to1",
            Workload::Handoff4to4 => "handoff-4to4",
            Workload::Bursty => "bursty",
            Workload::HttpOrders => "http-orders",
            Workload::HttpCatalog => "http-catalog",
            Workload::JsonOrders => "json-orders",
            Workload::JsonCatalog => "json-catalog",
            Workload::TcpRr => "tcp-rr",
            Workload::UdpEcho => "udp-echo",
            Workload::Larson => "larson",
            Workload::Pairs => "pairs",
            Workload::Fifo256 => "fifo-256",
            Workload::Fifo2112 => "fifo-2112",
            Workload::Memory => "memory",
            Workload::IdleThreads => "idle-threads",
            Workload::TxPinned => "tx-pinned",
        }
    }

    /// The workload called `name` (or an earlier name of it).
    pub fn from_name(name: &str) -> Option<Workload> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .or_else(|| ALIASES.iter().find(|(a, _)| *a == name).map(|&(_, w)| w))
    }

    /// A one-line description for tables.
    pub fn title(self) -> String {
        match self {
            Workload::Churn { size, burst } => {
                format!("same-thread churn: 2 threads, bursts of {burst} × {size} B")
            }
            Workload::Tx1to1 => "TX completion 1→1: every free alien (256 B + 2112 B)".into(),
            Workload::Tx2to2 => "TX completion 2→2: each thread sends and completes".into(),
            Workload::Handoff1to1 => {
                "hand-off 1→1: 64/256/1500/2112 B through a 1024-slot MPMC ring, every free on the other thread".into()
            }
            Workload::Handoff4to4 => {
                "hand-off 4→4: 4 producers → 4 consumers, 64/256/1500/2112 B, MPMC ring".into()
            }
            Workload::Bursty => {
                "bursty hand-off 2→2: bursts of 64..256 packets of 64/256/1500/2112 B, several in flight".into()
            }
            Workload::HttpOrders => {
                "axum JSON service under wrk (64 connections): POST /orders, 40 orders parsed and priced".into()
            }
            Workload::HttpCatalog => {
                "axum JSON service under wrk (64 connections): GET /catalog, 200 items built and serialised".into()
            }
            Workload::JsonOrders => {
                "http-orders' handler on one thread, no HTTP: parse 40 orders, price, serialise".into()
            }
            Workload::JsonCatalog => {
                "http-catalog's handler on one thread, no HTTP: build 200 items, serialise".into()
            }
            Workload::TcpRr => "tokio TCP request/response, 1,000 connections".into(),
            Workload::UdpEcho => "UDP echo, window of 32 × 512 B".into(),
            Workload::Larson => "Larson: 16 B..8 KiB, 1 in 4 handed to the other thread".into(),
            Workload::Pairs => "alloc+free pairs, sizes cycling 16..512 B, one thread".into(),
            Workload::Fifo256 => "4096 × 256 B allocated, then freed in FIFO order".into(),
            Workload::Fifo2112 => "4096 × 2112 B allocated, then freed in FIFO order".into(),
            Workload::Memory => {
                "256 MiB (quick: 128 MiB) of 16..512 B objects allocated, then all freed".into()
            }
            Workload::IdleThreads => {
                "256 threads: one burst each (64 × 2112 B, 256 × 256 B, freed), then idle: RSS growth".into()
            }
            Workload::TxPinned => "TX completion 1→1, threads pinned to two CPUs".into(),
        }
    }

    /// The unit of the result's `value`.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::TcpRr | Workload::HttpOrders | Workload::HttpCatalog => "requests/s",
            Workload::JsonOrders | Workload::JsonCatalog => "calls/s",
            Workload::UdpEcho => "datagrams/s",
            Workload::Memory | Workload::IdleThreads => "MiB",
            Workload::Pairs => "ns/pair",
            Workload::Fifo256 | Workload::Fifo2112 => "ns/object",
            _ => "Mobj/s",
        }
    }

    /// Whether a larger value is better.
    pub fn higher_is_better(self) -> bool {
        !matches!(
            self,
            Workload::Memory
                | Workload::IdleThreads
                | Workload::Pairs
                | Workload::Fifo256
                | Workload::Fifo2112
        )
    }

    /// Whether objects or requests cross threads (a core-to-core round
    /// trip is timed beside each run).
    pub fn cross_thread(self) -> bool {
        matches!(
            self,
            Workload::Tx1to1
                | Workload::Tx2to2
                | Workload::TxPinned
                | Workload::Handoff1to1
                | Workload::Handoff4to4
                | Workload::Bursty
                | Workload::HttpOrders
                | Workload::HttpCatalog
                | Workload::TcpRr
                | Workload::Larson
        )
    }

    /// Whether this is an HTTP service's handler run without HTTP.
    pub fn is_json(self) -> bool {
        matches!(self, Workload::JsonOrders | Workload::JsonCatalog)
    }

    /// Whether this is the HTTP service (its report has peak RSS).
    pub fn is_http(self) -> bool {
        matches!(self, Workload::HttpOrders | Workload::HttpCatalog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, workload) in Workload::ALL.iter().enumerate() {
            assert_eq!(Workload::from_name(workload.name()), Some(*workload));
            assert!(Workload::ALL[..i]
                .iter()
                .all(|w| w.name() != workload.name()));
        }
        assert_eq!(
            Workload::from_name("churn-256"),
            Some(Workload::Churn {
                size: 256,
                burst: 64
            })
        );
    }
}
