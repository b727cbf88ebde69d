//! libvirt domain tenants: a VM that libvirt runs, named in the configuration, moved by its balloon through libvirt (libvirtd holds its QMP socket, one client at a time) and paged by host swap through its cgroup, which is found from its QEMU process as it runs.
//!
//! Joining: `virsh domstate` must say the domain runs (else it waits, as a cgroup not made
//! yet does); its balloon must be a real one (`<memballoon model='none'/>` is refused: there
//! would be nothing to move but host swap); its QEMU's pid (libvirt's pid file) gives its
//! memory cgroup, which must lie under the daemon's parent like any adopted cgroup and which
//! the Linux host then adopts. Its memory is `dominfo`'s max memory, the balloon's size as
//! found is recorded to give back, and the guest is asked to send statistics every
//! `stats_interval` seconds (`dommemstat --period`).
//!
//! Following: a domain restarted (destroyed and started, or shut down and started) runs in a
//! new QEMU under a new id, so a new cgroup: the Linux host sees the old one go (`Gone`, may
//! return), the tenant waits and the next attach finds the new one. A guest's own reboot keeps
//! its QEMU and its cgroup: nothing to follow. libvirtd restarting leaves its domains running;
//! a question that fails meanwhile is a `VmFailed` event and is asked again next tick.
//!
//! Costs: per domain and tick one `virsh dommemstat` (about 20 ms, 17 ms of CPU: a child
//! process, docs/vms.md), and a `virsh setmem` when the balloon's target moved by a MiB; one
//! `virsh event --loop` child per libvirt URI; a waiting domain is asked about again only
//! after an event named it or the event stream broke, and at most once a second.

use super::tenant::{Monitor, Vm};
use super::{QemuError, QemuHost, Record, VmRecord};
use memtide_controller::{Attach, Joined, World};
use memtide_engines::libvirt::{
    qemu_pid, DomainState, DomainWatcher, Failure, LibvirtError, Virsh, QEMU_RUN_DIR,
};
use memtide_engines::Stamp;
use memtide_linux::fs::hierarchy::own_cgroup;
use memtide_model::{TenantId, TenantSpec};
use std::path::Path;
use std::time::{Duration, Instant};

/// A libvirt domain tenant: its name, the libvirt connection, and the cgroup its cgroup must
/// lie under (the daemon's parent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainPlacement {
    pub name: String,
    pub uri: String,
    pub within: String,
}

/// The shortest time between two questions about a waiting domain.
const RECHECK: Duration = Duration::from_secs(1);

/// Why a domain waits, when that was last asked, and what libvirt's event stream had seen by
/// then.
pub(super) struct Asked {
    at: Instant,
    why: String,
    stamp: Option<Stamp>,
}

impl QemuHost {
    /// libvirt at `uri`, each call bounded by the QMP timeout.
    pub(super) fn virsh(&self, uri: &str) -> Virsh {
        let mut v = Virsh::new(uri);
        v.timeout = self.options.qmp_timeout;
        v
    }

    /// Attaches a domain tenant (see the module docs).
    pub(super) fn attach_domain(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        p: &DomainPlacement,
        record: Option<&Record>,
    ) -> Result<Attach, QemuError> {
        let virsh = self.virsh(&p.uri);
        // libvirt's events say when a waiting domain may have changed: it is asked again only
        // then (or when the stream is down), at most once a second.
        let watcher = self
            .domain_watchers
            .entry(p.uri.clone())
            .or_insert_with(|| DomainWatcher::start(&virsh).ok())
            .as_ref();
        if let Some(w) = watcher {
            w.watch(&p.name);
        }
        if let Some(a) = self.domains_asked.get(&id) {
            let changed = match (watcher, a.stamp) {
                (Some(w), Some(stamp)) => w.stale(&p.name, stamp),
                _ => true,
            };
            if a.at.elapsed() < RECHECK || !changed {
                return Ok(Attach::Waiting(a.why.clone()));
            }
        }
        let stamp = watcher.map(DomainWatcher::stamp);
        let waiting = |host: &mut QemuHost, why: String| {
            host.domains_asked.insert(
                id,
                Asked {
                    at: Instant::now(),
                    why: why.clone(),
                    stamp,
                },
            );
            Ok(Attach::Waiting(why))
        };
        match virsh.state(&p.name) {
            Ok(DomainState::Running | DomainState::Paused) => {}
            Ok(state) => {
                return waiting(
                    self,
                    format!("libvirt domain {:?} is not running ({state:?})", p.name),
                )
            }
            Err(e) => return waiting(self, why_waiting(&p.name, &e)),
        }
        // Refused, with one line; the other tenants run on.
        let refuse = |why: String| Attach::Refused(why);
        match virsh.balloon_model(&p.name) {
            Ok(Some(model)) if model != "none" => {}
            Ok(model) => {
                return Ok(refuse(format!(
                    "libvirt domain {:?} has {}: memtide moves a domain by its balloon; give it \
                     <memballoon model='virtio'>",
                    p.name,
                    model.map_or("no <memballoon>".to_string(), |m| format!(
                        "<memballoon model='{m}'/>"
                    ))
                )))
            }
            Err(e) => return waiting(self, why_waiting(&p.name, &e)),
        }
        let run_dir = self
            .options
            .proc_root
            .join(QEMU_RUN_DIR.trim_start_matches('/'));
        let pid = match qemu_pid(&p.name, &run_dir) {
            Ok(Some(pid)) => pid,
            Ok(None) => {
                return waiting(
                    self,
                    format!("libvirt domain {:?} has no QEMU pid yet", p.name),
                )
            }
            Err(e) => return waiting(self, e.to_string()),
        };
        let cgroup = match cgroup_of(pid, &self.options.proc_root, self.linux.hierarchy().version) {
            Ok(c) => c,
            Err(why) => {
                return waiting(
                    self,
                    format!("libvirt domain {:?}: its QEMU (pid {pid}) {why}", p.name),
                )
            }
        };
        if !memtide_linux::is_under(&p.within, &cgroup) {
            return Ok(refuse(format!(
                "libvirt domain {:?} runs in cgroup {cgroup:?}, which is not under the parent \
                 {:?}; give [host] parent a cgroup above libvirt's partition (/machine)",
                p.name, p.within
            )));
        }
        let (info, stats) = match virsh
            .info(&p.name)
            .and_then(|i| virsh.memory_stats(&p.name).map(|s| (i, s)))
        {
            Ok(found) => found,
            Err(e) => return waiting(self, why_waiting(&p.name, &e)),
        };
        let Some(memory) = info.max_memory else {
            return Ok(refuse(format!(
                "libvirt domain {:?} has no max memory",
                p.name
            )));
        };
        let actual = stats.actual.unwrap_or(info.used_memory);
        if let Err(e) = virsh.set_stats_period(&p.name, self.options.stats_interval) {
            return waiting(self, why_waiting(&p.name, &e));
        }
        let placement = memtide_linux::host::Placement {
            cgroup: cgroup.clone(),
            launch: None,
            adapter: None,
            isolated: true,
            subtree: false,
        };
        // A record is this domain's only while it runs in the cgroup the record names (its
        // QEMU, under the same id).
        let record = record.filter(|r| r.linux.cgroup == cgroup);
        let how = match self
            .linux
            .attach(id, spec, &placement, record.map(|r| &r.linux))?
        {
            Attach::Attached(how) => how,
            other => return Ok(other),
        };
        self.domains_asked.remove(&id);
        let vm_record = match record.and_then(|r| r.vm.clone()) {
            Some(r) => r,
            None => VmRecord {
                qmp: Default::default(),
                domain: Some(super::DomainRef {
                    name: p.name.clone(),
                    uri: p.uri.clone(),
                }),
                found: actual,
                paused: false,
            },
        };
        let monitor = Monitor::Libvirt {
            virsh,
            domain: p.name.clone(),
        };
        self.vms.insert(
            id,
            Vm::joined(&spec.name, monitor, memory, Some(pid), vm_record),
        );
        Ok(Attach::Attached(match how {
            Joined::Launched => Joined::Adopted,
            other => other,
        }))
    }
}

/// The memory cgroup of process `pid`, from `/proc` under `proc_root`.
fn cgroup_of(
    pid: u32,
    proc_root: &Path,
    version: memtide_linux::fs::hierarchy::CgroupVersion,
) -> Result<String, String> {
    let path = proc_root.join(format!("proc/{pid}/cgroup"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot be read at {}: {e}", path.display()))?;
    own_cgroup(&path, &text, version).map_err(|e| e.to_string())
}

/// Why a domain waits, from what libvirt answered.
fn why_waiting(name: &str, e: &LibvirtError) -> String {
    match e.failure() {
        Some(Failure::NoDomain) => format!("libvirt has no domain named {name:?} ({e})"),
        Some(Failure::NoDaemon) => format!("libvirt does not answer ({e})"),
        Some(Failure::NotRunning) => format!("libvirt domain {name:?} is not running"),
        _ => e.to_string(),
    }
}
