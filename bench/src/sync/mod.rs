//! Thread coordination shared by the in-process workloads and the workload
//! binaries: an SPSC and an MPMC ring of pointers, a spin-then-yield wait, and the
//! core-to-core round trip.

pub mod mpmc;
pub mod pingpong;
pub mod ring;
pub mod spin;
