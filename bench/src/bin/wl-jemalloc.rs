//! The suite's workloads with jemalloc as the global allocator.

use sheafalloc_bench::peers::Peer;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    sheafalloc_bench::service::main(Peer::Jemalloc);
}
