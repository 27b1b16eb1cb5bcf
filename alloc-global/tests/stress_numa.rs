//! NUMA paths under simulated nodes (and placement on real ones).
//!
//! A plain `main` (harness = false): the simulated node count is read when
//! the allocator starts, so the binary re-runs itself with
//! `SHEAFALLOC_NUMA_NODES=2` and `=4` and checks the children's verdicts.
//! With 2 nodes on a 2-CPU machine, nodes follow CPUs (threads are pinned);
//! with 4, threads are assigned round-robin. In both, threads on different
//! nodes allocate, exchange and free each other's objects, and the test
//! asserts that no object is handed out on a node other than its home,
//! that the alien-free counters equal the cross-node frees it counted, and
//! that after quiescing every object is back on its home node.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// A class no std internals of this test use: 3000-byte objects.
const CACHE: &str = "size-3072";
const OBJECT: usize = 3000;

fn main() {
    match std::env::var("SHEAFALLOC_NUMA_NODES") {
        Ok(nodes) => {
            let nodes: usize = nodes.parse().expect("node count");
            simulated_nodes(nodes);
            println!("simulated {nodes} nodes: ok");
        }
        Err(_) => {
            let mut passed = 0;
            for nodes in [2, 4] {
                let status = Command::new(std::env::current_exe().unwrap())
                    .env("SHEAFALLOC_NUMA_NODES", nodes.to_string())
                    .status()
                    .expect("re-run self");
                assert!(
                    status.success(),
                    "run with {nodes} simulated nodes failed: {status}"
                );
                passed += 1;
            }
            discovery_races_with_allocation();
            passed += 1;
            if real_placement() {
                passed += 1;
            }
            println!(
                "test result: ok. {passed} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out"
            );
        }
    }
}

fn simulated_nodes(nodes: usize) {
    let topology = sheafalloc::topology();
    assert!(topology.simulated, "{topology:?}");
    assert_eq!(topology.nodes.len(), nodes);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let by_cpu = !topology.threads_round_robin;
    assert_eq!(by_cpu, cpus >= nodes, "{topology:?}");

    let threads = (2 * nodes).max(4);
    let rounds = 300;
    let layout = Layout::from_size_align(OBJECT, 8).unwrap();
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..threads).map(|_| mpsc::channel::<Vec<usize>>()).unzip();
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(id, inbox)| {
            let outboxes = senders.clone();
            let expected_node = by_cpu.then(|| {
                let cpu = id % cpus;
                topology
                    .nodes
                    .iter()
                    .position(|n| n.cpus.contains(&(cpu as u32)))
                    .expect("CPU has a node")
            });
            std::thread::spawn(move || {
                if let Some(node) = expected_node {
                    common::pin_to_cpu(id % cpus);
                    sheafalloc::flush_thread_cache();
                    assert_eq!(
                        sheafalloc::thread_node(),
                        node,
                        "thread on CPU {} not on its node",
                        id % cpus
                    );
                }
                let allocator = sheafalloc::SheafAlloc::new();
                let me = sheafalloc::thread_node();
                let mut cross = 0u64;
                let mut generation = (id as u64) << 40;
                for round in 0..rounds {
                    let mut batch = Vec::new();
                    for _ in 0..(8 + round % 40) {
                        // SAFETY: non-zero size.
                        let object = unsafe { allocator.alloc(layout) };
                        assert!(!object.is_null());
                        let home = sheafalloc::home_node(object);
                        assert_eq!(
                            home,
                            Some(me),
                            "object {object:p} of node {home:?} handed out on node {me}"
                        );
                        generation += 1;
                        // SAFETY: OBJECT bytes just allocated; the pattern
                        // generation travels with the address below.
                        unsafe { common::fill(object, OBJECT, generation) };
                        batch.push(object as usize);
                        batch.push(generation as usize);
                    }
                    // Every round shifts all threads' targets by the same
                    // amount (a permutation: each thread gets one batch),
                    // mixing same-node and cross-node peers.
                    let shift = 1 + round % (threads - 1);
                    outboxes[(id + shift) % threads].send(batch).unwrap();
                    let received = inbox
                        .recv_timeout(Duration::from_secs(30))
                        .expect("peer stalled");
                    for pair in received.chunks(2) {
                        let (object, generation) = (pair[0] as *mut u8, pair[1] as u64);
                        // SAFETY: a live object of OBJECT bytes sent by a peer.
                        let intact = unsafe { common::check(object, OBJECT, generation) };
                        assert!(intact.is_ok(), "object {object:p} corrupted at {intact:?}");
                        if sheafalloc::home_node(object) != Some(me) {
                            cross += 1;
                        }
                        // SAFETY: live, allocated with `layout`.
                        unsafe { allocator.dealloc(object, layout) };
                    }
                }
                sheafalloc::flush_thread_cache();
                drop(outboxes);
                (me, cross)
            })
        })
        .collect();
    drop(senders);
    let mut cross_total = 0;
    let mut nodes_used = std::collections::BTreeSet::new();
    for handle in handles {
        let (node, cross) = handle.join().expect("worker");
        nodes_used.insert(node);
        cross_total += cross;
    }
    sheafalloc::flush_thread_cache();
    assert_eq!(
        nodes_used.len(),
        nodes,
        "threads did not cover every node: {nodes_used:?}"
    );
    assert!(cross_total > 0);

    let stats = sheafalloc::cache(CACHE).unwrap();
    assert_eq!(stats.live_objects, 0, "{stats:?}");
    assert_eq!(
        stats.remote_frees, cross_total,
        "alien-free counters vs cross-node frees counted by the test"
    );
    for (from, row) in stats.remote_frees_by_node.iter().enumerate() {
        assert_eq!(row[from], 0, "a free on the home node counted as remote");
    }
    for node in 0..nodes {
        // Quiescent: nothing live, no thread holds a sheaf of this class,
        // so every object out of the slabs is in this node's barn.
        let audit = common::assert_quiescent(CACHE, node);
        assert!(audit.slabs > 0, "node {node} never allocated");
    }
    eprintln!(
        "{nodes} simulated nodes: {cross_total} cross-node frees, matrix {:?}",
        &stats.remote_frees_by_node[..nodes]
    );
}

/// Discovery publishing a topology while many threads allocate: no
/// deadlock, no re-entrance (debug builds abort on it).
fn discovery_races_with_allocation() {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<Vec<u8>> = (0..100).map(|i| vec![t as u8; 1 + i * 31]).collect();
                    assert!(v.iter().all(|b| b.iter().all(|x| *x == t as u8)));
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..20 {
        match sheafalloc::discover_topology() {
            Ok(topology) => {
                assert_eq!(topology.source, "discovered");
                let cpus: usize = topology.nodes.iter().map(|n| n.cpus.len()).sum();
                assert!(cpus >= 1, "{topology:?}");
            }
            Err(error) => panic!("discovery failed: {error}"),
        }
        assert!(Instant::now() < deadline, "discovery too slow (deadlock?)");
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        assert!(worker.join().unwrap() > 0);
    }
}

/// On a host with several real nodes, objects must live on their home node
/// (`get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)`). Returns false when skipped.
fn real_placement() -> bool {
    let topology = sheafalloc::topology();
    if topology.nodes.len() < 2 || topology.simulated {
        println!(
            "placement test skipped: this host has {} NUMA node(s)",
            topology.nodes.len()
        );
        return false;
    }
    for node in &topology.nodes {
        let Some(&cpu) = node.cpus.first() else {
            continue;
        };
        let os_node = node.os_node;
        std::thread::spawn(move || {
            common::pin_to_cpu(cpu as usize);
            sheafalloc::flush_thread_cache();
            let objects: Vec<Box<[u8; 1024]>> = (0..1000).map(|_| Box::new([1; 1024])).collect();
            for object in &objects {
                let mut actual: libc::c_int = -1;
                const MPOL_F_NODE: libc::c_ulong = 1;
                const MPOL_F_ADDR: libc::c_ulong = 2;
                // SAFETY: get_mempolicy writes one int; the address is a
                // live, touched object.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_get_mempolicy,
                        &mut actual as *mut libc::c_int,
                        std::ptr::null_mut::<libc::c_ulong>(),
                        0 as libc::c_ulong,
                        object.as_ptr(),
                        MPOL_F_NODE | MPOL_F_ADDR,
                    )
                };
                assert_eq!(rc, 0);
                assert_eq!(
                    actual as u32, os_node,
                    "object on node {actual}, home {os_node}"
                );
            }
        })
        .join()
        .unwrap();
    }
    true
}
