//! A tiny lockdep for debug builds: each thread's held locks, by rank, and
//! a check at every acquisition that it follows [`LockRank`]'s order.
//!
//! Per thread and rank it keeps how many locks are held and the highest
//! address among them; a bitmask says which ranks are held. Taking a lock
//! of rank `r` at address `a` is allowed when no rank above `r` is held and,
//! if some lock of rank `r` is, `a` is above the highest held. A violation
//! writes both ranks to stderr and aborts: the path could deadlock against
//! another path or against the fork handlers, whether or not it did now.
//!
//! The state is a `thread_local!` with a `const` initialiser and a `Copy`
//! type (no destructor): on Linux it compiles to a `#[thread_local]` static,
//! which neither allocates nor registers anything, and stays valid while
//! the thread's pthread key destructors run. This is the one use of `std`
//! in the engine, and only in debug builds.

extern crate std;

use core::cell::Cell;

use super::LockRank;

#[derive(Clone, Copy)]
struct Held {
    /// Bit `r` set: some lock of rank `r` is held.
    ranks: u32,
    /// Locks held per rank.
    count: [u16; LockRank::COUNT],
    /// Highest address among the held locks of each rank.
    highest: [usize; LockRank::COUNT],
}

impl Held {
    const NONE: Held = Held {
        ranks: 0,
        count: [0; LockRank::COUNT],
        highest: [0; LockRank::COUNT],
    };
}

std::thread_local! {
    static HELD: Cell<Held> = const { Cell::new(Held::NONE) };
}

fn with_held(update: impl FnOnce(&mut Held)) {
    // `try_with` fails only after the thread-local was destroyed, which a
    // type without destructor never is; nothing is checked then.
    let _ = HELD.try_with(|cell| {
        let mut held = cell.get();
        update(&mut held);
        cell.set(held);
    });
}

/// Checks and records a blocking acquisition.
pub(super) fn acquire(rank: LockRank, address: usize) {
    with_held(|held| {
        let r = rank as usize;
        // Cannot wrap: `2 << r >= 2` (`r < LockRank::COUNT`, 7).
        let above = held.ranks & !(2u32 << r).wrapping_sub(1);
        if above != 0 {
            let holding = LockRank::from_index(above.trailing_zeros() as usize);
            violation(rank, holding.unwrap_or(rank), "a lower rank");
        }
        if held.ranks & (1 << r) != 0 && address <= held.highest.get(r).copied().unwrap_or(0) {
            violation(rank, rank, "the same rank at a lower address");
        }
        add(held, r, address);
    });
}

/// Records a lock taken by `try_lock` (no order check: it did not wait).
pub(super) fn record(rank: LockRank, address: usize) {
    with_held(|held| add(held, rank as usize, address));
}

fn add(held: &mut Held, r: usize, address: usize) {
    if let (Some(count), Some(highest)) = (held.count.get_mut(r), held.highest.get_mut(r)) {
        *count = count.saturating_add(1);
        *highest = (*highest).max(address);
        held.ranks |= 1 << r;
    }
}

/// Records a release.
pub(super) fn release(rank: LockRank) {
    with_held(|held| {
        let r = rank as usize;
        let (Some(count), Some(highest)) = (held.count.get_mut(r), held.highest.get_mut(r)) else {
            return;
        };
        let Some(remaining) = count.checked_sub(1) else {
            crate::os::write_stderr(b"sheafalloc: lock released that this thread does not hold\n");
            crate::os::abort();
        };
        *count = remaining;
        if *count == 0 {
            *highest = 0;
            held.ranks &= !(1 << r);
        }
    });
}

/// Locks the calling thread holds.
pub(super) fn held() -> u32 {
    HELD.try_with(|cell| {
        cell.get()
            .count
            .iter()
            .fold(0u32, |total, &count| total.saturating_add(u32::from(count)))
    })
    .unwrap_or(0)
}

#[cold]
fn violation(taking: LockRank, holding: LockRank, rule: &str) -> ! {
    let mut message = crate::message::Message::<192>::new();
    message.push(b"sheafalloc: lock order violated: taking a ");
    message.push(taking.name().as_bytes());
    message.push(b" lock while holding a ");
    message.push(holding.name().as_bytes());
    message.push(b" lock (locks must be taken after ");
    message.push(rule.as_bytes());
    message.push(b"; see sync/rank.rs)\n");
    message.write_to_stderr();
    crate::os::abort();
}
