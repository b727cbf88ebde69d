//! memtide's shared vocabulary: units, tenant specs, observations of a host and the decisions taken on them.
//!
//! Every other crate speaks in these types; none of them does I/O or reads a clock.

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
