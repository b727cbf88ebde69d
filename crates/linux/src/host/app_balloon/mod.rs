//! The application balloon on Linux: the tenants' agents, served on the balloon socket by `memtide_agents`' hub; a tenant with a live agent has an application balloon lever, and the policy's moves for it go to its agent.

use super::actuator::{Actuator, TenantView};
use memtide_agents::hub::Hub;
use memtide_model::{Moves, Pages, TenantId, TenantObservation, WorldEvent};

/// The applications' agents, as the host's mechanism.
#[derive(Debug)]
pub struct AppBalloon {
    hub: Hub,
}

impl AppBalloon {
    pub fn new(hub: Hub) -> AppBalloon {
        AppBalloon { hub }
    }
}

impl Actuator for AppBalloon {
    fn name(&self) -> &'static str {
        "app balloon"
    }

    fn observe(
        &mut self,
        _t: &TenantView<'_>,
        obs: &mut TenantObservation,
        _events: &mut Vec<WorldEvent>,
    ) {
        // An application with a live agent resizes its own pool first (ALB); what it uses is
        // the cgroup's usage and its swap (a pool paged out is still the pool's).
        let used = obs.allocated + obs.swapped.unwrap_or(Pages::ZERO);
        obs.levers.app_balloon = self.hub.lever(obs.id, used, self.hub.now());
    }

    fn apply(&mut self, id: TenantId, moves: &Moves, _events: &mut Vec<WorldEvent>) {
        if let Some(app_move) = moves.app_balloon {
            self.hub.apply(id, app_move);
        }
    }

    fn forget(&mut self, id: TenantId) {
        self.hub.forget(id);
    }
}
