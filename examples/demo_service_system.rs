//! The demo's request/response service with the system allocator: the same
//! program as `demo-service-sheafalloc` without the global allocator line.
//! Arguments: connections, seconds.

fn main() {
    let mut args = std::env::args().skip(1);
    let connections = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    sheafalloc_examples::rr::run_demo_service(
        "system",
        connections,
        std::time::Duration::from_secs(seconds),
    );
}
