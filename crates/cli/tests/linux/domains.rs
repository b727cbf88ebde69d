//! libvirt domains on this machine: the fixture (crate::host::libvirt) starts a libvirtd of the
//! test's own whose domains' memory cgroups lie beneath the test's cgroup, boots test domains
//! from the guest image, and leaves nothing behind. Run with
//! `cargo test --release -p memtide-cli --test linux -- domains:: --nocapture`.

use crate::host::engines::{cgroup_dirs, cgroup_mounts, processes_naming};
use crate::host::libvirt::{alive, is_domain_cgroup, Libvirt, SOCKET};
use crate::host::vm::{balloon, idle_tax_settled, line, watch};
use crate::host::*;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The guests' workload: 64 MiB kept active.
const WORKLOAD: &str = "memtide-toucher --active 64M";

/// One libvirtd at a time on a host: the tests that start one take this first (the module's
/// tests may otherwise overlap).
static ONE_LIBVIRT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `virsh dommemstat NAME`'s `actual` (KiB), when it shows one.
fn balloon_actual(lv: &Libvirt, name: &str) -> Option<u64> {
    lv.ok(&["dommemstat", name]).lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == "actual").then(|| v.trim().parse().ok()).flatten()
    })
}

/// Whether each cgroup mount has a `machine` directory (libvirt's default partition): what
/// [`drop_leaves_nothing`] expects to find again.
fn machine_dirs() -> Vec<bool> {
    cgroup_mounts()
        .iter()
        .map(|m| m.join("machine").exists())
        .collect()
}

/// The domains' memory cgroups are `<parent>/qemu-<ID>-<NAME>.libvirt-qemu`, beneath the test's
/// own cgroup, each holding its QEMU.
fn assert_cgroups_beneath(linux: &Linux, lv: &Libvirt, domains: &[&crate::host::libvirt::Domain]) {
    let parent = lv.parent();
    let own = &linux.hierarchy.own_cgroup;
    assert!(
        parent.starts_with(&format!("{}/", own.trim_end_matches('/'))),
        "{parent} is not beneath {own}"
    );
    for d in domains {
        let cg = d.cgroup();
        assert_eq!(
            cg,
            format!("{parent}/qemu-{}-{}.libvirt-qemu", d.id(), d.name),
            "{}'s memory cgroup",
            d.name
        );
        let dir = linux.hierarchy.dir_of(&cg);
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        assert!(
            procs.lines().any(|l| l.trim() == d.pid().to_string()),
            "QEMU {} is not in {}: {procs:?}",
            d.pid(),
            dir.display()
        );
    }
}

/// Drops the fixture and checks it left no process (`qemus`, libvirtd, virtlogd), socket,
/// cgroup (in any hierarchy), definition, file or directory of its own or of the domains
/// `names`; `machine_before` is [`machine_dirs`] before the fixture started.
fn drop_leaves_nothing(lv: Libvirt, names: &[String], qemus: &[u32], machine_before: Vec<bool>) {
    let (libvirtd, virtlogd) = lv.daemon_pids();
    let dir = lv.dir().to_path_buf();
    let parent = lv.parent();
    let own_cg = lv.cgroup().to_string();
    drop(lv);
    for (pid, what) in qemus
        .iter()
        .map(|pid| (*pid, "QEMU"))
        .chain([(libvirtd, "libvirtd"), (virtlogd, "virtlogd")])
    {
        assert!(!alive(pid), "{what} (pid {pid}) survived the fixture");
    }
    assert!(
        UnixStream::connect(SOCKET).is_err(),
        "a libvirtd still answers on {SOCKET}"
    );
    assert_eq!(
        processes_naming(&dir),
        Vec::new(),
        "processes naming {}",
        dir.display()
    );
    assert!(!dir.exists(), "{} is left", dir.display());
    for path in [parent, own_cg] {
        assert_eq!(
            cgroup_dirs(&path),
            Vec::<PathBuf>::new(),
            "cgroup {path} is left"
        );
    }
    for (m, existed) in cgroup_mounts().iter().zip(machine_before) {
        let machine = m.join("machine");
        assert_eq!(
            machine.exists(),
            existed,
            "{} existed {existed} before the fixture",
            machine.display()
        );
        for entry in std::fs::read_dir(&machine).into_iter().flatten().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !names.iter().any(|n| is_domain_cgroup(&file, n)),
                "{} is left",
                entry.path().display()
            );
        }
    }
    for name in names {
        for f in [
            format!("/etc/libvirt/qemu/{name}.xml"),
            format!("/run/libvirt/qemu/{name}.xml"),
            format!("/run/libvirt/qemu/{name}.pid"),
            format!("/var/log/libvirt/qemu/{name}.log"),
        ] {
            assert!(!Path::new(&f).exists(), "{f} is left");
        }
    }
    let named: Vec<PathBuf> = ["/etc/libvirt/qemu", "/run/libvirt", "/var/lib/libvirt/qemu"]
        .iter()
        .flat_map(|d| files_under(Path::new(d)))
        .filter(|f| {
            let f = f.display().to_string();
            names.iter().any(|n| f.contains(n.as_str()))
        })
        .collect();
    assert_eq!(
        named,
        Vec::<PathBuf>::new(),
        "files naming the domains are left"
    );
}

/// Every file and directory under `dir` (not following links).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files_under(&p));
        }
        out.push(p);
    }
    out
}

/// ESX Fig. 7 again, on two libvirt domains named in the configuration: memtide drives their
/// balloons through libvirt (which holds their QMP sockets), the idle domain's balloon
/// inflates under the idle tax while the active one's deflates once it works. Around it: a
/// domain with `<memballoon model='none'/>` is refused with one line, an unknown domain and a
/// stopped one wait (the stopped one is taken up once started), a domain destroyed and started
/// again (a new id, a new cgroup) is taken up again, libvirtd's restart changes nothing (the
/// same QEMUs in the same cgroups), a SIGKILLed daemon re-adopts under its records, and at exit
/// every balloon is given back as found. The fixture's own promises are checked on the way:
/// the domains' cgroups lie beneath the test's, and dropping it leaves nothing behind.
#[test]
fn two_domains_share_a_budget_through_libvirt_under_the_idle_tax() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "two_domains_share_a_budget_through_libvirt_under_the_idle_tax";
    let _one = ONE_LIBVIRT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(linux) = linux(test) else {
        return;
    };
    let machine_before = machine_dirs();
    let Some(mut lv) = Libvirt::start(&linux, test) else {
        return;
    };
    let me = std::process::id();
    let active = lv.define_with(
        &format!("mt{me}-active"),
        512,
        "memtide-toucher --phase 25s:active=16M --phase 1s:active=300M --report-every-ms 60000",
        "memtide.zram=256M",
        true,
    );
    let idle = lv.define_with(
        &format!("mt{me}-idle"),
        512,
        "memtide-toucher --active 16M --idle 300M --content zero --report-every-ms 60000",
        "memtide.zram=256M",
        true,
    );
    let none = lv.define(&format!("mt{me}-none"), 256, WORKLOAD, false);
    let off = lv.define(&format!("mt{me}-off"), 256, WORKLOAD, true);
    for d in [&active, &idle, &none] {
        d.start();
    }
    for d in [&active, &idle, &none] {
        d.wait_ready(Duration::from_secs(120));
    }
    assert_cgroups_beneath(&linux, &lv, &[&active, &idle, &none]);
    let parent = lv.parent();
    let tenant = |name: &str, domain: &str| {
        format!(
            "[[tenant]]\nname = \"{name}\"\ndomain = \"{domain}\"\nmin = \"128M\"\nmax = \"700M\"\n\
             estimator = \"sampling\"\n"
        )
    };
    let config = format!(
        "{}\n[policy]\ntax_rate = 0.75\nsampling_period = \"5s\"\n\n{}\n{}\n{}\n{}\n{}",
        config_head("1s", &parent, "700M"),
        tenant("active", &active.name),
        tenant("idle", &idle.name),
        tenant("none", &none.name),
        tenant("off", &off.name),
        tenant("ghost", &format!("mt{me}-ghost")),
    );
    // What the active domain's balloon leaves it before memtide: given back at exit.
    let found = balloon_actual(&lv, &active.name).expect("active has a balloon");
    let tmp = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_for_log(
        &["refused", "tenant=none", "<memballoon model='none'/>"],
        Duration::from_secs(30),
    );
    daemon.wait_for_log(
        &["waiting", "tenant=off", "is not running"],
        Duration::from_secs(30),
    );
    daemon.wait_for_log(
        &["waiting", "tenant=ghost", "libvirt has no domain named"],
        Duration::from_secs(30),
    );
    // The idle tax: both balloons inflate at first; once the active guest works its balloon
    // deflates while the idle guest's stays inflated.
    let mut active_peak = 0u64;
    let mut timeline = Vec::new();
    let last = watch(
        t0,
        Duration::from_secs(45),
        Duration::from_secs(100),
        || daemon.status(),
        |s| {
            timeline.push(line(s, t0, &["active", "idle"]));
            if t0.elapsed() < Duration::from_secs(35) {
                active_peak = active_peak.max(balloon(s, "active").unwrap_or(0));
            }
            idle_tax_settled(s, "active", "idle", active_peak)
        },
    );
    println!("{}", timeline.join("\n"));
    let (a, i) = (
        balloon(&last, "active").expect("active is a VM"),
        balloon(&last, "idle").expect("idle is a VM"),
    );
    println!(
        "{test}: active balloon peak {:.0} MiB, end {:.0} MiB; idle balloon {:.0} MiB",
        mib(active_peak),
        mib(a),
        mib(i)
    );
    assert!(
        idle_tax_settled(&last, "active", "idle", active_peak),
        "the idle domain's balloon should hold 128 MiB or more and 96 more than the active \
         domain's, which should inflate by 48 MiB or more and deflate by half"
    );
    // libvirt's own view is memtide's.
    let idle_actual = balloon_actual(&lv, &idle.name).unwrap_or(0) * 1024;
    assert!(
        idle_actual + i >= 512 * MIB - 8 * MIB && idle_actual + i <= 512 * MIB + 8 * MIB,
        "libvirt's actual {:.0} MiB and memtide's balloon {:.0} MiB do not make 512 MiB",
        mib(idle_actual),
        mib(i)
    );
    for d in [&active, &idle] {
        assert_eq!(
            crate::host::vm::guest_trouble(&d.console()),
            None,
            "{}'s guest",
            d.name
        );
    }

    // Destroyed and started again: a new QEMU, id and cgroup, taken up again.
    let old = idle.cgroup();
    idle.destroy();
    daemon.wait_for_log(&["dropped", "tenant=idle"], Duration::from_secs(30));
    idle.start();
    idle.wait_ready(Duration::from_secs(120));
    let new = idle.cgroup();
    assert_ne!(new, old, "a domain started again has a new cgroup");
    daemon.wait_until("idle taken up again", Duration::from_secs(30), |s| {
        s.tenants
            .iter()
            .any(|t| t.name == "idle" && t.cgroup == new)
    });

    // The shut-off domain started: libvirt's events tell the waiting tenant, which is taken
    // up; destroyed again, it is dropped and waits.
    off.start();
    let off_cgroup = off.cgroup();
    daemon.wait_until("off taken up once started", Duration::from_secs(30), |s| {
        s.tenants
            .iter()
            .any(|t| t.name == "off" && t.cgroup == off_cgroup)
    });
    off.destroy();
    daemon.wait_for_log(&["dropped", "tenant=off"], Duration::from_secs(30));

    // libvirtd restarts: the domains run on in the same QEMUs and cgroups, and memtide keeps
    // moving them.
    let before = (active.pid(), active.cgroup(), active.id());
    lv.restart_daemon();
    assert_eq!(active.state(), "running", "after libvirtd restarted");
    assert_eq!((active.pid(), active.cgroup(), active.id()), before);
    let ticks = daemon.status().ticks;
    daemon.wait_until(
        "ticks after libvirtd's restart",
        Duration::from_secs(30),
        |s| s.ticks >= ticks + 5 && s.tenants.iter().filter(|t| t.vm.is_some()).count() == 2,
    );

    // Killed with its balloons inflated: the next start re-adopts both under their records.
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());
    daemon.spawn(&[]);
    daemon.wait_for_log(&["readopted", "tenant=active"], Duration::from_secs(30));
    daemon.wait_until("both domains managed again", Duration::from_secs(30), |s| {
        s.tenants.iter().filter(|t| t.vm.is_some()).count() == 2
    });

    // At exit each balloon goes back to what the first start found (the active domain's) or
    // what its new QEMU started with (the idle one, started again at 512 MiB).
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    let settled = Instant::now();
    loop {
        let a = balloon_actual(&lv, &active.name).unwrap_or(0);
        let i = balloon_actual(&lv, &idle.name).unwrap_or(0);
        if a == found && i == 512 * 1024 {
            break;
        }
        assert!(
            settled.elapsed() < Duration::from_secs(20),
            "balloons not given back: active {a} KiB (found {found} KiB), idle {i} KiB (512 MiB)"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("{test}: {:.0} s in all", t0.elapsed().as_secs_f64());
    let qemus = [active.pid(), idle.pid(), none.pid()];
    let names = [&active, &idle, &none, &off].map(|d| d.name.clone());
    drop_leaves_nothing(lv, &names, &qemus, machine_before);
}

/// TWS on a guest under libvirt (docs/vms.md measured it with QMP): a 1 GiB domain whose
/// toucher works 300 MiB is probed through its balloon, which libvirt moves, until the guest's
/// own swap-ins show it went below the working set, and it settles within [300, 520] MiB.
/// Then the guest is reset (`virsh reset`: a reboot in the same QEMU, cgroup and balloon
/// device): memtide keeps the domain, never drops it, and the guest settles in the band again
/// once it runs its workload. At exit the balloon goes back to what memtide found.
#[test]
fn tws_brings_a_1g_domain_to_its_working_set_and_holds_it_across_a_reboot() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "tws_brings_a_1g_domain_to_its_working_set_and_holds_it_across_a_reboot";
    let _one = ONE_LIBVIRT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(lv) = Libvirt::start(&linux, test) else {
        return;
    };
    let ws = lv.define_with(
        &format!("mt{}-ws", std::process::id()),
        1024,
        "memtide-toucher --active 300M --content zero --pause-ms 100 --report-every-ms 60000",
        "memtide.zram=512M",
        true,
    );
    ws.start();
    ws.wait_ready(Duration::from_secs(120));
    let found = balloon_actual(&lv, &ws.name).expect("ws has a balloon");
    let config = format!(
        "{}\n[policy]\nreclaim = \"always\"\n\n[[tenant]]\nname = \"ws\"\ndomain = \"{}\"\n\
         min = \"64M\"\nmax = \"1200M\"\nestimator = \"tws\"\n",
        config_head("1s", &lv.parent(), "4G"),
        ws.name
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut d = Daemon::start(tmp.path(), &config, &[]);
    let start = Instant::now();
    // The band of the QMP test: the toucher's 300 MiB, the guest's own ~100 MiB, 30% above.
    let band = 300 * MIB..=520 * MIB;
    let (converged, timeline) = crate::host::vm::held_within(
        &mut d,
        "ws",
        1 << 30,
        band.clone(),
        start,
        Duration::from_secs(240),
    );
    println!("{}", timeline.join("\n"));
    let t = d.tenant("ws");
    let v = t.vm.clone().expect("a VM");
    println!(
        "{test}: within [300, 520] MiB of guest memory after {:.1} s (balloon {:.0} MiB, \
         estimate {:.0} MiB); QMP: docs/vms.md, paper ~10 s",
        converged.as_secs_f64(),
        mib(v.balloon_bytes),
        mib(t.active_estimate_bytes)
    );

    // A reboot in place: the same QEMU and cgroup, the guest's memory all its own again until
    // its balloon driver loads and takes the target back.
    let (pid, cgroup) = (ws.pid(), ws.cgroup());
    let readies = |c: &str| c.matches("memtide-guest: ready").count();
    let before = readies(&ws.console());
    lv.ok(&["reset", &ws.name]);
    let rebooted = Instant::now();
    while readies(&ws.console()) <= before {
        assert!(
            rebooted.elapsed() < Duration::from_secs(120),
            "the guest did not come back from its reset:\n{}",
            ws.console()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let up = rebooted.elapsed();
    assert_eq!(
        (ws.pid(), ws.cgroup()),
        (pid, cgroup.clone()),
        "a reset keeps QEMU"
    );
    let (again, timeline) = crate::host::vm::held_within(
        &mut d,
        "ws",
        1 << 30,
        band,
        rebooted,
        Duration::from_secs(180),
    );
    println!("{}", timeline.join("\n"));
    println!(
        "{test}: after the reset the guest was up in {:.1} s and within the band after {:.1} s",
        up.as_secs_f64(),
        again.as_secs_f64()
    );
    assert_eq!(d.tenant("ws").cgroup, cgroup);
    let log = d.log_text();
    assert!(
        !log.lines()
            .any(|l| l.contains("dropped") && l.contains("tenant=ws")),
        "a reset dropped the domain:\n{log}"
    );
    assert_eq!(crate::host::vm::guest_trouble(&ws.console()), None);
    assert!(d.signal_and_wait(libc::SIGTERM).success());
    let settled = Instant::now();
    while balloon_actual(&lv, &ws.name) != Some(found) {
        assert!(
            settled.elapsed() < Duration::from_secs(20),
            "the balloon was not given back: {:?} KiB, found {found} KiB",
            balloon_actual(&lv, &ws.name)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A stuck balloon under libvirt (docs/vms.md measured it with QMP): the guest removes its
/// balloon driver 8 s after boot, so `setmem` moves nothing; memtide counts the balloon
/// stalled, says so, and pages the domain's QEMU through its libvirt cgroup's limit into host
/// swap (zram). The guest lives on, and at exit the cgroup gets back the limit it had.
#[test]
fn a_domain_without_its_balloon_driver_stalls_and_memtide_falls_back_to_host_swap() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_domain_without_its_balloon_driver_stalls_and_memtide_falls_back_to_host_swap";
    let _one = ONE_LIBVIRT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    let Some(lv) = Libvirt::start(&linux, test) else {
        return;
    };
    let stuck = lv.define_with(
        &format!("mt{}-stuck", std::process::id()),
        512,
        "sleep 8; rmmod virtio_balloon && echo memtide-test: balloon removed; \
         memtide-toucher --active 16M --idle 300M --report-every-ms 60000",
        "memtide.zram=0",
        true,
    );
    stuck.start();
    stuck.wait_ready(Duration::from_secs(120));
    let cgroup = linux.memory_cgroup(&stuck.cgroup());
    let original = limit_bytes(&cgroup.sample().expect("sample the domain's cgroup"));
    let config = format!(
        "{}\n[policy]\ntax_rate = 0.75\nsampling_period = \"5s\"\n\n[[tenant]]\nname = \"stuck\"\n\
         domain = \"{}\"\nmin = \"64M\"\nmax = \"700M\"\nestimator = \"sampling\"\n",
        config_head("1s", &lv.parent(), "300M"),
        stuck.name
    );
    let tmp = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut d = Daemon::start(tmp.path(), &config, &[]);
    crate::host::vm::assert_stuck_balloon_falls_back_to_host_swap(&mut d, &cgroup, start, test);
    let console = stuck.console();
    assert!(
        console.contains("memtide-test: balloon removed"),
        "{console}"
    );
    assert_eq!(crate::host::vm::guest_trouble(&console), None, "{console}");
    assert!(d.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(
        limit_bytes(&cgroup.sample().unwrap()),
        original,
        "the domain's cgroup gets its limit back"
    );
    assert_eq!(stuck.state(), "running");
}

/// A domain tenant without libvirt: the daemon waits and says why (as for a cgroup not made
/// yet); a bad name or URI is refused before anything starts, on one line.
#[test]
fn a_domain_without_libvirt_waits_and_a_bad_one_is_refused_on_one_line() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_domain_without_libvirt_waits_and_a_bad_one_is_refused_on_one_line";
    let Some(linux) = linux(test) else {
        return;
    };
    let parent = linux.cgroup("domains-bad");
    let tmp = tempfile::tempdir().unwrap();
    let head = config_head("250ms", &parent.path, "1G");
    for (extra, says) in [
        (
            "domain = \"-x\"\n",
            "tenant[0].domain = \"-x\": is not a domain name",
        ),
        (
            "domain = \"vm1\"\nuri = \"not a uri\"\n",
            "tenant[0].uri = \"not a uri\": is not a libvirt URI",
        ),
        (
            "uri = \"qemu:///system\"\ncgroup = \"/x\"\n",
            "give domain = \"NAME\" beside it",
        ),
    ] {
        let config = format!("{head}[[tenant]]\nname = \"vm\"\nmax = \"1G\"\n{extra}");
        let (code, stderr, _) = daemon_to_exit(tmp.path(), &config);
        assert_eq!(code, 2, "{extra}: {stderr}");
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "{extra}: one line: {stderr}"
        );
        assert!(stderr.contains(says), "{extra}: {stderr}");
    }
    // A libvirt whose socket is not there (whether or not another test runs one).
    let socket = tmp.path().join("no-libvirt.sock");
    let config = format!(
        "{head}[[tenant]]\nname = \"vm\"\nmax = \"1G\"\ndomain = \"vm1\"\n\
         uri = \"qemu+unix:///system?socket={}\"\n",
        socket.display()
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_for_log(
        &[
            "waiting",
            "tenant=vm",
            "libvirt does not answer",
            "failed to connect to the hypervisor",
        ],
        Duration::from_secs(20),
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
}

/// What the issue asks of one daemon: two Docker containers and two libvirt domains under
/// one budget with the idle tax. When the budget runs short the idle container's limit and the
/// idle domain's balloon are taken, while the busy container keeps what it works and the
/// active domain's balloon deflates once its guest works; `memtide discover` lists all four
/// and names them in its starting configuration; at exit the containers' limits and the
/// balloons are given back.
/// memtide reclaims only while the budget runs short (`reclaim = "when_short"`), which it does
/// in the containers-and-domains run at least as the active guest starts working (~30 s); how
/// long it stays short varies with what the guests hold (the idle guest's QEMU held 122 to 215
/// MiB across runs, as free page reporting gives its pages back; under load on the host, one
/// tick of shortage). So the idle container's lowest limit is at most this, one bounded shrink
/// step (7%) below the 259 MiB it held (246 MiB after one step, 211 after three in CI)...
const IDLE_GAVE: u64 = 250 * MIB;
/// ... and the busy container's, working 300 MiB, never below this.
const BUSY_KEPT: u64 = 290 * MIB;

#[test]
fn containers_and_domains_share_one_daemon_under_the_idle_tax() {
    use crate::host::engines::{Engine, EngineKind};
    use crate::host::vm::tenant;
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "containers_and_domains_share_one_daemon_under_the_idle_tax";
    let _one = ONE_LIBVIRT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(linux) = linux(test) else {
        return;
    };
    if !EngineKind::Docker.installed(test) {
        return;
    }
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    let Some(lv) = Libvirt::start(&linux, test) else {
        return;
    };
    let engine = Engine::start(EngineKind::Docker, &linux, test);
    engine.run_busy_and_idle(&linux);
    let me = std::process::id();
    let active = lv.define_with(
        &format!("mt{me}-active"),
        512,
        "memtide-toucher --phase 25s:active=16M --phase 1s:active=300M --report-every-ms 60000",
        "memtide.zram=256M",
        true,
    );
    let idle = lv.define_with(
        &format!("mt{me}-idle"),
        512,
        "memtide-toucher --active 16M --idle 300M --content zero --report-every-ms 60000",
        "memtide.zram=256M",
        true,
    );
    for d in [&active, &idle] {
        d.start();
    }
    for d in [&active, &idle] {
        d.wait_ready(Duration::from_secs(120));
    }
    let found = balloon_actual(&lv, &active.name).expect("active has a balloon");
    // `memtide discover` lists both containers and both domains, and its starting
    // configuration names them.
    let parent = &linux.hierarchy.own_cgroup;
    let docker = engine.socket().display().to_string();
    let nothing = format!("{docker}.none");
    let discover = |toml: bool| {
        let mut args = vec![
            "discover",
            "--parent",
            parent.as_str(),
            "--docker-socket",
            docker.as_str(),
            "--podman-socket",
            nothing.as_str(),
        ];
        args.extend(toml.then_some("--toml"));
        let (code, out, err) = memtide_testkit::memtide(&args);
        assert_eq!(code, 0, "memtide {args:?}: {err}\n{out}");
        out
    };
    let table = discover(false);
    for (row, words) in [
        ("busy", ["docker", "running"]),
        ("idle", ["docker", "running"]),
        (active.name.as_str(), ["MiB", "running"]),
        (idle.name.as_str(), ["MiB", "running"]),
    ] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(&format!("{row} ")) && words.iter().all(|w| l.contains(w))),
            "discover shows no {row} row with {words:?}:\n{table}"
        );
    }
    let toml = discover(true);
    let discovered = memtide_daemon::config::DaemonConfig::parse(&toml, Path::new("discovered"))
        .unwrap_or_else(|e| panic!("{e}\n{toml}"));
    use memtide_daemon::config::TenantOrigin;
    let origins: Vec<&TenantOrigin> = discovered.tenants.iter().map(|t| &t.origin).collect();
    for c in ["busy", "idle"] {
        assert!(
            origins
                .iter()
                .any(|o| matches!(o, TenantOrigin::Container { name, .. } if name == c)),
            "no container tenant {c}:\n{toml}"
        );
    }
    for d in [&active, &idle] {
        assert!(
            origins
                .iter()
                .any(|o| matches!(o, TenantOrigin::Domain { name, .. } if *name == d.name)),
            "no domain tenant {}:\n{toml}",
            d.name
        );
    }

    // The daemon's parent holds both the engine's cgroup parent and libvirt's partition. The
    // budget runs short as the active guest starts working (the four then hold 940 to 1,030
    // MiB); with room to spare memtide takes nothing (`reclaim = "when_short"`).
    let config = format!(
        "{}\n[policy]\ntax_rate = 0.75\nsampling_period = \"5s\"\n\n[engines]\n\
         docker_socket = \"{}\"\n\n\
         [[tenant]]\nname = \"busy\"\ncontainer = \"busy\"\nengine = \"docker\"\nmin = \"64M\"\n\
         max = \"600M\"\n\n\
         [[tenant]]\nname = \"idle\"\ncontainer = \"idle\"\nengine = \"docker\"\nmin = \"64M\"\n\
         max = \"600M\"\n\n\
         [[tenant]]\nname = \"vm-active\"\ndomain = \"{}\"\nmin = \"128M\"\nmax = \"700M\"\n\n\
         [[tenant]]\nname = \"vm-idle\"\ndomain = \"{}\"\nmin = \"128M\"\nmax = \"700M\"\n",
        config_head("1s", parent, "1000M"),
        engine.socket().display(),
        active.name,
        idle.name
    );
    let tmp = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    let names = ["busy", "idle", "vm-active", "vm-idle"];
    let mut timeline = Vec::new();
    let mut active_peak = 0;
    // The containers' lowest limits over the run.
    let mut lowest = [u64::MAX; 2];
    let last = watch(
        t0,
        Duration::from_secs(60),
        Duration::from_secs(100),
        || daemon.status(),
        |s| {
            let mut l = line(s, t0, &["vm-active", "vm-idle"]);
            for (k, n) in ["busy", "idle"].into_iter().enumerate() {
                if let Some(t) = tenant(s, n) {
                    lowest[k] = lowest[k].min(t.limit_bytes.unwrap_or(u64::MAX));
                    l.push_str(&format!(
                        " | {n}: limit {:5.0} alloc {:5.0} target {:5.0}",
                        mib(t.limit_bytes.unwrap_or(0)),
                        mib(t.allocated_bytes),
                        mib(t.target_bytes)
                    ));
                }
            }
            timeline.push(l);
            if t0.elapsed() < Duration::from_secs(35) {
                active_peak = active_peak.max(balloon(s, "vm-active").unwrap_or(0));
            }
            idle_tax_settled(s, "vm-active", "vm-idle", active_peak)
                && lowest[1] <= IDLE_GAVE
                && lowest[0] >= BUSY_KEPT
        },
    );
    println!("{}", timeline.join("\n"));
    for n in names {
        assert!(tenant(&last, n).is_some(), "{n} is not managed");
    }
    let limit = |n: &str| {
        tenant(&last, n)
            .and_then(|t| t.limit_bytes)
            .unwrap_or(u64::MAX)
    };
    let (a, i) = (
        balloon(&last, "vm-active").unwrap_or(0),
        balloon(&last, "vm-idle").unwrap_or(0),
    );
    let [busy_low, idle_low] = lowest;
    println!(
        "{test}: containers: idle limit {:.0} MiB at the end (lowest {:.0}), busy {:.0} MiB \
         (lowest {:.0}); domains: active balloon peak {:.0} MiB, end {:.0} MiB, idle balloon \
         {:.0} MiB",
        mib(limit("idle")),
        mib(idle_low),
        mib(limit("busy")),
        mib(busy_low),
        mib(active_peak),
        mib(a),
        mib(i)
    );
    let timeline = timeline.join("\n");
    assert!(
        idle_low <= IDLE_GAVE,
        "the idle container kept its memory (lowest limit {:.0} MiB):\n{timeline}",
        mib(idle_low)
    );
    assert!(
        busy_low >= BUSY_KEPT,
        "the busy container was squeezed (lowest limit {:.0} MiB):\n{timeline}",
        mib(busy_low)
    );
    assert!(
        i >= 128 * MIB,
        "the idle domain's balloon holds little:\n{timeline}"
    );
    assert!(
        active_peak >= 48 * MIB && a * 2 <= active_peak,
        "the active domain's balloon did not inflate then deflate:\n{timeline}"
    );
    for d in [&active, &idle] {
        assert_eq!(
            crate::host::vm::guest_trouble(&d.console()),
            None,
            "{}'s guest",
            d.name
        );
    }
    let cgroups = [engine.cgroup("busy"), engine.cgroup("idle")];
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    for cg in cgroups {
        let sample = linux
            .memory_cgroup(&cg)
            .sample()
            .expect("sample a container");
        assert_eq!(
            limit_bytes(&sample),
            Some(600 * MIB),
            "{cg}: the engine's limit back"
        );
    }
    let settled = Instant::now();
    while balloon_actual(&lv, &active.name) != Some(found) {
        assert!(
            settled.elapsed() < Duration::from_secs(20),
            "the active domain's balloon was not given back"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
