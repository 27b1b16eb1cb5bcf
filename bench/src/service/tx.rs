//! TX completion: buffers allocated by one thread are freed by another.
//!
//! A sending thread allocates each packet as a 256-byte head and a
//! 2112-byte data buffer, writes their headers and queues them (an SPSC
//! ring stands in for the NIC's TX ring); the thread that handles TX
//! completions checks and frees them. Every free is alien (remote).
//!
//! * `1→1`: one sender, one completer.
//! * `N→N`: N threads, each sends to the next and completes what the
//!   previous one sent (every CPU both transmits and completes, as with
//!   per-CPU TX queues whose completions land on another CPU).
//! * pinned `1→1` (the NUMA alien-path benchmark): sender and completer
//!   pinned to given CPUs; with `SHEAFALLOC_NUMA_NODES=2` CPUs 0 and 1 are
//!   two simulated nodes, so every free crosses nodes.
//!
//! Reports million objects freed per second.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::global::Global;
use super::object;
use super::os;
use super::progress::{Budget, Progress, Window};
use crate::sync::ring::{Consumer, Producer, Ring};
use crate::sync::spin::Backoff;

/// Objects queued per burst (a NAPI budget).
pub const BURST: usize = 64;
/// Buffer sizes, alternating: head, data.
pub const SIZES: [usize; 2] = [256, 2112];

/// Where each thread of a pinned run ran.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Sender: CPU, and allocator node where the allocator tells.
    pub sender: (Option<usize>, Option<usize>),
    /// Completer: CPU, and allocator node.
    pub completer: (Option<usize>, Option<usize>),
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The measurement.
    pub window: Window,
    /// Objects whose tag was wrong (must be 0).
    pub corrupt: u64,
    /// Thread placement (pinned runs).
    pub placement: Placement,
}

/// One end's "I am done sending" signal with the count sent.
#[derive(Debug, Default)]
struct Done {
    flag: AtomicBool,
    sent: AtomicU64,
}

impl Done {
    fn set(&self, sent: u64) {
        self.sent.store(sent, Ordering::Relaxed);
        self.flag.store(true, Ordering::Release);
    }
    fn get(&self) -> Option<u64> {
        self.flag
            .load(Ordering::Acquire)
            .then(|| self.sent.load(Ordering::Relaxed))
    }
}

/// Sequence number `seq`'s buffer size.
fn size_of_seq(seq: u64) -> usize {
    SIZES[(seq % 2) as usize]
}

/// One sender and one completer, optionally pinned to `(sender, completer)`
/// CPUs.
pub fn one_to_one(budget: &Budget, pins: Option<(usize, usize)>, global: Global) -> Outcome {
    let progress = Progress::new(1);
    let done = Done::default();
    let mut ring = Ring::new();
    let (mut tx, mut rx) = ring.split();
    let (progress, done) = (&progress, &done);
    let (window, sender, (corrupt, completer)) = std::thread::scope(|s| {
        let sender = s.spawn(move || {
            pin(pins.map(|p| p.0));
            let mut seq = 0u64;
            while !progress.stopped() {
                for _ in 0..BURST {
                    push(&mut tx, object::new(size_of_seq(seq), seq as u8));
                    seq += 1;
                }
            }
            done.set(seq);
            placement(global)
        });
        let completer = s.spawn(move || {
            pin(pins.map(|p| p.1));
            let mut seq = 0u64;
            let corrupt = complete(&mut rx, &mut seq, progress, 0, || done.get());
            (corrupt, placement(global))
        });
        let window = progress.measure(budget);
        let sender = sender.join().expect("the sender does not panic");
        (
            window,
            sender,
            completer.join().expect("the completer does not panic"),
        )
    });
    Outcome {
        window,
        corrupt,
        placement: Placement { sender, completer },
    }
}

/// N threads in a ring: each sends to the next, completes the previous.
pub fn n_to_n(budget: &Budget, n: usize) -> Outcome {
    let progress = Progress::new(n);
    let done: Vec<Done> = (0..n).map(|_| Done::default()).collect();
    let mut rings: Vec<Ring> = (0..n).map(|_| Ring::new()).collect();
    let (mut txs, mut rxs): (Vec<_>, Vec<_>) = rings.iter_mut().map(Ring::split).unzip();
    // Thread i completes ring i-1.
    rxs.rotate_right(1);
    let (progress, done) = (&progress, &done[..]);
    let (window, corrupt) = std::thread::scope(|s| {
        let workers: Vec<_> = txs
            .drain(..)
            .zip(rxs.drain(..))
            .enumerate()
            .map(|(i, (tx, rx))| s.spawn(move || exchange(i, n, tx, rx, progress, done)))
            .collect();
        let window = progress.measure(budget);
        let corrupt: u64 = workers
            .into_iter()
            .map(|w| w.join().expect("workers do not panic"))
            .sum();
        (window, corrupt)
    });
    Outcome {
        window,
        corrupt,
        placement: Placement::default(),
    }
}

/// Worker `i` of `n_to_n`; returns the corrupt objects it saw.
fn exchange(
    i: usize,
    n: usize,
    mut tx: Producer<'_>,
    mut rx: Consumer<'_>,
    progress: &Progress,
    done: &[Done],
) -> u64 {
    let (mut sent, mut completed, mut corrupt) = (0u64, 0u64, 0u64);
    let previous = &done[(i + n - 1) % n];
    // A packet the full ring refused, sent first next time.
    let mut pending: Option<*mut u8> = None;
    let mut backoff = Backoff::new();
    while !progress.stopped() {
        let before = (sent, completed);
        for _ in 0..BURST {
            let packet = pending.unwrap_or_else(|| object::new(size_of_seq(sent), sent as u8));
            if !tx.push(packet) {
                pending = Some(packet);
                break;
            }
            pending = None;
            sent += 1;
        }
        for _ in 0..4 * BURST {
            match rx.pop() {
                Some(packet) => corrupt += check_free(packet, &mut completed),
                None => break,
            }
        }
        progress.record(i, completed);
        // Neither side could move: let the other thread run.
        if (sent, completed) == before {
            backoff.snooze();
        } else {
            backoff = Backoff::new();
        }
    }
    if let Some(packet) = pending {
        // SAFETY: never published; allocated by this thread.
        unsafe { object::free(packet) };
    }
    done[i].set(sent);
    corrupt + complete(&mut rx, &mut completed, progress, i, || previous.get())
}

/// Completes packets until the sender has said it is done and all it sent
/// has been freed; returns the corrupt ones.
fn complete(
    rx: &mut Consumer<'_>,
    seq: &mut u64,
    progress: &Progress,
    worker: usize,
    sender_done: impl Fn() -> Option<u64>,
) -> u64 {
    let mut corrupt = 0;
    let mut backoff = Backoff::new();
    loop {
        match rx.pop() {
            Some(packet) => {
                corrupt += check_free(packet, seq);
                if *seq % BURST as u64 == 0 {
                    progress.record(worker, *seq);
                }
                backoff = Backoff::new();
            }
            None => {
                if sender_done().is_some_and(|sent| sent == *seq) {
                    progress.record(worker, *seq);
                    return corrupt;
                }
                backoff.snooze();
            }
        }
    }
}

/// Checks packet number `seq`, frees it, advances `seq`; 1 if corrupt.
#[inline]
fn check_free(packet: *mut u8, seq: &mut u64) -> u64 {
    // SAFETY: the sender wrote the header before publishing the packet
    // through the ring (Release/Acquire); only this thread holds it now and
    // frees it once.
    let corrupt = unsafe { object::tag(packet) } != *seq as u8;
    // SAFETY: as above.
    unsafe { object::free(packet) };
    *seq += 1;
    u64::from(corrupt)
}

/// Queues `packet`, waiting while the ring is full.
#[inline]
fn push(tx: &mut Producer<'_>, packet: *mut u8) {
    let mut backoff = Backoff::new();
    while !tx.push(packet) {
        backoff.snooze();
    }
}

/// Pins the calling thread to `cpu`, if given.
fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        if let Err(error) = os::pin_to_cpu(cpu) {
            eprintln!("warning: {error}");
        }
    }
}

/// Where the calling thread runs now: CPU, and its allocator node (read
/// after the work, so it is the node the thread allocated on).
fn placement(global: Global) -> (Option<usize>, Option<usize>) {
    (os::current_cpu(), global.thread_node())
}
