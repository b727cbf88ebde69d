//! Exact LRU miss-ratio curves in one pass (Mattson et al., 1970): a request's stack distance — the distinct blocks asked for since its block's previous request — decides at once whether it hits in an LRU cache of every size, so one histogram of distances is the miss ratio at all sizes.
//!
//! **Stack distances** ([`StackDistances`]) are counted with an order-statistic structure: a
//! mark at each block's most recent request time (a bitset, with a Fenwick tree over its
//! words); the distance of a request to block b is the number of marks after b's previous
//! request. O(log n) per request for n requests kept, memory O(distinct blocks): when the
//! times run out the marks are renumbered densely (O(u log u) for u distinct blocks, amortised
//! over at least u requests).
//!
//! **The curve** ([`MissRatioCurve`]): a request with distance d hits in an LRU cache of more
//! than d blocks; a first request (no distance) misses at every size. The miss ratio at size c
//! is `1 - (requests with d < c) / requests`. Counts are weights, so a sampled curve (SHARDS)
//! is one too.

use rustc_hash::FxHashMap;

/// The stack distances of a request stream, one request at a time.
///
/// The marks are a bitset, one bit per position, with a Fenwick tree over the bitset's 64-bit
/// words: a count of marks is the tree's prefix over whole words plus a popcount within one.
/// The tree is 64 times smaller than one over positions, so it stays in cache.
#[derive(Clone, Debug, Default)]
pub struct StackDistances {
    /// Each block's most recent request, as a position.
    last: FxHashMap<u64, u32>,
    /// One bit per position: set at each block's most recent request.
    bits: Vec<u64>,
    /// Fenwick tree of the marks in each word of `bits`.
    tree: Vec<u32>,
    /// The next request's position.
    now: u32,
}

impl StackDistances {
    pub fn new() -> StackDistances {
        StackDistances::default()
    }

    /// Requests `block`: its stack distance (0: the block asked for last; `None`: first
    /// request of the block).
    #[inline]
    pub fn access(&mut self, block: u64) -> Option<u64> {
        if self.now as usize >= self.bits.len() * 64 {
            self.compact();
        }
        let now = self.now;
        self.now += 1;
        let distinct = self.last.len() as u64;
        match self.last.insert(block, now) {
            Some(t) => {
                // Marks at or before t, t's own included: those not after it.
                let not_after = u64::from(self.prefix(t));
                self.clear(t);
                self.set(now);
                Some(distinct - not_after)
            }
            None => {
                self.set(now);
                None
            }
        }
    }

    /// Forgets `block` (a sampled set dropping it); true if it was known.
    pub fn remove(&mut self, block: u64) -> bool {
        match self.last.remove(&block) {
            Some(t) => {
                self.clear(t);
                true
            }
            None => false,
        }
    }

    /// Distinct blocks seen and not removed.
    pub fn distinct(&self) -> usize {
        self.last.len()
    }

    /// Marks at positions `0..=t`.
    #[inline]
    fn prefix(&self, t: u32) -> u32 {
        let (word, bit) = (t as usize / 64, t % 64);
        // Whole words before `word`.
        let mut i = word;
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i - 1];
            i &= i - 1;
        }
        let mask = if bit == 63 {
            u64::MAX
        } else {
            (1u64 << (bit + 1)) - 1
        };
        sum + (self.bits[word] & mask).count_ones()
    }

    #[inline]
    fn set(&mut self, t: u32) {
        self.bits[t as usize / 64] |= 1 << (t % 64);
        self.add_word(t as usize / 64, 1);
    }

    #[inline]
    fn clear(&mut self, t: u32) {
        self.bits[t as usize / 64] &= !(1 << (t % 64));
        self.add_word(t as usize / 64, -1);
    }

    #[inline]
    fn add_word(&mut self, word: usize, delta: i32) {
        let mut i = word + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Renumbers the marks densely in time order, with room for as many positions again (at
    /// least 4096).
    fn compact(&mut self) {
        let mut order: Vec<(u32, u64)> = self.last.iter().map(|(&b, &t)| (t, b)).collect();
        order.sort_unstable();
        let words = (order.len() * 2).max(4096).div_ceil(64);
        self.bits = vec![0; words];
        self.tree = vec![0; words];
        for (i, &(_, b)) in order.iter().enumerate() {
            self.last.insert(b, i as u32);
            self.bits[i / 64] |= 1 << (i % 64);
        }
        // Build in O(words): each node adds itself to its parent.
        for (w, bits) in self.bits.iter().enumerate() {
            self.tree[w] = bits.count_ones();
        }
        for i in 1..=words {
            let parent = i + (i & i.wrapping_neg());
            if parent <= words {
                let v = self.tree[i - 1];
                self.tree[parent - 1] += v;
            }
        }
        self.now = order.len() as u32;
    }
}

/// Requests by stack distance, and the miss ratio at every cache size from them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MissRatioCurve {
    /// Weight of requests at each distance (`by_distance[d]`: distance d).
    by_distance: Vec<f64>,
    /// Weight of first requests (misses at every size).
    cold: f64,
}

impl MissRatioCurve {
    pub fn new() -> MissRatioCurve {
        MissRatioCurve::default()
    }

    /// Counts one request of distance `d` (`None`: a first request) with weight `w`.
    pub fn add(&mut self, d: Option<u64>, w: f64) {
        match d {
            None => self.cold += w,
            Some(d) => {
                let d = d as usize;
                if d >= self.by_distance.len() {
                    self.by_distance.resize(d + 1, 0.0);
                }
                self.by_distance[d] += w;
            }
        }
    }

    /// The curve of a whole stream, exactly.
    pub fn exact(blocks: impl IntoIterator<Item = u64>) -> MissRatioCurve {
        let mut sd = StackDistances::new();
        let mut curve = MissRatioCurve::new();
        for b in blocks {
            curve.add(sd.access(b), 1.0);
        }
        curve
    }

    /// All requests' weight.
    pub fn requests(&self) -> f64 {
        self.cold + self.by_distance.iter().sum::<f64>()
    }

    /// First requests' weight.
    pub fn cold(&self) -> f64 {
        self.cold
    }

    /// The largest cache size that still gains hits (beyond it the curve is flat).
    pub fn max_size(&self) -> u64 {
        self.by_distance.len() as u64
    }

    /// The weight of requests that hit in an LRU cache of `size` blocks (O(size): for many
    /// sizes, [`MissRatioCurve::hits_by_size`]).
    pub fn hits(&self, size: u64) -> f64 {
        self.by_distance
            .iter()
            .take(size.min(self.by_distance.len() as u64) as usize)
            .sum()
    }

    /// The miss ratio of an LRU cache of `size` blocks (1 for an empty stream).
    pub fn miss_ratio(&self, size: u64) -> f64 {
        let total = self.requests();
        if total <= 0.0 {
            return 1.0;
        }
        (1.0 - self.hits(size) / total).clamp(0.0, 1.0)
    }

    /// The hits at every size from 0 to `max_size()`, in one pass (read with [`at_size`]).
    pub fn hits_by_size(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.by_distance.len() + 1);
        let mut hits = 0.0;
        out.push(0.0);
        for w in &self.by_distance {
            hits += w;
            out.push(hits);
        }
        out
    }

    /// The miss ratio at every size from 0 to `max_size()`, in one pass (read with
    /// [`at_size`]).
    pub fn miss_ratios(&self) -> Vec<f64> {
        let total = self.requests();
        self.hits_by_size()
            .into_iter()
            .map(|h| {
                if total > 0.0 {
                    (1.0 - h / total).clamp(0.0, 1.0)
                } else {
                    1.0
                }
            })
            .collect()
    }

    /// The curve of a sample taken at block rate `rate` (0 < rate <= 1), standing for the
    /// whole trace: each distance d becomes d / rate and each weight w, w / rate.
    pub fn scaled(&self, rate: f64) -> MissRatioCurve {
        let mut out = MissRatioCurve::new();
        for (d, &w) in self.by_distance.iter().enumerate() {
            if w != 0.0 {
                out.add(Some((d as f64 / rate) as u64), w / rate);
            }
        }
        out.add(None, self.cold / rate);
        out
    }

    /// The mean absolute difference from `other` over cache sizes 0..=`up_to` blocks (SHARDS'
    /// error measure).
    pub fn mean_absolute_error(&self, other: &MissRatioCurve, up_to: u64) -> f64 {
        let (a, b) = (self.miss_ratios(), other.miss_ratios());
        (0..=up_to)
            .map(|i| (at_size(&a, i) - at_size(&b, i)).abs())
            .sum::<f64>()
            / (up_to + 1) as f64
    }
}

/// The value at cache size `size` of a by-size vector ([`MissRatioCurve::hits_by_size`],
/// [`MissRatioCurve::miss_ratios`]): beyond its end the curve is flat.
pub fn at_size(v: &[f64], size: u64) -> f64 {
    v.get(size as usize)
        .or(v.last())
        .copied()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lru::Lru;
    use proptest::prelude::*;

    #[test]
    fn hand_checked_distances() {
        // a b c a b b d a: the second a has b and c since (2); the second b, c and a (2);
        // the third b nothing (0); the last a, b and d (2).
        let mut sd = StackDistances::new();
        let got: Vec<Option<u64>> = [1, 2, 3, 1, 2, 2, 4, 1]
            .iter()
            .map(|&b| sd.access(b))
            .collect();
        assert_eq!(
            got,
            [None, None, None, Some(2), Some(2), Some(0), None, Some(2)]
        );
        assert_eq!(sd.distinct(), 4);
    }

    #[test]
    fn golden_miss_counts_of_a_small_trace() {
        let trace = [1, 2, 3, 1, 2, 2, 4, 1];
        let curve = MissRatioCurve::exact(trace);
        // 4 cold misses; distances 2, 2, 0, 2.
        let misses = |c: u64| (curve.miss_ratio(c) * 8.0).round() as u64;
        assert_eq!(
            [misses(0), misses(1), misses(2), misses(3), misses(9)],
            [8, 7, 7, 4, 4]
        );
        assert_eq!(curve.miss_ratios().len(), 4);
    }

    #[test]
    fn removing_a_block_makes_its_next_request_cold_and_shortens_others() {
        let mut sd = StackDistances::new();
        for b in [1, 2, 3] {
            sd.access(b);
        }
        assert!(sd.remove(2));
        assert_eq!(sd.access(1), Some(1), "only 3 is counted since");
        assert_eq!(sd.access(2), None);
    }

    #[test]
    fn compaction_keeps_distances_across_long_streams() {
        // A loop over 5000 blocks: every request after the first pass has distance 4999.
        let mut sd = StackDistances::new();
        for round in 0..5 {
            for b in 0..5000u64 {
                let d = sd.access(b);
                assert_eq!(d, (round > 0).then_some(4999), "round {round} block {b}");
            }
        }
    }

    fn lru_misses(trace: &[u64], size: usize) -> u64 {
        let mut c = Lru::new(size);
        trace.iter().filter(|&&b| !c.access(b)).count() as u64
    }

    proptest! {
        #[test]
        fn the_exact_curve_equals_lru_replay_at_every_size(
            trace in proptest::collection::vec(0u64..40, 0..400)
        ) {
            let curve = MissRatioCurve::exact(trace.iter().copied());
            for size in 0..45usize {
                let replay = lru_misses(&trace, size);
                let from_curve = (curve.miss_ratio(size as u64) * trace.len() as f64).round() as u64;
                let want = if trace.is_empty() { 0 } else { replay };
                prop_assert_eq!(if trace.is_empty() { 0 } else { from_curve }, want, "size {}", size);
            }
        }
    }
}
