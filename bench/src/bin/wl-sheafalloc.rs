//! The suite's workloads with sheafalloc as the global allocator.

use sheafalloc_bench::peers::Peer;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn main() {
    sheafalloc_bench::service::main(Peer::Sheaf);
}
