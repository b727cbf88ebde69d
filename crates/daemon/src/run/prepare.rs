//! Start-up before anything changes: the hierarchy, the parent, the tenants' slots, the state file, the controller with its admission control, the API port, the balloon socket, KSM and the disk, and the world and service they make.

use super::tenants::{declare, slot, spec, waiting_view, Slot};
use super::{Daemon, DaemonError, ReloadFrom, Running, Signals};
use crate::api::{ApiOptions, ApiServer, SocketServer, Token};
use crate::config::{
    BalloonSection, DaemonConfig, IoScheduler, ParentCgroup, RailsSection, Reclaim,
};
use crate::log::Logger;
use crate::publish::Publisher;
use crate::state_file::{self, StateFile};
use memtide_controller::{Controller, ControllerConfig};
use memtide_linux::host::ksm::{KsmDriver, Sharing};
use memtide_linux::host::{
    AppBalloon, Disk, HostOptions, IoOptions, LinuxError, LinuxHost, DAEMON_LEAF,
};
use memtide_linux::MemoryHierarchy;
use memtide_model::{Bytes, Pages, TenantId};
use memtide_policy::{LimitRails, QuotaSettings, ReclamationThresholds};
use memtide_qemu::{QemuHost, QemuOptions};
use memtide_runner::{Runner, Service, StateSaver, WallClock};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The longest wait for a VM's QMP answer.
const QMP_TIMEOUT: Duration = Duration::from_secs(2);

impl Running {
    /// Reads and checks everything, binds the API port; changes nothing on the host.
    pub(super) fn prepare(
        config: DaemonConfig,
        signals: Signals,
        reload_from: Option<ReloadFrom>,
    ) -> Result<Running, DaemonError> {
        let log = Logger::new(config.daemon.log_format);
        let found = MemoryHierarchy::detect(&config.host.proc_root).map_err(LinuxError::from)?;
        let parent = match &config.host.parent {
            ParentCgroup::OwnCgroup => own_parent(&found.own_cgroup),
            ParentCgroup::Path(p) => p.clone(),
        };
        let slots = slots_under(&config, &parent)?;
        check_parent_in_dry_run(&config, &found, &parent)?;
        let previous = previous_run(&config)?;
        let host = LinuxHost::new(found.clone(), host_options(&config))?;
        let swap = swap_total(&config.host.proc_root);
        let controller = controller_for(&config, host.machine(), swap)?;
        let budget = controller.config().budget.unwrap_or_default();
        let mut publisher = Publisher::new(&config, found.version.name(), &parent, budget);
        let (sender, requests) = std::sync::mpsc::channel();
        // The port is taken before anything changes: a daemon that cannot serve its API
        // leaves the host as it found it.
        let (api, socket) = start_api(&config, &publisher, sender)?;
        let (host, balloon) = with_mechanisms(host, &config, &log)?;
        let mut runner = Runner::new(qemu_world(host, &config), controller, config.daemon.tick);
        for s in &slots {
            declare(&mut runner, s, &config, &parent);
        }
        publisher.waiting(&waiting_view(&slots, &runner));
        let mut service = Service::new(runner, WallClock::new()).with_requests(requests);
        if !config.daemon.dry_run {
            let state_path = config.daemon.state_file.clone();
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
                socket: Some(socket),
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
}

/// The cgroup `parent = "self"` means for a daemon running in `own`: that one, or the cgroup
/// above memtide's own leaf when it moved itself there and was started again from it (cgroup
/// v2, docs/linux.md). `memtide discover` takes the same default.
pub fn own_parent(own: &str) -> String {
    match own.strip_suffix(&format!("/{DAEMON_LEAF}")) {
        Some("") => "/".to_string(),
        Some(above) => above.to_string(),
        None => own.to_string(),
    }
}

/// The API on TCP (changes with the `[api] token_file` token only) and on the Unix socket (changes
/// by root and `[api] group`). A token file or group that is not right, or a socket path another
/// daemon serves, is the user's error (`DaemonError::is_usage`).
fn start_api(
    config: &DaemonConfig,
    publisher: &Publisher,
    sender: std::sync::mpsc::Sender<crate::command::Request>,
) -> Result<(ApiServer, SocketServer), DaemonError> {
    let token = match &config.api.token_file {
        Some(path) => Some(Token::read(path)?),
        None => None,
    };
    let group = match &config.api.group {
        Some(name) => Some(crate::api::group_id(name)?),
        None => None,
    };
    let listen = config.daemon.listen;
    let tcp = ApiServer::start_with(
        listen,
        publisher.shared(),
        sender.clone(),
        ApiOptions {
            token,
            ..ApiOptions::default()
        },
    )?;
    let path = config.api.socket_path(&config.daemon.state_file);
    let socket = SocketServer::start(
        &path,
        group,
        publisher.shared(),
        sender,
        ApiOptions {
            workers: 2,
            ..ApiOptions::default()
        },
    )?;
    Ok((tcp, socket))
}

/// A slot for each configured tenant, in order; the first tenant outside `parent` is an error.
fn slots_under(config: &DaemonConfig, parent: &str) -> Result<Vec<Slot>, DaemonError> {
    let mut slots = Vec::with_capacity(config.tenants.len());
    for (i, t) in config.tenants.iter().enumerate() {
        slots.push(slot(t, TenantId(i as u32), parent)?);
    }
    Ok(slots)
}

/// A dry run creates nothing, so the parent must already exist.
fn check_parent_in_dry_run(
    config: &DaemonConfig,
    found: &MemoryHierarchy,
    parent: &str,
) -> Result<(), DaemonError> {
    let parent_dir = found.dir_of(parent);
    if config.daemon.dry_run && !parent_dir.is_dir() {
        return Err(DaemonError::Usage(format!(
            "parent cgroup {parent:?} does not exist ({})",
            parent_dir.display()
        )));
    }
    Ok(())
}

/// The state file a previous run left (none in a dry run), refused when another live memtide
/// holds it.
fn previous_run(config: &DaemonConfig) -> Result<Option<StateFile>, DaemonError> {
    if config.daemon.dry_run {
        return Ok(None);
    }
    let state_path = &config.daemon.state_file;
    // What the file holds is acted on as root (cgroups written, processes stopped), and logs
    // and saved settings are written beside it: only root may write there.
    if let Some(dir) = state_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        memtide_files::trusted_dir(dir, "state directory")?;
    }
    let previous = state_file::load(state_path)?;
    if let Some(prev) = &previous {
        state_file::check_not_in_use(state_path, prev, &config.host.proc_root)?;
    }
    Ok(previous)
}

/// How the Linux host runs under `config`; launched tenants' logs go beside the state file.
fn host_options(config: &DaemonConfig) -> HostOptions {
    HostOptions {
        proc_root: config.host.proc_root.clone(),
        write_timeout: config.host.write_timeout,
        dry_run: config.daemon.dry_run,
        log_dir: config.daemon.state_file.parent().map(|d| d.join("logs")),
        rescue_pressure: config.rails.backoff_pressure,
    }
}

/// The Linux host with the mechanisms `config` turns on, each set up, like the API port, before
/// anything on the host changes: the balloon socket (applications' agents register through
/// it), KSM and the disk.
fn with_mechanisms(
    mut host: LinuxHost,
    config: &DaemonConfig,
    log: &Logger,
) -> Result<(LinuxHost, Option<Balloon>), DaemonError> {
    let balloon = if config.balloon.enabled {
        let b = Balloon::start(&config.balloon, &host)?;
        host = host.with(AppBalloon::new(b.hub.clone()));
        Some(b)
    } else {
        None
    };
    if config.sharing.enabled {
        host = with_sharing(host, config, log)?;
    }
    // So is the device's scheduler, when memtide divides a disk. Without, the disk is still
    // there to give back the weights and caps an earlier run's records hold.
    let disk = if config.io.enabled {
        Disk::take_over(
            &config.host.proc_root,
            host.hierarchy(),
            &io_options(config, &config.daemon.state_file),
            config.host.write_timeout,
            config.daemon.dry_run,
        )?
    } else {
        Disk::off(config.host.write_timeout, config.daemon.dry_run)
    };
    Ok((host.with(disk), balloon))
}

/// The host with KSM taken over. KSM's own settings are kept beside the state file before any
/// changes, so a run that crashed is restored from them.
fn with_sharing(
    host: LinuxHost,
    config: &DaemonConfig,
    log: &Logger,
) -> Result<LinuxHost, DaemonError> {
    let ksm = KsmDriver::take_over(
        &config.host.proc_root,
        config
            .daemon
            .state_file
            .parent()
            .map(|d| d.join("ksm.json"))
            .as_deref(),
        config.host.write_timeout,
        config.daemon.dry_run,
    )?;
    let no_merge_any = !ksm.merge_any();
    let host = host.with(Sharing::new(ksm));
    if no_merge_any {
        log.warn(
            "sharing_no_merge_any",
            &[(
                "why",
                json!("this kernel has no PR_SET_MEMORY_MERGE (Linux 6.4 and later): launched tenants are not asked to merge; processes that madvise(MADV_MERGEABLE) still are merged"),
            )],
        );
    }
    Ok(host)
}

/// The QEMU world over the Linux host: VMs beside its cgroups, their sockets beside the state
/// file.
fn qemu_world(host: LinuxHost, config: &DaemonConfig) -> QemuHost {
    QemuHost::new(
        host,
        QemuOptions {
            run_dir: config
                .daemon
                .state_file
                .parent()
                .map_or_else(std::env::temp_dir, |d| d.join("vms")),
            qmp_timeout: QMP_TIMEOUT,
            stats_interval: 1,
            dry_run: config.daemon.dry_run,
            proc_root: config.host.proc_root.clone(),
        },
    )
}

/// The application balloon socket: its event loop and the hub it shares with the host.
pub(super) struct Balloon {
    pub(super) server: memtide_agents::server::Server,
    pub(super) hub: memtide_agents::hub::Hub,
}

impl Balloon {
    /// Binds the socket (before anything on the host changes; its directory must be trusted,
    /// as root binds and renames there) and starts its loop; an agent registers for the tenant
    /// whose cgroup holds its process.
    fn start(config: &BalloonSection, host: &LinuxHost) -> Result<Balloon, DaemonError> {
        use memtide_agents::hub::{Hub, SessionConfig};
        use memtide_agents::server::{Server, ServerConfig};
        use memtide_linux::host::{max_agent_connections, AgentDescriptors};
        let hub = Hub::new(
            SessionConfig {
                stats_interval: config.stats_interval,
                dead_after: config.dead_after,
                ..SessionConfig::default()
            },
            Box::new(host.agent_tenants()),
        );
        let group = config.group.as_deref().map(group_id).transpose()?;
        let server = Server::start(
            &ServerConfig {
                socket: config.socket.clone(),
                mode: config.mode,
                group,
                max_connections: config.max_agents.min(max_agent_connections()),
                max_per_uid: config.max_agents_per_uid,
                descriptors: Some(std::sync::Arc::new(AgentDescriptors)),
            },
            hub.handler(),
        )?;
        hub.set_wake(server.waker());
        Ok(Balloon { server, hub })
    }
}

/// The id of group `name` (`[balloon] group`); an unknown group is the user's error.
fn group_id(name: &str) -> Result<u32, DaemonError> {
    crate::api::group_id(name).map_err(|e| {
        let why = match e {
            crate::api::ApiError::Group { why, .. } => why,
            other => other.to_string(),
        };
        DaemonError::Usage(format!("[balloon] group = {name:?}: {why}"))
    })
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
pub(super) fn cache(c: Option<&memtide_config::quotas::QuotaTable>) -> Option<QuotaSettings> {
    c.map(|q| QuotaSettings::of(q.budget, q.hit_us, q.miss_us, q.steps))
}

/// The controller's rails on limit moves from `[rails]`.
pub(super) fn rails(r: &RailsSection) -> LimitRails {
    LimitRails {
        shrink_step: r.shrink_step,
        floor_margin: Bytes(r.floor_margin_bytes).to_pages_ceil(),
        backoff_faults_per_s: r.backoff_faults_per_s,
        backoff_pressure: r.backoff_pressure,
        backoff_throttled_per_s: r.backoff_throttled_per_s,
        ..LimitRails::default()
    }
}

/// The host's swap (none when meminfo does not say).
fn swap_total(proc_root: &Path) -> Pages {
    memtide_linux::read_meminfo(proc_root)
        .ok()
        .and_then(|m| m.swap_total)
        .unwrap_or(Bytes::ZERO)
        .to_pages_floor()
}

/// How memtide hands `config`'s `[io]` to the disk: the device, BFQ or not, and where the
/// scheduler in force is kept (beside the state file).
fn io_options(config: &DaemonConfig, state_path: &Path) -> IoOptions {
    IoOptions {
        device: config.io.device.clone().unwrap_or_default(),
        bfq: config.io.scheduler == IoScheduler::Bfq,
        saved: state_path.parent().map(|d| d.join("io.json")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn self_from_memtide_s_own_leaf_is_the_cgroup_above_it() {
        assert_eq!(own_parent("/svc"), "/svc");
        assert_eq!(own_parent("/svc/memtide-daemon"), "/svc");
        assert_eq!(own_parent("/memtide-daemon"), "/");
        assert_eq!(own_parent("/svc/memtide-daemonx"), "/svc/memtide-daemonx");
    }

    #[test]
    fn an_api_socket_another_daemon_serves_is_the_user_s_error_on_one_line() {
        use memtide_files::socket::SocketError;
        let path = PathBuf::from("/run/memtide/api.sock");
        let in_use: DaemonError = crate::api::ApiError::Socket(SocketError::InUse {
            what: "API socket",
            path: path.clone(),
        })
        .into();
        assert!(in_use.is_usage(), "{in_use}");
        assert_eq!(
            in_use.to_string(),
            "API socket /run/memtide/api.sock: another process is serving it (is memtide \
             already running?)"
        );
        let failed: DaemonError = crate::api::ApiError::Socket(SocketError::Bind {
            what: "API socket",
            path,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        })
        .into();
        assert!(
            !failed.is_usage(),
            "the host's failure, not the user's: {failed}"
        );
    }

    #[test]
    fn a_balloon_group_is_found_by_name_and_an_unknown_one_is_the_user_s_error() {
        assert_eq!(group_id("root").unwrap(), 0);
        let err = group_id("memtide-no-such-group").unwrap_err();
        assert!(err.is_usage(), "{err}");
        assert_eq!(
            err.to_string(),
            r#"[balloon] group = "memtide-no-such-group": no such group"#
        );
    }

    #[test]
    fn the_disk_s_scheduler_in_force_is_kept_beside_the_state_file() {
        let mut c = DaemonConfig::default();
        c.io.enabled = true;
        c.io.device = Some("loop7".to_string());
        assert_eq!(
            io_options(&c, Path::new("/run/memtide/state.json")).saved,
            Some(PathBuf::from("/run/memtide/io.json"))
        );
    }
}
