//! Concurrency models, checked with `loom`, of the hand-offs that move
//! sheaves and objects between threads under a lock.
//!
//! Every model runs the real `Barn` (`take_full`, `put_full`, `take_empty`,
//! `put_empty`, `counts`, `check_invariants`) and the real `Sheaf` (`push`,
//! `pop`, `held`, `check_invariants`) on sheaves allocated with `Box`. Each
//! sheaf carries a loom cell that its owner touches at every use, so loom
//! also reports a sheaf used by two threads without a hand-off (barn lock,
//! spawn or join) ordering the uses.
//!
//! * `barn_exchange` (every interleaving): a consumer and two producers
//!   trade sheaves at one barn as the slow paths do (`alloc_slow`: an empty
//!   main for a full sheaf, else a refill from the slabs; `dealloc_slow`: a
//!   full main for an empty sheaf, else a flush to the slabs; one producer
//!   then exits as `dispose` does), starting one sheaf short of both limits
//!   so that the limit fallbacks race. Proves: no object is lost or
//!   duplicated, the barn never exceeds `BARN_FULL_MAX`/`BARN_EMPTY_MAX`, and
//!   its invariants hold after every locked operation.
//! * `alien_free_handoff` (every interleaving): threads of nodes A and C
//!   batch objects whose home is node B and hand each batch over as
//!   `remote_free`/`send_remote` do (a full batch onto B's full stack if it
//!   has room, else into B's slabs; a partial one into the slabs when an
//!   object of another node arrives or the thread exits) while B's owner
//!   takes full sheaves from the same barn. Proves: every object freed
//!   remotely arrives at its home exactly once, and each `[from][to]`
//!   hand-over counter equals the objects that thread freed for that node.
//! * `live_capacity_shrink`, `live_capacity_grow` (every interleaving) and
//!   `live_capacity_with_producer` (preemption bound 4): one thread stores
//!   new capacities while a worker frees and allocates, applying the
//!   capacity at each exchange as `sync_capacity`/`resize` do (objects above
//!   a smaller capacity go to the slabs; a sheaf taken from the barn is
//!   resized when installed); in the last, a third thread hands sheaves of
//!   whatever capacity it read to the same barn. Proves: no object is lost
//!   or duplicated, every sheaf keeps `len <= capacity` after every
//!   operation, and once the last store happened-before one more exchange,
//!   the worker's main and spare have the last capacity.
//!
//! What the models do not prove:
//!
//! * The futex lock of `sync/` is replaced by `loom::sync::Mutex`, and the
//!   capacity atomic of `Cache` by a loom atomic: the models check the
//!   protocol built on a correct lock, not the lock itself.
//! * The slow paths of `ThreadCache` cannot run under loom (they reach
//!   process-wide statics, thread-locals, the arena and the OS), so the
//!   models restate their steps, in the same order, around the real barn
//!   and sheaf code: a change to `thread_cache.rs` must be mirrored here to
//!   stay covered. The hot slot (the fast path's copy of the main sheaf's
//!   header) is not modelled; the models work on the sheaf header directly.
//! * Slabs are a `Vec` of free object addresses behind a loom mutex (no
//!   carving, partial or empty lists, decay), and the sheaf pool is `Box`
//!   allocation, which never fails: the paths taken when the pool is out of
//!   memory are not covered.
//! * Objects are fake addresses that are never dereferenced: nothing here
//!   says anything about object memory.
//! * Loom explores interleavings of these small scenarios only (two to
//!   three threads, a few exchanges each); `LOOM_MAX_PREEMPTIONS` overrides
//!   every model's preemption bound.
#![cfg(loom)]

use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use loom::sync::{Arc, Mutex};
use loom::thread;

use sheafalloc_core::barn::{Barn, BARN_EMPTY_MAX, BARN_FULL_MAX};
use sheafalloc_core::node::NodeId;
use sheafalloc_core::sheaf::{Sheaf, SHEAF_CAPACITY_MAX};
use sheafalloc_core::size_class::SizeClass;

/// Runs `model` under loom and prints how many executions it explored.
/// `bound` is the preemption bound (`None`: every interleaving), unless
/// `LOOM_MAX_PREEMPTIONS` is set.
fn check(name: &str, bound: Option<usize>, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = bound;
    }
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    match builder.preemption_bound {
        None => println!("{name}: all {executions} executions explored"),
        Some(bound) => {
            println!("{name}: {executions} executions explored (preemption bound {bound})")
        }
    }
}

fn class() -> SizeClass {
    SizeClass::from_index(5).expect("class 5 exists")
}

fn node_b() -> NodeId {
    NodeId::new(1).expect("node 1 exists")
}

/// The fake object with address `addr` (never dereferenced).
fn object(addr: usize) -> *mut u8 {
    ptr::without_provenance_mut(addr)
}

/// `count` distinct fake object addresses, starting at `first`.
fn objects(first: usize, count: usize) -> Vec<usize> {
    (first..first + count).map(|i| 0x1000 + 16 * i).collect()
}

// ---------------------------------------------------------------------------
// Sheaves with an owner check
// ---------------------------------------------------------------------------

/// A sheaf plus a loom cell that its owner touches at every use, so that
/// loom reports two uses by different threads that no hand-off (barn lock,
/// spawn or join) orders.
#[repr(C)]
struct TrackedSheaf {
    /// First field: a `*mut Sheaf` from the barn is a `*mut TrackedSheaf`.
    sheaf: Sheaf,
    owner: UnsafeCell<()>,
}

/// The one handle through which a thread owns a sheaf outside a barn.
/// Giving the sheaf to the barn consumes the handle; dropping it frees the
/// sheaf (the model's sheaf pool).
struct Owned(NonNull<TrackedSheaf>);

// SAFETY: the handle is the sheaf's only owner, so sending it sends that
// ownership; the sheaf holds fake object addresses that are never
// dereferenced and a `next` link that only the barn follows, under its lock.
unsafe impl Send for Owned {}

impl Owned {
    /// A new empty sheaf (the model's `SHEAF_POOL.take`).
    fn new(node: NodeId, capacity: u32) -> Self {
        let tracked = Box::new(TrackedSheaf {
            sheaf: Sheaf {
                len: 0,
                capacity,
                next: ptr::null_mut(),
                node,
                class: class(),
                objects: [ptr::null_mut(); SHEAF_CAPACITY_MAX as usize],
            },
            owner: UnsafeCell::new(()),
        });
        Owned(NonNull::from(Box::leak(tracked)))
    }

    /// A new sheaf holding `addrs`, with `capacity`.
    fn filled(node: NodeId, capacity: u32, addrs: &[usize]) -> Self {
        let mut sheaf = Self::new(node, capacity);
        for &addr in addrs {
            assert!(sheaf.sheaf().push(object(addr)), "seed above capacity");
        }
        sheaf
    }

    /// Takes back ownership of a sheaf a barn gave out or refused.
    ///
    /// # Safety
    ///
    /// 1. `sheaf` came from [`Owned::into_barn`] and the barn has given up
    ///    ownership of it (`take_*` returned it, or `put_*` refused it).
    unsafe fn from_barn(sheaf: NonNull<Sheaf>) -> Self {
        // Duty 1: the pointer is the `Box::leak` pointer of a
        // `TrackedSheaf`, whose first field is the sheaf.
        Owned(sheaf.cast())
    }

    /// Gives up the handle; the pointer goes to a barn.
    fn into_barn(self) -> NonNull<Sheaf> {
        ManuallyDrop::new(self).0.cast()
    }

    /// The sheaf, for its owner.
    fn sheaf(&mut self) -> &mut Sheaf {
        // SAFETY: the pointer came from `Box::leak` and the handle is the
        // sheaf's only owner (the barn holds no handle, and the handle was
        // consumed when the sheaf went to a barn), so no other reference to
        // the sheaf exists while this one lives.
        let tracked = unsafe { self.0.as_mut() };
        tracked.owner.with_mut(|_| ());
        &mut tracked.sheaf
    }

    fn held(&mut self) -> Vec<usize> {
        self.sheaf().held().iter().map(|p| p.addr()).collect()
    }

    /// Gives an empty sheaf back to the pool.
    fn give_to_pool(mut self) {
        assert_eq!(self.sheaf().len, 0, "sheaf with objects given to the pool");
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` in `Owned::new`, and this
        // handle, its only owner, is going away.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// ---------------------------------------------------------------------------
// A node: its barn and its slabs
// ---------------------------------------------------------------------------

/// The per-node state of one class: the real barn behind a loom mutex, and
/// the slabs as a list of free object addresses.
struct Node {
    id: NodeId,
    barn: Mutex<Barn>,
    slabs: Mutex<Vec<usize>>,
}

impl Node {
    fn new(id: NodeId, slab_objects: Vec<usize>) -> Self {
        Self {
            id,
            barn: Mutex::new(Barn::new()),
            slabs: Mutex::new(slab_objects),
        }
    }

    /// Seeds the barn (before any thread starts).
    fn seed_barn(&self, full: Vec<Owned>, empty: usize, capacity: u32) {
        let mut barn = self.barn.lock().unwrap();
        for sheaf in full {
            // SAFETY: owned, non-empty, this node and class.
            let refused = unsafe { barn.put_full(sheaf.into_barn()) };
            assert!(refused.is_ok(), "seed above the full limit");
        }
        for _ in 0..empty {
            let sheaf = Owned::new(self.id, capacity);
            // SAFETY: owned, empty, this node and class.
            let refused = unsafe { barn.put_empty(sheaf.into_barn()) };
            assert!(refused.is_ok(), "seed above the empty limit");
        }
        checked(&barn);
    }

    /// `cache::flush_to_slabs`.
    fn flush_to_slabs(&self, addrs: &[usize]) {
        if addrs.is_empty() {
            return;
        }
        self.slabs.lock().unwrap().extend_from_slice(addrs);
    }

    /// Empties the barn and the slabs (after every thread joined): every
    /// object they hold, in no particular order.
    fn drain(&self) -> Vec<usize> {
        let mut found = Vec::new();
        let mut barn = self.barn.lock().unwrap();
        checked(&barn);
        while let Some(sheaf) = barn.take_full() {
            // SAFETY: the barn gave the sheaf up.
            let mut sheaf = unsafe { Owned::from_barn(sheaf) };
            assert!(sheaf.sheaf().len > 0, "empty sheaf on the full stack");
            assert_eq!(sheaf.sheaf().node, self.id, "sheaf of another node");
            found.extend(sheaf.held());
        }
        while let Some(sheaf) = barn.take_empty() {
            // SAFETY: the barn gave the sheaf up.
            let sheaf = unsafe { Owned::from_barn(sheaf) };
            sheaf.give_to_pool();
        }
        assert_eq!(barn.counts(), (0, 0));
        drop(barn);
        found.append(&mut self.slabs.lock().unwrap());
        found
    }
}

/// The barn's limits and invariants, checked inside its lock after every
/// operation (the asserts first: they fail the model with a message, where
/// `check_invariants` aborts the process).
fn checked(barn: &Barn) {
    let (full, empty) = barn.counts();
    assert!(full <= BARN_FULL_MAX, "full stack above its limit: {full}");
    assert!(
        empty <= BARN_EMPTY_MAX,
        "empty stack above its limit: {empty}"
    );
    barn.check_invariants();
}

/// Asserts that `found` holds every object of `expected` exactly once and
/// nothing else.
fn assert_exactly_once(mut found: Vec<usize>, mut expected: Vec<usize>) {
    found.sort_unstable();
    expected.sort_unstable();
    let duplicate = found.windows(2).find(|pair| pair[0] == pair[1]);
    assert!(duplicate.is_none(), "object in two places: {duplicate:?}");
    assert_eq!(found, expected, "objects lost or invented");
}

// ---------------------------------------------------------------------------
// A thread's main and spare sheaves (the slow paths of `ThreadCache`)
// ---------------------------------------------------------------------------

/// Where a worker reads the sheaf capacity (`Cache::sheaf_capacity`).
enum Capacity {
    /// Never changes (no atomic access, fewer interleavings to explore).
    Fixed(u32),
    /// The cache's atomic, changed by another thread.
    Live(Arc<AtomicU32>),
}

impl Capacity {
    fn get(&self) -> u32 {
        match self {
            Capacity::Fixed(n) => *n,
            Capacity::Live(n) => n.load(Relaxed),
        }
    }
}

/// One thread's sheaves of one class on its node, with the steps of
/// `ThreadCache::{alloc_slow, dealloc_slow, sync_capacity, resize,
/// new_sheaf, dispose}` in the same order.
struct Worker {
    node: Arc<Node>,
    capacity: Capacity,
    main: Option<Owned>,
    spare: Option<Owned>,
    /// Objects allocated and not yet freed.
    in_use: Vec<usize>,
    /// Slow paths run (sheaf exchanges, including failed ones).
    slow_paths: u32,
}

impl Worker {
    fn new(node: Arc<Node>, capacity: Capacity, main: Owned, spare: Owned) -> Self {
        Self {
            node,
            capacity,
            main: Some(main),
            spare: Some(spare),
            in_use: Vec::new(),
            slow_paths: 0,
        }
    }

    fn pop_main(&mut self) -> Option<usize> {
        let addr = self.main.as_mut()?.sheaf().pop()?.addr();
        self.in_use.push(addr);
        Some(addr)
    }

    fn push_main(&mut self, addr: usize) -> bool {
        self.main
            .as_mut()
            .is_some_and(|main| main.sheaf().push(object(addr)))
    }

    /// Allocates one object (fast path, else `alloc_slow`).
    fn alloc(&mut self) -> Option<usize> {
        let addr = self.pop_main().or_else(|| self.alloc_slow());
        self.check();
        addr
    }

    /// Allocates until a slow path has run once (the next exchange).
    fn alloc_until_exchange(&mut self) {
        let before = self.slow_paths;
        while self.slow_paths == before {
            self.alloc();
        }
    }

    /// Frees the allocated object `addr` (fast path, else `dealloc_slow`).
    fn free(&mut self, addr: usize) {
        let at = self.in_use.iter().position(|&a| a == addr);
        self.in_use
            .swap_remove(at.expect("free of an object not in use"));
        if !self.push_main(addr) {
            self.dealloc_slow(addr);
        }
        self.check();
    }

    /// Frees the object allocated last, if any.
    fn free_last(&mut self) {
        if let Some(&addr) = self.in_use.last() {
            self.free(addr);
        }
    }

    fn alloc_slow(&mut self) -> Option<usize> {
        self.slow_paths += 1;
        self.sync_capacity();
        if let Some(addr) = self.pop_main() {
            return Some(addr);
        }
        let mut main = match self.main.take() {
            Some(main) => main,
            None => self.new_sheaf(),
        };
        assert_eq!(main.sheaf().len, 0, "alloc slow path with objects in main");
        // 1. The spare has objects: swap.
        if let Some(mut spare) = self.spare.take() {
            if spare.sheaf().len > 0 {
                self.spare = Some(main);
                self.main = Some(spare);
                return self.pop_main();
            }
            self.spare = Some(spare);
        }
        // 2. Trade the empty main for a full sheaf at the barn.
        let mut barn = self.node.barn.lock().unwrap();
        if let Some(full) = barn.take_full() {
            // SAFETY: the barn gave the sheaf up.
            let full = unsafe { Owned::from_barn(full) };
            // SAFETY: main is owned, empty, of this barn's node and class.
            let leftover = unsafe { barn.put_empty(main.into_barn()) }.err();
            checked(&barn);
            drop(barn);
            if let Some(empty) = leftover {
                // SAFETY: the barn refused the sheaf.
                unsafe { Owned::from_barn(empty) }.give_to_pool();
            }
            self.main = Some(full);
            self.sync_capacity();
            return self.pop_main();
        }
        checked(&barn);
        drop(barn);
        // 3. Refill main from the slabs, in bulk.
        {
            let sheaf = main.sheaf();
            let mut slabs = self.node.slabs.lock().unwrap();
            while sheaf.len < sheaf.capacity {
                let Some(addr) = slabs.pop() else { break };
                assert!(sheaf.push(object(addr)));
            }
        }
        self.main = Some(main);
        self.pop_main()
    }

    fn dealloc_slow(&mut self, addr: usize) {
        self.slow_paths += 1;
        self.sync_capacity();
        if self.push_main(addr) {
            return;
        }
        let mut main = match self.main.take() {
            Some(main) => main,
            None => self.new_sheaf(),
        };
        let spare_empty = match self.spare.as_mut() {
            None => true,
            Some(spare) => spare.sheaf().len == 0,
        };
        if spare_empty {
            // The spare (or a new sheaf) becomes main.
            let empty = match self.spare.take() {
                Some(spare) => spare,
                None => self.new_sheaf(),
            };
            self.spare = Some(main);
            self.main = Some(empty);
            assert!(self.push_main(addr), "push into an empty sheaf failed");
            return;
        }
        // Both full: hand main to the barn and take an empty one.
        assert!(main.sheaf().len > 0, "empty main handed over as full");
        let mut barn = self.node.barn.lock().unwrap();
        // SAFETY: main is owned, non-empty, of this barn's node and class.
        match unsafe { barn.put_full(main.into_barn()) } {
            Ok(()) => {
                let empty = barn.take_empty();
                checked(&barn);
                drop(barn);
                let empty = match empty {
                    // SAFETY: the barn gave the sheaf up.
                    Some(empty) => unsafe { Owned::from_barn(empty) },
                    None => self.new_sheaf(),
                };
                self.main = Some(empty);
                self.sync_capacity();
                if !self.push_main(addr) {
                    self.node.flush_to_slabs(&[addr]);
                }
                return;
            }
            Err(refused) => {
                checked(&barn);
                drop(barn);
                // SAFETY: the barn refused the sheaf.
                main = unsafe { Owned::from_barn(refused) };
            }
        }
        // The barn is at its limit: flush main to the slabs, start it over.
        let held = main.held();
        self.node.flush_to_slabs(&held);
        main.sheaf().len = 0;
        self.main = Some(main);
        assert!(self.push_main(addr), "push into a flushed sheaf failed");
    }

    /// `ThreadCache::new_sheaf`: an empty sheaf from the barn, else the pool.
    fn new_sheaf(&mut self) -> Owned {
        let capacity = self.capacity.get();
        let mut barn = self.node.barn.lock().unwrap();
        let from_barn = barn.take_empty();
        checked(&barn);
        drop(barn);
        let mut sheaf = match from_barn {
            // SAFETY: the barn gave the sheaf up.
            Some(sheaf) => unsafe { Owned::from_barn(sheaf) },
            None => Owned::new(self.node.id, capacity),
        };
        assert_eq!(
            sheaf.sheaf().len,
            0,
            "sheaf with objects on the empty stack"
        );
        sheaf.sheaf().capacity = capacity;
        sheaf
    }

    fn sync_capacity(&mut self) {
        let target = self.capacity.get();
        for sheaf in [self.main.as_mut(), self.spare.as_mut()]
            .into_iter()
            .flatten()
        {
            if sheaf.sheaf().capacity != target {
                resize(&self.node, sheaf, target);
            }
        }
    }

    /// `ThreadCache::dispose` of main and spare (thread exit).
    fn exit(&mut self) {
        for mut sheaf in [self.main.take(), self.spare.take()].into_iter().flatten() {
            if sheaf.sheaf().len > 0 {
                if sheaf.sheaf().len == sheaf.sheaf().capacity {
                    let mut barn = self.node.barn.lock().unwrap();
                    // SAFETY: owned, non-empty, this node and class.
                    let refused = unsafe { barn.put_full(sheaf.into_barn()) };
                    checked(&barn);
                    drop(barn);
                    match refused {
                        Ok(()) => continue,
                        // SAFETY: the barn refused the sheaf.
                        Err(refused) => sheaf = unsafe { Owned::from_barn(refused) },
                    }
                }
                let held = sheaf.held();
                self.node.flush_to_slabs(&held);
                sheaf.sheaf().len = 0;
            }
            let mut barn = self.node.barn.lock().unwrap();
            // SAFETY: owned, empty, this node and class.
            let refused = unsafe { barn.put_empty(sheaf.into_barn()) };
            checked(&barn);
            drop(barn);
            if let Err(refused) = refused {
                // SAFETY: the barn refused the sheaf.
                unsafe { Owned::from_barn(refused) }.give_to_pool();
            }
        }
    }

    /// The sheaf invariants of main and spare, after every operation.
    fn check(&mut self) {
        for sheaf in [self.main.as_mut(), self.spare.as_mut()]
            .into_iter()
            .flatten()
        {
            let sheaf = sheaf.sheaf();
            assert!(
                sheaf.len <= sheaf.capacity,
                "len {} above capacity {}",
                sheaf.len,
                sheaf.capacity
            );
            assert_eq!(sheaf.node, self.node.id, "sheaf of another node");
            sheaf.check_invariants();
        }
    }

    /// Every object the worker holds, in use or cached.
    fn objects(&mut self) -> Vec<usize> {
        let mut found = self.in_use.clone();
        for sheaf in [self.main.as_mut(), self.spare.as_mut()]
            .into_iter()
            .flatten()
        {
            found.extend(sheaf.held());
        }
        found
    }
}

/// `ThreadCache::resize`: objects above a smaller capacity go to the slabs.
fn resize(node: &Node, sheaf: &mut Owned, target: u32) {
    let sheaf = sheaf.sheaf();
    if sheaf.len > target {
        let excess: Vec<usize> = sheaf.objects[target as usize..sheaf.len as usize]
            .iter()
            .map(|p| p.addr())
            .collect();
        node.flush_to_slabs(&excess);
        sheaf.len = target;
    }
    sheaf.capacity = target;
}

// ---------------------------------------------------------------------------
// Model 1: sheaf <-> barn exchange
// ---------------------------------------------------------------------------

/// Three threads exchange sheaves at one barn that starts one sheaf short of
/// both limits: a consumer (main and spare empty) allocates, two producers
/// (main and spare full) free and one of them then exits. The consumer
/// trades an empty sheaf for a full one twice (the empty stack may be at its
/// limit, so the empty sheaf goes to the pool); the producers trade a full
/// sheaf for an empty one (the full stack may be at its limit, so main is
/// flushed to the slabs), and the exiting one gives back a full and an
/// empty sheaf (either may be refused).
#[test]
fn barn_exchange() {
    const CAPACITY: u32 = 2;
    check("barn_exchange", None, || {
        let id = NodeId::ZERO;
        // Objects 0..18 seed the barn, 18..20 the slabs, 20..24 producer A's
        // sheaves, 24..26 the objects it frees, 26..32 producer B's.
        let seeded = objects(0, 2 * (BARN_FULL_MAX as usize - 1));
        let node = Arc::new(Node::new(id, objects(18, 2)));
        let seed = seeded
            .chunks(CAPACITY as usize)
            .map(|chunk| Owned::filled(id, CAPACITY, chunk))
            .collect();
        node.seed_barn(seed, BARN_EMPTY_MAX as usize - 1, CAPACITY);

        let producer = |sheaves: &[usize], frees: &[usize]| {
            let mut worker = Worker::new(
                Arc::clone(&node),
                Capacity::Fixed(CAPACITY),
                Owned::filled(id, CAPACITY, &sheaves[..2]),
                Owned::filled(id, CAPACITY, &sheaves[2..]),
            );
            // Objects the thread allocated earlier (from elsewhere).
            worker.in_use = frees.to_vec();
            worker
        };
        let mut producer_a = producer(&objects(20, 4), &objects(24, 2));
        let mut producer_b = producer(&objects(26, 4), &objects(30, 2));
        let mut consumer = Worker::new(
            Arc::clone(&node),
            Capacity::Fixed(CAPACITY),
            Owned::new(id, CAPACITY),
            Owned::new(id, CAPACITY),
        );

        let consumer = thread::spawn(move || {
            // Exchange, a fast pop, exchange.
            for _ in 0..3 {
                consumer.alloc();
            }
            consumer
        });
        let producer_b = thread::spawn(move || {
            // Exchange (both full), then thread exit.
            producer_b.free_last();
            producer_b.exit();
            producer_b
        });
        // Exchange (both full), then a fast push.
        producer_a.free_last();
        producer_a.free_last();
        let mut consumer = consumer.join().unwrap();
        let mut producer_b = producer_b.join().unwrap();

        assert_eq!(consumer.slow_paths, 2);
        assert_eq!(
            consumer.in_use.len(),
            3,
            "the barn had full sheaves to give"
        );
        let mut found = node.drain();
        for worker in [&mut consumer, &mut producer_a, &mut producer_b] {
            found.extend(worker.objects());
        }
        assert_exactly_once(found, objects(0, 32));
    });
}

// ---------------------------------------------------------------------------
// Model 2: alien frees handed to the home node
// ---------------------------------------------------------------------------

/// A home node as a remote freer sees it: its barn and slabs, and the
/// counter `remote_frees[this thread's node][home]`.
struct Home {
    node: Arc<Node>,
    handed_over: Arc<AtomicU64>,
}

/// A thread's remote batch of one class (`ThreadCache::remote_free` and
/// `send_remote`): objects whose home is another node.
struct RemoteFreer {
    homes: Vec<Home>,
    capacity: u32,
    /// The batch and the index of its home in `homes`.
    batch: Option<(Owned, usize)>,
}

impl RemoteFreer {
    fn new(homes: Vec<Home>, capacity: u32) -> Self {
        Self {
            homes,
            capacity,
            batch: None,
        }
    }

    /// Frees `addr`, whose home is `homes[home]`.
    fn free(&mut self, addr: usize, home: usize) {
        if self.batch.as_ref().is_some_and(|(_, h)| *h != home) {
            self.send();
        }
        let id = self.homes[home].node.id;
        let capacity = self.capacity;
        let (batch, _) = self
            .batch
            .get_or_insert_with(|| (Owned::new(id, capacity), home));
        assert!(batch.sheaf().push(object(addr)), "remote batch overflow");
        if batch.sheaf().len >= batch.sheaf().capacity {
            self.send();
        }
    }

    fn send(&mut self) {
        let Some((mut batch, home_index)) = self.batch.take() else {
            return;
        };
        let home = &self.homes[home_index];
        let count = batch.sheaf().len;
        if count > 0 {
            home.handed_over.fetch_add(u64::from(count), Relaxed);
            if batch.sheaf().len == batch.sheaf().capacity {
                let mut barn = home.node.barn.lock().unwrap();
                // SAFETY: owned, non-empty, objects of the barn's node and
                // class.
                let refused = unsafe { barn.put_full(batch.into_barn()) };
                // As `send_remote` does: under the same lock, trade the
                // batch for one of the barn's empty sheaves.
                let next = if refused.is_ok() {
                    barn.take_empty()
                } else {
                    None
                };
                checked(&barn);
                drop(barn);
                match refused {
                    Ok(()) => {
                        if let Some(empty) = next {
                            // SAFETY: the barn handed the empty sheaf over.
                            let empty = unsafe { Owned::from_barn(empty) };
                            self.batch = Some((empty, home_index));
                        }
                        return;
                    }
                    // SAFETY: the barn refused the sheaf.
                    Err(refused) => batch = unsafe { Owned::from_barn(refused) },
                }
            }
            let held = batch.held();
            home.node.flush_to_slabs(&held);
            batch.sheaf().len = 0;
        }
        batch.give_to_pool();
    }
}

/// Two threads of other nodes (A and C) free objects whose home is node B,
/// in batches of two, while B's owner allocates from B's barn, which starts
/// one short of its full limit: each full batch lands on the full stack or,
/// when the stack is at its limit, in B's slabs. A's thread also frees one
/// object of node D between two of B, which sends its batch for D (partial,
/// so to D's slabs) early; C's thread exits with a partial batch (to B's
/// slabs).
#[test]
fn alien_free_handoff() {
    const CAPACITY: u32 = 2;
    check("alien_free_handoff", None, || {
        let b = node_b();
        let d = NodeId::new(3).expect("node 3 exists");
        // Objects 0..9 seed B's barn; A frees 9, 10, 11 (home D), 12, 13;
        // C frees 14, 15, 16.
        let seeded = objects(0, BARN_FULL_MAX as usize - 1);
        let node_b = Arc::new(Node::new(b, Vec::new()));
        let node_d = Arc::new(Node::new(d, Vec::new()));
        let seed = seeded
            .iter()
            .map(|&addr| Owned::filled(b, CAPACITY, &[addr]))
            .collect();
        node_b.seed_barn(seed, 0, CAPACITY);
        let a_to_b = Arc::new(AtomicU64::new(0));
        let a_to_d = Arc::new(AtomicU64::new(0));
        let c_to_b = Arc::new(AtomicU64::new(0));

        let mut from_a = RemoteFreer::new(
            vec![
                Home {
                    node: Arc::clone(&node_b),
                    handed_over: Arc::clone(&a_to_b),
                },
                Home {
                    node: Arc::clone(&node_d),
                    handed_over: Arc::clone(&a_to_d),
                },
            ],
            CAPACITY,
        );
        let mut from_c = RemoteFreer::new(
            vec![Home {
                node: Arc::clone(&node_b),
                handed_over: Arc::clone(&c_to_b),
            }],
            CAPACITY,
        );
        let a = objects(9, 5);
        let thread_a = thread::spawn(move || {
            for (addr, home) in a.into_iter().zip([0, 0, 1, 0, 0]) {
                from_a.free(addr, home);
            }
            // Thread exit: whatever is batched is handed over too.
            from_a.send();
            assert!(from_a.batch.is_none());
        });
        let c = objects(14, 3);
        let thread_c = thread::spawn(move || {
            for addr in c {
                from_c.free(addr, 0);
            }
            from_c.send();
            assert!(from_c.batch.is_none());
        });

        let mut owner = Worker::new(
            Arc::clone(&node_b),
            Capacity::Fixed(CAPACITY),
            Owned::new(b, CAPACITY),
            Owned::new(b, CAPACITY),
        );
        // One or two exchanges at B's barn (a seeded sheaf holds one object,
        // a remote batch two).
        owner.alloc();
        owner.alloc();
        thread_a.join().unwrap();
        thread_c.join().unwrap();

        assert_eq!(a_to_b.load(Relaxed), 4);
        assert_eq!(a_to_d.load(Relaxed), 1);
        assert_eq!(c_to_b.load(Relaxed), 3);
        let mut found = node_b.drain();
        found.extend(owner.objects());
        let mut expected = objects(0, 17);
        expected.retain(|&addr| addr != objects(11, 1)[0]);
        assert_exactly_once(found, expected);
        assert_exactly_once(node_d.drain(), objects(11, 1));
    });
}

// ---------------------------------------------------------------------------
// Model 3: live capacity change
// ---------------------------------------------------------------------------

/// A worker frees and allocates (each exchange applies the capacity it
/// reads) while another thread stores each of `stores` in turn; with
/// `producer`, a third thread, also reading the capacity, frees into the
/// same barn (handing over a full sheaf of whatever capacity it saw). The
/// barn starts with one full sheaf of the old capacity, so a sheaf taken
/// from it is resized when installed. Once the last store happened-before
/// one more exchange of the worker, its main and spare have the last
/// capacity.
fn live_capacity(
    name: &str,
    bound: Option<usize>,
    from: u32,
    stores: &'static [u32],
    producer: bool,
) {
    check(name, bound, move || {
        let id = NodeId::ZERO;
        let n = from as usize;
        // Worker: main 0..n, spare n..2n full, object 2n in use.
        // Barn: one sheaf 2n+1..3n+1. Producer: main and spare
        // 3n+1..5n+1 full, object 5n+1 in use.
        let node = Arc::new(Node::new(id, Vec::new()));
        node.seed_barn(
            vec![Owned::filled(id, from, &objects(2 * n + 1, n))],
            0,
            from,
        );
        let capacity = Arc::new(AtomicU32::new(from));
        let mut worker = Worker::new(
            Arc::clone(&node),
            Capacity::Live(Arc::clone(&capacity)),
            Owned::filled(id, from, &objects(0, n)),
            Owned::filled(id, from, &objects(n, n)),
        );
        worker.in_use = objects(2 * n, 1);
        let producer = producer.then(|| {
            let mut producer = Worker::new(
                Arc::clone(&node),
                Capacity::Live(Arc::clone(&capacity)),
                Owned::filled(id, from, &objects(3 * n + 1, n)),
                Owned::filled(id, from, &objects(4 * n + 1, n)),
            );
            producer.in_use = objects(5 * n + 1, 1);
            thread::spawn(move || {
                producer.free_last();
                producer
            })
        });
        let total = if producer.is_some() {
            5 * n + 2
        } else {
            3 * n + 1
        };

        let setter = thread::spawn(move || {
            for &to in stores {
                capacity.store(to, Relaxed);
            }
        });
        // Free into full sheaves (an exchange), then allocate through main,
        // the spare and the barn.
        worker.free_last();
        for _ in 0..2 * n + 1 {
            worker.alloc();
        }
        setter.join().unwrap();
        let producer = producer.map(|producer| producer.join().unwrap());

        let last = *stores.last().expect("at least one store");
        worker.alloc_until_exchange();
        for sheaf in [worker.main.as_mut(), worker.spare.as_mut()]
            .into_iter()
            .flatten()
        {
            assert_eq!(
                sheaf.sheaf().capacity,
                last,
                "old capacity after an exchange"
            );
        }
        let mut found = node.drain();
        found.extend(worker.objects());
        if let Some(mut producer) = producer {
            found.extend(producer.objects());
        }
        assert_exactly_once(found, objects(0, total));
    });
}

#[test]
fn live_capacity_shrink() {
    live_capacity("live_capacity_shrink", None, 3, &[1, 2], false);
}

#[test]
fn live_capacity_grow() {
    live_capacity("live_capacity_grow", None, 1, &[3], false);
}

#[test]
fn live_capacity_with_producer() {
    live_capacity("live_capacity_with_producer", Some(4), 2, &[1], true);
}
