//! The host both speed benchmarks of a controller step use (criterion's `controller_step` and `memtide bench`), so their figures measure the same thing.

use crate::{Controller, ControllerConfig};
use memtide_model::{
    BalloonDriverInfo, BalloonLever, EstimatorConfig, HostObservation, HostSwapLever, Levers,
    Pages, SampleCounts, SamplingConfig, TenantId, TenantObservation, TenantSpec,
};
use std::time::Duration;

/// An overcommitted host of `n` ESX-style VMs of 1 GiB (a balloon driver and host swap each,
/// so every planner runs; sampled, with shares and activity varied), 600 MiB of machine
/// memory per VM and 3% of it free: the controller admitted them all, and the observation is
/// one tick's. A benchmark steps the controller as the runner does (`Controller::step_into`,
/// into the last decision).
pub fn overcommitted_vms(n: u32) -> (Controller, HostObservation) {
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
            shares: 1000 + u64::from(i % 7) * 100,
            overhead: Pages::from_mib(8),
            estimator: EstimatorConfig::Sampling(SamplingConfig::default()),
            ..TenantSpec::new(
                TenantId(i),
                format!("t{i}"),
                Pages::from_mib(64),
                Pages::from_mib(1024),
            )
        };
        controller.admit(spec).expect("fits");
        let mut obs =
            TenantObservation::new(TenantId(i), Pages::from_mib(512 + u64::from(i % 512)));
        obs.levers = Levers {
            balloon: Some(BalloonLever {
                memory: Pages::from_mib(1024),
                size: Pages::from_mib(u64::from(i % 64)),
                driver: Some(BalloonDriverInfo {
                    rate_per_s: Pages::from_mib(128),
                    limit: Pages::from_mib(1000),
                }),
                free_unbacked: false,
            }),
            host_swap: Some(HostSwapLever {
                swapped: Pages::ZERO,
                swap_ins: Some(0),
                room: None,
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
        sharing: None,
        remapping: None,
        tenants,
    };
    (controller, obs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{Decision, Mechanism};

    #[test]
    fn the_bench_host_is_overcommitted_and_every_vm_gets_an_action() {
        let (mut controller, obs) = overcommitted_vms(1024);
        let mut decision = Decision::default();
        controller.step_into(&obs, &mut decision);
        assert_eq!(decision.actions.len(), 1024);
        let targets: u64 = decision.actions.iter().map(|a| a.target.0).sum();
        let held: u64 = obs.tenants.iter().map(|t| t.allocated.0).sum();
        // The VMs hold 512 to 1023 MiB (767 MiB on average, for every 512 of them) against
        // about 564 MiB of budget each: the targets fill the budget, below what they hold, so
        // the balloons have work to do.
        assert_eq!(targets, decision.memory.budget.0);
        assert!(targets < held, "targets {targets} held {held}");
        assert!(decision
            .actions
            .iter()
            .any(|a| a.mechanisms.contains(&Mechanism::Balloon)));
    }
}
