//! The suite's workloads with snmalloc as the global allocator.

use sheafalloc_bench::peers::Peer;

#[global_allocator]
static GLOBAL: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc::new();

fn main() {
    sheafalloc_bench::service::main(Peer::Snmalloc);
}
