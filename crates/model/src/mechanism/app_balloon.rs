//! The application balloon (ALB): its lever (the pool, its agent's statistics and answer), its move (`AppMove`: a target, or the OS taking over) and its planner's note with the clause it adds to the reason line.

use super::{Clause, Moves, Standing};
use crate::curve::MissCurve;
use crate::durability::Durability;
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

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

    /// The pool as far as the tenant's measured memory can hold it: the agent's claim, never
    /// above `used` (a claim beyond it is credited nothing; a world that cannot measure the
    /// tenant reports `used` zero, so no credit at all).
    pub fn held(&self) -> Pages {
        self.pool.min(self.used)
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

/// What memtide tells a tenant's application balloon agent this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppMove {
    /// The pool should be `pool` within `deadline` (a world sends a `target` when this differs
    /// from the last one it sent).
    Target { pool: Pages, deadline: Duration },
    /// The agent is closed with this reason (a fatal `error`) and the OS levers move the
    /// tenant's memory from now on.
    TakeOver(Takeover),
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
    /// The tenant's memory in swap counted as cold: `wanted` is sized for the target plus
    /// this, since the kernel behind a limit keeps it paged out at no cost to the tenant.
    #[serde(default, skip_serializing_if = "Pages::is_zero")]
    pub cold_in_swap: Pages,
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

    /// The note that makes `moves`' move of the pool (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<AppBalloonNote> {
        moves.app_balloon.map(|m| AppBalloonNote {
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
            cold_in_swap: Pages::ZERO,
        })
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
    /// A shrink toward what memtide wants goes in paced moves: the next, to `next`, is asked
    /// in `wait` (the hold after the last move). What is left of the shrink stays covered.
    Paces { next: Pages, wait: Duration },
    /// The agent said done, having given back `released` (the fence now follows).
    Done { released: Pages },
    /// The agent could not resize to `pool`: the OS levers take its part.
    Failed { pool: Pages },
    /// The OS takes the tenant over from its agent.
    TakenOver(Takeover),
    /// A new session of an agent taken over for `why` is ignored for `left` more: the OS
    /// levers move the tenant as if it had no agent.
    Distrusted { why: Takeover, left: Duration },
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

impl Clause for AppBalloonNote {
    /// `; app pool 130.0 MiB -> 64.0 MiB (asked 3 s ago, deadline 21 s)` and the like; a pool
    /// that holds reads only above the target.
    fn clause(&self, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.step_clause(at, f)?;
        if !self.cold_in_swap.is_zero() && (at.over || self.step != AppStep::Holds) {
            write!(
                f,
                " (sized with {} of cold memory in swap)",
                self.cold_in_swap
            )?;
        }
        Ok(())
    }
}

impl AppBalloonNote {
    fn step_clause(&self, at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            AppStep::Holds if at.over => write!(f, "; app pool holds at {}", self.pool),
            AppStep::Holds => Ok(()),
            AppStep::Asks {
                pool,
                waited,
                deadline,
            } => write!(
                f,
                "; app pool {} -> {pool} (asked {:.0} s ago, deadline {:.0} s)",
                self.pool,
                waited.as_secs_f64(),
                deadline.as_secs_f64()
            ),
            AppStep::AwaitsFence { pool, room } => write!(
                f,
                "; app pool {} -> {pool} once the fence rises (room {room})",
                self.pool
            ),
            AppStep::Paces { next, wait } => write!(
                f,
                "; app pool {} -> {next} in {:.0} s (paced toward {})",
                self.pool,
                wait.as_secs_f64(),
                self.wanted
            ),
            AppStep::Done { released } => {
                write!(f, "; app pool done at {} (released {released})", self.pool)
            }
            AppStep::Failed { pool } => {
                write!(f, "; app pool refused {pool}: the OS takes its part")
            }
            AppStep::TakenOver(why) => write!(f, "; app agent {why}: the OS takes over"),
            AppStep::Distrusted { why, left } => write!(
                f,
                "; app agent distrusted for {:.0} s more (was {why}): the OS moves the tenant \
                 as if it had none",
                left.as_secs_f64()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::MechanismNote;
    use super::*;
    use crate::decision::ReclamationState;

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
                AppStep::Paces {
                    next: mib(88),
                    wait: Duration::from_secs(4),
                },
                "app pool 100.0 MiB -> 88.0 MiB in 4 s (paced toward 60.0 MiB)",
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
            (
                AppStep::Distrusted {
                    why: Takeover::Stuck {
                        deadline: Duration::from_secs(22),
                    },
                    left: Duration::from_secs(30),
                },
                "app agent distrusted for 30 s more (was stuck: not done within its 22 s \
                 deadline): the OS moves the tenant as if it had none",
            ),
        ];
        for (step, want) in cases {
            let m = MechanismNote {
                app_balloon: Some(AppBalloonNote {
                    pool: mib(100),
                    wanted: mib(60),
                    step,
                    covered: Pages::ZERO,
                    cold_in_swap: Pages::ZERO,
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
    fn the_pool_held_is_the_claim_within_the_measured_memory() {
        let lever = |pool, used| AppBalloonLever {
            session: 1,
            pool,
            pool_used: Some(pool),
            min: Pages::ZERO,
            max: Pages(1 << 40),
            granule: Pages(1),
            used,
            hits: None,
            misses: None,
            curve: None,
            durability: None,
            answer: None,
            silent_for: Duration::ZERO,
            dead_after: Duration::from_secs(5),
        };
        let mib = Pages::from_mib;
        assert_eq!(lever(mib(1 << 20), mib(150)).held(), mib(150));
        assert_eq!(lever(mib(100), mib(150)).held(), mib(100));
        // Unmeasured: no credit.
        assert_eq!(lever(mib(100), Pages::ZERO).held(), Pages::ZERO);
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
}
