//! Throughput of `Workload::fill` (accesses generated per second) for uniform and Zipf
//! workloads, and of the raw samplers underneath.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memtide_sim::cost::CostModel;
use memtide_sim::rng::SimRng;
use memtide_sim::workload::{Pace, Skew, TouchPhase, Workload, WorkloadConfig};
use memtide_sim::zipf::Zipf;

const BATCH: usize = 64 * 1024;

fn toucher(mb: f64, skew: Skew) -> WorkloadConfig {
    WorkloadConfig::Toucher {
        phases: vec![TouchPhase {
            at_s: 0.0,
            working_set_mb: mb,
        }],
        allocated_mb: None,
        skew,
        pace: Pace::default(),
    }
}

fn oltp(data_mb: f64) -> WorkloadConfig {
    WorkloadConfig::Oltp {
        buffer_pool_mb: 0.0,
        data_mb,
        anon_mb: 32.0,
        file_fraction: 0.8,
        skew: Skew::Zipf { theta: 0.9 },
        pace: Pace::default(),
    }
}

fn file_server(file_set_mb: f64) -> WorkloadConfig {
    WorkloadConfig::FileServer {
        file_set_mb,
        anon_mb: 16.0,
        skew: Skew::Uniform,
        pace: Pace::default(),
    }
}

fn fill(c: &mut Criterion) {
    let cost = CostModel::default();
    let cases = [
        ("toucher_uniform_1GiB", toucher(1024.0, Skew::Uniform)),
        ("file_server_uniform_1GiB", file_server(1024.0)),
        (
            "toucher_zipf0.9_1GiB",
            toucher(1024.0, Skew::Zipf { theta: 0.9 }),
        ),
        (
            "toucher_zipf1.2_1GiB",
            toucher(1024.0, Skew::Zipf { theta: 1.2 }),
        ),
        ("oltp_zipf0.9_2GiB", oltp(2048.0)),
        ("oltp_zipf0.9_1500MiB", oltp(1500.0)),
    ];
    let mut group = c.benchmark_group("workload_fill");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, config) in cases {
        let mut w = Workload::new(&config, &cost).expect("valid bench config");
        let mut rng = SimRng::new(1);
        let mut out = Vec::with_capacity(BATCH);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                out.clear();
                w.fill(&mut rng, &mut out, BATCH);
                black_box(out.len())
            })
        });
    }
    group.finish();
}

fn samplers(c: &mut Criterion) {
    let mut group = c.benchmark_group("samplers");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut rng = SimRng::new(2);
    group.bench_function("rng_below", |b| {
        b.iter(|| (0..BATCH).fold(0u64, |acc, _| acc ^ rng.below(black_box(262_144))))
    });
    for theta in [0.9, 1.2] {
        let z = Zipf::new(1 << 18, theta);
        group.bench_function(BenchmarkId::new("zipf_sample", theta), |b| {
            b.iter(|| (0..BATCH).fold(0u64, |acc, _| acc ^ z.sample(&mut rng)))
        });
    }
    group.finish();
}

criterion_group!(benches, fill, samplers);
criterion_main!(benches);
