//! What one simulated run records: the run's facts and what happened besides its ticks ([`Run`]), and where its ticks go as they come ([`Ticks`]): written out and forgotten by `memtide sim`, kept in memory ([`RunRecord`]) by tests that read every tick.

use crate::settings::{EstimatorSettings, PolicySettings};
use memtide_model::TenantId;
pub use memtide_runner::{TenantRow, TickRecord};
use serde::Serialize;

/// One run of one scenario (or one variant of it), without its ticks: what the outputs need
/// besides them. Its size depends on the scenario (tenants, events, refusals), never on the
/// run's length.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub scenario: String,
    /// The scenario's description, for the report.
    pub description: String,
    /// Variant name when the scenario defines variants.
    pub variant: Option<String>,
    pub seed: u64,
    pub tick_s: f64,
    pub duration_s: f64,
    pub machine_mb: f64,
    pub tenants: Vec<TenantMeta>,
    pub refusals: Vec<Refusal>,
    /// Scenario events as they happened, for the report.
    pub events: Vec<EventRecord>,
    /// Per-tenant throughput of the unconstrained baseline run, when the scenario asks for one.
    pub baseline: Option<Vec<BaselineFigures>>,
    /// Band around the true working set that counts as converged: allocated and target within
    /// [low * working set, high * working set] from some tick to the end.
    pub convergence_low: f64,
    pub convergence_high: f64,
    /// The scenario sets a convergence band: converging is a goal, and reported.
    pub convergence_goal: bool,
    /// The result the scenario exists to show (`[headline]`).
    pub headline: Option<memtide_scenario::Headline>,
    /// The controller's settings at the start of the run.
    pub policy: PolicySettings,
}

/// Where a run's ticks go, one at a time, as the run makes them.
pub trait Ticks {
    /// Takes the next tick; an error stops the run.
    fn tick(&mut self, tick: TickRecord) -> std::io::Result<()>;
}

/// Every tick kept, in order.
impl Ticks for Vec<TickRecord> {
    fn tick(&mut self, tick: TickRecord) -> std::io::Result<()> {
        self.push(tick);
        Ok(())
    }
}

/// A whole run with every tick in memory (0.7 KB per tenant-second): for tests and tools that
/// read any tick; `memtide sim` streams its ticks instead. Reads as its [`Run`] too.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    pub run: Run,
    pub ticks: Vec<TickRecord>,
}

impl std::ops::Deref for RunRecord {
    type Target = Run;

    fn deref(&self) -> &Run {
        &self.run
    }
}

/// Static facts about one tenant.
#[derive(Clone, Debug, Serialize)]
pub struct TenantMeta {
    pub id: TenantId,
    pub name: String,
    pub estimator: String,
    pub min_mb: f64,
    pub max_mb: f64,
    pub shares: u64,
    pub balloon_driver: bool,
    pub estimator_settings: EstimatorSettings,
}

/// A tenant admission control refused.
#[derive(Clone, Debug, Serialize)]
pub struct Refusal {
    pub time_s: f64,
    pub tenant: String,
    pub reason: String,
}

/// A scenario event that took effect.
#[derive(Clone, Debug, Serialize)]
pub struct EventRecord {
    pub time_s: f64,
    pub description: String,
}

/// A tenant's figures in the unconstrained baseline run: its mean throughput, against which
/// the summary's degradation is measured.
#[derive(Clone, Debug, Serialize)]
pub struct BaselineFigures {
    pub tenant: TenantId,
    pub throughput: f64,
}
