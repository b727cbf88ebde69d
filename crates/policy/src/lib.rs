//! memtide's pure policies and estimators: functions of observations and time, with no I/O, clocks or global state.
//!
//! This is where the papers' equations live: share-based allocation by min-funding revocation
//! with the idle memory tax, admission control, reclamation states with hysteresis, the choice
//! of reclamation mechanism, and the active-memory estimators.

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
