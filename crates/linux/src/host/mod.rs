//! The Linux `Host`: tenants are memory cgroups (adopted or launched); observation reads cgroupfs and procfs, actuation writes limits within bounded time, and every write passes a last floor check; every other mechanism (sampling, protection, KSM, the application balloon, the disk) is an `Actuator` in its own folder.

mod actuator;
mod adapter;
mod agents;
mod app_balloon;
mod delegate;
pub mod derive;
mod error;
pub mod io;
pub mod ksm;
pub mod launch;
pub mod lock;
mod oom_guard;
pub mod paths;
pub mod protection;
mod release;
mod rescue;
pub mod sampling;
mod saved;
mod swap_in;
mod tenant;
mod world;

pub use actuator::{Actuator, Attached, Joins, TenantView};
pub use agents::{max_agent_connections, AgentDescriptors, CgroupTenants};
pub use app_balloon::AppBalloon;
pub use delegate::LEAF as DAEMON_LEAF;
pub use error::LinuxError;
pub use io::{Disk, IoFailure, IoHost, IoOptions, IoRecord};
pub use oom_guard::OomRecord;
use oom_guard::{near_its_limit, oom_kill_disable, set_oom_guard};
use tenant::OomState;
pub use tenant::{ManagedTenant, Origin, TenantRecord};
pub use world::Placement;

use crate::cgroup::{CgroupReader, Limit, LimitSettings, MemoryCgroup};
use crate::fs::hierarchy::MemoryHierarchy;
use crate::fs::oom_events::OomEvents;
use crate::fs::{meminfo, pressure, FsError};
use memtide_controller::Host;
use memtide_model::{
    Bytes, Decision, HostObservation, Pages, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How the host reads and writes.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Root under which /proc is read (tests use fake trees).
    pub proc_root: PathBuf,
    /// Longest wait for one write to a kernel file.
    pub write_timeout: Duration,
    /// Decide and report, write nothing.
    pub dry_run: bool,
    /// Where launched commands' output goes (one `<name>.log` per tenant); `None`: discarded.
    pub log_dir: Option<PathBuf>,
    /// The tenant's own PSI some avg10 (percent) at which a v2 tenant throttled over its
    /// memory.high is rescued (see `rescue.rs`): the rails' `backoff_pressure`.
    pub rescue_pressure: f64,
}

/// The real host.
#[derive(Debug)]
pub struct LinuxHost {
    hierarchy: MemoryHierarchy,
    options: HostOptions,
    started: Instant,
    tenants: BTreeMap<TenantId, ManagedTenant>,
    /// Tenants let go whose restore failed: kept (with their lock and record) and retried.
    unrestored: Vec<ManagedTenant>,
    /// The settings first found on every cgroup adopted in this run, by cgroup path: a cgroup
    /// adopted again after it emptied keeps its first original, not what memtide left on it.
    first_seen: BTreeMap<String, Original>,
    events: Vec<WorldEvent>,
    machine: Pages,
    swap_free: Pages,
    /// What making the parent ready changed (undone by `release_all`).
    parent: delegate::Delegation,
    /// v1: the eventfds the kernel signals when a guarded tenant enters OOM (made when the
    /// first guard goes on; `None` also when epoll is unavailable, and every guarded tenant's
    /// memory.oom_control is then read at each check).
    oom_events: Option<OomEvents>,
    /// The watches that fired at the last check (kept to reuse its allocation).
    fired: Vec<u64>,
    /// Some guarded tenant's memory.oom_control is to be read at the next check (one is
    /// pending, or has no eventfd); when false, a check is one `epoll_wait` and nothing else.
    oom_due: bool,
    /// The managed tenants' cgroup directories, for the balloon socket's identity check.
    members: agents::Members,
    /// The mechanisms it runs besides the limit, each filling its lever and carrying out its
    /// moves (see `actuator.rs`), in the order it was built with.
    actuators: Vec<Box<dyn Actuator>>,
}

impl LinuxHost {
    pub fn new(hierarchy: MemoryHierarchy, options: HostOptions) -> Result<LinuxHost, LinuxError> {
        let info = meminfo::read_meminfo(&options.proc_root)?;
        // Each tenant keeps a few cgroup files open (fs::kept); room for them.
        crate::fs::kept::raise_fd_limit();
        // ESX sampling serves any tenant whose estimator samples; every tenant's min is
        // protected from the host's own reclaim (the setting found restored with its limits).
        let actuators: Vec<Box<dyn Actuator>> = vec![
            Box::new(sampling::Sampling::new(options.proc_root.clone())),
            Box::new(protection::Protection::new(
                hierarchy.clone(),
                options.write_timeout,
            )),
        ];
        Ok(LinuxHost {
            hierarchy,
            machine: info.mem_total.to_pages_floor(),
            swap_free: info.swap_free.unwrap_or(Bytes::ZERO).to_pages_floor(),
            started: Instant::now(),
            tenants: BTreeMap::new(),
            unrestored: Vec::new(),
            first_seen: BTreeMap::new(),
            events: Vec::new(),
            parent: delegate::Delegation::default(),
            oom_events: None,
            fired: Vec::new(),
            oom_due: false,
            members: agents::Members::default(),
            actuators,
            options,
        })
    }

    /// Makes the parent cgroup `path` ready for launched tenants: creates it (and what leads to
    /// it) when missing and, on cgroup v2, delegates the memory controller down to its
    /// children, moving memtide into a leaf of its own first when it runs there (see
    /// [`delegate`]); undone, where that harms no one, once every tenant is released.
    pub fn create_parent(&mut self, path: &str) -> Result<(), LinuxError> {
        self.parent.undo(self.options.write_timeout);
        self.parent =
            delegate::Delegation::prepare(&self.hierarchy, path, self.options.write_timeout)?;
        Ok(())
    }

    pub fn hierarchy(&self) -> &MemoryHierarchy {
        &self.hierarchy
    }

    /// MemTotal.
    pub fn machine(&self) -> Pages {
        self.machine
    }

    pub fn tenant(&self, id: TenantId) -> Option<&ManagedTenant> {
        self.tenants.get(&id)
    }

    pub fn tenants(&self) -> impl Iterator<Item = &ManagedTenant> {
        self.tenants.values()
    }

    fn cgroup_for(&self, path: &str) -> MemoryCgroup {
        MemoryCgroup::new(self.hierarchy.version, self.hierarchy.dir_of(path))
    }

    /// Manages an existing cgroup. `original` is the state file's record when re-adopting
    /// after a crash (the files then hold memtide's limits, not the tenant's own); without one,
    /// the settings first seen on this cgroup in this run, or else the settings in force now.
    /// Outside a dry run the cgroup is locked: a cgroup another memtide manages is refused.
    pub fn adopt(
        &mut self,
        id: TenantId,
        name: &str,
        cgroup_path: &str,
        original: Option<Original>,
        origin: Origin,
    ) -> Result<&ManagedTenant, LinuxError> {
        if self.tenants.contains_key(&id) {
            return Err(LinuxError::Duplicate(name.to_string()));
        }
        let cgroup = self.cgroup_for(cgroup_path);
        if !cgroup.exists() {
            return Err(LinuxError::UnknownCgroup {
                cgroup: cgroup_path.to_string(),
                dir: cgroup.dir().display().to_string(),
            });
        }
        let lock = self.lock(cgroup_path, &cgroup)?;
        // A cgroup whose earlier restore failed is managed again under that record.
        if let Some(i) = self
            .unrestored
            .iter()
            .position(|t| t.record.cgroup == cgroup_path)
        {
            self.unrestored.remove(i);
        }
        let original = match original.or_else(|| self.first_seen.get(cgroup_path).cloned()) {
            Some(o) => o,
            None => Original {
                settings: cgroup.settings()?,
                oom_kill_disable: oom_kill_disable(&cgroup)?,
            },
        };
        // The OOM killer switched off though the tenant had it on: a memtide before this one
        // (crashed) left its guard on, and restoring must switch it back.
        let guard_on =
            original.oom_kill_disable == Some(false) && oom_kill_disable(&cgroup)? == Some(true);
        Ok(self.insert(
            Inserted {
                id,
                name,
                cgroup_path,
                cgroup,
                original,
                origin,
                child: None,
                lock,
            },
            guard_on,
        ))
    }

    /// Reads tenant `id`'s processes in every cgroup below its own too (a systemd slice).
    pub(super) fn read_subtree(&mut self, id: TenantId) {
        if let Some(t) = self.tenants.get_mut(&id) {
            t.reader.read_subtree();
        }
    }

    /// Keeps a state file's record of a cgroup not adopted yet (it is missing or empty now), so
    /// that when it is adopted later, its original is the one the record holds.
    pub fn remember(&mut self, record: &TenantRecord) {
        self.first_seen
            .entry(record.cgroup.clone())
            .or_insert_with(|| Original::of(record));
    }

    /// Locks the cgroup's directory (not in a dry run, which changes nothing).
    fn lock(
        &self,
        cgroup_path: &str,
        cgroup: &MemoryCgroup,
    ) -> Result<Option<lock::CgroupLock>, LinuxError> {
        if self.options.dry_run {
            return Ok(None);
        }
        lock::CgroupLock::take(cgroup.dir())
            .map(Some)
            .map_err(|error| LinuxError::Lock {
                cgroup: cgroup_path.to_string(),
                error,
            })
    }

    /// Creates `<cgroup_path>` (which must not hold processes), bounds it by `spec.max` and
    /// starts `argv` inside it, and in the cgroups of other hierarchies its mechanisms make
    /// ready for it (`Actuator::launch`: the disk's blkio cgroup on v1); with `merge`, asked to
    /// merge its pages when some mechanism shares them.
    pub fn launch(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        cgroup_path: &str,
        argv: &[String],
        merge: bool,
    ) -> Result<&ManagedTenant, LinuxError> {
        let name = spec.name.as_str();
        let initial_limit = spec.max;
        if self.tenants.contains_key(&id) {
            return Err(LinuxError::Duplicate(name.to_string()));
        }
        let cgroup = self.cgroup_for(cgroup_path);
        let created = !cgroup.exists();
        if created {
            std::fs::create_dir(cgroup.dir()).map_err(|error| LinuxError::CreateCgroup {
                dir: cgroup.dir().display().to_string(),
                error,
            })?;
        }
        // A failed start leaves nothing: the cgroup made here goes again.
        let made = |e: LinuxError| {
            if created {
                let _ = std::fs::remove_dir(cgroup.dir());
            }
            e
        };
        let lock = self.lock(cgroup_path, &cgroup).map_err(made)?;
        let original = Original {
            settings: cgroup.settings().map_err(|e| made(e.into()))?,
            oom_kill_disable: oom_kill_disable(&cgroup).map_err(|e| made(e.into()))?,
        };
        cgroup
            .set_limit(
                Limit::Bytes(initial_limit.to_bytes()),
                self.options.write_timeout,
            )
            .map_err(|e| made(e.into()))?;
        let log = self
            .options
            .log_dir
            .as_ref()
            .map(|d| d.join(format!("{name}.log")));
        let merge = merge && self.actuators.iter().any(|a| a.merges_launched());
        let joins = self.launch_joins(id, spec, cgroup_path).map_err(made)?;
        let child = match launch::spawn_in_cgroup(
            name,
            argv,
            cgroup.dir(),
            &joins.dirs,
            log.as_deref(),
            launch::Asks {
                merge,
                // Its own command: a restarted daemon adopts it again.
                dies_with_memtide: false,
            },
        ) {
            Ok(child) => child,
            Err(e) => {
                let e = made(e);
                remove_created(&joins.created);
                for a in &mut self.actuators {
                    a.forget(id);
                }
                return Err(e);
            }
        };
        self.insert(
            Inserted {
                id,
                name,
                cgroup_path,
                cgroup,
                original,
                origin: Origin::Launched,
                child: Some(child),
                lock,
            },
            false,
        );
        Ok(&self.tenants[&id])
    }

    /// The cgroups every mechanism makes ready for tenant `id` about to be launched; on an
    /// error, those created so far are removed.
    fn launch_joins(
        &mut self,
        id: TenantId,
        spec: &TenantSpec,
        cgroup_path: &str,
    ) -> Result<Joins, LinuxError> {
        let mut joins = Joins::default();
        for a in &mut self.actuators {
            match a.launch(id, spec, cgroup_path) {
                Ok(j) => {
                    joins.dirs.extend(j.dirs);
                    joins.created.extend(j.created);
                }
                Err(e) => {
                    remove_created(&joins.created);
                    for a in &mut self.actuators {
                        a.forget(id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(joins)
    }

    fn insert(&mut self, new: Inserted<'_>, oom_guard: bool) -> &ManagedTenant {
        let Inserted {
            id,
            name,
            cgroup_path,
            cgroup,
            original,
            origin,
            child,
            lock,
        } = new;
        self.first_seen
            .entry(cgroup_path.to_string())
            .or_insert_with(|| original.clone());
        let no_anon_swap = matches!(
            original.settings,
            LimitSettings::V1 {
                swappiness: Some(0),
                ..
            }
        );
        let mut reader = CgroupReader::new(&cgroup);
        reader.watch_swap_above(&self.hierarchy.mount);
        // Taken now, not at the first reading: a unit restarted right after its adoption
        // (before a tick) is then a new cgroup too.
        let identity = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(cgroup.dir()).ok().map(|m| m.ino())
        };
        let tenant = ManagedTenant {
            id,
            name: name.to_string(),
            record: TenantRecord {
                name: name.to_string(),
                cgroup: cgroup_path.to_string(),
                origin,
                original: original.settings,
                oom: OomRecord {
                    killer_was_disabled: original.oom_kill_disable,
                    guard_on: oom_guard,
                },
                io: None,
            },
            reader,
            pids: Vec::new(),
            oom: OomState::default(),
            cgroup,
            child,
            no_anon_swap,
            last_sample: None,
            identity,
            unreclaimable: Pages::ZERO,
            reclaim_refused: 0,
            adapter: None,
            max: None,
            swap_in: None,
            _lock: lock,
        };
        self.members
            .insert(id, name, tenant.cgroup.dir().to_path_buf());
        self.tenants.entry(id).or_insert(tenant)
    }

    /// This host, running `actuator` too (after those it runs already): each tenant's
    /// observation gets its lever, and the policy's moves for it are carried out there (not in
    /// a dry run, which asks nothing of anyone).
    pub fn with(mut self, actuator: impl Actuator + 'static) -> LinuxHost {
        self.actuators.push(Box::new(actuator));
        self
    }

    /// The actuator of type `A` this host runs, if any: how the one who built the host reaches
    /// a mechanism's own methods (the daemon: the disk's caps and unmanaged tenants).
    pub fn actuator<A: Actuator>(&self) -> Option<&A> {
        self.actuators
            .iter()
            .find_map(|a| (a.as_ref() as &dyn Any).downcast_ref::<A>())
    }

    /// The actuator of type `A` this host runs, to change, if any.
    pub fn actuator_mut<A: Actuator>(&mut self) -> Option<&mut A> {
        self.actuators
            .iter_mut()
            .find_map(|a| (a.as_mut() as &mut dyn Any).downcast_mut::<A>())
    }

    /// Which managed tenant holds a process, as the balloon socket asks (see `agents.rs`).
    pub fn agent_tenants(&self) -> CgroupTenants {
        CgroupTenants {
            proc_root: self.options.proc_root.clone(),
            hierarchy: self.hierarchy.clone(),
            members: self.members.clone(),
        }
    }

    /// Keeps `argv` (an adapter) running in `id`'s cgroup from the next observation on,
    /// killing first any adapter an earlier memtide left there.
    fn set_adapter(&mut self, id: TenantId, argv: Option<Vec<String>>) {
        let Some(t) = self.tenants.get_mut(&id) else {
            return;
        };
        if let Some(mut old) = t.adapter.take() {
            old.stop(true);
        }
        let log = self
            .options
            .log_dir
            .as_ref()
            .map(|d| d.join(format!("{}-adapter.log", t.name)));
        let Some(new) = argv.map(|argv| adapter::Adapter::new(argv, log)) else {
            return;
        };
        let pids = t.cgroup.pids().unwrap_or_default();
        for pid in new.kill_strays(&pids, &self.options.proc_root) {
            self.events.push(WorldEvent::StrayAdapterKilled { id, pid });
        }
        t.adapter = Some(new);
    }

    /// Tells every mechanism that `id` is attached with `spec`.
    fn attach_mechanisms(
        &mut self,
        id: TenantId,
        spec: &memtide_model::TenantSpec,
        placement: &Placement,
    ) {
        for a in &mut self.actuators {
            a.attach(id, spec, placement);
        }
    }

    /// The tenant's configured max (the OOM guard is on only while its limit is below it).
    fn set_max(&mut self, id: TenantId, max: Pages) {
        if let Some(t) = self.tenants.get_mut(&id) {
            t.max = Some(max);
        }
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// Tends the processes memtide started: a launched tenant's command that exited is
    /// reaped, and an adapter that exited is started again (its failures reported).
    fn tend_processes(&mut self) {
        for t in self.tenants.values_mut() {
            if let Some(child) = &mut t.child {
                if let Ok(Some(_)) = child.try_wait() {
                    t.child = None;
                }
            }
            if let Some(a) = &mut t.adapter {
                let (exited, started) = a.keep_running(&t.name, t.cgroup.dir());
                for error in exited
                    .into_iter()
                    .chain(started.and_then(Result::err).map(|e| e.to_string()))
                {
                    self.events
                        .push(WorldEvent::AdapterFailed { id: t.id, error });
                }
            }
        }
    }

    fn observe_tenant(
        &mut self,
        id: TenantId,
        now: Duration,
    ) -> Result<Option<TenantObservation>, FsError> {
        let swap_free = self.swap_free;
        let machine = self.machine;
        let t = self.tenants.get_mut(&id).expect("observed tenants exist");
        let mut sample = t.reader.sample()?;
        // The whole list only when the sampler or page sharing is to use it, or to count the
        // adapter out (a tenant whose server exited is gone, though its adapter runs on); else
        // whether there is anyone.
        let wants_pids = self.actuators.iter().any(|a| a.wants_pids(id, now));
        let adapter = t.adapter.as_ref().and_then(adapter::Adapter::pid);
        let has_processes = if wants_pids || adapter.is_some() {
            t.reader.pids(&mut t.pids)?;
            t.pids.iter().any(|&p| Some(p) != adapter)
        } else {
            t.reader.has_processes()?
        };
        // A cgroup removed and made again between two readings (systemd restarting a unit
        // within a tick) is a new cgroup: its tenant is dropped and adopted afresh.
        match (t.identity, t.reader.identity()) {
            (Some(was), Some(now)) if was != now => {
                return Err(FsError::Replaced {
                    path: t.cgroup.dir().to_path_buf(),
                })
            }
            (None, now) => t.identity = now,
            _ => {}
        }
        if !has_processes {
            return Ok(None);
        }
        // Once a tick a guarded tenant at its limit has its memory.oom_control read at the
        // next check, whether or not the kernel signalled: in case a signal is ever missed.
        let near_limit = near_its_limit(&sample);
        t.oom.pending |= t.record.oom.guard_on && near_limit;
        self.oom_due |= t.record.oom.guard_on && near_limit;
        t.reclaim_refused = t.reclaim_refused.saturating_sub(1);
        let reclaim_refused = t.reclaim_refused > 0;
        if !self.options.dry_run {
            let rescue = rescue::Rescue {
                machine,
                pressure: self.options.rescue_pressure,
                reclaim_refused,
                timeout: self.options.write_timeout,
            };
            rescue.throttled(t, &mut sample, &mut self.events);
        }
        let ctx = derive::Context {
            machine,
            swap_free,
            no_anon_swap: t.no_anon_swap,
            smallest_lowering: SMALLEST_LOWERING,
            reclaim_refused,
        };
        let mut obs = derive::observation(id, &sample, t.last_sample.as_ref(), &ctx);
        t.unreclaimable = obs.levers.limit.map_or(Pages::ZERO, |l| l.unreclaimable);
        let view = TenantView { now, pids: &t.pids };
        for a in &mut self.actuators {
            a.observe(&view, &mut obs, &mut self.events);
        }
        t.last_sample = Some(sample);
        Ok(Some(obs))
    }

    /// Writes `id`'s limit `to` now, behind the same last floor check as the policy's limits
    /// (another world's mechanism moving a tenant through its cgroup: a VM's host swap).
    pub fn set_limit(&mut self, id: TenantId, to: Pages) {
        self.apply_limit(id, to);
    }

    /// Starts reading back `asked` of tenant `id`'s swap ahead of its faults (`swap_in.rs`),
    /// unless a read-back of it still runs.
    fn start_swap_in(&mut self, id: TenantId, asked: Pages) {
        let Some(t) = self.tenants.get_mut(&id) else {
            return;
        };
        if t.swap_in.is_some() {
            return;
        }
        let started = t
            .reader
            .pids(&mut t.pids)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                swap_in::SwapIn::start(&self.options.proc_root, &t.pids, asked)
                    .map_err(|e| format!("cannot start a swap-in worker: {e}"))
            });
        match started {
            Ok(worker) => t.swap_in = Some(worker),
            Err(error) => self.events.push(WorldEvent::SwappedIn {
                id,
                asked,
                advised: Bytes::ZERO,
                processes: 0,
                took: Duration::ZERO,
                error: Some(error),
            }),
        }
    }

    /// Reports the read-backs that ended (`WorldEvent::SwappedIn`).
    fn finish_swap_ins(&mut self) {
        for t in self.tenants.values_mut() {
            if t.swap_in.as_ref().is_some_and(swap_in::SwapIn::done) {
                if let Some(worker) = t.swap_in.take() {
                    self.events.push(worker.event(t.id));
                }
            }
        }
    }

    /// Writes `id`'s limit `to` (or, in a dry run, reports it): whatever the policy asks,
    /// lowerings too small to be worth a write being held back there (see
    /// [`SMALLEST_LOWERING`]).
    fn apply_limit(&mut self, id: TenantId, to: Pages) {
        let dry_run = self.options.dry_run;
        let timeout = self.options.write_timeout;
        let machine = self.machine;
        let Some(t) = self.tenants.get_mut(&id) else {
            return;
        };
        let Some(sample) = &t.last_sample else {
            return;
        };
        let from = derive::limit_pages(sample.limit, machine);
        if to == from {
            return;
        }
        let from_limit = (sample.limit != Limit::Max).then_some(from);
        // The policy's rails keep limits above the floor; this is the last check before the
        // kernel, against a bug anywhere above.
        if to < t.unreclaimable {
            self.events.push(WorldEvent::BelowFloor {
                id,
                to,
                floor: t.unreclaimable,
            });
            return;
        }
        if dry_run {
            self.events.push(WorldEvent::Limit {
                id,
                from: from_limit,
                to,
                written: false,
            });
            return;
        }
        match t
            .reader
            .set_limit(&t.cgroup, Limit::Bytes(to.to_bytes()), timeout)
        {
            Ok(()) => {
                if let Some(s) = &mut t.last_sample {
                    s.limit = Limit::Bytes(to.to_bytes());
                }
                let below_max = t.max.is_some_and(|max| to < max);
                set_oom_guard(t, below_max, timeout, &mut self.oom_events);
                self.oom_due |= t.oom.pending;
                // v2: memory.high only throttles the tenant toward the new limit as it
                // allocates; memory.reclaim takes the excess now, without a limit to remember.
                // (v1's limit write reclaims by itself; `reclaim` is a no-op there.)
                // One the kernel could not do (EAGAIN) is not asked again for a while: it
                // counts as the tenant's pressure (the rails hold its shrinks, a throttled
                // tenant is rescued), and memory.high alone moves it meanwhile.
                let usage = t.last_sample.as_ref().map_or(Bytes::ZERO, |s| s.usage);
                let excess = usage.saturating_sub(to.to_bytes());
                if excess > Bytes::ZERO && t.reclaim_refused == 0 {
                    let answer = t.cgroup.reclaim(excess, timeout);
                    if let Some(error) = reclaim_answered(t, answer) {
                        self.events.push(WorldEvent::WriteFailed { id, to, error });
                    }
                }
                self.events.push(WorldEvent::Limit {
                    id,
                    from: from_limit,
                    to,
                    written: true,
                });
            }
            Err(e) if e.is_vanished() => self.drop_gone(id, e.to_string(), true),
            Err(e) => self.events.push(WorldEvent::WriteFailed {
                id,
                to,
                error: e.to_string(),
            }),
        }
    }
}

/// The smallest lowering of a limit worth a kernel write (1 MiB, the rails' smallest shrink
/// step), as the tenants' limit levers declare it: the policy holds smaller ones back while the
/// budget has room for them (`memtide_policy::mechanism::limit::hold_small_lowerings`).
pub const SMALLEST_LOWERING: Pages = Pages(256);

/// Observations during which a tenant whose memory.reclaim answered EAGAIN counts as under
/// pressure (`LimitLever::reclaim_refused`: the rails hold its shrinks) and memory.reclaim is
/// not written for it: the kernel just found nothing more to take.
pub const RECLAIM_REFUSED_TICKS: u32 = 10;

/// Takes note of memory.reclaim's answer for `t`: an EAGAIN (`FsError::Busy`) starts its
/// refusal ([`RECLAIM_REFUSED_TICKS`]). Returns the failure to report, if any.
fn reclaim_answered(t: &mut ManagedTenant, answer: Result<bool, FsError>) -> Option<String> {
    let e = answer.err()?;
    if e.is_busy() {
        // This tick's, then the next observations'.
        t.reclaim_refused = RECLAIM_REFUSED_TICKS + 1;
    }
    Some(e.to_string())
}

/// A tenant about to be managed, as `insert` takes it.
struct Inserted<'a> {
    id: TenantId,
    name: &'a str,
    cgroup_path: &'a str,
    cgroup: MemoryCgroup,
    original: Original,
    origin: Origin,
    child: Option<std::process::Child>,
    lock: Option<lock::CgroupLock>,
}

/// What a tenant had before memtide: its limit settings and (v1) its OOM killer switch.
#[derive(Clone, Debug, PartialEq)]
pub struct Original {
    pub settings: LimitSettings,
    pub oom_kill_disable: Option<bool>,
}

impl Original {
    /// The originals a state file recorded.
    pub fn of(record: &TenantRecord) -> Original {
        Original {
            settings: record.original,
            oom_kill_disable: record.oom.killer_was_disabled,
        }
    }
}

impl Host for LinuxHost {
    type Error = LinuxError;

    fn observe(&mut self) -> Result<HostObservation, LinuxError> {
        let now = self.now();
        let info = meminfo::read_meminfo(&self.options.proc_root)?;
        let swap_total = info.swap_total.unwrap_or(Bytes::ZERO).to_pages_floor();
        let swap_free = info.swap_free.unwrap_or(Bytes::ZERO).to_pages_floor();
        self.machine = info.mem_total.to_pages_floor();
        self.swap_free = swap_free;
        let free = info
            .mem_available
            .or(info.mem_free)
            .unwrap_or(Bytes::ZERO)
            .to_pages_floor();
        let host_pressure =
            pressure::read_memory_pressure(&self.options.proc_root)?.map(|p| p.some.avg10_pct);
        let mut obs = HostObservation {
            now,
            machine: self.machine,
            free,
            host_swap_total: swap_total,
            host_swap_used: swap_total.saturating_sub(swap_free),
            pressure: host_pressure,
            sharing: None,
            remapping: None,
            tenants: Vec::new(),
        };
        for a in &mut self.actuators {
            a.observe_host(&mut obs, &mut self.events);
        }
        self.retry_unrestored();
        self.tend_processes();
        let ids: Vec<TenantId> = self.tenants.keys().copied().collect();
        obs.tenants.reserve(ids.len());
        for id in ids {
            match self.observe_tenant(id, now) {
                Ok(Some(t)) => obs.tenants.push(t),
                Ok(None) => {
                    self.drop_gone(id, "no processes left in its cgroup".to_string(), false)
                }
                Err(e) if e.is_vanished() => self.drop_gone(id, e.to_string(), true),
                Err(e) => self.events.push(WorldEvent::ReadFailed {
                    id,
                    error: e.to_string(),
                }),
            }
        }
        Ok(obs)
    }

    fn apply(&mut self, decision: &Decision) -> Result<(), LinuxError> {
        for action in &decision.actions {
            let moves = action.moves();
            if let Some(to) = moves.limit {
                self.apply_limit(action.id, to);
            }
            if !moves.swap_in.is_zero() && !self.options.dry_run {
                self.start_swap_in(action.id, moves.swap_in);
            }
            if !self.options.dry_run {
                for a in &mut self.actuators {
                    a.apply(action.id, &moves, &mut self.events);
                }
            }
        }
        if !self.options.dry_run {
            for a in &mut self.actuators {
                a.apply_host(decision, &mut self.events);
            }
        }
        Ok(())
    }
}

/// Removes directories created for a launch that failed, deepest first.
fn remove_created(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Where a launched tenant's cgroup goes: `<parent>/<name>`.
pub fn launched_cgroup_path(parent: &str, name: &str) -> String {
    format!("{}/{}", parent.trim_end_matches('/'), name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::CgroupVersion;
    use memtide_controller::World;
    use memtide_model::{ReclamationState, TenantAction};
    use std::path::Path;

    const MIB: u64 = 1 << 20;

    /// A fake v2 host: /proc/meminfo and one cgroup `/t` holding `usage_mib` with one process.
    fn fake_v2(root: &Path, usage_mib: u64) -> LinuxHost {
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 6291456 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        )
        .unwrap();
        let dir = root.join("cg/t");
        std::fs::create_dir_all(&dir).unwrap();
        let files = [
            ("memory.current", (usage_mib * MIB).to_string()),
            ("memory.high", "max".to_string()),
            ("memory.max", "max".to_string()),
            ("memory.low", "0".to_string()),
            ("memory.min", "0".to_string()),
            ("memory.swap.current", "0".to_string()),
            ("memory.swap.max", "max".to_string()),
            ("memory.reclaim", String::new()),
            ("cgroup.procs", "4242\n".to_string()),
            (
                "memory.stat",
                format!(
                    "anon {}\nfile {}\nunevictable 0\nworkingset_refault_anon 10\nworkingset_refault_file 20\npgmajfault 3\n",
                    (usage_mib - 50) * MIB,
                    50 * MIB
                ),
            ),
            ("memory.pressure", "some avg10=1.50 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n".to_string()),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let hierarchy = MemoryHierarchy::new(CgroupVersion::V2, root.join("cg"), "/".to_string());
        LinuxHost::new(
            hierarchy,
            HostOptions {
                proc_root: root.to_path_buf(),
                write_timeout: Duration::from_secs(5),
                dry_run: false,
                log_dir: None,
                rescue_pressure: 10.0,
            },
        )
        .unwrap()
    }

    /// The fake host's /proc/meminfo with 1 GiB of swap, all free.
    fn free_swap_of_1_gib(root: &Path) {
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 6291456 kB\nSwapTotal: 1048576 kB\nSwapFree: 1048576 kB\n",
        )
        .unwrap();
    }

    fn limit_to(id: TenantId, mib: u64) -> Decision {
        let mut a = TenantAction::none(id, ReclamationState::High);
        a.reason.mechanism = a.reason.mechanism.with_moves(memtide_model::Moves {
            limit: Some(Pages::from_mib(mib)),
            ..memtide_model::Moves::default()
        });
        Decision {
            now: Duration::ZERO,
            memory: memtide_model::ResourceState {
                resource: memtide_model::Resource::Memory,
                state: ReclamationState::High,
                budget: Pages::ZERO,
            },
            sharing: None,
            actions: vec![a],
        }
    }

    #[test]
    fn a_failed_launch_removes_the_cgroup_it_made() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        // A fake tree gives a new directory no memory files: reading its settings fails, as
        // when the parent does not delegate the memory controller.
        let spec = TenantSpec::new(TenantId(7), "busy", Pages::ZERO, Pages::from_mib(100));
        let err = host
            .launch(TenantId(7), &spec, "/busy", &["true".to_string()], false)
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("memory.high"), "{err}");
        assert!(!root.path().join("cg/busy").exists());
    }

    #[test]
    fn a_v2_tenant_is_observed_with_its_split_pressure_and_unreclaimable_memory() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        let obs = host.observe().unwrap();
        let t = &obs.tenants[0];
        assert_eq!(t.allocated, Pages::from_mib(300));
        assert_eq!(t.anon, Some(Pages::from_mib(250)));
        assert_eq!(t.file, Some(Pages::from_mib(50)));
        assert_eq!(t.refaults, None, "no delta before a second reading");
        let limit = t.levers.limit.unwrap();
        assert_eq!(
            limit.limit, obs.machine,
            "memory.high max reads as the machine"
        );
        assert_eq!(
            limit.unreclaimable,
            Pages::from_mib(250),
            "no swap: all anon"
        );
        assert_eq!(limit.pressure, Some(1.5));
        let again = host.observe().unwrap();
        assert_eq!(again.tenants[0].refaults, Some(0));
    }

    #[test]
    fn a_v2_tenant_whose_swap_max_is_zero_keeps_its_anon_in_the_floor_despite_host_swap() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        free_swap_of_1_gib(root.path());
        let dir = root.path().join("cg/t");
        std::fs::write(dir.join("memory.swap.max"), "0").unwrap();
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        let floor = |host: &mut LinuxHost| {
            host.observe().unwrap().tenants[0]
                .levers
                .limit
                .unwrap()
                .unreclaimable
        };
        assert_eq!(floor(&mut host), Pages::from_mib(250), "may not swap");
        host.drain_events();
        host.apply(&limit_to(TenantId(0), 200)).unwrap();
        assert!(
            matches!(host.drain_events()[..], [WorldEvent::BelowFloor { .. }]),
            "the last check refuses a limit under its anon"
        );
        std::fs::write(dir.join("memory.swap.max"), (100 * MIB).to_string()).unwrap();
        assert_eq!(
            floor(&mut host),
            Pages::from_mib(150),
            "100 MiB it may swap"
        );
        std::fs::write(dir.join("memory.swap.max"), "max").unwrap();
        assert_eq!(floor(&mut host), Pages::ZERO, "the host's 1 GiB free");
    }

    #[test]
    fn a_v2_tenant_under_a_parent_that_may_not_swap_keeps_its_anon_in_the_floor() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        free_swap_of_1_gib(root.path());
        let parent = root.path().join("cg/p");
        std::fs::create_dir(&parent).unwrap();
        std::fs::rename(root.path().join("cg/t"), parent.join("t")).unwrap();
        std::fs::write(parent.join("memory.swap.max"), (64 * MIB).to_string()).unwrap();
        std::fs::write(parent.join("memory.swap.current"), (14 * MIB).to_string()).unwrap();
        host.adopt(TenantId(0), "t", "/p/t", None, Origin::Adopted)
            .unwrap();
        let floor = host.observe().unwrap().tenants[0]
            .levers
            .limit
            .unwrap()
            .unreclaimable;
        assert_eq!(floor, Pages::from_mib(200), "50 MiB of swap left above it");
    }

    #[test]
    fn a_v2_limit_is_memory_high_and_the_excess_is_reclaimed_now() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.observe().unwrap();
        host.apply(&limit_to(TenantId(0), 280)).unwrap();
        let dir = root.path().join("cg/t");
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.high")).unwrap(),
            (280 * MIB).to_string()
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.reclaim")).unwrap(),
            (20 * MIB).to_string()
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "max",
            "memory.max stays the tenant's own hard fence"
        );
    }

    #[test]
    fn the_host_refuses_a_limit_under_the_unreclaimable_memory() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.observe().unwrap();
        host.drain_events();
        host.apply(&limit_to(TenantId(0), 200)).unwrap();
        let events = host.drain_events();
        assert!(
            matches!(events[..], [WorldEvent::BelowFloor { .. }]),
            "{events:?}"
        );
        assert_eq!(
            std::fs::read_to_string(root.path().join("cg/t/memory.high")).unwrap(),
            "max"
        );
    }

    #[test]
    fn a_vanished_cgroup_is_dropped_and_reported() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        std::fs::remove_dir_all(root.path().join("cg/t")).unwrap();
        let obs = host.observe().unwrap();
        assert!(obs.tenants.is_empty());
        assert!(host.tenant(TenantId(0)).is_none());
        let events = host.drain_events();
        assert!(
            matches!(events[..], [WorldEvent::Gone { .. }]),
            "{events:?}"
        );
    }

    #[test]
    fn a_slice_runs_while_a_cgroup_below_it_holds_a_process() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        // A slice: no process of its own, one in a service below it.
        let slice = root.path().join("cg/t");
        std::fs::write(slice.join("cgroup.procs"), "").unwrap();
        std::fs::create_dir(slice.join("a.service")).unwrap();
        std::fs::write(slice.join("a.service/cgroup.procs"), "4242\n").unwrap();
        let spec = TenantSpec::new(TenantId(0), "t", Pages::from_mib(16), Pages::from_mib(1024));
        let placement = |subtree| Placement {
            cgroup: "/t".into(),
            launch: None,
            adapter: None,
            isolated: false,
            subtree,
        };
        // As a plain cgroup it holds nothing and waits; as a slice it is adopted.
        assert!(matches!(
            host.attach(TenantId(0), &spec, &placement(false), None)
                .unwrap(),
            memtide_controller::Attach::Waiting(_)
        ));
        assert!(matches!(
            host.attach(TenantId(0), &spec, &placement(true), None)
                .unwrap(),
            memtide_controller::Attach::Attached(_)
        ));
        assert_eq!(host.observe().unwrap().tenants.len(), 1);
        // Its service stops: the slice has no process left, and is gone.
        std::fs::write(slice.join("a.service/cgroup.procs"), "").unwrap();
        assert!(host.observe().unwrap().tenants.is_empty());
        assert!(matches!(
            &host.drain_events()[..],
            [WorldEvent::Gone {
                may_return: true,
                ..
            }]
        ));
    }

    /// The files of the cgroup directory `dir`, to make it again.
    fn files_of(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect()
    }

    fn make_again(dir: &Path, files: &[(std::ffi::OsString, Vec<u8>)]) {
        std::fs::create_dir(dir).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }

    #[test]
    fn a_cgroup_removed_and_made_again_between_ticks_is_dropped_as_a_new_cgroup() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.drain_events();
        // systemd restarting the unit within a tick of its adoption: another directory under
        // the same path.
        let dir = root.path().join("cg/t");
        let files = files_of(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        make_again(&dir, &files);
        let obs = host.observe().unwrap();
        assert!(obs.tenants.is_empty());
        assert!(host.tenant(TenantId(0)).is_none());
        let events = host.drain_events();
        assert!(
            matches!(
                &events[..],
                [WorldEvent::Gone { why, may_return: true, .. }] if why.contains("made again")
            ),
            "{events:?}"
        );
        // Adopted again, it is the same tenant from then on.
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.observe().unwrap();
        host.observe().unwrap();
        assert!(host.tenant(TenantId(0)).is_some());
        assert!(host.drain_events().is_empty());
    }

    #[test]
    fn a_cgroup_made_again_after_it_vanished_is_adopted_with_its_own_settings() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.observe().unwrap();
        let dir = root.path().join("cg/t");
        let files = files_of(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        host.observe().unwrap();
        assert!(host.tenant(TenantId(0)).is_none());
        // Made again with a memory.low of its own (the unit's properties changed meanwhile).
        make_again(&dir, &files);
        std::fs::write(dir.join("memory.low"), "1048576").unwrap();
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        std::fs::write(dir.join("memory.low"), "0").unwrap();
        host.release(TenantId(0)).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.low")).unwrap(),
            "1048576",
            "the settings the first cgroup had were given to the new one"
        );
    }

    /// A fake v1 host: /proc/meminfo and one cgroup `/t` as `fake_v1` makes it.
    /// A fake v1 host under `root` with tenant 0 adopted at `cg/t` (holding process 4242, max
    /// 1 GiB), observed once and limited to 200 MiB; with `event_control`, its
    /// `cgroup.event_control` is a plain file, so the OOM watch registers and no kernel ever
    /// signals it. Returns the host and the cgroup's directory.
    fn v1_tenant_limited_to_200(root: &Path, event_control: bool) -> (LinuxHost, PathBuf) {
        let mut host = fake_v1_host(root);
        let dir = root.join("cg/t");
        std::fs::write(dir.join("cgroup.procs"), "4242\n").unwrap();
        if event_control {
            std::fs::write(dir.join("cgroup.event_control"), "").unwrap();
        }
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.set_max(TenantId(0), Pages::from_mib(1024));
        host.observe().unwrap();
        host.apply(&limit_to(TenantId(0), 200)).unwrap();
        host.drain_events();
        (host, dir)
    }

    fn fake_v1_host(root: &Path) -> LinuxHost {
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 6291456 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        )
        .unwrap();
        crate::fs::cgroup_v1::tests::fake_v1(&root.join("cg/t"), true);
        let hierarchy = MemoryHierarchy::new(CgroupVersion::V1, root.join("cg"), "/".to_string());
        LinuxHost::new(
            hierarchy,
            HostOptions {
                proc_root: root.to_path_buf(),
                write_timeout: Duration::from_secs(5),
                dry_run: false,
                log_dir: None,
                rescue_pressure: 10.0,
            },
        )
        .unwrap()
    }

    #[test]
    fn an_oom_guard_a_crashed_memtide_left_on_is_switched_off_at_release() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v1_host(root.path());
        let dir = root.path().join("cg/t");
        // The crashed daemon disabled the killer; the state file's record says it was on.
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        let settings = MemoryCgroup::new(CgroupVersion::V1, dir.clone())
            .settings()
            .unwrap();
        let original = Original {
            settings,
            oom_kill_disable: Some(false),
        };
        let t = host
            .adopt(TenantId(0), "t", "/t", Some(original), Origin::Adopted)
            .unwrap();
        assert!(t.record.oom.guard_on, "the guard found on is memtide's");
        host.release(TenantId(0)).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.oom_control")).unwrap(),
            "0"
        );
    }

    #[test]
    fn a_tenant_that_empties_gets_its_limit_back_and_keeps_its_first_original() {
        let root = tempfile::tempdir().unwrap();
        let (mut host, dir) = v1_tenant_limited_to_200(root.path(), false);
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap(),
            (200 * MIB).to_string()
        );
        // The guard wrote "1" under max; a kernel would then read back the keyed file.
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.oom_control")).unwrap(),
            "1"
        );
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        // Every process exits: dropped, and given back the unlimited limit and the killer.
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        host.observe().unwrap();
        let events = host.drain_events();
        assert!(
            matches!(events[..], [WorldEvent::Gone { restored: true, .. }]),
            "{events:?}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap(),
            "-1"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.oom_control")).unwrap(),
            "0"
        );
        // memtide's limit left there by someone else is not taken as the original next time.
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        std::fs::write(dir.join("memory.limit_in_bytes"), (100 * MIB).to_string()).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "4243\n").unwrap();
        let t = host
            .adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        assert!(matches!(
            t.record.original,
            LimitSettings::V1 {
                limit: Limit::Max,
                ..
            }
        ));
    }

    #[test]
    fn a_dry_run_reports_the_limit_and_writes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.options.dry_run = true;
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.observe().unwrap();
        host.apply(&limit_to(TenantId(0), 280)).unwrap();
        let events = host.drain_events();
        assert!(
            matches!(events[..], [WorldEvent::Limit { written: false, .. }]),
            "{events:?}"
        );
        assert_eq!(
            std::fs::read_to_string(root.path().join("cg/t/memory.high")).unwrap(),
            "max"
        );
    }

    fn rescues(host: &mut LinuxHost) -> Vec<(Pages, Pages)> {
        host.rescue_stalled();
        host.drain_events()
            .into_iter()
            .filter_map(|e| match e {
                WorldEvent::Rescued { from, to, .. } => Some((from, to)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_stalled_v1_tenant_is_read_when_signalled_or_once_a_tick_and_rescued() {
        let root = tempfile::tempdir().unwrap();
        let (mut host, dir) = v1_tenant_limited_to_200(root.path(), true);
        assert!(host.tenants[&TenantId(0)].oom.watch.is_some());
        let stalled = |under: u8| {
            std::fs::write(
                dir.join("memory.oom_control"),
                format!("oom_kill_disable 1\nunder_oom {under}\n"),
            )
            .unwrap();
        };
        let mib = Pages::from_mib;

        // Looked at once when the guard goes on, and again at each check while stalled.
        stalled(1);
        assert_eq!(rescues(&mut host), vec![(mib(200), mib(210))]);
        let again = rescues(&mut host);
        assert_eq!(again.len(), 1, "{again:?}");
        assert_eq!(again[0].0, mib(210), "raised from the rescued limit");
        stalled(0);
        assert_eq!(rescues(&mut host), vec![]);
        // Not signalled and not due: memory.oom_control is not read.
        stalled(1);
        assert_eq!(rescues(&mut host), vec![]);
        // Signalled: read and rescued.
        host.tenants[&TenantId(0)]
            .oom
            .watch
            .as_ref()
            .unwrap()
            .signal();
        let got = rescues(&mut host);
        assert_eq!(got.len(), 1, "{got:?}");
        stalled(0);
        assert_eq!(rescues(&mut host), vec![]);
        // A tick makes a guarded tenant at its limit due once, signalled or not; one well
        // under its limit cannot be under OOM and is not read.
        stalled(1);
        assert_eq!(rescues(&mut host), vec![]);
        host.observe().unwrap();
        assert_eq!(rescues(&mut host), vec![]);
        let limit = std::fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), limit).unwrap();
        host.observe().unwrap();
        assert_eq!(rescues(&mut host).len(), 1);
    }

    #[test]
    fn a_stalled_v1_tenant_without_an_eventfd_is_read_at_every_check() {
        let root = tempfile::tempdir().unwrap();
        let (mut host, dir) = v1_tenant_limited_to_200(root.path(), false);
        assert!(
            host.tenants[&TenantId(0)].oom.watch.is_none(),
            "no cgroup.event_control"
        );
        assert_eq!(rescues(&mut host), vec![]);
        assert_eq!(rescues(&mut host), vec![]);
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 1\nunder_oom 1\n",
        )
        .unwrap();
        assert_eq!(
            rescues(&mut host),
            vec![(Pages::from_mib(200), Pages::from_mib(210))]
        );
    }

    /// The lever of tenant 0 at a new observation.
    fn lever(host: &mut LinuxHost) -> memtide_model::LimitLever {
        host.observe().unwrap().tenants[0].levers.limit.unwrap()
    }

    #[test]
    fn a_reclaim_the_kernel_refused_holds_shrinks_and_is_not_asked_again_for_ten_ticks() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        let reclaim = root.path().join("cg/t/memory.reclaim");
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        assert!(!lever(&mut host).reclaim_refused);
        host.apply(&limit_to(TenantId(0), 280)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&reclaim).unwrap(),
            (20 * MIB).to_string()
        );
        // The kernel answers EAGAIN (as write_bounded reports it): reported, and remembered.
        let t = host.tenants.get_mut(&TenantId(0)).unwrap();
        let busy = FsError::Busy {
            path: reclaim.clone(),
            value: (20 * MIB).to_string(),
        };
        let error = reclaim_answered(t, Err(busy)).unwrap();
        assert!(error.contains("memory.reclaim"), "{error}");
        std::fs::write(&reclaim, "").unwrap();
        for tick in 1..=RECLAIM_REFUSED_TICKS {
            assert!(lever(&mut host).reclaim_refused, "tick {tick}: pressure");
            // A lowering meanwhile moves memory.high alone.
            host.apply(&limit_to(TenantId(0), 280 - u64::from(tick)))
                .unwrap();
            assert_eq!(
                std::fs::read_to_string(&reclaim).unwrap(),
                "",
                "tick {tick}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.path().join("cg/t/memory.high")).unwrap(),
            (270 * MIB).to_string()
        );
        assert!(!lever(&mut host).reclaim_refused, "ten ticks later");
        host.apply(&limit_to(TenantId(0), 260)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&reclaim).unwrap(),
            (40 * MIB).to_string()
        );
        // Any other failure is reported, and asked again at the next lowering.
        let t = host.tenants.get_mut(&TenantId(0)).unwrap();
        let other = FsError::Write {
            path: reclaim.clone(),
            value: "1".to_string(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(reclaim_answered(t, Err(other)).is_some());
        assert!(reclaim_answered(t, Ok(true)).is_none());
        assert!(!lever(&mut host).reclaim_refused);
    }

    /// Tenant 0's memory.events `high` count and own PSI some avg10.
    fn throttle(root: &Path, high: u64, avg10: f64) {
        let dir = root.join("cg/t");
        std::fs::write(
            dir.join("memory.events"),
            format!("low 0\nhigh {high}\nmax 0\n"),
        )
        .unwrap();
        std::fs::write(
            dir.join("memory.pressure"),
            format!("some avg10={avg10:.2} avg60=0.00 avg300=0.00 total=1\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_v2_tenant_throttled_over_its_high_is_rescued_under_pressure_or_a_refused_reclaim() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        let high = root.path().join("cg/t/memory.high");
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        host.set_max(TenantId(0), Pages::from_mib(300));
        throttle(root.path(), 10, 0.0);
        host.observe().unwrap();
        host.apply(&limit_to(TenantId(0), 280)).unwrap();
        host.drain_events();
        let rescued = |host: &mut LinuxHost| {
            let limit = lever(host).limit;
            let events: Vec<_> = host
                .drain_events()
                .into_iter()
                .filter_map(|e| match e {
                    WorldEvent::Rescued { from, to, .. } => Some((from, to)),
                    _ => None,
                })
                .collect();
            (limit, events)
        };
        let mib = Pages::from_mib;
        // Throttled (usage 300 over high 280) without pressure: left to the rails.
        throttle(root.path(), 20, 9.9);
        assert_eq!(rescued(&mut host), (mib(280), vec![]));
        // Under pressure but no longer throttled: nothing.
        throttle(root.path(), 20, 50.0);
        assert_eq!(rescued(&mut host), (mib(280), vec![]));
        // Both: raised at once by one step, and observed at its new limit.
        throttle(root.path(), 30, 10.0);
        assert_eq!(rescued(&mut host), (mib(294), vec![(mib(280), mib(294))]));
        assert_eq!(
            std::fs::read_to_string(&high).unwrap(),
            (294 * MIB).to_string()
        );
        // A refused reclaim stands for the pressure; never above the tenant's max.
        let t = host.tenants.get_mut(&TenantId(0)).unwrap();
        t.reclaim_refused = RECLAIM_REFUSED_TICKS + 1;
        throttle(root.path(), 40, 0.0);
        assert_eq!(rescued(&mut host), (mib(300), vec![(mib(294), mib(300))]));
        throttle(root.path(), 50, 80.0);
        assert_eq!(rescued(&mut host), (mib(300), vec![]), "at its max");
        // Well under its limit, a tenant is not held by it.
        host.set_max(TenantId(0), mib(1024));
        std::fs::write(
            root.path().join("cg/t/memory.current"),
            (200 * MIB).to_string(),
        )
        .unwrap();
        throttle(root.path(), 60, 80.0);
        assert_eq!(rescued(&mut host), (mib(300), vec![]));
        // Nor in a dry run, which writes nothing.
        std::fs::write(
            root.path().join("cg/t/memory.current"),
            (300 * MIB).to_string(),
        )
        .unwrap();
        host.options.dry_run = true;
        throttle(root.path(), 70, 80.0);
        assert_eq!(rescued(&mut host), (mib(300), vec![]));
        host.options.dry_run = false;
        throttle(root.path(), 80, 80.0);
        assert_eq!(rescued(&mut host), (mib(315), vec![(mib(300), mib(315))]));
    }

    #[test]
    fn a_limit_is_written_however_small_the_lowering_and_declares_the_smallest_worth_it() {
        let root = tempfile::tempdir().unwrap();
        let mut host = fake_v2(root.path(), 300);
        host.adopt(TenantId(0), "t", "/t", None, Origin::Adopted)
            .unwrap();
        let obs = host.observe().unwrap();
        assert_eq!(
            obs.tenants[0].levers.limit.unwrap().smallest_lowering,
            SMALLEST_LOWERING
        );
        host.apply(&limit_to(TenantId(0), 280)).unwrap();
        let mut d = limit_to(TenantId(0), 0);
        d.actions[0].reason.mechanism =
            d.actions[0]
                .reason
                .mechanism
                .with_moves(memtide_model::Moves {
                    limit: Some(Pages::from_mib(280) - Pages(128)),
                    ..memtide_model::Moves::default()
                });
        d.memory.budget = Pages::from_mib(1024);
        host.apply(&d).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.path().join("cg/t/memory.high")).unwrap(),
            (280 * MIB - 128 * 4096).to_string(),
            "the policy holds small lowerings back, not the world"
        );
    }
}
