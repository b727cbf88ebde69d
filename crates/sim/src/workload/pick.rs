//! Picking one page of a region per access (uniform or Zipf-skewed), and the per-tick access
//! mix built on it: the hot path of every workload.

use super::{Access, Skew};
use crate::rng::SimRng;
use crate::zipf::Zipf;
use memtide_model::Pages;

/// 2^32: probabilities are kept as thresholds on 32 random bits.
const ONE: u64 = 1 << 32;

/// Converts a probability in [0, 1] to a threshold on a 32-bit coin.
pub(super) fn threshold(p: f64) -> u64 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        ONE
    } else {
        ((p * ONE as f64).round() as u64).min(ONE)
    }
}

/// A fixed bijection of `0..n` that scatters Zipf ranks over a region, so that the hottest
/// pages are not contiguous: two rounds of (odd multiply + add, xor-shift) on the smallest
/// power of two holding `n`, cycle-walking until the value falls below `n` (on average
/// fewer than two walks).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Scramble {
    n: u64,
    mask: u64,
    shift: u32,
}

impl Scramble {
    const MUL1: u64 = 0x9E37_79B9_7F4A_7C15; // odd
    const ADD1: u64 = 0x632B_E59B_D9B4_E019;
    const MUL2: u64 = 0xBF58_476D_1CE4_E5B9; // odd
    const ADD2: u64 = 0x94D0_49BB_1331_11EB;

    pub(super) fn new(n: u32) -> Scramble {
        let n = u64::from(n.max(1));
        let bits = 64 - (n - 1).leading_zeros(); // ceil(log2 n); 0 for n == 1
        Scramble {
            n,
            mask: if bits == 0 { 0 } else { (1u64 << bits) - 1 },
            shift: bits.div_ceil(2).max(1),
        }
    }

    /// The image of `x` (which must be `< n`).
    #[inline]
    pub(super) fn apply(&self, mut x: u64) -> u32 {
        loop {
            x = (x.wrapping_mul(Self::MUL1).wrapping_add(Self::ADD1)) & self.mask;
            x ^= x >> self.shift;
            x = (x.wrapping_mul(Self::MUL2).wrapping_add(Self::ADD2)) & self.mask;
            x ^= x >> self.shift;
            if x < self.n {
                return x as u32;
            }
        }
    }
}

/// How one access picks its page within a region of `n` pages.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Picker {
    /// Region of zero pages: never picked (the mix gives it probability 0).
    Empty,
    Uniform {
        n: u32,
    },
    Zipf {
        zipf: Zipf,
        scramble: Scramble,
    },
}

impl Picker {
    pub(super) fn new(pages: u32, skew: Skew) -> Picker {
        match skew {
            _ if pages == 0 => Picker::Empty,
            Skew::Uniform => Picker::Uniform { n: pages },
            Skew::Zipf { theta } => Picker::Zipf {
                zipf: Zipf::new(u64::from(pages), theta),
                scramble: Scramble::new(pages),
            },
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Picker::Empty)
    }

    /// One page. `hi` is 32 fresh random bits the caller already drew (used by the uniform
    /// picker, so a uniform access costs a single generator call).
    #[inline]
    pub(super) fn pick(&self, hi: u32, rng: &mut SimRng) -> u32 {
        match self {
            Picker::Uniform { n } => lemire32(hi, *n, rng),
            Picker::Zipf { zipf, scramble } => scramble.apply(zipf.sample(rng)),
            Picker::Empty => 0,
        }
    }
}

/// Uniform in `[0, n)` from 32 random bits, with Lemire's rejection for exactness.
#[inline]
fn lemire32(hi: u32, n: u32, rng: &mut SimRng) -> u32 {
    let mut m = u64::from(hi) * u64::from(n);
    if (m as u32) < n {
        let t = n.wrapping_neg() % n;
        while (m as u32) < t {
            m = (rng.next_u64() >> 32) * u64::from(n);
        }
    }
    (m >> 32) as u32
}

/// What a workload does in steady state: which share of accesses goes to the file set,
/// which share of anonymous accesses writes, and how pages are picked in each region.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Mix {
    /// Coin (low 32 bits of a draw) below this: a file access.
    file_cut: u64,
    /// Coin in `[file_cut, write_cut)`: an anonymous write; above: an anonymous read.
    write_cut: u64,
    anon: Picker,
    file: Picker,
    /// The pages this mix keeps touching (the workload's true working set).
    working_set: Pages,
}

impl Mix {
    /// `file_fraction` of accesses to `file`, the rest to `anon`, of which `write_fraction`
    /// write. An empty region gets no accesses, whatever the fractions say.
    pub(super) fn new(
        anon: Picker,
        file: Picker,
        file_fraction: f64,
        write_fraction: f64,
        working_set: Pages,
    ) -> Mix {
        let file_fraction = match (anon.is_empty(), file.is_empty()) {
            (_, true) => 0.0,
            (true, false) => 1.0,
            (false, false) => file_fraction.clamp(0.0, 1.0),
        };
        let file_cut = threshold(file_fraction);
        let anon_writes = (1.0 - file_fraction) * write_fraction.clamp(0.0, 1.0);
        let write_cut = (file_cut + threshold(anon_writes)).min(ONE);
        Mix {
            file_cut,
            write_cut,
            anon,
            file,
            working_set,
        }
    }

    /// A mix that touches nothing.
    pub(super) fn nothing() -> Mix {
        Mix::new(Picker::Empty, Picker::Empty, 0.0, 0.0, Pages::ZERO)
    }

    /// True when there is no page to touch.
    pub(super) fn is_empty(&self) -> bool {
        self.anon.is_empty() && self.file.is_empty()
    }

    pub(super) fn working_set(&self) -> Pages {
        self.working_set
    }

    /// Appends `n` accesses (none if the mix is empty).
    #[inline]
    pub(super) fn fill(&self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize) {
        if self.is_empty() {
            return;
        }
        // Specialised loop for the commonest case: uniform anonymous only, one draw each.
        if let (Picker::Uniform { n: pages }, 0) = (&self.anon, self.file_cut) {
            let (pages, write_cut) = (*pages, self.write_cut);
            out.extend((0..n).map(|_| {
                let x = rng.next_u64();
                let page = lemire32((x >> 32) as u32, pages, rng);
                Access::Anon {
                    page,
                    write: (x & 0xFFFF_FFFF) < write_cut,
                }
            }));
            return;
        }
        out.extend((0..n).map(|_| {
            let x = rng.next_u64();
            let coin = x & 0xFFFF_FFFF;
            let hi = (x >> 32) as u32;
            if coin < self.file_cut {
                Access::File {
                    block: self.file.pick(hi, rng),
                }
            } else {
                Access::Anon {
                    page: self.anon.pick(hi, rng),
                    write: coin < self.write_cut,
                }
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_bijection() {
        for n in [1u32, 2, 3, 5, 64, 100, 1000, 4097] {
            let s = Scramble::new(n);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.apply(u64::from(x));
                assert!(y < n);
                assert!(!seen[y as usize], "n {n}: {y} twice");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn scramble_scatters_the_hottest_ranks() {
        let s = Scramble::new(1 << 16);
        let hot: Vec<u32> = (0..16).map(|x| s.apply(x)).collect();
        let contiguous = hot.windows(2).filter(|w| w[0].abs_diff(w[1]) == 1).count();
        assert!(contiguous <= 1, "{hot:?}");
    }

    #[test]
    fn lemire32_is_in_range_and_roughly_uniform() {
        let mut r = SimRng::new(1);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            let hi = (r.next_u64() >> 32) as u32;
            counts[lemire32(hi, 3, &mut r) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        let hi = (r.next_u64() >> 32) as u32;
        assert_eq!(lemire32(hi, 1, &mut r), 0);
    }

    #[test]
    fn mix_respects_fractions() {
        let mut r = SimRng::new(2);
        let mix = Mix::new(
            Picker::new(100, Skew::Uniform),
            Picker::new(50, Skew::Zipf { theta: 0.9 }),
            0.25,
            0.5,
            Pages(150),
        );
        let mut out = Vec::new();
        mix.fill(&mut r, &mut out, 100_000);
        assert_eq!(out.len(), 100_000);
        let files = out
            .iter()
            .filter(|a| matches!(a, Access::File { .. }))
            .count();
        let writes = out
            .iter()
            .filter(|a| matches!(a, Access::Anon { write: true, .. }))
            .count();
        assert!((24_000..26_000).contains(&files), "{files}");
        assert!((36_500..38_500).contains(&writes), "{writes}");
    }

    #[test]
    fn empty_region_gets_no_accesses() {
        let mut r = SimRng::new(3);
        let only_file = Mix::new(
            Picker::Empty,
            Picker::new(10, Skew::Uniform),
            0.1,
            0.5,
            Pages(10),
        );
        let mut out = Vec::new();
        only_file.fill(&mut r, &mut out, 1000);
        assert!(out
            .iter()
            .all(|a| matches!(a, Access::File { block } if *block < 10)));
        let nothing = Mix::nothing();
        out.clear();
        nothing.fill(&mut r, &mut out, 1000);
        assert!(out.is_empty());
    }
}
