//! Criterion benchmark: one controller step (estimators, state, allocation, mechanism choice) for many tenants, as the runner takes it (into the last decision's buffers).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use memtide_controller::fixture::overcommitted_vms;
use memtide_model::Decision;

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("controller_step");
    for n in [100u32, 10_000] {
        // As the runner steps: into the last tick's decision, whose buffers are reused.
        let (mut controller, obs) = overcommitted_vms(n);
        let mut decision = Decision::default();
        group.bench_with_input(BenchmarkId::from_parameter(n), &obs, |b, obs| {
            b.iter(|| controller.step_into(std::hint::black_box(obs), &mut decision))
        });
    }
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
