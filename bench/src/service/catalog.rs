//! The workloads of the suite: names (as typed on the command line), titles
//! and units, shared by the workload binaries and the driver.

/// One workload of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Bursts of 64 × 256 B on two threads.
    Churn256,
    /// Bursts of 64 × 2112 B on two threads.
    Churn2112,
    /// One sender, one completer.
    Tx1to1,
    /// Two threads, each sending to and completing for the other.
    Tx2to2,
    /// Loopback TCP request/response, tokio, 1,000 connections.
    TcpRr,
    /// Loopback UDP echo.
    UdpEcho,
    /// Mixed sizes with hand-off (Larson).
    Larson,
    /// Peak RSS and RSS after freeing 256 MiB of small objects.
    Memory,
    /// `Tx1to1` with both threads pinned (`--cpus A,B`): the NUMA
    /// alien-path benchmark.
    TxPinned,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 9] = [
        Workload::Churn256,
        Workload::Churn2112,
        Workload::Tx1to1,
        Workload::Tx2to2,
        Workload::TcpRr,
        Workload::UdpEcho,
        Workload::Larson,
        Workload::Memory,
        Workload::TxPinned,
    ];

    /// The name on the command line and in result lines.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Churn256 => "churn-256",
            Workload::Churn2112 => "churn-2112",
            Workload::Tx1to1 => "tx-1to1",
            Workload::Tx2to2 => "tx-2to2",
            Workload::TcpRr => "tcp-rr",
            Workload::UdpEcho => "udp-echo",
            Workload::Larson => "larson",
            Workload::Memory => "memory",
            Workload::TxPinned => "tx-pinned",
        }
    }

    /// The workload called `name`.
    pub fn from_name(name: &str) -> Option<Workload> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// A one-line description for tables.
    pub fn title(self) -> &'static str {
        match self {
            Workload::Churn256 => "small-head churn: 2 threads, bursts of 64 × 256 B",
            Workload::Churn2112 => "packet-buffer churn: 2 threads, bursts of 64 × 2112 B",
            Workload::Tx1to1 => "TX completion 1→1: every free alien (256 B + 2112 B)",
            Workload::Tx2to2 => "TX completion 2→2: each thread sends and completes",
            Workload::TcpRr => "tokio TCP request/response, 1,000 connections",
            Workload::UdpEcho => "UDP echo, window of 32 × 512 B",
            Workload::Larson => "Larson: 16 B..8 KiB, 1 in 4 handed to the other thread",
            Workload::Memory => {
                "256 MiB (quick: 128 MiB) of 16..512 B objects allocated, then all freed"
            }
            Workload::TxPinned => "TX completion 1→1, threads pinned to two CPUs",
        }
    }

    /// The unit of the result's `value`.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::TcpRr => "requests/s",
            Workload::UdpEcho => "datagrams/s",
            Workload::Memory => "MiB",
            _ => "Mobj/s",
        }
    }

    /// Whether a larger value is better.
    pub fn higher_is_better(self) -> bool {
        self != Workload::Memory
    }

    /// Whether objects cross threads (a core-to-core round trip is timed
    /// beside each run).
    pub fn cross_thread(self) -> bool {
        matches!(
            self,
            Workload::Tx1to1 | Workload::Tx2to2 | Workload::Larson | Workload::TxPinned
        )
    }
}
