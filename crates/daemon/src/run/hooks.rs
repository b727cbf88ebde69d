//! What the daemon plugs into the runner's loop: the signals, the reload, and the logs and publishing around each tick, between ticks, for each API change and for applications' agents.

use super::tenants::managed_view;
use super::Daemon;
use crate::command::{Change, Refusal};
use crate::state_file::StateError;
use memtide_model::{TenantId, WorldEvent};
use memtide_qemu::QemuHost;
use memtide_runner::{
    Change as RunChange, Driver, Outcome, Runner, Service, Sink, TickRecord, TickView,
};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Daemon {
    /// Logs what happened to applications' agents since the last call.
    pub(super) fn log_agent_events(&mut self, hub: &memtide_agents::hub::Hub) {
        use memtide_agents::hub::AgentEvent;
        for event in hub.drain_events() {
            let name = |t: TenantId| {
                self.slots
                    .iter()
                    .find(|s| s.id == t)
                    .map(|s| s.config.name.clone())
                    .unwrap_or_default()
            };
            match event {
                AgentEvent::Registered {
                    tenant,
                    app,
                    kind,
                    pid,
                } => {
                    self.publisher
                        .app_registered(tenant, &app, kind.as_str(), pid);
                    self.log.info(
                        "agent_registered",
                        &[
                            ("tenant", json!(name(tenant))),
                            ("app", json!(app)),
                            ("kind", json!(kind.as_str())),
                            ("pid", json!(pid)),
                        ],
                    )
                }
                AgentEvent::Answered {
                    tenant,
                    seq,
                    status,
                    pool_bytes,
                    reason,
                    took,
                } => {
                    self.log.info(
                        "agent_answered",
                        &[
                            ("tenant", json!(name(tenant))),
                            ("seq", json!(seq)),
                            ("status", json!(status.as_str())),
                            ("pool_bytes", json!(pool_bytes)),
                            ("took_s", json!(took.as_secs_f64())),
                            ("reason", json!(reason)),
                        ],
                    );
                    self.publisher.app_answered(
                        tenant,
                        memtide_api::ResizeSnapshot {
                            pool_bytes,
                            status: status.as_str().to_string(),
                            took_s: took.as_secs_f64(),
                            reason,
                        },
                    );
                }
                AgentEvent::Closed { tenant, why } => {
                    let text = why.to_string();
                    let fields = [("tenant", json!(name(tenant))), ("why", json!(text))];
                    let takeover = match &why {
                        memtide_agents::hub::Closed::TakenOver(t) => Some(t.code()),
                        memtide_agents::hub::Closed::Violations => Some("violations"),
                        _ => None,
                    };
                    self.publisher.app_closed(tenant, text, takeover);
                    // Saying bye is how an agent leaves; anything else is worth a warning.
                    if matches!(why, memtide_agents::hub::Closed::Bye(_)) {
                        self.log.info("agent_closed", &fields);
                    } else {
                        self.log.warn("agent_closed", &fields);
                    }
                }
            }
        }
    }

    /// Logs the tenants that left (and the restores that failed as they did).
    fn log_left(&mut self, events: &[WorldEvent]) {
        for event in events {
            match event {
                WorldEvent::Gone {
                    name,
                    why,
                    restored,
                    ..
                } => {
                    self.log.info(
                        "dropped",
                        &[
                            ("tenant", json!(name)),
                            ("why", json!(why)),
                            ("restored", json!(restored)),
                        ],
                    );
                    self.publisher.record(name, "dropped", why);
                }
                WorldEvent::RestoreFailed { name, error } => {
                    self.publisher.restore_failed();
                    self.log.error(
                        "restore_failed",
                        &[("tenant", json!(name)), ("error", json!(error))],
                    )
                }
                _ => {}
            }
        }
    }
}

/// The daemon publishes each tick as it happens, and keeps the starts tried again for after it.
impl Sink<QemuHost> for Daemon {
    fn tick(&mut self, t: TickView<'_, QemuHost>) {
        self.observed = true;
        if let Some(hub) = self.balloon.as_ref().map(|b| b.hub.clone()) {
            self.log_agent_events(&hub);
        }
        if let Some(io) = super::shared_disk(t.world) {
            for f in io.failures_since(self.io_seen) {
                let tenant = f.id.and_then(|id| {
                    self.slots
                        .iter()
                        .find(|s| s.id == id)
                        .map(|s| s.config.name.clone())
                });
                self.log.warn(
                    "io_failed",
                    &[("tenant", json!(tenant)), ("error", json!(f.error))],
                );
                self.io_seen = f.seq + 1;
            }
        }
        let managed = std::mem::take(&mut self.managed);
        self.publisher.tick(
            &TickRecord::of(&t),
            t.events,
            t.controller,
            managed,
            &self.log,
        );
        self.log_left(t.events);
    }

    fn changed(
        &mut self,
        _at: Duration,
        _tenant: Option<&str>,
        change: &RunChange<std::convert::Infallible>,
        outcome: &Outcome,
    ) {
        if let RunChange::Start(id) = change {
            self.started.push((*id, outcome.clone()));
        }
    }
}

/// What the daemon plugs into the runner's loop: the signals, the reload of its configuration
/// file, and the logs and publishing around each tick, between ticks and for each API change.
impl Driver<QemuHost> for Daemon {
    fn stop(&self) -> bool {
        self.signals.stop.load(Ordering::SeqCst)
    }

    fn reload_pending(&self) -> bool {
        self.signals.reload.load(Ordering::SeqCst)
    }

    fn reload(&mut self, service: &mut Service<QemuHost>) {
        if !self.signals.reload.swap(false, Ordering::SeqCst) {
            return;
        }
        match self.reload_from.clone() {
            Some(from) => self.reload_file(service, &from),
            None => self.log.warn(
                "reload_failed",
                &[("error", json!("no configuration file to read again"))],
            ),
        }
    }

    fn ticking(&mut self, runner: &Runner<QemuHost>) {
        self.managed = managed_view(&self.slots, runner);
        self.observed = false;
    }

    /// Logs a failed tick (the loop goes on), then what came of trying again the tenants
    /// that wait.
    fn ticked(
        &mut self,
        runner: &Runner<QemuHost>,
        result: Result<(), memtide_qemu::QemuError>,
    ) -> Result<(), memtide_qemu::QemuError> {
        if let Err(e) = result {
            let what = if self.observed {
                "apply_failed"
            } else {
                "observe_failed"
            };
            self.log.error(what, &[("error", json!(e.to_string()))]);
        }
        for (id, outcome) in std::mem::take(&mut self.started) {
            self.started_or_not(runner, id, &outcome, None);
        }
        Ok(())
    }

    /// What happened between ticks: limits raised for tenants stalled at their limit, swap
    /// read back, tenants that left (a container renamed or replaced).
    fn between(&mut self, runner: &Runner<QemuHost>, events: Vec<WorldEvent>) {
        self.log_left(&events);
        let managed = managed_view(&self.slots, runner);
        self.publisher.between_ticks(events, &managed, &self.log);
    }

    /// Logs an API change; one carried out also changes the tenant's configuration, which a
    /// reload compares with the file.
    fn answered(
        &mut self,
        runner: &Runner<QemuHost>,
        change: &Change,
        result: &Result<(), Refusal>,
    ) {
        match result {
            Ok(()) => {
                if let Change::Tenant { name, .. } = change {
                    let spec = runner.tenants().map(|t| &t.spec).find(|s| &s.name == name);
                    let slot = self.slots.iter_mut().find(|s| &s.config.name == name);
                    if let (Some(spec), Some(slot)) = (spec, slot) {
                        slot.config.min_bytes = spec.min.to_bytes().0;
                        slot.config.max_bytes = spec.max.to_bytes().0;
                        slot.config.shares = spec.shares;
                    }
                }
                self.log
                    .info("changed", &[("change", json!(change.to_string()))]);
            }
            Err(why) => self.log.warn(
                "change_refused",
                &[
                    ("change", json!(change.to_string())),
                    ("why", json!(why.to_string())),
                ],
            ),
        }
    }

    fn unsaved(&mut self, error: StateError) {
        self.log
            .error("state_file", &[("error", json!(error.to_string()))]);
    }
}
