//! Property tests: random sequences of alloc / alloc_zeroed / realloc /
//! dealloc over varied layouts, against a shadow model of live blocks.
//! Checks alignment, non-overlap, zeroing, and that contents survive
//! reallocation.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;

use proptest::prelude::*;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_shift: u32,
        zeroed: bool,
    },
    Realloc {
        pick: usize,
        new_size: usize,
    },
    Dealloc {
        pick: usize,
    },
}

fn size_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 1usize..=128,
        3 => 129usize..=4096,
        2 => 4097usize..=300_000,
        1 => 300_001usize..=2_000_000,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (size_strategy(), 0u32..=13, any::<bool>())
            .prop_map(|(size, align_shift, zeroed)| Op::Alloc { size, align_shift, zeroed }),
        2 => (any::<usize>(), size_strategy()).prop_map(|(pick, new_size)| Op::Realloc { pick, new_size }),
        3 => any::<usize>().prop_map(|pick| Op::Dealloc { pick }),
    ]
}

struct Block {
    layout: Layout,
    generation: u64,
}

fn overlaps(live: &BTreeMap<usize, Block>, start: usize, size: usize) -> bool {
    if let Some((&before, block)) = live.range(..=start).next_back() {
        if before + block.layout.size() > start {
            return true;
        }
    }
    live.range(start..start + size).next().is_some()
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let allocator = sheafalloc::SheafAlloc::new();
    let mut live: BTreeMap<usize, Block> = BTreeMap::new();
    let mut generation = 0u64;
    for op in ops {
        generation += 1;
        match op {
            Op::Alloc {
                size,
                align_shift,
                zeroed,
            } => {
                let layout = Layout::from_size_align(size, 1 << align_shift).unwrap();
                // SAFETY: non-zero size.
                let ptr = unsafe {
                    if zeroed {
                        allocator.alloc_zeroed(layout)
                    } else {
                        allocator.alloc(layout)
                    }
                };
                prop_assert!(!ptr.is_null());
                prop_assert_eq!(ptr as usize % layout.align(), 0, "misaligned {:?}", layout);
                prop_assert!(
                    !overlaps(&live, ptr as usize, size),
                    "overlap at {:p} {:?}",
                    ptr,
                    layout
                );
                if zeroed {
                    // SAFETY: `size` bytes were just allocated.
                    let bytes = unsafe { std::slice::from_raw_parts(ptr, size) };
                    prop_assert!(bytes.iter().all(|b| *b == 0), "alloc_zeroed not zero");
                }
                // SAFETY: `size` bytes were just allocated.
                unsafe { common::fill(ptr, size, generation) };
                live.insert(ptr as usize, Block { layout, generation });
            }
            Op::Realloc { pick, new_size } => {
                if live.is_empty() {
                    continue;
                }
                let addr = *live.keys().nth(pick % live.len()).unwrap();
                let block = live.remove(&addr).unwrap();
                let old = block.layout;
                // SAFETY: `addr` is live with layout `old`.
                let ptr = unsafe { allocator.realloc(addr as *mut u8, old, new_size) };
                prop_assert!(!ptr.is_null());
                prop_assert_eq!(ptr as usize % old.align(), 0);
                let kept = old.size().min(new_size);
                // The first `kept` bytes must be the old contents, which were
                // written for the old address.
                for index in common::positions(old.size()).take_while(|&i| i < kept) {
                    // SAFETY: `kept` bytes are valid in the new block.
                    let byte = unsafe { *ptr.add(index) };
                    let expected = common::pattern_byte(addr, old.size(), block.generation, index);
                    prop_assert_eq!(byte, expected, "realloc lost byte {} of {:?}", index, old);
                }
                prop_assert!(!overlaps(&live, ptr as usize, new_size), "realloc overlap");
                // SAFETY: `new_size` bytes are valid.
                unsafe { common::fill(ptr, new_size, generation) };
                let layout = Layout::from_size_align(new_size, old.align()).unwrap();
                live.insert(ptr as usize, Block { layout, generation });
            }
            Op::Dealloc { pick } => {
                if live.is_empty() {
                    continue;
                }
                let addr = *live.keys().nth(pick % live.len()).unwrap();
                let block = live.remove(&addr).unwrap();
                // SAFETY: live block of this size.
                let intact = unsafe {
                    common::check(addr as *const u8, block.layout.size(), block.generation)
                };
                prop_assert!(
                    intact.is_ok(),
                    "object at {:#x} corrupted at byte {:?}",
                    addr,
                    intact
                );
                // SAFETY: live block with this layout.
                unsafe { allocator.dealloc(addr as *mut u8, block.layout) };
            }
        }
    }
    for (addr, block) in live {
        // SAFETY: live block of this size.
        let intact =
            unsafe { common::check(addr as *const u8, block.layout.size(), block.generation) };
        prop_assert!(intact.is_ok(), "object at {:#x} corrupted", addr);
        // SAFETY: live block with this layout.
        unsafe { allocator.dealloc(addr as *mut u8, block.layout) };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_alignment_disjointness_and_contents(ops in proptest::collection::vec(op_strategy(), 1..400)) {
        run(ops)?;
    }
}

#[test]
fn small_capacity_forces_every_slow_path() {
    // Capacity 1 on the busiest classes makes nearly every operation swap,
    // visit the barn, refill or flush.
    for name in ["size-16", "size-32", "size-64", "size-256", "size-2304"] {
        sheafalloc::set_sheaf_capacity(name, 1).unwrap();
    }
    let mut rng = common::Rng::new(common::seed(7));
    let ops: Vec<Op> = (0..20_000)
        .map(|_| match rng.below(10) {
            0..=4 => Op::Alloc {
                size: [16, 32, 64, 256, 2112][rng.below(5) as usize],
                align_shift: 3,
                zeroed: false,
            },
            5 => Op::Realloc {
                pick: rng.next() as usize,
                new_size: [24, 250, 2000][rng.below(3) as usize],
            },
            _ => Op::Dealloc {
                pick: rng.next() as usize,
            },
        })
        .collect();
    run(ops).unwrap();
    for name in ["size-16", "size-32", "size-64", "size-256", "size-2304"] {
        sheafalloc::set_sheaf_capacity(name, 60).unwrap();
    }
}

#[test]
fn impossible_requests_return_null() {
    let allocator = sheafalloc::SheafAlloc::new();
    let huge = Layout::from_size_align(isize::MAX as usize - 4095, 4096).unwrap();
    // SAFETY: non-zero size; the allocator must answer null.
    assert!(unsafe { allocator.alloc(huge) }.is_null());
    let aligned_huge = Layout::from_size_align(1 << 46, 1 << 40).unwrap();
    // SAFETY: as above.
    assert!(unsafe { allocator.alloc(aligned_huge) }.is_null());
    // A request the system cannot back (64 TiB) fails cleanly too.
    let too_big = Layout::from_size_align(1 << 46, 8).unwrap();
    // SAFETY: as above.
    assert!(unsafe { allocator.alloc_zeroed(too_big) }.is_null());
}
