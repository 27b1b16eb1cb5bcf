//! Whether a CPU sends another lane's objects back, or keeps them.
//!
//! A CPU's fast-path push takes only objects of its own lane's region, so
//! what it frees of another CPU's objects goes back to that CPU's lane in
//! remote batches ([`LaneFrees::Return`], the default). That keeps each
//! CPU's buffers in pages of its own: after a thread moves in the middle of
//! a burst, the burst goes home instead of sitting for good beside the
//! other CPU's buffers, where the hardware prefetchers would pull lines
//! from one core to the other on every pass.
//!
//! Where objects cross between CPUs all the time (larson's threads, which
//! inherit each other's objects; a thread pool whose tasks move), sending
//! them back buys no layout, since both CPUs keep writing the same pages
//! anyway, and it costs: each object comes back cold to a CPU whose cache
//! lost it, and every batch is a barn trade on each side. Such a CPU
//! [`LaneFrees::Keep`]s them: its push takes its node's whole region, as
//! in per-thread mode.
//!
//! The periodic tick decides, per CPU, from the CPU's count of other lanes'
//! objects: those it sent back (returning), or those in the full sheaves it
//! gave away (keeping; a lower count, since objects used again on the CPU
//! are not seen). A flow of [`FLOW_PER_SEC`] or more turns returns off; a
//! CPU goes back to returning after `calm_needed` ticks below a quarter of
//! it. That wait doubles (up to [`CALM_TICKS_MAX`]) each time the flow is
//! back within [`SETTLED_TICKS`] of a return, so a flow near the threshold
//! does not switch every tick. A switch holds the CPU's cache the way a
//! drain does (`drain::set_lane_frees`, one membarrier); without membarrier
//! nothing switches and every CPU returns.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::topology::MAX_CPUS;

/// Objects of other lanes per second at which a CPU stops sending them
/// back.
pub const FLOW_PER_SEC: u64 = 8192;
/// Ticks below a quarter of the flow a keeping CPU waits before it sends
/// objects back again, at first.
pub const CALM_TICKS_MIN: u16 = 2;
/// The longest such wait.
pub const CALM_TICKS_MAX: u16 = 64;
/// Ticks of returning after which a flow that comes back no longer doubles
/// the wait.
pub const SETTLED_TICKS: u16 = 8;

/// What a CPU does with objects of another lane of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneFrees {
    /// Sends them back to their lane in remote batches.
    Return,
    /// Keeps them in its own sheaves.
    Keep,
}

/// One CPU's steering between ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steering {
    /// What the CPU does now.
    pub frees: LaneFrees,
    /// Calm ticks in a row while keeping.
    calm: u16,
    /// Calm ticks a keeping CPU needs before it returns again.
    calm_needed: u16,
    /// Ticks since the last switch (saturating).
    in_mode: u16,
    /// The CPU's count of other lanes' objects at the last tick.
    seen: u64,
}

impl Default for Steering {
    fn default() -> Self {
        Self::new()
    }
}

impl Steering {
    /// A CPU that returns objects, with the shortest wait.
    pub const fn new() -> Self {
        Self {
            frees: LaneFrees::Return,
            calm: 0,
            calm_needed: CALM_TICKS_MIN,
            // As if it had returned for long: a first flow waits the least.
            in_mode: SETTLED_TICKS,
            seen: 0,
        }
    }

    /// The decision of one tick: `foreign` objects of other lanes counted
    /// in the `elapsed_ms` since the last one.
    #[must_use]
    pub fn decide(self, foreign: u64, elapsed_ms: u64) -> Self {
        // Objects per second, without overflow for any count.
        let per_sec = foreign
            .saturating_mul(1000)
            .checked_div(elapsed_ms.max(1))
            .unwrap_or(u64::MAX);
        let in_mode = self.in_mode.saturating_add(1);
        match self.frees {
            LaneFrees::Return if per_sec >= FLOW_PER_SEC => Self {
                frees: LaneFrees::Keep,
                calm: 0,
                calm_needed: if self.in_mode < SETTLED_TICKS {
                    self.calm_needed.saturating_mul(2).min(CALM_TICKS_MAX)
                } else {
                    CALM_TICKS_MIN
                },
                in_mode: 0,
                ..self
            },
            LaneFrees::Return => Self { in_mode, ..self },
            LaneFrees::Keep if per_sec < FLOW_PER_SEC / 4 => {
                let calm = self.calm.saturating_add(1);
                if calm >= self.calm_needed {
                    Self {
                        frees: LaneFrees::Return,
                        calm: 0,
                        in_mode: 0,
                        ..self
                    }
                } else {
                    Self {
                        calm,
                        in_mode,
                        ..self
                    }
                }
            }
            LaneFrees::Keep => Self {
                calm: 0,
                in_mode,
                ..self
            },
        }
    }
}

/// Switches between returning and keeping, over all CPUs, since start.
static SWITCHES: AtomicU64 = AtomicU64::new(0);

/// Switches between returning and keeping other lanes' objects, over all
/// CPUs, since start.
pub fn switches() -> u64 {
    SWITCHES.load(Ordering::Relaxed)
}

/// Every CPU's steering, kept by the tick (under its lock).
pub type Book = [Steering; MAX_CPUS];

/// A book where every CPU returns objects.
pub const fn new_book() -> Book {
    [Steering::new(); MAX_CPUS]
}

/// One steering tick over every CPU with a cache: `elapsed_ms` since the
/// last. Returns how many CPUs switched.
pub fn steer(book: &mut Book, elapsed_ms: u64) -> usize {
    if !super::can_drain() {
        return 0;
    }
    let mut switched = 0usize;
    for (cpu, state) in book.iter_mut().enumerate() {
        let Some(cache) = super::published(cpu) else {
            continue;
        };
        let count = cache.foreign.load(Ordering::Relaxed);
        let foreign = count.wrapping_sub(state.seen);
        let next = Steering {
            seen: count,
            ..state.decide(foreign, elapsed_ms)
        };
        if next.frees != state.frees && !super::drain::set_lane_frees(cpu as u32, cache, next.frees)
        {
            // Held by a drain: the next tick decides again.
            state.seen = count;
            continue;
        }
        switched = switched.saturating_add(usize::from(next.frees != state.frees));
        *state = next;
    }
    SWITCHES.fetch_add(switched as u64, Ordering::Relaxed);
    switched
}

/// Pointers of a sheaf [`estimate_foreign`] looks at, at most.
pub const FOREIGN_SAMPLE: usize = 16;

/// An estimate of how many of `objects` lie outside `[base, base + span)`
/// (another lane's): every `step`-th pointer is looked at, at most
/// [`FOREIGN_SAMPLE`] of them, and each one outside counts for `step`
/// (the last for what remains). Exact for a sheaf of at most
/// `FOREIGN_SAMPLE` objects, and for one whose objects are all this lane's
/// or all others'; the tick needs only a rate against [`FLOW_PER_SEC`],
/// which a sample gives as well as a scan of every pointer would.
pub fn estimate_foreign(objects: &[*mut u8], base: usize, span: usize) -> u64 {
    let step = objects.len().div_ceil(FOREIGN_SAMPLE).max(1);
    let mut foreign = 0usize;
    for (i, &object) in objects.iter().enumerate().step_by(step) {
        if (object as usize).wrapping_sub(base) >= span {
            // The sampled pointer stands for itself and the ones up to the
            // next sample (fewer at the end).
            foreign = foreign.saturating_add(step.min(objects.len().saturating_sub(i)));
        }
    }
    foreign as u64
}

/// CPUs that keep other lanes' objects now.
pub fn cpus_keeping() -> usize {
    (0..MAX_CPUS)
        .filter_map(super::published)
        .filter(|cache| cache.lane_frees() == LaneFrees::Keep)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_count_is_exact_at_the_extremes_and_close_between() {
        let (base, span) = (0x1000_0000usize, 0x100_0000usize);
        let own = (base + 64) as *mut u8;
        let other = (base + span + 64) as *mut u8;
        for len in [0usize, 1, 7, 16, 17, 100, 256] {
            assert_eq!(estimate_foreign(&vec![own; len], base, span), 0);
            assert_eq!(estimate_foreign(&vec![other; len], base, span), len as u64);
        }
        // Up to FOREIGN_SAMPLE objects every pointer is looked at.
        let mixed: Vec<*mut u8> = (0..16)
            .map(|i| if i % 3 == 0 { other } else { own })
            .collect();
        assert_eq!(estimate_foreign(&mixed, base, span), 6);
        // The first 100 of 256 foreign: off by less than one step (16).
        let mut sheaf = vec![own; 256];
        sheaf[..100].fill(other);
        let estimate = estimate_foreign(&sheaf, base, span);
        assert!(estimate.abs_diff(100) < 16, "estimate {estimate}");
        // Below the base wraps around: outside too.
        assert_eq!(estimate_foreign(&[(base - 8) as *mut u8], base, span), 1);
    }

    /// Flow per 500 ms tick at `per_sec` objects per second.
    fn tick(per_sec: u64) -> u64 {
        per_sec / 2
    }

    fn run(start: Steering, flows: &[u64]) -> Vec<LaneFrees> {
        let mut state = start;
        flows
            .iter()
            .map(|&flow| {
                state = state.decide(tick(flow), 500);
                state.frees
            })
            .collect()
    }

    use LaneFrees::{Keep, Return};

    #[test]
    fn a_small_flow_keeps_returning() {
        let flows = [0, 100, FLOW_PER_SEC - 2, 0, FLOW_PER_SEC / 2];
        assert_eq!(run(Steering::new(), &flows), [Return; 5]);
    }

    #[test]
    fn a_steady_flow_turns_returns_off_at_once_and_keeps_them_off() {
        let flows = [
            FLOW_PER_SEC,
            FLOW_PER_SEC / 3,
            FLOW_PER_SEC,
            FLOW_PER_SEC / 4,
        ];
        assert_eq!(run(Steering::new(), &flows), [Keep; 4]);
    }

    #[test]
    fn a_flow_that_stops_turns_returns_back_on_after_the_wait() {
        let flows = [1_000_000, 0, 0, 0];
        assert_eq!(run(Steering::new(), &flows), [Keep, Keep, Return, Return]);
    }

    #[test]
    fn a_flow_near_the_threshold_switches_less_and_less_often() {
        // Counted at the full flow while returning, at a tenth while
        // keeping (objects used again on the CPU are not seen).
        let mut state = Steering::new();
        let mut switches = Vec::new();
        for tick_number in 0..200u32 {
            let flow = match state.frees {
                Return => FLOW_PER_SEC * 2,
                Keep => FLOW_PER_SEC / 10,
            };
            let next = state.decide(tick(flow), 500);
            if next.frees != state.frees {
                switches.push(tick_number);
            }
            state = next;
        }
        let gaps: Vec<u32> = switches.windows(2).map(|w| w[1] - w[0]).collect();
        // Keeping lasts 2, 4, 8, ... up to 64 ticks; each return, one.
        assert!(gaps.len() >= 12, "{switches:?}");
        let keeps: Vec<u32> = gaps.iter().step_by(2).copied().collect();
        let returns: Vec<u32> = gaps.iter().skip(1).step_by(2).copied().collect();
        assert_eq!(keeps[..7], [2, 4, 8, 16, 32, 64, 64], "{switches:?}");
        assert!(returns.iter().all(|&gap| gap == 1), "{switches:?}");
        assert!(keeps.iter().all(|&gap| gap <= u32::from(CALM_TICKS_MAX)));
    }

    #[test]
    fn a_flow_after_a_settled_return_waits_the_shortest_time_again() {
        let mut state = Steering::new();
        // Raise the wait: keep, return at once, keep again.
        for flow in [FLOW_PER_SEC, 0, 0, 0, 0, FLOW_PER_SEC] {
            state = state.decide(tick(flow), 500);
        }
        assert_eq!(state.frees, Keep);
        assert_eq!(state.calm_needed, 4);
        // Leave it and return for longer than SETTLED_TICKS.
        for _ in 0..4 {
            state = state.decide(0, 500);
        }
        assert_eq!(state.frees, Return);
        for _ in 0..SETTLED_TICKS {
            state = state.decide(0, 500);
        }
        state = state.decide(tick(FLOW_PER_SEC), 500);
        assert_eq!(state.frees, Keep);
        assert_eq!(state.calm_needed, CALM_TICKS_MIN);
    }

    #[test]
    fn the_rate_is_per_second_whatever_the_ticks_spacing() {
        // The same count over ten seconds is a tenth of the rate.
        let state = Steering::new().decide(FLOW_PER_SEC * 5, 10_000);
        assert_eq!(state.frees, Return);
        let state = Steering::new().decide(FLOW_PER_SEC * 5, 1_000);
        assert_eq!(state.frees, Keep);
        // A count at the end of the counter's range does not overflow.
        let state = Steering::new().decide(u64::MAX, 0);
        assert_eq!(state.frees, Keep);
    }
}
