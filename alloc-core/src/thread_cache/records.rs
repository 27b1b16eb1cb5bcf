//! Where each thread's per-class slow-path records ([`ColdSlot`]) live.
//!
//! Not in the thread's static TLS: the C library writes a thread's whole
//! static TLS block at the thread's start, so every byte there is paid by
//! every thread, whether it ever uses the class or not (a record per class
//! for all 101 classes was 7.3 KB of each thread's 10.6 KB). A thread
//! takes a record for a class on its first slow path of that class, from
//! blocks mapped from the OS, and gives its records back when it exits: a
//! thread that used eight classes holds eight records, densely packed with
//! other threads' records, and its TLS keeps one pointer per class.
//!
//! The pool is guarded by the registry lock (it is a field of the
//! registry): a thread takes a record at most once per class, gives its
//! records back while it unregisters, and readers that walk the threads
//! hold that lock, so a record a reader reaches is not given back
//! meanwhile. In a forked child, the records of the threads that did not
//! survive the fork go back to the pool too.

use core::cell::Cell;
use core::ptr::{self, NonNull};

use super::ColdSlot;
use crate::os;

/// One record, with the free list's link after it (so a record's address
/// is its entry's).
#[repr(C)]
struct Entry {
    record: ColdSlot,
    next_free: Cell<*mut Entry>,
}

/// Bytes mapped at a time for records (819 records of 80 bytes).
const BLOCK_BYTES: usize = 64 * 1024;

const ENTRY_BYTES: usize = core::mem::size_of::<Entry>();
const _: () = assert!(BLOCK_BYTES >= ENTRY_BYTES && core::mem::align_of::<Entry>() <= 4096);

/// How many records there are, and what they cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordUsage {
    /// Records threads hold now.
    pub in_use: u64,
    /// Records carved from mapped blocks since start (held or free).
    pub carved: u64,
    /// Bytes mapped for records since start.
    pub mapped_bytes: u64,
}

/// The pool of records.
///
/// Invariant: every entry on `free` is owned by the pool and lies in a
/// block it mapped; `cursor..end` is mapped memory of the newest block not
/// yet carved (both 0 before the first block). Blocks are never unmapped.
pub(crate) struct RecordPool {
    free: *mut Entry,
    cursor: usize,
    end: usize,
    usage: RecordUsage,
}

impl RecordPool {
    /// An empty pool: no block mapped.
    pub(crate) const fn new() -> Self {
        Self {
            free: ptr::null_mut(),
            cursor: 0,
            end: 0,
            usage: RecordUsage {
                in_use: 0,
                carved: 0,
                mapped_bytes: 0,
            },
        }
    }

    /// A fresh record (every count zero, no sheaf), or `None` if the OS
    /// refuses memory for a new block.
    pub(crate) fn take(&mut self) -> Option<NonNull<ColdSlot>> {
        let entry = if let Some(entry) = NonNull::new(self.free) {
            // SAFETY: entries on the free list are the pool's (invariant).
            self.free = unsafe { entry.as_ref() }.next_free.get();
            entry.as_ptr()
        } else {
            if self.end.wrapping_sub(self.cursor) < ENTRY_BYTES {
                let block = os::map(BLOCK_BYTES, os::page_size())?;
                self.cursor = block.as_ptr() as usize;
                self.end = self.cursor.wrapping_add(BLOCK_BYTES);
                self.usage.mapped_bytes = self.usage.mapped_bytes.wrapping_add(BLOCK_BYTES as u64);
            }
            let entry = self.cursor as *mut Entry;
            self.cursor = self.cursor.wrapping_add(ENTRY_BYTES);
            self.usage.carved = self.usage.carved.wrapping_add(1);
            entry
        };
        // SAFETY: `entry` is pool memory no one else holds (off the free
        // list, or carved just now), aligned for `Entry` (blocks are
        // page-aligned and entries follow each other at their size, a
        // multiple of their alignment) and `ENTRY_BYTES` long.
        unsafe {
            entry.write(Entry {
                record: ColdSlot::new(),
                next_free: Cell::new(ptr::null_mut()),
            });
        }
        self.usage.in_use = self.usage.in_use.wrapping_add(1);
        NonNull::new(entry.cast::<ColdSlot>())
    }

    /// Gives a record back.
    ///
    /// # Safety
    ///
    /// 1. `record` came from [`Self::take`] of this pool, and its holder
    ///    gives it up for good (its counts published, and its sheaves given
    ///    back, except in a forked child, where a dead thread's are lost
    ///    with it).
    pub(crate) unsafe fn give(&mut self, record: NonNull<ColdSlot>) {
        let entry = record.as_ptr().cast::<Entry>();
        // SAFETY: duty 1: the record is the first field of a live entry
        // of this pool (`repr(C)`), which now belongs to the pool again.
        unsafe { (*entry).next_free.set(self.free) };
        self.free = entry;
        self.usage.in_use = self.usage.in_use.saturating_sub(1);
    }

    /// How many records there are.
    pub(crate) fn usage(&self) -> RecordUsage {
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn records_are_distinct_fresh_and_reused() {
        let mut pool = RecordPool::new();
        let per_block = (BLOCK_BYTES / ENTRY_BYTES) as u64;
        // More than a block's worth: the pool maps a second block.
        let taken: Vec<_> = (0..per_block + 5)
            .map(|_| pool.take().expect("memory for records"))
            .collect();
        let distinct: HashSet<usize> = taken.iter().map(|r| r.as_ptr() as usize).collect();
        assert_eq!(distinct.len(), taken.len(), "a record handed out twice");
        assert_eq!(pool.usage().carved, per_block + 5);
        assert_eq!(pool.usage().mapped_bytes, 2 * BLOCK_BYTES as u64);
        // A used record comes back fresh: counts zero, no sheaf.
        let first = taken[0];
        // SAFETY: ours, from `take`.
        unsafe { first.as_ref() }.slow_allocs.count();
        for record in &taken {
            // SAFETY: each from `take`, given up once.
            unsafe { pool.give(*record) };
        }
        assert_eq!(pool.usage().in_use, 0);
        let again: Vec<_> = (0..taken.len())
            .map(|_| pool.take().expect("a free record"))
            .collect();
        assert_eq!(
            pool.usage().carved,
            per_block + 5,
            "free records were not reused"
        );
        assert!(again
            .iter()
            .all(|r| distinct.contains(&(r.as_ptr() as usize))));
        for record in &again {
            // SAFETY: fresh from `take`.
            let record = unsafe { record.as_ref() };
            assert_eq!(record.slow_allocs.pending(), 0);
            assert!(record.remote.get().is_null());
            assert_eq!(record.spare_trades.swaps.pending(), 0);
        }
    }
}
