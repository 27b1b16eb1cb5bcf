//! Mixed sizes with hand-off between threads, after Larson's server
//! benchmark.
//!
//! Each of two threads keeps 1024 live objects of random sizes, uniform in
//! 16 B..8 KiB. A step replaces a random one: free it, allocate a new one
//! and write its header. One new object in four is handed to the other
//! thread instead (through an SPSC ring), which frees it at its next
//! check, as a server's worker frees what its acceptor allocated. Reports
//! million allocations (each eventually freed) per second.

use std::sync::atomic::{AtomicBool, Ordering};

use super::object;
use super::progress::{Budget, Progress, Window};
use super::rng::Rng;
use crate::sync::ring::{Consumer, Producer, Ring};
use crate::sync::spin::Backoff;

/// Threads.
pub const THREADS: usize = 2;
/// Live objects per thread.
pub const SLOTS: usize = 1024;
/// Smallest and largest object size.
pub const SIZES: (usize, usize) = (16, 8192);
/// One new object in `HANDOFF` goes to the other thread.
pub const HANDOFF: u64 = 4;
/// Steps between two checks of the incoming ring.
const CHECK_EVERY: u64 = 64;

/// Runs the workload.
pub fn run(budget: &Budget) -> Window {
    let progress = Progress::new(THREADS);
    let done: Vec<AtomicBool> = (0..THREADS).map(|_| AtomicBool::new(false)).collect();
    let mut rings: Vec<Ring> = (0..THREADS).map(|_| Ring::new()).collect();
    let (mut txs, mut rxs): (Vec<_>, Vec<_>) = rings.iter_mut().map(Ring::split).unzip();
    rxs.rotate_right(1);
    let (progress, done) = (&progress, &done[..]);
    std::thread::scope(|s| {
        for (i, (tx, rx)) in txs.drain(..).zip(rxs.drain(..)).enumerate() {
            s.spawn(move || worker(i, tx, rx, progress, done));
        }
        progress.measure(budget)
    })
}

fn worker(
    i: usize,
    mut tx: Producer<'_>,
    mut rx: Consumer<'_>,
    progress: &Progress,
    done: &[AtomicBool],
) {
    let mut rng = Rng::new(0x5eed + i as u64);
    let mut slots: Vec<*mut u8> = (0..SLOTS)
        .map(|_| object::new(rng.range(SIZES.0, SIZES.1), 0))
        .collect();
    let mut allocations = 0u64;
    while !progress.stopped() {
        for _ in 0..CHECK_EVERY {
            let r = rng.next_u64();
            let slot = &mut slots[(r % SLOTS as u64) as usize];
            if !slot.is_null() {
                // SAFETY: every non-null slot holds a live object of ours.
                unsafe { object::free(*slot) };
            }
            let new = object::new(rng.range(SIZES.0, SIZES.1), r as u8);
            allocations += 1;
            *slot = if (r >> 32) % HANDOFF == 0 && tx.push(new) {
                std::ptr::null_mut()
            } else {
                new
            };
        }
        drain(&mut rx);
        progress.record(i, allocations);
    }
    done[i].store(true, Ordering::Release);
    // Free what the other thread still sends, until it is done.
    let previous = &done[(i + THREADS - 1) % THREADS];
    let mut backoff = Backoff::new();
    while !previous.load(Ordering::Acquire) {
        drain(&mut rx);
        backoff.snooze();
    }
    drain(&mut rx);
    for object in slots.into_iter().filter(|o| !o.is_null()) {
        // SAFETY: live objects of ours, freed once.
        unsafe { object::free(object) };
    }
}

/// Frees every object waiting in `rx`.
fn drain(rx: &mut Consumer<'_>) {
    while let Some(object) = rx.pop() {
        // SAFETY: the other thread published the object (Release/Acquire)
        // and gave it up; it is freed once, here.
        unsafe { object::free(object) };
    }
}
