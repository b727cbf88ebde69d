//! A tenant's use of a shared disk over one observation: operations, bytes and latencies, with its share of the disk (a fair-queueing weight, an IOPS cap).

use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// What a tenant did on a disk since the last observation. Figures a world does not measure
/// are `None`, never 0.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskIo {
    /// Its proportional-share weight, where the disk is shared by weight.
    pub weight: Option<u32>,
    /// Its IOPS cap, where it has one.
    pub cap_iops: Option<u32>,
    /// Operations completed (reads, writes and syncs).
    pub ops: u64,
    pub bytes: Bytes,
    /// Mean time an operation spent queued and served, µs.
    pub latency_us: Option<f64>,
    /// fsyncs completed.
    pub syncs: Option<u64>,
    /// Their mean latency, µs.
    pub sync_latency_us: Option<f64>,
}
