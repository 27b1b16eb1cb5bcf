//! The report's sections that are not plain throughput tables: the HTTP
//! service, memory, the NUMA comparison, and sheafalloc's counters.

use std::fmt::Write as _;

use sheafalloc_bench::peers::{self, Peer};

use super::jobs::Job;
use super::table::{num, rounds};
use super::targets::best_peer_of;
use crate::report::{bold_if_sheaf, factor};

/// The HTTP service: requests per second and the server's peak RSS.
pub fn http(job: &Job) -> String {
    let w = job.workload;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {}: {} (medians)
",
        w.name(),
        w.title()
    );
    let best = best_peer_of(job, "value", true).map_or(f64::NAN, |(_, v)| v);
    let leanest = best_peer_of(job, "peak_rss_mib", false).map_or(f64::NAN, |(_, v)| v);
    let _ = writeln!(
        out,
        "| allocator | requests/s | min–max | spread | vs best peer | peak RSS MiB | vs leanest peer | p50 ms | p99 ms | round trip ns |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for peer in peers::ALL {
        let value = job.samples(0, peer, "value");
        let m = |key: &str| job.samples(0, peer, key).median();
        let _ = writeln!(
            out,
            "| {} | {} | {}–{} | {:.0}% | {:.2}× | {} | {:.2}× | {} | {} | {:.0} |",
            bold_if_sheaf(peer),
            num(value.median()),
            num(value.min()),
            num(value.max()),
            value.spread() * 100.0,
            factor(value.median(), best, true),
            num(m("peak_rss_mib")),
            m("peak_rss_mib") / leanest,
            num(m("p50_ms")),
            num(m("p99_ms")),
            m("rtt_ns"),
        );
    }
    let _ = writeln!(
        out,
        "\nPeak RSS is the server process's `VmHWM` over the whole run (wrk runs in its own \
         process); \"vs leanest peer\" is the allocator's peak over the smallest peak of the \
         four peers (below 1 = leaner).\n"
    );
    out.push_str(&rounds(job, 0));
    out
}

/// The memory workload: RSS at each point and the times, medians.
pub fn memory(job: &Job) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## memory: {} (MiB RSS, medians)\n",
        job.workload.title()
    );
    let _ = writeln!(
        out,
        "| allocator | before | peak | after freeing all | after the release call | release call | ns per alloc (with writes) | ns per free |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|---:|");
    for peer in peers::ALL {
        let m = |key: &str| num(job.samples(0, peer, key).median());
        let call = job
            .records(0, peer)
            .next()
            .and_then(|r| r.get("release"))
            .unwrap_or("–")
            .to_owned();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | `{call}` | {} | {} |",
            bold_if_sheaf(peer),
            m("baseline_mib"),
            m("peak_mib"),
            m("freed_mib"),
            m("released_mib"),
            m("alloc_ns"),
            m("free_ns"),
        );
    }
    out.push('\n');
    out
}

/// The NUMA comparison: same node against cross node, per allocator.
pub fn numa(job: &Job) -> String {
    let mut out = String::new();
    let cpus = job.variants[0].cpus.unwrap_or((0, 1));
    let _ = writeln!(
        out,
        "## NUMA alien path: TX completion 1→1, sender on CPU {} and completer on CPU {} (Mobj/s)\n",
        cpus.0, cpus.1
    );
    let _ = writeln!(
        out,
        "Same node: `SHEAFALLOC_NUMA_NODES=1`. Cross node: `SHEAFALLOC_NUMA_NODES=2`, which \
         puts the two CPUs on different simulated nodes, so sheafalloc sends every free \
         through its remote batches to the home node. The other allocators ignore the \
         variable: their ratio shows the run-to-run noise of the same work.\n"
    );
    let _ = writeln!(
        out,
        "| allocator | same node | cross node | cross / same | spread same / cross | nodes seen (sender, completer) cross | round trip ns same / cross | remote frees cross |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---:|---:|");
    for peer in peers::ALL {
        let (same, cross) = (job.samples(0, peer, "value"), job.samples(1, peer, "value"));
        let nodes = job
            .records(1, peer)
            .last()
            .map(|r| {
                format!(
                    "{}, {}",
                    r.get("sender_node").unwrap_or("–"),
                    r.get("completer_node").unwrap_or("–")
                )
            })
            .unwrap_or_default();
        let remote = job.samples(1, peer, "sheaf_remote_frees").median();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {:.0}% / {:.0}% | {nodes} | {:.0} / {:.0} | {} |",
            bold_if_sheaf(peer),
            num(same.median()),
            num(cross.median()),
            cross.median() / same.median(),
            same.spread() * 100.0,
            cross.spread() * 100.0,
            job.samples(0, peer, "rtt_ns").median(),
            job.samples(1, peer, "rtt_ns").median(),
            if remote.is_finite() {
                format!("{remote:.0}")
            } else {
                "–".into()
            },
        );
    }
    out.push('\n');
    for (v, variant) in job.variants.iter().enumerate() {
        let _ = write!(out, "{}: ", variant.label);
        out.push_str(&rounds(job, v));
    }
    out
}

/// sheafalloc's counters (whole process, warm-up included) from its last
/// run of each workload.
pub fn counters(jobs: &[Job]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## sheafalloc counters (last run of each workload, whole process)\n"
    );
    let _ = writeln!(
        out,
        "| workload | allocations | slab refills | slab flushes | refills per 1k allocs | barn get hit % | barn put hit % | remote frees | topology |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for job in jobs {
        for (v, variant) in job.variants.iter().enumerate() {
            let Some(r) = job.records(v, Peer::Sheaf).last() else {
                continue;
            };
            let n = |key: &str| r.number(key);
            let hit = |hits: f64, misses: f64| 100.0 * hits / (hits + misses).max(1.0);
            let name = if variant.label.is_empty() {
                job.name().to_owned()
            } else {
                format!("{} ({})", job.name(), variant.label)
            };
            let _ = writeln!(
                out,
                "| {name} | {:.0} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} | {:.0} | {} × {} |",
                n("sheaf_allocations"),
                n("sheaf_refills"),
                n("sheaf_flushes"),
                1000.0 * n("sheaf_refills") / n("sheaf_allocations").max(1.0),
                hit(n("sheaf_barn_get_hits"), n("sheaf_barn_get_misses")),
                hit(n("sheaf_barn_put_hits"), n("sheaf_barn_put_misses")),
                n("sheaf_remote_frees"),
                r.get("sheaf_nodes").unwrap_or("?"),
                r.get("sheaf_topology").unwrap_or("?"),
            );
        }
    }
    out.push('\n');
    out
}
