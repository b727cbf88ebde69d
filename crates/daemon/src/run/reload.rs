//! SIGHUP: the configuration file read again and applied while running (tick, policy, rails, cache, tenants added, removed or retuned); settings that need a restart keep their running values.

use super::prepare::{cache, rails};
use super::tenants::{declare, disk_spec, io_cap, slot, spec, waiting_view, Slot};
use super::{Daemon, ReloadFrom};
use crate::config::{DaemonConfig, Reclaim, TenantConfig};
use crate::state_file::ApiChanges;
use memtide_model::{Bytes, TenantId};
use memtide_qemu::QemuHost;
use memtide_runner::{Change as RunChange, Outcome, Service, Status};
use serde_json::json;

impl Daemon {
    /// SIGHUP: reads the configuration file again and applies what can change while running
    /// (tick, policy, rails, tenants added, removed or changed); settings that need a restart
    /// keep their running value and are named in a warning. A file that does not load changes
    /// nothing. The file replaces changes made through the API.
    pub(super) fn reload_file(&mut self, service: &mut Service<QemuHost>, from: &ReloadFrom) {
        let mut new = match super::load_config(&from.path) {
            Ok(c) => c,
            Err(e) => {
                self.log.error(
                    "reload_failed",
                    &[
                        ("error", json!(e.to_string())),
                        ("kept", json!("the running configuration")),
                    ],
                );
                return;
            }
        };
        new.daemon.dry_run |= from.force_dry_run;
        let restart = keep_running_values(&mut new, &self.config);
        self.skip_outside_parent(&mut new);
        self.apply_settings(service, &new);
        let kept = self.let_go_changed(service, &new);
        self.slots = self.slots_for(service, &new, kept);
        self.config = new;
        self.start_declared(service);
        if !restart.is_empty() {
            self.log.warn(
                "reload_needs_restart",
                &[
                    ("keys", json!(restart)),
                    ("kept", json!("their running values")),
                ],
            );
        }
        self.log.info(
            "reloaded",
            &[
                ("path", json!(from.path.display().to_string())),
                ("tenants", json!(self.slots.len())),
            ],
        );
        self.publisher
            .waiting(&waiting_view(&self.slots, service.runner()));
        self.save_state(service, true);
    }

    /// Drops the reloaded tenants outside the parent, which cannot be managed: they are
    /// skipped, the rest applies.
    fn skip_outside_parent(&self, new: &mut DaemonConfig) {
        let mut slots_ok = Vec::new();
        for t in &new.tenants {
            match slot(t, TenantId(u32::MAX), &self.parent) {
                Ok(_) => slots_ok.push(t.clone()),
                Err(e) => self.log.error(
                    "reload_skipped",
                    &[("tenant", json!(t.name)), ("error", json!(e.to_string()))],
                ),
            }
        }
        new.tenants = slots_ok;
    }

    /// Hands the controller and the loop the reloaded tax rate (when it changed, or the API
    /// had changed it), tick, rails, reclaim and cache quotas, and forgets the API's changes.
    fn apply_settings(&self, service: &mut Service<QemuHost>, new: &DaemonConfig) {
        if new.policy.tax_rate != self.config.policy.tax_rate
            || service.changes().tax_rate.is_some()
        {
            service
                .runner_mut()
                .controller_mut()
                .set_tax_rate(new.policy.tax_rate);
        }
        let runner = service.runner_mut();
        runner.set_tick_length(new.daemon.tick);
        runner.controller_mut().set_rails(rails(&new.rails));
        runner
            .world_mut()
            .linux_mut()
            .set_rescue_pressure(new.rails.backoff_pressure);
        runner
            .controller_mut()
            .set_reclaim_always(new.policy.reclaim == Reclaim::Always);
        runner.controller_mut().set_cache(cache(new.cache.as_ref()));
        *service.changes_mut() = ApiChanges::default();
    }

    /// Lets go the tenants no longer configured, or whose identity (origin, estimator, cap,
    /// SLO, the sampling period) changed; the slots kept.
    fn let_go_changed(&mut self, service: &mut Service<QemuHost>, new: &DaemonConfig) -> Vec<Slot> {
        let mut kept_slots = Vec::new();
        for slot in std::mem::take(&mut self.slots) {
            let same = new.tenant(&slot.config.name).is_some_and(|t| {
                t.origin == slot.config.origin
                    && t.estimator == slot.config.estimator
                    && t.cap_at_estimate == slot.config.cap_at_estimate
                    && t.slo == slot.config.slo
            });
            if same && new.policy.sampling_period == self.config.policy.sampling_period {
                kept_slots.push(slot);
            } else {
                self.let_go(
                    service.runner_mut(),
                    &slot,
                    "removed or changed in the configuration",
                );
            }
        }
        kept_slots
    }

    /// The reloaded tenants' slots, in the file's order: a kept slot retuned to its new
    /// configuration, a new tenant declared under a new id.
    fn slots_for(
        &mut self,
        service: &mut Service<QemuHost>,
        new: &DaemonConfig,
        mut kept_slots: Vec<Slot>,
    ) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(new.tenants.len());
        for t in &new.tenants {
            match kept_slots.iter().position(|s| s.config.name == t.name) {
                Some(k) => {
                    let mut slot = kept_slots.remove(k);
                    if slot.config != *t {
                        self.retune(service, &mut slot, t);
                    }
                    slots.push(slot);
                }
                None => {
                    let id = TenantId(self.next_id);
                    self.next_id += 1;
                    match slot(t, id, &self.parent) {
                        Ok(new_slot) => {
                            declare(service.runner_mut(), &new_slot, new, &self.parent);
                            slots.push(new_slot);
                        }
                        Err(e) => self.log.error(
                            "reload_skipped",
                            &[("tenant", json!(t.name)), ("error", json!(e.to_string()))],
                        ),
                    }
                }
            }
        }
        slots
    }

    /// Starts the new tenants, and those refused before whose configuration changed.
    fn start_declared(&mut self, service: &mut Service<QemuHost>) {
        let mut started = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            if service
                .runner()
                .tenant(s.id)
                .is_none_or(|t| t.status == Status::Declared)
            {
                started.push(i);
            }
        }
        for i in started {
            if let Err(e) = self.start_tenant(service.runner_mut(), i, None, None) {
                self.log.error(
                    "reload_skipped",
                    &[
                        ("tenant", json!(self.slots[i].config.name)),
                        ("error", json!(e.to_string())),
                    ],
                );
            }
        }
    }

    /// Changes a kept tenant's min, max and shares to the reloaded file's: through the
    /// controller when it runs (a refused change keeps the old ones), in its declaration
    /// otherwise (a tenant refused before is tried again); then its disk caps, written at
    /// once when it runs.
    fn retune(&mut self, service: &mut Service<QemuHost>, slot: &mut Slot, t: &TenantConfig) {
        let before = io_cap(&slot.config);
        let disk_before = disk_spec(&slot.config);
        self.retune_memory(service, slot, t);
        let cap = io_cap(t);
        // The disk spec is the controller's only while memtide manages the disk; a running
        // tenant keeps running with its new weight and target.
        let disk = disk_spec(t).filter(|_| self.config.io.enabled);
        if slot.config == *t && disk != disk_before.filter(|_| self.config.io.enabled) {
            service.runner_mut().set_disk(slot.id, disk);
            self.log.info(
                "io_retuned",
                &[
                    ("tenant", json!(t.name)),
                    ("weight", json!(disk.map(|d| d.weight))),
                    (
                        "latency_target_us",
                        json!(disk.and_then(|d| d.latency_target_us)),
                    ),
                ],
            );
        }
        if slot.config == *t && cap != before {
            let set = super::disk_mut(service.runner_mut().world_mut())
                .map_or(Ok(()), |d| d.set_cap(slot.id, cap));
            match set {
                Ok(()) => self.log.info(
                    "io_caps",
                    &[("tenant", json!(t.name)), ("caps", json!(cap))],
                ),
                Err(e) => self.log.warn(
                    "io_failed",
                    &[("tenant", json!(t.name)), ("error", json!(e.to_string()))],
                ),
            }
        }
    }

    /// A kept tenant's min, max and shares: a change through the runner when it runs (logged
    /// when refused, and the slot keeps its configuration), else a new declaration.
    fn retune_memory(
        &mut self,
        service: &mut Service<QemuHost>,
        slot: &mut Slot,
        t: &TenantConfig,
    ) {
        let running = service
            .runner()
            .tenant(slot.id)
            .is_some_and(|r| r.status == Status::Running);
        if running {
            let change = RunChange::Tenant {
                id: slot.id,
                min: Some(Bytes(t.min_bytes).to_pages_ceil()),
                max: Some(Bytes(t.max_bytes).to_pages_floor()),
                shares: Some(t.shares),
            };
            let at = service.now();
            let refused = match service.runner_mut().change(at, &change, self) {
                Ok(Outcome::Refused(why)) => Some(why),
                Err(e) => Some(e.to_string()),
                Ok(_) => None,
            };
            if let Some(why) = refused {
                self.log.warn(
                    "change_refused",
                    &[("tenant", json!(t.name)), ("why", json!(why))],
                );
                return;
            }
            slot.config = t.clone();
        } else {
            slot.config = t.clone();
            service.runner_mut().redeclare(spec(slot, &self.config));
        }
    }
}

/// Keeps in `new` the running values (from `old`) of the settings that need a restart, the
/// tick excepted; the keys of those that differed.
fn keep_running_values(new: &mut DaemonConfig, old: &DaemonConfig) -> Vec<&'static str> {
    let mut restart = Vec::new();
    let mut keep = |changed: bool, key: &'static str| {
        if changed {
            restart.push(key);
        }
    };
    keep(new.daemon.listen != old.daemon.listen, "daemon.listen");
    keep(
        new.daemon.listen_public != old.daemon.listen_public,
        "daemon.listen_public",
    );
    keep(
        new.daemon.state_file != old.daemon.state_file,
        "daemon.state_file",
    );
    keep(new.daemon.dry_run != old.daemon.dry_run, "daemon.dry_run");
    keep(
        new.daemon.log_format != old.daemon.log_format,
        "daemon.log_format",
    );
    keep(
        new.daemon.decisions_kept != old.daemon.decisions_kept,
        "daemon.decisions_kept",
    );
    keep(new.host != old.host, "host");
    keep(new.sharing != old.sharing, "sharing");
    keep(new.io != old.io, "io");
    new.daemon = crate::config::DaemonSection {
        tick: new.daemon.tick,
        ..old.daemon.clone()
    };
    new.host = old.host.clone();
    new.sharing = old.sharing.clone();
    new.io = old.io.clone();
    restart
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_reload_keeps_and_names_the_settings_that_need_a_restart_but_takes_the_tick() {
        let old = DaemonConfig::default();
        let mut new = DaemonConfig::default();
        new.daemon.tick = old.daemon.tick * 2;
        new.daemon.dry_run = !old.daemon.dry_run;
        new.host.write_timeout = old.host.write_timeout + Duration::from_secs(1);
        let restart = keep_running_values(&mut new, &old);
        assert_eq!(restart, vec!["daemon.dry_run", "host"]);
        assert_eq!(new.daemon.dry_run, old.daemon.dry_run);
        assert_eq!(new.host, old.host);
        assert_eq!(new.daemon.tick, old.daemon.tick * 2, "the tick applies");
        let mut same = DaemonConfig::default();
        assert!(keep_running_values(&mut same, &old).is_empty());
    }
}
