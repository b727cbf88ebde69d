//! `memtide bench`: measures a policy step for 10,000 tenants, simulated page accesses per second, and a 16-VM hour end to end.

use crate::progress::Progress;
use crate::run;
use memtide_controller::{Controller, ControllerConfig};
use memtide_model::{
    EstimatorConfig, HostObservation, Pages, SampleCounts, SamplingConfig, TenantId,
    TenantObservation, TenantSpec,
};
use memtide_sim::config::{HostConfig, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::{TouchPhase, WorkloadConfig};
use memtide_sim::world::SimWorld;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The 16-VM, one-hour scenario, embedded so the benchmark needs no files.
const SIXTEEN_VM_HOUR: &str = include_str!("../../../scenarios/bench-16vm-1h.toml");

/// One measured figure next to its target.
pub struct Figure {
    pub name: &'static str,
    pub value: String,
    pub target: &'static str,
    pub met: bool,
}

/// Runs all benchmarks, prints a table, and writes it as markdown when asked.
pub fn run(quick: bool, write: Option<&Path>) -> anyhow::Result<Vec<Figure>> {
    let figures = vec![
        policy_step(quick),
        sim_accesses(quick)?,
        sixteen_vm_hour(quick)?,
    ];
    let table = markdown(&figures, quick);
    print!("{table}");
    if let Some(path) = write {
        std::fs::write(path, table)?;
    }
    Ok(figures)
}

/// One controller step (estimators, reclamation state, allocation, mechanism choice) for
/// 10,000 tenants on an overcommitted host.
fn policy_step(quick: bool) -> Figure {
    const TENANTS: u32 = 10_000;
    let max = Pages::from_mib(1024);
    let mut controller = Controller::new(
        ControllerConfig::default(),
        Pages::from_mib(4 * 1024 * 1024),
        Pages::from_mib(16 * 1024 * 1024),
    )
    .expect("default controller config is valid");
    let mut tenants = Vec::with_capacity(TENANTS as usize);
    for i in 0..TENANTS {
        let spec = TenantSpec {
            id: TenantId(i),
            name: format!("t{i}"),
            min: Pages::from_mib(64),
            max,
            shares: 1000 + u64::from(i % 7) * 100,
            overhead: Pages::from_mib(32),
            estimator: EstimatorConfig::Sampling(SamplingConfig::default()),
            cap_at_estimate: false,
        };
        controller.admit(spec).expect("bench tenants fit");
        let mut obs =
            TenantObservation::new(TenantId(i), Pages::from_mib(512 + u64::from(i % 512)));
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
        machine: Pages::from_mib(4 * 1024 * 1024),
        free: Pages::from_mib(100 * 1024),
        host_swap_total: Pages::ZERO,
        host_swap_used: Pages::ZERO,
        pressure: None,
        tenants,
    };
    let iterations = if quick { 20 } else { 200 };
    controller.step(&obs); // warm up
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(controller.step(std::hint::black_box(&obs)));
    }
    let per_step = start.elapsed() / iterations;
    Figure {
        name: "policy step, 10,000 tenants",
        value: format!("{:.3} ms", per_step.as_secs_f64() * 1e3),
        target: "< 1 ms",
        met: per_step < Duration::from_millis(1),
    }
}

/// Simulated page accesses per second on one core: one VM touching a resident working set,
/// with the workload's own CPU time set near zero so the tick is all simulation.
fn sim_accesses(quick: bool) -> anyhow::Result<Figure> {
    let max = Pages::from_mib(1024);
    let mut world = SimWorld::new(
        HostConfig {
            machine: Pages::from_mib(4096),
            host_swap: Pages::ZERO,
            tick: Duration::from_secs(1),
        },
        CostModel::default(),
        7,
    );
    let id = TenantId(0);
    world.power_on(
        id,
        VmConfig {
            kind: TenantKind::Vm,
            max,
            overhead: Pages::from_mib(32),
            kernel: Pages::from_mib(16),
            guest_swap: Pages::ZERO,
            balloon: None,
            initial_balloon: Pages::ZERO,
            sampling: None,
            workload: WorkloadConfig::Toucher {
                phases: vec![TouchPhase {
                    at_s: 0.0,
                    working_set_mb: 512.0,
                }],
                allocated_mb: None,
                skew: Default::default(),
                cpu_us_per_access: Some(0.05),
                accesses_per_op: None,
                max_accesses_per_s: None,
            },
        },
    )?;
    // Warm up until the working set is resident.
    for _ in 0..3 {
        world.run_tick();
    }
    let ticks = if quick { 2 } else { 10 };
    let mut accesses = 0u64;
    let start = Instant::now();
    for _ in 0..ticks {
        world.run_tick();
        accesses += world.tenant_stats(id).map_or(0, |s| s.accesses);
    }
    let rate = accesses as f64 / start.elapsed().as_secs_f64();
    Ok(Figure {
        name: "simulated page accesses per second, one core",
        value: format!("{:.1} M/s", rate / 1e6),
        target: ">= 20 M/s",
        met: rate >= 20e6,
    })
}

/// The 16-VM, one-hour scenario end to end (build, run, summarise; no files written).
fn sixteen_vm_hour(quick: bool) -> anyhow::Result<Figure> {
    let overrides: Vec<String> = if quick {
        vec!["duration=10m".to_string()]
    } else {
        Vec::new()
    };
    let start = Instant::now();
    let scenario = memtide_scenario::parse_str(
        SIXTEEN_VM_HOUR,
        Path::new("scenarios/bench-16vm-1h.toml"),
        &overrides,
    )?;
    let record = run::run(&scenario, &Progress::hidden())?;
    let summary = crate::output::summary::summarize(&record);
    std::hint::black_box(summary);
    let elapsed = start.elapsed();
    let name = if quick {
        "16-VM scenario, 10 simulated minutes (quick)"
    } else {
        "16-VM scenario, 1 simulated hour, end to end"
    };
    Ok(Figure {
        name,
        value: format!("{:.2} s", elapsed.as_secs_f64()),
        target: "< 30 s",
        met: elapsed < Duration::from_secs(30),
    })
}

fn markdown(figures: &[Figure], quick: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| benchmark | measured | target | met |");
    let _ = writeln!(s, "|---|---|---|---|");
    for f in figures {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            f.name,
            f.value,
            f.target,
            if f.met { "yes" } else { "no" }
        );
    }
    if quick {
        let _ = writeln!(s, "\n(quick run: fewer iterations)");
    }
    s
}
