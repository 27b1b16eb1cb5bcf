//! The demo's request/response service, with sheafalloc (one line) and its
//! sidecar started by `SHEAFALLOC_CONTROL_ADDR`. Arguments: connections,
//! seconds.

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn main() {
    let mut args = std::env::args().skip(1);
    let connections = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    sheafalloc_examples::rr::run_demo_service(
        "sheafalloc",
        connections,
        std::time::Duration::from_secs(seconds),
    );
    let purged = sheafalloc::purge();
    println!(
        "{}",
        serde_json::json!({
            "purge_returned": purged.bytes_returned,
            "rss_after_purge": sheafalloc_examples::report::resident_bytes(),
        })
    );
}
