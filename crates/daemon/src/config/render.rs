//! Writes a [`DaemonConfig`] back as a configuration file, every default spelled out, through the same serde structs the file is read with (so sizes and durations are written the one way they are read).

use super::schema::{
    AppDoc, BalloonDoc, DaemonDoc, FileDoc, HostDoc, IoDoc, PolicyDoc, RailsDoc, SharingDoc,
    TenantDoc, TenantIoDoc,
};
use super::{AppServer, DaemonConfig, TenantOrigin};
use memtide_config::quotas::{QuotasDoc, SloDoc};
use memtide_config::{Duration, Size};
use std::path::PathBuf;

pub(crate) fn to_toml(c: &DaemonConfig) -> String {
    let d = &c.daemon;
    let h = &c.host;
    let r = &c.rails;
    let file = FileDoc {
        daemon: Some(DaemonDoc {
            tick: Some(Duration(d.tick)),
            listen: Some(d.listen.to_string()),
            listen_public: Some(d.listen_public),
            state_file: Some(d.state_file.to_string_lossy().into_owned()),
            dry_run: Some(d.dry_run),
            log_format: Some(d.log_format),
            decisions_kept: Some(d.decisions_kept as u64),
        }),
        host: Some(HostDoc {
            proc_root: Some(h.proc_root.to_string_lossy().into_owned()),
            parent: Some(h.parent.as_written().to_string()),
            budget: h.budget_bytes.map(Size),
            reserve: Some(Size(h.reserve_bytes)),
            write_timeout: Some(Duration(h.write_timeout)),
        }),
        policy: Some(PolicyDoc {
            tax_rate: Some(c.policy.tax_rate),
            sampling_period: Some(Duration(c.policy.sampling_period)),
            reclaim: Some(c.policy.reclaim),
        }),
        rails: Some(RailsDoc {
            shrink_step: Some(r.shrink_step),
            floor_margin: Some(Size(r.floor_margin_bytes)),
            backoff_refaults_per_s: Some(r.backoff_faults_per_s),
            backoff_pressure: Some(r.backoff_pressure),
        }),
        balloon: Some(BalloonDoc {
            enabled: Some(c.balloon.enabled),
            socket: Some(c.balloon.socket.to_string_lossy().into_owned()),
            mode: Some(format!("{:04o}", c.balloon.mode)),
            stats_interval: Some(Duration(c.balloon.stats_interval)),
            dead_after: Some(Duration(c.balloon.dead_after)),
            max_agents: Some(c.balloon.max_agents as u64),
        }),
        sharing: Some(SharingDoc {
            enabled: Some(c.sharing.enabled),
            idle_rate: Some(c.sharing.idle_rate),
            pressed_rate: Some(c.sharing.pressed_rate),
            cpu_budget: Some(c.sharing.cpu_budget),
        }),
        cache: c.cache.as_ref().map(QuotasDoc::of),
        io: Some(IoDoc {
            enabled: Some(c.io.enabled),
            device: c.io.device.clone(),
            scheduler: Some(c.io.scheduler),
        }),
        tenant: c
            .tenants
            .iter()
            .map(|t| TenantDoc {
                name: t.name.clone(),
                cgroup: match &t.origin {
                    TenantOrigin::Adopt { cgroup } => Some(cgroup.clone()),
                    _ => None,
                },
                command: match &t.origin {
                    TenantOrigin::Launch { argv } => Some(argv.clone()),
                    _ => None,
                },
                vm: match &t.origin {
                    TenantOrigin::Vm { source, .. } => Some(vm_doc(source)),
                    _ => None,
                },
                min: Some(Size(t.min_bytes)),
                max: Size(t.max_bytes),
                shares: Some(t.shares),
                estimator: Some(t.estimator),
                cap_at_estimate: Some(t.cap_at_estimate),
                isolated: Some(t.isolated),
                slo: t.slo.map(SloDoc::of),
                io: t.io.as_ref().map(|io| TenantIoDoc {
                    weight: Some(u64::from(io.weight)),
                    latency_target: io.latency_target.map(Duration),
                    read_iops: io.caps.read_iops,
                    write_iops: io.caps.write_iops,
                    read_bps: io.caps.read_bps.map(Size),
                    write_bps: io.caps.write_bps.map(Size),
                }),
                app: t.app.as_ref().map(|a| {
                    let path =
                        |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
                    let (url, user, password_file, collector) = match &a.server {
                        AppServer::Redis { url, password_file } => {
                            (Some(url.clone()), None, path(password_file), None)
                        }
                        AppServer::Mariadb {
                            url,
                            user,
                            password_file,
                        } => (
                            Some(url.clone()),
                            Some(user.clone()),
                            path(password_file),
                            None,
                        ),
                        AppServer::Memcached { url } => (Some(url.clone()), None, None, None),
                        AppServer::Jvm { collector } => (None, None, None, Some(*collector)),
                    };
                    AppDoc {
                        kind: a.server.kind(),
                        url,
                        user,
                        password_file,
                        collector,
                        min: Size(a.min_bytes),
                        max: Size(a.max_bytes),
                        granule: Some(Size(a.granule_bytes)),
                    }
                }),
            })
            .collect(),
    };
    // Tables of strings, numbers, booleans and arrays always serialize.
    toml::to_string(&file).unwrap_or_default()
}

/// A VM's `[tenant.vm]` as written.
fn vm_doc(source: &memtide_qemu::vm::VmSource) -> super::schema::VmDoc {
    use memtide_qemu::vm::VmSource;
    let path =
        |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
    match source {
        VmSource::Adopt { qmp } => super::schema::VmDoc {
            qmp: Some(qmp.to_string_lossy().into_owned()),
            ..Default::default()
        },
        VmSource::Launch(l) => super::schema::VmDoc {
            qmp: None,
            qemu: Some(l.qemu.clone()),
            kernel: path(&l.kernel),
            initrd: path(&l.initrd),
            disk: path(&l.disk),
            memory: Some(Size(l.memory.0)),
            cpus: Some(l.cpus),
            append: l.append.clone(),
            args: (!l.args.is_empty()).then(|| l.args.clone()),
            kvm: Some(l.kvm),
        },
    }
}
