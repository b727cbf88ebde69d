//! Miss-ratio curves by bytes, for traces whose objects have sizes: a request's byte stack distance (the sizes of the distinct objects used since its object was last used) decides at once whether it hits in an LRU cache of every size in bytes, so one pass gives the miss ratio and the byte miss ratio at all sizes.
//!
//! **The convention.** A request to object o hits in a cache of C bytes iff o was asked for
//! before and D + s ≤ C, where D is the sum of the latest sizes of the distinct objects asked
//! for since o's previous request and s is the size o is cached at: its previous request's.
//! The request's own size is o's size from then on (libCacheSim's convention, too); its bytes
//! are what the byte miss ratio counts. The cache so modelled always holds the longest run of
//! most recently used objects that fits (Mattson's inclusion property, by bytes). That is
//! exactly an LRU that admits every object and, on an insert or a growth, evicts from the
//! least recent end until the objects fit (an object larger than the cache passes through and
//! leaves it empty); a property test checks it against one. Two differences remain, both
//! after an object's size changes or for objects larger than the cache:
//! - after a shrink, the model counts the room freed at once, so an object that such an LRU
//!   evicted earlier can count as cached again (the test `a_shrink_frees_room_at_once` shows
//!   one);
//! - libCacheSim's LRU admits no object larger than the cache (it keeps what it holds) and,
//!   on a hit that grows an object, evicts nothing until the next miss.
//!
//! **Counting** ([`ByteDistances`]): a Fenwick tree over request positions holds each object's
//! size at its latest request, so D is the tree's sum after that position: O(log n) a
//! request, renumbered densely when the positions run out (memory O(distinct objects)).
//!
//! **The curve** ([`ByteCurve`]): distances in bytes span up to a trace's footprint (terabytes),
//! so hits are binned: bin i holds the requests whose smallest hitting size is in
//! ((i−1)·w, i·w], and the curve is exact at every multiple of the bin width w, a power of two
//! doubled (bins merged in pairs) whenever a distance falls past the last bin.
//!
//! **Sampled** ([`ByteShards`]): SHARDS at a fixed rate R samples objects by the same hash as
//! [`Shards`]; a sampled request's byte distance D' among the sampled objects stands for D'/R
//! among all, and it weighs 1/R requests and s/R bytes. SHARDS_adj puts what the sample's
//! weight falls short of the requests and bytes seen (or exceeds them) on the smallest bin.
//! The rate is the nominal one: the realized-rate correction of [`Shards`] is for blocks.

use crate::shards::Shards;
use rustc_hash::FxHashMap;

/// The byte stack distances of a request stream, one request at a time.
#[derive(Clone, Debug, Default)]
pub struct ByteDistances {
    /// Each object's most recent request, as a position, and its size then.
    last: FxHashMap<u64, (u32, u32)>,
    /// Fenwick tree over positions: each object's size at its latest position.
    tree: Vec<u64>,
    /// The sizes of the objects known, at their latest.
    total: u64,
    /// The next request's position.
    now: u32,
}

/// A request to an object asked for before: its byte stack distance and the size it was
/// cached at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Reuse {
    /// The latest sizes of the distinct objects asked for since, in bytes.
    pub distance: u64,
    /// The object's size at its previous request.
    pub size: u32,
}

impl Reuse {
    /// The smallest cache, in bytes, the request hits in: distance + size.
    pub fn hit_size(self) -> u64 {
        self.distance + u64::from(self.size)
    }
}

impl ByteDistances {
    pub fn new() -> ByteDistances {
        ByteDistances::default()
    }

    /// Requests `block` at `size` bytes (its size from now on): its reuse, or `None` for the
    /// block's first request.
    #[inline]
    pub fn access(&mut self, block: u64, size: u32) -> Option<Reuse> {
        if self.now as usize >= self.tree.len() {
            self.compact();
        }
        let now = self.now;
        self.now += 1;
        let reuse = self.last.insert(block, (now, size)).map(|(t, old)| {
            // Sizes at positions after t: the objects asked for since.
            let distance = self.total - self.prefix(t);
            self.add(t, -i64::from(old));
            self.total -= u64::from(old);
            Reuse {
                distance,
                size: old,
            }
        });
        self.add(now, i64::from(size));
        self.total += u64::from(size);
        reuse
    }

    /// Distinct objects seen.
    pub fn distinct(&self) -> usize {
        self.last.len()
    }

    /// The latest sizes of the distinct objects seen: the footprint in bytes.
    pub fn footprint(&self) -> u64 {
        self.total
    }

    /// Sizes at positions `0..=t`.
    #[inline]
    fn prefix(&self, t: u32) -> u64 {
        let mut i = t as usize + 1;
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i - 1];
            i &= i - 1;
        }
        sum
    }

    #[inline]
    fn add(&mut self, t: u32, delta: i64) {
        let mut i = t as usize + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Renumbers the objects densely in time order, with room for as many positions again
    /// (at least 4096).
    fn compact(&mut self) {
        let mut order: Vec<(u32, u64)> = self.last.iter().map(|(&b, &(t, _))| (t, b)).collect();
        order.sort_unstable();
        let n = (order.len() * 2).max(4096);
        self.tree = vec![0; n];
        for (i, &(_, b)) in order.iter().enumerate() {
            let entry = self.last.get_mut(&b).expect("a known object");
            entry.0 = i as u32;
            self.tree[i] = u64::from(entry.1);
        }
        // Build in O(n): each node adds itself to its parent.
        for i in 1..=n {
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                let v = self.tree[i - 1];
                self.tree[parent - 1] += v;
            }
        }
        self.now = order.len() as u32;
    }
}

/// Requests and their bytes by the smallest cache size (in bytes) they hit in, binned; the
/// miss ratio and byte miss ratio at every multiple of the bin width.
#[derive(Clone, Debug, PartialEq)]
pub struct ByteCurve {
    /// Weight of requests in each bin (bin i: smallest hitting size in ((i−1)·w, i·w]).
    requests: Vec<f64>,
    /// Their bytes.
    bytes: Vec<f64>,
    /// log2 of the bin width w.
    shift: u32,
    /// Most bins before they are merged in pairs.
    max_bins: usize,
    /// First requests (misses at every size) and their bytes.
    cold: (f64, f64),
}

impl ByteCurve {
    /// A curve of at most `max_bins` bins (at least 2), starting 1 byte wide.
    pub fn new(max_bins: usize) -> ByteCurve {
        ByteCurve {
            requests: Vec::new(),
            bytes: Vec::new(),
            shift: 0,
            max_bins: max_bins.max(2),
            cold: (0.0, 0.0),
        }
    }

    /// Counts a request that hits in caches of `hit_size` bytes or more (`None`: a first
    /// request), weighing `weight` requests and `bytes` bytes.
    #[inline]
    pub fn add(&mut self, hit_size: Option<u64>, weight: f64, bytes: f64) {
        let Some(h) = hit_size else {
            self.cold.0 += weight;
            self.cold.1 += bytes;
            return;
        };
        let mut bin = self.bin(h);
        while bin >= self.max_bins {
            self.merge();
            bin = self.bin(h);
        }
        if bin >= self.requests.len() {
            self.requests.resize(bin + 1, 0.0);
            self.bytes.resize(bin + 1, 0.0);
        }
        self.requests[bin] += weight;
        self.bytes[bin] += bytes;
    }

    /// The bin of a smallest hitting size: ⌈h / w⌉.
    #[inline]
    fn bin(&self, h: u64) -> usize {
        h.div_ceil(1 << self.shift) as usize
    }

    /// Doubles the bin width: old bin i goes to ⌈i/2⌉, whose range holds its own.
    fn merge(&mut self) {
        let n = self.requests.len().div_ceil(2) + 1;
        let mut requests = vec![0.0; n];
        let mut bytes = vec![0.0; n];
        for i in 0..self.requests.len() {
            requests[i.div_ceil(2)] += self.requests[i];
            bytes[i.div_ceil(2)] += self.bytes[i];
        }
        while requests.len() > 1 && requests.last() == Some(&0.0) && bytes.last() == Some(&0.0) {
            requests.pop();
            bytes.pop();
        }
        self.requests = requests;
        self.bytes = bytes;
        self.shift += 1;
    }

    /// The bin width in bytes: the curve is exact at its multiples.
    pub fn width(&self) -> u64 {
        1 << self.shift
    }

    /// All requests' weight.
    pub fn requests(&self) -> f64 {
        self.cold.0 + self.requests.iter().sum::<f64>()
    }

    /// All requests' bytes.
    pub fn bytes(&self) -> f64 {
        self.cold.1 + self.bytes.iter().sum::<f64>()
    }

    /// First requests' weight and bytes.
    pub fn cold(&self) -> (f64, f64) {
        self.cold
    }

    /// The smallest size, a multiple of the width, beyond which no request gains a hit.
    pub fn max_size(&self) -> u64 {
        (self.requests.len().saturating_sub(1) as u64) << self.shift
    }

    /// The miss ratio and byte miss ratio of an LRU cache of `size` bytes, exact when `size`
    /// is a multiple of [`ByteCurve::width`] (else those of the multiple below it); 1 for an
    /// empty stream.
    pub fn miss_ratios(&self, size: u64) -> (f64, f64) {
        let last = (size >> self.shift) as usize;
        let upto = |v: &[f64]| v.iter().take(last.saturating_add(1)).sum::<f64>();
        let ratio = |hits: f64, all: f64| {
            if all > 0.0 {
                (1.0 - hits / all).clamp(0.0, 1.0)
            } else {
                1.0
            }
        };
        (
            ratio(upto(&self.requests), self.requests()),
            ratio(upto(&self.bytes), self.bytes()),
        )
    }

    /// Both ratios at each of `sizes` (ascending), in one pass.
    pub fn miss_ratios_at(&self, sizes: &[u64]) -> Vec<(f64, f64)> {
        let (all, all_bytes) = (self.requests(), self.bytes());
        let ratio = |hits: f64, all: f64| {
            if all > 0.0 {
                (1.0 - hits / all).clamp(0.0, 1.0)
            } else {
                1.0
            }
        };
        let (mut i, mut hits, mut hit_bytes) = (0, 0.0, 0.0);
        sizes
            .iter()
            .map(|&s| {
                let last = (s >> self.shift) as usize;
                while i < self.requests.len() && i <= last {
                    hits += self.requests[i];
                    hit_bytes += self.bytes[i];
                    i += 1;
                }
                (ratio(hits, all), ratio(hit_bytes, all_bytes))
            })
            .collect()
    }

    /// The mean absolute difference of the miss ratios (requests, bytes) from `other`'s at
    /// `sizes`.
    pub fn mean_absolute_error(&self, other: &ByteCurve, sizes: &[u64]) -> (f64, f64) {
        let (a, b) = (self.miss_ratios_at(sizes), other.miss_ratios_at(sizes));
        let n = sizes.len().max(1) as f64;
        let sum = a.iter().zip(&b).fold((0.0, 0.0), |(r, y), (x, z)| {
            (r + (x.0 - z.0).abs(), y + (x.1 - z.1).abs())
        });
        (sum.0 / n, sum.1 / n)
    }
}

/// The exact curve by bytes of a whole stream of (block, size) requests.
pub fn exact(requests: impl IntoIterator<Item = (u64, u32)>, max_bins: usize) -> ByteCurve {
    let mut d = ByteDistances::new();
    let mut curve = ByteCurve::new(max_bins);
    for (b, s) in requests {
        curve.add(d.access(b, s).map(Reuse::hit_size), 1.0, f64::from(s));
    }
    curve
}

/// SHARDS by bytes at a fixed rate.
#[derive(Clone, Debug)]
pub struct ByteShards {
    shards: Shards,
    distances: ByteDistances,
    curve: ByteCurve,
    requests: u64,
    bytes: u64,
}

impl ByteShards {
    /// Samples at rate `rate` (as [`Shards::fixed_rate`]), into a curve of at most
    /// `max_bins` bins.
    pub fn fixed_rate(rate: f64, max_bins: usize) -> ByteShards {
        ByteShards {
            shards: Shards::fixed_rate(rate),
            distances: ByteDistances::new(),
            curve: ByteCurve::new(max_bins),
            requests: 0,
            bytes: 0,
        }
    }

    /// One request to `block` at `size` bytes.
    #[inline]
    pub fn access(&mut self, block: u64, size: u32) {
        self.requests += 1;
        self.bytes += u64::from(size);
        if self.shards.access(block) {
            self.sample(block, size);
        }
    }

    #[inline(never)]
    fn sample(&mut self, block: u64, size: u32) {
        let rate = self.shards.rate();
        let hit = self
            .distances
            .access(block, size)
            .map(|r| (r.distance as f64 / rate) as u64 + u64::from(r.size));
        self.curve.add(hit, 1.0 / rate, f64::from(size) / rate);
    }

    /// The curve, with SHARDS_adj: what the sample's weight and bytes fall short of the
    /// requests and bytes seen (or exceed them) go onto the smallest bin above 0.
    pub fn curve(&self) -> ByteCurve {
        let mut curve = self.curve.clone();
        let (w, b) = (curve.requests(), curve.bytes());
        curve.add(Some(1), self.requests as f64 - w, self.bytes as f64 - b);
        curve
    }

    /// The sampled objects' count.
    pub fn sampled_objects(&self) -> usize {
        self.distances.distinct()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An LRU by bytes as a cache runs it: every object admitted at the front, the least
    /// recent evicted until the objects fit (the one just asked for last of all); a request
    /// hits when its object is cached.
    struct LruBytes {
        capacity: u64,
        /// Most recent first.
        order: Vec<(u64, u32)>,
        used: u64,
    }

    impl LruBytes {
        fn new(capacity: u64) -> LruBytes {
            LruBytes {
                capacity,
                order: Vec::new(),
                used: 0,
            }
        }

        fn access(&mut self, block: u64, size: u32) -> bool {
            let found = self.order.iter().position(|&(b, _)| b == block);
            if let Some(i) = found {
                self.used -= u64::from(self.order.remove(i).1);
            }
            self.order.insert(0, (block, size));
            self.used += u64::from(size);
            while self.used > self.capacity {
                let (_, s) = self.order.pop().unwrap();
                self.used -= u64::from(s);
            }
            found.is_some()
        }
    }

    /// Every request's hit or miss at `capacity`, by the brute-force LRU and by distances.
    fn both(trace: &[(u64, u32)], capacity: u64) -> (Vec<bool>, Vec<bool>) {
        let mut lru = LruBytes::new(capacity);
        let mut d = ByteDistances::new();
        trace
            .iter()
            .map(|&(b, s)| {
                let hit = d.access(b, s).is_some_and(|r| r.hit_size() <= capacity);
                (lru.access(b, s), hit)
            })
            .unzip()
    }

    #[test]
    fn hand_checked_byte_distances() {
        // a(10) b(20) c(30) a(10) b(20): the second a has b and c since (50), and is cached
        // at 10 bytes; the second b has c and a (40).
        let mut d = ByteDistances::new();
        let got: Vec<Option<u64>> = [(1, 10), (2, 20), (3, 30), (1, 10), (2, 20)]
            .iter()
            .map(|&(b, s)| d.access(b, s).map(Reuse::hit_size))
            .collect();
        assert_eq!(got, [None, None, None, Some(60), Some(60)]);
        assert_eq!((d.distinct(), d.footprint()), (3, 60));
    }

    #[test]
    fn a_size_change_counts_from_the_next_request_on() {
        // a(10) b(20) b(50) a: the second b hits where 20 bytes are cached; a then has b's
        // new 50 bytes since it.
        let mut d = ByteDistances::new();
        d.access(1, 10);
        d.access(2, 20);
        assert_eq!(d.access(2, 50).map(Reuse::hit_size), Some(20));
        assert_eq!(
            d.access(1, 10),
            Some(Reuse {
                distance: 50,
                size: 10
            })
        );
        assert_eq!(d.footprint(), 60);
    }

    #[test]
    fn a_shrink_frees_room_at_once() {
        // 10 bytes: a(4) b(4) c(4) evicts a; b shrinks to 1. The LRU keeps a out; the model's
        // most recent objects that fit are b(1), c(4) and a(4) again.
        let trace = [(1, 4), (2, 4), (3, 4), (2, 1), (1, 4)];
        let (lru, model) = both(&trace, 10);
        assert_eq!(lru, [false, false, false, true, false]);
        assert_eq!(model, [false, false, false, true, true]);
    }

    #[test]
    fn compaction_keeps_distances_across_long_streams() {
        // A loop over 5000 objects of 1..=3 bytes: every reuse has the others' bytes since.
        let size = |b: u64| (b % 3 + 1) as u32;
        let all: u64 = (0..5000).map(|b| u64::from(size(b))).sum();
        let mut d = ByteDistances::new();
        for round in 0..4 {
            for b in 0..5000u64 {
                let got = d.access(b, size(b)).map(Reuse::hit_size);
                assert_eq!(got, (round > 0).then_some(all), "round {round} block {b}");
            }
        }
    }

    #[test]
    fn bins_merge_and_stay_exact_at_multiples_of_their_width() {
        let trace: Vec<(u64, u32)> = (0..3000u64)
            .map(|i| ((i * 7919) % 300, 1 + (i % 300 * 37 % 500) as u32))
            .collect();
        let fine = exact(trace.iter().copied(), 1 << 20);
        let coarse = exact(trace.iter().copied(), 16);
        assert_eq!(fine.width(), 1);
        assert!(coarse.width() > 1, "merged: width {}", coarse.width());
        for k in 0..=20 {
            let c = k * coarse.width();
            assert_eq!(coarse.miss_ratios(c), fine.miss_ratios(c), "size {c}");
        }
        let sizes: Vec<u64> = (0..=20).map(|k| k * coarse.width()).collect();
        let one_pass = coarse.miss_ratios_at(&sizes);
        for (i, &s) in sizes.iter().enumerate() {
            assert_eq!(one_pass[i], coarse.miss_ratios(s));
        }
        assert_eq!(coarse.requests(), 3000.0);
    }

    #[test]
    fn byte_miss_ratio_weighs_misses_by_their_bytes() {
        // A loop of a(100) b(1): at 101 bytes everything after the first pass hits; at 100,
        // nothing does (each needs the other's bytes and its own).
        let trace = [(1, 100), (2, 1), (1, 100), (2, 1)];
        let curve = exact(trace, 1 << 10);
        assert_eq!(curve.miss_ratios(101), (0.5, 0.5));
        assert_eq!(curve.miss_ratios(100), (1.0, 1.0));
        // b(1) repeated: hits from 1 byte; a's misses are most of the bytes.
        let curve = exact([(1, 100), (2, 1), (2, 1), (2, 1)], 1 << 10);
        let (m, bm) = curve.miss_ratios(1);
        assert_eq!(m, 0.5);
        assert!((bm - 101.0 / 103.0).abs() < 1e-12, "{bm}");
    }

    #[test]
    fn sampling_at_rate_one_is_the_exact_curve() {
        let trace: Vec<(u64, u32)> = (0..20_000u64)
            .map(|i| {
                let b = (i * i) % 1_000;
                (b, 512 * (1 + (b % 7) as u32))
            })
            .collect();
        let exact = exact(trace.iter().copied(), 1 << 16);
        let mut s = ByteShards::fixed_rate(1.0, 1 << 16);
        trace.iter().for_each(|&(b, z)| s.access(b, z));
        let sizes: Vec<u64> = (0..100).map(|k| k * exact.width() * 64).collect();
        assert_eq!(
            s.curve().miss_ratios_at(&sizes),
            exact.miss_ratios_at(&sizes)
        );
    }

    #[test]
    fn a_one_percent_sample_follows_the_exact_curve_by_bytes() {
        use crate::gen::{Generator, Pattern};
        // Zipf over 200,000 objects of 4 KiB to 64 KiB (by the object's hash).
        let pattern = Pattern::Zipf {
            n: 200_000,
            theta: 0.9,
        };
        let size = |b: u64| 4096 * (1 + (crate::gen::mix(b) % 16) as u32);
        let mut d = ByteDistances::new();
        let mut exact = ByteCurve::new(1 << 16);
        let mut s = ByteShards::fixed_rate(0.01, 1 << 16);
        for b in Generator::new(&pattern, 3).take(2_000_000) {
            exact.add(
                d.access(b, size(b)).map(Reuse::hit_size),
                1.0,
                f64::from(size(b)),
            );
            s.access(b, size(b));
        }
        let step = exact.max_size() / 1000 / exact.width() * exact.width();
        let sizes: Vec<u64> = (0..=1000).map(|k| k * step).collect();
        let (e, eb) = exact.mean_absolute_error(&s.curve(), &sizes);
        eprintln!("SHARDS by bytes at 1%: mean absolute error {e:.5} (requests), {eb:.5} (bytes)");
        assert!(e < 0.02 && eb < 0.02, "{e} {eb}");
    }

    proptest! {
        #[test]
        fn distances_equal_an_lru_by_bytes_when_objects_keep_their_sizes(
            trace in proptest::collection::vec((0u64..12, 1u32..40), 0..200),
            capacity in 0u64..300,
        ) {
            // Each object keeps the size of its first request.
            let mut first = FxHashMap::default();
            let trace: Vec<(u64, u32)> =
                trace.iter().map(|&(b, s)| (b, *first.entry(b).or_insert(s))).collect();
            let (lru, model) = both(&trace, capacity);
            prop_assert_eq!(lru, model);
        }

        #[test]
        fn distances_equal_an_lru_by_bytes_when_objects_only_grow(
            trace in proptest::collection::vec((0u64..12, 1u32..40, 0u32..8), 0..200),
            capacity in 0u64..300,
        ) {
            let mut now = FxHashMap::default();
            let trace: Vec<(u64, u32)> = trace
                .iter()
                .map(|&(b, s, grow)| {
                    let size = now.get(&b).map_or(s, |&old: &u32| old + grow);
                    now.insert(b, size);
                    (b, size)
                })
                .collect();
            let (lru, model) = both(&trace, capacity);
            prop_assert_eq!(lru, model);
        }
    }
}
