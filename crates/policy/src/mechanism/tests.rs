//! The chooser's tests: each state's mechanisms for a VM (balloon and host swap), the order of the levers, and a limit tenant.

use super::*;
use memtide_model::{
    AppAnswer, AppBalloonLever, AppMove, AppStatus, AppStep, BalloonDriverInfo, BalloonLever,
    DiskIo, DiskNote, HostSwapLever, LimitLever, LimitRail, Moves, SharingLever, Takeover,
    TenantId,
};
use Mechanism::{AppBalloon, Balloon, HostSwap, Sharing};
use ReclamationState::{Hard, High, Low, Soft};

fn mib(m: u64) -> Pages {
    Pages::from_mib(m)
}

/// A 256 MiB VM holding `allocated` with a `target`, a `balloon` of the given size and a
/// driver limited to `driver` (none if `None`), a `host_swap` budget per tick, and whether
/// the driver is stalled.
#[derive(Clone)]
struct Vm {
    state: ReclamationState,
    target: u64,
    allocated: u64,
    balloon: u64,
    driver: Option<u64>,
    stalled: bool,
    budget: u64,
    /// The room host swap reports (`None`: unbounded).
    room: Option<u64>,
}

/// Holding 256 MiB with a 180 MiB target, a 200 MiB balloon limit, an empty balloon and a
/// 64 MiB host swap budget.
fn base(state: ReclamationState) -> Vm {
    Vm {
        state,
        target: 180,
        allocated: 256,
        balloon: 0,
        driver: Some(200),
        stalled: false,
        budget: 64,
        room: None,
    }
}

fn observed(vm: &Vm) -> TenantObservation {
    TenantObservation {
        levers: Levers {
            balloon: Some(BalloonLever {
                memory: mib(256),
                size: mib(vm.balloon),
                driver: vm.driver.map(|limit| BalloonDriverInfo {
                    rate_per_s: mib(16),
                    limit: mib(limit),
                }),
                free_unbacked: false,
            }),
            host_swap: Some(HostSwapLever {
                swapped: Pages::ZERO,
                swap_ins: Some(0),
                room: vm.room.map(mib),
            }),
            ..Levers::default()
        },
        ..TenantObservation::new(TenantId(0), mib(vm.allocated))
    }
}

use memtide_model::Levers;

/// What `plan` writes for one tenant.
#[derive(Debug)]
struct Plan {
    mechanisms: Mechanisms,
    note: MechanismNote,
}

fn run(t: &TenantObservation, state: ReclamationState, target: u64, budget: u64) -> Plan {
    run_with(t, state, target, budget, &mut PlanMemory::default(), 3)
}

fn run_with(
    t: &TenantObservation,
    state: ReclamationState,
    target: u64,
    budget: u64,
    memory: &mut PlanMemory,
    stall_ticks: u32,
) -> Plan {
    plan_disk(t, state, target, budget, memory, stall_ticks, &None).0
}

/// [`run_with`] for a tenant with `disk` in its spec; also the disk note.
fn plan_disk(
    t: &TenantObservation,
    state: ReclamationState,
    target: u64,
    budget: u64,
    memory: &mut PlanMemory,
    stall_ticks: u32,
    disk: &Option<DiskSpec>,
) -> (Plan, Option<DiskNote>) {
    let rails = LimitRails::default();
    // Filled with another tenant's figures first: `plan` must keep none of them.
    let mut action = TenantAction::none(TenantId(9), ReclamationState::Low);
    action.mechanisms = [Mechanism::Limit, Mechanism::Sharing].into_iter().collect();
    action.reason.disk = Some(DiskNote {
        weight: 7,
        was: Some(7),
        base: 7,
        boost: 1,
        latency_us: None,
        target_us: None,
    });
    action.reason.mechanism = MechanismNote::new(ReclamationState::Low, mib(999), mib(1))
        .with_moves(Moves {
            disk_weight: None,
            balloon: Some(mib(7)),
            app_balloon: Some(AppMove::Target {
                pool: mib(7),
                deadline: Duration::from_secs(7),
            }),
            share: mib(7),
            host_swap_out: mib(7),
            blocked: true,
            limit: Some(mib(7)),
            // The note is made anew (`MechanismNote::new`): a lever's planner needs no line here.
            ..Moves::default()
        });
    plan(
        &PlanInput {
            state,
            target: mib(target),
            min: mib(64),
            max: mib(256),
            tenant: t,
            elapsed: Some(Duration::from_secs(1)),
            disk,
        },
        &PlanSettings {
            host_swap_per_tick: mib(budget),
            balloon_stall_ticks: stall_ticks,
            rails: &rails,
        },
        memory,
        &mut action,
    );
    let plan = Plan {
        mechanisms: action.mechanisms,
        note: action.reason.mechanism,
    };
    (plan, action.reason.disk)
}

fn plan_vm(vm: &Vm) -> Plan {
    let t = observed(vm);
    let mut memory = PlanMemory::default();
    if vm.stalled {
        // Asked to grow last tick, and did not move.
        memory.balloon.observe(mib(vm.balloon), 1);
        memory.balloon.asked(Some(mib(256)));
    }
    run_with(&t, vm.state, vm.target, vm.budget, &mut memory, 1)
}

struct Case {
    name: &'static str,
    vm: Vm,
    balloon_target: Option<Pages>,
    host_swap_out: Pages,
    blocked: bool,
    mechanisms: Vec<Mechanism>,
}

fn check(cases: Vec<Case>) {
    for case in cases {
        let plan = plan_vm(&case.vm);
        assert_eq!(
            plan.note.moves().balloon,
            case.balloon_target,
            "{}",
            case.name
        );
        assert_eq!(
            plan.note.moves().host_swap_out,
            case.host_swap_out,
            "{}",
            case.name
        );
        assert_eq!(plan.note.moves().blocked, case.blocked, "{}", case.name);
        assert_eq!(plan.mechanisms, case.mechanisms, "{}", case.name);
        assert!(!plan.note.to_string().is_empty(), "{}", case.name);
        assert!(!plan.note.to_string().contains('\n'), "{}", case.name);
    }
}

#[test]
fn each_state_chooses_its_mechanisms() {
    check(vec![
        Case {
            name: "high: balloon only",
            vm: base(High),
            balloon_target: Some(mib(76)),
            host_swap_out: Pages::ZERO,
            blocked: false,
            mechanisms: vec![Balloon],
        },
        Case {
            name: "soft: balloon can take it all",
            vm: base(Soft),
            balloon_target: Some(mib(76)),
            host_swap_out: Pages::ZERO,
            blocked: false,
            mechanisms: vec![Balloon],
        },
        Case {
            name: "hard: page the excess, balloon too",
            vm: base(Hard),
            balloon_target: Some(mib(76)),
            host_swap_out: mib(64),
            blocked: false,
            mechanisms: vec![Balloon, HostSwap],
        },
        Case {
            name: "low: page and block",
            vm: Vm {
                budget: 100,
                ..base(Low)
            },
            balloon_target: Some(mib(76)),
            host_swap_out: mib(76),
            blocked: true,
            mechanisms: vec![Balloon, HostSwap],
        },
    ]);
}

#[test]
fn low_blocks_only_while_host_swap_has_room_to_page() {
    check(vec![
        Case {
            name: "low, room for the whole excess: page and block",
            vm: Vm {
                room: Some(100),
                ..base(Low)
            },
            balloon_target: Some(mib(76)),
            host_swap_out: mib(64),
            blocked: true,
            mechanisms: vec![Balloon, HostSwap],
        },
        Case {
            name: "low, 10 MiB of room: page it, the guest runs for its balloon",
            vm: Vm {
                room: Some(10),
                ..base(Low)
            },
            balloon_target: Some(mib(76)),
            host_swap_out: mib(10),
            blocked: false,
            mechanisms: vec![Balloon, HostSwap],
        },
        Case {
            name: "low, no room: the balloon goes on, the guest runs",
            vm: Vm {
                room: Some(0),
                ..base(Low)
            },
            balloon_target: Some(mib(76)),
            host_swap_out: Pages::ZERO,
            blocked: false,
            mechanisms: vec![Balloon],
        },
    ]);
    let no_room = plan_vm(&Vm {
        room: Some(0),
        ..base(Low)
    });
    assert!(
        no_room
            .note
            .to_string()
            .contains("no room in host swap, 76.0 MiB left to page"),
        "{}",
        no_room.note
    );
}

#[test]
fn soft_pages_only_what_the_balloon_cannot() {
    check(vec![
        Case {
            name: "no driver: host swap the excess",
            vm: Vm {
                driver: None,
                budget: 100,
                ..base(Soft)
            },
            balloon_target: None,
            host_swap_out: mib(76),
            blocked: false,
            mechanisms: vec![HostSwap],
        },
        Case {
            name: "stalled driver: host swap the excess, keep asking the balloon",
            vm: Vm {
                stalled: true,
                budget: 100,
                ..base(Soft)
            },
            balloon_target: Some(mib(76)),
            host_swap_out: mib(76),
            blocked: false,
            mechanisms: vec![Balloon, HostSwap],
        },
        Case {
            name: "guest limit reached: page what lies beyond it",
            vm: Vm {
                driver: Some(60),
                balloon: 50,
                budget: 100,
                ..base(Soft)
            },
            balloon_target: Some(mib(60)),
            host_swap_out: mib(66),
            blocked: false,
            mechanisms: vec![Balloon, HostSwap],
        },
        Case {
            name: "budget limits host swap",
            vm: Vm {
                driver: None,
                budget: 16,
                ..base(Soft)
            },
            balloon_target: None,
            host_swap_out: mib(16),
            blocked: false,
            mechanisms: vec![HostSwap],
        },
        Case {
            name: "no budget: nothing paged",
            vm: Vm {
                driver: None,
                budget: 0,
                ..base(Soft)
            },
            balloon_target: None,
            host_swap_out: Pages::ZERO,
            blocked: false,
            mechanisms: vec![],
        },
    ]);
}

#[test]
fn under_target_tenant_deflates_and_nothing_is_swapped() {
    for state in ReclamationState::ALL {
        let plan = plan_vm(&Vm {
            target: 200,
            allocated: 180,
            balloon: 76,
            ..base(state)
        });
        assert_eq!(plan.note.moves().balloon, Some(mib(56)), "{state}");
        assert_eq!(plan.note.moves().host_swap_out, Pages::ZERO, "{state}");
        assert!(!plan.note.moves().blocked, "{state}");
        assert_eq!(plan.mechanisms, vec![Balloon], "{state}");
    }
}

#[test]
fn tenant_at_target_with_settled_balloon_needs_nothing() {
    let plan = plan_vm(&Vm {
        allocated: 180,
        balloon: 76,
        ..base(High)
    });
    assert_eq!(plan.note.moves().balloon, Some(mib(76)));
    assert!(plan.mechanisms.is_empty());
    assert_eq!(plan.note.to_string(), "high: at target");
}

#[test]
fn reason_reads_as_one_line() {
    let p = plan_vm(&Vm {
        driver: None,
        budget: 16,
        ..base(Soft)
    });
    assert_eq!(
        p.note.to_string(),
        "soft: allocated 256.0 MiB > target 180.0 MiB; no balloon driver; \
         host swap 16.0 MiB (of 76.0 MiB, limited by host swap budget)"
    );
    let p = plan_vm(&base(Soft));
    assert_eq!(
        p.note.to_string(),
        "soft: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB"
    );
    let p = plan_vm(&Vm {
        budget: 100,
        ..base(Low)
    });
    assert_eq!(
        p.note.to_string(),
        "low: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB; \
         host swap 76.0 MiB; blocked until at target"
    );
}

#[test]
fn a_vm_whose_max_is_set_below_its_memory_is_ballooned_to_it() {
    // The guest has 256 MiB; policy's max for it was lowered to 100 (a limit on the VM), so
    // its target is 100 and the balloon takes the other 156.
    let p = plan_vm(&Vm {
        target: 100,
        driver: Some(248),
        ..base(Soft)
    });
    assert_eq!(p.note.moves().balloon, Some(mib(156)));
}

#[test]
fn target_above_max_and_zero_limits_do_not_panic() {
    let plan = plan_vm(&Vm {
        target: 512,
        driver: Some(0),
        balloon: 10,
        ..base(Hard)
    });
    assert_eq!(plan.note.moves().balloon, Some(Pages::ZERO));
    assert_eq!(plan.note.moves().host_swap_out, Pages::ZERO);
}

#[test]
fn a_balloon_that_stops_growing_stalls_and_host_swap_takes_over() {
    // No budget limit, soft state: while the balloon grows, nothing is paged; three ticks
    // without progress and the whole excess is paged.
    let t = observed(&base(Soft));
    let mut memory = PlanMemory::default();
    for tick in 0..4 {
        let p = run_with(&t, Soft, 180, 100, &mut memory, 3);
        let stalled = tick >= 3;
        assert_eq!(p.note.balloon.unwrap().stalled, stalled, "tick {tick}");
        let paged = if stalled { mib(76) } else { Pages::ZERO };
        assert_eq!(p.note.moves().host_swap_out, paged, "tick {tick}");
    }
}

/// An agent whose pool of `pool` MiB (16 to 200, moving by 1 MiB) is all data, in a tenant
/// that uses `outside` MiB besides; its statistics are fresh and it was sent no target.
fn agent(pool: u64, outside: u64) -> AppBalloonLever {
    AppBalloonLever {
        session: 1,
        pool: mib(pool),
        pool_used: Some(mib(pool)),
        min: mib(16),
        max: mib(200),
        granule: mib(1),
        used: mib(pool + outside),
        hits: Some(0),
        misses: Some(0),
        curve: None,
        durability: None,
        answer: None,
        silent_for: Duration::ZERO,
        dead_after: Duration::from_secs(5),
    }
}

/// A tenant with every lever: 10 MiB shareable, an agent whose 80 MiB pool can give 40 MiB
/// toward the target (it uses 140 MiB outside the pool, 180 - 140 = 40 wanted, its min), a
/// guest balloon limited to 200 MiB, a limit of 256 MiB and host
/// swap.
fn everything() -> TenantObservation {
    let mut t = observed(&base(Soft));
    t.levers.sharing = Some(SharingLever {
        shared: Pages::ZERO,
        shareable: mib(10),
        zero: None,
        profit: None,
    });
    t.levers.app_balloon = Some(AppBalloonLever {
        min: mib(40),
        ..agent(80, 140)
    });
    t.levers.limit = Some(LimitLever {
        limit: mib(256),
        unlimited: false,
        unreclaimable: Pages::ZERO,
        major_faults: Some(0),
        ..LimitLever::default()
    });
    t.swap_ins = Some(0);
    t.refaults = Some(0);
    t
}

#[test]
fn sharing_goes_first_then_the_application_then_the_guest_balloon() {
    // 76 MiB over target: sharing takes 10, the application is asked for 40 (its pool from
    // 80 to its min of 40), the balloon the other 26 at once.
    let t = everything();
    let p = run(&t, Soft, 180, 100);
    assert_eq!(p.note.moves().share, mib(10));
    assert_eq!(
        p.note.moves().app_balloon,
        Some(AppMove::Target {
            pool: mib(40),
            deadline: super::app_balloon::deadline(mib(40), None),
        })
    );
    assert_eq!(p.note.app_balloon.unwrap().covered, mib(40));
    // The balloon sizes the guest for target + what sharing and the application cover.
    assert_eq!(p.note.moves().balloon, Some(mib(256 - 180 - 50)));
    assert_eq!(p.note.balloon.unwrap().beyond, Pages::ZERO);
    // Soft: nothing left for host swap.
    assert_eq!(p.note.moves().host_swap_out, Pages::ZERO);
    // The cooperative levers cover it all: the limit holds.
    assert_eq!(p.note.moves().limit, Some(mib(256)));
    assert_eq!(&p.mechanisms[..], &[Sharing, AppBalloon, Balloon]);
}

#[test]
fn the_limit_is_asked_only_for_what_the_cooperative_levers_do_not_cover() {
    let mut t = everything();
    t.levers.balloon = None;
    t.levers.host_swap = None;
    let p = run(&t, Soft, 180, 100);
    // Sharing and the application cover 50 of the 76 MiB: the limit aims at 180 + 50 and
    // takes one bounded step toward it.
    let n = p.note.limit.unwrap();
    assert_eq!(n.rail, LimitRail::Step);
    assert!(n.to < mib(256) && n.to >= mib(230), "{n:?}");
    // Nothing covered: the limit aims at the target itself.
    t.levers.sharing = None;
    t.levers.app_balloon = None;
    let step = run(&t, Soft, 250, 100).note.limit.unwrap();
    assert_eq!(step.to, mib(250), "{step:?}");
}

/// A 256 MiB VM holding `allocated` with an empty balloon, and an agent.
fn vm_with_agent(allocated: u64, lever: AppBalloonLever) -> TenantObservation {
    let mut t = observed(&Vm {
        allocated,
        ..base(Soft)
    });
    t.levers.app_balloon = Some(lever);
    t
}

fn app_step(p: &Plan) -> AppStep {
    p.note.app_balloon.unwrap().step
}

#[test]
fn shrinking_asks_the_application_first_and_lowers_the_fence_only_at_done() {
    // 256 MiB held, target 180: the pool (200 MiB) is asked down to 180 - 50 outside = 130.
    let mut memory = PlanMemory::default();
    let t = vm_with_agent(256, agent(200, 50));
    let p = run_with(&t, Soft, 180, 100, &mut memory, 3);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(130)),
        "{p:?}"
    );
    // The 70 MiB asked hold the fence: the balloon takes only the other 6.
    assert_eq!(p.note.moves().balloon, Some(mib(6)));
    assert_eq!(&p.mechanisms[..], &[AppBalloon, Balloon]);

    // Working: half way, the fence still holds.
    let mut working = agent(165, 50);
    working.answer = Some(AppAnswer {
        target: mib(130),
        status: AppStatus::Working,
    });
    let p = run_with(
        &vm_with_agent(256, working.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { waited, .. } if waited == Duration::from_secs(1))
    );
    assert_eq!(p.note.moves().balloon, Some(mib(6)));

    // Done, and memory fell by the 70 MiB: the fence follows to the target.
    let mut done = agent(130, 50);
    done.answer = Some(AppAnswer {
        target: mib(130),
        status: AppStatus::Done,
    });
    let p = run_with(
        &vm_with_agent(256, done.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(app_step(&p), AppStep::Done { released: mib(70) });
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
    assert!(p
        .note
        .to_string()
        .contains("app pool done at 130.0 MiB (released 70.0 MiB)"));
    // ... and then holds: the pool is where it should be.
    let p = run_with(
        &vm_with_agent(256, done.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(app_step(&p), AppStep::Holds);
    assert_eq!(p.note.moves().app_balloon, None);
}

#[test]
fn what_lies_beyond_the_applications_min_is_the_os_levers_at_once() {
    // Wanted 180 - 50 = 130, but the pool's min is 170: asked for 170, 30 of the excess;
    // the balloon takes the other 46 now.
    let lever = AppBalloonLever {
        min: mib(170),
        ..agent(200, 50)
    };
    let p = run(&vm_with_agent(256, lever.clone()), Soft, 180, 100);
    assert!(matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(170)));
    assert_eq!(p.note.moves().balloon, Some(mib(46)));
}

#[test]
fn growing_raises_the_fence_first_then_asks_the_application() {
    // Held 150 of 256 (balloon 106), target 240: the pool of 100 should grow to 190, which
    // needs 240 of room, and the fence leaves 150.
    let mut memory = PlanMemory::default();
    let mut t = vm_with_agent(150, agent(100, 50));
    t.levers.balloon.as_mut().unwrap().size = mib(106);
    let p = run_with(&t, High, 240, 100, &mut memory, 3);
    assert_eq!(
        app_step(&p),
        AppStep::AwaitsFence {
            pool: mib(190),
            room: mib(150)
        }
    );
    assert_eq!(p.note.moves().app_balloon, None);
    assert_eq!(
        p.note.moves().balloon,
        Some(mib(16)),
        "the balloon deflates"
    );
    // The balloon is down to 16: the tenant may hold 240, and the application is asked.
    t.levers.balloon.as_mut().unwrap().size = mib(16);
    let p = run_with(&t, High, 240, 100, &mut memory, 3);
    assert!(matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(190)));
    assert_eq!(p.note.app_balloon.unwrap().covered, Pages::ZERO);
}

#[test]
fn an_agent_not_done_by_its_deadline_is_taken_over_by_the_os() {
    let mut memory = PlanMemory::default();
    let mut lever = agent(200, 50);
    let first = run_with(
        &vm_with_agent(256, lever.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    let AppStep::Asks { deadline, .. } = app_step(&first) else {
        panic!("{first:?}");
    };
    lever.answer = Some(AppAnswer {
        target: mib(130),
        status: AppStatus::Working,
    });
    let ticks = deadline.as_secs_f64().ceil() as u32;
    for tick in 1..ticks {
        let p = run_with(
            &vm_with_agent(256, lever.clone()),
            Soft,
            180,
            100,
            &mut memory,
            3,
        );
        assert!(matches!(app_step(&p), AppStep::Asks { .. }), "tick {tick}");
    }
    let p = run_with(
        &vm_with_agent(256, lever.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(
        app_step(&p),
        AppStep::TakenOver(Takeover::Stuck { deadline })
    );
    assert_eq!(
        p.note.moves().app_balloon,
        Some(AppMove::TakeOver(Takeover::Stuck { deadline }))
    );
    // The OS levers take the whole excess.
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
    assert!(p.note.to_string().contains("app agent stuck"), "{}", p.note);
    // And keep it while that session lasts.
    let p = run_with(
        &vm_with_agent(256, lever.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert!(matches!(app_step(&p), AppStep::TakenOver(_)));
    // An agent that registers again within the back-off is ignored.
    let again = AppBalloonLever {
        session: 2,
        ..agent(200, 50)
    };
    let p = run_with(
        &vm_with_agent(256, again.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(
            app_step(&p),
            AppStep::Distrusted {
                why: Takeover::Stuck { .. },
                ..
            }
        ),
        "{p:?}"
    );
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
}

#[test]
fn an_agent_that_says_done_while_memory_did_not_fall_is_taken_over() {
    let mut memory = PlanMemory::default();
    run_with(
        &vm_with_agent(256, agent(200, 50)),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    // It reports the pool at 130 but the tenant still uses 250 MiB.
    let lie = AppBalloonLever {
        pool: mib(130),
        pool_used: Some(mib(130)),
        used: mib(250),
        answer: Some(AppAnswer {
            target: mib(130),
            status: AppStatus::Done,
        }),
        ..agent(200, 50)
    };
    let p = run_with(
        &vm_with_agent(256, lie.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(
        app_step(&p),
        AppStep::TakenOver(Takeover::Dishonest {
            claimed: mib(70),
            measured: Pages::ZERO
        })
    );
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
}

#[test]
fn a_small_move_whose_pages_the_allocator_kept_is_not_a_lie() {
    // A 200 MiB pool (a step: 200/64 MiB) beside 50 MiB is asked down by 5 MiB, then by 20;
    // each says done and the tenant's memory does not fall at all (an allocator that kept the
    // evicted values' pages). Within the slack (two steps) it is believed, beyond it not.
    let done_with_nothing_freed = |target: u64| {
        let mut memory = PlanMemory::default();
        run_with(
            &vm_with_agent(256, agent(200, 50)),
            Soft,
            target,
            100,
            &mut memory,
            3,
        );
        let asked = mib(target - 50);
        let kept = AppBalloonLever {
            pool: asked,
            pool_used: Some(asked),
            used: mib(250),
            answer: Some(AppAnswer {
                target: asked,
                status: AppStatus::Done,
            }),
            ..agent(200, 50)
        };
        app_step(&run_with(
            &vm_with_agent(256, kept),
            Soft,
            target,
            100,
            &mut memory,
            3,
        ))
    };
    assert_eq!(
        done_with_nothing_freed(245),
        AppStep::Done { released: mib(5) }
    );
    assert_eq!(
        done_with_nothing_freed(230),
        AppStep::TakenOver(Takeover::Dishonest {
            claimed: mib(20),
            measured: Pages::ZERO
        })
    );
}

#[test]
fn a_pool_that_gives_back_memory_it_never_used_is_honest() {
    // A 200 MiB pool holding 20 MiB of data is asked down to 130: the 70 MiB it gives up may
    // all be memory that held no data, never in the tenant's memory; it frees 20 anyway.
    let mut memory = PlanMemory::default();
    let empty = AppBalloonLever {
        pool_used: Some(mib(20)),
        used: mib(70),
        ..agent(200, 50)
    };
    run_with(
        &vm_with_agent(70, empty.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    let done = AppBalloonLever {
        pool: mib(130),
        pool_used: Some(Pages::ZERO),
        used: mib(50),
        answer: Some(AppAnswer {
            target: mib(130),
            status: AppStatus::Done,
        }),
        ..agent(200, 50)
    };
    let p = run_with(
        &vm_with_agent(70, done.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    // Released as measured: the tenant held 70 MiB of the empty pool's 200, and 50 after.
    assert_eq!(app_step(&p), AppStep::Done { released: mib(20) });
}

#[test]
fn nothing_is_asked_before_the_agents_first_statistics() {
    // Registered with a 200 MiB pool, no statistics yet: what it holds is unknown, so the
    // OS levers take the excess as if it had no agent.
    let lever = AppBalloonLever {
        pool_used: None,
        hits: None,
        misses: None,
        ..agent(200, 50)
    };
    let p = run(&vm_with_agent(256, lever.clone()), Soft, 180, 100);
    assert_eq!(app_step(&p), AppStep::Holds);
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
    assert_eq!(
        active(
            &vm_with_agent(256, lever.clone()),
            mib(99),
            &AppWatch::default()
        ),
        mib(99)
    );
}

#[test]
fn a_pool_a_little_too_big_moves_only_while_the_tenant_uses_more_than_its_target() {
    // Wanted 180 - 50 = 130, the pool is 132: less than a step (200 / 64 MiB). Full of data,
    // the tenant uses 182 MiB, over its target: asked.
    let lever = |data: u64| AppBalloonLever {
        pool_used: Some(mib(data)),
        used: mib(data + 50),
        ..agent(132, 50)
    };
    let p = run(&vm_with_agent(180, lever(132)), High, 180, 100);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(130)),
        "{p:?}"
    );
    // With 6 MiB of it holding no data, the tenant uses 176, within its target: it holds.
    let p = run(&vm_with_agent(180, lever(126)), High, 180, 100);
    assert_eq!(app_step(&p), AppStep::Holds);
}

#[test]
fn a_silent_agent_is_dead_and_taken_over() {
    let lever = AppBalloonLever {
        silent_for: Duration::from_secs(5),
        ..agent(200, 50)
    };
    let p = run(&vm_with_agent(256, lever.clone()), Soft, 180, 100);
    assert_eq!(
        app_step(&p),
        AppStep::TakenOver(Takeover::Dead {
            silent_for: Duration::from_secs(5)
        })
    );
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
}

#[test]
fn a_failed_target_goes_to_the_os_and_is_not_asked_again() {
    let mut memory = PlanMemory::default();
    run_with(
        &vm_with_agent(256, agent(200, 50)),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    let refused = AppBalloonLever {
        answer: Some(AppAnswer {
            target: mib(130),
            status: AppStatus::Failed,
        }),
        ..agent(200, 50)
    };
    let p = run_with(
        &vm_with_agent(256, refused.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(app_step(&p), AppStep::Failed { pool: mib(130) });
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
    let p = run_with(
        &vm_with_agent(256, refused.clone()),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    assert_eq!(app_step(&p), AppStep::Holds);
    // A different target is asked once the hold after the failure has passed (a tick is 1 s);
    // until then the shrink is paced, and covered.
    // Ticks since the failure's: the one that held, then these.
    let mut ticks = 1;
    let p = loop {
        let p = run_with(
            &vm_with_agent(256, refused.clone()),
            Soft,
            150,
            100,
            &mut memory,
            3,
        );
        ticks += 1;
        if !matches!(app_step(&p), AppStep::Paces { .. }) {
            break p;
        }
        assert_eq!(p.note.app_balloon.unwrap().covered, mib(100), "{p:?}");
    };
    assert!(matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(100)));
    assert_eq!(ticks, super::app_balloon::HOLD.as_secs(), "{p:?}");
}

#[test]
fn a_pool_too_big_for_its_fence_is_asked_down_even_without_excess() {
    // A database configured with 200 MiB in a guest given 150: it holds 100 now, but would
    // grow past its fence; the application is asked for 150 - 20 = 130.
    let p = run(
        &vm_with_agent(
            100,
            AppBalloonLever {
                pool_used: Some(mib(80)),
                used: mib(100),
                ..agent(200, 20)
            },
        ),
        High,
        150,
        100,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(130)),
        "{p:?}"
    );
}

#[test]
fn a_pool_in_use_is_active_and_an_idle_pool_is_taxed() {
    let t = |hits, misses| {
        vm_with_agent(
            256,
            AppBalloonLever {
                hits,
                misses,
                ..agent(200, 50)
            },
        )
    };
    // Misses: the pool and what lies outside it are active, whatever the estimator says.
    assert_eq!(
        active(&t(Some(5), Some(3)), mib(60), &AppWatch::default()),
        mib(250)
    );
    // Neither hits nor misses: only the memory outside the pool can be active.
    assert_eq!(
        active(&t(Some(0), Some(0)), mib(240), &AppWatch::default()),
        mib(50)
    );
    // Hits alone: the pool's data and what lies outside it (the tenant's memory), or the
    // estimator's bound if more. No statistics yet: the bound.
    assert_eq!(
        active(&t(Some(5), Some(0)), mib(120), &AppWatch::default()),
        mib(250)
    );
    assert_eq!(
        active(&t(Some(5), Some(0)), mib(300), &AppWatch::default()),
        mib(300)
    );
    assert_eq!(
        active(&t(None, None), mib(120), &AppWatch::default()),
        mib(120)
    );
    // A tenant without an agent keeps its bound.
    assert_eq!(
        active(&observed(&base(Soft)), mib(120), &AppWatch::default()),
        mib(120)
    );
}

#[test]
fn a_lever_the_tenant_lacks_is_never_moved() {
    let t = TenantObservation::new(TenantId(0), mib(256));
    let p = run(&t, Low, 100, 100);
    assert_eq!(p.note.moves(), Moves::default());
    assert!(p.mechanisms.is_empty());
    assert_eq!(
        p.note.to_string(),
        "low: allocated 256.0 MiB > target 100.0 MiB"
    );
}

#[test]
fn a_pool_the_application_can_give_back_does_not_raise_a_limit_tenants_floor() {
    // 300 MiB unreclaimable (anonymous, no swap), of which a 256 MiB pool whose application
    // keeps at least 16 MiB: the floor is what the application cannot give back, 300 - 240 =
    // 60 MiB, plus the margin.
    let mut t = everything();
    t.allocated = mib(300);
    let lever = LimitLever {
        limit: mib(320),
        unlimited: false,
        unreclaimable: mib(300),
        major_faults: Some(0),
        ..LimitLever::default()
    };
    t.levers.limit = Some(lever);
    t.levers.app_balloon = Some(AppBalloonLever {
        max: mib(256),
        ..agent(256, 44)
    });
    let rails = LimitRails::default();
    let (min, _) = bounds(&t, mib(16), mib(1024), mib(100), true, &rails);
    assert_eq!(min, mib(60) + rails.floor_margin);
    t.levers.app_balloon = None;
    let (min, _) = bounds(&t, mib(16), mib(1024), mib(100), true, &rails);
    assert_eq!(
        min,
        mib(300) + rails.floor_margin,
        "without an agent it is all the floor"
    );
}

/// A VM on a shared disk that saw `latency_us` per operation at weight 100.
fn on_disk(latency_us: f64) -> TenantObservation {
    let mut t = observed(&base(Soft));
    t.levers.disk = Some(Box::new(DiskIo {
        weight: Some(100),
        ops: 50,
        latency_us: Some(latency_us),
        ..DiskIo::default()
    }));
    t
}

#[test]
fn the_disk_weight_is_planned_beside_memory_and_takes_none_of_its_excess() {
    let spec = Some(DiskSpec {
        weight: 100,
        latency_target_us: Some(1000),
    });
    let mut memory = PlanMemory::default();
    let (with, note) = plan_disk(&on_disk(5000.0), Soft, 180, 64, &mut memory, 3, &spec);
    let note = note.expect("a disk note");
    assert_eq!((note.weight, note.was, note.boost), (200, Some(100), 1));
    // The memory plan is the one without a disk.
    let without = run(&observed(&base(Soft)), Soft, 180, 64);
    assert_eq!(with.mechanisms, without.mechanisms);
    assert_eq!(with.note.moves(), without.note.moves());
    // The boost is remembered between ticks.
    let (_, note) = plan_disk(&on_disk(5000.0), Soft, 180, 64, &mut memory, 3, &spec);
    assert_eq!(note.map(|n| n.weight), Some(400));
}

#[test]
fn no_disk_note_without_a_shared_disk_or_without_a_disk_in_the_spec() {
    let spec = Some(DiskSpec {
        weight: 100,
        latency_target_us: None,
    });
    let mut memory = PlanMemory::default();
    let t = observed(&base(Soft));
    assert_eq!(plan_disk(&t, Soft, 180, 64, &mut memory, 3, &spec).1, None);
    let t = on_disk(5000.0);
    assert_eq!(plan_disk(&t, Soft, 180, 64, &mut memory, 3, &None).1, None);
}

/// An agent that claims a 1 TiB pool, all of it data, in a tenant that measurably uses
/// `used` MiB.
fn liar(used: u64) -> AppBalloonLever {
    AppBalloonLever {
        pool: mib(1 << 20),
        pool_used: Some(mib(1 << 20)),
        max: mib(1 << 20),
        used: mib(used),
        ..agent(200, 0)
    }
}

#[test]
fn a_claimed_pool_covers_the_excess_only_as_far_as_the_tenant_holds_it() {
    // 256 MiB held, target 180, but the tenant measurably uses 200 MiB: the shrink from the
    // pool held (200) to the 180 wanted covers 20 MiB, not the whole 76 of the excess.
    let p = run(&vm_with_agent(256, liar(200)), Soft, 180, 100);
    let note = p.note.app_balloon.unwrap();
    assert!(
        matches!(note.step, AppStep::Asks { pool, .. } if pool == mib(180)),
        "{p:?}"
    );
    assert_eq!(note.covered, mib(20));
    assert_eq!(p.note.moves().balloon, Some(mib(56)));
    // A world that measures nothing credits the claim nothing.
    let p = run(&vm_with_agent(256, liar(0)), Soft, 180, 100);
    assert_eq!(p.note.app_balloon.unwrap().covered, Pages::ZERO);
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
}

#[test]
fn a_shrinks_deadline_comes_from_the_pool_held_not_the_pool_claimed() {
    // Claimed 1 TiB in a tenant using 256 MiB: the move is 256 - 180 = 76 MiB, so 20 s +
    // 15 s x 76/1024, not the 4.3 hours 1 TiB would give.
    let p = run(&vm_with_agent(256, liar(256)), Soft, 180, 100);
    let AppStep::Asks { deadline, .. } = app_step(&p) else {
        panic!("{p:?}");
    };
    assert_eq!(deadline, super::app_balloon::deadline(mib(76), None));
    assert!(deadline < Duration::from_secs(22), "{deadline:?}");
}

#[test]
fn the_idle_tax_charges_a_pool_with_misses_no_more_than_the_tenant_holds() {
    let lever = AppBalloonLever {
        hits: Some(5),
        misses: Some(3),
        ..liar(150)
    };
    let t = vm_with_agent(256, lever);
    assert_eq!(active(&t, mib(60), &AppWatch::default()), mib(150));
}

#[test]
fn a_deadline_follows_the_applications_measured_speed() {
    // Before any resize: the rule, 20 s + 15 s per GiB.
    assert_eq!(
        super::app_balloon::deadline(mib(512), None),
        Duration::from_millis(27_500)
    );
    // It moved 70 MiB in 2 s: 200 MiB takes 5.7 s at that speed, twice that plus 5 s.
    let d = super::app_balloon::deadline(mib(200), Some((mib(70), Duration::from_secs(2))));
    assert!(
        (d.as_secs_f64() - (5.0 + 2.0 * 2.0 * 200.0 / 70.0)).abs() < 0.01,
        "{d:?}"
    );
    // A speed learned slow never stretches the rule.
    let slow = super::app_balloon::deadline(mib(512), Some((mib(1), Duration::from_secs(60))));
    assert_eq!(slow, Duration::from_millis(27_500));

    // The planner learns it from a completed resize: 200 -> 130 MiB, done after 2 s.
    let mut memory = PlanMemory::default();
    run_with(
        &vm_with_agent(256, agent(200, 50)),
        Soft,
        180,
        100,
        &mut memory,
        3,
    );
    let answered = |pool, status| AppBalloonLever {
        answer: Some(AppAnswer {
            target: mib(130),
            status,
        }),
        ..agent(pool, 50)
    };
    let working = vm_with_agent(256, answered(165, AppStatus::Working));
    run_with(&working, Soft, 180, 100, &mut memory, 3);
    let done = vm_with_agent(256, answered(130, AppStatus::Done));
    let p = run_with(&done, Soft, 180, 100, &mut memory, 3);
    assert_eq!(app_step(&p), AppStep::Done { released: mib(70) });
    // The next shrink, 130 -> 60 MiB (target 110), once the hold has passed, gets 5 s + 2 x 2 s.
    let p = (0..super::app_balloon::HOLD.as_secs())
        .map(|_| {
            run_with(
                &vm_with_agent(180, agent(130, 50)),
                Soft,
                110,
                100,
                &mut memory,
                3,
            )
        })
        .last()
        .unwrap();
    let AppStep::Asks { pool, deadline, .. } = app_step(&p) else {
        panic!("{p:?}");
    };
    assert_eq!(pool, mib(60));
    assert_eq!(deadline, Duration::from_secs(9));
}

#[test]
fn a_taken_over_agent_stays_distrusted_for_a_back_off_that_doubles() {
    let mut memory = PlanMemory::default();
    let dead = |session| AppBalloonLever {
        session,
        silent_for: Duration::from_secs(5),
        ..agent(200, 50)
    };
    let fresh = |session| AppBalloonLever {
        session,
        ..agent(200, 50)
    };
    let step = |lever, memory: &mut PlanMemory| {
        run_with(&vm_with_agent(256, lever), Soft, 180, 100, memory, 3)
    };
    let p = step(dead(1), &mut memory);
    assert!(matches!(
        app_step(&p),
        AppStep::TakenOver(Takeover::Dead { .. })
    ));
    assert!(!memory.app.trusted());
    // It registers again at once: the new session is ignored, the OS takes the whole excess
    // and the idle tax sees no pool.
    let p = step(fresh(2), &mut memory);
    let AppStep::Distrusted { why, left } = app_step(&p) else {
        panic!("{p:?}");
    };
    assert!(matches!(why, Takeover::Dead { .. }));
    assert_eq!(left, Duration::from_secs(29));
    assert_eq!(p.note.moves().app_balloon, None);
    assert_eq!(p.note.moves().balloon, Some(mib(76)));
    assert!(
        p.note.to_string().contains("distrusted for 29 s more"),
        "{}",
        p.note
    );
    let t = vm_with_agent(256, fresh(2));
    assert_eq!(active(&t, mib(99), &memory.app), mib(99));
    // 30 s after the takeover it is trusted afresh.
    for _ in 0..28 {
        step(fresh(2), &mut memory);
    }
    let p = step(fresh(2), &mut memory);
    assert!(matches!(app_step(&p), AppStep::Asks { .. }), "{p:?}");
    assert!(memory.app.trusted());
    // Taken over again, the back-off doubles, and so on up to an hour.
    step(dead(2), &mut memory);
    let p = step(fresh(3), &mut memory);
    assert!(
        matches!(app_step(&p), AppStep::Distrusted { left, .. } if left == Duration::from_secs(59))
    );
    for (session, want) in (4..12).zip([120, 240, 480, 960, 1920, 3600, 3600, 3600]) {
        while !memory.app.trusted() {
            step(fresh(session), &mut memory);
        }
        step(dead(session), &mut memory);
        let p = step(fresh(session + 100), &mut memory);
        let AppStep::Distrusted { left, .. } = app_step(&p) else {
            panic!("{p:?}");
        };
        assert_eq!(left, Duration::from_secs(want - 1), "session {session}");
    }
}

/// `agent(pool, outside)` serving requests: `misses` of every 1,000.
fn serving(pool: u64, outside: u64, misses: u64) -> AppBalloonLever {
    AppBalloonLever {
        hits: Some(1000 - misses),
        misses: Some(misses),
        ..agent(pool, outside)
    }
}

/// Ticks `lever`'s VM (256 MiB, holding `pool + 40`) at `target` until the planner asks the
/// agent something or `ticks` pass; the plans, in order.
fn until_asked(
    lever: &AppBalloonLever,
    target: u64,
    memory: &mut PlanMemory,
    ticks: u32,
) -> Vec<Plan> {
    let allocated = lever.used.0 / mib(1).0;
    let mut plans = Vec::new();
    for _ in 0..ticks {
        let p = run_with(
            &vm_with_agent(allocated, lever.clone()),
            Soft,
            target,
            100,
            memory,
            3,
        );
        let asked = matches!(app_step(&p), AppStep::Asks { .. });
        plans.push(p);
        if asked {
            break;
        }
    }
    plans
}

#[test]
fn a_busy_pool_shrinks_in_paced_steps_and_the_os_pages_none_of_it() {
    // 160 MiB of data serving requests, 40 outside, target 120: the pool is wanted at 80, but
    // goes 20 MiB (an eighth) per move, and the fence holds the whole planned shrink.
    let mut memory = PlanMemory::default();
    let p = run_with(
        &vm_with_agent(200, serving(160, 40, 20)),
        Soft,
        120,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(140)),
        "{p:?}"
    );
    let note = p.note.app_balloon.unwrap();
    assert_eq!((note.wanted, note.covered), (mib(80), mib(80)));
    assert_eq!(
        p.note.moves().balloon,
        Some(mib(256 - 200)),
        "the guest keeps what it holds"
    );
    // Done at 140: the next move waits the hold, paced and still covered, then goes to 120.
    let done = AppBalloonLever {
        answer: Some(AppAnswer {
            target: mib(140),
            status: AppStatus::Done,
        }),
        ..serving(140, 40, 20)
    };
    let p = run_with(
        &vm_with_agent(180, done.clone()),
        Soft,
        120,
        100,
        &mut memory,
        3,
    );
    assert_eq!(app_step(&p), AppStep::Done { released: mib(20) });
    let plans = until_asked(&done, 120, &mut memory, 10);
    let (waits, asked) = plans.split_at(plans.len() - 1);
    assert_eq!(waits.len() as u64 + 1, super::app_balloon::HOLD.as_secs());
    for w in waits {
        assert!(
            matches!(app_step(w), AppStep::Paces { next, .. } if next == mib(123)),
            "{w:?}"
        );
        assert_eq!(w.note.app_balloon.unwrap().covered, mib(60));
        assert!(
            w.note.to_string().contains("paced toward 80.0 MiB"),
            "{}",
            w.note
        );
    }
    assert!(matches!(app_step(&asked[0]), AppStep::Asks { pool, .. } if pool == mib(123)));
}

#[test]
fn an_idle_pool_goes_in_one_move_and_a_curve_frees_its_cold_part_at_once() {
    let mut memory = PlanMemory::default();
    let p = run_with(
        &vm_with_agent(200, agent(160, 40)),
        Soft,
        120,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(80)),
        "{p:?}"
    );
    // A busy pool whose curve is flat down to 100 MiB: 60 MiB are cold.
    let curve =
        memtide_model::MissCurve::new([(mib(50), 0.5), (mib(100), 0.02), (mib(160), 0.015)])
            .unwrap();
    let lever = AppBalloonLever {
        curve: Some(Box::new(curve)),
        ..serving(160, 40, 20)
    };
    let p = run(&vm_with_agent(200, lever), Soft, 120, 100);
    let AppStep::Asks { pool, .. } = app_step(&p) else {
        panic!("{p:?}");
    };
    assert!(pool >= mib(100) && pool <= mib(101), "{pool}");
}

#[test]
fn a_shrunk_idle_pool_is_not_shrunk_again_for_its_own_free_pages() {
    // An idle 160 MiB pool beside 40 MiB, at a 120 MiB target: asked down to 80 in one move.
    let mut memory = PlanMemory::default();
    let p = run_with(
        &vm_with_agent(200, agent(160, 40)),
        Soft,
        120,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(80)),
        "{p:?}"
    );
    // Done: 60 MiB of the 80 hold data, the other 20 were freed by the shrink and are still
    // in the tenant's memory (120 MiB). At the same target the pool stays.
    let done = AppBalloonLever {
        pool_used: Some(mib(60)),
        answer: Some(AppAnswer {
            target: mib(80),
            status: AppStatus::Done,
        }),
        ..agent(80, 40)
    };
    for tick in 0..10 {
        let p = run_with(
            &vm_with_agent(120, done.clone()),
            Soft,
            120,
            100,
            &mut memory,
            3,
        );
        let step = app_step(&p);
        assert!(
            matches!(step, AppStep::Done { .. } | AppStep::Holds),
            "tick {tick}: {p:?}"
        );
    }
}

#[test]
fn a_pool_in_use_grows_only_when_full_or_missing_and_not_back_within_the_reverse_hold() {
    // 100 MiB of pool, 60 of them data, no misses: more memory is of no use to it.
    let half_full = AppBalloonLever {
        pool_used: Some(mib(60)),
        used: mib(100),
        ..serving(100, 40, 0)
    };
    let p = run(&vm_with_agent(100, half_full), Soft, 240, 100);
    assert_eq!(app_step(&p), AppStep::Holds);
    // Full of data, missing, or read by nothing, it grows to what the target leaves.
    let idle = AppBalloonLever {
        pool_used: Some(mib(60)),
        used: mib(100),
        ..agent(100, 40)
    };
    for lever in [serving(100, 40, 0), serving(100, 40, 30), idle] {
        let p = run(&vm_with_agent(140, lever), Soft, 240, 100);
        assert!(
            matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(200)),
            "{p:?}"
        );
    }
    // Just shrunk by 20 MiB, a pool waits the reverse hold before it grows back: 60 s when its
    // data fits, 15 s when it misses.
    for (misses, hold) in [
        (0, super::app_balloon::REVERSE_HOLD),
        (20, super::app_balloon::MISSING_REVERSE_HOLD),
    ] {
        let mut memory = PlanMemory::default();
        run_with(
            &vm_with_agent(200, serving(160, 40, 20)),
            Soft,
            120,
            100,
            &mut memory,
            3,
        );
        let done = AppBalloonLever {
            answer: Some(AppAnswer {
                target: mib(140),
                status: AppStatus::Done,
            }),
            ..serving(140, 40, misses)
        };
        run_with(
            &vm_with_agent(180, done.clone()),
            Soft,
            120,
            100,
            &mut memory,
            3,
        );
        let plans = until_asked(&done, 240, &mut memory, 70);
        assert_eq!(plans.len() as u64, hold.as_secs(), "{:?}", plans.last());
        assert!(plans[..plans.len() - 1]
            .iter()
            .all(|p| app_step(p) == AppStep::Holds));
        assert!(
            matches!(app_step(plans.last().unwrap()), AppStep::Asks { pool, .. } if pool == mib(200))
        );
    }
}

#[test]
fn a_missing_pool_grows_to_its_whole_target_though_it_keeps_free_pages() {
    // 100 MiB of pool with 20 of them free (the server's free list), 40 outside: the tenant
    // holds 140. At a target of 180 a pool that misses has touched every page it holds, so
    // all 100 are the pool's and it is asked for 140, which brings the tenant to its target;
    // counting its free pages as outside would ask for 120 and leave 20 MiB of the target
    // unused for good.
    let missing = AppBalloonLever {
        pool_used: Some(mib(80)),
        ..serving(100, 40, 30)
    };
    let p = run(&vm_with_agent(140, missing), Soft, 180, 100);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(140)),
        "{p:?}"
    );
    // An idle pool's free pages may never have been touched: only its data is the pool's.
    let idle = AppBalloonLever {
        pool_used: Some(mib(80)),
        used: mib(120),
        ..agent(100, 40)
    };
    let p = run(&vm_with_agent(120, idle), Soft, 180, 100);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(140)),
        "{p:?}"
    );
}

#[test]
fn a_pool_in_use_says_what_its_tenant_wants_and_an_idle_or_distrusted_one_does_not() {
    let watch = AppWatch::default();
    // Short of memory: the memory outside and its largest pool.
    assert_eq!(
        super::app_balloon::wants(&serving(160, 40, 20), &watch),
        Some(mib(240))
    );
    // Its data fits: the memory outside and the data.
    let fits = AppBalloonLever {
        pool_used: Some(mib(120)),
        used: mib(160),
        ..serving(160, 40, 0)
    };
    assert_eq!(super::app_balloon::wants(&fits, &watch), Some(mib(160)));
    assert_eq!(super::app_balloon::wants(&agent(160, 40), &watch), None);
    // A dead agent is taken over: from then on its pool says nothing.
    let mut memory = PlanMemory::default();
    let dead = AppBalloonLever {
        silent_for: Duration::from_secs(5),
        ..serving(160, 40, 20)
    };
    run_with(
        &vm_with_agent(200, dead.clone()),
        Soft,
        120,
        100,
        &mut memory,
        3,
    );
    assert_eq!(super::app_balloon::wants(&dead, &memory.app), None);
}

/// A cgroup holding `resident` MiB under a limit at that, with `swapped` MiB in its swap and
/// `faults` major faults in the last second, swap to spare when `room`, and `lever`'s agent.
fn behind_limit(
    resident: u64,
    swapped: u64,
    faults: u64,
    room: bool,
    lever: AppBalloonLever,
) -> TenantObservation {
    let mut t = TenantObservation::new(TenantId(0), mib(resident));
    t.anon = Some(mib(resident));
    t.swapped = Some(mib(swapped));
    t.levers.limit = Some(LimitLever {
        limit: mib(resident),
        unlimited: false,
        unreclaimable: if room { Pages::ZERO } else { mib(resident) },
        major_faults: Some(faults),
        ..LimitLever::default()
    });
    t.levers.app_balloon = Some(lever);
    t
}

/// A 512 MiB-max pool of `pool` MiB, all data, missing, beside `outside` MiB (resident or in
/// swap), in a tenant whose measured memory is both.
fn missing_pool(pool: u64, outside: u64) -> AppBalloonLever {
    AppBalloonLever {
        max: mib(512),
        ..serving(pool, outside, 30)
    }
}

#[test]
fn a_missing_pool_behind_a_limit_pushes_cold_memory_to_swap_a_probe_at_a_time() {
    // 400 MiB resident at a 400 MiB target: a 312 MiB pool and 88 MiB outside it, nothing in
    // swap, no swap-ins. Sized to fit beside the 88, the pool would stay at 312; with swap to
    // spare it grows by a probe (two steps of 8 MiB), and the kernel pages out as much of
    // the tenant's coldest memory.
    let mut memory = PlanMemory::default();
    let t = behind_limit(400, 0, 0, true, missing_pool(312, 88));
    let p = run_with(&t, Low, 400, 100, &mut memory, 3);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(328)),
        "{p:?}"
    );
    // Done: 16 MiB of the outside went to swap (it still counts in the tenant's memory). After
    // the hold the next probe goes: the pool is sized for the target and the 16 in swap, plus
    // a probe.
    let done = AppBalloonLever {
        answer: Some(AppAnswer {
            target: mib(328),
            status: AppStatus::Done,
        }),
        ..missing_pool(328, 88)
    };
    let mut asked = None;
    for _ in 0..10 {
        let p = run_with(
            &behind_limit(400, 16, 0, true, done.clone()),
            Low,
            400,
            100,
            &mut memory,
            3,
        );
        if let AppStep::Asks { pool, .. } = app_step(&p) {
            asked = Some(pool);
            break;
        }
    }
    assert_eq!(asked, Some(mib(344)));
}

#[test]
fn swap_ins_count_against_the_pools_misses_they_replace() {
    // 40 swap-ins a second: too many for cold memory alone, but the pool misses 300 times a
    // second, each a read from disk. A swap-in costs no more than a miss, so the pool still
    // grows by a probe.
    let lever = |misses| AppBalloonLever {
        max: mib(512),
        ..serving(312, 88, misses)
    };
    let mut memory = PlanMemory::default();
    let p = run_with(
        &behind_limit(400, 0, 40, true, lever(300)),
        Low,
        400,
        100,
        &mut memory,
        3,
    );
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(328)),
        "{p:?}"
    );
    // Between a quarter of the misses and as many as them: the cold memory counted stands.
    let mut between = PlanMemory::default();
    run_with(
        &behind_limit(400, 0, 0, true, lever(300)),
        Low,
        400,
        100,
        &mut between,
        3,
    );
    assert_eq!(between.app.in_swap, mib(16));
    run_with(
        &behind_limit(400, 16, 200, true, lever(300)),
        Low,
        400,
        100,
        &mut between,
        3,
    );
    assert_eq!(between.app.in_swap, mib(16));
    // As many swap-ins as misses: the last probe goes back.
    run_with(
        &behind_limit(400, 16, 300, true, lever(300)),
        Low,
        400,
        100,
        &mut between,
        3,
    );
    assert_eq!(between.app.in_swap, Pages::ZERO);
}

#[test]
fn a_missing_pool_grows_by_a_single_step_and_an_idle_one_by_two() {
    // 8 MiB below what its target allows (a step of a 512 MiB pool): a pool that misses
    // grows; an idle one holds.
    let short = AppBalloonLever {
        max: mib(512),
        ..serving(304, 88, 30)
    };
    let idle = AppBalloonLever {
        max: mib(512),
        hits: Some(0),
        misses: Some(0),
        ..agent(304, 88)
    };
    let t = |lever| behind_limit(400, 0, 0, false, lever);
    let p = run(&t(short), Low, 400, 100);
    assert!(
        matches!(app_step(&p), AppStep::Asks { pool, .. } if pool == mib(312)),
        "{p:?}"
    );
    assert_eq!(app_step(&run(&t(idle), Low, 400, 100)), AppStep::Holds);
}

#[test]
fn a_missing_pool_takes_what_a_stalled_fence_allows() {
    // A 236 MiB pool that misses, 80 MiB outside it, under a 332 MiB limit that stays there,
    // at a 350 MiB target: it awaits the fence for 10 s, then takes the 252 MiB the fence
    // lets it hold.
    let mut memory = PlanMemory::default();
    let t = behind_limit(332, 0, 0, false, missing_pool(236, 80));
    let mut steps = Vec::new();
    for _ in 0..12 {
        steps.push(app_step(&run_with(&t, Low, 350, 100, &mut memory, 3)));
    }
    assert!(
        steps[..10]
            .iter()
            .all(|s| matches!(s, AppStep::AwaitsFence { pool, .. } if *pool == mib(270))),
        "{steps:?}"
    );
    assert!(
        matches!(steps[10], AppStep::Asks { pool, .. } if pool == mib(252)),
        "{steps:?}"
    );
    // A fence still rising is awaited, however long.
    let mut rising = PlanMemory::default();
    for (i, limit) in (300..330).step_by(2).enumerate() {
        let p = run_with(
            &behind_limit(limit, 0, 0, false, missing_pool(200, 80)),
            Low,
            350,
            100,
            &mut rising,
            3,
        );
        assert!(
            matches!(app_step(&p), AppStep::AwaitsFence { .. }),
            "tick {i}: {p:?}"
        );
    }
}

#[test]
fn an_idle_pool_is_sized_without_cold_memory_in_swap() {
    let mut memory = PlanMemory::default();
    run_with(
        &behind_limit(400, 0, 0, true, missing_pool(312, 88)),
        Low,
        400,
        100,
        &mut memory,
        3,
    );
    assert_eq!(memory.app.in_swap, mib(16));
    let idle = AppBalloonLever {
        hits: Some(0),
        misses: Some(0),
        ..missing_pool(328, 88)
    };
    run_with(
        &behind_limit(400, 16, 0, true, idle),
        Low,
        400,
        100,
        &mut memory,
        3,
    );
    assert_eq!(memory.app.in_swap, Pages::ZERO);
}

#[test]
fn no_cold_memory_is_pushed_to_swap_while_swap_ins_are_hot_or_without_swap() {
    // The same tenant with 80 swap-ins a second: pages in use are in swap, the pool stays
    // sized to fit beside all of it and is not grown.
    for t in [
        behind_limit(400, 0, 80, true, missing_pool(312, 88)),
        behind_limit(400, 0, 0, false, missing_pool(312, 88)),
    ] {
        let p = run(&t, Low, 400, 100);
        assert_eq!(app_step(&p), AppStep::Holds, "{p:?}");
    }
    // A probe ahead, and then hot: the cold memory counted falls back a probe a tick, and the
    // pool (one probe above what fits beside everything) is asked down again.
    let mut memory = PlanMemory::default();
    run_with(
        &behind_limit(400, 0, 0, true, missing_pool(312, 88)),
        Low,
        400,
        100,
        &mut memory,
        3,
    );
    assert_eq!(memory.app.in_swap, mib(16));
    let hot = behind_limit(400, 16, 200, true, missing_pool(328, 88));
    run_with(&hot, Low, 400, 100, &mut memory, 3);
    assert_eq!(memory.app.in_swap, Pages::ZERO);
    // Quiet again at the same target, the cap found stands: the pool does not grow into the
    // same wall again. Once the target moves by a step, probing starts afresh.
    let quiet = behind_limit(400, 40, 0, true, missing_pool(312, 128));
    run_with(&quiet, Low, 400, 100, &mut memory, 3);
    assert_eq!(memory.app.in_swap, Pages::ZERO);
    let p = run_with(&quiet, Low, 408, 100, &mut memory, 3);
    assert_eq!(memory.app.in_swap, mib(56));
    assert!(
        p.note
            .to_string()
            .contains("(sized with 56.0 MiB of cold memory in swap)"),
        "{}",
        p.note
    );
    // The last probe is given back once: swap-ins that go on while the pages come back do
    // not take more.
    let mut once = PlanMemory::default();
    run_with(
        &behind_limit(400, 16, 0, true, missing_pool(328, 88)),
        Low,
        400,
        100,
        &mut once,
        3,
    );
    assert_eq!(once.app.in_swap, mib(32));
    for _ in 0..3 {
        let hot = behind_limit(400, 16, 200, true, missing_pool(344, 72));
        run_with(&hot, Low, 400, 100, &mut once, 3);
        assert_eq!(once.app.in_swap, mib(16));
    }
}
