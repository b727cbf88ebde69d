//! The resources memtide divides between tenants, each with its own budget and reclamation state: memory today; a shared storage cache's quotas (Gemini) and disk I/O weights (Lai et al.) next.
//!
//! Allocation (`memtide_policy::allocation`) and the reclamation states
//! (`memtide_policy::reclamation`) count units, not bytes: min-funding revocation divides any
//! divisible resource by shares, and a state follows any budget's free fraction. So a resource
//! is a budget of its own, in its own unit (pages of memory or of a cache, units of disk
//! weight), with its own reclamation state, tracked by the controller beside memory's; a
//! decision reports each one's [`ResourceState`]. Where the coming ones plug in is in
//! ARCHITECTURE.md ("Resources").

use crate::decision::ReclamationState;
use serde::{Deserialize, Serialize};

/// A resource memtide divides between tenants.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Machine memory, in pages, moved by the levers of `crate::mechanism`.
    #[default]
    Memory,
    /// Quotas in a shared storage cache (Gemini), in cache pages.
    CacheQuota,
    /// Shares of a disk's time (work-conserving weights, Lai et al.), in weight units.
    DiskIoWeight,
}

/// One resource in one decision: what was handed out and the state it was in.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceState<U> {
    pub resource: Resource,
    /// The reclamation state that chose the mechanisms.
    pub state: ReclamationState,
    /// What was handed out to tenants (the targets add up to at most this).
    pub budget: U,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_written_by_their_snake_case_names() {
        for (r, name) in [
            (Resource::Memory, "\"memory\""),
            (Resource::CacheQuota, "\"cache_quota\""),
            (Resource::DiskIoWeight, "\"disk_io_weight\""),
        ] {
            assert_eq!(serde_json::to_string(&r).unwrap(), name);
        }
    }
}
