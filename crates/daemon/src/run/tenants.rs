//! The configured tenants: their slots, their specs and placements as declared to the runner, starting them and logging what came of it, letting them go.

use super::{Daemon, DaemonError};
use crate::config::{AppConfig, DaemonConfig, EstimatorChoice, TenantConfig, TenantOrigin};
use crate::publish::Managed;
use crate::state_file::TenantChange;
use memtide_controller::World;
use memtide_linux::host::{launched_cgroup_path, LinuxError, Origin, Placement};
use memtide_linux::IoCap;
use memtide_model::{
    Bytes, DiskSpec, EstimatorConfig, Pages, SamplingConfig, TenantId, TenantSpec, WorkingSetConfig,
};
use memtide_qemu::{ContainerPlacement, QemuHost, Record, VmPlacement};
use memtide_runner::{Outcome, Runner, Status};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// A configured tenant: its configuration and cgroup. Where it stands is the runner's
/// (`Status`); a launched tenant in a dry run is never declared there (nothing is launched).
pub(super) struct Slot {
    pub(super) id: TenantId,
    pub(super) config: TenantConfig,
    /// The cgroup path inside the memory hierarchy; for a container, which found as it runs,
    /// what it is (`docker container "redis-a"`).
    pub(super) cgroup: String,
    /// Why it waits, as last logged (logged again only when it changes).
    pub(super) waiting: Option<String>,
}

/// A slot for tenant `t`: its cgroup path, checked to lie under the parent.
pub(super) fn slot(t: &TenantConfig, id: TenantId, parent: &str) -> Result<Slot, DaemonError> {
    let cgroup = match &t.origin {
        TenantOrigin::Adopt { cgroup }
        | TenantOrigin::Unit {
            cgroup: Some(cgroup),
            ..
        } => {
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
        TenantOrigin::Container { name, engine } => format!(
            "{} container {name:?}",
            engine.map_or("engine", memtide_engines::EngineKind::name)
        ),
        TenantOrigin::Domain { name, uri } => format!("libvirt domain {name:?} at {uri}"),
        // The check against the host finds it before any slot is made.
        TenantOrigin::Unit { unit, cgroup: None } => {
            return Err(DaemonError::Usage(format!(
                "tenant \"{}\": the cgroup of unit {unit} is not known",
                t.name
            )))
        }
    };
    Ok(Slot {
        id,
        config: t.clone(),
        cgroup,
        waiting: None,
    })
}

/// Why a record of the previous run's state file must not be acted on, or `None`.
///
/// The file sits in a directory only root can write, but what it says is still checked
/// against the configuration before root writes a cgroup or stops a process for it: a record
/// of a configured tenant must name the cgroup and origin the configuration gives it, and a
/// record of a tenant the configuration no longer names is acted on only when this
/// configuration's parent holds it as a tenant memtide launched (`PARENT/NAME`), so that
/// stopping its processes and removing its cgroup touches nothing memtide did not make. An
/// adopted tenant no longer configured is left as it is (the log names its cgroup).
pub(super) fn record_refusal(record: &Record, parent: &str, slot: Option<&Slot>) -> Option<String> {
    let r = &record.linux;
    let launched = r.origin == Origin::Launched;
    let container = slot.is_some_and(|s| {
        matches!(
            s.config.origin,
            TenantOrigin::Container { .. } | TenantOrigin::Domain { .. }
        )
    });
    match slot {
        // A container's cgroup changes as its engine makes it again (a domain's as libvirt
        // starts it again); the world uses a record only while it runs in the cgroup the
        // record names.
        Some(_) if container && launched => {
            Some("the record says launched, the configuration a container or a domain".to_string())
        }
        Some(_) if container => None,
        Some(slot) if r.cgroup != slot.cgroup => Some(format!(
            "the record names cgroup {:?}, the configuration {:?}",
            r.cgroup, slot.cgroup
        )),
        Some(slot) if launched != slot.config.launched() => Some(format!(
            "the record says {}, the configuration {}",
            r.origin.name(),
            if slot.config.launched() {
                "launched"
            } else {
                "adopted"
            }
        )),
        Some(_) => None,
        None if !launched => Some(
            "an adopted tenant the configuration no longer names: memtide restores only \
             configured tenants and those it launched; give its cgroup back its settings by hand"
                .to_string(),
        ),
        None if r.cgroup != launched_cgroup_path(parent, &r.name)
            || r.name.contains('/')
            || !memtide_linux::is_under(parent, &r.cgroup) =>
        {
            Some(format!(
                "a launched tenant's cgroup lies at {:?} under the parent {parent:?}",
                launched_cgroup_path(parent, "NAME")
            ))
        }
        None => None,
    }
}

/// Declares slot `s` in the runner: its spec and where it lives (a container's cgroup must lie
/// under `parent`, as an adopted one must). A launched tenant is not
/// declared in a dry run, which launches nothing.
pub(super) fn declare(
    runner: &mut Runner<QemuHost>,
    s: &Slot,
    config: &DaemonConfig,
    parent: &str,
) {
    if s.config.launched() && config.daemon.dry_run {
        return;
    }
    // Its caps, written as it attaches (a declaration changes nothing on the host).
    if let Some(disk) = super::disk_mut(runner.world_mut()) {
        let _ = disk.set_cap(s.id, io_cap(&s.config));
    }
    // An adapter needs the balloon socket, and starts nothing in a dry run.
    let adapter = s
        .config
        .app
        .as_ref()
        .filter(|_| config.balloon.enabled && !config.daemon.dry_run)
        .map(|app| adapter_argv(&s.config, app, config));
    let placement = match &s.config.origin {
        TenantOrigin::Vm { source, .. } => memtide_qemu::Placement::Vm(VmPlacement {
            source: source.clone(),
            cgroup: s.cgroup.clone(),
        }),
        TenantOrigin::Domain { name, uri } => {
            memtide_qemu::Placement::Domain(memtide_qemu::DomainPlacement {
                name: name.clone(),
                uri: uri.clone(),
                within: parent.to_string(),
            })
        }
        TenantOrigin::Container { name, engine } => {
            // The check against the host chose the engine where the file did not.
            let engine = engine.unwrap_or(memtide_engines::EngineKind::Docker);
            memtide_qemu::Placement::Container(ContainerPlacement {
                name: name.clone(),
                engine,
                socket: config.engines.socket(engine).to_path_buf(),
                within: parent.to_string(),
                adapter,
                isolated: s.config.isolated,
            })
        }
        TenantOrigin::Adopt { .. } | TenantOrigin::Unit { .. } | TenantOrigin::Launch { .. } => {
            let launch = match &s.config.origin {
                TenantOrigin::Launch { argv } => Some(argv.clone()),
                _ => None,
            };
            memtide_qemu::Placement::Cgroup(Placement {
                cgroup: s.cgroup.clone(),
                launch,
                adapter,
                isolated: s.config.isolated,
                subtree: matches!(&s.config.origin,
                    TenantOrigin::Unit { unit, .. } if crate::config::unit_key(unit) == "slice"),
            })
        }
    };
    runner.declare(spec(s, config), placement);
}

/// `memtide-adapter`'s command line for tenant `t`'s server: the program beside this one when
/// it is there (an install puts both in one directory), else the one on `PATH`. An adopted
/// server outlives memtide: its pool's size at start is kept in `app-<name>.pool` beside the
/// state file (a directory only root may write), to be given back even after a crash; a
/// launched one is stopped with memtide.
fn adapter_argv(t: &TenantConfig, app: &AppConfig, config: &DaemonConfig) -> Vec<String> {
    let tenant = &t.name;
    let socket = &config.balloon.socket;
    let record = (!t.launched()).then(|| {
        let dir = config.daemon.state_file.parent().unwrap_or(Path::new("/"));
        dir.join(format!("app-{tenant}.pool"))
    });
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
    if let Some(r) = &record {
        arg("--restore-file", r.to_string_lossy().into_owned());
    }
    argv
}

/// A change the API made to a tenant (kept in the state file), applied to its configuration.
pub(super) fn apply_change_to_config(config: &mut TenantConfig, change: &TenantChange) {
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

/// A tenant's weight and latency target on the shared disk, from its `[tenant.io]`.
pub(super) fn disk_spec(t: &TenantConfig) -> Option<DiskSpec> {
    t.io.as_ref().map(crate::config::TenantIoConfig::disk_spec)
}

/// A tenant's configured caps on the shared disk; `None` without any.
pub(super) fn io_cap(t: &TenantConfig) -> Option<IoCap> {
    let caps = t.io.as_ref()?.caps;
    (!caps.is_none()).then_some(IoCap {
        read_iops: caps.read_iops,
        write_iops: caps.write_iops,
        read_bps: caps.read_bps.map(Bytes),
        write_bps: caps.write_bps.map(Bytes),
    })
}

/// The controller's spec for slot `slot` under `config`.
pub(super) fn spec(slot: &Slot, config: &DaemonConfig) -> TenantSpec {
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
                // A server woken from swap gets it back at once (and read back ahead).
                wake: true,
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
pub(super) fn managed_view(slots: &[Slot], runner: &Runner<QemuHost>) -> Vec<Managed> {
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
            cgroup: cgroup_now(s, runner),
            origin: if s.config.launched() {
                "launched"
            } else if matches!(s.config.origin, TenantOrigin::Container { .. }) {
                "container"
            } else if matches!(s.config.origin, TenantOrigin::Domain { .. }) {
                "domain"
            } else {
                "adopted"
            },
        })
        .collect()
}

/// The cgroup slot `s`'s tenant runs in: the one the world holds it in (a container's, found
/// as it runs), else the slot's.
fn cgroup_now(s: &Slot, runner: &Runner<QemuHost>) -> String {
    runner
        .world()
        .linux()
        .tenant(s.id)
        .map_or_else(|| s.cgroup.clone(), |t| t.record.cgroup.clone())
}

/// (name, cgroup, why) of the tenants waiting for their cgroup.
pub(super) fn waiting_view(
    slots: &[Slot],
    runner: &Runner<QemuHost>,
) -> Vec<(String, String, String)> {
    slots
        .iter()
        .filter_map(|s| match &runner.tenant(s.id)?.status {
            Status::Waiting(why) => Some((s.config.name.clone(), s.cgroup.clone(), why.clone())),
            _ => None,
        })
        .collect()
}

impl Daemon {
    /// Starts slot `i` through the runner: admission control, then adopt, re-adopt (under the
    /// previous run's `record`, its estimator resumed from `estimate`) or launch. An adopted
    /// cgroup that does not exist yet, or holds no process, waits and is adopted when it can be.
    /// A launched tenant is not launched in a dry run.
    pub(super) fn start_tenant(
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
    pub(super) fn started_or_not(
        &mut self,
        runner: &Runner<QemuHost>,
        id: TenantId,
        outcome: &Outcome,
        estimate: Option<Pages>,
    ) {
        let Some(i) = self.slots.iter().position(|s| s.id == id) else {
            return;
        };
        let cgroup = cgroup_now(&self.slots[i], runner);
        let slot = &mut self.slots[i];
        match outcome {
            Outcome::Started(how) => {
                slot.waiting = None;
                let view = runner.controller().tenant(id);
                let (min, max) =
                    view.map_or((Pages::ZERO, Pages::ZERO), |v| (v.spec.min, v.spec.max));
                self.log.info(
                    how.name(),
                    &[
                        ("tenant", json!(slot.config.name)),
                        ("cgroup", json!(cgroup)),
                        ("min_bytes", json!(min.to_bytes().0)),
                        ("max_bytes", json!(max.to_bytes().0)),
                        ("estimate_bytes", json!(estimate.map(|e| e.to_bytes().0))),
                    ],
                );
                self.publisher
                    .record(&slot.config.name, "admitted", &format!("{how} {cgroup}"));
                if let Some(why) = super::shared_disk(runner.world()).and_then(|d| d.unmanaged(id))
                {
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
    pub(super) fn forget(&mut self, runner: &mut Runner<QemuHost>, record: Record) {
        let name = record.linux.name.clone();
        match runner.world_mut().restore(&record) {
            Ok(()) => self.log.info(
                "released",
                &[
                    ("tenant", json!(name)),
                    ("why", json!("no longer configured")),
                ],
            ),
            Err(e) => {
                self.publisher.restore_failed();
                self.log.warn(
                    "release_failed",
                    &[("tenant", json!(name)), ("error", json!(e.to_string()))],
                )
            }
        }
    }

    /// Whether the previous run's `record` may be acted on, for the configured tenant `slot` of
    /// its name (`None`: the configuration no longer names it); a record that may not is logged
    /// with the reason and left alone.
    pub(super) fn trusted(&self, record: &Record, slot: Option<&Slot>) -> bool {
        let Some(why) = record_refusal(record, &self.parent, slot) else {
            return true;
        };
        self.log.warn(
            "record_refused",
            &[
                ("tenant", json!(record.linux.name)),
                ("cgroup", json!(record.linux.cgroup)),
                ("origin", json!(record.linux.origin.name())),
                ("why", json!(why)),
            ],
        );
        false
    }

    /// Stops managing a slot's tenant (restoring it) and forgets it.
    pub(super) fn let_go(&mut self, runner: &mut Runner<QemuHost>, slot: &Slot, why: &str) {
        let running = runner
            .tenant(slot.id)
            .is_some_and(|t| t.status == Status::Running);
        match runner.remove(slot.id) {
            Ok(()) if running => self.log.info(
                "released",
                &[("tenant", json!(slot.config.name)), ("why", json!(why))],
            ),
            Ok(()) => {}
            Err(e) => {
                self.publisher.restore_failed();
                self.log.error(
                    "restore_failed",
                    &[
                        ("tenant", json!(slot.config.name)),
                        ("error", json!(e.to_string())),
                    ],
                )
            }
        }
    }
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

    /// The previous run's record of tenant `name` at `cgroup`, as its file may say.
    fn record(name: &str, cgroup: &str, origin: Origin) -> Record {
        use memtide_linux::host::{OomRecord, TenantRecord};
        use memtide_linux::{Limit, LimitSettings};
        Record {
            linux: TenantRecord {
                name: name.to_string(),
                cgroup: cgroup.to_string(),
                origin,
                original: LimitSettings::V1 {
                    limit: Limit::Max,
                    soft_limit: Limit::Max,
                    memsw_limit: None,
                    swappiness: Some(60),
                },
                oom: OomRecord {
                    killer_was_disabled: Some(false),
                    guard_on: true,
                },
                io: None,
            },
            vm: None,
        }
    }

    #[test]
    fn a_record_of_a_configured_tenant_is_refused_unless_cgroup_and_origin_match() {
        let (_root, c) = config(true, "weight = 300");
        let a = slot(&c.tenants[0], TenantId(0), "/m").unwrap();
        assert_eq!(
            record_refusal(&record("a", "/m/a", Origin::Adopted), "/m", Some(&a)),
            None
        );
        let elsewhere = record_refusal(
            &record("a", "/system.slice/x", Origin::Adopted),
            "/m",
            Some(&a),
        );
        assert!(elsewhere.unwrap().contains("\"/system.slice/x\""));
        let launched = record_refusal(&record("a", "/m/a", Origin::Launched), "/m", Some(&a));
        assert!(launched.unwrap().contains("says launched"));
    }

    #[test]
    fn a_record_no_longer_configured_is_acted_on_only_when_launched_under_the_parent() {
        assert_eq!(
            record_refusal(&record("old", "/m/old", Origin::Launched), "/m", None),
            None
        );
        for (name, cgroup, origin) in [
            ("old", "/m/old", Origin::Adopted),
            ("old", "/elsewhere/old", Origin::Launched),
            ("old", "/m/other", Origin::Launched),
            ("..", "/m/..", Origin::Launched),
            ("a/b", "/m/a/b", Origin::Launched),
        ] {
            assert!(
                record_refusal(&record(name, cgroup, origin), "/m", None).is_some(),
                "{name} at {cgroup} ({}) was trusted",
                origin.name()
            );
        }
    }

    #[test]
    fn an_adopted_server_s_adapter_keeps_its_pool_beside_the_state_file_and_a_launched_one_not() {
        let text = "[daemon]\nstate_file = \"/var/lib/memtide/state.json\"\n\
                    [balloon]\nenabled = true\n\
                    [[tenant]]\nname = \"db\"\ncgroup = \"/m/db\"\nmax = \"1G\"\n\
                    [tenant.app]\nkind = \"redis\"\nmin = \"16M\"\nmax = \"256M\"\n\
                    [[tenant]]\nname = \"job\"\ncommand = [\"redis-server\"]\nmax = \"1G\"\n\
                    [tenant.app]\nkind = \"redis\"\nmin = \"16M\"\nmax = \"256M\"\n";
        let config =
            DaemonConfig::parse(text, Path::new("t.toml")).unwrap_or_else(|e| panic!("{e}"));
        let argv = |i: usize| {
            let t = &config.tenants[i];
            adapter_argv(t, t.app.as_ref().unwrap(), &config)
        };
        let adopted = argv(0);
        let at = adopted
            .iter()
            .position(|a| a == "--restore-file")
            .expect("a record file");
        assert_eq!(adopted[at + 1], "/var/lib/memtide/app-db.pool");
        assert!(!argv(1).iter().any(|a| a == "--restore-file"));
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
            Some(DiskSpec {
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
