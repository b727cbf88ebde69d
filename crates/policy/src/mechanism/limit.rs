//! The limit planner and its safety rails: the limit a tenant gets this tick given its target, floor, faults and pressure (grow at once, shrink in bounded steps, never below the floor, back off on faults or pressure).
//!
//! Used where memory moves by a limit the host enforces (a Linux cgroup, a simulated
//! container). In order:
//!
//! 1. `floor = max(min, unreclaimable + floor_margin)`: below what the tenant cannot give back
//!    (anonymous memory without swap to put it in) a limit means an OOM kill, so no target can
//!    take a limit there.
//! 2. `wanted = max(target, floor)`. A limit that rises is set to `wanted` at once: a tenant
//!    that needs memory must not wait.
//! 3. A limit that would fall is held where it is while the tenant faults at or above
//!    `backoff_faults_per_s`, the world throttles it at its limit `backoff_throttled_per_s`
//!    times a second or more, its pressure is at or above `backoff_pressure`, or the world
//!    lately could not reclaim it down to its limit. The first that applies, in that order,
//!    names the hold: this tick's counts before the pressure, a 10-second average that lags
//!    them.
//! 4. Otherwise it falls to `wanted`, but by at most one step below what the tenant holds:
//!    `max(wanted, min(limit, allocated) - max(shrink_step * allocated, min_step))`. Slack
//!    between a loose limit and the usage goes at once; reclaiming memory the tenant holds goes
//!    a few percent per tick.
//!
//! 5. A tenant waking from swap gets it read back ahead of its faults: when the limit this
//!    tick leaves room for everything it holds and has in swap (`to >= allocated + swapped`,
//!    at least [`SWAP_IN_LEAST`] swapped) and it faults at [`SWAP_IN_FAULTS_PER_S`] or more, the
//!    note asks the world to read the swapped memory back now (`swap_in`). Each page it
//!    touches then costs a minor fault instead of a major one (a zram read each, or a disk
//!    read), and the world reads them in a worker's time, not the tenant's stalled tasks'.
//!    The limit already grants that memory, so reading it back takes nothing from anyone;
//!    what the tenant never touches again is reclaimed by the usual bounded steps.
//!
//! Across tenants, [`fit_to_budget`] then cuts this tick's raises short so the limits never
//! add up to more than the budget: a tenant gets more only as fast as the others give memory
//! back. Raises to a floor are always granted (safety comes before the budget), so the sum can
//! exceed the budget only when the floors alone do. Cost: O(n) per tick.
//! A world that writes limits to a kernel declares the smallest lowering worth a write
//! (`LimitLever::smallest_lowering`); [`hold_small_lowerings`] holds smaller ones while the
//! budget has room for them.

//!
//! A limit tenant's memory is counted against the budget (what the tenants hold, not what the
//! machine has free, is what a limit moves), and while that budget has room it keeps what it
//! holds: [`bounds`] gives allocation its min and ceiling. [`fit_actions`] applies
//! [`fit_to_budget`] to a tick's actions.

use memtide_model::{
    LimitLever, LimitNote, LimitRail, Mechanism, Pages, TenantAction, TenantObservation,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The rails' parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitRails {
    /// Most of its allocation a tenant gives back per tick, as a fraction (0 < f <= 0.5).
    pub shrink_step: f64,
    /// A shrink step is at least this large, so small tenants still converge.
    pub min_step: Pages,
    /// Room kept above the unreclaimable memory.
    pub floor_margin: Pages,
    /// Faults per second (refaults + swap-ins, or major faults) that stop a shrink.
    pub backoff_faults_per_s: f64,
    /// PSI some avg10 (percent) that stops a shrink.
    pub backoff_pressure: f64,
    /// Throttles at the limit per second (cgroup v2 memory.events `high`) that stop a shrink.
    pub backoff_throttled_per_s: f64,
}

impl Default for LimitRails {
    fn default() -> Self {
        LimitRails {
            shrink_step: 0.05,
            min_step: Pages::from_mib(1),
            floor_margin: Pages::from_mib(32),
            backoff_faults_per_s: 2000.0,
            backoff_pressure: 10.0,
            backoff_throttled_per_s: BACKOFF_THROTTLED_PER_S,
        }
    }
}

/// Faults per second at which a tenant with room for its swap gets it read back (rule 5), and
/// at which the sampling estimator's wake-up starts counting: 256, a MiB a second of 4 KiB
/// pages. A tenant touching an idle page now and then stays below it; a server taking load
/// again faults thousands a second (Redis serving random GETs from zram: about 2,000 a second
/// under TCG in the Senpai benchmark, about 10,000 on the test host in `linux/wake.rs`).
pub const SWAP_IN_FAULTS_PER_S: f64 = 256.0;

/// Less swapped memory than this (256 pages, 1 MiB) is not worth reading back ahead.
pub const SWAP_IN_LEAST: Pages = Pages(256);

/// Throttles at its limit per second that stop a tenant's shrink by default. The kernel counts
/// one (memory.events `high`) each time a task of a cgroup over memory.high returns to user
/// space after charging more (checked once per charge batch of 64 pages), and delays it: a
/// tenant charging some 25 MiB/s over its limit counts about 100 a second (reckoned from the
/// kernel's code, not measured), one that only touches a page over it now and then a few.
pub const BACKOFF_THROTTLED_PER_S: f64 = 100.0;

/// One tenant's situation, as the rails need it.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitInput {
    pub target: Pages,
    pub min: Pages,
    /// Memory the tenant holds now.
    pub allocated: Pages,
    /// The limit in force.
    pub limit: Pages,
    /// No limit is in force (`limit` stands for machine memory).
    pub unlimited: bool,
    pub unreclaimable: Pages,
    /// Faults per second over the last tick, where known.
    pub faults_per_s: Option<f64>,
    /// The tenant's own pressure, where known.
    pub pressure: Option<f64>,
    /// Times per second the world throttled it at its limit over the last tick, where known.
    pub throttled_per_s: Option<f64>,
    /// The world lately could not reclaim it down to its limit.
    pub reclaim_refused: bool,
    /// Memory of the tenant in its own swap, where known and the world can read it back
    /// ahead of its faults (`LimitLever::reads_back`).
    pub swapped: Option<Pages>,
}

/// Chooses this tick's limit (see the module docs).
pub fn plan_limit(input: &LimitInput, rails: &LimitRails) -> LimitNote {
    let floor = input.min.max(input.unreclaimable + rails.floor_margin);
    let wanted = input.target.max(floor);
    let from = input.limit;
    // At the floor: the target was below it, or is it because the allocation knew the floor.
    let rail_at_wanted = if wanted > input.target || (wanted == floor && floor > input.min) {
        LimitRail::Floor
    } else {
        LimitRail::Target
    };
    let note = |to, rail| LimitNote {
        from,
        from_max: input.unlimited,
        to,
        floor,
        rail,
        smallest_lowering: Pages::ZERO,
        swap_in: Pages::ZERO,
    };
    if wanted >= from {
        let swapped = input.swapped.unwrap_or(Pages::ZERO);
        let waking = input
            .faults_per_s
            .is_some_and(|f| f >= SWAP_IN_FAULTS_PER_S);
        let room = wanted >= input.allocated + swapped;
        return LimitNote {
            swap_in: if waking && room && swapped >= SWAP_IN_LEAST {
                swapped
            } else {
                Pages::ZERO
            },
            ..note(wanted, rail_at_wanted)
        };
    }
    if let Some(faults_per_s) = input
        .faults_per_s
        .filter(|&f| f >= rails.backoff_faults_per_s)
    {
        return note(from, LimitRail::BackoffFaults { faults_per_s });
    }
    if let Some(per_s) = input
        .throttled_per_s
        .filter(|&t| t >= rails.backoff_throttled_per_s)
    {
        return note(from, LimitRail::BackoffThrottled { per_s });
    }
    if let Some(pressure) = input.pressure.filter(|&p| p >= rails.backoff_pressure) {
        return note(from, LimitRail::BackoffPressure { pressure });
    }
    if input.reclaim_refused {
        return note(from, LimitRail::BackoffRefused);
    }
    let step = input.allocated.scale(rails.shrink_step).max(rails.min_step);
    let stepped = from.min(input.allocated).saturating_sub(step);
    if stepped > wanted {
        note(stepped, LimitRail::Step)
    } else {
        note(wanted, rail_at_wanted)
    }
}

/// Cuts raises short so the limits in `notes` sum to at most `budget` (see the module docs).
///
/// Tenants whose limit falls or holds count at their new limit; a raising tenant counts at
/// what it is sure to get, its old limit or its floor if higher. Whatever budget is left is
/// shared among the raises in proportion to what each asked for; a cut raise gets
/// [`LimitRail::Budget`].
pub fn fit_to_budget(notes: &mut [LimitNote], budget: Pages) {
    let base = |n: &LimitNote| n.from.max(n.floor).min(n.to);
    let mut committed: u128 = 0;
    let mut asked: u128 = 0;
    for n in notes.iter() {
        committed += u128::from(base(n).0);
        asked += u128::from(n.to.0 - base(n).0);
    }
    let room = u128::from(budget.0).saturating_sub(committed);
    if asked <= room {
        return;
    }
    for n in notes.iter_mut() {
        let b = base(n);
        let want = u128::from(n.to.0 - b.0);
        if want == 0 {
            continue;
        }
        let granted = (want * room / asked) as u64;
        let wanted = n.to;
        n.to = Pages(b.0 + granted);
        n.rail = LimitRail::Budget { wanted };
        // The room for its swap was in the raise cut short.
        n.swap_in = Pages::ZERO;
    }
}

/// The limit a tenant gets this tick: the rails' view of it (faults per second from this
/// tick's counters, the larger of refaults + swap-ins and major faults, and the tenant's own
/// pressure) and [`plan_limit`]. The host's pressure is not used: on cgroup v1 it is the only
/// PSI there is, and a busy tenant's own thrashing raises it, which would stop the very
/// shrinks of idle tenants that would end the thrashing.
pub fn plan(
    t: &TenantObservation,
    lever: &LimitLever,
    min: Pages,
    target: Pages,
    elapsed: Option<Duration>,
    rails: &LimitRails,
) -> LimitNote {
    let refaults = match (t.refaults, t.swap_ins) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
    let faults = match (refaults, lever.major_faults) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let per_s = |n: Option<u64>| n.zip(elapsed).map(|(n, dt)| n as f64 / dt.as_secs_f64());
    let note = plan_limit(
        &LimitInput {
            target,
            min,
            allocated: t.allocated,
            limit: lever.limit,
            unlimited: lever.unlimited,
            unreclaimable: lever.unreclaimable,
            faults_per_s: per_s(faults),
            pressure: lever.pressure,
            throttled_per_s: per_s(lever.throttled),
            reclaim_refused: lever.reclaim_refused,
            swapped: t.swapped.filter(|_| lever.reads_back),
        },
        rails,
    );
    LimitNote {
        smallest_lowering: lever.smallest_lowering,
        ..note
    }
}

/// What allocation may give a limit tenant, as `(min, ceiling)`. The min is at least the
/// floor (`max(min, unreclaimable + floor_margin)`, at most `max`), where what the tenant's
/// application can give back from its own pool (its pool above the application's min, when
/// it has a live agent) does not count as unreclaimable: the application balloon reclaims it,
/// and the limit follows only what it really released. While memory is not
/// `wanted` the tenant keeps what it holds and may grow to its max (a cap at an estimate is
/// how probing takes memory, and there is no probing then); once it is wanted, the ceiling is
/// `cap` (the estimate, where the spec caps at it).
pub fn bounds(
    t: &TenantObservation,
    lever: &LimitLever,
    min: Pages,
    max: Pages,
    cap: Pages,
    wanted: bool,
    rails: &LimitRails,
) -> (Pages, Pages) {
    let giveable = t
        .levers
        .app_balloon
        .as_ref()
        .map_or(Pages::ZERO, |app| app.pool.saturating_sub(app.min));
    let unreclaimable = lever.unreclaimable.saturating_sub(giveable);
    let floor = min.max(unreclaimable + rails.floor_margin).min(max);
    if wanted {
        (floor, cap.max(floor))
    } else {
        (keep(t.allocated, lever.limit).min(max).max(floor), max)
    }
}

/// What a limit tenant keeps while its memory is not wanted: what it holds, and its limit too
/// when that is within a small headroom above (2%, at least 4 MiB). Usage moves a little under
/// a limit from tick to tick; following it down would ratchet the limit lower and lower.
fn keep(allocated: Pages, limit: Pages) -> Pages {
    let headroom = allocated.scale(0.02).max(Pages::from_mib(4));
    allocated.max(limit.min(allocated + headroom))
}

/// Holds back, in order, each lowering smaller than its lever's `smallest_lowering` while the
/// budget's room (what the limits of `notes` leave of it) holds it, and takes it from the
/// room: the limits in force then still add up to no more than the budget. Such a step (a TWS
/// probe's 1% on a small tenant, say) costs the world a write and buys almost nothing. Raises
/// are never held. A world that writes every change (zero everywhere) costs one pass.
pub fn hold_small_lowerings(notes: &mut [LimitNote], budget: Pages) {
    if notes.iter().all(|n| n.smallest_lowering.is_zero()) {
        return;
    }
    let planned = notes.iter().fold(Pages::ZERO, |sum, n| sum + n.to);
    let mut room = budget.saturating_sub(planned);
    for n in notes.iter_mut() {
        let lowering = n.from.saturating_sub(n.to);
        if n.to < n.from && lowering < n.smallest_lowering && lowering <= room {
            room -= lowering;
            n.rail = LimitRail::Small { wanted: n.to };
            n.to = n.from;
        }
    }
}

/// Cuts this tick's limit raises short so the limits of `actions` sum to at most `budget`
/// ([`fit_to_budget`] over the actions that set a limit), holds back lowerings too small for
/// their world ([`hold_small_lowerings`]), and updates each changed action's note (its move)
/// and mechanisms.
pub fn fit_actions(actions: &mut [TenantAction], budget: Pages) {
    let mut notes: Vec<_> = actions
        .iter()
        .filter_map(|a| a.reason.mechanism.limit)
        .collect();
    if notes.is_empty() {
        return;
    }
    fit_to_budget(&mut notes, budget);
    hold_small_lowerings(&mut notes, budget);
    let mut notes = notes.into_iter();
    for a in actions.iter_mut() {
        let Some(old) = a.reason.mechanism.limit else {
            continue;
        };
        let Some(note) = notes.next() else {
            break;
        };
        if note != old {
            a.reason.mechanism.limit = Some(note);
            a.mechanisms.remove(Mechanism::Limit);
            if note.to != note.from {
                a.mechanisms.push(Mechanism::Limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mib(m: u64) -> Pages {
        Pages::from_mib(m)
    }

    fn note(from: u64, to: u64, floor: u64) -> LimitNote {
        LimitNote {
            from: mib(from),
            from_max: false,
            to: mib(to),
            floor: mib(floor),
            rail: LimitRail::Target,
            smallest_lowering: Pages::ZERO,
            swap_in: Pages::ZERO,
        }
    }

    #[test]
    fn raises_wait_for_what_the_others_give_back() {
        // Budget 600: the idle tenant steps 300 -> 285, so the busy one may go 300 -> 315 of
        // the 450 it wants.
        let mut notes = [note(300, 450, 100), note(300, 285, 50)];
        fit_to_budget(&mut notes, mib(600));
        assert_eq!(notes[0].to, mib(315));
        assert_eq!(notes[0].rail, LimitRail::Budget { wanted: mib(450) });
        assert_eq!(notes[1].to, mib(285));
        assert_eq!(notes[1].rail, LimitRail::Target);
        let sum: u64 = notes.iter().map(|n| n.to.0).sum();
        assert!(sum <= mib(600).0);
    }

    #[test]
    fn raises_that_fit_are_untouched_and_several_raises_share_the_room() {
        let mut fits = [note(200, 250, 0), note(300, 300, 0)];
        fit_to_budget(&mut fits, mib(600));
        assert_eq!(fits[0].to, mib(250));
        assert_eq!(fits[0].rail, LimitRail::Target);

        let mut shared = [note(100, 300, 0), note(100, 200, 0), note(300, 300, 0)];
        fit_to_budget(&mut shared, mib(600));
        // 100 MiB of room for 300 MiB asked: two thirds to the first, one third to the second.
        assert_eq!(
            shared[0].to.0 - mib(100).0,
            mib(200).0 * mib(100).0 / mib(300).0
        );
        let sum: u64 = shared.iter().map(|n| n.to.0).sum();
        assert!(sum <= mib(600).0, "{sum}");
    }

    #[test]
    fn a_lowering_under_its_worlds_smallest_waits_while_the_budget_has_room() {
        let small = |from: Pages, to: Pages| LimitNote {
            from,
            to,
            smallest_lowering: mib(1),
            ..note(0, 0, 0)
        };
        let (from, half) = (mib(280), Pages(128));
        // Half a MiB lower, with room in the budget: held, and the rail says why.
        let mut notes = [small(from, from - half)];
        hold_small_lowerings(&mut notes, mib(1024));
        assert_eq!(notes[0].to, from);
        assert_eq!(
            notes[0].rail,
            LimitRail::Small {
                wanted: from - half
            }
        );
        // The budget taken up by the limits planned: written.
        let mut notes = [small(from, from - half)];
        hold_small_lowerings(&mut notes, from - half);
        assert_eq!(notes[0].to, from - half);
        // A MiB or more, or a raise however small: written.
        let mut notes = [small(from, mib(279)), small(from, from + Pages(1))];
        hold_small_lowerings(&mut notes, mib(1024));
        assert_eq!(notes[0].to, mib(279));
        assert_eq!(notes[1].to, from + Pages(1));
        // Room for one of two: the first in order is held, the second written.
        let mut notes = [small(from, from - half), small(from, from - half)];
        hold_small_lowerings(&mut notes, from + from - half);
        assert_eq!(notes[0].to, from);
        assert_eq!(notes[1].to, from - half);
        // A world that writes every change: nothing held.
        let mut notes = [note(280, 279, 0)];
        notes[0].to = from - half;
        hold_small_lowerings(&mut notes, mib(1024));
        assert_eq!(notes[0].to, from - half);
    }

    #[test]
    fn a_raise_to_the_floor_is_granted_even_over_the_budget() {
        let mut notes = [note(100, 200, 180), note(500, 500, 0)];
        fit_to_budget(&mut notes, mib(600));
        assert_eq!(notes[0].to, mib(180), "the floor part of the raise stays");
        assert_eq!(notes[0].rail, LimitRail::Budget { wanted: mib(200) });
    }

    /// A tenant holding 400 MiB under a 400 MiB limit, min 64 MiB, 100 MiB unreclaimable,
    /// quiet and without pressure.
    fn base(target_mib: u64) -> LimitInput {
        LimitInput {
            target: mib(target_mib),
            min: mib(64),
            allocated: mib(400),
            limit: mib(400),
            unlimited: false,
            unreclaimable: mib(100),
            faults_per_s: Some(0.0),
            pressure: None,
            throttled_per_s: Some(0.0),
            reclaim_refused: false,
            swapped: Some(Pages::ZERO),
        }
    }

    #[test]
    fn a_waking_tenant_with_room_for_its_swap_gets_it_read_back_ahead() {
        let rails = LimitRails::default();
        // Holding 100 MiB with 73 MiB in swap, faulting 3,000 a second, raised to 180 MiB.
        let waking = |target: u64, faults: f64, swapped: u64| {
            plan_limit(
                &LimitInput {
                    allocated: mib(100),
                    limit: mib(100),
                    faults_per_s: Some(faults),
                    swapped: Some(mib(swapped)),
                    ..base(target)
                },
                &rails,
            )
        };
        let note = waking(180, 3000.0, 73);
        assert_eq!((note.to, note.swap_in), (mib(180), mib(73)));
        assert!(
            note.to_string()
                .ends_with(", reading 73.0 MiB back from swap ahead of its faults"),
            "{note}"
        );
        for (target, faults, swapped, why) in [
            (172, 3000.0, 73, "no room for all of it"),
            (180, 100.0, 73, "faulting too little"),
            (180, 3000.0, 0, "nothing in swap"),
            (90, 3000.0, 73, "a lowering reads nothing"),
        ] {
            assert_eq!(
                waking(target, faults, swapped).swap_in,
                Pages::ZERO,
                "{why}"
            );
        }
        let unknown = plan_limit(
            &LimitInput {
                swapped: None,
                faults_per_s: Some(3000.0),
                ..base(900)
            },
            &rails,
        );
        assert_eq!(
            unknown.swap_in,
            Pages::ZERO,
            "swap unknown: nothing read back"
        );
        // A world that cannot read back (the simulator) is never asked to.
        let mut t = TenantObservation::new(memtide_model::TenantId(0), mib(100));
        t.swapped = Some(mib(73));
        t.refaults = Some(3000);
        let mut lever = LimitLever {
            limit: mib(100),
            ..LimitLever::default()
        };
        let dt = Some(Duration::from_secs(1));
        let planned = |lever: &LimitLever| plan(&t, lever, mib(64), mib(180), dt, &rails);
        assert_eq!(planned(&lever).swap_in, Pages::ZERO);
        lever.reads_back = true;
        assert_eq!(planned(&lever).swap_in, mib(73));
        // The raise cut short by the budget no longer has room for the swap.
        let mut notes = [note, waking(100, 0.0, 0)];
        fit_to_budget(&mut notes, mib(150));
        assert!(notes[0].to < mib(173));
        assert_eq!(notes[0].swap_in, Pages::ZERO);
    }

    struct Case {
        name: &'static str,
        input: LimitInput,
        to: Pages,
        rail: LimitRail,
    }

    #[test]
    fn each_rail_sets_the_limit_it_names() {
        let rails = LimitRails::default();
        let cases = vec![
            Case {
                name: "growing is immediate",
                input: base(900),
                to: mib(900),
                rail: LimitRail::Target,
            },
            Case {
                name: "a shrink is one step of 5% of the allocation",
                input: base(200),
                to: mib(380),
                rail: LimitRail::Step,
            },
            Case {
                name: "a small shrink lands on the target",
                input: base(390),
                to: mib(390),
                rail: LimitRail::Target,
            },
            Case {
                name: "slack above the usage goes at once, then one step",
                input: LimitInput {
                    limit: mib(1024),
                    ..base(200)
                },
                to: mib(380),
                rail: LimitRail::Step,
            },
            Case {
                name: "a loose limit above the target drops straight to it",
                input: LimitInput {
                    limit: mib(1024),
                    ..base(600)
                },
                to: mib(600),
                rail: LimitRail::Target,
            },
            Case {
                name: "never below unreclaimable + margin",
                input: LimitInput {
                    limit: mib(135),
                    allocated: mib(135),
                    ..base(50)
                },
                to: mib(132),
                rail: LimitRail::Floor,
            },
            Case {
                name: "a target the allocation put at the floor is the floor's doing",
                input: LimitInput {
                    limit: mib(135),
                    allocated: mib(135),
                    ..base(132)
                },
                to: mib(132),
                rail: LimitRail::Floor,
            },
            Case {
                name: "a limit below the floor is raised to it",
                input: LimitInput {
                    limit: mib(90),
                    allocated: mib(90),
                    ..base(50)
                },
                to: mib(132),
                rail: LimitRail::Floor,
            },
            Case {
                name: "never below min",
                input: LimitInput {
                    min: mib(300),
                    ..base(100)
                },
                to: mib(380),
                rail: LimitRail::Step,
            },
            Case {
                name: "faults stop a shrink",
                input: LimitInput {
                    faults_per_s: Some(2500.0),
                    ..base(200)
                },
                to: mib(400),
                rail: LimitRail::BackoffFaults {
                    faults_per_s: 2500.0,
                },
            },
            Case {
                name: "pressure stops a shrink",
                input: LimitInput {
                    pressure: Some(12.5),
                    ..base(200)
                },
                to: mib(400),
                rail: LimitRail::BackoffPressure { pressure: 12.5 },
            },
            Case {
                name: "throttling at the limit stops a shrink",
                input: LimitInput {
                    throttled_per_s: Some(150.0),
                    ..base(200)
                },
                to: mib(400),
                rail: LimitRail::BackoffThrottled { per_s: 150.0 },
            },
            Case {
                name: "throttling now and then does not",
                input: LimitInput {
                    throttled_per_s: Some(99.0),
                    ..base(200)
                },
                to: mib(380),
                rail: LimitRail::Step,
            },
            Case {
                name: "a reclaim the world could not do stops a shrink",
                input: LimitInput {
                    reclaim_refused: true,
                    ..base(200)
                },
                to: mib(400),
                rail: LimitRail::BackoffRefused,
            },
            Case {
                name: "a refused reclaim does not stop a rise",
                input: LimitInput {
                    reclaim_refused: true,
                    throttled_per_s: Some(5000.0),
                    ..base(500)
                },
                to: mib(500),
                rail: LimitRail::Target,
            },
            Case {
                name: "faults do not stop a rise",
                input: LimitInput {
                    faults_per_s: Some(9000.0),
                    ..base(500)
                },
                to: mib(500),
                rail: LimitRail::Target,
            },
            Case {
                name: "unknown faults and pressure do not back off",
                input: LimitInput {
                    faults_per_s: None,
                    pressure: None,
                    throttled_per_s: None,
                    ..base(200)
                },
                to: mib(380),
                rail: LimitRail::Step,
            },
        ];
        for case in cases {
            let note = plan_limit(&case.input, &rails);
            assert_eq!(note.to, case.to, "{}", case.name);
            assert_eq!(note.rail, case.rail, "{}", case.name);
            assert_eq!(note.from, case.input.limit, "{}", case.name);
        }
    }

    #[test]
    fn a_lever_s_throttles_are_rated_per_second_and_its_refused_reclaim_holds_a_shrink() {
        let rails = LimitRails::default();
        let mut t = TenantObservation::new(memtide_model::TenantId(0), mib(400));
        (t.refaults, t.swap_ins) = (Some(0), Some(0));
        let lever = |throttled, reclaim_refused| LimitLever {
            limit: mib(400),
            unreclaimable: mib(100),
            throttled,
            reclaim_refused,
            ..LimitLever::default()
        };
        let two_s = Some(Duration::from_secs(2));
        let rail = |l: &LimitLever| plan(&t, l, mib(64), mib(200), two_s, &rails).rail;
        assert_eq!(
            rail(&lever(Some(300), false)),
            LimitRail::BackoffThrottled { per_s: 150.0 }
        );
        assert_eq!(rail(&lever(Some(150), false)), LimitRail::Step, "75/s");
        assert_eq!(rail(&lever(None, false)), LimitRail::Step, "not counted");
        assert_eq!(rail(&lever(None, true)), LimitRail::BackoffRefused);
        // Throttled and under pressure: the throttling, this tick's count, names the hold.
        let pressed = LimitLever {
            pressure: Some(30.0),
            ..lever(Some(300), false)
        };
        assert_eq!(rail(&pressed), LimitRail::BackoffThrottled { per_s: 150.0 });
        let pressed_only = LimitLever {
            pressure: Some(30.0),
            ..lever(None, false)
        };
        assert_eq!(
            rail(&pressed_only),
            LimitRail::BackoffPressure { pressure: 30.0 }
        );
    }

    #[test]
    fn repeated_shrinks_converge_to_the_target_in_bounded_steps() {
        let rails = LimitRails::default();
        let mut input = base(200);
        let mut ticks = 0;
        while input.limit > input.target {
            let note = plan_limit(&input, &rails);
            let given_back = input.allocated.saturating_sub(note.to);
            assert!(given_back <= input.allocated.scale(rails.shrink_step).max(rails.min_step));
            input.limit = note.to;
            input.allocated = input.allocated.min(note.to);
            ticks += 1;
            assert!(ticks < 100, "no convergence");
        }
        assert_eq!(input.limit, mib(200));
    }

    #[test]
    fn the_floor_never_yields_to_any_target() {
        let rails = LimitRails::default();
        for target in [0, 1, 50, 131] {
            for limit in [90, 132, 200, 10_000] {
                let input = LimitInput {
                    limit: mib(limit),
                    allocated: mib(limit.min(400)),
                    ..base(target)
                };
                let note = plan_limit(&input, &rails);
                assert!(note.to >= mib(132), "target {target} limit {limit}: {note}");
            }
        }
    }
}
