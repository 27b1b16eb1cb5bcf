//! The network-service workloads, run inside a `wl-*` binary whose global
//! allocator is the one under test (see [`main`]).
//!
//! `wl-ALLOCATOR WORKLOAD [--quick] [--seconds S] [--warmup S] [--cpus A,B]` runs one
//! workload once and prints one [`Record`] line on stdout; `wl-ALLOCATOR
//! --list` prints the workload names.

pub mod catalog;
pub mod churn;
pub mod global;
pub mod handoff;
pub mod http;
pub mod idle;
pub mod json;
pub mod larson;
pub mod memory;
pub mod migrations;
pub mod object;
pub mod os;
pub mod packet;
pub mod progress;
pub mod rng;
pub mod single_thread;
pub mod strides;
pub mod tcp_rr;
pub mod tx;
pub mod udp_echo;

use catalog::Workload;
use global::Global;
use progress::{Budget, Window};

use crate::peers::Peer;
use crate::record::Record;
use crate::sync::pingpong;

/// Usage of a workload binary.
pub const USAGE: &str = "\
usage: wl-ALLOCATOR WORKLOAD [--quick] [--seconds S] [--warmup S] [--cpus A,B]
                            [--calls N]
       wl-ALLOCATOR --list
Runs one workload with this binary's global allocator and prints one
`result key=value ...` line. --warmup sets the seconds of work before the
measured window (a steady state: long enough for sheafalloc's auto-tuner,
which ticks twice a second, to settle). --cpus pins the two threads of
tx-pinned. --calls makes a json-* run exactly N handler calls (for
callgrind).";

/// One run as asked on the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The workload.
    pub workload: Workload,
    /// Short run.
    pub quick: bool,
    /// Measured seconds, if not the default.
    pub seconds: Option<f64>,
    /// Warm-up seconds, if not the default.
    pub warmup: Option<f64>,
    /// CPUs of the two threads of `tx-pinned`.
    pub cpus: Option<(usize, usize)>,
    /// Exact handler calls of a `json-*` run (no warm-up, no window).
    pub calls: Option<u64>,
}

impl Request {
    /// Warm-up and window of this run.
    pub fn budget(&self) -> Budget {
        let (warmup, seconds) = match (self.workload, self.quick) {
            (Workload::TcpRr, true) => (0.1, 1.0),
            (Workload::TcpRr, false) => (0.5, 3.0),
            // wrk counts whole seconds; its connections start in
            // milliseconds, so the quick run needs no warm-up.
            (w, true) if w.is_http() => (0.0, 1.0),
            (w, false) if w.is_http() => (1.0, 3.0),
            (_, true) => (0.02, 0.1),
            (_, false) => (0.1, 1.0),
        };
        Budget {
            warmup: self.warmup.unwrap_or(warmup),
            seconds: self.seconds.unwrap_or(seconds),
        }
    }
}

/// Parses the arguments after the program name (`None`: `--list`).
pub fn parse(args: &[String]) -> Result<Option<Request>, String> {
    let mut args = args.iter();
    let first = args.next().ok_or("no workload given")?;
    if first == "--list" {
        return Ok(None);
    }
    let workload =
        Workload::from_name(first).ok_or_else(|| format!("unknown workload {first:?}"))?;
    let mut request = Request {
        workload,
        quick: false,
        seconds: None,
        warmup: None,
        cpus: None,
        calls: None,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => request.quick = true,
            "--seconds" => {
                let value = args.next().ok_or("--seconds needs a number")?;
                let seconds: f64 = value
                    .parse()
                    .map_err(|_| format!("bad --seconds {value:?}"))?;
                if !(seconds > 0.0 && seconds < 3600.0) {
                    return Err(format!("--seconds {seconds} is out of range"));
                }
                request.seconds = Some(seconds);
            }
            "--warmup" => {
                let value = args.next().ok_or("--warmup needs a number")?;
                let warmup: f64 = value
                    .parse()
                    .map_err(|_| format!("bad --warmup {value:?}"))?;
                if !(0.0..3600.0).contains(&warmup) {
                    return Err(format!("--warmup {warmup} is out of range"));
                }
                request.warmup = Some(warmup);
            }
            "--cpus" => {
                let value = args.next().ok_or("--cpus needs A,B")?;
                let parsed = value
                    .split_once(',')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                request.cpus = Some(parsed.ok_or_else(|| format!("bad --cpus {value:?}"))?);
            }
            "--calls" => {
                let value = args.next().ok_or("--calls needs a number")?;
                let calls: u64 = value
                    .parse()
                    .map_err(|_| format!("bad --calls {value:?}"))?;
                if calls == 0 || !workload.is_json() {
                    return Err(
                        "--calls takes a positive count, for json-orders and json-catalog only"
                            .into(),
                    );
                }
                request.calls = Some(calls);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(request))
}

/// The entry point of a `wl-*` binary whose global allocator is `peer`.
pub fn main(peer: Peer) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let request = match parse(&args) {
        Ok(Some(request)) => request,
        Ok(None) => {
            for workload in Workload::ALL {
                println!("{}\t{}", workload.name(), workload.title());
            }
            return;
        }
        Err(error) => {
            eprintln!("wl-{}: {error}\n\n{USAGE}", peer.name());
            std::process::exit(2);
        }
    };
    global::set_active(peer);
    match run(&request, Global(peer)) {
        Ok(record) => println!("{}", record.line()),
        Err(error) => {
            eprintln!("wl-{} {}: {error}", peer.name(), request.workload.name());
            std::process::exit(1);
        }
    }
}

/// Runs the request and builds its result line.
pub fn run(request: &Request, global: Global) -> Result<Record, String> {
    let workload = request.workload;
    let budget = request.budget();
    let length = request
        .calls
        .map_or(json::Length::Timed(budget), json::Length::Calls);
    let mut record = Record::new();
    record
        .set("workload", workload.name())
        .set("allocator", global.name())
        .set("unit", workload.unit())
        .set(
            "numa_nodes_env",
            std::env::var("SHEAFALLOC_NUMA_NODES").unwrap_or_else(|_| "unset".into()),
        );
    if let Some(capacities) = global.capacity_env() {
        record.set("sheaf_capacity_env", capacities.replace('=', ":"));
    }
    // The host can move the vCPUs apart (or together) in the middle of a
    // run, so the round trip is timed on both sides of it and the run is
    // filed under the worse of the two.
    let rtt_before = workload.cross_thread().then(round_trip_ns);
    match workload {
        Workload::Churn { size, burst } => {
            throughput(&mut record, churn::run(size, burst, &budget));
        }
        Workload::Tx1to1 => tx_outcome(&mut record, tx::one_to_one(&budget, None, global))?,
        Workload::Tx2to2 => tx_outcome(&mut record, tx::n_to_n(&budget, 2))?,
        Workload::TxPinned => {
            let cpus = request.cpus.unwrap_or((0, 1));
            record.set("cpus", format!("{},{}", cpus.0, cpus.1));
            tx_outcome(&mut record, tx::one_to_one(&budget, Some(cpus), global))?;
        }
        Workload::Handoff1to1 => handoff_outcome(&mut record, handoff::ONE_TO_ONE, &budget)?,
        Workload::Handoff4to4 => handoff_outcome(&mut record, handoff::FOUR_TO_FOUR, &budget)?,
        Workload::Bursty => handoff_outcome(&mut record, handoff::BURSTY, &budget)?,
        Workload::HttpOrders => http_outcome(&mut record, http::Endpoint::Orders, &budget)?,
        Workload::HttpCatalog => http_outcome(&mut record, http::Endpoint::Catalog, &budget)?,
        Workload::JsonOrders => per_second(&mut record, json::run(http::Endpoint::Orders, length)?),
        Workload::JsonCatalog => {
            per_second(&mut record, json::run(http::Endpoint::Catalog, length)?)
        }
        Workload::Larson => throughput(&mut record, larson::run(&budget)),
        Workload::Pairs => time_per_operation(&mut record, single_thread::pairs(&budget)),
        Workload::Fifo256 => time_per_operation(
            &mut record,
            single_thread::fifo(crate::kernels::fifo::SMALL, &budget),
        ),
        Workload::Fifo2112 => time_per_operation(
            &mut record,
            single_thread::fifo(crate::kernels::fifo::PACKET, &budget),
        ),
        Workload::UdpEcho => {
            let outcome = udp_echo::run(&budget).map_err(|e| e.to_string())?;
            per_second(&mut record, outcome.window);
            record.set("lost", outcome.lost);
        }
        Workload::TcpRr => {
            let outcome = tcp_rr::run(&budget, tcp_rr::CONNECTIONS).map_err(|e| e.to_string())?;
            per_second(&mut record, outcome.window);
            record
                .set("connections", outcome.connections)
                .set("failed", outcome.failed)
                .set_f64("connect_s", outcome.connect_seconds, 3);
        }
        Workload::IdleThreads => {
            let outcome = idle::run();
            let mib = |bytes: u64| bytes as f64 / 1048576.0;
            record
                .set_f64("value", mib(outcome.idle.saturating_sub(outcome.before)), 1)
                .set_f64("before_mib", mib(outcome.before), 1)
                .set_f64("idle_mib", mib(outcome.idle), 1)
                .set("threads", idle::THREADS)
                .set("bytes_checked", outcome.checked);
        }
        Workload::Memory => {
            let total = if request.quick {
                memory::QUICK_TOTAL
            } else {
                memory::TOTAL
            };
            memory_outcome(&mut record, memory::run(global, total), global);
        }
    }
    if let Some(before) = rtt_before {
        let after = round_trip_ns();
        record
            .set_f64("rtt_ns", before.max(after), 0)
            .set_f64("rtt_before_ns", before, 0)
            .set_f64("rtt_after_ns", after, 0);
    }
    if let Some((warmup, window)) = migrations::warmup_and_window() {
        record
            .set("migrations_warmup", warmup)
            .set("migrations_window", window);
    }
    global.add_counters(&mut record);
    Ok(record)
}

/// A core-to-core round trip, median of 10 batches of 200: under 30 ms
/// even when the two threads share a CPU.
fn round_trip_ns() -> f64 {
    pingpong::round_trip_ns_with(11, 200)
}

fn window_fields(record: &mut Record, window: Window) {
    record
        .set("operations", window.operations)
        .set_f64("seconds", window.seconds, 3);
}

fn throughput(record: &mut Record, window: Window) {
    record.set_f64("value", window.millions_per_second(), 3);
    window_fields(record, window);
}

fn time_per_operation(record: &mut Record, window: Window) {
    record.set_f64("value", window.nanoseconds_per_operation(), 3);
    window_fields(record, window);
}

fn handoff_outcome(
    record: &mut Record,
    shape: handoff::Shape,
    budget: &Budget,
) -> Result<(), String> {
    let outcome = handoff::run(shape, budget);
    outcome.verify()?;
    throughput(record, outcome.window);
    record
        .set("producers", shape.producers)
        .set("consumers", shape.consumers)
        .set("burst", format!("{}..{}", shape.burst.0, shape.burst.1))
        .set("packets_checked", outcome.received.packets)
        .set("ring_full_waits", outcome.waits.full)
        .set("ring_empty_waits", outcome.waits.empty)
        .set_f64("stride_kept", outcome.strides.share(), 3);
    Ok(())
}

fn http_outcome(
    record: &mut Record,
    endpoint: http::Endpoint,
    budget: &Budget,
) -> Result<(), String> {
    let whole = |s: f64| s.round().max(0.0) as u64;
    let outcome = http::run(endpoint, whole(budget.warmup), whole(budget.seconds).max(1))?;
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let load = &outcome.load;
    record
        .set_f64("value", load.requests_per_second, 0)
        .set("operations", load.requests)
        .set_f64("seconds", load.seconds, 3)
        .set_f64("peak_rss_mib", mib(outcome.peak_rss), 1)
        .set_f64("baseline_rss_mib", mib(outcome.baseline_rss), 1)
        .set_f64("final_rss_mib", mib(outcome.final_rss), 1)
        .set_f64("p50_ms", load.p50_ms, 3)
        .set_f64("p99_ms", load.p99_ms, 3)
        .set("served", outcome.served)
        .set("connections", http::wrk::CONNECTIONS);
    Ok(())
}

fn per_second(record: &mut Record, window: Window) {
    record.set_f64("value", window.per_second(), 0);
    window_fields(record, window);
}

fn tx_outcome(record: &mut Record, outcome: tx::Outcome) -> Result<(), String> {
    if outcome.corrupt != 0 {
        return Err(format!("{} packets arrived corrupt", outcome.corrupt));
    }
    throughput(record, outcome.window);
    let show = |v: Option<usize>| v.map_or("-".to_owned(), |v| v.to_string());
    let p = &outcome.placement;
    if p.sender.0.is_some() {
        record
            .set("sender_cpu", show(p.sender.0))
            .set("sender_node", show(p.sender.1))
            .set("completer_cpu", show(p.completer.0))
            .set("completer_node", show(p.completer.1));
    }
    Ok(())
}

fn memory_outcome(record: &mut Record, outcome: memory::Outcome, global: Global) {
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    record
        .set_f64("value", mib(outcome.freed), 1)
        .set_f64("baseline_mib", mib(outcome.baseline), 1)
        .set_f64("peak_mib", mib(outcome.peak), 1)
        .set_f64("freed_mib", mib(outcome.freed), 1)
        .set_f64("released_mib", mib(outcome.released), 1)
        .set("release", global.release_call())
        .set("requested_mib", outcome.requested >> 20)
        .set("objects", outcome.objects)
        .set_f64("alloc_ns", outcome.alloc_ns, 1)
        .set_f64("free_ns", outcome.free_ns, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_requests() {
        assert_eq!(parse(&args(&["--list"])), Ok(None));
        let request = parse(&args(&["tx-pinned", "--quick", "--cpus", "0,1"]))
            .unwrap()
            .unwrap();
        assert_eq!(request.workload, Workload::TxPinned);
        assert!(request.quick);
        assert_eq!(request.cpus, Some((0, 1)));
        assert_eq!(request.budget().seconds, 0.1);
        let request = parse(&args(&["tcp-rr", "--seconds", "2"]))
            .unwrap()
            .unwrap();
        assert_eq!(request.budget().seconds, 2.0);
        assert!(parse(&args(&["nope"])).is_err());
        assert!(parse(&args(&["memory", "--cpus", "x"])).is_err());
        assert!(parse(&args(&[])).is_err());
        let request = parse(&args(&["json-catalog", "--calls", "20"]))
            .unwrap()
            .unwrap();
        assert_eq!(request.calls, Some(20));
        assert!(parse(&args(&["pairs", "--calls", "20"])).is_err());
        assert!(parse(&args(&["json-orders", "--calls", "0"])).is_err());
    }
}
