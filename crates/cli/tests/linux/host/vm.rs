//! Real VMs for the QEMU world's tests: the guest image scripts/guest-image.sh builds (found in `MEMTIDE_GUEST_DIR` or /var/cache/memtide/guest), daemon configs that launch VMs from it, their consoles, and a QEMU a test starts itself (in a test cgroup, killed on drop) for the daemon to adopt.

use super::{mib, skip_or_fail, TestCgroup, MIB};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The guest image: a kernel and its initramfs.
pub struct Guest {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

/// The guest image and QEMU, or `None` after skipping (failing under `MEMTIDE_REQUIRE_LINUX=1`)
/// when root, qemu-system-x86_64 or the image is missing.
pub fn guest(test: &str) -> Option<Guest> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_or_fail(test, "needs root for the VMs' cgroups");
        return None;
    }
    if super::redis::find_program("qemu-system-x86_64").is_none() {
        skip_or_fail(
            test,
            "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)",
        );
        return None;
    }
    let dir = std::env::var_os("MEMTIDE_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/memtide/guest"));
    let g = Guest {
        kernel: dir.join("vmlinuz"),
        initrd: dir.join("initramfs.cpio.gz"),
    };
    if !g.kernel.is_file() || !g.initrd.is_file() {
        skip_or_fail(
            test,
            &format!(
                "no guest image in {} (run scripts/guest-image.sh)",
                dir.display()
            ),
        );
        return None;
    }
    Some(g)
}

impl Guest {
    /// The kernel command line running `run` in the guest, with `extra` parameters
    /// (scripts/guest-init.sh reads them).
    pub fn append(&self, run: &str, extra: &str) -> String {
        format!("console=ttyS0 quiet {extra} memtide.run=\"{run}\"")
    }

    /// A `[[tenant]]` launching a VM of `memory` from this image.
    pub fn tenant(&self, name: &str, memory: &str, tenant: &str, run: &str, extra: &str) -> String {
        format!(
            r#"
[[tenant]]
name = "{name}"
{tenant}
[tenant.vm]
memory = "{memory}"
kernel = "{}"
initrd = "{}"
append = '{}'
"#,
            self.kernel.display(),
            self.initrd.display(),
            self.append(run, extra)
        )
    }

    /// The QEMU command line of a VM a test starts itself (the daemon's own, less its cgroup).
    pub fn qemu_argv(
        &self,
        memory_mib: u64,
        run: &str,
        extra: &str,
        qmp: &Path,
        console: &Path,
    ) -> Vec<String> {
        let spec = memtide_qemu::vm::LaunchSpec {
            qemu: "qemu-system-x86_64".to_string(),
            kernel: Some(self.kernel.clone()),
            initrd: Some(self.initrd.clone()),
            disk: None,
            memory: memtide_model::Bytes(memory_mib << 20),
            cpus: 1,
            append: Some(self.append(run, extra)),
            args: Vec::new(),
            kvm: false,
        };
        spec.argv(qmp, console)
    }
}

/// A daemon config (tick 1 s, the `{listen}` and `{state}` placeholders of `Daemon::start`)
/// with `budget`, `policy` lines and `tenants`.
pub fn vm_config(budget: &str, policy: &str, tenants: &str) -> String {
    format!(
        r#"
[daemon]
tick = "1s"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "self"
budget = "{budget}"

[policy]
{policy}
{tenants}
"#
    )
}

/// A launched VM's console, as the daemon's QEMU writes it (`<state dir>/vms/NAME.console`).
pub fn console(state_dir: &Path, name: &str) -> String {
    let bytes =
        std::fs::read(state_dir.join("vms").join(format!("{name}.console"))).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether a guest's console shows its OOM killer at work, or its workload ended.
pub fn guest_trouble(console: &str) -> Option<String> {
    console
        .lines()
        .find(|l| {
            l.contains("Out of memory")
                || l.contains("oom-kill")
                || l.contains("Killed process")
                || l.contains("workload exited")
        })
        .map(str::to_string)
}

/// Waits for `memtide-guest: ready` on a console file.
pub fn wait_ready(console: impl Fn() -> String, timeout: Duration) -> Duration {
    let start = Instant::now();
    while !console().contains("memtide-guest: ready") {
        assert!(
            start.elapsed() < timeout,
            "the guest was not ready within {timeout:?}; console:\n{}",
            console()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// Starts QEMU's `argv` with its process already in `cgroup` (it joins before it executes).
pub fn spawn_in(argv: &[String], cgroup: &TestCgroup) -> Child {
    use std::os::unix::process::CommandExt;
    let procs = cgroup.dir().join("cgroup.procs");
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure only writes to a file between fork and exec.
    unsafe {
        c.pre_exec(move || std::fs::write(&procs, b"0\n"));
    }
    c.spawn().expect("start qemu-system-x86_64")
}

/// A QEMU a test started in a cgroup of its own, for the daemon to adopt by its QMP socket;
/// killed on drop.
pub struct OwnVm {
    pub child: Option<Child>,
    pub qmp: PathBuf,
    pub console: PathBuf,
    /// Its cgroup (dropped after the QEMU is gone).
    pub cgroup: TestCgroup,
}

impl OwnVm {
    /// Starts `argv` inside `cgroup` and waits for its QMP socket and the guest's `ready`.
    pub fn start(argv: Vec<String>, cgroup: TestCgroup, qmp: PathBuf, console: PathBuf) -> OwnVm {
        let child = spawn_in(&argv, &cgroup);
        let vm = OwnVm {
            child: Some(child),
            qmp,
            console,
            cgroup,
        };
        let c = vm.console.clone();
        wait_ready(
            move || String::from_utf8_lossy(&std::fs::read(&c).unwrap_or_default()).into_owned(),
            Duration::from_secs(60),
        );
        vm
    }

    pub fn console_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.console).unwrap_or_default()).into_owned()
    }

    /// A QMP connection of the test's own.
    pub fn qmp(&self) -> memtide_qemu::qmp::Qmp {
        memtide_qemu::qmp::Qmp::connect(&self.qmp, Duration::from_secs(5)).expect("QMP")
    }

    /// Whether the QEMU process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills the QEMU process now.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for OwnVm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Tenant `name` in snapshot `s`.
pub fn tenant<'a>(
    s: &'a memtide_api::Snapshot,
    name: &str,
) -> Option<&'a memtide_api::TenantSnapshot> {
    s.tenants.iter().find(|t| t.name == name)
}

/// VM `name`'s balloon in snapshot `s`.
pub fn balloon(s: &memtide_api::Snapshot, name: &str) -> Option<u64> {
    tenant(s, name)
        .and_then(|t| t.vm.as_ref())
        .map(|v| v.balloon_bytes)
}

/// Polls `d` every 0.5 s until VM `name`'s guest of `guest` bytes holds (its memory less its
/// balloon) within `band` for 10 s; panics with the timeline and the daemon's log when that
/// has not happened `timeout` after `start`. Returns when the 10 s began (from `start`) and
/// the timeline.
pub fn held_within(
    d: &mut memtide_testkit::Daemon,
    name: &str,
    guest: u64,
    band: std::ops::RangeInclusive<u64>,
    start: Instant,
    timeout: Duration,
) -> (Duration, Vec<String>) {
    let mut since: Option<Instant> = None;
    let mut timeline = Vec::new();
    loop {
        let s = d.status();
        let held = guest.saturating_sub(balloon(&s, name).unwrap_or(0));
        timeline.push(line(&s, start, &[name]));
        match (band.contains(&held), since) {
            (true, None) => since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() >= Duration::from_secs(10) => {
                return (t.duration_since(start), timeline)
            }
            (false, _) => since = None,
            _ => {}
        }
        assert!(
            start.elapsed() < timeout,
            "{name}'s guest holds {:.0} MiB, not within [{:.0}, {:.0}] MiB, after {timeout:?}:\n{}\nlog:\n{}",
            mib(held),
            mib(*band.start()),
            mib(*band.end()),
            timeline.join("\n"),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// ESX's fallback where a balloon cannot move: waits (120 s at most from now) until VM tenant
/// "stuck"'s balloon is counted stalled and host swap holds 64 MiB of it, then checks its
/// balloon never moved, `cgroup` (its QEMU's) holds it under a limit below its 512 MiB, and the
/// log names host swap as the limit's reason. Prints the timeline from `start` and the figures
/// after `what`.
pub fn assert_stuck_balloon_falls_back_to_host_swap(
    d: &mut memtide_testkit::Daemon,
    cgroup: &memtide_linux::cgroup::MemoryCgroup,
    start: Instant,
    what: &str,
) {
    let mut timeline = Vec::new();
    let mut polls = 0;
    let s = d.wait_until(
        "the balloon stalls and host swap pages the VM",
        Duration::from_secs(120),
        |s| {
            polls += 1;
            if polls % 10 == 1 {
                timeline.push(line(s, start, &["stuck"]));
            }
            tenant(s, "stuck")
                .and_then(|t| t.vm.as_ref())
                .is_some_and(|v| v.stalled && v.host_swapped_bytes >= 64 * MIB)
        },
    );
    println!("{}", timeline.join("\n"));
    let t = tenant(&s, "stuck").unwrap();
    let v = t.vm.as_ref().unwrap();
    let sample = cgroup.sample().unwrap();
    let limit =
        memtide_testkit::limit_bytes(&sample).expect("host swap holds the VM under a limit");
    println!(
        "{what}: stalled after {:.1} s: balloon {:.0} MiB, host swapped {:.0} MiB, cgroup limit \
         {:.0} MiB, usage {:.0} MiB; reason: {}",
        start.elapsed().as_secs_f64(),
        mib(v.balloon_bytes),
        mib(v.host_swapped_bytes),
        mib(limit),
        mib(sample.usage.0),
        t.reason
    );
    assert!(v.balloon_bytes < 16 * MIB, "the balloon moved: {v:?}");
    assert!(limit < 512 * MIB, "limit {limit}");
    // The stall shows in the API (the wait above); the log names host swap as the limit's
    // reason. (Which limit write, if any, falls on a tick after the stall is a race.)
    d.wait_for_log(
        &["limit", "tenant=stuck", "host swap"],
        Duration::from_secs(5),
    );
}

/// How an idle-tax run between an active and an idle ballooned guest ends, as its tests
/// assert it: the idle guest's balloon holds at least 128 MiB, the active guest's, having
/// inflated by 48 MiB or more in its idle first phase (`active_peak`), is down to half of that
/// or less, and the idle guest's holds 96 MiB more than the active one's.
pub fn idle_tax_settled(
    s: &memtide_api::Snapshot,
    active: &str,
    idle: &str,
    active_peak: u64,
) -> bool {
    match (balloon(s, active), balloon(s, idle)) {
        (Some(a), Some(i)) => {
            i >= 128 * MIB && active_peak >= 48 * MIB && a * 2 <= active_peak && i > a + 96 * MIB
        }
        _ => false,
    }
}

/// Polls `status` every 5 s for at most `most` from `t0`, handing each snapshot to `see`
/// (which records it and says whether the run's end state holds in it). From `least` on, the
/// watch ends early once the end state has held in three snapshots in a row (10 s): a run
/// that has settled shows nothing more in the rest of `most`. Returns the last snapshot.
pub fn watch(
    t0: Instant,
    least: Duration,
    most: Duration,
    mut status: impl FnMut() -> memtide_api::Snapshot,
    mut see: impl FnMut(&memtide_api::Snapshot) -> bool,
) -> memtide_api::Snapshot {
    let mut held = 0;
    let mut last = memtide_api::Snapshot::default();
    while t0.elapsed() < most {
        let s = status();
        held = if see(&s) { held + 1 } else { 0 };
        last = s;
        if held >= 3 && t0.elapsed() >= least {
            break;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    last
}

/// One line of a run's timeline: each named VM's balloon, allocation and target.
pub fn line(s: &memtide_api::Snapshot, t0: Instant, names: &[&str]) -> String {
    let mut l = format!("{:5.1}s {:5}", t0.elapsed().as_secs_f64(), s.host.state);
    for n in names {
        if let Some(t) = tenant(s, n) {
            l.push_str(&format!(
                " | {n}: balloon {:5.0} alloc {:5.0} target {:5.0} est {:5.0}",
                mib(t.vm.as_ref().map_or(0, |v| v.balloon_bytes)),
                mib(t.allocated_bytes),
                mib(t.target_bytes),
                mib(t.active_estimate_bytes)
            ));
        }
    }
    l
}
