//! The application balloon's planner (ALB): a tenant whose application (a database's buffer pool, a JVM heap) has a live agent is asked before the OS is, because the application knows which of its pages matter; the OS fence follows what it really gave back.
//!
//! The pool memtide wants is `wanted = target - outside`, where `outside` is the tenant's
//! measured memory besides the pool's data (besides the whole pool it holds when the pool
//! misses: a miss takes a free page first, so every page it holds is in the tenant's memory,
//! its free list too), rounded down to the granule and kept within the
//! application's `[min, max]`; nothing is asked before the agent's first statistics say what
//! the pool holds. A pool more than a step (`max(granule, max / 64)`) away from it is asked
//! to move, and one above it by a granule or more while the tenant holds more than its target
//! resident (it would page its own pool):
//!
//! - **shrinking**: the application is asked first, with a deadline for the move (below).
//!   Until it says done, the part of the excess it was asked for is `covered`: the OS
//!   levers after this one (guest balloon, limit, host swap in `soft`) hold the fence that much
//!   above the target. At done the fence follows: it takes what was really released, from
//!   free memory, at no cost to the tenant. What lies beyond the application's min is the OS
//!   levers' at once;
//! - **growing**: the fence rises first (the balloon deflates, the limit rises, toward the
//!   target as for any tenant), and the application is asked only once the tenant may hold
//!   `outside + wanted`; a pool that misses, awaiting a fence that has not risen for
//!   [`FENCE_STALL`], is asked for what the fence lets it hold, when that is two steps or
//!   more (the others' paced moves may leave the fence short of the target for good);
//! - **takeover**: an agent that is dead (no statistics for its `dead_after`), stuck (a target
//!   not done by its deadline) or dishonest (done, but the tenant's measured memory fell by
//!   less than half of what the pool gave beyond the part of it that held no data, which was
//!   never in the tenant's memory, by more than [`DISHONEST_SLACK`] steps: an allocator
//!   frees whole pages, so a small eviction may free none) is closed with that reason, and the OS levers move
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
//! **A busy pool keeps its hot pages, and does not swing** (what a real two-database run showed
//! without them: a warm busy pool sent to its minimum in one move, and pools resized every 2 s):
//!
//! - **paced shrinks**: a pool serving requests gives up per move at most its free part (pages
//!   holding no data) and its cold part: from its miss-ratio curve where the agent sends one,
//!   the pages whose loss raises the miss ratio by at most [`COLD_MISS_RISE`], and at least
//!   [`PACE_FRACTION`] of the pool (without a curve, that fraction: the estimate the counters
//!   allow, as the MariaDB adapter's 64 MiB of a 512 MiB pool). An idle pool (no requests) goes
//!   in one move. Until the pool is down to what memtide wants, the whole planned shrink is
//!   `covered` ([`AppStep::Paces`] between moves): the OS fence never pages out of a trusted
//!   pool what the pool is about to give back itself;
//! - **a hold**: a move waits [`HOLD`] after the previous one ended (done or failed), so a
//!   pool moves at most once per its resize time plus the hold; a move that reverses a
//!   previous rise or a previous shrink of two steps or more waits [`REVERSE_HOLD`], unless the tenant uses more
//!   than its target (it would page its own pool), and a pool that misses grows back after
//!   [`MISSING_REVERSE_HOLD`];
//! - **growth by use**: a pool serving requests is grown only while it is full of data or
//!   misses (one serving them from free pages without misses has no use for more); an idle
//!   one not within [`REVERSE_HOLD`] of a shrink, however small; a pool that misses by a step
//!   or more, any other only by at least two steps' worth.
//!
//! **Cold memory may live in swap, as it would under a limit alone.** The OS fence is a limit
//! on the tenant's resident memory, and the kernel behind it pages out the tenant's coldest
//! pages: in a real two-database run on zram, limits alone kept both 512 MiB pools whole with
//! 84 MiB of each server's memory (its startup allocations, never read again) in swap and
//! almost no swap-ins, while pools sized to leave that memory resident held 312 MiB for
//! 392 MiB of data and read the rest from disk. So where the fence is a limit with swap to
//! spare, a pool that misses in a tenant resident up to its target grows past what fits
//! beside everything else by a probe (two steps) at a time while the tenant's swap-ins stay
//! under [`COLD_SWAP_INS`] per second, or under [`QUIET_SWAP_SHARE`] of the pool's misses
//! per second: the kernel pays for it with the tenant's coldest pages, and a swap-in costs
//! at most what the miss it replaces does (a read from disk; on zram, microseconds).
//! The tenant's swap memtide counts as cold (`AppWatch::in_swap`) is never more than one probe
//! beyond what is in swap, so the kernel can never be made to page more than one probe of the
//! pool itself. At
//! [`HOT_SWAP_INS`] per second or more, and at least as many as the pool misses, the cold memory has run out (in the same run: 75 MiB
//! of each server's, then the kernel paged the pool's own pages in and out, swap no larger):
//! the swap counted as cold is capped a probe under where it stood (and under what is in
//! swap), so the pool gives back its last probe and makes room for them, and the cap stands
//! until the tenant's target moves by a step (without it the pool grew into the same wall
//! every 20 s: 20 resizes in 140 s; lifted after a minute of quiet swap-ins, the pools of
//! two real runs probed again and met the same wall, their swap no larger).
//!
//! [`AppWatch`] keeps the move in progress between ticks, and the tenant's speed, back-off and
//! last move across sessions. Cost: O(1), and O(curve points) for a pool with a curve.

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
/// The least time between the end of one move and the next.
pub const HOLD: Duration = Duration::from_secs(5);
/// The least time between the end of one move and a move the other way.
pub const REVERSE_HOLD: Duration = Duration::from_secs(60);
/// The least time between the end of a shrink and growing a pool that misses (a database
/// woken just after its idle pool was shrunk must not wait [`REVERSE_HOLD`]).
pub const MISSING_REVERSE_HOLD: Duration = Duration::from_secs(15);
/// Steps (`max(granule, max / 64)`) by which a done move's measured fall may miss half of
/// what it released before the agent counts as dishonest (see `decide`).
pub const DISHONEST_SLACK: u64 = 2;

/// A pool serving requests gives up at least this fraction of itself per move.
pub const PACE_FRACTION: f64 = 1.0 / 8.0;
/// The rise of the miss ratio (on the pool's curve) up to which pages count as cold.
pub const COLD_MISS_RISE: f64 = 0.01;
/// The miss ratio (misses over requests since the previous observation) at or above which a
/// pool is short of memory; below it, a pool whose data fits.
pub const SHORT_MISS_RATIO: f64 = 0.001;

/// Swap-ins per second (over the last tick) at or under which the tenant's swap holds only
/// memory it does not use: a pool that misses may push more of it there.
pub const COLD_SWAP_INS: f64 = 8.0;
/// Swap-ins per second at or above which pages in use are in swap: the pool gives back its
/// last probe (see [`AppWatch`]'s `follow_swap`).
pub const HOT_SWAP_INS: f64 = 64.0;
/// A pool that misses, awaiting a fence that has not risen for this long, takes what the
/// fence lets it hold.
pub const FENCE_STALL: Duration = Duration::from_secs(10);
/// A pool that misses may push cold memory to swap while the tenant's swap-ins stay under
/// this share of its misses (or under [`COLD_SWAP_INS`]); at as many swap-ins as misses, or
/// [`HOT_SWAP_INS`] if more, it gives back its last probe.
pub const QUIET_SWAP_SHARE: f64 = 0.25;

/// A tenant's swap as the application balloon sees it.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct SwapSeen {
    /// The tenant's memory in its swap.
    pub swapped: Pages,
    /// Whether the fence is a limit behind which the kernel may page more of the tenant out
    /// (it has swap to spare).
    pub room: bool,
    /// Its swap-ins (major faults) per second over the last tick (`None`: not counted, and
    /// none of it counts as cold).
    pub swap_ins_per_s: Option<f64>,
}

/// The move asked of an agent and not finished yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Ask {
    pool: Pages,
    /// Whether it grows the pool.
    grows: bool,
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
    /// The tenant's last move that ended: whether it grew the pool, whether it moved it by
    /// two steps or more, and the time since.
    ended: Option<(bool, bool, Duration)>,
    /// The tenant's swap counted as cold: the pool is sized for the target plus this (see
    /// the module docs).
    pub(crate) in_swap: Pages,
    /// The most of it that may count as cold, found when swap-ins turned hot, and the target
    /// then.
    cold_cap: Option<(Pages, Pages)>,
    /// A rise awaiting the fence: the room it last saw, and how long the room has not risen.
    awaiting_fence: Option<(Pages, Duration)>,
    /// The pool's last completed move was a shrink: every page it kept had held data, so all
    /// of it is in the tenant's memory (see [`outside_seen`]).
    shrunk: bool,
}

impl AppWatch {
    fn follow(&mut self, session: u64) {
        if self.session != Some(session) {
            *self = AppWatch {
                session: Some(session),
                resized: self.resized,
                distrust: self.distrust,
                ended: self.ended,
                ..AppWatch::default()
            };
        }
    }

    /// Whether the agent's claims count: not while it is taken over or in its back-off.
    pub fn trusted(&self) -> bool {
        self.taken_over.is_none() && self.distrust.is_none_or(|d| d.left.is_zero())
    }

    /// Follows the tenant's swap at `target` (see the module docs): the cold memory counted
    /// rises to what is in swap plus a probe while a pool that misses sees no swap-ins, is
    /// capped a probe under where it stood once they turn hot (until the target moves by a
    /// step), and never stands more than a probe above what is in swap.
    fn follow_swap(
        &mut self,
        lever: &AppBalloonLever,
        swap: SwapSeen,
        target: Pages,
        elapsed: Duration,
    ) {
        let probe = step(lever) + step(lever);
        let Some(rate) = swap.swap_ins_per_s else {
            self.in_swap = Pages::ZERO;
            self.cold_cap = None;
            return;
        };
        // The pool's reads from disk per second, over the same tick: a swap-in counts as
        // much as one of them.
        let misses = lever
            .misses
            .filter(|_| !elapsed.is_zero())
            .map_or(0.0, |m| m as f64 / elapsed.as_secs_f64());
        if self
            .cold_cap
            .is_some_and(|(_, at)| apart(at, target) >= step(lever))
        {
            self.cold_cap = None;
        }
        if pool_use(lever) == PoolUse::Idle {
            // An idle pool has no use for memory beyond its target: sized for the cold
            // memory in swap it grew while idle (a simulated run: 128 -> 149 MiB).
            self.in_swap = Pages::ZERO;
        }
        if rate >= HOT_SWAP_INS.max(misses) {
            // The pool gives back its last probe, once at this target: swap-ins go on for a
            // few ticks while the pages come back, and a cap lowered each of them took 50 MiB
            // from a pool that had pushed 16 too far (measured).
            let cap = match self.cold_cap {
                Some((cap, _)) => cap,
                None => self.in_swap.saturating_sub(probe),
            };
            self.cold_cap = Some((cap.min(swap.swapped), target));
        } else if rate <= COLD_SWAP_INS.max(misses * QUIET_SWAP_SHARE)
            && swap.room
            && lever.used.saturating_sub(swap.swapped) + step(lever) >= target
            && pool_use(lever) == PoolUse::Short
            && lever.pool + step(lever) <= lever.max
        {
            self.in_swap = swap.swapped + probe;
        }
        self.in_swap = self
            .in_swap
            .min(swap.swapped + probe)
            .min(self.cold_cap.map_or(Pages(u64::MAX), |(c, _)| c));
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

/// The tenant's memory a move of its pool toward a target leaves in place. A pool that misses
/// has touched every page it holds (a miss takes a free page before it evicts one), so all of
/// it is the pool's: counting its free pages as outside would keep the tenant short of its
/// target by the free list the server keeps (InnoDB's LRU refills it to `lru_scan_depth`
/// pages), and the missing pool would never press for the rest of the budget. Other pools may
/// hold pages never touched, not in the tenant's memory: only their data is the pool's. The
/// cache search sizes a tenant's memory as its pool's quota plus this, so the two agree.
pub fn outside_for_move(lever: &AppBalloonLever) -> Option<Pages> {
    let outside = lever.outside()?;
    Some(match pool_use(lever) {
        PoolUse::Short => outside.min(lever.used.saturating_sub(lever.held())),
        _ => outside,
    })
}

/// [`outside_for_move`], for a pool memtide has just shrunk: the pages it kept had all held
/// data, and the ones a shrink left free are still in the tenant's memory, so all of it is
/// the pool's, as for a pool that misses. Counted as outside, they made each shrink of a
/// real idle pool ask for the next at the same target (237 -> 166 -> 139 MiB while its
/// target stood at 255-271 MiB), dropping data the woken database then read from disk.
fn outside_seen(lever: &AppBalloonLever, watch: &AppWatch) -> Option<Pages> {
    let outside = outside_for_move(lever)?;
    Some(if watch.shrunk {
        outside.min(lever.used.saturating_sub(lever.held()))
    } else {
        outside
    })
}

/// The pool memtide wants: `target - outside` on the granule within `[min, max]` (`None`
/// before the agent's first statistics, or when no multiple of the granule lies within them).
fn wanted(lever: &AppBalloonLever, watch: &AppWatch, target: Pages) -> Option<Pages> {
    let g = lever.granule.0.max(1);
    let lo = lever.min.0.div_ceil(g) * g;
    let hi = lever.max.0 / g * g;
    let want = target.saturating_sub(outside_seen(lever, watch)?).0 / g * g;
    (lo <= hi).then(|| Pages(want.clamp(lo, hi)))
}

/// How far `a` and `b` lie apart.
fn apart(a: Pages, b: Pages) -> Pages {
    a.max(b) - a.min(b)
}

/// How a pool is used, from its agent's hits and misses since the previous observation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PoolUse {
    /// No statistics yet.
    Unknown,
    /// Neither hits nor misses: nothing reads the pool.
    Idle,
    /// Requests, missing less than [`SHORT_MISS_RATIO`] of them: its data fits.
    Fits,
    /// Requests missing at least [`SHORT_MISS_RATIO`] of them: it would use more.
    Short,
}

/// How `lever`'s pool is used (see [`PoolUse`]).
pub fn pool_use(lever: &AppBalloonLever) -> PoolUse {
    match (lever.hits, lever.misses) {
        (Some(hits), Some(misses)) => {
            let requests = hits.saturating_add(misses);
            if requests == 0 {
                PoolUse::Idle
            } else if misses as f64 >= SHORT_MISS_RATIO * requests as f64 {
                PoolUse::Short
            } else {
                PoolUse::Fits
            }
        }
        _ => PoolUse::Unknown,
    }
}

/// The memory a trusted agent's pool says its tenant wants, where it says anything: a pool
/// short of memory, its memory outside the pool and its largest pool; one whose data fits, the
/// memory outside and the data (`None`: an idle pool, no statistics, or an agent not trusted;
/// the estimator's word stands). Allocation caps a tenant at no less than this, so that an
/// estimator blind to the pool's own misses (TWS watches the kernel's refaults; a pool's
/// misses are reads from disk) never shrinks a pool in use toward its minimum.
pub fn wants(lever: &AppBalloonLever, watch: &AppWatch) -> Option<Pages> {
    if !watch.trusted() {
        return None;
    }
    let outside = lever.outside()?;
    match pool_use(lever) {
        PoolUse::Short => Some(outside + lever.max),
        PoolUse::Fits => Some((outside + lever.pool_used?).min(lever.used.max(outside))),
        PoolUse::Idle | PoolUse::Unknown => None,
    }
}

/// The most a pool gives up in one move (see the module docs): everything when idle, else its
/// free part and its cold part.
fn pace(lever: &AppBalloonLever, held: Pages) -> Pages {
    if matches!(pool_use(lever), PoolUse::Idle | PoolUse::Unknown) {
        return held;
    }
    let free = held.saturating_sub(lever.pool_used.unwrap_or(held));
    let least = Pages((held.0 as f64 * PACE_FRACTION) as u64);
    let cold = lever.curve.as_ref().map_or(Pages::ZERO, |curve| {
        // The smallest pool whose miss ratio stays within COLD_MISS_RISE of today's.
        let limit = curve.miss_ratio(held) + COLD_MISS_RISE;
        let (mut lo, mut hi) = (lever.min.min(held).0, held.0);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if curve.miss_ratio(Pages(mid)) <= limit {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        held - Pages(lo)
    });
    (free + least.max(cold)).min(held)
}

/// Plans the application balloon and takes what it covers out of `need.left`. `room` is what
/// the OS fence lets the tenant hold now (`None`: no fence), `swap` what its swap says,
/// `elapsed` the time since the last observation.
pub(super) fn plan(
    need: &mut Need,
    lever: &AppBalloonLever,
    room: Option<Pages>,
    swap: SwapSeen,
    elapsed: Duration,
    watch: &mut AppWatch,
) -> AppBalloonNote {
    let step = decide(need, lever, room, swap, elapsed, watch);
    let wanted = wanted(lever, watch, need.target + watch.in_swap);
    // What the pool is left to give back on its way down to what memtide wants: the fence
    // holds it while the application is asked or paced toward it.
    let covered = match (step, watch.ask) {
        (AppStep::Asks { .. }, Some(ask)) if ask.pool < ask.from => need
            .left
            .min(ask.from - wanted.unwrap_or(ask.pool).min(ask.pool)),
        // Between paced moves the fence follows what the pool gave, and no further.
        (AppStep::Paces { .. } | AppStep::Done { .. }, _) => need
            .left
            .min(lever.held().saturating_sub(wanted.unwrap_or(lever.pool))),
        _ => Pages::ZERO,
    };
    need.left -= covered;
    AppBalloonNote {
        pool: lever.pool,
        wanted: wanted.unwrap_or(lever.pool),
        step,
        covered,
        cold_in_swap: watch.in_swap,
    }
}

fn decide(
    need: &Need,
    lever: &AppBalloonLever,
    room: Option<Pages>,
    swap: SwapSeen,
    elapsed: Duration,
    watch: &mut AppWatch,
) -> AppStep {
    watch.follow(lever.session);
    watch.follow_swap(lever, swap, need.target, elapsed);
    let awaited = watch.awaiting_fence.take();
    // The pool is sized for the target and the tenant's cold memory in swap.
    let sized = need.target + watch.in_swap;
    // The back-off runs from the takeover, whichever session is watched; the hold from the
    // last move's end.
    if let Some(d) = &mut watch.distrust {
        d.left = d.left.saturating_sub(elapsed);
    }
    if let Some((_, _, since)) = &mut watch.ended {
        *since += elapsed;
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
    let Some(wanted) = wanted(lever, watch, sized) else {
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
                // Any rise counts as big: only a missing pool grows by a single step.
                let big = ask.grows || apart(ask.pool, ask.from) >= step(lever) + step(lever);
                watch.ended = Some((ask.grows, big, Duration::ZERO));
                watch.shrunk = !ask.grows;
                let claimed = ask.from.saturating_sub(lever.held());
                let measured = ask.used.saturating_sub(lever.used);
                // A pool may give up first what held no data, which was never in the tenant's
                // memory: only the rest must show. An allocator hands back only whole pages of
                // its own runs, so a small eviction may free none (a real Redis, 5 MiB of its
                // 1 KiB values evicted from 213 MiB: 0.0 MiB fell): a shortfall within
                // DISHONEST_SLACK steps is not a lie. It buys a liar nothing lasting: the fence
                // follows what was measured released.
                let slack = Pages(step(lever).0 * DISHONEST_SLACK);
                if (measured + measured + slack) < claimed.saturating_sub(ask.unused) {
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
                watch.ended = Some((ask.grows, false, Duration::ZERO));
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
            // A new target supersedes one in progress only when it turns the move around by a
            // step; a paced shrink runs to its step.
            _ if !(if ask.grows {
                wanted + step(lever) <= lever.pool
            } else {
                wanted >= lever.pool + step(lever)
            }) =>
            {
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
    let grows = wanted > lever.pool;
    // Pressed: the tenant's resident memory is over its target, so the kernel pages now. Its
    // swap does not press (cold memory may lie there; hot swap-ins cap what counts as cold):
    // counted, a pool with 83 MiB in swap was moved 1-3 MiB at a time, 22 resizes in 140 s.
    let pressed = !grows && lever.used.saturating_sub(swap.swapped) > need.target;
    if gap < lever.granule.max(Pages(1))
        || (gap < step(lever) && !pressed)
        || watch.failed == Some(wanted)
    {
        return AppStep::Holds;
    }
    // Shrinking, the move is measured from the pool held, not the pool claimed; paced to the
    // pool's free and cold part.
    let held = lever.held();
    let mut next = if grows {
        wanted
    } else {
        let g = lever.granule.0.max(1);
        let paced = held.saturating_sub(pace(lever, held)).0.div_ceil(g) * g;
        wanted.max(Pages(paced))
    };
    if grows {
        // A pool serving requests from free pages without misses has no use for more (an idle
        // one is given what its target allows, but not within the reverse hold of a shrink);
        // a rise under two steps is not worth a resize, unless the pool misses (a woken
        // database held a step short of its target read that step from disk: 291 MiB of pool
        // for 305 wanted, measured).
        let full = lever
            .pool_used
            .is_some_and(|u| u + step(lever) >= lever.pool);
        let small = match pool_use(lever) {
            PoolUse::Short => false,
            PoolUse::Fits if !full => true,
            _ => gap < step(lever) + step(lever),
        };
        if small {
            return AppStep::Holds;
        }
    }
    if let Some((grew, big, since)) = watch.ended {
        let hold = if grows && !grew && pool_use(lever) == PoolUse::Idle {
            REVERSE_HOLD
        } else if grew == grows || pressed || !big {
            HOLD
        } else if grows && pool_use(lever) == PoolUse::Short {
            MISSING_REVERSE_HOLD
        } else {
            REVERSE_HOLD
        };
        if since < hold {
            let wait = hold - since;
            return if grows || held <= wanted {
                AppStep::Holds
            } else {
                AppStep::Paces { next, wait }
            };
        }
    }
    if grows {
        // Growing: the fence first (the cold memory in swap needs none of it).
        let outside = outside_seen(lever, watch).unwrap_or(lever.used);
        let needs = (outside + wanted).saturating_sub(watch.in_swap);
        if let Some(room) = room.filter(|&r| r < needs) {
            // A pool that misses takes what the fence lets it hold, two steps or more, once
            // the fence has not risen for FENCE_STALL: it may stop short of the target for
            // good (a simulated woken database waited two minutes at 236 MiB for the last
            // 2 MiB of a 269 MiB move).
            let stalled = match awaited {
                Some((seen, since)) if room <= seen => since + elapsed,
                _ => Duration::ZERO,
            };
            let g = lever.granule.0.max(1);
            let fits = Pages((room + watch.in_swap).saturating_sub(outside).0 / g * g);
            if pool_use(lever) != PoolUse::Short
                || stalled < FENCE_STALL
                || fits < lever.pool + step(lever) + step(lever)
            {
                watch.awaiting_fence = Some((room, stalled));
                return AppStep::AwaitsFence { pool: wanted, room };
            }
            next = fits;
        }
    }
    let moved = if grows {
        next - lever.pool
    } else {
        held.saturating_sub(next)
    };
    let ask = Ask {
        pool: next,
        grows,
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
/// is active, never more than its measured memory), a pool serving hits alone uses its data
/// (the tenant's memory outside the pool plus the pool's data), and a pool with neither hits
/// nor misses is idle (only the memory outside it can be active). Other tenants and agents
/// not `trusted` (taken over or in their back-off) keep the estimator's bound. The estimator
/// is blind to a pool's hits (TWS watches the kernel's refaults): left to it, a real woken
/// database whose pool held all it read for one tick was taxed from 400 to 350 MiB and its
/// pool asked 406 -> 336 MiB, then grew back on the misses that followed, twice in a minute.
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
        (Some(hits), Some(0)) if hits > 0 => bound.max(a.used),
        _ => bound,
    }
}
