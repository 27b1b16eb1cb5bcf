//! Slab colouring: where in its slab a class's first object starts.
//!
//! # Why
//!
//! A cache line's set in a CPU's caches is picked by the address bits just
//! above the line offset (bits 6–11 for a 64-set L1). A class whose size is
//! a multiple of a large power of two puts the first line of every object
//! in a few sets only: a 2304-byte slot is 9 × 256 bytes, so at
//! 256-byte-aligned slab offsets the header of every packet buffer lands in
//! 16 of the L1's 64 sets, 8 ways each. A thread that keeps 100 buffers in
//! flight fits them there only if they come evenly from one slab in address
//! order; the mix a long-running service holds (objects back from other
//! threads, from the barn, from several slabs) puts nine or more in some
//! set, and each write into a header then evicts another one.
//!
//! # What
//!
//! The slabs of a coloured class start their objects at a multiple of
//! [`COLOUR_STEP`] (one cache line) from the slab's base, chosen by the
//! slab's address, so consecutive slabs of a class take consecutive
//! colours and their first lines use every set. Colouring costs no object:
//! a class's colours are the whole lines its slab has left over after its
//! objects (2304 B: 28 objects in 64 KiB leave 1024 bytes, so 17 colours),
//! so a class whose objects fill the slab exactly (the powers of two up to
//! 512 and the aligned twins) is not coloured, and at most [`MAX_COLOURS`]
//! colours are used (they span 4 KiB, every set of an L1 with 64-byte
//! lines).
//!
//! Colouring spreads slabs; it cannot spread the objects of one slab,
//! which all keep their offsets modulo the stride. That is what the padded
//! strides of the 1–8 KiB classes do ([`crate::size_class`]); their spare
//! lines colour their slabs too.
//!
//! # The price: alignment
//!
//! An object of a coloured class is aligned to at most [`COLOUR_STEP`], not
//! to the largest power of two dividing its size. A layout asking for more
//! (`#[repr(align(128))]` and up: rare, and never the fast path, which
//! stops at 16) takes the smallest class that is neither coloured nor
//! padded and whose size is a multiple of the alignment
//! ([`crate::size_class`]): from 1 KiB to 8 KiB, an aligned twin.
//!
//! Only classes whose stride is at most [`COLOURED_MAX_SIZE`] are coloured:
//! they are the fast path's, whose objects a thread holds many of, and
//! their slabs are one [`COLOURED_SLAB_BYTES`] chunk each (checked in
//! `slab.rs`). Larger classes keep their natural (page) alignment.

use crate::size_class::SizeClass;

/// Bytes between two colours: a cache line.
pub const COLOUR_STEP: usize = 64;
/// Most colours a class rotates through: 64 lines, 4 KiB.
pub const MAX_COLOURS: usize = 64;
/// Largest coloured class: the fast path's largest.
pub const COLOURED_MAX_SIZE: usize = crate::size_class::SMALL_LOOKUP_MAX;
/// Bytes of the slab of every class up to [`COLOURED_MAX_SIZE`] (at least
/// eight objects in a 64 KiB chunk).
pub const COLOURED_SLAB_BYTES: usize = 64 * 1024;

/// How many start offsets the slabs of `class` rotate through: 1 (every
/// slab starts its objects at its base) for a class that is not coloured.
pub fn colours(class: SizeClass) -> usize {
    colours_of_stride(class.stride())
}

/// [`colours`] of a class whose objects lie `stride` bytes apart (a
/// `const fn`, for the size-class tables).
pub(crate) const fn colours_of_stride(stride: usize) -> usize {
    if stride > COLOURED_MAX_SIZE {
        return 1;
    }
    // A stride of 0 has no spare lines (no class has one).
    let spare_lines = match COLOURED_SLAB_BYTES.checked_rem(stride) {
        Some(spare) => spare / COLOUR_STEP,
        None => 0,
    };
    // At most 64 KiB / 64: no overflow.
    let colours = spare_lines.saturating_add(1);
    if colours < MAX_COLOURS {
        colours
    } else {
        MAX_COLOURS
    }
}

/// Whether slabs of `class` start their objects at different offsets.
pub fn is_coloured(class: SizeClass) -> bool {
    colours(class) > 1
}

/// Bytes from the base of the slab at `slab_base` to its first object: a
/// multiple of [`COLOUR_STEP`] with room after it for the slab's objects.
/// `slab_base` is the slab's address, aligned to its size.
#[inline]
pub fn offset(class: SizeClass, slab_base: usize) -> usize {
    let colours = colours(class);
    if colours == 1 {
        return 0;
    }
    // Coloured slabs are `COLOURED_SLAB_BYTES` each: the slab's number in
    // the address space picks its colour. `colours > 1` here, so no
    // division by zero; the product is below 4 KiB.
    let slab_number = slab_base / COLOURED_SLAB_BYTES;
    (slab_number.checked_rem(colours).unwrap_or(0)).wrapping_mul(COLOUR_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packet_buffer_class_is_coloured_and_powers_of_two_are_not() {
        let packet = SizeClass::for_layout(2112, 8).unwrap();
        assert_eq!(packet.object_size(), 2304);
        // 28 objects in 64 KiB leave 1024 bytes: offsets 0, 64, …, 1024.
        assert_eq!(colours(packet), 17);
        assert_eq!(packet.alignment(), COLOUR_STEP);
        for size in [8, 16, 32, 64, 128, 256, 512] {
            let class = SizeClass::for_layout(size, 8).unwrap();
            assert_eq!(class.object_size(), size);
            assert_eq!(colours(class), 1, "size {size}");
            assert_eq!(offset(class, 5 * COLOURED_SLAB_BYTES), 0);
        }
        // From 1 KiB the powers of two are padded (one line per object), so
        // their slabs have lines to spare; their aligned twins fill theirs.
        for size in [1024, 2048, 4096] {
            let padded = SizeClass::for_layout(size, 8).unwrap();
            assert!(is_coloured(padded), "size {size}");
            let twin = SizeClass::for_layout(size, size).unwrap();
            assert!(twin.is_aligned_twin());
            assert_eq!(colours(twin), 1, "size {size}");
        }
        // 8192 padded is 15 objects in a 128 KiB slab: not coloured.
        assert_eq!(colours(SizeClass::for_layout(8192, 8).unwrap()), 1);
        let big = SizeClass::for_layout(COLOURED_MAX_SIZE + 1, 8).unwrap();
        assert_eq!(colours(big), 1);
    }

    #[test]
    fn every_colour_leaves_room_for_the_slabs_objects() {
        for class in SizeClass::all() {
            let size = class.stride();
            if size > COLOURED_MAX_SIZE {
                assert_eq!(colours(class), 1);
                continue;
            }
            let objects = COLOURED_SLAB_BYTES / size;
            for slab in 0..2 * MAX_COLOURS {
                let base = slab * COLOURED_SLAB_BYTES;
                let start = offset(class, base);
                assert_eq!(start % COLOUR_STEP, 0);
                assert!(
                    start + objects * size <= COLOURED_SLAB_BYTES,
                    "{}",
                    class.name()
                );
                assert_eq!((base + start) % class.alignment(), 0);
            }
        }
    }

    #[test]
    fn coloured_slabs_spread_first_lines_over_every_l1_set() {
        // The first line of every 2304-byte object in 17 consecutive slabs:
        // uncoloured they would use 16 of 64 sets; coloured, all 64, and no
        // set holds more than twice its fair share.
        let packet = SizeClass::for_layout(2112, 8).unwrap();
        let size = packet.object_size();
        let mut per_set = [0usize; 64];
        let slabs = colours(packet);
        for slab in 0..slabs {
            let base = (1000 + slab) * COLOURED_SLAB_BYTES;
            let first = base + offset(packet, base);
            for object in 0..COLOURED_SLAB_BYTES / size {
                per_set[(first + object * size) / 64 % 64] += 1;
            }
        }
        let used = per_set.iter().filter(|&&n| n > 0).count();
        assert_eq!(used, 64);
        let fair = slabs * (COLOURED_SLAB_BYTES / size) / 64;
        assert!(per_set.iter().all(|&n| n <= 2 * fair + 1), "{per_set:?}");
    }
}
