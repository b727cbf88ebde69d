//! Zipf-distributed ranks in O(1) per sample (rejection-inversion), with portable math so
//! that the same seed gives the same ranks on every platform.
//!
//! The sampler is the rejection-inversion method of W. Hörmann and G. Derflinger,
//! "Rejection-inversion to generate variates from monotone discrete distributions", ACM
//! TOMACS 6(3), 1996, in the form used by Apache Commons (`RejectionInversionZipfSampler`):
//! exact for any exponent `theta >= 0` (including `theta == 1`), no tables, a few floating
//! point operations per sample and on average well under 1.1 uniform draws.
//!
//! `exp` and `ln` are computed by the fdlibm algorithms written out below in plain Rust
//! instead of the platform's libm (whose last-bit rounding differs between systems), so
//! every sample is a pure function of the generator's bits.

use crate::rng::SimRng;

/// Zipf distribution over ranks `0..n`: rank `r` has probability proportional to
/// `1 / (r + 1)^theta`; rank 0 is the hottest.
#[derive(Clone, Debug, PartialEq)]
pub struct Zipf {
    n: u64,
    theta: f64,
    /// H(1.5) - 1: lower end of the uniform variate's range.
    h_integral_x1: f64,
    /// H(n + 0.5): upper end of the uniform variate's range.
    h_integral_n: f64,
    /// Squeeze: a candidate `k` with `k - x <= s` is accepted without evaluating `h`.
    s: f64,
}

impl Zipf {
    /// Ranks `0..n` with exponent `theta`. Never panics: `n == 0` behaves like `n == 1`
    /// (every sample is rank 0) and a `theta` that is negative or not a number behaves
    /// like 0 (uniform). Callers validate user input before getting here.
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let theta = if theta.is_finite() && theta > 0.0 {
            theta
        } else if theta == f64::INFINITY {
            f64::MAX
        } else {
            0.0
        };
        let h_integral_x1 = h_integral(1.5, theta) - 1.0;
        let h_integral_n = h_integral(n as f64 + 0.5, theta);
        let s = 2.0 - h_integral_inverse(h_integral(2.5, theta) - h(2.0, theta), theta);
        Zipf {
            n,
            theta,
            h_integral_x1,
            h_integral_n,
            s,
        }
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The exponent.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// One rank in `[0, n)`, 0 the hottest.
    #[inline]
    pub fn sample(&self, rng: &mut SimRng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            // u is uniform in (h_integral_x1, h_integral_n].
            let x = h_integral_inverse(u, self.theta);
            // Round to the nearest integer in [1, n]; `as` saturates (NaN -> 0).
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.s || u >= h_integral(kf + 0.5, self.theta) - h(kf, self.theta) {
                return k - 1;
            }
        }
    }

    /// Probability of rank `rank` (0-based); 0 outside `[0, n)`.
    pub fn pmf(&self, rank: u64) -> f64 {
        if rank >= self.n {
            return 0.0;
        }
        h(rank as f64 + 1.0, self.theta) / harmonic(self.n, self.theta)
    }

    /// Probability that a sample falls in the hottest `k` ranks (`0..k`).
    pub fn cdf(&self, k: u64) -> f64 {
        if k == 0 {
            return 0.0;
        }
        if k >= self.n {
            return 1.0;
        }
        (harmonic(k, self.theta) / harmonic(self.n, self.theta)).min(1.0)
    }

    /// The fewest hottest ranks that together receive at least `coverage` of all samples
    /// (`coverage` is clamped to [0, 1]; 0 gives 0, 1 gives `n`).
    pub fn hot_prefix(&self, coverage: f64) -> u64 {
        let coverage = if coverage.is_nan() { 0.0 } else { coverage.clamp(0.0, 1.0) };
        if coverage <= 0.0 {
            return 0;
        }
        if coverage >= 1.0 {
            return self.n;
        }
        let total = harmonic(self.n, self.theta);
        let (mut lo, mut hi) = (1u64, self.n);
        // Smallest k in [lo, hi] with H(k) >= coverage * H(n); H is increasing in k.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if harmonic(mid, self.theta) >= coverage * total {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

/// Generalised harmonic number `H(k, theta) = sum_{i=1..=k} i^-theta`: exact summation of
/// the first terms, then Euler-Maclaurin (error far below 1e-12 relative).
fn harmonic(k: u64, theta: f64) -> f64 {
    const M: u64 = 64;
    let head: f64 = (1..=k.min(M)).map(|i| h(i as f64, theta)).sum();
    if k <= M {
        return head;
    }
    let (m, kf) = (M as f64, k as f64);
    let integral = h_integral(kf, theta) - h_integral(m, theta);
    // f(x) = x^-theta; f'(x) = -theta x^-(theta+1); f'''(x) = -theta(theta+1)(theta+2) x^-(theta+3).
    let f = |x: f64| h(x, theta);
    let d1 = |x: f64| -theta * h(x, theta + 1.0);
    let d3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * h(x, theta + 3.0);
    head + integral + (f(kf) - f(m)) / 2.0 + (d1(kf) - d1(m)) / 12.0 - (d3(kf) - d3(m)) / 720.0
}

/// `h(x) = x^-theta`.
#[inline]
fn h(x: f64, theta: f64) -> f64 {
    exp(-theta * ln(x))
}

/// `H(x) = (x^(1-theta) - 1) / (1 - theta)`, an antiderivative of `h` (`ln x` at theta 1).
#[inline]
fn h_integral(x: f64, theta: f64) -> f64 {
    let log_x = ln(x);
    helper2((1.0 - theta) * log_x) * log_x
}

/// Inverse of [`h_integral`].
#[inline]
fn h_integral_inverse(x: f64, theta: f64) -> f64 {
    let t = (x * (1.0 - theta)).max(-1.0);
    exp(helper1(t) * x)
}

/// `ln(1 + x) / x`, continuous at 0.
#[inline]
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        ln_1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, continuous at 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        exp_m1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// `ln(1 + x)` accurate near 0 (Goldberg's trick: the rounding error of `1 + x` cancels).
#[inline]
fn ln_1p(x: f64) -> f64 {
    let u = 1.0 + x;
    if u == 1.0 {
        x
    } else {
        ln(u) * (x / (u - 1.0))
    }
}

/// `exp(x) - 1` accurate near 0 (Kahan's trick).
#[inline]
fn exp_m1(x: f64) -> f64 {
    let u = exp(x);
    if u == 1.0 {
        x
    } else if u - 1.0 == -1.0 {
        -1.0
    } else if u.is_infinite() {
        u
    } else {
        (u - 1.0) * (x / ln(u))
    }
}

/// Natural logarithm, fdlibm's `__ieee754_log` (error < 1 ulp), in plain Rust.
pub(crate) fn ln(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const LG1: f64 = 6.666_666_666_666_735_130e-01;
    const LG2: f64 = 3.999_999_999_940_941_908e-01;
    const LG3: f64 = 2.857_142_874_366_239_149e-01;
    const LG4: f64 = 2.222_219_843_214_978_396e-01;
    const LG5: f64 = 1.818_357_216_161_805_012e-01;
    const LG6: f64 = 1.531_383_769_920_937_332e-01;
    const LG7: f64 = 1.479_819_860_511_658_591e-01;

    let mut x = x;
    let mut bits = x.to_bits();
    let mut hx = (bits >> 32) as u32;
    let mut k: i32 = 0;
    if hx < 0x0010_0000 || (hx >> 31) != 0 {
        if bits << 1 == 0 {
            return f64::NEG_INFINITY; // ln(+-0)
        }
        if (hx >> 31) != 0 {
            return f64::NAN; // ln(negative)
        }
        // Subnormal: scale up.
        k -= 54;
        x *= f64::from_bits(0x4350_0000_0000_0000); // 2^54
        bits = x.to_bits();
        hx = (bits >> 32) as u32;
    } else if hx >= 0x7ff0_0000 {
        return x; // inf or NaN
    } else if hx == 0x3ff0_0000 && bits << 32 == 0 {
        return 0.0;
    }

    // Reduce x into [sqrt(2)/2, sqrt(2)].
    hx = hx.wrapping_add(0x3ff0_0000 - 0x3fe6_a09e);
    k += (hx >> 20) as i32 - 0x3ff;
    hx = (hx & 0x000f_ffff) + 0x3fe6_a09e;
    bits = ((hx as u64) << 32) | (bits & 0xffff_ffff);
    x = f64::from_bits(bits);

    let f = x - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    let dk = k as f64;
    s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
}

/// Exponential, fdlibm's `__ieee754_exp` (error < 1 ulp), in plain Rust.
pub(crate) fn exp(x: f64) -> f64 {
    const HALF: [f64; 2] = [0.5, -0.5];
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const INV_LN2: f64 = 1.442_695_040_888_963_387_00e+00;
    const P1: f64 = 1.666_666_666_666_660_190_37e-01;
    const P2: f64 = -2.777_777_777_701_559_338_42e-03;
    const P3: f64 = 6.613_756_321_437_934_361_17e-05;
    const P4: f64 = -1.653_390_220_546_525_153_90e-06;
    const P5: f64 = 4.138_136_797_057_238_460_39e-08;

    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_383_973_096 {
        return f64::INFINITY;
    }
    if x < -745.133_219_101_941_108_420 {
        return 0.0;
    }
    let bits = x.to_bits();
    let sign = (bits >> 63) as usize;
    let hx = ((bits >> 32) as u32) & 0x7fff_ffff;

    let (hi, lo, k, xr);
    if hx > 0x3fd6_2e42 {
        // |x| > 0.5 ln 2
        k = if hx >= 0x3ff0_a2b2 {
            // |x| >= 1.5 ln 2
            (INV_LN2 * x + HALF[sign]) as i32
        } else {
            1 - 2 * sign as i32
        };
        let kf = k as f64;
        hi = x - kf * LN2_HI; // exact
        lo = kf * LN2_LO;
        xr = hi - lo;
    } else if hx > 0x3e30_0000 {
        // |x| > 2^-28
        k = 0;
        hi = x;
        lo = 0.0;
        xr = x;
    } else {
        return 1.0 + x;
    }

    let xx = xr * xr;
    let c = xr - xx * (P1 + xx * (P2 + xx * (P3 + xx * (P4 + xx * P5))));
    let y = 1.0 + (xr * c / (2.0 - c) - lo + hi);
    if k == 0 {
        y
    } else {
        scalbn(y, k)
    }
}

/// `y * 2^n` without overflow in the intermediate power (musl's `scalbn`).
fn scalbn(mut y: f64, mut n: i32) -> f64 {
    let p1023 = f64::from_bits(0x7fe0_0000_0000_0000); // 2^1023
    let m1022_53 = f64::from_bits(0x0360_0000_0000_0000); // 2^-1022 * 2^53 = 2^-969
    if n > 1023 {
        y *= p1023;
        n -= 1023;
        if n > 1023 {
            y *= p1023;
            n -= 1023;
            n = n.min(1023);
        }
    } else if n < -1022 {
        y *= m1022_53;
        n += 1022 - 53;
        if n < -1022 {
            y *= m1022_53;
            n += 1022 - 53;
            n = n.max(-1022);
        }
    }
    y * f64::from_bits(((0x3ff + n) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel_err(a: f64, b: f64) -> f64 {
        if a == b {
            0.0
        } else {
            ((a - b) / b).abs()
        }
    }

    #[test]
    fn portable_ln_and_exp_match_std_closely() {
        let mut r = SimRng::new(1);
        for _ in 0..20_000 {
            // Magnitudes from 1e-300 to 1e300.
            let x = exp((r.next_f64() - 0.5) * 1380.0);
            assert!(rel_err(ln(x), x.ln()) < 1e-15 || (ln(x) - x.ln()).abs() < 1e-15, "ln {x}");
            let y = (r.next_f64() - 0.5) * 1400.0;
            assert!(rel_err(exp(y), y.exp()) < 1e-15, "exp {y}: {} vs {}", exp(y), y.exp());
        }
        for x in [1.0, 2.0, 0.5, 1e-310, f64::MIN_POSITIVE, f64::MAX, 1.0 + 1e-12] {
            assert!(rel_err(ln(x), x.ln()) < 1e-15 || (ln(x) - x.ln()).abs() < 1e-20, "ln {x}");
        }
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert!(ln(-1.0).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(1000.0), f64::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
        assert!(rel_err(exp(-744.0), (-744.0f64).exp()) < 1e-6); // subnormal result
        assert!(rel_err(exp(709.0), 709.0f64.exp()) < 1e-15);
    }

    #[test]
    fn ln_1p_and_exp_m1_are_accurate_near_zero() {
        for x in [1e-12, -1e-12, 1e-6, -1e-6, 0.1, -0.1, 3.0, -0.999] {
            assert!(rel_err(ln_1p(x), x.ln_1p()) < 1e-14, "ln_1p {x}");
            assert!(rel_err(exp_m1(x), x.exp_m1()) < 1e-14, "exp_m1 {x}");
        }
    }

    #[test]
    fn samples_stay_in_range() {
        let mut r = SimRng::new(2);
        for &(n, theta) in &[
            (1u64, 0.9),
            (2, 0.9),
            (10, 1.0),
            (1000, 0.01),
            (1000, 0.5),
            (1 << 20, 0.99),
            (1 << 26, 1.2),
            (1000, 5.0),
            (1000, 100.0),
        ] {
            let z = Zipf::new(n, theta);
            for _ in 0..20_000 {
                assert!(z.sample(&mut r) < n, "n {n} theta {theta}");
            }
        }
    }

    #[test]
    fn degenerate_parameters_do_not_panic() {
        let mut r = SimRng::new(3);
        let z = Zipf::new(0, 0.9);
        assert_eq!(z.sample(&mut r), 0);
        for theta in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
            let z = Zipf::new(100, theta);
            for _ in 0..1000 {
                assert!(z.sample(&mut r) < 100, "theta {theta}");
            }
        }
    }

    #[test]
    fn theta_zero_is_uniform() {
        let mut r = SimRng::new(4);
        let z = Zipf::new(4, 0.0);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    /// Sample frequencies of the first ranks and of decade buckets against the exact pmf.
    fn check_against_theory(n: u64, theta: f64, seed: u64) {
        let z = Zipf::new(n, theta);
        let mut r = SimRng::new(seed);
        let draws = 400_000u64;
        let mut head = [0u64; 8];
        let mut buckets = [0u64; 8]; // ranks [10^i - 1, 10^(i+1) - 1)
        for _ in 0..draws {
            let k = z.sample(&mut r);
            if (k as usize) < head.len() {
                head[k as usize] += 1;
            }
            let mut b = 0;
            while 10u64.pow(b as u32 + 1) - 1 <= k {
                b += 1;
            }
            buckets[b] += 1;
        }
        // Frequencies decrease with rank.
        for w in head.windows(2) {
            assert!(w[0] > w[1], "theta {theta}: {head:?}");
        }
        // Head ranks within 5% (relative) of theory.
        for (k, &c) in head.iter().enumerate() {
            let expected = z.pmf(k as u64) * draws as f64;
            assert!(
                rel_err(c as f64, expected) < 0.05,
                "theta {theta} rank {k}: {c} vs {expected:.0}"
            );
        }
        // Decade buckets within 3% of theory (where they hold enough mass to tell).
        for (b, &c) in buckets.iter().enumerate() {
            let lo = 10u64.pow(b as u32) - 1;
            let hi = (10u64.pow(b as u32 + 1) - 1).min(n);
            if lo >= n {
                break;
            }
            let expected = (z.cdf(hi) - z.cdf(lo)) * draws as f64;
            if expected > 2_000.0 {
                assert!(
                    rel_err(c as f64, expected) < 0.03,
                    "theta {theta} bucket {b}: {c} vs {expected:.0}"
                );
            }
        }
    }

    #[test]
    fn frequencies_match_theory_for_theta_0_9() {
        check_against_theory(1 << 20, 0.9, 10);
    }

    #[test]
    fn frequencies_match_theory_for_theta_1_2() {
        check_against_theory(1 << 20, 1.2, 11);
    }

    #[test]
    fn frequencies_match_theory_for_theta_1() {
        check_against_theory(100_000, 1.0, 12);
    }

    #[test]
    fn harmonic_matches_direct_sum() {
        for theta in [0.5, 0.9, 1.0, 1.0 + 1e-10, 1.2, 3.0] {
            for k in [1u64, 10, 64, 65, 100, 12_345, 1 << 20] {
                let direct: f64 = (1..=k).map(|i| (i as f64).powf(-theta)).sum();
                let approx = harmonic(k, theta);
                assert!(rel_err(approx, direct) < 1e-11, "theta {theta} k {k}");
            }
        }
    }

    #[test]
    fn cdf_and_pmf_are_consistent() {
        let z = Zipf::new(1000, 0.9);
        let sum: f64 = (0..1000).map(|k| z.pmf(k)).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        let head: f64 = (0..100).map(|k| z.pmf(k)).sum();
        assert!((z.cdf(100) - head).abs() < 1e-9);
        assert_eq!(z.cdf(0), 0.0);
        assert_eq!(z.cdf(1000), 1.0);
        assert_eq!(z.pmf(1000), 0.0);
    }

    #[test]
    fn hot_prefix_is_smallest_covering_prefix() {
        let z = Zipf::new(1 << 18, 0.9);
        let k = z.hot_prefix(0.9);
        assert!(z.cdf(k) >= 0.9 && z.cdf(k - 1) < 0.9, "{k}");
        // Theory (continuous approximation) puts it near 47% of the ranks.
        assert!((100_000..140_000).contains(&k), "{k}");
        assert_eq!(z.hot_prefix(0.0), 0);
        assert_eq!(z.hot_prefix(1.0), 1 << 18);
        assert_eq!(z.hot_prefix(f64::NAN), 0);
        let steep = Zipf::new(1 << 18, 1.2);
        assert!(steep.hot_prefix(0.9) < k / 10);
    }

    #[test]
    fn sampling_is_deterministic() {
        let z = Zipf::new(1 << 20, 0.9);
        let mut a = SimRng::new(99);
        let mut b = SimRng::new(99);
        let xs: Vec<u64> = (0..1000).map(|_| z.sample(&mut a)).collect();
        let ys: Vec<u64> = (0..1000).map(|_| z.sample(&mut b)).collect();
        assert_eq!(xs, ys);
    }
}
