//! `QemuHost`, the world of QEMU VMs beside the Linux host's cgroups: each VM runs in a memory cgroup of its own, which the Linux host manages (usage, host swap, ESX-style sampling of the QEMU process), while QMP moves its balloon, reads the guest's statistics and pauses it.
//!
//! A VM tenant's levers are the guest balloon and host swap, as ESX's: the balloon
//! (`query-balloon` for where it stands, `balloon` to move it) goes first; what it cannot take
//! (no driver, a driver that does not move: the policy's stall watch, or the guest's limit)
//! the host pages out by lowering the VM's cgroup limit over swap, which the kernel meets by
//! swapping QEMU's memory out, and that limit follows the tenant's target back up as it
//! rises. ESX's low state pauses a running VM (`stop`) until it is at its target. The guest's
//! swap-ins and major faults (virtio-balloon statistics) are the working-set probe's signal.
//! Plain cgroup tenants pass through to the Linux host unchanged; a container tenant is one
//! whose cgroup its engine names (`container.rs`).
//!
//! Costs per VM and tick: two QMP round trips (`query-balloon`, `qom-get guest-stats`) plus
//! the Linux host's cgroup reads; a balloon command only when its target changed.

mod container;
mod domain;
mod tenant;

pub use container::ContainerPlacement;
pub use domain::DomainPlacement;

use crate::qmp::QmpError;
use crate::vm::{LaunchSpec, VmError, VmSource};
use memtide_controller::{Attach, Host, World};
use memtide_linux::host::{LinuxError, LinuxHost, TenantRecord};
use memtide_model::{
    Bytes, Decision, HostObservation, HostSwapLever, Pages, TenantId, TenantObservation,
    TenantSpec, WorldEvent,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tenant::{guest_paging, Connected, Vm, VmJoined};

/// How the QEMU world talks to its VMs.
#[derive(Clone, Debug)]
pub struct QemuOptions {
    /// Where launched VMs' QMP sockets and serial consoles go.
    pub run_dir: PathBuf,
    /// Longest wait for one QMP answer.
    pub qmp_timeout: Duration,
    /// How often the guest's balloon driver reports its statistics, in seconds.
    pub stats_interval: u32,
    /// Decide and report, move nothing.
    pub dry_run: bool,
    /// Root under which /proc is read.
    pub proc_root: PathBuf,
}

/// Where a tenant lives: a cgroup of the Linux host, a VM, or a container its engine finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    Cgroup(memtide_linux::host::Placement),
    Vm(VmPlacement),
    Container(ContainerPlacement),
    Domain(DomainPlacement),
}

/// A VM tenant: how it joins, and the cgroup a launched VM runs in (an adopted VM's is the one
/// its QEMU process is found in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmPlacement {
    pub source: VmSource,
    pub cgroup: String,
}

/// What the state file keeps per tenant: the Linux host's record of its cgroup and, for a VM,
/// how to find it again and what its balloon was when memtide found it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub linux: TenantRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmRecord>,
}

/// A VM's part of its record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmRecord {
    /// Its QMP socket (empty for a libvirt domain).
    #[serde(default)]
    pub qmp: PathBuf,
    /// The libvirt domain it is, reached through libvirt rather than its QMP socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<DomainRef>,
    /// What the guest held (`query-balloon`'s `actual`) when memtide first found it: given
    /// back at exit.
    pub found: Bytes,
    /// memtide paused it (ESX's low state): it is let run at exit.
    #[serde(default)]
    pub paused: bool,
}

/// A libvirt domain, as a record names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainRef {
    pub name: String,
    pub uri: String,
}

/// The errors of the QEMU world.
#[derive(Debug, thiserror::Error)]
pub enum QemuError {
    #[error(transparent)]
    Linux(#[from] LinuxError),
    #[error(transparent)]
    Qmp(#[from] QmpError),
    #[error("tenant {tenant:?}: {error}")]
    Vm { tenant: String, error: VmError },
    #[error("tenant {tenant:?}: {error}")]
    Adopt {
        tenant: String,
        error: crate::adopt::AdoptError,
    },
    #[error(transparent)]
    Libvirt(#[from] memtide_engines::libvirt::LibvirtError),
    #[error("tenant {tenant:?}: QEMU did not open its QMP socket {socket} within {secs} s (its console: {console})")]
    NoSocket {
        tenant: String,
        socket: String,
        secs: u64,
        console: String,
    },
}

/// The smallest balloon move asked of a guest.
const BALLOON_STEP: Bytes = Bytes(1 << 20);
/// How long a launched QEMU has to open its QMP socket.
const SOCKET_WAIT: Duration = Duration::from_secs(10);

/// Turns the cgroup's figures in a VM's observation into host swap: the cgroup's swap is host
/// swap, and its limit lever becomes host swap's room. The guest's own swap is not reported
/// through the balloon, so the observation's swap figures are cleared (the guest's statistics
/// fill them in), as are the cgroup-only levers.
fn cgroup_as_host_swap(obs: &mut TenantObservation) -> HostSwapLever {
    let cgroup_swapped = obs.swapped.unwrap_or(Pages::ZERO);
    let host_swap_ins = obs.swap_ins;
    // Host swap lowers the cgroup's limit under its usage by what swap can take: its
    // anonymous memory (the guest's) less what the swap left cannot hold (the limit lever's
    // unreclaimable memory). Without swap that is nothing: a limit would then be a hard cap
    // the guest stalls against, not paging. (Anonymous memory unknown: the whole usage.)
    let swap_room = obs.levers.limit.map(|l| {
        obs.anon
            .unwrap_or(obs.allocated)
            .saturating_sub(l.unreclaimable)
    });
    obs.levers.limit = None;
    obs.levers.app_balloon = None;
    obs.swapped = None;
    obs.swap_ins = None;
    obs.refaults = None;
    HostSwapLever {
        swapped: cgroup_swapped,
        swap_ins: host_swap_ins,
        room: swap_room,
    }
}

/// How far a VM got in joining the world.
enum Joining {
    /// Its cgroup attached and its QMP connected (boxed: a QMP connection is large).
    Joined(Box<VmJoined>),
    /// Not yet, or not at all: what the Linux host or the wait for the VM answered.
    NotYet(Attach),
}

/// The QEMU world (see the module docs).
pub struct QemuHost {
    linux: LinuxHost,
    options: QemuOptions,
    vms: BTreeMap<TenantId, Vm>,
    containers: container::Containers,
    /// Domains waiting: why, and when libvirt was last asked.
    domains_asked: BTreeMap<TenantId, domain::Asked>,
    /// A watcher on each libvirt URI's events (`None`: it could not start; every waiting
    /// domain is then asked about once a second).
    domain_watchers: BTreeMap<String, Option<memtide_engines::libvirt::DomainWatcher>>,
    events: Vec<WorldEvent>,
}

impl QemuHost {
    pub fn new(linux: LinuxHost, options: QemuOptions) -> QemuHost {
        QemuHost {
            linux,
            options,
            vms: BTreeMap::new(),
            containers: container::Containers::default(),
            domains_asked: BTreeMap::new(),
            domain_watchers: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// The Linux host underneath (its cgroups, disk, page sharing and agents).
    pub fn linux(&self) -> &LinuxHost {
        &self.linux
    }

    pub fn linux_mut(&mut self) -> &mut LinuxHost {
        &mut self.linux
    }

    /// A launched VM's QMP socket and console.
    fn files(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.options.run_dir.join(format!("{name}.qmp")),
            self.options.run_dir.join(format!("{name}.console")),
        )
    }

    /// Attaches a VM tenant: adopts a running VM by its QMP socket, or launches one (or finds
    /// again the one a crashed run launched), then keeps its QMP connection and record.
    fn attach_vm(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &VmPlacement,
        record: Option<&Record>,
    ) -> Result<Attach, QemuError> {
        let joining = match &placement.source {
            VmSource::Adopt { qmp } => self.adopt_vm(id, spec, placement, qmp, record)?,
            VmSource::Launch(launch) => self.launch_vm(id, spec, placement, launch, record)?,
        };
        let joined = match joining {
            Joining::Joined(joined) => joined,
            Joining::NotYet(attach) => return Ok(attach),
        };
        let record = match record.and_then(|r| r.vm.as_ref()) {
            Some(r) => r.clone(),
            None => VmRecord {
                qmp: joined.socket.clone(),
                domain: None,
                found: joined.connected.actual,
                paused: false,
            },
        };
        let how = joined.how;
        self.vms.insert(id, Vm::new(&spec.name, *joined, record));
        Ok(Attach::Attached(how))
    }

    /// Adopts a running VM by its QMP socket `qmp`: it must still run in the cgroup it was
    /// declared in, alone, which the Linux host then attaches.
    fn adopt_vm(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &VmPlacement,
        qmp: &Path,
        record: Option<&Record>,
    ) -> Result<Joining, QemuError> {
        let c = match Vm::connect(qmp, self.options.qmp_timeout, self.options.stats_interval) {
            Ok(c) => c,
            Err(e) => return Ok(Joining::NotYet(Attach::Waiting(e.to_string()))),
        };
        // The cgroup it was declared in, checked to be still its QEMU's alone.
        let found =
            crate::adopt::cgroup_of(&c.qmp, qmp, self.linux.hierarchy(), &self.options.proc_root)
                .map_err(|error| QemuError::Adopt {
                tenant: spec.name.clone(),
                error,
            })?;
        if found != placement.cgroup {
            return Ok(Joining::NotYet(Attach::Waiting(format!(
                "its QEMU now runs in cgroup {found:?}, not {:?}",
                placement.cgroup
            ))));
        }
        let linux_record = record.map(|r| r.linux.clone());
        let linux_placement = memtide_linux::host::Placement {
            cgroup: found,
            launch: None,
            adapter: None,
            isolated: true,
            subtree: false,
        };
        match self
            .linux
            .attach(id, spec, &linux_placement, linux_record.as_ref())?
        {
            Attach::Attached(how) => Ok(Joining::Joined(Box::new(VmJoined {
                connected: c,
                socket: qmp.to_path_buf(),
                how,
            }))),
            other => Ok(Joining::NotYet(other)),
        }
    }

    /// Launches the VM in its cgroup through the Linux host and connects to its QMP socket;
    /// a VM a crashed run launched and that still answers on its socket is taken back
    /// instead.
    fn launch_vm(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &VmPlacement,
        launch: &LaunchSpec,
        record: Option<&Record>,
    ) -> Result<Joining, QemuError> {
        let name = &spec.name;
        let (socket, console) = self.files(name);
        // A VM launched by a run that crashed still runs: re-adopted by its socket.
        let running = record.and_then(|r| r.vm.as_ref()).and_then(|r| {
            Vm::connect(
                &r.qmp,
                self.options.qmp_timeout,
                self.options.stats_interval,
            )
            .ok()
        });
        let linux_record = record.map(|r| r.linux.clone());
        if running.is_none() {
            self.prepare_launch(name, launch, &socket)?;
        }
        let linux_placement = memtide_linux::host::Placement {
            cgroup: placement.cgroup.clone(),
            launch: Some(launch.argv(&socket, &console)),
            adapter: None,
            isolated: true,
            subtree: false,
        };
        let how = match self.linux.attach(
            id,
            spec,
            &linux_placement,
            running.as_ref().and(linux_record.as_ref()),
        )? {
            Attach::Attached(how) => how,
            other => return Ok(Joining::NotYet(other)),
        };
        let connected = match running {
            Some(c) => c,
            None => match self.wait_for_socket(&socket) {
                Some(c) => c,
                None => {
                    let _ = self.linux.release(id);
                    return Err(QemuError::NoSocket {
                        tenant: name.clone(),
                        socket: socket.display().to_string(),
                        secs: SOCKET_WAIT.as_secs(),
                        console: console.display().to_string(),
                    });
                }
            },
        };
        Ok(Joining::Joined(Box::new(VmJoined {
            connected,
            socket,
            how,
        })))
    }

    /// Before a fresh launch: the VM fits the machine, the run folder exists and no stale
    /// socket is left at `socket`.
    fn prepare_launch(
        &self,
        name: &str,
        launch: &LaunchSpec,
        socket: &Path,
    ) -> Result<(), QemuError> {
        launch
            .check(self.linux.machine().to_bytes())
            .map_err(|error| QemuError::Vm {
                tenant: name.to_string(),
                error,
            })?;
        std::fs::create_dir_all(&self.options.run_dir).map_err(|e| {
            QemuError::Linux(LinuxError::Launch {
                tenant: name.to_string(),
                program: launch.qemu.clone(),
                error: e,
            })
        })?;
        let _ = std::fs::remove_file(socket);
        Ok(())
    }

    /// Connects to a just-launched QEMU's socket, waiting for it to appear.
    fn wait_for_socket(&self, socket: &Path) -> Option<Connected> {
        let started = Instant::now();
        loop {
            if socket.exists() {
                if let Ok(c) = Vm::connect(
                    socket,
                    self.options.qmp_timeout,
                    self.options.stats_interval,
                ) {
                    return Some(c);
                }
            }
            if started.elapsed() > SOCKET_WAIT {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads one VM's balloon and statistics into its observation, which the Linux host made
    /// from the VM's cgroup: the cgroup's limit lever becomes the balloon and host swap.
    fn observe_vm(&mut self, obs: &mut TenantObservation) {
        let id = obs.id;
        let Some(vm) = self.vms.get_mut(&id) else {
            return;
        };
        let host_swap = cgroup_as_host_swap(obs);
        vm.usage = obs.allocated;
        vm.update_overhead(&self.options.proc_root);
        if let Some(overhead) = vm.overhead {
            obs.allocated = vm.usage.saturating_sub(overhead);
        }
        obs.levers.host_swap = Some(host_swap);
        let read = vm
            .reconnect(self.options.qmp_timeout, self.options.stats_interval)
            .map_err(QemuError::from)
            .and_then(|()| vm.read_balloon());
        let (actual, stats) = match read {
            Ok(r) => r,
            Err(e) => {
                self.events.push(WorldEvent::VmFailed {
                    id,
                    error: e.to_string(),
                });
                return;
            }
        };
        if let Some(s) = &stats {
            vm.driver_seen |= s.ever_updated();
            (obs.swap_ins, obs.refaults) = guest_paging(s, vm.stats.as_ref());
        }
        vm.stats = stats;
        obs.levers.balloon = Some(vm.balloon_lever(actual));
    }

    /// Carries out the VM moves of `decision`: the balloon, host swap through the cgroup's
    /// limit, pausing.
    fn apply_vms(&mut self, decision: &Decision) {
        let machine = self.linux.machine();
        for action in &decision.actions {
            let Some(vm) = self.vms.get_mut(&action.id) else {
                continue;
            };
            let id = action.id;
            let moves = action.moves();
            if let Some(size) = moves.balloon {
                let want = vm.memory.saturating_sub(size.to_bytes());
                // A target within a MiB of the last one asked is no move (the policy's target
                // drifts by pages from tick to tick).
                let moved = vm
                    .asked
                    .is_none_or(|asked| asked.0.abs_diff(want.0) >= BALLOON_STEP.0);
                if moved {
                    let written = !self.options.dry_run;
                    let result = if written {
                        vm.set_balloon(want)
                    } else {
                        Ok(true)
                    };
                    match result {
                        Ok(false) => {}
                        Ok(true) => {
                            vm.asked = Some(want);
                            self.events.push(WorldEvent::Balloon {
                                id,
                                from: vm.size,
                                size,
                                written,
                            });
                        }
                        Err(e) => self.events.push(WorldEvent::VmFailed {
                            id,
                            error: e.to_string(),
                        }),
                    }
                }
            }
            // Host swap: the cgroup's limit goes under what it holds by what the policy pages
            // out, and follows the target (with QEMU's own memory, which the cgroup holds too)
            // back up; lifted once that is the whole VM again.
            let out = moves.host_swap_out;
            let overhead = vm.overhead.unwrap_or(Pages::ZERO);
            let to = if out > Pages::ZERO {
                Some(vm.usage.saturating_sub(out))
            } else {
                match vm.swap_limit {
                    Some(l) if action.target + overhead > l => Some(action.target + overhead),
                    _ => None,
                }
            };
            if let Some(to) = to {
                let lift = to >= vm.memory.to_pages_ceil() + overhead;
                let to = if lift { machine } else { to };
                if vm.swap_limit != Some(to) && !(lift && vm.swap_limit.is_none()) {
                    self.linux.set_limit(id, to);
                    vm.swap_limit = (!lift).then_some(to);
                }
            }
            if moves.blocked != vm.record.paused && !self.options.dry_run {
                match vm.set_blocked(moves.blocked) {
                    Ok(true) => {
                        vm.record.paused = moves.blocked;
                        self.events.push(WorldEvent::Blocked {
                            id,
                            blocked: moves.blocked,
                        });
                    }
                    // Not running (nothing to pause, nothing memtide may resume), or not
                    // connected.
                    Ok(false) => {}
                    Err(e) => self.events.push(WorldEvent::VmFailed {
                        id,
                        error: e.to_string(),
                    }),
                }
            }
        }
    }

    fn release_vm(&mut self, id: TenantId) -> Result<(), QemuError> {
        let Some(mut vm) = self.vms.remove(&id) else {
            return Ok(());
        };
        if self.options.dry_run {
            return Ok(());
        }
        let launched = self
            .linux
            .tenant(id)
            .is_some_and(|t| t.record.origin == memtide_linux::host::Origin::Launched);
        if launched {
            // A launched VM stops with its cgroup (the Linux host's release).
            return Ok(());
        }
        vm.give_back(self.options.qmp_timeout)
    }
}

impl Host for QemuHost {
    type Error = QemuError;

    fn observe(&mut self) -> Result<HostObservation, QemuError> {
        let mut obs = self.linux.observe()?;
        for t in &mut obs.tenants {
            if self.vms.contains_key(&t.id) {
                self.observe_vm(t);
            }
        }
        Ok(obs)
    }

    fn apply(&mut self, decision: &Decision) -> Result<(), QemuError> {
        self.linux.apply(decision)?;
        self.apply_vms(decision);
        Ok(())
    }
}

impl World for QemuHost {
    type Placement = Placement;
    type Record = Record;
    type Command = std::convert::Infallible;
    type Done = std::convert::Infallible;

    fn attach(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        placement: &Placement,
        record: Option<&Record>,
    ) -> Result<Attach, QemuError> {
        match placement {
            Placement::Cgroup(p) => Ok(self.linux.attach(id, spec, p, record.map(|r| &r.linux))?),
            Placement::Vm(p) => self.attach_vm(id, spec, p, record),
            Placement::Container(p) => self.attach_container(id, spec, p, record),
            Placement::Domain(p) => self.attach_domain(id, spec, p, record),
        }
    }

    fn detach(&mut self, id: TenantId) -> Result<(), QemuError> {
        self.containers.forget(id);
        self.domains_asked.remove(&id);
        let vm = self.release_vm(id);
        self.linux.detach(id)?;
        vm
    }

    fn retune(&mut self, id: TenantId, spec: &TenantSpec) {
        self.linux.retune(id, spec);
    }

    fn run(&mut self, tick: Duration) {
        self.linux.run(tick);
    }

    /// The Linux host's work between ticks, and the containers events touched looked up
    /// again.
    fn between_ticks(&mut self) {
        self.linux.between_ticks();
        self.follow_containers();
    }

    /// The Linux host's events, with a VM that left dropped here too and a container whose
    /// cgroup went waiting for its engine.
    fn drain_events(&mut self) -> Vec<WorldEvent> {
        let mut events = self.linux.drain_events();
        for e in &events {
            if let WorldEvent::Gone { id, .. } = e {
                self.vms.remove(id);
                self.containers.gone(*id);
            }
        }
        events.append(&mut self.events);
        events
    }

    fn command(
        &mut self,
        _id: TenantId,
        command: &std::convert::Infallible,
    ) -> Result<std::convert::Infallible, QemuError> {
        match *command {}
    }

    fn records(&self) -> Vec<Record> {
        self.linux
            .records()
            .into_iter()
            .map(|linux| {
                let vm = self
                    .vms
                    .values()
                    .find(|v| v.name == linux.name)
                    .map(|v| v.record.clone());
                Record { linux, vm }
            })
            .collect()
    }

    fn restore(&mut self, record: &Record) -> Result<(), QemuError> {
        if let (Some(vm), memtide_linux::host::Origin::Adopted) = (&record.vm, record.linux.origin)
        {
            let mut monitor = match &vm.domain {
                Some(d) => tenant::Monitor::Libvirt {
                    virsh: self.virsh(&d.uri),
                    domain: d.name.clone(),
                },
                None => tenant::Monitor::Qmp {
                    socket: vm.qmp.clone(),
                    qmp: None,
                    balloon: None,
                },
            };
            tenant::give_back(&mut monitor, vm, self.options.qmp_timeout)?;
        }
        Ok(self.linux.restore(&record.linux)?)
    }

    fn detach_all(&mut self) -> Vec<(String, QemuError)> {
        let ids: Vec<TenantId> = self.vms.keys().copied().collect();
        let mut errors: Vec<(String, QemuError)> = Vec::new();
        for id in ids {
            let name = self.vms[&id].name.clone();
            if let Err(e) = self.release_vm(id) {
                errors.push((name, e));
            }
        }
        errors.extend(
            self.linux
                .detach_all()
                .into_iter()
                .map(|(n, e)| (n, QemuError::Linux(e))),
        );
        errors
    }
}
