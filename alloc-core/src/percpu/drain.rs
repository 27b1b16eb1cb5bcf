//! Emptying another CPU's sheaves: for `purge`, the slab decay's idle
//! check, a lower capacity (the API or the auto-tuner), and a CPU the
//! topology moved to another node.
//!
//! 1. Mark the cache stopped (one drainer at a time: a compare-and-swap).
//!    Replace sections check the mark, so from the next step on nobody
//!    installs or detaches a sheaf there.
//! 2. `membarrier(PRIVATE_EXPEDITED_RSEQ, CPU)`: every section running on
//!    that CPU restarts; one that passed the check before the mark has
//!    finished by now.
//! 3. Swap every slot (of one class, or all) for the empty sheaf.
//! 4. `membarrier` again: a pop or push that read a slot before the swap
//!    has committed (or restarted, and then finds the empty sheaf). The
//!    swapped-out sheaves now belong to the drainer, with their final
//!    lengths.
//! 5. Clear the mark; send the sheaves away through the exchange protocol
//!    (main and spare to the CPU's node, remote batches home).

use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use super::{empty_sheaf, slow, CpuCache, Slot};
use crate::cache::ClassDepot;
use crate::exchange;
use crate::node::NodeId;
use crate::os;
use crate::size_class::SizeClass;
use crate::topology::MAX_CPUS;

/// Empties `cpu`'s sheaves of `class` (every class with `None`); false if
/// nothing could be done (no membarrier, or another drain is running
/// there).
pub fn drain(cpu: u32, class: Option<SizeClass>) -> bool {
    let Some(cache) = super::published(cpu as usize) else {
        return true;
    };
    drain_cache(cpu, cache, class, None)
}

/// Drains every CPU's cache of `class` (every class with `None`).
pub fn drain_class(class: Option<SizeClass>) {
    for cpu in 0..MAX_CPUS {
        drain(cpu as u32, class);
    }
}

/// Drains every CPU's cache, every class.
pub fn drain_all() {
    drain_class(None);
}

/// Drains `cache` because the topology now puts `cpu` on `node`, and
/// switches it to that node.
pub(super) fn move_to_node(cpu: u32, cache: &CpuCache, node: NodeId) {
    drain_cache(cpu, cache, None, Some(node));
}

fn drain_cache(
    cpu: u32,
    cache: &CpuCache,
    class: Option<SizeClass>,
    new_node: Option<NodeId>,
) -> bool {
    if !super::can_drain() {
        return false;
    }
    if cache
        .stopped
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    os::membarrier_rseq_cpu(cpu);
    let node = cache.node();
    // The swapped-out sheaves, per class: main, spare, remote.
    let mut detached = [[empty_sheaf(); 3]; crate::size_class::NUM_CLASSES];
    for (each, out) in SizeClass::all().zip(detached.iter_mut()) {
        if class.is_some_and(|only| only != each) {
            continue;
        }
        let class = each;
        for (slot, sheaf) in [Slot::Main, Slot::Spare, Slot::Remote]
            .into_iter()
            .zip(out.iter_mut())
        {
            *sheaf = cache
                .slot(slot, class)
                .swap(empty_sheaf(), Ordering::AcqRel);
        }
    }
    os::membarrier_rseq_cpu(cpu);
    if let Some(new_node) = new_node {
        cache.set_node(new_node);
    }
    cache.stopped.store(0, Ordering::Release);
    for (class, sheaves) in SizeClass::all().zip(detached) {
        let depot = ClassDepot::of(class);
        let [main, spare, remote] = sheaves;
        for sheaf in [main, spare] {
            if sheaf != empty_sheaf() {
                if let Some(sheaf) = NonNull::new(sheaf) {
                    // Swapped out of the slot and past the second
                    // membarrier: ours. A drain after a lower capacity
                    // trims it here, so the barn never keeps the excess.
                    slow::sync_capacity(&depot, sheaf);
                    // SAFETY: ours (above); its objects' home is its node.
                    unsafe { exchange::dispose(&depot, (*sheaf.as_ptr()).node, sheaf) };
                }
            }
        }
        slow::hand_over(&depot, node, remote);
    }
    true
}
