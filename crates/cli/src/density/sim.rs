//! `memtide bench density --sim FILE`: the density benchmark in the simulator (issue 31) — the same search for N per policy, on a scenario with `[density]` (scenarios/density-*.toml), each trial a deterministic simulated run judged by the same windows as the real one.
//!
//! Each variant of the file is a policy (`static`, `kernel`, `sampling`, `tws`), searched in
//! the file's order. A trial of N loads the variant with `density.tenants=N` (the caller's
//! `--set` overrides first), so tenant *i* is the same kind, with the same demand pattern and
//! seed, in every trial and on the real host. Then:
//!
//! - `static`: N is computed as on the real host (the most tenants whose static limits fit
//!   the budget), tried, and N + 1 recorded as not fitting;
//! - `kernel`: the tenants run with no manager: `SimWorld` alone, its machine memory the
//!   budget, paging to host swap when full;
//! - `sampling`, `tws`: the controller manages them through the runner, as `memtide sim` runs
//!   any scenario.
//!
//! A trial whose tenants admission control refuses does not run: it is recorded as not
//! fitting, as static's N + 1. After the run every tenant's windows (`memtide_sim::slo`) are judged by
//! `memtide_demand::attainment` and `wake_time` ([`Tally`], the real trial's), into the same
//! [`TrialResult`], table, chart and `results.json` (`report`). Memory used is the machine's
//! in use, averaged over the load's ticks; swap traffic is the guests' and the host's swap-ins
//! and swap-outs over them. Nothing is OOM-killed in the simulator (a tenant that can free
//! nothing stalls, its GETs failing) and memtide's CPU is not measured.
//!
//! Cost: a trial is one simulated run of `warmup + duration` ticks; each trial's wall time
//! is printed (docs/benchmarks.md has the figures per scale).

use crate::density::config::{DensityConfig, Policy, TenantKind};
use crate::density::trial::{Tally, TrialResult};
use crate::density::{search_policies, static_fit, DensityError};
use memtide_controller::Controller;
use memtide_demand::{static_limit, tenant_seed, Demand, Schedule, Second};
use memtide_model::{Pages, TenantId};
use memtide_runner::{Change, Outcome, Runner, Sink, TickView};
use memtide_scenario::Scenario;
use memtide_sim::world::SimWorld;
use std::path::Path;
use std::time::{Duration, Instant};

/// The set-up of a density scenario: the benchmark's config, each kind's peak and the file's
/// overrides.
pub struct SimBench {
    pub config: DensityConfig,
    pub peaks: Vec<u64>,
    path: std::path::PathBuf,
    overrides: Vec<String>,
}

impl SimBench {
    /// Reads `path` with `overrides`: its `[density]` table and its variants, the policies.
    pub fn load(path: &Path, overrides: &[String]) -> Result<SimBench, DensityError> {
        let base = memtide_scenario::load(path, overrides)
            .map_err(|e| DensityError::Scenario(e.to_string()))?;
        let bad = |why: String| DensityError::Config {
            path: path.to_path_buf(),
            why,
        };
        let Some(d) = &base.density else {
            return Err(bad(
                "no [density] table: not a density scenario (scenarios/density-*.toml)".into(),
            ));
        };
        let mut policies = Vec::new();
        for (i, v) in base.variants.iter().enumerate() {
            match Policy::named(&v.name).filter(|p| p.simulated()) {
                Some(p) => policies.push(p),
                None => {
                    return Err(bad(format!(
                        "variants[{i}].name = \"{}\": a density scenario's variants are its \
                         policies: static, kernel, sampling, tws",
                        v.name
                    )))
                }
            }
        }
        if policies.is_empty() {
            return Err(bad(
                "no [[variants]]: name the policies to compare (static, kernel, sampling, tws)"
                    .into(),
            ));
        }
        let config = DensityConfig {
            budget: d.budget,
            duration: d.run.as_secs_f64(),
            warmup: d.warmup.as_secs_f64(),
            window: d.window.as_secs_f64(),
            seed: base.seed,
            policies,
            start: d.start,
            step: d.step,
            max: d.max,
            slo: d.slo,
            senpai: None,
            mix: d
                .mix
                .iter()
                .map(|k| TenantKind {
                    server: k.server,
                    keys: k.keys,
                    value_bytes: k.value_bytes,
                    demand: k.demand.clone(),
                })
                .collect(),
            // The simulated policies' parameters are the scenario's own.
            memtide_tables: String::new(),
        };
        Ok(SimBench {
            peaks: d.mix.iter().map(|k| k.peak).collect(),
            config,
            path: path.to_path_buf(),
            overrides: overrides.to_vec(),
        })
    }

    fn peak(&self, i: usize) -> u64 {
        self.peaks[i % self.peaks.len()]
    }

    /// The most tenants static sizing fits in the budget (at most `max`).
    pub fn static_fit(&self) -> usize {
        static_fit(&self.config, &self.peaks)
    }

    /// The scenario of a trial: `policy`'s variant with N tenants.
    pub fn scenario(&self, policy: Policy, n: usize) -> Result<Scenario, DensityError> {
        let mut overrides = self.overrides.clone();
        overrides.push(format!("density.tenants={n}"));
        memtide_scenario::load_variant(&self.path, &overrides, policy.name())
            .map_err(|e| DensityError::Scenario(e.to_string()))
    }

    /// One trial: N tenants under `policy`, simulated and judged.
    pub fn trial(&self, policy: Policy, n: usize) -> Result<TrialResult, DensityError> {
        let reserved: u64 = (0..n).map(|i| static_limit(self.peak(i))).sum();
        if policy == Policy::Static && reserved > self.config.budget {
            return Ok(TrialResult::not_fitting(policy, n, reserved));
        }
        let scenario = self.scenario(policy, n)?;
        let wall = Instant::now();
        let mut watch = Watch::new(&scenario);
        let world = SimWorld::new(scenario.host.clone(), scenario.cost.clone(), scenario.seed);
        let judge = |world: &SimWorld| self.judge(&scenario, world);
        let tally = if policy.is_memtide() {
            run_managed(&scenario, world, &mut watch, judge)?
        } else {
            run_alone(&scenario, world, &mut watch, judge)?
        };
        let Some(mut tally) = tally.transpose()? else {
            eprintln!("density --sim: {policy} n={n}: admission control refused a tenant");
            return Ok(TrialResult::not_fitting(policy, n, reserved));
        };
        let page = memtide_model::PAGE_SIZE as f64 / f64::from(1u32 << 20);
        let result = TrialResult {
            policy,
            n,
            fits: true,
            // The simulated machine is never stolen from.
            attainment: tally.all,
            attainment_all: tally.all,
            stolen: Vec::new(),
            oom_kills: 0,
            died: Vec::new(),
            wakes_within: tally.within,
            wakes: tally.wakes,
            wake_p90_s: tally.wake_p90(),
            swap_in_mib: watch.swap_in as f64 * page,
            swap_out_mib: watch.swap_out as f64 * page,
            manager_cpu_s: None,
            run_s: self.config.duration,
            mean_usage: watch.mean_usage(),
            reserved,
            tenants: tally.tenants,
        };
        eprintln!(
            "density --sim: {policy} n={n}: {} of {} active windows met the SLO ({:.1} s)",
            result.attainment.met,
            result.attainment.active,
            wall.elapsed().as_secs_f64()
        );
        Ok(result)
    }

    /// Every tenant of `scenario` judged by its windows in `world` after the run.
    fn judge(&self, scenario: &Scenario, world: &SimWorld) -> Result<Tally, DensityError> {
        let mut tally = Tally::default();
        for (i, t) in scenario.tenants.iter().enumerate() {
            let meter = world.slo(t.spec.id).ok_or_else(|| {
                DensityError::Trial(format!("{} is not a key-value server", t.spec.name))
            })?;
            let kind = self.config.kind(i);
            let demand =
                Demand::parse(&kind.demand).map_err(|e| DensityError::Trial(e.to_string()))?;
            let seed = tenant_seed(self.config.seed, i as u64);
            let schedule = Schedule::new(&demand, seed, self.config.duration)
                .map_err(|e| DensityError::Trial(e.to_string()))?;
            let seconds: Vec<Second> = meter.seconds().collect();
            tally.add(
                t.spec.name.clone(),
                kind,
                &meter.windows(),
                &seconds,
                schedule.bursts(),
                &self.config.slo,
                &[],
            );
        }
        Ok(tally)
    }
}

/// What a trial's ticks add up to, over the load (after the warm-up).
struct Watch {
    ids: Vec<TenantId>,
    machine: Pages,
    warmup_ticks: u64,
    ticks: u64,
    seen: u64,
    usage: u128,
    loaded: u64,
    swap_in: u64,
    swap_out: u64,
}

impl Watch {
    fn new(s: &Scenario) -> Watch {
        Watch {
            ids: s.tenants.iter().map(|t| t.spec.id).collect(),
            machine: s.host.machine,
            warmup_ticks: s.density.as_ref().map_or(0, |d| d.warmup.as_secs()),
            ticks: s.ticks(),
            seen: 0,
            usage: 0,
            loaded: 0,
            swap_in: 0,
            swap_out: 0,
        }
    }

    /// After each tick of `world`.
    fn tick(&mut self, world: &SimWorld) {
        self.seen += 1;
        if self.seen <= self.warmup_ticks {
            return;
        }
        self.loaded += 1;
        self.usage += u128::from(self.machine.saturating_sub(world.free()).0);
        for &id in &self.ids {
            if let Some(s) = world.tenant_stats(id) {
                self.swap_in += s.swap_ins + s.host_swap_ins;
                self.swap_out += s.swap_outs + s.host_swap_outs;
            }
        }
    }

    /// Machine memory in use, in bytes, averaged over the load.
    fn mean_usage(&self) -> u64 {
        if self.loaded == 0 {
            return 0;
        }
        (self.usage / u128::from(self.loaded)) as u64 * memtide_model::PAGE_SIZE
    }
}

/// No manager: every tenant powered on, the world run tick after tick; `judge` reads it at
/// the end.
fn run_alone<R>(
    scenario: &Scenario,
    mut world: SimWorld,
    watch: &mut Watch,
    judge: impl FnOnce(&SimWorld) -> R,
) -> Result<Option<R>, DensityError> {
    for t in &scenario.tenants {
        world
            .power_on(t.spec.id, t.vm.clone())
            .map_err(|e| DensityError::Trial(format!("{}: {e}", t.spec.name)))?;
    }
    for _ in 0..watch.ticks {
        world.run_tick();
        watch.tick(&world);
    }
    Ok(Some(judge(&world)))
}

/// The runner's sink for a managed trial: the watch sees each tick.
struct Ticks<'a>(&'a mut Watch);

impl Sink<SimWorld> for Ticks<'_> {
    fn tick(&mut self, tick: TickView<'_, SimWorld>) {
        self.0.tick(tick.world);
    }

    fn changed(
        &mut self,
        _at: Duration,
        _tenant: Option<&str>,
        _change: &Change<memtide_sim::workload::WorkloadConfig>,
        _outcome: &Outcome,
    ) {
    }
}

/// memtide: the controller manages the tenants through the runner; `judge` reads the world
/// at the end. `None` when admission control refused a tenant: the policy cannot place N.
fn run_managed<R>(
    scenario: &Scenario,
    world: SimWorld,
    watch: &mut Watch,
    judge: impl FnOnce(&SimWorld) -> R,
) -> Result<Option<R>, DensityError> {
    let controller = Controller::new(
        scenario.controller.clone(),
        scenario.host.machine,
        scenario.host.host_swap,
    )
    .map_err(|e| DensityError::Trial(format!("controller: {e}")))?;
    let tick = scenario.host.tick;
    let mut runner = Runner::new(world, controller, tick);
    for t in &scenario.tenants {
        runner.declare(t.spec.clone(), t.vm.clone());
    }
    let sim = |e: memtide_sim::SimError| DensityError::Trial(format!("sim: {e}"));
    for t in &scenario.tenants {
        match runner.start(t.spec.id, None, None).map_err(sim)? {
            Outcome::Started(_) => {}
            Outcome::Refused(_) => return Ok(None),
            other => {
                return Err(DensityError::Trial(format!(
                    "{} did not start: {other:?}",
                    t.spec.name
                )))
            }
        }
    }
    let mut sink = Ticks(watch);
    for k in 0..sink.0.ticks {
        runner.tick(tick * k as u32, &mut sink).map_err(sim)?;
    }
    Ok(Some(judge(runner.world())))
}

/// Runs the search of every policy of `path` (with `overrides`), writing under `out`.
pub fn run(path: &Path, overrides: &[String], out: &Path) -> Result<(), DensityError> {
    let bench = SimBench::load(path, overrides)?;
    std::fs::create_dir_all(out).map_err(|e| DensityError::io(&out.display().to_string(), e))?;
    search_policies(&bench.config, &bench.peaks, out, |policy, n| {
        bench.trial(policy, n)
    })
}
