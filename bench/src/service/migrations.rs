//! How often the scheduler moved this process's threads between CPUs: read
//! at the measured window's edges, so every result line says how many
//! moves its warm-up and its window saw.
//!
//! A thread that moves in the middle of a burst frees the burst's buffers
//! on its new CPU, where they stay in that CPU's sheaves beside buffers
//! the old CPU keeps; neighbours on two CPUs cost line transfers for as
//! long as they stay so (docs/PERFORMANCE.md, "Neighbours on two CPUs").
//! Runs of the same configuration that differ in time and in moves are
//! telling that apart from the allocator's work.

use std::sync::Mutex;

/// Moves between CPUs of every live thread of the process since it
/// started (`se.nr_migrations` in `/proc/self/task/*/sched`); `None` where
/// the kernel does not say (no `CONFIG_SCHED_DEBUG`).
pub fn live_threads_total() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("sched")) else {
            // The thread exited between the listing and the read.
            continue;
        };
        total += moves_in(&text)?;
    }
    Some(total)
}

/// Moves between CPUs of the calling thread since it started.
pub fn this_thread_total() -> Option<u64> {
    moves_in(&std::fs::read_to_string("/proc/thread-self/sched").ok()?)
}

/// The `se.nr_migrations` figure of a thread's `sched` file.
fn moves_in(sched: &str) -> Option<u64> {
    sched
        .lines()
        .find(|line| line.starts_with("se.nr_migrations"))?
        .rsplit(':')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The totals at the window's opening and closing edges.
static EDGES: Mutex<(Option<u64>, Option<u64>)> = Mutex::new((None, None));

/// Records the total at a window edge (first call: opening; second:
/// closing; later calls change nothing).
pub fn edge() {
    let now = live_threads_total();
    let mut edges = EDGES.lock().unwrap_or_else(|e| e.into_inner());
    match *edges {
        (None, _) => edges.0 = now.or(Some(u64::MAX)),
        (Some(_), None) => edges.1 = now.or(Some(u64::MAX)),
        _ => {}
    }
}

/// Moves before the window opened (threads alive then, since they
/// started) and inside it (threads alive at both edges), if both edges
/// were read.
pub fn warmup_and_window() -> Option<(u64, u64)> {
    let edges = *EDGES.lock().unwrap_or_else(|e| e.into_inner());
    match edges {
        (Some(open), Some(close)) if open != u64::MAX && close != u64::MAX => {
            Some((open, close.saturating_sub(open)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU this thread may run on other than `here`, if any.
    fn another_allowed_cpu(here: usize) -> Option<usize> {
        // SAFETY: a zeroed `cpu_set_t` is a valid empty set, filled in by
        // the call for the calling thread.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
                return None;
            }
            set
        };
        // SAFETY: `CPU_ISSET` reads the set, for CPU ids below its size.
        (0..libc::CPU_SETSIZE as usize)
            .find(|&cpu| cpu != here && unsafe { libc::CPU_ISSET(cpu, &set) })
    }

    #[test]
    fn a_thread_pinned_to_another_cpu_counts_a_move() {
        let Some(text) = std::fs::read_to_string("/proc/self/sched").ok() else {
            return; // no procfs: nothing to read, nothing reported
        };
        assert_eq!(
            live_threads_total().is_some(),
            moves_in(&text).is_some(),
            "the process total is there exactly where the kernel keeps the count"
        );
        if moves_in(&text).is_none() {
            return;
        }
        let moved = std::thread::spawn(|| {
            let here = crate::service::os::current_cpu()?;
            let other = another_allowed_cpu(here)?;
            crate::service::os::pin_to_cpu(other).ok()?;
            this_thread_total()
        })
        .join()
        .expect("the thread ran");
        if let Some(moved) = moved {
            assert!(moved >= 1, "pinned to another CPU, the thread moved");
        }
    }

    #[test]
    fn the_figures_of_a_sched_file_are_read() {
        let text = "se.exec_start   :   1.0\nse.nr_migrations                             :                    7\n";
        assert_eq!(moves_in(text), Some(7));
        assert_eq!(moves_in("nr_switches : 3\n"), None);
    }
}
