//! Emptying another CPU's sheaves: for `purge` and `flush_thread_cache`,
//! a capacity set by hand or lowered by the auto-tuner, and a CPU the
//! topology moved to another node.
//!
//! 1. Swap the CPU's table entry from its cache to the `DRAINING` stand-in
//!    (one drainer at a time: a compare-and-swap), and set the cache's
//!    `owner` to `NO_OWNER`. A section that reads the entry (the slow
//!    paths' sections) or, through a thread's GS base, the `owner` (the
//!    pop and the push) from now on misses.
//! 2. `membarrier(PRIVATE_EXPEDITED_RSEQ, CPU)`: every section running on
//!    that CPU restarts (and then misses), and one that read the entry or
//!    the `owner` before has committed by now. From here on nothing but
//!    the drainer writes the cache's slots.
//! 3. Take every slot (of one class, or all): write the main sheaf's
//!    length and capacity from its slot into its header, and leave the
//!    empty sheaf in every slot.
//! 4. Give the cache its `owner` back and put it back in the entry; send
//!    the sheaves away through the exchange protocol: main and spare to
//!    the CPU's node, remote batches home, all on the CPU's lane, not the
//!    drainer's (`ClassDepot::for_cpu`).
//!
//! Steps 1, 2 and 4 with nothing taken also switch a CPU between returning
//! and keeping other lanes' objects (`steer`): the push range is written
//! while no section can read it.

use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use super::steer::LaneFrees;
use super::{empty_sheaf, slow, CpuCache, Slot};
use crate::cache::ClassDepot;
use crate::exchange;
use crate::node::NodeId;
use crate::os;
use crate::sheaf::Sheaf;
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

/// Makes `cpu` return or keep other lanes' objects (`steer`): holds its
/// cache as a drain does (steps 1, 2 and 4), with nothing taken, and sets
/// its push range meanwhile, so no push reads half of it. False if that
/// could not be done (no membarrier, or a drain holds the cache).
pub(super) fn set_lane_frees(cpu: u32, cache: &CpuCache, frees: LaneFrees) -> bool {
    hold(cpu, cache, || cache.set_lane_frees(frees))
}

/// Steps 1 and 2 above, `work`, then the first half of step 4; false (and
/// `work` not run) if the cache could not be held.
fn hold(cpu: u32, cache: &CpuCache, work: impl FnOnce()) -> bool {
    if !super::can_drain() {
        return false;
    }
    // One drainer at a time: the one whose swap of the table entry from
    // the CPU's cache to `DRAINING` succeeds.
    let Some(entry) = super::CPU_CACHES.get(cpu as usize) else {
        return false;
    };
    let own = core::ptr::from_ref(cache).cast_mut();
    if entry
        .compare_exchange(own, super::draining(), Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    cache.owner.store(super::NO_OWNER, Ordering::SeqCst);
    let held = os::membarrier_rseq_cpu(cpu);
    // Without the restart a section that read the entry or `owner` before
    // could still commit: then the cache goes back to its CPU untouched.
    if held {
        work();
    }
    cache.owner.store(super::owner_of(cpu), Ordering::Release);
    entry.store(own, Ordering::Release);
    held
}

fn drain_cache(
    cpu: u32,
    cache: &CpuCache,
    class: Option<SizeClass>,
    new_node: Option<NodeId>,
) -> bool {
    // The node the taken sheaves' objects belong to, and the sheaves, per
    // class: main, spare, remote.
    let mut node = NodeId::ZERO;
    let mut detached = [[empty_sheaf(); 3]; crate::size_class::NUM_CLASSES];
    let held = hold(cpu, cache, || {
        node = cache.node();
        take_slots(cache, class, new_node, &mut detached);
    });
    if !held {
        return false;
    }
    for (class, sheaves) in SizeClass::all().zip(detached) {
        // The drained CPU's lane: its sheaves wait there for it.
        let depot = ClassDepot::for_cpu(class, cpu);
        let [main, spare, remote] = sheaves;
        for sheaf in [main, spare] {
            if sheaf != empty_sheaf() {
                if let Some(sheaf) = NonNull::new(sheaf) {
                    // Taken from its slot past the membarrier: ours. A
                    // drain after a lower capacity trims it here, so the
                    // barn never keeps the excess.
                    let sheaf = slow::sync_capacity(&depot, sheaf);
                    // SAFETY: ours (above); its objects' home is its node.
                    unsafe { exchange::dispose(&depot, (*sheaf.as_ptr()).node, sheaf) };
                }
            }
        }
        slow::hand_over(&depot, node, remote);
    }
    true
}

/// Step 3 on a held cache: takes the slots of `class` (every class with
/// `None`) into `detached` and moves the cache to `new_node` if given.
fn take_slots(
    cache: &CpuCache,
    class: Option<SizeClass>,
    new_node: Option<NodeId>,
    detached: &mut [[*mut Sheaf; 3]; crate::size_class::NUM_CLASSES],
) {
    for (each, out) in SizeClass::all().zip(detached.iter_mut()) {
        if class.is_some_and(|only| only != each) {
            continue;
        }
        let slots = cache.class(each);
        // The word and the jumps (one store), then the sheaf: a `fork()` by
        // another thread in between leaves the child (where no drain runs,
        // and the CPU's entry gets its cache back) a record every section
        // treats safely: with the room 0 a push misses, with the length 0
        // a pop misses, and the slot never holds the empty sheaf with a
        // length or room above 0 (a push would write into it). The child
        // leaks what the drain took, as it does every other thread's
        // sheaves. The word keeps its operations and the jumps the
        // length's move, as a replace's commit does (`counts`).
        let (word, jumps) = super::counts::load_pair(slots);
        let (emptied, jumps_after) = super::counts::replaced(word, jumps, 0, 0);
        super::counts::store_pair(slots, emptied, jumps_after);
        let main = cache
            .slot(Slot::Main, each)
            .swap(empty_sheaf(), Ordering::AcqRel);
        if main != empty_sheaf() {
            // SAFETY: past the membarrier the slots are the drainer's, and
            // so is the sheaf it took from main (a valid sheaf: CpuCache
            // invariant), whose header gets its length and capacity back.
            unsafe {
                (*main).len = super::counts::len(word);
                (*main).capacity = super::counts::capacity(word);
            }
        }
        *out = [
            main,
            cache
                .slot(Slot::Spare, each)
                .swap(empty_sheaf(), Ordering::AcqRel),
            cache
                .slot(Slot::Remote, each)
                .swap(empty_sheaf(), Ordering::AcqRel),
        ];
    }
    if let Some(new_node) = new_node {
        cache.set_node(new_node);
    }
}
