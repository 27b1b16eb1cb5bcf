//! A bounded single-producer single-consumer ring of object pointers, built
//! from atomics only.
//!
//! `Ring::split` hands out the one `Producer` and the one `Consumer`, so the
//! single-producer/single-consumer rule is enforced by the borrow checker.
//! The producer publishes a slot with a `Release` store of `tail`; the
//! consumer's `Acquire` load of `tail` then sees the slot (and the object's
//! contents written before it). Symmetrically for `head`. Each side keeps a
//! cached copy of the other's index and reloads it only when the ring looks
//! full (or empty), so the shared cache lines move rarely.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Slots in the ring (a power of two).
pub const CAPACITY: usize = 1024;

/// A value alone on its cache line (no false sharing between indices).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// The ring.
#[derive(Debug)]
pub struct Ring {
    slots: Box<[AtomicPtr<u8>]>,
    /// Next slot the consumer reads (only the consumer stores it).
    head: Padded<AtomicUsize>,
    /// Next slot the producer writes (only the producer stores it).
    tail: Padded<AtomicUsize>,
}

/// The sending side.
#[derive(Debug)]
pub struct Producer<'a> {
    ring: &'a Ring,
    tail: usize,
    head_seen: usize,
}

/// The receiving side.
#[derive(Debug)]
pub struct Consumer<'a> {
    ring: &'a Ring,
    head: usize,
    tail_seen: usize,
}

impl Ring {
    /// An empty ring.
    pub fn new() -> Self {
        Self {
            slots: (0..CAPACITY)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            head: Padded::default(),
            tail: Padded::default(),
        }
    }

    /// The two ends.
    pub fn split(&mut self) -> (Producer<'_>, Consumer<'_>) {
        let ring = &*self;
        let index = ring.head.0.load(Ordering::Relaxed);
        (
            Producer {
                ring,
                tail: index,
                head_seen: index,
            },
            Consumer {
                ring,
                head: index,
                tail_seen: index,
            },
        )
    }
}

impl Default for Ring {
    fn default() -> Self {
        Self::new()
    }
}

impl Producer<'_> {
    /// Appends `object`; returns false (and keeps nothing) if the ring is full.
    #[inline]
    pub fn push(&mut self, object: *mut u8) -> bool {
        if self.tail.wrapping_sub(self.head_seen) == CAPACITY {
            self.head_seen = self.ring.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_seen) == CAPACITY {
                return false;
            }
        }
        self.ring.slots[self.tail % CAPACITY].store(object, Ordering::Relaxed);
        self.tail = self.tail.wrapping_add(1);
        self.ring.tail.0.store(self.tail, Ordering::Release);
        true
    }
}

impl Consumer<'_> {
    /// Takes the oldest object, or `None` if the ring is empty.
    #[inline]
    pub fn pop(&mut self) -> Option<*mut u8> {
        if self.head == self.tail_seen {
            self.tail_seen = self.ring.tail.0.load(Ordering::Acquire);
            if self.head == self.tail_seen {
                return None;
            }
        }
        let object = self.ring.slots[self.head % CAPACITY].load(Ordering::Relaxed);
        self.head = self.head.wrapping_add(1);
        self.ring.head.0.store(self.head, Ordering::Release);
        Some(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_bounds() {
        let mut ring = Ring::new();
        let (mut producer, mut consumer) = ring.split();
        for round in 0..3usize {
            for i in 0..CAPACITY {
                assert!(producer.push(std::ptr::without_provenance_mut(round * CAPACITY + i + 1)));
            }
            assert!(!producer.push(std::ptr::without_provenance_mut(1)));
            for i in 0..CAPACITY {
                assert_eq!(
                    consumer.pop(),
                    Some(std::ptr::without_provenance_mut(round * CAPACITY + i + 1))
                );
            }
            assert_eq!(consumer.pop(), None);
        }
    }

    #[test]
    fn crosses_threads() {
        let mut ring = Ring::new();
        let (mut producer, mut consumer) = ring.split();
        let n = 100_000usize;
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 1..=n {
                    while !producer.push(std::ptr::without_provenance_mut(i)) {
                        std::hint::spin_loop();
                    }
                }
            });
            for i in 1..=n {
                let got = loop {
                    if let Some(p) = consumer.pop() {
                        break p;
                    }
                    std::hint::spin_loop();
                };
                assert_eq!(got as usize, i);
            }
        });
    }
}
