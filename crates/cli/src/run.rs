//! Runs one scenario on the simulated host: the tick loop that joins scenario events, the controller and the sim world.
//!
//! A run hands each tick to its [`Ticks`] as it is made and keeps only the [`Run`] (the
//! scenario's facts, events, refusals, baseline means), so memory does not grow with the run's
//! length unless the `Ticks` keep them (`run_quiet` keeps every tick, for tests).

use crate::progress::Progress;
use crate::record::{BaselineFigures, EventRecord, Refusal, Run, RunRecord, TenantMeta, Ticks};
use crate::settings::{EstimatorSettings, PolicySettings};
use memtide_controller::Controller;
use memtide_model::{Pages, TenantId};
use memtide_runner::state_file::StateError;
use memtide_runner::{
    Change, Driver, Outcome, Runner, Script, Service, Sink, TickRecord, TickView, VirtualClock,
};
use memtide_scenario::{Event, Scenario, ScenarioTenant};
use memtide_sim::workload::WorkloadConfig;
use memtide_sim::world::{SimError, SimWorld};
use std::collections::BTreeMap;
use std::time::Duration;

/// Failures of a run that are not the scenario's fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("scenario {scenario}: controller: {0}", scenario = .1)]
    Config(memtide_controller::ConfigError, String),
    #[error("scenario {scenario}: sim: {source}")]
    Sim { scenario: String, source: SimError },
    /// Its ticks could not be taken (written out) as the run went.
    #[error("scenario {scenario}: outputs: {source}")]
    Output {
        scenario: String,
        source: std::io::Error,
    },
    /// A density scenario set up for a policy without memtide, which a run under the
    /// controller cannot be (the scenario's fault: exit 2).
    #[error("scenario {scenario}: density.policy = \"{policy}\" runs without memtide's controller: run it with memtide bench density --sim, or pick a variant of memtide's (sampling, tws)")]
    Unmanaged {
        scenario: String,
        policy: &'static str,
    },
    /// Admission control refused every tenant: the run measured nothing (the scenario's
    /// fault, so the command exits 2 and writes no outputs).
    #[error("scenario {scenario}: every tenant was refused, so nothing ran; the first: {tenant} at {time_s} s: {reason}")]
    NothingRan {
        scenario: String,
        tenant: String,
        time_s: f64,
        reason: String,
    },
}

/// Runs the scenario, handing each tick to `ticks` as it comes, then its unconstrained
/// baseline when the scenario asks for one (of which only per-tenant means are kept).
pub fn run(
    scenario: &Scenario,
    progress: &Progress,
    ticks: &mut impl Ticks,
) -> Result<Run, RunError> {
    if let Some(d) = scenario.density.as_ref().filter(|d| !d.policy.is_memtide()) {
        return Err(RunError::Unmanaged {
            scenario: scenario.name.clone(),
            policy: d.policy.name(),
        });
    }
    let mut run = run_once(scenario, progress, ticks)?;
    if scenario.baseline {
        let mut means = BaselineMeans::default();
        run_once(&baseline_of(scenario), progress, &mut means)?;
        run.baseline = Some(means.figures());
    }
    Ok(run)
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

/// The baseline run's per-tenant sums of throughput and ticks, tick by tick.
#[derive(Default)]
struct BaselineMeans {
    sums: BTreeMap<TenantId, (f64, f64)>,
}

impl Ticks for BaselineMeans {
    fn tick(&mut self, tick: TickRecord) -> std::io::Result<()> {
        for row in &tick.rows {
            let e = self.sums.entry(row.tenant).or_default();
            e.0 += row.throughput.unwrap_or(0.0);
            e.1 += 1.0;
        }
        Ok(())
    }
}

impl BaselineMeans {
    /// Each tenant's mean throughput over the ticks it ran.
    fn figures(self) -> Vec<BaselineFigures> {
        self.sums
            .into_iter()
            .map(|(tenant, (tp, n))| BaselineFigures {
                tenant,
                throughput: tp / n,
            })
            .collect()
    }
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

/// What a run of `scenario` is before it runs: its facts, no events or refusals yet.
pub fn describe(scenario: &Scenario) -> Run {
    Run {
        scenario: scenario.name.clone(),
        variant: None,
        seed: scenario.seed,
        tick_s: scenario.host.tick.as_secs_f64(),
        duration_s: scenario.duration.as_secs_f64(),
        description: scenario.description.clone(),
        machine_mb: scenario.host.machine.as_mib_f64(),
        tenants: scenario.tenants.iter().map(meta).collect(),
        convergence_low: scenario.convergence.0,
        convergence_high: scenario.convergence.1,
        convergence_goal: scenario.convergence_goal,
        headline: scenario.headline.clone(),
        policy: PolicySettings::of(&scenario.controller),
        ..Run::default()
    }
}

/// The run loop proper: the scenario's tenants declared in a [`Runner`] over the sim world,
/// served on a virtual clock with its timeline as a [`Script`].
fn run_once(
    scenario: &Scenario,
    progress: &Progress,
    ticks: &mut impl Ticks,
) -> Result<Run, RunError> {
    let world = SimWorld::new(scenario.host.clone(), scenario.cost.clone(), scenario.seed);
    let controller = Controller::new(
        scenario.controller.clone(),
        scenario.host.machine,
        scenario.host.host_swap,
    )
    .map_err(|e| RunError::Config(e, scenario.name.clone()))?;
    let tick = scenario.host.tick;
    let mut runner = Runner::new(world, controller, tick);
    for t in &scenario.tenants {
        runner.declare(t.spec.clone(), t.vm.clone());
    }
    let mut recorder = Recorder {
        run: describe(scenario),
        ticks,
        progress,
        wanted: tick_count(scenario),
        seen: 0,
        ran: false,
        failed: None,
    };
    Service::new(runner, VirtualClock::default())
        .with_script(script(scenario))
        .serve(&mut recorder)
        .map_err(|source| RunError::Sim {
            scenario: scenario.name.clone(),
            source,
        })?;
    if let Some(source) = recorder.failed {
        return Err(RunError::Output {
            scenario: scenario.name.clone(),
            source,
        });
    }
    let run = recorder.run;
    match run.refusals.first() {
        Some(first) if !recorder.ran => Err(RunError::NothingRan {
            scenario: scenario.name.clone(),
            tenant: first.tenant.clone(),
            time_s: first.time_s,
            reason: first.reason.clone(),
        }),
        _ => Ok(run),
    }
}

/// The scenario's timeline as changes: at each tick, the tenants that stop then those that
/// start (in tenant order), then the events due by then (in file order). An event between two
/// ticks takes effect at the next.
fn script(scenario: &Scenario) -> Script<WorkloadConfig> {
    let tick = scenario.host.tick.as_nanos().max(1);
    // The first tick at or after `at`.
    let due = |at: Duration| Duration::from_nanos((at.as_nanos().div_ceil(tick) * tick) as u64);
    let mut changes: Vec<((Duration, u8, usize), Change<WorkloadConfig>)> = Vec::new();
    for (i, t) in scenario.tenants.iter().enumerate() {
        if let Some(stop) = t.stop {
            changes.push(((due(stop), 0, i), Change::Stop(t.spec.id)));
        }
        changes.push(((due(t.start), 1, i), Change::Start(t.spec.id)));
    }
    for (i, e) in scenario.events.iter().enumerate() {
        let change = match &e.event {
            Event::SetTaxRate(tax) => Change::TaxRate(*tax),
            Event::SetWorkload { tenant, workload } => Change::World {
                id: *tenant,
                command: workload.clone(),
            },
            Event::StopTenant(tenant) => Change::Stop(*tenant),
            Event::SetTenant {
                tenant,
                min,
                max,
                shares,
            } => Change::Tenant {
                id: *tenant,
                min: *min,
                max: *max,
                shares: *shares,
            },
        };
        changes.push(((due(e.at), 2, i), change));
    }
    changes.sort_by_key(|(key, _)| *key);
    Script::new(changes.into_iter().map(|((at, _, _), c)| (at, c)).collect())
}

/// The sim's driver: each tick to the run's [`Ticks`], each change into its [`Run`], for
/// `wanted` ticks or until the `Ticks` fail.
struct Recorder<'a, T> {
    run: Run,
    ticks: &'a mut T,
    progress: &'a Progress,
    wanted: u64,
    seen: u64,
    /// Some tick had a tenant running.
    ran: bool,
    failed: Option<std::io::Error>,
}

impl<T: Ticks> Driver<SimWorld> for Recorder<'_, T> {
    fn stop(&self) -> bool {
        self.seen >= self.wanted || self.failed.is_some()
    }

    /// Never called: the simulator keeps no state file.
    fn unsaved(&mut self, _error: StateError) {}
}

impl<T: Ticks> Sink<SimWorld> for Recorder<'_, T> {
    fn tick(&mut self, t: TickView<'_, SimWorld>) {
        if self.failed.is_some() {
            return;
        }
        let record = tick_record(&t);
        self.ran |= !record.rows.is_empty();
        self.seen += 1;
        if let Err(e) = self.ticks.tick(record) {
            self.failed = Some(e);
        }
        self.progress.inc(1);
    }

    fn changed(
        &mut self,
        at: Duration,
        tenant: Option<&str>,
        change: &Change<WorkloadConfig>,
        outcome: &Outcome,
    ) {
        let time_s = at.as_secs_f64();
        let description = match (change, outcome) {
            (Change::Start(_), Outcome::Refused(reason)) => {
                self.run.refusals.push(Refusal {
                    time_s,
                    tenant: tenant.unwrap_or_default().to_string(),
                    reason: reason.clone(),
                });
                return;
            }
            (Change::Start(_), _) | (_, Outcome::NotRunning | Outcome::Started(_)) => return,
            (_, Outcome::Refused(reason)) => {
                format!("{}: change refused: {reason}", tenant.unwrap_or_default())
            }
            (_, Outcome::Done(d) | Outcome::Waiting(d)) => d.clone(),
        };
        self.run.events.push(EventRecord {
            time_s,
            description,
        });
    }
}

/// The tick's record with what only the simulated world knows: each tenant's true working set,
/// throughput and latency, and its guest's own swap-in and refault counts over the tick (a
/// tenant without figures yet is left out).
fn tick_record(t: &TickView<'_, SimWorld>) -> TickRecord {
    let mut record = TickRecord::of(t);
    record.rows.retain_mut(|row| {
        let Some(stats) = t.world.tenant_stats(row.tenant) else {
            return false;
        };
        row.working_set = Some(stats.working_set.to_bytes());
        row.throughput = Some(stats.throughput);
        row.latency_ms = Some(stats.latency_ms);
        row.swap_ins = Some(stats.swap_ins);
        row.refaults = Some(stats.refaults);
        // Host swap-ins over the tick just run (the lever's are those before it).
        if let Some(h) = &mut row.host_swap {
            h.swap_ins = Some(stats.host_swap_ins);
        }
        // An n-tier application's requests are its throughput and its mean response time
        // its latency (the figures Lai et al. plot), in place of the memory workload's.
        if let Some(r) = t.world.requests(row.tenant) {
            row.throughput = Some(r.answered as f64);
            row.latency_ms =
                (r.answered > 0).then(|| r.response_us as f64 / r.answered as f64 / 1000.0);
        }
        true
    });
    record
}

/// For tests: runs a scenario with no progress bar, every tick kept in memory.
pub fn run_quiet(scenario: &Scenario) -> Result<RunRecord, RunError> {
    let mut ticks = Vec::new();
    let run = run(scenario, &Progress::hidden(), &mut ticks)?;
    Ok(RunRecord { run, ticks })
}

/// Ticks a run of this scenario takes, counting its baseline run.
pub fn total_ticks(scenario: &Scenario) -> u64 {
    tick_count(scenario) * if scenario.baseline { 2 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// One idle VM for 20 s, with a tax-rate change at 5 s.
    fn scenario() -> Scenario {
        let text = "duration = \"20s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmin = \"64M\"\nmax = \"64M\"\n[tenants.workload]\nkind = \"idle\"\n[[events]]\nat = \"5s\"\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n";
        memtide_scenario::parse_str(text, Path::new("t.toml"), &[]).unwrap()
    }

    /// Counts the ticks it is handed and keeps none; fails from tick `fail_at` on.
    struct Count {
        ticks: u64,
        fail_at: u64,
    }

    impl Ticks for Count {
        fn tick(&mut self, _tick: TickRecord) -> std::io::Result<()> {
            self.ticks += 1;
            if self.ticks >= self.fail_at {
                return Err(std::io::Error::other("disk full"));
            }
            Ok(())
        }
    }

    #[test]
    fn a_run_hands_every_tick_to_its_ticks_and_keeps_only_what_is_not_a_tick() {
        let s = scenario();
        let mut count = Count {
            ticks: 0,
            fail_at: u64::MAX,
        };
        let run = run(&s, &Progress::hidden(), &mut count).unwrap();
        assert_eq!(count.ticks, 20);
        assert_eq!(run.tenants.len(), 1);
        assert_eq!(run.events.len(), 1, "{:?}", run.events);
        assert!(run.refusals.is_empty());
        // run_quiet keeps the same ticks in memory.
        assert_eq!(run_quiet(&s).unwrap().ticks.len(), 20);
    }

    #[test]
    fn ticks_that_fail_stop_the_run_with_their_error() {
        let mut count = Count {
            ticks: 0,
            fail_at: 3,
        };
        let err = run(&scenario(), &Progress::hidden(), &mut count).unwrap_err();
        assert_eq!(count.ticks, 3, "no tick handed on after the failure");
        assert!(matches!(err, RunError::Output { .. }), "{err}");
        assert!(err.to_string().contains("disk full"), "{err}");
    }
}
