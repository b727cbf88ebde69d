//! The controller's tests: one group per step of `Controller::step_into`, and whole steps.

use super::*;
use memtide_model::{EstimatorConfig, LimitLever, LimitRail, Mechanism, Slo, TenantObservation};

fn mib(m: u64) -> Pages {
    Pages::from_mib(m)
}

fn spec(id: u32) -> TenantSpec {
    TenantSpec::new(TenantId(id), format!("t{id}"), mib(64), mib(1024))
}

/// A cgroup tenant holding `allocated` under `limit`, 100 MiB of it unreclaimable.
fn limited(id: u32, allocated: u64, limit: u64, faults: Option<u64>) -> TenantObservation {
    TenantObservation {
        refaults: faults,
        swap_ins: faults.map(|_| 0),
        levers: memtide_model::Levers {
            limit: Some(LimitLever {
                limit: mib(limit),
                unlimited: false,
                unreclaimable: mib(100),
                major_faults: None,
                ..LimitLever::default()
            }),
            ..Default::default()
        },
        ..TenantObservation::new(TenantId(id), mib(allocated))
    }
}

fn host(now_s: u64, tenants: Vec<TenantObservation>) -> HostObservation {
    HostObservation {
        now: Duration::from_secs(now_s),
        machine: mib(8192),
        free: mib(4096),
        host_swap_total: Pages::ZERO,
        host_swap_used: Pages::ZERO,
        pressure: None,
        sharing: None,
        remapping: None,
        tenants,
    }
}

fn controller(budget_mib: u64) -> Controller {
    let config = ControllerConfig {
        budget: Some(mib(budget_mib)),
        tax_rate: TaxRate::new(0.0).unwrap(),
        ..ControllerConfig::default()
    };
    let mut c = Controller::new(config, mib(8192), mib(8192)).unwrap();
    c.admit(spec(0)).unwrap();
    c
}

#[test]
fn a_limit_tenant_moves_by_its_limit_alone() {
    let mut c = controller(300);
    // The first step only measures (nothing is reclaimed on no evidence).
    c.step(&host(0, vec![limited(0, 400, 400, Some(0))]));
    let d = c.step(&host(1, vec![limited(0, 400, 400, Some(0))]));
    let a = &d.actions[0];
    assert_eq!(a.target, mib(300));
    assert_eq!(a.moves().limit, Some(mib(380)), "one 5% step below 400 MiB");
    assert_eq!(a.mechanisms, vec![Mechanism::Limit]);
    assert_eq!(a.moves().balloon, None);
    assert_eq!(a.moves().host_swap_out, Pages::ZERO);
    assert!(!a.moves().blocked);
    assert!(a.reason.to_string().contains("bounded shrink step"));
}

#[test]
fn faults_per_second_use_the_time_between_observations() {
    let mut c = controller(300);
    c.step(&host(1, vec![limited(0, 400, 400, Some(0))]));
    // 3000 faults over 2 s is 1500/s: under the default 2000/s, so the shrink goes on.
    let d = c.step(&host(3, vec![limited(0, 400, 400, Some(3000))]));
    assert_eq!(d.actions[0].moves().limit, Some(mib(380)));
    // 3000 faults in 1 s backs off.
    let d = c.step(&host(4, vec![limited(0, 400, 400, Some(3000))]));
    assert_eq!(d.actions[0].moves().limit, Some(mib(400)));
    let rail = d.actions[0].reason.mechanism.limit.unwrap().rail;
    assert!(matches!(rail, LimitRail::BackoffFaults { .. }), "{rail:?}");
    assert!(d.actions[0].mechanisms.is_empty());
}

/// A limit tenant holding `allocated` under `limit`, whose estimator (committed memory)
/// sees `active` of it in use, 16 MiB unreclaimable.
fn cgroup(id: u32, allocated: u64, limit: u64, active: u64) -> TenantObservation {
    TenantObservation {
        refaults: Some(0),
        swap_ins: Some(0),
        committed: Some(mib(active)),
        levers: memtide_model::Levers {
            limit: Some(LimitLever {
                limit: mib(limit),
                unlimited: false,
                unreclaimable: mib(16),
                major_faults: Some(0),
                ..LimitLever::default()
            }),
            ..Default::default()
        },
        ..TenantObservation::new(TenantId(id), mib(allocated))
    }
}

fn two_tenants(budget_mib: u64, tax: f64) -> Controller {
    let config = ControllerConfig {
        budget: Some(mib(budget_mib)),
        tax_rate: TaxRate::new(tax).unwrap(),
        ..ControllerConfig::default()
    };
    let mut c = Controller::new(config, mib(budget_mib), mib(8192)).unwrap();
    c.admit(spec(0)).unwrap();
    c.admit(spec(1)).unwrap();
    c
}

#[test]
fn while_the_budget_has_room_no_limit_falls_below_what_its_tenant_holds() {
    // 700 of a 1000 MiB budget held: the budget is in the high state.
    let mut c = two_tenants(1000, 0.75);
    for now in 1..30 {
        let d = c.step(&host(
            now,
            vec![cgroup(0, 400, 1024, 400), cgroup(1, 300, 1024, 10)],
        ));
        assert_eq!(d.memory.state, ReclamationState::High);
        for (a, held) in d.actions.iter().zip([400, 300]) {
            assert!(a.target >= mib(held), "{}: {}", a.id, a.reason);
            assert!(
                a.moves().limit.unwrap() >= mib(held),
                "{}: {}",
                a.id,
                a.reason
            );
        }
        let sum: u64 = d.actions.iter().map(|a| a.moves().limit.unwrap().0).sum();
        assert!(sum <= mib(1000).0);
        // The room left over goes mostly to the active tenant.
        assert!(d.actions[0].target - mib(400) > d.actions[1].target - mib(300));
    }
}

/// A limit tenant holding 500 MiB under a 1 GiB limit, 400 MiB of it an application pool
/// serving hits, `data` MiB of which hold data.
fn pool_with_data(id: u32, data: u64) -> TenantObservation {
    let mut t = cgroup(id, 500, 1024, 500);
    t.levers.app_balloon = Some(memtide_model::AppBalloonLever {
        session: 1,
        pool: mib(400),
        pool_used: Some(mib(data)),
        min: mib(16),
        max: mib(400),
        granule: mib(1),
        used: mib(500),
        hits: Some(100),
        misses: Some(0),
        curve: None,
        durability: None,
        answer: None,
        silent_for: Duration::ZERO,
        dead_after: Duration::from_secs(5),
    });
    t
}

#[test]
fn while_the_budget_has_room_a_pool_gives_back_only_its_pages_without_data() {
    // 700 of a 1000 MiB budget held: high. The pool of 400 MiB holds 150 of data: the pool
    // memtide wants is the target less the 350 MiB outside the data, so the application is
    // asked for its empty part, while the limit stays at least what the tenant holds.
    let mut c = two_tenants(1000, 0.0);
    let d = c.step(&host(
        1,
        vec![pool_with_data(0, 150), cgroup(1, 200, 1024, 200)],
    ));
    assert_eq!(d.memory.state, ReclamationState::High);
    let a = &d.actions[0];
    assert!(a.target >= mib(500), "{}", a.reason);
    assert!(a.moves().limit.unwrap() >= mib(500), "{}", a.reason);
    let app = a.reason.mechanism.app_balloon.unwrap();
    assert!(
        matches!(app.step, memtide_model::AppStep::Asks { pool, .. }
            if pool < mib(400) && pool >= mib(150)),
        "{}",
        a.reason
    );
    // The same pool full of data is not asked to shrink.
    let mut c = two_tenants(1000, 0.0);
    let d = c.step(&host(
        1,
        vec![pool_with_data(0, 400), cgroup(1, 200, 1024, 200)],
    ));
    assert_eq!(d.memory.state, ReclamationState::High);
    let app = d.actions[0].reason.mechanism.app_balloon.unwrap();
    assert!(
        !matches!(app.step, memtide_model::AppStep::Asks { pool, .. } if pool < mib(400)),
        "{}",
        d.actions[0].reason
    );
}

#[test]
fn an_idle_application_pool_is_taxed_and_one_with_misses_is_not() {
    // Two tenants whose estimators (committed memory) see all 500 MiB in use, each with a
    // 400 MiB pool: one pool saw neither hits nor misses, the other misses.
    let pool = |id: u32, hits: u64, misses: u64| TenantObservation {
        committed: Some(mib(500)),
        levers: memtide_model::Levers {
            app_balloon: Some(memtide_model::AppBalloonLever {
                session: 1,
                pool: mib(400),
                pool_used: Some(mib(400)),
                min: Pages::ZERO,
                max: mib(400),
                granule: Pages(1),
                used: mib(500),
                hits: Some(hits),
                misses: Some(misses),
                curve: None,
                durability: None,
                answer: None,
                silent_for: Duration::ZERO,
                dead_after: Duration::from_secs(5),
            }),
            ..Default::default()
        },
        ..TenantObservation::new(TenantId(id), mib(500))
    };
    let mut c = two_tenants(600, 0.75);
    let d = c.step(&host(1, vec![pool(0, 0, 0), pool(1, 10, 10)]));
    let (idle, busy) = (d.actions[0].target, d.actions[1].target);
    assert!(idle + mib(200) < busy, "idle {idle}, busy {busy}");
    // Without the pools' figures the two would be alike.
    let mut c = two_tenants(600, 0.75);
    let d = c.step(&host(1, vec![pool(0, 10, 0), pool(1, 10, 0)]));
    assert_eq!(d.actions[0].target, d.actions[1].target);
}

/// A tenant holding 600 MiB, a 512 MiB pool of it data, whose agent reports `curve`.
fn pooled(id: u32, curve: Option<memtide_model::MissCurve>) -> TenantObservation {
    TenantObservation {
        committed: Some(mib(600)),
        levers: memtide_model::Levers {
            app_balloon: Some(memtide_model::AppBalloonLever {
                session: 1,
                pool: mib(512),
                pool_used: Some(mib(512)),
                min: mib(16),
                max: mib(1024),
                granule: Pages(1),
                used: mib(600),
                hits: Some(900),
                misses: Some(100),
                curve: curve.map(Box::new),
                durability: None,
                answer: None,
                silent_for: Duration::ZERO,
                dead_after: Duration::from_secs(5),
            }),
            ..Default::default()
        },
        ..TenantObservation::new(TenantId(id), mib(600))
    }
}

/// Misses falling linearly to none at `knee` MiB.
fn knee(mib_at: u64) -> memtide_model::MissCurve {
    memtide_model::MissCurve::new([(mib(mib_at), 0.0), (mib(4 * mib_at), 0.0)]).unwrap()
}

/// A strict tenant, a best-effort one and one without an SLO, under `budget` of memory
/// and 1 GiB of cache.
fn with_slos(budget: u64) -> Controller {
    let config = ControllerConfig {
        budget: Some(mib(budget)),
        cache: Some(QuotaSettings::new(mib(1024))),
        ..ControllerConfig::default()
    };
    let mut c = Controller::new(config, mib(8192), mib(8192)).unwrap();
    let strict = Slo::Strict {
        target_us: 500.0,
        slack: 0.1,
    };
    for (id, slo) in [(0, Some(strict)), (1, Some(Slo::BestEffort)), (2, None)] {
        c.admit(TenantSpec {
            max: mib(2048),
            slo,
            ..spec(id)
        })
        .unwrap();
    }
    c
}

#[test]
fn memory_s_budget_caps_the_cache_quotas() {
    // 900 MiB less tenant 2's 64 MiB min and the 176 MiB outside the two pools leave 660.
    let mut c = with_slos(900);
    let obs = host(
        1,
        vec![
            pooled(0, Some(knee(800))),
            pooled(1, Some(knee(2000))),
            pooled(2, None),
        ],
    );
    let d = c.step(&obs);
    assert_eq!(note_budget(&d), mib(660));
    let pools: u64 = (0..2)
        .map(|i| d.actions[i].reason.cache.unwrap().quota.0)
        .sum();
    assert!(pools <= mib(660).0);
}

#[test]
fn cache_quotas_size_the_pools_of_slo_tenants_by_their_curves() {
    let mut c = with_slos(4096);
    let obs = host(
        1,
        vec![
            pooled(0, Some(knee(800))),
            pooled(1, Some(knee(2000))),
            pooled(2, Some(knee(800))),
        ],
    );
    let d = c.step(&obs);
    // The strict pool meets 550 µs at 84.3% of its 800 MiB knee: 675 MiB, 43 steps of
    // 16 MiB (688 MiB); the best-effort pool gets the other 336 MiB. Each target adds the
    // 88 MiB outside the pool.
    let note = |i: usize| d.actions[i].reason.cache.expect("a quota");
    assert_eq!(note(0).quota, mib(688), "{}", d.actions[0].reason);
    assert!(note(0).latency_us <= 550.0);
    assert_eq!(note(1).quota, mib(336), "{}", d.actions[1].reason);
    assert_eq!(d.actions[0].target, mib(688 + 88));
    assert_eq!(d.actions[1].target, mib(336 + 88));
    assert!(
        matches!(d.actions[0].moves().app_balloon, Some(memtide_model::AppMove::Target { pool, .. }) if pool == mib(688)),
        "{}",
        d.actions[0].reason
    );
    assert!(d.actions[0]
        .reason
        .to_string()
        .contains("cache quota 688.0 MiB of 1024.0 MiB"));
    // The tenant without an SLO is sized by memory alone.
    assert!(d.actions[2].reason.cache.is_none());

    // A pool whose curve has not come keeps its pool out of the budget.
    let obs = host(
        2,
        vec![pooled(0, Some(knee(800))), pooled(1, None), pooled(2, None)],
    );
    let d = c.step(&obs);
    assert!(d.actions[1].reason.cache.is_none());
    assert_eq!(note_budget(&d), mib(512));
}

fn note_budget(d: &Decision) -> Pages {
    d.actions[0].reason.cache.expect("a quota").budget
}

#[test]
fn a_pool_claimed_beyond_the_tenants_memory_takes_only_what_it_holds_off_the_cache_budget() {
    // Tenant 1 has no curve yet and claims a 1 TiB pool while it holds 600 MiB: the 1 GiB
    // cache budget loses the 600 MiB it measurably holds, not the whole claim.
    let mut liar = pooled(1, None);
    if let Some(a) = liar.levers.app_balloon.as_mut() {
        a.pool = mib(1 << 20);
        a.pool_used = Some(mib(1 << 20));
        a.max = mib(1 << 20);
    }
    let mut c = with_slos(4096);
    let d = c.step(&host(
        1,
        vec![pooled(0, Some(knee(800))), liar, pooled(2, None)],
    ));
    assert_eq!(note_budget(&d), mib(1024 - 600));
}

#[test]
fn when_the_budget_runs_short_the_idle_tenant_gives_memory_first() {
    // 700 MiB held against a 600 MiB budget: memory is wanted.
    let mut c = two_tenants(600, 0.75);
    // The first step only measures (nothing is reclaimed on no evidence).
    c.step(&host(
        0,
        vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
    ));
    let d = c.step(&host(
        1,
        vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
    ));
    assert_ne!(d.memory.state, ReclamationState::High);
    let (busy, idle) = (&d.actions[0], &d.actions[1]);
    assert!(busy.target > mib(400), "{}", busy.reason);
    assert!(idle.target < mib(200), "{}", idle.reason);
    assert!(
        idle.moves().limit.unwrap() < mib(300),
        "the idle tenant steps down"
    );
    // The busy tenant's raise waits for the memory the idle one gives back.
    assert_eq!(busy.moves().limit, Some(mib(400)));
    let rail = busy.reason.mechanism.limit.unwrap().rail;
    assert!(matches!(rail, LimitRail::Budget { .. }), "{rail:?}");
    assert!(
        busy.reason.to_string().contains("waits for memory"),
        "{}",
        busy.reason
    );

    // With tax 0 both are squeezed alike.
    let mut flat = two_tenants(600, 0.0);
    flat.step(&host(
        0,
        vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
    ));
    flat.step(&host(
        0,
        vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
    ));
    let d = flat.step(&host(
        1,
        vec![cgroup(0, 400, 400, 400), cgroup(1, 300, 300, 10)],
    ));
    assert_eq!(d.actions[0].target, d.actions[1].target);
}

#[test]
fn the_limits_never_sum_above_the_budget_once_the_shrinks_are_done() {
    let mut c = two_tenants(600, 0.75);
    let (mut busy, mut idle) = (400u64, 300u64);
    let mut last = Vec::new();
    for now in 1..120 {
        let d = c.step(&host(
            now,
            vec![cgroup(0, busy, busy, 400), cgroup(1, idle, idle, 10)],
        ));
        let limits: Vec<u64> = d
            .actions
            .iter()
            .map(|a| a.moves().limit.unwrap().0)
            .collect();
        // Each tenant holds what its limit lets it (the busy one wants 450).
        busy = (limits[0] >> 8).min(450);
        idle = (limits[1] >> 8).min(300);
        let sum: u64 = limits.iter().sum();
        if now > 40 {
            assert!(sum <= mib(600).0, "tick {now}: {sum}");
        }
        last = limits;
    }
    // The busy tenant ends above its 400 MiB active estimate, the idle one well below the
    // 300 MiB it held; the limits fill the budget.
    assert!(last[0] > mib(420).0, "{last:?}");
    assert!(last[1] < mib(200).0, "{last:?}");
    assert!(last.iter().sum::<u64>() > mib(590).0, "{last:?}");
}

#[test]
fn a_limit_just_above_what_the_tenant_holds_is_not_ratcheted_down_while_not_wanted() {
    let mut c = two_tenants(1000, 0.75);
    c.step(&host(
        1,
        vec![cgroup(0, 400, 410, 400), cgroup(1, 300, 1024, 10)],
    ));
    // Usage wobbles a little under the limit: the limit stays.
    for (now, held) in [(2, 405), (3, 402), (4, 407), (5, 403)] {
        let d = c.step(&host(
            now,
            vec![cgroup(0, held, 410, 400), cgroup(1, 300, 1024, 10)],
        ));
        assert!(
            d.actions[0].moves().limit.unwrap() >= mib(410),
            "{}",
            d.actions[0].reason
        );
    }
}

#[test]
fn nothing_is_reclaimed_before_the_estimates_are_measured() {
    let config = ControllerConfig {
        budget: Some(mib(600)),
        ..ControllerConfig::default()
    };
    let mut c = Controller::new(config, mib(600), mib(8192)).unwrap();
    for id in 0..2 {
        c.admit(TenantSpec {
            estimator: EstimatorConfig::Sampling(Default::default()),
            ..spec(id)
        })
        .unwrap();
    }
    // 800 MiB held against 600: short, but sampling has measured nothing yet.
    for now in 1..10 {
        let d = c.step(&host(
            now,
            vec![cgroup(0, 400, 400, 0), cgroup(1, 400, 400, 0)],
        ));
        for a in &d.actions {
            assert!(a.moves().limit.unwrap() >= mib(400), "{}", a.reason);
        }
    }
}

#[test]
fn host_pressure_does_not_hold_a_tenants_shrink() {
    let mut c = controller(300);
    c.step(&host(0, vec![limited(0, 400, 400, Some(0))]));
    let mut obs = host(1, vec![limited(0, 400, 400, Some(0))]);
    obs.pressure = Some(80.0);
    let d = c.step(&obs);
    assert_eq!(
        d.actions[0].moves().limit,
        Some(mib(380)),
        "{}",
        d.actions[0].reason
    );
}

#[test]
fn tenants_without_a_limit_keep_the_balloon_and_swap_plan() {
    let mut c = controller(300);
    let d = c.step(&host(
        1,
        vec![TenantObservation::new(TenantId(0), mib(400))],
    ));
    assert_eq!(d.actions[0].moves().limit, None);
    assert!(d.actions[0].reason.mechanism.limit.is_none());
}

// Admission (`admit`, `remove`, `update_tenant`).

#[test]
fn admission_refuses_a_duplicate_a_min_above_max_and_what_does_not_fit() {
    let mut c = Controller::new(ControllerConfig::default(), mib(1024), mib(1024)).unwrap();
    c.admit(spec(0)).unwrap();
    assert_eq!(
        c.admit(spec(0)),
        Err(ControllerError::Duplicate(TenantId(0)))
    );
    let inverted = TenantSpec {
        min: mib(2048),
        ..spec(1)
    };
    assert!(matches!(
        c.admit(inverted),
        Err(ControllerError::MinAboveMax { .. })
    ));
    // 1024 MiB of machine memory: a second 1000 MiB floor does not fit beside the first 64.
    let big = TenantSpec {
        min: mib(1000),
        max: mib(1000),
        ..spec(2)
    };
    assert!(matches!(c.admit(big), Err(ControllerError::Refused(_))));
    assert_eq!(c.tenants().count(), 1);
}

#[test]
fn a_removed_tenant_releases_its_reservation() {
    let mut c = Controller::new(ControllerConfig::default(), mib(1024), mib(2048)).unwrap();
    let big = |id| TenantSpec {
        min: mib(600),
        ..spec(id)
    };
    c.admit(big(0)).unwrap();
    assert!(c.admit(big(1)).is_err());
    assert_eq!(c.remove(TenantId(0)).map(|s| s.id), Some(TenantId(0)));
    assert_eq!(c.remove(TenantId(0)), None);
    c.admit(big(1)).unwrap();
}

#[test]
fn an_update_that_does_not_fit_keeps_the_old_parameters() {
    let mut c = Controller::new(ControllerConfig::default(), mib(1024), mib(2048)).unwrap();
    c.admit(spec(0)).unwrap();
    c.update_tenant(TenantId(0), mib(128), mib(512), 500)
        .unwrap();
    let t = c.tenant(TenantId(0)).unwrap();
    assert_eq!(
        (t.spec.min, t.spec.max, t.spec.shares),
        (mib(128), mib(512), 500)
    );
    let refused = c.update_tenant(TenantId(0), mib(2000), mib(2000), 1);
    assert!(matches!(refused, Err(ControllerError::Refused(_))));
    let t = c.tenant(TenantId(0)).unwrap();
    assert_eq!(
        (t.spec.min, t.spec.max, t.spec.shares),
        (mib(128), mib(512), 500)
    );
    // The old reservation is back: the room beside it is what it was.
    c.admit(TenantSpec {
        min: mib(1024 - 128),
        ..spec(1)
    })
    .unwrap();
    assert_eq!(
        c.update_tenant(TenantId(7), mib(1), mib(2), 1),
        Err(ControllerError::Unknown(TenantId(7)))
    );
}

// The reclamation state (`update_state`).

/// A controller without a configured budget on an 8 GiB machine, and `spec(0)` admitted.
fn unbudgeted() -> Controller {
    let mut c = Controller::new(ControllerConfig::default(), mib(8192), mib(8192)).unwrap();
    c.admit(spec(0)).unwrap();
    c
}

/// `host` with `free_pct` percent of the machine free.
fn with_free(free_pct: f64, tenants: Vec<TenantObservation>) -> HostObservation {
    let mut obs = host(1, tenants);
    obs.free = obs.machine.scale(free_pct / 100.0);
    obs
}

#[test]
fn the_state_follows_free_memory_down_at_once_and_up_past_the_hysteresis() {
    let mut c = unbudgeted();
    let mut walk = |free_pct| c.update_state(&with_free(free_pct, vec![]));
    assert_eq!(walk(10.0), ReclamationState::High);
    // Below the 4% soft threshold.
    assert_eq!(walk(3.0), ReclamationState::Soft);
    // Above the 6% high threshold, not above it by the 1% hysteresis.
    assert_eq!(walk(6.5), ReclamationState::Soft);
    assert_eq!(walk(7.5), ReclamationState::High);
    assert_eq!(walk(0.5), ReclamationState::Low);
    // Up one state at a time.
    assert_eq!(walk(50.0), ReclamationState::Hard);
}

#[test]
fn a_budget_s_state_counts_only_the_memory_it_bounds() {
    let config = ControllerConfig {
        budget: Some(mib(1000)),
        ..ControllerConfig::default()
    };
    let vm = TenantObservation::new(TenantId(1), mib(995));
    // Plenty free on the machine; 995 MiB of a 1000 MiB budget held by a VM: not counted.
    let mut c = Controller::new(config.clone(), mib(8192), mib(8192)).unwrap();
    let obs = with_free(50.0, vec![limited(0, 0, 1024, None), vm.clone()]);
    assert_eq!(c.update_state(&obs), ReclamationState::High);
    // The same held under a limit leaves 0.5% of the budget: low.
    let obs = with_free(50.0, vec![limited(0, 995, 1024, None)]);
    assert_eq!(c.update_state(&obs), ReclamationState::Low);
    // On a shared host every tenant's memory counts.
    let shared = ControllerConfig {
        shared_host: true,
        ..config
    };
    let mut c = Controller::new(shared, mib(8192), mib(8192)).unwrap();
    assert_eq!(
        c.update_state(&with_free(50.0, vec![vm])),
        ReclamationState::Low
    );
}

#[test]
fn the_step_reports_the_state_and_wants_memory_only_once_measured() {
    let mut c = controller(300);
    let d = c.step(&host(1, vec![limited(0, 400, 400, Some(0))]));
    // 400 MiB held against a 300 MiB budget: short at once, but nothing is measured yet.
    assert_eq!(d.memory.state, ReclamationState::Low);
    assert_eq!(c.state(), ReclamationState::Low);
    assert_eq!(d.actions[0].moves().limit, Some(mib(400)));
}

// The time between steps (`elapsed`).

#[test]
fn elapsed_is_the_time_since_the_last_observation_and_none_at_first() {
    let mut c = unbudgeted();
    assert_eq!(c.elapsed(Duration::from_secs(5)), None);
    assert_eq!(
        c.elapsed(Duration::from_secs(7)),
        Some(Duration::from_secs(2))
    );
    // No time passed: no rate.
    assert_eq!(c.elapsed(Duration::from_secs(7)), None);
}

// The first pass (`estimate`).

#[test]
fn only_running_admitted_tenants_get_actions_in_id_order() {
    let mut c = unbudgeted();
    c.admit(spec(2)).unwrap();
    let obs = host(
        1,
        (0..4)
            .map(|i| TenantObservation::new(TenantId(i), mib(100)))
            .collect(),
    );
    // The last decision's buffer held more actions than this step has.
    let mut actions = vec![TenantAction::none(TenantId(9), ReclamationState::Low); 5];
    c.estimate(&obs, ReclamationState::High, false, &mut actions);
    let ids: Vec<TenantId> = actions.iter().map(|a| a.id).collect();
    assert_eq!(ids, vec![TenantId(0), TenantId(2)]);
    let observed: Vec<usize> = c.pending.iter().map(|p| p.observed).collect();
    assert_eq!(observed, vec![0, 2]);
    let requested: Vec<TenantId> = c.requests.iter().map(|r| r.id).collect();
    assert_eq!(requested, ids);
}

#[test]
fn the_estimator_s_estimate_goes_into_the_action_and_the_request() {
    let mut c = unbudgeted();
    c.admit(TenantSpec {
        cap_at_estimate: true,
        shares: 3000,
        overhead: mib(8),
        ..spec(1)
    })
    .unwrap();
    let committed = |id, m| TenantObservation {
        committed: Some(mib(m)),
        ..TenantObservation::new(TenantId(id), mib(700))
    };
    let obs = host(1, vec![committed(0, 300), committed(1, 300)]);
    let mut actions = Vec::new();
    let pass = c.estimate(&obs, ReclamationState::High, false, &mut actions);
    assert_eq!(actions[0].active_estimate, mib(300));
    assert_eq!(actions[1].active_estimate, mib(300));
    let (free, capped) = (&c.requests[0], &c.requests[1]);
    assert_eq!(
        (free.min, free.ceiling, free.shares),
        (mib(64), mib(1024), 1000)
    );
    // Capped at its estimate.
    assert_eq!(
        (capped.min, capped.ceiling, capped.shares),
        (mib(64), mib(300), 3000)
    );
    assert_eq!(pass.overheads, mib(8));
    // No tenant under a limit: the budget binds nobody.
    assert!(!pass.budget_bound);
}

#[test]
fn the_first_pass_knows_whether_the_budget_s_tenants_are_measured() {
    let config = ControllerConfig {
        budget: Some(mib(600)),
        ..ControllerConfig::default()
    };
    let mut c = Controller::new(config, mib(8192), mib(8192)).unwrap();
    c.admit(spec(0)).unwrap();
    c.admit(TenantSpec {
        estimator: EstimatorConfig::Sampling(Default::default()),
        ..spec(1)
    })
    .unwrap();
    let mut actions = Vec::new();
    // The committed tenant is measured, the sampled one not yet.
    let obs = host(1, vec![cgroup(0, 300, 400, 300), cgroup(1, 300, 400, 0)]);
    let pass = c.estimate(&obs, ReclamationState::High, false, &mut actions);
    assert!(pass.budget_bound && !pass.measured);
    let obs = host(1, vec![cgroup(0, 300, 400, 300)]);
    let pass = c.estimate(&obs, ReclamationState::High, false, &mut actions);
    assert!(pass.budget_bound && pass.measured);
}

// The budget (`budget`).

#[test]
fn without_a_configured_budget_allocation_divides_the_machine_less_overheads_and_reserve() {
    let c = unbudgeted();
    let mut obs = host(1, vec![]);
    // 8192 MiB less 100 of overheads and the 6% high-state reserve (491.52 MiB).
    let reserve = mib(8192).scale(0.06);
    assert_eq!(c.budget(&obs, mib(100)), mib(8092) - reserve);
    // Memory page sharing reclaimed is handed out too.
    obs.sharing = Some(memtide_model::HostSharing {
        shared: mib(50),
        frames: mib(10),
        ..Default::default()
    });
    assert_eq!(c.budget(&obs, mib(100)), mib(8092 + 40) - reserve);
    // A configured budget is the budget.
    assert_eq!(controller(300).budget(&obs, mib(100)), mib(300));
}

// Allocation and planning (`plan`).

#[test]
fn allocation_divides_a_short_budget_by_shares_and_each_target_is_planned() {
    let mut c = controller(900);
    c.admit(TenantSpec {
        shares: 2000,
        ..spec(1)
    })
    .unwrap();
    // Both fully active: the budget goes by shares.
    let vm = |id| TenantObservation {
        committed: Some(mib(1024)),
        ..TenantObservation::new(TenantId(id), mib(1000))
    };
    let d = c.step(&host(1, vec![vm(0), vm(1)]));
    let (t0, t1) = (d.actions[0].target, d.actions[1].target);
    assert_eq!(t0 + t1, mib(900));
    assert!(t1.0.abs_diff(2 * t0.0) <= 2, "{t0} {t1}");
    assert_eq!(d.memory.budget, mib(900));
    // Each action's plan is for its own target: a VM without levers has no mechanism, and
    // its note says what it holds against that target.
    for a in &d.actions {
        assert_eq!(a.reason.mechanism.allocated, mib(1000));
        assert_eq!(a.reason.mechanism.target, a.target);
        assert!(a.mechanisms.is_empty());
    }
}

/// A cgroup tenant on a shared disk at `weight`, whose I/O took `latency_us` per operation.
fn on_disk(id: u32, weight: u32, latency_us: f64) -> TenantObservation {
    let mut t = cgroup(id, 100, 1024, 100);
    t.levers.disk = Some(Box::new(memtide_model::DiskIo {
        weight: Some(weight),
        ops: 100,
        latency_us: Some(latency_us),
        ..Default::default()
    }));
    t
}

#[test]
fn a_tenant_on_a_shared_disk_gets_its_weight_raised_while_it_misses_its_target() {
    let mut c = unbudgeted();
    let disk = memtide_model::DiskSpec {
        weight: 100,
        latency_target_us: Some(1000),
    };
    c.admit(TenantSpec {
        disk: Some(disk),
        ..spec(1)
    })
    .unwrap();
    let d = c.step(&host(
        1,
        vec![on_disk(0, 100, 5000.0), on_disk(1, 100, 5000.0)],
    ));
    // Tenant 0 has no disk in its spec: no weight is set for it.
    assert_eq!(d.actions[0].reason.disk, None);
    assert_eq!(d.actions[0].moves().disk_weight, None);
    assert_eq!(d.actions[1].moves().disk_weight, Some(200));
    let d = c.step(&host(
        2,
        vec![on_disk(0, 100, 5000.0), on_disk(1, 200, 5000.0)],
    ));
    assert_eq!(d.actions[1].moves().disk_weight, Some(400));
    // A reload that drops the disk from its spec ends the weight's moves.
    c.set_disk(TenantId(1), None).unwrap();
    let d = c.step(&host(3, vec![on_disk(1, 400, 5000.0)]));
    assert_eq!(d.actions[0].reason.disk, None);
    assert_eq!(
        c.set_disk(TenantId(5), Some(disk)),
        Err(ControllerError::Unknown(TenantId(5)))
    );
}

#[test]
fn the_disk_weight_does_not_change_the_memory_plan() {
    let mut plain = unbudgeted();
    let mut weighted = unbudgeted();
    weighted
        .set_disk(
            TenantId(0),
            Some(memtide_model::DiskSpec {
                weight: 100,
                latency_target_us: Some(1000),
            }),
        )
        .unwrap();
    for now in 1..5 {
        let a = plain.step(&host(now, vec![on_disk(0, 100, 5000.0)]));
        let b = weighted.step(&host(now, vec![on_disk(0, 100, 5000.0)]));
        assert_eq!(a.actions[0].target, b.actions[0].target);
        assert_eq!(a.actions[0].mechanisms, b.actions[0].mechanisms);
        assert_eq!(a.actions[0].reason.mechanism, b.actions[0].reason.mechanism);
        assert!(b.actions[0].reason.disk.is_some());
    }
}
