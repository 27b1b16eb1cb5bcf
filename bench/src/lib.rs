//! Code shared by the `sheafalloc-bench` driver and the `wl-*` workload
//! binaries.
//!
//! Each `wl-*` binary declares one allocator as its `#[global_allocator]`
//! and calls [`service::main`]: the network-service workloads then allocate
//! through that allocator everywhere (std, tokio, sockets). The driver runs
//! them in turn and reads the one [`record`] line each run prints.

pub mod budget;
pub mod instructions;
pub mod kernels;
pub mod peers;
pub mod probe;
pub mod record;
pub mod service;
pub mod summary;
pub mod sync;
