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
//!
//! Here: `run`, its errors and the daemon's start and shutdown. Beside it: `prepare` (start-up
//! before anything changes), `tenants` (slots, their declarations, starting and letting go),
//! `hooks` (the daemon's side of each tick, between ticks and of each API change) and `reload`
//! (SIGHUP).

mod hooks;
mod prepare;
mod reload;
mod tenants;

pub use prepare::{check_admission, own_parent};

use crate::api::ApiError;
use crate::config::DaemonConfig;
use crate::log::Logger;
use crate::publish::{Managed, Publisher};
use crate::state_file::{self, StateFile};
use memtide_agents::ServerError;
use memtide_files::socket::SocketError;
use memtide_linux::host::io::DiskError;
use memtide_linux::host::{Disk, IoHost, LinuxError};
use memtide_model::{Bytes, TenantId};
use memtide_qemu::{QemuHost, Record};
use memtide_runner::{Driver, Outcome, Service, Status};
use prepare::Balloon;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tenants::{apply_change_to_config, spec, Slot};

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
    /// The API could not start: its port, its socket, its token file or group.
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Balloon(#[from] ServerError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The configuration file or the state directory, which root acts on, can be written by
    /// someone else.
    #[error(transparent)]
    Untrusted(#[from] memtide_files::FilesError),
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
    /// holds, every tenant refused, a disk this host cannot divide as `[io]` asks, the API's
    /// token file or group, a socket path another daemon serves): exit status 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DaemonError::Usage(_)
                | DaemonError::Linux(
                    LinuxError::UnknownCgroup { .. }
                        | LinuxError::OutsideParent { .. }
                        | LinuxError::Lock { .. }
                        | LinuxError::Disk(
                            DiskError::NeedsBfq { .. }
                                | DiskError::NoBlkio { .. }
                                | DiskError::NoIoController { .. }
                        )
                )
                | DaemonError::Qemu(memtide_qemu::QemuError::Vm { .. })
                | DaemonError::State(state_file::StateError::InUse { .. })
                | DaemonError::Config(_)
                | DaemonError::Untrusted(_)
                | DaemonError::Api(ApiError::TokenFile { .. } | ApiError::Group { .. })
        ) || match self {
            DaemonError::Api(ApiError::Socket(e))
            | DaemonError::Balloon(ServerError::Socket(e)) => socket_refused(e),
            _ => false,
        }
    }
}

/// True when a socket's file was refused for what the configuration gave (a path too long, a
/// directory others can write, a live socket or another file there): the user's to fix.
fn socket_refused(e: &SocketError) -> bool {
    matches!(
        e,
        SocketError::PathTooLong { .. }
            | SocketError::Directory { .. }
            | SocketError::InUse { .. }
            | SocketError::NotASocket { .. }
    )
}

/// The configuration at `path` for a daemon, which runs as root what the file says: refused
/// before it is read when anyone but root (or the user memtide runs as) can write it or a
/// directory above it.
pub fn load_config(path: &std::path::Path) -> Result<DaemonConfig, DaemonError> {
    memtide_files::check_trusted(path, "config file")?;
    Ok(DaemonConfig::load(path)?)
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

/// The shared disk of the Linux host under `world`, when memtide manages the tenants' I/O
/// (`[io]`): the daemon reaches the `Disk` it added (`prepare::with_mechanisms`) by its type.
fn shared_disk(world: &QemuHost) -> Option<&IoHost> {
    world.linux().actuator::<Disk>().and_then(Disk::shared)
}

/// The `Disk` of the Linux host under `world`, for the caps the configuration gives (never
/// the policy).
fn disk_mut(world: &mut QemuHost) -> Option<&mut Disk> {
    world.linux_mut().actuator_mut::<Disk>()
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
    /// The Unix socket for changes (`[api] socket`).
    socket: Option<crate::api::SocketServer>,
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
    fn start(&mut self) -> Result<(), DaemonError> {
        self.daemon.start(&mut self.service)
    }

    /// Ticks until a stop signal.
    fn serve(&mut self) -> Result<(), DaemonError> {
        if let (Some(api), Some(socket)) = (&self.daemon.api, &self.daemon.socket) {
            self.daemon.log.info(
                "listening",
                &[
                    ("address", json!(api.local_addr().to_string())),
                    ("socket", json!(socket.path().display().to_string())),
                ],
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

impl Daemon {
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
        if let Some(io) = shared_disk(service.runner().world()) {
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
            let record = records
                .remove(&name)
                .filter(|r| self.trusted(r, Some(&self.slots[i])));
            let estimate = estimates.get(&name).map(|&b| Bytes(b).to_pages_floor());
            self.start_tenant(service.runner_mut(), i, record.as_ref(), estimate)?;
        }
        // Tenants the previous run launched but the configuration no longer names are stopped
        // and their cgroups removed.
        for record in records.into_values() {
            if self.trusted(&record, None) {
                self.forget(service.runner_mut(), record);
            }
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
        self.socket = None;
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

    /// Writes the state file now (`force`) or when the service finds it due; a failure is
    /// logged.
    fn save_state(&mut self, service: &mut Service<QemuHost>, force: bool) {
        if let Err(e) = service.save_state(force) {
            self.unsaved(e);
        }
    }
}
