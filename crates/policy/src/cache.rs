//! Gemini's cache quotas (Soundararajan et al., VLDB 2008) for application pools: each tenant with an SLO and a pool whose agent reports a miss-ratio curve gets the share of a pool budget that maximises the summed utility of the tenants' latencies.
//!
//! **Utilities** (the paper's, its values the defaults): a strict-SLO tenant's utility is 0
//! while its mean latency r ≤ D·(1 + slack), then falls linearly to U_min at D' (and stays
//! there); a best-effort tenant's is 0 at D' and rises linearly to U_max as r falls to 0.
//! D' = 3500 µs (the disk), U_min = −100, U_max = 100. [`utility`] is the one definition: the
//! cache simulator's partition search (`memtide-cache`) uses it too.
//!
//! **Latency** of a pool of q pages: its miss ratio m(q), read off the agent's curve
//! (`memtide_model::MissCurve`), gives r(q) = (1 − m)·hit + m·miss under [`PoolLatencies`].
//!
//! **Search.** The controller moves one level, the pool itself: Gemini's second level, a
//! storage server's cache, has no per-tenant quotas in any world memtide drives (the cache
//! simulator, `memtide cache partition`, searches both). With one level the problem is a
//! knapsack over a grid: the budget in `steps` equal steps, each tenant between its pool's
//! bounds, and dynamic programming finds the exact optimum (IDEAL, not a hill climb) in
//! O(n · steps²): 4 tenants on 64 steps (the default) are 16,384 additions, so it runs every tick.
//!
//! **Strict first.** The answer maximises the strict tenants' summed utility first, then the
//! best-effort tenants', then saves the most predicted misses (each tenant's miss ratio
//! weighted by its requests), then uses the fewest pages: strict tenants meet their SLOs
//! whenever the budget allows, and what is left goes where it is worth most. The paper sums
//! all utilities in one, and its linear penalty can then trade a strict tenant's few µs over
//! its target for a larger best-effort gain (the cache simulator's DYNAMIC does, as the paper
//! defines it: 501 µs against 500 in docs/reproducing.md); a controller holding tenants to
//! their SLOs does not.
//!
//! **Guarantees.** The quotas add up to at most the budget; each lies within its tenant's
//! bounds; when even the bounds' lower ends do not fit, each tenant gets its lower end (the
//! floor comes first) and [`Quotas::over_budget`] says so.

use memtide_model::curve::{DEFAULT_HIT_US, DEFAULT_MISS_US, DEFAULT_QUOTA_STEPS};
use memtide_model::{MissCurve, Pages, Slo};

/// The utilities' constants.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct UtilityScale {
    /// D': the latency at which a strict tenant's penalty is full and a best-effort one's
    /// reward nothing (the paper: the average disk access, 3500 µs).
    pub worst_us: f64,
    pub u_min: f64,
    pub u_max: f64,
}

impl Default for UtilityScale {
    fn default() -> UtilityScale {
        UtilityScale {
            worst_us: 3500.0,
            u_min: -100.0,
            u_max: 100.0,
        }
    }
}

/// The utility of latency `r_us` under `slo`.
pub fn utility(slo: Slo, r_us: f64, k: &UtilityScale) -> f64 {
    match slo {
        Slo::Strict { target_us, slack } => {
            let met = target_us * (1.0 + slack);
            if r_us <= met {
                0.0
            } else if r_us >= k.worst_us || k.worst_us <= met {
                k.u_min
            } else {
                k.u_min * (r_us - met) / (k.worst_us - met)
            }
        }
        Slo::BestEffort => {
            if r_us >= k.worst_us {
                0.0
            } else {
                k.u_max * (k.worst_us - r_us.max(0.0)) / k.worst_us
            }
        }
    }
}

/// What a pool's hit and miss cost.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct PoolLatencies {
    /// A request served by the pool.
    pub hit_us: f64,
    /// A request the pool misses: a read from below (the paper's D', the disk).
    pub miss_us: f64,
}

impl Default for PoolLatencies {
    /// The cache simulator's: a buffer-pool hit 2 µs, a disk read 3500 µs.
    fn default() -> PoolLatencies {
        PoolLatencies {
            hit_us: DEFAULT_HIT_US,
            miss_us: DEFAULT_MISS_US,
        }
    }
}

impl PoolLatencies {
    /// The mean latency at miss ratio `m`.
    pub fn mean_us(&self, m: f64) -> f64 {
        (1.0 - m) * self.hit_us + m * self.miss_us
    }
}

/// How the pool budget is divided.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QuotaSettings {
    /// The pages the tenants' pools share.
    pub budget: Pages,
    /// Grid steps the budget is cut into.
    pub steps: u32,
    pub latencies: PoolLatencies,
    pub scale: UtilityScale,
}

impl QuotaSettings {
    /// The settings for `budget`, the rest the defaults.
    pub fn new(budget: Pages) -> QuotaSettings {
        QuotaSettings::of(budget, DEFAULT_HIT_US, DEFAULT_MISS_US, DEFAULT_QUOTA_STEPS)
    }

    /// The settings a configuration file gives, with the paper's utilities.
    pub fn of(budget: Pages, hit_us: f64, miss_us: f64, steps: u32) -> QuotaSettings {
        QuotaSettings {
            budget,
            steps,
            latencies: PoolLatencies { hit_us, miss_us },
            scale: UtilityScale::default(),
        }
    }

    /// The pages of one grid step (at least one).
    pub fn step(&self) -> Pages {
        Pages((self.budget.0 / u64::from(self.steps.max(1))).max(1))
    }
}

/// One tenant of the search.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QuotaTenant {
    pub slo: Slo,
    pub curve: MissCurve,
    /// The pool's bounds: the smallest and largest quota it may get.
    pub min: Pages,
    pub max: Pages,
    /// Its requests in the last period, weighting its misses in ties (at least 1 counts).
    pub requests: u64,
}

/// One tenant's answer.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Quota {
    pub pool: Pages,
    /// The miss ratio its curve gives at `pool`.
    pub miss_ratio: f64,
    /// The mean latency its curve predicts at `pool`.
    pub latency_us: f64,
    pub utility: f64,
}

/// The search's answer and its buffers (kept between ticks: a search allocates nothing once
/// warm).
#[derive(Clone, Debug, Default)]
pub struct Quotas {
    /// One per tenant, in the order given.
    pub quotas: Vec<Quota>,
    /// The tenants' lower bounds alone exceeded the budget: each got its lower bound.
    pub over_budget: bool,
    /// best[j]: the best score of the tenants so far using j steps.
    best: Vec<Score>,
    next: Vec<Score>,
    /// choice[i * (steps + 1) + j]: tenant i's steps in the best use of j steps.
    choice: Vec<u32>,
}

/// What a choice of quotas is worth, compared in this order (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq)]
struct Score {
    /// The strict tenants' summed utility (0 when every SLO is met).
    strict: f64,
    /// The best-effort tenants'.
    best_effort: f64,
    /// Predicted misses, each tenant's miss ratio times its requests.
    misses: f64,
}

impl Score {
    const ZERO: Score = Score {
        strict: 0.0,
        best_effort: 0.0,
        misses: 0.0,
    };
    /// No choice yet.
    const NONE: Score = Score {
        strict: f64::NEG_INFINITY,
        best_effort: f64::NEG_INFINITY,
        misses: f64::INFINITY,
    };

    fn plus(self, o: Score) -> Score {
        Score {
            strict: self.strict + o.strict,
            best_effort: self.best_effort + o.best_effort,
            misses: self.misses + o.misses,
        }
    }

    /// More strict utility, then more best-effort utility, then fewer misses. Sums of the
    /// same terms in different orders differ in the last bits, so ties are within a tolerance.
    fn beats(self, o: Score) -> bool {
        const TIE: f64 = 1e-9;
        let order = |a: f64, b: f64| {
            if a > b + TIE {
                Some(true)
            } else if a < b - TIE {
                Some(false)
            } else {
                None
            }
        };
        order(self.strict, o.strict)
            .or_else(|| order(self.best_effort, o.best_effort))
            .or_else(|| order(o.misses, self.misses))
            .unwrap_or(false)
    }
}

impl Quotas {
    /// Divides `settings.budget` among `tenants` (see the module docs).
    pub fn search(&mut self, tenants: &[QuotaTenant], settings: &QuotaSettings) {
        let steps = settings.steps.max(1) as usize;
        let step = settings.step();
        let n = tenants.len();
        let bounds = |t: &QuotaTenant| {
            let lo = (t.min.0.div_ceil(step.0) as usize).min(steps);
            let hi = ((t.max.0 / step.0) as usize).min(steps).max(lo);
            (lo, hi)
        };
        let value = |t: &QuotaTenant, k: usize| {
            let q = quota(t, Pages(step.0 * k as u64), settings);
            let misses = q.miss_ratio * t.requests.max(1) as f64;
            match t.slo {
                Slo::Strict { .. } => Score {
                    strict: q.utility,
                    best_effort: 0.0,
                    misses,
                },
                Slo::BestEffort => Score {
                    strict: 0.0,
                    best_effort: q.utility,
                    misses,
                },
            }
        };
        let lows: usize = tenants.iter().map(|t| bounds(t).0).sum();
        self.quotas.clear();
        self.over_budget = lows > steps;
        if self.over_budget {
            for t in tenants {
                let k = bounds(t).0;
                self.quotas
                    .push(quota(t, Pages(step.0 * k as u64), settings));
            }
            return;
        }
        self.best.clear();
        self.best.resize(steps + 1, Score::NONE);
        self.best[0] = Score::ZERO;
        self.choice.clear();
        self.choice.resize(n * (steps + 1), 0);
        for (i, t) in tenants.iter().enumerate() {
            let (lo, hi) = bounds(t);
            self.next.clear();
            self.next.resize(steps + 1, Score::NONE);
            for k in lo..=hi {
                let v = value(t, k);
                for j in 0..=steps - k {
                    let before = self.best[j];
                    if before == Score::NONE {
                        continue;
                    }
                    let total = before.plus(v);
                    if total.beats(self.next[j + k]) {
                        self.next[j + k] = total;
                        self.choice[i * (steps + 1) + j + k] = k as u32;
                    }
                }
            }
            std::mem::swap(&mut self.best, &mut self.next);
        }
        // The best over every use of the budget, the fewest steps among equals.
        let mut used = 0;
        for j in 1..=steps {
            if self.best[j].beats(self.best[used]) {
                used = j;
            }
        }
        // Walked back from the last tenant, then put in the tenants' order.
        for i in (0..n).rev() {
            let k = self.choice[i * (steps + 1) + used] as usize;
            self.quotas
                .push(quota(&tenants[i], Pages(step.0 * k as u64), settings));
            used -= k;
        }
        self.quotas.reverse();
    }
}

/// What `pool` gives `t`: its miss ratio, latency and utility.
fn quota(t: &QuotaTenant, pool: Pages, settings: &QuotaSettings) -> Quota {
    let miss_ratio = t.curve.miss_ratio(pool);
    let latency_us = settings.latencies.mean_us(miss_ratio);
    Quota {
        pool,
        miss_ratio,
        latency_us,
        utility: utility(t.slo, latency_us, &settings.scale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: Slo = Slo::Strict {
        target_us: 500.0,
        slack: 0.0,
    };

    /// A curve falling linearly from all misses to `floor` at `knee` pages, flat after.
    fn linear(knee: u64, floor: f64) -> MissCurve {
        MissCurve::new([(Pages(knee), floor), (Pages(knee * 4), floor)]).unwrap()
    }

    fn tenant(slo: Slo, curve: MissCurve) -> QuotaTenant {
        QuotaTenant {
            slo,
            curve,
            min: Pages::ZERO,
            max: Pages(1 << 30),
            requests: 1000,
        }
    }

    #[test]
    fn a_strict_tenant_gets_what_meets_its_slo_and_best_effort_the_rest() {
        let settings = QuotaSettings::new(Pages(6400));
        let strict = Slo::Strict {
            target_us: 500.0,
            slack: 0.1,
        };
        // The strict tenant meets 550 µs at a miss ratio of 548/3498 = 15.7%: 84.3% of its
        // knee's 4000 pages, 3373, so 34 steps of 100.
        let tenants = [
            tenant(strict, linear(4000, 0.0)),
            tenant(Slo::BestEffort, linear(8000, 0.0)),
        ];
        let mut q = Quotas::default();
        q.search(&tenants, &settings);
        assert!(!q.over_budget);
        assert_eq!(q.quotas[0].pool, Pages(3400), "{:?}", q.quotas);
        assert!(q.quotas[0].latency_us <= 550.0);
        assert_eq!(q.quotas[0].utility, 0.0);
        assert_eq!(q.quotas[1].pool, Pages(3000));
        assert!(q.quotas[1].utility > 0.0);
    }

    #[test]
    fn a_strict_slo_is_met_before_any_best_effort_gain() {
        // Without slack the strict tenant needs 35 steps. The paper's summed utilities would
        // give the 35th to the best-effort tenant (it buys the strict one 0.89 and the other
        // 1.25); strict first, it stays with the strict tenant.
        let settings = QuotaSettings::new(Pages(6400));
        let tenants = [
            tenant(STRICT, linear(4000, 0.0)),
            tenant(Slo::BestEffort, linear(8000, 0.0)),
        ];
        let mut q = Quotas::default();
        q.search(&tenants, &settings);
        assert_eq!(q.quotas[0].pool, Pages(3500), "{:?}", q.quotas);
        assert!(q.quotas[0].latency_us <= 500.0);
        assert_eq!(q.quotas[1].pool, Pages(2900));
    }

    #[test]
    fn the_search_is_exact_against_every_split() {
        let settings = QuotaSettings {
            steps: 20,
            ..QuotaSettings::new(Pages(2000))
        };
        let tenants = [
            tenant(STRICT, linear(900, 0.05)),
            tenant(Slo::BestEffort, linear(1500, 0.1)),
            tenant(Slo::BestEffort, linear(600, 0.3)),
        ];
        let mut q = Quotas::default();
        q.search(&tenants, &settings);
        let used: u64 = q.quotas.iter().map(|x| x.pool.0).sum();
        assert!(used <= 2000);
        let found = (
            q.quotas[0].utility,
            q.quotas[1].utility + q.quotas[2].utility,
        );
        // Every split, strict utility first, then best effort's.
        let u = |i: usize, k: u64| quota(&tenants[i], Pages(k * 100), &settings).utility;
        let mut best = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        for a in 0..=20 {
            for b in 0..=20 - a {
                for c in 0..=20 - a - b {
                    let here = (u(0, a), u(1, b) + u(2, c));
                    if here.0 > best.0 + 1e-9 || (here.0 >= best.0 - 1e-9 && here.1 > best.1) {
                        best = here;
                    }
                }
            }
        }
        assert!(
            (found.0 - best.0).abs() < 1e-9,
            "{found:?} against {best:?}"
        );
        assert!(
            (found.1 - best.1).abs() < 1e-9,
            "{found:?} against {best:?}"
        );
    }

    #[test]
    fn bounds_hold_and_lower_bounds_over_the_budget_are_each_given() {
        let settings = QuotaSettings::new(Pages(6400));
        let mut a = tenant(STRICT, linear(4000, 0.0));
        a.max = Pages(1000);
        let mut b = tenant(Slo::BestEffort, linear(8000, 0.0));
        b.min = Pages(2000);
        let mut q = Quotas::default();
        q.search(&[a, b], &settings);
        assert_eq!(q.quotas[0].pool, Pages(1000));
        assert!(q.quotas[1].pool >= Pages(2000));
        assert!(q.quotas[0].utility < 0.0, "held under its SLO by its max");

        b.min = Pages(6000);
        a.min = Pages(1000);
        q.search(&[a, b], &settings);
        assert!(q.over_budget);
        assert_eq!(q.quotas[0].pool, Pages(1000));
        assert_eq!(q.quotas[1].pool, Pages(6000));
    }

    #[test]
    fn among_equal_utilities_the_pages_go_where_they_save_misses() {
        // Two strict tenants meeting 2000 µs (a miss ratio of 57%) from 18 steps each: of the
        // 28 steps to spare, the one with more requests takes what saves all its misses (22),
        // the other the 6 left.
        let settings = QuotaSettings::new(Pages(6400));
        let slo = Slo::Strict {
            target_us: 2000.0,
            slack: 0.0,
        };
        let mut a = tenant(slo, linear(4000, 0.0));
        let mut b = tenant(slo, linear(4000, 0.0));
        a.requests = 10;
        b.requests = 10_000;
        let mut q = Quotas::default();
        q.search(&[a, b], &settings);
        assert!(q.quotas.iter().all(|x| x.utility == 0.0));
        assert_eq!(q.quotas[0].pool, Pages(2400), "{:?}", q.quotas);
        assert_eq!(q.quotas[1].pool, Pages(4000), "{:?}", q.quotas);
    }

    #[test]
    fn utilities_follow_the_paper_s_shapes() {
        let k = UtilityScale::default();
        let strict = Slo::Strict {
            target_us: 500.0,
            slack: 0.1,
        };
        assert_eq!(utility(strict, 540.0, &k), 0.0, "within the slack");
        assert_eq!(utility(strict, 3500.0, &k), -100.0);
        assert!(
            (utility(strict, 2025.0, &k) + 50.0).abs() < 1e-9,
            "halfway down"
        );
        assert_eq!(utility(Slo::BestEffort, 3500.0, &k), 0.0);
        assert_eq!(utility(Slo::BestEffort, 1750.0, &k), 50.0);
        assert_eq!(utility(Slo::BestEffort, 0.0, &k), 100.0);
    }
}
