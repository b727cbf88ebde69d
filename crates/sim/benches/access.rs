//! Simulated page accesses per second on one core: a VM whose working set is resident, run tick by tick through `SimWorld`.
//!
//! The workload's CPU time per access is set to 50 ns, so a 10 ms tick is 200,000 accesses
//! and the measured time is the simulator's own cost per access. Target: >= 20 M/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memtide_controller::Host;
use memtide_model::{Pages, TenantId};
use memtide_sim::config::{HostConfig, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::{Pace, Skew, TouchPhase, WorkloadConfig};
use memtide_sim::SimWorld;
use std::time::Duration;

fn resident_vm(working_set_mb: f64, skew: Skew) -> (SimWorld, u64) {
    let mut world = SimWorld::new(
        HostConfig {
            machine: Pages::from_mib(2048),
            host_swap: Pages::ZERO,
            tick: Duration::from_millis(10),
            sharing: None,
            io_remap: None,
            disk: None,
        },
        CostModel::default(),
        7,
    );
    let id = TenantId(0);
    let vm = VmConfig {
        kind: TenantKind::Vm,
        max: Pages::from_mib(1024),
        overhead: Pages::from_mib(32),
        kernel: Pages::from_mib(16),
        guest_swap: Pages::ZERO,
        balloon: None,
        initial_balloon: Pages::ZERO,
        sampling: None,
        workload: WorkloadConfig::Toucher {
            phases: vec![TouchPhase {
                at_s: 0.0,
                working_set_mb,
            }],
            allocated_mb: None,
            skew,
            pace: Pace {
                cpu_us_per_access: Some(0.05),
                accesses_per_op: None,
                max_accesses_per_s: None,
            },
        },
        content: Default::default(),
        io: None,
        disk: None,
    };
    world.power_on(id, vm).expect("the bench VM fits");
    // Warm up until every page of the working set has been touched.
    let pages = Pages::from_mib_f64(working_set_mb).0;
    for _ in 0..10_000 {
        world.run_tick();
        if world.observe().expect("observe").tenants[0]
            .anon
            .is_some_and(|a| a.0 >= pages)
        {
            break;
        }
    }
    world.run_tick();
    let per_tick = world.tenant_stats(id).map_or(1, |s| s.accesses);
    (world, per_tick)
}

fn access(c: &mut Criterion) {
    let mut group = c.benchmark_group("resident_access");
    for (name, skew) in [
        ("uniform_512mb", Skew::Uniform),
        ("zipf_512mb", Skew::Zipf { theta: 0.9 }),
    ] {
        let (mut world, per_tick) = resident_vm(512.0, skew);
        group.throughput(Throughput::Elements(per_tick));
        group.bench_function(name, |b| b.iter(|| world.run_tick()));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = access
}
criterion_main!(benches);
