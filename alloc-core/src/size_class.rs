//! Size classes: which slot size a request is rounded up to.
//!
//! # The table
//!
//! * class 0 holds 8-byte objects;
//! * classes 1..=8 step by 16 bytes up to 128;
//! * above 128 every power-of-two interval `(2^k, 2^(k+1)]` is cut into 8
//!   equal steps of `2^(k-3)` bytes, up to [`MAX_CLASS_SIZE`] (256 KiB).
//!
//! A request above 128 bytes therefore wastes at most one step, `2^(k-3)`,
//! which is at most 1/8 (12.5%) of the request: a 2112-byte packet buffer
//! takes a 2304-byte slot, not a 4096-byte one. Every class above 32 KiB is a
//! whole number of 4 KiB pages ("span classes"). Requests above 256 KiB are
//! mapped directly (see `large.rs`).
//!
//! # Alignment
//!
//! Slabs start on a 64 KiB chunk boundary, so an object of a class is
//! aligned to the largest power of two dividing the class size (capped by
//! the chunk size), or to at most a cache line where slab colouring shifts
//! the slab's objects ([`crate::colour`]: e.g. 2304 B). Every class but the
//! first is a multiple of 16. A layout with a larger alignment takes the
//! smallest class whose objects all have it ([`SizeClass::alignment`]);
//! [`SizeClass::for_layout`] is the single function that decides, so
//! `alloc` and `dealloc` always agree.
//!
//! This module never touches memory other than its constant tables.

/// Number of size classes.
pub const NUM_CLASSES: usize = 97;
/// Largest request served from a size class; larger ones are mapped directly.
pub const MAX_CLASS_SIZE: usize = 256 * 1024;
/// Largest request size answered by the lookup table (the fast path): 8 KiB,
/// so packet buffers (a 1500-byte MTU payload, a 2112-byte buffer, a
/// 4 KiB page, a jumbo frame's 8 KiB) take the inlined fast path like small
/// objects. The table costs 2 KiB; only the entries a program uses are ever
/// in cache.
pub const SMALL_LOOKUP_MAX: usize = 8192;
/// Largest alignment any class can give (the slab chunk alignment).
pub const MAX_CLASS_ALIGN: usize = 64 * 1024;
/// Alignment the fast path handles without a search.
pub const FAST_ALIGN_MAX: usize = 16;

/// Bytes of every per-class record the fast path reads (a thread's hot
/// slot, a CPU's class slots): a class is kept as its index times this, so
/// the fast path adds it to a record array's address as it is.
pub const RECORD_STRIDE: usize = 32;

/// A size class: index `0..NUM_CLASSES`, kept as the byte offset of its
/// record in an array of [`RECORD_STRIDE`]-byte records (what the fast path
/// needs: the lookup table gives it with no scaling).
///
/// Invariant: `self.0 == index * RECORD_STRIDE` for an `index <
/// NUM_CLASSES`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SizeClass(u16);

impl core::fmt::Debug for SizeClass {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("SizeClass").field(&self.index()).finish()
    }
}

// Every class's record offset fits the representation.
const _: () = assert!(NUM_CLASSES * RECORD_STRIDE <= u16::MAX as usize);

#[allow(
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `CLASS_SIZES` table): an overflow is a build error"
)]
const fn class_size_of(index: usize) -> usize {
    if index == 0 {
        8
    } else if index <= 8 {
        index * 16
    } else {
        let group = (index - 9) / 8; // 0 for (128, 256]
        let step = (index - 9) % 8 + 1; // 1..=8
        let k = 7 + group;
        (1 << k) + step * (1 << (k - 3))
    }
}

#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `CLASS_SIZES` table): an overflow or a bad index is a build error"
)]
const fn build_sizes() -> [u32; NUM_CLASSES] {
    let mut sizes = [0u32; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        sizes[i] = class_size_of(i) as u32;
        i += 1;
    }
    sizes
}

/// Object size of every class, ascending.
static CLASS_SIZES: [u32; NUM_CLASSES] = build_sizes();

/// Computes the class of a size above 128 bytes (pure arithmetic).
///
/// `size > 128` (callers' duty). The operations wrap, and cannot overflow
/// for such a size: `size - 1 >= 128`, so its highest set bit `k` is in
/// `7..usize::BITS` (`leading_zeros <= BITS - 8`); `(size - 1) >> (k - 3)`
/// is in `8..16`, so `step` is in `1..=8`; the index is below
/// `9 + (BITS - 7) * 8`. (A size of at most `MAX_CLASS_SIZE` gives an index
/// below `NUM_CLASSES`; callers check that bound.)
#[inline(always)]
const fn class_index_above_128(size: usize) -> usize {
    // size - 1 lies in [2^k, 2^(k+1)); the step within the interval is
    // ((size - 1) >> (k - 3)) - 7, in 1..=8.
    let below = size.wrapping_sub(1);
    let k = (usize::BITS - 1).wrapping_sub(below.leading_zeros()) as usize;
    let step = (below >> k.wrapping_sub(3)).wrapping_sub(7);
    k.wrapping_sub(7)
        .wrapping_mul(8)
        .wrapping_add(9)
        .wrapping_add(step.wrapping_sub(1))
}

const fn class_index_of_size(size: usize) -> usize {
    if size <= 8 {
        0
    } else if size <= 128 {
        size.div_ceil(16)
    } else {
        class_index_above_128(size)
    }
}

const LOOKUP_LEN: usize = SMALL_LOOKUP_MAX / 8 + 1;

#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `SMALL_LOOKUP` table): an overflow or a bad index is a build error"
)]
const fn build_lookup() -> [u16; LOOKUP_LEN] {
    let mut table = [0u16; LOOKUP_LEN];
    let mut i = 0;
    while i < LOOKUP_LEN {
        table[i] = (class_index_of_size(i * 8) * RECORD_STRIDE) as u16;
        i += 1;
    }
    table
}

/// Class of every size `s <= SMALL_LOOKUP_MAX` (as [`SizeClass`] keeps it:
/// the record offset), indexed by `(s + 7) / 8`. Rounding `s` up to a
/// multiple of 8 never changes its class: every class size is a multiple
/// of 8. 2 KiB; only the entries a program uses are ever in cache.
static SMALL_LOOKUP: [u16; LOOKUP_LEN] = build_lookup();

impl SizeClass {
    /// The smallest class (8-byte objects).
    pub const FIRST: SizeClass = SizeClass(0);

    /// The class with index `index`, if it exists.
    pub const fn from_index(index: usize) -> Option<Self> {
        if index < NUM_CLASSES {
            Some(Self::of_index(index))
        } else {
            None
        }
    }

    /// The class of index `index`.
    ///
    /// `index < NUM_CLASSES` (callers' duty: the invariant).
    #[inline(always)]
    const fn of_index(index: usize) -> Self {
        // Cannot wrap: `index < NUM_CLASSES`, and every class's offset fits
        // (asserted at compile time).
        Self(index.wrapping_mul(RECORD_STRIDE) as u16)
    }

    /// The class index, `0..NUM_CLASSES`.
    #[inline(always)]
    pub fn index(self) -> usize {
        self.record_offset() / RECORD_STRIDE
    }

    /// The byte offset of this class's record in an array of
    /// [`RECORD_STRIDE`]-byte records: `index() * RECORD_STRIDE`, with no
    /// arithmetic.
    #[inline(always)]
    pub fn record_offset(self) -> usize {
        let offset = usize::from(self.0);
        // SAFETY: the type's invariant. Told to the compiler so that
        // `index()` scaled back up to a record's address folds to `offset`.
        unsafe {
            core::hint::assert_unchecked(
                offset % RECORD_STRIDE == 0 && offset < NUM_CLASSES * RECORD_STRIDE,
            );
        }
        offset
    }

    /// Every class, smallest first.
    pub fn all() -> impl Iterator<Item = SizeClass> {
        (0..NUM_CLASSES).map(SizeClass::of_index)
    }

    /// Object (slot) size in bytes.
    #[inline(always)]
    pub fn object_size(self) -> usize {
        // SAFETY: `get_unchecked` needs an in-bounds index: `self.index() <
        // NUM_CLASSES` (SizeClass invariant), the table's length.
        (unsafe { *CLASS_SIZES.get_unchecked(self.index()) }) as usize
    }

    /// HOT PATH: the class for a layout with `size <= SMALL_LOOKUP_MAX` and
    /// `align <= FAST_ALIGN_MAX`, or `None` for every other layout. No
    /// search: for an alignment of at most 8 bytes (almost every layout)
    /// two compare-and-branches and one table load.
    #[inline(always)]
    pub fn for_small_layout(size: usize, align: usize) -> Option<Self> {
        // An alignment of at most 8 cannot change a class (every slot is a
        // multiple of 8 bytes at an 8-aligned address, and sizes 0 and 8
        // share the first class), so the size alone indexes the table: two
        // separate tests instead of `size.max(align)` and a combined one,
        // which cost an alignment that is not a compile-time constant five
        // more instructions on every call.
        if size > SMALL_LOOKUP_MAX {
            return None;
        }
        if align <= 8 {
            // SAFETY: `size <= SMALL_LOOKUP_MAX`, tested above.
            return Some(unsafe { Self::small(size) });
        }
        if align <= FAST_ALIGN_MAX {
            // `size.max(align)` sends an 8-byte request with 16-byte
            // alignment to the 16-byte class (every class from 16 bytes up
            // is a multiple of 16); it is at most `SMALL_LOOKUP_MAX` too.
            // SAFETY: both are at most `SMALL_LOOKUP_MAX`, tested above.
            return Some(unsafe { Self::small(size.max(align)) });
        }
        None
    }

    /// The class of `size` by the lookup table.
    ///
    /// # Safety
    ///
    /// 1. `size <= SMALL_LOOKUP_MAX`.
    #[inline(always)]
    unsafe fn small(size: usize) -> Self {
        const _: () = assert!(SMALL_LOOKUP_MAX.div_ceil(8) < LOOKUP_LEN);
        // SAFETY: `size <= SMALL_LOOKUP_MAX` (duty 1), so the sum
        // cannot wrap and the index is at most `SMALL_LOOKUP_MAX / 8`
        // rounded up, below `LOOKUP_LEN` (asserted at compile time).
        SizeClass(unsafe { *SMALL_LOOKUP.get_unchecked(size.wrapping_add(7) >> 3) })
    }

    /// The classes of two sizes with one alignment (a `realloc`'s old and
    /// new layout), both by the lookup table, or `None` unless both are
    /// [`for_small_layout`](Self::for_small_layout)'s. For an alignment of
    /// at most 8 bytes (every `String`'s and most `Vec`s') the alignment
    /// cannot change a class (every slot is a multiple of 8 bytes at an
    /// 8-aligned address), so one bound test covers both sizes and the two
    /// table loads are all that is left.
    #[inline(always)]
    pub fn for_small_pair(a: usize, b: usize, align: usize) -> Option<(Self, Self)> {
        if align <= 8 {
            if a.max(b) > SMALL_LOOKUP_MAX {
                return None;
            }
            // SAFETY: both sizes are at most `SMALL_LOOKUP_MAX` (tested
            // above).
            return Some(unsafe { (Self::small(a), Self::small(b)) });
        }
        Some((
            Self::for_small_layout(a, align)?,
            Self::for_small_layout(b, align)?,
        ))
    }

    /// The class for any layout, or `None` if it must be mapped directly
    /// (too large, or aligned beyond what a class can give). `align` must be
    /// a power of two.
    #[inline]
    pub fn for_layout(size: usize, align: usize) -> Option<Self> {
        if let Some(class) = Self::for_small_layout(size, align) {
            return Some(class);
        }
        if align <= FAST_ALIGN_MAX {
            if size <= MAX_CLASS_SIZE {
                return Some(SizeClass::of_index(class_index_above_128(size)));
            }
            return None;
        }
        Self::for_aligned_layout(size, align)
    }

    /// Alignment above 16: the smallest class whose objects all have
    /// `align` (a multiple of it, and not coloured if `align` is above a
    /// cache line).
    #[cold]
    fn for_aligned_layout(size: usize, align: usize) -> Option<Self> {
        if align > MAX_CLASS_ALIGN {
            return None;
        }
        let size = size.max(align);
        if size > MAX_CLASS_SIZE {
            return None;
        }
        (class_index_of_size(size)..NUM_CLASSES)
            .map(SizeClass::of_index)
            .find(|class| class.alignment() >= align)
    }

    /// Alignment every object of this class has: the largest power of two
    /// dividing its size, at most a cache line if its slabs are coloured
    /// (see [`crate::colour`]).
    pub fn alignment(self) -> usize {
        let natural = (1usize << self.object_size().trailing_zeros()).min(MAX_CLASS_ALIGN);
        if crate::colour::is_coloured(self) {
            natural.min(crate::colour::COLOUR_STEP)
        } else {
            natural
        }
    }

    /// The class whose name is `name` (`"size-256"`), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        let digits = name.strip_prefix("size-")?;
        if digits.is_empty() || digits.len() > 7 || digits.starts_with('0') {
            return None;
        }
        let size = crate::os::parse_decimal(digits.as_bytes())? as usize;
        Self::all().find(|class| class.object_size() == size)
    }

    /// The class's name, `size-<object size>`, like the kernel's kmalloc
    /// caches. Written into a stack buffer: no allocation.
    pub fn name(self) -> ClassName {
        // The decimal digits, written from the right (a class size has at
        // most 6 digits; the buffer has room for 7).
        let mut digits = [0u8; 7];
        let mut first = digits.len();
        let mut n = self.object_size();
        for (position, digit) in digits.iter_mut().enumerate().rev() {
            // `n % 10 < 10`: the sum is an ASCII digit.
            *digit = b'0'.wrapping_add((n % 10) as u8);
            first = position;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut name = ClassName {
            bytes: [0; 12],
            len: 0,
        };
        let text = b"size-".iter().chain(digits.get(first..).unwrap_or(&[]));
        for (slot, &byte) in name.bytes.iter_mut().zip(text) {
            *slot = byte;
            // At most `bytes.len()` (12) bytes are copied.
            name.len = name.len.wrapping_add(1);
        }
        name
    }
}

/// A class name held inline (`size-262144` fits).
#[derive(Clone, Copy)]
pub struct ClassName {
    bytes: [u8; 12],
    len: u8,
}

impl ClassName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        // The bytes are ASCII written by `SizeClass::name`.
        self.bytes
            .get(..usize::from(self.len))
            .and_then(|bytes| core::str::from_utf8(bytes).ok())
            .unwrap_or("size-?")
    }
}

impl core::fmt::Debug for ClassName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::fmt::Display for ClassName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// `for_small_pair` gives exactly the classes `for_small_layout` gives
    /// each size, and `None` exactly when either has none.
    #[test]
    fn a_pair_has_the_classes_of_its_two_sizes() {
        let sizes = (0..=SMALL_LOOKUP_MAX + 9)
            .step_by(3)
            .chain([1, 7, 8, 9, SMALL_LOOKUP_MAX]);
        let sizes: std::vec::Vec<usize> = sizes.collect();
        for align in [1, 2, 4, 8, 16, 32] {
            for &a in &sizes {
                for b in [
                    1,
                    8,
                    24,
                    200,
                    4096,
                    SMALL_LOOKUP_MAX,
                    SMALL_LOOKUP_MAX + 1,
                    a,
                ] {
                    let expected = SizeClass::for_small_layout(a, align)
                        .zip(SizeClass::for_small_layout(b, align));
                    assert_eq!(
                        SizeClass::for_small_pair(a, b, align),
                        expected,
                        "sizes {a} and {b}, align {align}"
                    );
                }
            }
        }
    }

    #[test]
    fn table_is_strictly_monotonic_and_ends_at_max() {
        for pair in CLASS_SIZES.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
        }
        assert_eq!(CLASS_SIZES[0], 8);
        assert_eq!(CLASS_SIZES[NUM_CLASSES - 1] as usize, MAX_CLASS_SIZE);
        assert!(CLASS_SIZES.contains(&(32 * 1024)));
    }

    #[test]
    fn every_size_gets_the_smallest_fitting_class() {
        for size in 1..=MAX_CLASS_SIZE {
            let class = SizeClass::for_layout(size, 1).unwrap();
            assert!(class.object_size() >= size, "size {size}");
            if class.index() > 0 {
                let below = SizeClass::of_index(class.index() - 1).object_size();
                assert!(below < size, "size {size} could use {below}");
            }
        }
        assert_eq!(SizeClass::for_layout(MAX_CLASS_SIZE + 1, 8), None);
    }

    #[test]
    fn waste_above_128_bytes_is_at_most_one_eighth() {
        for size in 129..=MAX_CLASS_SIZE {
            let slot = SizeClass::for_layout(size, 8).unwrap().object_size();
            assert!((slot - size) * 8 <= size, "size {size} -> slot {slot}");
        }
        assert_eq!(SizeClass::for_layout(2112, 8).unwrap().object_size(), 2304);
    }

    #[test]
    fn a_class_is_its_record_offset_and_round_trips_its_index() {
        for index in 0..NUM_CLASSES {
            let class = SizeClass::from_index(index).unwrap();
            assert_eq!(class.index(), index);
            assert_eq!(class.record_offset(), index * RECORD_STRIDE);
            assert_eq!(format!("{class:?}"), format!("SizeClass({index})"));
        }
        assert_eq!(SizeClass::from_index(NUM_CLASSES), None);
        // The lookup table holds offsets, not indices: a 2112-byte request
        // is class 2304, whose record is its index's.
        let packet = SizeClass::for_small_layout(2112, 8).unwrap();
        assert_eq!(packet.object_size(), 2304);
        assert_eq!(packet.record_offset(), packet.index() * RECORD_STRIDE);
        assert!(packet.index() > 0);
        assert_eq!(SizeClass::all().count(), NUM_CLASSES);
        assert!(SizeClass::all()
            .zip(SizeClass::all().skip(1))
            .all(|(a, b)| a < b));
    }

    #[test]
    fn lookup_table_agrees_with_arithmetic() {
        for size in 0..=SMALL_LOOKUP_MAX {
            for align in [1, 2, 4, 8, 16] {
                let fast = SizeClass::for_small_layout(size, align).unwrap();
                assert_eq!(
                    fast.index(),
                    class_index_of_size(size.max(align)),
                    "size {size}"
                );
                assert!(fast.alignment() >= align);
            }
        }
        assert_eq!(SizeClass::for_small_layout(SMALL_LOOKUP_MAX + 1, 8), None);
        assert_eq!(SizeClass::for_small_layout(64, 32), None);
    }

    #[test]
    fn every_class_is_aligned_as_claimed_and_spans_are_page_multiples() {
        for class in SizeClass::all() {
            let size = class.object_size();
            assert_eq!(size % class.alignment(), 0);
            if class.index() > 0 {
                assert!(class.alignment() >= 16, "{}", class.name());
            }
            if size > 32 * 1024 {
                assert_eq!(size % 4096, 0, "{}", class.name());
            }
        }
    }

    #[test]
    fn over_aligned_layouts_get_a_multiple_of_their_alignment() {
        let mut align = 32;
        while align <= MAX_CLASS_ALIGN {
            for size in [1, align / 2, align, align + 1, 3 * align, 40_000] {
                if let Some(class) = SizeClass::for_layout(size, align) {
                    assert_eq!(class.object_size() % align, 0);
                    assert!(class.object_size() >= size);
                    assert!(class.alignment() >= align);
                } else {
                    assert!(
                        size.max(align) > MAX_CLASS_SIZE / 2,
                        "size {size} align {align}"
                    );
                }
            }
            align *= 2;
        }
        assert_eq!(SizeClass::for_layout(8, MAX_CLASS_ALIGN * 2), None);
    }

    #[test]
    fn names_round_trip() {
        for class in SizeClass::all() {
            let name = class.name();
            assert_eq!(SizeClass::from_name(name.as_str()), Some(class));
        }
        assert_eq!(
            SizeClass::for_layout(256, 8).unwrap().name().as_str(),
            "size-256"
        );
        for bad in [
            "",
            "size-",
            "size-0",
            "size-17",
            "size-0256",
            "size-abc",
            "kmalloc-256",
            "size-99999999",
        ] {
            assert_eq!(SizeClass::from_name(bad), None, "{bad}");
        }
    }
}
