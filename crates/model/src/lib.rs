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
//! - `disk`: [`DiskIo`] (a tenant's I/O on a shared disk since the last observation, with its
//!   weight and cap), [`DiskSpec`] (its weight and latency target), [`DiskNote`] (the
//!   planner's weight and why);
//! - `sharing`: [`HostSharing`] (pages shared, frames, zero pages, the machinery's memory,
//!   pages scanned and its CPU), [`ScanRate`], [`SharingSettings`], [`IoRemapping`];
//! - `observation`: [`HostObservation`] and [`TenantObservation`], counters as `Option`
//!   (missing is never zero);
//! - `lever`: [`Levers`], what can move a tenant's memory — guest balloon, application
//!   balloon, page sharing, host swap, a limit, the protection of its min, its disk — each
//!   `Option`al with where it stands; the levers present are the tenant's capabilities;
//! - `decision`: [`Decision`] and [`TenantAction`] ([`Moves`]: what each lever does this
//!   tick, read off the planners' notes in its [`Reason`]), [`ReclamationState`],
//!   [`Mechanism`];
//! - `reason`: [`Reason`], the figures behind an action (a [`MechanismNote`] with one note per
//!   lever, the estimator's state), formatted into one readable line only when read, so a step
//!   for 10,000 tenants formats nothing;
//! - `written`: the one parser of sizes such as `"512M"` and durations such as `"500ms"`,
//!   used by `memtide-config`, the API and the toucher;
//! - `resource` ([`Resource`], [`ResourceState`]), `event` ([`WorldEvent`]), `durability`,
//!   `estimator_config`.

pub mod curve;
pub mod decision;
pub mod disk;
pub mod durability;
pub mod estimator_config;
pub mod event;
pub mod lever;
pub mod observation;
pub mod reason;
pub mod resource;
pub mod sharing;
pub mod tenant;
pub mod units;
pub mod written;

pub use curve::{CurveError, MissCurve, Slo, SloError};
pub use decision::{
    AppMove, Decision, Mechanism, Mechanisms, Moves, ReclamationState, TenantAction,
};
pub use disk::{DiskIo, DiskNote, DiskSpec};
pub use durability::{Durability, PerSecond};
pub use estimator_config::{EstimatorConfig, SamplingConfig, WorkingSetConfig};
pub use event::WorldEvent;
pub use lever::{
    AppAnswer, AppBalloonLever, AppStatus, BalloonDriverInfo, BalloonLever, HostSwapLever, Levers,
    LimitLever, ProtectionLever, SharingLever,
};
pub use observation::{CompletedSample, HostObservation, SampleCounts, TenantObservation};
pub use reason::{
    AppBalloonNote, AppStep, BalloonNote, CacheNote, EstimateNote, HostSwapNote, LimitNote,
    LimitRail, MechanismNote, ProbePhase, ProtectionNote, Reason, SharingNote, Takeover,
};
pub use resource::{Resource, ResourceState};
pub use sharing::{HostSharing, IoRemapping, ScanRate, SharingSettings};
pub use tenant::{TaxRate, TaxRateError, TenantId, TenantSpec};
pub use units::{Bytes, Pages, PAGE_SIZE};
