//! memtide's pure policies and estimators: functions of observations and time, with no I/O, clocks or global state.
//!
//! This is where the papers' equations live: share-based allocation by min-funding revocation
//! with the idle memory tax, admission control, reclamation states with hysteresis, the choice
//! of reclamation mechanism, and the active-memory estimators.
//!
//! - `allocation`: min-funding revocation with the idle memory tax ([`allocate`],
//!   [`Allocator`]), counting units, not bytes;
//! - `admission`: min + overhead in machine memory, max − min in host swap
//!   ([`AdmissionLedger`]);
//! - `reclamation`: the high, soft, hard and low states with hysteresis, one
//!   [`ResourceTracker`] per resource;
//! - `mechanism/`: one planner per lever, each in its own file (`limit` with its safety rails,
//!   `host_swap` with blocking, ...), and the chooser in `mod.rs` that runs them in order, whose
//!   docs list them all (see [`mechanism`]); `sharing` also sets the host-wide
//!   scan rate (idle in high, pressed below, cut to a CPU budget at the measured cost per page,
//!   [`mechanism::ScanCost`]); `app_balloon` remembers an agent's move in progress in
//!   [`mechanism::AppWatch`] and takes over a stuck, dead or dishonest agent;
//! - `disk`: Lai et al.'s disk weights, raised while a tenant misses its I/O latency target
//!   (`mechanism::disk`); `advice`: their mitigations of fsync interference as advice to a
//!   database's operator;
//! - `cache`: Gemini's utilities (the one definition the cache simulator uses too) and
//!   [`Quotas::search`], the exact division of a pool budget among SLO tenants by their
//!   curves, strict SLOs first;
//! - `estimator/`: `sampling` (ESX's EWMAs, with the upper confidence bound the idle tax
//!   charges and a cap that faults raise and the bound lowers), `working_set` (the TWS probe),
//!   `committed` (self-ballooning).

pub mod admission;
pub mod advice;
pub mod allocation;
pub mod cache;
pub mod estimator;
pub mod mechanism;
pub mod reclamation;

pub use admission::{AdmissionLedger, AdmissionRefusal, Backing};
pub use allocation::{adjusted_shares_per_page, allocate, AllocationRequest, Allocator};
pub use cache::{PoolLatencies, Quota, QuotaSettings, QuotaTenant, Quotas, UtilityScale};
pub use estimator::{ActiveEstimator, EstimatorInput};
pub use mechanism::limit::{fit_to_budget, plan_limit, LimitInput, LimitRails};
pub use mechanism::{PlanInput, PlanMemory, PlanSettings};
pub use reclamation::{ReclamationThresholds, ReclamationTracker, ResourceTracker, ThresholdError};
