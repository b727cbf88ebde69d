//! A libvirt of the test's own for the libvirt tests: virtlogd and libvirtd started by the test (no systemd, no socket activation), libvirtd inside a cgroup namespace rooted at a test cgroup with the memory hierarchy mounted afresh in a mount namespace of its own, so that the domains it starts get their memory cgroups beneath that test cgroup (`<cgroup>/machine/qemu-<ID>-<NAME>.libvirt-qemu`) rather than in `/machine` at the hierarchy's root; test domains booting the guest image (TCG, direct kernel boot from copies in a private directory); and on drop the domains destroyed and undefined, the daemons stopped, and the files, directories and cgroups they made removed.
//!
//! libvirt's system instance has fixed homes (/etc/libvirt, /run/libvirt, /var/lib/libvirt,
//! /var/log/libvirt) and there is one per machine: the fixture refuses to start while a libvirtd
//! or virtlogd runs, rather than use or disturb it.

use super::engines::{cgroup_dirs, cgroup_mounts, kill_named, memory_cgroup_of, program, tail};
use super::redis::find_program;
use super::vm::{guest, guest_trouble, wait_ready, Guest};
use super::{remove_tree, skip_or_fail, Linux, TestCgroup};
use std::cell::RefCell;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The URI every virsh command of the fixture names.
pub const URI: &str = "qemu:///system";
/// libvirtd's socket: one answering means a libvirtd runs.
pub const SOCKET: &str = "/run/libvirt/libvirt-sock";
/// The daemons' default pid files (each also the daemon's lock against a second instance).
const LIBVIRTD_PID: &str = "/run/libvirtd.pid";
const VIRTLOGD_PID: &str = "/run/virtlogd.pid";
/// The QEMU driver's configuration (libvirtd sees a copy with the fixture's additions).
const SYSTEM_QEMU_CONF: &str = "/etc/libvirt/qemu.conf";
/// How long a daemon has to daemonize and libvirtd to answer `virsh list` after it starts.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long a daemon has to exit after SIGTERM before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// Fixtures started by this process, for unique directory and cgroup names.
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// A libvirtd and virtlogd of the test's own. Dropping it removes its domains and everything
/// it made.
pub struct Libvirt {
    test: String,
    /// The private directory: the daemons' logs and, per domain, its XML, console and copies
    /// of the guest's kernel and initramfs.
    dir: PathBuf,
    guest: Guest,
    virsh: PathBuf,
    libvirtd: PathBuf,
    virtlogd: PathBuf,
    /// The memory hierarchy's mount point, mounted afresh in libvirtd's mount namespace.
    memory_mount: PathBuf,
    libvirtd_pid: Option<u32>,
    virtlogd_pid: Option<u32>,
    /// The domains [`Libvirt::define`] defined: destroyed and undefined on drop.
    domains: RefCell<Vec<String>>,
    /// `<hierarchy>/machine` directories that did not exist before the fixture started (libvirt
    /// makes `/machine` at the root of every hierarchy but memory and leaves it): removed on
    /// drop, and only those.
    made_dirs: Vec<PathBuf>,
    /// The daemons' cgroup and, as libvirtd's cgroup namespace root, the domains' memory
    /// cgroups' grandparent (removed on drop, last).
    cg: TestCgroup,
}

impl Libvirt {
    /// Starts virtlogd and libvirtd for `test` and waits until libvirtd answers. `None` after
    /// [`skip_or_fail`] when libvirt's programs or the guest image are missing, or a libvirtd or
    /// virtlogd already runs. Panics with the daemon's log when a daemon does not start.
    pub fn start(linux: &Linux, test: &str) -> Option<Libvirt> {
        let programs = ["libvirtd", "virtlogd", "virsh"];
        let missing: Vec<&str> = programs
            .into_iter()
            .filter(|p| program(p).is_none())
            .collect();
        if !missing.is_empty() {
            skip_or_fail(
                test,
                &format!(
                    "needs libvirt (missing {}; Debian: apt-get install libvirt-daemon-system \
                     libvirt-clients)",
                    missing.join(", ")
                ),
            );
            return None;
        }
        let guest = guest(test)?;
        if let Some(why) = libvirt_running() {
            skip_or_fail(
                test,
                &format!(
                    "{why}: the test starts a libvirtd and virtlogd of its own and neither uses \
                     nor stops another (stop it first)"
                ),
            );
            return None;
        }
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let name = format!("libvirt-{n}");
        let dir = PathBuf::from(format!("/tmp/memtide-{}-{name}", std::process::id()));
        if dir.exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        make_dir(&dir);
        let made_dirs = cgroup_mounts()
            .into_iter()
            .map(|m| m.join("machine"))
            .filter(|d| !d.exists())
            .collect();
        let cg = linux.cgroup(&name);
        let mut lv = Libvirt {
            test: test.to_string(),
            dir,
            guest,
            virsh: program("virsh").expect("checked above"),
            libvirtd: program("libvirtd").expect("checked above"),
            virtlogd: program("virtlogd").expect("checked above"),
            memory_mount: linux.hierarchy.mount.clone(),
            libvirtd_pid: None,
            virtlogd_pid: None,
            domains: RefCell::new(Vec::new()),
            made_dirs,
            cg,
        };
        let start = Instant::now();
        lv.start_virtlogd();
        lv.start_libvirtd();
        println!(
            "{test}: virtlogd and libvirtd answered in {:.2} s",
            start.elapsed().as_secs_f64()
        );
        Some(lv)
    }

    /// The URI to give virsh (or memtide): `qemu:///system`.
    pub fn uri(&self) -> &str {
        URI
    }

    /// The cgroup under which the domains' memory cgroups appear, as /proc/<pid>/cgroup names
    /// it in the memory hierarchy: `<the fixture's cgroup>/machine`.
    pub fn parent(&self) -> String {
        format!("{}/machine", self.cg.path)
    }

    /// The daemons' own memory cgroup (libvirtd's cgroup namespace root).
    pub fn cgroup(&self) -> &str {
        &self.cg.path
    }

    /// The private directory (every domain's QEMU names it on its command line).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pids of libvirtd and virtlogd.
    pub fn daemon_pids(&self) -> (u32, u32) {
        (
            self.libvirtd_pid.expect("libvirtd runs"),
            self.virtlogd_pid.expect("virtlogd runs"),
        )
    }

    /// libvirtd's log (warnings and errors) and what it printed before it daemonized.
    pub fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!("{}{}", read("libvirtd.out"), read("libvirtd.log"))
    }

    /// `virsh -c qemu:///system ARGS`.
    pub fn virsh(&self, args: &[&str]) -> Output {
        run_virsh(&self.virsh, args)
    }

    /// `virsh -c qemu:///system ARGS`'s trimmed stdout; panics with its stderr when it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        virsh_ok(&self.test, &self.virsh, args)
    }

    /// Whether libvirtd answers `virsh list`.
    pub fn answers(&self) -> bool {
        self.virsh(&["list", "--name"]).status.success()
    }

    /// Defines (does not start) domain `name` with `memory_mib` MiB and one vCPU, booting the
    /// guest image under TCG with `workload` as its `memtide.run`, a virtio balloon polled
    /// every second when `balloon` (else `<memballoon model='none'/>`), its serial console
    /// written to a file in the private directory, and rebooting in place. `name` takes
    /// letters, digits and single hyphens only, so libvirt's machine name (and the memory
    /// cgroup's) is `qemu-<ID>-<name>` unchanged.
    pub fn define(&self, name: &str, memory_mib: u64, workload: &str, balloon: bool) -> Domain {
        self.define_with(name, memory_mib, workload, "", balloon)
    }

    /// [`Libvirt::define`] with `extra` on the guest's kernel command line (`memtide.zram=256M`).
    pub fn define_with(
        &self,
        name: &str,
        memory_mib: u64,
        workload: &str,
        extra: &str,
        balloon: bool,
    ) -> Domain {
        assert!(
            !name.is_empty()
                && name.len() <= 40
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !name.contains("--")
                && !name.starts_with('-')
                && !name.ends_with('-'),
            "{}: domain name {name:?}: letters, digits and single hyphens only, 40 at most",
            self.test
        );
        let ddir = self.dir.join(name);
        make_dir(&ddir);
        // Copies: libvirt's DAC driver chowns what the domain opens (and remembers the owner in
        // xattrs), which must not happen to the shared image.
        let kernel = ddir.join("vmlinuz");
        let initrd = ddir.join("initramfs.cpio.gz");
        for (from, to) in [(&self.guest.kernel, &kernel), (&self.guest.initrd, &initrd)] {
            std::fs::copy(from, to)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
        }
        let console = ddir.join("console");
        let qemu = find_program("qemu-system-x86_64").expect("guest() checked QEMU");
        let memballoon = if balloon {
            "<memballoon model='virtio' autodeflate='on' freePageReporting='on'><stats period='1'/></memballoon>"
        } else {
            "<memballoon model='none'/>"
        };
        let xml = format!(
            r#"<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{memory_mib}</memory>
  <currentMemory unit='MiB'>{memory_mib}</currentMemory>
  <vcpu>1</vcpu>
  <features><tcg><tb-cache unit='MiB'>64</tb-cache></tcg></features>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{}</kernel>
    <initrd>{}</initrd>
    <cmdline>{}</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{}</emulator>
    <serial type='file'><source path='{}'/><target port='0'/></serial>
    <console type='file'><source path='{}'/><target type='serial' port='0'/></console>
    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
    {memballoon}
  </devices>
</domain>
"#,
            xml_text(&kernel.display().to_string()),
            xml_text(&initrd.display().to_string()),
            xml_text(&self.guest.append(workload, extra)),
            xml_text(&qemu.display().to_string()),
            xml_text(&console.display().to_string()),
            xml_text(&console.display().to_string()),
        );
        let file = ddir.join("domain.xml");
        std::fs::write(&file, xml).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
        self.ok(&["define", &file.display().to_string()]);
        self.domains.borrow_mut().push(name.to_string());
        Domain {
            name: name.to_string(),
            test: self.test.clone(),
            virsh: self.virsh.clone(),
            console,
        }
    }

    /// Stops libvirtd and starts it again with the same recipe, waiting until it answers. The
    /// domains run on (QEMU is not libvirtd's child) and libvirtd reconnects to them.
    pub fn restart_daemon(&mut self) {
        let start = Instant::now();
        if let Some(pid) = self.libvirtd_pid.take() {
            stop(&self.test, pid, "libvirtd");
        }
        self.start_libvirtd();
        println!(
            "{}: libvirtd restarted in {:.2} s",
            self.test,
            start.elapsed().as_secs_f64()
        );
    }

    fn start_virtlogd(&mut self) {
        let mut c = Command::new(&self.virtlogd);
        c.arg("-d");
        self.virtlogd_pid = Some(self.daemonize(c, "virtlogd", VIRTLOGD_PID));
    }

    /// libvirtd in a cgroup namespace rooted at the fixture's cgroup (the process joins it
    /// before unshare), with the memory hierarchy unmounted and mounted again in a private
    /// mount namespace so that it shows that root: libvirt's partition `/machine` is then
    /// `<cgroup>/machine` in the memory hierarchy. (Its partitions are absolute from the
    /// hierarchy's root whatever cgroup libvirtd sits in, and it appends `.partition` to every
    /// component of any other partition, so none can name a cgroup of ours.)
    ///
    /// In the same mount namespace /dev/kvm is hidden under an empty file and qemu.conf is the
    /// system's plus `namespaces = [ ]`. Where /dev/kvm is root's only (as on the CI machine)
    /// QEMU's capability probe reports KVM while libvirt finds it unusable for libvirt-qemu, so
    /// libvirt throws its capability cache away and probes QEMU again (about 4 s) at every
    /// lookup, which made two `virsh define`s take two minutes; without /dev/kvm both agree
    /// (the domains are TCG anyway). The domains' own mount namespaces would try to move the
    /// file mounted on /dev/kvm into their /dev and fail to start.
    fn start_libvirtd(&mut self) {
        let (fstype, options) = mount_of(&self.memory_mount);
        let mut mount = format!("mount -t {fstype}");
        if !options.is_empty() {
            mount.push_str(&format!(" -o {options}"));
        }
        let qemu_conf = self.dir.join("qemu.conf");
        let no_kvm = self.dir.join("no-kvm");
        if !qemu_conf.exists() {
            let system = std::fs::read_to_string(SYSTEM_QEMU_CONF)
                .unwrap_or_else(|e| panic!("{}: read {SYSTEM_QEMU_CONF}: {e}", self.test));
            std::fs::write(
                &qemu_conf,
                format!("{system}\n# memtide's libvirt test fixture\nnamespaces = [ ]\n"),
            )
            .expect("write qemu.conf");
            std::fs::write(&no_kvm, "").expect("write the file hiding /dev/kvm");
        }
        let script = format!(
            "umount \"$0\" && {mount} cgroup \"$0\" && mount --bind \"$1\" {SYSTEM_QEMU_CONF} && \
             {{ [ ! -e /dev/kvm ] || mount --bind \"$2\" /dev/kvm; }} && exec \"$3\" -d"
        );
        let mut c = Command::new(program("unshare").expect("unshare (util-linux) is installed"));
        c.args(["--cgroup", "--mount", "--propagation", "private"])
            .args(["sh", "-c", &script])
            .arg(&self.memory_mount)
            .arg(&qemu_conf)
            .arg(&no_kvm)
            .arg(&self.libvirtd);
        let pid = self.daemonize(c, "libvirtd", LIBVIRTD_PID);
        self.libvirtd_pid = Some(pid);
        let start = Instant::now();
        while !self.answers() {
            if !alive(pid) || start.elapsed() > READY_WITHIN {
                let why = if alive(pid) {
                    format!("did not answer virsh list within {READY_WITHIN:?}")
                } else {
                    "exited".to_string()
                };
                panic!(
                    "{}: libvirtd (pid {pid}) {why}; its log ends:\n{}",
                    self.test,
                    tail(&self.log(), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `c` (a daemon started with `-d`) inside the fixture's cgroup, its log in the
    /// private directory, waits until it has daemonized and returns the daemon's pid from
    /// `pid_file`.
    fn daemonize(&self, mut c: Command, what: &str, pid_file: &str) -> u32 {
        use std::os::unix::process::CommandExt;
        let out = self.dir.join(format!("{what}.out"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .unwrap_or_else(|e| panic!("open {}: {e}", out.display()));
        let err = log.try_clone().expect("clone the log file");
        let procs = self.cg.dir().join("cgroup.procs");
        c.env(
            "LIBVIRT_LOG_OUTPUTS",
            format!("3:file:{}", self.dir.join(format!("{what}.log")).display()),
        )
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err);
        // SAFETY: the closure only writes to a file between fork and exec.
        unsafe {
            c.pre_exec(move || std::fs::write(&procs, b"0\n"));
        }
        let mut child = c
            .spawn()
            .unwrap_or_else(|e| panic!("{}: start {what}: {e}", self.test));
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the daemon's parent") {
                break status;
            }
            if start.elapsed() > READY_WITHIN {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{}: {what} -d did not daemonize within {READY_WITHIN:?}; its log ends:\n{}",
                    self.test,
                    tail(&self.daemon_log(what), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .filter(|&pid| alive(pid) && comm(pid).as_deref() == Some(what));
        match (status.success(), pid) {
            (true, Some(pid)) => pid,
            _ => panic!(
                "{}: {what} -d exited {status} (pid file {pid_file}: {pid:?}); its log ends:\n{}",
                self.test,
                tail(&self.daemon_log(what), 40)
            ),
        }
    }

    fn daemon_log(&self, what: &str) -> String {
        let read = |f: String| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!(
            "{}{}",
            read(format!("{what}.out")),
            read(format!("{what}.log"))
        )
    }
}

impl Drop for Libvirt {
    fn drop(&mut self) {
        let names = self.domains.take();
        if self.libvirtd_pid.is_some() {
            for name in &names {
                // Fails harmlessly when the domain is not running.
                let _ = self.virsh(&["destroy", name]);
                let out = self.virsh(&["undefine", name]);
                if !out.status.success() {
                    eprintln!(
                        "{}: virsh undefine {name}: {}",
                        self.test,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
            }
        }
        if let Some(pid) = self.libvirtd_pid.take() {
            stop(&self.test, pid, "libvirtd");
        }
        if let Some(pid) = self.virtlogd_pid.take() {
            stop(&self.test, pid, "virtlogd");
        }
        // Whatever QEMU is left (each names its kernel copy in the private directory).
        kill_named(&self.dir);
        for name in &names {
            // What undefine removes, should it have failed; and QEMU's log, which it leaves.
            for f in [
                format!("/etc/libvirt/qemu/{name}.xml"),
                format!("/etc/libvirt/qemu/autostart/{name}.xml"),
                format!("/run/libvirt/qemu/{name}.xml"),
                format!("/run/libvirt/qemu/{name}.pid"),
                format!("/var/log/libvirt/qemu/{name}.log"),
            ] {
                let _ = std::fs::remove_file(f);
            }
        }
        // The domains' cgroups outside the memory hierarchy, then the `/machine` directories
        // libvirt made there.
        for m in cgroup_mounts() {
            let machine = m.join("machine");
            if self.made_dirs.contains(&machine) {
                remove_tree(&machine);
                continue;
            }
            for entry in std::fs::read_dir(&machine).into_iter().flatten().flatten() {
                let file = entry.file_name();
                let file = file.to_string_lossy();
                if names.iter().any(|n| is_domain_cgroup(&file, n)) {
                    remove_tree(&entry.path());
                }
            }
        }
        for dir in cgroup_dirs(&self.cg.path) {
            remove_tree(&dir);
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("{}: remove {}: {e}", self.test, self.dir.display());
        }
    }
}

/// A domain [`Libvirt::define`] defined (a handle: the fixture destroys and undefines it).
pub struct Domain {
    pub name: String,
    test: String,
    virsh: PathBuf,
    console: PathBuf,
}

impl Domain {
    /// `virsh start`; panics with virsh's error and QEMU's log when it fails. Returns how long
    /// virsh took.
    pub fn start(&self) -> Duration {
        let start = Instant::now();
        let out = run_virsh(&self.virsh, &["start", &self.name]);
        if !out.status.success() {
            let log = std::fs::read_to_string(format!("/var/log/libvirt/qemu/{}.log", self.name))
                .unwrap_or_default();
            panic!(
                "{}: virsh start {} failed: {}\nQEMU's log ends:\n{}",
                self.test,
                self.name,
                String::from_utf8_lossy(&out.stderr).trim(),
                tail(&log, 20)
            );
        }
        start.elapsed()
    }

    /// The guest's serial console so far.
    pub fn console(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.console).unwrap_or_default()).into_owned()
    }

    /// Waits for `memtide-guest: ready` on the console (panics with it after `timeout`, or when
    /// it shows the guest's OOM killer at work or the workload ended); returns how long it took.
    pub fn wait_ready(&self, timeout: Duration) -> Duration {
        let console = self.console.clone();
        let took = wait_ready(
            move || {
                String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).into_owned()
            },
            timeout,
        );
        if let Some(line) = guest_trouble(&self.console()) {
            panic!(
                "{}: domain {}: {line}; console:\n{}",
                self.test,
                self.name,
                self.console()
            );
        }
        took
    }

    /// The domain's QEMU pid, from /run/libvirt/qemu/NAME.pid.
    pub fn pid(&self) -> u32 {
        let file = format!("/run/libvirt/qemu/{}.pid", self.name);
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: read {file}: {e}", self.test));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{}: {file}: {text:?}: {e}", self.test))
    }

    /// The domain's memory cgroup: the memory line of /proc/<QEMU's pid>/cgroup.
    pub fn cgroup(&self) -> String {
        let pid = self.pid();
        memory_cgroup_of(pid).unwrap_or_else(|e| panic!("{}: domain {}: {e}", self.test, self.name))
    }

    /// The domain's ID (`virsh domid`: `-` when shut off).
    pub fn id(&self) -> String {
        virsh_ok(&self.test, &self.virsh, &["domid", &self.name])
    }

    /// `virsh domstate` (`running`, `shut off`, ...).
    pub fn state(&self) -> String {
        virsh_ok(&self.test, &self.virsh, &["domstate", &self.name])
    }

    /// `virsh destroy`: QEMU killed at once.
    pub fn destroy(&self) {
        virsh_ok(&self.test, &self.virsh, &["destroy", &self.name]);
    }
}

/// `virsh -c qemu:///system ARGS`.
fn run_virsh(virsh: &Path, args: &[&str]) -> Output {
    Command::new(virsh)
        .args(["-c", URI])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {} {args:?}: {e}", virsh.display()))
}

fn virsh_ok(test: &str, virsh: &Path, args: &[&str]) -> String {
    let out = run_virsh(virsh, args);
    assert!(
        out.status.success(),
        "{test}: virsh {args:?} exited {}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Why libvirt counts as running already: a libvirtd answering on its socket, or a libvirtd or
/// virtlogd process.
pub fn libvirt_running() -> Option<String> {
    if UnixStream::connect(SOCKET).is_ok() {
        return Some(format!("a libvirtd answers on {SOCKET}"));
    }
    let running: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let name = comm(pid)?;
            (matches!(name.as_str(), "libvirtd" | "virtlogd") && alive(pid))
                .then(|| format!("{name} (pid {pid})"))
        })
        .collect();
    (!running.is_empty()).then(|| format!("{} already runs", running.join(" and ")))
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name's closing parenthesis.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// Process `pid`'s command name.
fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim().to_string())
}

/// SIGTERM to daemon `pid` (when it is still `what`), SIGKILL when it has not exited within
/// [`STOP_WITHIN`]. It is not our child (it daemonized): waits until it is gone or a zombie.
fn stop(test: &str, pid: u32, what: &str) {
    if !alive(pid) || comm(pid).as_deref() != Some(what) {
        return;
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > STOP_WITHIN {
            eprintln!("{test}: {what} (pid {pid}) ignored SIGTERM for {STOP_WITHIN:?}: killing it");
            // SAFETY: as above.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
            let killed = Instant::now();
            while alive(pid) && killed.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(50));
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether cgroup directory name `file` is domain `name`'s: `qemu-<ID>-<name>.libvirt-qemu`.
pub fn is_domain_cgroup(file: &str, name: &str) -> bool {
    file.strip_prefix("qemu-")
        .and_then(|rest| rest.strip_suffix(".libvirt-qemu"))
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(id, n)| {
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && n == name
        })
}

/// The file system type and the options (less rw/ro) of the mount at `point`, from
/// /proc/self/mountinfo: `cgroup` and `memory` for a v1 memory hierarchy.
fn mount_of(point: &Path) -> (String, String) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    let point = point.display().to_string();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (left.split(' ').nth(4)? == point).then_some(right)
        })
        .next_back()
        .map(|right| {
            let f: Vec<&str> = right.split(' ').collect();
            let options: Vec<&str> = f
                .get(2)
                .unwrap_or(&"")
                .split(',')
                .filter(|o| !matches!(*o, "rw" | "ro" | ""))
                .collect();
            (f[0].to_string(), options.join(","))
        })
        .unwrap_or_else(|| panic!("no mount at {point} in /proc/self/mountinfo"))
}

/// Makes `dir` world-readable (QEMU runs as libvirt-qemu and opens the files in it).
fn make_dir(dir: &Path) {
    std::fs::create_dir(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
}

/// `text` escaped for XML character data and attribute values.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}
