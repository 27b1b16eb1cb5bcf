//! Heavy use of std collections with sheafalloc as the global allocator.

use std::collections::{BTreeMap, HashMap, VecDeque};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[test]
fn vectors_strings_maps_and_queues_keep_their_contents() {
    let mut map: HashMap<String, Vec<u64>> = HashMap::new();
    for i in 0..20_000u64 {
        map.entry(format!("key-{}", i % 997)).or_default().push(i);
    }
    let total: u64 = map.values().flat_map(|v| v.iter()).sum();
    assert_eq!(total, (0..20_000u64).sum::<u64>());
    for (key, values) in &map {
        let k: u64 = key[4..].parse().unwrap();
        assert!(values.iter().all(|v| v % 997 == k));
    }

    let mut tree = BTreeMap::new();
    for i in 0..50_000u32 {
        tree.insert(i.wrapping_mul(2_654_435_761), i);
    }
    assert_eq!(tree.len(), 50_000);
    let mut queue: VecDeque<Box<[u8]>> = VecDeque::new();
    for i in 0..10_000usize {
        queue.push_back(vec![(i % 251) as u8; 1 + i % 3000].into_boxed_slice());
        if queue.len() > 100 {
            let front = queue.pop_front().unwrap();
            let first = front[0];
            assert!(front.iter().all(|b| *b == first));
        }
    }
    let mut s = String::new();
    for i in 0..100_000 {
        s.push(char::from(b'a' + (i % 26) as u8));
    }
    assert_eq!(s.len(), 100_000);
    assert!(s
        .bytes()
        .enumerate()
        .all(|(i, b)| b == b'a' + (i % 26) as u8));
}

#[test]
fn large_and_over_aligned_allocations_work() {
    let big = vec![7u8; 10 << 20];
    assert!(big.iter().all(|b| *b == 7));
    let zeroed = vec![0u64; 1 << 20];
    assert!(zeroed.iter().all(|v| *v == 0));

    #[repr(align(4096))]
    struct Page([u8; 4096]);
    let pages: Vec<Box<Page>> = (0..64).map(|i| Box::new(Page([i as u8; 4096]))).collect();
    for (i, page) in pages.iter().enumerate() {
        assert_eq!(&**page as *const Page as usize % 4096, 0);
        assert!(page.0.iter().all(|b| *b == i as u8));
    }
}

#[test]
fn over_aligned_requests_in_coloured_classes_keep_their_alignment() {
    // Sizes whose classes are coloured or padded (their slabs start
    // objects at a line offset, or a line apart: 1152, 1536, 2304, 3072,
    // 4096, 7168, 8192 B), asked for with every
    // alignment from a line to a page, many at a time so that they span
    // several slabs and colours; every block is aligned, filled and
    // checked before it is freed.
    for size in [1100, 1500, 2112, 3000, 4096, 7000, 8192] {
        for align in [16, 32, 64, 128, 256, 512, 4096] {
            let layout = std::alloc::Layout::from_size_align(size, align).unwrap();
            check_and_free(layout, fill_blocks(layout, 80));
        }
    }
}

#[test]
fn buffers_of_1_to_8_kib_start_on_many_cache_sets_and_page_aligned_ones_on_pages() {
    use std::alloc::Layout;
    use std::collections::HashSet;
    // A burst of 64 buffers of a padded class: their first lines fall in
    // many of the L1's 64 sets. (With strides of exactly 1, 2 and 4 KiB,
    // a slab's objects would share 4, 2 and 1 of them.)
    for (size, align) in [(1024, 8), (2048, 16), (4096, 8), (8192, 64), (5000, 8)] {
        let layout = Layout::from_size_align(size, align).unwrap();
        let blocks = fill_blocks(layout, 64);
        let sets: HashSet<usize> = blocks.iter().map(|&b| b as usize / 64 % 64).collect();
        assert!(sets.len() >= 8, "size {size}: {} sets", sets.len());
        check_and_free(layout, blocks);
    }
    // Page-aligned buffers keep their alignment, from the aligned twins.
    for size in [1024, 2048, 4096, 8192] {
        let name = format!("aligned-{size}");
        let before = sheafalloc::cache(&name).unwrap();
        let layout = Layout::from_size_align(size, size).unwrap();
        let blocks = fill_blocks(layout, 40);
        assert!(blocks.iter().all(|&b| b as usize % size == 0), "{name}");
        let during = sheafalloc::cache(&name).unwrap();
        assert!(during.allocations >= before.allocations + 40, "{name}");
        check_and_free(layout, blocks);
    }
}

/// `n` blocks of `layout`, each checked for null and alignment, block `i`
/// filled with the byte `i`.
fn fill_blocks(layout: std::alloc::Layout, n: usize) -> Vec<*mut u8> {
    (0..n)
        .map(|i| {
            // SAFETY: a non-zero size.
            let block = unsafe { std::alloc::alloc(layout) };
            assert!(!block.is_null());
            assert_eq!(block as usize % layout.align(), 0, "{layout:?}");
            // SAFETY: a fresh block of `layout.size()` bytes.
            unsafe { block.write_bytes(i as u8, layout.size()) };
            block
        })
        .collect()
}

/// Checks that block `i` still holds the byte `i`, then frees it.
fn check_and_free(layout: std::alloc::Layout, blocks: Vec<*mut u8>) {
    for (i, block) in blocks.into_iter().enumerate() {
        // SAFETY: filled by `fill_blocks`, still live.
        let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
        assert!(bytes.iter().all(|&b| b == i as u8), "{layout:?}");
        // SAFETY: allocated with `layout`, freed once.
        unsafe { std::alloc::dealloc(block, layout) };
    }
}

#[test]
fn stats_count_allocations_of_the_right_cache() {
    let before = sheafalloc::cache("size-2304").unwrap();
    let buffers: Vec<Vec<u8>> = (0..500).map(|_| Vec::with_capacity(2112)).collect();
    let during = sheafalloc::cache("size-2304").unwrap();
    assert!(during.allocations >= before.allocations + 500);
    drop(buffers);
    let after = sheafalloc::cache("size-2304").unwrap();
    assert!(after.frees >= before.frees + 500);
}
