//! The restartable critical sections of the per-CPU caches (x86-64 Linux).
//!
//! Each operation is one rseq critical section (see `rseq(2)` and the
//! kernel's `include/uapi/linux/rseq.h`) that
//!
//! 1. points the thread's rseq area's `rseq_cs` at the section's
//!    descriptor (kept in the `__rseq_cs` section: version, flags, start,
//!    length up to the commit, abort address);
//! 2. reads the CPU id **inside** the section, and everything it depends
//!    on after it (the CPU's cache, the slot, the sheaf);
//! 3. ends in **one committing store** (a sheaf's length, or a slot).
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
//! A store before the commit is harmless if the section restarts: the push
//! writes the object into the slot above the sheaf's length, which nobody
//! reads until a committed length covers it.

use core::mem::offset_of;
use core::sync::atomic::AtomicPtr;

use super::{CpuCache, SpareHas};
use crate::sheaf::Sheaf;

const LEN: usize = offset_of!(Sheaf, len);
const CAPACITY: usize = offset_of!(Sheaf, capacity);
const NODE: usize = offset_of!(Sheaf, node);
const OBJECTS: usize = offset_of!(Sheaf, objects);
const STOPPED: usize = offset_of!(CpuCache, stopped);
const NODE_BASE: usize = offset_of!(CpuCache, node_base);
const NODE_SPAN: usize = offset_of!(CpuCache, node_span);

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
/// is a cache (the stopped, empty `NO_CACHE` for a CPU that has none yet),
/// and the CPU id of every area a section runs with indexes the table
/// (duty 1 of the sections), so there is neither a bound nor a null test.
macro_rules! current_cache {
    () => {
        concat!(
            "mov {at:e}, dword ptr [{rseq} + 4]\n",
            "mov {at}, qword ptr [{table} + {at}*8]",
        )
    };
}

/// Pushes `{object}` onto the sheaf in `{at}` if it has room (else goes to
/// `$miss`); the commit is the store of the new length.
macro_rules! push_onto_sheaf {
    ($miss:literal) => {
        concat!(
            "mov {len:e}, dword ptr [{at} + {len_off}]\n",
            "cmp {len:e}, dword ptr [{at} + {capacity_off}]\n",
            "jae ",
            $miss,
            "\n",
            "mov qword ptr [{at} + {len}*8 + {objects}], {object}\n",
            "add {len:e}, 1\n",
            "mov dword ptr [{at} + {len_off}], {len:e}\n",
            "5:",
        )
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

// The sections read these fields with fixed widths.
const _: () = assert!(LEN == 0 && CAPACITY == 4);
const _: () = assert!(core::mem::size_of::<crate::node::NodeId>() == 2);
const _: () = assert!(core::mem::size_of::<core::sync::atomic::AtomicU8>() == 1);

/// Pops an object from the sheaf in slot `slot` (a byte offset into
/// [`CpuCache`]) of the current CPU's cache; null if the CPU has no cache
/// or the sheaf is empty.
///
/// # Safety
///
/// 1. `rseq` is the calling thread's registered rseq area, whose CPU id
///    indexes `table` once set (per-CPU mode checked that every possible
///    CPU id does, and the thread checked that the id was set), or the
///    stand-in [`super::no_rseq`].
/// 2. `table` is the table of [`super::CPU_CACHES`]: every entry points to
///    a live `CpuCache`, whose slot at `slot` always holds a valid sheaf
///    (the empty sheaf when there is none).
#[inline(always)]
pub unsafe fn pop(rseq: *mut u8, table: *const AtomicPtr<CpuCache>, slot: usize) -> *mut u8 {
    let object: *mut u8;
    // SAFETY: duties 1 and 2: every address the section touches is the
    // rseq area, the table, a live cache and a live sheaf; it writes only
    // `rseq_cs` and, as its commit, the sheaf's length.
    //
    // Register use is kept to three outputs (`at` walks cpu id, cache,
    // sheaf) so the inlined copies spill nothing; the abort handler and
    // the miss path live out of line, so a hit runs straight through.
    unsafe {
        core::arch::asm!(
            arm!("at"),
            current_cache!(),
            "mov {at}, qword ptr [{at} + {slot}]",
            "mov {len:e}, dword ptr [{at} + {len_off}]",
            "sub {len:e}, 1",
            "jb 7f",
            "mov {object}, qword ptr [{at} + {len}*8 + {objects}]",
            "mov dword ptr [{at} + {len_off}], {len:e}",
            "5:",
            out_of_line_tail!("object"),
            descriptor!(),
            rseq = in(reg) rseq,
            table = in(reg) table,
            slot = in(reg) slot,
            object = out(reg) object,
            at = out(reg) _,
            len = out(reg) _,
            len_off = const LEN,
            objects = const OBJECTS,
            options(nostack),
        );
    }
    object
}

/// A push section: arm, find the CPU's cache, run `$check` (which leaves
/// the sheaf to push onto in `{at}`, or jumps to `{miss}`), push, commit;
/// a miss returns false from the enclosing function. `$extra` are the
/// operands `$check` adds. Both pushes share everything but the check.
macro_rules! push_section {
    ($rseq:expr, $table:expr, $slot:expr, $object:expr, [$($check:literal),+ $(,)?], $($extra:tt)*) => {
        core::arch::asm!(
            arm!("at"),
            current_cache!(),
            $($check,)+
            push_onto_sheaf!("{miss}"),
            out_of_line_abort!(),
            descriptor!(),
            rseq = in(reg) $rseq,
            table = in(reg) $table,
            slot = in(reg) $slot,
            object = in(reg) $object,
            at = out(reg) _,
            len = out(reg) _,
            len_off = const LEN,
            capacity_off = const CAPACITY,
            objects = const OBJECTS,
            miss = label { return false; },
            $($extra)*
            options(nostack),
        )
    };
}

/// Pushes `object` onto the main sheaf in slot `slot` of the current CPU's
/// cache if the object's home is that CPU's node (its address lies in the
/// node's arena region, which the cache records) and the sheaf has room;
/// false otherwise.
///
/// # Safety
///
/// 1. and 2. as [`pop`]; `slot` is a main slot (its sheaf's objects have
///    the cache's node as home).
#[inline(always)]
pub unsafe fn push(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    slot: usize,
    object: *mut u8,
) -> bool {
    // SAFETY: as in `pop`; the store into the sheaf's array lies above its
    // committed length and below its capacity, inside its storage. A miss
    // leaves the section by a jump to the label (nothing committed).
    unsafe {
        push_section!(
            rseq,
            table,
            slot,
            object,
            [
                "mov {len}, {object}",
                "sub {len}, qword ptr [{at} + {node_base}]",
                "cmp {len}, qword ptr [{at} + {node_span}]",
                "jae {miss}",
                "mov {at}, qword ptr [{at} + {slot}]",
            ],
            node_base = const NODE_BASE,
            node_span = const NODE_SPAN,
        );
    }
    true
}

/// Pushes `object` onto the sheaf in slot `slot` of the current CPU's
/// cache if that sheaf's objects have home `home` and it has room; false
/// otherwise. For the remote batches, whose sheaves each hold one other
/// node's objects.
///
/// # Safety
///
/// 1. and 2. as [`pop`].
#[inline(always)]
pub unsafe fn push_batch(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    slot: usize,
    object: *mut u8,
    home: usize,
) -> bool {
    // SAFETY: as in `push`.
    unsafe {
        push_section!(
            rseq,
            table,
            slot,
            object,
            [
                "mov {at}, qword ptr [{at} + {slot}]",
                "movzx {len:e}, word ptr [{at} + {node_off}]",
                "cmp {len}, {home}",
                "jne {miss}",
            ],
            home = in(reg) home,
            node_off = const NODE,
        );
    }
    true
}

/// Swaps main and spare of the class whose main slot is at `main_slot`
/// (the spare is the next word), on the current CPU's cache, if the cache
/// is not stopped, the spare has `capacity` (the cache's: a spare of
/// another capacity goes through the slow path, which resizes it) and the
/// spare `has` what the caller needs; true if it did. One section, and its
/// commit is one 16-byte store of both slots: a spare swap costs one
/// section instead of two replaces and a park.
///
/// # Safety
///
/// 1. and 2. as [`pop`]; `main_slot` is a main slot's offset.
#[inline]
pub unsafe fn swap_spare(
    rseq: *mut u8,
    table: *const AtomicPtr<CpuCache>,
    main_slot: usize,
    capacity: u32,
    has: SpareHas,
) -> bool {
    // `cmp` then `je` (needs objects: a length of 0 misses) or `jne`.
    macro_rules! section {
        ($miss_if_empty:literal) => {
            // SAFETY: as in `pop`: the addresses are the rseq area, the
            // table, a live cache and the live sheaf in its spare slot; the
            // only store is the commit, both slots at once (16-byte
            // aligned: `MainAndSpare`), each slot getting a valid sheaf the
            // other held.
            unsafe {
                core::arch::asm!(
                    arm!("at"),
                    current_cache!(),
                    "cmp byte ptr [{at} + {stopped}], 0",
                    "jne {miss}",
                    "mov {spare}, qword ptr [{at} + {slot} + 8]",
                    "cmp dword ptr [{spare} + {capacity_off}], {capacity:e}",
                    "jne {miss}",
                    "cmp dword ptr [{spare} + {len_off}], 0",
                    $miss_if_empty,
                    "movdqu {pair}, xmmword ptr [{at} + {slot}]",
                    "pshufd {pair}, {pair}, 0x4E",
                    "movdqu xmmword ptr [{at} + {slot}], {pair}",
                    "5:",
                    out_of_line_abort!(),
                    descriptor!(),
                    rseq = in(reg) rseq,
                    table = in(reg) table,
                    slot = in(reg) main_slot,
                    capacity = in(reg) capacity,
                    at = out(reg) _,
                    spare = out(reg) _,
                    pair = out(xmm_reg) _,
                    stopped = const STOPPED,
                    len_off = const LEN,
                    capacity_off = const CAPACITY,
                    miss = label { return false; },
                    options(nostack),
                );
            }
        };
    }
    match has {
        SpareHas::Objects => section!("je {miss}"),
        SpareHas::NoObjects => section!("jne {miss}"),
    }
    true
}

/// Replaces the sheaf in slot `slot` of CPU `cpu`'s cache with `new` if the
/// caller runs on `cpu`, the cache is not stopped, and the slot holds
/// `expected`; true if it did. Whoever replaces a sheaf owns it from then
/// on: no other section can still be using it (they ran on this CPU, so
/// they restarted, and a drain stops the cache first).
///
/// # Safety
///
/// 1. and 2. as [`pop`]; `cpu < MAX_CPUS`.
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
        core::arch::asm!(
            arm!("tmp"),
            "mov {tmp:e}, dword ptr [{rseq} + 4]",
            "cmp {tmp:e}, {want:e}",
            "jne 7f",
            "mov {cache}, qword ptr [{table} + {tmp}*8]",
            "cmp byte ptr [{cache} + {stopped}], 0",
            "jne 7f",
            "cmp qword ptr [{cache} + {slot}], {expected}",
            "jne 7f",
            "mov qword ptr [{cache} + {slot}], {new}",
            "5:",
            "mov {ok:e}, 1",
            "jmp 8f",
            abort_handler!(),
            "7:",
            "xor {ok:e}, {ok:e}",
            "8:",
            descriptor!(),
            rseq = in(reg) rseq,
            table = in(reg) table,
            want = in(reg) cpu,
            slot = in(reg) slot,
            expected = in(reg) expected,
            new = in(reg) new,
            ok = out(reg) ok,
            tmp = out(reg) _,
            cache = out(reg) _,
            stopped = const STOPPED,
            options(nostack),
        );
    }
    ok != 0
}
