//! The suite's workloads with mimalloc as the global allocator.

use sheafalloc_bench::peers::Peer;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    sheafalloc_bench::service::main(Peer::Mimalloc);
}
