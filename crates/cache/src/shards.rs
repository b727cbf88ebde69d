//! SHARDS (Waldspurger et al., FAST 2015): a miss-ratio curve from a hash-sampled subset of the blocks, in constant memory per sample, with each sampled request's stack distance scaled up by the sampling rate.
//!
//! A block is sampled when `hash(block) mod P < T` (P = 2^24), so the rate is R = T/P and every
//! request to a sampled block is seen. A sampled request's distance among sampled blocks, d,
//! stands for distance d/R among all blocks.
//!
//! - **Fixed rate** ([`Shards::fixed_rate`]): T fixed. With `SHARDS_adj` as the paper gives it,
//!   the difference between the requests expected at rate R (N·R) and those sampled is added
//!   to the smallest distance, correcting the curve's start for the sample's luck.
//!
//!   Ours adds a correction the paper does not make: the *realized* rate. The blocks sampled
//!   are a binomial draw, so a trace of D distinct blocks yields R·D ± √(R·D) of them. With a
//!   footprint of 100,000 blocks at 1% that is 1,000 ± 32, and a sample 5% short shifts the
//!   whole curve by 5% under SHARDS_adj alone (measured: mean absolute error 0.053 on a
//!   uniform trace, 0.012 on the RUBiS-like one, against 0.01 targeted). So a HyperLogLog
//!   (2^14 one-byte registers from the same hash's top bits: 16 KiB, 0.8% error) counts the
//!   blocks of a window 8 times the sample's hash range, which estimates D with a √8 smaller
//!   binomial error than the sample's own while only 8% of requests (at 1%) touch a
//!   register; the curve is scaled by R' = sampled blocks / D rather than R. Traces of
//!   millions of blocks, SHARDS' own, barely move; small footprints gain most.
//! - **Fixed size** ([`Shards::fixed_size`]): at most `s_max` sampled blocks; when one more
//!   comes, the blocks of the largest hash are dropped and T lowered to it, so R falls as the
//!   trace reveals more blocks. Each sampled request weighs 1/R at its time, which is the
//!   paper's rescaling of the older counts by R_new/R_old.
//!
//! Cost: one hash and (fixed rate) one register update per request; the exact structure's
//! O(log s) per sampled request.

use crate::mrc::{MissRatioCurve, StackDistances};
use std::collections::BinaryHeap;

/// The modulus of the sampling hash.
const P: u64 = 1 << 24;
/// HyperLogLog's registers: 2^HLL_BITS, indexed by the hash's top bits.
const HLL_BITS: u32 = 14;
/// The footprint is estimated over the blocks of this many times the sample's hash range:
/// a wider window than the sample (so its own binomial error is √WINDOW smaller) and a
/// fraction of the trace (at 1%, 8% of requests update a register).
const WINDOW: u64 = 8;

/// A SHARDS profiler.
#[derive(Clone, Debug)]
pub struct Shards {
    threshold: u64,
    /// `Some(s_max)` for fixed size.
    max_blocks: Option<usize>,
    /// Sampled blocks by hash, largest first (fixed size only).
    heap: BinaryHeap<(u64, u64)>,
    distances: StackDistances,
    /// Fixed size: the curve so far, each request weighted 1/R at its time. Fixed rate: the
    /// sample's own distances, unscaled (scaled when the curve is read, by the realized rate).
    curve: MissRatioCurve,
    /// Fixed rate below 1: a HyperLogLog of the blocks whose hash is below `window`
    /// ([`WINDOW`] times the threshold), for the realized rate (a fixed-size array, so that
    /// indexing by the hash's top bits needs no bounds check).
    registers: Option<Box<[u8; 1 << HLL_BITS]>>,
    window: u64,
    requests: u64,
    sampled: u64,
}

impl Shards {
    /// The smallest rate a fixed-rate sample can take: one hash value of the 2^24.
    pub const MIN_RATE: f64 = 1.0 / P as f64;

    /// Samples at rate `rate` (0 < rate <= 1; below [`Shards::MIN_RATE`], at that rate).
    pub fn fixed_rate(rate: f64) -> Shards {
        Shards::new(
            ((rate.clamp(0.0, 1.0) * P as f64).round() as u64).max(1),
            None,
        )
    }

    /// Keeps at most `max_blocks` sampled blocks, starting at rate 1.
    pub fn fixed_size(max_blocks: usize) -> Shards {
        Shards::new(P, Some(max_blocks.max(1)))
    }

    fn new(threshold: u64, max_blocks: Option<usize>) -> Shards {
        Shards {
            threshold,
            max_blocks,
            heap: BinaryHeap::new(),
            distances: StackDistances::new(),
            curve: MissRatioCurve::new(),
            registers: (max_blocks.is_none() && threshold < P)
                .then(|| Box::new([0; 1 << HLL_BITS])),
            window: if max_blocks.is_none() {
                threshold.saturating_mul(WINDOW).min(P)
            } else {
                P
            },
            requests: 0,
            sampled: 0,
        }
    }

    /// The rate now.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / P as f64
    }

    /// Requests seen, sampled or not.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Requests sampled.
    pub fn sampled(&self) -> u64 {
        self.sampled
    }

    /// Takes one request: a hash, a register (fixed rate), and for the sampled few the rest.
    /// True when the block is in the sample.
    #[inline(always)]
    pub fn access(&mut self, block: u64) -> bool {
        self.requests += 1;
        let full = hash(block);
        let h = full & (P - 1);
        if h < self.window {
            if let Some(registers) = &mut self.registers {
                let r = &mut registers[(full >> (64 - HLL_BITS)) as usize];
                // The rank of the first 1 in the bits below the index (capped by a sentinel).
                let rank = ((full << HLL_BITS) | (1 << (HLL_BITS - 1))).leading_zeros() as u8 + 1;
                *r = (*r).max(rank);
            }
            if h < self.threshold {
                self.sample(block, h);
                return true;
            }
        }
        false
    }

    /// A sampled request: its distance among the sampled blocks, counted.
    #[inline(never)]
    fn sample(&mut self, block: u64, h: u64) {
        self.sampled += 1;
        let d = self.distances.access(block);
        let Some(max) = self.max_blocks else {
            // Fixed rate: the sample's own distance, scaled when the curve is read.
            self.curve.add(d, 1.0);
            return;
        };
        let rate = self.rate();
        if d.is_none() {
            self.heap.push((h, block));
            while self.heap.len() > max {
                self.drop_largest();
            }
        }
        // The request may belong to a block just dropped (its own hash the largest): it was
        // seen at the old rate, read before the drop, and counts at that rate.
        let scaled = d.map(|d| (d as f64 / rate) as u64);
        self.curve.add(scaled, 1.0 / rate);
    }

    /// Fixed rate: the rate the sample realized, sampled blocks over HyperLogLog's estimate of
    /// all (the nominal rate at rate 1, or before any block is sampled).
    pub fn realized_rate(&self) -> f64 {
        let sampled = self.distances.distinct() as f64;
        let Some(all) = self.distinct_estimate() else {
            return self.rate();
        };
        if sampled < 1.0 || all < 1.0 {
            return self.rate();
        }
        (sampled / all).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// HyperLogLog's estimate of the distinct blocks seen (fixed rate below 1 only): of those
    /// in the window, with linear counting while registers are still empty, scaled up by the
    /// window's share of the hash range.
    fn distinct_estimate(&self) -> Option<f64> {
        let registers = self.registers.as_ref()?;
        let m = registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = registers.iter().map(|&r| (-(r as f64)).exp2()).sum();
        let raw = alpha * m * m / sum;
        let zeros = registers.iter().filter(|&&r| r == 0).count();
        let in_window = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        Some(in_window * P as f64 / self.window as f64)
    }

    /// Drops every sampled block of the largest hash and lowers the threshold to it.
    fn drop_largest(&mut self) {
        let Some(&(top, _)) = self.heap.peek() else {
            return;
        };
        while let Some(&(h, b)) = self.heap.peek() {
            if h != top {
                break;
            }
            self.heap.pop();
            self.distances.remove(b);
        }
        self.threshold = top;
    }

    /// The curve of the requests since the last call (or the start), and a new one begins:
    /// the sample's blocks and their stack stay, so a block asked for before keeps its
    /// distance (a window's first request to it is no cold miss). A curve per window follows a
    /// workload that changes, as an application's agent reports it.
    pub fn take_curve(&mut self) -> MissRatioCurve {
        let curve = self.curve();
        self.curve = MissRatioCurve::new();
        self.requests = 0;
        self.sampled = 0;
        curve
    }

    /// The curve (fixed rate: scaled by the realized rate), with `SHARDS_adj`: the weights are
    /// in requests of the whole trace, and
    /// what the sample's weight falls short of the requests seen (or exceeds them: a hot block
    /// that happened to be sampled) goes onto the smallest distance. For fixed rate this is
    /// the paper's `(N·R − sampled) / R`; for fixed size the same with each request's rate.
    pub fn curve(&self) -> MissRatioCurve {
        let mut curve = if self.max_blocks.is_none() {
            self.curve.scaled(self.realized_rate())
        } else {
            self.curve.clone()
        };
        curve.add(Some(0), self.requests as f64 - curve.requests());
        curve
    }
}

/// SHARDS as an application's agent runs it over its pool's requests: fixed size, one curve
/// per window, read at a few evenly spaced sizes. The first window only fills the sample's
/// stack (each block's first request in it would be a miss at every size, which says nothing
/// of the pool's size), so it gives no curve; after it, the stack carries over
/// ([`Shards::take_curve`]).
#[derive(Clone, Debug)]
pub struct WindowedShards {
    shards: Shards,
    warm: bool,
}

impl WindowedShards {
    /// Most blocks an agent's sample keeps (SHARDS' s_max; the SHARDS paper's 8K keeps the
    /// mean absolute error below 0.01 on its traces): a few hundred kilobytes whatever the
    /// pool.
    pub const SAMPLE_BLOCKS: usize = 8192;

    pub fn new() -> WindowedShards {
        WindowedShards {
            shards: Shards::fixed_size(WindowedShards::SAMPLE_BLOCKS),
            warm: false,
        }
    }

    /// One request to `block`.
    #[inline]
    pub fn access(&mut self, block: u64) {
        self.shards.access(block);
    }

    /// Ends a window: its miss ratio at `points` distinct sizes evenly up to `largest` blocks
    /// (each above zero), or `None` for the first window or one without requests.
    pub fn end_window(&mut self, largest: u64, points: u64) -> Option<Vec<(u64, f64)>> {
        let curve = self.shards.take_curve();
        if !std::mem::replace(&mut self.warm, true) || curve.requests() <= 0.0 {
            return None;
        }
        let mut previous = 0;
        Some(
            (1..=points)
                .map(|k| largest * k / points.max(1))
                .filter(|&s| std::mem::replace(&mut previous, s) < s)
                .map(|s| (s, curve.miss_ratio(s)))
                .collect(),
        )
    }
}

impl Default for WindowedShards {
    fn default() -> WindowedShards {
        WindowedShards::new()
    }
}

/// splitmix64: a fast hash of a block number whose low bits are uniform.
#[inline]
fn hash(block: u64) -> u64 {
    crate::gen::mix(block.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Zipf-like stream over `n` blocks from a fixed LCG (deterministic, no crate).
    fn skewed(n: u64, len: usize) -> Vec<u64> {
        let mut x: u64 = 42;
        (0..len)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                // Inverse of a power law: small blocks far more often.
                ((n as f64).powf(u) - 1.0) as u64
            })
            .collect()
    }

    #[test]
    fn at_rate_one_shards_is_the_exact_curve() {
        let trace = skewed(2_000, 20_000);
        let exact = MissRatioCurve::exact(trace.iter().copied());
        let mut s = Shards::fixed_rate(1.0);
        for &b in &trace {
            s.access(b);
        }
        assert_eq!(s.curve().miss_ratios(), exact.miss_ratios());
    }

    #[test]
    fn a_window_s_curve_counts_its_own_requests_with_distances_from_before_it() {
        // A loop over 100 blocks: after the first pass every request has distance 99, so the
        // second window's curve has no cold misses and hits at 100 blocks.
        let mut s = Shards::fixed_size(1_000);
        for b in 0..100u64 {
            s.access(b);
        }
        let first = s.take_curve();
        assert_eq!(first.miss_ratio(1_000), 1.0, "the first pass is all cold");
        for b in 0..100u64 {
            s.access(b);
        }
        let second = s.take_curve();
        assert_eq!(second.requests(), 100.0);
        assert_eq!(second.miss_ratio(100), 0.0);
        assert_eq!(second.miss_ratio(99), 1.0);
    }

    #[test]
    fn an_agent_s_windows_give_no_curve_until_the_stack_is_warm_then_evenly_spaced_points() {
        let mut w = WindowedShards::new();
        for b in 0..100u64 {
            w.access(b);
        }
        assert_eq!(
            w.end_window(200, 4),
            None,
            "the first window only warms the stack"
        );
        assert_eq!(w.end_window(200, 4), None, "a window without requests");
        for b in 0..100u64 {
            w.access(b);
        }
        // Every distance is 99: all misses below 100 blocks, all hits from 100.
        assert_eq!(
            w.end_window(200, 4),
            Some(vec![(50, 1.0), (100, 0.0), (150, 0.0), (200, 0.0)])
        );
        // Sizes that round to the same block count once.
        for b in 0..100u64 {
            w.access(b);
        }
        assert_eq!(w.end_window(2, 4), Some(vec![(1, 1.0), (2, 1.0)]));
    }

    #[test]
    fn a_one_percent_sample_follows_the_exact_curve() {
        let trace = skewed(200_000, 2_000_000);
        let exact = MissRatioCurve::exact(trace.iter().copied());
        let mut rate = Shards::fixed_rate(0.01);
        let mut size = Shards::fixed_size(2_000);
        for &b in &trace {
            rate.access(b);
            size.access(b);
        }
        let up_to = exact.max_size();
        let e_rate = exact.mean_absolute_error(&rate.curve(), up_to);
        let e_size = exact.mean_absolute_error(&size.curve(), up_to);
        eprintln!("mean absolute error: fixed rate 1% {e_rate:.5}, fixed size 2000 {e_size:.5}");
        assert!(e_rate < 0.01, "fixed rate: {e_rate}");
        assert!(e_size < 0.02, "fixed size: {e_size}");
        assert!(
            size.rate() < 0.1,
            "the fixed-size sample lowered its rate: {}",
            size.rate()
        );
        assert!((rate.rate() - 0.01).abs() < 1e-6);
        // Which requests are sampled depends on which blocks are: a hot block in the sample
        // makes many; the curve's adjustment, not the count, answers for it.
        assert!(rate.sampled() > 0 && rate.sampled() < rate.requests());
    }

    #[test]
    fn a_one_percent_sample_follows_the_gemini_scenarios_traces_and_a_uniform_one() {
        use crate::gen::{Generator, Pattern};
        // The two applications of scenarios/cache/ at their lengths and seeds (within the
        // issue's 0.01; SHARDS_adj alone: 0.0050 and 0.0123), and a uniform trace whose small
        // footprint (100,000 blocks: 1,000 sampled) SHARDS_adj alone leaves 0.053 off: 0.016
        // with the realized rate, the window's and HyperLogLog's 1.5% error being most of it.
        for (name, pattern, requests, seed, bound) in [
            ("tpcw", Pattern::tpcw(), 2_000_000, 1, 0.01),
            ("rubis", Pattern::rubis(), 6_000_000, 2, 0.01),
            (
                "uniform",
                Pattern::Zipf {
                    n: 100_000,
                    theta: 0.0,
                },
                6_000_000,
                2,
                0.02,
            ),
        ] {
            let mut exact_d = StackDistances::new();
            let mut exact = MissRatioCurve::new();
            let mut rate = Shards::fixed_rate(0.01);
            for b in Generator::new(&pattern, seed).take(requests) {
                exact.add(exact_d.access(b), 1.0);
                rate.access(b);
            }
            let e = exact.mean_absolute_error(&rate.curve(), exact.max_size());
            let distinct = exact_d.distinct() as f64;
            eprintln!(
                "{name}: SHARDS at 1%, mean absolute error {e:.5}; realized rate {:.5} ({:.5} true)",
                rate.realized_rate(),
                rate.distances.distinct() as f64 / distinct
            );
            assert!(e < bound, "{name}: {e}");
        }
    }
}
