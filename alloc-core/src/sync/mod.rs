//! Synchronisation primitives that never allocate.
//!
//! [`RawLock`] is a three-state futex mutex (Drepper, "Futexes Are Tricky"):
//! const-constructible, fork-safe when held across `fork()` by the forking
//! thread, and free of the global allocator. `std::sync::Mutex` and
//! parking_lot are not used on allocation paths: parking_lot allocates its
//! parking table on first contention.

mod lock;

pub use lock::{Mutex, MutexGuard, RawLock};
