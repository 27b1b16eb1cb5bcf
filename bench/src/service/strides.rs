//! The address order of a producer's packets: how often the next packet
//! of a size lies one step on from the last, the step being the one
//! between the two before it.
//!
//! A hand-off's consumer reads each packet just after the other CPU wrote
//! it. Where the producer's packets of one size come in address order
//! (what a refill from a fresh slab gives, and what sheaves keep: the
//! consumer frees in the order it receives, and the producer pops a full
//! sheaf in reverse), the hardware prefetchers follow the stride and fetch
//! the next packets' lines from the other core ahead of the reads; where
//! the order is scattered, every read waits for its line. With the vCPUs
//! far apart, a fully scattered order cost sheafalloc's steady hand-off
//! about a quarter of its throughput (docs/PERFORMANCE.md, "The
//! hand-off's packets in address order"). A step is a distance, so a
//! run read backwards keeps it too. The share is computed per
//! size (the four sizes interleave at random) over the measured window
//! and reported as `stride_kept` beside each hand-off's result.

use super::packet::SIZES;

/// One producer's count, per packet size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Strides {
    last: [usize; SIZES.len()],
    step: [usize; SIZES.len()],
    /// Packets whose step from the last of their size equals the step
    /// before it.
    pub kept: u64,
    /// Packets with two of their size before them (the ones judged).
    pub judged: u64,
}

impl Strides {
    /// Counts the packet of size `SIZES[size]` at `address`.
    #[inline]
    pub fn see(&mut self, size: usize, address: usize) {
        let last = self.last[size];
        let step = address.abs_diff(last);
        if last != 0 && self.step[size] != 0 {
            self.judged += 1;
            self.kept += u64::from(step == self.step[size]);
        }
        self.step[size] = if last == 0 { 0 } else { step };
        self.last[size] = address;
    }

    /// Adds another producer's counts.
    pub fn merge(&mut self, other: Strides) {
        self.kept += other.kept;
        self.judged += other.judged;
    }

    /// The share of judged packets that kept the stride (NaN if none).
    pub fn share(&self) -> f64 {
        self.kept as f64 / self.judged as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_in_address_order_keeps_its_stride_in_either_direction() {
        let mut s = Strides::default();
        for i in 0..10 {
            s.see(3, 0x10_0000 + i * 2304);
        }
        for i in (0..10).rev() {
            s.see(1, 0x20_0000 + i * 256);
        }
        // Per size, the first two packets set the step; the other 8 keep it.
        assert_eq!((s.kept, s.judged), (16, 16));
        assert_eq!(s.share(), 1.0);
    }

    #[test]
    fn sizes_are_judged_apart_and_a_jump_breaks_the_run() {
        let mut s = Strides::default();
        // Two sizes interleaved, each in order: both runs kept.
        for i in 0..4 {
            s.see(0, 0x1000 + i * 64);
            s.see(2, 0x9000 + i * 1536);
        }
        assert_eq!((s.kept, s.judged), (4, 4));
        // A jump to another slab, then a run there.
        s.see(0, 0x5_0000);
        s.see(0, 0x5_0040);
        s.see(0, 0x5_0080);
        // The jump and the first step after it miss; the next keeps.
        assert_eq!((s.kept, s.judged), (5, 7));
        let mut other = Strides::default();
        other.see(0, 8);
        other.see(0, 16);
        other.see(0, 40);
        s.merge(other);
        assert_eq!((s.kept, s.judged), (5, 8));
        assert!((s.share() - 5.0 / 8.0).abs() < 1e-12);
        assert!(Strides::default().share().is_nan());
    }
}
