//! The operating-system contract: the only module that talks to the kernel.
//!
//! Everything the engine needs from the OS goes through the functions
//! re-exported here: reserving and committing address space, returning pages,
//! mapping large blocks, futexes for the locks, a coarse clock, the
//! thread-exit key, fork hooks and raw writes to stderr. `linux.rs`
//! implements them with `libc`; no other file of the allocator crates calls
//! `libc`.
//!
//! # Preconditions, stated once
//!
//! * Addresses handed to `commit`, `return_to_os`, `unmap` and `remap` are
//!   page-aligned and were produced by `reserve` or `map` of this module.
//! * Sizes are non-zero multiples of [`page_size`].
//!
//! Every function reports failure through its return value and never panics
//! or allocates through the global allocator.

pub mod fault;
mod linux;

pub use linux::*;
