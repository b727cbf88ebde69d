//! One VM tenant as the QEMU world holds it: its monitor (QEMU's QMP connection, or libvirt for a domain) and what the world reads from it each tick (the balloon, the guest's statistics, QEMU's own overhead), and the moves it makes through it (the balloon's target, pausing, giving back).

use super::{QemuError, VmRecord};
use crate::qmp::{GuestStats, Qmp, QmpError};
use memtide_engines::libvirt::{DomainState, Failure, MemoryStats, Virsh};
use memtide_linux::fs::mapping::read_guest_mapping;
use memtide_model::{BalloonDriverInfo, BalloonLever, Bytes, Pages};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most a balloon driver moves in a second, as the policy plans it: what the guest's
/// driver did here under TCG (docs/vms.md), rounded down.
const DRIVER_RATE: Bytes = Bytes(256 << 20);
/// What a guest keeps out of its balloon whatever the policy says: its kernel's own needs.
/// (The guest's deflate-on-OOM is the second net.)
const GUEST_FLOOR: Bytes = Bytes(64 << 20);
/// How often QEMU's smaps is read for its overhead, in observations.
const SMAPS_EVERY: u32 = 10;

/// How the world reaches a VM.
pub(super) enum Monitor {
    /// QEMU's QMP socket, held open (dropped when it closes, made again at the next
    /// observation): a VM memtide launched or adopted by its socket.
    Qmp {
        socket: PathBuf,
        qmp: Option<Qmp>,
        /// The balloon device's QOM path (`None`: the VM has no balloon).
        balloon: Option<String>,
    },
    /// libvirt, which holds the domain's QMP socket: one `virsh` call per question.
    Libvirt { virsh: Virsh, domain: String },
}

impl Monitor {
    /// The VM has a balloon device (a domain's is checked as it joins).
    fn has_balloon(&self) -> bool {
        match self {
            Monitor::Qmp { balloon, .. } => balloon.is_some(),
            Monitor::Libvirt { .. } => true,
        }
    }
}

/// One VM tenant.
pub(super) struct Vm {
    pub(super) name: String,
    pub(super) monitor: Monitor,
    /// The guest's memory.
    pub(super) memory: Bytes,
    pub(super) record: VmRecord,
    /// The guest's statistics at the previous observation, for the deltas.
    pub(super) stats: Option<GuestStats>,
    /// The guest's driver has reported statistics at least once.
    pub(super) driver_seen: bool,
    /// The `actual` last asked for.
    pub(super) asked: Option<Bytes>,
    /// The balloon's size at the last observation.
    pub(super) size: Pages,
    /// What the VM's cgroup held at the last observation (QEMU's overhead included).
    pub(super) usage: Pages,
    /// Its QEMU process (the QMP socket's peer).
    pub(super) pid: Option<u32>,
    /// QEMU's own memory in the cgroup (its usage less the guest's resident memory) at the
    /// last smaps read, and the observations until the next.
    pub(super) overhead: Option<Pages>,
    pub(super) smaps_due: u32,
    /// The limit host swap holds the VM at (`None`: host swap is not in force).
    pub(super) swap_limit: Option<Pages>,
}

impl Vm {
    /// A VM that just joined through QMP, nothing observed yet.
    pub(super) fn new(name: &str, joined: VmJoined, record: VmRecord) -> Vm {
        let VmJoined {
            connected, socket, ..
        } = joined;
        let pid = connected.qmp.pid().and_then(|p| u32::try_from(p).ok());
        let monitor = Monitor::Qmp {
            socket,
            balloon: connected.balloon,
            qmp: Some(connected.qmp),
        };
        Vm::joined(name, monitor, connected.memory, pid, record)
    }

    /// A VM that just joined through `monitor`, its guest's memory `memory` and its QEMU
    /// `pid`, nothing observed yet.
    pub(super) fn joined(
        name: &str,
        monitor: Monitor,
        memory: Bytes,
        pid: Option<u32>,
        record: VmRecord,
    ) -> Vm {
        Vm {
            name: name.to_string(),
            memory,
            monitor,
            record,
            stats: None,
            driver_seen: false,
            asked: None,
            size: Pages::ZERO,
            usage: Pages::ZERO,
            pid,
            overhead: None,
            smaps_due: 0,
            swap_limit: None,
        }
    }

    /// Connects to the VM's QMP and reads what the world needs once: memory, the balloon's
    /// path, statistics polling.
    pub(super) fn connect(
        socket: &Path,
        timeout: Duration,
        interval: u32,
    ) -> Result<Connected, QmpError> {
        let mut qmp = Qmp::connect(socket, timeout)?;
        let memory = qmp.query_memory_size_summary()?.base;
        let actual = qmp.query_balloon()?;
        let balloon = match qmp.find_balloon() {
            Ok(path) => Some(path),
            Err(QmpError::NoBalloon { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(path) = &balloon {
            qmp.set_stats_polling(path, interval)?;
        }
        Ok(Connected {
            qmp,
            memory,
            actual,
            balloon,
        })
    }

    /// Refreshes QEMU's own memory in the cgroup (`overhead`), so the guest's memory can be
    /// told apart from the emulator's (ESX counts a VM's overhead apart too): QEMU's smaps
    /// every `SMAPS_EVERY` observations (a read walks all of QEMU's page tables: 2-3 ms of
    /// CPU for a small guest, 72% of the daemon's CPU when it was read every tick); in
    /// between the cgroup's usage less the overhead that read found stands for the guest.
    /// Until the first read there is no overhead and the cgroup's usage stands alone.
    pub(super) fn update_overhead(&mut self, proc_root: &Path) {
        if self.smaps_due == 0 {
            let guest = self.pid.and_then(|pid| {
                read_guest_mapping(proc_root, pid, self.memory)
                    .ok()
                    .flatten()
            });
            self.overhead = guest.map(|m| self.usage.saturating_sub(m.rss.to_pages_floor()));
            self.smaps_due = SMAPS_EVERY;
        }
        self.smaps_due -= 1;
    }

    /// Connects to the VM's QMP again when the connection was lost, taking its process,
    /// balloon and memory afresh (and forgetting the balloon target asked).
    pub(super) fn reconnect(&mut self, timeout: Duration, interval: u32) -> Result<(), QmpError> {
        if let Monitor::Qmp {
            socket,
            qmp: qmp @ None,
            balloon,
        } = &mut self.monitor
        {
            let c = Vm::connect(socket, timeout, interval)?;
            self.pid = c.qmp.pid().and_then(|p| u32::try_from(p).ok());
            *qmp = Some(c.qmp);
            *balloon = c.balloon;
            self.memory = c.memory;
            self.asked = None;
        }
        Ok(())
    }

    /// The balloon's `actual` and, with a balloon device, the guest's statistics; a closed
    /// connection is dropped, to be made again at the next observation.
    pub(super) fn read_balloon(&mut self) -> Result<(Bytes, Option<GuestStats>), QemuError> {
        let (qmp_slot, balloon) = match &mut self.monitor {
            Monitor::Qmp { qmp, balloon, .. } => (qmp, balloon),
            Monitor::Libvirt { virsh, domain } => {
                let stats = virsh.memory_stats(domain)?;
                let actual = stats.actual.ok_or_else(|| {
                    QemuError::Libvirt(memtide_engines::libvirt::LibvirtError::Answer {
                        uri: virsh.uri.clone(),
                        command: format!("dommemstat {domain}"),
                        why: "has no `actual`: the domain's balloon is gone".to_string(),
                    })
                })?;
                return Ok((actual, Some(guest_stats(&stats))));
            }
        };
        let qmp = qmp_slot.as_mut().expect("connected by reconnect");
        let read = |qmp: &mut Qmp| -> Result<(Bytes, Option<GuestStats>), QmpError> {
            let actual = qmp.query_balloon()?;
            let stats = match &*balloon {
                Some(path) => Some(qmp.guest_stats(path)?),
                None => None,
            };
            Ok((actual, stats))
        };
        let result = read(qmp);
        if let Err(QmpError::Closed { .. }) = result {
            *qmp_slot = None;
        }
        Ok(result?)
    }

    /// Asks the guest's balloon for `actual` = `want`; `Ok(false)` while the monitor is not
    /// connected (asked again at a later tick).
    pub(super) fn set_balloon(&mut self, want: Bytes) -> Result<bool, QemuError> {
        match &mut self.monitor {
            Monitor::Qmp { qmp: Some(qmp), .. } => Ok(qmp.balloon(want).map(|()| true)?),
            Monitor::Qmp { qmp: None, .. } => Ok(false),
            Monitor::Libvirt { virsh, domain } => {
                Ok(virsh.set_memory(domain, want).map(|()| true)?)
            }
        }
    }

    /// Pauses the VM (`blocked`) or lets it run again: `Ok(true)` when its state changed,
    /// `Ok(false)` when there was nothing memtide may do (not connected; not running, so
    /// nothing to pause and nothing memtide may resume).
    pub(super) fn set_blocked(&mut self, blocked: bool) -> Result<bool, QemuError> {
        match &mut self.monitor {
            Monitor::Qmp { qmp: None, .. } => Ok(false),
            Monitor::Qmp { qmp: Some(qmp), .. } => Ok(if blocked {
                pause(qmp)?
            } else {
                qmp.execute("cont", None).map(|_| true)?
            }),
            Monitor::Libvirt { virsh, domain } => {
                if blocked {
                    if virsh.state(domain)? != DomainState::Running {
                        return Ok(false);
                    }
                    virsh.run(&["suspend", domain])?;
                } else {
                    virsh.run(&["resume", domain])?;
                }
                Ok(true)
            }
        }
    }

    /// Gives the VM back what memtide changed through its monitor: the balloon as found, and
    /// running if memtide paused it. A VM that is gone has nothing to give back.
    pub(super) fn give_back(&mut self, timeout: Duration) -> Result<(), QemuError> {
        give_back(&mut self.monitor, &self.record, timeout)
    }

    /// The balloon lever now the guest holds `actual`: the balloon's size (recorded), and the
    /// driver's pace and limit once it has shown it works.
    pub(super) fn balloon_lever(&mut self, actual: Bytes) -> BalloonLever {
        let memory = self.memory.to_pages_floor();
        self.size = memory.saturating_sub(actual.to_pages_floor());
        let driver = (self.monitor.has_balloon() && self.driver_seen).then(|| BalloonDriverInfo {
            rate_per_s: DRIVER_RATE.to_pages_floor(),
            limit: memory.saturating_sub(GUEST_FLOOR.to_pages_floor()),
        });
        BalloonLever {
            memory,
            size: self.size,
            driver,
            // Launched with free page reporting; an adopted guest's free pages that were
            // never touched are not backed either.
            free_unbacked: true,
        }
    }
}

/// A fresh QMP connection and what it found.
pub(super) struct Connected {
    pub(super) qmp: Qmp,
    pub(super) memory: Bytes,
    pub(super) actual: Bytes,
    pub(super) balloon: Option<String>,
}

/// A VM that joined: its QMP connection, its socket, and how it joined (`"adopted"`,
/// `"launched"`, ...).
pub(super) struct VmJoined {
    pub(super) connected: Connected,
    pub(super) socket: PathBuf,
    pub(super) how: memtide_controller::Joined,
}

/// Gives a VM back through `monitor` what `record` says memtide changed (the balloon as
/// found; running, if memtide paused it). A VM that is gone (its socket closed, its domain not
/// running or not there) has nothing to give back.
pub(super) fn give_back(
    monitor: &mut Monitor,
    record: &VmRecord,
    timeout: Duration,
) -> Result<(), QemuError> {
    match monitor {
        Monitor::Qmp { socket, qmp, .. } => {
            let mut own;
            let qmp = match qmp {
                Some(q) => q,
                None => match Qmp::connect(&*socket, timeout) {
                    Ok(q) => {
                        own = q;
                        &mut own
                    }
                    Err(QmpError::Closed { .. } | QmpError::Connect { .. }) => return Ok(()),
                    Err(e) => return Err(e.into()),
                },
            };
            let gave = qmp.balloon(record.found).and_then(|()| {
                if record.paused {
                    qmp.execute("cont", None).map(drop)
                } else {
                    Ok(())
                }
            });
            match gave {
                Err(QmpError::Closed { .. } | QmpError::Connect { .. }) => Ok(()),
                other => Ok(other?),
            }
        }
        Monitor::Libvirt { virsh, domain } => {
            let gave = virsh.set_memory(domain, record.found).and_then(|()| {
                if record.paused {
                    virsh.run(&["resume", domain]).map(drop)
                } else {
                    Ok(())
                }
            });
            match gave {
                Err(e) if matches!(e.failure(), Some(Failure::NotRunning | Failure::NoDomain)) => {
                    Ok(())
                }
                other => Ok(other?),
            }
        }
    }
}

/// The guest's statistics as libvirt relays them, in the QMP reader's terms (libvirt names
/// them apart: `unused` is free memory, `available` total, `usable` available).
fn guest_stats(s: &MemoryStats) -> GuestStats {
    GuestStats {
        swap_in: s.swap_in,
        swap_out: s.swap_out,
        major_faults: s.major_fault,
        minor_faults: s.minor_fault,
        free_memory: s.unused,
        total_memory: s.available,
        available_memory: s.usable,
        disk_caches: s.disk_caches,
        hugetlb_allocations: s.hugetlb_pgalloc,
        hugetlb_failures: s.hugetlb_pgfail,
        last_update: s.last_update.unwrap_or(0),
    }
}

/// Pauses a VM for ESX's low state (`stop`): `Ok(true)` when memtide paused it, `Ok(false)`
/// when it was not running (started with `-S`, paused by its owner, shut down), which is
/// left alone: memtide resumes (`cont`) only a VM it paused, and a `cont` would start one
/// that was never started. Costs a `query-status` round trip per tick while the policy
/// blocks a VM that is not running.
pub(super) fn pause(qmp: &mut Qmp) -> Result<bool, QmpError> {
    if !qmp.query_status()?.running {
        return Ok(false);
    }
    qmp.execute("stop", None)?;
    Ok(true)
}

/// The guest's swap-ins and refaults (pages) since its `before` statistics, from `now`:
/// `None` each where either reading lacks the counter.
pub(super) fn guest_paging(
    now: &GuestStats,
    before: Option<&GuestStats>,
) -> (Option<u64>, Option<u64>) {
    let delta = |now: Option<u64>, then: Option<u64>| match (now, then) {
        (Some(now), Some(then)) => Some(now.saturating_sub(then)),
        _ => None,
    };
    let pages = |b: Option<Bytes>| b.map(|b| b.to_pages_floor().0);
    let swapped_in = delta(pages(now.swap_in), pages(before.and_then(|b| b.swap_in)));
    // Swap-ins of distinct pages: at most what was in the guest's swap at either
    // reading (swapped out less swapped in, cumulative), as a cgroup's are counted; a
    // hot page thrashing in and out counts once (TWS raises the WSS by the events).
    let in_swap = |g: &GuestStats| match (g.swap_out, g.swap_in) {
        (Some(out), Some(inn)) => Some(out.saturating_sub(inn).to_pages_ceil().0),
        _ => None,
    };
    let held = in_swap(now).max(before.and_then(in_swap));
    let swap_ins = swapped_in.map(|d| held.map_or(d, |h| d.min(h)));
    // Every swap-in is a major fault too; the rest read file pages back.
    let major = delta(now.major_faults, before.and_then(|b| b.major_faults));
    let refaults = major.map(|m| m.saturating_sub(swapped_in.unwrap_or(0)));
    (swap_ins, refaults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qmp::fake::{handshake, FakeQmp, Step};
    use serde_json::json;
    use std::time::Duration;

    /// A monitor answering `query-status` with `status`, then `stop` if `stop` is expected.
    fn monitor(status: &str, running: bool, stop: bool) -> FakeQmp {
        let mut steps = handshake();
        steps.push(Step::Expect("query-status"));
        steps.push(Step::Reply(
            json!({"return": {"status": status, "singlestep": false, "running": running}}),
        ));
        if stop {
            steps.push(Step::Expect("stop"));
            steps.push(Step::Reply(json!({"return": {}})));
        }
        steps.push(Step::Hold);
        FakeQmp::start(steps)
    }

    /// The commands the monitor received, in order, once the client left.
    fn sent(fake: FakeQmp) -> Vec<String> {
        fake.finish()
            .iter()
            .filter_map(|c| c["execute"].as_str().map(String::from))
            .collect()
    }

    #[test]
    fn a_running_vm_is_paused_and_counted_as_memtides_pause() {
        let fake = monitor("running", true, true);
        let mut qmp = Qmp::connect(&fake.path, Duration::from_secs(5)).unwrap();
        assert!(pause(&mut qmp).unwrap());
        drop(qmp);
        assert_eq!(sent(fake), ["qmp_capabilities", "query-status", "stop"]);
    }

    #[test]
    fn a_vm_started_paused_is_left_alone_so_it_is_never_resumed() {
        for (status, running) in [("prelaunch", false), ("paused", false)] {
            let fake = monitor(status, running, false);
            let mut qmp = Qmp::connect(&fake.path, Duration::from_secs(5)).unwrap();
            assert!(!pause(&mut qmp).unwrap(), "{status}");
            drop(qmp);
            assert_eq!(sent(fake), ["qmp_capabilities", "query-status"], "{status}");
        }
    }
}
