//! The daemon's life on the runner's service: set up tenants (adopt, launch or re-adopt from the state file), drive the wall-clock loop (publish each tick, log API changes, reload on SIGHUP), and on every way out (a stop signal, a failed start, an error, a panic) give back what it changed.
//!
//! Start-up reads and checks everything it can before changing anything: the hierarchy, the
//! parent, the state file (refused when another live memtide holds it), and it binds the API
//! port. Only then does it create the parent, lock and adopt cgroups and launch commands. From
//! that point a [`Running`] daemon owns the host, and dropping it (on any return or unwind)
//! releases every tenant and removes the state file, or keeps the file when a restore failed,
//! so the next start can finish the job.
//!
//! The loop itself (ticks on the wall clock, the API's requests between ticks, when the state
//! file is written) is the runner's [`Service`]; the [`Daemon`] is its [`Driver`]: the
//! configuration and its reload, the tenants' slots, the publisher and the log.

use crate::command::{Change, Refusal};
use crate::config::{
    DaemonConfig, EstimatorChoice, IoScheduler, ParentCgroup, RailsSection, Reclaim, TenantConfig,
    TenantOrigin,
};
use crate::log::Logger;
use crate::publish::{Managed, Publisher};
use crate::state_file::{self, ApiChanges, StateError, StateFile, TenantChange};
use memtide_controller::{Controller, ControllerConfig, World};
use memtide_linux::host::ksm::{KsmDriver, Sharing};
use memtide_linux::host::{
    launched_cgroup_path, AppBalloon, HostOptions, IoOptions, LinuxError, LinuxHost, Placement,
};
use memtide_linux::{IoCap, MemoryHierarchy};
use memtide_model::{
    Bytes, EstimatorConfig, Pages, SamplingConfig, TenantId, TenantSpec, WorkingSetConfig,
    WorldEvent,
};
use memtide_policy::{LimitRails, QuotaSettings, ReclamationThresholds};
use memtide_qemu::{QemuHost, QemuOptions, Record, VmPlacement};
use memtide_runner::{
    Change as RunChange, Driver, Outcome, Runner, Service, Sink, StateSaver, Status, TickRecord,
    TickView, WallClock,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest wait for a VM's QMP answer.
const QMP_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the daemon could not run. `is_usage` errors are the user's (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Linux(#[from] LinuxError),
    #[error(transparent)]
    Qemu(memtide_qemu::QemuError),
    #[error(transparent)]
    State(#[from] state_file::StateError),
    #[error("{0}")]
    Api(String),
    #[error(transparent)]
    Balloon(#[from] memtide_agents::SocketError),
}

/// The QEMU world's errors, with the Linux host's kept as they are (their exit status too).
impl From<memtide_qemu::QemuError> for DaemonError {
    fn from(e: memtide_qemu::QemuError) -> DaemonError {
        match e {
            memtide_qemu::QemuError::Linux(l) => DaemonError::Linux(l),
            other => DaemonError::Qemu(other),
        }
    }
}

impl DaemonError {
    /// True for errors in what the user gave (config, cgroup names, a cgroup another memtide
    /// holds, every tenant refused, a disk this host cannot divide as `[io]` asks): exit
    /// status 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DaemonError::Usage(_)
                | DaemonError::Linux(
                    LinuxError::UnknownCgroup { .. }
                        | LinuxError::OutsideParent { .. }
                        | LinuxError::Lock { .. }
                        | LinuxError::IoNeedsBfq { .. }
                        | LinuxError::NoBlkio { .. }
                        | LinuxError::NoIoController { .. }
                )
                | DaemonError::Qemu(memtide_qemu::QemuError::Vm { .. })
                | DaemonError::State(state_file::StateError::InUse { .. })
                | DaemonError::Balloon(
                    memtide_agents::SocketError::InUse { .. }
                        | memtide_agents::SocketError::NotASocket { .. }
                        | memtide_agents::SocketError::PathTooLong { .. }
                )
        )
    }
}

/// What the signal handlers set.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    /// SIGTERM, SIGINT: restore and exit.
    pub stop: Arc<AtomicBool>,
    /// SIGHUP: read the configuration file again.
    pub reload: Arc<AtomicBool>,
}

/// Where SIGHUP reads the configuration from.
#[derive(Clone, Debug)]
pub struct ReloadFrom {
    pub path: PathBuf,
    /// `--dry-run` was given: a reloaded file cannot turn the dry run off.
    pub force_dry_run: bool,
}

/// A configured tenant: its configuration and cgroup. Where it stands is the runner's
/// (`Status`); a launched tenant in a dry run is never declared there (nothing is launched).
struct Slot {
    id: TenantId,
    config: TenantConfig,
    /// The cgroup path inside the memory hierarchy.
    cgroup: String,
    /// Why it waits, as last logged (logged again only when it changes).
    waiting: Option<String>,
}

/// Runs until `signals.stop` is set (SIGTERM/SIGINT), then restores and returns.
pub fn run(
    config: DaemonConfig,
    signals: Signals,
    reload_from: Option<ReloadFrom>,
) -> Result<(), DaemonError> {
    let mut running = Running::prepare(config, signals, reload_from)?;
    let result = running.start().and_then(|()| running.serve());
    let restored = running.shutdown();
    result?;
    restored
}

/// The daemon and the service it drives: the runner of the QEMU world (the Linux host, with VMs
/// beside its cgroups) on the wall clock, with the API's requests and the state file.
struct Running {
    service: Service<QemuHost>,
    daemon: Daemon,
}

/// The daemon's side of the loop: everything about a tick that is the daemon's own.
struct Daemon {
    config: DaemonConfig,
    log: Logger,
    publisher: Publisher,
    slots: Vec<Slot>,
    next_id: u32,
    parent: String,
    hierarchy: &'static str,
    /// Records of the state file found at start, by tenant name, until their tenants start.
    previous: Option<StateFile>,
    api: Option<crate::api::ApiServer>,
    /// The application balloon socket and its hub (`[balloon] enabled`).
    balloon: Option<Balloon>,
    signals: Signals,
    reload_from: Option<ReloadFrom>,
    /// The running tenants (id, name, cgroup) as they stood before the tick under way.
    managed: Vec<Managed>,
    /// The tick under way was observed (an error after that was the apply's).
    observed: bool,
    /// Tenants the tick under way tried again to start, and what came of it.
    started: Vec<(TenantId, Outcome)>,
    /// Set once `shutdown` ran.
    shut_down: bool,
    /// The number of the next disk I/O failure to log (`IoFailure::seq`).
    io_seen: u64,
}

impl Running {
    /// Reads and checks everything, binds the API port; changes nothing on the host.
    fn prepare(
        config: DaemonConfig,
        signals: Signals,
        reload_from: Option<ReloadFrom>,
    ) -> Result<Running, DaemonError> {
        let log = Logger::new(config.daemon.log_format);
        let dry_run = config.daemon.dry_run;
        let proc_root = config.host.proc_root.clone();
        let found = MemoryHierarchy::detect(&proc_root).map_err(LinuxError::from)?;
        let parent = match &config.host.parent {
            ParentCgroup::OwnCgroup => found.own_cgroup.clone(),
            ParentCgroup::Path(p) => p.clone(),
        };
        let mut slots = Vec::with_capacity(config.tenants.len());
        for (i, t) in config.tenants.iter().enumerate() {
            slots.push(slot(t, TenantId(i as u32), &parent)?);
        }
        let parent_dir = found.dir_of(&parent);
        if dry_run && !parent_dir.is_dir() {
            return Err(DaemonError::Usage(format!(
                "parent cgroup {parent:?} does not exist ({})",
                parent_dir.display()
            )));
        }
        let state_path = config.daemon.state_file.clone();
        let previous = if dry_run {
            None
        } else {
            let previous = state_file::load(&state_path)?;
            if let Some(prev) = &previous {
                state_file::check_not_in_use(&state_path, prev, &proc_root)?;
            }
            previous
        };
        let host = LinuxHost::new(
            found.clone(),
            HostOptions {
                proc_root: proc_root.clone(),
                write_timeout: config.host.write_timeout,
                dry_run,
                log_dir: state_path.parent().map(|d| d.join("logs")),
            },
        )?;
        let swap = swap_total(&proc_root);
        let controller = controller_for(&config, host.machine(), swap)?;
        let budget = controller.config().budget.unwrap_or_default();
        let mut publisher = Publisher::new(&config, found.version.name(), &parent, budget);
        let (sender, requests) = std::sync::mpsc::channel();
        // The port is taken before anything changes: a daemon that cannot serve its API
        // leaves the host as it found it.
        let api = crate::api::ApiServer::start(config.daemon.listen, publisher.shared(), sender)
            .map_err(|e| DaemonError::Api(format!("API on {}: {e}", config.daemon.listen)))?;
        // So is the balloon socket: applications' agents register through it.
        let mut host = host;
        let balloon = if config.balloon.enabled {
            let b = Balloon::start(&config.balloon, &host)?;
            host = host.with(AppBalloon::new(b.hub.clone()));
            Some(b)
        } else {
            None
        };
        // KSM's own settings are kept beside the state file before any changes, so a run that
        // crashed is restored from them.
        if config.sharing.enabled {
            let ksm = KsmDriver::take_over(
                &proc_root,
                state_path.parent().map(|d| d.join("ksm.json")).as_deref(),
                config.host.write_timeout,
                dry_run,
            )?;
            let no_merge_any = !ksm.merge_any();
            host = host.with(Sharing::new(ksm));
            if no_merge_any {
                log.warn(
                    "sharing_no_merge_any",
                    &[(
                        "why",
                        json!("this kernel has no PR_SET_MEMORY_MERGE (Linux 6.4 and later): launched tenants are not asked to merge; processes that madvise(MADV_MERGEABLE) still are merged"),
                    )],
                );
            }
        }
        // So is the device's scheduler, when memtide divides a disk.
        if config.io.enabled {
            host.enable_io(&io_options(&config, &state_path))?;
        }
        let host = QemuHost::new(
            host,
            QemuOptions {
                run_dir: state_path
                    .parent()
                    .map_or_else(std::env::temp_dir, |d| d.join("vms")),
                qmp_timeout: QMP_TIMEOUT,
                stats_interval: 1,
                dry_run,
                proc_root: proc_root.clone(),
            },
        );
        let mut runner = Runner::new(host, controller, config.daemon.tick);
        for s in &slots {
            declare(&mut runner, s, &config);
        }
        publisher.waiting(&waiting_view(&slots, &runner));
        let mut service = Service::new(runner, WallClock::new()).with_requests(requests);
        if !dry_run {
            service = service.with_state(StateSaver::new(state_path, found.version.name()));
        }
        let next_id = slots.len() as u32;
        Ok(Running {
            service,
            daemon: Daemon {
                log,
                publisher,
                slots,
                next_id,
                parent,
                hierarchy: found.version.name(),
                previous,
                api: Some(api),
                balloon,
                signals,
                reload_from,
                managed: Vec::new(),
                observed: false,
                started: Vec::new(),
                shut_down: false,
                io_seen: 0,
                config,
            },
        })
    }

    fn start(&mut self) -> Result<(), DaemonError> {
        self.daemon.start(&mut self.service)
    }

    /// Ticks until a stop signal.
    fn serve(&mut self) -> Result<(), DaemonError> {
        if let Some(api) = &self.daemon.api {
            self.daemon.log.info(
                "listening",
                &[("address", json!(api.local_addr().to_string()))],
            );
        }
        self.service.serve(&mut self.daemon)?;
        Ok(())
    }

    fn shutdown(&mut self) -> Result<(), DaemonError> {
        self.daemon.shutdown(&mut self.service)
    }
}

impl Drop for Running {
    /// A panic or an early return still gives back what was changed.
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The application balloon socket: its event loop and the hub it shares with the host.
struct Balloon {
    server: memtide_agents::server::Server,
    hub: memtide_agents::hub::Hub,
}

impl Balloon {
    /// Binds the socket (before anything on the host changes) and starts its loop; an agent
    /// registers for the tenant whose cgroup holds its process.
    fn start(
        config: &crate::config::BalloonSection,
        host: &LinuxHost,
    ) -> Result<Balloon, DaemonError> {
        use memtide_agents::hub::{Hub, SessionConfig};
        use memtide_agents::server::{Server, ServerConfig};
        let hub = Hub::new(
            SessionConfig {
                stats_interval: config.stats_interval,
                dead_after: config.dead_after,
                ..SessionConfig::default()
            },
            Box::new(host.agent_tenants()),
        );
        let server = Server::start(
            &ServerConfig {
                socket: config.socket.clone(),
                mode: config.mode,
                max_connections: config.max_agents,
            },
            hub.handler(),
        )?;
        hub.set_wake(server.waker());
        Ok(Balloon { server, hub })
    }
}

impl Daemon {
    /// Logs what happened to applications' agents since the last call.
    fn log_agent_events(&mut self, hub: &memtide_agents::hub::Hub) {
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
                    self.publisher.app_closed(tenant, text);
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

    fn dry_run(&self) -> bool {
        self.config.daemon.dry_run
    }

    /// Creates the parent if needed, adopts, re-adopts or launches every tenant, gives
    /// tenants the previous run managed and this one does not back what they had.
    fn start(&mut self, service: &mut Service<QemuHost>) -> Result<(), DaemonError> {
        if !self.dry_run() {
            service
                .runner_mut()
                .world_mut()
                .linux_mut()
                .create_parent(&self.parent)?;
        }
        let readopting = self.previous.is_some();
        let mut records: BTreeMap<String, Record> = BTreeMap::new();
        let mut estimates = BTreeMap::new();
        if let Some(prev) = self.previous.take() {
            records = prev
                .tenants
                .into_iter()
                .map(|r| (r.linux.name.clone(), r))
                .collect();
            estimates = prev.estimates;
            *service.changes_mut() = prev.changes;
        }
        if let Some(tax) = service.changes().tax_rate {
            service.runner_mut().controller_mut().set_tax_rate(tax);
        }
        self.log.info(
            "start",
            &[
                ("version", json!(env!("CARGO_PKG_VERSION"))),
                ("hierarchy", json!(self.hierarchy)),
                ("parent", json!(self.parent)),
                (
                    "budget_bytes",
                    json!(service
                        .runner()
                        .controller()
                        .config()
                        .budget
                        .map(|b| b.to_bytes().0)),
                ),
                ("dry_run", json!(self.dry_run())),
                ("tenants", json!(self.slots.len())),
                ("readopting", json!(readopting)),
            ],
        );
        if let Some(io) = service.runner().world().linux().io() {
            let device = io.device();
            self.log.info(
                "io",
                &[
                    ("device", json!(device.name())),
                    ("dev", json!(device.dev().to_string())),
                    ("weights", json!(io.interface().weight_file())),
                    (
                        "scheduler",
                        json!(device
                            .scheduler()
                            .ok()
                            .and_then(|s| s.active)
                            .unwrap_or_else(|| "none".to_string())),
                    ),
                ],
            );
        }
        for i in 0..self.slots.len() {
            let name = self.slots[i].config.name.clone();
            if let Some(change) = service.changes().tenants.get(&name).cloned() {
                apply_change_to_config(&mut self.slots[i].config, &change);
                service
                    .runner_mut()
                    .redeclare(spec(&self.slots[i], &self.config));
            }
            let record = records.remove(&name);
            let estimate = estimates.get(&name).map(|&b| Bytes(b).to_pages_floor());
            self.start_tenant(service.runner_mut(), i, record.as_ref(), estimate)?;
        }
        // Tenants the previous run managed but the configuration no longer names get back what
        // they had.
        for record in records.into_values() {
            self.forget(service.runner_mut(), record);
        }
        let configured = !self.slots.is_empty();
        let all_refused = self.slots.iter().all(|slot| {
            matches!(
                service.runner().tenant(slot.id).map(|t| &t.status),
                Some(Status::Refused(_))
            )
        });
        if configured && all_refused {
            return Err(DaemonError::Usage(format!(
                "every configured tenant was refused by admission control, so nothing would be \
                 managed: {}",
                self.publisher.last_refusal().unwrap_or_default()
            )));
        }
        self.save_state(service, true);
        Ok(())
    }

    /// Releases every tenant, stops the API, removes the state file (kept when a restore
    /// failed) and the parent this daemon created. Runs once; `Drop` calls it on an unwind.
    fn shutdown(&mut self, service: &mut Service<QemuHost>) -> Result<(), DaemonError> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        let running = service
            .runner()
            .tenants()
            .filter(|t| t.status == Status::Running)
            .count();
        self.log.info("stopping", &[("tenants", json!(running))]);
        self.api = None;
        // Agents hear bye before their tenants' limits are given back.
        if let Some(b) = self.balloon.take() {
            b.server.stop();
            self.log_agent_events(&b.hub);
        }
        let errors = service.runner_mut().shutdown();
        for (name, e) in &errors {
            self.log.error(
                "restore_failed",
                &[("tenant", json!(name)), ("error", json!(e.to_string()))],
            );
        }
        let mut result = Ok(());
        if !self.dry_run() {
            if errors.is_empty() {
                if let Err(e) = service.remove_state() {
                    self.log
                        .error("state_file", &[("error", json!(e.to_string()))]);
                    result = Err(e.into());
                }
            } else {
                // The next start re-adopts what could not be restored and tries again.
                self.save_state(service, true);
                self.log.error(
                    "state_kept",
                    &[
                        (
                            "path",
                            json!(self.config.daemon.state_file.display().to_string()),
                        ),
                        ("why", json!("some tenants could not be restored")),
                    ],
                );
            }
        }
        self.log.info(
            "stopped",
            &[("restored", json!(!self.dry_run() && errors.is_empty()))],
        );
        result
    }

    /// Starts slot `i` through the runner: admission control, then adopt, re-adopt (under the
    /// previous run's `record`, its estimator resumed from `estimate`) or launch. An adopted
    /// cgroup that does not exist yet, or holds no process, waits and is adopted when it can be.
    /// A launched tenant is not launched in a dry run.
    fn start_tenant(
        &mut self,
        runner: &mut Runner<QemuHost>,
        i: usize,
        record: Option<&Record>,
        estimate: Option<Pages>,
    ) -> Result<(), DaemonError> {
        let id = self.slots[i].id;
        if runner.tenant(id).is_none() {
            self.log.warn(
                "not_launched",
                &[
                    ("tenant", json!(self.slots[i].config.name)),
                    ("why", json!("dry run writes nothing")),
                ],
            );
            return Ok(());
        }
        let outcome = runner.start(id, record, estimate)?;
        self.started_or_not(runner, id, &outcome, estimate);
        Ok(())
    }

    /// Logs and publishes what came of starting tenant `id`.
    fn started_or_not(
        &mut self,
        runner: &Runner<QemuHost>,
        id: TenantId,
        outcome: &Outcome,
        estimate: Option<Pages>,
    ) {
        let Some(i) = self.slots.iter().position(|s| s.id == id) else {
            return;
        };
        let slot = &mut self.slots[i];
        match outcome {
            Outcome::Started(how) => {
                slot.waiting = None;
                let view = runner.controller().tenant(id);
                let (min, max) =
                    view.map_or((Pages::ZERO, Pages::ZERO), |v| (v.spec.min, v.spec.max));
                self.log.info(
                    how,
                    &[
                        ("tenant", json!(slot.config.name)),
                        ("cgroup", json!(slot.cgroup)),
                        ("min_bytes", json!(min.to_bytes().0)),
                        ("max_bytes", json!(max.to_bytes().0)),
                        ("estimate_bytes", json!(estimate.map(|e| e.to_bytes().0))),
                    ],
                );
                self.publisher.record(
                    &slot.config.name,
                    "admitted",
                    &format!("{how} {}", slot.cgroup),
                );
                if let Some(why) = runner.world().linux().io().and_then(|io| io.unmanaged(id)) {
                    self.log.warn(
                        "io_unmanaged",
                        &[
                            ("tenant", json!(slot.config.name)),
                            ("why", json!(why)),
                            ("memory", json!("managed")),
                        ],
                    );
                }
            }
            Outcome::Waiting(why) => {
                if slot.waiting.as_deref() != Some(why) {
                    self.log.warn(
                        "waiting",
                        &[
                            ("tenant", json!(slot.config.name)),
                            ("cgroup", json!(slot.cgroup)),
                            ("why", json!(why)),
                        ],
                    );
                    slot.waiting = Some(why.clone());
                }
            }
            Outcome::Refused(why) => {
                slot.waiting = None;
                self.log.error(
                    "refused",
                    &[("tenant", json!(slot.config.name)), ("why", json!(why))],
                );
                self.publisher.record(&slot.config.name, "refused", why);
            }
            Outcome::Done(_) | Outcome::NotRunning => {}
        }
        self.publisher.waiting(&waiting_view(&self.slots, runner));
    }

    /// Gives a tenant the previous run managed, and this one does not, back what it had.
    fn forget(&mut self, runner: &mut Runner<QemuHost>, record: Record) {
        let name = record.linux.name.clone();
        match runner.world_mut().restore(&record) {
            Ok(()) => self.log.info(
                "released",
                &[
                    ("tenant", json!(name)),
                    ("why", json!("no longer configured")),
                ],
            ),
            Err(e) => self.log.warn(
                "release_failed",
                &[("tenant", json!(name)), ("error", json!(e.to_string()))],
            ),
        }
    }

    /// Writes the state file now (`force`) or when the service finds it due; a failure is
    /// logged.
    fn save_state(&mut self, service: &mut Service<QemuHost>, force: bool) {
        if let Err(e) = service.save_state(force) {
            self.unsaved(e);
        }
    }
    /// SIGHUP: reads the configuration file again and applies what can change while running
    /// (tick, policy, rails, tenants added, removed or changed); settings that need a restart
    /// keep their running value and are named in a warning. A file that does not load changes
    /// nothing. The file replaces changes made through the API.
    fn reload_file(&mut self, service: &mut Service<QemuHost>, from: &ReloadFrom) {
        let mut new = match DaemonConfig::load(&from.path) {
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
        let old = &self.config;
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
        // Tenants outside the parent cannot be managed; they are skipped, the rest applies.
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
            .controller_mut()
            .set_reclaim_always(new.policy.reclaim == Reclaim::Always);
        runner.controller_mut().set_cache(cache(new.cache.as_ref()));
        *service.changes_mut() = ApiChanges::default();

        // Tenants no longer configured, or whose identity changed, are let go.
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
        let mut slots = Vec::with_capacity(new.tenants.len());
        let mut started = Vec::new();
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
                            declare(service.runner_mut(), &new_slot, &new);
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
        self.slots = slots;
        self.config = new;
        // New tenants, and those refused before whose configuration changed, start now.
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
            match service
                .runner_mut()
                .world_mut()
                .linux_mut()
                .set_io_cap(slot.id, cap)
            {
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

    /// Stops managing a slot's tenant (restoring it) and forgets it.
    fn let_go(&mut self, runner: &mut Runner<QemuHost>, slot: &Slot, why: &str) {
        let running = runner
            .tenant(slot.id)
            .is_some_and(|t| t.status == Status::Running);
        match runner.remove(slot.id) {
            Ok(()) if running => self.log.info(
                "released",
                &[("tenant", json!(slot.config.name)), ("why", json!(why))],
            ),
            Ok(()) => {}
            Err(e) => self.log.error(
                "restore_failed",
                &[
                    ("tenant", json!(slot.config.name)),
                    ("error", json!(e.to_string())),
                ],
            ),
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
        if let Some(io) = t.world.linux().io() {
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
        for event in t.events {
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
                WorldEvent::RestoreFailed { name, error } => self.log.error(
                    "restore_failed",
                    &[("tenant", json!(name)), ("error", json!(error))],
                ),
                _ => {}
            }
        }
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

    /// Limits raised between ticks for tenants stalled at their limit.
    fn between(&mut self, runner: &Runner<QemuHost>, events: Vec<WorldEvent>) {
        let managed = managed_view(&self.slots, runner);
        self.publisher.rescues(events, &managed, &self.log);
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

/// The controller for `config` on a host with `machine` memory and `swap`: the budget (given,
/// or MemTotal minus the reserve) and admission control backed by the memory outside it.
fn controller_for(
    config: &DaemonConfig,
    machine: Pages,
    swap: Pages,
) -> Result<Controller, DaemonError> {
    let budget = config
        .host
        .budget_bytes
        .map(|b| Bytes(b).to_pages_floor())
        .unwrap_or_else(|| {
            machine.saturating_sub(Bytes(config.host.reserve_bytes).to_pages_floor())
        });
    let controller_config = ControllerConfig {
        tax_rate: config.policy.tax_rate,
        thresholds: ReclamationThresholds::default(),
        budget: Some(budget),
        // A VM's host swap: its cgroup limit lowered by at most this a tick.
        host_swap_per_tick: Pages::from_mib(64),
        balloon_stall_ticks: 3,
        rails: rails(&config.rails),
        dry_run: config.daemon.dry_run,
        reclaim_always: config.policy.reclaim == Reclaim::Always,
        shared_host: true,
        backing: memtide_policy::Backing::OutsideBudget,
        sharing: config.sharing.enabled.then(|| config.sharing.settings()),
        cache: cache(config.cache.as_ref()),
    };
    // Admission on Linux: mins must fit in the budget; what lies above min is backed by the
    // rest of the host's memory and its swap.
    let backing = (machine + swap).saturating_sub(budget);
    Controller::new(controller_config, budget, backing)
        .map_err(|e| DaemonError::Usage(e.to_string()))
}

/// Runs admission control on every tenant of `config` as the daemon would on a host with
/// `machine` bytes of RAM and `swap` bytes of swap; the first refusal, as the daemon logs it.
pub fn check_admission(config: &DaemonConfig, machine: Bytes, swap: Bytes) -> Result<(), String> {
    let mut controller = controller_for(config, machine.to_pages_floor(), swap.to_pages_floor())
        .map_err(|e| e.to_string())?;
    for (i, t) in config.tenants.iter().enumerate() {
        let slot = slot(t, TenantId(i as u32), "/").map_err(|e| e.to_string())?;
        controller
            .admit(spec(&slot, config))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The controller's cache quotas from `[cache]`.
fn cache(c: Option<&memtide_config::quotas::QuotaTable>) -> Option<QuotaSettings> {
    c.map(|q| QuotaSettings::of(q.budget, q.hit_us, q.miss_us, q.steps))
}

fn rails(r: &RailsSection) -> LimitRails {
    LimitRails {
        shrink_step: r.shrink_step,
        floor_margin: Bytes(r.floor_margin_bytes).to_pages_ceil(),
        backoff_faults_per_s: r.backoff_faults_per_s,
        backoff_pressure: r.backoff_pressure,
        ..LimitRails::default()
    }
}

fn swap_total(proc_root: &Path) -> Pages {
    memtide_linux::read_meminfo(proc_root)
        .ok()
        .and_then(|m| m.swap_total)
        .unwrap_or(Bytes::ZERO)
        .to_pages_floor()
}

/// A slot for tenant `t`: its cgroup path, checked to lie under the parent.
fn slot(t: &TenantConfig, id: TenantId, parent: &str) -> Result<Slot, DaemonError> {
    let cgroup = match &t.origin {
        TenantOrigin::Adopt { cgroup } => {
            if !memtide_linux::is_under(parent, cgroup) {
                return Err(LinuxError::OutsideParent {
                    cgroup: cgroup.clone(),
                    parent: parent.to_string(),
                }
                .into());
            }
            cgroup.clone()
        }
        TenantOrigin::Vm {
            cgroup: Some(cgroup),
            ..
        } => cgroup.clone(),
        TenantOrigin::Launch { .. } | TenantOrigin::Vm { cgroup: None, .. } => {
            launched_cgroup_path(parent, &t.name)
        }
    };
    Ok(Slot {
        id,
        config: t.clone(),
        cgroup,
        waiting: None,
    })
}

/// Declares slot `s` in the runner: its spec and where it lives. A launched tenant is not
/// declared in a dry run, which launches nothing.
fn declare(runner: &mut Runner<QemuHost>, s: &Slot, config: &DaemonConfig) {
    if s.config.launched() && config.daemon.dry_run {
        return;
    }
    // Its caps, written as it attaches (a declaration changes nothing on the host).
    let _ = runner
        .world_mut()
        .linux_mut()
        .set_io_cap(s.id, io_cap(&s.config));
    let placement = match &s.config.origin {
        TenantOrigin::Vm { source, .. } => memtide_qemu::Placement::Vm(VmPlacement {
            source: source.clone(),
            cgroup: s.cgroup.clone(),
        }),
        TenantOrigin::Adopt { .. } | TenantOrigin::Launch { .. } => {
            let launch = match &s.config.origin {
                TenantOrigin::Launch { argv } => Some(argv.clone()),
                _ => None,
            };
            // An adapter needs the balloon socket, and starts nothing in a dry run.
            let adapter = s
                .config
                .app
                .as_ref()
                .filter(|_| config.balloon.enabled && !config.daemon.dry_run)
                .map(|app| adapter_argv(&s.config.name, app, &config.balloon.socket));
            memtide_qemu::Placement::Cgroup(Placement {
                cgroup: s.cgroup.clone(),
                launch,
                adapter,
                isolated: s.config.isolated,
            })
        }
    };
    runner.declare(spec(s, config), placement);
}

/// `memtide-adapter`'s command line for a tenant's server: the program beside this one when
/// it is there (an install puts both in one directory), else the one on `PATH`.
fn adapter_argv(
    tenant: &str,
    app: &crate::config::AppConfig,
    socket: &std::path::Path,
) -> Vec<String> {
    let program = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("memtide-adapter")))
        .filter(|p| p.is_file())
        .map_or("memtide-adapter".to_string(), |p| {
            p.to_string_lossy().into_owned()
        });
    use crate::config::AppServer;
    let mut argv = vec![program, app.server.kind().name().to_string()];
    let mut arg = |flag: &str, value: String| {
        argv.push(flag.to_string());
        argv.push(value);
    };
    match &app.server {
        AppServer::Redis { url, password_file } => {
            arg("--url", url.clone());
            if let Some(p) = password_file {
                arg("--password-file", p.to_string_lossy().into_owned());
            }
        }
        AppServer::Mariadb {
            url,
            user,
            password_file,
        } => {
            arg("--url", url.clone());
            arg("--user", user.clone());
            if let Some(p) = password_file {
                arg("--password-file", p.to_string_lossy().into_owned());
            }
        }
        AppServer::Memcached { url } => arg("--url", url.clone()),
        AppServer::Jvm { collector } => arg("--collector", collector.name().to_string()),
    }
    arg("--min", app.min_bytes.to_string());
    arg("--max", app.max_bytes.to_string());
    arg("--granule", app.granule_bytes.to_string());
    arg("--app", tenant.to_string());
    arg("--socket", socket.to_string_lossy().into_owned());
    argv
}

fn apply_change_to_config(config: &mut TenantConfig, change: &TenantChange) {
    if let Some(min) = change.min_bytes {
        config.min_bytes = min;
    }
    if let Some(max) = change.max_bytes {
        config.max_bytes = max;
    }
    if let Some(shares) = change.shares {
        config.shares = shares;
    }
}

/// How memtide hands `config`'s `[io]` to the host: the device, BFQ or not, and where the
/// scheduler in force is kept (beside the state file).
fn io_options(config: &DaemonConfig, state_path: &Path) -> IoOptions {
    IoOptions {
        device: config.io.device.clone().unwrap_or_default(),
        bfq: config.io.scheduler == IoScheduler::Bfq,
        saved: state_path.parent().map(|d| d.join("io.json")),
    }
}

/// A tenant's weight and latency target on the shared disk, from its `[tenant.io]`.
fn disk_spec(t: &TenantConfig) -> Option<memtide_model::DiskSpec> {
    t.io.as_ref().map(crate::config::TenantIoConfig::disk_spec)
}

/// A tenant's configured caps on the shared disk; `None` without any.
fn io_cap(t: &TenantConfig) -> Option<IoCap> {
    let caps = t.io.as_ref()?.caps;
    (!caps.is_none()).then_some(IoCap {
        read_iops: caps.read_iops,
        write_iops: caps.write_iops,
        read_bps: caps.read_bps.map(Bytes),
        write_bps: caps.write_bps.map(Bytes),
    })
}

fn spec(slot: &Slot, config: &DaemonConfig) -> TenantSpec {
    let t = &slot.config;
    TenantSpec {
        // A tenant's disk is shared only when memtide manages the disk.
        disk: disk_spec(t).filter(|_| config.io.enabled),
        shares: t.shares,
        estimator: match t.estimator {
            EstimatorChoice::Tws => EstimatorConfig::WorkingSet(WorkingSetConfig {
                epoch: config.daemon.tick,
                // A tenant the probe keeps finding busy is probed less and less often.
                max_cool_down: Duration::from_secs(128),
                ..WorkingSetConfig::default()
            }),
            EstimatorChoice::Sampling => EstimatorConfig::Sampling(SamplingConfig {
                period: config.policy.sampling_period,
                ..SamplingConfig::default()
            }),
        },
        cap_at_estimate: t.cap_at_estimate,
        slo: t.slo,
        ..TenantSpec::new(
            slot.id,
            t.name.clone(),
            Bytes(t.min_bytes).to_pages_ceil(),
            Bytes(t.max_bytes).to_pages_floor(),
        )
    }
}

/// (id, name, cgroup) of the running tenants, in configuration order.
fn managed_view(slots: &[Slot], runner: &Runner<QemuHost>) -> Vec<Managed> {
    slots
        .iter()
        .filter(|s| {
            runner
                .tenant(s.id)
                .is_some_and(|t| t.status == Status::Running)
        })
        .map(|s| Managed {
            id: s.id,
            name: s.config.name.clone(),
            cgroup: s.cgroup.clone(),
            origin: if s.config.launched() {
                "launched"
            } else {
                "adopted"
            },
        })
        .collect()
}

/// (name, cgroup, why) of the tenants waiting for their cgroup.
fn waiting_view(slots: &[Slot], runner: &Runner<QemuHost>) -> Vec<(String, String, String)> {
    slots
        .iter()
        .filter_map(|s| match &runner.tenant(s.id)?.status {
            Status::Waiting(why) => Some((s.config.name.clone(), s.cgroup.clone(), why.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration with `[io]` over a fake `loop7` (`enabled` as given), tenant "a" with
    /// `[tenant.io]` (`io` as given) and tenant "b" without.
    fn config(enabled: bool, io: &str) -> (tempfile::TempDir, DaemonConfig) {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("sys/block/loop7");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("dev"), "7:7\n").unwrap();
        let text = format!(
            "[host]\nproc_root = \"{}\"\n[io]\nenabled = {enabled}\ndevice = \"loop7\"\n\
             [[tenant]]\nname = \"a\"\ncgroup = \"/m/a\"\nmax = \"1G\"\n[tenant.io]\n{io}\n\
             [[tenant]]\nname = \"b\"\ncgroup = \"/m/b\"\nmax = \"1G\"\n",
            root.path().display()
        );
        let parsed = DaemonConfig::parse(&text, Path::new("t.toml"));
        let config = parsed.unwrap_or_else(|e| panic!("{e}"));
        (root, config)
    }

    fn spec_of(config: &DaemonConfig, i: usize) -> TenantSpec {
        let s = slot(&config.tenants[i], TenantId(i as u32), "/m").unwrap();
        spec(&s, config)
    }

    #[test]
    fn a_tenant_s_disk_is_in_its_spec_when_it_has_io_and_memtide_manages_the_disk() {
        let (_root, c) = config(true, "weight = 300\nlatency_target = \"5ms\"");
        assert_eq!(
            spec_of(&c, 0).disk,
            Some(memtide_model::DiskSpec {
                weight: 300,
                latency_target_us: Some(5000),
            })
        );
        assert_eq!(spec_of(&c, 1).disk, None, "no [tenant.io]");
        let mut off = c.clone();
        off.io.enabled = false;
        assert_eq!(
            spec_of(&off, 0).disk,
            None,
            "[io] off (a reload kept it off)"
        );
        assert_eq!(
            io_options(&c, Path::new("/run/memtide/state.json")).saved,
            Some(PathBuf::from("/run/memtide/io.json"))
        );
    }

    #[test]
    fn configured_caps_become_the_host_s_cap_and_no_caps_none() {
        let (_root, c) = config(true, "write_iops = 500\nread_bps = \"10M\"");
        assert_eq!(
            io_cap(&c.tenants[0]),
            Some(IoCap {
                write_iops: Some(500),
                read_bps: Some(Bytes(10 << 20)),
                ..IoCap::NONE
            })
        );
        assert_eq!(io_cap(&c.tenants[1]), None, "no [tenant.io]");
        let (_root, c) = config(true, "weight = 200");
        assert_eq!(io_cap(&c.tenants[0]), None, "a weight alone caps nothing");
    }
}
