//! Behaviour of the simulated host through its public API: ballooning, host paging, double paging, refaults, sampling, blocking, determinism.

use memtide_controller::Host;
use memtide_model::{
    Decision, HostObservation, Moves, Pages, ReclamationState, TenantAction, TenantId,
    TenantObservation,
};
use memtide_sim::config::{BalloonConfig, HostConfig, SamplingSetup, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::guest::Owner;
use memtide_sim::pmap::PageState;
use memtide_sim::workload::{Pace, Skew, TouchPhase, WorkloadConfig};
use memtide_sim::{SimError, SimWorld, TickStats};
use std::time::Duration;

const A: TenantId = TenantId(1);
const B: TenantId = TenantId(2);

fn mib(m: u64) -> Pages {
    Pages::from_mib(m)
}

fn world(machine_mib: u64, swap_mib: u64, seed: u64) -> SimWorld {
    let cost = CostModel {
        disk_read_us: 100.0,
        guest_swap_in_us: 100.0,
        host_swap_in_us: 100.0,
        ..CostModel::default()
    };
    SimWorld::new(
        HostConfig {
            machine: mib(machine_mib),
            host_swap: mib(swap_mib),
            tick: Duration::from_secs(1),
            sharing: None,
            io_remap: None,
            disk: None,
        },
        cost,
        seed,
    )
}

fn toucher(working_set_mb: f64) -> WorkloadConfig {
    WorkloadConfig::Toucher {
        phases: vec![TouchPhase {
            at_s: 0.0,
            working_set_mb,
        }],
        allocated_mb: None,
        skew: Skew::Uniform,
        pace: Pace::default(),
    }
}

fn oltp(data_mb: f64, anon_mb: f64) -> WorkloadConfig {
    WorkloadConfig::Oltp {
        buffer_pool_mb: 0.0,
        data_mb,
        anon_mb,
        file_fraction: 0.5,
        skew: Skew::Uniform,
        pace: Pace::default(),
    }
}

fn file_server(file_set_mb: f64) -> WorkloadConfig {
    WorkloadConfig::FileServer {
        file_set_mb,
        anon_mb: 0.0,
        skew: Skew::Uniform,
        pace: Pace::default(),
    }
}

/// A small VM: `max_mib` of guest memory, 1 MiB kernel, 1 MiB overhead.
fn vm(max_mib: u64, guest_swap_mib: u64, workload: WorkloadConfig) -> VmConfig {
    VmConfig {
        kind: TenantKind::Vm,
        max: mib(max_mib),
        overhead: mib(1),
        kernel: mib(1),
        guest_swap: mib(guest_swap_mib),
        balloon: None,
        initial_balloon: Pages::ZERO,
        sampling: None,
        content: Default::default(),
        workload,
        io: None,
        disk: None,
    }
}

fn with_driver(mut vm: VmConfig) -> VmConfig {
    vm.balloon = Some(BalloonConfig {
        starts_after: Duration::ZERO,
        rate_per_s: Pages(1 << 20),
        limit: vm.max,
    });
    vm
}

fn action(id: TenantId) -> TenantAction {
    TenantAction {
        target: Pages(u64::MAX),
        ..TenantAction::none(id, ReclamationState::High)
    }
}

/// An action for `id` that moves its levers by `moves`.
fn moving(id: TenantId, moves: Moves) -> TenantAction {
    let mut a = action(id);
    a.reason.mechanism = a.reason.mechanism.with_moves(moves);
    a
}

fn apply(w: &mut SimWorld, actions: Vec<TenantAction>) {
    let decision = Decision {
        now: w.now(),
        memory: memtide_model::ResourceState {
            resource: memtide_model::Resource::Memory,
            state: ReclamationState::High,
            budget: Pages::ZERO,
        },
        sharing: None,
        actions,
    };
    w.apply(&decision).unwrap();
}

/// Sets a balloon target (optionally blocking the tenant so only the driver runs) and runs
/// one tick.
fn balloon_tick(w: &mut SimWorld, id: TenantId, target: Pages, blocked: bool) -> TickStats {
    apply(
        w,
        vec![moving(
            id,
            Moves {
                balloon: Some(target),
                blocked,
                ..Moves::default()
            },
        )],
    );
    w.run_tick();
    w.tenant_stats(id).unwrap().clone()
}

fn observe(w: &mut SimWorld, id: TenantId) -> TenantObservation {
    let obs: HostObservation = w.observe().unwrap();
    obs.tenants.into_iter().find(|t| t.id == id).unwrap()
}

fn run(w: &mut SimWorld, ticks: u32) {
    for _ in 0..ticks {
        w.run_tick();
    }
}

#[test]
fn balloon_takes_free_pages_then_page_cache_then_swaps_anon() {
    let mut w = world(64, 0, 1);
    // 8 MiB guest: 1 MiB kernel, 2 MiB anon, 2 MiB cache, 3 MiB free.
    w.power_on(A, with_driver(vm(8, 8, oltp(2.0, 2.0))))
        .unwrap();
    run(&mut w, 5);
    let g = w.guest(A).unwrap();
    assert_eq!((g.anon_resident(), g.cache_resident()), (512, 512));
    let free = g.free();
    assert_eq!(free, 768);

    // Blocked, so only the driver runs.
    balloon_tick(&mut w, A, Pages(700), true);
    let g = w.guest(A).unwrap();
    assert_eq!((g.balloon(), g.free()), (700, 68));
    assert_eq!((g.cache_resident(), g.anon_resident()), (512, 512));

    balloon_tick(&mut w, A, Pages(1000), true);
    let g = w.guest(A).unwrap();
    assert_eq!(g.free(), 0);
    assert_eq!(g.cache_resident(), 512 - 232);
    assert_eq!((g.anon_resident(), g.counters.swap_outs), (512, 0));

    let s = balloon_tick(&mut w, A, Pages(1000 + 280 + 100), true);
    let g = w.guest(A).unwrap();
    assert_eq!(g.cache_resident(), 0);
    assert_eq!(g.anon_resident(), 412);
    assert_eq!(s.swap_outs, 100);
    assert_eq!(g.balloon(), 1380);
}

#[test]
fn inflation_frees_machine_memory() {
    let mut w = world(64, 0, 2);
    w.power_on(A, with_driver(vm(8, 8, toucher(7.0)))).unwrap();
    run(&mut w, 3);
    let before = observe(&mut w, A);
    let free_before = w.free();
    assert_eq!(before.allocated, mib(8));
    balloon_tick(&mut w, A, Pages(300), true);
    let after = observe(&mut w, A);
    assert_eq!(after.levers.balloon_size(), Pages(300));
    assert_eq!(after.allocated, before.allocated - Pages(300));
    assert_eq!(w.free(), free_before + Pages(300));
}

#[test]
fn deflation_leaves_pages_unbacked_until_the_guest_touches_them() {
    let mut w = world(64, 0, 3);
    let mut config = with_driver(vm(8, 8, toucher(6.0)));
    config.initial_balloon = mib(4);
    w.power_on(A, config).unwrap();
    let first_ballooned = mib(4).0 as u32;
    assert_eq!(
        w.pmap(A).unwrap().state(first_ballooned),
        PageState::Ballooned
    );
    run(&mut w, 2);
    let squeezed = observe(&mut w, A);
    assert!(squeezed.allocated <= mib(4));
    assert!(
        w.tenant_stats(A).unwrap().swap_ins > 0,
        "6 MiB in 3 MiB thrashes"
    );

    let s = balloon_tick(&mut w, A, Pages::ZERO, true);
    assert_eq!(s.balloon_deflated, mib(4).0);
    let pmap = w.pmap(A).unwrap();
    assert_eq!(pmap.state(first_ballooned), PageState::Unbacked);
    assert_eq!(pmap.ballooned(), 0);
    assert_eq!(observe(&mut w, A).allocated, squeezed.allocated);

    apply(&mut w, vec![action(A)]);
    run(&mut w, 3);
    let s = w.tenant_stats(A).unwrap().clone();
    let grown = observe(&mut w, A);
    assert!(grown.allocated >= mib(7), "{grown:?}");
    assert_eq!(s.swap_ins, 0, "the working set fits again");
}

#[test]
fn host_swap_out_pages_random_victims_and_accesses_swap_them_back_in() {
    let mut w = world(64, 64, 4);
    w.power_on(A, vm(8, 0, toucher(7.0))).unwrap();
    run(&mut w, 3);
    apply(
        &mut w,
        vec![moving(
            A,
            Moves {
                host_swap_out: Pages(200),
                ..Moves::default()
            },
        )],
    );
    let obs = w.observe().unwrap();
    let a = &obs.tenants[0];
    assert_eq!(a.levers.host_swapped(), Pages(200));
    assert_eq!(a.allocated, mib(8) - Pages(200));
    assert_eq!(obs.host_swap_used, Pages(200));
    w.run_tick();
    let s = w.tenant_stats(A).unwrap().clone();
    assert_eq!(s.host_swap_outs, 200);
    assert!(s.host_swap_ins > 150, "{s:?}");
    assert_eq!(
        observe(&mut w, A).levers.host_swap.unwrap().swap_ins,
        Some(s.host_swap_ins)
    );
}

#[test]
fn guest_swapping_a_host_swapped_page_is_double_paging() {
    let mut w = world(64, 64, 5);
    w.power_on(A, with_driver(vm(8, 8, toucher(7.0)))).unwrap();
    run(&mut w, 3);
    apply(
        &mut w,
        vec![moving(
            A,
            Moves {
                host_swap_out: mib(4),
                blocked: true,
                ..Moves::default()
            },
        )],
    );
    let s = balloon_tick(&mut w, A, mib(2), true);
    assert!(s.swap_outs > 0);
    assert!(s.double_pagings > 0, "{s:?}");
    assert!(s.double_pagings <= s.swap_outs);
    assert_eq!(s.host_swap_ins, s.double_pagings);
}

#[test]
fn refaults_count_only_blocks_evicted_before() {
    let mut w = world(64, 0, 6);
    // Fits: 2 MiB of files in a 4 MiB guest.
    w.power_on(A, vm(4, 0, file_server(2.0))).unwrap();
    // Does not fit: 8 MiB of files in a 4 MiB guest.
    w.power_on(B, vm(4, 0, file_server(8.0))).unwrap();
    let mut reads = [0u64; 2];
    let mut refaults = [0u64; 2];
    for _ in 0..4 {
        w.run_tick();
        for (i, id) in [A, B].into_iter().enumerate() {
            let s = w.tenant_stats(id).unwrap();
            reads[i] += s.disk_reads;
            refaults[i] += s.refaults;
        }
    }
    assert_eq!(reads[0], 512, "each block read once");
    assert_eq!(refaults[0], 0);
    assert!(refaults[1] > 0);
    assert!(refaults[1] < reads[1]);
}

#[test]
fn a_vm_without_a_driver_ignores_balloon_targets() {
    let mut w = world(64, 0, 7);
    w.power_on(A, vm(8, 8, toucher(4.0))).unwrap();
    balloon_tick(&mut w, A, mib(4), false);
    let a = observe(&mut w, A);
    assert_eq!(a.levers.balloon_size(), Pages::ZERO);
    assert_eq!(a.levers.balloon.unwrap().driver, None);
}

#[test]
fn a_blocked_tenant_does_no_accesses() {
    let mut w = world(64, 0, 8);
    w.power_on(A, vm(8, 0, toucher(4.0))).unwrap();
    w.run_tick();
    assert!(w.tenant_stats(A).unwrap().accesses > 0);
    apply(
        &mut w,
        vec![moving(
            A,
            Moves {
                blocked: true,
                ..Moves::default()
            },
        )],
    );
    w.run_tick();
    let s = w.tenant_stats(A).unwrap();
    assert!(s.blocked);
    assert_eq!((s.accesses, s.throughput), (0, 0.0));
    // Unmentioned in the next decision: unblocked.
    apply(&mut w, vec![]);
    w.run_tick();
    assert!(w.tenant_stats(A).unwrap().accesses > 0);
}

#[test]
fn sampling_counts_touched_sampled_pages_and_reports_completed_periods() {
    let mut w = world(64, 0, 9);
    let sampling = Some(SamplingSetup {
        sample_pages: 100,
        period: Duration::from_secs(2),
    });
    let mut idle = vm(16, 0, toucher(0.0));
    idle.sampling = sampling.clone();
    let mut busy = vm(16, 0, toucher(15.0));
    busy.sampling = sampling;
    w.power_on(A, idle).unwrap();
    w.power_on(B, busy).unwrap();

    let first = w.observe().unwrap();
    for t in &first.tenants {
        let s = t.sample.unwrap();
        assert_eq!(
            (s.period, s.sampled, s.touched, s.completed),
            (0, 100, 0, None)
        );
    }
    w.run_tick();
    w.run_tick();
    let obs = w.observe().unwrap();
    let (a, b) = (
        obs.tenants[0].sample.unwrap(),
        obs.tenants[1].sample.unwrap(),
    );
    assert_eq!((a.period, b.period), (1, 1));
    let (ca, cb) = (a.completed.unwrap(), b.completed.unwrap());
    assert_eq!((ca.sampled, cb.sampled), (100, 100));
    assert_eq!(ca.touched, 0);
    // Everything but the kernel (1/16 of the VM) is touched.
    assert!(cb.touched >= 85, "{cb:?}");
    // Reported once.
    assert_eq!(
        w.observe().unwrap().tenants[1].sample.unwrap().completed,
        None
    );
    w.run_tick();
    let b = w.observe().unwrap().tenants[1].sample.unwrap();
    assert!(b.touched >= 80 && b.completed.is_none(), "{b:?}");
}

#[test]
fn ballooned_pages_are_never_touched() {
    let mut w = world(64, 0, 10);
    let mut config = vm(16, 0, toucher(7.0));
    config.initial_balloon = mib(8);
    config.sampling = Some(SamplingSetup {
        sample_pages: 200,
        period: Duration::from_secs(1),
    });
    w.power_on(A, config).unwrap();
    w.run_tick();
    let c = observe(&mut w, A).sample.unwrap().completed.unwrap();
    // At most the unballooned half (minus kernel) can be touched.
    assert!(c.touched < 120, "{c:?}");
    assert!(c.touched > 50, "{c:?}");
}

fn stats_sequence(seed: u64) -> Vec<TickStats> {
    let mut w = world(64, 16, seed);
    w.power_on(A, vm(4, 8, toucher(5.0))).unwrap();
    w.power_on(B, vm(8, 0, oltp(8.0, 1.0))).unwrap();
    let mut out = Vec::new();
    for i in 0..4 {
        apply(
            &mut w,
            vec![moving(
                B,
                Moves {
                    host_swap_out: Pages(i * 50),
                    ..Moves::default()
                },
            )],
        );
        w.run_tick();
        out.push(w.tenant_stats(A).unwrap().clone());
        out.push(w.tenant_stats(B).unwrap().clone());
    }
    out
}

#[test]
fn same_seed_same_stats_different_seed_different_stats() {
    assert_eq!(stats_sequence(11), stats_sequence(11));
    assert_ne!(stats_sequence(11), stats_sequence(12));
}

#[test]
fn power_off_returns_every_frame_and_swap_slot() {
    let mut w = world(32, 32, 13);
    let empty = w.observe().unwrap();
    w.power_on(A, with_driver(vm(8, 8, toucher(7.0)))).unwrap();
    run(&mut w, 2);
    apply(
        &mut w,
        vec![moving(
            A,
            Moves {
                host_swap_out: mib(2),
                balloon: Some(mib(1)),
                ..Moves::default()
            },
        )],
    );
    w.run_tick();
    let busy = w.observe().unwrap();
    assert!(busy.free < empty.free && busy.host_swap_used > Pages::ZERO);
    w.power_off(A).unwrap();
    let after = w.observe().unwrap();
    assert_eq!(
        (after.free, after.host_swap_used),
        (empty.free, Pages::ZERO)
    );
    assert!(after.tenants.is_empty());
    assert!(matches!(
        w.power_off(A),
        Err(SimError::UnknownTenant { .. })
    ));
}

#[test]
fn thrashing_lowers_throughput() {
    let mut w = world(64, 0, 14);
    w.power_on(A, vm(8, 16, toucher(6.0))).unwrap();
    w.power_on(B, vm(8, 16, toucher(12.0))).unwrap();
    run(&mut w, 3);
    let a = w.tenant_stats(A).unwrap().throughput;
    let b = w.tenant_stats(B).unwrap().throughput;
    assert!(b < a * 0.5, "resident {a}, thrashing {b}");
    assert!(w.tenant_stats(B).unwrap().swap_ins > 0);
}

#[test]
fn a_full_machine_takes_frames_from_the_vm_most_above_target() {
    // 12 MiB machine, two 8 MiB VMs with 1 MiB overhead each: 10 MiB for both.
    let mut w = world(12, 32, 15);
    w.power_on(A, vm(8, 0, toucher(7.0))).unwrap();
    w.run_tick();
    assert_eq!(observe(&mut w, A).allocated, mib(8));
    w.power_on(B, vm(8, 0, toucher(7.0))).unwrap();
    apply(
        &mut w,
        vec![
            TenantAction {
                target: mib(2),
                ..action(A)
            },
            TenantAction {
                target: mib(8),
                ..action(B)
            },
        ],
    );
    run(&mut w, 3);
    let obs = w.observe().unwrap();
    let (a, b) = (&obs.tenants[0], &obs.tenants[1]);
    assert_eq!(obs.free, Pages::ZERO);
    assert!(a.levers.host_swapped() > mib(5), "{a:?}");
    assert!(b.allocated > mib(7), "{b:?}");
    assert!(w.tenant_stats(A).unwrap().host_swap_outs > 0 || a.levers.host_swapped() > Pages::ZERO);
}

#[test]
fn a_full_machine_without_host_swap_stalls() {
    let mut w = world(6, 0, 16);
    w.power_on(A, vm(8, 0, toucher(7.0))).unwrap();
    w.run_tick();
    let s = w.tenant_stats(A).unwrap();
    assert_eq!(s.stalls, 1);
    assert_eq!(observe(&mut w, A).allocated, mib(5));
}

#[test]
fn overhead_that_does_not_fit_is_refused_with_the_values() {
    let mut w = world(12, 0, 17);
    let mut big = vm(8, 0, toucher(1.0));
    big.overhead = mib(32);
    let e = w.power_on(TenantId(3), big).unwrap_err();
    assert_eq!(
        e.to_string(),
        "tenant 3: overhead 32.0 MiB does not fit in 12.0 MiB of free machine memory"
    );
    assert!(w.tenant_ids().is_empty());
}

#[test]
fn bad_vm_sizes_and_unknown_tenants_are_errors() {
    let mut w = world(64, 0, 18);
    let mut bad = vm(8, 0, toucher(1.0));
    bad.kernel = mib(9);
    let e = w.power_on(A, bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "tenant 1: kernel = 9.0 MiB must be <= max = 8.0 MiB"
    );
    w.power_on(A, vm(8, 0, toucher(1.0))).unwrap();
    assert!(matches!(
        w.power_on(A, vm(8, 0, toucher(1.0))),
        Err(SimError::AlreadyRunning { .. })
    ));
    let decision = Decision {
        now: w.now(),
        memory: memtide_model::ResourceState {
            resource: memtide_model::Resource::Memory,
            state: ReclamationState::High,
            budget: Pages::ZERO,
        },
        sharing: None,
        actions: vec![action(B)],
    };
    assert_eq!(
        w.apply(&decision).unwrap_err().to_string(),
        "tenant 2: not running"
    );
}

#[test]
fn observation_reports_guest_figures_and_last_tick() {
    let mut w = world(64, 0, 19);
    w.power_on(A, vm(8, 0, oltp(2.0, 2.0))).unwrap();
    let a = observe(&mut w, A);
    assert_eq!(a.allocated, mib(1), "only the kernel is touched at boot");
    assert_eq!(a.committed, Some(mib(3)));
    assert_eq!(
        (
            a.swap_ins,
            a.refaults,
            a.levers.host_swap.and_then(|h| h.swap_ins),
        ),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!((a.throughput, a.latency_ms), (None, None));
    assert!(w.tenant_stats(A).is_none());
    run(&mut w, 3);
    let a = observe(&mut w, A);
    assert_eq!((a.anon, a.file), (Some(mib(2)), Some(mib(2))));
    assert!(a.throughput.unwrap() > 0.0 && a.latency_ms.unwrap() > 0.0);
}

#[test]
fn set_workload_frees_the_old_anonymous_memory_and_keeps_the_cache() {
    let mut w = world(64, 0, 20);
    w.power_on(A, vm(8, 0, oltp(2.0, 2.0))).unwrap();
    run(&mut w, 3);
    let allocated = observe(&mut w, A).allocated;
    w.set_workload(A, toucher(1.0)).unwrap();
    let g = w.guest(A).unwrap();
    assert_eq!((g.anon_resident(), g.cache_resident()), (0, 512));
    assert_eq!(g.owner(0), Owner::Kernel);
    let a = observe(&mut w, A);
    assert_eq!(a.committed, Some(mib(2)));
    assert_eq!(a.allocated, allocated, "freed guest pages stay backed");
}

/// Frames, slots and pages add up: the machine counts as many frames and slots in use as the
/// pmaps hold, the guest's owners cover its memory, and balloon, guest and pmap agree.
fn check_invariants(w: &mut SimWorld) {
    let obs = w.observe().unwrap();
    let (mut frames, mut slots) = (0u64, 0u64);
    for t in &obs.tenants {
        let (pmap, guest) = (w.pmap(t.id).unwrap(), w.guest(t.id).unwrap());
        for ppn in 0..pmap.len() {
            let state = pmap.state(ppn);
            match state {
                PageState::Mapped => frames += 1,
                PageState::HostSwapped => slots += 1,
                PageState::Ballooned | PageState::Unbacked => {}
            }
            let ballooned = state == PageState::Ballooned;
            assert_eq!(guest.owner(ppn) == Owner::Balloon, ballooned, "ppn {ppn}");
        }
        let owned = guest.kernel()
            + guest.anon_resident()
            + guest.cache_resident()
            + guest.balloon()
            + guest.free();
        assert_eq!(owned, guest.pages());
        assert_eq!(t.levers.balloon_size(), Pages(u64::from(guest.balloon())));
        assert_eq!(t.allocated, Pages(u64::from(pmap.mapped())));
    }
    let overheads = Pages(obs.tenants.len() as u64 * mib(1).0);
    assert_eq!(obs.host_swap_used, Pages(slots));
    assert_eq!(obs.free, obs.machine - overheads - Pages(frames));
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Tick,
        Decide {
            vm: u32,
            target_kib: u64,
            balloon: u64,
            swap_out: u64,
            blocked: bool,
        },
        Workload(u32, u8),
        PowerCycle(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Tick),
            3 => (0..3u32, 0..8192u64, 0..2048u64, 0..512u64, any::<bool>()).prop_map(
                |(vm, target_kib, balloon, swap_out, blocked)| Op::Decide {
                    vm,
                    target_kib,
                    balloon,
                    swap_out,
                    blocked
                }
            ),
            1 => (0..3u32, 0..3u8).prop_map(|(vm, w)| Op::Workload(vm, w)),
            1 => (0..3u32).prop_map(Op::PowerCycle),
        ]
    }

    fn workload(kind: u8) -> WorkloadConfig {
        let slow = Some(200.0);
        match kind {
            0 => WorkloadConfig::Toucher {
                phases: vec![TouchPhase {
                    at_s: 0.0,
                    working_set_mb: 7.0,
                }],
                allocated_mb: None,
                skew: Skew::Uniform,
                pace: Pace {
                    cpu_us_per_access: slow,
                    accesses_per_op: None,
                    max_accesses_per_s: None,
                },
            },
            1 => WorkloadConfig::Oltp {
                buffer_pool_mb: 0.0,
                data_mb: 6.0,
                anon_mb: 3.0,
                file_fraction: 0.5,
                skew: Skew::Zipf { theta: 0.9 },
                pace: Pace {
                    cpu_us_per_access: slow,
                    accesses_per_op: None,
                    max_accesses_per_s: None,
                },
            },
            _ => WorkloadConfig::FileServer {
                file_set_mb: 12.0,
                anon_mb: 1.0,
                skew: Skew::Uniform,
                pace: Pace {
                    cpu_us_per_access: slow,
                    accesses_per_op: None,
                    max_accesses_per_s: None,
                },
            },
        }
    }

    fn config(i: u32) -> VmConfig {
        let mut c = with_driver(vm(8, 2 + u64::from(i) * 3, workload(i as u8)));
        c.initial_balloon = mib(u64::from(i));
        c.sampling = Some(SamplingSetup {
            sample_pages: 50,
            period: Duration::from_secs(2),
        });
        if i == 2 {
            c.balloon = None;
            c.initial_balloon = Pages::ZERO;
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn frames_slots_and_pages_always_add_up(ops in proptest::collection::vec(op(), 1..24)) {
            // 20 MiB for three 8 MiB VMs and 3 MiB of overhead: overcommitted.
            let mut w = world(20, 8, 42);
            for i in 0..3 {
                w.power_on(TenantId(i), config(i)).unwrap();
            }
            for op in ops {
                match op {
                    Op::Tick => w.run_tick(),
                    Op::Decide { vm, target_kib, balloon, swap_out, blocked } => {
                        let mut a = moving(TenantId(vm), Moves {
                            balloon: Some(Pages(balloon)),
                            host_swap_out: Pages(swap_out),
                            blocked,
                            ..Moves::default()
                        });
                        a.target = Pages(target_kib / 4);
                        if w.tenant_ids().contains(&TenantId(vm)) {
                            apply(&mut w, vec![a]);
                        }
                    }
                    Op::Workload(vm, kind) => {
                        let _ = w.set_workload(TenantId(vm), workload(kind));
                    }
                    Op::PowerCycle(vm) => {
                        if w.power_off(TenantId(vm)).is_err() {
                            w.power_on(TenantId(vm), config(vm)).unwrap();
                        }
                    }
                }
                check_invariants(&mut w);
            }
        }
    }
}
