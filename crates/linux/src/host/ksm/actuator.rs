//! Page sharing as a mechanism of the Linux host: the [`KsmDriver`] fills the host's and each tenant's sharing figures and sets ksmd's pace; tenants placed `isolated` are watched for merging anyway.

use super::KsmDriver;
use crate::host::actuator::{Actuator, TenantView};
use crate::host::{LinuxError, Placement};
use memtide_model::{
    Decision, HostObservation, Moves, Pages, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::collections::BTreeSet;
use std::time::Duration;

/// KSM as the host's mechanism.
#[derive(Debug)]
pub struct Sharing {
    driver: KsmDriver,
    /// Tenants never to be asked to merge (page sharing across tenants is a side channel).
    isolated: BTreeSet<TenantId>,
    /// Isolated tenants already reported merging anyway.
    warned: BTreeSet<TenantId>,
}

impl Sharing {
    pub fn new(driver: KsmDriver) -> Sharing {
        Sharing {
            driver,
            isolated: BTreeSet::new(),
            warned: BTreeSet::new(),
        }
    }

    /// KSM as memtide drives it.
    pub fn driver(&self) -> &KsmDriver {
        &self.driver
    }
}

fn failed(events: &mut Vec<WorldEvent>, error: impl ToString) {
    events.push(WorldEvent::SharingFailed {
        error: error.to_string(),
    });
}

impl Actuator for Sharing {
    fn name(&self) -> &'static str {
        "ksm"
    }

    fn attach(&mut self, id: TenantId, _spec: &TenantSpec, placement: &Placement) {
        if placement.isolated {
            self.isolated.insert(id);
        } else {
            self.isolated.remove(&id);
        }
    }

    fn merges_launched(&self) -> bool {
        self.driver.merge_any()
    }

    fn wants_pids(&self, _id: TenantId, _now: Duration) -> bool {
        true
    }

    fn observe_host(&mut self, obs: &mut HostObservation, events: &mut Vec<WorldEvent>) {
        match self.driver.observe() {
            Ok(s) => obs.sharing = Some(s),
            Err(e) => failed(events, e),
        }
    }

    fn observe(
        &mut self,
        t: &TenantView<'_>,
        obs: &mut TenantObservation,
        events: &mut Vec<WorldEvent>,
    ) {
        let lever = match self.driver.tenant(t.pids) {
            Ok(lever) => lever,
            Err(e) => {
                failed(events, e);
                None
            }
        };
        if let Some(l) = &lever {
            let id = obs.id;
            if l.shared > Pages::ZERO && self.isolated.contains(&id) && self.warned.insert(id) {
                events.push(WorldEvent::IsolatedMerged {
                    id,
                    pages: l.shared,
                });
            }
        }
        obs.levers.sharing = lever;
    }

    fn apply(&mut self, _id: TenantId, _moves: &Moves, _events: &mut Vec<WorldEvent>) {}

    fn apply_host(&mut self, decision: &Decision, events: &mut Vec<WorldEvent>) {
        if let Some(rate) = decision.sharing {
            if let Err(e) = self.driver.set_rate(rate) {
                failed(events, e);
            }
        }
    }

    fn forget(&mut self, id: TenantId) {
        self.isolated.remove(&id);
        self.warned.remove(&id);
    }

    fn finish(&mut self) -> Result<(), LinuxError> {
        Ok(self.driver.restore()?)
    }
}
