//! Shape tests of the density scenarios (scenarios/density-*.toml, issue 31): static sizing fits what the real benchmark computes, the policies that overcommit carry more than static at their SLO, capacity bounds them, the family differs only by scale, and the same trial gives the same figures. Runs are shortened to a minute of load (the files ship with five).

use crate::common::scenario_path;
use memtide_cli::density::sim::SimBench;
use memtide_demand::Policy;

/// The scenario with a minute of load.
fn bench(file: &str) -> SimBench {
    let path = scenario_path(file);
    SimBench::load(&path, &["duration=1m".to_string()]).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn static_sizing_fits_what_the_real_benchmark_computes_and_meets_its_slo() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let b = bench("density-small.toml");
    // The real benchmark's figure: 18 tenants' limits (1,977 MiB) fit in 2 GiB.
    assert_eq!(b.static_fit(), 18);
    let fit = b.trial(Policy::Static, 18).unwrap();
    assert!(fit.passed(), "{:?}", fit.attainment);
    assert!(fit.attainment.active > 20, "{:?}", fit.attainment);
    let beyond = b.trial(Policy::Static, 19).unwrap();
    assert!(!beyond.fits && !beyond.passed());
}

#[test]
fn overcommitting_policies_carry_twice_what_static_does_and_capacity_bounds_them() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let b = bench("density-small.toml");
    let twice = 2 * b.static_fit();
    for policy in [Policy::Kernel, Policy::Sampling, Policy::Tws] {
        let r = b.trial(policy, twice).unwrap();
        assert!(r.passed(), "{policy} at {twice}: {:?}", r.attainment);
        // Carried by swapping the idle ones out, and back in when they wake.
        assert!(
            r.swap_out_mib > 100.0 && r.swap_in_mib > 0.0,
            "{policy}: swap in {:.0} / out {:.0} MiB",
            r.swap_in_mib,
            r.swap_out_mib
        );
    }
    // 2 GiB of memory and 8 GiB of host swap hold about 100 datasets: 120 do not fit, and
    // the tenants that find nothing to free fail their windows.
    let over = b.trial(Policy::Kernel, 120).unwrap();
    assert!(!over.passed(), "{:?}", over.attainment);
    assert!(over.tenants.iter().any(|t| t.errors > 0));
}

#[test]
fn a_swap_in_as_slow_as_a_disk_read_breaks_the_slo_where_zram_keeps_it() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let path = scenario_path("density-small.toml");
    let slow = SimBench::load(
        &path,
        &[
            "duration=1m".to_string(),
            "cost.host_swap_in_us=1000".to_string(),
            "cost.guest_swap_in_us=1000".to_string(),
        ],
    )
    .unwrap();
    let zram = bench("density-small.toml");
    for policy in [Policy::Kernel, Policy::Sampling] {
        assert!(zram.trial(policy, 32).unwrap().passed(), "{policy}, zram");
        let r = slow.trial(policy, 32).unwrap();
        assert!(!r.passed(), "{policy}, 1 ms swap-ins: {:?}", r.attainment);
    }
}

#[test]
fn every_tenant_gets_the_requests_its_schedule_sends_and_a_trial_repeats_exactly() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let b = bench("density-small.toml");
    let one = b.trial(Policy::Sampling, 24).unwrap();
    let two = b.trial(Policy::Sampling, 24).unwrap();
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
    for (i, t) in one.tenants.iter().enumerate() {
        let kind = b.config.kind(i);
        let demand = memtide_demand::Demand::parse(&kind.demand).unwrap();
        let seed = memtide_demand::tenant_seed(b.config.seed, i as u64);
        let schedule = memtide_demand::Schedule::new(&demand, seed, b.config.duration).unwrap();
        let sent = schedule.requests_between(0.0, b.config.duration);
        assert!(
            (t.requests as f64 - sent).abs() <= 1.0,
            "{}: {} requests, the schedule sends {sent:.1}",
            t.name,
            t.requests
        );
    }
}

#[test]
fn the_family_differs_only_by_scale_and_static_grows_with_the_host() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let small = bench("density-small.toml");
    for (file, k) in [("density-500.toml", 5), ("density-2000.toml", 20)] {
        let b = bench(file);
        let c = &b.config;
        assert_eq!(c.budget, k * small.config.budget, "{file}");
        assert_eq!(
            (&c.mix, c.slo, &c.policies),
            (&small.config.mix, small.config.slo, &small.config.policies),
            "{file}"
        );
        assert_eq!(b.peaks, small.peaks, "{file}");
        let (fit, expect) = (b.static_fit(), k as usize * small.static_fit());
        assert!(
            fit >= expect && fit <= expect + k as usize,
            "{file}: static fits {fit}, {k} x small = {expect}"
        );
        let host = b.scenario(Policy::Kernel, 1).unwrap().host;
        let small_host = small.scenario(Policy::Kernel, 1).unwrap().host;
        assert_eq!(host.machine.0, k * small_host.machine.0, "{file}");
        assert_eq!(host.host_swap.0, k * small_host.host_swap.0, "{file}");
    }
}
