//! memtide's shared vocabulary: units, tenant specs, observations of a host and the decisions taken on them.
//!
//! Every other crate speaks in these types; none of them does I/O or reads a clock, and there
//! is no logic here beyond conversions and formatting.
//!
//! - `units`: [`Bytes`] and [`Pages`];
//! - `tenant`: [`TenantSpec`] (min, max, shares, overhead, the estimator's choice, an [`Slo`]
//!   for its pool, a disk spec) and [`TaxRate`];
//! - `curve`: [`MissCurve`], a pool's sampled miss-ratio curve, read between its points as
//!   chords; [`Slo`], strict with a target and slack, or best effort;
//! - `observation`: [`HostObservation`] and [`TenantObservation`], counters as `Option`
//!   (missing is never zero);
//! - `mechanism`: the registry of mechanisms — [`Levers`], what can move a tenant's memory,
//!   each `Option`al with where it stands, the levers present being the tenant's capabilities
//!   ([`Mechanism`]); [`Moves`], what each lever does this tick, read off the planners' notes
//!   ([`MechanismNote`]) — and one file per mechanism with its lever, its move and its note
//!   (listed in its docs; `sharing` also holds [`HostSharing`] and [`ScanRate`], `disk`
//!   [`DiskSpec`]); all re-exported here with a glob;
//! - `decision`: [`Decision`] and [`TenantAction`] (its [`Moves`]), [`ReclamationState`];
//! - `reason`: [`Reason`], the figures behind an action (a [`MechanismNote`] with one note per
//!   lever, the estimator's state, the cache quota, the disk's note), formatted into one
//!   readable line only when read, so a step for 10,000 tenants formats nothing;
//! - `written`: the one parser of sizes such as `"512M"` and durations such as `"500ms"`,
//!   used by `memtide-config`, the API and the toucher;
//! - `resource` ([`Resource`], [`ResourceState`]), `event` ([`WorldEvent`]), `durability`,
//!   `estimator_config`.

pub mod curve;
pub mod decision;
pub mod durability;
pub mod estimator_config;
pub mod event;
pub mod mechanism;
pub mod observation;
pub mod reason;
pub mod resource;
pub mod tenant;
pub mod units;
pub mod written;

pub use curve::{CurveError, MissCurve, Slo, SloError};
pub use decision::{Decision, ReclamationState, TenantAction};
pub use durability::{Durability, PerSecond};
pub use estimator_config::{EstimatorConfig, SamplingConfig, WorkingSetConfig};
pub use event::{Stall, WorldEvent};
pub use mechanism::*;
pub use observation::{CompletedSample, HostObservation, SampleCounts, TenantObservation};
pub use reason::{CacheNote, EstimateNote, ProbePhase, Reason};
pub use resource::{Resource, ResourceState};
pub use tenant::{TaxRate, TaxRateError, TenantId, TenantSpec};
pub use units::{Bytes, Pages, PAGE_SIZE};
