//! The controller: each tick it updates estimators, tracks the reclamation state, computes share-based targets and chooses mechanisms.

use crate::config::{ConfigError, ControllerConfig};
use crate::host::Host;
use memtide_model::{
    CacheNote, Decision, DiskSpec, HostObservation, Pages, ReclamationState, Resource,
    ResourceState, TaxRate, TenantAction, TenantId, TenantSpec,
};
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

impl CacheQuotas {
    /// The memory of admitted tenant `at` (as `Controller::tenants`) where the last search
    /// gave its pool a quota, and the note saying so: a pool with a cache quota holds it and
    /// the memory outside it, whatever memory's state (Gemini partitions the cache first),
    /// within the tenant's `min` and `max`. `None`: memory alone sizes it.
    #[inline]
    fn note(&self, at: usize, min: Pages, max: Pages) -> Option<(Pages, CacheNote)> {
        let q = self.at.get(at).copied().filter(|&q| q != NO_QUOTA)? as usize;
        let quota = &self.quotas.quotas[q];
        let memory = (quota.pool + self.outside[q]).clamp(min, max);
        let note = CacheNote {
            slo: self.tenants[q].slo,
            quota: quota.pool,
            budget: self.budget,
            latency_us: quota.latency_us as f32,
            utility: quota.utility as f32,
        };
        Some((memory, note))
    }
}

/// What the first pass of a step ([`Controller::estimate`]) found across the tenants.
#[derive(Copy, Clone, Debug)]
struct FirstPass {
    /// The running admitted tenants' overheads.
    overheads: Pages,
    /// Some tenant's memory counts against the budget (see `mechanism::counts_against_budget`).
    budget_bound: bool,
    /// Every such tenant's estimate stands on a measurement.
    measured: bool,
}

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
    /// its last decision allocates nothing per step for its actions. The steps, in order:
    /// the reclamation state ([`Controller::update_state`]), whether memory is wanted, the
    /// time since the last step, the cache quotas ([`Controller::search_quotas`]), the
    /// estimators and allocation requests ([`Controller::estimate`]), the budget
    /// ([`Controller::budget`]), allocation, the mechanisms ([`Controller::plan`]), fitting
    /// the limits to the budget, and the page-sharing scan rate.
    pub fn step_into(&mut self, obs: &HostObservation, decision: &mut Decision) {
        let state = self.update_state(obs);
        let wanted = self.config.reclaim_always
            || (state != ReclamationState::High && self.limit_estimates_measured);
        let elapsed = self.elapsed(obs.now);
        self.search_quotas(obs);
        let pass = self.estimate(obs, state, wanted, &mut decision.actions);
        let budget = self.budget(obs, pass.overheads);
        self.allocator.allocate_into(
            &self.requests,
            budget,
            self.config.tax_rate,
            &mut self.targets,
        );
        self.plan(obs, state, elapsed, &mut decision.actions);
        if pass.budget_bound {
            // Only the plans of tenants whose memory counts against the budget are fitted to
            // it: without any, there is nothing to fit (and no pass over the actions).
            mechanism::finish(&mut decision.actions, budget);
        }
        self.limit_estimates_measured = pass.measured;
        decision.sharing = self.config.sharing.map(|settings| {
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

    /// Memory's reclamation state, from the host's free memory and, with a configured budget,
    /// the budget's own state, from the memory of the tenants whose memory counts against it
    /// (see `mechanism::counts_against_budget`): it is wanted only when the budget runs short.
    /// (Without a configured budget there is no such state, and no pass over the observation
    /// for it.)
    fn update_state(&mut self, obs: &HostObservation) -> ReclamationState {
        let shared_host = self.config.shared_host;
        let budget_held = self.config.budget.and_then(|budget| {
            obs.tenants
                .iter()
                .filter(|t| mechanism::counts_against_budget(t, shared_host))
                .map(|t| t.allocated)
                .reduce(|a, b| a + b)
                .map(|held| (held, budget))
        });
        self.memory.update(obs.free, obs.machine, budget_held)
    }

    /// The time since the previous step's observation (`None` on the first step, or when no
    /// time passed), for per-second rates; remembers `now` for the next.
    fn elapsed(&mut self, now: Duration) -> Option<Duration> {
        let elapsed = self
            .last_now
            .map(|last| now.saturating_sub(last))
            .filter(|d| !d.is_zero());
        self.last_now = Some(now);
        elapsed
    }

    /// The first pass over the running tenants: updates each admitted tenant's estimator,
    /// writes what it decides into the tenant's action, and asks allocation for the tenant's
    /// memory (`self.requests`, with `self.pending` for the planning pass). `actions` ends
    /// with one action per running admitted tenant, in id order.
    ///
    /// Running tenants meet their state by a merge of two id-ordered lists (the observation's
    /// and ours): no lookups, so a step stays linear in the tenants. Each action is written
    /// where it lies in the last decision's buffer (an action is a few hundred bytes: building
    /// it aside and moving it in would copy it twice).
    fn estimate(
        &mut self,
        obs: &HostObservation,
        state: ReclamationState,
        wanted: bool,
        actions: &mut Vec<TenantAction>,
    ) -> FirstPass {
        let config = &self.config;
        let cache = &self.cache;
        let plans = &self.plans;
        let requests = &mut self.requests;
        let pending = &mut self.pending;
        requests.clear();
        pending.clear();
        let mut pass = FirstPass {
            overheads: Pages::ZERO,
            budget_bound: false,
            measured: true,
        };
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
                pass.budget_bound = true;
                pass.measured &= s.estimator.measured();
            }
            // Capped at the estimate, a tenant still gets what a trusted application pool
            // says it wants: the estimator may be blind to the pool's own misses.
            let cap = if s.cap_at_estimate {
                mechanism::app_wants(t, &plans[next].app)
                    .map_or(s.estimator.ceiling(), |w| w.max(s.estimator.ceiling()))
                    .clamp_to(s.min, s.max)
            } else {
                s.max
            };
            let (mut min, mut ceiling) =
                mechanism::bounds(t, s.min, s.max, cap, wanted, &config.rails);
            let note = cache.note(next, s.min, s.max).map(|(memory, note)| {
                (min, ceiling) = (memory, memory);
                note
            });
            pass.overheads += s.overhead;
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
                // for an application pool as its hits and misses say (a trusted agent's,
                // within the tenant's measured memory).
                active: mechanism::active(t, s.estimator.active_bound(), &plans[next].app),
            });
            pending.push(Pending {
                at: next,
                observed,
                min: s.min,
                max: s.max,
            });
        }
        actions.truncate(requests.len());
        pass
    }

    /// The memory allocation divides: the configured budget, or targets drive free memory
    /// above the high threshold. Memory page sharing reclaimed is there to hand out too: a
    /// shared page counts in the allocation of every tenant mapping it (ESX), so allocations
    /// may add up to more than the machine by what sharing saves.
    fn budget(&self, obs: &HostObservation, overheads: Pages) -> Pages {
        self.config.budget.unwrap_or_else(|| {
            let reserve = obs.machine.scale(self.config.thresholds.high);
            let shared = obs.sharing.map_or(Pages::ZERO, |s| s.reclaimed());
            (obs.machine + shared)
                .saturating_sub(overheads)
                .saturating_sub(reserve)
        })
    }

    /// The second pass, after allocation: each tenant's target into its action, and the
    /// chooser's plan of its levers (memory's mechanisms and its disk weight).
    fn plan(
        &mut self,
        obs: &HostObservation,
        state: ReclamationState,
        elapsed: Option<Duration>,
        actions: &mut [TenantAction],
    ) {
        let config = &self.config;
        let settings = PlanSettings {
            host_swap_per_tick: config.host_swap_per_tick,
            balloon_stall_ticks: config.balloon_stall_ticks,
            rails: &config.rails,
        };
        let targets = self.pending.iter().zip(self.targets.iter());
        for ((p, &target), action) in targets.zip(actions.iter_mut()) {
            let input = PlanInput {
                state,
                target,
                min: p.min,
                max: p.max,
                tenant: &obs.tenants[p.observed],
                elapsed,
                disk: &self.specs[p.at].disk,
            };
            action.target = target;
            mechanism::plan(&input, &settings, &mut self.plans[p.at], action);
        }
    }

    /// Gemini's search (`memtide_policy::cache`): the tenants with an SLO whose application
    /// pool reports a miss-ratio curve share the configured cache budget, less the pools of
    /// SLO tenants not searched yet (no curve or no statistics: they keep what they have; a
    /// pool counts only as far as the tenant's measured memory holds it, and an agent taken
    /// over or in its back-off not at all),
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
            // An agent taken over or in its back-off is as none: its claims count for nothing.
            let lever = t
                .levers
                .app_balloon
                .as_ref()
                .filter(|_| self.plans[next].app.trusted());
            let (Some(slo), Some(lever)) = (self.specs[next].slo, lever) else {
                memory = memory.saturating_sub(s.min);
                continue;
            };
            match (&lever.curve, mechanism::app_outside(lever)) {
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
                    // The pool as far as the tenant's measured memory holds it.
                    budget = budget.saturating_sub(lever.held());
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
mod tests;
