//! Runs one scenario on the simulated host: the tick loop that joins scenario events, the controller and the sim world.

use crate::progress::Progress;
use crate::record::{
    BaselineFigures, EventRecord, Refusal, RunRecord, TenantMeta, TenantRow, TickRecord,
};
use crate::settings::{EstimatorSettings, PolicySettings};
use memtide_controller::{Controller, ControllerError};
use memtide_model::{Decision, HostObservation, Pages, TenantId};
use memtide_scenario::{Event, Scenario, ScenarioTenant};
use memtide_sim::world::{SimError, SimWorld};
use std::collections::BTreeMap;

/// Failures of a run that are not the scenario's fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("scenario {scenario}: controller: {0}", scenario = .1)]
    Config(memtide_controller::ConfigError, String),
    #[error("scenario {scenario}: sim: {source}")]
    Sim { scenario: String, source: SimError },
}

/// Runs the scenario (and its unconstrained baseline when asked) and records every tick.
pub fn run(scenario: &Scenario, progress: &Progress) -> Result<RunRecord, RunError> {
    let mut record = run_once(scenario, progress)?;
    if scenario.baseline {
        let baseline = run_once(&baseline_of(scenario), progress)?;
        record.baseline = Some(mean_figures(&baseline));
    }
    Ok(record)
}

/// Ticks in the scenario (the tick is the sim host's).
pub fn tick_count(scenario: &Scenario) -> u64 {
    let tick = scenario.host.tick.as_secs_f64();
    (scenario.duration.as_secs_f64() / tick).round() as u64
}

/// The same scenario with memory for everyone at its max and nothing reclaimed: the
/// reference run that degradation is measured against.
pub fn baseline_of(scenario: &Scenario) -> Scenario {
    let mut base = scenario.clone();
    let wanted: Pages = base
        .tenants
        .iter()
        .map(|t| t.spec.max + t.spec.overhead)
        .sum();
    // Room for every tenant at max plus the high-state reserve, so the host stays in high.
    let machine = wanted.scale(1.0 / (1.0 - base.controller.thresholds.high) * 1.05);
    base.host.machine = machine.max(base.host.machine);
    base.controller.budget = Some(base.tenants.iter().map(|t| t.spec.max).sum());
    for t in &mut base.tenants {
        t.spec.cap_at_estimate = false;
        t.vm.initial_balloon = Pages::ZERO;
    }
    base.baseline = false;
    base
}

fn mean_figures(record: &RunRecord) -> Vec<BaselineFigures> {
    let mut sums: BTreeMap<TenantId, (f64, f64, f64)> = BTreeMap::new();
    for tick in &record.ticks {
        for row in &tick.rows {
            let e = sums.entry(row.tenant).or_default();
            e.0 += row.throughput;
            e.1 += row.latency_ms;
            e.2 += 1.0;
        }
    }
    sums.into_iter()
        .map(|(tenant, (tp, lat, n))| BaselineFigures {
            tenant,
            throughput: tp / n,
            latency_ms: lat / n,
        })
        .collect()
}

fn meta(t: &ScenarioTenant) -> TenantMeta {
    TenantMeta {
        id: t.spec.id,
        name: t.spec.name.clone(),
        estimator: t.spec.estimator.name().to_string(),
        min_mb: t.spec.min.as_mib_f64(),
        max_mb: t.spec.max.as_mib_f64(),
        shares: t.spec.shares,
        balloon_driver: t.vm.balloon.is_some(),
        estimator_settings: EstimatorSettings::of(&t.spec),
    }
}

/// The run loop proper.
fn run_once(scenario: &Scenario, progress: &Progress) -> Result<RunRecord, RunError> {
    let sim_err = |source| RunError::Sim {
        scenario: scenario.name.clone(),
        source,
    };
    let mut world = SimWorld::new(scenario.host.clone(), scenario.cost.clone(), scenario.seed);
    let mut controller = Controller::new(
        scenario.controller.clone(),
        scenario.host.machine,
        scenario.host.host_swap,
    )
    .map_err(|e| RunError::Config(e, scenario.name.clone()))?;
    let tick = scenario.host.tick;
    let ticks = tick_count(scenario);
    let mut record = RunRecord {
        scenario: scenario.name.clone(),
        variant: None,
        seed: scenario.seed,
        tick_s: tick.as_secs_f64(),
        duration_s: scenario.duration.as_secs_f64(),
        description: scenario.description.clone(),
        machine_mb: scenario.host.machine.as_mib_f64(),
        tenants: scenario.tenants.iter().map(meta).collect(),
        convergence_low: scenario.convergence.0,
        convergence_high: scenario.convergence.1,
        policy: PolicySettings::of(&scenario.controller),
        ..RunRecord::default()
    };
    let mut running: BTreeMap<TenantId, &ScenarioTenant> = BTreeMap::new();
    let mut next_event = 0;

    for i in 0..ticks {
        let now = tick * i as u32;
        let time_s = now.as_secs_f64();
        // Tenants that stop, then those that start, at this tick.
        for t in &scenario.tenants {
            if t.stop == Some(now) && running.remove(&t.spec.id).is_some() {
                stop(&mut world, &mut controller, t.spec.id).map_err(sim_err)?;
                record.events.push(EventRecord {
                    time_s,
                    description: format!("{} stops", t.spec.name),
                });
            }
        }
        for t in &scenario.tenants {
            if t.start == now {
                match start(&mut world, &mut controller, t) {
                    Ok(()) => {
                        running.insert(t.spec.id, t);
                    }
                    Err(reason) => record.refusals.push(Refusal {
                        time_s,
                        tenant: t.spec.name.clone(),
                        reason,
                    }),
                }
            }
        }
        while let Some(ev) = scenario.events.get(next_event).filter(|e| e.at <= now) {
            next_event += 1;
            if let Some(description) = apply_event(
                &mut world,
                &mut controller,
                &mut running,
                scenario,
                &ev.event,
            )
            .map_err(sim_err)?
            {
                record.events.push(EventRecord {
                    time_s,
                    description,
                });
            }
        }

        let obs = world_observe(&mut world).map_err(sim_err)?;
        let decision = controller.step(&obs);
        memtide_controller::Host::apply(&mut world, &decision).map_err(sim_err)?;
        world.run_tick();
        record
            .ticks
            .push(tick_record(&world, &obs, &decision, time_s));
        progress.inc(1);
    }
    Ok(record)
}

fn world_observe(world: &mut SimWorld) -> Result<HostObservation, SimError> {
    memtide_controller::Host::observe(world)
}

/// Admission control, then power-on; a refusal is a reason, not an error of the run.
fn start(
    world: &mut SimWorld,
    controller: &mut Controller,
    t: &ScenarioTenant,
) -> Result<(), String> {
    controller.admit(t.spec.clone()).map_err(|e| match e {
        ControllerError::Refused(r) => r.to_string(),
        other => other.to_string(),
    })?;
    if let Err(e) = world.power_on(t.spec.id, t.vm.clone()) {
        controller.remove(t.spec.id);
        return Err(e.to_string());
    }
    Ok(())
}

fn stop(world: &mut SimWorld, controller: &mut Controller, id: TenantId) -> Result<(), SimError> {
    controller.remove(id);
    world.power_off(id)
}

/// Carries out one scenario event; returns its description, or `None` when it concerned a
/// tenant that is not running (refused or already stopped).
fn apply_event(
    world: &mut SimWorld,
    controller: &mut Controller,
    running: &mut BTreeMap<TenantId, &ScenarioTenant>,
    scenario: &Scenario,
    event: &Event,
) -> Result<Option<String>, SimError> {
    let name = |id: TenantId| {
        scenario
            .tenants
            .iter()
            .find(|t| t.spec.id == id)
            .map_or_else(|| id.to_string(), |t| t.spec.name.clone())
    };
    Ok(match event {
        Event::SetTaxRate(tax) => {
            controller.set_tax_rate(*tax);
            Some(format!("tax rate -> {}", tax.value()))
        }
        Event::SetWorkload { tenant, workload } => {
            if !running.contains_key(tenant) {
                return Ok(None);
            }
            world.set_workload(*tenant, workload.clone())?;
            Some(format!("{} runs {}", name(*tenant), workload.kind()))
        }
        Event::StopTenant(tenant) => {
            if running.remove(tenant).is_none() {
                return Ok(None);
            }
            stop(world, controller, *tenant)?;
            Some(format!("{} stops", name(*tenant)))
        }
        Event::SetTenant {
            tenant,
            min,
            max,
            shares,
        } => {
            let Some(view) = controller.tenant(*tenant) else {
                return Ok(None);
            };
            let (min, max, shares) = (
                min.unwrap_or(view.spec.min),
                max.unwrap_or(view.spec.max),
                shares.unwrap_or(view.spec.shares),
            );
            match controller.update_tenant(*tenant, min, max, shares) {
                Ok(()) => Some(format!(
                    "{}: min {min}, max {max}, shares {shares}",
                    name(*tenant)
                )),
                Err(e) => Some(format!("{}: change refused: {e}", name(*tenant))),
            }
        }
    })
}

fn tick_record(
    world: &SimWorld,
    obs: &HostObservation,
    decision: &Decision,
    time_s: f64,
) -> TickRecord {
    let rows = obs
        .tenants
        .iter()
        .filter_map(|t| {
            let action = decision.action(t.id)?;
            let stats = world.tenant_stats(t.id)?;
            Some(TenantRow {
                tenant: t.id,
                allocated_mb: t.allocated.as_mib_f64(),
                target_mb: action.target.as_mib_f64(),
                active_estimate_mb: action.active_estimate.as_mib_f64(),
                working_set_mb: stats.working_set.as_mib_f64(),
                balloon_mb: t.balloon.as_mib_f64(),
                host_swapped_mb: t.host_swapped.as_mib_f64(),
                throughput: stats.throughput,
                latency_ms: stats.latency_ms,
                swap_ins: stats.swap_ins,
                refaults: stats.refaults,
                host_swap_ins: stats.host_swap_ins,
                blocked: action.blocked,
                reason: action.reason.to_string(),
            })
        })
        .collect();
    TickRecord {
        time_s,
        state: decision.state,
        free_mb: obs.free.as_mib_f64(),
        budget_mb: decision.budget.as_mib_f64(),
        rows,
    }
}

/// Convenience for tests and benchmarks: run a scenario with no progress bar.
pub fn run_quiet(scenario: &Scenario) -> Result<RunRecord, RunError> {
    run(scenario, &Progress::hidden())
}

/// Ticks a run of this scenario takes, counting its baseline run.
pub fn total_ticks(scenario: &Scenario) -> u64 {
    tick_count(scenario) * if scenario.baseline { 2 } else { 1 }
}
