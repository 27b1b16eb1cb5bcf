//! The auto-tuner: each cache's sheaf capacity, adjusted from what the
//! cache's own counters say, within bounds, without an operator.
//!
//! # What it watches
//!
//! Twice a second (the engine's periodic tick, run from an allocation
//! slow path: no thread of its own) it takes, for every cache, the change
//! since the last tick of:
//!
//! * operations (allocations + frees, folded from every live thread) and
//!   slow paths (allocations and frees that missed the fast path): their
//!   ratio is the **slow-path share**;
//! * barn exchanges and how many of them missed (the barn had no full
//!   sheaf, or no room for one, so the thread went to the slabs): the
//!   **barn miss share**;
//! * exchanges per second.
//!
//! # What it decides ([`decide`])
//!
//! * **Raise** (×2) when the cache is busy (at least [`BUSY_OPS_PER_SEC`]
//!   operations and [`BUSY_SLOW_PATHS_PER_SEC`] slow paths a second) and,
//!   on two ticks in a row, the slow-path share is at least
//!   [`RAISE_SLOW_SHARE_PER_10K`] in 10,000, or the barn miss share at
//!   least [`RAISE_MISS_SHARE_PERMILLE`] ‰, or exchanges reach
//!   [`RAISE_EXCHANGES_PER_SEC`]: bursts larger than a sheaf, or a hand-off
//!   that keeps more objects in flight than the sheaves and the barn hold.
//!   A slow path costs about a hundred fast ones (a spare swap re-arms
//!   slots, a barn trade crosses cores, a refill or flush walks slab
//!   lists): measured on the same-thread churn of 256 × 256 B, the 0.39 %
//!   of operations that swapped sheaves at capacity 128 cost a quarter of
//!   the throughput that capacity 256 (no swaps) has. So a share of a
//!   tenth of a percent is already a tenth of the cache's time.
//! * **Lower** (÷2) when the cache has been idle (under
//!   [`IDLE_OPS_PER_SEC`]) for [`LOWER_IDLE_TICKS`] ticks: memory held for
//!   nothing. A busy cache is not lowered because it is quiet: it is quiet
//!   *because* of its capacity, and halving it would only bring the slow
//!   paths back (and make the capacity swing).
//! * **Bounds**: never below the class's default capacity, never above
//!   [`crate::cache::max_sheaf_capacity`] (1024 objects and 512 KiB per
//!   sheaf, so a thread pins at most 1 MiB in one cache).
//! * **Hysteresis**: the dead band between the raise and lower thresholds;
//!   [`COOLDOWN_TICKS`] ticks without a change after each change; a change
//!   against the previous one's direction makes the next cooldown four
//!   times longer (up to [`COOLDOWN_MAX_TICKS`]), which damps oscillation.
//!
//! A cache the API or `SHEAFALLOC_CAPACITY` pinned is left alone until it
//! is handed back (`"auto"`); `SHEAFALLOC_AUTOTUNE=off` turns the tuner off
//! for the whole process.

/// How a cache's capacity is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Tuning {
    /// The auto-tuner adjusts it.
    #[default]
    Auto,
    /// Set by hand (API or `SHEAFALLOC_CAPACITY`); the tuner leaves it.
    Pinned,
    /// The tuner is off for the process (`SHEAFALLOC_AUTOTUNE=off`).
    Off,
}

impl Tuning {
    /// The name the API uses.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Pinned => "pinned",
            Self::Off => "off",
        }
    }
}

/// Why the tuner changed a capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Reason {
    /// No decision yet.
    #[default]
    None,
    /// Raised: the slow-path share (signal, in 10,000) was high.
    SlowPathShare,
    /// Raised: the barn missed this share (signal, ‰) of exchanges.
    BarnMisses,
    /// Raised: exchanges per second (signal) were high.
    ExchangeRate,
    /// Lowered: the cache was idle.
    Idle,
}

impl Reason {
    const ALL: [Reason; 5] = [
        Reason::None,
        Reason::SlowPathShare,
        Reason::BarnMisses,
        Reason::ExchangeRate,
        Reason::Idle,
    ];

    fn code(self) -> u64 {
        self as u64
    }

    fn from_code(code: u64) -> Self {
        Self::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(Reason::None)
    }
}

/// The change of a cache's counters over one tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Milliseconds the sample covers.
    pub elapsed_ms: u64,
    /// Allocations and frees.
    pub operations: u64,
    /// Allocations and frees that took a slow path.
    pub slow_paths: u64,
    /// Barn exchanges that found a sheaf (or room for one).
    pub barn_hits: u64,
    /// Barn exchanges that did not (a slab refill or flush followed).
    pub barn_misses: u64,
}

/// The capacities the tuner may choose for a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Lowest (the class's default capacity).
    pub min: u32,
    /// Highest (the byte-bounded maximum of the class).
    pub max: u32,
}

/// A capacity change and its cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Decision {
    /// Capacity before.
    pub from: u32,
    /// Capacity after.
    pub to: u32,
    /// Why.
    pub reason: Reason,
    /// The signal that moved it: a share in permille, or a rate per second
    /// (see [`Reason`]).
    pub signal: u32,
}

impl Decision {
    /// Packs the decision into one word (for an atomic): `from` and `to`
    /// in 12 bits each (every capacity up to
    /// [`SHEAF_CAPACITY_MAX`](crate::sheaf::SHEAF_CAPACITY_MAX) fits), the
    /// reason in 4, the signal in the 32 above.
    pub fn pack(self) -> u64 {
        u64::from(self.from & CAPACITY_MASK)
            | u64::from(self.to & CAPACITY_MASK) << CAPACITY_BITS
            | (self.reason.code() & 0xF) << REASON_SHIFT
            | u64::from(self.signal) << SIGNAL_SHIFT
    }

    /// The decision [`pack`](Self::pack) packed.
    pub fn unpack(word: u64) -> Self {
        Self {
            from: (word & u64::from(CAPACITY_MASK)) as u32,
            to: (word >> CAPACITY_BITS & u64::from(CAPACITY_MASK)) as u32,
            reason: Reason::from_code(word >> REASON_SHIFT & 0xF),
            signal: (word >> SIGNAL_SHIFT) as u32,
        }
    }
}

/// Bits of a capacity in a packed [`Decision`].
const CAPACITY_BITS: u32 = 12;
const CAPACITY_MASK: u32 = (1 << CAPACITY_BITS) - 1;
const REASON_SHIFT: u32 = 2 * CAPACITY_BITS;
const SIGNAL_SHIFT: u32 = REASON_SHIFT + 4;
// Every capacity a cache may have survives packing (1024 did not while a
// capacity had 10 bits: a raise to 1024 read back as "to 0"), and the
// signal keeps all 32 of its bits.
const _: () = assert!(crate::sheaf::SHEAF_CAPACITY_MAX <= CAPACITY_MASK);
const _: () = assert!(SIGNAL_SHIFT + 32 <= 64);

/// What the tuner remembers of one cache between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunerState {
    raise_streak: u8,
    idle_streak: u16,
    cooldown: u16,
    last_cooldown: u16,
    /// +1 after a raise, -1 after a lower, 0 before any change.
    last_direction: i8,
}

impl TunerState {
    /// No history.
    pub const fn new() -> Self {
        Self {
            raise_streak: 0,
            idle_streak: 0,
            cooldown: 0,
            last_cooldown: 0,
            last_direction: 0,
        }
    }
}

/// Operations per second below which a cache gives no signal.
pub const BUSY_OPS_PER_SEC: u64 = 10_000;
/// Slow paths per second below which raising could not save anything
/// that matters (2,000 slow paths cost about a millisecond a second).
pub const BUSY_SLOW_PATHS_PER_SEC: u64 = 2_000;
/// Operations per second below which a cache counts as idle.
pub const IDLE_OPS_PER_SEC: u64 = 100;
/// Slow-path share, in 10,000 operations, from which a busy cache is
/// raised (0.1 %: with a slow path at about a hundred fast ones, a tenth of
/// the cache's time).
pub const RAISE_SLOW_SHARE_PER_10K: u64 = 10;
/// Barn miss share (‰) from which a busy cache is raised.
pub const RAISE_MISS_SHARE_PERMILLE: u64 = 250;
/// Exchanges per second from which a busy cache is raised.
pub const RAISE_EXCHANGES_PER_SEC: u64 = 100_000;
/// Ticks in a row a raise condition must hold.
pub const RAISE_TICKS: u8 = 2;
/// Ticks in a row a cache must be idle before it is lowered.
pub const LOWER_IDLE_TICKS: u16 = 30;
/// Ticks without a change after a change.
pub const COOLDOWN_TICKS: u16 = 3;
/// Longest cooldown, after repeated reversals.
pub const COOLDOWN_MAX_TICKS: u16 = 120;

fn share(part: u64, whole: u64, scale: u64) -> u64 {
    part.saturating_mul(scale).checked_div(whole).unwrap_or(0)
}

fn per_second(count: u64, elapsed_ms: u64) -> u64 {
    count
        .saturating_mul(1000)
        .checked_div(elapsed_ms.max(1))
        .unwrap_or(0)
}

fn saturate(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The tuner's decision for a cache now at `capacity`, given the last
/// tick's `sample`; updates `state`. `None`: keep the capacity.
pub fn decide(
    state: &mut TunerState,
    capacity: u32,
    sample: Sample,
    bounds: Bounds,
) -> Option<Decision> {
    let ops_per_sec = per_second(sample.operations, sample.elapsed_ms);
    let exchanges = sample.barn_hits.saturating_add(sample.barn_misses);
    let slow_share = share(sample.slow_paths, sample.operations, 10_000);
    let miss_share = share(sample.barn_misses, exchanges, 1000);
    let exchange_rate = per_second(exchanges, sample.elapsed_ms);
    let busy = ops_per_sec >= BUSY_OPS_PER_SEC
        && per_second(sample.slow_paths, sample.elapsed_ms) >= BUSY_SLOW_PATHS_PER_SEC;

    let raise = if !busy {
        None
    } else if miss_share >= RAISE_MISS_SHARE_PERMILLE && exchanges >= 8 {
        Some((Reason::BarnMisses, miss_share))
    } else if slow_share >= RAISE_SLOW_SHARE_PER_10K {
        Some((Reason::SlowPathShare, slow_share))
    } else if exchange_rate >= RAISE_EXCHANGES_PER_SEC {
        Some((Reason::ExchangeRate, exchange_rate))
    } else {
        None
    };
    let idle = ops_per_sec < IDLE_OPS_PER_SEC;

    state.raise_streak = if raise.is_some() {
        state.raise_streak.saturating_add(1)
    } else {
        0
    };
    state.idle_streak = if idle {
        state.idle_streak.saturating_add(1)
    } else {
        0
    };
    if state.cooldown > 0 {
        state.cooldown = state.cooldown.saturating_sub(1);
        return None;
    }

    let (to, reason, signal, direction) = match raise {
        Some((reason, signal)) if state.raise_streak >= RAISE_TICKS && capacity < bounds.max => (
            capacity.saturating_mul(2).min(bounds.max),
            reason,
            signal,
            1,
        ),
        _ if capacity > bounds.min && state.idle_streak >= LOWER_IDLE_TICKS => {
            ((capacity / 2).max(bounds.min), Reason::Idle, 0, -1)
        }
        _ => return None,
    };
    if to == capacity {
        return None;
    }
    let reversed = state.last_direction != 0 && state.last_direction != direction;
    state.cooldown = if reversed {
        state
            .last_cooldown
            .max(COOLDOWN_TICKS)
            .saturating_mul(4)
            .min(COOLDOWN_MAX_TICKS)
    } else {
        COOLDOWN_TICKS
    };
    state.last_cooldown = state.cooldown;
    state.last_direction = direction;
    state.raise_streak = 0;
    state.idle_streak = 0;
    Some(Decision {
        from: capacity,
        to,
        reason,
        signal: saturate(signal),
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds { min: 32, max: 227 };

    /// A second of a cache doing `ops` operations, `slow` of them on a slow
    /// path, with `hits` and `misses` barn exchanges.
    fn second(ops: u64, slow: u64, hits: u64, misses: u64) -> Sample {
        Sample {
            elapsed_ms: 1000,
            operations: ops,
            slow_paths: slow,
            barn_hits: hits,
            barn_misses: misses,
        }
    }

    /// Runs the decision over a recorded sequence, applying each change;
    /// returns the capacities after every tick.
    fn replay(start: u32, samples: &[Sample]) -> (Vec<u32>, Vec<Decision>) {
        let mut state = TunerState::default();
        let mut capacity = start;
        let mut trace = Vec::new();
        let mut decisions = Vec::new();
        for &sample in samples {
            if let Some(decision) = decide(&mut state, capacity, sample, BOUNDS) {
                assert_eq!(decision.from, capacity);
                capacity = decision.to;
                decisions.push(decision);
            }
            trace.push(capacity);
        }
        (trace, decisions)
    }

    #[test]
    fn bursty_barn_misses_raise_after_two_ticks() {
        // A third of the exchanges miss the barn (the bursty hand-off).
        let busy = second(2_000_000, 60_000, 20_000, 10_000);
        let (trace, decisions) = replay(32, &[busy; 3]);
        assert_eq!(
            trace,
            [32, 64, 64],
            "raised on the second tick, then cooldown"
        );
        assert_eq!(decisions[0].reason, Reason::BarnMisses);
        assert_eq!(decisions[0].signal, 333);
    }

    #[test]
    fn a_high_slow_path_share_raises_step_by_step_up_to_the_byte_bound() {
        // Bursts larger than both sheaves: every burst takes slow paths.
        let bursts = second(1_000_000, 20_000, 19_000, 1_000);
        let (trace, decisions) = replay(32, &[bursts; 40]);
        assert_eq!(*trace.last().unwrap(), 227, "stops at the byte bound");
        assert!(decisions.iter().all(|d| d.reason == Reason::SlowPathShare));
        assert_eq!(decisions[0].signal, 200, "2 % = 200 in 10,000");
        let steps: Vec<u32> = decisions.iter().map(|d| d.to).collect();
        assert_eq!(steps, [64, 128, 227]);
        assert!(trace.iter().all(|&c| c <= BOUNDS.max));
    }

    #[test]
    fn spare_swaps_at_four_in_a_thousand_operations_raise() {
        // Recorded: same-thread churn, 2 threads, bursts of 256 × 256 B,
        // per-CPU sheaves at capacity 128 (the tuner's previous stop): 270
        // million operations a second, 1.05 million spare swaps (0.39 %),
        // no barn trade. Capacity 256 runs it without a swap, 1.3× faster.
        let churn = second(270_000_000, 1_050_000, 0, 0);
        let (trace, decisions) = replay(128, &[churn; 3]);
        assert_eq!(trace, [128, 227, 227], "raised to the bound, then held");
        assert_eq!(decisions[0].reason, Reason::SlowPathShare);
        assert_eq!(decisions[0].signal, 38, "0.39 % = 38 in 10,000");
    }

    #[test]
    fn a_steady_cheap_cache_holds() {
        // 1 slow path in 2,000 operations, barn always hits, 2,000
        // exchanges a second: under every raise threshold.
        let steady = second(4_000_000, 2_000, 2_000, 0);
        let (trace, decisions) = replay(64, &[steady; 100]);
        assert!(decisions.is_empty(), "{decisions:?}");
        assert!(trace.iter().all(|&c| c == 64));
    }

    #[test]
    fn little_work_gives_no_signal() {
        // A high share, but too few operations or slow paths to matter.
        let trickle = second(500, 400, 100, 300);
        let sparse = second(100_000, 1_000, 900, 100);
        let (trace, _) = replay(32, &[trickle, sparse, trickle, sparse, trickle, sparse]);
        assert!(trace.iter().all(|&c| c == 32));
    }

    #[test]
    fn idle_caches_come_back_down_to_the_default_and_no_lower() {
        let mut samples = vec![second(0, 0, 0, 0); 200];
        samples.insert(0, second(50, 0, 0, 0));
        let (trace, decisions) = replay(227, &samples);
        assert_eq!(*trace.last().unwrap(), BOUNDS.min);
        assert!(trace.iter().all(|&c| c >= BOUNDS.min));
        assert!(decisions.iter().all(|d| d.reason == Reason::Idle));
        assert!(trace[..LOWER_IDLE_TICKS as usize - 1]
            .iter()
            .all(|&c| c == 227));
        // A busy cache with no slow paths at all is not lowered.
        let (busy, none) = replay(227, &[second(5_000_000, 0, 0, 0); 200]);
        assert!(none.is_empty() && busy.iter().all(|&c| c == 227));
    }

    #[test]
    fn oscillation_is_damped() {
        // A load that flips between bursty and idle phases.
        let bursty = second(1_000_000, 50_000, 40_000, 10_000);
        let idle = second(0, 0, 0, 0);
        let mut samples = Vec::new();
        for _ in 0..6 {
            samples.extend([bursty; 5]);
            samples.extend([idle; 35]);
        }
        let (_, decisions) = replay(32, &samples);
        let reversals = decisions
            .windows(2)
            .filter(|pair| (pair[0].to > pair[0].from) != (pair[1].to > pair[1].from))
            .count();
        // Undamped, every phase would change the capacity twice (12
        // reversals); the growing cooldown lets fewer through.
        assert!(reversals <= 6, "{reversals} reversals: {decisions:?}");
        assert!(!decisions.is_empty());
    }

    #[test]
    fn decisions_survive_packing() {
        let decision = Decision {
            from: 32,
            to: 64,
            reason: Reason::BarnMisses,
            signal: 333,
        };
        assert_eq!(Decision::unpack(decision.pack()), decision);
        let big = Decision {
            from: 256,
            to: 128,
            reason: Reason::ExchangeRate,
            signal: 4_000_000,
        };
        assert_eq!(Decision::unpack(big.pack()), big);
        let top = crate::sheaf::SHEAF_CAPACITY_MAX;
        let to_the_top = Decision {
            from: top / 2,
            to: top,
            reason: Reason::SlowPathShare,
            signal: u32::MAX,
        };
        assert_eq!(Decision::unpack(to_the_top.pack()), to_the_top);
        let from_the_top = Decision {
            from: top,
            to: top / 2,
            reason: Reason::Idle,
            signal: 0,
        };
        assert_eq!(Decision::unpack(from_the_top.pack()), from_the_top);
    }
}
