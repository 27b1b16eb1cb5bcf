//! A `fork()` while another thread is in the engine's one-time
//! initialisation: the child must finish initialising by itself and
//! allocate, not wait for an initialiser that does not exist in it.
//!
//! The test drives the engine directly (its process runs on the system
//! allocator, so nothing initialises the engine behind its back) and uses
//! the `fault-injection` hook that pauses initialisation half-way.

#[path = "../../alloc-global/tests/common/child.rs"]
mod child;

use std::time::Duration;

use child::{wait_for_child, ChildEnd};
use sheafalloc_core::os::fault;
use sheafalloc_core::runtime;
use sheafalloc_core::{SizeClass, ThreadCache};

/// Allocates and frees through a thread cache of the engine; 0 if every
/// object came back intact.
fn allocate_through_the_engine() -> i32 {
    if !runtime::ensure_init() {
        return 2;
    }
    let cache: &'static ThreadCache = Box::leak(Box::new(ThreadCache::new()));
    let class = SizeClass::for_layout(2112, 8).expect("a class");
    let objects: Vec<*mut u8> = (0..200).map(|_| cache.alloc_slow(class)).collect();
    for (i, &object) in objects.iter().enumerate() {
        if object.is_null() {
            return 3;
        }
        // SAFETY: a fresh object of at least 2112 bytes.
        unsafe { object.write_bytes(i as u8, 2112) };
    }
    for (i, &object) in objects.iter().enumerate() {
        // SAFETY: written above, still ours.
        let intact = unsafe { std::slice::from_raw_parts(object, 2112) }
            .iter()
            .all(|&b| b == i as u8);
        if !intact {
            return 4;
        }
        // SAFETY: allocated for `class` above and no longer used.
        unsafe { cache.dealloc_slow(class, object) };
    }
    0
}

#[test]
fn a_child_forked_during_initialisation_initialises_itself() {
    fault::pause_next_init(2000);
    let initialiser = std::thread::spawn(runtime::ensure_init);
    while !runtime::init_in_progress() {
        std::thread::yield_now();
    }
    // SAFETY: fork has no memory-safety preconditions; the child only runs
    // `allocate_through_the_engine` and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = allocate_through_the_engine();
        // SAFETY: end the child without the test harness's teardown.
        unsafe { libc::_exit(code) };
    }
    // The parent's initialiser is still pausing: a child that waited for it
    // would wait forever (it does not exist in the child).
    assert_eq!(
        wait_for_child(pid, Duration::from_secs(20)),
        ChildEnd::Exited(0),
        "the child hung or failed"
    );
    assert!(initialiser.join().expect("initialiser"), "parent init");
    assert_eq!(allocate_through_the_engine(), 0, "the parent allocates too");
}
