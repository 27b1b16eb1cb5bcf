//! Remote ("alien") frees travel home in batches, in whichever mode runs.
//!
//! A plain `main` (harness = false): the simulated node count is read when
//! the allocator starts, so the binary re-runs itself with
//! `SHEAFALLOC_NUMA_NODES=2`, where nodes follow the machine's two CPUs. One
//! thread allocates on CPU 0 (node 0), moves to CPU 1 (node 1) and frees
//! there, so every free is remote. The objects must reach node 0 as
//! batches (a remote batch handed to the home barn, or flushed to the home
//! slabs in one go), never one at a time under the slab lock; and the
//! largest small class, whose slots are the last of a CPU's cache, must
//! batch like any other. CI runs it in per-CPU mode and, with
//! `GLIBC_TUNABLES=glibc.pthread.rseq=0`, in per-thread mode.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Objects freed remotely per class: many times its sheaves' capacity.
const OBJECTS: usize = 1000;
/// Of the largest class (its sheaves hold a few objects each).
const LARGEST_OBJECTS: usize = 64;

fn main() {
    if std::env::var("SHEAFALLOC_NUMA_NODES").is_ok() {
        frees_on_the_other_node_go_home_in_batches();
        println!("remote batches: ok");
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        // Nodes follow CPUs only with a CPU per node; with one CPU the
        // simulated nodes are assigned to threads round-robin, and no
        // thread can move between them.
        println!("test result: ok. 0 passed; 0 failed; 1 ignored (one CPU)");
        return;
    }
    let status = Command::new(std::env::current_exe().unwrap())
        .env("SHEAFALLOC_NUMA_NODES", "2")
        .status()
        .expect("re-run self");
    assert!(
        status.success(),
        "run with 2 simulated nodes failed: {status}"
    );
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

/// Pins the thread to `cpu`; per-thread mode follows the CPU's node at the
/// next slow path, which the flush makes now.
fn move_to_cpu(cpu: usize) {
    common::pin_to_cpu(cpu);
    sheafalloc::flush_thread_cache();
}

fn frees_on_the_other_node_go_home_in_batches() {
    let topology = sheafalloc::topology();
    assert!(
        topology.simulated && !topology.threads_round_robin,
        "{topology:?}"
    );
    eprintln!("cache mode: {:?}", sheafalloc::cache_mode());
    let largest = sheafalloc::caches()
        .into_iter()
        .max_by_key(|c| c.object_size)
        .expect("caches");
    // A class no std internals of this test use, and the last class.
    let classes = [
        ("size-3072".to_owned(), 3000, OBJECTS),
        (
            largest.name.clone(),
            largest.object_size as usize,
            LARGEST_OBJECTS,
        ),
    ];
    for (name, size, count) in classes {
        let capacity = sheafalloc::cache(&name).expect("the class").sheaf_capacity;
        assert!(capacity >= 2, "{name}: capacity {capacity} cannot batch");
        let worker = {
            let name = name.clone();
            std::thread::spawn(move || remote_frees(&name, size, count))
        };
        let (flushes, flushed, barn_puts) = worker.join().expect("worker");
        // One at a time would be `count` flushes of one object each; in
        // batches, each flush or barn hand-over moves up to a sheaf's worth.
        // The first batches find room in the home barn (and are counted
        // there, as every full sheaf stored in a barn is).
        let batches = (count as u64).div_ceil(u64::from(capacity));
        assert!(barn_puts > 0, "{name}: no batch reached the home barn");
        assert!(
            flushes + barn_puts <= batches + 2,
            "{name}: {count} remote frees reached home in {flushes} slab flushes \
             ({flushed} objects) and {barn_puts} barn hand-overs, where batches of \
             {capacity} take {batches}"
        );
        let stats = sheafalloc::cache(&name).expect("the class");
        assert_eq!(stats.live_objects, 0, "{stats:?}");
        assert_eq!(
            stats.remote_frees_by_node[1][0], count as u64,
            "{name}: remote frees from node 1 to node 0"
        );
        eprintln!(
            "{name}: {count} remote frees, {flushes} slab flushes ({flushed} objects), \
             {barn_puts} barn hand-overs (capacity {capacity})"
        );
    }
}

/// Allocates `count` objects of `size` bytes on node 0 and frees them on
/// node 1; returns the class's slab flushes, flushed objects and full
/// sheaves stored in a barn caused by the frees and the flush of the
/// thread's batches (before the purge that drains the CPU's).
fn remote_frees(name: &str, size: usize, count: usize) -> (u64, u64, u64) {
    let allocator = sheafalloc::SheafAlloc::new();
    let layout = Layout::from_size_align(size, 8).unwrap();
    move_to_cpu(0);
    assert_eq!(sheafalloc::thread_node(), 0);
    let objects: Vec<(usize, u64)> = (0..count as u64)
        .map(|generation| {
            // SAFETY: non-zero size.
            let object = unsafe { allocator.alloc(layout) };
            assert!(!object.is_null());
            assert_eq!(sheafalloc::home_node(object), Some(0));
            // SAFETY: `size` bytes just allocated.
            unsafe { common::fill(object, size, generation) };
            (object as usize, generation)
        })
        .collect();
    move_to_cpu(1);
    assert_eq!(sheafalloc::thread_node(), 1);
    let before = sheafalloc::cache(name).expect("the class");
    for &(object, generation) in &objects {
        let object = object as *mut u8;
        // SAFETY: live, `size` bytes, filled above.
        let intact = unsafe { common::check(object, size, generation) };
        assert!(
            intact.is_ok(),
            "{name}: object {object:p} corrupted at {intact:?}"
        );
        // SAFETY: live, allocated with `layout`.
        unsafe { allocator.dealloc(object, layout) };
    }
    // In per-thread mode every remote free took the slow path, and the
    // counters say so while the thread lives (the reader adds what the
    // thread has not yet published to the shared counter). In per-CPU mode
    // a remote free goes into the CPU's batch in one section, off the slow
    // path; the slow path installs and hands over each batch.
    let counted = sheafalloc::cache(name).expect("the class");
    let slow = counted.slow_path_frees - before.slow_path_frees;
    match sheafalloc::cache_mode() {
        sheafalloc::CacheMode::PerThread => {
            assert_eq!(slow, count as u64, "{name}: slow-path frees counted");
        }
        sheafalloc::CacheMode::PerCpu => {
            let batches = (count as u64).div_ceil(u64::from(before.sheaf_capacity));
            assert!(
                (1..=batches + 1).contains(&slow),
                "{name}: {slow} slow-path frees for {count} remote frees in batches \
                 of {}",
                before.sheaf_capacity
            );
        }
    }
    sheafalloc::flush_thread_cache();
    let after = sheafalloc::cache(name).expect("the class");
    // Hand the last, partial batch home too (per-CPU mode keeps it in the
    // CPU's cache until a drain).
    sheafalloc::purge();
    (
        after.slab_flushes - before.slab_flushes,
        after.flushed_objects - before.flushed_objects,
        after.barn_put_hits - before.barn_put_hits,
    )
}
