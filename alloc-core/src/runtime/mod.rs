//! Process-wide set-up and the hooks the OS calls back:
//!
//! * [`init`](ensure_init) — one-time initialisation, safe against a
//!   `fork()` that interrupts it;
//! * `registry` — the live thread caches;
//! * `fork` — the `pthread_atfork` handlers, which take every lock in the
//!   order of `sync::LockRank`;
//! * `tune` — the periodic tick: slab decay and the auto-tuner;
//! * [`purge`] — give free memory back to the OS now.

mod fork;
mod init;
mod registry;
mod tune;

pub use init::ensure_init;
#[cfg(feature = "fault-injection")]
pub use init::init_in_progress;
pub(crate) use registry::{register, take_thread_record, unregister, with_threads};
pub use registry::{thread_counts, thread_records};
pub use tune::{
    clamp_threads, periodic, steer_lanes, tick as tuner_tick, ticks as tuner_ticks, TICK_MS,
};

use crate::cache::{self, CapacityOutOfRange, ClassDepot};
use crate::exchange;
use crate::node::NodeId;
use crate::size_class::SizeClass;

/// Sets the sheaf capacity of `class` and pins it: the auto-tuner leaves
/// the cache alone until [`release_sheaf_capacity`]. A lower capacity takes
/// effect at once in every live thread's fast path (the next free above it
/// takes the slow path, which trims the thread's sheaves); a higher one at
/// each thread's next sheaf exchange.
pub fn set_sheaf_capacity(class: SizeClass, capacity: u64) -> Result<(), CapacityOutOfRange> {
    let capacity = cache::store_pinned_capacity(class, capacity)?;
    clamp_threads(class, capacity);
    Ok(())
}

/// Hands the capacity of `class` back to the auto-tuner, which goes on from
/// the current value.
pub fn release_sheaf_capacity(class: SizeClass) {
    cache::release_sheaf_capacity(class);
}

/// Returns free memory to the OS now: empties every barn into the slabs and
/// returns every empty slab. Objects cached in threads' own sheaves stay
/// (each thread flushes its own: see `ThreadCache::flush_all`). Returns the
/// bytes returned.
pub fn purge() -> u64 {
    if !init::is_ready() {
        return 0;
    }
    if crate::percpu::mode() == crate::percpu::CacheMode::PerCpu {
        crate::percpu::drain_all();
    }
    let mut returned: u64 = 0;
    for node in NodeId::all() {
        for class in SizeClass::all() {
            exchange::drain_barn(&ClassDepot::of(class), node);
            let released = cache::node_class(node, class)
                .slabs
                .lock()
                .release_empty(node, class);
            returned = returned.saturating_add(released);
        }
    }
    returned
}
