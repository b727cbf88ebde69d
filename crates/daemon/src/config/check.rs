//! The one check of a parsed configuration against the host it runs on (the shared disk's device, each launched VM's files, memory and QEMU, each adopted VM's cgroup found through its QMP socket, each adopted systemd unit's cgroup asked of systemd, the engine of each container tenant that names none), made at start and at every reload through a [`HostProbe`] that tests replace; parsing itself reads no host file.

use super::{DaemonConfig, TenantOrigin};
use memtide_config::{ConfigError, Document, FieldPath};
use memtide_engines::EngineKind;
use memtide_qemu::vm::{LaunchSpec, VmError, VmSource};
use std::path::{Path, PathBuf};

/// What the configuration asks of the host, answered by the host (or by a test).
pub trait HostProbe {
    /// Whether `device` (a path to a node, or a name under `/sys/block`) is a whole block
    /// device; why not.
    fn block_device(&self, device: &str) -> Result<(), String>;
    /// The memory cgroup of the QEMU process serving the QMP socket `qmp`; why not.
    fn vm_cgroup(&self, qmp: &Path) -> Result<String, String>;
    /// The cgroup of the running systemd unit `unit` (its `ControlGroup`); why not.
    fn unit_cgroup(&self, unit: &str) -> Result<String, String>;
    /// Whether the VM `spec` can be launched here: its files exist, its memory fits the
    /// host's, QEMU is there.
    fn vm_launch(&self, spec: &LaunchSpec) -> Result<(), LaunchRefusal>;
    /// Whether a Unix socket is at `path` (a container engine's).
    fn is_socket(&self, path: &Path) -> bool;
}

/// Why a VM cannot be launched on this host.
#[derive(Debug)]
pub enum LaunchRefusal {
    /// The host's memory could not be read.
    Meminfo(String),
    /// The spec does not fit the host.
    Vm(VmError),
}

/// Checks `config` (read from `doc`) against the host `probe` answers for, and fills in
/// what only the host knows: each adopted VM's and systemd unit's cgroup. The first problem is an error at the
/// field it concerns.
pub fn against_host(
    config: &mut DaemonConfig,
    doc: &Document,
    probe: &dyn HostProbe,
) -> Result<(), ConfigError> {
    let root = FieldPath::root();
    if let (true, Some(device)) = (config.io.enabled, &config.io.device) {
        probe.block_device(device).map_err(|why| {
            doc.error(
                &root.key("io").key("device"),
                format!("is not a whole block device on this host: {why}"),
            )
        })?;
    }
    let mut adopted_vm = false;
    let engines = config.engines.clone();
    for (i, t) in config.tenants.iter_mut().enumerate() {
        if let TenantOrigin::Container { engine, .. } = &mut t.origin {
            if engine.is_none() {
                let found = EngineKind::present_by(
                    |k| engines.socket(k).to_path_buf(),
                    |p| probe.is_socket(p),
                );
                *engine = Some(found.ok_or_else(|| {
                    doc.error(
                        &root.key("tenant").index(i).key("container"),
                        format!(
                            "has no engine to ask: neither {} (docker) nor {} (podman) is a \
                             socket here; start the engine, or give engine = \"docker\" or \
                             \"podman\" to wait for it",
                            engines.docker_socket.display(),
                            engines.podman_socket.display()
                        ),
                    )
                })?);
            }
            continue;
        }
        if let TenantOrigin::Unit { unit, cgroup } = &mut t.origin {
            let at = root.key("tenant").index(i).key(super::unit_key(unit));
            let found = probe.unit_cgroup(unit).map_err(|why| doc.error(&at, why))?;
            let found = super::read::cgroup_path(&found).map_err(|why| {
                doc.error(
                    &at,
                    format!("has the cgroup \"{found}\" from systemd, which {why}"),
                )
            })?;
            if let super::ParentCgroup::Path(parent) = &config.host.parent {
                if !super::cgroup_is_strictly_under(&found, parent) {
                    return Err(doc.error(
                        &at,
                        format!(
                            "is in cgroup \"{found}\", outside the configured parent \"{parent}\"; \
                             an adopted cgroup must lie strictly under the parent"
                        ),
                    ));
                }
            }
            *cgroup = Some(found);
            adopted_vm = true;
            continue;
        }
        let at = root.key("tenant").index(i).key("vm");
        let TenantOrigin::Vm { source, cgroup } = &mut t.origin else {
            continue;
        };
        match source {
            VmSource::Adopt { qmp } => {
                let found = probe
                    .vm_cgroup(qmp)
                    .map_err(|why| doc.error(&at.key("qmp"), why))?;
                *cgroup = Some(found);
                adopted_vm = true;
            }
            VmSource::Launch(spec) => probe.vm_launch(spec).map_err(|refusal| {
                let (field, message) = match refusal {
                    LaunchRefusal::Meminfo(why) => ("memory", why),
                    LaunchRefusal::Vm(e) => (field_of(&e), e.to_string()),
                };
                doc.error(&at.key(field), message)
            })?,
        }
    }
    if adopted_vm {
        // Their cgroups (VMs' and units') are known now: they must not nest with the others'.
        super::tenant::check_cgroups(doc, &config.host, &config.tenants)?;
    }
    Ok(())
}

/// The `[tenant.vm]` field a launch refusal concerns.
fn field_of(e: &VmError) -> &'static str {
    match e {
        VmError::Missing { what, .. } => what,
        VmError::NothingToBoot => "kernel",
        VmError::MoreThanHost { .. } | VmError::TooSmall { .. } => "memory",
        VmError::Cpus(_) => "cpus",
        VmError::NoQemu(_) => "qemu",
    }
}

/// The host itself, its `/proc` and `/sys` under `proc_root` (`[host] proc_root`).
pub struct HostFiles {
    proc_root: PathBuf,
}

impl HostFiles {
    pub fn new(proc_root: &Path) -> HostFiles {
        HostFiles {
            proc_root: proc_root.to_path_buf(),
        }
    }
}

impl HostProbe for HostFiles {
    fn is_socket(&self, path: &Path) -> bool {
        memtide_engines::is_socket(path)
    }

    fn block_device(&self, text: &str) -> Result<(), String> {
        use memtide_linux::BlockDevice;
        use std::os::unix::fs::FileTypeExt;
        let sysfs = self.proc_root.join("sys");
        if !text.contains('/') {
            return BlockDevice::by_name(&sysfs, text)
                .map(|_| ())
                .map_err(|e| e.to_string());
        }
        let path = Path::new(text);
        let meta = std::fs::metadata(path).map_err(|e| format!("{text}: {e}"))?;
        if !meta.file_type().is_block_device() {
            return Err(format!("{text} is not a block device node"));
        }
        BlockDevice::by_path(&sysfs, path).map(|_| ()).map_err(|e| {
            format!(
                "{e} (a partition or another node: weights and schedulers belong to the whole disk)"
            )
        })
    }

    fn vm_cgroup(&self, qmp: &Path) -> Result<String, String> {
        let hierarchy =
            memtide_linux::MemoryHierarchy::detect(&self.proc_root).map_err(|e| e.to_string())?;
        memtide_qemu::adopt::cgroup_of_socket(qmp, &hierarchy, &self.proc_root)
            .map_err(|e| e.to_string())
    }

    fn unit_cgroup(&self, unit: &str) -> Result<String, String> {
        let asked = || format!("cannot ask systemd for unit {unit}");
        // A hung systemd (or D-Bus) must not hang a start or a reload.
        let out = crate::bounded::output_within(
            std::process::Command::new("systemctl")
                .args(["show", "-p", "Id", "-p", "LoadState", "-p", "ActiveState"])
                .args(["-p", "ControlGroup", "-p", "Slice", "--"])
                .arg(unit),
            "systemctl show",
            SYSTEMCTL_DEADLINE,
        )
        .map_err(|why| format!("{}: {why}", asked()))?;
        if !out.status.success() {
            return Err(format!(
                "{}: systemctl show: {}",
                asked(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        unit_cgroup_of(unit, &String::from_utf8_lossy(&out.stdout))
    }

    fn vm_launch(&self, spec: &LaunchSpec) -> Result<(), LaunchRefusal> {
        let machine = memtide_linux::read_meminfo(&self.proc_root)
            .map_err(|e| LaunchRefusal::Meminfo(e.to_string()))?
            .mem_total;
        spec.check(machine).map_err(LaunchRefusal::Vm)
    }
}

/// How long `systemctl show` may take to answer.
const SYSTEMCTL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The cgroup in `systemctl show -p Id -p LoadState -p ActiveState -p ControlGroup -p Slice
/// UNIT`'s answer `text`, or why there is none. A running unit has its `ControlGroup`; a
/// loaded unit that is not running gets the one systemd will give it when it starts (its
/// slice's path, then its name, escaped as systemd escapes them), so that it is adopted as it
/// starts; until then it waits, as an adopted cgroup that does not exist yet does.
fn unit_cgroup_of(unit: &str, text: &str) -> Result<String, String> {
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .unwrap_or("")
            .trim()
    };
    match (
        value("LoadState"),
        value("ControlGroup"),
        value("Slice"),
        value("Id"),
    ) {
        ("not-found", _, _, _) => Err(format!("is not a unit systemd knows ({unit})")),
        (_, cgroup, _, _) if !cgroup.is_empty() => Ok(cgroup.to_string()),
        ("loaded", _, slice, id) if !slice.is_empty() && !id.is_empty() => {
            Ok(format!("{}/{}", slice_path(slice), cgroup_escape(id)))
        }
        (load, _, _, _) => Err(format!(
            "is not running ({unit} is {}, load state {}) and systemd gives no slice for it, \
             so memtide cannot know its cgroup; start it first",
            match value("ActiveState") {
                "" => "unknown",
                state => state,
            },
            if load.is_empty() { "unknown" } else { load }
        )),
    }
}

/// The cgroup path of systemd slice `slice`: each dash-separated prefix is a parent slice
/// (`a-b.slice` lies in `/a.slice/a-b.slice`; `-.slice` is the root), as systemd's
/// `slice_build_subslice` makes it.
fn slice_path(slice: &str) -> String {
    let Some(stem) = slice.strip_suffix(".slice").filter(|s| *s != "-") else {
        return String::new();
    };
    let mut path = String::new();
    for (i, _) in stem.match_indices('-').chain([(stem.len(), "")]) {
        path.push('/');
        path.push_str(&cgroup_escape(&format!("{}.slice", &stem[..i])));
    }
    path
}

/// A unit's name as systemd writes it in the cgroup tree (`cg_escape`): prefixed with `_`
/// where it could be taken for a kernel file (it starts with `_` or `.`, is `tasks`,
/// `notify_on_release` or `release_agent`, starts with `cgroup.`, or is a controller's name
/// before its last dot, such as `cpu.service`).
fn cgroup_escape(name: &str) -> String {
    const CONTROLLERS: [&str; 13] = [
        "cpu",
        "cpuacct",
        "cpuset",
        "io",
        "blkio",
        "memory",
        "devices",
        "pids",
        "bpf-firewall",
        "bpf-devices",
        "bpf-foreign",
        "bpf-socket-bind",
        "bpf-restrict-network-interfaces",
    ];
    let controller = name
        .rsplit_once('.')
        .is_some_and(|(stem, _)| CONTROLLERS.contains(&stem));
    if name.starts_with(['_', '.'])
        || ["tasks", "notify_on_release", "release_agent"].contains(&name)
        || name.starts_with("cgroup.")
        || controller
    {
        format!("_{name}")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A host with the answers a test gives, recording what it was asked.
    #[derive(Default)]
    struct FakeHost {
        no_device: Option<String>,
        vm_cgroups: Vec<(PathBuf, String)>,
        units: Vec<(&'static str, &'static str)>,
        launch: Option<fn() -> VmError>,
        sockets: Vec<PathBuf>,
        asked: RefCell<Vec<String>>,
    }

    impl HostProbe for FakeHost {
        fn is_socket(&self, path: &Path) -> bool {
            self.asked
                .borrow_mut()
                .push(format!("socket {}", path.display()));
            self.sockets.iter().any(|s| s == path)
        }

        fn block_device(&self, device: &str) -> Result<(), String> {
            self.asked.borrow_mut().push(format!("device {device}"));
            self.no_device.clone().map_or(Ok(()), Err)
        }

        fn vm_cgroup(&self, qmp: &Path) -> Result<String, String> {
            self.asked
                .borrow_mut()
                .push(format!("qmp {}", qmp.display()));
            self.vm_cgroups
                .iter()
                .find(|(q, _)| q == qmp)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| format!("{}: connection refused", qmp.display()))
        }

        fn unit_cgroup(&self, unit: &str) -> Result<String, String> {
            self.asked.borrow_mut().push(format!("unit {unit}"));
            self.units
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, c)| c.to_string())
                .ok_or_else(|| format!("is not a unit systemd knows ({unit})"))
        }

        fn vm_launch(&self, spec: &LaunchSpec) -> Result<(), LaunchRefusal> {
            self.asked
                .borrow_mut()
                .push(format!("launch {}", spec.qemu));
            self.launch.map_or(Ok(()), |e| Err(LaunchRefusal::Vm(e())))
        }
    }

    fn check(text: &str, host: &FakeHost) -> Result<DaemonConfig, ConfigError> {
        let doc = Document::parse(Path::new("h.toml"), text)?;
        let mut config = super::super::build::build(&doc)?;
        against_host(&mut config, &doc, host)?;
        Ok(config)
    }

    const IO: &str = "[io]\nenabled = true\ndevice = \"vdb\"\n";
    const VM: &str = "[[tenant]]\nname = \"vm\"\nmax = \"1G\"\n[tenant.vm]\nmemory = \"512M\"\nkernel = \"/k\"\n";

    fn adopted(name: &str, qmp: &str) -> String {
        format!("[[tenant]]\nname = \"{name}\"\nmax = \"1G\"\n[tenant.vm]\nqmp = \"{qmp}\"\n")
    }

    const UNITS: &str = "[host]\nparent = \"/system.slice\"\n\
        [[tenant]]\nname = \"a\"\nunit = \"redis-server@a.service\"\nmax = \"1G\"\n\
        [[tenant]]\nname = \"b\"\ncgroup = \"/system.slice/b.service\"\nmax = \"1G\"\n";

    #[test]
    fn a_unit_s_cgroup_is_asked_of_systemd_and_must_lie_under_the_parent() {
        let host = FakeHost {
            units: vec![(
                "redis-server@a.service",
                "/system.slice/system-redis\\x2dserver.slice/redis-server@a.service",
            )],
            ..FakeHost::default()
        };
        let config = check(UNITS, &host).unwrap();
        assert_eq!(*host.asked.borrow(), ["unit redis-server@a.service"]);
        assert_eq!(
            config.tenants[0].adopted_cgroup(),
            Some("/system.slice/system-redis\\x2dserver.slice/redis-server@a.service")
        );
        assert!(!config.tenants[0].launched());

        let outside = FakeHost {
            units: vec![("redis-server@a.service", "/user.slice/redis.service")],
            ..FakeHost::default()
        };
        let e = check(UNITS, &outside).unwrap_err();
        assert_eq!(e.field(), Some("tenant[0].unit"));
        assert!(
            e.to_string().contains(
                "is in cgroup \"/user.slice/redis.service\", outside the configured parent \"/system.slice\""
            ),
            "{e}"
        );

        let same = FakeHost {
            units: vec![("redis-server@a.service", "/system.slice/b.service")],
            ..FakeHost::default()
        };
        let e = check(UNITS, &same).unwrap_err();
        assert!(
            e.to_string().contains("is also tenant \"a\"'s cgroup"),
            "{e}"
        );

        let e = check(UNITS, &FakeHost::default()).unwrap_err();
        assert_eq!(e.field(), Some("tenant[0].unit"));
        assert!(
            e.to_string()
                .ends_with("is not a unit systemd knows (redis-server@a.service)"),
            "{e}"
        );
    }

    #[test]
    fn systemctl_show_s_answer_gives_the_cgroup_or_why_there_is_none() {
        let running = "Id=redis.service\nLoadState=loaded\nActiveState=active\n\
                       ControlGroup=/system.slice/redis.service\nSlice=system.slice\n";
        assert_eq!(
            unit_cgroup_of("redis.service", running).unwrap(),
            "/system.slice/redis.service"
        );
        // Not running: the cgroup systemd will make for it, from its slice and its name.
        let stopped = "Id=redis-server@late.service\nLoadState=loaded\nActiveState=inactive\n\
                       ControlGroup=\nSlice=system-redis\\x2dserver.slice\n";
        assert_eq!(
            unit_cgroup_of("redis-server@late.service", stopped).unwrap(),
            "/system.slice/system-redis\\x2dserver.slice/redis-server@late.service"
        );
        let no_slice = "Id=x.service\nLoadState=masked\nActiveState=inactive\nControlGroup=\n";
        assert_eq!(
            unit_cgroup_of("x.service", no_slice).unwrap_err(),
            "is not running (x.service is inactive, load state masked) and systemd gives no \
             slice for it, so memtide cannot know its cgroup; start it first"
        );
        let unknown = "LoadState=not-found\nActiveState=inactive\nControlGroup=\n";
        assert_eq!(
            unit_cgroup_of("nope.service", unknown).unwrap_err(),
            "is not a unit systemd knows (nope.service)"
        );
    }

    #[test]
    fn a_slice_s_path_nests_each_dash_prefix_and_escapes_as_systemd_does() {
        assert_eq!(slice_path("-.slice"), "");
        assert_eq!(slice_path("system.slice"), "/system.slice");
        assert_eq!(slice_path("user-1000.slice"), "/user.slice/user-1000.slice");
        assert_eq!(slice_path("a-b-c.slice"), "/a.slice/a-b.slice/a-b-c.slice");
        assert_eq!(cgroup_escape("redis.service"), "redis.service");
        assert_eq!(cgroup_escape("cpu.service"), "_cpu.service");
        assert_eq!(cgroup_escape("_x.service"), "__x.service");
        assert_eq!(cgroup_escape("cgroup.procs"), "_cgroup.procs");
        assert_eq!(cgroup_escape("memory-x.service"), "memory-x.service");
    }

    #[test]
    fn a_config_asking_nothing_of_the_host_asks_nothing() {
        let host = FakeHost::default();
        check(
            "[[tenant]]\nname = \"a\"\ncgroup = \"/a\"\nmax = \"1G\"\n",
            &host,
        )
        .unwrap();
        assert!(host.asked.borrow().is_empty());
    }

    #[test]
    fn the_shared_disk_must_be_a_whole_block_device_here() {
        let host = FakeHost::default();
        check(IO, &host).unwrap();
        assert_eq!(*host.asked.borrow(), ["device vdb"]);
        let host = FakeHost {
            no_device: Some("no block device \"vdb\" at /sys/block/vdb".into()),
            ..FakeHost::default()
        };
        let e = check(IO, &host).unwrap_err();
        assert_eq!(
            e.to_string(),
            "h.toml:3:10: io.device = \"vdb\": is not a whole block device on this host: \
             no block device \"vdb\" at /sys/block/vdb"
        );
        let host = FakeHost::default();
        check("[io]\ndevice = \"vdb\"\n", &host).unwrap();
        assert!(
            host.asked.borrow().is_empty(),
            "a disabled [io] is not looked at"
        );
    }

    #[test]
    fn a_launched_vm_s_refusal_points_at_its_field() {
        let host = FakeHost::default();
        check(VM, &host).unwrap();
        assert_eq!(*host.asked.borrow(), ["launch qemu-system-x86_64"]);
        let host = FakeHost {
            launch: Some(|| VmError::MoreThanHost {
                memory: 512,
                host: 256,
            }),
            ..FakeHost::default()
        };
        let e = check(VM, &host).unwrap_err();
        assert_eq!(e.field(), Some("tenant[0].vm.memory"));
        assert!(e.to_string().starts_with("h.toml:5:10: tenant[0].vm.memory = \"512M\": memory 512 MiB is more than the host's 256 MiB"), "{e}");
        let host = FakeHost {
            launch: Some(|| VmError::NoQemu("qemu-system-x86_64".into())),
            ..FakeHost::default()
        };
        let e = check(VM, &host).unwrap_err();
        assert_eq!(e.field(), Some("tenant[0].vm.qemu"));
    }

    #[test]
    fn an_adopted_vm_takes_the_cgroup_its_qemu_runs_in() {
        let host = FakeHost {
            vm_cgroups: vec![("/run/a.qmp".into(), "/machine/a".into())],
            ..FakeHost::default()
        };
        let text = adopted("a", "/run/a.qmp");
        let c = check(&text, &host).unwrap();
        assert_eq!(c.tenants[0].adopted_cgroup(), Some("/machine/a"));
        assert!(!c.tenants[0].launched());
        let e = check(&adopted("a", "/run/b.qmp"), &host).unwrap_err();
        assert_eq!(
            e.to_string(),
            "h.toml:5:7: tenant[0].vm.qmp = \"/run/b.qmp\": /run/b.qmp: connection refused"
        );
    }

    #[test]
    fn an_adopted_vm_s_cgroup_must_not_nest_with_another_tenant_s() {
        let host = FakeHost {
            vm_cgroups: vec![("/run/a.qmp".into(), "/machine/a/vcpu".into())],
            ..FakeHost::default()
        };
        let text = format!(
            "[[tenant]]\nname = \"m\"\ncgroup = \"/machine/a\"\nmax = \"1G\"\n{}",
            adopted("a", "/run/a.qmp")
        );
        let e = check(&text, &host).unwrap_err();
        assert_eq!(e.field(), Some("tenant[1].vm.qmp"));
        assert!(
            e.to_string().contains(
                "is a VM in cgroup \"/machine/a/vcpu\", which lies inside tenant \"m\"'s cgroup"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_container_without_an_engine_takes_the_one_whose_socket_is_there() {
        let text = "[[tenant]]\nname = \"r\"\nmax = \"1G\"\ncontainer = \"redis-a\"\n";
        let podman = FakeHost {
            sockets: vec![PathBuf::from("/run/podman/podman.sock")],
            ..FakeHost::default()
        };
        let c = check(text, &podman).unwrap();
        assert!(matches!(
            c.tenants[0].origin,
            TenantOrigin::Container {
                engine: Some(EngineKind::Podman),
                ..
            }
        ));
        assert_eq!(
            *podman.asked.borrow(),
            [
                "socket /var/run/docker.sock",
                "socket /run/podman/podman.sock"
            ]
        );
        let none = FakeHost::default();
        let e = check(text, &none).unwrap_err().to_string();
        assert!(
            e.starts_with("h.toml:4:13: tenant[0].container = \"redis-a\": has no engine to ask"),
            "{e}"
        );
        // An engine named is waited for: its socket is not asked about here.
        let named = format!("{text}engine = \"docker\"\n");
        let none = FakeHost::default();
        check(&named, &none).unwrap();
        assert!(none.asked.borrow().is_empty());
    }
}
