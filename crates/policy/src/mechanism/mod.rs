//! Mechanism choice: one planner per lever a tenant's world offers, and one chooser that orders them — share before anything (ESX), the application before the OS (ALB), the balloon before host swap (ESX), block in the low state.
//!
//! A tenant holding `allocated` pages with a `target` has `excess = allocated - target`. The
//! chooser runs the planners of the levers present (`Levers`, the tenant's capabilities) in
//! this order, each taking what it can of the excess the earlier ones left:
//!
//! 1. **sharing** (`sharing.rs`): merging identical pages frees frames at no cost to the
//!    tenant, so it goes first (ESX shares before it balloons or swaps);
//! 2. **application balloon** (`app_balloon.rs`): an application that shrinks its own pool
//!    picks what to drop far better than an OS paging behind its back (ALB). It is asked
//!    first, and the part of the excess it was asked for holds the OS levers below until it
//!    is done; growing, the OS fence rises first. A stuck, dead or dishonest agent is taken
//!    over by the OS levers;
//! 3. **guest balloon** (`balloon.rs`): the guest OS picks its own victims (ESX); it tracks the
//!    target in every state and deflates by itself when the target rises;
//! 4. **limit** (`limit.rs`): the kernel reclaims within a limit the host sets (a cgroup), with
//!    the safety rails (floor, bounded shrink, back-off); it is asked only for what the
//!    cooperative levers above do not cover;
//! 5. **host swap** (`host_swap.rs`): the fallback, paging random victims behind the tenant's
//!    back: in `soft` only what the levers above cannot take, in `hard` and `low` the whole
//!    excess (within the room the world reports), and in `low` the tenant is blocked while
//!    above its target and paging;
//! 6. **disk weight** (`disk.rs`): not memory, so it takes none of the excess; a tenant on a
//!    disk the tenants share, with a disk in its spec, gets its proportional-share weight,
//!    raised while it misses its I/O latency target (Lai et al.);
//! 7. **protection** (`protection.rs`): takes none of the excess either; the kernel is asked
//!    to keep its own reclaim off the tenant's min.
//!
//! A tenant without a lever simply skips its planner: a simulated VM has a balloon and host
//! swap, a cgroup has a limit, and a container running a database could have an application
//! balloon and a limit. Guarantees: the plan never asks a lever for more than its limit
//! (driver limit, application limit, host swap budget, the limit rails' floor), and a
//! mechanism is listed only when it acts this tick. Cost: O(1) per tenant, no allocation.
//!
//! The controller asks this module, not the levers, what a tenant's levers imply for the rest
//! of a step: whether its memory counts against the budget ([`counts_against_budget`]), the
//! min and ceiling allocation may give it ([`bounds`]), the active memory the idle tax
//! charges it for ([`active`]: an application pool's hits and misses), whether its estimator
//! may probe ([`may_probe`]), and the pass across tenants after planning ([`finish`]).

mod app_balloon;
mod balloon;
pub mod disk;
mod host_swap;
pub mod limit;
mod protection;
mod sharing;

pub use app_balloon::{active, AppWatch};
pub use balloon::BalloonWatch;
pub use sharing::{scan_rate, ScanCost};

use memtide_model::{
    DiskSpec, Levers, Mechanism, MechanismNote, Mechanisms, Pages, ReclamationState, TenantAction,
    TenantObservation,
};
use std::time::Duration;

use limit::LimitRails;

/// One tenant's situation, as the chooser needs it.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    pub state: ReclamationState,
    pub target: Pages,
    /// The tenant's configured min and max.
    pub min: Pages,
    pub max: Pages,
    /// What its world reports, levers included.
    pub tenant: &'a TenantObservation,
    /// Time since the previous observation, for per-second rates (`None` on the first).
    pub elapsed: Option<Duration>,
    /// Its configured disk weight and latency target, where it has one: read only for a
    /// tenant whose world shares a disk (a reference, so a step reads no spec otherwise).
    pub disk: &'a Option<DiskSpec>,
}

/// The chooser's settings, the same for every tenant.
#[derive(Clone, Debug)]
pub struct PlanSettings<'a> {
    /// Most pages the host may page out of one tenant in one tick.
    pub host_swap_per_tick: Pages,
    /// Ticks without balloon progress after which the balloon counts as stalled.
    pub balloon_stall_ticks: u32,
    pub rails: &'a LimitRails,
}

/// What the planners remember about a tenant between ticks.
#[derive(Clone, Debug, Default)]
pub struct PlanMemory {
    pub balloon: BalloonWatch,
    pub app: AppWatch,
    /// The disk planner's, for a tenant on a shared disk.
    pub disk: disk::DiskWatch,
}

/// Where the planners stand while the chooser runs them.
#[derive(Copy, Clone, Debug)]
struct Need {
    state: ReclamationState,
    target: Pages,
    /// `allocated - target`.
    excess: Pages,
    /// The part of the excess no earlier planner covers.
    left: Pages,
}

impl Need {
    /// What the earlier planners cover.
    fn covered(&self) -> Pages {
        self.excess - self.left
    }
}

/// Plans every lever of one tenant (see the module docs) into its `action`: the mechanisms
/// that act, in planning order, into `action.mechanisms`, and the figures behind them, the
/// moves among them (`MechanismNote::moves`), into `action.reason.mechanism` and
/// `action.reason.disk`. They are written where they lie (a step for 10,000 tenants writes
/// them straight into its decision) and hold nothing of their last value; the action's other
/// fields are left alone.
pub fn plan(
    input: &PlanInput<'_>,
    settings: &PlanSettings<'_>,
    memory: &mut PlanMemory,
    action: &mut TenantAction,
) {
    let mechanisms = &mut action.mechanisms;
    let note = &mut action.reason.mechanism;
    let t = input.tenant;
    let levers = &t.levers;
    let excess = t.allocated.saturating_sub(input.target);
    let mut need = Need {
        state: input.state,
        target: input.target,
        excess,
        left: excess,
    };
    *note = MechanismNote::new(input.state, t.allocated, input.target);
    *mechanisms = Mechanisms::new();

    if let Some(lever) = &levers.sharing {
        let n = sharing::plan(&mut need, lever);
        if n.merge > Pages::ZERO {
            mechanisms.push(Mechanism::Sharing);
        }
        note.sharing = Some(n);
    }
    if let Some(lever) = &levers.app_balloon {
        let n = app_balloon::plan(
            &mut need,
            lever,
            fence_room(levers),
            swap_seen(t, input.elapsed),
            input.elapsed.unwrap_or_default(),
            &mut memory.app,
        );
        if n.app_move().is_some() {
            mechanisms.push(Mechanism::AppBalloon);
        }
        note.app_balloon = Some(n);
    }
    memory
        .balloon
        .observe(levers.balloon_size(), settings.balloon_stall_ticks);
    if let Some(lever) = &levers.balloon {
        let n = balloon::plan(&mut need, lever, memory.balloon.stalled());
        if n.target
            .is_some_and(|bt| bt != n.size || excess > Pages::ZERO)
        {
            mechanisms.push(Mechanism::Balloon);
        }
        note.balloon = Some(n);
    }
    memory.balloon.asked(note.balloon.and_then(|b| b.target));
    if let Some(lever) = &levers.limit {
        let n = limit::plan(
            t,
            lever,
            input.min,
            need.target + need.covered(),
            input.elapsed,
            settings.rails,
        );
        if n.to != n.from {
            mechanisms.push(Mechanism::Limit);
        }
        note.limit = Some(n);
    }
    if let Some(lever) = &levers.host_swap {
        let n = host_swap::plan(&need, lever, settings.host_swap_per_tick);
        if n.out > Pages::ZERO {
            mechanisms.push(Mechanism::HostSwap);
        }
        note.host_swap = Some(n);
    }
    note.protection = levers
        .protection
        .as_ref()
        .map(|lever| protection::plan(lever, input.min));
    // A tenant on a shared disk: its weight, read from its spec only then.
    action.reason.disk = levers.disk.as_deref().and_then(|io| {
        let spec = input.disk.as_ref()?;
        Some(disk::plan(spec, io, &mut memory.disk))
    });
}

/// What a tenant's swap tells the application balloon: only behind a limit, whose kernel pages
/// out the tenant's coldest pages, and only where swap-ins are counted over a known time (a
/// guest's balloon leaves that choice to the guest, which memtide does not see).
fn swap_seen(t: &TenantObservation, elapsed: Option<Duration>) -> app_balloon::SwapSeen {
    let Some(limit) = t
        .levers
        .limit
        .as_ref()
        .filter(|_| t.levers.balloon.is_none())
    else {
        return app_balloon::SwapSeen::default();
    };
    let secs = elapsed.map_or(0.0, |e| e.as_secs_f64());
    app_balloon::SwapSeen {
        swapped: t.swapped.unwrap_or(Pages::ZERO),
        room: t
            .anon
            .is_some_and(|anon| anon > limit.unreclaimable + Pages::from_mib(1)),
        // Swap-ins where the kernel counts them (v2's anonymous refaults), else major faults.
        swap_ins_per_s: t
            .swap_ins
            .or(limit.major_faults)
            .filter(|_| secs > 0.0)
            .map(|faults| faults as f64 / secs),
    }
}

/// What the OS fence lets a tenant hold now: the memory its guest balloon leaves it, or its
/// limit (`None`: no fence).
fn fence_room(levers: &Levers) -> Option<Pages> {
    match (&levers.balloon, &levers.limit) {
        (Some(b), _) => Some(b.memory.saturating_sub(b.size)),
        (None, Some(l)) => Some(l.limit),
        (None, None) => None,
    }
}

/// The tenant's memory outside its application pool, as sizing the pool counts it (see
/// [`app_balloon::outside_for_move`]).
#[inline]
pub fn app_outside(lever: &memtide_model::AppBalloonLever) -> Option<Pages> {
    app_balloon::outside_for_move(lever)
}

/// The memory a tenant's trusted application pool says it wants, where it says anything
/// (see [`app_balloon::wants`]): allocation caps the tenant at no less.
#[inline]
pub fn app_wants(t: &TenantObservation, watch: &AppWatch) -> Option<Pages> {
    app_balloon::wants(t.levers.app_balloon.as_ref()?, watch)
}

/// Whether a tenant's memory counts against the budget's own reclamation state: memory that
/// a limit moves is what the tenants hold, which the budget bounds (the machine's free memory
/// says little on a shared Linux host), and so is every tenant's on a `shared_host` (a VM on
/// a Linux host too); on a machine memtide owns, a VM's is machine memory, which the host's
/// state already follows.
#[inline]
pub fn counts_against_budget(t: &TenantObservation, shared_host: bool) -> bool {
    shared_host || t.levers.limit.is_some()
}

/// Whether a tenant's estimator may probe (shrink it to find its working set). A tenant under
/// a limit is probed only while memory is `wanted` and the run acts: its probe is a limit
/// that makes the kernel reclaim, which is not worth its faults while the budget has room.
#[inline]
pub fn may_probe(t: &TenantObservation, wanted: bool, dry_run: bool) -> bool {
    t.levers.limit.is_none() || (wanted && !dry_run)
}

/// The min and ceiling allocation may give a tenant: its configured min and `cap` (its max, or
/// its estimate where it caps at it), or what its limit's rails allow (see [`limit::bounds`]).
#[inline]
pub fn bounds(
    t: &TenantObservation,
    min: Pages,
    max: Pages,
    cap: Pages,
    wanted: bool,
    rails: &LimitRails,
) -> (Pages, Pages) {
    match &t.levers.limit {
        Some(lever) => limit::bounds(t, lever, min, max, cap, wanted, rails),
        None => (min, cap),
    }
}

/// The pass across tenants once each is planned: limit raises are cut to fit the budget
/// ([`limit::fit_actions`]). It has work only for tenants whose memory counts against the
/// budget ([`counts_against_budget`]): a step with none skips it.
pub fn finish(actions: &mut [TenantAction], budget: Pages) {
    limit::fit_actions(actions, budget);
}

#[cfg(test)]
mod tests;
