//! Letting tenants go: an adopted cgroup gets back what memtide changed (each mechanism's part, from the record, then limits and OOM killer, then its adapter gives the pool back), a launched one is stopped and removed; failed restores are kept and retried.

use super::tenant::{ManagedTenant, OomState, Origin, TenantRecord};
use super::{launch, oom_kill_disable, LinuxError, LinuxHost};
use memtide_model::{TenantId, WorldEvent};
use std::time::Duration;

impl LinuxHost {
    /// Stops managing `id`: an adopted cgroup gets its recorded settings back and its OOM
    /// killer switch (unless this is a dry run, which changed nothing), and then its adapter
    /// is stopped, giving its pool back (never before the limit is raised: a pool grown under
    /// memtide's limit would push the tenant into swap or its OOM killer); a launched one is
    /// stopped and its cgroup removed.
    pub fn release(&mut self, id: TenantId) -> Result<Option<TenantRecord>, LinuxError> {
        let Some(mut t) = self.tenants.remove(&id) else {
            return Ok(None);
        };
        self.members.remove(id);
        self.forget_mechanisms(&mut t);
        match t.record.origin {
            Origin::Adopted => {
                let given_back = match self.give_back(&mut t) {
                    Err(e) if !e.is_vanished() => Err(e),
                    _ => Ok(()),
                };
                let stopped = stop_adapter(&mut t, given_back.is_ok());
                if let Some(error) = stopped {
                    self.events.push(WorldEvent::AdapterFailed { id, error });
                }
                if let Err(e) = given_back {
                    self.unrestored.push(t);
                    return Err(e);
                }
            }
            Origin::Launched => {
                stop_adapter(&mut t, false);
                self.stop_launched(&mut t);
            }
        }
        Ok(Some(t.record))
    }

    /// Every mechanism persists its part of `t`'s record, then forgets it.
    fn forget_mechanisms(&mut self, t: &mut ManagedTenant) {
        for a in &mut self.actuators {
            a.persist(t.id, &mut t.record);
            a.forget(t.id);
        }
    }

    /// Writes back what memtide changed on an adopted cgroup: each mechanism's part, from the
    /// record (the disk's weight and caps), the recorded limits and, on v1, the OOM killer
    /// switch (compared with the kernel's, so a guard a crashed memtide left on is switched
    /// off too). Nothing in a dry run or when the cgroup is gone.
    fn give_back(&mut self, t: &mut ManagedTenant) -> Result<(), LinuxError> {
        if self.options.dry_run {
            return Ok(());
        }
        let timeout = self.options.write_timeout;
        for a in &mut self.actuators {
            a.restore(&mut t.record)?;
        }
        if !t.cgroup.exists() {
            return Ok(());
        }
        t.cgroup.restore(&t.record.original, timeout)?;
        // The guard goes off below (or was never on): no more OOM signals wanted.
        t.oom = OomState::default();
        if let Some(original) = t.record.oom.killer_was_disabled {
            if oom_kill_disable(&t.cgroup)? != Some(original) {
                let path = t.cgroup.dir().join("memory.oom_control");
                crate::fs::write_bounded(&path, if original { "1" } else { "0" }, timeout)?;
            }
        }
        t.record.oom.guard_on = false;
        Ok(())
    }

    /// Tries again to restore tenants whose restore failed; those restored are forgotten.
    pub(super) fn retry_unrestored(&mut self) {
        let pending = std::mem::take(&mut self.unrestored);
        for mut t in pending {
            match self.give_back(&mut t) {
                Ok(()) => {}
                Err(e) if e.is_vanished() => {}
                Err(e) => {
                    self.events.push(WorldEvent::RestoreFailed {
                        name: t.name.clone(),
                        error: e.to_string(),
                    });
                    self.unrestored.push(t);
                }
            }
        }
    }

    /// Releases every tenant, and retries earlier failed restores; returns the errors met
    /// (each tenant is tried). After an error the state file must stay, for the next start.
    pub fn release_all(&mut self) -> Vec<(String, LinuxError)> {
        let ids: Vec<TenantId> = self.tenants.keys().copied().collect();
        let mut errors = Vec::new();
        for id in ids {
            let name = self.tenants[&id].name.clone();
            if let Err(e) = self.release(id) {
                errors.push((name, e));
            }
        }
        self.retry_unrestored();
        for event in std::mem::take(&mut self.events) {
            if let WorldEvent::RestoreFailed { name, error } = event {
                if !errors.iter().any(|(n, _)| *n == name) {
                    errors.push((name, LinuxError::Restore(error)));
                }
            }
        }
        for a in &mut self.actuators {
            if let Err(e) = a.finish() {
                errors.push((a.name().to_string(), e));
            }
        }
        self.parent.undo(self.options.write_timeout);
        errors
    }

    /// Drops a tenant whose cgroup vanished or emptied, and says why. A launched tenant is
    /// stopped and its cgroup removed; an adopted cgroup that still exists gets back everything
    /// memtide changed (a new process in it must meet the tenant's own limit and OOM killer,
    /// not memtide's), or is kept aside and retried when that fails. When the cgroup itself
    /// went (`cgroup_gone`: removed, or removed and made again), the settings found at its
    /// adoption are forgotten: a cgroup made again under its path is adopted with its own.
    /// One made again before memtide saw it go may already hold a limit memtide wrote to the
    /// path, so it gets those settings back first (for a unit systemd restarted they are the
    /// unit's own, unless its properties changed while memtide ran).
    pub(super) fn drop_gone(&mut self, id: TenantId, why: String, cgroup_gone: bool) {
        let Some(mut t) = self.tenants.remove(&id) else {
            return;
        };
        if cgroup_gone {
            self.first_seen.remove(&t.record.cgroup);
        }
        self.members.remove(id);
        self.forget_mechanisms(&mut t);
        let name = t.name.clone();
        let may_return = t.record.origin == Origin::Adopted;
        // Its server is gone: an adapter's failure to give the pool back says nothing new.
        let restored = match t.record.origin {
            Origin::Launched => {
                stop_adapter(&mut t, false);
                self.stop_launched(&mut t);
                false
            }
            Origin::Adopted => match self.give_back(&mut t) {
                Ok(()) => {
                    stop_adapter(&mut t, true);
                    !self.options.dry_run && t.cgroup.exists()
                }
                Err(e) if e.is_vanished() => {
                    stop_adapter(&mut t, true);
                    false
                }
                Err(e) => {
                    stop_adapter(&mut t, false);
                    self.events.push(WorldEvent::RestoreFailed {
                        name: name.clone(),
                        error: e.to_string(),
                    });
                    self.unrestored.push(t);
                    false
                }
            },
        };
        self.events.push(WorldEvent::Gone {
            id,
            name,
            why,
            restored,
            may_return,
        });
    }

    /// Stops a launched tenant's processes and removes its cgroup, then lets every mechanism
    /// give back its part (the disk: its weight and caps, should the blkio cgroup stay, and
    /// the blkio directories memtide created for it; errors ignored).
    fn stop_launched(&mut self, t: &mut ManagedTenant) {
        let cgroup = t.cgroup.clone();
        let child = &mut t.child;
        launch::stop_processes(
            || cgroup.pids().unwrap_or_default(),
            Duration::from_secs(5),
            || {
                if let Some(c) = child {
                    let _ = c.try_wait();
                }
            },
        );
        if let Some(c) = child {
            let _ = c.wait();
        }
        // The kernel refuses to remove a cgroup that still holds processes; nothing else to do
        // then.
        let _ = std::fs::remove_dir(cgroup.dir());
        for a in &mut self.actuators {
            let _ = a.restore(&mut t.record);
        }
    }
}

/// Stops `t`'s adapter, if it has one: giving its pool back (`give_back`, once the tenant's
/// limits are) or killed. Says how it ended when a give-back failed.
fn stop_adapter(t: &mut ManagedTenant, give_back: bool) -> Option<String> {
    t.adapter.take()?.stop(give_back)
}
