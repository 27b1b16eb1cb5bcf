//! What a CPU's pops and pushes count, committed by the sections that make
//! them.
//!
//! A count kept apart from the section (the thread's, after it) costs a
//! read-modify-write of a line the section does not touch; a count inside
//! the section but outside its commit would count twice when the section
//! restarts. So each class's record ([`ClassSlots`]) keeps its counts in
//! the words the sections commit:
//!
//! * `word`: the main sheaf's length (bits 0–10), its room (capacity less
//!   length, bits 11–21) and the class's operations on this CPU, pops and
//!   pushes together (bits 22–63, modulo 2^42). A pop commits `word +
//!   POP` (length down, room up, one operation), a push `word + PUSH`
//!   (length up, room down, one operation): the one store each makes
//!   anyway. The pop tests the length's bits, the push the room's.
//! * `jumps`: the sum of the length's moves that were no pop or push (a
//!   spare swap, a replace of the main sheaf, a drain), each added by the
//!   same commit that moves the length.
//!
//! Then the length is `jumps` plus pushes less pops, so pops are
//! `(operations - (length - jumps)) / 2` and pushes `(operations +
//! (length - jumps)) / 2`. A reader loads `word` and `jumps` with one
//! aligned 16-byte load ([`load_pair`]): they are always one commit's pair,
//! and the counts it derives never go back (a reader between two stores
//! would see a swap's jump without its length, and Prometheus reads a
//! counter that falls as a restart). The drain writes the pair with one
//! aligned 16-byte store; the swap and the replace write it as the upper,
//! aligned half of their 32-byte commit, which the architecture promises
//! to be one access only for 16-byte accesses, and which the CPUs with
//! AVX write whole or in aligned 16-byte halves: were a half ever torn, a
//! reader would see one wrong sum for that read, never a fault.
//!
//! 42 bits of operations wrap after 2^42 (about 2.4 hours of one class at
//! 500 M operations a second on one CPU), so every reader rebuilds the
//! full count from the class's `operations_floor`, a count it read before
//! and raises ([`of`]): exact while something reads the class that often
//! (the statistics, the tuner's tick, a slow path of the class).

use core::sync::atomic::Ordering;

use super::{ClassSlots, CpuCache};
use crate::size_class::SizeClass;

/// The length's bits.
pub(crate) const LEN_MASK: u64 = 0x7ff;
/// The room's bits.
pub(crate) const ROOM_MASK: u64 = 0x7ff << ROOM_SHIFT;
const ROOM_SHIFT: u32 = 11;
/// The length's and the room's bits together: a main sheaf's part of the
/// word (the rest is the operations').
pub(crate) const SHEAF_MASK: u64 = LEN_MASK | ROOM_MASK;
const OPERATIONS_SHIFT: u32 = 22;
/// One operation.
const ONE: u64 = 1 << OPERATIONS_SHIFT;
/// What a pop adds: one operation, one more room, one object less.
pub(crate) const POP: u64 = ONE + (1 << ROOM_SHIFT) - 1;
/// What a push adds: one operation, one object more, one less room.
pub(crate) const PUSH: u64 = ONE - (1 << ROOM_SHIFT) + 1;
/// The operations' field counts modulo this.
const OPERATIONS_MODULUS_MASK: u64 = (1 << (64 - OPERATIONS_SHIFT)) - 1;

// A sheaf's length and room fit their 11 bits, and both deltas are
// positive 32-bit immediates (the sections add them with one `add`).
const _: () = assert!(crate::sheaf::SHEAF_CAPACITY_MAX as u64 <= LEN_MASK);
const _: () = assert!(POP < i32::MAX as u64);
const _: () = assert!(PUSH < i32::MAX as u64);

/// The main sheaf's length in `word`.
pub(crate) const fn len(word: u64) -> u32 {
    (word & LEN_MASK) as u32
}

/// The main sheaf's capacity in `word` (its length and its room).
pub(crate) const fn capacity(word: u64) -> u32 {
    // Cannot wrap: two 11-bit fields.
    len(word).wrapping_add(((word & ROOM_MASK) >> ROOM_SHIFT) as u32)
}

/// The sheaf's part of a word for a main sheaf of `len` objects and
/// `capacity` (`len <= capacity <= SHEAF_CAPACITY_MAX`).
pub(crate) const fn sheaf_bits(len: u32, capacity: u32) -> u64 {
    // Masked, so that broken arguments cannot reach the operations' bits
    // (nor panic: the allocator must not).
    (len as u64 & LEN_MASK) | ((capacity.wrapping_sub(len) as u64) << ROOM_SHIFT) & ROOM_MASK
}

/// The word and the jumps after the main sheaf is replaced by one of `len`
/// objects and `capacity` (what the replacing commits compute; a drain
/// uses it as it is).
pub(crate) const fn replaced(word: u64, jumps: u64, len: u32, capacity: u32) -> (u64, u64) {
    let moved = (len as u64).wrapping_sub(self::len(word) as u64);
    (
        (word & !SHEAF_MASK) | sheaf_bits(len, capacity),
        jumps.wrapping_add(moved),
    )
}

/// Allocations and frees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) allocs: u64,
    pub(crate) frees: u64,
}

impl Counts {
    /// Both counts added.
    pub(crate) fn plus(self, other: Self) -> Self {
        Self {
            allocs: self.allocs.wrapping_add(other.allocs),
            frees: self.frees.wrapping_add(other.frees),
        }
    }

    /// Allocations and frees together.
    pub(crate) fn operations(self) -> u64 {
        self.allocs.wrapping_add(self.frees)
    }
}

/// The counts in a word and its jumps, with `operations` the full count
/// the word's field stands for.
const fn split(word: u64, jumps: u64, operations: u64) -> Counts {
    // Pushes less pops: the length less the jumps (modulo 2^64).
    let net = (len(word) as u64).wrapping_sub(jumps);
    Counts {
        allocs: operations.wrapping_sub(net) / 2,
        frees: operations.wrapping_add(net) / 2,
    }
}

/// The full count of operations whose low 42 bits are the word's field,
/// from a full count `floor` read before the word.
const fn full_operations(word: u64, floor: u64) -> u64 {
    let since = (word >> OPERATIONS_SHIFT).wrapping_sub(floor) & OPERATIONS_MODULUS_MASK;
    floor.wrapping_add(since)
}

/// The counts of `class` on the CPU of `cache`, now; raises the class's
/// floor.
pub(crate) fn of(cache: &CpuCache, class: SizeClass) -> Counts {
    // SAFETY: `class.index() < NUM_CLASSES` (SizeClass invariant).
    let floor = unsafe { cache.operations_floor.get_unchecked(class.index()) };
    // The floor before the word: it counts no operation the word has not.
    let seen = floor.load(Ordering::Acquire);
    let (word, jumps) = load_pair(cache.class(class));
    let operations = full_operations(word, seen);
    floor.fetch_max(operations, Ordering::AcqRel);
    split(word, jumps, operations)
}

/// `slots.word` and `slots.jumps` in one access.
pub(crate) fn load_pair(slots: &ClassSlots) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let (word, jumps): (u64, u64);
        // SAFETY: the pair is 16-aligned inside a live record (`ClassSlots`:
        // align 32, word at 16); an aligned 16-byte load is one access on
        // every CPU with AVX, which per-CPU mode requires (and elsewhere
        // the record holds zeros that nothing writes). Reads only.
        unsafe {
            core::arch::asm!(
                "movdqa {pair}, xmmword ptr [{at}]",
                "movq {word}, {pair}",
                "punpckhqdq {pair}, {pair}",
                "movq {jumps}, {pair}",
                at = in(reg) core::ptr::addr_of!(slots.word),
                pair = out(xmm_reg) _,
                word = out(reg) word,
                jumps = out(reg) jumps,
                options(nostack, readonly, preserves_flags),
            );
        }
        (word, jumps)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (
            slots.word.load(Ordering::Acquire),
            slots.jumps.load(Ordering::Acquire),
        )
    }
}

/// Stores `word` and `jumps` into `slots` in one access (a drain, which
/// holds the cache: no section writes the record meanwhile).
pub(crate) fn store_pair(slots: &ClassSlots, word: u64, jumps: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: as in `load_pair`; the caller holds the cache, so this is
        // the record's only writer, and the fields are atomics that others
        // only read.
        unsafe {
            core::arch::asm!(
                "movq {pair}, {word}",
                "movq {high}, {jumps}",
                "punpcklqdq {pair}, {high}",
                "movdqa xmmword ptr [{at}], {pair}",
                at = in(reg) core::ptr::addr_of!(slots.word),
                word = in(reg) word,
                jumps = in(reg) jumps,
                pair = out(xmm_reg) _,
                high = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        slots.jumps.store(jumps, Ordering::Release);
        slots.word.store(word, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record driven by the sections' arithmetic, beside the counts it
    /// should give.
    struct Model {
        word: u64,
        jumps: u64,
        floor: u64,
        allocs: u64,
        frees: u64,
    }

    impl Model {
        fn new() -> Self {
            Self {
                word: 0,
                jumps: 0,
                floor: 0,
                allocs: 0,
                frees: 0,
            }
        }

        fn pop(&mut self) -> bool {
            if self.word & LEN_MASK == 0 {
                return false;
            }
            self.word = self.word.wrapping_add(POP);
            self.allocs += 1;
            true
        }

        fn push(&mut self) -> bool {
            if self.word & ROOM_MASK == 0 {
                return false;
            }
            self.word = self.word.wrapping_add(PUSH);
            self.frees += 1;
            true
        }

        fn replace(&mut self, len: u32, capacity: u32) {
            (self.word, self.jumps) = replaced(self.word, self.jumps, len, capacity);
        }

        fn read(&mut self) -> Counts {
            let operations = full_operations(self.word, self.floor);
            self.floor = self.floor.max(operations);
            split(self.word, self.jumps, operations)
        }

        fn expected(&self) -> Counts {
            Counts {
                allocs: self.allocs,
                frees: self.frees,
            }
        }
    }

    #[test]
    fn a_pop_and_a_push_move_the_length_and_the_room_and_count_one_each() {
        let word = sheaf_bits(5, 64);
        assert_eq!((len(word), capacity(word)), (5, 64));
        let popped = word + POP;
        assert_eq!((len(popped), capacity(popped)), (4, 64));
        let pushed = popped + PUSH;
        assert_eq!((len(pushed), capacity(pushed)), (5, 64));
        assert_eq!(pushed >> OPERATIONS_SHIFT, 2);
        // Full and empty sheaves: the tests the sections make.
        assert_eq!(sheaf_bits(64, 64) & ROOM_MASK, 0);
        assert_eq!(sheaf_bits(0, 64) & LEN_MASK, 0);
        let largest = crate::sheaf::SHEAF_CAPACITY_MAX;
        assert_eq!(capacity(sheaf_bits(largest, largest)), largest);
        assert_eq!(capacity(sheaf_bits(0, largest)), largest);
    }

    #[test]
    fn counts_stay_exact_across_swaps_replaces_and_drains() {
        let mut model = Model::new();
        // A deterministic mix: bursts that overflow and drain the sheaf,
        // with the main sheaf replaced by full, empty and half-full ones.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000u32 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 100 {
                0 => model.replace(64, 64),
                1 => model.replace(0, 64),
                2 => model.replace((state >> 8) as u32 % 129, 128),
                3 => model.replace(0, 0),
                4..=51 => {
                    let _ = model.pop();
                }
                _ => {
                    let _ = model.push();
                }
            }
            if step % 1000 == 0 {
                assert_eq!(model.read(), model.expected(), "step {step}");
            }
        }
        assert_eq!(model.read(), model.expected());
        assert!(model.allocs > 50_000 && model.frees > 50_000);
    }

    #[test]
    fn the_operations_count_goes_on_past_its_field() {
        let mut model = Model::new();
        // Start just below the field's wrap, as after 2^42 operations,
        // with 32 objects in main and no jump: 32 more pushes than pops.
        let start = OPERATIONS_MODULUS_MASK - 1001;
        model.word = start << OPERATIONS_SHIFT | sheaf_bits(32, 64);
        model.floor = start;
        model.allocs = (start - 32) / 2;
        model.frees = (start + 32) / 2;
        assert_eq!(model.read(), model.expected());
        for _ in 0..5000 {
            assert!(model.pop() || model.push());
            assert!(model.push() || model.pop());
            let read = model.read();
            assert_eq!(read, model.expected());
        }
        assert!(model.word >> OPERATIONS_SHIFT < 20_000, "the field wrapped");
        assert!(model.read().operations() > OPERATIONS_MODULUS_MASK);
    }

    #[test]
    fn a_read_from_a_floor_behind_the_word_is_not_fooled_by_the_wrap() {
        // A floor 10 operations behind a field that wrapped since.
        let floor = OPERATIONS_MODULUS_MASK - 4;
        let word = 5u64 << OPERATIONS_SHIFT;
        assert_eq!(full_operations(word, floor), floor + 10);
    }

    #[test]
    fn the_pair_loads_and_stores_as_one() {
        let slots = ClassSlots::empty();
        store_pair(&slots, 0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321);
        assert_eq!(slots.word.load(Ordering::Relaxed), 0x1234_5678_9abc_def0);
        assert_eq!(slots.jumps.load(Ordering::Relaxed), 0x0fed_cba9_8765_4321);
        assert_eq!(
            load_pair(&slots),
            (0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321)
        );
    }

    #[test]
    fn counts_add_up() {
        let a = Counts {
            allocs: 3,
            frees: 4,
        };
        let b = Counts {
            allocs: 10,
            frees: 20,
        };
        assert_eq!(
            a.plus(b),
            Counts {
                allocs: 13,
                frees: 24
            }
        );
        assert_eq!(a.operations(), 7);
    }
}
