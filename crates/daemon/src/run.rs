//! The daemon's life: set up tenants (adopt, launch or re-adopt from the state file), tick (observe, decide, apply, publish, take API changes, reload on SIGHUP), and on every way out (a stop signal, a failed start, an error, a panic) give back what it changed.
//!
//! Start-up reads and checks everything it can before changing anything: the hierarchy, the
//! parent, the state file (refused when another live memtide holds it), and it binds the API
//! port. Only then does it create the parent, lock and adopt cgroups and launch commands. From
//! that point a [`Daemon`] owns the host, and dropping it (on any return or unwind) releases
//! every tenant and removes the state file, or keeps the file when a restore failed, so the
//! next start can finish the job.

use crate::command::{Change, Refusal, Request};
use crate::config::{
    DaemonConfig, EstimatorChoice, ParentCgroup, RailsSection, Reclaim, TenantConfig, TenantOrigin,
};
use crate::log::Logger;
use crate::publish::Publisher;
use crate::state_file::{self, ApiChanges, StateFile, TenantChange};
use memtide_controller::{Controller, ControllerConfig, Host};
use memtide_linux::fs::hierarchy;
use memtide_linux::host::{
    launched_cgroup_path, paths, HostEvent, HostOptions, LinuxError, LinuxHost, Origin, Original,
    TenantRecord,
};
use memtide_model::{
    Bytes, EstimatorConfig, Pages, SamplingConfig, TaxRate, TenantId, TenantSpec, WorkingSetConfig,
};
use memtide_policy::{LimitRails, ReclamationThresholds};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the daemon could not run. `is_usage` errors are the user's (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Linux(#[from] LinuxError),
    #[error(transparent)]
    State(#[from] state_file::StateError),
    #[error("{0}")]
    Api(String),
}

impl DaemonError {
    /// True for errors in what the user gave (config, cgroup names, a cgroup another memtide
    /// holds, every tenant refused): exit status 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DaemonError::Usage(_)
                | DaemonError::Linux(
                    LinuxError::UnknownCgroup { .. }
                        | LinuxError::OutsideParent { .. }
                        | LinuxError::Lock { .. }
                )
                | DaemonError::State(state_file::StateError::InUse { .. })
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

/// A configured tenant and where it stands.
struct Slot {
    id: TenantId,
    config: TenantConfig,
    /// The cgroup path inside the memory hierarchy.
    cgroup: String,
    managed: bool,
    /// A launched tenant whose command ended is not started again.
    finished: bool,
    /// Why an adopted tenant is not managed yet (its cgroup is missing or empty, or another
    /// memtide holds it), as last logged; `None` once managed or refused.
    waiting: Option<String>,
    /// Refused by admission control (not tried again until a reload changes it).
    refused: bool,
}

/// Runs until `signals.stop` is set (SIGTERM/SIGINT), then restores and returns.
pub fn run(
    config: DaemonConfig,
    signals: Signals,
    reload_from: Option<ReloadFrom>,
) -> Result<(), DaemonError> {
    let mut daemon = Daemon::prepare(config)?;
    let result = daemon
        .start()
        .and_then(|()| daemon.serve(&signals, reload_from.as_ref()));
    let restored = daemon.shutdown();
    result?;
    restored
}

/// The running daemon: everything one tick needs.
struct Daemon {
    config: DaemonConfig,
    log: Logger,
    host: LinuxHost,
    controller: Controller,
    publisher: Publisher,
    slots: Vec<Slot>,
    next_id: u32,
    parent: String,
    hierarchy: &'static str,
    state_path: PathBuf,
    /// Records of the state file found at start, by tenant name, until their tenants start.
    previous: Option<StateFile>,
    changes: ApiChanges,
    /// The last state file written, to skip identical writes.
    saved: Option<StateFile>,
    saved_at: Instant,
    /// The parent cgroup directory this daemon created (removed at exit when empty).
    created_parent: Option<PathBuf>,
    api: Option<crate::api::ApiServer>,
    commands: Option<Receiver<Request>>,
    /// Set once `shutdown` ran.
    shut_down: bool,
}

impl Daemon {
    /// Reads and checks everything, binds the API port; changes nothing on the host.
    fn prepare(config: DaemonConfig) -> Result<Daemon, DaemonError> {
        let log = Logger::new(config.daemon.log_format);
        let dry_run = config.daemon.dry_run;
        let proc_root = config.host.proc_root.clone();
        let found = hierarchy::detect(&proc_root).map_err(LinuxError::from)?;
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
        let (sender, commands) = std::sync::mpsc::channel();
        // The port is taken before anything changes: a daemon that cannot serve its API
        // leaves the host as it found it.
        let api = crate::api::ApiServer::start(config.daemon.listen, publisher.shared(), sender)
            .map_err(|e| DaemonError::Api(format!("API on {}: {e}", config.daemon.listen)))?;
        publisher.waiting(&waiting_view(&slots));
        let next_id = slots.len() as u32;
        Ok(Daemon {
            log,
            host,
            controller,
            publisher,
            slots,
            next_id,
            parent,
            hierarchy: found.version.name(),
            state_path,
            previous,
            changes: ApiChanges::default(),
            saved: None,
            saved_at: Instant::now(),
            created_parent: None,
            api: Some(api),
            commands: Some(commands),
            shut_down: false,
            config,
        })
    }

    fn dry_run(&self) -> bool {
        self.config.daemon.dry_run
    }

    /// Creates the parent if needed, adopts, re-adopts or launches every tenant, gives
    /// tenants the previous run managed and this one does not back what they had.
    fn start(&mut self) -> Result<(), DaemonError> {
        let parent_dir = self.host.hierarchy().dir_of(&self.parent);
        if !parent_dir.is_dir() {
            std::fs::create_dir_all(&parent_dir).map_err(|error| LinuxError::CreateCgroup {
                dir: parent_dir.display().to_string(),
                error,
            })?;
            self.created_parent = Some(parent_dir);
        }
        let readopting = self.previous.is_some();
        let mut records: BTreeMap<String, TenantRecord> = BTreeMap::new();
        let mut estimates = BTreeMap::new();
        if let Some(prev) = self.previous.take() {
            records = prev
                .tenants
                .into_iter()
                .map(|r| (r.name.clone(), r))
                .collect();
            estimates = prev.estimates;
            self.changes = prev.changes;
        }
        if let Some(tax) = self.changes.tax_rate.and_then(|t| TaxRate::new(t).ok()) {
            self.controller.set_tax_rate(tax);
        }
        self.log.info(
            "start",
            &[
                ("version", json!(env!("CARGO_PKG_VERSION"))),
                ("hierarchy", json!(self.hierarchy)),
                ("parent", json!(self.parent)),
                (
                    "budget_bytes",
                    json!(self.controller.config().budget.map(|b| b.to_bytes().0)),
                ),
                ("dry_run", json!(self.dry_run())),
                ("tenants", json!(self.slots.len())),
                ("readopting", json!(readopting)),
            ],
        );
        for i in 0..self.slots.len() {
            let name = self.slots[i].config.name.clone();
            if let Some(change) = self.changes.tenants.get(&name) {
                apply_change_to_config(&mut self.slots[i].config, change);
            }
            let record = records.remove(&name);
            let estimate = estimates.get(&name).map(|&b| Bytes(b).to_pages_floor());
            self.start_tenant(i, record, estimate)?;
        }
        // Tenants the previous run managed but the configuration no longer names get back what
        // they had.
        for record in records.into_values() {
            self.forget(record);
        }
        let configured = !self.slots.is_empty();
        let none_managed = self.slots.iter().all(|s| !s.managed && s.waiting.is_none());
        if configured && none_managed && self.slots.iter().all(|s| s.refused) {
            return Err(DaemonError::Usage(format!(
                "every configured tenant was refused by admission control, so nothing would be \
                 managed: {}",
                self.publisher.last_refusal().unwrap_or_default()
            )));
        }
        self.save_state(true);
        Ok(())
    }

    /// Ticks until a stop signal.
    fn serve(
        &mut self,
        signals: &Signals,
        reload_from: Option<&ReloadFrom>,
    ) -> Result<(), DaemonError> {
        if let Some(api) = &self.api {
            self.log.info(
                "listening",
                &[("address", json!(api.local_addr().to_string()))],
            );
        }
        let mut next = Instant::now();
        while !signals.stop.load(Ordering::SeqCst) {
            if signals.reload.swap(false, Ordering::SeqCst) {
                match reload_from {
                    Some(from) => self.reload(from),
                    None => self.log.warn(
                        "reload_failed",
                        &[("error", json!("no configuration file to read again"))],
                    ),
                }
            }
            self.tick();
            self.save_state(false);
            self.take_changes();
            next += self.config.daemon.tick;
            let now = Instant::now();
            if next < now {
                next = now;
            }
            while !signals.stop.load(Ordering::SeqCst)
                && !signals.reload.load(Ordering::SeqCst)
                && Instant::now() < next
            {
                self.take_changes();
                if !self.dry_run() {
                    self.host.rescue_stalled();
                    let events = self.host.drain_events();
                    self.publisher
                        .rescues(events, &managed_view(&self.slots), &self.log);
                }
                std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
            }
        }
        Ok(())
    }

    /// Releases every tenant, stops the API, removes the state file (kept when a restore
    /// failed) and the parent this daemon created. Runs once; `Drop` calls it on an unwind.
    fn shutdown(&mut self) -> Result<(), DaemonError> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        self.log.info(
            "stopping",
            &[("tenants", json!(self.host.tenants().count()))],
        );
        self.api = None;
        let errors = self.host.release_all();
        for (name, e) in &errors {
            self.log.error(
                "restore_failed",
                &[("tenant", json!(name)), ("error", json!(e.to_string()))],
            );
        }
        let mut result = Ok(());
        if !self.dry_run() {
            if errors.is_empty() {
                if let Err(e) = state_file::remove(&self.state_path) {
                    self.log
                        .error("state_file", &[("error", json!(e.to_string()))]);
                    result = Err(e.into());
                }
            } else {
                // The next start re-adopts what could not be restored and tries again.
                self.save_state(true);
                self.log.error(
                    "state_kept",
                    &[
                        ("path", json!(self.state_path.display().to_string())),
                        ("why", json!("some tenants could not be restored")),
                    ],
                );
            }
        }
        if let Some(dir) = self.created_parent.take() {
            let _ = std::fs::remove_dir(dir);
        }
        self.log.info(
            "stopped",
            &[("restored", json!(!self.dry_run() && errors.is_empty()))],
        );
        result
    }

    /// Adopts, re-adopts or launches slot `i` and runs admission control on it. An adopted
    /// cgroup that does not exist yet, or holds no process, waits and is adopted when it can be.
    fn start_tenant(
        &mut self,
        i: usize,
        record: Option<TenantRecord>,
        estimate: Option<Pages>,
    ) -> Result<(), DaemonError> {
        let slot = &self.slots[i];
        let record = record.filter(|r| r.cgroup == slot.cgroup);
        let name = slot.config.name.clone();
        let cgroup = slot.cgroup.clone();
        let dir = self.host.hierarchy().dir_of(&cgroup);
        let has_procs = has_processes(&self.host, &cgroup);
        let how = match slot.config.origin.clone() {
            TenantOrigin::Adopt { .. } => {
                if !dir.is_dir() || !has_procs {
                    let why = if dir.is_dir() {
                        "its cgroup holds no process yet"
                    } else {
                        "its cgroup does not exist yet"
                    };
                    // Keep what the previous run recorded for when it appears.
                    if let Some(r) = record {
                        self.host.remember(&r);
                    }
                    self.wait(i, why);
                    return Ok(());
                }
                self.host.adopt(
                    slot.id,
                    &name,
                    &cgroup,
                    record.as_ref().map(Original::of),
                    Origin::Adopted,
                )?;
                if record.is_some() {
                    "readopted"
                } else {
                    "adopted"
                }
            }
            TenantOrigin::Launch { argv } => {
                if record.is_some() && has_procs {
                    self.host.adopt(
                        slot.id,
                        &name,
                        &cgroup,
                        record.as_ref().map(Original::of),
                        Origin::Launched,
                    )?;
                    "readopted"
                } else if self.dry_run() {
                    self.log.warn(
                        "not_launched",
                        &[
                            ("tenant", json!(name)),
                            ("why", json!("dry run writes nothing")),
                        ],
                    );
                    return Ok(());
                } else {
                    let max = Bytes(slot.config.max_bytes).to_pages_floor();
                    self.host.launch(slot.id, &name, &cgroup, &argv, max)?;
                    "launched"
                }
            }
        };
        self.admit(i, how, estimate);
        Ok(())
    }

    fn wait(&mut self, i: usize, why: &str) {
        let slot = &mut self.slots[i];
        if slot.waiting.as_deref() != Some(why) {
            self.log.warn(
                "waiting",
                &[
                    ("tenant", json!(slot.config.name)),
                    ("cgroup", json!(slot.cgroup)),
                    ("why", json!(why)),
                ],
            );
            slot.waiting = Some(why.to_string());
        }
        self.publisher.waiting(&waiting_view(&self.slots));
    }

    fn admit(&mut self, i: usize, how: &str, estimate: Option<Pages>) {
        let spec = spec(&self.slots[i], &self.config);
        let (min, max) = (spec.min, spec.max);
        let period = match &spec.estimator {
            EstimatorConfig::Sampling(s) => Some(s.period),
            _ => None,
        };
        let slot = &mut self.slots[i];
        slot.waiting = None;
        match self.controller.admit_resumed(spec, estimate) {
            Ok(()) => {
                slot.managed = true;
                slot.refused = false;
                self.host.set_max(slot.id, max);
                if let Some(period) = period {
                    self.host.enable_sampling(slot.id, period, max);
                }
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
            }
            Err(e) => {
                slot.refused = true;
                self.log.error(
                    "refused",
                    &[
                        ("tenant", json!(slot.config.name)),
                        ("why", json!(e.to_string())),
                    ],
                );
                self.publisher
                    .record(&slot.config.name, "refused", &e.to_string());
                if let Err(e) = self.host.release(slot.id) {
                    self.log.error(
                        "restore_failed",
                        &[
                            ("tenant", json!(slot.config.name)),
                            ("error", json!(e.to_string())),
                        ],
                    );
                }
            }
        }
        self.publisher.waiting(&waiting_view(&self.slots));
    }

    /// Gives a tenant the previous run managed, and this one does not, back what it had.
    fn forget(&mut self, record: TenantRecord) {
        let id = TenantId(u32::MAX);
        let name = record.name.clone();
        let host = &mut self.host;
        let result = host
            .adopt(
                id,
                &name,
                &record.cgroup,
                Some(Original::of(&record)),
                record.origin,
            )
            .map(|_| ())
            .and_then(|()| host.release(id).map(|_| ()));
        match result {
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

    /// Writes the state file when what it must hold changed, or (estimates only) at most every
    /// 10 s; `force` writes now. Never in a dry run.
    fn save_state(&mut self, force: bool) {
        if self.dry_run() {
            return;
        }
        let state = StateFile {
            format: state_file::FORMAT,
            pid: std::process::id(),
            hierarchy: self.hierarchy.to_string(),
            tenants: self.host.records(),
            estimates: self
                .slots
                .iter()
                .filter(|s| s.managed)
                .filter_map(|s| {
                    // Only an estimate that stands on a measurement is worth starting from.
                    let view = self.controller.tenant(s.id).filter(|v| v.measured)?;
                    Some((s.config.name.clone(), view.active_estimate.to_bytes().0))
                })
                .collect(),
            changes: self.changes.clone(),
        };
        let due = match &self.saved {
            None => true,
            Some(saved) => {
                saved.tenants != state.tenants
                    || saved.changes != state.changes
                    || (saved.estimates != state.estimates
                        && self.saved_at.elapsed() >= Duration::from_secs(10))
            }
        };
        if !(force || due) {
            return;
        }
        match state_file::save(&self.state_path, &state) {
            Ok(()) => {
                self.saved = Some(state);
                self.saved_at = Instant::now();
            }
            Err(e) => self
                .log
                .error("state_file", &[("error", json!(e.to_string()))]),
        }
    }

    /// One tick: observe, decide, apply, publish; then drop tenants that left and adopt those
    /// that (re)appeared.
    fn tick(&mut self) {
        let obs = match self.host.observe() {
            Ok(obs) => obs,
            Err(e) => {
                self.log
                    .error("observe_failed", &[("error", json!(e.to_string()))]);
                return;
            }
        };
        let decision = self.controller.step(&obs);
        if let Err(e) = self.host.apply(&decision) {
            self.log
                .error("apply_failed", &[("error", json!(e.to_string()))]);
        }
        let events = self.host.drain_events();
        self.publisher.tick(
            &obs,
            &decision,
            &events,
            &self.host,
            &self.controller,
            managed_view(&self.slots),
            &self.log,
        );
        self.handle_events(events);

        // An adopted cgroup that came back (or appeared late) is admitted again, under the
        // original first seen on it.
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            if slot.managed
                || slot.finished
                || slot.refused
                || !matches!(slot.config.origin, TenantOrigin::Adopt { .. })
            {
                continue;
            }
            if !has_processes(&self.host, &slot.cgroup) {
                let why = if self.host.hierarchy().dir_of(&slot.cgroup).is_dir() {
                    "its cgroup holds no process"
                } else {
                    "its cgroup does not exist"
                };
                self.wait(i, why);
                continue;
            }
            let (id, name, cgroup) = (slot.id, slot.config.name.clone(), slot.cgroup.clone());
            match self.host.adopt(id, &name, &cgroup, None, Origin::Adopted) {
                Ok(_) => self.admit(i, "adopted", None),
                Err(e) => self.wait(i, &e.to_string()),
            }
        }
    }

    /// Drops gone tenants from the controller and logs what the host reported.
    fn handle_events(&mut self, events: Vec<HostEvent>) {
        for event in events {
            match event {
                HostEvent::Gone {
                    id,
                    name,
                    why,
                    restored,
                } => {
                    self.controller.remove(id);
                    if let Some(slot) = self.slots.iter_mut().find(|s| s.id == id) {
                        slot.managed = false;
                        slot.finished = matches!(slot.config.origin, TenantOrigin::Launch { .. });
                    }
                    self.log.info(
                        "dropped",
                        &[
                            ("tenant", json!(name)),
                            ("why", json!(why)),
                            ("restored", json!(restored)),
                        ],
                    );
                    self.publisher.record(&name, "dropped", &why);
                }
                HostEvent::RestoreFailed { name, error } => self.log.error(
                    "restore_failed",
                    &[("tenant", json!(name)), ("error", json!(error))],
                ),
                _ => {}
            }
        }
    }

    /// Applies the API's pending changes.
    fn take_changes(&mut self) {
        loop {
            let Some(commands) = &self.commands else {
                return;
            };
            let request = match commands.try_recv() {
                Ok(r) => r,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            };
            let result = self.apply_change(&request.change);
            match &result {
                Ok(()) => self
                    .log
                    .info("changed", &[("change", json!(request.change.to_string()))]),
                Err(why) => self.log.warn(
                    "change_refused",
                    &[
                        ("change", json!(request.change.to_string())),
                        ("why", json!(why.to_string())),
                    ],
                ),
            }
            let _ = request.reply.send(result);
        }
    }

    fn apply_change(&mut self, change: &Change) -> Result<(), Refusal> {
        match change {
            Change::TaxRate(t) => {
                let tax = TaxRate::new(*t).map_err(|e| Refusal::Conflict(e.to_string()))?;
                self.controller.set_tax_rate(tax);
                self.changes.tax_rate = Some(tax.value());
                Ok(())
            }
            Change::Tenant {
                name,
                min_bytes,
                max_bytes,
                shares,
            } => {
                let slot = self
                    .slots
                    .iter_mut()
                    .find(|s| &s.config.name == name && s.managed)
                    .ok_or_else(|| Refusal::UnknownTenant(name.clone()))?;
                let view = self
                    .controller
                    .tenant(slot.id)
                    .ok_or_else(|| Refusal::UnknownTenant(name.clone()))?;
                let min = min_bytes.map_or(view.spec.min, |b| Bytes(b).to_pages_ceil());
                let max = max_bytes.map_or(view.spec.max, |b| Bytes(b).to_pages_floor());
                let shares = shares.unwrap_or(view.spec.shares);
                self.controller
                    .update_tenant(slot.id, min, max, shares)
                    .map_err(|e| Refusal::Conflict(e.to_string()))?;
                self.host.set_max(slot.id, max);
                let change = TenantChange {
                    min_bytes: Some(min.to_bytes().0),
                    max_bytes: Some(max.to_bytes().0),
                    shares: Some(shares),
                };
                apply_change_to_config(&mut slot.config, &change);
                self.changes.tenants.insert(name.clone(), change);
                Ok(())
            }
        }
    }

    /// SIGHUP: reads the configuration file again and applies what can change while running
    /// (tick, policy, rails, tenants added, removed or changed); settings that need a restart
    /// keep their running value and are named in a warning. A file that does not load changes
    /// nothing. The file replaces changes made through the API.
    fn reload(&mut self, from: &ReloadFrom) {
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
        new.daemon = crate::config::DaemonSection {
            tick: new.daemon.tick,
            ..old.daemon.clone()
        };
        new.host = old.host.clone();
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

        if new.policy.tax_rate != self.config.policy.tax_rate || self.changes.tax_rate.is_some() {
            if let Ok(tax) = TaxRate::new(new.policy.tax_rate) {
                self.controller.set_tax_rate(tax);
            }
        }
        self.controller.set_rails(rails(&new.rails));
        self.controller
            .set_reclaim_always(new.policy.reclaim == Reclaim::Always);
        self.changes = ApiChanges::default();

        // Tenants no longer configured, or whose identity changed, are let go.
        let mut kept_slots = Vec::new();
        for slot in std::mem::take(&mut self.slots) {
            let same = new.tenant(&slot.config.name).is_some_and(|t| {
                t.origin == slot.config.origin
                    && t.estimator == slot.config.estimator
                    && t.cap_at_estimate == slot.config.cap_at_estimate
            });
            if same && new.policy.sampling_period == self.config.policy.sampling_period {
                kept_slots.push(slot);
            } else {
                self.let_go(&slot, "removed or changed in the configuration");
            }
        }
        let mut slots = Vec::with_capacity(new.tenants.len());
        let mut started = Vec::new();
        for t in &new.tenants {
            match kept_slots.iter().position(|s| s.config.name == t.name) {
                Some(k) => {
                    let mut slot = kept_slots.remove(k);
                    if slot.config != *t {
                        self.retune(&mut slot, t);
                    }
                    slots.push(slot);
                }
                None => {
                    let id = TenantId(self.next_id);
                    self.next_id += 1;
                    match slot(t, id, &self.parent) {
                        Ok(s) => {
                            started.push(slots.len());
                            slots.push(s);
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
        for i in started {
            if let Err(e) = self.start_tenant(i, None, None) {
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
        self.publisher.waiting(&waiting_view(&self.slots));
        self.save_state(true);
    }

    /// Changes a kept tenant's min, max and shares to the reloaded file's.
    fn retune(&mut self, slot: &mut Slot, t: &TenantConfig) {
        if slot.managed {
            let min = Bytes(t.min_bytes).to_pages_ceil();
            let max = Bytes(t.max_bytes).to_pages_floor();
            if let Err(e) = self.controller.update_tenant(slot.id, min, max, t.shares) {
                self.log.warn(
                    "change_refused",
                    &[("tenant", json!(t.name)), ("why", json!(e.to_string()))],
                );
                return;
            }
            self.host.set_max(slot.id, max);
        }
        slot.config = t.clone();
        slot.refused = false;
    }

    /// Stops managing a slot's tenant (restoring it) and forgets it.
    fn let_go(&mut self, slot: &Slot, why: &str) {
        if !slot.managed {
            return;
        }
        self.controller.remove(slot.id);
        match self.host.release(slot.id) {
            Ok(_) => self.log.info(
                "released",
                &[("tenant", json!(slot.config.name)), ("why", json!(why))],
            ),
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

impl Drop for Daemon {
    /// A panic or an early return still gives back what was changed.
    fn drop(&mut self) {
        let _ = self.shutdown();
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
    let tax = TaxRate::new(config.policy.tax_rate)
        .map_err(|e| DaemonError::Usage(format!("policy.tax_rate: {e}")))?;
    let controller_config = ControllerConfig {
        tax_rate: tax,
        thresholds: ReclamationThresholds::default(),
        budget: Some(budget),
        host_swap_per_tick: Pages::ZERO,
        balloon_stall_ticks: 3,
        rails: rails(&config.rails),
        dry_run: config.daemon.dry_run,
        reclaim_always: config.policy.reclaim == Reclaim::Always,
        backing: memtide_policy::Backing::OutsideBudget,
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
    memtide_linux::fs::meminfo::read_meminfo(proc_root)
        .ok()
        .and_then(|m| m.swap_total)
        .unwrap_or(Bytes::ZERO)
        .to_pages_floor()
}

fn has_processes(host: &LinuxHost, cgroup: &str) -> bool {
    memtide_linux::cgroup::MemoryCgroup::new(
        host.hierarchy().version,
        host.hierarchy().dir_of(cgroup),
    )
    .pids()
    .map(|p| !p.is_empty())
    .unwrap_or(false)
}

/// A slot for tenant `t`: its cgroup path, checked to lie under the parent.
fn slot(t: &TenantConfig, id: TenantId, parent: &str) -> Result<Slot, DaemonError> {
    let cgroup = match &t.origin {
        TenantOrigin::Adopt { cgroup } => {
            if !paths::is_under(parent, cgroup) {
                return Err(LinuxError::OutsideParent {
                    cgroup: cgroup.clone(),
                    parent: parent.to_string(),
                }
                .into());
            }
            cgroup.clone()
        }
        TenantOrigin::Launch { .. } => launched_cgroup_path(parent, &t.name),
    };
    Ok(Slot {
        id,
        config: t.clone(),
        cgroup,
        managed: false,
        finished: false,
        waiting: None,
        refused: false,
    })
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

fn spec(slot: &Slot, config: &DaemonConfig) -> TenantSpec {
    let t = &slot.config;
    TenantSpec {
        id: slot.id,
        name: t.name.clone(),
        min: Bytes(t.min_bytes).to_pages_ceil(),
        max: Bytes(t.max_bytes).to_pages_floor(),
        shares: t.shares,
        overhead: Pages::ZERO,
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
    }
}

fn managed_view(slots: &[Slot]) -> Vec<(TenantId, String, String)> {
    slots
        .iter()
        .filter(|s| s.managed)
        .map(|s| (s.id, s.config.name.clone(), s.cgroup.clone()))
        .collect()
}

/// (name, cgroup, why) of the tenants waiting for their cgroup.
fn waiting_view(slots: &[Slot]) -> Vec<(String, String, String)> {
    slots
        .iter()
        .filter_map(|s| {
            let why = s.waiting.as_ref()?;
            Some((s.config.name.clone(), s.cgroup.clone(), why.clone()))
        })
        .collect()
}
