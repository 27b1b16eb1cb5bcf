//! A bounded multi-producer multi-consumer ring of object pointers, lock
//! free (Dmitry Vyukov's bounded MPMC queue), built from atomics only.
//!
//! Each slot carries a sequence number that says whose turn it is: a slot
//! at position `p` is free for the producer that claims `p` when its
//! sequence is `p`, and full for the consumer that claims `p` when its
//! sequence is `p + 1`. Producers claim positions by a compare-and-swap on
//! `tail`, consumers on `head`; after writing (or reading) the slot the
//! claimant publishes it by a `Release` store of the slot's sequence, which
//! the other side reads with `Acquire` — so an object's contents, written
//! before it was pushed, are visible to the thread that pops it.
//!
//! Unlike the SPSC ring (`ring.rs`), every push and pop is a CAS on a line
//! shared by all producers (or all consumers), as in a real multi-queue
//! hand-off between CPUs.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Slots in the ring (a power of two).
pub const CAPACITY: usize = 1024;

/// A value alone on its cache line (no false sharing between the indices).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// One slot: whose turn it is, and the object.
#[derive(Debug)]
struct Slot {
    /// `p` (free for the producer of position `p`) or `p + 1` (full, for
    /// the consumer of position `p`), where `p ≡ index (mod CAPACITY)`.
    sequence: AtomicUsize,
    /// The object, valid while the slot is full.
    object: AtomicPtr<u8>,
}

/// The ring, shared by reference between every producer and consumer.
///
/// Invariant: `head <= tail <= head + CAPACITY` (positions claimed by
/// consumers never pass those claimed by producers, and producers never run
/// a lap ahead).
#[derive(Debug)]
pub struct MpmcRing {
    slots: Box<[Slot]>,
    /// Next position a consumer claims.
    head: Padded<AtomicUsize>,
    /// Next position a producer claims.
    tail: Padded<AtomicUsize>,
}

impl MpmcRing {
    /// An empty ring.
    pub fn new() -> Self {
        Self {
            slots: (0..CAPACITY)
                .map(|i| Slot {
                    sequence: AtomicUsize::new(i),
                    object: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect(),
            head: Padded::default(),
            tail: Padded::default(),
        }
    }

    /// Appends `object`; returns false (and keeps nothing) if the ring is
    /// full.
    #[inline]
    pub fn push(&self, object: *mut u8) -> bool {
        let mut position = self.tail.0.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position % CAPACITY];
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position) as isize;
            if lag == 0 {
                match self.tail.0.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        slot.object.store(object, Ordering::Relaxed);
                        slot.sequence
                            .store(position.wrapping_add(1), Ordering::Release);
                        return true;
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                // The slot still holds the object of the previous lap.
                return false;
            } else {
                position = self.tail.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest object, or `None` if the ring is empty.
    #[inline]
    pub fn pop(&self) -> Option<*mut u8> {
        let mut position = self.head.0.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position % CAPACITY];
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position.wrapping_add(1)) as isize;
            if lag == 0 {
                match self.head.0.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let object = slot.object.load(Ordering::Relaxed);
                        slot.sequence
                            .store(position.wrapping_add(CAPACITY), Ordering::Release);
                        return Some(object);
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                // No producer has filled this position yet.
                return None;
            } else {
                position = self.head.0.load(Ordering::Relaxed);
            }
        }
    }
}

impl Default for MpmcRing {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn token(i: usize) -> *mut u8 {
        std::ptr::without_provenance_mut(i)
    }

    #[test]
    fn keeps_order_and_bounds() {
        let ring = MpmcRing::new();
        for round in 0..3usize {
            for i in 0..CAPACITY {
                assert!(ring.push(token(round * CAPACITY + i + 1)));
            }
            assert!(!ring.push(token(1)));
            for i in 0..CAPACITY {
                assert_eq!(ring.pop(), Some(token(round * CAPACITY + i + 1)));
            }
            assert_eq!(ring.pop(), None);
        }
    }

    #[test]
    fn delivers_every_object_once_across_threads() {
        const PRODUCERS: usize = 3;
        const CONSUMERS: usize = 3;
        const EACH: usize = 50_000;
        let ring = MpmcRing::new();
        let done = AtomicBool::new(false);
        let seen: Vec<Vec<usize>> = std::thread::scope(|s| {
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let ring = &ring;
                    s.spawn(move || {
                        for i in 0..EACH {
                            while !ring.push(token(1 + p * EACH + i)) {
                                std::thread::yield_now();
                            }
                        }
                    })
                })
                .collect();
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let (ring, done) = (&ring, &done);
                    s.spawn(move || {
                        let mut got = Vec::new();
                        loop {
                            match ring.pop() {
                                Some(object) => got.push(object as usize),
                                None if done.load(Ordering::Acquire) => match ring.pop() {
                                    Some(object) => got.push(object as usize),
                                    None => return got,
                                },
                                None => std::thread::yield_now(),
                            }
                        }
                    })
                })
                .collect();
            for producer in producers {
                producer.join().unwrap();
            }
            done.store(true, Ordering::Release);
            consumers.into_iter().map(|c| c.join().unwrap()).collect()
        });
        let mut all: Vec<usize> = seen.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (1..=PRODUCERS * EACH).collect::<Vec<_>>());
        // Each consumer sees each producer's objects in that producer's order.
        for got in &seen {
            for p in 0..PRODUCERS {
                let mine: Vec<usize> = got
                    .iter()
                    .copied()
                    .filter(|&v| (v - 1) / EACH == p)
                    .collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
