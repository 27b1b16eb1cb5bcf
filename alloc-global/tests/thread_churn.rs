//! 10,000 threads that allocate and exit: their cached objects come back
//! (pthread key destructor), and so do their per-class records, so live
//! objects, threads, records and RSS stay bounded.

use std::sync::Barrier;

use sheafalloc_core::barn::BARN_FULL_MAX;
use sheafalloc_core::lane::LANES;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const THREADS: usize = 10_000;
const WAVE: usize = 16;

#[test]
fn exiting_threads_give_back_their_sheaves() {
    let (live_threads_before, _) = sheafalloc::thread_counts();
    let before = sheafalloc::caches();
    let mut rss_after_first_waves = 0;
    let mut records_after_first_wave = None;
    for wave in 0..THREADS / WAVE {
        let barrier = Barrier::new(WAVE);
        std::thread::scope(|scope| {
            // Joined explicitly: `join` waits for the OS thread to finish,
            // pthread key destructors included; the scope's own implicit
            // wait does not.
            let handles: Vec<_> = (0..WAVE)
                .map(|t| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        // Fill the thread's sheaves of several classes, keep a
                        // few objects until exit, free the rest.
                        let mut kept = Vec::new();
                        for i in 0..200usize {
                            let buffer = vec![(i + t) as u8; 16 << (i % 8)];
                            if i % 50 == 0 {
                                kept.push(buffer);
                            }
                        }
                        barrier.wait();
                        assert!(kept.iter().all(|b| b.iter().all(|x| *x == b[0])));
                    })
                })
                .collect();
            for handle in handles {
                handle.join().unwrap();
            }
        });
        if wave == 0 {
            records_after_first_wave = Some(sheafalloc::thread_records());
        }
        if wave == 10 {
            rss_after_first_waves = sheafalloc::resident_bytes().unwrap();
        }
    }
    let records = sheafalloc::thread_records();
    let (live_threads_after, ever) = sheafalloc::thread_counts();
    // Each thread took a record for every class it took a slow path of
    // (per-thread mode: each of its eight buffer sizes and its `Vec`; on
    // the CPUs' sheaves, fewer) and gave them back at exit: the records
    // carved for the first wave serve all the others, and only the live
    // threads (this one) hold any.
    let first = records_after_first_wave.unwrap();
    assert!(first.carved > 0, "no thread took a record");
    assert!(
        records.carved <= first.carved + 64,
        "records carved grew from {} to {}: exited threads kept theirs",
        first.carved,
        records.carved
    );
    for (when, held) in [("the first wave", first.in_use), ("all", records.in_use)] {
        assert!(
            held < WAVE as u64 * 8,
            "{held} records held after {when} exited: more than this thread's"
        );
    }
    assert!(
        ever >= THREADS as u64,
        "only {ever} threads ever registered"
    );
    assert_eq!(
        live_threads_after, live_threads_before,
        "exited threads still registered"
    );

    // A barn keeps up to its limit of full sheaves per lane, and the
    // threads exited on every CPU's lane.
    let lanes =
        std::thread::available_parallelism().map_or(LANES, |cpus| cpus.get().min(LANES)) as u64;
    let barn_full_max = u64::from(BARN_FULL_MAX) * lanes;
    let after = sheafalloc::caches();
    for (b, a) in before.iter().zip(&after) {
        // The snapshot itself holds ~100 name strings; nothing else of
        // this thread stays live.
        let leaked = (a.live_objects - b.live_objects).abs();
        assert!(leaked <= 128, "{}: live objects moved by {leaked}", a.name);
        // Had exited threads kept their cached objects, every wave would
        // have needed fresh slabs. What may legitimately stay out: one
        // wave's sheaves (main + spare per thread) and a full barn.
        if let Some(slab_bytes) = a.bytes_held.checked_div(a.slabs) {
            let in_flight =
                (2 * WAVE as u64 + barn_full_max) * u64::from(a.sheaf_capacity) * a.object_size;
            let allowed = b.slabs + in_flight.div_ceil(slab_bytes) + 2;
            assert!(
                a.slabs <= allowed,
                "{}: slabs grew from {} to {} (allowed {allowed})",
                a.name,
                b.slabs,
                a.slabs
            );
        }
        // Cached objects of exited threads went to a barn (bounded) or slabs.
        assert!(
            a.barn_full_sheaves <= barn_full_max,
            "{}: {} full sheaves",
            a.name,
            a.barn_full_sheaves
        );
    }
    let rss = sheafalloc::resident_bytes().unwrap();
    eprintln!(
        "RSS after 10 waves: {} KiB, after all: {} KiB",
        rss_after_first_waves >> 10,
        rss >> 10
    );
    assert!(
        rss < rss_after_first_waves + (32 << 20),
        "RSS grew from {rss_after_first_waves} to {rss}"
    );
}
