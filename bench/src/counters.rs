//! sheafalloc's own counters after the run, as evidence of what its slow
//! paths did (refills, flushes, remote frees, memory held and returned).

use std::fmt::Write as _;

/// The counters of every cache that served allocations, and what `purge`
/// returns, as a markdown section. Call after all sheafalloc work is done
/// (the threads that used it have exited and flushed their sheaves).
pub fn section() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## sheafalloc counters after the run\n");
    let _ = writeln!(
        out,
        "| cache | sheaf capacity | allocations | frees | live | slab refills (objects each) | slab flushes | barn get hits/misses | \
         barn put hits/misses | remote frees | slabs | bytes held |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for cache in sheafalloc::caches().iter().filter(|c| c.allocations > 0) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} ({:.1}) | {} | {}/{} | {}/{} | {} | {} | {} |",
            cache.name,
            cache.sheaf_capacity,
            cache.allocations,
            cache.frees,
            cache.live_objects,
            cache.slab_refills,
            cache.refilled_objects as f64 / cache.slab_refills.max(1) as f64,
            cache.slab_flushes,
            cache.barn_get_hits,
            cache.barn_get_misses,
            cache.barn_put_hits,
            cache.barn_put_misses,
            cache.remote_frees,
            cache.slabs,
            cache.bytes_held,
        );
    }
    let before = sheafalloc::resident_bytes();
    let purged = sheafalloc::purge();
    let after = sheafalloc::resident_bytes();
    let mib =
        |b: Option<usize>| b.map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
    let _ = writeln!(
        out,
        "\n`sheafalloc::purge()` returned {} bytes; process RSS (all five allocators) {} → {}.\n",
        purged.bytes_returned,
        mib(before),
        mib(after)
    );
    out
}
