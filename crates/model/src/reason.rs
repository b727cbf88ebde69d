//! Why a tenant's action is what it is: the figures behind each decision, formatted into one readable line only when someone reads it.

use crate::curve::Slo;
use crate::decision::{AppMove, Moves, ReclamationState};
use crate::disk::DiskNote;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The explanation of one tenant's action: the mechanism choice and the estimator's state.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub mechanism: MechanismNote,
    pub estimate: EstimateNote,
    /// The tenant's cache quota, where its pool's size is chosen by its SLO (Gemini).
    pub cache: Option<CacheNote>,
    /// Its weight on the shared disk, where memtide shares one (Lai et al.).
    pub disk: Option<DiskNote>,
}

/// A tenant's cache quota (Gemini): its share of the pools' budget, chosen for the summed
/// utility of every SLO, and the latency its pool's miss-ratio curve predicts there.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheNote {
    pub slo: Slo,
    /// The pool the quota gives it.
    pub quota: Pages,
    /// The budget the tenants' pools share.
    pub budget: Pages,
    /// The mean latency its curve predicts at `quota`, in µs.
    pub latency_us: f32,
    /// What that latency is worth under its SLO.
    pub utility: f32,
}

impl fmt::Display for CacheNote {
    /// `cache quota 412 MiB of 1024 MiB for SLO 500 µs (+10%): 481 µs predicted`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cache quota {} of {} for {}: {:.0} µs predicted",
            self.quota, self.budget, self.slo, self.latency_us
        )
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
            protection: self.protection.and_then(ProtectionNote::moved),
        }
    }

    /// This note with notes that make `moves` and record nothing else (sizes, limits and
    /// floors at zero): for a world's tests and tools that replay given moves.
    pub fn with_moves(mut self, moves: Moves) -> MechanismNote {
        self.balloon = moves.balloon.map(|target| BalloonNote {
            size: Pages::ZERO,
            target: Some(target),
            limit: Some(target),
            stalled: false,
            beyond: Pages::ZERO,
        });
        self.app_balloon = moves.app_balloon.map(|m| AppBalloonNote {
            pool: Pages::ZERO,
            wanted: Pages::ZERO,
            step: match m {
                AppMove::Target { pool, deadline } => AppStep::Asks {
                    pool,
                    waited: Duration::ZERO,
                    deadline,
                },
                AppMove::TakeOver(why) => AppStep::TakenOver(why),
            },
            covered: Pages::ZERO,
        });
        self.sharing = (moves.share > Pages::ZERO).then_some(SharingNote {
            shareable: moves.share,
            merge: moves.share,
        });
        self.host_swap =
            (moves.host_swap_out > Pages::ZERO || moves.blocked).then_some(HostSwapNote {
                wanted: moves.host_swap_out,
                out: moves.host_swap_out,
                room: None,
                blocked: moves.blocked,
            });
        self.limit = moves.limit.map(|to| LimitNote {
            from: to,
            from_max: false,
            to,
            floor: Pages::ZERO,
            rail: LimitRail::Target,
            smallest_lowering: Pages::ZERO,
        });
        self.protection = moves.protection.map(|to| ProtectionNote { from: None, to });
        self
    }
}

/// Page sharing's part: pages that merging could save, and those merged this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingNote {
    pub shareable: Pages,
    pub merge: Pages,
}

/// The application balloon's part (ALB): the pool memtide wants, and the step it takes
/// toward it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppBalloonNote {
    /// The pool's size now.
    pub pool: Pages,
    /// The pool memtide wants: the target minus the tenant's memory outside the pool, on the
    /// granule, within the application's min and max.
    pub wanted: Pages,
    pub step: AppStep,
    /// What of the excess the application is left to give back: the OS fence holds this much
    /// above the target until the application is done.
    pub covered: Pages,
}

impl AppBalloonNote {
    /// The move the application is told this tick, if any.
    pub fn app_move(&self) -> Option<AppMove> {
        match self.step {
            AppStep::Asks { pool, deadline, .. } => Some(AppMove::Target { pool, deadline }),
            AppStep::TakenOver(why) => Some(AppMove::TakeOver(why)),
            _ => None,
        }
    }
}

/// Where an application balloon's move stands this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppStep {
    /// Nothing to ask: the pool is where it should be (within a step's worth).
    Holds,
    /// The application is asked for `pool` within `deadline`, and has had `waited` so far.
    Asks {
        pool: Pages,
        waited: Duration,
        deadline: Duration,
    },
    /// Growing to `pool` waits for the OS fence to rise first: the tenant may hold `room` now.
    AwaitsFence { pool: Pages, room: Pages },
    /// The agent said done, having given back `released` (the fence now follows).
    Done { released: Pages },
    /// The agent could not resize to `pool`: the OS levers take its part.
    Failed { pool: Pages },
    /// The OS takes the tenant over from its agent.
    TakenOver(Takeover),
}

/// Why memtide took a tenant over from its application's agent.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Takeover {
    /// A target was not done by its deadline.
    Stuck { deadline: Duration },
    /// No statistics for `silent_for`.
    Dead { silent_for: Duration },
    /// Done was reported, having released `claimed`, but the tenant's measured memory fell
    /// by only `measured` (less than half of it).
    Dishonest { claimed: Pages, measured: Pages },
}

impl Takeover {
    /// The protocol's error code the agent is closed with: `deadline`, `dead`, `dishonest`.
    pub fn code(self) -> &'static str {
        match self {
            Takeover::Stuck { .. } => "deadline",
            Takeover::Dead { .. } => "dead",
            Takeover::Dishonest { .. } => "dishonest",
        }
    }
}

impl fmt::Display for Takeover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Takeover::Stuck { deadline } => write!(
                f,
                "stuck: not done within its {:.0} s deadline",
                deadline.as_secs_f64()
            ),
            Takeover::Dead { silent_for } => write!(
                f,
                "dead: no statistics for {:.0} s",
                silent_for.as_secs_f64()
            ),
            Takeover::Dishonest { claimed, measured } => write!(
                f,
                "dishonest: said it released {claimed}, measured memory fell by {measured}"
            ),
        }
    }
}

/// The guest balloon's part.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonNote {
    pub size: Pages,
    /// `None` without a driver.
    pub target: Option<Pages>,
    /// The guest's balloon limit, with a driver.
    pub limit: Option<Pages>,
    pub stalled: bool,
    /// Excess left for the mechanisms after the balloon: all of it without a driver or with a
    /// stalled one, else what lies past the guest's limit.
    pub beyond: Pages,
}

/// Host swap's part (ESX's fallback), with blocking in the low state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSwapNote {
    /// Pages the state calls for paging out.
    pub wanted: Pages,
    /// Pages actually paged out (bounded by the host swap budget and its room).
    pub out: Pages,
    /// The most the host could page out of the tenant, where its world bounds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Pages>,
    /// Held until at its target: only while paging brings it there (a tenant blocked with
    /// nothing left to page would stop for good, and a guest's balloon stops with it).
    pub blocked: bool,
}

/// The kernel protection planned for the tenant's min (`ProtectionLever`): from what was in
/// force to what is asked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectionNote {
    pub from: Option<Pages>,
    pub to: Pages,
}

impl ProtectionNote {
    /// The protection to set, when it is not the one in force.
    pub fn moved(self) -> Option<Pages> {
        (self.from != Some(self.to)).then_some(self.to)
    }
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
            LimitRail::BackoffFaults { .. } | LimitRail::BackoffPressure { .. } => "backoff",
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
            LimitRail::Budget { wanted } => write!(
                f,
                " (wants {wanted}: waits for memory the others give back, within the budget)"
            ),
            LimitRail::Small { wanted } => write!(
                f,
                " (wants {wanted}: a lowering too small to write while the budget has room)"
            ),
        }
    }
}

/// An estimator's state, as it stood when the decision was taken.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EstimateNote {
    /// ESX sampling; EWMAs as fractions, `None` before they have a value. `bound` is the upper
    /// confidence bound of the estimate, what the idle tax charges for. `measured` is false
    /// while no sampling counts ever arrived (the tenant counts as fully active).
    Sampling {
        estimate: Pages,
        bound: Pages,
        measured: bool,
        slow: Option<f64>,
        fast: Option<f64>,
        partial: Option<f64>,
    },
    /// TWS probing; `cool_down_s` in COOL_DOWN; `blind` when the counters are missing;
    /// `paused` when probing was paused (memory not wanted, or a dry run).
    WorkingSet {
        wss: Pages,
        phase: ProbePhase,
        cool_down_s: Option<f64>,
        blind: bool,
        paused: bool,
    },
    /// Committed memory; `known` is false while the world never reported it.
    Committed { estimate: Pages, known: bool },
}

/// The TWS probe's state machine states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbePhase {
    Fast,
    CoolDown,
    Slow,
}

impl ProbePhase {
    pub fn name(self) -> &'static str {
        match self {
            ProbePhase::Fast => "FAST",
            ProbePhase::CoolDown => "COOL_DOWN",
            ProbePhase::Slow => "SLOW",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; estimate {}", self.mechanism, self.estimate)?;
        if let Some(c) = &self.cache {
            write!(f, "; {c}")?;
        }
        if let Some(d) = &self.disk {
            write!(f, "; {d}")?;
        }
        Ok(())
    }
}

impl fmt::Display for MechanismNote {
    /// Where the tenant stands, then what each lever does and why, in planning order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let over = self.excess() > Pages::ZERO;
        write!(f, "{}: ", self.state)?;
        if over {
            write!(f, "allocated {} > target {}", self.allocated, self.target)?;
        } else if self.allocated < self.target {
            write!(f, "allocated {} < target {}", self.allocated, self.target)?;
        } else {
            f.write_str("at target")?;
        }
        if let Some(s) = &self.sharing {
            if s.merge > Pages::ZERO {
                write!(f, "; share {} of {} identical", s.merge, s.shareable)?;
            }
        }
        if let Some(a) = &self.app_balloon {
            match a.step {
                AppStep::Holds if over => write!(f, "; app pool holds at {}", a.pool)?,
                AppStep::Holds => {}
                AppStep::Asks {
                    pool,
                    waited,
                    deadline,
                } => write!(
                    f,
                    "; app pool {} -> {pool} (asked {:.0} s ago, deadline {:.0} s)",
                    a.pool,
                    waited.as_secs_f64(),
                    deadline.as_secs_f64()
                )?,
                AppStep::AwaitsFence { pool, room } => write!(
                    f,
                    "; app pool {} -> {pool} once the fence rises (room {room})",
                    a.pool
                )?,
                AppStep::Done { released } => {
                    write!(f, "; app pool done at {} (released {released})", a.pool)?
                }
                AppStep::Failed { pool } => {
                    write!(f, "; app pool refused {pool}: the OS takes its part")?
                }
                AppStep::TakenOver(why) => write!(f, "; app agent {why}: the OS takes over")?,
            }
        }
        if let Some(b) = &self.balloon {
            match (b.limit, b.target) {
                (Some(limit), Some(bt)) => {
                    if bt != b.size {
                        write!(f, "; balloon {} -> {}", b.size, bt)?;
                    } else if over {
                        write!(f, "; balloon holds at {bt}")?;
                    }
                    if over {
                        if b.stalled {
                            f.write_str("; balloon stalled")?;
                        } else if b.beyond > Pages::ZERO {
                            write!(
                                f,
                                "; guest balloon limit {limit} reached, {} beyond it",
                                b.beyond
                            )?;
                        }
                    }
                }
                _ if over => f.write_str("; no balloon driver")?,
                _ => {}
            }
        }
        if let Some(limit) = &self.limit {
            write!(f, "; {limit}")?;
        }
        if let (Some(h), true) = (&self.host_swap, over) {
            // Paging stopped short by the room the world reports, not by the budget.
            let by_room = h.out < h.wanted && h.room == Some(h.out);
            if h.out > Pages::ZERO {
                write!(f, "; host swap {}", h.out)?;
                if by_room {
                    write!(f, " (of {}, all the room host swap has)", h.wanted)?;
                } else if h.out < h.wanted {
                    write!(f, " (of {}, limited by host swap budget)", h.wanted)?;
                }
            } else if by_room {
                write!(f, "; no room in host swap, {} left to page", h.wanted)?;
            } else if h.wanted > Pages::ZERO {
                write!(f, "; host swap budget exhausted, {} left to page", h.wanted)?;
            } else if self.state == ReclamationState::High {
                f.write_str("; no host swap in high state")?;
            }
            if h.blocked {
                f.write_str("; blocked until at target")?;
            }
        }
        if let Some(to) = self.protection.and_then(ProtectionNote::moved) {
            write!(f, "; protects {to} from host reclaim")?;
        }
        Ok(())
    }
}

impl fmt::Display for EstimateNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Fraction(Option<f64>);
        impl fmt::Display for Fraction {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(v) => write!(f, "{v:.2}"),
                    None => f.write_str("-"),
                }
            }
        }
        match *self {
            EstimateNote::Sampling {
                estimate,
                measured: false,
                ..
            } => write!(f, "sampling unmeasured est={estimate} (max)"),
            EstimateNote::Sampling {
                estimate,
                bound,
                slow,
                fast,
                partial,
                ..
            } => write!(
                f,
                "sampling est={estimate} bound={bound} slow={} fast={} partial={}",
                Fraction(slow),
                Fraction(fast),
                Fraction(partial)
            ),
            EstimateNote::WorkingSet {
                wss,
                phase,
                cool_down_s,
                blind,
                paused,
            } => {
                write!(f, "tws {} wss={wss}", phase.name())?;
                if let Some(s) = cool_down_s {
                    write!(f, " cool_down={s:.1}s")?;
                }
                if blind {
                    f.write_str(" (holding: no swap-in or refault counters)")?;
                } else if paused {
                    f.write_str(" (not probing: memory is not wanted, or a dry run)")?;
                }
                Ok(())
            }
            EstimateNote::Committed {
                estimate,
                known: true,
            } => write!(f, "committed est={estimate}"),
            EstimateNote::Committed { estimate, .. } => {
                write!(f, "committed unknown est={estimate} (max)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(state: ReclamationState) -> MechanismNote {
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
    fn reason_reads_as_one_line_with_mechanism_and_estimate() {
        let r = Reason {
            disk: None,
            mechanism: note(ReclamationState::Soft),
            estimate: EstimateNote::WorkingSet {
                wss: Pages::from_mib(300),
                phase: ProbePhase::CoolDown,
                cool_down_s: Some(3.0),
                blind: false,
                paused: false,
            },
            cache: None,
        };
        assert_eq!(
            r.to_string(),
            "soft: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB; \
             estimate tws COOL_DOWN wss=300.0 MiB cool_down=3.0s"
        );
    }

    #[test]
    fn a_cache_quota_reads_after_the_estimate() {
        let r = Reason {
            disk: None,
            mechanism: MechanismNote::new(
                ReclamationState::High,
                Pages::from_mib(512),
                Pages::from_mib(512),
            ),
            estimate: EstimateNote::Committed {
                estimate: Pages::from_mib(512),
                known: true,
            },
            cache: Some(CacheNote {
                slo: Slo::Strict {
                    target_us: 500.0,
                    slack: 0.1,
                },
                quota: Pages::from_mib(412),
                budget: Pages::from_mib(1024),
                latency_us: 481.4,
                utility: 0.0,
            }),
        };
        assert_eq!(
            r.to_string(),
            "high: at target; estimate committed est=512.0 MiB; cache quota 412.0 MiB of \
             1024.0 MiB for SLO 500 µs (+10%): 481 µs predicted"
        );
    }

    #[test]
    fn a_tenant_without_driver_in_low_reads_as_paged_and_blocked() {
        let m = MechanismNote {
            balloon: Some(BalloonNote {
                size: Pages::ZERO,
                target: None,
                limit: None,
                stalled: false,
                beyond: Pages::from_mib(76),
            }),
            host_swap: Some(HostSwapNote {
                wanted: Pages::from_mib(76),
                out: Pages::from_mib(32),
                room: None,
                blocked: true,
            }),
            ..note(ReclamationState::Low)
        };
        assert_eq!(
            m.to_string(),
            "low: allocated 256.0 MiB > target 180.0 MiB; no balloon driver; host swap 32.0 MiB \
             (of 76.0 MiB, limited by host swap budget); blocked until at target"
        );
    }

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
            }),
            limit: Some(LimitNote {
                from: Pages::from_mib(256),
                from_max: false,
                to: Pages::from_mib(256),
                floor: Pages::from_mib(64),
                rail: LimitRail::Target,
                smallest_lowering: Pages::ZERO,
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
    fn each_application_step_reads_as_one_clause() {
        let mib = Pages::from_mib;
        let cases = [
            (AppStep::Holds, "app pool holds at 100.0 MiB"),
            (
                AppStep::AwaitsFence {
                    pool: mib(200),
                    room: mib(150),
                },
                "app pool 100.0 MiB -> 200.0 MiB once the fence rises (room 150.0 MiB)",
            ),
            (
                AppStep::Done { released: mib(30) },
                "app pool done at 100.0 MiB (released 30.0 MiB)",
            ),
            (
                AppStep::Failed { pool: mib(60) },
                "app pool refused 60.0 MiB: the OS takes its part",
            ),
            (
                AppStep::TakenOver(Takeover::Stuck {
                    deadline: Duration::from_secs(21),
                }),
                "app agent stuck: not done within its 21 s deadline: the OS takes over",
            ),
            (
                AppStep::TakenOver(Takeover::Dead {
                    silent_for: Duration::from_secs(5),
                }),
                "app agent dead: no statistics for 5 s: the OS takes over",
            ),
            (
                AppStep::TakenOver(Takeover::Dishonest {
                    claimed: mib(40),
                    measured: mib(1),
                }),
                "app agent dishonest: said it released 40.0 MiB, measured memory fell by \
                 1.0 MiB: the OS takes over",
            ),
        ];
        for (step, want) in cases {
            let m = MechanismNote {
                app_balloon: Some(AppBalloonNote {
                    pool: mib(100),
                    wanted: mib(60),
                    step,
                    covered: Pages::ZERO,
                }),
                ..MechanismNote::new(ReclamationState::High, mib(256), mib(180))
            };
            assert_eq!(
                m.to_string(),
                format!("high: allocated 256.0 MiB > target 180.0 MiB; {want}")
            );
        }
    }

    #[test]
    fn a_takeover_names_the_protocol_error_it_closes_the_agent_with() {
        let codes = [
            Takeover::Stuck {
                deadline: Duration::ZERO,
            },
            Takeover::Dead {
                silent_for: Duration::ZERO,
            },
            Takeover::Dishonest {
                claimed: Pages::ZERO,
                measured: Pages::ZERO,
            },
        ]
        .map(Takeover::code);
        assert_eq!(codes, ["deadline", "dead", "dishonest"]);
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

    #[test]
    fn estimate_notes_name_their_estimator() {
        let s = EstimateNote::Sampling {
            estimate: Pages::from_mib(100),
            bound: Pages::from_mib(120),
            measured: true,
            slow: Some(0.5),
            fast: None,
            partial: Some(0.25),
        };
        assert_eq!(
            s.to_string(),
            "sampling est=100.0 MiB bound=120.0 MiB slow=0.50 fast=- partial=0.25"
        );
        let c = EstimateNote::Committed {
            estimate: Pages::from_mib(64),
            known: false,
        };
        assert_eq!(c.to_string(), "committed unknown est=64.0 MiB (max)");
    }
}
