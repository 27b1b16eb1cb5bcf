//! The lock-order checker of debug builds: taking locks against the order
//! of `sync::LockRank` aborts with a message naming both ranks, the first
//! time the path runs — whether or not another thread would have
//! deadlocked with it.

#[path = "../../alloc-global/tests/common/child.rs"]
mod child;

use std::io::Read;
use std::os::fd::FromRawFd;
use std::time::Duration;

use child::{wait_for_child, ChildEnd};
use sheafalloc_core::sync::{LockRank, Mutex};

/// Runs `path` in a forked child; returns how it ended and its stderr.
fn in_child(path: fn()) -> (ChildEnd, String) {
    let mut fds = [0; 2];
    // SAFETY: a valid out-array of two fds.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only redirects stderr, runs `path` and exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: fds from `pipe` above.
        unsafe { libc::dup2(fds[1], 2) };
        path();
        // SAFETY: end the child without the harness's teardown.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(fds[1]) };
    let end = wait_for_child(pid, Duration::from_secs(20));
    let mut stderr = String::new();
    // SAFETY: the read end, owned by this file from here on.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    pipe.read_to_string(&mut stderr).expect("child stderr");
    (end, stderr)
}

fn pool_then_barn() {
    let barn = Mutex::new(LockRank::Barn, 0u32);
    let pool = Mutex::new(LockRank::Pool, 0u32);
    let _pool = pool.lock();
    let _barn = barn.lock();
}

fn barns_in_descending_address_order() {
    let barns = [
        Mutex::new(LockRank::Barn, 0u32),
        Mutex::new(LockRank::Barn, 0u32),
    ];
    let _second = barns[1].lock();
    let _first = barns[0].lock();
}

fn the_order_itself() {
    let registry = Mutex::new(LockRank::Registry, ());
    let barns = [
        Mutex::new(LockRank::Barn, ()),
        Mutex::new(LockRank::Barn, ()),
    ];
    let slabs = Mutex::new(LockRank::Slabs, ());
    let arena = Mutex::new(LockRank::Arena, ());
    let pool = Mutex::new(LockRank::Pool, ());
    let _all = (
        registry.lock(),
        barns[0].lock(),
        barns[1].lock(),
        slabs.lock(),
        arena.lock(),
        pool.lock(),
    );
    // Released out of order, then taken again: nothing stale remains.
    drop(_all);
    let _pool = pool.lock();
    drop(_pool);
    let _barn = barns[0].lock();
}

#[test]
fn taking_a_lower_rank_under_a_higher_one_aborts_in_debug_builds() {
    let (end, stderr) = in_child(pool_then_barn);
    if cfg!(debug_assertions) {
        assert_eq!(end, ChildEnd::Signalled(libc::SIGABRT), "{stderr}");
        assert!(
            stderr.contains("lock order violated: taking a barn lock while holding a pool lock"),
            "{stderr}"
        );
    } else {
        assert_eq!(end, ChildEnd::Exited(0), "release builds do not check");
    }
}

#[test]
fn locks_of_one_rank_go_in_address_order() {
    let (end, stderr) = in_child(barns_in_descending_address_order);
    if cfg!(debug_assertions) {
        assert_eq!(end, ChildEnd::Signalled(libc::SIGABRT), "{stderr}");
        assert!(
            stderr.contains("the same rank at a lower address"),
            "{stderr}"
        );
    } else {
        assert_eq!(end, ChildEnd::Exited(0));
    }
}

#[test]
fn the_documented_order_passes() {
    let (end, stderr) = in_child(the_order_itself);
    assert_eq!(end, ChildEnd::Exited(0), "{stderr}");
}
