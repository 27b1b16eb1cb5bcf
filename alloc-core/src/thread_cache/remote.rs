//! Remote ("alien") frees: objects freed on a node that is not their home
//! never enter the freeing thread's main or spare sheaf. They are batched
//! per home node in the slot's remote sheaf and handed over in one
//! operation — to the home barn as a full sheaf when it has room, else to
//! the home slabs (the napi_consume_skb / skb_attempt_defer_free lesson:
//! caching them on the wrong node spreads remote memory everywhere).

use core::ptr::{self, NonNull};

use super::sheaves::ClassSheaves;
use crate::exchange::{self, Depot};
use crate::node::NodeId;

impl ClassSheaves<'_> {
    /// Batches an object for its home node; a full batch (or one for
    /// another node) is handed over at once.
    ///
    /// # Safety
    ///
    /// 1. `object` is a free object of the depot's class whose home is
    ///    `home`, no longer used; `home` is not `node` (the thread's).
    pub unsafe fn free_remote<D: Depot>(
        self,
        depot: &D,
        node: NodeId,
        object: *mut u8,
        home: NodeId,
    ) {
        self.hot.count_free();
        let waiting = self.cold.remote.get();
        // SAFETY: the batch is owned by this thread.
        if !waiting.is_null() && unsafe { (*waiting).node } != home {
            // Objects for another node are waiting: send them first.
            self.send_remote(depot, node);
        }
        let mut batch = self.cold.remote.get();
        if batch.is_null() {
            match depot
                .pool()
                .take(depot.class(), home, depot.sheaf_capacity(), depot.lane())
            {
                Some(sheaf) => {
                    batch = sheaf.as_ptr();
                    self.cold.remote.set(batch);
                }
                None => {
                    // No memory for a batch: send the object home alone.
                    // SAFETY: duty 1.
                    unsafe { depot.flush(home, &[object]) };
                    depot.remote_frees().add(node, home, 1);
                    return;
                }
            }
        }
        // SAFETY: owned by this thread and empty if its node differed (it
        // was sent above), so it may be retargeted; it has room (a full
        // batch is sent at once below).
        let pushed = unsafe {
            (*batch).node = home;
            (*batch).push(object)
        };
        crate::invariant!(pushed, "remote batch overflow");
        // SAFETY: as above.
        if unsafe { (*batch).len >= (*batch).capacity } {
            self.send_remote(depot, node);
        }
    }

    /// Hands the remote batch to its home node (see [`exchange::hand_over`]):
    /// a full batch is traded for one of the home barn's empty sheaves,
    /// which becomes the next batch; otherwise the objects go to the home
    /// slabs and the emptied sheaf stays as the next batch. The slot keeps
    /// an empty batch (or none).
    pub fn send_remote<D: Depot>(self, depot: &D, node: NodeId) {
        let Some(batch) = NonNull::new(self.cold.remote.get()) else {
            return;
        };
        // SAFETY: the batch is owned by this thread's slot.
        let sheaf = unsafe { &mut *batch.as_ptr() };
        let (home, count) = (sheaf.node, sheaf.len);
        if count == 0 {
            return;
        }
        depot.remote_frees().add(node, home, count);
        if sheaf.len == sheaf.capacity {
            // SAFETY: owned, non-empty, objects of this class whose home is
            // `home`.
            if let Ok(next) = unsafe { exchange::hand_over(depot, home, batch) } {
                let next = next.map_or(ptr::null_mut(), |empty| {
                    // SAFETY: the barn handed the empty sheaf to us.
                    unsafe { (*empty.as_ptr()).set_capacity(depot.sheaf_capacity()) };
                    empty.as_ptr()
                });
                self.cold.remote.set(next);
                return;
            }
        }
        // SAFETY: the objects are free objects of this class at home `home`.
        unsafe { exchange::flush(depot, home, sheaf) };
        sheaf.set_capacity(depot.sheaf_capacity());
    }

    /// Sends the remote batch and gives its (empty) sheaf back to the pool.
    pub fn release_remote<D: Depot>(self, depot: &D, node: NodeId) {
        self.send_remote(depot, node);
        if let Some(empty) = NonNull::new(self.cold.remote.replace(ptr::null_mut())) {
            // SAFETY: owned and empty after `send_remote`.
            unsafe { depot.pool().give(empty) };
        }
    }
}
