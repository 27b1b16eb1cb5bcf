//! Concurrency models, checked with `loom`, of the real slow paths: each
//! model thread owns a [`HotSlot`]/[`ColdSlot`] pair and allocates and
//! frees through [`ClassSheaves`] — `pop`/`push`, then `alloc_slow`,
//! `free_slow`, `free_remote`, `send_remote`, `give_back` — exactly as the
//! engine's thread caches do, and every barn trade goes through the real
//! `exchange` module, the real `Barn`, `Sheaf` and `SheafPool`, under the
//! real futex lock built on loom's atomics (`sync::` under `cfg(loom)`).
//! Nothing here restates a step of the engine: a change to the slow paths
//! is a change to what these models check.
//!
//! What stands in for the engine (the [`Depot`] of this file):
//!
//! * the slabs are a list of free fake object addresses per node behind
//!   the engine's lock (no carving, no decay: the slab layer has its own
//!   model test, `slab.rs`);
//! * the capacity is a loom atomic that one model changes live, or a
//!   constant where it does not matter (fewer interleavings to explore);
//! * capacities shrink under loom (a sheaf holds at most 4 objects, a barn
//!   keeps 2 full and 2 empty sheaves), so the limits are hit in a few
//!   steps.
//!
//! The models, and what each proves for every interleaving it explores:
//!
//! * `barn_exchange` — two threads of one node, on two CPU lanes, allocate
//!   and free more than their sheaves hold, so they trade at the barn in
//!   both directions and hit its limits, then exit (`give_back`). No
//!   object is lost or duplicated, and the barn's invariants hold at the
//!   end.
//! * `lane_handoff` — a producer on one lane hands objects to a consumer
//!   on another, whose frees fill sheaves that go to the barn on its lane,
//!   while the producer allocates again: it takes the consumer's full
//!   sheaf as another lane's surplus (under loom any depth is a surplus)
//!   or refills from the slabs. No object is lost or duplicated, and some
//!   interleaving does take the other lane's sheaf (the model checks it
//!   reaches that path).
//! * `alien_free_handoff` — a thread of node A frees objects whose home is
//!   node B, then node C (batched per home; a full batch handed over to the
//!   home barn, a partial one flushed when another node's object arrives
//!   and at exit), while B's owner allocates from B's barn. Every remote
//!   object arrives home exactly once, no foreign object is ever handed out
//!   on B, and each `[from][to]` counter equals what was freed for it.
//! * `live_capacity` — one thread stores new capacities while a worker
//!   frees and allocates; once the last store happened-before one more slow
//!   path, the worker's main and spare sheaves have the last capacity, and
//!   no object was lost while sheaves shrank.
//!
//! Not covered: the thread-local and registry parts of `ThreadCache`
//! (node changes, exit keys), the slab layer, and out-of-memory paths (the
//! pool maps memory that never runs out here). `LOOM_MAX_PREEMPTIONS`
//! overrides each model's preemption bound.
#![cfg(loom)]

use std::cell::Cell;
use std::ptr;

use loom::sync::atomic::{AtomicU32, Ordering::Relaxed};
use loom::sync::Arc;
use loom::thread;

use sheafalloc_core::barn::Barn;
use sheafalloc_core::counters::{CacheCounters, RemoteFrees};
use sheafalloc_core::exchange::{self, Depot};
use sheafalloc_core::lane::Lane;
use sheafalloc_core::node::NodeId;
use sheafalloc_core::sheaf::{SheafPool, SHEAF_CAPACITY_MAX};
use sheafalloc_core::size_class::SizeClass;
use sheafalloc_core::sync::{LockRank, Mutex};
use sheafalloc_core::thread_cache::{ClassSheaves, ColdSlot, HotSlot};

/// Runs `model` under loom and prints how many executions it explored.
fn check(name: &str, bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // A contended lock yields to loom until its holder runs: allow for the
    // branches that costs.
    builder.max_branches = 20_000;
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = Some(bound);
    }
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    println!(
        "{name}: {} executions explored (preemption bound {:?})",
        executions.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound
    );
}

fn node(index: usize) -> NodeId {
    NodeId::new(index).expect("node exists")
}

/// Fake object addresses (never dereferenced): node `n`'s objects are
/// `n << 20 | i << 4`, so an object's home is its address's top bits.
fn objects_of(home: NodeId, count: usize) -> Vec<usize> {
    (1..=count)
        .map(|i| (home.index() << 20) | (i << 4))
        .collect()
}

fn home_of(object: usize) -> NodeId {
    node(object >> 20)
}

loom::thread_local! {
    /// The model thread's CPU lane (set by [`as_thread`]): what the
    /// engine's depot reads from the CPU the thread runs on.
    static LANE: Cell<Lane> = Cell::new(Lane::ZERO);
}

/// Where the depot's capacity comes from.
enum Capacity {
    Fixed(u32),
    Live(AtomicU32),
}

/// The layers below the thread caches, for one class on up to three nodes.
struct ModelDepot {
    barns: [Mutex<Barn>; 3],
    slabs: [Mutex<Vec<usize>>; 3],
    pool: SheafPool,
    capacity: Capacity,
    counters: CacheCounters,
    remote_frees: RemoteFrees,
}

impl ModelDepot {
    fn new(capacity: Capacity, slabs: [Vec<usize>; 3]) -> Self {
        let [a, b, c] = slabs;
        Self {
            barns: [0, 1, 2].map(|_| Mutex::new(LockRank::Barn, Barn::new())),
            slabs: [a, b, c].map(|objects| Mutex::new(LockRank::Slabs, objects)),
            pool: SheafPool::new(),
            capacity,
            counters: CacheCounters::new(),
            remote_frees: RemoteFrees::new(),
        }
    }

    /// Every object in `node`'s barn and slabs, after every thread gave
    /// its sheaves back; drains the barn with the engine's own `drain_barn`.
    fn collect(&self, node: NodeId) -> Vec<usize> {
        {
            let barn = self.barns[node.index()].lock();
            barn.check_invariants();
        }
        exchange::drain_barn(self, node);
        let barn = self.barns[node.index()].lock();
        assert_eq!(barn.counts(), (0, 0), "drained");
        drop(barn);
        self.slabs[node.index()].lock().clone()
    }
}

// SAFETY: the models do not run inside an allocator, so allocating here
// (the slab lists are `Vec`s) is allowed; `barn` and the slabs are per
// node; every object a refill hands out was put in the list once.
unsafe impl Depot for ModelDepot {
    fn class(&self) -> SizeClass {
        SizeClass::from_index(5).expect("class 5")
    }

    fn barn(&self, node: NodeId) -> &Mutex<Barn> {
        &self.barns[node.index()]
    }

    fn lane(&self) -> Lane {
        LANE.with(Cell::get)
    }

    fn refill(&self, node: NodeId, out: &mut [*mut u8]) -> usize {
        let mut slabs = self.slabs[node.index()].lock();
        let mut filled = 0;
        for slot in out.iter_mut() {
            let Some(object) = slabs.pop() else { break };
            assert_eq!(home_of(object), node, "refill of a foreign object");
            *slot = ptr::without_provenance_mut(object);
            filled += 1;
        }
        filled
    }

    unsafe fn flush(&self, node: NodeId, objects: &[*mut u8]) {
        let mut slabs = self.slabs[node.index()].lock();
        for &object in objects {
            assert_eq!(home_of(object.addr()), node, "flush to a foreign node");
            slabs.push(object.addr());
        }
    }

    fn pool(&self) -> &SheafPool {
        &self.pool
    }

    fn sheaf_capacity(&self) -> u32 {
        match &self.capacity {
            Capacity::Fixed(n) => *n,
            Capacity::Live(n) => n.load(Relaxed),
        }
    }

    fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    fn remote_frees(&self) -> &RemoteFrees {
        &self.remote_frees
    }
}

/// A model thread's sheaves on `node`, used exactly as `SheafAlloc` uses a
/// thread cache: fast path first, slow path when it fails.
struct Thread<'a> {
    depot: &'a ModelDepot,
    node: NodeId,
    sheaves: ClassSheaves<'a>,
}

impl<'a> Thread<'a> {
    fn alloc(&self) -> usize {
        let object = self
            .sheaves
            .pop()
            .unwrap_or_else(|| self.sheaves.alloc_slow(self.depot, self.node));
        assert!(!object.is_null(), "allocation failed");
        assert_eq!(
            home_of(object.addr()),
            self.node,
            "foreign object handed out"
        );
        object.addr()
    }

    fn free(&self, object: usize) {
        let home = home_of(object);
        let object = ptr::without_provenance_mut(object);
        if home != self.node {
            // SAFETY: a free object of the class whose home is `home`.
            unsafe {
                self.sheaves
                    .free_remote(self.depot, self.node, object, home)
            };
        } else if !self.sheaves.push(object) {
            // SAFETY: a free object of the class whose home is our node.
            unsafe { self.sheaves.free_slow(self.depot, self.node, object) };
        }
    }

    /// What thread exit does.
    fn exit(&self) {
        self.sheaves.give_back(self.depot, self.node);
    }
}

/// Runs `body` as a model thread of `node` on CPU `cpu`'s lane with fresh
/// slots.
fn as_thread<R>(
    depot: &ModelDepot,
    node: NodeId,
    cpu: u32,
    body: impl FnOnce(&Thread<'_>) -> R,
) -> R {
    LANE.with(|lane| lane.set(Lane::of_cpu(cpu)));
    let (hot, cold) = (HotSlot::new(), ColdSlot::new());
    let thread = Thread {
        depot,
        node,
        sheaves: ClassSheaves::new(&hot, &cold),
    };
    let result = body(&thread);
    thread.exit();
    result
}

fn assert_exactly_once(mut found: Vec<usize>, mut expected: Vec<usize>) {
    found.sort_unstable();
    expected.sort_unstable();
    let duplicate = found.windows(2).find(|pair| pair[0] == pair[1]);
    assert!(duplicate.is_none(), "object in two places: {duplicate:?}");
    assert_eq!(found, expected, "objects lost or invented");
}

#[test]
fn barn_exchange() {
    check("barn_exchange", 3, || {
        let a = node(0);
        let everything = objects_of(a, 14);
        let depot = Arc::new(ModelDepot::new(
            Capacity::Fixed(SHEAF_CAPACITY_MAX),
            [everything.clone(), Vec::new(), Vec::new()],
        ));
        // Each thread holds more objects than its two sheaves (8), frees
        // them (main and spare fill, a full sheaf goes to the barn or the
        // slabs), and allocates again (taking full sheaves back).
        let workers: Vec<_> = (0..2)
            .map(|cpu| {
                let depot = Arc::clone(&depot);
                thread::spawn(move || {
                    as_thread(&depot, a, cpu, |t| {
                        let held: Vec<usize> = (0..6).map(|_| t.alloc()).collect();
                        for &object in &held {
                            t.free(object);
                        }
                        (0..5).map(|_| t.alloc()).collect::<Vec<_>>()
                    })
                })
            })
            .collect();
        let mut found: Vec<usize> = workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("worker"))
            .collect();
        found.extend(depot.collect(a));
        assert_exactly_once(found, everything);
    });
}

#[test]
fn lane_handoff() {
    /// Executions in which the producer took the consumer's full sheaf.
    static STOLEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    check("lane_handoff", 3, || {
        let a = node(0);
        let everything = objects_of(a, 16);
        let depot = Arc::new(ModelDepot::new(
            Capacity::Fixed(SHEAF_CAPACITY_MAX),
            [everything.clone(), Vec::new(), Vec::new()],
        ));
        // A producer on CPU 0 allocates 12 objects and hands them to a
        // consumer on CPU 1, which frees them all: its two sheaves fill
        // and full sheaves go to the barn on lane 1. Meanwhile the
        // producer allocates 4 more: from lane 1's full sheaf (another
        // lane's surplus) if it is there yet, else from the slabs.
        let more = as_thread(&depot, a, 0, |producer| {
            let handed: Vec<usize> = (0..12).map(|_| producer.alloc()).collect();
            let consumer = {
                let depot = Arc::clone(&depot);
                thread::spawn(move || {
                    as_thread(&depot, a, 1, |consumer| {
                        for object in handed {
                            consumer.free(object);
                        }
                    })
                })
            };
            let more: Vec<usize> = (0..4).map(|_| producer.alloc()).collect();
            consumer.join().expect("the consumer");
            more
        });
        let mut found = more;
        found.extend(depot.collect(a));
        assert_exactly_once(found, everything);
        if depot.counters.barn_lane_steals.load(Relaxed) > 0 {
            STOLEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    // Some interleaving reaches the other lane's sheaves, not only its own.
    assert!(
        STOLEN.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no execution took a full sheaf from the other lane"
    );
}

#[test]
fn alien_free_handoff() {
    check("alien_free_handoff", 3, || {
        let (a, b, c) = (node(0), node(1), node(2));
        // A thread of node A frees objects whose home is B — a full batch
        // (handed to B's barn as a sheaf) and one more — then objects whose
        // home is C (B's partial batch is sent first, to B's slabs; C's
        // goes at exit), while B's owner allocates from its barn and slabs.
        let for_b = objects_of(b, 5);
        let for_c = objects_of(c, 2);
        let in_b_slabs = objects_of(b, 7).split_off(5);
        let depot = Arc::new(ModelDepot::new(
            Capacity::Fixed(SHEAF_CAPACITY_MAX),
            [Vec::new(), in_b_slabs.clone(), Vec::new()],
        ));
        let freer = {
            let depot = Arc::clone(&depot);
            let objects: Vec<usize> = for_b.iter().chain(&for_c).copied().collect();
            thread::spawn(move || {
                as_thread(&depot, a, 0, |t| {
                    for object in objects {
                        t.free(object);
                    }
                })
            })
        };
        // Only objects whose home is B may come out on B (`alloc` checks).
        let taken: Vec<usize> = as_thread(&depot, b, 1, |t| (0..2).map(|_| t.alloc()).collect());
        freer.join().expect("the freeing thread");
        let mut found_b = taken;
        found_b.extend(depot.collect(b));
        let mut expected_b = for_b.clone();
        expected_b.extend(&in_b_slabs);
        assert_exactly_once(found_b, expected_b);
        assert_exactly_once(depot.collect(c), for_c.clone());
        assert!(
            depot.collect(a).is_empty(),
            "nothing stays on the freeing node"
        );
        let counted = |home: NodeId| depot.remote_frees.get(a, home);
        assert_eq!(counted(b), for_b.len() as u64);
        assert_eq!(counted(c), for_c.len() as u64);
    });
}

#[test]
fn live_capacity() {
    check("live_capacity", 3, || {
        let a = node(0);
        let everything = objects_of(a, 10);
        let depot = Arc::new(ModelDepot::new(
            Capacity::Live(AtomicU32::new(SHEAF_CAPACITY_MAX)),
            [everything.clone(), Vec::new(), Vec::new()],
        ));
        let setter = {
            let depot = Arc::clone(&depot);
            thread::spawn(move || {
                let Capacity::Live(capacity) = &depot.capacity else {
                    unreachable!()
                };
                capacity.store(1, Relaxed);
                capacity.store(2, Relaxed);
            })
        };
        let (hot, cold) = (HotSlot::new(), ColdSlot::new());
        let t = Thread {
            depot: &depot,
            node: a,
            sheaves: ClassSheaves::new(&hot, &cold),
        };
        let held: Vec<usize> = (0..7).map(|_| t.alloc()).collect();
        for &object in &held {
            t.free(object);
        }
        setter.join().expect("setter");
        // One more slow path after the last store: empty main by the fast
        // path, then allocate once more.
        let mut live = Vec::new();
        while !hot.is_empty() {
            live.push(t.alloc());
        }
        live.push(t.alloc());
        assert_eq!(t.sheaves.main_capacity(), 2, "main after the last store");
        let spare = t.sheaves.spare_capacity();
        assert!(
            spare == 0 || spare == 2,
            "spare after the last store: {spare}"
        );
        t.exit();
        let mut found = live;
        found.extend(depot.collect(a));
        assert_exactly_once(found, everything);
    });
}
