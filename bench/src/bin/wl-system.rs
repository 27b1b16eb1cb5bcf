//! The suite's workloads with the system allocator (glibc malloc) as the
//! global allocator.

use sheafalloc_bench::peers::Peer;

#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

fn main() {
    sheafalloc_bench::service::main(Peer::System);
}
