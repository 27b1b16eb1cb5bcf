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
//! # Padded strides and aligned twins
//!
//! Objects of a class lie [`SizeClass::stride`] bytes apart in their slab.
//! The stride is the object size, except for the classes that are
//! multiples of 1 KiB up to 8 KiB (1024, 2048, …, 8192): their stride is
//! one cache line longer ([`STRIDE_PAD`]). Without it every object of such
//! a slab starts at one of at most four offsets in its page, so the first
//! lines of a burst of buffers (the headers a service writes) all fall in
//! the same few sets of the L1 data cache and evict each other: 16 buffers
//! 4096 bytes apart cost six times what they cost 4160 bytes apart. A
//! padded stride is an odd number of lines, so consecutive objects start
//! on consecutive sets. It costs one object in 16 of a 4 KiB slab.
//!
//! A padded class gives cache-line alignment only. A layout that asks for
//! more from those sizes (`Layout::from_size_align(4096, 4096)`, a
//! page-aligned I/O buffer) takes the class's *aligned twin*: a class of
//! the same power-of-two size with an unpadded stride, named
//! `aligned-4096`, which only over-aligned layouts reach. Twins follow the
//! graded classes in index order; [`NUM_CLASSES`] counts both.
//!
//! # Alignment
//!
//! Slabs start on a 64 KiB chunk boundary, so an object of a class is
//! aligned to the largest power of two dividing its stride (capped by the
//! chunk size), or to at most a cache line where slab colouring shifts
//! the slab's objects ([`crate::colour`]: e.g. 2304 B). Every class but the
//! first is a multiple of 16. A layout with a larger alignment takes the
//! smallest class whose objects all have it ([`SizeClass::alignment`]);
//! [`SizeClass::for_layout`] is the single function that decides, so
//! `alloc` and `dealloc` always agree.
//!
//! This module never touches memory other than its constant tables.

/// Number of size classes: the graded classes and their aligned twins.
pub const NUM_CLASSES: usize = GRADED_CLASSES + TWIN_SIZES.len();
/// Classes of the graded table, 8 bytes to [`MAX_CLASS_SIZE`], ascending.
const GRADED_CLASSES: usize = 97;
/// Object sizes of the aligned twins (class indexes from
/// `GRADED_CLASSES` on, in this order): the power-of-two sizes among the
/// padded classes.
const TWIN_SIZES: [usize; 4] = [1024, 2048, 4096, 8192];
/// Bytes a padded class's stride adds to its object size: one cache line.
pub const STRIDE_PAD: usize = 64;
/// Largest padded class (see the module documentation).
const PADDED_MAX_SIZE: usize = 8192;
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
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `CLASS_SIZES` table): an overflow or a bad index is a build error"
)]
const fn class_size_of(index: usize) -> usize {
    if index >= GRADED_CLASSES {
        TWIN_SIZES[index - GRADED_CLASSES]
    } else if index == 0 {
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

/// A table built at compile time: `[$ty; $len]` whose entry `i` is
/// `$entry(i)` (the per-class tables and the lookup table).
macro_rules! const_table {
    ($ty:ty, $len:expr, $entry:ident) => {{
        #[allow(
            clippy::indexing_slicing,
            clippy::arithmetic_side_effects,
            reason = "evaluated at compile time: an overflow or a bad index is a build error"
        )]
        const fn build() -> [$ty; $len] {
            let mut table = [0; $len];
            let mut i = 0;
            while i < $len {
                table[i] = $entry(i) as $ty;
                i += 1;
            }
            table
        }
        build()
    }};
}

/// Object size of every class: the graded classes ascending, then the
/// twins.
static CLASS_SIZES: [u32; NUM_CLASSES] = const_table!(u32, NUM_CLASSES, class_size_of);

/// Whether the class at `index` has a padded stride: a graded class whose
/// size is a multiple of 1 KiB up to [`PADDED_MAX_SIZE`].
const fn is_padded_index(index: usize) -> bool {
    let size = class_size_of(index);
    index < GRADED_CLASSES && size % 1024 == 0 && size <= PADDED_MAX_SIZE
}

#[allow(
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `CLASS_STRIDES` table): an overflow is a build error"
)]
const fn stride_of_index(index: usize) -> usize {
    let pad = if is_padded_index(index) {
        STRIDE_PAD
    } else {
        0
    };
    class_size_of(index) + pad
}

/// Bytes from one object to the next in a slab, for every class.
static CLASS_STRIDES: [u32; NUM_CLASSES] = const_table!(u32, NUM_CLASSES, stride_of_index);

/// The alignment every object of the class at `index` has: the largest
/// power of two dividing its stride (at most the chunk alignment), at most
/// a cache line if its slabs are coloured.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `CLASS_ALIGNMENTS` table): an overflow is a build error"
)]
const fn alignment_of_index(index: usize) -> usize {
    let stride = stride_of_index(index);
    let mut align = 1usize << stride.trailing_zeros();
    if align > MAX_CLASS_ALIGN {
        align = MAX_CLASS_ALIGN;
    }
    if crate::colour::colours_of_stride(stride) > 1 && align > crate::colour::COLOUR_STEP {
        align = crate::colour::COLOUR_STEP;
    }
    align
}

/// [`SizeClass::alignment`] of every class: a table, so that the search
/// of an over-aligned layout (every `tokio` task, whose cell is aligned
/// to 128 bytes) reads one entry a class instead of dividing.
static CLASS_ALIGNMENTS: [u32; NUM_CLASSES] = const_table!(u32, NUM_CLASSES, alignment_of_index);

// Every twin is a padded graded size, so it has a graded class to be the
// twin of.
#[allow(
    clippy::indexing_slicing,
    reason = "evaluated at compile time: a bad index is a build error"
)]
const _: () = {
    let mut t = 0;
    while t < TWIN_SIZES.len() {
        assert!(TWIN_SIZES[t].is_power_of_two() && TWIN_SIZES[t] % 1024 == 0);
        assert!(TWIN_SIZES[t] <= PADDED_MAX_SIZE);
        t += 1;
    }
};

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

/// The lookup table's entry `i`: the record offset of the class of size
/// `8 * i`.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "evaluated at compile time (the `SMALL_LOOKUP` table): an overflow is a build error"
)]
const fn lookup_entry(i: usize) -> usize {
    class_index_of_size(i * 8) * RECORD_STRIDE
}

/// Class of every size `s <= SMALL_LOOKUP_MAX` (as [`SizeClass`] keeps it:
/// the record offset), indexed by `(s + 7) / 8`. Rounding `s` up to a
/// multiple of 8 never changes its class: every class size is a multiple
/// of 8. 2 KiB; only the entries a program uses are ever in cache.
static SMALL_LOOKUP: [u16; LOOKUP_LEN] = const_table!(u16, LOOKUP_LEN, lookup_entry);

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

    /// Bytes from one object of this class to the next in its slab: the
    /// object size, one cache line more for a padded class (see the module
    /// documentation).
    #[inline]
    pub fn stride(self) -> usize {
        // SAFETY: `get_unchecked` needs an in-bounds index: `self.index() <
        // NUM_CLASSES` (SizeClass invariant), the table's length.
        (unsafe { *CLASS_STRIDES.get_unchecked(self.index()) }) as usize
    }

    /// Whether this is an aligned twin (`aligned-4096`): a power-of-two
    /// size with an unpadded stride, reached only by layouts aligned
    /// beyond a cache line.
    pub fn is_aligned_twin(self) -> bool {
        self.index() >= GRADED_CLASSES
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
    /// `align` (a multiple of it, not padded and not coloured if `align`
    /// is above a cache line). Between a graded class and an aligned twin
    /// of the same size, the graded one (the twin is for layouts only it
    /// can serve).
    #[cold]
    fn for_aligned_layout(size: usize, align: usize) -> Option<Self> {
        if align > MAX_CLASS_ALIGN {
            return None;
        }
        let size = size.max(align);
        if size > MAX_CLASS_SIZE {
            return None;
        }
        // A twin's alignment is its size, a power of two at least `size`
        // and so at least `align`.
        let twin = TWIN_SIZES
            .iter()
            .position(|&twin| twin >= size)
            .map(|t| SizeClass::of_index(GRADED_CLASSES.wrapping_add(t)));
        let limit = twin.map_or(MAX_CLASS_SIZE, SizeClass::object_size);
        let graded = (class_index_of_size(size)..GRADED_CLASSES)
            .map(SizeClass::of_index)
            .take_while(|class| class.object_size() <= limit)
            .find(|class| class.alignment() >= align);
        graded.or(twin)
    }

    /// Alignment every object of this class has: the largest power of two
    /// dividing its stride, at most a cache line if its slabs are coloured
    /// (see [`crate::colour`]).
    #[inline]
    pub fn alignment(self) -> usize {
        // SAFETY: `get_unchecked` needs an in-bounds index: `self.index() <
        // NUM_CLASSES` (SizeClass invariant), the table's length.
        (unsafe { *CLASS_ALIGNMENTS.get_unchecked(self.index()) }) as usize
    }

    /// The class whose name is `name` (`"size-256"`, `"aligned-4096"`),
    /// if any.
    pub fn from_name(name: &str) -> Option<Self> {
        let (digits, twin) = match name.strip_prefix(TWIN_PREFIX) {
            Some(digits) => (digits, true),
            None => (name.strip_prefix(GRADED_PREFIX)?, false),
        };
        if digits.is_empty() || digits.len() > 7 || digits.starts_with('0') {
            return None;
        }
        let size = crate::os::parse_decimal(digits.as_bytes())? as usize;
        Self::all().find(|class| class.object_size() == size && class.is_aligned_twin() == twin)
    }

    /// The class's name, `size-<object size>` like the kernel's kmalloc
    /// caches, `aligned-<object size>` for an aligned twin. Written into a
    /// stack buffer: no allocation.
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
        let prefix = if self.is_aligned_twin() {
            TWIN_PREFIX
        } else {
            GRADED_PREFIX
        };
        let text = prefix
            .as_bytes()
            .iter()
            .chain(digits.get(first..).unwrap_or(&[]));
        for (slot, &byte) in name.bytes.iter_mut().zip(text) {
            *slot = byte;
            // At most `bytes.len()` (12) bytes are copied.
            name.len = name.len.wrapping_add(1);
        }
        name
    }
}

/// Name prefix of the graded classes.
const GRADED_PREFIX: &str = "size-";
/// Name prefix of the aligned twins.
const TWIN_PREFIX: &str = "aligned-";

/// A class name held inline (`size-262144` and `aligned-8192` fit).
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
        let graded = &CLASS_SIZES[..GRADED_CLASSES];
        for pair in graded.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
        }
        assert_eq!(graded[0], 8);
        assert_eq!(graded[GRADED_CLASSES - 1] as usize, MAX_CLASS_SIZE);
        assert!(graded.contains(&(32 * 1024)));
        // Each twin has the size of a graded class.
        for twin in &CLASS_SIZES[GRADED_CLASSES..] {
            assert!(graded.contains(twin), "{twin}");
        }
    }

    /// The first lines of one slab's objects: the L1 set (of 64, 64-byte
    /// lines) each object's first line falls in, for the first `n`.
    fn first_line_sets(class: SizeClass, n: usize) -> std::collections::HashSet<usize> {
        (0..n).map(|i| i * class.stride() / 64 % 64).collect()
    }

    #[test]
    fn multiples_of_1_kib_up_to_8_kib_are_padded_so_a_burst_uses_distinct_sets() {
        for class in SizeClass::all() {
            let size = class.object_size();
            let padded = !class.is_aligned_twin() && size % 1024 == 0 && size <= 8192;
            if padded {
                assert_eq!(class.stride(), size + STRIDE_PAD, "{}", class.name());
                // An odd number of lines: consecutive objects start on
                // consecutive sets, and 64 objects (or a slab's, if fewer)
                // on 64 different ones.
                assert_eq!(class.stride() / 64 % 2, 1);
                let objects = crate::slab::objects_per_slab(class).min(64);
                assert_eq!(first_line_sets(class, objects).len(), objects);
                assert_eq!(class.alignment(), 64, "{}", class.name());
            } else {
                assert_eq!(class.stride(), size, "{}", class.name());
            }
        }
        // Unpadded, 16 page-sized buffers would share one set (of 8 ways).
        let twin = SizeClass::for_layout(4096, 4096).unwrap();
        assert_eq!(first_line_sets(twin, 16).len(), 1);
        let padded = SizeClass::for_layout(4096, 8).unwrap();
        assert_eq!(first_line_sets(padded, 15).len(), 15);
    }

    #[test]
    fn over_aligned_page_sized_layouts_take_the_aligned_twins() {
        let class = |size, align| SizeClass::for_layout(size, align).unwrap();
        for size in [1024, 2048, 4096, 8192] {
            // Up to a cache line the padded class serves it.
            for align in [8, 16, 32, 64] {
                let padded = class(size, align);
                assert!(!padded.is_aligned_twin(), "size {size} align {align}");
                assert_eq!(padded.object_size(), size);
            }
            let twin = class(size, size);
            assert!(twin.is_aligned_twin());
            assert_eq!(twin.object_size(), size);
            assert_eq!(twin.alignment(), size);
            assert_eq!(twin.name().as_str(), format!("aligned-{size}"));
            assert_eq!(class(size, 128), twin);
        }
        // A size between twins takes the next twin up, not a 9 or 12 KiB
        // class; past the largest twin the graded table serves it.
        assert_eq!(class(3000, 1024).name().as_str(), "aligned-4096");
        assert_eq!(class(1, 1024).name().as_str(), "aligned-1024");
        assert_eq!(class(5000, 4096).name().as_str(), "aligned-8192");
        assert_eq!(class(8193, 4096).object_size(), 12288);
        // Below 1 KiB nothing changes: 512 is its own alignment.
        assert_eq!(class(512, 512).name().as_str(), "size-512");
        // Only over-aligned layouts reach a twin.
        for size in 0..=MAX_CLASS_SIZE {
            for align in [1, 8, 16, 32, 64] {
                assert!(!class(size, align).is_aligned_twin(), "{size} {align}");
            }
        }
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
            // The table is the formula: the stride's largest power of two,
            // at most a line where the slabs are coloured.
            let natural = (1usize << class.stride().trailing_zeros()).min(MAX_CLASS_ALIGN);
            let expected = if crate::colour::is_coloured(class) {
                natural.min(crate::colour::COLOUR_STEP)
            } else {
                natural
            };
            assert_eq!(class.alignment(), expected, "{}", class.name());
            let size = class.object_size();
            assert_eq!(size % class.alignment(), 0);
            assert_eq!(class.stride() % class.alignment(), 0);
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
                    assert_eq!(class.stride() % align, 0);
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
        let twin = SizeClass::from_name("aligned-4096").unwrap();
        assert!(twin.is_aligned_twin());
        assert_ne!(Some(twin), SizeClass::from_name("size-4096"));
        for bad in [
            "",
            "size-",
            "size-0",
            "size-17",
            "size-0256",
            "size-abc",
            "kmalloc-256",
            "size-99999999",
            "aligned-",
            "aligned-3072",
            "aligned-256",
            "aligned-04096",
            "size-aligned-4096",
        ] {
            assert_eq!(SizeClass::from_name(bad), None, "{bad}");
        }
    }
}
