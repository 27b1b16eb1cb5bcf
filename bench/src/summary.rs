//! Summary statistics of the per-round samples: median, min, max, spread.

/// The samples of one allocator on one workload, one per round.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    values: Vec<f64>,
}

impl Samples {
    /// Records one round's value.
    pub fn push(&mut self, value: f64) {
        self.values.push(value);
    }

    /// The values in round order.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The median (mean of the middle two for an even count; NaN if empty).
    pub fn median(&self) -> f64 {
        median(&self.values)
    }

    /// The smallest value.
    pub fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// `(max - min) / median`, as a fraction.
    pub fn spread(&self) -> f64 {
        (self.max() - self.min()) / self.median()
    }
}

/// The median of `values` (NaN if empty).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// The two-sided exact sign test of paired comparisons: if each of
/// `wins + losses` pairs were a fair coin (ties left out by the caller),
/// the probability of a split at least as uneven as `wins` against
/// `losses`. 1 with no pairs.
pub fn sign_test_p(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    let fewer = wins.min(losses);
    // P(X <= fewer) for X ~ Binomial(n, 1/2), summed term by term:
    // C(n, k + 1) = C(n, k) (n - k) / (k + 1).
    let mut term = 0.5f64.powi(n as i32);
    let mut tail = 0.0;
    for k in 0..=fewer {
        tail += term;
        term *= (n - k) as f64 / (k + 1) as f64;
    }
    (2.0 * tail).min(1.0)
}

/// What paired comparisons of A against B say, by [`sign_test_p`] at the
/// 5 % level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairedVerdict {
    /// A was better in so many pairs that chance is unlikely (p < 0.05).
    Better,
    /// A was worse in so many pairs that chance is unlikely.
    Worse,
    /// The split is one chance would give (or there are no pairs).
    WithinNoise,
}

/// The verdict of paired `ratios` of A to B, each above 1 when A was
/// better; a ratio of exactly 1 is a tie and counts for neither side.
/// Returns it with the wins, the losses and the sign test's p.
pub fn paired_verdict(ratios: &[f64]) -> (PairedVerdict, usize, usize, f64) {
    let wins = ratios.iter().filter(|&&r| r > 1.0).count();
    let losses = ratios.iter().filter(|&&r| r < 1.0).count();
    let p = sign_test_p(wins, losses);
    let verdict = if p >= 0.05 {
        PairedVerdict::WithinNoise
    } else if wins > losses {
        PairedVerdict::Better
    } else {
        PairedVerdict::Worse
    };
    (verdict, wins, losses, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_test_matches_the_binomial_tails() {
        // 9 of 9 one way: 2 / 512.
        assert!((sign_test_p(9, 0) - 2.0 / 512.0).abs() < 1e-12);
        // 8 of 9: 2 (1 + 9) / 512.
        assert!((sign_test_p(1, 8) - 20.0 / 512.0).abs() < 1e-12);
        // 7 of 9: 2 (1 + 9 + 36) / 512, not significant.
        assert!((sign_test_p(7, 2) - 92.0 / 512.0).abs() < 1e-12);
        // An even split, and no pairs at all, say nothing.
        assert_eq!(sign_test_p(5, 5), 1.0);
        assert_eq!(sign_test_p(0, 0), 1.0);
    }

    #[test]
    fn a_verdict_needs_an_uneven_split_and_ignores_ties() {
        // Eight losses and a tie: 8 of 8, p = 2 / 256.
        let worse = [0.91, 0.95, 0.97, 0.99, 0.96, 0.93, 0.98, 0.94, 1.0];
        let (verdict, wins, losses, p) = paired_verdict(&worse);
        assert_eq!((verdict, wins, losses), (PairedVerdict::Worse, 0, 8));
        assert!((p - 2.0 / 256.0).abs() < 1e-12);
        let better: Vec<f64> = worse.iter().map(|r| 1.0 / r).collect();
        assert_eq!(paired_verdict(&better).0, PairedVerdict::Better);
        // Six to three is what chance gives a third of the time.
        let mixed = [0.9, 0.95, 0.97, 0.99, 0.96, 0.93, 1.02, 1.05, 1.01];
        assert_eq!(paired_verdict(&mixed).0, PairedVerdict::WithinNoise);
        assert_eq!(paired_verdict(&[]).0, PairedVerdict::WithinNoise);
    }
}
