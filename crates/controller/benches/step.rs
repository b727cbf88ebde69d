//! Criterion benchmark: one controller step (estimators, state, allocation, mechanism choice) for many tenants, as the runner takes it (into the last decision's buffers).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use memtide_controller::{Controller, ControllerConfig};
use memtide_model::{
    BalloonDriverInfo, BalloonLever, Decision, EstimatorConfig, HostObservation, HostSwapLever,
    Levers, Pages, SampleCounts, SamplingConfig, TenantId, TenantObservation, TenantSpec,
};
use std::time::Duration;

/// An overcommitted host with `n` sampled tenants of 1 GiB.
fn setup(n: u32) -> (Controller, HostObservation) {
    let machine = Pages::from_mib(u64::from(n) * 600);
    let mut controller = Controller::new(
        ControllerConfig::default(),
        machine,
        Pages::from_mib(u64::from(n) * 1024),
    )
    .expect("default config is valid");
    let mut tenants = Vec::with_capacity(n as usize);
    for i in 0..n {
        let spec = TenantSpec {
            id: TenantId(i),
            name: format!("t{i}"),
            min: Pages::from_mib(64),
            max: Pages::from_mib(1024),
            shares: 1000 + u64::from(i % 7) * 100,
            overhead: Pages::from_mib(8),
            estimator: EstimatorConfig::Sampling(SamplingConfig::default()),
            cap_at_estimate: false,
        };
        controller.admit(spec).expect("fits");
        let mut obs =
            TenantObservation::new(TenantId(i), Pages::from_mib(512 + u64::from(i % 512)));
        // An ESX VM: a balloon driver and host swap.
        obs.levers = Levers {
            balloon: Some(BalloonLever {
                size: Pages::from_mib(u64::from(i % 64)),
                driver: Some(BalloonDriverInfo {
                    rate_per_s: Pages::from_mib(128),
                    limit: Pages::from_mib(1000),
                }),
            }),
            host_swap: Some(HostSwapLever {
                swapped: Pages::ZERO,
                swap_ins: Some(0),
            }),
            ..Levers::default()
        };
        obs.sample = Some(SampleCounts {
            period: 0,
            sampled: 100,
            touched: i % 101,
            completed: None,
        });
        tenants.push(obs);
    }
    let obs = HostObservation {
        now: Duration::from_secs(1),
        machine,
        free: machine.scale(0.03),
        host_swap_total: Pages::ZERO,
        host_swap_used: Pages::ZERO,
        pressure: None,
        tenants,
    };
    (controller, obs)
}

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("controller_step");
    for n in [100u32, 10_000] {
        // As the runner steps: into the last tick's decision, whose buffers are reused.
        let (mut controller, obs) = setup(n);
        let mut decision = Decision::default();
        group.bench_with_input(BenchmarkId::from_parameter(n), &obs, |b, obs| {
            b.iter(|| controller.step_into(std::hint::black_box(obs), &mut decision))
        });
    }
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
