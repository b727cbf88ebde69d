//! The daemon's life: set up tenants (adopt, launch or re-adopt from the state file), tick (observe, decide, apply, publish, take API changes), and on a stop signal restore what it found.

use crate::command::{Change, Refusal, Request};
use crate::config::{DaemonConfig, EstimatorChoice, ParentCgroup, TenantConfig, TenantOrigin};
use crate::log::Logger;
use crate::publish::Publisher;
use crate::state_file::{self, StateFile};
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
    /// True for errors in what the user gave (config, cgroup names): exit status 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DaemonError::Usage(_)
                | DaemonError::Linux(
                    LinuxError::UnknownCgroup { .. } | LinuxError::OutsideParent { .. }
                )
        )
    }
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
}

/// Runs until `stop` is set (SIGTERM/SIGINT), then restores and returns.
pub fn run(config: DaemonConfig, stop: Arc<AtomicBool>) -> Result<(), DaemonError> {
    let log = Logger::new(config.daemon.log_format);
    let dry_run = config.daemon.dry_run;
    let proc_root = config.host.proc_root.clone();
    let found = hierarchy::detect(&proc_root).map_err(LinuxError::from)?;
    let parent = match &config.host.parent {
        ParentCgroup::OwnCgroup => found.own_cgroup.clone(),
        ParentCgroup::Path(p) => p.clone(),
    };
    let mut slots = slots(&config, &parent)?;
    let parent_dir = found.dir_of(&parent);
    if !parent_dir.is_dir() {
        if dry_run {
            return Err(DaemonError::Usage(format!(
                "parent cgroup {parent:?} does not exist ({})",
                parent_dir.display()
            )));
        }
        std::fs::create_dir_all(&parent_dir).map_err(|error| LinuxError::CreateCgroup {
            dir: parent_dir.display().to_string(),
            error,
        })?;
    }

    let state_path = config.daemon.state_file.clone();
    let previous = state_file::load(&state_path)?;
    if let Some(prev) = &previous {
        state_file::check_not_in_use(&state_path, prev, &proc_root)?;
    }
    let mut host = LinuxHost::new(
        found.clone(),
        HostOptions {
            proc_root: proc_root.clone(),
            write_timeout: config.host.write_timeout,
            dry_run,
            log_dir: state_path.parent().map(|d| d.join("logs")),
        },
    )?;
    let machine = host.machine();
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
        rails: LimitRails {
            shrink_step: config.rails.shrink_step,
            floor_margin: Bytes(config.rails.floor_margin_bytes).to_pages_ceil(),
            backoff_faults_per_s: config.rails.backoff_faults_per_s,
            backoff_pressure: config.rails.backoff_pressure,
            ..LimitRails::default()
        },
    };
    // Admission on Linux: mins must fit in the budget; what lies above min is backed by the
    // rest of the host's memory and its swap.
    let swap = swap_total(&proc_root);
    let backing = (machine + swap).saturating_sub(budget);
    let mut controller = Controller::new(controller_config, budget, backing)
        .map_err(|e| DaemonError::Usage(e.to_string()))?;

    let readopting = previous.is_some();
    let mut records: BTreeMap<String, TenantRecord> = previous
        .map(|p| p.tenants.into_iter().map(|r| (r.name.clone(), r)).collect())
        .unwrap_or_default();
    let mut publisher = Publisher::new(&config, found.version.name(), &parent, budget);
    // Every configured cgroup must exist before anything is written or logged.
    for slot in &slots {
        if let TenantOrigin::Adopt { .. } = slot.config.origin {
            let dir = found.dir_of(&slot.cgroup);
            if !dir.is_dir() {
                return Err(LinuxError::UnknownCgroup {
                    cgroup: slot.cgroup.clone(),
                    dir: dir.display().to_string(),
                }
                .into());
            }
        }
    }
    log.info(
        "start",
        &[
            ("version", json!(env!("CARGO_PKG_VERSION"))),
            ("hierarchy", json!(found.version.name())),
            ("parent", json!(parent)),
            ("budget_bytes", json!(budget.to_bytes().0)),
            ("dry_run", json!(dry_run)),
            ("tenants", json!(slots.len())),
            ("readopting", json!(readopting)),
        ],
    );

    for slot in &mut slots {
        let record = records.remove(&slot.config.name);
        start_tenant(
            slot,
            record,
            &mut host,
            &mut controller,
            &config,
            &log,
            &mut publisher,
        )?;
    }
    // Tenants the previous run managed but the configuration no longer names get back what
    // they had.
    for record in records.into_values() {
        forget(record, &mut host, &log);
    }
    if !dry_run {
        save_state(&state_path, &host, found.version.name())?;
    }

    let (sender, commands) = std::sync::mpsc::channel();
    let shared = publisher.shared();
    let api = crate::api::ApiServer::start(config.daemon.listen, shared, sender)
        .map_err(|e| DaemonError::Api(e.to_string()))?;
    log.info(
        "listening",
        &[("address", json!(api.local_addr().to_string()))],
    );

    let tick = config.daemon.tick;
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let changed = tick_once(
            &mut host,
            &mut controller,
            &mut slots,
            &config,
            &log,
            &mut publisher,
        );
        if changed && !dry_run {
            if let Err(e) = save_state(&state_path, &host, found.version.name()) {
                log.error("state_file", &[("error", json!(e.to_string()))]);
            }
        }
        take_changes(&commands, &mut controller, &slots, &log);
        next += tick;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        while !stop.load(Ordering::SeqCst) && Instant::now() < next {
            take_changes(&commands, &mut controller, &slots, &log);
            if !dry_run {
                host.rescue_stalled();
                publisher.rescues(host.drain_events(), &slots_view(&slots), &log);
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
    }

    log.info("stopping", &[("tenants", json!(host.tenants().count()))]);
    drop(api);
    for (name, e) in host.release_all() {
        log.error(
            "restore_failed",
            &[("tenant", json!(name)), ("error", json!(e.to_string()))],
        );
    }
    if !dry_run {
        state_file::remove(&state_path)?;
    }
    log.info("stopped", &[("restored", json!(!dry_run))]);
    Ok(())
}

fn swap_total(proc_root: &std::path::Path) -> Pages {
    memtide_linux::fs::meminfo::read_meminfo(proc_root)
        .ok()
        .and_then(|m| m.swap_total)
        .unwrap_or(Bytes::ZERO)
        .to_pages_floor()
}

/// Resolves each tenant's cgroup path and checks it lies under the parent.
fn slots(config: &DaemonConfig, parent: &str) -> Result<Vec<Slot>, DaemonError> {
    let mut out = Vec::with_capacity(config.tenants.len());
    for (i, t) in config.tenants.iter().enumerate() {
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
        out.push(Slot {
            id: TenantId(i as u32),
            config: t.clone(),
            cgroup,
            managed: false,
            finished: false,
        });
    }
    Ok(out)
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

/// Adopts, re-adopts or launches one configured tenant and runs admission control on it.
fn start_tenant(
    slot: &mut Slot,
    record: Option<TenantRecord>,
    host: &mut LinuxHost,
    controller: &mut Controller,
    config: &DaemonConfig,
    log: &Logger,
    publisher: &mut Publisher,
) -> Result<(), DaemonError> {
    let spec = spec(slot, config);
    let record = record.filter(|r| r.cgroup == slot.cgroup);
    let name = slot.config.name.clone();
    let how = match &slot.config.origin {
        TenantOrigin::Adopt { .. } => {
            let readopt = record.is_some();
            host.adopt(
                slot.id,
                &name,
                &slot.cgroup,
                record.as_ref().map(Original::of),
                Origin::Adopted,
            )?;
            if readopt {
                "readopted"
            } else {
                "adopted"
            }
        }
        TenantOrigin::Launch { argv } => {
            let dir = host.hierarchy().dir_of(&slot.cgroup);
            let running = record.is_some()
                && memtide_linux::cgroup::MemoryCgroup::new(host.hierarchy().version, dir)
                    .pids()
                    .map(|p| !p.is_empty())
                    .unwrap_or(false);
            if running {
                host.adopt(
                    slot.id,
                    &name,
                    &slot.cgroup,
                    record.as_ref().map(Original::of),
                    Origin::Launched,
                )?;
                "readopted"
            } else if config.daemon.dry_run {
                log.warn(
                    "not_launched",
                    &[
                        ("tenant", json!(name)),
                        ("why", json!("dry run writes nothing")),
                    ],
                );
                return Ok(());
            } else {
                host.launch(slot.id, &name, &slot.cgroup, argv, spec.max)?;
                "launched"
            }
        }
    };
    admit(slot, spec, how, host, controller, log, publisher);
    Ok(())
}

fn admit(
    slot: &mut Slot,
    spec: TenantSpec,
    how: &str,
    host: &mut LinuxHost,
    controller: &mut Controller,
    log: &Logger,
    publisher: &mut Publisher,
) {
    let (min, max) = (spec.min, spec.max);
    let sampling = matches!(spec.estimator, EstimatorConfig::Sampling(_));
    let period = match &spec.estimator {
        EstimatorConfig::Sampling(s) => s.period,
        _ => Duration::ZERO,
    };
    match controller.admit(spec) {
        Ok(()) => {
            slot.managed = true;
            host.set_max(slot.id, max);
            if sampling {
                host.enable_sampling(slot.id, period, max);
            }
            log.info(
                how,
                &[
                    ("tenant", json!(slot.config.name)),
                    ("cgroup", json!(slot.cgroup)),
                    ("min_bytes", json!(min.to_bytes().0)),
                    ("max_bytes", json!(max.to_bytes().0)),
                ],
            );
            publisher.record(
                &slot.config.name,
                "admitted",
                &format!("{how} {}", slot.cgroup),
            );
        }
        Err(e) => {
            log.warn(
                "refused",
                &[
                    ("tenant", json!(slot.config.name)),
                    ("why", json!(e.to_string())),
                ],
            );
            publisher.record(&slot.config.name, "refused", &e.to_string());
            if let Err(e) = host.release(slot.id) {
                log.error(
                    "restore_failed",
                    &[
                        ("tenant", json!(slot.config.name)),
                        ("error", json!(e.to_string())),
                    ],
                );
            }
        }
    }
}

/// Gives a tenant the previous run managed, and this one does not, back what it had.
fn forget(record: TenantRecord, host: &mut LinuxHost, log: &Logger) {
    let id = TenantId(u32::MAX);
    let name = record.name.clone();
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
        Ok(()) => log.info(
            "released",
            &[
                ("tenant", json!(name)),
                ("why", json!("no longer configured")),
            ],
        ),
        Err(e) => log.warn(
            "release_failed",
            &[("tenant", json!(name)), ("error", json!(e.to_string()))],
        ),
    }
}

fn save_state(
    path: &std::path::Path,
    host: &LinuxHost,
    hierarchy: &str,
) -> Result<(), state_file::StateError> {
    state_file::save(
        path,
        &StateFile {
            format: state_file::FORMAT,
            pid: std::process::id(),
            hierarchy: hierarchy.to_string(),
            tenants: host.records(),
        },
    )
}

/// One tick; returns whether the set of managed tenants changed (the state file must follow).
fn tick_once(
    host: &mut LinuxHost,
    controller: &mut Controller,
    slots: &mut [Slot],
    config: &DaemonConfig,
    log: &Logger,
    publisher: &mut Publisher,
) -> bool {
    let obs = match host.observe() {
        Ok(obs) => obs,
        Err(e) => {
            log.error("observe_failed", &[("error", json!(e.to_string()))]);
            return false;
        }
    };
    let decision = controller.step(&obs);
    if let Err(e) = host.apply(&decision) {
        log.error("apply_failed", &[("error", json!(e.to_string()))]);
    }
    let events = host.drain_events();
    publisher.tick(
        &obs,
        &decision,
        &events,
        host,
        controller,
        slots_view(slots),
        log,
    );
    let mut changed = handle_events(events, controller, slots, log, publisher);

    // An adopted cgroup that came back (or appeared late) is admitted again.
    for slot in slots.iter_mut() {
        if slot.managed
            || slot.finished
            || !matches!(slot.config.origin, TenantOrigin::Adopt { .. })
        {
            continue;
        }
        let dir = host.hierarchy().dir_of(&slot.cgroup);
        let has_procs = memtide_linux::cgroup::MemoryCgroup::new(host.hierarchy().version, dir)
            .pids()
            .map(|p| !p.is_empty())
            .unwrap_or(false);
        if has_procs
            && host
                .adopt(
                    slot.id,
                    &slot.config.name.clone(),
                    &slot.cgroup,
                    None,
                    Origin::Adopted,
                )
                .is_ok()
        {
            let spec = spec(slot, config);
            admit(slot, spec, "adopted", host, controller, log, publisher);
            changed = true;
        }
    }
    changed
}

fn slots_view(slots: &[Slot]) -> Vec<(TenantId, String, String)> {
    slots
        .iter()
        .filter(|s| s.managed)
        .map(|s| (s.id, s.config.name.clone(), s.cgroup.clone()))
        .collect()
}

/// Drops gone tenants from the controller; returns whether any was dropped.
fn handle_events(
    events: Vec<HostEvent>,
    controller: &mut Controller,
    slots: &mut [Slot],
    log: &Logger,
    publisher: &mut Publisher,
) -> bool {
    let mut changed = false;
    for event in events {
        if let HostEvent::Gone { id, name, why } = event {
            controller.remove(id);
            if let Some(slot) = slots.iter_mut().find(|s| s.id == id) {
                slot.managed = false;
                slot.finished = matches!(slot.config.origin, TenantOrigin::Launch { .. });
            }
            log.info("dropped", &[("tenant", json!(name)), ("why", json!(why))]);
            publisher.record(&name, "dropped", &why);
            changed = true;
        }
    }
    changed
}

/// Applies the API's pending changes.
fn take_changes(
    commands: &Receiver<Request>,
    controller: &mut Controller,
    slots: &[Slot],
    log: &Logger,
) {
    loop {
        let request = match commands.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
        };
        let result = apply_change(&request.change, controller, slots);
        match &result {
            Ok(()) => log.info(
                "changed",
                &[("change", json!(format!("{:?}", request.change)))],
            ),
            Err(why) => log.warn(
                "change_refused",
                &[
                    ("change", json!(format!("{:?}", request.change))),
                    ("why", json!(why.to_string())),
                ],
            ),
        }
        let _ = request.reply.send(result);
    }
}

fn apply_change(
    change: &Change,
    controller: &mut Controller,
    slots: &[Slot],
) -> Result<(), Refusal> {
    match change {
        Change::TaxRate(t) => {
            let tax = TaxRate::new(*t).map_err(|e| Refusal::Conflict(e.to_string()))?;
            controller.set_tax_rate(tax);
            Ok(())
        }
        Change::Tenant {
            name,
            min_bytes,
            max_bytes,
            shares,
        } => {
            let slot = slots
                .iter()
                .find(|s| &s.config.name == name && s.managed)
                .ok_or_else(|| Refusal::UnknownTenant(name.clone()))?;
            let view = controller
                .tenant(slot.id)
                .ok_or_else(|| Refusal::UnknownTenant(name.clone()))?;
            let min = min_bytes.map_or(view.spec.min, |b| Bytes(b).to_pages_ceil());
            let max = max_bytes.map_or(view.spec.max, |b| Bytes(b).to_pages_floor());
            let shares = shares.unwrap_or(view.spec.shares);
            controller
                .update_tenant(slot.id, min, max, shares)
                .map_err(|e| Refusal::Conflict(e.to_string()))
        }
    }
}
