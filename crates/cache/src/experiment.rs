//! One Gemini experiment end to end: applications' requests, their exact latency surfaces over a quota grid, the partition found by hill climbing (DYNAMIC) and by exhaustive search (IDEAL), and the paper's baselines (SHARED, CONSERVATIVE, PROFILE, MRC), each with every application's latency and utility.
//!
//! - **Surfaces** are computed once per application (in parallel, one thread each): under
//!   DEMOTE from one exact curve, under LRU/LRU from one replay per buffer quota
//!   ([`Surface`]).
//! - **Partitioned plans** (CONSERVATIVE, MRC, DYNAMIC, IDEAL) read their latencies off the
//!   surfaces: with quotas at both levels each application's cache is its own, and the surface
//!   is exact (tested against the request-by-request simulation).
//! - **Plans with a shared level** (SHARED: both; PROFILE: the storage cache) depend on how the
//!   applications' requests interleave, so they are simulated request by request
//!   ([`TwoLevel`]): application i's k-th of n_i requests comes at time (k + ½)/n_i, so each
//!   runs at an even rate over the same span.
//! - **Isolated**: each application alone with both whole caches (the paper's ISOLATED bars),
//!   the surface's far corner.
//!
//! Costs: memory 8 bytes a request (the requests are held: LRU/LRU and the shared simulations
//! replay them); time O(grid × requests × log blocks) for an LRU/LRU surface, O(requests ×
//! log blocks) for a DEMOTE one, O(requests) per simulated plan, and the searches'
//! ([`crate::partition`]).

use crate::mrc::MissRatioCurve;
use crate::partition::{
    conservative, hill_climb, ideal, mrc, profile, sampled_search, utility, Found, Problem, Quotas,
    SampledSearch, Sampling, Slo, Tenant, UtilityScale,
};
use crate::surface::Surface;
use crate::twolevel::{Counts, Latencies, Level, Policy, TwoLevel};

/// One application: its requests (block numbers, its own) and its SLO.
#[derive(Clone, Debug)]
pub struct App {
    pub name: String,
    pub slo: Slo,
    pub blocks: Vec<u64>,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub policy: Policy,
    /// The buffer pool's and the storage cache's sizes, in blocks.
    pub buffer_blocks: u64,
    pub storage_blocks: u64,
    /// Quota settings per level, 0 to the whole level.
    pub grid: usize,
    pub latencies: Latencies,
    pub scale: UtilityScale,
    /// Hill climbing's random starts, and its seed.
    pub restarts: usize,
    pub seed: u64,
    /// CONSERVATIVE's minimum for each best-effort application, in grid steps (the paper: 32
    /// MB).
    pub conservative_steps: usize,
    pub apps: Vec<App>,
}

/// How a plan divides one level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Division {
    /// Each application's quota, in grid steps.
    Steps(Vec<usize>),
    Shared,
}

/// The schemes compared, in the paper's words.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scheme {
    Shared,
    Conservative,
    Profile,
    Mrc,
    /// Gemini's: hill climbing with random restarts on the surfaces.
    Dynamic,
    Ideal,
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Shared => "SHARED",
            Scheme::Conservative => "CONSERVATIVE",
            Scheme::Profile => "PROFILE",
            Scheme::Mrc => "MRC",
            Scheme::Dynamic => "DYNAMIC",
            Scheme::Ideal => "IDEAL",
        }
    }
}

/// One scheme's plan and what each application gets from it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub scheme: Scheme,
    pub buffer: Division,
    pub storage: Division,
    /// Each application's requests by level.
    pub counts: Vec<Counts>,
    pub latency_us: Vec<f64>,
    pub utility: Vec<f64>,
}

impl Plan {
    pub fn total_utility(&self) -> f64 {
        self.utility.iter().sum()
    }
}

/// Everything an experiment found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Each application's surface (on the grid, [`Experiment::grid_blocks`]) and SLO.
    pub tenants: Vec<Tenant>,
    /// Each application alone with both whole caches.
    pub isolated_us: Vec<f64>,
    /// In the order of [`Scheme`].
    pub plans: Vec<Plan>,
    pub dynamic: Found,
    pub ideal: Found,
    /// Gemini's search as the paper ran it, knowing the surfaces only where it sampled them:
    /// greedy and random sampling.
    pub greedy: SampledSearch,
    pub random: SampledSearch,
}

impl Outcome {
    pub fn plan(&self, scheme: Scheme) -> &Plan {
        self.plans
            .iter()
            .find(|p| p.scheme == scheme)
            .expect("every scheme is run")
    }
}

impl Experiment {
    /// The quotas of the grid at one level of `total` blocks: `grid` settings from 0 to all.
    pub fn grid_blocks(&self, total: u64) -> Vec<u64> {
        let n = self.grid.max(2) as u64 - 1;
        (0..=n).map(|i| i * total / n).collect()
    }

    /// Runs every scheme. `progress` hears what is being done.
    pub fn run(&self, progress: &(dyn Fn(&str) + Sync)) -> Outcome {
        let (buffer, storage) = (
            self.grid_blocks(self.buffer_blocks),
            self.grid_blocks(self.storage_blocks),
        );
        progress("surfaces");
        let tenants: Vec<Tenant> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .apps
                .iter()
                .map(|a| {
                    let (buffer, storage) = (&buffer, &storage);
                    s.spawn(move || Tenant {
                        surface: match self.policy {
                            Policy::Demote => {
                                let curve = MissRatioCurve::exact(a.blocks.iter().copied());
                                Surface::demote(&curve, buffer, storage)
                            }
                            Policy::LruLru => Surface::lru_lru(&a.blocks, buffer, storage),
                        },
                        slo: a.slo,
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a surface thread panicked"))
                .collect()
        });
        let p = Problem {
            tenants: &tenants,
            latencies: self.latencies,
            scale: self.scale,
        };
        let (bs, ss) = p.steps();
        let isolated_us = (0..tenants.len())
            .map(|i| p.latency_us(i, bs, ss))
            .collect();
        progress("search");
        let dynamic = hill_climb(&p, self.restarts, self.seed);
        let best = ideal(&p);
        let greedy = sampled_search(&p, Sampling::Greedy, self.restarts, self.seed);
        let random = sampled_search(&p, Sampling::Random, self.restarts, self.seed);
        progress("baselines");
        let plans = vec![
            self.simulated(Scheme::Shared, &p, Division::Shared, Division::Shared),
            self.on_surfaces(
                Scheme::Conservative,
                &p,
                &conservative(&p, self.conservative_steps),
            ),
            self.simulated(
                Scheme::Profile,
                &p,
                Division::Steps(profile(&p)),
                Division::Shared,
            ),
            self.on_surfaces(Scheme::Mrc, &p, &mrc(&p)),
            self.on_surfaces(Scheme::Dynamic, &p, &dynamic.quotas),
            self.on_surfaces(Scheme::Ideal, &p, &best.quotas),
        ];
        Outcome {
            tenants,
            isolated_us,
            plans,
            dynamic,
            ideal: best,
            greedy,
            random,
        }
    }

    /// A partitioned plan, its latencies read off the surfaces.
    fn on_surfaces(&self, scheme: Scheme, p: &Problem, q: &Quotas) -> Plan {
        let counts: Vec<Counts> = p
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| t.surface.counts[q.buffer[i] * t.surface.storage.len() + q.storage[i]])
            .collect();
        self.plan(
            scheme,
            p,
            Division::Steps(q.buffer.clone()),
            Division::Steps(q.storage.clone()),
            counts,
        )
    }

    /// A plan with a shared level, simulated request by request.
    fn simulated(&self, scheme: Scheme, p: &Problem, buffer: Division, storage: Division) -> Plan {
        let level = |d: &Division, total: u64| -> Level {
            match d {
                Division::Shared => Level::Shared(total as usize),
                Division::Steps(steps) => {
                    let grid = self.grid_blocks(total);
                    Level::Partitioned(steps.iter().map(|&k| grid[k] as usize).collect())
                }
            }
        };
        let mut t = TwoLevel::new(
            self.policy,
            self.apps.len(),
            &level(&buffer, self.buffer_blocks),
            &level(&storage, self.storage_blocks),
        );
        for (app, block) in interleaved(&self.apps) {
            t.access(app, block);
        }
        let counts = t.counts().to_vec();
        self.plan(scheme, p, buffer, storage, counts)
    }

    fn plan(
        &self,
        scheme: Scheme,
        p: &Problem,
        buffer: Division,
        storage: Division,
        counts: Vec<Counts>,
    ) -> Plan {
        let latency_us: Vec<f64> = counts
            .iter()
            .map(|c| c.mean_latency_us(&self.latencies))
            .collect();
        let utility = latency_us
            .iter()
            .zip(p.tenants)
            .map(|(&r, t)| utility(t.slo, r, &self.scale))
            .collect();
        Plan {
            scheme,
            buffer,
            storage,
            counts,
            latency_us,
            utility,
        }
    }
}

/// The applications' requests merged, each at an even rate over one span: application i's
/// k-th of n_i at time (k + ½)/n_i (ties to the lower index).
fn interleaved(apps: &[App]) -> impl Iterator<Item = (usize, u64)> + '_ {
    let mut next = vec![0usize; apps.len()];
    std::iter::from_fn(move || {
        let time = |i: usize, k: usize| (2 * k + 1) as f64 / (2 * apps[i].blocks.len()) as f64;
        let i = (0..apps.len())
            .filter(|&i| next[i] < apps[i].blocks.len())
            .min_by(|&a, &b| time(a, next[a]).total_cmp(&time(b, next[b])))?;
        let block = apps[i].blocks[next[i]];
        next[i] += 1;
        Some((i, block))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{Generator, Pattern};

    #[test]
    fn requests_interleave_at_each_application_s_even_rate() {
        let apps = [
            App {
                name: "a".into(),
                slo: Slo::BestEffort,
                blocks: vec![1, 2],
            },
            App {
                name: "b".into(),
                slo: Slo::BestEffort,
                blocks: vec![10, 11, 12, 13],
            },
        ];
        let got: Vec<(usize, u64)> = interleaved(&apps).collect();
        // a at 1/4, 3/4; b at 1/8, 3/8, 5/8, 7/8.
        assert_eq!(got, [(1, 10), (0, 1), (1, 11), (1, 12), (0, 2), (1, 13)]);
    }

    fn experiment(policy: Policy) -> Experiment {
        let app = |name: &str, slo, pattern: &Pattern, seed| App {
            name: name.into(),
            slo,
            blocks: Generator::new(pattern, seed).take(60_000).collect(),
        };
        Experiment {
            policy,
            buffer_blocks: 2_000,
            storage_blocks: 2_000,
            grid: 11,
            latencies: Latencies::default(),
            scale: UtilityScale::default(),
            restarts: 8,
            seed: 1,
            conservative_steps: 1,
            apps: vec![
                app(
                    "strict",
                    Slo::Strict {
                        target_us: 500.0,
                        slack: 0.0,
                    },
                    &Pattern::Zipf {
                        n: 3_000,
                        theta: 1.0,
                    },
                    1,
                ),
                app(
                    "best effort",
                    Slo::BestEffort,
                    &Pattern::Zipf {
                        n: 5_000,
                        theta: 0.7,
                    },
                    2,
                ),
            ],
        }
    }

    #[test]
    fn partitioned_plans_equal_their_request_by_request_simulation() {
        for policy in [Policy::LruLru, Policy::Demote] {
            let e = experiment(policy);
            let out = e.run(&|_| {});
            let p = Problem {
                tenants: &out.tenants,
                latencies: e.latencies,
                scale: e.scale,
            };
            for plan in &out.plans {
                if let (Division::Steps(b), Division::Steps(s)) = (&plan.buffer, &plan.storage) {
                    let sim = e.simulated(
                        plan.scheme,
                        &p,
                        Division::Steps(b.clone()),
                        Division::Steps(s.clone()),
                    );
                    assert_eq!(sim.counts, plan.counts, "{policy:?} {:?}", plan.scheme);
                }
            }
        }
    }

    #[test]
    fn ideal_is_no_worse_than_any_plan_and_shared_plans_use_both_whole_levels() {
        let out = experiment(Policy::Demote).run(&|_| {});
        let ideal = out.plan(Scheme::Ideal).total_utility();
        for plan in &out.plans {
            if matches!(plan.buffer, Division::Steps(_))
                && matches!(plan.storage, Division::Steps(_))
            {
                assert!(plan.total_utility() <= ideal + 1e-9, "{:?}", plan.scheme);
            }
            let requests: Vec<u64> = plan.counts.iter().map(|c| c.requests()).collect();
            assert_eq!(requests, [60_000, 60_000], "{:?}", plan.scheme);
        }
        assert_eq!(out.ideal.utility, ideal);
        // Alone with everything, each does at least as well as in any plan.
        for plan in &out.plans {
            for (i, &r) in plan.latency_us.iter().enumerate() {
                assert!(out.isolated_us[i] <= r + 1e-9, "{:?} {i}", plan.scheme);
            }
        }
    }
}
