//! memtide as systemd runs it (issue 29): the Debian package (scripts/deb.sh, built from the binaries under test) installed in a Debian 12 guest with systemd on a real cgroup v2 hierarchy (scripts/debian-guest.sh, booted under TCG), memtide.service adopting two Redis services (one by its cgroup path, one by its unit name), reloaded and stopped with systemctl.
//!
//! The guest runs a script from a second virtio disk (the cloud kernel has no 9p, and a disk
//! made with `mkfs.ext4 -d` needs neither a loop mount nor a change to the cached root image,
//! which QEMU opens in snapshot mode); the script prints one `memtide-systemd: WHAT key=value…`
//! line per reading on the serial console and powers the guest off. Every figure the test
//! asserts is read in the guest from the kernel's cgroup files, systemd and the journal.

use crate::host::redis::find_program;
use crate::host::skip_or_fail;
use memtide_testkit::samples::build_binaries;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest the guest may take from QEMU's start to its power-off (under TCG on a machine
/// shared with other tests; a run takes 55 to 90 s).
const DEADLINE: Duration = Duration::from_secs(360);
/// Each Redis holds this many values of `VALUE_BYTES` (each one in jemalloc's 64 KiB size
/// class): 160 MiB, 320 MiB for both under a budget of `BUDGET_MIB`. Large values, so that
/// the busy one's GETs, few a second under TCG, still touch most of its data within a sampling
/// period and the sampling estimator sees it as active.
const KEYS: u64 = 2560;
const VALUE_BYTES: u64 = 65472;
const BUDGET_MIB: u64 = 240;
/// The idle service has given memory when its memory.current fell by this much.
const GIVEN_MIB: u64 = 48;
const MIB: u64 = 1 << 20;

/// The Debian guest's files.
struct Debian {
    kernel: PathBuf,
    initrd: PathBuf,
    rootfs: PathBuf,
}

/// The Debian guest, QEMU and mkfs.ext4, or `None` after skipping (failing under
/// `MEMTIDE_REQUIRE_LINUX=1`). Root is not needed: the package is built with
/// `dpkg-deb --root-owner-group` and QEMU only reads the image.
fn debian(test: &str) -> Option<Debian> {
    if find_program("qemu-system-x86_64").is_none() {
        skip_or_fail(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
        return None;
    }
    if mkfs().is_none() {
        skip_or_fail(test, "mkfs.ext4 is not installed (Debian: e2fsprogs)");
        return None;
    }
    let tiny = std::env::var_os("MEMTIDE_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/memtide/guest"));
    let dir = tiny.join("debian");
    let d = Debian {
        kernel: dir.join("vmlinuz"),
        initrd: dir.join("initramfs.cpio.gz"),
        rootfs: dir.join("rootfs.img"),
    };
    if !d.kernel.is_file() || !d.initrd.is_file() || !d.rootfs.is_file() {
        skip_or_fail(
            test,
            &format!(
                "no Debian guest in {} (run scripts/debian-guest.sh)",
                dir.display()
            ),
        );
        return None;
    }
    Some(d)
}

fn mkfs() -> Option<PathBuf> {
    ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| find_program("mkfs.ext4"))
}

/// The package of the binaries under test, built by scripts/deb.sh into `dir`.
fn package(dir: &Path) -> PathBuf {
    build_binaries();
    let deb = dir.join("memtide.deb");
    let out = Command::new(memtide_testkit::repo().join("scripts/deb.sh"))
        .arg("--no-build")
        .arg(&deb)
        .output()
        .expect("run scripts/deb.sh");
    assert!(
        out.status.success(),
        "scripts/deb.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    deb
}

/// The test disk: `files` (name, contents) in an ext4 image made with `mkfs.ext4 -d`.
fn test_disk(dir: &Path, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let tree = dir.join("disk");
    std::fs::create_dir_all(&tree).unwrap();
    for (name, bytes) in files {
        std::fs::write(tree.join(name), bytes).unwrap();
    }
    let img = dir.join("test.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    let out = Command::new(mkfs().unwrap())
        .args(["-q", "-F", "-L", "memtide-test", "-d"])
        .arg(&tree)
        .arg(&img)
        .output()
        .expect("run mkfs.ext4");
    assert!(
        out.status.success(),
        "mkfs.ext4 -d failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    img
}

/// A QEMU guest, killed on drop.
struct Vm(Child);

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Debian {
    /// Boots the guest (1.5 GiB, 2 vCPUs) with `disk` as its second disk, its console to
    /// `console`.
    fn boot(&self, disk: &Path, console: &Path) -> Vm {
        let drive = |file: &Path, extra: &str| {
            format!("file={},if=virtio,format=raw,{extra}", file.display())
        };
        let child = Command::new("qemu-system-x86_64")
            .args(["-machine", "q35,accel=tcg", "-m", "1536", "-smp", "2"])
            .args(["-nodefaults", "-display", "none", "-no-reboot"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .args([
                "-append",
                "console=ttyS0 quiet memtide.root=vda memtide.balloon=off",
            ])
            .args(["-drive", &drive(&self.rootfs, "snapshot=on")])
            .args(["-drive", &drive(disk, "readonly=on")])
            .args(["-device", "virtio-rng-pci"])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start qemu-system-x86_64");
        Vm(child)
    }
}

/// One marker line: `memtide-systemd: WHAT k=v k=v…`.
#[derive(Debug)]
struct Marker {
    what: String,
    fields: BTreeMap<String, String>,
}

impl Marker {
    fn get(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("marker {} has no {key}: {self:?}", self.what))
    }

    fn num(&self, key: &str) -> u64 {
        let v = self.get(key);
        if v == "max" {
            return u64::MAX;
        }
        v.parse()
            .unwrap_or_else(|_| panic!("marker {}'s {key} is not a number: {v}", self.what))
    }
}

fn markers(console: &str) -> Vec<Marker> {
    console
        .lines()
        .filter_map(|l| l.split_once("memtide-systemd: ").map(|(_, rest)| rest))
        .map(|rest| {
            let mut words = rest.split_whitespace();
            let what = words.next().unwrap_or_default().to_string();
            let fields = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Marker { what, fields }
        })
        .collect()
}

/// The script the guest runs (as root, from the test disk, after boot).
fn guest_script() -> String {
    format!(
        r#"
set -u
M() {{ echo "memtide-systemd: $*"; }}
CG=/sys/fs/cgroup
KEYS={KEYS}
M env cgroup_fs=$(stat -fc %T $CG) systemd=$(systemctl --version | awk 'NR == 1 {{ print $2 }}') swap_kb=$(awk '/^SwapTotal:/ {{ print $2 }}' /proc/meminfo)
t0=$(date +%s)
dpkg -i ./memtide.deb >/tmp/dpkg.log 2>&1
st=$?
[ $st = 0 ] || sed 's/^/memtide-systemd: dpkg-line /' /tmp/dpkg.log
M install status=$st enabled=$(systemctl is-enabled memtide) active=$(systemctl is-active memtide) seconds=$(($(date +%s) - t0))
systemctl stop memtide
systemd-analyze verify memtide.service >/tmp/verify.log 2>&1
M verify status=$? lines=$(grep -c . /tmp/verify.log)
sed 's/^/memtide-systemd: verify-line /' /tmp/verify.log
M security $(systemd-analyze security memtide.service 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) \([A-Z]*\).*/exposure=\1 level=\2/p')

unit() {{ echo "redis-server@$1.service"; }}
cgroup() {{ echo "$CG$(systemctl show -p ControlGroup --value "$(unit "$1")")"; }}
port() {{ case $1 in busy) echo 6381 ;; idle) echo 6382 ;; late) echo 6383 ;; esac; }}
for n in busy idle late; do
    cat >/etc/redis/redis-$n.conf <<EOF
port $(port $n)
bind 127.0.0.1
daemonize no
supervised systemd
pidfile /run/redis-$n/redis-server.pid
logfile ""
dir /var/lib/redis
dbfilename dump-$n.rdb
save ""
appendonly no
EOF
    chown redis:redis /etc/redis/redis-$n.conf
    # "late" is configured for memtide but started only once memtide runs.
    [ $n = late ] || systemctl start "$(unit $n)" || M error start $n
done
# Limits of their own, for stop to give back exactly.
systemctl set-property --runtime "$(unit busy)" MemoryMax=1G MemoryLow=16M
systemctl set-property --runtime "$(unit idle)" MemoryHigh=900M MemoryLow=8M
t0=$(date +%s)
for n in busy idle; do
    redis-cli -p $(port $n) EVAL "for i = 0, $KEYS - 1 do redis.call('SET', string.format('key:%012d', i), string.rep(string.format('%08d', i), {VALUE_BYTES} / 8)) end return redis.call('DBSIZE')" 0 >/tmp/fill-$n 2>&1
    # The fill's garbage back to the kernel: memory.current is then the data.
    redis-cli -p $(port $n) MEMORY PURGE >/dev/null
done
limits() {{ # WHAT NAME
    c=$(cgroup $2)
    M $1 name=$2 cgroup=$(systemctl show -p ControlGroup --value "$(unit $2)") keys=$(redis-cli -p $(port $2) DBSIZE) current=$(cat $c/memory.current) high=$(cat $c/memory.high) max=$(cat $c/memory.max) low=$(cat $c/memory.low)
}}
M filled seconds=$(($(date +%s) - t0))
limits before busy
limits before idle

# What `memtide discover` finds here: the Redis services as units (their memory from systemd),
# and a starting configuration naming them.
memtide discover --parent /system.slice >/tmp/discover.txt 2>&1
M discover status=$? busy=$(grep -c '^redis-server@busy\.service ' /tmp/discover.txt) idle=$(grep -c '^redis-server@idle\.service ' /tmp/discover.txt)
sed 's/^/memtide-systemd: discover-line /' /tmp/discover.txt | head -n 80
memtide discover --parent /system.slice --toml >/tmp/discover.toml 2>/tmp/discover.err
M discover-toml status=$? stderr_lines=$(grep -c . /tmp/discover.err)
sed 's/^/memtide-systemd: toml-line /' /tmp/discover.toml

# The busy one serves random GETs over its keyspace throughout; the idle one nothing.
redis-benchmark -p $(port busy) -t get -r $KEYS -n 1000000000 -c 2 -q >/dev/null 2>&1 &
bench=$!

cat >/etc/memtide/memtide.toml <<EOF
[daemon]
tick = "1s"
state_file = "/run/memtide/state.json"

[host]
parent = "/system.slice"
budget = "{BUDGET_MIB}M"

[policy]
tax_rate = 0.75
sampling_period = "5s"

[[tenant]]
name = "busy"
cgroup = '$(systemctl show -p ControlGroup --value "$(unit busy)")'
min = "32M"
max = "512M"

[[tenant]]
name = "idle"
unit = "$(unit idle)"
min = "32M"
max = "512M"

[[tenant]]
name = "late"
unit = "$(unit late)"
min = "8M"
max = "64M"

[[tenant]]
name = "batch"
slice = "system-batch.slice"
min = "8M"
max = "64M"
EOF
t0=$(date +%s)
systemctl start memtide
pid=$(systemctl show -p MainPID --value memtide)
M started active=$(systemctl is-active memtide) pid=$pid capbnd=$(awk '/^CapBnd:/ {{ print $2 }}' /proc/$pid/status) cgroup=$(cut -d: -f3 /proc/$pid/cgroup)
idle0=$(cat $(cgroup idle)/memory.current)
given=0
while [ $(($(date +%s) - t0)) -lt 120 ]; do
    sleep 2
    b=$(cgroup busy); i=$(cgroup idle)
    M sample t=$(($(date +%s) - t0)) busy_current=$(cat $b/memory.current) busy_high=$(cat $b/memory.high) idle_current=$(cat $i/memory.current) idle_high=$(cat $i/memory.high)
    if [ $given = 0 ] && [ $(cat $i/memory.current) -le $((idle0 - {GIVEN_MIB} * 1048576)) ]; then
        given=$(date +%s)
    fi
    # Ten seconds more after the idle one gave, to see what the busy one does meanwhile.
    [ $given != 0 ] && [ $(($(date +%s) - given)) -ge 10 ] && break
done

# "late", not running at memtide's start, waits; started by systemd it is adopted, and
# restarted by systemd it is dropped as its cgroup vanishes and adopted again.
J() {{ journalctl -u memtide -o cat; }}
adopted() {{ J | grep -cE ' info (re)?adopted tenant=late '; }}
M late-waiting waiting=$(J | grep -c ' waiting tenant=late ') adopted=$(adopted) active=$(systemctl is-active "$(unit late)")
systemctl start "$(unit late)"
n=0
until [ $(adopted) -ge 1 ] || [ $n -ge 30 ]; do sleep 1; n=$((n + 1)); done
M late-started adopted=$(adopted) cgroup=$(systemctl show -p ControlGroup --value "$(unit late)") logged=$(J | grep -E ' info (re)?adopted tenant=late ' | head -n 1 | sed 's/.* cgroup=\([^ ]*\).*/\1/') seconds=$n
systemctl restart "$(unit late)"
n=0
until [ $(adopted) -ge 2 ] || [ $n -ge 30 ]; do sleep 1; n=$((n + 1)); done
M late-restarted adopted=$(adopted) dropped=$(J | grep -c ' info dropped tenant=late ') active=$(systemctl is-active "$(unit late)") seconds=$n
limits late late

# A slice: its processes are in the services below it. Empty at memtide's start, it waits;
# a transient service started in it makes it adopted; stopped, the slice is dropped.
sadopted() {{ J | grep -cE ' info (re)?adopted tenant=batch '; }}
M slice-waiting waiting=$(J | grep -c ' waiting tenant=batch ') adopted=$(sadopted)
systemd-run --quiet --slice=system-batch.slice --unit=batch-a redis-server --port 6384 --save '' >/dev/null 2>&1
n=0
until [ $(sadopted) -ge 1 ] || [ $n -ge 30 ]; do sleep 1; n=$((n + 1)); done
S=$CG/system.slice/system-batch.slice
M slice-started adopted=$(sadopted) procs=$(wc -l <$S/cgroup.procs) below=$(cat $S/batch-a.service/cgroup.procs | wc -l) logged=$(J | grep -E ' info (re)?adopted tenant=batch ' | head -n 1 | sed 's/.* cgroup=\([^ ]*\).*/\1/') seconds=$n
systemctl stop batch-a.service
n=0
until [ $(J | grep -c ' info dropped tenant=batch ') -ge 1 ] || [ $n -ge 30 ]; do sleep 1; n=$((n + 1)); done
M slice-stopped dropped=$(J | grep -c ' info dropped tenant=batch ') seconds=$n

# systemd writing the unit's own values again (daemon-reload; set-property of the value it
# already had): memtide's limit on the idle service is back within a few ticks.
i=$(cgroup idle)
for how in daemon-reload set-property; do
    mine=$(cat $i/memory.high)
    case $how in
        daemon-reload) systemctl daemon-reload ;;
        set-property) systemctl set-property --runtime "$(unit idle)" MemoryHigh=900M ;;
    esac
    seen=$(cat $i/memory.high)
    n=0
    while [ "$(cat $i/memory.high)" = 943718400 ] && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
    M rewritten how=$how mine=$mine seen=$seen now=$(cat $i/memory.high) tenths=$((n * 2))
done

sed -i 's/^tax_rate = .*/tax_rate = 0.5/' /etc/memtide/memtide.toml
systemctl reload memtide
st=$?
n=0
while ! journalctl -u memtide -o cat | grep -q ' reloaded ' && [ $n -lt 30 ]; do sleep 1; n=$((n + 1)); done
M reload status=$st active=$(systemctl is-active memtide) pid=$(systemctl show -p MainPID --value memtide)

# A crash: systemd restarts it (Restart=on-failure), and it re-adopts from the state file kept
# in /run/memtide (RuntimeDirectoryPreserve=yes).
old=$(systemctl show -p MainPID --value memtide)
systemctl kill --kill-who=main -s KILL memtide
n=0
while [ $n -lt 60 ]; do
    sleep 1; n=$((n + 1))
    now=$(systemctl show -p MainPID --value memtide)
    [ "$now" != 0 ] && [ "$now" != "$old" ] && journalctl -u memtide -o cat | grep -q ' info start .*readopting=true' && break
done
M crash restarts=$(systemctl show -p NRestarts --value memtide) pid=$(systemctl show -p MainPID --value memtide) active=$(systemctl is-active memtide) readopting=$(journalctl -u memtide -o cat | grep -c ' info start .*readopting=true') seconds=$n

kill $bench
for n in busy idle; do
    e=$(cgroup $n)/memory.events
    M events name=$n oom=$(awk '$1 == "oom" {{ print $2 }}' $e) oom_kill=$(awk '$1 == "oom_kill" {{ print $2 }}' $e) active=$(systemctl is-active "$(unit $n)")
done

systemctl stop memtide
M stopped active=$(systemctl is-active memtide) result=$(systemctl show -p Result --value memtide) status=$(systemctl show -p ExecMainStatus --value memtide)
limits after busy
limits after idle
limits after late

J=$(journalctl -u memtide -o cat)
M journal lines=$(echo "$J" | wc -l) start=$(echo "$J" | grep -c ' info start ') reloaded=$(echo "$J" | grep -c ' info reloaded ') limits=$(echo "$J" | grep -c ' limit ') failed=$(echo "$J" | grep -cE '_failed|error ') warn=$(echo "$J" | grep -cE ' (warn|error) ')
echo "$J" | grep -E ' (warn|error) ' | head -n 20 | sed 's/^/memtide-systemd: journal-line /'
echo "$J" | grep -E ' limit ' | head -n 40 | sed 's/^/memtide-systemd: journal-line /'
M done
"#
    )
}

/// memtide.service from the Debian package, in a systemd guest on cgroup v2: installed,
/// enabled and started by the package; started again by systemctl with a config adopting two
/// Redis services (one by its cgroup path, one by `unit =`) under a budget below their use, it logs its start to
/// the journal, the idle service gives memory first while the busy one serves GETs, no OOM
/// kill happens, `systemctl reload` rereads the config in the same process, a SIGKILL is
/// followed by systemd's restart and a re-adoption from the state file, and `systemctl stop`
/// gives each service back exactly the memory.high, memory.max and memory.low systemd had set.
/// A third service, named by `unit =` and not running when memtide starts, waits; it is
/// adopted once systemd starts it and again after `systemctl restart`. A slice named by
/// `slice =` waits while empty, is adopted once a transient service runs in it, and is
/// dropped when that service stops. After `systemctl
/// daemon-reload` and a `set-property` of the idle service's own MemoryHigh=, memtide's
/// limit is back within 10 s.
#[test]
fn memtide_service_adopts_services_reloads_survives_a_kill_and_restores_their_limits() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "memtide_service_adopts_services_reloads_survives_a_kill_and_restores_their_limits";
    let Some(d) = debian(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let deb = package(tmp.path());
    let disk = test_disk(
        tmp.path(),
        &[
            ("memtide.deb", std::fs::read(&deb).unwrap()),
            ("run.sh", guest_script().into_bytes()),
            ("poweroff", Vec::new()),
        ],
    );
    let console = tmp.path().join("console.log");
    let t0 = Instant::now();
    let mut vm = d.boot(&disk, &console);
    let read =
        || String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).into_owned();
    let mut ready = None;
    loop {
        let text = read();
        if ready.is_none() && text.contains("memtide-debian: ready") {
            ready = Some(t0.elapsed());
        }
        if text.contains("memtide-debian: run exited") {
            break;
        }
        if let Ok(Some(status)) = vm.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = vm.0.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("QEMU exited ({status}) before the run ended: {err}\nconsole:\n{text}");
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "the guest's run did not end within {DEADLINE:?}; console:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let text = read();
    println!("{text}");
    println!(
        "systemd guest: ready after {:.1} s, run ended after {:.1} s",
        ready.map_or(f64::NAN, |r| r.as_secs_f64()),
        t0.elapsed().as_secs_f64()
    );
    let ms = markers(&text);
    let one = |what: &str| {
        ms.iter()
            .find(|m| m.what == what)
            .unwrap_or_else(|| panic!("no `{what}` marker; console:\n{text}"))
    };
    let named = |what: &str, name: &str| {
        ms.iter()
            .find(|m| m.what == what && m.fields.get("name").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no `{what} name={name}` marker; console:\n{text}"))
    };
    assert!(
        text.contains("memtide-debian: ready state=running"),
        "systemd did not reach `running`; console:\n{text}"
    );
    let env = one("env");
    assert_eq!(env.get("cgroup_fs"), "cgroup2fs", "not cgroup v2");
    assert!(env.num("swap_kb") > 0, "the guest has no swap: {env:?}");
    one("done");

    // The package: installed, enabled and started the Debian way.
    let install = one("install");
    assert_eq!(install.get("status"), "0", "dpkg -i failed: {install:?}");
    assert_eq!(install.get("enabled"), "enabled", "{install:?}");
    assert_eq!(install.get("active"), "active", "{install:?}");

    // The unit as systemd reads it: no warning.
    let verify = one("verify");
    assert_eq!(
        verify.get("lines"),
        "0",
        "systemd-analyze verify complains; see above"
    );
    assert_eq!(verify.get("status"), "0", "{verify:?}");

    // Both Redis services full, their own limits set by systemd.
    for name in ["busy", "idle"] {
        let b = named("before", name);
        assert_eq!(b.num("keys"), KEYS, "{name} was not filled: {b:?}");
        assert!(b.get("cgroup").starts_with("/system.slice/"), "{b:?}");
    }
    assert_eq!(named("before", "busy").num("max"), 1 << 30);
    assert_eq!(named("before", "idle").num("high"), 900 * MIB);

    // `memtide discover` lists both services as units, and its starting configuration names
    // them by unit and is one the daemon's loader takes.
    let found = one("discover");
    assert_eq!(found.get("status"), "0", "{found:?}");
    assert_eq!((found.num("busy"), found.num("idle")), (1, 1), "{found:?}");
    let written = one("discover-toml");
    assert_eq!(written.get("status"), "0", "{written:?}");
    let toml: String = text
        .lines()
        .filter_map(|l| l.split_once("memtide-systemd: toml-line "))
        .map(|(_, rest)| format!("{}\n", rest.trim_end_matches('\r')))
        .collect();
    let config = memtide_daemon::config::DaemonConfig::parse(&toml, Path::new("discovered.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{toml}"));
    for name in ["busy", "idle"] {
        let unit = format!("redis-server@{name}.service");
        assert!(
            config.tenants.iter().any(|t| matches!(
                &t.origin,
                memtide_daemon::config::TenantOrigin::Unit { unit: u, .. } if *u == unit
            )),
            "no tenant for {unit}:\n{toml}"
        );
    }

    // Started by systemctl, its start logged to the journal.
    let started = one("started");
    assert_eq!(started.get("active"), "active", "{started:?}");
    let journal = one("journal");
    assert!(
        journal.num("start") >= 2,
        "the journal has fewer than two `start` lines (the package's start, the test's): {journal:?}"
    );
    assert!(
        journal.num("limits") > 0,
        "memtide logged no limit: {journal:?}"
    );
    assert_eq!(
        journal.num("failed"),
        0,
        "memtide logged failures under its unit's hardening; see the journal lines above"
    );

    // The idle service gave memory first: its memory.current fell by GIVEN_MIB before the busy
    // one's did (or at the same reading, by more), and it ends below the busy one.
    let samples: Vec<&Marker> = ms.iter().filter(|m| m.what == "sample").collect();
    assert!(!samples.is_empty(), "no samples; console:\n{text}");
    let busy0 = named("before", "busy").num("current");
    let idle0 = named("before", "idle").num("current");
    let gave = |s: &Marker, key: &str, before: u64| before.saturating_sub(s.num(key));
    let given_at = |key: &str, before: u64| {
        samples
            .iter()
            .position(|s| gave(s, key, before) >= GIVEN_MIB * MIB)
    };
    let idle_at = given_at("idle_current", idle0)
        .unwrap_or_else(|| panic!("the idle service never gave {GIVEN_MIB} MiB; console:\n{text}"));
    if let Some(busy_at) = given_at("busy_current", busy0) {
        let s = samples[idle_at];
        assert!(
            idle_at < busy_at
                || (idle_at == busy_at
                    && gave(s, "idle_current", idle0) > gave(s, "busy_current", busy0)),
            "the busy service gave memory (sample {busy_at}) before the idle one (sample {idle_at})"
        );
    }
    let last = samples.last().unwrap();
    assert!(
        last.num("idle_current") < last.num("busy_current"),
        "the idle service ends with more memory than the busy one: {last:?}"
    );
    assert!(
        last.num("idle_high") < idle0,
        "memtide left the idle service's memory.high above its use: {last:?}"
    );

    // No OOM kill, both services still running.
    for name in ["busy", "idle"] {
        let e = named("events", name);
        assert_eq!(e.num("oom_kill"), 0, "{name} had an OOM kill: {e:?}");
        assert_eq!(e.num("oom"), 0, "{name} hit its memory.max: {e:?}");
        assert_eq!(e.get("active"), "active", "{name} is not running: {e:?}");
    }

    // Reload: SIGHUP, the same process, the config read again.
    let reload = one("reload");
    assert_eq!(reload.get("status"), "0", "{reload:?}");
    assert_eq!(reload.get("active"), "active", "{reload:?}");
    assert_eq!(reload.get("pid"), started.get("pid"), "reload restarted it");
    assert!(
        journal.num("reloaded") >= 1,
        "no `reloaded` line: {journal:?}"
    );

    // A unit not running at memtide's start waits, is adopted once systemd starts it, and
    // is adopted again after systemd restarts it.
    let waiting = one("late-waiting");
    assert!(
        waiting.num("waiting") >= 1,
        "no `waiting` line for the unit not yet running: {waiting:?}"
    );
    assert_eq!(waiting.get("adopted"), "0", "{waiting:?}");
    assert_eq!(waiting.get("active"), "inactive", "{waiting:?}");
    let started_late = one("late-started");
    assert_eq!(
        started_late.get("adopted"),
        "1",
        "the unit was not adopted within 30 s of its start: {started_late:?}"
    );
    assert!(
        started_late
            .get("logged")
            .trim_matches('"')
            .ends_with("redis-server@late.service"),
        "{started_late:?}"
    );
    let restarted = one("late-restarted");
    assert_eq!(
        restarted.get("adopted"),
        "2",
        "the restarted unit was not adopted again within 30 s: {restarted:?}"
    );
    assert!(restarted.num("dropped") >= 1, "{restarted:?}");
    assert_eq!(restarted.get("active"), "active", "{restarted:?}");
    let late = named("after", "late");
    assert_eq!(
        (late.get("high"), late.get("max"), late.get("low")),
        ("max", "max", "0"),
        "the late unit's limits were not given back at stop: {late:?}"
    );

    // A slice waits while it is empty, is adopted once a service below it runs (it holds no
    // process itself), and is dropped when that service stops.
    let sw = one("slice-waiting");
    assert!(sw.num("waiting") >= 1, "{sw:?}");
    assert_eq!(sw.get("adopted"), "0", "{sw:?}");
    let ss = one("slice-started");
    assert_eq!(ss.get("adopted"), "1", "the slice was not adopted: {ss:?}");
    assert_eq!(ss.get("procs"), "0", "{ss:?}");
    assert_eq!(ss.get("below"), "1", "{ss:?}");
    assert_eq!(
        ss.get("logged").trim_matches('"'),
        "/system.slice/system-batch.slice",
        "{ss:?}"
    );
    let sd = one("slice-stopped");
    assert!(
        sd.num("dropped") >= 1,
        "the emptied slice was not dropped within 30 s: {sd:?}"
    );

    // systemd's own writes of the unit's values (daemon-reload, set-property) do not undo
    // memtide's limit for longer than a few ticks.
    for how in ["daemon-reload", "set-property"] {
        let r = ms
            .iter()
            .find(|m| m.what == "rewritten" && m.fields.get("how").map(String::as_str) == Some(how))
            .unwrap_or_else(|| panic!("no `rewritten how={how}` marker; console:\n{text}"));
        println!(
            "after {how}: memory.high {} -> {} (systemd's 900 MiB seen: {}), memtide's back \
             within {} tenths of a second",
            r.get("mine"),
            r.get("now"),
            r.num("seen") == 900 * MIB,
            r.get("tenths")
        );
        assert!(r.num("mine") < 900 * MIB, "{r:?}");
        assert!(
            r.num("now") < 900 * MIB,
            "memtide's limit was not back 10 s after {how}: {r:?}"
        );
    }

    // SIGKILL: restarted by systemd, re-adopting from the state file.
    let crash = one("crash");
    assert_eq!(crash.get("restarts"), "1", "{crash:?}");
    assert_eq!(crash.get("active"), "active", "{crash:?}");
    assert_ne!(crash.get("pid"), started.get("pid"), "{crash:?}");
    assert!(
        crash.num("readopting") >= 1,
        "the restarted daemon did not re-adopt from its state file: {crash:?}"
    );

    // Stop: a clean exit, and every limit back as systemd had set it (the values the first
    // daemon found, kept through the crash).
    let stopped = one("stopped");
    assert_eq!(stopped.get("active"), "inactive", "{stopped:?}");
    assert_eq!(stopped.get("result"), "success", "{stopped:?}");
    for name in ["busy", "idle"] {
        let (b, a) = (named("before", name), named("after", name));
        for key in ["high", "max", "low"] {
            assert_eq!(
                a.get(key),
                b.get(key),
                "{name}'s memory.{key} was not restored at stop"
            );
        }
    }
}
