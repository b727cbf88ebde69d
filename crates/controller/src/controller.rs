//! The controller: each tick it updates estimators, tracks the reclamation state, computes share-based targets and chooses mechanisms.

use crate::config::{ConfigError, ControllerConfig};
use crate::host::Host;
use memtide_model::{
    CacheNote, Decision, DiskSpec, HostObservation, Pages, ReclamationState, Resource,
    ResourceState, TaxRate, TenantAction, TenantId, TenantSpec,
};
use memtide_policy::disk;
use memtide_policy::mechanism::{self, ScanCost};
use memtide_policy::{
    ActiveEstimator, AdmissionLedger, AdmissionRefusal, AllocationRequest, Allocator,
    EstimatorInput, LimitRails, PlanInput, PlanMemory, PlanSettings, QuotaSettings, QuotaTenant,
    Quotas, ResourceTracker,
};
use std::time::Duration;

/// Errors from managing the controller's tenants.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControllerError {
    #[error("tenant {0} is already admitted")]
    Duplicate(TenantId),
    #[error("no admitted tenant {0}")]
    Unknown(TenantId),
    #[error("admission refused: {0}")]
    Refused(#[from] AdmissionRefusal),
    #[error("tenant {name}: min {min} is above max {max}")]
    MinAboveMax {
        name: String,
        min: Pages,
        max: Pages,
    },
}

/// What a step's first pass reads and writes of one admitted tenant: the figures of its spec
/// a step uses, and its estimator. (The spec itself, with the tenant's name and estimator
/// configuration, lies apart in `Controller::specs`, and the planners' memory in
/// `Controller::plans`: against one record holding all three, a step for 10,000 tenants
/// misses the L1 cache 9% less often (cachegrind) and runs 3-5% faster. `update_tenant` is
/// the one place the copied figures change.)
#[derive(Clone, Debug)]
struct TenantState {
    id: TenantId,
    cap_at_estimate: bool,
    min: Pages,
    max: Pages,
    shares: u64,
    overhead: Pages,
    estimator: ActiveEstimator,
}

impl TenantState {
    fn new(spec: &TenantSpec, estimator: ActiveEstimator) -> TenantState {
        TenantState {
            id: spec.id,
            cap_at_estimate: spec.cap_at_estimate,
            min: spec.min,
            max: spec.max,
            shares: spec.shares,
            overhead: spec.overhead,
            estimator,
        }
    }
}

/// What the planning pass of a step needs of one request's tenant.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Its index in `Controller::tenants` (and `plans`).
    at: usize,
    /// Its index in the observation's tenants.
    observed: usize,
    /// Its configured min and max.
    min: Pages,
    max: Pages,
}

/// A read-only view of one admitted tenant.
#[derive(Clone, Debug)]
pub struct TenantView<'a> {
    pub spec: &'a TenantSpec,
    pub active_estimate: Pages,
    /// The estimate stands on a measurement (see `ActiveEstimator::measured`).
    pub measured: bool,
    pub estimator: String,
}

/// The control loop's state. Pure: all inputs come through [`Controller::step`].
#[derive(Clone, Debug)]
pub struct Controller {
    config: ControllerConfig,
    ledger: AdmissionLedger,
    /// Memory's reclamation state: the host's and the budget's (see `ResourceTracker`).
    memory: ResourceTracker,
    /// The admitted tenants' specs, ordered by id, in one contiguous vector: a step walks
    /// `tenants` beside the observation's id-ordered tenants, and admissions and removals
    /// (rare) shift all three vectors alike.
    specs: Vec<TenantSpec>,
    /// What a step's first pass needs of each of `specs`.
    tenants: Vec<TenantState>,
    /// What the mechanism planners remember about each of `specs` between ticks: the
    /// second pass of a step, after allocation, reads nothing else of the tenants' state.
    plans: Vec<PlanMemory>,
    /// The allocation requests of the last step, kept so a step allocates no new buffer for
    /// them.
    requests: Vec<AllocationRequest>,
    /// The allocation rounds' working buffers.
    allocator: Allocator,
    /// What the planning pass needs of each request's tenant.
    pending: Vec<Pending>,
    /// The targets of the last step, for the same reason.
    targets: Vec<Pages>,
    /// When the previous step's observation was taken, for per-second rates.
    last_now: Option<Duration>,
    /// At the previous step the estimate of every tenant counted against the budget stood on
    /// a measurement. Until then none of them is reclaimed below what it holds: idleness not yet measured is no
    /// reason to take memory (sampling reads an unmeasured tenant as fully active).
    limit_estimates_measured: bool,
    /// The page-sharing scanner's measured CPU cost per page.
    scan_cost: ScanCost,
    /// Cache quotas (Gemini): the last search, its tenants, and where each admitted tenant's
    /// quota is (see `Controller::search_quotas`).
    cache: CacheQuotas,
}

/// The cache-quota search's state between steps: its buffers and its last answer.
#[derive(Clone, Debug, Default)]
struct CacheQuotas {
    tenants: Vec<QuotaTenant>,
    /// The memory outside each searched tenant's pool.
    outside: Vec<Pages>,
    quotas: Quotas,
    /// Per admitted tenant (as `Controller::tenants`), its index in `quotas`, or `NO_QUOTA`.
    at: Vec<u32>,
    /// The budget the last search divided: the configured one less the pools not searched.
    budget: Pages,
}

/// An admitted tenant whose pool the cache search does not size.
const NO_QUOTA: u32 = u32::MAX;

impl Controller {
    /// A controller for a host with `machine` memory and `host_swap` of swap space.
    pub fn new(
        config: ControllerConfig,
        machine: Pages,
        host_swap: Pages,
    ) -> Result<Controller, ConfigError> {
        config.validate()?;
        Ok(Controller {
            memory: ResourceTracker::new(config.thresholds.clone()),
            ledger: AdmissionLedger::backed_by(machine, host_swap, config.backing),
            config,
            specs: Vec::new(),
            tenants: Vec::new(),
            plans: Vec::new(),
            requests: Vec::new(),
            allocator: Allocator::default(),
            pending: Vec::new(),
            targets: Vec::new(),
            last_now: None,
            limit_estimates_measured: false,
            scan_cost: ScanCost::default(),
            cache: CacheQuotas::default(),
        })
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    pub fn state(&self) -> ReclamationState {
        self.memory.state()
    }

    /// Admission control: reserves min + overhead and max - min, or refuses with the reason.
    pub fn admit(&mut self, spec: TenantSpec) -> Result<(), ControllerError> {
        self.admit_resumed(spec, None)
    }

    /// Admits like [`Controller::admit`]; with `estimate` (kept across a restart), the
    /// tenant's estimator starts from it instead of from nothing.
    pub fn admit_resumed(
        &mut self,
        spec: TenantSpec,
        estimate: Option<Pages>,
    ) -> Result<(), ControllerError> {
        let Err(at) = self.position(spec.id) else {
            return Err(ControllerError::Duplicate(spec.id));
        };
        if spec.min > spec.max {
            return Err(ControllerError::MinAboveMax {
                name: spec.name.clone(),
                min: spec.min,
                max: spec.max,
            });
        }
        self.ledger.try_admit(&spec)?;
        let mut estimator = ActiveEstimator::new(&spec.estimator);
        if let Some(estimate) = estimate {
            estimator.resume(estimate, spec.max);
        }
        self.tenants.insert(at, TenantState::new(&spec, estimator));
        self.specs.insert(at, spec);
        self.plans.insert(at, PlanMemory::default());
        Ok(())
    }

    /// Where tenant `id` is in `tenants` (`Ok`), or where it would go (`Err`).
    fn position(&self, id: TenantId) -> Result<usize, usize> {
        self.tenants.binary_search_by_key(&id, |s| s.id)
    }

    /// Forgets a tenant (it stopped or vanished) and releases its reservation.
    pub fn remove(&mut self, id: TenantId) -> Option<TenantSpec> {
        let at = self.position(id).ok()?;
        self.plans.remove(at);
        self.tenants.remove(at);
        let spec = self.specs.remove(at);
        self.ledger.release(&spec);
        Some(spec)
    }

    /// Changes the memory handed out to tenants (`None`: machine minus overheads and reserve).
    pub fn set_budget(&mut self, budget: Option<Pages>) {
        self.config.budget = budget;
    }

    pub fn set_tax_rate(&mut self, tax: TaxRate) {
        self.config.tax_rate = tax;
    }

    /// Changes the limit tenants' safety rails (a configuration reload).
    pub fn set_rails(&mut self, rails: LimitRails) {
        self.config.rails = rails;
    }

    /// Changes Gemini's cache quotas (a reload; `None`: pools sized by memory alone).
    pub fn set_cache(&mut self, cache: Option<QuotaSettings>) {
        self.config.cache = cache;
    }

    /// Whether limit tenants are reclaimed even while the budget has room (a reload).
    pub fn set_reclaim_always(&mut self, always: bool) {
        self.config.reclaim_always = always;
    }

    /// Changes a tenant's min, max and shares at run time, re-running admission control for
    /// the new reservation; on refusal the old parameters stay.
    pub fn update_tenant(
        &mut self,
        id: TenantId,
        min: Pages,
        max: Pages,
        shares: u64,
    ) -> Result<(), ControllerError> {
        let at = self
            .position(id)
            .map_err(|_| ControllerError::Unknown(id))?;
        let spec = &mut self.specs[at];
        if min > max {
            return Err(ControllerError::MinAboveMax {
                name: spec.name.clone(),
                min,
                max,
            });
        }
        let mut updated = spec.clone();
        updated.min = min;
        updated.max = max;
        updated.shares = shares;
        self.ledger.release(spec);
        if let Err(refusal) = self.ledger.try_admit(&updated) {
            // Put the old reservation back: it fitted before the release.
            let _ = self.ledger.try_admit(spec);
            return Err(refusal.into());
        }
        let state = &mut self.tenants[at];
        (state.min, state.max, state.shares) = (min, max, shares);
        *spec = updated;
        Ok(())
    }

    /// Changes a tenant's disk weight and latency target at run time (a reload); its planner
    /// keeps the boost it has reached.
    pub fn set_disk(
        &mut self,
        id: TenantId,
        disk: Option<DiskSpec>,
    ) -> Result<(), ControllerError> {
        let at = self
            .position(id)
            .map_err(|_| ControllerError::Unknown(id))?;
        self.specs[at].disk = disk;
        Ok(())
    }

    pub fn tenant(&self, id: TenantId) -> Option<TenantView<'_>> {
        self.position(id)
            .ok()
            .map(|at| view(&self.specs[at], &self.tenants[at]))
    }

    pub fn tenants(&self) -> impl Iterator<Item = TenantView<'_>> {
        self.specs
            .iter()
            .zip(self.tenants.iter())
            .map(|(spec, s)| view(spec, s))
    }

    /// One decision from one observation: estimators, reclamation state, targets, mechanisms.
    ///
    /// Tenants on a limit (cgroups) follow ESX's "no reclamation in the high state" against
    /// their budget: while what they hold leaves the budget in the high state, nobody's target
    /// falls below what it holds, probing estimators hold and no target is capped at an
    /// estimate; the budget left over goes out by shares and the idle tax as room to grow. Once
    /// the budget runs short, targets come from shares and the tax (and `cap_at_estimate`), so
    /// idle tenants give memory first. Either way a target is at least the tenant's floor, and
    /// the limits never add up to more than the budget.
    pub fn step(&mut self, obs: &HostObservation) -> Decision {
        let mut decision = Decision::default();
        self.step_into(obs, &mut decision);
        decision
    }

    /// [`Controller::step`] into `decision`, whose buffers are reused: a runner that keeps
    /// its last decision allocates nothing per step for its actions.
    pub fn step_into(&mut self, obs: &HostObservation, decision: &mut Decision) {
        // A configured budget has its own state, from the memory of the tenants whose memory
        // counts against it (see `mechanism::counts_against_budget`): it is wanted only when
        // the budget runs short. (Without a configured budget there is no such state, and no
        // pass over the observation for it.)
        let budget_held = self.config.budget.and_then(|budget| {
            obs.tenants
                .iter()
                .filter(|t| mechanism::counts_against_budget(t, self.config.shared_host))
                .map(|t| t.allocated)
                .reduce(|a, b| a + b)
                .map(|held| (held, budget))
        });
        let state = self.memory.update(obs.free, obs.machine, budget_held);
        let wanted = self.config.reclaim_always
            || (state != ReclamationState::High && self.limit_estimates_measured);
        let mut measured = true;
        let elapsed = self
            .last_now
            .map(|last| obs.now.saturating_sub(last))
            .filter(|d| !d.is_zero());
        self.last_now = Some(obs.now);
        let tax = self.config.tax_rate;
        self.search_quotas(obs);
        let config = &self.config;
        let cache = &self.cache;

        // Running tenants meet their state by a merge of two id-ordered lists (the
        // observation's and ours): no lookups, so a step stays linear in the tenants. The
        // first pass estimates and writes what the estimators decide into the actions, the
        // second (after allocation) plans; each action is written where it lies in the last
        // decision's buffer (an action is a few hundred bytes: building it aside and moving it
        // in would copy it twice).
        let requests = &mut self.requests;
        let pending = &mut self.pending;
        let actions = &mut decision.actions;
        requests.clear();
        pending.clear();
        let mut overheads = Pages::ZERO;
        let mut budget_bound = false;
        let mut next = 0;
        for (observed, t) in obs.tenants.iter().enumerate() {
            while next < self.tenants.len() && self.tenants[next].id < t.id {
                next += 1;
            }
            if next == self.tenants.len() || self.tenants[next].id != t.id {
                continue;
            }
            let s = &mut self.tenants[next];
            let input = EstimatorInput {
                now: obs.now,
                min: s.min,
                max: s.max,
                obs: t,
                probe: mechanism::may_probe(t, wanted, config.dry_run),
            };
            let active = s.estimator.update(&input);
            if mechanism::counts_against_budget(t, config.shared_host) {
                budget_bound = true;
                measured &= s.estimator.measured();
            }
            let cap = if s.cap_at_estimate {
                s.estimator.ceiling().clamp_to(s.min, s.max)
            } else {
                s.max
            };
            let (mut min, mut ceiling) =
                mechanism::bounds(t, s.min, s.max, cap, wanted, &config.rails);
            // A pool with a cache quota holds it and the memory outside it: the quota is the
            // tenant's allocation, whatever memory's state (Gemini partitions the cache
            // first), within its min and max.
            let quota = cache.at.get(next).copied().filter(|&q| q != NO_QUOTA);
            let note = quota.map(|q| {
                let q = q as usize;
                let quota = &cache.quotas.quotas[q];
                let memory = (quota.pool + cache.outside[q]).clamp(s.min, s.max);
                (min, ceiling) = (memory, memory);
                CacheNote {
                    slo: cache.tenants[q].slo,
                    quota: quota.pool,
                    budget: cache.budget,
                    latency_us: quota.latency_us as f32,
                    utility: quota.utility as f32,
                }
            });
            overheads += s.overhead;
            if requests.len() == actions.len() {
                actions.push(TenantAction::none(t.id, state));
            }
            let action = &mut actions[requests.len()];
            action.id = t.id;
            action.active_estimate = active;
            action.reason.estimate = s.estimator.note();
            action.reason.cache = note;
            requests.push(AllocationRequest {
                id: t.id,
                min,
                ceiling,
                shares: s.shares,
                // The tax charges for what the estimator cannot rule out being active, and
                // for an application pool as its hits and misses say.
                active: mechanism::active(t, s.estimator.active_bound()),
            });
            pending.push(Pending {
                at: next,
                observed,
                min: s.min,
                max: s.max,
            });
        }
        actions.truncate(requests.len());
        // Targets drive free memory above the high threshold, unless a budget is configured.
        // Memory page sharing reclaimed is there to hand out too: a shared page counts in the
        // allocation of every tenant mapping it (ESX), so allocations may add up to more than
        // the machine by what sharing saves.
        let budget = config.budget.unwrap_or_else(|| {
            let reserve = obs.machine.scale(config.thresholds.high);
            let shared = obs.sharing.map_or(Pages::ZERO, |s| s.reclaimed());
            (obs.machine + shared)
                .saturating_sub(overheads)
                .saturating_sub(reserve)
        });
        let targets = &mut self.targets;
        self.allocator.allocate_into(requests, budget, tax, targets);

        let settings = PlanSettings {
            host_swap_per_tick: config.host_swap_per_tick,
            balloon_stall_ticks: config.balloon_stall_ticks,
            rails: &config.rails,
        };
        for ((p, &target), action) in pending.iter().zip(targets.iter()).zip(actions.iter_mut()) {
            let input = PlanInput {
                state,
                target,
                min: p.min,
                max: p.max,
                tenant: &obs.tenants[p.observed],
                elapsed,
            };
            action.target = target;
            let plans = &mut self.plans[p.at];
            mechanism::plan(
                &input,
                &settings,
                plans,
                &mut action.mechanisms,
                &mut action.reason.mechanism,
            );
            // A tenant on a shared disk: its weight (Lai et al.), read from its spec only then.
            action.reason.disk = input.tenant.levers.disk.as_deref().and_then(|io| {
                let spec = self.specs[p.at].disk?;
                Some(disk::plan(&spec, io, &mut plans.disk))
            });
        }
        if budget_bound {
            // Only the plans of tenants whose memory counts against the budget are fitted to
            // it: without any, there is nothing to fit (and no pass over the actions).
            mechanism::finish(actions, budget);
        }
        self.limit_estimates_measured = measured;
        decision.sharing = config.sharing.map(|settings| {
            if let Some(s) = &obs.sharing {
                self.scan_cost.observe(s);
            }
            mechanism::scan_rate(state, &settings, &self.scan_cost)
        });
        decision.now = obs.now;
        decision.memory = ResourceState {
            resource: Resource::Memory,
            state,
            budget,
        };
    }

    /// Gemini's search (`memtide_policy::cache`): the tenants with an SLO whose application
    /// pool reports a miss-ratio curve share the configured cache budget, less the pools of
    /// SLO tenants not searched yet (no curve or no statistics: they keep what they have),
    /// and at most what memory's budget leaves once the other tenants' mins, the searched
    /// tenants' memory outside their pools and the unsearched SLO tenants' use are counted.
    /// Each searched pool lies within its agent's bounds and, with the memory outside it,
    /// within the tenant's min and max. Runs every step: the search is exact and takes
    /// microseconds (docs/benchmarks.md), and the same curves give the same quotas.
    fn search_quotas(&mut self, obs: &HostObservation) {
        let cache = &mut self.cache;
        cache.tenants.clear();
        cache.outside.clear();
        cache.at.clear();
        let Some(settings) = self.config.cache else {
            return;
        };
        cache.at.resize(self.tenants.len(), NO_QUOTA);
        let mut budget = settings.budget;
        // The quotas and the memory outside the pools must fit in memory's budget beside
        // every other tenant's min.
        let mut memory = self.config.budget.unwrap_or(obs.machine);
        let mut next = 0;
        for t in &obs.tenants {
            while next < self.tenants.len() && self.tenants[next].id < t.id {
                next += 1;
            }
            if next == self.tenants.len() || self.tenants[next].id != t.id {
                continue;
            }
            // The SLO from the spec: the first pass's `TenantState` stays small without it.
            let s = &self.tenants[next];
            let (Some(slo), Some(lever)) = (self.specs[next].slo, &t.levers.app_balloon) else {
                memory = memory.saturating_sub(s.min);
                continue;
            };
            match (&lever.curve, lever.outside()) {
                (Some(curve), Some(outside)) => {
                    memory = memory.saturating_sub(outside);
                    cache.at[next] = cache.tenants.len() as u32;
                    cache.outside.push(outside);
                    cache.tenants.push(QuotaTenant {
                        slo,
                        curve: **curve,
                        min: lever.min.max(s.min.saturating_sub(outside)),
                        max: lever.max.min(s.max.saturating_sub(outside)),
                        requests: lever.hits.unwrap_or(0) + lever.misses.unwrap_or(0),
                    });
                }
                _ => {
                    memory = memory.saturating_sub(lever.used.max(s.min));
                    budget = budget.saturating_sub(lever.pool);
                }
            }
        }
        let budget = budget.min(memory);
        cache.budget = budget;
        cache
            .quotas
            .search(&cache.tenants, &QuotaSettings { budget, ..settings });
    }

    /// Observe, decide and apply once.
    pub fn tick<H: Host>(&mut self, host: &mut H) -> Result<Decision, H::Error> {
        let obs = host.observe()?;
        let decision = self.step(&obs);
        host.apply(&decision)?;
        Ok(decision)
    }
}

fn view<'a>(spec: &'a TenantSpec, s: &TenantState) -> TenantView<'a> {
    TenantView {
        spec,
        active_estimate: s.estimator.estimate(),
        measured: s.estimator.measured() && s.estimator.estimate() > Pages::ZERO,
        estimator: s.estimator.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{
        EstimatorConfig, LimitLever, LimitRail, Mechanism, Slo, TenantObservation,
    };

    fn mib(m: u64) -> Pages {
        Pages::from_mib(m)
    }

    fn spec(id: u32) -> TenantSpec {
        TenantSpec {
            disk: None,
            id: TenantId(id),
            name: format!("t{id}"),
            min: mib(64),
            max: mib(1024),
            shares: 1000,
            overhead: Pages::ZERO,
            estimator: EstimatorConfig::Committed,
            cap_at_estimate: false,
            slo: None,
        }
    }

    /// A cgroup tenant holding `allocated` under `limit`, 100 MiB of it unreclaimable.
    fn limited(id: u32, allocated: u64, limit: u64, faults: Option<u64>) -> TenantObservation {
        TenantObservation {
            refaults: faults,
            swap_ins: faults.map(|_| 0),
            levers: memtide_model::Levers {
                limit: Some(LimitLever {
                    limit: mib(limit),
                    unlimited: false,
                    unreclaimable: mib(100),
                    major_faults: None,
                    pressure: None,
                    smallest_lowering: Pages::ZERO,
                }),
                ..Default::default()
            },
            ..TenantObservation::new(TenantId(id), mib(allocated))
        }
    }

    fn host(now_s: u64, tenants: Vec<TenantObservation>) -> HostObservation {
        HostObservation {
            now: Duration::from_secs(now_s),
            machine: mib(8192),
            free: mib(4096),
            host_swap_total: Pages::ZERO,
            host_swap_used: Pages::ZERO,
            pressure: None,
            sharing: None,
            remapping: None,
            tenants,
        }
    }

    fn controller(budget_mib: u64) -> Controller {
        let config = ControllerConfig {
            budget: Some(mib(budget_mib)),
            tax_rate: TaxRate::new(0.0).unwrap(),
            ..ControllerConfig::default()
        };
        let mut c = Controller::new(config, mib(8192), mib(8192)).unwrap();
        c.admit(spec(0)).unwrap();
        c
    }

    #[test]
    fn a_limit_tenant_moves_by_its_limit_alone() {
        let mut c = controller(300);
        // The first step only measures (nothing is reclaimed on no evidence).
        c.step(&host(0, vec![limited(0, 400, 400, Some(0))]));
        let d = c.step(&host(1, vec![limited(0, 400, 400, Some(0))]));
        let a = &d.actions[0];
        assert_eq!(a.target, mib(300));
        assert_eq!(a.moves().limit, Some(mib(380)), "one 5% step below 400 MiB");
        assert_eq!(a.mechanisms, vec![Mechanism::Limit]);
        assert_eq!(a.moves().balloon, None);
        assert_eq!(a.moves().host_swap_out, Pages::ZERO);
        assert!(!a.moves().blocked);
        assert!(a.reason.to_string().contains("bounded shrink step"));
    }

    #[test]
    fn faults_per_second_use_the_time_between_observations() {
        let mut c = controller(300);
        c.step(&host(1, vec![limited(0, 400, 400, Some(0))]));
        // 3000 faults over 2 s is 1500/s: under the default 2000/s, so the shrink goes on.
        let d = c.step(&host(3, vec![limited(0, 400, 400, Some(3000))]));
        assert_eq!(d.actions[0].moves().limit, Some(mib(380)));
        // 3000 faults in 1 s backs off.
        let d = c.step(&host(4, vec![limited(0, 400, 400, Some(3000))]));
        assert_eq!(d.actions[0].moves().limit, Some(mib(400)));
        let rail = d.actions[0].reason.mechanism.limit.unwrap().rail;
        assert!(matches!(rail, LimitRail::BackoffFaults { .. }), "{rail:?}");
        assert!(d.actions[0].mechanisms.is_empty());
    }

    /// A limit tenant holding `allocated` under `limit`, whose estimator (committed memory)
    /// sees `active` of it in use, 16 MiB unreclaimable.
    fn cgroup(id: u32, allocated: u64, limit: u64, active: u64) -> TenantObservation {
        TenantObservation {
            refaults: Some(0),
            swap_ins: Some(0),
            committed: Some(mib(active)),
            levers: memtide_model::Levers {
                limit: Some(LimitLever {
                    limit: mib(limit),
                    unlimited: false,
                    unreclaimable: mib(16),
                    major_faults: Some(0),
                    pressure: None,
                    smallest_lowering: Pages::ZERO,
                }),
                ..Default::default()
            },
            ..TenantObservation::new(TenantId(id), mib(allocated))
        }
    }

    fn two_tenants(budget_mib: u64, tax: f64) -> Controller {
        let config = ControllerConfig {
            budget: Some(mib(budget_mib)),
            tax_rate: TaxRate::new(tax).unwrap(),
            ..ControllerConfig::default()
        };
        let mut c = Controller::new(config, mib(budget_mib), mib(8192)).unwrap();
        c.admit(spec(0)).unwrap();
        c.admit(spec(1)).unwrap();
        c
    }

    #[test]
    fn while_the_budget_has_room_no_limit_falls_below_what_its_tenant_holds() {
        // 700 of a 1000 MiB budget held: the budget is in the high state.
        let mut c = two_tenants(1000, 0.75);
        for now in 1..30 {
            let d = c.step(&host(
                now,
                vec![cgroup(0, 400, 1024, 400), cgroup(1, 300, 1024, 10)],
            ));
            assert_eq!(d.memory.state, ReclamationState::High);
            for (a, held) in d.actions.iter().zip([400, 300]) {
                assert!(a.target >= mib(held), "{}: {}", a.id, a.reason);
                assert!(
                    a.moves().limit.unwrap() >= mib(held),
                    "{}: {}",
                    a.id,
                    a.reason
                );
            }
            let sum: u64 = d.actions.iter().map(|a| a.moves().limit.unwrap().0).sum();
            assert!(sum <= mib(1000).0);
            // The room left over goes mostly to the active tenant.
            assert!(d.actions[0].target - mib(400) > d.actions[1].target - mib(300));
        }
    }

    #[test]
    fn an_idle_application_pool_is_taxed_and_one_with_misses_is_not() {
        // Two tenants whose estimators (committed memory) see all 500 MiB in use, each with a
        // 400 MiB pool: one pool saw neither hits nor misses, the other misses.
        let pool = |id: u32, hits: u64, misses: u64| TenantObservation {
            committed: Some(mib(500)),
            levers: memtide_model::Levers {
                app_balloon: Some(memtide_model::AppBalloonLever {
                    session: 1,
                    pool: mib(400),
                    pool_used: Some(mib(400)),
                    min: Pages::ZERO,
                    max: mib(400),
                    granule: Pages(1),
                    used: mib(500),
                    hits: Some(hits),
                    misses: Some(misses),
                    curve: None,
                    durability: None,
                    answer: None,
                    silent_for: Duration::ZERO,
                    dead_after: Duration::from_secs(5),
                }),
                ..Default::default()
            },
            ..TenantObservation::new(TenantId(id), mib(500))
        };
        let mut c = two_tenants(600, 0.75);
        let d = c.step(&host(1, vec![pool(0, 0, 0), pool(1, 10, 10)]));
        let (idle, busy) = (d.actions[0].target, d.actions[1].target);
        assert!(idle + mib(200) < busy, "idle {idle}, busy {busy}");
        // Without the pools' figures the two would be alike.
        let mut c = two_tenants(600, 0.75);
        let d = c.step(&host(1, vec![pool(0, 10, 0), pool(1, 10, 0)]));
        assert_eq!(d.actions[0].target, d.actions[1].target);
    }

    /// A tenant holding 600 MiB, a 512 MiB pool of it data, whose agent reports `curve`.
    fn pooled(id: u32, curve: Option<memtide_model::MissCurve>) -> TenantObservation {
        TenantObservation {
            committed: Some(mib(600)),
            levers: memtide_model::Levers {
                app_balloon: Some(memtide_model::AppBalloonLever {
                    session: 1,
                    pool: mib(512),
                    pool_used: Some(mib(512)),
                    min: mib(16),
                    max: mib(1024),
                    granule: Pages(1),
                    used: mib(600),
                    hits: Some(900),
                    misses: Some(100),
                    curve: curve.map(Box::new),
                    durability: None,
                    answer: None,
                    silent_for: Duration::ZERO,
                    dead_after: Duration::from_secs(5),
                }),
                ..Default::default()
            },
            ..TenantObservation::new(TenantId(id), mib(600))
        }
    }

    /// Misses falling linearly to none at `knee` MiB.
    fn knee(mib_at: u64) -> memtide_model::MissCurve {
        memtide_model::MissCurve::new([(mib(mib_at), 0.0), (mib(4 * mib_at), 0.0)]).unwrap()
    }

    /// A strict tenant, a best-effort one and one without an SLO, under `budget` of memory
    /// and 1 GiB of cache.
    fn with_slos(budget: u64) -> Controller {
        let config = ControllerConfig {
            budget: Some(mib(budget)),
            cache: Some(QuotaSettings::new(mib(1024))),
            ..ControllerConfig::default()
        };
        let mut c = Controller::new(config, mib(8192), mib(8192)).unwrap();
        let strict = Slo::Strict {
            target_us: 500.0,
            slack: 0.1,
        };
        for (id, slo) in [(0, Some(strict)), (1, Some(Slo::BestEffort)), (2, None)] {
            c.admit(TenantSpec {
                max: mib(2048),
                slo,
                ..spec(id)
            })
            .unwrap();
        }
        c
    }

    #[test]
    fn memory_s_budget_caps_the_cache_quotas() {
        // 900 MiB less tenant 2's 64 MiB min and the 176 MiB outside the two pools leave 660.
        let mut c = with_slos(900);
        let obs = host(
            1,
            vec![
                pooled(0, Some(knee(800))),
                pooled(1, Some(knee(2000))),
                pooled(2, None),
            ],
        );
        let d = c.step(&obs);
        assert_eq!(note_budget(&d), mib(660));
        let pools: u64 = (0..2)
            .map(|i| d.actions[i].reason.cache.unwrap().quota.0)
            .sum();
        assert!(pools <= mib(660).0);
    }

    #[test]
    fn cache_quotas_size_the_pools_of_slo_tenants_by_their_curves() {
        let mut c = with_slos(4096);
        let obs = host(
            1,
            vec![
                pooled(0, Some(knee(800))),
                pooled(1, Some(knee(2000))),
                pooled(2, Some(knee(800))),
            ],
        );
        let d = c.step(&obs);
        // The strict pool meets 550 µs at 84.3% of its 800 MiB knee: 675 MiB, 43 steps of
        // 16 MiB (688 MiB); the best-effort pool gets the other 336 MiB. Each target adds the
        // 88 MiB outside the pool.
        let note = |i: usize| d.actions[i].reason.cache.expect("a quota");
        assert_eq!(note(0).quota, mib(688), "{}", d.actions[0].reason);
        assert!(note(0).latency_us <= 550.0);
        assert_eq!(note(1).quota, mib(336), "{}", d.actions[1].reason);
        assert_eq!(d.actions[0].target, mib(688 + 88));
        assert_eq!(d.actions[1].target, mib(336 + 88));
        assert!(
            matches!(d.actions[0].moves().app_balloon, Some(memtide_model::AppMove::Target { pool, .. }) if pool == mib(688)),
            "{}",
            d.actions[0].reason
        );
        assert!(d.actions[0]
            .reason
            .to_string()
            .contains("cache quota 688.0 MiB of 1024.0 MiB"));
        // The tenant without an SLO is sized by memory alone.
        assert!(d.actions[2].reason.cache.is_none());

        // A pool whose curve has not come keeps its pool out of the budget.
        let obs = host(
            2,
            vec![pooled(0, Some(knee(800))), pooled(1, None), pooled(2, None)],
        );
        let d = c.step(&obs);
        assert!(d.actions[1].reason.cache.is_none());
        assert_eq!(note_budget(&d), mib(512));
    }

    fn note_budget(d: &Decision) -> Pages {
        d.actions[0].reason.cache.expect("a quota").budget
    }

    #[test]
    fn when_the_budget_runs_short_the_idle_tenant_gives_memory_first() {
        // 700 MiB held against a 600 MiB budget: memory is wanted.
        let mut c = two_tenants(600, 0.75);
        // The first step only measures (nothing is reclaimed on no evidence).
        c.step(&host(
            0,
            vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
        ));
        let d = c.step(&host(
            1,
            vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
        ));
        assert_ne!(d.memory.state, ReclamationState::High);
        let (busy, idle) = (&d.actions[0], &d.actions[1]);
        assert!(busy.target > mib(400), "{}", busy.reason);
        assert!(idle.target < mib(200), "{}", idle.reason);
        assert!(
            idle.moves().limit.unwrap() < mib(300),
            "the idle tenant steps down"
        );
        // The busy tenant's raise waits for the memory the idle one gives back.
        assert_eq!(busy.moves().limit, Some(mib(400)));
        let rail = busy.reason.mechanism.limit.unwrap().rail;
        assert!(matches!(rail, LimitRail::Budget { .. }), "{rail:?}");
        assert!(
            busy.reason.to_string().contains("waits for memory"),
            "{}",
            busy.reason
        );

        // With tax 0 both are squeezed alike.
        let mut flat = two_tenants(600, 0.0);
        flat.step(&host(
            0,
            vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
        ));
        flat.step(&host(
            0,
            vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
        ));
        let d = flat.step(&host(
            1,
            vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
        ));
        assert_eq!(d.actions[0].target, d.actions[1].target);
    }

    #[test]
    fn the_limits_never_sum_above_the_budget_once_the_shrinks_are_done() {
        let mut c = two_tenants(600, 0.75);
        let (mut busy, mut idle) = (400u64, 300u64);
        let mut last = Vec::new();
        for now in 1..120 {
            let d = c.step(&host(
                now,
                vec![cgroup(0, busy, busy, 400), cgroup(1, idle, idle, 10)],
            ));
            let limits: Vec<u64> = d
                .actions
                .iter()
                .map(|a| a.moves().limit.unwrap().0)
                .collect();
            // Each tenant holds what its limit lets it (the busy one wants 450).
            busy = (limits[0] >> 8).min(450);
            idle = (limits[1] >> 8).min(300);
            let sum: u64 = limits.iter().sum();
            if now > 40 {
                assert!(sum <= mib(600).0, "tick {now}: {sum}");
            }
            last = limits;
        }
        // The busy tenant ends above its 400 MiB active estimate, the idle one well below the
        // 300 MiB it held; the limits fill the budget.
        assert!(last[0] > mib(420).0, "{last:?}");
        assert!(last[1] < mib(200).0, "{last:?}");
        assert!(last.iter().sum::<u64>() > mib(590).0, "{last:?}");
    }

    #[test]
    fn a_limit_just_above_what_the_tenant_holds_is_not_ratcheted_down_while_not_wanted() {
        let mut c = two_tenants(1000, 0.75);
        c.step(&host(
            1,
            vec![cgroup(0, 400, 410, 400), cgroup(1, 300, 1024, 10)],
        ));
        // Usage wobbles a little under the limit: the limit stays.
        for (now, held) in [(2, 405), (3, 402), (4, 407), (5, 403)] {
            let d = c.step(&host(
                now,
                vec![cgroup(0, held, 410, 400), cgroup(1, 300, 1024, 10)],
            ));
            assert!(
                d.actions[0].moves().limit.unwrap() >= mib(410),
                "{}",
                d.actions[0].reason
            );
        }
    }

    #[test]
    fn nothing_is_reclaimed_before_the_estimates_are_measured() {
        let config = ControllerConfig {
            budget: Some(mib(600)),
            ..ControllerConfig::default()
        };
        let mut c = Controller::new(config, mib(600), mib(8192)).unwrap();
        for id in 0..2 {
            c.admit(TenantSpec {
                estimator: EstimatorConfig::Sampling(Default::default()),
                ..spec(id)
            })
            .unwrap();
        }
        // 800 MiB held against 600: short, but sampling has measured nothing yet.
        for now in 1..10 {
            let d = c.step(&host(
                now,
                vec![cgroup(0, 400, 400, 0), cgroup(1, 400, 400, 0)],
            ));
            for a in &d.actions {
                assert!(a.moves().limit.unwrap() >= mib(400), "{}", a.reason);
            }
        }
    }

    #[test]
    fn host_pressure_does_not_hold_a_tenants_shrink() {
        let mut c = controller(300);
        c.step(&host(0, vec![limited(0, 400, 400, Some(0))]));
        let mut obs = host(1, vec![limited(0, 400, 400, Some(0))]);
        obs.pressure = Some(80.0);
        let d = c.step(&obs);
        assert_eq!(
            d.actions[0].moves().limit,
            Some(mib(380)),
            "{}",
            d.actions[0].reason
        );
    }

    #[test]
    fn tenants_without_a_limit_keep_the_balloon_and_swap_plan() {
        let mut c = controller(300);
        let d = c.step(&host(
            1,
            vec![TenantObservation::new(TenantId(0), mib(400))],
        ));
        assert_eq!(d.actions[0].moves().limit, None);
        assert!(d.actions[0].reason.mechanism.limit.is_none());
    }
}
