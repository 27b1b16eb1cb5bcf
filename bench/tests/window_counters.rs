//! The sheafalloc workload binary reports its counters twice: for the whole
//! run (`sheaf_*`) and for the measured window alone (`sheaf_window_*`),
//! read as the window opens and closes. A real `wl-sheafalloc` process.

use std::process::Command;

use sheafalloc_bench::record::Record;
use sheafalloc_bench::service::global::COUNTER_KEYS;

/// Runs `wl-sheafalloc ARGS` and parses its result line.
fn run(args: &[&str]) -> Record {
    let output = Command::new(env!("CARGO_BIN_EXE_wl-sheafalloc"))
        .args(args)
        .env_remove("SHEAFALLOC_CAPACITY")
        .env_remove("SHEAFALLOC_AUTOTUNE")
        .output()
        .expect("wl-sheafalloc runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    Record::parse_output(&stdout).unwrap_or_else(|| panic!("no result line in {stdout:?}"))
}

#[test]
fn the_window_counts_its_own_work_only() {
    let record = run(&["churn-256x16", "--warmup", "0.3", "--seconds", "0.3"]);
    let line = record.line();
    let whole = record.number("sheaf_allocations");
    let window = record.number("sheaf_window_allocations");
    // The window's allocations are the churn's (objects allocated and
    // freed: the window's operations), give or take the instants between
    // reading the counters and reading the workers' totals.
    let objects = record.number("operations");
    assert!(objects > 0.0, "{line}");
    assert!(
        window >= objects * 0.5 && window <= objects * 2.0,
        "window allocations {window} against {objects} objects: {line}"
    );
    // Start-up and the warm-up allocated too: outside the window.
    assert!(window < whole, "{line}");
    // Every other counter the line reports: the window's share of each.
    for key in COUNTER_KEYS.into_iter().filter(|&key| key != "allocations") {
        let window = record.number(&format!("sheaf_window_{key}"));
        let whole = record.number(&format!("sheaf_{key}"));
        assert!(window.is_finite() && window <= whole, "{key}: {line}");
    }
}

#[test]
fn a_workload_without_a_window_has_no_window_counters() {
    // idle-threads measures memory, with no timed window.
    let record = run(&["idle-threads"]);
    assert!(
        record.number("sheaf_allocations") > 0.0,
        "{}",
        record.line()
    );
    assert_eq!(
        record.get("sheaf_window_allocations"),
        None,
        "{}",
        record.line()
    );
}

#[test]
fn the_memory_held_is_split_into_its_parts() {
    let record = run(&["churn-256x16", "--warmup", "0.2", "--seconds", "0.2"]);
    let line = record.line();
    let kib = |part: &str| record.number(&format!("sheaf_{part}_kib"));
    let held = kib("held");
    assert!(held > 0.0, "{line}");
    // A churn's slabs have free slots at the end of the run (every object
    // was freed) and no live objects of its own.
    assert!(kib("slab_free") > 0.0, "{line}");
    let parts: f64 = ["live", "slab_free", "barn", "sheaves"]
        .into_iter()
        .map(kib)
        .sum();
    // Each part is rounded down to whole KiB, so they add up to at most
    // the whole; more would mean the parts count memory twice.
    assert!(
        parts.is_finite() && parts <= held,
        "{parts} KiB of {held}: {line}"
    );
}

#[test]
fn the_heaviest_cached_caches_are_named_heaviest_first() {
    // A churn of 100 × 2112 B buffers leaves its bursts' buffers in the
    // CPU's sheaves and the barn: the 2112-byte class (size-2304) holds
    // far more than anything else the process cached.
    let record = run(&["churn-2112x100", "--warmup", "0.2", "--seconds", "0.2"]);
    let line = record.line();
    let field = record
        .get("sheaf_top_cached_kib")
        .unwrap_or_else(|| panic!("no sheaf_top_cached_kib: {line}"));
    let entries: Vec<(&str, f64)> = field
        .split('/')
        .map(|entry| {
            let (name, kib) = entry.split_once(':').expect("name:KiB");
            (name, kib.parse().expect("a number of KiB"))
        })
        .collect();
    assert!((1..=4).contains(&entries.len()), "{line}");
    assert_eq!(entries[0].0, "size-2304", "{line}");
    assert!(
        entries.windows(2).all(|pair| pair[0].1 >= pair[1].1),
        "heaviest first: {line}"
    );
    // Cached objects are part of what the caches hold from the OS.
    let cached: f64 = entries.iter().map(|&(_, kib)| kib).sum();
    assert!(
        cached > 0.0 && cached <= record.number("sheaf_held_kib"),
        "{line}"
    );
}
