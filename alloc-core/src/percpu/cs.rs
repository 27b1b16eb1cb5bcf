//! The restartable critical sections of the per-CPU caches (x86-64 Linux).
//!
//! Each operation is one rseq critical section (see `rseq(2)` and the
//! kernel's `include/uapi/linux/rseq.h`) that
//!
//! 1. points the thread's rseq area's `rseq_cs` at the section's
//!    descriptor (kept in the `__rseq_cs` section: version, flags, start,
//!    length up to the commit, abort address);
//! 2. reads the CPU id **inside** the section, and everything it depends
//!    on after it (the CPU's cache, or the check that GS points at it; the
//!    slot, the sheaf);
//! 3. ends in **one committing store** (a class's word, a batch's
//!    length, or a slot).
//!
//! If the thread is preempted, migrated or interrupted by a signal before
//! the commit, the kernel moves it to the abort handler, which starts the
//! section over (it re-arms `rseq_cs`: the kernel cleared it). The abort
//! handler is preceded by glibc's signature for x86-64, `0x53053053`, which
//! the kernel checks. In the inlined pop and pushes the abort handler (and
//! the pop's miss path) sit in `.text.unlikely.sheafalloc_rseq`, out of
//! line, so a hit runs straight through without a taken jump; a push's
//! miss jumps straight to the caller's Rust code (an `asm!` label), so it
//! returns no flag to test. Labels are numeric and
//! local (`2:`, `4b`; they resolve by source order across sections), so the
//! sections may be inlined any number of times; each copy has its own
//! descriptor. Only the documented ABI is used: `cpu_id` (offset 4) and
//! `rseq_cs` (offset 8); nothing relies on how the kernel rewrites
//! `cpu_id_start`.
//!
//! No section writes one of its input registers: a restart (the kernel
//! only moves the instruction pointer) starts over from them.
//!
//! A store before the commit is harmless if the section restarts: the push
//! writes the object into the slot above the main sheaf's length, which
//! nobody reads until a committed length covers it; the spare swap writes
//! the outgoing main sheaf's length into its header, which nobody reads
//! while it is the main sheaf. A count is never such a store: the pop and
//! push count themselves in the word they commit (`counts`), so a restart
//! counts nothing twice.
//!
//! **The pop and the push reach the cache through GS.** A thread on
//! per-CPU sheaves points its GS segment base at the cache of the CPU it
//! was on at its last slow path (`ThreadGs::claim` and
//! `ThreadGs::follow_cpu`, `gs.rs`), and these two sections address every
//! field of the cache as
//! `gs:[offset]`: no register holds the cache's address, so a length's
//! store and its reload by the next operation use the same segment and
//! offsets, as a thread-local's do, and the object's address waits on two
//! loads (the record, the sheaf's entry) instead of four (the CPU id, the
//! table, the record, the entry). Inside the section they check that the
//! cache is the current CPU's: its `owner` must be `owner_of` the CPU id
//! just read (a compare and a predicted branch, off the loads' chain); a
//! thread that moved misses, and its slow path points GS at its new CPU's
//! cache. The sections off the fast path (batch push, spare swap,
//! replaces) find the cache in the table by the CPU id, as before.
//!
//! A drain sets the cache's `owner` to `NO_OWNER` (the pop and push miss
//! on it), puts the `DRAINING` stand-in in the CPU's table entry (the
//! other sections test its `stopped` byte) and runs `membarrier` on the
//! CPU (a section that read either before has committed or restarts), and
//! then owns every slot.
//!
//! The main sheaf's length and room live in the class's record, beside the
//! pointer, in one word with the class's operations ([`super::ClassSlots`],
//! `counts`), so a pop or push reads one cache line of the CPU's cache and
//! the object's line, never the sheaf's header, and its commit is its
//! count.

use core::mem::offset_of;
use core::sync::atomic::AtomicPtr;

use super::{ClassSlots, CpuCache, SpareHas};
use crate::sheaf::Sheaf;

const LEN: usize = offset_of!(Sheaf, len);
const CAPACITY: usize = offset_of!(Sheaf, capacity);
const OBJECTS: usize = offset_of!(Sheaf, objects);
const STOPPED: usize = offset_of!(CpuCache, stopped);
const OWNER: usize = offset_of!(CpuCache, owner);
/// Offsets of the regions a push tests the object's address against: the
/// node's (the slow path) and the CPU's lane's (the fast path).
pub(super) const NODE_BASE: usize = offset_of!(CpuCache, node_base);
pub(super) const NODE_SPAN: usize = offset_of!(CpuCache, node_span);
pub(super) const LANE_BASE: usize = offset_of!(CpuCache, lane_base);
pub(super) const LANE_SPAN: usize = offset_of!(CpuCache, lane_span);
const REGION_BASE: usize = offset_of!(Sheaf, batch_region_base);
const REGION_SPAN: usize = offset_of!(Sheaf, batch_region_span);
/// Offsets in a class's [`ClassSlots`], from its main slot (the record's
/// start).
const SPARE: usize = offset_of!(ClassSlots, spare);
const WORD: usize = offset_of!(ClassSlots, word);
const JUMPS: usize = offset_of!(ClassSlots, jumps);
/// The same offsets from the first class's record: the pop and push take
/// the class's [`SizeClass::record_offset`](crate::size_class::SizeClass::record_offset) (shared with the thread's hot slot,
/// so computed once where both attempts inline) and add these as constant
/// displacements.
const FIRST_MAIN: usize = super::CLASSES_OFFSET + offset_of!(ClassSlots, main);
const FIRST_WORD: usize = super::CLASSES_OFFSET + WORD;
/// The word's fields (`counts`), as the sections test and move them.
const LEN_MASK: u64 = super::counts::LEN_MASK;
const ROOM_MASK: u64 = super::counts::ROOM_MASK;
const POP: u64 = super::counts::POP;
const PUSH: u64 = super::counts::PUSH;
/// The word less its sheaf's part, as a sign-extended 32-bit immediate.
const OPERATIONS_ONLY: i32 = !(super::counts::SHEAF_MASK as i32);

// The pieces every section shares, written once. Label roles: `2:` the
// restart point, `3:` the descriptor, `4:` the first instruction of the
// section, `5:` just past the commit, `6:` the abort handler, `7:` the
// miss path, `8:` the exit. Operands `{rseq}` and the scratch register
// named by `$at` must exist in the `asm!` that uses them.

/// Arms the section: `rseq_cs` points at this section's descriptor.
macro_rules! arm {
    ($at:literal) => {
        concat!(
            "2:\n",
            "lea {",
            $at,
            "}, [rip + 3f]\n",
            "mov qword ptr [{rseq} + 8], {",
            $at,
            "}\n",
            "4:",
        )
    };
}

/// Loads into `{at}` the current CPU's cache from `{table}`. Every entry
/// is a cache (the stopped, empty `NO_CACHE` for a CPU that has none yet,
/// `DRAINING` while a drain empties the CPU's own), and the CPU id of every
/// area a section runs with indexes the table (duty 1 of the sections), so
/// there is neither a bound nor a null test. Pops and pushes need no other
/// test: on a stand-in they miss (lengths and capacities 0, node span 0).
macro_rules! current_cache {
    () => {
        concat!(
            "mov {at:e}, dword ptr [{rseq} + 4]\n",
            "mov {at}, qword ptr [{table} + {at}*8]",
        )
    };
}

/// Goes to `$miss` if the cache in `{at}` is stopped (a stand-in): for the
/// sections off the fast path, whose checks would not all fail on one.
macro_rules! unless_stopped {
    ($miss:literal) => {
        concat!("cmp byte ptr [{at} + {stopped}], 0\n", "jne ", $miss)
    };
}

/// The abort handler: glibc's signature (which the kernel checks), then
/// the restart.
macro_rules! abort_handler {
    () => {
        concat!(".long 0x53053053\n", "6:\n", "jmp 2b")
    };
}

/// The abort handler out of line (for sections whose miss path is a Rust
/// label).
macro_rules! out_of_line_abort {
    () => {
        concat!(
            ".pushsection .text.unlikely.sheafalloc_rseq, \"ax\"\n",
            abort_handler!(),
            "\n",
            ".popsection",
        )
    };
}

/// The tail of a section after the commit: the abort handler and the miss
/// path (which zeroes `$result`) out of line, then the exit.
macro_rules! out_of_line_tail {
    ($result:literal) => {
        concat!(
            ".pushsection .text.unlikely.sheafalloc_rseq, \"ax\"\n",
            abort_handler!(),
            "\n",
            "7:\n",
            "xor {",
            $result,
            ":e}, {",
            $result,
            ":e}\n",
            "jmp 8f\n",
            ".popsection\n",
            "8:",
        )
    };
}

/// The section's descriptor: version and flags 0, start `4:`, length up
/// to the commit, abort handler `6:`.
macro_rules! descriptor {
    () => {
        concat!(
            ".pushsection __rseq_cs, \"aw\"\n",
            ".balign 32\n",
            "3:\n",
            ".long 0, 0\n",
            ".quad 4b, 5b - 4b, 6b\n",
            ".popsection",
        )
    };
}

/// The record's word and jumps when its main sheaf gives way to one whose
/// length and room are the word bits in `{$bits}` (`counts::sheaf_bits`):
/// the jumps in `{$jumps}` lose the old length and gain the new one, and
/// the word in `{$word}` keeps its operations and takes the new sheaf's
/// part (`counts::replaced`, in the sections' registers). Clobbers
/// `{$scratch}`; operands `len_mask` and `operations_only` must exist.
macro_rules! replaced_word {
    ($word:literal, $jumps:literal, $bits:literal, $scratch:literal) => {
        concat!(
            "mov {",
            $scratch,
            ":e}, {",
            $word,
            ":e}\n",
            "and {",
            $scratch,
            ":e}, {len_mask}\n",
            "sub {",
            $jumps,
            "}, {",
            $scratch,
            "}\n",
            "mov {",
            $scratch,
            ":e}, {",
            $bits,
            ":e}\n",
            "and {",
            $scratch,
            ":e}, {len_mask}\n",
            "add {",
            $jumps,
            "}, {",
            $scratch,
            "}\n",
            "and {",
            $word,
            "}, {operations_only}\n",
            "or {",
            $word,
            "}, {",
            $bits,
            "}",
        )
    };
}

// The sections read these fields with fixed widths.
const _: () = assert!(LEN == 0 && CAPACITY == 4);
const _: () = assert!(SPARE == 8 && WORD == 16 && JUMPS == 24);
const _: () = assert!(core::mem::size_of::<ClassSlots>() == 32);
const _: () = assert!(OPERATIONS_ONLY as i64 as u64 == !super::counts::SHEAF_MASK);
const _: () = assert!(core::mem::size_of::<crate::node::NodeId>() == 2);
const _: () = assert!(core::mem::size_of::<core::sync::atomic::AtomicU8>() == 1);
const _: () = assert!(core::mem::size_of::<core::sync::atomic::AtomicU32>() == 4);

/// Goes to `$miss` unless the cache the thread's GS base points at belongs
/// to the CPU the thread is on: its `owner` is `owner_of` the area's CPU
/// id, read into the scratch register `{$at}`. A stand-in's `owner` is
/// `NO_OWNER`, as is a cache's while a drain empties it: each misses.
macro_rules! on_own_cpu {
    ($at:literal, $miss:literal) => {
        concat!(
            "mov {",
            $at,
            ":e}, dword ptr [{rseq} + 4]\n",
            "xor {",
            $at,
            ":e}, {owner_key}\n",
            "cmp {",
            $at,
            ":e}, dword ptr gs:[{owner}]\n",
            "jne ",
            $miss,
        )
    };
}

/// Pops an object from the main sheaf of the class whose record is at
/// `record` ([`SizeClass::record_offset`](crate::size_class::SizeClass::record_offset)) of the cache the thread's GS base points
/// at, if that is the current CPU's cache and no drain holds it; null
/// otherwise, or if the sheaf is empty.
///
/// Every access to the cache is GS-relative: no register holds the cache's
/// address, so the length's store and its reload by the next operation
/// address the same segment and offsets, as a thread-local's would.
///
/// # Safety
///
/// 1. `rseq` is the calling thread's registered rseq area.
/// 2. The thread's GS base points to a live `CpuCache` (`CpuCache`
///    invariant: a main slot's length and capacity are its sheaf's, and the
///    slot always holds a valid sheaf while the cache's `owner` is its
///    CPU's).
#[inline(always)]
pub unsafe fn pop(rseq: *mut u8, record: usize) -> *mut u8 {
    let object: *mut u8;
    // SAFETY: duties 1 and 2: every address the section touches is the
    // rseq area, the cache, and a live sheaf below its length; it writes
    // only `rseq_cs` and, as its commit, the class's word (the length one
    // less, the room one more, one operation counted: `counts`). It
    // commits only on the cache's own CPU while no drain holds the cache:
    // a drain sets `owner` to `NO_OWNER` before its membarrier restarts any
    // section that read the old value.
    unsafe {
        core::arch::asm!(
            arm!("object"),
            on_own_cpu!("len", "7f"),
            "mov {word}, qword ptr gs:[{record} + {word_at}]",
            "mov {len:e}, {word:e}",
            "and {len:e}, {len_mask}",
            "jz 7f",
            "mov {object}, qword ptr gs:[{record} + {main}]",
            "mov {object}, qword ptr [{object} + {len}*8 + {objects} - 8]",
            "add {word}, {pop}",
            "mov qword ptr gs:[{record} + {word_at}], {word}",
            "5:",
            out_of_line_tail!("object"),
            descriptor!(),
            rseq = in(reg) rseq,
            record = in(reg) record,
            object = out(reg) object,
            len = out(reg) _,
            word = out(reg) _,
            owner = const OWNER,
            owner_key = const super::OWNER_KEY,
            main = const FIRST_MAIN,
            word_at = const FIRST_WORD,
            len_mask = const LEN_MASK,
            pop = const POP,
            objects = const OBJECTS,
            options(nostack),
        );
    }
    object
}

/// A push section through the thread's GS base: arm, check the cache is
/// the current CPU's and no drain holds it, run `$body` (which ends in the
/// commit, or jumps to `{miss}`), then the abort handler out of line and
/// the descriptor; a miss returns false from the enclosing function.
/// `$extra` are the operands `$body` adds to the ones every push has
/// (`{len}` is free scratch; `{object}` must not be written).
macro_rules! gs_push_section {
    ([$($body:expr),+ $(,)?], $rseq:expr, $record:expr, $object:expr, $($extra:tt)*) => {
        core::arch::asm!(
            arm!("len"),
            on_own_cpu!("len", "{miss}"),
            $($body,)+
            "5:",
            out_of_line_abort!(),
            descriptor!(),
            rseq = in(reg) $rseq,
            record = in(reg) $record,
            object = in(reg) $object,
            len = out(reg) _,
            miss = label { return false; },
            owner = const OWNER,
            owner_key = const super::OWNER_KEY,
            objects = const OBJECTS,
            $($extra)*
            options(nostack),
        )
    };
}

/// Pushes `object` onto the main sheaf of the class whose record is at
/// `record` ([`SizeClass::record_offset`](crate::size_class::SizeClass::record_offset)) of the cache the thread's GS base points
/// at, if that is the current CPU's cache, no drain holds it, the object's
/// address lies in the region whose base and span the cache keeps at
/// offsets `BASE` and `SPAN` (its lane's or its node's) and the sheaf has
/// room; false otherwise.
///
/// # Safety
///
/// 1. and 2. as [`pop`] (a main sheaf's objects have the cache's node as
///    home).
/// 3. `BASE` and `SPAN` are [`NODE_BASE`] and [`NODE_SPAN`], or
///    [`LANE_BASE`] and [`LANE_SPAN`]: a region inside the cache's node's.
#[inline(always)]
pub unsafe fn push<const BASE: usize, const SPAN: usize>(
    rseq: *mut u8,
    record: usize,
    object: *mut u8,
) -> bool {
    // SAFETY: as in `pop`; the object's home is the cache's node (duty 3),
    // as a main sheaf's must be; the store into the sheaf's array lies
    // above its committed length and below its capacity (the room is not
    // 0), inside its storage; the commit is the class's word (the length
    // one more, the room one less, one operation counted). A miss
    // leaves the section by a jump to the label (nothing committed). No
    // input register is written: a restart starts from them.
    unsafe {
        gs_push_section!(
            [
                "mov {len}, {object}",
                "sub {len}, qword ptr gs:[{base}]",
                "cmp {len}, qword ptr gs:[{span}]",
                "jae {miss}",
                "mov {word}, qword ptr gs:[{record} + {word_at}]",
                "test {word:e}, {room_mask}",
                "jz {miss}",
                "mov {len:e}, {word:e}",
                "and {len:e}, {len_mask}",
                "mov {sheaf}, qword ptr gs:[{record} + {main}]",
                "mov qword ptr [{sheaf} + {len}*8 + {objects}], {object}",
                "add {word}, {push}",
                "mov qword ptr gs:[{record} + {word_at}], {word}",
            ],
            rseq,
            record,
            object,
            sheaf = out(reg) _,
            word = out(reg) _,
            base = const BASE,
            span = const SPAN,
            main = const FIRST_MAIN,
            word_at = const FIRST_WORD,
            room_mask = const ROOM_MASK,
            len_mask = const LEN_MASK,
            push = const PUSH,
        );
    }
    true
}

/// Pushes `object` onto the remote batch at offset `remote` (the class's
/// `Slot::Remote` offset) of the cache the thread's GS base points
/// at, if that is the current CPU's cache, no drain holds it, the object's
/// address lies in the batch's region (its home's: a lane's region of a
/// node, which the batch's header records; span 0 in the empty sheaf) and
/// the batch has room; false otherwise. A batch's length and capacity are
/// in its header (batches are off the pop's and push's path).
///
/// # Safety
///
/// 1. and 2. as [`pop`] (a remote batch's header records its objects'
///    region).
#[inline(always)]
pub unsafe fn push_batch(rseq: *mut u8, remote: usize, object: *mut u8) -> bool {
    // SAFETY: as in `push`; the object's home is the batch's (its address
    // lies in the batch's region); the store into the batch's array lies
    // above its committed length and below its capacity, inside its
    // storage; the commit is the store of the batch's length.
    unsafe {
        gs_push_section!(
            [
                "mov {batch}, qword ptr gs:[{record}]",
                "mov {len}, {object}",
                "sub {len}, qword ptr [{batch} + {region_base}]",
                "cmp {len}, qword ptr [{batch} + {region_span}]",
                "jae {miss}",
                "mov {len:e}, dword ptr [{batch} + {len_off}]",
                "cmp {len:e}, dword ptr [{batch} + {capacity_off}]",
                "jae {miss}",
                "mov qword ptr [{batch} + {len}*8 + {objects}], {object}",
                "add {len:e}, 1",
                "mov dword ptr [{batch} + {len_off}], {len:e}",
            ],
            rseq,
            remote,
            object,
            batch = out(reg) _,
            region_base = const REGION_BASE,
            region_span = const REGION_SPAN,
            len_off = const LEN,
            capacity_off = const CAPACITY,
        );
    }
    true
}

/// Swaps main and spare of the class whose record is at `record`, on
/// the current CPU's cache, if the cache is not stopped, the spare has
/// `capacity` (the cache's: a spare of another capacity goes through the
/// slow path, which resizes it) and the spare `has` what the caller needs
/// (objects for an allocation, room for a free); true if it did.
///
/// One section, whose commit is one 32-byte store of the class's record:
/// the spare, with its header's length and capacity, becomes main; main
/// becomes the spare, its length and capacity written into its header
/// first (a store nobody reads while it is main: harmless if the section
/// restarts); the word keeps its operations and the jumps add the
/// length's move (`counts`). A spare swap costs one section instead of
/// three replaces.
///
/// # Safety
///
/// 1. and 2. as [`pop`]; `record` is a class's [`SizeClass::record_offset`](crate::size_class::SizeClass::record_offset).
/// 3. The CPU has AVX, and the OS saves its registers (`super::has_avx`).
#[inline(never)]
#[target_feature(enable = "avx")]
pub unsafe fn swap_spare(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    record: usize,
    capacity: u32,
    has: SpareHas,
) -> bool {
    // The spare's test: objects (a length of 0 misses) or room (a length
    // at the capacity misses).
    macro_rules! section {
        ($miss_unless_it_has:literal) => {
            // SAFETY: as in `pop`: the addresses are the rseq area, the
            // table, a live cache, the live sheaf in its spare slot and the
            // live sheaf in its main slot; the stores are the outgoing main
            // sheaf's header (skipped for the empty sheaf, whose capacity
            // is 0: it is never written) and the commit, each slot getting
            // a valid sheaf the other held, with its length and capacity.
            // Nothing in this function (out of line, no vector code) keeps
            // a value in a vector register across the section, whose
            // `vzeroupper` clears every register's upper half: the callers'
            // are caller-saved.
            unsafe {
                core::arch::asm!(
                    arm!("at"),
                    current_cache!(),
                    unless_stopped!("{miss}"),
                    "lea {at}, [{at} + {record} + {classes}]",
                    "mov {spare}, qword ptr [{at} + {spare_off}]",
                    "cmp dword ptr [{spare} + {capacity_off}], {capacity:e}",
                    "jne {miss}",
                    $miss_unless_it_has,
                    "mov {main}, qword ptr [{at}]",
                    // The record's upper half: the spare as main, main as
                    // the spare.
                    "vmovq xmm1, {spare}",
                    "vpinsrq xmm1, xmm1, {main}, 1",
                    // Main's length and capacity from the word, into its
                    // header unless it is the empty sheaf (capacity 0).
                    "mov {word}, qword ptr [{at} + {word_off}]",
                    "mov {len:e}, {word:e}",
                    "and {len:e}, {len_mask}",
                    "mov {t:e}, {word:e}",
                    "shr {t:e}, {room_shift}",
                    "and {t:e}, {len_mask}",
                    "add {t:e}, {len:e}",
                    "jz 9f",
                    "mov dword ptr [{main} + {len_off}], {len:e}",
                    "mov dword ptr [{main} + {capacity_off}], {t:e}",
                    "9:",
                    // The spare's length and room as word bits (`main`
                    // is in `xmm1` already), then the word and the jumps.
                    "mov {len:e}, dword ptr [{spare} + {len_off}]",
                    "mov {main:e}, {capacity:e}",
                    "sub {main:e}, {len:e}",
                    "shl {main:e}, {room_shift}",
                    "or {main:e}, {len:e}",
                    "mov {t}, qword ptr [{at} + {jumps_off}]",
                    replaced_word!("word", "t", "main", "len"),
                    "vmovq xmm0, {word}",
                    "vpinsrq xmm0, xmm0, {t}, 1",
                    "vinsertf128 ymm0, ymm1, xmm0, 1",
                    "vmovdqa ymmword ptr [{at}], ymm0",
                    "5:",
                    "vzeroupper",
                    out_of_line_abort!(),
                    descriptor!(),
                    rseq = in(reg) rseq,
                    table = in(reg) table,
                    record = in(reg) record,
                    classes = const super::CLASSES_OFFSET,
                    capacity = in(reg) capacity,
                    at = out(reg) _,
                    spare = out(reg) _,
                    main = out(reg) _,
                    word = out(reg) _,
                    len = out(reg) _,
                    t = out(reg) _,
                    out("ymm0") _,
                    out("ymm1") _,
                    stopped = const STOPPED,
                    spare_off = const SPARE,
                    word_off = const WORD,
                    jumps_off = const JUMPS,
                    len_mask = const LEN_MASK,
                    room_shift = const 11,
                    operations_only = const OPERATIONS_ONLY,
                    len_off = const LEN,
                    capacity_off = const CAPACITY,
                    miss = label {
                        // SAFETY: clears upper halves nothing uses; a miss
                        // may follow `vinsertf128` only through a restart,
                        // which repeats the tests first.
                        unsafe { core::arch::asm!("vzeroupper", options(nomem, nostack)) };
                        return false;
                    },
                    options(nostack),
                );
            }
        };
    }
    match has {
        SpareHas::Objects => section!("cmp dword ptr [{spare} + {len_off}], 0\nje {miss}"),
        SpareHas::Room => {
            section!("cmp dword ptr [{spare} + {len_off}], {capacity:e}\njae {miss}")
        }
    }
    true
}

/// The checks of a replace section: armed, on CPU `{want}`, its cache
/// (into `{cache}`) not stopped, and the slot at `{slot}` holding
/// `{expected}`; any failure goes to `7:`.
macro_rules! replace_checks {
    () => {
        concat!(
            arm!("tmp"),
            "\n",
            "mov {tmp:e}, dword ptr [{rseq} + 4]\n",
            "cmp {tmp:e}, {want:e}\n",
            "jne 7f\n",
            "mov {cache}, qword ptr [{table} + {tmp}*8]\n",
            "cmp byte ptr [{cache} + {stopped}], 0\n",
            "jne 7f\n",
            "cmp qword ptr [{cache} + {slot}], {expected}\n",
            "jne 7f",
        )
    };
}

/// The tail of a replace section after its commit: `{ok}` 1 on the way
/// out, 0 from `7:`; the abort handler and the descriptor.
macro_rules! replace_tail {
    () => {
        concat!(
            "5:\n",
            "mov {ok:e}, 1\n",
            "jmp 8f\n",
            abort_handler!(),
            "\n",
            "7:\n",
            "xor {ok:e}, {ok:e}\n",
            "8:\n",
            descriptor!(),
        )
    };
}

/// A replace section: `replace_checks!`, `$body` (which ends in the
/// commit), `replace_tail!`, with the operands every replace has (`$ok`
/// gets 1 or 0) and the `$extra` ones `$body` adds.
macro_rules! replace_section {
    ([$($body:expr),+ $(,)?], ($rseq:expr, $table:expr, $cpu:expr, $slot:expr, $expected:expr, $new:expr, $ok:ident), $($extra:tt)*) => {
        core::arch::asm!(
            replace_checks!(),
            $($body,)+
            replace_tail!(),
            rseq = in(reg) $rseq,
            table = in(reg) $table,
            want = in(reg) $cpu,
            slot = in(reg) $slot,
            expected = in(reg) $expected,
            new = in(reg) $new,
            ok = out(reg) $ok,
            tmp = out(reg) _,
            cache = out(reg) _,
            stopped = const STOPPED,
            $($extra)*
            options(nostack),
        )
    };
}

/// Replaces the sheaf in the spare or remote slot at `slot` of CPU `cpu`'s
/// cache with `new` if the caller runs on `cpu`, the cache is not stopped,
/// and the slot holds `expected`; true if it did. Whoever replaces a sheaf
/// owns it from then on: no other section can still be using it (they ran
/// on this CPU, so they restarted, and a drain stops the cache first).
///
/// # Safety
///
/// 1. and 2. as [`pop`]; `cpu < MAX_CPUS`; `slot` is a spare or remote
///    slot.
/// 3. `new` is a valid sheaf the caller owns and gives to the slot on
///    success.
#[inline(never)]
pub unsafe fn replace(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    cpu: u32,
    slot: usize,
    expected: *mut Sheaf,
    new: *mut Sheaf,
) -> bool {
    let ok: u32;
    // SAFETY: as in `pop`; the commit is the store of `new` into the slot.
    unsafe {
        replace_section!(
            ["mov qword ptr [{cache} + {slot}], {new}"],
            (rseq, table, cpu, slot, expected, new, ok),
        );
    }
    ok != 0
}

/// Replaces the main sheaf at `slot` of CPU `cpu`'s cache with `new`, whose
/// length and capacity are `new_sheaf_bits` (`counts::sheaf_bits`), if the
/// caller runs on `cpu`, the cache is not stopped, and the slot holds
/// `expected`. On success returns the class's word at the commit (the
/// replaced sheaf's length and capacity, to write into its header: its
/// owner is now the caller); `None` otherwise.
///
/// One section, whose commit is one 32-byte store of the class's record:
/// `new` as main, the spare as read, the word with its operations and
/// `new`'s length and room, the jumps plus the length's move (`counts`).
///
/// # Safety
///
/// As [`replace`], for a main slot (the start of a class's record);
/// `new_sheaf_bits` are `new`'s; the CPU has AVX, and the OS saves its
/// registers (`super::has_avx`).
#[inline(never)]
#[target_feature(enable = "avx")]
pub unsafe fn replace_main(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    cpu: u32,
    slot: usize,
    expected: *mut Sheaf,
    new: *mut Sheaf,
    new_sheaf_bits: u64,
) -> Option<u64> {
    let ok: u64;
    let old: u64;
    // SAFETY: as in `replace`; the commit is one 32-byte store of the
    // record (32-aligned: `ClassSlots`), every field a valid value: `new`,
    // the spare the section read, the word and the jumps computed from the
    // ones it read. `ok` holds the new word until the tail sets it. No vector
    // value outlives the section (`vzeroupper` after it).
    unsafe {
        core::arch::asm!(
            replace_checks!(),
            "mov {old}, qword ptr [{cache} + {slot} + {word_off}]",
            "mov {tmp}, qword ptr [{cache} + {slot} + {jumps_off}]",
            "mov {ok}, {old}",
            replaced_word!("ok", "tmp", "bits", "scratch"),
            "vmovq xmm0, {new}",
            "vpinsrq xmm0, xmm0, qword ptr [{cache} + {slot} + {spare_off}], 1",
            "vmovq xmm1, {ok}",
            "vpinsrq xmm1, xmm1, {tmp}, 1",
            "vinsertf128 ymm0, ymm0, xmm1, 1",
            "vmovdqa ymmword ptr [{cache} + {slot}], ymm0",
            replace_tail!(),
            "vzeroupper",
            rseq = in(reg) rseq,
            table = in(reg) table,
            want = in(reg) cpu,
            slot = in(reg) slot,
            expected = in(reg) expected,
            new = in(reg) new,
            bits = in(reg) new_sheaf_bits,
            ok = out(reg) ok,
            old = out(reg) old,
            tmp = out(reg) _,
            cache = out(reg) _,
            scratch = out(reg) _,
            out("ymm0") _,
            out("ymm1") _,
            stopped = const STOPPED,
            word_off = const WORD,
            jumps_off = const JUMPS,
            spare_off = const SPARE,
            len_mask = const LEN_MASK,
            operations_only = const OPERATIONS_ONLY,
            options(nostack),
        );
    }
    (ok != 0).then_some(old)
}
