//! A scenario ready to run: the host, the controller's configuration, each tenant's spec and VM, and the timed events.

use memtide_controller::ControllerConfig;
use memtide_demand::{Policy, ServerKind, Slo};
use memtide_model::{Pages, TaxRate, TenantId, TenantSpec};
use memtide_sim::config::{HostConfig, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::WorkloadConfig;
use std::path::PathBuf;
use std::time::Duration;

/// One experiment on the simulated host, checked and converted from its scenario file.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// The file it came from (`<demo>` for the embedded one).
    pub source: PathBuf,
    /// The variant this is, when built with [`crate::load_variant`].
    pub variant: Option<String>,
    /// Length of the run: a whole number of ticks.
    pub duration: Duration,
    pub seed: u64,
    /// Also run an unconstrained baseline to measure degradation against.
    pub baseline: bool,
    /// Band `(low, high)` around the true working set that counts as converged.
    pub convergence: (f64, f64),
    /// The file sets `[convergence]`: converging is a goal of the run, and reported.
    pub convergence_goal: bool,
    /// `[headline]`: the result the run exists to show.
    pub headline: Option<Headline>,
    /// What building it changed that the user should hear of (a shortened run's tenants that
    /// never start, its events dropped), for `memtide sim` to print.
    pub notes: Vec<String>,
    /// Machine memory, host swap and the tick (1 s).
    pub host: HostConfig,
    pub cost: CostModel,
    pub controller: ControllerConfig,
    /// In file order; tenant `i` has `TenantId(i)`.
    pub tenants: Vec<ScenarioTenant>,
    /// Sorted by time (stable: events at the same time keep file order).
    pub events: Vec<TimedEvent>,
    pub variants: Vec<Variant>,
    /// The density benchmark's set-up, for a scenario with `[density]` (its tenants are
    /// built from it).
    pub density: Option<Density>,
}

/// The result a scenario exists to show (`[headline]`, docs/scenarios.md): a tenant figure's
/// mean in windows of the run, for some or all of its tenants.
#[derive(Clone, Debug, PartialEq)]
pub struct Headline {
    pub text: String,
    pub figure: Figure,
    /// `(start, end)`; empty: the whole run.
    pub windows: Vec<(Duration, Duration)>,
    /// Tenant names, in the order shown; every tenant when the file names none.
    pub tenants: Vec<String>,
}

/// A tenant figure a headline averages, as its timeline.csv column holds it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Figure {
    Allocated,
    Target,
    Estimate,
    WorkingSet,
    Balloon,
    Throughput,
    /// Over the ticks the tenant served anything.
    Latency,
}

impl Figure {
    pub const ALL: [Figure; 7] = [
        Figure::Allocated,
        Figure::Target,
        Figure::Estimate,
        Figure::WorkingSet,
        Figure::Balloon,
        Figure::Throughput,
        Figure::Latency,
    ];

    /// As written in a file.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Allocated => "allocated",
            Figure::Target => "target",
            Figure::Estimate => "estimate",
            Figure::WorkingSet => "working_set",
            Figure::Balloon => "balloon",
            Figure::Throughput => "throughput",
            Figure::Latency => "latency",
        }
    }

    /// Its unit as printed.
    pub fn unit(self) -> &'static str {
        match self {
            Figure::Throughput => "ops/s",
            Figure::Latency => "ms",
            _ => "MB",
        }
    }
}

/// A density scenario's set-up (`[density]`, docs/scenarios.md): the policy its tenants are
/// set up for, how many, the run, the SLO, the search for N and the mix.
#[derive(Clone, Debug, PartialEq)]
pub struct Density {
    pub policy: Policy,
    /// N.
    pub tenants: usize,
    /// The memory every tenant shares, in bytes: `[policy] budget`.
    pub budget: u64,
    /// Fill, then idle, before the load.
    pub warmup: Duration,
    /// The load's length (the scenario's duration is `warmup + run`).
    pub run: Duration,
    pub window: Duration,
    pub start: usize,
    pub step: usize,
    pub max: usize,
    pub slo: Slo,
    pub mix: Vec<DensityKind>,
}

/// One kind of the density mix.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityKind {
    pub server: ServerKind,
    pub keys: u64,
    pub value_bytes: u64,
    pub demand: String,
    /// What it holds filled: its server's own memory and its dataset, in bytes.
    pub peak: u64,
}

/// One tenant: what the controller knows of it and the VM the sim runs for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioTenant {
    /// `id` is the tenant's index in the file.
    pub spec: TenantSpec,
    /// `sampling` is `Some` exactly when the estimator is ESX sampling; `overhead` equals
    /// `spec.overhead`.
    pub vm: VmConfig,
    /// Power-on time (a whole tick).
    pub start: Duration,
    /// Power-off time (a whole tick, after `start`), if any.
    pub stop: Option<Duration>,
}

/// An event and when it happens.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedEvent {
    /// Applied at the first tick at or after this time.
    pub at: Duration,
    pub event: Event,
}

/// Something a scenario changes during the run.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    SetTaxRate(TaxRate),
    SetWorkload {
        tenant: TenantId,
        workload: WorkloadConfig,
    },
    StopTenant(TenantId),
    /// New min, max and/or shares; `None` keeps the current value.
    SetTenant {
        tenant: TenantId,
        min: Option<Pages>,
        max: Option<Pages>,
        shares: Option<u64>,
    },
}

/// A named way to run the scenario: `--set` overrides applied to the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub overrides: Vec<String>,
}

impl Scenario {
    /// The tenant with this name.
    pub fn tenant(&self, name: &str) -> Option<&ScenarioTenant> {
        self.tenants.iter().find(|t| t.spec.name == name)
    }

    /// Number of ticks in the run.
    pub fn ticks(&self) -> u64 {
        let tick = self.host.tick.as_secs_f64();
        if tick > 0.0 {
            (self.duration.as_secs_f64() / tick).round() as u64
        } else {
            0
        }
    }
}
