//! What can move a tenant's memory: the levers its world offers (guest balloon, application balloon, page sharing, host swap, a limit), each with where it stands now.
//!
//! A world declares a tenant's capabilities by the levers it fills in: a lever that is `None`
//! is a mechanism this tenant does not have. A simulated VM has a balloon and host swap; a
//! cgroup has a limit; a database speaking the balloon protocol adds an application balloon;
//! a host that merges identical pages adds sharing. Policy plans one mechanism per lever
//! present (`memtide_policy::mechanism`), so a new mechanism is a new lever here, a planner
//! there, and the world that fills it in.

use crate::curve::MissCurve;
use crate::decision::{Mechanism, Mechanisms};
use crate::disk::DiskIo;
use crate::durability::Durability;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A tenant's levers (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Levers {
    /// A guest balloon (ESX): pages the guest OS gave back through its driver.
    pub balloon: Option<BalloonLever>,
    /// An application balloon (ALB): an application (a database's buffer pool, a JVM heap)
    /// that resizes its own pool on request, through its agent.
    pub app_balloon: Option<AppBalloonLever>,
    /// Content-based page sharing (ESX): identical pages backed by one machine frame.
    pub sharing: Option<SharingLever>,
    /// Host swap (ESX): the host pages the tenant's memory out behind its back.
    pub host_swap: Option<HostSwapLever>,
    /// A limit the host enforces (a Linux cgroup): the kernel reclaims within it.
    pub limit: Option<LimitLever>,
    /// The kernel's protection of the tenant's memory from the host's own reclaim (a Linux
    /// cgroup's `memory.low`, or v1's soft limit): moves no memory, guards the tenant's min.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<ProtectionLever>,
    /// A share of a disk the tenants share (a BFQ or `io.weight` weight; the simulator's
    /// fair queue), with what the tenant did on it since the last observation.
    /// Boxed: most tenants have none, and every observation carries the field (88 bytes
    /// inline made each 18% larger).
    pub disk: Option<Box<DiskIo>>,
}

impl Levers {
    /// The mechanisms these levers can move memory with, in the order policy tries them.
    /// A balloon without a driver holds its pages and moves none, so it is no capability.
    pub fn capabilities(&self) -> Mechanisms {
        let mut m = Mechanisms::new();
        if self.sharing.is_some() {
            m.push(Mechanism::Sharing);
        }
        if self.app_balloon.is_some() {
            m.push(Mechanism::AppBalloon);
        }
        if self.balloon.is_some_and(|b| b.driver.is_some()) {
            m.push(Mechanism::Balloon);
        }
        if self.limit.is_some() {
            m.push(Mechanism::Limit);
        }
        if self.host_swap.is_some() {
            m.push(Mechanism::HostSwap);
        }
        m
    }

    /// The balloon's size (zero without a balloon).
    #[inline]
    pub fn balloon_size(&self) -> Pages {
        self.balloon.map_or(Pages::ZERO, |b| b.size)
    }

    /// Pages of the tenant in host swap (zero without host swap).
    #[inline]
    pub fn host_swapped(&self) -> Pages {
        self.host_swap.map_or(Pages::ZERO, |h| h.swapped)
    }
}

/// The kernel's protection of a tenant's memory from the host's reclaim, as in force now: on
/// cgroup v2 `memory.low` (best-effort protection: global reclaim leaves the cgroup's memory
/// below it alone while others have memory to give); on v1 `memory.soft_limit_in_bytes`
/// (under global pressure the kernel pushes cgroups back to their soft limits first, so one
/// at or below it is passed over).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectionLever {
    /// What is protected now (`None`: the kernel's default, nothing).
    pub protected: Option<Pages>,
}

/// A guest balloon and its driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonLever {
    /// The guest's memory, which the balloon's pages are taken from: the tenant holds at most
    /// `memory - size`. (A tenant's max in policy may be set below it: a limit on the VM.)
    pub memory: Pages,
    /// Pages in the balloon now.
    pub size: Pages,
    /// The guest's driver; without one the balloon holds what it has (pages ballooned at boot)
    /// and cannot move.
    pub driver: Option<BalloonDriverInfo>,
    /// The host backs only the memory the guest uses (it reports its free pages, as a real
    /// guest with free page reporting does): what the tenant holds falls short of what the
    /// balloon leaves it by the guest's free memory, also while the guest pages. False where
    /// a guest's free pages stay backed (the simulator's).
    #[serde(default)]
    pub free_unbacked: bool,
}

/// A tenant's balloon driver as the host knows it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonDriverInfo {
    /// Most pages the driver inflates or deflates per second.
    pub rate_per_s: Pages,
    /// Largest balloon the guest allows.
    pub limit: Pages,
}

/// An application's own balloon (ALB): an agent linked into the application (a database's
/// buffer pool, a JVM heap) resizes the pool on request over the balloon protocol
/// (docs/balloon-protocol.md). A world fills it in while the tenant has a registered agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppBalloonLever {
    /// The agent's session: an agent that registers again starts a new one.
    pub session: u64,
    /// The pool's size now, as the agent last reported it.
    pub pool: Pages,
    /// The part of the pool holding data (`None` before the agent's first statistics: until
    /// then nothing is known of what the pool holds).
    pub pool_used: Option<Pages>,
    /// The smallest and largest pool the application accepts.
    pub min: Pages,
    pub max: Pages,
    /// The unit the pool moves in: targets are multiples of it (at least one page).
    pub granule: Pages,
    /// The tenant's memory in use as its world measures it, resident or in the tenant's own
    /// swap (a guest's kernel, anonymous memory, page cache and swap; a cgroup's usage and
    /// swap): what falls when the application really gives memory back. Swap counts, so a
    /// pool paged out behind the application's back is still the pool's, not memory outside
    /// it.
    pub used: Pages,
    /// The pool's hits and misses since the previous observation (`None` before its first
    /// statistics).
    pub hits: Option<u64>,
    pub misses: Option<u64>,
    /// The pool's miss-ratio curve as the agent last sampled it (`None` while the agent has
    /// reported none: an agent that cannot see its pool's requests never does). Boxed: a
    /// step reads 10,000 tenants' observations, and an unboxed curve made each 43% larger
    /// and the step about 18% slower than before the curve existed (criterion
    /// `controller_step/10000`, the fastest of four alternating runs; 4% boxed).
    pub curve: Option<Box<MissCurve>>,
    /// A database's durability settings and its fsync, log-wait and commit rates, as its
    /// agent last reported them (`None` from an agent that reports none: only a database's
    /// does). What `memtide_policy::advice` advises on; never moved. Boxed as the curve is:
    /// most tenants have none, and an observation is read for every tenant each step.
    pub durability: Option<Box<Durability>>,
    /// The latest target sent to the agent and its answer so far (`None` before the first).
    pub answer: Option<AppAnswer>,
    /// Time since the agent's last statistics.
    pub silent_for: Duration,
    /// How long memtide waits for statistics before it counts the agent dead (the welcome's
    /// `dead_after_ms`).
    pub dead_after: Duration,
}

impl AppBalloonLever {
    /// The tenant's measured memory outside the pool: what it uses besides the pool's data
    /// (`None` before the agent's first statistics).
    pub fn outside(&self) -> Option<Pages> {
        self.pool_used.map(|p| self.used.saturating_sub(p))
    }
}

/// The latest target an agent was sent, and where its answer stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppAnswer {
    /// The pool size asked.
    pub target: Pages,
    pub status: AppStatus,
}

/// An agent's answer to a target.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppStatus {
    /// Sent; no answer yet.
    Sent,
    /// `progress working`: the application is resizing.
    Working,
    /// `progress done`: the pool is at the target and its memory is back with the OS.
    Done,
    /// `progress failed`: the application could not, and left the pool as it was.
    Failed,
}

/// Content-based page sharing of a tenant's memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingLever {
    /// Pages backed by a frame shared with other pages now.
    pub shared: Pages,
    /// Pages found identical to another page but not merged yet: what merging could save.
    pub shareable: Pages,
    /// Of `shared`, pages of zeros, where known.
    pub zero: Option<Pages>,
    /// What sharing saves this tenant net of the scanner's bookkeeping, in bytes, where the
    /// world knows it (KSM's `ksm_process_profit`, which can be negative).
    pub profit: Option<i64>,
}

/// Host swap of a tenant's memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSwapLever {
    /// Pages of the tenant in host swap now.
    pub swapped: Pages,
    /// Pages the host swapped back in since the previous observation, where known.
    pub swap_ins: Option<u64>,
    /// The most the host can page out of the tenant now (its swap device's free space, less
    /// what the tenant cannot give), where the world bounds it; `None`: no bound known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Pages>,
}

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
    /// The smallest lowering worth a write to this world (a kernel write that buys almost
    /// nothing costs more than a limit left a little higher): the limit planner holds smaller
    /// ones back while the budget has room for them. Zero: every change is carried out.
    #[serde(default, skip_serializing_if = "Pages::is_zero")]
    pub smallest_lowering: Pages,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_the_levers_present_in_the_order_policy_tries_them() {
        assert!(Levers::default().capabilities().is_empty());
        let all = Levers {
            disk: None,
            balloon: Some(BalloonLever {
                memory: Pages(8),
                size: Pages(1),
                driver: Some(BalloonDriverInfo {
                    rate_per_s: Pages(1),
                    limit: Pages(1),
                }),
                free_unbacked: false,
            }),
            app_balloon: Some(AppBalloonLever {
                session: 1,
                pool: Pages(4),
                pool_used: Some(Pages(3)),
                min: Pages::ZERO,
                max: Pages(4),
                granule: Pages(1),
                used: Pages(5),
                hits: None,
                misses: None,
                curve: None,
                durability: None,
                answer: None,
                silent_for: Duration::ZERO,
                dead_after: Duration::from_secs(5),
            }),
            sharing: Some(SharingLever {
                shared: Pages::ZERO,
                shareable: Pages::ZERO,
                zero: None,
                profit: None,
            }),
            host_swap: Some(HostSwapLever {
                swapped: Pages(2),
                swap_ins: None,
                room: None,
            }),
            limit: Some(LimitLever {
                limit: Pages(1),
                unlimited: false,
                unreclaimable: Pages::ZERO,
                major_faults: None,
                ..LimitLever::default()
            }),
            protection: Some(ProtectionLever { protected: None }),
        };
        use Mechanism::*;
        assert_eq!(
            all.capabilities(),
            vec![Sharing, AppBalloon, Balloon, Limit, HostSwap]
        );
        assert_eq!(
            (all.balloon_size(), all.host_swapped()),
            (Pages(1), Pages(2))
        );
        // Used 5, of which the pool's data 3: 2 outside the pool.
        assert_eq!(all.app_balloon.and_then(|a| a.outside()), Some(Pages(2)));
    }

    #[test]
    fn a_balloon_without_a_driver_is_held_but_is_no_capability() {
        let levers = Levers {
            balloon: Some(BalloonLever {
                memory: Pages(128),
                size: Pages(64),
                driver: None,
                free_unbacked: false,
            }),
            ..Levers::default()
        };
        assert!(levers.capabilities().is_empty());
        assert_eq!(levers.balloon_size(), Pages(64));
    }
}
