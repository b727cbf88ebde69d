//! The registry of mechanisms: what lists every one of them — a tenant's levers (`Levers`, its capabilities), what each lever does this tick (`Moves`), the planners' notes (`MechanismNote`, with the reason line they make) and the mechanisms that move memory (`Mechanism`) — and the re-export of each mechanism's own types.
//!
//! A world declares a tenant's capabilities by the levers it fills in: a lever that is `None`
//! is a mechanism this tenant does not have. A simulated VM has a balloon and host swap; a
//! cgroup has a limit (and the protection of its min); a database speaking the balloon
//! protocol adds an application balloon; a host that merges identical pages adds sharing.
//! Policy plans one mechanism per lever present (`memtide_policy::mechanism`).
//!
//! Each mechanism is one file here holding its lever, its move type (if it has one) and its
//! planner's note with the clause the note adds to the reason line (`Clause`): `balloon`,
//! `app_balloon`, `sharing` (with the host-wide scan rate and savings), `host_swap`, `limit`,
//! `protection`, `disk` (whose note is the `Reason`'s own part, not the `MechanismNote`'s). A
//! new mechanism is a new file and its lines in this one.

mod app_balloon;
mod balloon;
mod disk;
mod host_swap;
mod limit;
mod protection;
mod sharing;

pub use app_balloon::{
    AppAnswer, AppBalloonLever, AppBalloonNote, AppMove, AppStatus, AppStep, Takeover,
};
pub use balloon::{BalloonDriverInfo, BalloonLever, BalloonNote};
pub use disk::{DiskIo, DiskNote, DiskSpec};
pub use host_swap::{HostSwapLever, HostSwapNote};
pub use limit::{LimitLever, LimitNote, LimitRail};
pub use protection::{ProtectionLever, ProtectionNote};
pub use sharing::{HostSharing, IoRemapping, ScanRate, SharingLever, SharingNote, SharingSettings};

use crate::decision::ReclamationState;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// What to do with each lever of a tenant (see [`Levers`]); a lever that does not move
/// is `None` or zero, and a world ignores the moves of levers it does not have. Read off the
/// planners' notes (`TenantAction::moves`): the note is the one record of a decision.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moves {
    /// The guest balloon's target size.
    pub balloon: Option<Pages>,
    /// What to tell the application's agent: the pool to resize to, or that the OS takes
    /// the tenant over.
    pub app_balloon: Option<AppMove>,
    /// Identical pages to merge this tick.
    pub share: Pages,
    /// Pages the host pages out now (random victims, as ESX does).
    pub host_swap_out: Pages,
    /// The tenant may not run until it is at its target (ESX's low state).
    pub blocked: bool,
    /// The limit to set.
    pub limit: Option<Pages>,
    /// Swapped memory to read back now, ahead of the tenant's faults (it woke up and its
    /// limit has room for it); zero: none.
    pub swap_in: Pages,
    /// The disk weight to set.
    pub disk_weight: Option<u32>,
    /// The protection from the host's reclaim to set (`ProtectionLever`).
    pub protection: Option<Pages>,
}

/// How memory moves between a tenant and the host.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// Guest balloon driver.
    Balloon,
    /// Application-level balloon (DB buffer pool, JVM heap).
    AppBalloon,
    /// Host paging, the fallback.
    HostSwap,
    /// Content-based page sharing.
    Sharing,
    /// A cgroup limit (linux world).
    Limit,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Balloon => "balloon",
            Mechanism::AppBalloon => "app_balloon",
            Mechanism::HostSwap => "host_swap",
            Mechanism::Sharing => "sharing",
            Mechanism::Limit => "limit",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The mechanisms used for one tenant in one tick, in the order they are applied, each at most
/// once. Held inline (no heap allocation: a step for 10,000 tenants makes one per tenant); it
/// reads as a slice and serializes as a list.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Mechanisms {
    items: [Mechanism; Mechanisms::CAPACITY],
    len: u8,
}

impl Mechanisms {
    /// Every mechanism there is, so a set can hold all of them.
    pub const CAPACITY: usize = 5;

    #[inline]
    pub const fn new() -> Mechanisms {
        Mechanisms {
            items: [Mechanism::Balloon; Mechanisms::CAPACITY],
            len: 0,
        }
    }

    /// Appends `m` unless it is already there.
    #[inline]
    pub fn push(&mut self, m: Mechanism) {
        if !self.contains(&m) {
            self.items[usize::from(self.len)] = m;
            self.len += 1;
        }
    }

    /// Takes `m` out, keeping the order of the others.
    pub fn remove(&mut self, m: Mechanism) {
        if let Some(at) = self.iter().position(|&x| x == m) {
            let len = usize::from(self.len);
            self.items.copy_within(at + 1..len, at);
            self.len -= 1;
        }
    }
}

impl Default for Mechanisms {
    fn default() -> Mechanisms {
        Mechanisms::new()
    }
}

impl std::ops::Deref for Mechanisms {
    type Target = [Mechanism];
    #[inline]
    fn deref(&self) -> &[Mechanism] {
        &self.items[..usize::from(self.len)]
    }
}

impl fmt::Debug for Mechanisms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq<Vec<Mechanism>> for Mechanisms {
    fn eq(&self, other: &Vec<Mechanism>) -> bool {
        **self == other[..]
    }
}

impl FromIterator<Mechanism> for Mechanisms {
    fn from_iter<I: IntoIterator<Item = Mechanism>>(iter: I) -> Mechanisms {
        let mut set = Mechanisms::new();
        for m in iter {
            set.push(m);
        }
        set
    }
}

impl Serialize for Mechanisms {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Mechanisms {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mechanisms, D::Error> {
        Ok(Vec::<Mechanism>::deserialize(d)?.into_iter().collect())
    }
}

/// The figures the mechanism choice used for one tenant: where it stands against its target,
/// and a note from the planner of each lever it has, in the order they were planned.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MechanismNote {
    pub state: ReclamationState,
    pub allocated: Pages,
    pub target: Pages,
    pub sharing: Option<SharingNote>,
    pub app_balloon: Option<AppBalloonNote>,
    pub balloon: Option<BalloonNote>,
    pub limit: Option<LimitNote>,
    pub host_swap: Option<HostSwapNote>,
    pub protection: Option<ProtectionNote>,
}

impl MechanismNote {
    /// A note with no lever's figures yet.
    #[inline]
    pub fn new(state: ReclamationState, allocated: Pages, target: Pages) -> MechanismNote {
        MechanismNote {
            state,
            allocated,
            target,
            sharing: None,
            app_balloon: None,
            balloon: None,
            limit: None,
            host_swap: None,
            protection: None,
        }
    }

    /// Pages held above the target.
    pub fn excess(&self) -> Pages {
        self.allocated.saturating_sub(self.target)
    }

    /// The moves the planners chose, as their notes record them.
    pub fn moves(&self) -> Moves {
        Moves {
            disk_weight: None,
            balloon: self.balloon.and_then(|b| b.target),
            app_balloon: self.app_balloon.and_then(|a| a.app_move()),
            share: self.sharing.map_or(Pages::ZERO, |s| s.merge),
            host_swap_out: self.host_swap.map_or(Pages::ZERO, |h| h.out),
            blocked: self.host_swap.is_some_and(|h| h.blocked),
            limit: self.limit.map(|l| l.to),
            swap_in: self.limit.map_or(Pages::ZERO, |l| l.swap_in),
            protection: self.protection.and_then(ProtectionNote::moved),
        }
    }

    /// This note with notes that make `moves` and record nothing else (sizes, limits and
    /// floors at zero): for a world's tests and tools that replay given moves.
    pub fn with_moves(mut self, moves: Moves) -> MechanismNote {
        self.sharing = SharingNote::replaying(&moves);
        self.app_balloon = AppBalloonNote::replaying(&moves);
        self.balloon = BalloonNote::replaying(&moves);
        self.limit = LimitNote::replaying(&moves);
        self.host_swap = HostSwapNote::replaying(&moves);
        self.protection = ProtectionNote::replaying(&moves);
        self
    }
}

impl fmt::Display for MechanismNote {
    /// Where the tenant stands, then what each lever does and why, in planning order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = Standing {
            state: self.state,
            over: self.excess() > Pages::ZERO,
        };
        write!(f, "{}: ", self.state)?;
        if at.over {
            write!(f, "allocated {} > target {}", self.allocated, self.target)?;
        } else if self.allocated < self.target {
            write!(f, "allocated {} < target {}", self.allocated, self.target)?;
        } else {
            f.write_str("at target")?;
        }
        clause(&self.sharing, at, f)?;
        clause(&self.app_balloon, at, f)?;
        clause(&self.balloon, at, f)?;
        clause(&self.limit, at, f)?;
        clause(&self.host_swap, at, f)?;
        clause(&self.protection, at, f)
    }
}

/// Where a tenant stands against its target, which a note's clause may depend on.
#[derive(Copy, Clone, Debug)]
struct Standing {
    state: ReclamationState,
    /// It holds more than its target.
    over: bool,
}

/// A planner's note as it reads in the tenant's reason line.
trait Clause {
    /// Writes `; ` and what the lever does and why, or nothing when it has nothing to say.
    fn clause(&self, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// The clause of a note, if the planner wrote one.
fn clause<N: Clause>(note: &Option<N>, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    note.as_ref().map_or(Ok(()), |n| n.clause(at, f))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

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

    #[test]
    fn mechanisms_keep_order_hold_each_once_and_read_as_a_slice() {
        let mut m = Mechanisms::new();
        assert!(m.is_empty());
        m.push(Mechanism::HostSwap);
        m.push(Mechanism::Balloon);
        m.push(Mechanism::HostSwap);
        assert_eq!(&m[..], &[Mechanism::HostSwap, Mechanism::Balloon]);
        assert_eq!(m, vec![Mechanism::HostSwap, Mechanism::Balloon]);
        let all: Mechanisms = [
            Mechanism::Balloon,
            Mechanism::AppBalloon,
            Mechanism::HostSwap,
            Mechanism::Sharing,
            Mechanism::Limit,
            Mechanism::Limit,
        ]
        .into_iter()
        .collect();
        assert_eq!(all.len(), Mechanisms::CAPACITY);
        assert_eq!(format!("{m:?}"), "[HostSwap, Balloon]");
        m.remove(Mechanism::HostSwap);
        m.remove(Mechanism::Limit);
        assert_eq!(m, vec![Mechanism::Balloon]);
    }

    #[test]
    fn mechanisms_serialize_as_a_list_of_names() {
        let m: Mechanisms = [Mechanism::Balloon, Mechanism::HostSwap]
            .into_iter()
            .collect();
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"["balloon","host_swap"]"#);
        assert_eq!(serde_json::from_str::<Mechanisms>(&json).unwrap(), m);
        assert_eq!(serde_json::to_string(&Mechanisms::new()).unwrap(), "[]");
    }

    /// A VM's note in `state`: its balloon asked to 76 MiB, host swap with nothing to do.
    pub(crate) fn note(state: ReclamationState) -> MechanismNote {
        MechanismNote {
            balloon: Some(BalloonNote {
                size: Pages::ZERO,
                target: Some(Pages::from_mib(76)),
                limit: Some(Pages::from_mib(200)),
                stalled: false,
                beyond: Pages::ZERO,
            }),
            host_swap: Some(HostSwapNote {
                wanted: Pages::ZERO,
                out: Pages::ZERO,
                room: None,
                blocked: false,
            }),
            ..MechanismNote::new(state, Pages::from_mib(256), Pages::from_mib(180))
        }
    }

    #[test]
    fn the_application_and_sharing_read_before_the_os() {
        let m = MechanismNote {
            sharing: Some(SharingNote {
                shareable: Pages::from_mib(10),
                merge: Pages::from_mib(10),
            }),
            app_balloon: Some(AppBalloonNote {
                pool: Pages::from_mib(130),
                wanted: Pages::from_mib(64),
                step: AppStep::Asks {
                    pool: Pages::from_mib(64),
                    waited: Duration::from_secs(3),
                    deadline: Duration::from_secs(21),
                },
                covered: Pages::from_mib(66),
                cold_in_swap: Pages::ZERO,
            }),
            limit: Some(LimitNote {
                from: Pages::from_mib(256),
                from_max: false,
                to: Pages::from_mib(256),
                floor: Pages::from_mib(64),
                rail: LimitRail::Target,
                smallest_lowering: Pages::ZERO,
                swap_in: Pages::ZERO,
            }),
            ..MechanismNote::new(
                ReclamationState::Soft,
                Pages::from_mib(256),
                Pages::from_mib(180),
            )
        };
        assert_eq!(
            m.to_string(),
            "soft: allocated 256.0 MiB > target 180.0 MiB; share 10.0 MiB of 10.0 MiB identical; \
             app pool 130.0 MiB -> 64.0 MiB (asked 3 s ago, deadline 21 s); limit holds at 256.0 MiB"
        );
    }

    #[test]
    fn the_moves_are_read_off_the_notes_and_given_moves_read_back() {
        assert_eq!(
            note(ReclamationState::Soft).moves().balloon,
            Some(Pages::from_mib(76))
        );
        let moves = Moves {
            disk_weight: None,
            balloon: Some(Pages(1)),
            app_balloon: Some(AppMove::Target {
                pool: Pages(2),
                deadline: Duration::from_secs(20),
            }),
            share: Pages(3),
            host_swap_out: Pages(4),
            blocked: true,
            limit: Some(Pages(5)),
            swap_in: Pages(7),
            protection: Some(Pages(6)),
        };
        let n = MechanismNote::new(ReclamationState::Low, Pages::ZERO, Pages::ZERO);
        assert_eq!(n.with_moves(moves).moves(), moves);
        assert_eq!(n.with_moves(Moves::default()).moves(), Moves::default());
        let takeover = Moves {
            app_balloon: Some(AppMove::TakeOver(Takeover::Dead {
                silent_for: Duration::from_secs(6),
            })),
            ..Moves::default()
        };
        assert_eq!(n.with_moves(takeover).moves(), takeover);
    }
}
