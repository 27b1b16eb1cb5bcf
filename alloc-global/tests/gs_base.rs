//! Per-CPU sheaves reach a thread's CPU cache through the thread's GS
//! segment base. A thread whose GS base something else sets, before or
//! after its first allocation, must keep that base and that memory: the
//! engine never writes through a base it did not set, never sets the
//! register over another's, and the thread goes on allocating correctly
//! (on sheaves of its own). Runs in both modes; in per-thread mode the
//! engine never touches GS at all.

use std::alloc::{GlobalAlloc, Layout};

use sheafalloc_core::os;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// The memory another component's GS base points at, filled with a
/// pattern no cache's owner word can equal.
const FOREIGN_BYTES: usize = 1 << 16;
const PATTERN: u8 = 0xA5;

/// Allocates, fills, checks and frees `rounds` bursts of objects of sizes
/// from 8 B to 8 KiB (many sheaves' worth, so slow paths run).
fn churn(rounds: usize) {
    for round in 0..rounds {
        let mut live = Vec::with_capacity(512);
        for i in 0..512usize {
            let size = 8 << (i % 11);
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: a valid, non-zero layout.
            let object = unsafe { GLOBAL.alloc(layout) };
            assert!(!object.is_null());
            let tag = (round * 31 + i) as u8;
            // SAFETY: `size` bytes were just allocated.
            unsafe { object.write_bytes(tag, size) };
            live.push((object, layout, tag));
        }
        for (object, layout, tag) in live {
            // SAFETY: written above with `layout.size()` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(object, layout.size()) };
            assert!(
                bytes.iter().all(|&b| b == tag),
                "an object lost its contents"
            );
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { GLOBAL.dealloc(object, layout) };
        }
    }
}

/// Sets the calling thread's GS base to a fresh block of the pattern;
/// returns the block (`None` where threads cannot set their GS base).
fn take_gs() -> Option<Box<[u8]>> {
    if !os::gs_base_writable() {
        return None;
    }
    let block = vec![PATTERN; FOREIGN_BYTES].into_boxed_slice();
    // SAFETY: the CPU and kernel allow it (checked); this test is the
    // "something else" that uses this thread's GS base from now on.
    unsafe { os::set_gs_base(block.as_ptr() as usize) };
    Some(block)
}

fn assert_gs_kept(block: &[u8]) {
    // SAFETY: `take_gs` checked that the instruction is allowed.
    let base = unsafe { os::gs_base() };
    assert_eq!(
        base,
        block.as_ptr() as usize,
        "the engine set the thread's GS base over another component's"
    );
    assert!(
        block.iter().all(|&b| b == PATTERN),
        "the engine wrote into the memory another component's GS base points at"
    );
}

#[test]
fn a_gs_base_set_before_the_first_allocation_is_left_alone() {
    std::thread::spawn(|| {
        let Some(block) = take_gs() else {
            return;
        };
        churn(20);
        assert_gs_kept(&block);
    })
    .join()
    .expect("the thread failed");
}

#[test]
fn a_gs_base_set_after_the_thread_attached_makes_it_leave_the_cpus_sheaves() {
    std::thread::spawn(|| {
        churn(2);
        let per_cpu = sheafalloc::cache_mode() == sheafalloc::CacheMode::PerCpu;
        if per_cpu {
            // SAFETY: per-CPU mode requires the instruction to be allowed.
            let base = unsafe { os::gs_base() };
            assert_ne!(base, 0, "a thread on per-CPU sheaves has a GS base");
        }
        let taken_before = sheafalloc_core::percpu::threads_with_gs_taken();
        let Some(block) = take_gs() else {
            return;
        };
        churn(20);
        assert_gs_kept(&block);
        let taken = sheafalloc_core::percpu::threads_with_gs_taken() - taken_before;
        if per_cpu {
            assert!(
                taken >= 1,
                "the thread did not notice that its GS base was taken"
            );
        } else {
            assert_eq!(taken, 0, "per-thread mode never uses GS");
        }
    })
    .join()
    .expect("the thread failed");
}
