//! Memory goes back to the OS: 512 MiB in 1 KiB objects over 2 threads,
//! all freed, then `purge()`: RSS drops under 10% of the peak.

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const TOTAL: usize = 512 << 20;
const OBJECT: usize = 1024;

#[test]
fn purge_returns_freed_slabs_to_the_os() {
    let per_thread = TOTAL / OBJECT / 2;
    let peak = std::thread::scope(|scope| {
        let (to_main, from_workers) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Arc::new(std::sync::Mutex::new(released));
        for t in 0..2u8 {
            let to_main = to_main.clone();
            let released = std::sync::Arc::clone(&released);
            scope.spawn(move || {
                let objects: Vec<Box<[u8; OBJECT]>> =
                    (0..per_thread).map(|_| Box::new([t + 1; OBJECT])).collect();
                to_main.send(()).unwrap();
                released.lock().unwrap().recv().unwrap();
                assert!(objects
                    .iter()
                    .all(|o| o[0] == t + 1 && o[OBJECT - 1] == t + 1));
                drop(objects);
            });
        }
        from_workers.recv().unwrap();
        from_workers.recv().unwrap();
        let peak = sheafalloc::resident_bytes().unwrap();
        release.send(()).unwrap();
        release.send(()).unwrap();
        peak
    });
    let cache = sheafalloc::cache("size-1024").unwrap();
    assert!(
        cache.bytes_held as usize >= TOTAL,
        "held {} bytes",
        cache.bytes_held
    );
    let report = sheafalloc::purge();
    let after = sheafalloc::resident_bytes().unwrap();
    let cache = sheafalloc::cache("size-1024").unwrap();
    eprintln!(
        "peak RSS {} MiB, after purge {} MiB, purge returned {} MiB, cache holds {} KiB",
        peak >> 20,
        after >> 20,
        report.bytes_returned >> 20,
        cache.bytes_held >> 10
    );
    assert!(peak >= TOTAL, "peak RSS {peak} below the allocated total");
    assert!(
        after * 10 < peak,
        "RSS after purge {after} is not under 10% of peak {peak}"
    );
    assert!(
        report.bytes_returned as usize >= TOTAL * 9 / 10,
        "returned only {}",
        report.bytes_returned
    );
    // This cache returned (nearly) all of it; in per-CPU mode a purge also
    // empties every CPU's sheaves of other caches, whose slabs go back too.
    assert!(
        cache.bytes_returned as usize >= TOTAL * 9 / 10,
        "size-1024 returned only {}",
        cache.bytes_returned
    );
}
