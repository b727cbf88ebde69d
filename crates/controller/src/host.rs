//! The `Host` trait: what the controller needs from a world (simulated or Linux) and nothing more.

use memtide_model::{Decision, HostObservation};

/// A world the controller drives. Implementations hold no policy.
pub trait Host {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Observes machine memory and every running tenant.
    fn observe(&mut self) -> Result<HostObservation, Self::Error>;

    /// Carries out a decision (balloon targets, host paging, limits, blocking).
    fn apply(&mut self, decision: &Decision) -> Result<(), Self::Error>;
}
