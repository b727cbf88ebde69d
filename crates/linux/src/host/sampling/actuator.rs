//! ESX sampling as a mechanism of the Linux host: an [`AccessSampler`] for each tenant whose estimator samples, its counts in the tenant's observation.

use super::{stagger, AccessSampler};
use crate::host::actuator::{Actuator, TenantView};
use crate::host::Placement;
use memtide_model::{EstimatorConfig, Moves, TenantId, TenantObservation, TenantSpec, WorldEvent};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The samplers of the tenants whose estimator samples (see `AccessSampler`).
#[derive(Debug)]
pub struct Sampling {
    proc_root: PathBuf,
    samplers: BTreeMap<TenantId, AccessSampler>,
}

impl Sampling {
    pub fn new(proc_root: PathBuf) -> Sampling {
        Sampling {
            proc_root,
            samplers: BTreeMap::new(),
        }
    }
}

impl Actuator for Sampling {
    fn name(&self) -> &'static str {
        "sampling"
    }

    /// Measures the tenant's touched memory each sampling period; touched fractions are of its
    /// max, its configured size (as ESX samples a VM's configured memory).
    fn attach(&mut self, id: TenantId, spec: &TenantSpec, _placement: &Placement) {
        match &spec.estimator {
            EstimatorConfig::Sampling(s) => {
                let phase = stagger(id.0);
                let sampler =
                    AccessSampler::new(&self.proc_root, s.period, spec.max.to_bytes(), phase);
                self.samplers.insert(id, sampler);
            }
            _ => {
                self.samplers.remove(&id);
            }
        }
    }

    fn wants_pids(&self, id: TenantId, now: Duration) -> bool {
        self.samplers.get(&id).is_some_and(|s| s.wants_pids(now))
    }

    fn observe(
        &mut self,
        t: &TenantView<'_>,
        obs: &mut TenantObservation,
        events: &mut Vec<WorldEvent>,
    ) {
        let Some(s) = self.samplers.get_mut(&obs.id) else {
            return;
        };
        let faulted = obs
            .refaults
            .unwrap_or(0)
            .saturating_add(obs.swap_ins.unwrap_or(0));
        match s.observe(t.now, t.pids, faulted) {
            Ok(counts) => obs.sample = Some(counts),
            Err(error) => events.push(WorldEvent::SamplerFailed { id: obs.id, error }),
        }
    }

    fn apply(&mut self, _id: TenantId, _moves: &Moves, _events: &mut Vec<WorldEvent>) {}

    fn forget(&mut self, id: TenantId) {
        self.samplers.remove(&id);
    }
}
