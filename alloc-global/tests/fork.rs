//! fork() from a multi-threaded parent whose threads allocate hard: the
//! child can allocate and free, every time, and holds no per-class records
//! of the threads that did not survive the fork.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::child::{wait_for_child, ChildEnd};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn child_work() -> i32 {
    // The parent's other threads do not exist here: their per-class
    // records went back to the pool, and only this thread's (at most one
    // per class) are held. (Per-thread mode, where each worker holds a
    // record for each of its ~60 classes, is where this tells.)
    let classes = sheafalloc::caches().len() as u64;
    if sheafalloc::thread_records().in_use > classes {
        return 4;
    }
    // Allocate across many classes, including ones the parent's threads
    // were using (and draining: a fork can copy a CPU's cache half-way
    // through a drain), and a new thread. Every live buffer has its own
    // byte, checked once all are live: two buffers handed the same memory
    // fail the check.
    let mut total = 0usize;
    for round in 0..50usize {
        let byte = |i: usize| (round * 7 + i) as u8;
        let buffers: Vec<Vec<u8>> = (0..200)
            .map(|i| vec![byte(i); 8 + (i * 37) % 5000])
            .collect();
        total += buffers.iter().map(|b| b.len()).sum::<usize>();
        if !buffers
            .iter()
            .enumerate()
            .all(|(i, b)| b.iter().all(|x| *x == byte(i)))
        {
            return 2;
        }
    }
    let joined =
        std::thread::spawn(|| (0..1000).map(|i| vec![1u8; i + 1].len()).sum::<usize>()).join();
    if total == 0 || joined.is_err() {
        return 3;
    }
    0
}

#[test]
fn children_of_a_busy_parent_can_allocate() {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut keep = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..100usize {
                        keep.push(vec![t as u8; 16 + (i * 13) % 3000]);
                    }
                    keep.drain(..90);
                    sheafalloc::set_sheaf_capacity("size-64", 1 + (keep.len() % 60) as u64)
                        .unwrap();
                    if t == 0 {
                        // Every CPU's sheaves drained, every class.
                        sheafalloc::purge();
                    }
                }
            })
        })
        .collect();
    for _ in 0..40 {
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
        let end = wait_for_child(pid, Duration::from_secs(30));
        assert_eq!(
            end,
            ChildEnd::Exited(0),
            "child {pid}: exit 2, buffers shared memory; 3, no thread; 4, the \
             dead threads' records still held; a hang: deadlock after fork?"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
}
