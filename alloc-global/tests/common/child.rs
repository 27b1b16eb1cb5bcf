//! Waiting for a forked child with a deadline (a `pidfd` polled with a
//! timeout: no sleeping loop), shared by the fork tests of both crates.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Debug, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signalled(i32),
    /// It was still running at the deadline and has been killed.
    Hung,
}

/// Waits up to `limit` for child `pid`; a child still running then is
/// killed and reported as `Hung`.
pub fn wait_for_child(pid: libc::pid_t, limit: Duration) -> ChildEnd {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    assert!(pidfd >= 0, "pidfd_open failed for {pid}");
    let deadline = Instant::now() + limit;
    let mut hung = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a pidfd becomes readable when the
        // process exits.
        let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis() as libc::c_int) };
        if ready > 0 {
            break;
        }
        if ready == 0 || left.is_zero() {
            // SAFETY: killing our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            hung = true;
            break;
        }
    }
    let mut status = 0;
    // SAFETY: reaping our own child, which has exited or been killed.
    let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(pidfd) };
    assert_eq!(reaped, pid, "waitpid");
    if hung {
        ChildEnd::Hung
    } else if libc::WIFEXITED(status) {
        ChildEnd::Exited(libc::WEXITSTATUS(status))
    } else {
        ChildEnd::Signalled(libc::WTERMSIG(status))
    }
}
