//! Per-CPU sheaves under fire: four times more threads than CPUs, a storm
//! of signals (each one restarts whatever critical section it lands in),
//! drains racing allocations (purge, capacity changes), threads that go
//! idle — with every object's contents verified, and the books balanced at
//! the end.
//!
//! The same binary runs in per-thread mode when rseq is unavailable
//! (`GLIBC_TUNABLES=glibc.pthread.rseq=0`, as CI runs it a second time) or
//! turned off (`SHEAFALLOC_PERCPU=off`): then it checks that fallback is what
//! is in force, and the rest still holds.
//!
//! A plain `main`: its threads are the only ones, so the quiescence audit
//! at the end sees every object.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// A packet-sized object with a pattern of its address, size and a
/// generation.
struct Tagged(Box<[u8]>, u64);

impl Tagged {
    fn new(size: usize, generation: u64) -> Self {
        let mut bytes = vec![0u8; size].into_boxed_slice();
        // SAFETY: the box has `size` bytes.
        unsafe { common::fill(bytes.as_mut_ptr(), size, generation) };
        Self(bytes, generation)
    }

    fn check(&self) {
        // SAFETY: the box has its length in bytes.
        let result = unsafe { common::check(self.0.as_ptr(), self.0.len(), self.1) };
        if let Err(index) = result {
            panic!(
                "object {:p} of {} bytes corrupted at byte {index}",
                self.0.as_ptr(),
                self.0.len()
            );
        }
    }
}

const SIZES: [usize; 5] = [24, 64, 256, 1500, 2112];

/// Threads that allocate bursts, keep some, hand some to the next thread,
/// and free the rest, until `stop`; returns the objects checked.
fn workers(threads: usize, stop: &Arc<AtomicBool>, seed: u64) -> Vec<std::thread::JoinHandle<u64>> {
    let barrier = Arc::new(Barrier::new(threads));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::sync_channel::<Vec<Tagged>>(4))
        .unzip();
    receivers
        .into_iter()
        .enumerate()
        .map(|(id, inbox)| {
            let next = senders[(id + 1) % threads].clone();
            let (stop, barrier) = (Arc::clone(stop), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut rng = common::Rng::new(seed ^ ((id as u64 + 1) * 0x9E37));
                let mut generation = (id as u64) << 40;
                let mut kept: Vec<Tagged> = Vec::new();
                let mut checked = 0u64;
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let burst = 16 + rng.below(200) as usize;
                    let mut fresh: Vec<Tagged> = (0..burst)
                        .map(|_| {
                            generation += 1;
                            Tagged::new(SIZES[rng.below(SIZES.len() as u64) as usize], generation)
                        })
                        .collect();
                    let handed = fresh.split_off(burst / 2);
                    if let Err(
                        mpsc::TrySendError::Full(back) | mpsc::TrySendError::Disconnected(back),
                    ) = next.try_send(handed)
                    {
                        kept.extend(back);
                    }
                    kept.extend(fresh);
                    while let Ok(objects) = inbox.try_recv() {
                        for object in objects {
                            object.check();
                            checked += 1;
                        }
                    }
                    while kept.len() > 300 {
                        let object = kept.swap_remove(rng.below(kept.len() as u64) as usize);
                        object.check();
                        checked += 1;
                    }
                }
                drop(next);
                for object in kept {
                    object.check();
                    checked += 1;
                }
                while let Ok(objects) = inbox.recv_timeout(Duration::from_secs(5)) {
                    for object in objects {
                        object.check();
                        checked += 1;
                    }
                }
                checked
            })
        })
        .collect()
}

/// Sends SIGUSR1 to every thread of the process, as fast as it can, until
/// `stop`.
fn signal_storm(stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let mut sent = 0u64;
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        while !stop.load(Ordering::Relaxed) {
            for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
                let Some(tid) = task
                    .ok()
                    .and_then(|t| t.file_name().to_str()?.parse::<libc::pid_t>().ok())
                else {
                    continue;
                };
                // SAFETY: tgkill to a thread of our own process; the
                // handler only bumps an atomic.
                unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) };
                sent += 1;
            }
        }
        sent
    })
}

fn run_for(what: &str, seconds: f64, work: impl FnOnce(&Arc<AtomicBool>)) {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads = 4 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let handles = workers(threads, &stop, common::seed(0x9e4c_u64));
    work(&stop);
    while started.elapsed().as_secs_f64() < seconds {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let checked: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("a worker failed"))
        .sum();
    eprintln!("{what}: {threads} threads, {checked} objects verified");
    assert!(checked > 1000, "{what}: too little work ({checked})");
}

fn main() {
    let seconds: f64 = std::env::var("SHEAFALLOC_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(6.0, |secs: f64| secs.min(60.0));
    // The mode first (the engine initialises on the first allocation).
    drop(Box::new(1u8));
    assert_eq!(
        sheafalloc::cache_mode(),
        common::expected_mode(),
        "{:?}",
        sheafalloc::cache_mode_reason()
    );
    let before: Vec<_> = sheafalloc::cache_stats().collect();

    // 1. A storm of signals: every section it interrupts restarts.
    // SAFETY: installing a handler that only bumps an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
    let storm_stop = Arc::new(AtomicBool::new(false));
    let storm = signal_storm(&storm_stop);
    run_for("signal storm", seconds, |_| {});
    storm_stop.store(true, Ordering::Relaxed);
    let sent = storm.join().expect("the storm");
    let delivered = SIGNALS.load(Ordering::Relaxed);
    eprintln!("signals: {sent} sent, {delivered} delivered");
    assert!(delivered > 1000, "the storm was too weak: {delivered}");

    // 2. Drains racing allocations: purge (every CPU's sheaves) and
    // capacity changes (one class's) while the workers run.
    let drains = Arc::new(AtomicU64::new(0));
    run_for("drains", seconds, |stop| {
        let (stop, drains) = (Arc::clone(stop), Arc::clone(&drains));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sheafalloc::purge();
                let capacity = [8, 64, 3, 32][(i % 4) as usize];
                sheafalloc::set_sheaf_capacity("size-2304", capacity).unwrap();
                i += 1;
                drains.store(i, Ordering::Relaxed);
            }
            sheafalloc::release_sheaf_capacity("size-2304").unwrap();
        });
    });
    assert!(drains.load(Ordering::Relaxed) > 10, "few drains ran");

    // 3. Threads that go idle hold nothing (per-CPU mode): 64 threads each
    // allocate and free a burst, then wait.
    let idle = 64;
    let parked = Arc::new(Barrier::new(idle + 1));
    let release = Arc::new(Barrier::new(idle + 1));
    let sleepers: Vec<_> = (0..idle)
        .map(|t| {
            let (parked, release) = (Arc::clone(&parked), Arc::clone(&release));
            std::thread::spawn(move || {
                let burst: Vec<Tagged> = (0..64u64)
                    .map(|i| Tagged::new(2112, t as u64 * 1000 + i))
                    .collect();
                for object in &burst {
                    object.check();
                }
                drop(burst);
                parked.wait();
                release.wait();
            })
        })
        .collect();
    parked.wait();
    let cached: u64 = sheafalloc::cache_stats()
        .filter(|c| c.object_size == 2304)
        .map(|c| c.thread_main_objects)
        .sum();
    if sheafalloc::cache_mode() == sheafalloc::CacheMode::PerCpu {
        let cpus = sheafalloc::cpus_with_caches() as u64;
        let bound = cpus * u64::from(sheafalloc::cache("size-2304").unwrap().sheaf_capacity);
        assert!(
            cached <= bound,
            "{cached} objects cached in main sheaves by {idle} idle threads: above {bound} ({cpus} CPUs)"
        );
    }
    release.wait();
    for sleeper in sleepers {
        sleeper.join().expect("a sleeper failed");
    }

    // The books: everything allocated was freed, and after a purge every
    // free object of the packet caches is in a slab or a barn.
    let after: Vec<_> = sheafalloc::cache_stats().collect();
    // Bursts of up to 216 objects on sheaves of 32 and 64: main and spare
    // traded places all through the storm (in per-CPU mode mostly in the
    // one-section swap), so the contents checked above went through it.
    let swaps: u64 = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a.spare_swaps - b.spare_swaps)
        .sum();
    eprintln!("spare swaps: {swaps}");
    assert!(
        swaps > 1000,
        "only {swaps} spare swaps: the test missed that path"
    );
    for (b, a) in before.iter().zip(&after) {
        let live = (a.allocations - b.allocations) as i64 - (a.frees - b.frees) as i64;
        assert!(
            live.abs() <= 64,
            "size-{}: {live} objects unaccounted for",
            a.object_size
        );
    }
    sheafalloc::purge();
    for name in ["size-256", "size-1536", "size-2304"] {
        common::assert_quiescent(name, 0);
    }
    println!(
        "test result: ok. 3 passed; 0 failed ({:?} mode)",
        sheafalloc::cache_mode()
    );
}
