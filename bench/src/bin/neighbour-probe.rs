//! What it costs two CPUs to use buffers that sit next to each other, with
//! no allocator in the loop: the probe behind the churn's spread
//! (docs/PERFORMANCE.md, "Neighbours on two CPUs").
//!
//! ```text
//! neighbour-probe [ROUNDS]   # default 3
//! ```
//!
//! Two threads, pinned to CPUs 0 and 1, each run the churn's burst (take
//! 256 buffers of 256 bytes off a stack of 512, write a 64-byte header
//! into each, read its first word back and push it back, in allocation
//! order) over buffers carved from one shared block of 1024 slots. The
//! layouts differ only in which thread owns which slot:
//!
//! * `halves`: thread 0 the first 512 slots, thread 1 the rest;
//! * `alternate`: even slots and odd slots;
//! * `pages`: alternate 4 KiB pages (16 slots each);
//! * `random`: each slot to a thread at random (seeded), 512 each.
//!
//! No line is written by both threads in any layout: whatever one layout
//! costs more than `halves` is the hardware moving lines it fetched on its
//! own (prefetchers running into the other thread's buffers). Each line
//! prints the fastest of seven passes per thread, in ns per buffer, and a
//! core-to-core round trip timed just before it.

use std::hint::black_box;
use std::time::Instant;

use sheafalloc_bench::service::os::pin_to_cpu;
use sheafalloc_bench::service::rng::Rng;
use sheafalloc_bench::sync::pingpong::round_trip_ns;

const SLOT: usize = 256;
const SLOTS: usize = 1024;
const PER_THREAD: usize = SLOTS / 2;
const BURST: usize = 256;
const HEADER: usize = 64;
const BURSTS_PER_PASS: usize = 4000;
const PASSES: usize = 7;

#[derive(Clone, Copy, Debug)]
enum Layout {
    Halves,
    Alternate,
    Pages,
    Random,
}

impl Layout {
    const ALL: [Layout; 4] = [
        Layout::Halves,
        Layout::Alternate,
        Layout::Pages,
        Layout::Random,
    ];

    fn name(self) -> &'static str {
        match self {
            Layout::Halves => "halves",
            Layout::Alternate => "alternate",
            Layout::Pages => "pages",
            Layout::Random => "random",
        }
    }

    /// The slots each thread owns.
    fn owners(self, seed: u64) -> [Vec<usize>; 2] {
        let mut owned = [Vec::new(), Vec::new()];
        let per_page = 4096 / SLOT;
        let mut rng = Rng::new(seed);
        for slot in 0..SLOTS {
            let thread = match self {
                Layout::Halves => usize::from(slot >= PER_THREAD),
                Layout::Alternate => slot % 2,
                Layout::Pages => slot / per_page % 2,
                Layout::Random => {
                    let pick = (rng.next_u64() & 1) as usize;
                    if owned[pick].len() == PER_THREAD {
                        1 - pick
                    } else {
                        pick
                    }
                }
            };
            owned[thread].push(slot);
        }
        owned
    }
}

/// The block the buffers are carved from, page-aligned.
#[repr(C, align(4096))]
struct Block([u8; SLOTS * SLOT]);

/// One thread's run: the fastest pass, in ns per buffer.
fn churn(cpu: usize, stack: &mut [*mut u8]) -> f64 {
    if let Err(error) = pin_to_cpu(cpu) {
        eprintln!("neighbour-probe: {error}; running unpinned");
    }
    let mut buffers = [std::ptr::null_mut::<u8>(); BURST];
    let mut len = stack.len();
    let mut best = f64::MAX;
    for _ in 0..PASSES {
        let start = Instant::now();
        for _ in 0..BURSTS_PER_PASS {
            for (i, slot) in buffers.iter_mut().enumerate() {
                len -= 1;
                let buffer = stack[len];
                // SAFETY: every stack entry is a distinct slot of the
                // block, `SLOT >= HEADER` bytes, owned by this thread.
                unsafe {
                    buffer.cast::<u32>().write(SLOT as u32);
                    buffer.add(4).write_bytes(i as u8, HEADER - 4);
                }
                *slot = buffer;
            }
            for &buffer in black_box(&buffers).iter() {
                // SAFETY: written above.
                black_box(unsafe { buffer.cast::<u32>().read() });
                stack[len] = buffer;
                len += 1;
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (BURSTS_PER_PASS * BURST) as f64;
        best = best.min(ns);
    }
    best
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("ROUNDS is a number"))
        .unwrap_or(3);
    let mut block = Box::new(Block([0; SLOTS * SLOT]));
    let base = block.0.as_mut_ptr();
    println!(
        "layout     round trip   thread 0   thread 1   (ns per buffer, fastest of {PASSES} passes)"
    );
    for round in 0..rounds {
        for layout in Layout::ALL {
            let [first, second] = layout.owners(round as u64 + 1);
            // Addresses into the block, which outlives the threads.
            let stack = |slots: &[usize]| -> Vec<usize> {
                slots
                    .iter()
                    .map(|&slot| base as usize + slot * SLOT)
                    .collect()
            };
            let (first, second) = (stack(&first), stack(&second));
            let rtt = round_trip_ns(5);
            let times: Vec<f64> = std::thread::scope(|s| {
                let runs: Vec<_> = [first, second]
                    .into_iter()
                    .enumerate()
                    .map(|(cpu, stack)| {
                        s.spawn(move || {
                            let mut stack: Vec<*mut u8> =
                                stack.into_iter().map(|a| a as *mut u8).collect();
                            churn(cpu, &mut stack)
                        })
                    })
                    .collect();
                runs.into_iter()
                    .map(|run| run.join().expect("a probe thread failed"))
                    .collect()
            });
            println!(
                "{:<10} {:>7.0} ns {:>9.2} {:>10.2}",
                layout.name(),
                rtt,
                times[0],
                times[1]
            );
        }
    }
    drop(block);
}
