//! A tenant on a shared disk: its lever (`DiskIo`: what it did since the last observation, its weight and cap), what it is given (`DiskSpec`), its move (`Moves::disk_weight`) and the planner's note (`DiskNote`, a part of the `Reason` of its own).

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

/// What a tenant is given on a shared disk: its weight, and the I/O latency it should see.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSpec {
    /// Its proportional-share weight when it meets its target (or has none), within
    /// [`DiskSpec::WEIGHTS`].
    pub weight: u32,
    /// The mean I/O latency (queued and served) it should see, µs: while it sees more, its
    /// weight is raised.
    pub latency_target_us: Option<u32>,
}

impl DiskSpec {
    /// The weights every world can set: cgroup v1's BFQ takes 1-1000 (v2's `io.weight` takes
    /// up to 10,000; memtide keeps to the range both have).
    pub const WEIGHTS: std::ops::RangeInclusive<u32> = 1..=1000;
}

/// The disk planner's decision for one tenant: its weight now and why.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskNote {
    /// The weight to have.
    pub weight: u32,
    /// The weight in force when observed.
    pub was: Option<u32>,
    /// The configured weight, and the power of two it is raised by (weight = base << boost,
    /// within the range).
    pub base: u32,
    pub boost: u8,
    /// The latency seen since the last observation and the target, µs.
    pub latency_us: Option<f32>,
    pub target_us: Option<u32>,
}

impl DiskNote {
    /// The weight to write: the note's, where it differs from the one in force.
    pub fn new_weight(&self) -> Option<u32> {
        (self.was != Some(self.weight)).then_some(self.weight)
    }
}

impl std::fmt::Display for DiskNote {
    /// `disk weight 400 (100 x4: 12.3 ms > target 5.0 ms)`, `disk weight 100`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "disk weight {}", self.weight)?;
        let ms = |us: f64| us / 1000.0;
        match (self.latency_us, self.target_us) {
            (Some(seen), Some(target)) => {
                let cmp = if f64::from(seen) > f64::from(target) {
                    ">"
                } else {
                    "<="
                };
                write!(
                    f,
                    " ({} x{}: {:.1} ms {cmp} target {:.1} ms)",
                    self.base,
                    1u32 << self.boost,
                    ms(f64::from(seen)),
                    ms(f64::from(target))
                )
            }
            (None, Some(target)) => write!(
                f,
                " ({} x{}: no I/O seen, target {:.1} ms)",
                self.base,
                1u32 << self.boost,
                ms(f64::from(target))
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_as_its_weight_and_the_latency_against_the_target() {
        let n = DiskNote {
            weight: 400,
            was: Some(200),
            base: 100,
            boost: 2,
            latency_us: Some(12_300.0),
            target_us: Some(5000),
        };
        assert_eq!(
            n.to_string(),
            "disk weight 400 (100 x4: 12.3 ms > target 5.0 ms)"
        );
        assert_eq!(n.new_weight(), Some(400));
        let held = DiskNote {
            was: Some(400),
            ..n
        };
        assert_eq!(held.new_weight(), None);
    }
}
