//! A real cgroup v2 host inside a QEMU guest (this host's memory controller is v1 only): the
//! guest image scripts/guest-image.sh builds, with the `memtide` and `memtide-toucher` under
//! test (and the shared libraries they load) added as a second initramfs archive, a workload
//! script that mounts cgroup2 and prints `memtide-v2:` marker lines on the console, and the
//! parsing of those lines on the host. A test may give its guest an [`Extra`]: a raw disk
//! (/dev/vda), more programs of the build (memtide-attack, a balloon socket client), or QEMU
//! to run a VM inside.

use super::vm::{guest, spawn_in, Guest};
use super::{linux, memtide_path, toucher_path, TestCgroup};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the workload script lies in the guest (in the added archive; the kernel command line
/// holds at most 2047 bytes, too few for the scripts as base64 in memtide.run64).
const SCRIPT: &str = "/usr/local/lib/memtide-v2/workload.sh";

/// The guest's memory and CPUs: room for three tenants of a few hundred MiB, zram and the
/// daemon, on 2 vCPUs under TCG.
const GUEST_MIB: u64 = 1536;
const GUEST_CPUS: u32 = 2;

/// The functions every workload script starts with. It mounts cgroup2 on /sys/fs/cgroup,
/// enables memory and io for the root's children and for /memtide (where the tenants live)
/// and brings up loopback (the daemon's API listens there).
const PRELUDE: &str = r#"# memtide-v2 workload: a cgroup v2 host for memtide (crates/cli/tests/linux/host/v2guest.rs)
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
say() { echo "memtide-v2: $*"; }
CG=/sys/fs/cgroup/memtide
TENANTS=""
ip link set lo up || say "error what=loopback"
mount -t cgroup2 none /sys/fs/cgroup || say "error what=mount-cgroup2"
echo "+memory +io" >/sys/fs/cgroup/cgroup.subtree_control || say "error what=root-subtree"
mkdir -p $CG /run/memtide /etc/memtide
echo "+memory +io" >$CG/cgroup.subtree_control || say "error what=memtide-subtree"
say "hierarchy fstype=$(awk '$2 == "/sys/fs/cgroup" { print $3 }' /proc/mounts) subtree=$(tr ' ' , <$CG/cgroup.subtree_control)"

up() { cut -d' ' -f1 /proc/uptime; }
val() { awk -v k="$2" '$1 == k { print $2 }' "$1"; } # FILE KEY: a flat keyed file's value
# NAME TOUCHER-ARGS...: the cgroup $CG/NAME with memtide-toucher (joined before it starts).
tenant() {
    n=$1
    shift
    mkdir "$CG/$n"
    sh -c 'echo $$ >"$0/cgroup.procs" && exec memtide-toucher "$@"' "$CG/$n" "$@" >/dev/null 2>&1 &
    TENANTS="$TENANTS $n"
}
# NAME BYTES SECONDS: waits until NAME's memory.current reaches BYTES.
filled() {
    wait_until "$3" sh -c "[ \$(cat $CG/$1/memory.current) -ge $2 ]" ||
        say "error what=fill tenant=$1 current=$(cat $CG/$1/memory.current)"
}
# SECONDS COMMAND...: runs COMMAND every 0.2 s until it succeeds; 1 after SECONDS.
wait_until() {
    end=$(($(cut -d. -f1 /proc/uptime) + $1))
    shift
    until "$@"; do
        [ "$(cut -d. -f1 /proc/uptime)" -ge $end ] && return 1
        sleep 0.2
    done
}
# PHASE: every file memtide may change, of every tenant.
files() {
    for n in $TENANTS; do
        d=$CG/$n
        say "files phase=$1 tenant=$n high=$(cat $d/memory.high) max=$(cat $d/memory.max)" \
            "low=$(cat $d/memory.low) min=$(cat $d/memory.min)" \
            "swap.max=$(cat $d/memory.swap.max) oom.group=$(cat $d/memory.oom.group)"
    done
}
# One line per tenant: what it holds, its limit and its OOM kills.
sample() {
    t=$(up)
    for n in $TENANTS; do
        d=$CG/$n
        say "sample t=$t tenant=$n current=$(cat $d/memory.current) high=$(cat $d/memory.high)" \
            "anon=$(val $d/memory.stat anon) swap=$(cat $d/memory.swap.current)" \
            "swap.max=$(cat $d/memory.swap.max) oom_kill=$(val $d/memory.events oom_kill)" \
            "oom_group_kill=$(val $d/memory.events oom_group_kill)" \
            "some_avg10=$(awk '$1 == "some" { sub("avg10=", "", $2); print $2 }' $d/memory.pressure)"
    done
}
sampler() { while :; do sample; sleep 0.5; done; }
# CONFIG LOG: memtide daemon in the background, its pid in DPID.
daemon() {
    memtide daemon --config "$1" >/dev/null 2>>"$2" &
    DPID=$!
}
# SIGNAL NAME: signals the daemon DPID, waits for it and says its exit status.
stop() {
    kill -"$1" $DPID
    wait $DPID
    say "daemon name=$2 signal=$1 status=$?"
}
# NAME LOG: the daemon's log, line by line.
dump() { tail -n 80 "$2" | sed "s/^/memtide-v2: log name=$1 /"; }
# PATTERN LOG SECONDS: waits for a line of LOG matching PATTERN.
logged() { wait_until "$3" grep -q "$1" "$2" || say "error what=no-log pattern=$1"; }
"#;

/// One result line of the guest: `memtide-v2: KIND key=value ...`.
#[derive(Debug, Clone)]
pub struct Line {
    pub kind: String,
    pub fields: BTreeMap<String, String>,
    /// The line as printed, for messages.
    pub text: String,
}

impl Line {
    pub fn get(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {key} in the guest's line {:?}", self.text))
    }

    /// A field as a number; `None` for "max".
    pub fn bytes(&self, key: &str) -> Option<u64> {
        let v = self.get(key);
        if v == "max" {
            return None;
        }
        Some(
            v.parse()
                .unwrap_or_else(|_| panic!("{key}={v} is no number in {:?}", self.text)),
        )
    }

    pub fn number(&self, key: &str) -> u64 {
        self.bytes(key)
            .unwrap_or_else(|| panic!("{key} is max in {:?}", self.text))
    }

    pub fn seconds(&self, key: &str) -> f64 {
        let v = self.get(key);
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v} is no time in {:?}", self.text))
    }
}

/// A finished guest: its console and how long it ran.
pub struct Run {
    pub console: String,
    pub elapsed: Duration,
}

impl Run {
    /// Every `memtide-v2:` line of `kind`.
    pub fn lines(&self, kind: &str) -> Vec<Line> {
        self.console
            .lines()
            .filter_map(|l| parse(l.trim_end_matches('\r')))
            .filter(|l| l.kind == kind)
            .collect()
    }

    /// The samples of tenant `name`, in time order.
    pub fn samples(&self, name: &str) -> Vec<Line> {
        self.lines("sample")
            .into_iter()
            .filter(|l| l.fields.get("tenant").is_some_and(|t| t == name))
            .collect()
    }

    /// The `files` line of `tenant` in `phase`.
    pub fn files(&self, phase: &str, tenant: &str) -> Line {
        self.lines("files")
            .into_iter()
            .find(|l| l.get("phase") == phase && l.get("tenant") == tenant)
            .unwrap_or_else(|| panic!("no files of {tenant} in phase {phase}:\n{}", self.tail(60)))
    }

    /// The daemon `name`'s log lines the guest printed.
    pub fn log(&self, name: &str) -> String {
        self.lines("log")
            .into_iter()
            .filter(|l| l.fields.get("name").is_some_and(|n| n == name))
            .map(|l| l.text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The console's last `n` lines, for a failure message.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.console.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Every file of the tenants as it read in phase `after` equals phase `before`.
    pub fn assert_files_equal(&self, before: &str, after: &str, tenants: &[&str]) {
        for t in tenants {
            let b = self.files(before, t);
            let a = self.files(after, t);
            let strip = |l: &Line| {
                let mut f = l.fields.clone();
                f.remove("phase");
                f
            };
            assert_eq!(
                strip(&b),
                strip(&a),
                "{t}'s files in phase {after} differ from phase {before}:\n{}\n{}\n{}",
                b.text,
                a.text,
                self.tail(80)
            );
        }
    }

    /// No tenant was OOM-killed, alone or as a group (memory.oom.group), in any sample.
    pub fn assert_no_oom_kill(&self, tenants: &[&str]) {
        for t in tenants {
            let samples = self.samples(t);
            assert!(!samples.is_empty(), "no samples of {t}:\n{}", self.tail(80));
            for s in samples {
                assert_eq!(s.number("oom_kill"), 0, "{t} was OOM-killed: {}", s.text);
                assert_eq!(
                    s.number("oom_group_kill"),
                    0,
                    "{t} was OOM-killed as a group: {}",
                    s.text
                );
            }
        }
    }

    /// No `error` line from the workload's own steps.
    pub fn assert_no_errors(&self) {
        let errors = self.lines("error");
        assert!(
            errors.is_empty(),
            "the guest's workload reported {:?}:\n{}",
            errors.iter().map(|l| &l.text).collect::<Vec<_>>(),
            self.tail(80)
        );
    }
}

/// `memtide-v2: KIND key=value ...` as a line (a value runs to the next space).
fn parse(line: &str) -> Option<Line> {
    let at = line.find("memtide-v2: ")?;
    let text = &line[at..];
    let mut words = text["memtide-v2: ".len()..].split_whitespace();
    let kind = words.next()?.to_string();
    let fields = words
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some(Line {
        kind,
        fields,
        text: text.to_string(),
    })
}

/// Boots the guest with `body` (shell run after [`PRELUDE`]) as its workload and waits for it
/// to power off, at most `timeout`; `None` after skipping when root, QEMU or the image is
/// missing (a failure under `MEMTIDE_REQUIRE_LINUX=1`). Panics with the console's tail when
/// the guest does not finish in time or its workload fails.
pub fn run(test: &str, body: &str, timeout: Duration) -> Option<Run> {
    run_with(test, body, timeout, &Extra::default())
}

/// [`run`] with `extra` in the guest besides memtide and the toucher.
pub fn run_with(test: &str, body: &str, timeout: Duration, extra: &Extra) -> Option<Run> {
    let linux = linux(test)?;
    let image = guest(test)?;
    let cgroup = linux.cgroup("v2guest");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let initrd = initrd(
        &image,
        dir.path(),
        &format!("{PRELUDE}\n{body}\nsay done\n"),
        extra,
    );
    let disk = extra.disk_mib.map(|mib| {
        let path = dir.path().join("disk.raw");
        let file = std::fs::File::create(&path).expect("create the guest's disk");
        file.set_len(mib << 20).expect("size the guest's disk");
        path
    });
    let console = dir.path().join("console.log");
    let spec = memtide_qemu::vm::LaunchSpec {
        qemu: "qemu-system-x86_64".to_string(),
        kernel: Some(image.kernel.clone()),
        initrd: Some(initrd),
        disk,
        memory: memtide_model::Bytes(GUEST_MIB << 20),
        cpus: GUEST_CPUS,
        // memtide.zram: 1 GiB of compressed swap. Most tests' touchers write zero pages, which
        // zram keeps for nothing; those that need swap-ins to cost something write unique ones.
        append: Some(format!(
            "console=ttyS0 quiet memtide.zram=1G memtide.then=poweroff memtide.run=\"sh {SCRIPT}\""
        )),
        args: vec!["-no-reboot".to_string()],
        kvm: false,
    };
    let argv = spec.argv(&dir.path().join("qmp.sock"), &console);
    let start = Instant::now();
    let mut vm = Qemu {
        child: Some(spawn_in(&argv, &cgroup)),
        _cgroup: cgroup,
    };
    let read =
        || String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).into_owned();
    loop {
        if let Some(status) = vm.exited() {
            let run = Run {
                console: read(),
                elapsed: start.elapsed(),
            };
            println!(
                "{test}: the guest ran {:.1} s (QEMU {status})",
                run.elapsed.as_secs_f64()
            );
            assert!(
                run.console.contains("memtide-v2: done"),
                "the guest's workload did not finish:\n{}",
                run.tail(80)
            );
            assert!(
                run.console.contains("memtide-guest: workload exited 0"),
                "the guest's workload failed:\n{}",
                run.tail(80)
            );
            return Some(run);
        }
        if start.elapsed() > timeout {
            vm.kill();
            let console = read();
            let lines: Vec<&str> = console.lines().collect();
            panic!(
                "{test}: the guest did not power off within {timeout:?}; console tail:\n{}",
                lines[lines.len().saturating_sub(80)..].join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A QEMU in a test cgroup; killed (and its cgroup removed) on drop.
struct Qemu {
    child: Option<Child>,
    _cgroup: TestCgroup,
}

impl Qemu {
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().expect("wait for QEMU")?;
        self.child = None;
        Some(status)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where [`Extra::qemu`] puts the guest image (kernel and initramfs) inside the guest.
pub const IMAGE_IN_GUEST: &str = "/usr/local/share/memtide-v2";

/// What one test adds to its guest beyond memtide, the toucher and their libraries, each as
/// (the file on this host, its absolute path in the guest). Only the test that asks pays for
/// it: every other guest's archive stays as small as it was.
#[derive(Debug, Default)]
pub struct Extra {
    /// Programs and loadable modules: debug info stripped, mode 0755, and the shared
    /// libraries `ldd` names for them added.
    pub programs: Vec<(PathBuf, PathBuf)>,
    /// Data files, copied as they are, mode 0644.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// A raw disk of this many MiB (a sparse file in the run's temporary directory, removed
    /// with it), the guest's /dev/vda once the workload loads virtio_blk.
    pub disk_mib: Option<u64>,
}

impl Extra {
    /// `program` (a binary of the build) in the guest's /usr/local/bin.
    pub fn program(mut self, program: PathBuf) -> Extra {
        let name = program.file_name().expect("a program's file name");
        let at = Path::new("/usr/local/bin").join(name);
        self.programs.push((program, at));
        self
    }

    /// QEMU inside the guest, to run a VM there: this host's qemu-system-x86_64 at its own
    /// path (it finds its firmware and modules relative to itself), its TCG accelerator
    /// module when it has modules (Debian's has), the firmware a q35 machine loads before its
    /// first instruction (SeaBIOS, the option ROM that boots `-kernel`, the vAPIC ROM) and
    /// `image`'s kernel and initramfs as vmlinuz and initramfs.cpio.gz in [`IMAGE_IN_GUEST`].
    /// About 65 MB unpacked (31 MB in the archive). Panics when QEMU lacks a firmware file
    /// (`guest` already skipped a host without QEMU).
    pub fn qemu(image: &Guest) -> Extra {
        let qemu = super::redis::find_program("qemu-system-x86_64")
            .and_then(|p| p.canonicalize().ok())
            .expect("qemu-system-x86_64 (guest() checked it is installed)");
        let mut extra = Extra::default();
        let bin = qemu.parent().expect("a directory above QEMU");
        // Where QEMU looks for its modules, <bindir>/../lib/<multiarch>/qemu: Debian's loads
        // even TCG from there.
        if let Ok(dirs) = std::fs::read_dir(bin.join("../lib")) {
            for d in dirs.flatten() {
                let module = d.path().join("qemu/accel-tcg-x86_64.so");
                if let Ok(m) = module.canonicalize() {
                    extra.programs.push((m.clone(), m));
                }
            }
        }
        extra.programs.push((qemu.clone(), qemu.clone()));
        let help = Command::new(&qemu)
            .args(["-L", "help"])
            .output()
            .expect("run qemu-system-x86_64 -L help");
        let dirs: Vec<PathBuf> = String::from_utf8_lossy(&help.stdout)
            .lines()
            .filter_map(|l| Path::new(l.trim()).canonicalize().ok())
            .collect();
        for name in ["bios-256k.bin", "linuxboot_dma.bin", "kvmvapic.bin"] {
            let found = dirs
                .iter()
                .map(|d| d.join(name))
                .find(|p| p.is_file())
                .unwrap_or_else(|| panic!("QEMU has no {name} in {dirs:?} (its -L help)"));
            extra.files.push((found.clone(), found));
        }
        let share = Path::new(IMAGE_IN_GUEST);
        extra
            .files
            .push((image.kernel.clone(), share.join("vmlinuz")));
        extra
            .files
            .push((image.initrd.clone(), share.join("initramfs.cpio.gz")));
        extra
    }
}

/// The image's initramfs followed by a gzip'd newc archive of the binaries under test, the
/// shared libraries they load (at the paths ldd names; the guest's userland is a static
/// busybox), `extra` and `script`, in `dir`. The kernel unpacks concatenated archives in
/// order.
fn initrd(image: &Guest, dir: &Path, script: &str, extra: &Extra) -> PathBuf {
    let root = dir.join("overlay");
    let memtide = memtide_path();
    let toucher = toucher_path();
    let inside = |p: &Path| {
        p.strip_prefix("/")
            .expect("an absolute path in the guest")
            .to_path_buf()
    };
    let mut programs: Vec<(PathBuf, PathBuf)> = vec![
        (memtide.clone(), PathBuf::from("usr/local/bin/memtide")),
        (
            toucher.clone(),
            PathBuf::from("usr/local/bin/memtide-toucher"),
        ),
    ];
    programs.extend(
        extra
            .programs
            .iter()
            .map(|(from, at)| (from.clone(), inside(at))),
    );
    let mut binaries: Vec<&Path> = vec![&memtide, &toucher];
    binaries.extend(extra.programs.iter().map(|(from, _)| from.as_path()));
    for lib in libraries(&binaries) {
        let at = inside(&lib);
        programs.push((lib, at));
    }
    let copy = |from: &Path, at: &Path| {
        let to = root.join(at);
        make_dirs(&root, to.parent().unwrap());
        // The file itself, not a link: the library paths may be links on this host.
        std::fs::copy(from, &to)
            .unwrap_or_else(|e| panic!("copy {} into the guest's archive: {e}", from.display()));
        to
    };
    let mode = |to: &Path, mode: u32| {
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for (from, at) in &programs {
        let to = copy(from, at);
        // Debug info is most of a release binary here (memtide: 56 MB, 9 without); the guest
        // would unpack it into its RAM under TCG for nothing. The code is unchanged.
        let stripped = Command::new("strip")
            .arg("--strip-debug")
            .arg(&to)
            .status()
            .expect("run strip (binutils)");
        assert!(stripped.success(), "strip --strip-debug {}", to.display());
        mode(&to, 0o755);
    }
    for (from, at) in &extra.files {
        mode(&copy(from, &inside(at)), 0o644);
    }
    let at = root.join(SCRIPT.trim_start_matches('/'));
    make_dirs(&root, at.parent().unwrap());
    std::fs::write(&at, script).unwrap();
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o644)).unwrap();

    // `find` without "." itself: an entry for "." would give the guest's / this temporary
    // directory's mode (0700).
    let list = Command::new("find")
        .args([".", "-mindepth", "1"])
        .current_dir(&root)
        .output()
        .expect("run find");
    assert!(list.status.success(), "find in {}", root.display());
    let archive = dir.join("overlay.cpio.gz");
    let mut cpio = Command::new("sh")
        .arg("-c")
        .arg("cpio --quiet -o -H newc -R 0:0 | gzip -1 >\"$0\"")
        .arg(&archive)
        .current_dir(&root)
        .stdin(Stdio::piped())
        .spawn()
        .expect("run cpio and gzip");
    cpio.stdin.take().unwrap().write_all(&list.stdout).unwrap();
    assert!(cpio.wait().unwrap().success(), "cpio | gzip failed");

    let out = dir.join("initrd.cpio.gz");
    let mut both = std::fs::read(&image.initrd)
        .unwrap_or_else(|e| panic!("read {}: {e}", image.initrd.display()));
    both.extend(std::fs::read(&archive).unwrap());
    std::fs::write(&out, both).unwrap();
    let _ = std::fs::remove_dir_all(&root);
    out
}

/// Creates `dir` and its parents below `root`, each 0755 (as in the image).
fn make_dirs(root: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut d = dir;
    while d != root {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d = d.parent().unwrap();
    }
}

/// The shared libraries (and the loader) `ldd` lists for `binaries`, resolved to files.
fn libraries(binaries: &[&Path]) -> Vec<PathBuf> {
    let mut libs = Vec::new();
    for b in binaries {
        let out = Command::new("ldd").arg(b).output().expect("run ldd");
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            if let Some(p) = path.filter(|p| p.starts_with('/')) {
                let p = PathBuf::from(p);
                if !libs.contains(&p) {
                    libs.push(p);
                }
            }
        }
    }
    libs
}
