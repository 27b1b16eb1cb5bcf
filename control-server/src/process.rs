//! The process's own memory, for `/metrics`: resident and virtual bytes
//! and the thread count, read from `/proc/self/status` at scrape time
//! (Linux; elsewhere the families are left out).
//!
//! They carry the names every Prometheus client library uses for them
//! (`process_resident_memory_bytes`, ...), not the `sheafalloc_` prefix,
//! so dashboards and alerts written for any process work unchanged. Next
//! to `sheafalloc_held_bytes` they show how much of the process's memory
//! the allocator's slabs account for.

use sheafalloc_core::StatKind;

use crate::exposition::Exposition;

/// The families, in the order of their `/proc/self/status` keys.
pub const FAMILIES: &[(&str, &str, StatKind)] = &[
    (
        "process_resident_memory_bytes",
        "Resident memory size in bytes (VmRSS).",
        StatKind::Gauge,
    ),
    (
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes (VmSize).",
        StatKind::Gauge,
    ),
    (
        "process_threads",
        "Threads of the process.",
        StatKind::Gauge,
    ),
];

/// The `/proc/self/status` key of each family, in order, and its unit
/// factor.
const KEYS: [(&str, i64); 3] = [("VmRSS:", 1024), ("VmSize:", 1024), ("Threads:", 1)];

/// Writes the families (nothing if `/proc/self/status` cannot be read).
pub(crate) fn write(out: &mut Exposition) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    for ((name, help, kind), value) in FAMILIES.iter().zip(read(&status)) {
        if let Some(value) = value {
            out.family(name, help, *kind).sample(&[], value);
        }
    }
}

/// The values of [`KEYS`] in a `/proc/<pid>/status` text.
fn read(status: &str) -> [Option<i64>; 3] {
    KEYS.map(|(key, factor)| {
        status.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.split_whitespace().next()?;
            value.parse::<i64>().ok()?.checked_mul(factor)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_bytes() {
        let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t     12 kB\nThreads:\t5\n";
        assert_eq!(read(status), [Some(12 * 1024), Some(2048 * 1024), Some(5)]);
        assert_eq!(read("Name:\tx\n"), [None, None, None]);
    }

    #[test]
    fn this_process_has_a_resident_size() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let [rss, virt, threads] = read(&status);
        assert!(rss.unwrap() > 0);
        assert!(virt.unwrap() >= rss.unwrap());
        assert!(threads.unwrap() >= 1);
    }
}
