//! OS failures injected at chosen points (feature `fault-injection`): the
//! allocator answers null without corrupting its state, recovers when the
//! fault clears, and keeps data intact when the OS refuses pages back.
//! A plain `main`: no other test thread may allocate while a fault is armed.

mod common;

use std::alloc::{GlobalAlloc, Layout};

use sheafalloc_core::os::fault::{self, FaultPoint};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn main() {
    let mut passed = 0;
    for (name, case) in [
        (
            "commit_failure_gives_null_then_recovers",
            commit_failure_gives_null_then_recovers as fn(),
        ),
        (
            "map_failure_gives_null_for_large_objects",
            map_failure_gives_null_for_large_objects,
        ),
        (
            "failed_return_to_os_keeps_data",
            failed_return_to_os_keeps_data,
        ),
    ] {
        case();
        fault::clear();
        println!("{name}: ok");
        passed += 1;
    }
    println!("test result: ok. {passed} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

fn commit_failure_gives_null_then_recovers() {
    let allocator = sheafalloc::SheafAlloc::new();
    // A span class nothing else uses: its first slab needs fresh address
    // space, i.e. a commit.
    let layout = Layout::from_size_align(200_000, 8).unwrap();
    let name = "size-212992";
    let before = sheafalloc::cache(name).unwrap();
    assert_eq!(before.slabs, 0, "{name} already has slabs");
    fault::inject(FaultPoint::Commit, 0, u64::MAX);
    // SAFETY: non-zero size.
    let failed = unsafe { allocator.alloc(layout) };
    fault::clear();
    assert!(failed.is_null(), "allocation must fail while commits fail");
    let after_fault = sheafalloc::cache(name).unwrap();
    assert!(
        after_fault.alloc_failures == before.alloc_failures + 1,
        "{after_fault:?}"
    );
    assert_eq!(after_fault.slabs, 0);
    assert_eq!(after_fault.live_objects, before.live_objects);

    // The fault is gone: allocation works and the state is sound.
    let mut objects = Vec::new();
    for generation in 0..20u64 {
        // SAFETY: non-zero size.
        let object = unsafe { allocator.alloc(layout) };
        assert!(
            !object.is_null(),
            "allocation after the fault cleared failed"
        );
        // SAFETY: `layout.size()` bytes just allocated.
        unsafe { common::fill(object, layout.size(), generation) };
        objects.push((object, generation));
    }
    for (object, generation) in objects {
        // SAFETY: live objects of `layout`.
        unsafe {
            assert!(common::check(object, layout.size(), generation).is_ok());
            allocator.dealloc(object, layout);
        }
    }
    common::assert_quiescent(name, 0);
}

fn map_failure_gives_null_for_large_objects() {
    let allocator = sheafalloc::SheafAlloc::new();
    let layout = Layout::from_size_align(4 << 20, 4096).unwrap();
    let before = sheafalloc::large();
    fault::inject(FaultPoint::Map, 0, 1);
    // SAFETY: non-zero size.
    let failed = unsafe { allocator.alloc_zeroed(layout) };
    assert!(failed.is_null());
    let after = sheafalloc::large();
    assert_eq!(after.alloc_failures, before.alloc_failures + 1);
    assert_eq!(after.live_objects, before.live_objects);
    // Only one call was armed: the next one succeeds, zeroed.
    // SAFETY: non-zero size.
    let object = unsafe { allocator.alloc_zeroed(layout) };
    assert!(!object.is_null());
    // SAFETY: 4 MiB just allocated.
    let bytes = unsafe { std::slice::from_raw_parts_mut(object, layout.size()) };
    assert!(bytes.iter().all(|b| *b == 0));
    bytes.fill(7);
    // Growing by mremap fails under a fault and leaves the block intact...
    fault::inject(FaultPoint::Map, 0, 2);
    // SAFETY: live block of `layout`.
    let grown = unsafe { allocator.realloc(object, layout, 8 << 20) };
    fault::clear();
    assert!(grown.is_null(), "realloc must fail while mappings fail");
    assert!(
        bytes.iter().all(|b| *b == 7),
        "the old block must be untouched"
    );
    // ...and works once the fault is gone.
    // SAFETY: live block of `layout`.
    let grown = unsafe { allocator.realloc(object, layout, 8 << 20) };
    assert!(!grown.is_null());
    // SAFETY: the first 4 MiB were copied or remapped.
    assert!(unsafe { std::slice::from_raw_parts(grown, 4 << 20) }
        .iter()
        .all(|b| *b == 7));
    // SAFETY: live block of the grown layout.
    unsafe { allocator.dealloc(grown, Layout::from_size_align(8 << 20, 4096).unwrap()) };
}

fn failed_return_to_os_keeps_data() {
    let name = "size-5120";
    let layout = Layout::from_size_align(5000, 8).unwrap();
    let allocator = sheafalloc::SheafAlloc::new();
    // Fill many slabs, keep every 50th object live, free the rest.
    let mut live = Vec::new();
    let mut freed = Vec::new();
    for generation in 0..5000u64 {
        // SAFETY: non-zero size.
        let object = unsafe { allocator.alloc(layout) };
        assert!(!object.is_null());
        // SAFETY: just allocated.
        unsafe { common::fill(object, layout.size(), generation) };
        if generation % 50 == 0 {
            live.push((object, generation));
        } else {
            freed.push(object);
        }
    }
    for object in freed {
        // SAFETY: live object of `layout`.
        unsafe { allocator.dealloc(object, layout) };
    }
    sheafalloc::flush_thread_cache();
    let before = sheafalloc::cache(name).unwrap();
    fault::inject(FaultPoint::Return, 0, u64::MAX);
    let report = sheafalloc::purge();
    fault::clear();
    let after = sheafalloc::cache(name).unwrap();
    assert_eq!(
        report.bytes_returned, 0,
        "nothing can be returned while madvise fails"
    );
    assert!(after.return_failures > before.return_failures, "{after:?}");
    assert_eq!(
        after.slabs, before.slabs,
        "slabs must be kept when the OS refuses them"
    );
    for &(object, generation) in &live {
        // SAFETY: live objects of `layout`.
        let intact = unsafe { common::check(object, layout.size(), generation) };
        assert!(intact.is_ok(), "live data changed");
    }
    // The kept empty slabs are still usable...
    let reused: Vec<*mut u8> = (0..100)
        // SAFETY: non-zero size.
        .map(|_| unsafe { allocator.alloc(layout) })
        .collect();
    assert!(reused.iter().all(|p| !p.is_null()));
    for object in reused {
        // SAFETY: live object of `layout`.
        unsafe { allocator.dealloc(object, layout) };
    }
    // ...and go back once the OS takes them.
    sheafalloc::flush_thread_cache();
    let report = sheafalloc::purge();
    assert!(report.bytes_returned > 0);
    for (object, generation) in live {
        // SAFETY: live objects, freed once.
        unsafe {
            assert!(common::check(object, layout.size(), generation).is_ok());
            allocator.dealloc(object, layout);
        }
    }
    common::assert_quiescent(name, 0);
}
