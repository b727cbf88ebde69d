//! A limit the host enforces (a Linux cgroup): its lever (the limit in force and what the safety rails need), its move (`Moves::limit`) and its planner's note, the rail that decided, with its `Display`.

use super::{Clause, Moves, Standing};
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A limit the host enforces on the tenant (a cgroup's memory limit), with what the safety
/// rails need to move it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitLever {
    /// The limit in force (machine memory when unlimited).
    pub limit: Pages,
    /// No limit is in force (the kernel's `max`): `limit` then stands for machine memory.
    pub unlimited: bool,
    /// Memory the tenant cannot give back now: anonymous memory beyond the swap it may still
    /// use, plus unevictable pages. A limit below it means an OOM kill.
    pub unreclaimable: Pages,
    /// Major faults since the last observation.
    pub major_faults: Option<u64>,
    /// The tenant's own memory pressure (PSI "some" avg10, percent), where the kernel has it.
    pub pressure: Option<f64>,
    /// The share of time all its tasks stalled on memory at once (PSI "full" avg10, percent):
    /// lost work, where "some" is only delay. Where the kernel has it per cgroup (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_full: Option<f64>,
    /// Its unevictable memory (mlocked pages, ramfs, SHM_LOCKed segments), where the kernel
    /// reports it: part of what it cannot give back, and no limit reclaims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unevictable: Option<Pages>,
    /// How often the world throttled the tenant for being over its limit since the last
    /// observation (cgroup v2: memory.events `high`), where the world counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled: Option<u64>,
    /// The world lately could not take the tenant down to its limit (cgroup v2: memory.reclaim
    /// answered EAGAIN): it has nothing more to give now, whatever its target says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reclaim_refused: bool,
    /// The smallest lowering worth a write to this world (a kernel write that buys almost
    /// nothing costs more than a limit left a little higher): the limit planner holds smaller
    /// ones back while the budget has room for them. Zero: every change is carried out.
    #[serde(default, skip_serializing_if = "Pages::is_zero")]
    pub smallest_lowering: Pages,
    /// The world can read the tenant's swapped memory back ahead of its faults
    /// (`Moves::swap_in`; Linux: `process_madvise(MADV_WILLNEED)`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reads_back: bool,
}

/// How a tenant's limit was chosen: from what, to what, and which safety rail decided.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitNote {
    pub from: Pages,
    /// `from` is no limit at all (the kernel's `max`), shown as such.
    #[serde(default)]
    pub from_max: bool,
    pub to: Pages,
    /// The lowest limit allowed now: max(min, unreclaimable + margin).
    pub floor: Pages,
    pub rail: LimitRail,
    /// The lever's smallest lowering worth a write (`LimitLever::smallest_lowering`), for the
    /// pass across tenants that holds smaller ones back; zero: none is held.
    #[serde(default, skip_serializing_if = "Pages::is_zero")]
    pub smallest_lowering: Pages,
    /// Swapped memory to read back ahead of the tenant's faults (`Moves::swap_in`): a tenant
    /// waking from swap, whose limit now has room for all it holds and has in swap. Zero:
    /// none.
    #[serde(default, skip_serializing_if = "Pages::is_zero")]
    pub swap_in: Pages,
}

impl LimitNote {
    /// The note that makes `moves`' limit (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<LimitNote> {
        moves.limit.map(|to| LimitNote {
            from: to,
            from_max: false,
            to,
            floor: Pages::ZERO,
            rail: LimitRail::Target,
            smallest_lowering: Pages::ZERO,
            swap_in: moves.swap_in,
        })
    }
}

/// The rule that set a limit this tick.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitRail {
    /// Set to the target (growing is never slowed down; a shrink that fits in one step).
    Target,
    /// Held at the floor: the target is below what the tenant can give back.
    Floor,
    /// Lowered by one bounded step toward a lower target.
    Step,
    /// Shrinking stopped: faults per second at or above the back-off threshold.
    BackoffFaults { faults_per_s: f64 },
    /// Shrinking stopped: pressure (PSI some avg10, percent) at or above the threshold.
    BackoffPressure { pressure: f64 },
    /// Shrinking stopped: the world throttles the tenant at its limit (times per second) at
    /// or above the threshold.
    BackoffThrottled { per_s: f64 },
    /// Shrinking stopped: the world lately could not reclaim the tenant down to its limit.
    BackoffRefused,
    /// A raise to `wanted` cut short: the limits may not add up to more than the budget, so a
    /// tenant gets more only as fast as the others give memory back.
    Budget { wanted: Pages },
    /// A lowering to `wanted` smaller than the world writes, held while the budget has room
    /// for it: the limit left a little higher is never less safe, and the next lowering writes
    /// once the limit in force is that much above the one wanted.
    Small { wanted: Pages },
}

impl LimitRail {
    /// Short name for logs and metrics: target, floor, step, backoff.
    pub fn name(self) -> &'static str {
        match self {
            LimitRail::Target => "target",
            LimitRail::Floor => "floor",
            LimitRail::Step => "step",
            LimitRail::BackoffFaults { .. }
            | LimitRail::BackoffPressure { .. }
            | LimitRail::BackoffThrottled { .. }
            | LimitRail::BackoffRefused => "backoff",
            LimitRail::Budget { .. } => "budget",
            LimitRail::Small { .. } => "small",
        }
    }
}

impl fmt::Display for LimitNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.to == self.from, self.from_max) {
            (true, true) => f.write_str("limit holds at max")?,
            (true, false) => write!(f, "limit holds at {}", self.to)?,
            (false, true) => write!(f, "limit max -> {}", self.to)?,
            (false, false) => write!(f, "limit {} -> {}", self.from, self.to)?,
        }
        match self.rail {
            LimitRail::Target => Ok(()),
            LimitRail::Floor => write!(f, " (floor {}: min or unreclaimable + margin)", self.floor),
            LimitRail::Step => f.write_str(" (bounded shrink step)"),
            LimitRail::BackoffFaults { faults_per_s } => {
                write!(f, " (backing off: {faults_per_s:.0} faults/s)")
            }
            LimitRail::BackoffPressure { pressure } => {
                write!(f, " (backing off: pressure {pressure:.1}%)")
            }
            LimitRail::BackoffThrottled { per_s } => {
                write!(
                    f,
                    " (backing off: throttled {per_s:.0} times/s at its limit)"
                )
            }
            LimitRail::BackoffRefused => {
                f.write_str(" (backing off: the kernel could not reclaim down to its limit)")
            }
            LimitRail::Budget { wanted } => write!(
                f,
                " (wants {wanted}: waits for memory the others give back, within the budget)"
            ),
            LimitRail::Small { wanted } => write!(
                f,
                " (wants {wanted}: a lowering too small to write while the budget has room)"
            ),
        }?;
        if !self.swap_in.is_zero() {
            write!(
                f,
                ", reading {} back from swap ahead of its faults",
                self.swap_in
            )?;
        }
        Ok(())
    }
}

impl Clause for LimitNote {
    /// `; ` and the note's `Display`, always.
    fn clause(&self, _at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "; {self}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::MechanismNote;
    use super::*;
    use crate::decision::ReclamationState;

    #[test]
    fn a_limit_tenant_reads_as_its_limit_and_rail() {
        let cases = [
            (
                LimitRail::Step,
                300,
                285,
                "limit 300.0 MiB -> 285.0 MiB (bounded shrink step)",
            ),
            (LimitRail::Target, 200, 400, "limit 200.0 MiB -> 400.0 MiB"),
            (
                LimitRail::Floor,
                300,
                300,
                "limit holds at 300.0 MiB (floor 300.0 MiB: min or unreclaimable + margin)",
            ),
            (
                LimitRail::BackoffFaults {
                    faults_per_s: 5000.0,
                },
                300,
                300,
                "limit holds at 300.0 MiB (backing off: 5000 faults/s)",
            ),
            (
                LimitRail::BackoffThrottled { per_s: 240.0 },
                300,
                300,
                "limit holds at 300.0 MiB (backing off: throttled 240 times/s at its limit)",
            ),
            (
                LimitRail::BackoffRefused,
                300,
                300,
                "limit holds at 300.0 MiB (backing off: the kernel could not reclaim down to its limit)",
            ),
        ];
        for (rail, from, to, want) in cases {
            let m = MechanismNote {
                limit: Some(LimitNote {
                    from: Pages::from_mib(from),
                    from_max: false,
                    to: Pages::from_mib(to),
                    floor: Pages::from_mib(300),
                    rail,
                    smallest_lowering: Pages::ZERO,
                    swap_in: Pages::ZERO,
                }),
                ..MechanismNote::new(
                    ReclamationState::High,
                    Pages::from_mib(256),
                    Pages::from_mib(180),
                )
            };
            assert_eq!(
                m.to_string(),
                format!("high: allocated 256.0 MiB > target 180.0 MiB; {want}")
            );
        }
    }
}
