//! Synthetic block traces with documented parameters: Zipf popularity, scans, loops, and mixtures shaped like the two applications of Gemini's experiments (TPC-W and RUBiS), each a deterministic stream from a seed.
//!
//! - **Zipf** (`n`, `theta`): block k of n asked for with probability ∝ 1/(k+1)^θ, drawn by
//!   binary search in the cumulative distribution (O(log n), 8 bytes per block); the ranks are
//!   scattered over the block numbers by a fixed permutation so that hot blocks are not
//!   neighbours.
//! - **Loop** (`n`): blocks 0, 1, …, n−1, 0, 1, … (LRU's worst case below n blocks).
//! - **Scan**: ever new blocks, each asked for once (a table scan that pollutes a cache).
//! - **Mix**: each request from one component picked with its weight; components' blocks are
//!   kept apart (component i's blocks carry i in bits 48–55; the top byte is left for the
//!   tenant, which a shared cache adds).
//! - **TPC-W-like** (an online bookstore's database: a compact catalogue and customer set read
//!   evenly, a long tail of orders, occasional order scans): 88% Zipf θ = 0.6 over 40,000
//!   blocks (625 MiB of 16 KiB), 10% Zipf θ = 0.6 over 150,000 blocks, 2% scan.
//! - **RUBiS-like** (an auction site: items and bids, more skewed and larger): 98% Zipf θ = 0.8
//!   over 100,000 blocks, 2% scan. The paper runs ten RUBiS instances at once (RUBiS¹⁰); the
//!   scenarios give it three times TPC-W's requests over the same span.
//!
//! The mixtures' parameters are ours: the paper gives latencies, not traces. They were chosen
//! so that, with the default latencies, each application alone in 1 GiB + 1 GiB of cache
//! comes near the paper's isolated figures (TPC-W 420 µs under LRU/LRU and 284 µs under
//! DEMOTE) and the two have the contrast its Fig. 5 describes: TPC-W's latency is low once its
//! compact core fits, RUBiS's falls slowly over the whole range. docs/reproducing.md gives the
//! figures they reach.
//!
//! The generator's random numbers are our own (splitmix64) so that a trace is the same bytes
//! for the same seed in every build, as the simulator's are.

/// One source of block numbers.
#[derive(Clone, Debug)]
pub enum Pattern {
    Zipf { n: u64, theta: f64 },
    Loop { n: u64 },
    Scan,
    Mix(Vec<(f64, Pattern)>),
}

impl Pattern {
    /// TPC-W-like (see the module docs).
    pub fn tpcw() -> Pattern {
        Pattern::Mix(vec![
            (
                0.88,
                Pattern::Zipf {
                    n: 40_000,
                    theta: 0.6,
                },
            ),
            (
                0.10,
                Pattern::Zipf {
                    n: 150_000,
                    theta: 0.6,
                },
            ),
            (0.02, Pattern::Scan),
        ])
    }

    /// RUBiS-like (see the module docs).
    pub fn rubis() -> Pattern {
        Pattern::Mix(vec![
            (
                0.98,
                Pattern::Zipf {
                    n: 100_000,
                    theta: 0.8,
                },
            ),
            (0.02, Pattern::Scan),
        ])
    }
}

/// A stream of block numbers from a pattern and a seed.
pub struct Generator {
    state: u64,
    source: Source,
}

enum Source {
    /// `step`: the multiplier that scatters ranks over 0..n (coprime to n).
    Zipf {
        cdf: Vec<f64>,
        n: u64,
        step: u64,
    },
    Loop {
        n: u64,
        next: u64,
    },
    Scan {
        next: u64,
    },
    Mix(Vec<(f64, Source)>),
}

impl Generator {
    pub fn new(pattern: &Pattern, seed: u64) -> Generator {
        Generator {
            state: seed ^ 0x5DEE_CE66_D1CE_4E5B,
            source: Source::of(pattern),
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for Generator {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let u = self.unit();
        Some(self.source.draw(u))
    }
}

impl Source {
    fn of(p: &Pattern) -> Source {
        match p {
            Pattern::Zipf { n, theta } => {
                let n = (*n).max(1);
                let mut cdf = Vec::with_capacity(n as usize);
                let mut sum = 0.0;
                for k in 0..n {
                    sum += 1.0 / ((k + 1) as f64).powf(*theta);
                    cdf.push(sum);
                }
                cdf.iter_mut().for_each(|c| *c /= sum);
                Source::Zipf {
                    cdf,
                    n,
                    step: scatter_step(n),
                }
            }
            Pattern::Loop { n } => Source::Loop {
                n: (*n).max(1),
                next: 0,
            },
            Pattern::Scan => Source::Scan { next: 0 },
            Pattern::Mix(parts) => {
                let total: f64 = parts.iter().map(|(w, _)| w.max(0.0)).sum();
                let mut acc = 0.0;
                Source::Mix(
                    parts
                        .iter()
                        .map(|(w, p)| {
                            acc += w.max(0.0) / total.max(f64::MIN_POSITIVE);
                            (acc, Source::of(p))
                        })
                        .collect(),
                )
            }
        }
    }

    /// A block from a uniform `u` in [0, 1): which rank, or which component and then (rescaled
    /// within the component's slice) what that component draws.
    fn draw(&mut self, u: f64) -> u64 {
        match self {
            Source::Zipf { cdf, n, step } => {
                let rank = cdf.partition_point(|&c| c < u) as u64;
                // A fixed permutation of 0..n: rank r to (r · step) mod n.
                ((rank.min(*n - 1) as u128 * *step as u128) % *n as u128) as u64
            }
            Source::Loop { n, next } => {
                let b = *next;
                *next = (*next + 1) % *n;
                b
            }
            Source::Scan { next } => {
                let b = *next;
                *next += 1;
                b
            }
            Source::Mix(parts) => {
                let last = parts.len().saturating_sub(1);
                let i = parts.iter().position(|(c, _)| u < *c).unwrap_or(last);
                let lo = if i == 0 { 0.0 } else { parts[i - 1].0 };
                let width = (parts[i].0 - lo).max(f64::MIN_POSITIVE);
                let inner = ((u - lo) / width).clamp(0.0, 1.0 - f64::EPSILON);
                parts[i].1.draw(inner) | ((i as u64) << 48)
            }
        }
    }
}

/// A multiplier coprime to `n`, so that r ↦ (r · step) mod n permutes 0..n.
fn scatter_step(n: u64) -> u64 {
    if n <= 1 {
        return 1;
    }
    let mut p = 0x9E37_79B9u64 % n;
    while gcd(p, n) != 1 {
        p += 1;
    }
    p
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// splitmix64's output function: the crate's one mixer (the generators' and searches' random
/// numbers, SHARDS' sampling hash).
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrc::MissRatioCurve;

    #[test]
    fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
        let a: Vec<u64> = Generator::new(&Pattern::tpcw(), 1).take(1000).collect();
        let b: Vec<u64> = Generator::new(&Pattern::tpcw(), 1).take(1000).collect();
        let c: Vec<u64> = Generator::new(&Pattern::tpcw(), 2).take(1000).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn loops_and_scans_are_what_they_say() {
        let l: Vec<u64> = Generator::new(&Pattern::Loop { n: 3 }, 0).take(7).collect();
        assert_eq!(l, [0, 1, 2, 0, 1, 2, 0]);
        let s: Vec<u64> = Generator::new(&Pattern::Scan, 0).take(4).collect();
        assert_eq!(s, [0, 1, 2, 3]);
    }

    #[test]
    fn zipf_is_skewed_by_theta_and_stays_in_range() {
        let hot_share = |theta: f64| {
            let mut counts = vec![0u64; 1000];
            for b in Generator::new(&Pattern::Zipf { n: 1000, theta }, 3).take(100_000) {
                counts[b as usize] += 1;
            }
            counts.sort_unstable_by(|a, b| b.cmp(a));
            counts[..10].iter().sum::<u64>() as f64 / 100_000.0
        };
        let (flat, skewed) = (hot_share(0.0), hot_share(1.0));
        assert!(flat < 0.02, "uniform: the top 1% of blocks get {flat}");
        // θ = 1 over 1000 blocks: H(10)/H(1000) ≈ 2.93/7.49 ≈ 0.39.
        assert!((0.35..0.43).contains(&skewed), "{skewed}");
    }

    #[test]
    fn tpcw_like_falls_steeply_to_its_core_and_rubis_like_slowly() {
        let curve = |p: &Pattern| MissRatioCurve::exact(Generator::new(p, 1).take(2_000_000));
        let (t, r) = (curve(&Pattern::tpcw()), curve(&Pattern::rubis()));
        // 16 KiB blocks: 16,384 are 256 MiB, 49,152 are 768 MiB. TPC-W's core (40,000
        // blocks) fits in 768 MiB; RUBiS's popularity runs on.
        let drop = |c: &MissRatioCurve| c.miss_ratio(16_384) - c.miss_ratio(49_152);
        assert!(
            drop(&t) > 1.5 * drop(&r),
            "tpcw {} vs rubis {}",
            drop(&t),
            drop(&r)
        );
        assert!(t.miss_ratio(49_152) < 0.2, "{}", t.miss_ratio(49_152));
    }
}
