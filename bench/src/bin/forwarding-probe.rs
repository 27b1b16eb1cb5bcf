//! Why a per-CPU alloc+free pair takes longer than a per-thread one, with
//! no allocator involved: four ways of reaching a sheaf's length, each
//! timed on the same pop-then-push loop (pop an object, write it, push it
//! back: the shape of `fastpath-budget loop`).
//!
//! ```text
//! forwarding-probe [PAIRS]    # default 200000000; prints ns per pair
//! ```
//!
//! 1. `thread`: the length and array in a slot at a fixed address, held in
//!    a register for the whole loop (the per-thread hot slot, reached from
//!    the thread pointer).
//! 2. `thread, base reloaded`: the same slot, its address loaded from
//!    memory (never written) before each operation.
//! 3. `cpu table → slot → sheaf`: a CPU id read from memory, the CPU's
//!    cache from a table, the sheaf from the cache's slot (per-CPU mode).
//! 4. `cpu stride → inline`: a CPU id read from memory, the CPU's region at
//!    a fixed stride, the length and array inline in it (tcmalloc's slab
//!    layout).
//!
//! Each pop reads the length the previous push stored, so the loop runs at
//! the speed of store-to-load forwarding. Where a core renames memory
//! (recent AMD and Intel cores forward a store to a load with no latency
//! when both address the same base register and offset), only the first
//! shape qualifies. The shapes run interleaved, several rounds, and the
//! fastest round of each is printed.

use std::hint::black_box;
use std::ptr;
use std::time::Instant;

const CLASSES: usize = 8;
const CLASS: usize = 3;
const OBJECTS: usize = 64;
const ROUNDS: usize = 5;

/// A sheaf: length, capacity, objects.
#[repr(C)]
struct Sheaf {
    len: u32,
    capacity: u32,
    objects: [*mut u8; OBJECTS],
}

/// A slot with the length and array inline.
#[repr(C)]
#[derive(Clone, Copy)]
struct Inline {
    len: u32,
    capacity: u32,
    objects: *mut *mut u8,
}

/// A CPU's cache in shape 3: a sheaf pointer per class.
#[repr(C)]
struct SlotCache {
    slots: [*mut Sheaf; CLASSES],
}

/// A CPU's region in shape 4: the slots inline.
#[repr(C)]
struct InlineCache {
    slots: [Inline; CLASSES],
}

/// Pop, write, push on an inline slot.
///
/// # Safety
///
/// `slot` is valid, with `0 < len < capacity` and `len` valid objects.
#[inline(always)]
unsafe fn pair_inline(pop_slot: *mut Inline, push_slot: impl FnOnce() -> *mut Inline, i: u64) {
    // SAFETY: the caller's duty; the length stays within (0, capacity).
    unsafe {
        let len = (*pop_slot).len;
        assert!(len > 0);
        (*pop_slot).len = len - 1;
        let object = *(*pop_slot).objects.add(len as usize - 1);
        *object = i as u8;
        let slot = push_slot();
        let len = (*slot).len;
        assert!(len < (*slot).capacity);
        *(*slot).objects.add(len as usize) = object;
        (*slot).len = len + 1;
    }
}

#[inline(never)]
fn thread_fixed(slots: *mut Inline, pairs: u64) {
    for i in 0..pairs {
        let class = black_box(CLASS);
        // SAFETY: `class < CLASSES`; the slot is set up by `main`.
        unsafe {
            let slot = slots.add(class);
            pair_inline(slot, || slot, i);
        }
    }
}

#[inline(never)]
fn thread_reloaded(base: *const *mut Inline, pairs: u64) {
    for i in 0..pairs {
        let class = black_box(CLASS);
        // SAFETY: as in `thread_fixed`; `base` holds the slots' address.
        unsafe {
            let slot_now = || ptr::read_volatile(base).add(class);
            pair_inline(slot_now(), slot_now, i);
        }
    }
}

#[inline(never)]
fn cpu_table(cpu_id: *const u32, table: *const *mut SlotCache, pairs: u64) {
    for i in 0..pairs {
        let class = black_box(CLASS);
        // SAFETY: the CPU id indexes the table, every entry is a cache and
        // every slot a sheaf set up by `main`.
        unsafe {
            let sheaf_now = || {
                let cpu = ptr::read_volatile(cpu_id) as usize;
                (*(*table.add(cpu))).slots[class]
            };
            let sheaf = sheaf_now();
            let len = (*sheaf).len;
            assert!(len > 0);
            (*sheaf).len = len - 1;
            let object = (*sheaf).objects[len as usize - 1];
            *object = i as u8;
            let sheaf = sheaf_now();
            let len = (*sheaf).len;
            assert!(len < (*sheaf).capacity);
            (*sheaf).objects[len as usize] = object;
            (*sheaf).len = len + 1;
        }
    }
}

#[inline(never)]
fn cpu_stride(cpu_id: *const u32, regions: *mut InlineCache, pairs: u64) {
    for i in 0..pairs {
        let class = black_box(CLASS);
        // SAFETY: the CPU id indexes the regions, set up by `main`.
        unsafe {
            let slot_now = || {
                let cpu = ptr::read_volatile(cpu_id) as usize;
                ptr::addr_of_mut!((*regions.add(cpu)).slots[class])
            };
            pair_inline(slot_now(), slot_now, i);
        }
    }
}

fn main() {
    let pairs: u64 = match std::env::args().nth(1).map(|arg| arg.parse()) {
        None => 200_000_000,
        Some(Ok(pairs)) => pairs,
        Some(Err(_)) => {
            eprintln!("usage: forwarding-probe [PAIRS]");
            std::process::exit(2);
        }
    };
    let objects: Vec<Box<[u8; 256]>> = (0..OBJECTS).map(|_| Box::new([0; 256])).collect();
    let mut sheaf = Box::new(Sheaf {
        len: 32,
        capacity: OBJECTS as u32,
        objects: [ptr::null_mut(); OBJECTS],
    });
    for (entry, object) in sheaf.objects.iter_mut().zip(&objects) {
        *entry = object.as_ptr().cast_mut();
    }
    let sheaf: *mut Sheaf = &mut *sheaf;
    // SAFETY: `sheaf` is the live box above.
    let array = unsafe { ptr::addr_of_mut!((*sheaf).objects) }.cast::<*mut u8>();
    let inline = Inline {
        len: 32,
        capacity: OBJECTS as u32,
        objects: array,
    };
    // The shapes share one sheaf array; each has its own length, and every
    // loop leaves the length where it found it.
    let mut thread_slots = [inline; CLASSES];
    let mut caches = [
        SlotCache {
            slots: [sheaf; CLASSES],
        },
        SlotCache {
            slots: [sheaf; CLASSES],
        },
    ];
    let table: [*mut SlotCache; 2] = [&mut caches[0], &mut caches[1]];
    let mut regions = [
        InlineCache {
            slots: [inline; CLASSES],
        },
        InlineCache {
            slots: [inline; CLASSES],
        },
    ];
    let cpu_id: u32 = 1;
    let thread_slots = thread_slots.as_mut_ptr();
    let regions = regions.as_mut_ptr();

    let shapes: [(&str, &dyn Fn()); 4] = [
        ("thread", &|| thread_fixed(thread_slots, pairs)),
        ("thread, base reloaded", &|| {
            thread_reloaded(&thread_slots, pairs)
        }),
        ("cpu table -> slot -> sheaf", &|| {
            cpu_table(&cpu_id, table.as_ptr(), pairs)
        }),
        ("cpu stride -> inline", &|| {
            cpu_stride(&cpu_id, regions, pairs)
        }),
    ];
    let mut fastest = [f64::INFINITY; 4];
    for round in 0..ROUNDS {
        // Rotate the order, so no shape always runs first.
        for step in 0..shapes.len() {
            let index = (step + round) % shapes.len();
            let start = Instant::now();
            (shapes[index].1)();
            let ns = start.elapsed().as_secs_f64() * 1e9 / pairs as f64;
            fastest[index] = fastest[index].min(ns);
        }
    }
    println!("shape                          ns/pair (fastest of {ROUNDS})");
    for ((name, _), ns) in shapes.iter().zip(fastest) {
        println!("{name:<30} {ns:>7.2}");
    }
}
