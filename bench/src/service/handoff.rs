//! Cross-thread hand-off of packet buffers through a bounded lock-free
//! MPMC ring: what a network service does when the thread that receives a
//! packet is not the one that finishes with it.
//!
//! Producer threads allocate packets of the four sizes of
//! [`packet::SIZES`] (64, 256, 1500 and 2112 B, drawn at random from a
//! fixed seed per producer, so every allocator gets the same sequence),
//! write their header and trailer and push them into one 1024-slot
//! [`MpmcRing`]; consumer threads pop them, check them and free them. No
//! thread does both, so every free happens on a thread other than the one
//! that allocated.
//!
//! A [`Shape`] says how many threads of each kind, and how packets travel:
//!
//! * steady (`burst` 1..=1): a producer pushes each packet as soon as it
//!   is written; a consumer frees each one as soon as it pops it;
//! * bursty (`burst` 64..=256): a producer allocates a whole burst (its
//!   length drawn per burst), then pushes it; a consumer pops up to the
//!   largest burst at once, then frees them all. The ring holds several
//!   bursts, so several are in flight at any time.
//!
//! The window counts packets freed. Producers and consumers each fold
//! every packet into a [`Checksum`]; the run is rejected unless the two
//! agree and every packet arrived intact.
//!
//! Each side also counts its waits: a producer's pushes that found the ring
//! full, a consumer's pops that found it empty while producers ran. They
//! say which side set the pace. A steady hand-off settles either with the
//! ring nearly empty (the producer is the slower side; the consumer reads
//! each packet just after it was written) or nearly full (the consumer is;
//! the producer polls the slot the consumer is about to free, and the two
//! contend for that line), and the two states run at different speeds
//! with the same allocator.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::packet::{self, Checksum};
use super::progress::{Budget, Progress, Window};
use super::rng::Rng;
use super::strides::Strides;
use crate::sync::mpmc::MpmcRing;
use crate::sync::spin::Backoff;

/// The longest burst any shape uses.
pub const MAX_BURST: usize = 256;

/// Who hands off to whom, and in what batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Threads that allocate.
    pub producers: usize,
    /// Threads that free.
    pub consumers: usize,
    /// Smallest and largest burst (`1..=1`: one packet at a time).
    pub burst: (usize, usize),
}

/// One producer, one consumer, one packet at a time.
pub const ONE_TO_ONE: Shape = Shape {
    producers: 1,
    consumers: 1,
    burst: (1, 1),
};

/// Four producers, four consumers, one packet at a time.
pub const FOUR_TO_FOUR: Shape = Shape {
    producers: 4,
    consumers: 4,
    burst: (1, 1),
};

/// Two producers sending bursts of 64..=256 packets to two consumers.
pub const BURSTY: Shape = Shape {
    producers: 2,
    consumers: 2,
    burst: (64, MAX_BURST),
};

/// The outcome of a run.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Packets freed inside the window.
    pub window: Window,
    /// What the producers sent (whole run).
    pub sent: Checksum,
    /// What the consumers received and freed (whole run).
    pub received: Checksum,
    /// Packets whose header or trailer was wrong.
    pub corrupt: u64,
    /// Waits, whole run (see the module's text).
    pub waits: Waits,
    /// The producers' packets' address order in the window (`strides`).
    pub strides: Strides,
}

/// How often each side found the ring unable to serve it (whole run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    /// Producers' pushes that found the ring full.
    pub full: u64,
    /// Consumers' pops that found the ring empty while producers ran.
    pub empty: u64,
}

impl Outcome {
    /// An error text unless every packet arrived once, intact.
    pub fn verify(&self) -> Result<(), String> {
        if self.corrupt != 0 {
            return Err(format!("{} packets arrived corrupt", self.corrupt));
        }
        if self.sent != self.received {
            return Err(format!(
                "sent {} packets (hash {:#x}), received {} (hash {:#x})",
                self.sent.packets, self.sent.hash, self.received.packets, self.received.hash
            ));
        }
        Ok(())
    }
}

/// Runs the hand-off in `shape`.
pub fn run(shape: Shape, budget: &Budget) -> Outcome {
    assert!(shape.producers > 0 && shape.consumers > 0);
    assert!(1 <= shape.burst.0 && shape.burst.0 <= shape.burst.1 && shape.burst.1 <= MAX_BURST);
    let ring = MpmcRing::new();
    let progress = Progress::new(shape.consumers);
    let producing = AtomicUsize::new(shape.producers);
    let (ring, progress, producing) = (&ring, &progress, &producing);
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..shape.producers)
            .map(|id| s.spawn(move || produce(id as u32, shape, ring, progress, producing)))
            .collect();
        let consumers: Vec<_> = (0..shape.consumers)
            .map(|id| s.spawn(move || consume(id, shape, ring, progress, producing)))
            .collect();
        let window = progress.measure(budget);
        let (mut sent, mut waits) = (Checksum::default(), Waits::default());
        let mut strides = Strides::default();
        for producer in producers {
            let (packets, full, order) = producer.join().expect("producers do not panic");
            sent.merge(packets);
            waits.full += full;
            strides.merge(order);
        }
        let (mut received, mut corrupt) = (Checksum::default(), 0);
        for consumer in consumers {
            let (seen, bad, empty) = consumer.join().expect("consumers do not panic");
            received.merge(seen);
            corrupt += bad;
            waits.empty += empty;
        }
        Outcome {
            window,
            sent,
            received,
            corrupt,
            waits,
            strides,
        }
    })
}

/// Producer `id`: allocates and pushes bursts until the window closes;
/// returns the checksum of what it sent, its pushes that found the ring
/// full and its packets' address order in the window.
fn produce(
    id: u32,
    shape: Shape,
    ring: &MpmcRing,
    progress: &Progress,
    producing: &AtomicUsize,
) -> (Checksum, u64, Strides) {
    let mut rng = Rng::new(0x4a4d_0ff0 + u64::from(id));
    let mut burst = [std::ptr::null_mut::<u8>(); MAX_BURST];
    let mut sent = Checksum::default();
    let (mut sequence, mut full) = (0u64, 0u64);
    let mut strides = Strides::default();
    while !progress.stopped() {
        let len = rng.range(shape.burst.0, shape.burst.1);
        let in_window = progress.opened();
        for slot in &mut burst[..len] {
            let which = rng.range(0, packet::SIZES.len() - 1);
            let size = packet::SIZES[which];
            *slot = packet::new(size, id, sequence);
            if in_window {
                strides.see(which, *slot as usize);
            }
            sent.add(size, id, sequence);
            sequence += 1;
        }
        for &packet in &burst[..len] {
            // Consumers drain until every producer is done, so this ends.
            let mut backoff = Backoff::new();
            while !ring.push(packet) {
                full += 1;
                backoff.snooze();
            }
        }
    }
    producing.fetch_sub(1, Ordering::Release);
    (sent, full, strides)
}

/// Consumer `id`: pops up to a burst, checks and frees it, until every
/// producer is done and the ring is empty; returns its checksum, the
/// corrupt packets it saw and its pops that found the ring empty while
/// producers ran.
fn consume(
    id: usize,
    shape: Shape,
    ring: &MpmcRing,
    progress: &Progress,
    producing: &AtomicUsize,
) -> (Checksum, u64, u64) {
    let mut batch = [std::ptr::null_mut::<u8>(); MAX_BURST];
    let (mut received, mut corrupt, mut freed) = (Checksum::default(), 0u64, 0u64);
    let mut empty = 0u64;
    let mut backoff = Backoff::new();
    loop {
        let mut len = 0;
        while len < shape.burst.1 {
            match ring.pop() {
                Some(packet) => {
                    batch[len] = packet;
                    len += 1;
                }
                None => break,
            }
        }
        if len == 0 {
            // Acquire: every push of a producer that has finished is
            // visible, so an empty ring now stays empty.
            if producing.load(Ordering::Acquire) == 0 {
                match ring.pop() {
                    Some(packet) => {
                        batch[0] = packet;
                        len = 1;
                    }
                    None => return (received, corrupt, empty),
                }
            } else {
                empty += 1;
                backoff.snooze();
                continue;
            }
        }
        backoff = Backoff::new();
        for &packet in &batch[..len] {
            // SAFETY: the producer wrote the packet before pushing it
            // (the ring's Release/Acquire); popping took it out of the
            // ring, so only this thread holds it, and it is freed once.
            let seen = unsafe { packet::check_and_free(packet) };
            corrupt += u64::from(!seen.intact);
            received.add(seen.size, seen.producer, seen.sequence);
        }
        freed += len as u64;
        progress.record(id, freed);
    }
}
