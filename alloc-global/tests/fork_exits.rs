//! fork() while threads are created, allocate, free on other threads and
//! exit, continuously: the parent never hangs in `fork()`, and every child
//! can allocate, free and start a thread.
//!
//! A binary of its own: its parent starts threads all the time, and a
//! child forked while another test's thread was being started could not
//! start a `std` thread itself (the standard library's thread-start lock
//! would be held by a thread that does not exist in the child), so the
//! child here starts its thread with `pthread_create`.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::child::{wait_for_child, ChildEnd};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Forks from a parent whose threads are created, allocate a burst, hand
/// half of it to a freeing thread and exit, continuously: every exit
/// flushes a thread's sheaves into the barns and the pool while the main
/// thread forks. The fork prepare handler takes every engine lock, so any
/// path that takes two of them in another order deadlocks the parent
/// inside `fork()` — a watchdog turns that into a failure instead of a
/// hung test run.
#[test]
fn forks_while_threads_come_and_go() {
    let forks: usize = std::env::var("SHEAFALLOC_FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let stop = Arc::new(AtomicBool::new(false));
    let exited = Arc::new(AtomicU64::new(0));
    let (to_freer, freer_queue) = mpsc::sync_channel::<Vec<Box<[u8]>>>(64);
    let freer = std::thread::spawn(move || {
        let mut freed = 0u64;
        for batch in freer_queue {
            for object in batch {
                assert!(object_is_intact(&object), "object corrupted in transit");
                freed += 1;
            }
        }
        freed
    });
    let spawner = {
        let (stop, exited) = (Arc::clone(&stop), Arc::clone(&exited));
        std::thread::spawn(move || {
            let mut generation = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Sixteen threads exiting together give back 32 sheaves
                // per class they used: more than a barn keeps, so exits
                // also send sheaves to the pool and objects to the slabs.
                let workers: Vec<_> = (0..WORKERS)
                    .map(|t| {
                        let to_freer = to_freer.clone();
                        let exited = Arc::clone(&exited);
                        let seed = generation * WORKERS + t;
                        std::thread::spawn(move || {
                            let burst = burst(seed);
                            let (theirs, mine): (Vec<_>, Vec<_>) =
                                burst.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
                            let theirs = theirs.into_iter().map(|(_, object)| object).collect();
                            // The freer may be gone when the test ends.
                            let _ = to_freer.send(theirs);
                            for (_, object) in mine {
                                assert!(object_is_intact(&object), "object corrupted");
                            }
                            exited.fetch_add(1, Ordering::Relaxed);
                        })
                    })
                    .collect();
                for worker in workers {
                    worker.join().expect("a worker failed");
                }
                generation += 1;
            }
        })
    };
    let (tick, ticks) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || loop {
        match ticks.recv_timeout(Duration::from_secs(20)) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("watchdog: no fork completed for 20 s: the parent hangs in fork()");
                std::process::abort();
            }
        }
    });
    // Children run while the parent forks again (at most 8 at a time), so
    // forks come as fast as `fork()` returns.
    let mut children = std::collections::VecDeque::new();
    for _ in 0..forks {
        // SAFETY: fork has no memory-safety preconditions; the child only
        // runs `child_work` and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = child_work();
            // SAFETY: terminate the child without running the parent's
            // test-harness teardown.
            unsafe { libc::_exit(code) };
        }
        tick.send(()).expect("watchdog alive");
        children.push_back(pid);
        if children.len() >= 8 {
            reap(children.pop_front());
        }
    }
    while let Some(pid) = children.pop_front() {
        reap(Some(pid));
    }
    stop.store(true, Ordering::Relaxed);
    spawner.join().expect("the spawner failed");
    let freed = freer.join().expect("the freer failed");
    drop(tick);
    watchdog.join().expect("watchdog");
    let exited = exited.load(Ordering::Relaxed);
    eprintln!("{forks} forks while {exited} threads exited; {freed} objects freed remotely");
    assert!(
        exited >= WORKERS,
        "threads exited during the forks: {exited}"
    );
    assert_eq!(freed, exited * BURST.div_ceil(2) as u64);
}

const BURST: usize = 512;

/// Waits for a child (a hang means a deadlock after the fork).
fn reap(pid: Option<libc::pid_t>) {
    if let Some(pid) = pid {
        let end = wait_for_child(pid, Duration::from_secs(30));
        assert_eq!(end, ChildEnd::Exited(0), "child {pid}");
    }
}
const WORKERS: u64 = 16;

/// A burst of buffers of packet-like sizes, each filled with a pattern of
/// its size and position.
fn burst(seed: u64) -> Vec<Box<[u8]>> {
    (0..BURST)
        .map(|i| {
            let size = [64, 256, 1500, 2112, 40][(seed as usize + i) % 5];
            (0..size).map(|j| pattern(size, j)).collect()
        })
        .collect()
}

fn pattern(size: usize, index: usize) -> u8 {
    (size.wrapping_mul(31) ^ index.wrapping_mul(7)) as u8
}

fn object_is_intact(object: &[u8]) -> bool {
    object
        .iter()
        .enumerate()
        .all(|(j, &b)| b == pattern(object.len(), j))
}

/// What a child does: allocate across classes (including those the
/// parent's threads used), check the contents, and start a thread that
/// allocates too (it must register with the engine cleanly).
fn child_work() -> i32 {
    for round in 0..4u64 {
        let buffers = burst(round);
        if !buffers.iter().all(|object| object_is_intact(object)) {
            return 2;
        }
    }
    extern "C" fn thread_main(_: *mut libc::c_void) -> *mut libc::c_void {
        let ok = (0..4u64).all(|seed| burst(seed).iter().all(|o| object_is_intact(o)));
        sheafalloc::flush_thread_cache();
        ok as usize as *mut libc::c_void
    }
    let mut thread: libc::pthread_t = 0;
    // SAFETY: a valid out-pointer, default attributes, and a thread
    // function that takes no argument.
    let rc = unsafe {
        libc::pthread_create(
            &mut thread,
            std::ptr::null(),
            thread_main,
            std::ptr::null_mut(),
        )
    };
    if rc != 0 {
        return 3;
    }
    let mut result = std::ptr::null_mut();
    // SAFETY: joining the thread created above, once.
    if unsafe { libc::pthread_join(thread, &mut result) } != 0 || result.is_null() {
        return 4;
    }
    0
}
