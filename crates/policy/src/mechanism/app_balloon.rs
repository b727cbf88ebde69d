//! The application balloon's planner (ALB): a tenant whose application (a database's buffer pool, a JVM heap) has a live agent is asked before the OS is, because the application knows which of its pages matter; the OS fence follows what it really gave back.
//!
//! The pool memtide wants is `wanted = target - outside`, where `outside` is the tenant's
//! measured memory besides the pool's data, rounded down to the granule and kept within the
//! application's `[min, max]`; nothing is asked before the agent's first statistics say what
//! the pool holds. A pool more than a step (`max(granule, max / 64)`) away from it is asked
//! to move, and one above it by a granule or more while the tenant uses more than its target
//! (it would page its own pool):
//!
//! - **shrinking**: the application is asked first, with a deadline for the move (below).
//!   Until it says done, the part of the excess it was asked for is `covered`: the OS
//!   levers after this one (guest balloon, limit, host swap in `soft`) hold the fence that much
//!   above the target. At done the fence follows: it takes what was really released, from
//!   free memory, at no cost to the tenant. What lies beyond the application's min is the OS
//!   levers' at once;
//! - **growing**: the fence rises first (the balloon deflates, the limit rises, toward the
//!   target as for any tenant), and the application is asked only once the tenant may hold
//!   `outside + wanted`;
//! - **takeover**: an agent that is dead (no statistics for its `dead_after`), stuck (a target
//!   not done by its deadline) or dishonest (done, but the tenant's measured memory fell by
//!   less than half of what the pool gave beyond the part of it that held no data, which was
//!   never in the tenant's memory) is closed with that reason, and the OS levers move
//!   the tenant from then on. The tenant's agent stays distrusted for a back-off, 30 s the
//!   first time and doubling with each takeover up to an hour: a new session in it is
//!   ignored ([`AppStep::Distrusted`]: no target, no credit), and only one after it is
//!   trusted afresh. An agent that fails a target is honest: the OS takes that part, and the
//!   same target is not asked again.
//!
//! **Claims are clamped to measurement.** The pool an agent reports is credited only as far
//! as the tenant's measured memory holds it ([`AppBalloonLever::held`]: never above `used`,
//! and nothing when the world measures nothing): the excess a shrink covers, the active
//! memory the idle tax charges ([`active`]) and the controller's cache budget are all taken
//! from the pool held. A shrink's deadline comes from the move measured the same way (held
//! down to wanted) and, once the tenant's application has completed a resize, from its own
//! speed: twice the time that speed needs plus [`DEADLINE_SLACK`], never more than the
//! default rule of 20 s + 15 s per GiB (a speed learned slow cannot stretch a deadline). So
//! a liar claiming a 1 TiB pool in a tenant of 150 MiB holds the fence off at most what the
//! tenant measurably holds above its target, for at most about 22 s.
//!
//! [`AppWatch`] keeps the move in progress between ticks, and the tenant's speed and
//! back-off across sessions. Cost: O(1).

use super::Need;
use memtide_model::{
    AppBalloonLever, AppBalloonNote, AppStatus, AppStep, Pages, Takeover, TenantObservation,
};
use std::time::Duration;

/// A target's deadline: this much, plus [`DEADLINE_PER_GIB`] for each GiB the pool moves.
pub const DEADLINE_BASE: Duration = Duration::from_secs(20);
/// A target's deadline grows by this much per GiB moved (ALB's slowest resize, a JVM's 2 GB
/// at 18.9 s, is well within 20 s + 2 x 15 s).
pub const DEADLINE_PER_GIB: Duration = Duration::from_secs(15);
/// A deadline from a measured speed is twice the time it needs, plus this.
pub const DEADLINE_SLACK: Duration = Duration::from_secs(5);
/// The first back-off after a takeover; each later one doubles it, up to [`DISTRUST_MAX`].
pub const DISTRUST_FIRST: Duration = Duration::from_secs(30);
/// The longest back-off.
pub const DISTRUST_MAX: Duration = Duration::from_secs(3600);

/// The move asked of an agent and not finished yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Ask {
    pool: Pages,
    /// The pool, what of it held no data, and the tenant's measured memory when it was asked.
    from: Pages,
    unused: Pages,
    used: Pages,
    waited: Duration,
    deadline: Duration,
}

/// The tenant's distrust of its agent after a takeover.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Distrust {
    why: Takeover,
    /// What is left of the back-off.
    left: Duration,
    /// Takeovers so far: the next back-off is [`DISTRUST_FIRST`] doubled this many times.
    strikes: u32,
}

/// What the planner remembers of a tenant's agent between ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppWatch {
    /// The session watched: a new one forgets the move, the failed target and the takeover,
    /// not the speed or the distrust (they are the tenant's).
    session: Option<u64>,
    ask: Option<Ask>,
    /// A target the agent failed: not asked again.
    failed: Option<Pages>,
    /// The session was taken over, and why.
    taken_over: Option<Takeover>,
    /// The tenant's last completed resize: pages moved and the time it took.
    resized: Option<(Pages, Duration)>,
    distrust: Option<Distrust>,
}

impl AppWatch {
    fn follow(&mut self, session: u64) {
        if self.session != Some(session) {
            *self = AppWatch {
                session: Some(session),
                resized: self.resized,
                distrust: self.distrust,
                ..AppWatch::default()
            };
        }
    }

    /// Whether the agent's claims count: not while it is taken over or in its back-off.
    pub fn trusted(&self) -> bool {
        self.taken_over.is_none() && self.distrust.is_none_or(|d| d.left.is_zero())
    }
}

/// The deadline for moving the pool by `moved`: 20 s + 15 s per GiB, or, once the
/// application's speed is measured (`resized`: pages it moved and the time it took), twice
/// the time that speed needs plus [`DEADLINE_SLACK`], whichever is shorter.
pub fn deadline(moved: Pages, resized: Option<(Pages, Duration)>) -> Duration {
    let gib = moved.to_bytes().0 as f64 / f64::from(1u32 << 30);
    let rule = DEADLINE_BASE + DEADLINE_PER_GIB.mul_f64(gib);
    match resized {
        Some((pages, took)) if pages > Pages::ZERO => {
            let needs = took.mul_f64(moved.0 as f64 / pages.0 as f64);
            rule.min(DEADLINE_SLACK + needs * 2)
        }
        _ => rule,
    }
}

/// The back-off after `strikes` takeovers (the first is 1).
fn backoff(strikes: u32) -> Duration {
    DISTRUST_FIRST
        .saturating_mul(1 << strikes.saturating_sub(1).min(16))
        .min(DISTRUST_MAX)
}

/// The smallest move worth asking for: a granule, or 1/64 of the largest pool.
fn step(lever: &AppBalloonLever) -> Pages {
    lever.granule.max(Pages(lever.max.0 / 64)).max(Pages(1))
}

/// The pool memtide wants: `target - outside` on the granule within `[min, max]` (`None`
/// before the agent's first statistics, or when no multiple of the granule lies within them).
fn wanted(lever: &AppBalloonLever, target: Pages) -> Option<Pages> {
    let g = lever.granule.0.max(1);
    let lo = lever.min.0.div_ceil(g) * g;
    let hi = lever.max.0 / g * g;
    let want = target.saturating_sub(lever.outside()?).0 / g * g;
    (lo <= hi).then(|| Pages(want.clamp(lo, hi)))
}

/// How far `a` and `b` lie apart.
fn apart(a: Pages, b: Pages) -> Pages {
    a.max(b) - a.min(b)
}

/// Plans the application balloon and takes what it covers out of `need.left`. `room` is what
/// the OS fence lets the tenant hold now (`None`: no fence), `elapsed` the time since the last
/// observation.
pub(super) fn plan(
    need: &mut Need,
    lever: &AppBalloonLever,
    room: Option<Pages>,
    elapsed: Duration,
    watch: &mut AppWatch,
) -> AppBalloonNote {
    let step = decide(need, lever, room, elapsed, watch);
    let covered = match (step, watch.ask) {
        (AppStep::Asks { .. }, Some(ask)) if ask.pool < ask.from => {
            need.left.min(ask.from - ask.pool)
        }
        _ => Pages::ZERO,
    };
    need.left -= covered;
    AppBalloonNote {
        pool: lever.pool,
        wanted: wanted(lever, need.target).unwrap_or(lever.pool),
        step,
        covered,
    }
}

fn decide(
    need: &Need,
    lever: &AppBalloonLever,
    room: Option<Pages>,
    elapsed: Duration,
    watch: &mut AppWatch,
) -> AppStep {
    watch.follow(lever.session);
    // The back-off runs from the takeover, whichever session is watched.
    if let Some(d) = &mut watch.distrust {
        d.left = d.left.saturating_sub(elapsed);
    }
    if let Some(why) = watch.taken_over {
        return AppStep::TakenOver(why);
    }
    if let Some(d) = watch.distrust.filter(|d| !d.left.is_zero()) {
        return AppStep::Distrusted {
            why: d.why,
            left: d.left,
        };
    }
    if lever.silent_for >= lever.dead_after {
        return take_over(
            watch,
            Takeover::Dead {
                silent_for: lever.silent_for,
            },
        );
    }
    let Some(wanted) = wanted(lever, need.target) else {
        return AppStep::Holds;
    };
    if let Some(mut ask) = watch.ask {
        ask.waited += elapsed;
        watch.ask = Some(ask);
        let answer = lever
            .answer
            .filter(|a| a.target == ask.pool)
            .map(|a| a.status);
        match answer {
            Some(AppStatus::Done) => {
                watch.ask = None;
                let claimed = ask.from.saturating_sub(lever.held());
                let measured = ask.used.saturating_sub(lever.used);
                // A pool may give up first what held no data, which was never in the tenant's
                // memory: only the rest must show.
                if measured.0 * 2 < claimed.saturating_sub(ask.unused).0 {
                    return take_over(watch, Takeover::Dishonest { claimed, measured });
                }
                if !claimed.is_zero() && !ask.waited.is_zero() {
                    watch.resized = Some((claimed, ask.waited));
                }
                return AppStep::Done { released: claimed };
            }
            Some(AppStatus::Failed) => {
                watch.failed = Some(ask.pool);
                watch.ask = None;
                return AppStep::Failed { pool: ask.pool };
            }
            _ if ask.waited >= ask.deadline => {
                return take_over(
                    watch,
                    Takeover::Stuck {
                        deadline: ask.deadline,
                    },
                );
            }
            // A new target supersedes one in progress only when the pool wanted moved on.
            _ if apart(wanted, ask.pool) < step(lever) => {
                return AppStep::Asks {
                    pool: ask.pool,
                    waited: ask.waited,
                    deadline: ask.deadline,
                };
            }
            _ => watch.ask = None,
        }
    }
    // A step's worth, or any granule when the tenant uses more than its target and would
    // page its own pool.
    let gap = apart(wanted, lever.pool);
    let pressed = wanted < lever.pool && lever.used > need.target;
    if gap < lever.granule.max(Pages(1))
        || (gap < step(lever) && !pressed)
        || watch.failed == Some(wanted)
    {
        return AppStep::Holds;
    }
    if wanted > lever.pool {
        // Growing: the fence first.
        let needs = lever
            .used
            .saturating_sub(lever.pool_used.unwrap_or(Pages::ZERO))
            + wanted;
        if let Some(room) = room.filter(|&r| r < needs) {
            return AppStep::AwaitsFence { pool: wanted, room };
        }
    }
    // Shrinking, the move is measured from the pool held, not the pool claimed.
    let held = lever.held();
    let moved = if wanted > lever.pool {
        wanted - lever.pool
    } else {
        held.saturating_sub(wanted)
    };
    let ask = Ask {
        pool: wanted,
        from: held,
        unused: held.saturating_sub(lever.pool_used.unwrap_or(Pages::ZERO)),
        used: lever.used,
        waited: Duration::ZERO,
        deadline: deadline(moved, watch.resized),
    };
    watch.ask = Some(ask);
    watch.failed = None;
    AppStep::Asks {
        pool: ask.pool,
        waited: ask.waited,
        deadline: ask.deadline,
    }
}

fn take_over(watch: &mut AppWatch, why: Takeover) -> AppStep {
    watch.ask = None;
    watch.taken_over = Some(why);
    let strikes = watch.distrust.map_or(0, |d| d.strikes) + 1;
    watch.distrust = Some(Distrust {
        why,
        left: backoff(strikes),
        strikes,
    });
    AppStep::TakenOver(why)
}

/// The active memory the idle tax charges a tenant for, given its estimator's `bound`: a pool
/// with misses wants all of itself (the tenant's memory outside the pool plus the whole pool
/// is active, never more than its measured memory), and a pool with neither hits nor misses
/// is idle (only the memory outside it can be active). Other tenants, pools with hits alone,
/// and agents not `trusted` (taken over or in their back-off) keep the estimator's bound.
pub fn active(t: &TenantObservation, bound: Pages, watch: &AppWatch) -> Pages {
    let Some((a, outside)) = t
        .levers
        .app_balloon
        .as_ref()
        .filter(|_| watch.trusted())
        .and_then(|a| Some((a, a.outside()?)))
    else {
        return bound;
    };
    match (a.hits, a.misses) {
        (_, Some(misses)) if misses > 0 => bound.max((outside + a.pool).min(a.used)),
        (Some(0), Some(0)) => bound.min(outside),
        _ => bound,
    }
}
