//! The application balloon's planner (ALB): a tenant whose application (a database's buffer pool, a JVM heap) has a live agent is asked before the OS is, because the application knows which of its pages matter; the OS fence follows what it really gave back.
//!
//! The pool memtide wants is `wanted = target - outside`, where `outside` is the tenant's
//! measured memory besides the pool's data, rounded down to the granule and kept within the
//! application's `[min, max]`; nothing is asked before the agent's first statistics say what
//! the pool holds. A pool more than a step (`max(granule, max / 64)`) away from it is asked
//! to move, and one above it by a granule or more while the tenant uses more than its target
//! (it would page its own pool):
//!
//! - **shrinking**: the application is asked first, with a deadline of 20 s + 15 s per GiB it
//!   moves. Until it says done, the part of the excess it was asked for is `covered`: the OS
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
//!   the tenant from then on; an agent that registers again starts a new session and is
//!   trusted afresh. An agent that fails a target is honest: the OS takes that part, and the
//!   same target is not asked again.
//!
//! [`AppWatch`] keeps the move in progress between ticks. Cost: O(1).

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

/// What the planner remembers of a tenant's agent between ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppWatch {
    /// The session watched: a new one forgets the rest.
    session: Option<u64>,
    ask: Option<Ask>,
    /// A target the agent failed: not asked again.
    failed: Option<Pages>,
    /// The session was taken over, and why.
    taken_over: Option<Takeover>,
}

impl AppWatch {
    fn follow(&mut self, session: u64) {
        if self.session != Some(session) {
            *self = AppWatch {
                session: Some(session),
                ..AppWatch::default()
            };
        }
    }
}

/// The deadline for moving the pool by `moved`.
pub fn deadline(moved: Pages) -> Duration {
    let gib = moved.to_bytes().0 as f64 / f64::from(1u32 << 30);
    DEADLINE_BASE + DEADLINE_PER_GIB.mul_f64(gib)
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
    if let Some(why) = watch.taken_over {
        return AppStep::TakenOver(why);
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
                let claimed = ask.from.saturating_sub(lever.pool);
                let measured = ask.used.saturating_sub(lever.used);
                // A pool may give up first what held no data, which was never in the tenant's
                // memory: only the rest must show.
                if measured.0 * 2 < claimed.saturating_sub(ask.unused).0 {
                    return take_over(watch, Takeover::Dishonest { claimed, measured });
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
    let ask = Ask {
        pool: wanted,
        from: lever.pool,
        unused: lever
            .pool
            .saturating_sub(lever.pool_used.unwrap_or(Pages::ZERO)),
        used: lever.used,
        waited: Duration::ZERO,
        deadline: deadline(apart(wanted, lever.pool)),
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
    AppStep::TakenOver(why)
}

/// The active memory the idle tax charges a tenant for, given its estimator's `bound`: a pool
/// with misses wants all of itself (the tenant's memory outside the pool plus the whole pool
/// is active), and a pool with neither hits nor misses is idle (only the memory outside it
/// can be active). Other tenants, and pools with hits alone, keep the estimator's bound.
pub fn active(t: &TenantObservation, bound: Pages) -> Pages {
    let Some((a, outside)) = t
        .levers
        .app_balloon
        .as_ref()
        .and_then(|a| Some((a, a.outside()?)))
    else {
        return bound;
    };
    match (a.hits, a.misses) {
        (_, Some(misses)) if misses > 0 => bound.max(outside + a.pool),
        (Some(0), Some(0)) => bound.min(outside),
        _ => bound,
    }
}
