//! Series kept in bounded memory while a run goes, for charts of runs of any length.
//!
//! [`BoundedSeries`]: a line's points in at most `buckets` buckets of equally many samples;
//! when the buckets are full, neighbours merge pairwise and each bucket then covers twice as
//! many samples. A bucket keeps its lowest and its highest point (the first of equals), so a
//! spike survives any amount of merging and a series never draws more than `2 x buckets`
//! points. Until the buckets fill, every sample is kept as it came. Cost: a push is O(1),
//! amortised (a merge touches every bucket once and halves their number); memory is 40 bytes
//! a bucket.
//!
//! [`BoundedMeans`]: several columns sampled at the same x (the layers of a stacked chart),
//! in at most `buckets` buckets merged the same way, each keeping the mean x and the mean of
//! each column. Means, not extremes, so that layers stacked from them never cross: the stack
//! of means is the mean of the stacks. A narrow spike is flattened into its bucket's mean;
//! memory is `8 x (columns + 2)` bytes a bucket.
//!
//! [`StateRuns`]: the reclamation state as runs of equal state, at most `max_runs` of them.
//! When a state flaps so often that there are more, neighbouring runs merge pairwise into one
//! run of the worse state (nearer `low`), so what is drawn over-states pressure rather than
//! hiding it. A run of a few states is kept exactly whatever the run's length.

use memtide_model::ReclamationState;

/// One bucket: how many samples it covers and its lowest and highest point.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    samples: u64,
    lo: (f64, f64),
    hi: (f64, f64),
}

impl Bucket {
    fn new(p: (f64, f64)) -> Bucket {
        Bucket {
            samples: 1,
            lo: p,
            hi: p,
        }
    }

    /// Takes in a later point or bucket; ties keep the earlier point.
    fn take(&mut self, samples: u64, lo: (f64, f64), hi: (f64, f64)) {
        self.samples += samples;
        if lo.1 < self.lo.1 {
            self.lo = lo;
        }
        if hi.1 > self.hi.1 {
            self.hi = hi;
        }
    }
}

/// A series of `(x, y)` points, x increasing, kept in at most a fixed number of buckets.
#[derive(Clone, Debug)]
pub struct BoundedSeries {
    capacity: usize,
    /// Samples a full bucket covers.
    width: u64,
    buckets: Vec<Bucket>,
}

impl BoundedSeries {
    /// A series that keeps at most `buckets` buckets (made even, at least 2), so at most
    /// twice as many points.
    pub fn new(buckets: usize) -> BoundedSeries {
        let capacity = buckets.max(2).next_multiple_of(2);
        BoundedSeries {
            capacity,
            width: 1,
            buckets: Vec::new(),
        }
    }

    /// Adds the next point (x after every earlier one).
    pub fn push(&mut self, x: f64, y: f64) {
        let p = (x, y);
        if let Some(last) = self.buckets.last_mut().filter(|b| b.samples < self.width) {
            last.take(1, p, p);
            return;
        }
        if self.buckets.len() == self.capacity {
            self.merge_pairs();
        }
        self.buckets.push(Bucket::new(p));
    }

    /// Halves the buckets, each new one covering two old ones.
    fn merge_pairs(&mut self) {
        let n = self.buckets.len() / 2;
        for i in 0..n {
            let mut b = self.buckets[2 * i];
            let next = self.buckets[2 * i + 1];
            b.take(next.samples, next.lo, next.hi);
            self.buckets[i] = b;
        }
        self.buckets.truncate(n);
        self.width *= 2;
    }

    /// No point was pushed.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The points to draw, in x order: every point pushed while the buckets had room, then
    /// each bucket's lowest and highest (one when they are the same point).
    pub fn points(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::with_capacity(2 * self.buckets.len());
        for b in &self.buckets {
            let (first, second) = if b.hi.0 < b.lo.0 {
                (b.hi, b.lo)
            } else {
                (b.lo, b.hi)
            };
            out.push(first);
            if second.0 != first.0 {
                out.push(second);
            }
        }
        out
    }
}

/// Columns sampled together, kept as means over at most a fixed number of buckets.
#[derive(Clone, Debug)]
pub struct BoundedMeans {
    columns: usize,
    capacity: usize,
    /// Samples a full bucket covers.
    width: u64,
    /// Per bucket: samples, and the sums of x.
    samples: Vec<u64>,
    x_sums: Vec<f64>,
    /// Per bucket, `columns` sums in a row.
    sums: Vec<f64>,
}

impl BoundedMeans {
    /// Means of `columns` columns in at most `buckets` buckets (made even, at least 2).
    pub fn new(columns: usize, buckets: usize) -> BoundedMeans {
        BoundedMeans {
            columns,
            capacity: buckets.max(2).next_multiple_of(2),
            width: 1,
            samples: Vec::new(),
            x_sums: Vec::new(),
            sums: Vec::new(),
        }
    }

    /// Adds the values of every column at `x` (after every earlier x); missing columns count
    /// as zero, extra values are ignored.
    pub fn push(&mut self, x: f64, values: &[f64]) {
        let full = self.samples.last().is_none_or(|&n| n >= self.width);
        if full {
            if self.samples.len() == self.capacity {
                self.merge_pairs();
            }
            self.samples.push(0);
            self.x_sums.push(0.0);
            self.sums.resize(self.sums.len() + self.columns, 0.0);
        }
        let b = self.samples.len() - 1;
        self.samples[b] += 1;
        self.x_sums[b] += x;
        let row = &mut self.sums[b * self.columns..(b + 1) * self.columns];
        for (sum, v) in row.iter_mut().zip(values) {
            *sum += v;
        }
    }

    /// Halves the buckets, each new one covering two old ones.
    fn merge_pairs(&mut self) {
        let (n, c) = (self.samples.len() / 2, self.columns);
        for i in 0..n {
            self.samples[i] = self.samples[2 * i] + self.samples[2 * i + 1];
            self.x_sums[i] = self.x_sums[2 * i] + self.x_sums[2 * i + 1];
            for k in 0..c {
                self.sums[i * c + k] = self.sums[2 * i * c + k] + self.sums[(2 * i + 1) * c + k];
            }
        }
        self.samples.truncate(n);
        self.x_sums.truncate(n);
        self.sums.truncate(n * c);
        self.width *= 2;
    }

    /// Each bucket's mean x, in order.
    pub fn x(&self) -> Vec<f64> {
        self.x_sums
            .iter()
            .zip(&self.samples)
            .map(|(x, &n)| x / n as f64)
            .collect()
    }

    /// Each bucket's mean of column `k`, in order.
    pub fn column(&self, k: usize) -> Vec<f64> {
        self.samples
            .iter()
            .enumerate()
            .map(|(b, &n)| {
                self.sums
                    .get(b * self.columns + k)
                    .map_or(0.0, |s| s / n as f64)
            })
            .collect()
    }

    /// Column `k` as points at each bucket's mean x.
    pub fn points(&self, k: usize) -> Vec<(f64, f64)> {
        self.x().into_iter().zip(self.column(k)).collect()
    }
}

/// The reclamation state over time as runs of equal state, bounded in number.
#[derive(Clone, Debug)]
pub struct StateRuns {
    max_runs: usize,
    /// `(start, state)` of each run, starts increasing.
    runs: Vec<(f64, ReclamationState)>,
    /// Where the last run ends.
    end: f64,
}

impl StateRuns {
    /// At most `max_runs` runs (at least 2).
    pub fn new(max_runs: usize) -> StateRuns {
        StateRuns {
            max_runs: max_runs.max(2),
            runs: Vec::new(),
            end: 0.0,
        }
    }

    /// The state during `[x, x + length)`, after every earlier one.
    pub fn push(&mut self, x: f64, length: f64, state: ReclamationState) {
        self.end = x + length;
        if self.runs.last().is_some_and(|r| r.1 == state) {
            return;
        }
        self.runs.push((x, state));
        if self.runs.len() > self.max_runs {
            self.merge_pairs();
        }
    }

    /// Neighbouring runs merged pairwise into the worse state, then equal neighbours joined.
    fn merge_pairs(&mut self) {
        let merged: Vec<(f64, ReclamationState)> = self
            .runs
            .chunks(2)
            .map(|pair| {
                (
                    pair[0].0,
                    pair.iter().map(|r| r.1).max().unwrap_or(pair[0].1),
                )
            })
            .collect();
        self.runs.clear();
        for run in merged {
            if self.runs.last().is_none_or(|r| r.1 != run.1) {
                self.runs.push(run);
            }
        }
    }

    /// `(start, state)` of each run; each lasts until the next starts, the last until
    /// [`StateRuns::end`].
    pub fn runs(&self) -> &[(f64, ReclamationState)] {
        &self.runs
    }

    /// Where the last run ends.
    pub fn end(&self) -> f64 {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReclamationState::*;

    #[test]
    fn a_short_series_keeps_every_point() {
        let mut s = BoundedSeries::new(8);
        for i in 0..8 {
            s.push(f64::from(i), f64::from(i % 3));
        }
        let expected: Vec<(f64, f64)> = (0..8).map(|i| (f64::from(i), f64::from(i % 3))).collect();
        assert_eq!(s.points(), expected);
    }

    #[test]
    fn a_series_keeps_at_most_twice_its_buckets_whatever_it_is_fed() {
        for n in [1_000u32, 10_000, 1_000_000, 3_000_000] {
            let mut s = BoundedSeries::new(512);
            for i in 0..n {
                let x = f64::from(i);
                s.push(x, (x * 0.37).sin());
            }
            let points = s.points();
            assert!(points.len() <= 1024, "{n} samples: {} points", points.len());
            assert!(s.buckets.len() <= 512);
            assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "x order kept");
        }
        // Flat data: one point a bucket.
        let mut flat = BoundedSeries::new(512);
        for i in 0..100_000 {
            flat.push(f64::from(i), 1.0);
        }
        assert!(flat.points().len() <= 512);
    }

    #[test]
    fn a_single_spike_survives_every_merge() {
        let mut s = BoundedSeries::new(16);
        for i in 0..100_000 {
            s.push(f64::from(i), if i == 23_456 { 99.0 } else { 1.0 });
        }
        assert!(s.points().contains(&(23_456.0, 99.0)), "{:?}", s.points());
        assert!(s.points().iter().all(|p| p.1 == 1.0 || p.0 == 23_456.0));
    }

    #[test]
    fn buckets_cover_equal_numbers_of_samples_after_merging() {
        let mut s = BoundedSeries::new(4);
        for i in 0..16 {
            s.push(f64::from(i), f64::from(i));
        }
        // 16 samples in 4 buckets of 4: each keeps its first (lowest) and last (highest).
        assert_eq!(
            s.points(),
            vec![
                (0.0, 0.0),
                (3.0, 3.0),
                (4.0, 4.0),
                (7.0, 7.0),
                (8.0, 8.0),
                (11.0, 11.0),
                (12.0, 12.0),
                (15.0, 15.0)
            ]
        );
    }

    #[test]
    fn means_keep_every_sample_until_the_buckets_fill() {
        let mut m = BoundedMeans::new(2, 8);
        for i in 0..8 {
            m.push(f64::from(i), &[f64::from(i), 1.0]);
        }
        assert_eq!(m.x(), (0..8).map(f64::from).collect::<Vec<_>>());
        assert_eq!(m.column(0), m.x());
        assert_eq!(m.column(1), vec![1.0; 8]);
    }

    #[test]
    fn means_stay_bounded_and_average_each_bucket() {
        let mut m = BoundedMeans::new(3, 64);
        for i in 0..1_000_000u32 {
            let x = f64::from(i);
            m.push(x, &[1.0, x % 2.0, 5.0]);
        }
        assert!(m.x().len() <= 64, "{} buckets", m.x().len());
        assert!(m.column(0).iter().all(|&v| v == 1.0));
        // Alternating 0 and 1 averages to one half in every bucket of an even width.
        assert!(
            m.column(1).iter().all(|&v| (v - 0.5).abs() < 1e-9),
            "{:?}",
            m.column(1)
        );
        assert!(m.x().windows(2).all(|w| w[0] < w[1]));
        assert!(m.points(2).iter().all(|p| p.1 == 5.0));
    }

    #[test]
    fn state_runs_keep_few_changes_exactly() {
        let mut r = StateRuns::new(8);
        for t in 0..1000 {
            let state = if (300..400).contains(&t) { Soft } else { High };
            r.push(f64::from(t), 1.0, state);
        }
        assert_eq!(r.runs(), &[(0.0, High), (300.0, Soft), (400.0, High)]);
        assert_eq!(r.end(), 1000.0);
    }

    #[test]
    fn flapping_states_stay_bounded_and_show_the_worse_state() {
        let mut r = StateRuns::new(64);
        for t in 0..100_000 {
            let state = match t % 4 {
                0 | 1 => High,
                2 => Soft,
                _ => Low,
            };
            r.push(f64::from(t), 1.0, state);
        }
        assert!(r.runs().len() <= 64, "{} runs", r.runs().len());
        assert!(r.runs().iter().any(|run| run.1 == Low));
        assert!(r
            .runs()
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 != w[1].1));
    }
}
