//! The engine of sheafalloc: size classes, slabs, sheaves, barns and
//! per-class caches, modelled on the Linux SLUB "sheaves" design.
//!
//! This crate is `no_std` and never allocates through the global allocator:
//! its metadata comes straight from the OS (`os`), its locks are futexes
//! (`sync`). The `sheafalloc` crate puts a [`ThreadCache`] in a thread-local
//! and implements `GlobalAlloc` on top; the control plane reads [`stats`] and
//! turns [`runtime::set_sheaf_capacity`].
//!
//! # Layers (each may use only the ones above it)
//!
//! 1. `os`, `sync` — the kernel contract and futex locks.
//! 2. [`size_class`], [`node`], [`topology`], [`counters`] — request →
//!    class, node ids, CPU → node map and the calling thread's node; the
//!    table that declares every per-cache statistic once.
//! 3. `arena` — address space per node, chunks, slab metadata table.
//! 4. [`slab`] — objects carved from runs; partial/empty lists; decay.
//! 5. [`sheaf`] — arrays of object pointers and their pool.
//! 6. [`barn`] — per node and class: full and empty sheaves.
//! 7. [`exchange`] — the one protocol for trading sheaves with barns, slabs
//!    and the pool, over a [`exchange::Depot`].
//! 8. [`cache`] — per class: capacity, counters, barns and slabs of every
//!    node; the engine's depot.
//! 9. [`thread_cache`], [`runtime`], [`large`] — the per-thread fast path and
//!    its slow paths, process-wide set-up, direct mappings.
//! 10. [`stats`] — snapshots for readers.
//!
//! Under `--cfg loom` only the layers the concurrency models exercise are
//! built (`os`, `sync`, size classes, nodes, counters, sheaves, barns, the
//! exchange and the per-class slow paths of `thread_cache`): the rest holds
//! process-wide statics whose locks loom cannot construct at compile time.
//!
//! # Example
//!
//! ```
//! use sheafalloc_core::size_class::SizeClass;
//!
//! // A 2112-byte packet buffer lands in the 2304-byte class, not 4096.
//! let class = SizeClass::for_layout(2112, 8).unwrap();
//! assert_eq!(class.object_size(), 2304);
//! assert_eq!(class.name().as_str(), "size-2304");
//! ```
#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![deny(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
// No panic can start inside the allocator, in release or debug builds: no
// indexing, slicing or arithmetic that can panic (debug builds check
// overflow), no `unwrap`/`expect`/`panic!`/`unreachable!`. Use `get`,
// `checked_*`, `saturating_*`, or `wrapping_*` with a comment naming the
// invariant that rules overflow out; a broken invariant stops the process
// through `invariant!`. Tests may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::panic,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::panic_in_result_fn
    )
)]

/// Checks a condition on a path where panicking is not allowed: on failure
/// it writes the message to stderr without allocating and aborts.
#[macro_export]
macro_rules! invariant {
    ($cond:expr, $message:literal) => {
        if !$cond {
            $crate::os::write_stderr(
                concat!(
                    "sheafalloc: invariant violated: ",
                    $message,
                    " (",
                    file!(),
                    ")\n"
                )
                .as_bytes(),
            );
            $crate::os::abort();
        }
    };
}

#[cfg(not(loom))]
pub mod message;
pub mod os;
pub mod sync;

#[cfg(not(loom))]
pub mod capacity_spec;
pub mod colour;
pub mod counters;
pub mod lane;
pub mod node;
pub mod size_class;
#[cfg(not(loom))]
pub mod topology;

#[cfg(not(loom))]
pub mod arena;
#[cfg(not(loom))]
pub mod slab;

pub mod pop_order;
pub mod sheaf;
pub mod sheaf_pool;

pub mod barn;

pub mod exchange;
pub mod tuner;

#[cfg(not(loom))]
pub mod cache;

#[cfg(not(loom))]
pub mod large;
#[cfg(not(loom))]
pub mod percpu;
#[cfg(not(loom))]
pub mod runtime;
pub mod thread_cache;

#[cfg(not(loom))]
pub mod stats;

#[cfg(all(feature = "checks", not(loom)))]
pub mod checks;

#[cfg(not(loom))]
pub use cache::{max_sheaf_capacity, CapacityOutOfRange, SHEAF_BYTES_MAX};
pub use counters::{CacheStats, NodeStats, StatField, StatKind};
pub use lane::Lane;
pub use node::NodeId;
#[cfg(not(loom))]
pub use runtime::{release_sheaf_capacity, set_sheaf_capacity};
pub use size_class::SizeClass;
#[cfg(not(loom))]
pub use stats::{cache_stats, cache_stats_all, large_stats, LargeStats};
#[cfg(not(loom))]
pub use thread_cache::ThreadCache;
pub use tuner::Tuning;
