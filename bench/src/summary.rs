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
